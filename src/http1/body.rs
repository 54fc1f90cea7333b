//! The read side of a client connection, and a request body read from it.
//!
//! The connection's reader and its buffer live in [`Reading`], shared (behind a mutex that
//! is never contended: connection and body are polled by the same task) between the
//! connection loop, which reads heads and watches for the client leaving, and the request's
//! [`RequestBody`], which reads the body as the gateway asks for it. A body that arrived
//! with its head is split off the buffer without a copy.
//!
//! Both are polled by the connection's task, and only while the request is being answered:
//! the body waits for the loop to send `100 Continue`, and a body kept past its request
//! reads nothing more (each request is numbered).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Frame, SizeHint};
use tokio::net::tcp::OwnedReadHalf;

use crate::chunked::{Chunked, Step};

/// Free space made in the read buffer before a read.
const READ_SIZE: usize = 8 << 10;
/// The most a read for a body with a known length asks for at once.
const BODY_READ: usize = 64 << 10;
/// Unread bytes past the current request beyond which the connection stops reading (and
/// so stops noticing that the client left) until the request is answered.
pub(super) const MAX_BUFFERED: usize = 64 << 10;

/// What is left of the current request's body on the wire.
pub(super) enum Remaining {
    /// Nothing: read to its end, or there was none.
    Done,
    /// This many bytes of a `Content-Length` body.
    Length(u64),
    /// The rest of a chunked body.
    Chunked(Chunked),
    /// The body could not be read to its end (bad chunk framing, the client left).
    Broken,
}

/// Where `Expect: 100-continue` stands for the current request.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Continue {
    /// Not expected, or already sent.
    No,
    /// Expected; the body has not been asked for yet.
    Expected,
    /// The body was asked for: the connection loop sends `100 Continue`.
    Wanted,
}

/// A connection's reader, its unread bytes and the state of the request body in them.
pub(super) struct Reading {
    io: OwnedReadHalf,
    pub(super) buf: BytesMut,
    pub(super) body: Remaining,
    pub(super) expect: Continue,
    /// The client closed its side (or the read failed).
    pub(super) eof: bool,
    /// The read failed (a reset): the client is gone, whatever it pipelined.
    pub(super) failed: bool,
    /// The number of the current request on the connection.
    pub(super) request: u64,
}

/// The read side, shared by the connection loop and the current request's body.
pub(super) struct Shared(Mutex<Reading>);

impl Shared {
    pub(super) fn new(io: OwnedReadHalf) -> Arc<Self> {
        Arc::new(Shared(Mutex::new(Reading {
            io,
            buf: BytesMut::with_capacity(READ_SIZE),
            body: Remaining::Done,
            expect: Continue::No,
            eof: false,
            failed: false,
            request: 0,
        })))
    }

    /// The reader and its unread bytes, if nothing else holds them.
    pub(super) fn into_parts(this: Arc<Self>) -> Option<(OwnedReadHalf, BytesMut)> {
        let reading = Arc::try_unwrap(this).ok()?.0;
        let reading = reading.into_inner().unwrap_or_else(PoisonError::into_inner);
        Some((reading.io, reading.buf))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Reading> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Reading {
    /// Reads what has arrived into the buffer, with room for `want` more bytes: `Ready(true)`
    /// when something was read, `Ready(false)` at the end of the stream (or on an error).
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<bool> {
        if self.eof {
            return Poll::Ready(false);
        }
        self.buf.reserve(want);
        match tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.buf) {
            Poll::Ready(Ok(n)) if n > 0 => Poll::Ready(true),
            Poll::Ready(read) => {
                self.eof = true;
                self.failed = read.is_err();
                Poll::Ready(false)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// While a request is being answered: reads what the client sends meanwhile (the next
    /// pipelined request) and tells whether it has left: reset the connection, or closed its
    /// side with nothing pipelined (a client that sent its requests and then shut its side
    /// down is answered).
    /// Stops reading once `MAX_BUFFERED` bytes wait; a body still being read is the body's
    /// to read.
    pub(super) fn poll_gone(&mut self, cx: &mut Context<'_>) -> bool {
        if !matches!(self.body, Remaining::Done | Remaining::Broken) {
            return false;
        }
        while self.buf.len() < MAX_BUFFERED {
            match self.poll_fill(cx, READ_SIZE) {
                Poll::Ready(true) => {}
                Poll::Ready(false) => return self.buf.is_empty() || self.failed,
                Poll::Pending => return false,
            }
        }
        false
    }

    /// Makes the connection's close a reset, for a client that can only learn from it that
    /// the body it was sent was cut short (one delimited by the close).
    pub(super) fn reset_on_close(&self) {
        let _ = self.io.as_ref().set_zero_linger();
    }

    /// Takes the rest of the body off the buffer if all of it is there already, so that the
    /// connection can carry the next request although the body was not read.
    pub(super) fn skip_buffered_body(&mut self) {
        match &mut self.body {
            Remaining::Length(n) => {
                if let Some(n) = usize::try_from(*n).ok().filter(|&n| n <= self.buf.len()) {
                    let _ = self.buf.split_to(n);
                    self.body = Remaining::Done;
                }
            }
            Remaining::Chunked(chunked) => loop {
                match chunked.decode(&mut self.buf) {
                    Ok(Step::Data(_)) => {}
                    Ok(Step::End(_)) => {
                        self.body = Remaining::Done;
                        break;
                    }
                    Ok(Step::More) => break,
                    Err(_) => {
                        self.body = Remaining::Broken;
                        break;
                    }
                }
            },
            Remaining::Done | Remaining::Broken => {}
        }
    }

    /// Whether the body was read to its end.
    pub(super) fn body_done(&self) -> bool {
        matches!(self.body, Remaining::Done)
    }

    /// Whether the body must wait for the connection loop to send `100 Continue` (asked
    /// for here the first time).
    fn awaits_continue(&mut self, cx: &mut Context<'_>) -> bool {
        match self.expect {
            Continue::No => false,
            Continue::Expected => {
                // The connection loop sends `100 Continue`, then polls again.
                self.expect = Continue::Wanted;
                cx.waker().wake_by_ref();
                true
            }
            Continue::Wanted => true,
        }
    }

    /// Reads the rest of a `Content-Length` body into `out`: what is buffered, then straight
    /// from the socket into `out`, never past the body's end (a pipelined request behind it
    /// stays on the connection).
    fn poll_whole(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut BytesMut,
    ) -> Poll<Result<(), BodyError>> {
        // `100 Continue` first, even for a body already here (as vLLM's server sends it).
        if self.awaits_continue(cx) {
            return Poll::Pending;
        }
        loop {
            let left = match self.body {
                Remaining::Length(left) => usize::try_from(left).unwrap_or(usize::MAX),
                Remaining::Done => return Poll::Ready(Ok(())),
                Remaining::Chunked(_) | Remaining::Broken => {
                    return Poll::Ready(Err(BodyError::Closed))
                }
            };
            let n = if self.buf.is_empty() {
                let mut room = (&mut *out).limit(left);
                match tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut room) {
                    Poll::Ready(Ok(n)) if n > 0 => n,
                    Poll::Ready(_) => {
                        self.eof = true;
                        self.body = Remaining::Broken;
                        return Poll::Ready(Err(BodyError::Closed));
                    }
                    Poll::Pending => return Poll::Pending,
                }
            } else {
                let n = self.buf.len().min(left);
                out.extend_from_slice(&self.buf.split_to(n));
                n
            };
            self.body = match left - n {
                0 => Remaining::Done,
                rest => Remaining::Length(rest as u64),
            };
        }
    }
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The connection ended first.
    #[error("the client closed the connection before the body ended")]
    Closed,
    /// Bad chunked framing.
    #[error("invalid chunked body: {0}")]
    Chunked(&'static str),
}

/// A `Content-Length` request body larger than one read, to be read whole: attached to its
/// request (an extension) by the server, so that the gateway, which inspects a gated body
/// in one buffer, reads it straight into a buffer of its declared length instead of
/// collecting the body's frames and copying them together.
#[derive(Clone)]
pub(crate) struct WholeBody {
    shared: Arc<Shared>,
    /// The request's number on the connection.
    request: u64,
    /// The declared length.
    len: u64,
}

impl WholeBody {
    /// Bodies longer than this are offered whole; shorter ones take one or two frames.
    pub(super) const MIN: u64 = BODY_READ as u64;

    pub(super) fn new(shared: Arc<Shared>, request: u64, len: u64) -> Self {
        WholeBody {
            shared,
            request,
            len,
        }
    }

    /// The declared length.
    pub(crate) fn declared(&self) -> u64 {
        self.len
    }

    /// Reads the body into one buffer. The request's own body reads the same bytes: it must
    /// not have been polled.
    pub(crate) async fn read(&self) -> Result<Bytes, BodyError> {
        let len = usize::try_from(self.len).map_err(|_| BodyError::Closed)?;
        let mut out = BytesMut::with_capacity(len);
        std::future::poll_fn(|cx| {
            let mut r = self.shared.lock();
            if r.request != self.request {
                return Poll::Ready(Err(BodyError::Closed));
            }
            r.poll_whole(cx, &mut out)
        })
        .await?;
        Ok(out.freeze())
    }
}

/// The body of the request being served, read from the connection as it is polled.
pub(super) struct RequestBody {
    shared: Arc<Shared>,
    /// The request's number on the connection.
    request: u64,
    ended: bool,
}

impl RequestBody {
    pub(super) fn new(shared: Arc<Shared>, request: u64) -> Self {
        RequestBody {
            shared,
            request,
            ended: false,
        }
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let mut r = this.shared.lock();
        if r.request != this.request {
            // Kept past its request: what follows on the connection is not its to read.
            this.ended = true;
            return Poll::Ready(Some(Err(BodyError::Closed)));
        }
        let polled = poll_body(&mut r, cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            this.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    /// What is left: the declared length less what was taken, when there is one.
    fn size_hint(&self) -> SizeHint {
        let r = self.shared.lock();
        match r.body {
            _ if self.ended || r.request != self.request => SizeHint::with_exact(0),
            Remaining::Length(left) => SizeHint::with_exact(left),
            Remaining::Done => SizeHint::with_exact(0),
            Remaining::Chunked(_) | Remaining::Broken => SizeHint::default(),
        }
    }
}

fn poll_body(
    r: &mut Reading,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
    // `100 Continue` first, even for a body already here (as vLLM's server sends it).
    if r.awaits_continue(cx) {
        return Poll::Pending;
    }
    loop {
        let want = match &mut r.body {
            Remaining::Done => return Poll::Ready(None),
            Remaining::Broken => return Poll::Ready(Some(Err(BodyError::Closed))),
            Remaining::Length(left) => {
                if !r.buf.is_empty() {
                    let n = r
                        .buf
                        .len()
                        .min(usize::try_from(*left).unwrap_or(usize::MAX));
                    let data = r.buf.split_to(n).freeze();
                    *left -= n as u64;
                    if *left == 0 {
                        r.body = Remaining::Done;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .clamp(READ_SIZE, BODY_READ)
            }
            Remaining::Chunked(chunked) => match chunked.decode(&mut r.buf) {
                Ok(Step::Data(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Ok(Step::End(_)) => {
                    r.body = Remaining::Done;
                    return Poll::Ready(None);
                }
                Ok(Step::More) => READ_SIZE,
                Err(e) => {
                    r.body = Remaining::Broken;
                    return Poll::Ready(Some(Err(BodyError::Chunked(e))));
                }
            },
        };
        match r.poll_fill(cx, want) {
            Poll::Ready(true) => {}
            Poll::Ready(false) => {
                r.body = Remaining::Broken;
                return Poll::Ready(Some(Err(BodyError::Closed)));
            }
            Poll::Pending => return Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    #[tokio::test]
    async fn a_whole_body_takes_the_buffered_part_then_reads_exactly_to_its_end() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (read, _write) = server.into_split();
        let shared = Shared::new(read);
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        {
            let mut r = shared.lock();
            // The head's read brought the body's first bytes along.
            r.buf.extend_from_slice(&body[..1000]);
            r.body = Remaining::Length(body.len() as u64);
            r.request = 1;
        }
        let next = b"POST /next HTTP/1.1\r\n";
        let sent = [&body[1000..], &next[..]].concat();
        let writer = tokio::spawn(async move {
            client.write_all(&sent).await.unwrap();
            client
        });
        let whole = WholeBody::new(shared.clone(), 1, body.len() as u64);
        let read = whole.read().await.unwrap();
        assert_eq!(read.len(), body.len());
        assert!(read == body[..]);
        let _client = writer.await.unwrap();
        assert!(shared.lock().body_done());
        // What follows the body is still the connection's.
        while shared.lock().buf.len() < next.len() {
            let read = std::future::poll_fn(|cx| shared.lock().poll_fill(cx, 64)).await;
            assert!(read, "the connection ended before the next request");
        }
        assert_eq!(&shared.lock().buf[..], next);
    }
}
