//! An HTTP/2 response body that is let go when its client leaves the stream unread.
//!
//! Over HTTP/2 a client can keep one stream's flow-control window shut while it reads
//! others: the connection's writes go on, so the socket's `limits.send_timeout_ms` never
//! fires, and hyper stops asking that stream's body for frames. Here the body is shared
//! with a small task, started when hyper first takes a frame, that wakes `send_timeout`
//! after hyper took a frame; if hyper has not asked for the next one since, the task drops
//! the body, which lets go of the request's permits, gauges and upstream exchange. hyper
//! resets the stream when it next asks. A body that waits for its upstream is asked and so
//! never counted as stalled.
//!
//! The body's last frame is never marked as its end: hyper holds a taken frame until the
//! window opens, and asks again only for a stream it has not ended, so a one-frame answer
//! (most JSON answers, every error) is watched too. It costs an empty final DATA frame.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body::Frame;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Wraps an HTTP/2 response `body` so that it is dropped once hyper has not asked for a
/// frame for `timeout` after taking one. The watching task is spawned on the current
/// runtime when it is first needed.
pub(super) fn watch(body: Body, timeout: Duration) -> Body {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            body: Some(body),
            taken_at: None,
            stalled: false,
            taken: false,
        }),
        ended: Notify::new(),
    });
    Body::new(Watched { shared, timeout })
}

struct Shared {
    state: Mutex<State>,
    /// Told when the body has been dropped, so the watching task ends at once.
    ended: Notify,
}

struct State {
    /// The response body, until it ends, fails, is dropped or stalls.
    body: Option<Body>,
    /// When hyper took the last frame, while it has not asked for the next.
    taken_at: Option<Instant>,
    /// The body was let go because the client took nothing.
    stalled: bool,
    /// hyper has taken a frame (and the watching task runs since).
    taken: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Lets go of the body once hyper has left a taken frame unanswered for `timeout`.
async fn watchdog(shared: Arc<Shared>, timeout: Duration) {
    loop {
        let deadline = {
            let state = shared.lock();
            if state.body.is_none() {
                return;
            }
            state.taken_at.unwrap_or_else(Instant::now) + timeout
        };
        let ended = std::pin::pin!(shared.ended.notified());
        let wait = std::pin::pin!(tokio::time::sleep_until(deadline));
        let woke = futures_util::future::select(ended, wait).await;
        if matches!(woke, futures_util::future::Either::Left(_)) {
            return;
        }
        let stalled = {
            let mut state = shared.lock();
            match state.taken_at {
                Some(taken) if taken + timeout <= Instant::now() => {
                    state.stalled = true;
                    state.body.take()
                }
                _ => None,
            }
        };
        if stalled.is_some() {
            drop(stalled);
            return;
        }
    }
}

struct Watched {
    shared: Arc<Shared>,
    timeout: Duration,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let mut state = self.shared.lock();
        state.taken_at = None;
        let Some(body) = state.body.as_mut() else {
            return Poll::Ready(state.stalled.then(|| Err(stalled())));
        };
        let polled = Pin::new(&mut *body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(_))) => {
                if !state.taken {
                    state.taken = true;
                    tokio::spawn(watchdog(self.shared.clone(), self.timeout));
                }
                state.taken_at = Some(Instant::now());
            }
            Poll::Ready(_) => state.body = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let state = self.shared.lock();
        match &state.body {
            // Only a body empty from the start: after a frame, hyper must ask once more.
            Some(body) => !state.taken && body.is_end_stream(),
            None => !state.stalled,
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let state = self.shared.lock();
        state.body.as_ref().map_or_else(
            || http_body::SizeHint::with_exact(0),
            http_body::Body::size_hint,
        )
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let body = self.shared.lock().body.take();
        drop(body);
        self.shared.ended.notify_one();
    }
}

fn stalled() -> axum::Error {
    axum::Error::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the client took nothing of this stream within limits.send_timeout_ms",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicBool, Ordering};

    const TIMEOUT: Duration = Duration::from_millis(300);

    /// A body that yields `frames` frames, then waits for ever; `dropped` is set when it
    /// is dropped (as a request's permits are released).
    struct Source {
        frames: usize,
        /// It says it has ended once its frames are taken (else it waits for ever).
        ends: bool,
        ready: Arc<AtomicBool>,
        dropped: Arc<AtomicBool>,
    }

    impl http_body::Body for Source {
        type Data = Bytes;
        type Error = axum::Error;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
            if self.frames == 0 || !self.ready.load(Ordering::SeqCst) {
                return Poll::Pending;
            }
            self.frames -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"data: x\n\n")))))
        }

        fn is_end_stream(&self) -> bool {
            self.ends && self.frames == 0
        }
    }

    impl Drop for Source {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    fn source(frames: usize, ready: bool) -> (Body, Arc<AtomicBool>, Arc<AtomicBool>) {
        let (ready, dropped) = (
            Arc::new(AtomicBool::new(ready)),
            Arc::new(AtomicBool::new(false)),
        );
        let body = Source {
            frames,
            ends: false,
            ready: ready.clone(),
            dropped: dropped.clone(),
        };
        (watch(Body::new(body), TIMEOUT), ready, dropped)
    }

    /// Lets the watching task run until it waits on its timer again.
    async fn settle() {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_left_untaken_for_the_timeout_lets_the_body_go() {
        let (mut body, _, dropped) = source(10, true);
        assert!(body.frame().await.unwrap().is_ok());
        // hyper does not ask again (the client's window stays shut).
        tokio::time::advance(TIMEOUT - Duration::from_millis(1)).await;
        settle().await;
        assert!(!dropped.load(Ordering::SeqCst), "not before the timeout");
        tokio::time::advance(Duration::from_millis(1)).await;
        settle().await;
        assert!(dropped.load(Ordering::SeqCst), "let go at the timeout");
        let next = body.frame().await.expect("an error, not the end");
        assert!(next.unwrap_err().to_string().contains("send_timeout_ms"));
        assert!(!body.is_end_stream());
    }

    #[tokio::test(start_paused = true)]
    async fn a_last_frame_left_unsent_for_the_timeout_lets_the_body_go() {
        // A one-frame answer: hyper holds the frame while the window stays shut.
        let dropped = Arc::new(AtomicBool::new(false));
        let source = Source {
            frames: 1,
            ends: true,
            ready: Arc::new(AtomicBool::new(true)),
            dropped: dropped.clone(),
        };
        let mut body = watch(Body::new(source), TIMEOUT);
        assert!(!body.is_end_stream(), "it has a frame");
        assert!(body.frame().await.unwrap().is_ok());
        assert!(!body.is_end_stream(), "hyper must ask once more");
        tokio::time::advance(TIMEOUT).await;
        settle().await;
        assert!(dropped.load(Ordering::SeqCst), "let go at the timeout");
        assert!(body.frame().await.unwrap().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_body_ends_with_its_head() {
        let body = watch(Body::empty(), TIMEOUT);
        assert!(body.is_end_stream());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_waiting_for_its_upstream_is_not_stalled() {
        let (mut body, ready, dropped) = source(2, false);
        let waiting = tokio::time::timeout(TIMEOUT * 10, body.frame()).await;
        assert!(waiting.is_err(), "the upstream has sent nothing yet");
        settle().await;
        assert!(!dropped.load(Ordering::SeqCst));
        ready.store(true, Ordering::SeqCst);
        assert!(body.frame().await.unwrap().is_ok());
        // Taken frames that hyper asks after within the timeout are no stall either.
        tokio::time::advance(TIMEOUT / 2).await;
        settle().await;
        assert!(body.frame().await.unwrap().is_ok());
        tokio::time::advance(TIMEOUT / 2).await;
        settle().await;
        assert!(!dropped.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_response_lets_the_body_go_at_once() {
        let (body, _, dropped) = source(1, true);
        drop(body);
        assert!(dropped.load(Ordering::SeqCst));
        settle().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_ends_ends() {
        let inner = Body::from("done");
        let mut body = watch(inner, TIMEOUT);
        let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(data, Bytes::from_static(b"done"));
        assert!(!body.is_end_stream(), "asked once more");
        assert!(body.frame().await.is_none());
        assert!(body.is_end_stream());
    }
}
