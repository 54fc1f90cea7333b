//! HTTP/1.1 to the upstream, on one connection at a time, driven by the request's own task.
//!
//! A request is written whole (head and body, gathered into as few writes as the body's
//! readiness allows), then the response head is read and parsed (`httparse`), and the body
//! is read as the client takes it ([`Streamed`]), framed as RFC 9112 §6.3 says: none (HEAD,
//! 1xx, 204, 304), chunked, `Content-Length`, or until the connection closes. A chunked
//! body's chunks that arrived in one read go to the client as one frame: an SSE burst costs
//! one write, not one per event. Informational (1xx) responses are skipped.
//!
//! The connection can take another request when the response has ended cleanly, nothing
//! follows it, and neither side asked to close.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use axum::body::Body;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::either::Either;

/// The longest response head accepted.
const MAX_HEAD: usize = 64 << 10;
/// The most header fields in a response head.
const MAX_HEADERS: usize = 128;
/// Free space kept in the read buffer before each read.
const READ_SIZE: usize = 16 << 10;
/// Request body bytes gathered before they are written.
const WRITE_BATCH: usize = 256 << 10;
/// The longest chunk-size line or trailer section accepted.
const MAX_LINE: usize = 8 << 10;

/// Why a request got no response head.
#[derive(Debug)]
pub(super) enum Failure {
    /// The connection closed or failed before a whole response head.
    Reset(String),
    /// The upstream's answer is not HTTP/1.1 as this client reads it.
    Protocol(String),
    /// The request's own body failed (the client broke off its upload).
    ClientBody(String),
}

/// A TCP connection (`Left`), or TLS over one (`Right`).
pub(super) type Stream = Either<TcpStream, Box<tokio_rustls::client::TlsStream<TcpStream>>>;

/// One upstream connection and the bytes read from it that no response has used yet.
pub(super) struct Conn {
    io: Stream,
    buf: BytesMut,
}

impl Conn {
    /// A fresh connection.
    pub(super) fn new(io: Stream) -> Self {
        Conn {
            io,
            buf: BytesMut::with_capacity(READ_SIZE),
        }
    }

    /// Whether an idle connection was closed by the upstream (or sent something unasked).
    /// Reads only what has already arrived; never waits.
    pub(super) fn is_closed(&mut self) -> bool {
        self.buf.reserve(1);
        let mut cx = Context::from_waker(Waker::noop());
        poll_read(&mut self.io, &mut cx, &mut self.buf).is_ready()
    }

    /// Writes `req` (its URI in origin form), with the fields of `set` in place of its own
    /// of the same names, and reads the response head; the body is read as the returned
    /// response's body is polled.
    pub(super) async fn send(
        mut self,
        req: Request<Body>,
        set: &[(HeaderName, HeaderValue)],
    ) -> Result<(Response<()>, Framing, Conn), Failure> {
        let (parts, body) = req.into_parts();
        self.write_request(&parts, body, set).await?;
        let (head, framing) = self.read_head(&parts.method).await?;
        Ok((head, framing, self))
    }

    async fn write_request(
        &mut self,
        parts: &http::request::Parts,
        mut body: Body,
        set: &[(HeaderName, HeaderValue)],
    ) -> Result<(), Failure> {
        let reset = |e: std::io::Error| Failure::Reset(format!("writing the request: {e}"));
        let declared = body
            .size_hint()
            .exact()
            .or_else(|| crate::body::declared_length(&parts.headers));
        let chunked = declared.is_none() && !body.is_end_stream();
        let mut head = Vec::with_capacity(512);
        head.extend_from_slice(parts.method.as_str().as_bytes());
        head.push(b' ');
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        head.extend_from_slice(target.as_bytes());
        head.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in &parts.headers {
            if name != header::CONTENT_LENGTH && !set.iter().any(|(n, _)| n == name) {
                push_field(&mut head, name.as_str().as_bytes(), value.as_bytes());
            }
        }
        for (name, value) in set {
            push_field(&mut head, name.as_str().as_bytes(), value.as_bytes());
        }
        let had_length = parts.headers.contains_key(header::CONTENT_LENGTH);
        match declared {
            Some(n) if n > 0 || had_length || !bodiless(&parts.method) => {
                push_field(&mut head, b"content-length", n.to_string().as_bytes());
            }
            _ if chunked => push_field(&mut head, b"transfer-encoding", b"chunked"),
            _ => {}
        }
        head.extend_from_slice(b"\r\n");

        let mut out = vec![Bytes::from(head)];
        let mut batched = 0;
        let mut sent = 0u64;
        loop {
            // Whatever is ready goes out together; before waiting for more, what is held is
            // written, so a slow upload streams through.
            let frame = match futures_util::FutureExt::now_or_never(body.frame()) {
                Some(frame) => frame,
                None => {
                    write_all(&mut self.io, &mut out).await.map_err(reset)?;
                    self.io.flush().await.map_err(reset)?; // TLS may hold what was written
                    batched = 0;
                    body.frame().await
                }
            };
            let data = match frame {
                None => break,
                Some(Err(e)) => return Err(Failure::ClientBody(e.to_string())),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => data,
                    _ => continue,
                },
            };
            sent += data.len() as u64;
            if declared.is_some_and(|n| sent > n) {
                return Err(Failure::ClientBody(format!(
                    "the request body is longer than the {} bytes declared",
                    declared.unwrap_or(0)
                )));
            }
            batched += data.len();
            if chunked {
                out.push(Bytes::from(format!("{:x}\r\n", data.len())));
                out.push(data);
                out.push(Bytes::from_static(b"\r\n"));
            } else {
                out.push(data);
            }
            if batched >= WRITE_BATCH || out.len() >= 96 {
                write_all(&mut self.io, &mut out).await.map_err(reset)?;
                batched = 0;
            }
        }
        if declared.is_some_and(|n| n != sent) {
            return Err(Failure::ClientBody(format!(
                "the request body has {sent} bytes, fewer than the {} declared",
                declared.unwrap_or(0)
            )));
        }
        if chunked {
            out.push(Bytes::from_static(b"0\r\n\r\n"));
        }
        write_all(&mut self.io, &mut out).await.map_err(reset)?;
        self.io.flush().await.map_err(reset)
    }

    async fn read_head(&mut self, method: &Method) -> Result<(Response<()>, Framing), Failure> {
        loop {
            if let Some(head) = self.parse_head(method)? {
                return Ok(head);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(Failure::Protocol(format!(
                    "response head longer than {MAX_HEAD} bytes"
                )));
            }
            self.buf.reserve(READ_SIZE);
            let read = std::future::poll_fn(|cx| poll_read(&mut self.io, cx, &mut self.buf));
            match read.await {
                Ok(0) => {
                    return Err(Failure::Reset(
                        "the connection closed before a whole response head".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) => return Err(Failure::Reset(format!("reading the response: {e}"))),
            }
        }
    }

    /// The response head in the buffer, if whole; 1xx heads are consumed and skipped.
    fn parse_head(&mut self, method: &Method) -> Result<Option<(Response<()>, Framing)>, Failure> {
        let protocol = |e: String| Failure::Protocol(e);
        loop {
            if self.buf.is_empty() {
                return Ok(None);
            }
            let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut []);
            let config = httparse::ParserConfig::default();
            let len = match config.parse_response_with_uninit_headers(
                &mut parsed,
                &self.buf,
                &mut fields,
            ) {
                Ok(httparse::Status::Complete(len)) => len,
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(e) => return Err(protocol(format!("invalid response head: {e}"))),
            };
            let code = parsed.code.unwrap_or(0);
            let status = StatusCode::from_u16(code)
                .map_err(|_| protocol(format!("invalid status code {code}")))?;
            let http10 = parsed.version == Some(0);
            let mut headers = HeaderMap::with_capacity(parsed.headers.len());
            let mut present = Present::default();
            for f in parsed.headers.iter() {
                let name = HeaderName::from_bytes(f.name.as_bytes())
                    .map_err(|_| protocol(format!("invalid header name {:?}", f.name)))?;
                let value = HeaderValue::from_bytes(f.value)
                    .map_err(|_| protocol(format!("invalid value of header {name}")))?;
                present.note(&name);
                headers.append(name, value);
            }
            self.buf.advance(len);
            if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
                continue;
            }
            let framing =
                Framing::of(method, status, &headers, present, http10).map_err(protocol)?;
            let mut res = Response::new(());
            *res.status_mut() = status;
            *res.headers_mut() = headers;
            return Ok(Some((res, framing)));
        }
    }
}

/// Which framing fields a response head has, noted as its fields are parsed: the framing is
/// then read without looking up the fields that are absent (most heads have one of three).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Present {
    connection: bool,
    transfer_encoding: bool,
    content_length: bool,
}

impl Present {
    pub(super) fn note(&mut self, name: &HeaderName) {
        if *name == header::CONNECTION {
            self.connection = true;
        } else if *name == header::TRANSFER_ENCODING {
            self.transfer_encoding = true;
        } else if *name == header::CONTENT_LENGTH {
            self.content_length = true;
        }
    }

    /// The values of `name`, one of the three, looked up only if the head has it.
    fn values(
        self,
        headers: &HeaderMap,
        name: HeaderName,
    ) -> impl DoubleEndedIterator<Item = &HeaderValue> {
        let seen = if name == header::CONNECTION {
            self.connection
        } else if name == header::TRANSFER_ENCODING {
            self.transfer_encoding
        } else {
            self.content_length
        };
        seen.then(|| headers.get_all(name)).into_iter().flatten()
    }
}

/// How a response body is delimited, and whether the connection outlives it.
pub(super) struct Framing {
    kind: Kind,
    keep_alive: bool,
}

enum Kind {
    /// No body, or none left.
    Done,
    /// This many bytes left.
    Length(u64),
    /// Chunked transfer coding.
    Chunked(Chunked),
    /// Everything until the upstream closes the connection.
    Close,
}

impl Framing {
    fn of(
        method: &Method,
        status: StatusCode,
        headers: &HeaderMap,
        present: Present,
        http10: bool,
    ) -> Result<Framing, String> {
        let close = present
            .values(headers, header::CONNECTION)
            .flat_map(|v| v.as_bytes().split(|b| *b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        // After a 101 the connection speaks another protocol: never reused. (mmgate drops
        // `Upgrade` from requests as hop-by-hop, so an upstream has no reason to send one.)
        let keep_alive = !close && !http10 && status != StatusCode::SWITCHING_PROTOCOLS;
        let bodiless = method == Method::HEAD
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        if bodiless {
            return Ok(Framing {
                kind: Kind::Done,
                keep_alive,
            });
        }
        if let Some(last) = present
            .values(headers, header::TRANSFER_ENCODING)
            .next_back()
        {
            let chunked = crate::framing::ends_chunked(last.as_bytes());
            // With both, Transfer-Encoding wins and the connection is not reused (RFC 9112 §6.3).
            let reuse = keep_alive && !present.content_length;
            return Ok(match chunked {
                true => Framing {
                    kind: Kind::Chunked(Chunked::default()),
                    keep_alive: reuse,
                },
                false => Framing {
                    kind: Kind::Close,
                    keep_alive: false,
                },
            });
        }
        let mut length = None;
        for v in present.values(headers, header::CONTENT_LENGTH) {
            for part in v.as_bytes().split(|b| *b == b',') {
                let n = std::str::from_utf8(part.trim_ascii())
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or("invalid Content-Length in the response")?;
                if length.is_some_and(|l| l != n) {
                    return Err("conflicting Content-Length values in the response".into());
                }
                length = Some(n);
            }
        }
        Ok(match length {
            Some(n) => Framing {
                kind: Kind::Length(n),
                keep_alive,
            },
            None => Framing {
                kind: Kind::Close,
                keep_alive: false,
            },
        })
    }

    /// The body's length when it is known up front.
    fn exact(&self) -> Option<u64> {
        match self.kind {
            Kind::Done => Some(0),
            Kind::Length(n) => Some(n),
            _ => None,
        }
    }
}

/// Where a connection goes when its response has ended and it can take another request.
pub(super) trait Reuse {
    /// Takes the connection back.
    fn reuse(self, conn: Conn);
}

/// A response body read from its connection as it is polled. `done` gets the connection
/// back when the body has ended and the connection may take another request.
pub(super) struct Streamed<R: Reuse> {
    conn: Option<Conn>,
    framing: Framing,
    done: Option<R>,
}

/// The error a response body ends with.
#[derive(Debug, thiserror::Error)]
pub(super) enum BodyError {
    /// The connection failed or closed before the body's end.
    #[error("the response body broke off: {0}")]
    BrokeOff(String),
    /// The chunked coding is invalid.
    #[error("invalid chunked response body: {0}")]
    Invalid(&'static str),
}

impl<R: Reuse> Streamed<R> {
    /// The body of a response whose head `conn` has just read.
    pub(super) fn new(conn: Conn, framing: Framing, done: R) -> Self {
        let mut body = Streamed {
            conn: Some(conn),
            framing,
            done: Some(done),
        };
        if matches!(body.framing.kind, Kind::Done | Kind::Length(0)) {
            body.finish();
        }
        body
    }

    /// The body has ended: the connection goes back if it can be reused.
    fn finish(&mut self) {
        self.framing.kind = Kind::Done;
        let (Some(conn), Some(done)) = (self.conn.take(), self.done.take()) else {
            return;
        };
        if self.framing.keep_alive && conn.buf.is_empty() {
            done.reuse(conn);
        }
    }

    fn fail(&mut self, e: BodyError) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.conn = None;
        self.framing.kind = Kind::Done;
        Poll::Ready(Some(Err(e)))
    }
}

impl<R: Reuse + Unpin> http_body::Body for Streamed<R> {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let buf = &mut conn.buf;
            match &mut this.framing.kind {
                Kind::Done => return Poll::Ready(None),
                Kind::Length(left) if !buf.is_empty() => {
                    let n = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    *left -= n as u64;
                    let data = buf.split_to(n).freeze();
                    if *left == 0 {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Kind::Close if !buf.is_empty() => {
                    let data = buf.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Kind::Chunked(chunked) => match chunked.decode(buf) {
                    Err(e) => return this.fail(BodyError::Invalid(e)),
                    Ok(Step::Data(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Ok(Step::End(trailers)) => {
                        this.finish();
                        return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                    }
                    Ok(Step::More) => {}
                },
                _ => {}
            }
            // Nothing decodable is buffered: read.
            buf.reserve(READ_SIZE);
            match ready!(poll_read(&mut conn.io, cx, buf)) {
                Ok(0) if matches!(this.framing.kind, Kind::Close) => {
                    this.framing.keep_alive = false;
                    this.finish();
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    let e = "the connection closed before the end of the body".to_string();
                    return this.fail(BodyError::BrokeOff(e));
                }
                Ok(_) => {}
                Err(e) => return this.fail(BodyError::BrokeOff(e.to_string())),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.framing.kind, Kind::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.framing.exact() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

/// The chunked decoder's place in the body.
#[derive(Default)]
struct Chunked {
    state: State,
    trailers: Option<HeaderMap>,
    trailer_bytes: usize,
}

#[derive(Default, Clone, Copy)]
enum State {
    /// Before a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// The trailer section after the last chunk.
    Trailers,
    /// After the trailer section.
    End,
}

/// What one decoding step found.
enum Step {
    /// The data of every chunk that was whole or begun in the buffer.
    Data(Bytes),
    /// The body ended (with these trailers).
    End(Option<HeaderMap>),
    /// Nothing yet: read more.
    More,
}

impl Chunked {
    /// Decodes what `buf` holds: the data of every chunk there, merged into one frame.
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, &'static str> {
        let mut out = Merged::default();
        loop {
            match self.state {
                State::Size => {
                    // Whole plain chunks first; what stops that pass is read below.
                    burst(buf, &mut out);
                    let Some(end) = memchr::memchr(b'\n', buf) else {
                        if buf.len() > MAX_LINE {
                            return Err("chunk-size line too long");
                        }
                        break;
                    };
                    let size = chunk_size(&buf[..=end])?;
                    buf.advance(end + 1);
                    self.state = match size {
                        0 => State::Trailers,
                        n => State::Data(n),
                    };
                }
                State::Data(left) => {
                    if buf.is_empty() {
                        break;
                    }
                    let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    // All the read holds, or a large piece: split off.
                    out.take_from(buf, n, n == buf.len() || n >= SPLIT_MIN);
                    self.state = match left - n as u64 {
                        0 => State::DataEnd,
                        rest => State::Data(rest),
                    };
                }
                State::DataEnd => {
                    if buf.len() < 2 {
                        break;
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err("chunk data not followed by CRLF");
                    }
                    buf.advance(2);
                    self.state = State::Size;
                }
                State::End => {
                    // Data decoded before the end goes first; the end comes with the next call.
                    return Ok(match out.take() {
                        Some(data) => Step::Data(data),
                        None => Step::End(self.trailers.take()),
                    });
                }
                State::Trailers => {
                    let Some(end) = memchr::memchr(b'\n', buf) else {
                        if buf.len() > MAX_LINE {
                            return Err("trailer line too long");
                        }
                        break;
                    };
                    self.trailer_bytes += end + 1;
                    if self.trailer_bytes > MAX_LINE {
                        return Err("trailer section too long");
                    }
                    let line = buf.split_to(end + 1);
                    let line = line
                        .strip_suffix(b"\r\n")
                        .ok_or("trailer line without CRLF")?;
                    if line.is_empty() {
                        self.state = State::End;
                        continue;
                    }
                    self.trailer(line)?;
                }
            }
        }
        Ok(match out.take() {
            Some(data) => Step::Data(data),
            None => Step::More,
        })
    }

    fn trailer(&mut self, line: &[u8]) -> Result<(), &'static str> {
        let colon = memchr::memchr(b':', line).ok_or("trailer line without a colon")?;
        let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| "invalid trailer name")?;
        let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii())
            .map_err(|_| "invalid trailer value")?;
        self.trailers
            .get_or_insert_with(HeaderMap::new)
            .append(name, value);
        Ok(())
    }
}

/// The chunk data decoded from one read, as one piece. A piece that is all the read has
/// left, a large one, or a burst's data gathered in place is split off the read buffer when
/// it comes first (no copy); later pieces are copied together with it into a buffer sized
/// once.
#[derive(Default)]
struct Merged {
    first: Option<Bytes>,
    rest: Option<BytesMut>,
}

/// Chunk data pieces at least this long, when first in a read, are split off the read
/// buffer instead of copied.
const SPLIT_MIN: usize = 4 << 10;

impl Merged {
    /// Moves the first `n` bytes of `buf` to the decoded data: split off the buffer when they
    /// come first and `split` allows it (no copy), else copied.
    fn take_from(&mut self, buf: &mut BytesMut, n: usize, split: bool) {
        if split && self.is_empty() {
            self.first = Some(buf.split_to(n).freeze());
            return;
        }
        self.copy(&buf[..n], buf.len());
        buf.advance(n);
    }

    /// Appends a copy of `data`; the buffer, made on first use, has room for `room` more.
    fn copy(&mut self, data: &[u8], room: usize) {
        let first = &mut self.first;
        let all = self.rest.get_or_insert_with(|| {
            let before = first.take().unwrap_or_default();
            let mut all = BytesMut::with_capacity(before.len() + room);
            all.extend_from_slice(&before);
            all
        });
        all.extend_from_slice(data);
    }

    fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_none()
    }

    fn take(&mut self) -> Option<Bytes> {
        match self.rest.take() {
            Some(all) => Some(all.freeze()),
            None => self.first.take(),
        }
    }
}

/// Takes the whole chunks at the start of `buf` that have a bare size line (`HEX CRLF`) in
/// one pass: an SSE burst, many small chunks in one read. Their data is moved down over the
/// framing in place, then split off the buffer at once (or, when `out` already holds data,
/// copied to it). It stops before a chunk that is not whole, has extensions, is the last
/// one, or is malformed (the state machine takes those, and reports the errors), and before
/// a large first piece (split off, not moved).
fn burst(buf: &mut BytesMut, out: &mut Merged) {
    let (mut pos, mut kept) = (0, 0);
    while let Some((size, digits)) = hex_prefix(&buf[pos..]) {
        // At most 15 hex digits: the size fits a 64-bit usize.
        let n = usize::try_from(size).unwrap_or(usize::MAX);
        let start = pos + digits + 2;
        let first = kept == 0 && out.is_empty();
        if n == 0 || buf.get(start - 2..start) != Some(b"\r\n") || (first && n >= SPLIT_MIN) {
            break;
        }
        let Some(end) = start
            .checked_add(n)
            .filter(|&end| buf.get(end..).is_some_and(|r| r.starts_with(b"\r\n")))
        else {
            break;
        };
        buf.copy_within(start..end, kept);
        kept += n;
        pos = end + 2;
    }
    if kept > 0 {
        // Gathered at the front: split off whatever its length.
        out.take_from(buf, kept, true);
        buf.advance(pos - kept);
    }
}

/// The size on a chunk-size line (`HEX [; extensions] CRLF`), at most 15 hex digits.
fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    let line = line
        .strip_suffix(b"\r\n")
        .ok_or("chunk-size line without CRLF")?;
    let (size, digits) = hex_prefix(line)
        .filter(|&(_, digits)| digits > 0)
        .ok_or("invalid chunk size")?;
    let rest = line[digits..].trim_ascii_start();
    if !rest.is_empty() && rest[0] != b';' {
        return Err("invalid chunk size");
    }
    Ok(size)
}

/// The number in the hex digits `b` starts with, and how many there are (maybe none);
/// `None` past 15 digits.
fn hex_prefix(b: &[u8]) -> Option<(u64, usize)> {
    let (mut size, mut digits) = (0u64, 0);
    for &c in b {
        let value = HEX[usize::from(c)];
        if value > 0xF {
            break;
        }
        if digits == 15 {
            return None;
        }
        size = size << 4 | u64::from(value);
        digits += 1;
    }
    Some((size, digits))
}

/// Each byte's value as a hex digit, or 0xFF for a byte that is not one.
const HEX: [u8; 256] = {
    let mut table = [0xFF; 256];
    let mut c = 0;
    while c < 256 {
        table[c] = match c as u8 {
            d @ b'0'..=b'9' => d - b'0',
            d @ b'a'..=b'f' => d - b'a' + 10,
            d @ b'A'..=b'F' => d - b'A' + 10,
            _ => 0xFF,
        };
        c += 1;
    }
    table
};

fn push_field(head: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    head.extend_from_slice(name);
    head.extend_from_slice(b": ");
    head.extend_from_slice(value);
    head.extend_from_slice(b"\r\n");
}

/// Methods whose requests carry no body unless they say so.
fn bodiless(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::TRACE
    )
}

/// Writes every buffer in `out` (then empties it), with as few system calls as it takes.
async fn write_all(io: &mut Stream, out: &mut Vec<Bytes>) -> std::io::Result<()> {
    {
        let mut slices: Vec<IoSlice<'_>> = out.iter().map(|b| IoSlice::new(b)).collect();
        let mut left = &mut slices[..];
        while !left.is_empty() {
            let n = io.write_vectored(left).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut left, n);
        }
    }
    out.clear();
    Ok(())
}

/// Reads what has arrived into the spare capacity of `buf`.
fn poll_read(
    io: &mut Stream,
    cx: &mut Context<'_>,
    buf: &mut BytesMut,
) -> Poll<std::io::Result<usize>> {
    tokio_util::io::poll_read_buf(Pin::new(io), cx, buf)
}

#[cfg(test)]
#[path = "h1_tests.rs"]
mod tests;
