//! The header timeout of an HTTP/1 connection, kept by the framing watch.
//!
//! The wait for a request head is timed from when it begins (the connection opened, or the
//! last response ended with every request read so far answered) until the head is
//! complete. Bytes of an unfinished head do not extend it, so a head trickled a byte at a
//! time is cut off too. While a request is being read or answered nothing is timed (hyper
//! reads then only to notice a client that has gone), so a long generation or stream is
//! never cut by it.
//!
//! One timer serves the connection's whole life: every read that finds nothing keeps it
//! registered with the connection's task (so an idle connection is woken even though hyper
//! reads nothing more once the response is written), and when it fires it is checked
//! against the current wait and moved. Responses note when they end ([`Progress`]). That
//! replaces hyper's timer, which allocated, registered and cancelled one per request head.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Context;
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// When a connection's responses ended, shared between its watch and its response bodies.
#[derive(Debug)]
pub(super) struct Ends {
    /// The connection's start.
    base: Instant,
    /// Responses ended so far.
    count: AtomicU64,
    /// When the last one ended, in microseconds after `base`.
    last_us: AtomicU64,
}

impl Ends {
    pub(super) fn new() -> Self {
        Ends {
            base: Instant::now(),
            count: AtomicU64::new(0),
            last_us: AtomicU64::new(0),
        }
    }

    /// Notes a response's end, now.
    pub(super) fn end(&self) {
        let us = u64::try_from(self.base.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_us.store(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Release);
    }

    /// Responses ended so far.
    pub(super) fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// When the wait for the next head began: the last response's end, or the start.
    fn wait_began(&self) -> Instant {
        self.base + Duration::from_micros(self.last_us.load(Ordering::Relaxed))
    }
}

/// The header deadline of one connection.
#[derive(Debug)]
pub(super) struct HeadDeadline {
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl HeadDeadline {
    pub(super) fn new(timeout: Duration) -> Self {
        HeadDeadline {
            timeout,
            timer: None,
        }
    }

    /// Called when a read found nothing: whether the connection has waited for a request
    /// head (`awaits_head`) past the timeout. Otherwise the timer stays registered with the
    /// task, at the current wait's deadline or, with no wait, a timeout from now.
    pub(super) fn expired(&mut self, awaits_head: bool, ends: &Ends, cx: &mut Context<'_>) -> bool {
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        while timer.as_mut().poll(cx).is_ready() {
            let now = Instant::now();
            let next = if awaits_head {
                let deadline = ends.wait_began() + timeout;
                if now >= deadline {
                    return true;
                }
                deadline
            } else {
                now + timeout
            };
            timer.as_mut().reset(next);
        }
        false
    }
}
