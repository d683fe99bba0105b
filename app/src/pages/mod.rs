//! Console pages.

pub mod login;
pub mod status;
