//! Digits 54's answer: 200 headers go out, then the connection dies before the body (DESIGN.md
//! "Sandbox channel": charge committed, connection dropped). The client has a status but no
//! readable answer, the case a PSP's crash mid-response produces.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Bytes, HttpBody};
use http_body_util::{Full, Limited};

type Inner = Limited<Full<Bytes>>;

/// `http_body::Frame` is not re-exported by any direct dependency; the output of the future
/// that `BodyExt::frame` returns is that same type, so it is named through it.
type FrameResult = <http_body_util::combinators::Frame<'static, Inner> as Future>::Output;

/// A body that waits briefly, so the server flushes the status line and headers, and then
/// fails: the limit is smaller than the only chunk, so the server aborts the connection.
pub struct BrokenBody {
    pause: Pin<Box<tokio::time::Sleep>>,
    inner: Inner,
}

impl BrokenBody {
    /// Breaks off `answer` (which would have been a complete, valid body).
    pub fn new(answer: Bytes) -> Self {
        let cut = answer.len() / 2;
        Self {
            pause: Box::pin(tokio::time::sleep(Duration::from_millis(20))),
            inner: Limited::new(Full::new(answer), cut),
        }
    }
}

impl HttpBody for BrokenBody {
    type Data = Bytes;
    type Error = <Inner as HttpBody>::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<FrameResult> {
        ready!(self.pause.as_mut().poll(cx));
        Pin::new(&mut self.inner).poll_frame(cx)
    }
}
