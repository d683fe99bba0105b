//! Building blocks shared by the console's pages.

pub mod bulk_retry;
pub mod chart;
pub mod layout;
pub mod live;
pub mod panel;
pub mod search_box;
pub mod widgets;
