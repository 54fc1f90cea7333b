//! Response data frames that are already there, written to the client as one.
//!
//! hyper's client hands a response body over one chunk at a time, and its server writes
//! each frame it is given with its own `writev`. An SSE stream whose events reach the
//! gateway together (a burst of tokens, or a short answer) would cost one system call and
//! one wake-up of the client per event. [`Coalesce`] merges the small frames that are ready:
//! when the body has nothing more, it yields to the scheduler so the upstream connection's
//! task can hand over what it has already read, and goes on while the yields bring more.
//! It never waits on the network: the batch goes out after a few scheduler turns that
//! bring nothing (so a lone event is held for microseconds), or at 64 KiB.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

/// Frames at least this large go out as they are (no copy); smaller ones are merged.
const SMALL: usize = 16 << 10;
/// A merged frame is sent once it holds this much.
const FULL: usize = 64 << 10;
/// Scheduler turns a batch waits for its next frame before it is sent. hyper's client
/// connection task hands over one chunk per turn, and not always in the first turn after
/// the chunk before was taken (measured: a lone yield merged nothing, two or three merge
/// a whole burst).
const TURNS: u8 = 3;

/// A body whose small data frames are merged while more are ready.
pub(super) struct Coalesce<B: Body> {
    inner: B,
    /// The first frame of a batch, kept whole until a second one arrives.
    first: Option<Bytes>,
    /// The batch once it holds more than one frame.
    merged: BytesMut,
    /// What ended the batch (trailers, an error, a large frame, the end), sent after it.
    next: Option<Option<Result<Frame<Bytes>, B::Error>>>,
    /// Yields since a frame last joined the batch.
    turns: u8,
}

impl<B: Body<Data = Bytes>> Coalesce<B> {
    pub(super) fn new(inner: B) -> Self {
        Coalesce {
            inner,
            first: None,
            merged: BytesMut::new(),
            next: None,
            turns: 0,
        }
    }

    fn batched(&self) -> usize {
        self.first.as_ref().map_or(0, Bytes::len) + self.merged.len()
    }

    fn add(&mut self, data: Bytes) {
        self.turns = 0;
        match self.first.take() {
            None if self.merged.is_empty() => self.first = Some(data),
            first => {
                if let Some(first) = first {
                    self.merged.extend_from_slice(&first);
                }
                self.merged.extend_from_slice(&data);
            }
        }
    }

    /// The batch as one frame (`None` when it is empty).
    fn take(&mut self) -> Option<Bytes> {
        self.turns = 0;
        self.first
            .take()
            .or_else(|| (!self.merged.is_empty()).then(|| self.merged.split().freeze()))
    }
}

impl<B> Body for Coalesce<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if let Some(next) = this.next.take() {
            return Poll::Ready(next);
        }
        loop {
            let item = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) if data.len() < SMALL => {
                        this.add(data);
                        if this.batched() >= FULL {
                            return Poll::Ready(this.take().map(|d| Ok(Frame::data(d))));
                        }
                        continue;
                    }
                    Ok(data) => Some(Ok(Frame::data(data))),
                    Err(frame) => Some(Ok(frame)),
                },
                Poll::Ready(other) => other,
                Poll::Pending if this.batched() == 0 => return Poll::Pending,
                Poll::Pending if this.turns < TURNS => {
                    // Let the upstream connection's task run: what it has read joins this
                    // batch. Woken at once, so nothing waits on the network.
                    this.turns += 1;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Pending => return Poll::Ready(this.take().map(|d| Ok(Frame::data(d)))),
            };
            // Trailers, an error, a large frame or the end: after the batch, if any.
            return match this.take() {
                Some(batch) => {
                    this.next = Some(item);
                    Poll::Ready(Some(Ok(Frame::data(batch))))
                }
                None => Poll::Ready(item),
            };
        }
    }

    fn is_end_stream(&self) -> bool {
        self.batched() == 0
            && match &self.next {
                Some(next) => next.is_none(),
                None => self.inner.is_end_stream(),
            }
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let held = self.batched() as u64;
        hint.set_lower(hint.lower() + held);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + held);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    use super::*;

    /// A body that plays a script: `Some(frame)` is ready, `None` is one `Pending`.
    struct Script(VecDeque<Option<Result<Frame<Bytes>, &'static str>>>);

    impl Body for Script {
        type Data = Bytes;
        type Error = &'static str;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, &'static str>>> {
            match self.0.pop_front() {
                Some(Some(item)) => Poll::Ready(Some(item)),
                Some(None) => Poll::Pending,
                None => Poll::Ready(None),
            }
        }
    }

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn data(s: &str) -> Option<Result<Frame<Bytes>, &'static str>> {
        Some(Ok(Frame::data(Bytes::from(s.to_string()))))
    }

    /// Polls until the body ends, writing down each poll's result.
    fn run(script: Vec<Option<Result<Frame<Bytes>, &'static str>>>) -> (Vec<String>, usize) {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut body = Coalesce::new(Script(script.into()));
        let mut seen = Vec::new();
        for _ in 0..100 {
            match Pin::new(&mut body).poll_frame(&mut cx) {
                Poll::Pending => seen.push("pending".to_string()),
                Poll::Ready(None) => return (seen, wakes.0.load(Ordering::Relaxed)),
                Poll::Ready(Some(Ok(f))) if f.is_data() => {
                    let d = f.into_data().unwrap_or_default();
                    seen.push(format!("data {}", String::from_utf8_lossy(&d)));
                }
                Poll::Ready(Some(Ok(_))) => seen.push("trailers".to_string()),
                Poll::Ready(Some(Err(e))) => seen.push(format!("error {e}")),
            }
        }
        panic!("the body never ended: {seen:?}");
    }

    #[test]
    fn ready_frames_go_out_as_one_while_yields_bring_more() {
        let mut script = vec![data("a"), data("b"), None, data("c"), None, None, data("d")];
        script.extend((0..=TURNS).map(|_| None));
        let (seen, wakes) = run(script);
        // a and b are ready; yields bring c, then d; then TURNS yields bring nothing.
        let yields = 3 + usize::from(TURNS);
        let mut want = vec!["pending".to_string(); yields];
        want.push("data abcd".to_string());
        assert_eq!(seen, want);
        assert_eq!(wakes, yields, "only the yields wake the task itself");
    }

    #[test]
    fn a_lone_frame_is_held_for_a_few_turns_only() {
        let mut script = vec![data("a")];
        script.extend((0..=TURNS).map(|_| None));
        script.push(data("b"));
        let (seen, _) = run(script);
        let mut want = vec!["pending".to_string(); usize::from(TURNS)];
        want.extend(["data a".to_string(), "data b".to_string()]);
        assert_eq!(seen, want);
    }

    #[test]
    fn what_ends_a_batch_comes_after_it() {
        let trailers = Some(Ok(Frame::trailers(http::HeaderMap::new())));
        let (seen, _) = run(vec![data("a"), data("b"), trailers]);
        assert_eq!(seen, ["data ab", "trailers"]);
        let (seen, _) = run(vec![data("a"), Some(Err("broke"))]);
        assert_eq!(seen, ["data a", "error broke"]);
        let (seen, _) = run(vec![data("a"), data("b")]);
        assert_eq!(seen, ["data ab"]);
    }

    #[test]
    fn large_frames_are_not_copied_and_full_batches_go_at_once() {
        let big = Bytes::from(vec![b'x'; SMALL]);
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(wakes);
        let mut cx = Context::from_waker(&waker);
        let mut body = Coalesce::new(Script(
            vec![data("a"), Some(Ok(Frame::data(big.clone())))].into(),
        ));
        let first = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(
            matches!(first, Poll::Ready(Some(Ok(ref f))) if f.data_ref().is_some_and(|d| d == "a"))
        );
        let Poll::Ready(Some(Ok(f))) = Pin::new(&mut body).poll_frame(&mut cx) else {
            panic!("the large frame");
        };
        assert_eq!(f.data_ref().map(|d| d.as_ptr()), Some(big.as_ptr()));

        let many: Vec<_> = (0..FULL / 1000 + 2)
            .map(|_| data(&"y".repeat(1000)))
            .collect();
        let (seen, _) = run(many);
        assert!(seen[0].len() >= FULL && seen.len() == 2, "{:?}", seen.len());
    }
}
