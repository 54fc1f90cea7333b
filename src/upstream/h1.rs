//! HTTP/1.1 to the upstream, on one connection at a time, driven by the request's own task.
//!
//! A request is written whole (head and body, gathered into as few writes as the body's
//! readiness allows), then the response head is read and parsed (`httparse`; its fields are
//! kept as the bytes they came in, [`super::fields`]), and the body is read as the client
//! takes it ([`Streamed`]), framed as RFC 9112 §6.3 says: none (HEAD, 1xx, 204, 304),
//! chunked, `Content-Length`, or until the connection closes. A chunked
//! body's chunks that arrived in one read go to the client as one frame: an SSE burst costs
//! one write, not one per event. Informational (1xx) responses are skipped.
//!
//! A request with `Expect: 100-continue` whose body has not been read is the upstream's to
//! meet: its head goes first, and the body (whose first read sends the client `100
//! Continue`) only after the upstream's `100 Continue`, or after [`CONTINUE_WAIT`] of
//! silence. A final answer before that is the answer, and the body is never sent.
//!
//! The connection can take another request when the response has ended cleanly, nothing
//! follows it, and neither side asked to close.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use axum::body::Body;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::either::Either;

use super::fields::{Kept, ResponseFields};
use crate::chunked::{Chunked, Step};
use crate::digits::{decimal, size_line};
use crate::error::GateError;
use crate::http1::{asks_continue, VerbatimTarget};
use crate::vectored::Gather;

/// The longest response head accepted.
const MAX_HEAD: usize = 64 << 10;
/// The most header fields in a response head.
const MAX_HEADERS: usize = 128;
/// Free space kept in the read buffer before each read.
const READ_SIZE: usize = 16 << 10;
/// Request body bytes gathered before they are written.
const WRITE_BATCH: usize = 256 << 10;
/// How long a request with `Expect: 100-continue` waits for the upstream's answer to it
/// before its body is sent all the same (RFC 9110 §10.1.1; curl waits as long).
const CONTINUE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How response heads are parsed: httparse's strict defaults (no space before a field's
/// colon, no folded lines, no bare CR). [`super::fields`] relies on them: a field's name
/// ends at its colon, and its line at the first LF after the name.
pub(super) fn parser() -> httparse::ParserConfig {
    httparse::ParserConfig::default()
}

/// A response head: its status, and its fields as they came (less the hop-by-hop ones).
#[derive(Debug)]
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) fields: ResponseFields,
}

/// Why a request got no response head.
#[derive(Debug)]
pub(super) enum Failure {
    /// The connection closed or failed before a whole response head.
    Reset(String),
    /// The upstream's answer is not HTTP/1.1 as this client reads it.
    Protocol(String),
    /// The request's own body failed (the client broke off its upload, or framed it badly).
    ClientBody(GateError),
    /// No whole response head came by the deadline.
    TimedOut,
}

/// `exchange`, or [`Failure::TimedOut`] once `due` has passed, with `timer` (made on first
/// need) standing for the deadline: it is polled only while the exchange waits, and reset
/// only when it fires before `due` or is set later than `due`.
async fn within<T>(
    mut exchange: Pin<&mut impl Future<Output = Result<T, Failure>>>,
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    due: Instant,
) -> Result<T, Failure> {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(done) = exchange.as_mut().poll(cx) {
            return Poll::Ready(done);
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        if timer.deadline() > due {
            timer.as_mut().reset(due);
        }
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= due {
                return Poll::Ready(Err(Failure::TimedOut));
            }
            timer.as_mut().reset(due);
        }
        Poll::Pending
    })
    .await
}

/// A TCP connection (`Left`), or TLS over one (`Right`).
pub(super) type Stream = Either<TcpStream, Box<tokio_rustls::client::TlsStream<TcpStream>>>;

/// One upstream connection, boxed once for its life: it passes from the idle list to each
/// exchange and its response body and back, and a box moves as a pointer (the connection
/// is about 150 bytes, copied at each of those steps before).
pub(super) type Conn = Box<Link>;

/// A connection, the bytes read from it that no response has used yet, and the buffer its
/// requests are written from.
pub(super) struct Link {
    io: Stream,
    buf: BytesMut,
    out: Gather,
    /// The response deadline's timer, kept for the connection's life and moved only when
    /// it fires early (see [`Link::send`]).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Link {
    /// A fresh connection.
    pub(super) fn new(io: Stream) -> Conn {
        Box::new(Link {
            io,
            buf: BytesMut::with_capacity(READ_SIZE),
            out: Gather::default(),
            timer: None,
        })
    }

    /// Whether an idle connection was closed by the upstream (or sent something unasked).
    /// Reads only what has already arrived; never waits.
    pub(super) fn is_closed(&mut self) -> bool {
        self.buf.reserve(1);
        let mut cx = Context::from_waker(Waker::noop());
        poll_read(&mut self.io, &mut cx, &mut self.buf).is_ready()
    }

    /// Writes `req` (its URI in origin form; its body is taken), with the fields of `set` in
    /// place of its own of the same names, and reads the response head; the body is read
    /// as the returned response's body is polled. A chunked body comes as its chunks came
    /// when `pass_chunks` (for a client that is sent the same chunks).
    ///
    /// Fails with [`Failure::TimedOut`] if no whole response head has come by `due`. The
    /// connection's one timer stands for the deadline (a timer registered and removed for
    /// every request cost about 300 instructions more, bench/instructions.sh). A timer set
    /// for an earlier request fires early (at that request's deadline, never later than
    /// this one's) and is then moved to `due`.
    pub(super) async fn send(
        mut self: Box<Self>,
        req: &mut Request<Body>,
        set: &[(HeaderName, HeaderValue)],
        pass_chunks: bool,
        due: Instant,
    ) -> Result<(Head, Framing, Conn), Failure> {
        let mut timer = self.timer.take();
        let done = {
            let exchange = std::pin::pin!(async {
                if let Some(early) = self.write_request(req, set, pass_chunks).await? {
                    return Ok(early);
                }
                self.read_head(req.method(), pass_chunks).await
            });
            within(exchange, &mut timer, due).await
        };
        let (head, framing) = done?;
        self.timer = timer;
        Ok((head, framing, self))
    }

    /// Sends a WebSocket handshake: its head alone, with its fields as they came (those of
    /// `set` in place of its own), then reads the answer: the switch, with what the upstream
    /// sent after its `101` head, or a final answer (whose connection is not reused).
    /// Fails with [`Failure::TimedOut`] if no whole answer head has come by `due`.
    pub(super) async fn handshake(
        mut self: Box<Self>,
        req: &mut Request<Body>,
        set: &[(HeaderName, HeaderValue)],
        due: Instant,
    ) -> Result<Handshake, Failure> {
        let mut timer = self.timer.take();
        // vLLM's server answers a handshake as a WebSocket server, whatever its method: a
        // `HEAD` one's refusal has its body too.
        let method = match *req.method() {
            Method::HEAD => Method::GET,
            ref other => other.clone(),
        };
        put_head(&mut self.out, req, set, true);
        self.out.put(b"\r\n");
        let done = {
            let exchange = std::pin::pin!(async {
                let reset = |e: std::io::Error| Failure::Reset(format!("writing the request: {e}"));
                self.out.flush(&mut self.io).await.map_err(reset)?;
                self.io.flush().await.map_err(reset)?;
                self.read_switch(&method).await
            });
            within(exchange, &mut timer, due).await
        };
        Ok(match done? {
            Answer::Switched(head) => Handshake::Switched {
                head,
                early: std::mem::take(&mut self.buf),
                io: self.io,
            },
            Answer::Final(head, mut framing) => {
                framing.keep_alive = false;
                self.timer = timer;
                Handshake::Answered(head, framing, self)
            }
        })
    }

    /// Reads the answer to a handshake: a `101` head (split off the buffer as it came), or
    /// a final head; other informational heads are skipped.
    async fn read_switch(&mut self, method: &Method) -> Result<Answer, Failure> {
        loop {
            let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut []);
            if let Some(len) = parse_front(&mut parsed, &self.buf, &mut fields)? {
                match parsed.code {
                    Some(101) => return Ok(Answer::Switched(self.buf.split_to(len).freeze())),
                    Some(code) if (100..200).contains(&code) => {
                        self.buf.advance(len);
                        continue;
                    }
                    _ => {}
                }
                if let Some((head, framing)) = self.parse_head(method, false)? {
                    return Ok(Answer::Final(head, framing));
                }
            }
            self.make_room()?;
            let read = std::future::poll_fn(|cx| poll_read(&mut self.io, cx, &mut self.buf));
            head_read(read.await)?;
        }
    }

    /// Writes the request; a final response head the upstream sent before it asked for the
    /// body of a request with `Expect: 100-continue` comes back (the body is then never
    /// sent, nor the connection reused).
    async fn write_request(
        &mut self,
        req: &mut Request<Body>,
        set: &[(HeaderName, HeaderValue)],
        pass_chunks: bool,
    ) -> Result<Option<(Head, Framing)>, Failure> {
        let mut body = std::mem::take(req.body_mut());
        let (method, headers) = (req.method(), req.headers());
        let reset = |e: std::io::Error| Failure::Reset(format!("writing the request: {e}"));
        let declared = body
            .size_hint()
            .exact()
            .or_else(|| crate::body::declared_length(headers));
        let chunked = declared.is_none() && !body.is_end_stream();
        let out = &mut self.out;
        let expect = put_head(out, req, set, false);
        let had_length = headers.contains_key(header::CONTENT_LENGTH);
        match declared {
            Some(n) if n > 0 || had_length || !bodiless(method) => {
                put_field(out, b"content-length", decimal(n, &mut [0; 20]));
            }
            _ if chunked => put_field(out, b"transfer-encoding", b"chunked"),
            _ => {}
        }
        out.put(b"\r\n");
        if expect && declared != Some(0) && !body.is_end_stream() {
            // The client waits for `100 Continue`, which goes out as its body is first asked
            // for: that waits for the upstream's own, so a request the upstream answers
            // unread (a 401, a 405) is answered without one, as the upstream answers it.
            self.out.flush(&mut self.io).await.map_err(reset)?;
            self.io.flush().await.map_err(reset)?;
            if let Some((head, mut framing)) = self.await_continue(method, pass_chunks).await? {
                framing.keep_alive = false; // the body it declared was never sent
                return Ok(Some((head, framing)));
            }
        }

        let mut sent = 0u64;
        loop {
            // Whatever is ready goes out together; before waiting for more, what is held is
            // written, so a slow upload streams through.
            let frame = match futures_util::FutureExt::now_or_never(body.frame()) {
                Some(frame) => frame,
                None => {
                    self.out.flush(&mut self.io).await.map_err(reset)?;
                    self.io.flush().await.map_err(reset)?; // TLS may hold what was written
                    body.frame().await
                }
            };
            let data = match frame {
                None => break,
                Some(Err(e)) => return Err(Failure::ClientBody(GateError::body_failed(e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => data,
                    _ => continue,
                },
            };
            sent += data.len() as u64;
            if declared.is_some_and(|n| sent > n) {
                return Err(Failure::ClientBody(GateError::BodyRead(format!(
                    "the request body is longer than the {} bytes declared",
                    declared.unwrap_or(0)
                ))));
            }
            let out = &mut self.out;
            if chunked {
                out.put(size_line(data.len() as u64, &mut [0; 22]));
                out.put_bytes(data);
                out.put(b"\r\n");
            } else {
                out.put_bytes(data);
            }
            if out.len() >= WRITE_BATCH || out.pieces() >= 96 {
                out.flush(&mut self.io).await.map_err(reset)?;
            }
        }
        if declared.is_some_and(|n| n != sent) {
            return Err(Failure::ClientBody(GateError::BodyRead(format!(
                "the request body has {sent} bytes, fewer than the {} declared",
                declared.unwrap_or(0)
            ))));
        }
        if chunked {
            self.out.put(b"0\r\n\r\n");
        }
        self.out.flush(&mut self.io).await.map_err(reset)?;
        self.io.flush().await.map_err(reset)?;
        Ok(None)
    }

    /// Waits for the upstream's answer to `Expect: 100-continue`: `None` once it has sent
    /// `100 Continue`, or has said nothing for [`CONTINUE_WAIT`]; else its final response head.
    async fn await_continue(
        &mut self,
        method: &Method,
        pass_chunks: bool,
    ) -> Result<Option<(Head, Framing)>, Failure> {
        let mut waited = std::pin::pin!(tokio::time::sleep(CONTINUE_WAIT));
        loop {
            match self.interim()? {
                Some(true) => return Ok(None),
                Some(false) => return self.parse_head(method, pass_chunks),
                None => self.make_room()?,
            }
            let read = std::future::poll_fn(|cx| {
                if let Poll::Ready(read) = poll_read(&mut self.io, cx, &mut self.buf) {
                    return Poll::Ready(Some(read));
                }
                waited.as_mut().poll(cx).map(|()| None)
            });
            match read.await {
                Some(read) => head_read(read)?,
                None => return Ok(None),
            }
        }
    }

    /// Consumes the informational response heads at the buffer's front: `Some(true)` once
    /// a `100 Continue` was among them, `Some(false)` when a whole final head is next, `None`
    /// while neither has come whole.
    fn interim(&mut self) -> Result<Option<bool>, Failure> {
        loop {
            let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut []);
            let Some(len) = parse_front(&mut parsed, &self.buf, &mut fields)? else {
                return Ok(None);
            };
            match parsed.code {
                Some(100) => {
                    self.buf.advance(len);
                    return Ok(Some(true));
                }
                Some(101) => return Err(unasked_switch()),
                // Other informational heads are skipped.
                Some(code) if (102..200).contains(&code) => self.buf.advance(len),
                _ => return Ok(Some(false)),
            }
        }
    }

    async fn read_head(
        &mut self,
        method: &Method,
        pass_chunks: bool,
    ) -> Result<(Head, Framing), Failure> {
        loop {
            if let Some(head) = self.parse_head(method, pass_chunks)? {
                return Ok(head);
            }
            self.make_room()?;
            let read = std::future::poll_fn(|cx| poll_read(&mut self.io, cx, &mut self.buf));
            head_read(read.await)?;
        }
    }

    /// Room in the buffer for more of a response head, if it may grow.
    fn make_room(&mut self) -> Result<(), Failure> {
        if self.buf.len() > MAX_HEAD {
            return Err(Failure::Protocol(format!(
                "response head longer than {MAX_HEAD} bytes"
            )));
        }
        self.buf.reserve(READ_SIZE);
        Ok(())
    }

    /// The response head in the buffer, if whole; 1xx heads are consumed and skipped.
    fn parse_head(
        &mut self,
        method: &Method,
        pass_chunks: bool,
    ) -> Result<Option<(Head, Framing)>, Failure> {
        let protocol = |e: String| Failure::Protocol(e);
        loop {
            if self.buf.is_empty() {
                return Ok(None);
            }
            let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut []);
            let Some(len) = parse_front(&mut parsed, &self.buf, &mut fields)? else {
                return Ok(None);
            };
            let code = parsed.code.unwrap_or(0);
            let status = StatusCode::from_u16(code)
                .map_err(|_| protocol(format!("invalid status code {code}")))?;
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(unasked_switch());
            }
            if status.is_informational() {
                self.buf.advance(len);
                continue;
            }
            // `http` takes names up to this long (and httparse every other one `http` does).
            if let Some(f) = parsed
                .headers
                .iter()
                .find(|f| f.name.len() > u16::MAX.into())
            {
                let name = &f.name[..32];
                return Err(protocol(format!("header name {name:?}… too long")));
            }
            let http10 = parsed.version == Some(0);
            let mut framing =
                Framing::of(method, status, parsed.headers, http10).map_err(protocol)?;
            let passing = pass_chunks && matches!(framing.kind, Kind::Chunked(_));
            if passing {
                framing.kind = Kind::Chunked(Chunked::passing());
            }
            let mut kept = Kept::of(&self.buf[..len], parsed.headers);
            if matches!(framing.kind, Kind::Chunked(_) | Kind::Close) {
                // A length beside `Transfer-Encoding` is not the body's: never passed on.
                kept = kept.without_length();
            }
            let fields = kept
                .over(self.buf.split_to(len).freeze(), passing)
                .closing(framing.close);
            return Ok(Some((Head { status, fields }, framing)));
        }
    }
}

/// Puts the request line and the fields of `req` (those of `set` in place of its own of the
/// same names; its `Content-Length` only if `length`), without the blank line that ends the
/// head; tells whether the request expects `100 Continue` (its last `Expect` field).
fn put_head(
    out: &mut Gather,
    req: &Request<Body>,
    set: &[(HeaderName, HeaderValue)],
    length: bool,
) -> bool {
    out.put(req.method().as_str().as_bytes());
    out.put(b" ");
    match req.extensions().get::<VerbatimTarget>() {
        Some(VerbatimTarget(target)) => out.put(&target[..]),
        None => out.put(
            req.uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .as_bytes(),
        ),
    }
    out.put(b" HTTP/1.1\r\n");
    let mut expect = false;
    for (name, value) in req.headers() {
        if (length || name != header::CONTENT_LENGTH) && !set.iter().any(|(n, _)| n == name) {
            if name == header::EXPECT {
                // Any one asks, as for the client (uvicorn never clears its flag).
                expect |= asks_continue(value.as_bytes());
            }
            put_field(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    for (name, value) in set {
        put_field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    expect
}

/// What a WebSocket handshake got.
pub(super) enum Handshake {
    /// The upstream switched: its `101` head as it came, what it sent after it, and the
    /// connection, which is the tunnel's from now on.
    Switched {
        head: Bytes,
        early: BytesMut,
        io: Stream,
    },
    /// A final answer, read as any response is; the connection closes after it.
    Answered(Head, Framing, Conn),
}

/// A handshake's answer head.
enum Answer {
    Switched(Bytes),
    Final(Head, Framing),
}

/// A `101 Switching Protocols` to a request other than a WebSocket handshake (those are
/// sent by [`Link::handshake`]): mmgate drops `Upgrade` from requests (hop-by-hop), so a
/// switch was never asked for (RFC 9110 §15.2.2). Passed on as a final answer, it would
/// leave the client's next response on the connection taken for this one.
fn unasked_switch() -> Failure {
    Failure::Protocol("101 Switching Protocols, which mmgate never asks for".into())
}

/// How a response body is delimited, and whether the connection outlives it.
pub(super) struct Framing {
    kind: Kind,
    keep_alive: bool,
    /// The upstream said `Connection: close` (its server closes after the answer).
    close: bool,
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
        fields: &[httparse::Header<'_>],
        http10: bool,
    ) -> Result<Framing, String> {
        let values = |name: &'static str| {
            fields
                .iter()
                .filter(move |f| f.name.eq_ignore_ascii_case(name))
                .map(|f| f.value)
        };
        let close = values("connection")
            .flat_map(|v| v.split(|b| *b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
        // Not reused after a 5xx: vLLM's server (uvicorn) closes the connection after the
        // 500 of an unhandled exception without `Connection: close`, and the next request
        // sent on it would fail with a 502. (A 101 never gets here: see `unasked_switch`.)
        // Nor after a CONNECT, which llhttp takes for an upgrade.
        let keep_alive =
            !close && !http10 && !status.is_server_error() && *method != Method::CONNECT;
        let bodiless = method == Method::HEAD
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        if bodiless {
            // A 204 has no content (RFC 9110 §15.3.5); one that declares some may send it
            // late, where it would be read as the next request's answer: not reused.
            let declares = status == StatusCode::NO_CONTENT
                && (values("transfer-encoding").next().is_some()
                    || values("content-length").any(|v| v.trim_ascii() != b"0"));
            return Ok(Framing {
                kind: Kind::Done,
                keep_alive: keep_alive && !declares,
                close,
            });
        }
        if let Some(last) = values("transfer-encoding").next_back() {
            let chunked = crate::framing::ends_chunked(last);
            // With both, Transfer-Encoding wins and the connection is not reused (RFC 9112 §6.3).
            let reuse = keep_alive && values("content-length").next().is_none();
            return Ok(match chunked {
                true => Framing {
                    kind: Kind::Chunked(Chunked::default()),
                    keep_alive: reuse,
                    close,
                },
                false => Framing {
                    kind: Kind::Close,
                    keep_alive: false,
                    close,
                },
            });
        }
        let mut length = None;
        for v in values("content-length") {
            for part in v.split(|b| *b == b',') {
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
                close,
            },
            None => Framing {
                kind: Kind::Close,
                keep_alive: false,
                close,
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

fn put_field(out: &mut Gather, name: &[u8], value: &[u8]) {
    out.put(name);
    out.put(b": ");
    out.put(value);
    out.put(b"\r\n");
}

/// A read of part of a response head, as a failure when it got none.
fn head_read(read: std::io::Result<usize>) -> Result<(), Failure> {
    match read {
        Ok(0) => Err(Failure::Reset(
            "the connection closed before a whole response head".into(),
        )),
        Ok(_) => Ok(()),
        Err(e) => Err(Failure::Reset(format!("reading the response: {e}"))),
    }
}

/// Parses the response head at the front of `buf` into `parsed`: its length, once whole.
fn parse_front<'h, 'b>(
    parsed: &mut httparse::Response<'h, 'b>,
    buf: &'b [u8],
    fields: &'h mut [std::mem::MaybeUninit<httparse::Header<'b>>],
) -> Result<Option<usize>, Failure> {
    match parser().parse_response_with_uninit_headers(parsed, buf, fields) {
        Ok(httparse::Status::Complete(len)) => Ok(Some(len)),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(Failure::Protocol(format!("invalid response head: {e}"))),
    }
}

/// Methods whose requests carry no body unless they say so.
fn bodiless(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET
            | Method::HEAD
            | Method::DELETE
            | Method::OPTIONS
            | Method::TRACE
            | Method::CONNECT
    )
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
