//! A watch on the bytes of a connection served by hyper (TLS, or HTTP/2; plain HTTP/1.1 is
//! served by [`crate::http1`], which needs no watch): for the one framing ambiguity hyper
//! resolves out of the handler's sight (a request head with both `Content-Length` and
//! `Transfer-Encoding`), for the header timeout (`deadline`), and for the send timeout (a
//! write the client takes nothing of).
//!
//! hyper follows RFC 9112 §6.3 for such a request: it drops the length, decodes the body as
//! chunked and closes the connection after the response. A gateway in front of another
//! parser must refuse it instead (it is the classic request-smuggling shape), but the
//! handler cannot tell, because the length header is already gone. [`Watched`] follows the
//! connection's framing as hyper does (heads, then fixed-length or chunked bodies) over the
//! bytes hyper reads, and [`Progress`] remembers the index of the first such request. As
//! hyper closes the connection after it, nothing later on the connection matters.
//!
//! The watch never changes a byte; it fails a read only when the header timeout has
//! passed, and a write only when the send timeout has. If the framing breaks in a way hyper refuses on its own (it then answers and
//! closes), it stops watching and timing. An HTTP/2 connection (its preface) is not
//! watched, only timed: it may stay idle, with no request open, for the header timeout.

mod deadline;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use deadline::{Ends, HeadDeadline};

/// Marks a request whose head carried both `Content-Length` and `Transfer-Encoding`; the
/// gateway refuses it.
#[derive(Debug, Clone, Copy)]
pub struct AmbiguousFraming;

/// What the watch and the connection's service share: which request (0-based, in order)
/// had an ambiguous head, if any, how many requests reached the service and how many of
/// their exchanges have ended.
#[derive(Debug)]
pub struct Progress {
    ambiguous: AtomicU64,
    begun: AtomicU64,
    ends: Ends,
    /// The connection became a WebSocket tunnel: its bytes are no longer HTTP.
    switched: AtomicBool,
}

const NONE: u64 = u64::MAX;

impl Progress {
    fn new() -> Self {
        Progress {
            ambiguous: AtomicU64::new(NONE),
            begun: AtomicU64::new(0),
            ends: Ends::new(),
            switched: AtomicBool::new(false),
        }
    }

    /// Notes that a request reached the service. The returned guard is held until its
    /// response has ended (its body was dropped, or the exchange was): once every request
    /// is answered, the wait for the next head is timed from then.
    pub fn begin(self: &Arc<Self>) -> Exchange {
        let index = self.begun.fetch_add(1, Ordering::Relaxed);
        Exchange {
            index,
            progress: self.clone(),
        }
    }

    /// Whether every request that reached the service has been answered.
    fn all_answered(&self) -> bool {
        self.ends.count() >= self.begun.load(Ordering::Relaxed)
    }
}

/// One request's exchange on a watched connection, from when it reached the service until
/// its response ended.
#[derive(Debug)]
pub struct Exchange {
    index: u64,
    progress: Arc<Progress>,
}

impl Exchange {
    /// Whether the request had an ambiguous head. HTTP/1 requests reach the service one at
    /// a time, in order, after their head was read, so the answer is final here.
    pub fn ambiguous(&self) -> bool {
        self.progress.ambiguous.load(Ordering::Acquire) == self.index
    }

    /// Notes that the connection became a tunnel after this request ([`crate::tunnel`]):
    /// its reads are no longer watched nor timed (its writes still are).
    pub fn switched(&self) {
        self.progress.switched.store(true, Ordering::Relaxed);
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.progress.ends.end();
    }
}

/// Bytes of a head, a chunk line or a trailer line beyond which hyper has already refused
/// the request (its read buffer is 64 KiB); the watch stops there.
const MAX_LINE: usize = 80 * 1024;
/// More header lines than hyper accepts (100 by default).
const MAX_HEADERS: usize = 128;

/// A stream whose reads are watched for ambiguous request framing and timed while a
/// request head is awaited, and whose writes are timed while the client takes nothing.
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    framing: Framing,
    deadline: HeadDeadline,
    /// How long a write may wait for the client to take any of it.
    send_timeout: Duration,
    /// While a write waits: its deadline.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Watched<S> {
    /// Wraps `inner`, allowing each request head `header_timeout` and each write
    /// `send_timeout`; the returned [`Progress`] is shared with the connection's service.
    pub fn new(
        inner: S,
        header_timeout: Duration,
        send_timeout: Duration,
    ) -> (Self, Arc<Progress>) {
        let progress = Arc::new(Progress::new());
        let framing = Framing {
            state: State::Head,
            pending: Vec::new(),
            heads: 0,
            progress: progress.clone(),
        };
        let deadline = HeadDeadline::new(header_timeout);
        (
            Watched {
                inner,
                framing,
                deadline,
                send_timeout,
                stall: None,
            },
            progress,
        )
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if this.framing.progress.switched.load(Ordering::Relaxed) {
            return polled;
        }
        match polled {
            Poll::Ready(Ok(())) => this.framing.feed(&buf.filled()[before..]),
            Poll::Pending if this.framing.state != State::Done => {
                let awaits_head = this.framing.awaits_head();
                if this
                    .deadline
                    .expired(awaits_head, &this.framing.progress.ends, cx)
                {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request head within limits.header_timeout_ms",
                    )));
                }
            }
            _ => {}
        }
        polled
    }
}

impl<S> Watched<S> {
    /// A write's outcome, failed once it has waited `send_timeout` for the client (which
    /// ends the connection, and so releases what its requests hold).
    fn timed<T>(
        &mut self,
        polled: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stall = None;
            return polled;
        }
        let timeout = self.send_timeout;
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing within limits.send_timeout_ms",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.timed(polled, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.timed(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.timed(polled, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a request head.
    Head,
    /// This many bytes of a fixed-length body are still to come.
    Fixed(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// This many bytes of chunk data are still to come.
    ChunkData(u64),
    /// Reading the line break after chunk data.
    ChunkEnd,
    /// Reading trailer lines up to the empty line that ends the body.
    Trailers,
    /// HTTP/2: not watched, timed while no request is open.
    Http2,
    /// Not watching any more.
    Done,
}

/// The framing state machine over the bytes read so far.
#[derive(Debug)]
struct Framing {
    state: State,
    /// The unfinished head or line that the next read continues.
    pending: Vec<u8>,
    /// Complete heads seen so far.
    heads: u64,
    progress: Arc<Progress>,
}

impl Framing {
    /// Whether the connection waits for a request head with every request read so far
    /// answered (not while a response is in flight, nor once the watch has stopped).
    fn awaits_head(&self) -> bool {
        match self.state {
            State::Head => self.progress.ends.count() >= self.heads,
            State::Http2 => self.progress.all_answered(),
            _ => false,
        }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            bytes = match self.state {
                State::Done | State::Http2 => return,
                State::Fixed(left) => {
                    let n = left.min(bytes.len() as u64);
                    self.state = if n == left {
                        State::Head
                    } else {
                        State::Fixed(left - n)
                    };
                    &bytes[n as usize..]
                }
                State::ChunkData(left) => {
                    let n = left.min(bytes.len() as u64);
                    self.state = if n == left {
                        State::ChunkEnd
                    } else {
                        State::ChunkData(left - n)
                    };
                    &bytes[n as usize..]
                }
                State::Head => self.head(bytes),
                State::ChunkSize | State::ChunkEnd | State::Trailers => self.line(bytes),
            };
        }
    }

    /// Continues a head with `bytes`; returns what follows it.
    fn head<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        if self.pending.is_empty() {
            // The common case: the whole head is in this read; parse it in place.
            match parse_head(bytes) {
                Parsed::Complete(len, next) => {
                    self.finish_head(bytes.starts_with(H2_PREFACE_LINE), next);
                    return &bytes[len..];
                }
                Parsed::Partial => {
                    self.pending.extend_from_slice(bytes);
                    return &[];
                }
                Parsed::Refused => {
                    self.state = State::Done;
                    return &[];
                }
            }
        }
        let start = self.pending.len();
        self.pending.extend_from_slice(bytes);
        match parse_head(&self.pending) {
            Parsed::Complete(len, next) => {
                let preface = self.pending.starts_with(H2_PREFACE_LINE);
                self.pending.clear();
                self.finish_head(preface, next);
                &bytes[len - start..]
            }
            Parsed::Partial if self.pending.len() <= MAX_LINE => &[],
            Parsed::Partial | Parsed::Refused => {
                self.state = State::Done;
                &[]
            }
        }
    }

    /// Ends a head (`preface`: it is HTTP/2's preface line) followed by `next`.
    fn finish_head(&mut self, preface: bool, next: Next) {
        if self.heads == 0 && preface {
            // hyper serves the connection as HTTP/2 (prior knowledge, or ALPN's h2).
            self.state = State::Http2;
            return;
        }
        let index = self.heads;
        self.heads += 1;
        self.state = match next {
            Next::Ambiguous => {
                self.progress.ambiguous.store(index, Ordering::Release);
                State::Done
            }
            Next::Body(0) => State::Head,
            Next::Body(n) => State::Fixed(n),
            Next::Chunked => State::ChunkSize,
            Next::Refused => State::Done,
        };
    }

    /// Continues a chunk-size, chunk-end or trailer line; returns what follows it.
    fn line<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        let Some(lf) = memchr::memchr(b'\n', bytes) else {
            self.pending.extend_from_slice(bytes);
            if self.pending.len() > MAX_LINE {
                self.state = State::Done;
            }
            return &[];
        };
        self.pending.extend_from_slice(&bytes[..lf]);
        let line = std::mem::take(&mut self.pending);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        self.state = match self.state {
            State::ChunkSize => match chunk_size(line) {
                Some(0) => State::Trailers,
                Some(n) => State::ChunkData(n),
                None => State::Done,
            },
            State::ChunkEnd if line.is_empty() => State::ChunkSize,
            State::Trailers if line.is_empty() => State::Head,
            State::Trailers => State::Trailers,
            _ => State::Done,
        };
        &bytes[lf + 1..]
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// A complete head of this many bytes, and the framing of what follows it.
    Complete(usize, Next),
    /// More bytes are needed.
    Partial,
    /// Not a head hyper would accept.
    Refused,
}

#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// A body of this many bytes follows.
    Body(u64),
    /// A chunked body follows.
    Chunked,
    /// Both `Content-Length` and `Transfer-Encoding`.
    Ambiguous,
    /// Framing hyper refuses (it answers 400 and closes).
    Refused,
}

/// Where a head ends and what follows it, by its lines alone.
///
/// hyper (httparse) validates a head fully; this only splits it into lines and reads the
/// two framing fields, which gives the same answer for every head hyper accepts (a property
/// test holds it to httparse). A head hyper refuses ends the connection, so what the watch
/// makes of it does not matter.
fn parse_head(bytes: &[u8]) -> Parsed {
    // Empty lines before the request line are skipped, as httparse does.
    let mut at = 0;
    loop {
        match bytes.get(at..) {
            Some([b'\r', b'\n', ..]) => at += 2,
            Some([b'\n', ..]) => at += 1,
            Some([] | [b'\r']) | None => return Parsed::Partial,
            Some([b'\r', ..]) => return Parsed::Refused,
            Some(_) => break,
        }
    }
    let Some(lf) = memchr::memchr(b'\n', &bytes[at..]) else {
        return Parsed::Partial;
    };
    at += lf + 1;
    let mut framing = FramingFields::default();
    for _ in 0..=MAX_HEADERS {
        let rest = &bytes[at..];
        match rest {
            [b'\r', b'\n', ..] => return Parsed::Complete(at + 2, framing.next()),
            [b'\n', ..] => return Parsed::Complete(at + 1, framing.next()),
            [] | [b'\r'] => return Parsed::Partial,
            _ => {}
        }
        let Some(lf) = memchr::memchr(b'\n', rest) else {
            return Parsed::Partial;
        };
        let line = &rest[..lf];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = memchr::memchr(b':', line) else {
            return Parsed::Refused;
        };
        framing.field(&line[..colon], line[colon + 1..].trim_ascii());
        at += lf + 1;
    }
    Parsed::Refused
}

/// The framing fields of a head so far.
#[derive(Default)]
struct FramingFields {
    length: Option<u64>,
    /// A `Content-Length` line came, valid or not.
    length_seen: bool,
    te: bool,
    chunked: bool,
    refused: bool,
}

impl FramingFields {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.te = true;
            // Only the last coding of the last header counts.
            self.chunked = ends_chunked(value);
        } else if name.eq_ignore_ascii_case(b"content-length") {
            self.length_seen = true;
            match digits(value) {
                Some(n) if self.length.is_none_or(|prev| prev == n) => self.length = Some(n),
                _ => self.refused = true,
            }
        }
    }

    /// The body framing of the head, as hyper decides it.
    fn next(&self) -> Next {
        // Both fields, whatever the length says: hyper reads the body as chunked even when
        // a length it would refuse alone (`abc`, `5, 5`, a second one) comes after
        // `Transfer-Encoding`, since it skips those lines. A head it refuses instead never
        // reaches the gateway, so marking it too costs nothing.
        if self.te && self.length_seen {
            return Next::Ambiguous;
        }
        match (self.refused, self.te) {
            (true, _) => Next::Refused,
            (false, true) if self.chunked => Next::Chunked,
            (false, true) => Next::Refused,
            (false, false) => Next::Body(self.length.unwrap_or(0)),
        }
    }
}

/// Whether a `Transfer-Encoding` value's last coding is `chunked` (RFC 9112 §6.3).
#[inline]
pub(crate) fn ends_chunked(value: &[u8]) -> bool {
    value
        .rsplit(|&c| c == b',')
        .next()
        .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// The first line of HTTP/2's client preface (RFC 9113 §3.4), a head to the line scan.
const H2_PREFACE_LINE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// The size of a chunk-size line (`HEX[;ext]`), if it is one, read as hyper reads it: any
/// number of hex digits (leading zeros included) up to `u64::MAX`.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let end = line
        .iter()
        .position(|c| !c.is_ascii_hexdigit())
        .unwrap_or(line.len());
    if end == 0 {
        return None;
    }
    line[..end].iter().try_fold(0u64, |size, &c| {
        let digit = (c as char).to_digit(16)?;
        size.checked_mul(16)?.checked_add(u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The reference: the head as httparse (so hyper) parses it.
    fn httparse_head(bytes: &[u8]) -> Parsed {
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(bytes, &mut headers) {
            Ok(httparse::Status::Complete(len)) => {
                let mut fields = FramingFields::default();
                for h in req.headers.iter() {
                    fields.field(h.name.as_bytes(), h.value);
                }
                Parsed::Complete(len, fields.next())
            }
            Ok(httparse::Status::Partial) => Parsed::Partial,
            Err(_) => Parsed::Refused,
        }
    }

    fn head_strategy() -> impl Strategy<Value = Vec<u8>> {
        let name = prop::sample::select(vec![
            "Content-Length",
            "content-length",
            "CONTENT-LENGTH",
            "Transfer-Encoding",
            "transfer-encoding",
            "Host",
            "X-Content-Length",
            "Content-Lengths",
        ]);
        let value = prop::sample::select(vec![
            "4",
            "04",
            "0",
            "4, 5",
            "",
            "x",
            "chunked",
            "gzip, chunked",
            "chunked, gzip",
            "identity",
            " chunked ",
            "a:b",
        ]);
        let eol = prop::sample::select(vec!["\r\n", "\n"]);
        let space = prop::sample::select(vec!["", " ", "  ", "\t"]);
        let field = (name, space, value, eol.clone());
        (
            prop::sample::select(vec!["", "\r\n", "\n", "\r\n\r\n"]),
            eol.clone(),
            prop::collection::vec(field, 0..6),
            eol,
            prop::sample::select(vec!["", "0\r\n\r\n", "GET / HTTP/1.1\r\n\r\n"]),
        )
            .prop_map(|(lead, eol0, fields, end, after)| {
                let mut head = format!("{lead}POST /v1/chat/completions HTTP/1.1{eol0}");
                for (n, sp, v, e) in fields {
                    head.push_str(&format!("{n}:{sp}{v}{e}"));
                }
                head.push_str(end);
                head.push_str(after);
                head.into_bytes()
            })
    }

    proptest! {
        /// Wherever httparse accepts a head or needs more of it, the line scan agrees: the
        /// same end and the same framing, for the whole input and every prefix of it.
        #[test]
        fn the_line_scan_agrees_with_httparse(input in head_strategy()) {
            for cut in 0..=input.len() {
                let bytes = &input[..cut];
                let want = httparse_head(bytes);
                if want != Parsed::Refused {
                    prop_assert_eq!(parse_head(bytes), want, "{:?}", String::from_utf8_lossy(bytes));
                }
            }
        }
    }

    /// A connection's watch before its first byte, and what it shares.
    fn fresh() -> (Framing, Arc<Progress>) {
        let progress = Arc::new(Progress::new());
        let framing = Framing {
            state: State::Head,
            pending: Vec::new(),
            heads: 0,
            progress: progress.clone(),
        };
        (framing, progress)
    }

    /// Feeds `input` in pieces of `step` bytes; returns the heads seen and the ambiguous
    /// request's index.
    fn watch(input: &[u8], step: usize) -> (u64, Option<u64>) {
        let (mut framing, progress) = fresh();
        for piece in input.chunks(step) {
            framing.feed(piece);
        }
        let at = progress.ambiguous.load(Ordering::Acquire);
        (framing.heads, (at != NONE).then_some(at))
    }

    const CHUNKED_POST: &[u8] = b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n";
    const FIXED_POST: &[u8] = b"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 26\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n";
    const AMBIGUOUS: &[u8] = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";

    #[test]
    fn follows_keep_alive_framing_at_any_read_size() {
        let mut stream = Vec::new();
        for part in [
            CHUNKED_POST,
            FIXED_POST,
            b"GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            stream.extend_from_slice(part);
        }
        stream.extend_from_slice(AMBIGUOUS);
        for step in [1, 2, 7, 64, stream.len()] {
            // The body of FIXED_POST looks like a head but is a body: not counted.
            assert_eq!(watch(&stream, step), (4, Some(3)), "step {step}");
        }
    }

    #[test]
    fn finds_the_ambiguity_in_either_header_order_and_spelling() {
        for head in [
            &b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"[..],
            b"POST /x HTTP/1.1\r\ncontent-length: 4\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
            b"POST /x HTTP/1.1\nContent-Length: 0\nTransfer-Encoding: identity\n\n",
            // Lengths hyper would refuse alone, but skips after `Transfer-Encoding`.
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5, 5\r\n\r\n",
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: abc\r\n\r\n",
            b"POST /x HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        ] {
            assert_eq!(watch(head, head.len()), (1, Some(0)), "{}", head.escape_ascii());
        }
    }

    #[test]
    fn stops_on_what_hyper_refuses() {
        for input in [
            &b"POST /x HTTP/1.1\r\nContent-Length: 4, 5\r\n\r\n"[..],
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            // A size past u64::MAX.
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
        ] {
            let mut stream = input.to_vec();
            stream.extend_from_slice(AMBIGUOUS);
            assert_eq!(watch(&stream, 3), (1, None), "{}", input.escape_ascii());
        }
    }

    #[test]
    fn reads_chunk_sizes_as_hyper_does_leading_zeros_and_all() {
        assert_eq!(chunk_size(b"000000000000000000005"), Some(5));
        assert_eq!(chunk_size(b"0000000000000000000000"), Some(0));
        assert_eq!(chunk_size(b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(chunk_size(b"1A ; ext=1"), Some(26));
        for refused in [&b""[..], b"10000000000000000", b";a", b" 5"] {
            assert_eq!(chunk_size(refused), None, "{}", refused.escape_ascii());
        }
        // Followed, the watch still finds the ambiguous request after such a body.
        let mut stream = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000000005\r\nhello\r\n0\r\n\r\n".to_vec();
        stream.extend_from_slice(AMBIGUOUS);
        for step in [1, 5, stream.len()] {
            assert_eq!(watch(&stream, step), (2, Some(1)), "step {step}");
        }
    }

    #[test]
    fn an_http2_connection_is_timed_while_no_request_is_open() {
        let (mut framing, progress) = fresh();
        for piece in b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0".chunks(5) {
            framing.feed(piece);
        }
        assert_eq!(framing.state, State::Http2);
        assert!(framing.awaits_head(), "idle from the start");
        let exchange = progress.begin();
        assert!(!framing.awaits_head(), "a request is open");
        drop(exchange);
        assert!(framing.awaits_head(), "idle again once it was answered");
        // Not the first head: HTTP/1, which hyper refuses.
        let mut stream = b"GET / HTTP/1.1\r\n\r\n".to_vec();
        stream.extend_from_slice(b"PRI * HTTP/2.0\r\n\r\n");
        assert_eq!(watch(&stream, 4), (2, None));
    }
}
