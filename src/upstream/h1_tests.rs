use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, Request};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn framing(
    method: Method,
    status: u16,
    fields: &[(&str, &str)],
    http10: bool,
) -> Result<Framing, String> {
    let fields: Vec<httparse::Header> = fields
        .iter()
        .map(|(name, value)| httparse::Header {
            name,
            value: value.as_bytes(),
        })
        .collect();
    Framing::of(
        &method,
        StatusCode::from_u16(status).unwrap(),
        &fields,
        http10,
    )
}

#[test]
fn response_framing_follows_rfc_9112() {
    let kind = |f: Result<Framing, String>| match f {
        Ok(Framing {
            kind: Kind::Done,
            keep_alive,
            ..
        }) => format!("none {keep_alive}"),
        Ok(Framing {
            kind: Kind::Length(n),
            keep_alive,
            ..
        }) => format!("length {n} {keep_alive}"),
        Ok(Framing {
            kind: Kind::Chunked(_),
            keep_alive,
            ..
        }) => format!("chunked {keep_alive}"),
        Ok(Framing {
            kind: Kind::Close,
            keep_alive,
            ..
        }) => format!("close {keep_alive}"),
        Err(_) => "error".into(),
    };
    let cl: &[(&str, &str)] = &[("content-length", "5")];
    let te: &[(&str, &str)] = &[("transfer-encoding", "chunked")];
    type Fields<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(Method, u16, Fields, bool, &str)] = &[
        (Method::HEAD, 200, cl, false, "none true"),
        (Method::POST, 204, &[], false, "none true"),
        (Method::GET, 304, cl, false, "none true"),
        (Method::POST, 200, cl, false, "length 5 true"),
        (
            Method::POST,
            200,
            &[("content-length", "5, 5")],
            false,
            "length 5 true",
        ),
        (
            Method::POST,
            200,
            &[("content-length", "5"), ("content-length", "6")],
            false,
            "error",
        ),
        (
            Method::POST,
            200,
            &[("content-length", "+5")],
            false,
            "error",
        ),
        (Method::POST, 200, te, false, "chunked true"),
        (Method::POST, 200, &[te[0], cl[0]], false, "chunked false"),
        (
            Method::POST,
            200,
            &[("transfer-encoding", "gzip")],
            false,
            "close false",
        ),
        (Method::POST, 200, &[], false, "close false"),
        (
            Method::POST,
            200,
            &[("connection", "Keep-Alive, close")],
            false,
            "close false",
        ),
        (
            Method::POST,
            200,
            &[cl[0], ("connection", "close")],
            false,
            "length 5 false",
        ),
        (Method::POST, 200, cl, true, "length 5 false"),
        (
            Method::POST,
            204,
            &[("content-length", "0")],
            false,
            "none true",
        ),
        // A 204 that declares content may send it late: not reused.
        (Method::POST, 204, cl, false, "none false"),
        (Method::POST, 204, te, false, "none false"),
        (Method::POST, 500, cl, false, "length 5 false"),
    ];
    for (method, status, fields, http10, want) in cases {
        let got = kind(framing(method.clone(), *status, fields, *http10));
        assert_eq!(got, *want, "{method} {status} {fields:?} http/1.0={http10}");
    }
}

/// Where reused connections go in these tests.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<Conn>>>);

impl Reuse for Kept {
    fn reuse(self, conn: Conn) {
        self.0.lock().unwrap().push(conn);
    }
}

/// An upstream that reads one request (head and, by its framing, body), hands its bytes
/// over, and answers with `pieces`, each written on its own; then closes if `close`.
async fn upstream(
    pieces: Vec<&'static [u8]>,
    close: bool,
) -> (Conn, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    played(move |mut s, tx| async move {
        let mut seen = Vec::new();
        let complete = |b: &[u8]| {
            let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") else {
                return false;
            };
            let head = String::from_utf8_lossy(&b[..end]).to_ascii_lowercase();
            if head.contains("transfer-encoding: chunked") {
                return b.ends_with(b"0\r\n\r\n");
            }
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.parse::<usize>().unwrap());
            b.len() >= end + 4 + len
        };
        while !complete(&seen) {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the request ended early");
            seen.extend_from_slice(&chunk[..n]);
        }
        let _ = tx.send(seen);
        for p in pieces {
            s.write_all(p).await.unwrap();
            s.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
        if !close {
            // Hold the connection open until the client closes it.
            let _ = s.read(&mut [0u8; 1]).await;
        }
    })
    .await
}

/// A connection to an upstream of one connection, which `play` serves; what it hands over
/// comes back.
async fn played<P, F>(play: P) -> (Conn, tokio::sync::oneshot::Receiver<Vec<u8>>)
where
    P: FnOnce(TcpStream, tokio::sync::oneshot::Sender<Vec<u8>>) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (s, _) = listener.accept().await.unwrap();
        play(s, tx).await;
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    (Link::new(Stream::Left(tcp)), rx)
}

async fn exchange(
    req: Request<Body>,
    pieces: Vec<&'static [u8]>,
    close: bool,
) -> (http::Response<Bytes>, Option<HeaderMap>, String, usize) {
    exchange_setting(req, &[], pieces, close).await
}

/// [`exchange`], with `set` in place of the request's own fields of those names.
async fn exchange_setting(
    req: Request<Body>,
    set: &[(HeaderName, HeaderValue)],
    pieces: Vec<&'static [u8]>,
    close: bool,
) -> (http::Response<Bytes>, Option<HeaderMap>, String, usize) {
    let (conn, seen) = upstream(pieces, close).await;
    let kept = Kept::default();
    let (head, framing, conn) = conn.send_request(req, set, false, far()).await.unwrap();
    let body = Streamed::new(conn, framing, kept.clone());
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    let mut res = http::Response::new(collected.to_bytes());
    *res.status_mut() = head.status;
    let request = String::from_utf8(seen.await.unwrap()).unwrap();
    let reused = kept.0.lock().unwrap().len();
    (res, trailers, request, reused)
}

/// A response deadline no test reaches.
fn far() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

impl Link {
    /// [`Link::send`] with a whole request.
    async fn send_request(
        self: Box<Self>,
        mut req: Request<Body>,
        set: &[(HeaderName, HeaderValue)],
        pass_chunks: bool,
        due: Instant,
    ) -> Result<(Head, Framing, Conn), Failure> {
        self.send(&mut req, set, pass_chunks, due).await
    }
}

fn post(body: Body) -> Request<Body> {
    Request::post("/v1/chat/completions")
        .header("host", "vllm")
        .body(body)
        .unwrap()
}

#[tokio::test]
async fn a_chunked_answer_after_a_100_continue_is_read_whole_and_the_connection_kept() {
    let (res, trailers, request, reused) = exchange(
        post(Body::from("{}")),
        vec![
            b"HTTP/1.1 100 Continue\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            b"9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n",
            b"E\r\ndata: [DONE]\n\n\r\n0\r\nx-t: 1\r\n\r\n",
        ],
        false,
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.body(), "data: a\n\ndata: b\n\ndata: [DONE]\n\n");
    assert_eq!(trailers.unwrap()["x-t"], "1");
    assert_eq!(reused, 1);
    assert!(
        request.starts_with("POST /v1/chat/completions HTTP/1.1\r\nhost: vllm\r\n"),
        "{request}"
    );
    assert!(
        request.ends_with("content-length: 2\r\n\r\n{}"),
        "{request}"
    );
}

#[tokio::test]
async fn a_body_until_close_is_read_to_the_end_and_the_connection_dropped() {
    let (res, _, _, reused) = exchange(
        post(Body::from("{}")),
        vec![b"HTTP/1.0 200 OK\r\n\r\nfirst ", b"second"],
        true,
    )
    .await;
    assert_eq!(res.body(), "first second");
    assert_eq!(reused, 0);
}

#[tokio::test]
async fn a_body_of_unknown_length_is_sent_chunked() {
    let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = vec![
        Ok(Frame::data(Bytes::from("ab"))),
        Ok(Frame::data(Bytes::from("cde"))),
    ];
    let body = Body::new(http_body_util::StreamBody::new(futures_util::stream::iter(
        frames,
    )));
    let (res, _, request, reused) = exchange(
        post(body),
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"],
        false,
    )
    .await;
    assert_eq!(res.body(), "ok");
    assert_eq!(reused, 1);
    assert!(
        request.contains("transfer-encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"),
        "{request}"
    );
}

#[tokio::test]
async fn a_get_without_a_body_declares_no_length() {
    let req = Request::get("/health")
        .header("host", "vllm")
        .body(Body::empty())
        .unwrap();
    let (res, _, request, _) = exchange(req, vec![b"HTTP/1.1 204 No Content\r\n\r\n"], false).await;
    assert_eq!(res.status(), 204);
    assert_eq!(request, "GET /health HTTP/1.1\r\nhost: vllm\r\n\r\n");
}

#[tokio::test]
async fn a_body_cut_short_is_an_error() {
    let (conn, _seen) = upstream(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"],
        true,
    )
    .await;
    let (_, framing, conn) = conn
        .send_request(post(Body::from("{}")), &[], false, far())
        .await
        .unwrap();
    let body = Streamed::new(conn, framing, Kept::default());
    assert!(matches!(body.collect().await, Err(BodyError::BrokeOff(_))));
}

#[tokio::test]
async fn an_answer_that_is_not_http_is_a_protocol_failure() {
    let (conn, _seen) = upstream(vec![b"SSH-2.0-OpenSSH\r\n\r\n"], true).await;
    assert!(matches!(
        conn.send_request(post(Body::from("{}")), &[], false, far())
            .await,
        Err(Failure::Protocol(_))
    ));
    let (conn, _seen) = upstream(vec![b"HTTP/1.1 200 OK\r\ncontent-le"], true).await;
    assert!(matches!(
        conn.send_request(post(Body::from("{}")), &[], false, far())
            .await,
        Err(Failure::Reset(_))
    ));
}

#[tokio::test]
async fn a_switch_of_protocols_never_asked_for_is_a_protocol_failure() {
    let answer: &[u8] =
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: upgrade\r\n\r\nRAW";
    let (conn, _seen) = upstream(vec![answer], true).await;
    assert!(matches!(
        conn.send_request(post(Body::from("{}")), &[], false, far())
            .await,
        Err(Failure::Protocol(_))
    ));
}

#[tokio::test]
async fn a_passed_chunked_body_comes_as_its_chunks_came() {
    let chunks: &[u8] = b"9\r\ndata: a\n\n\r\n9;x=1\r\ndata: b\n\n\r\n";
    let (conn, _seen) = upstream(
        vec![
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
            chunks,
            b"0\r\nx-t: 1\r\n\r\n",
        ],
        false,
    )
    .await;
    let (head, framing, conn) = conn
        .send_request(post(Body::from("{}")), &[], true, far())
        .await
        .unwrap();
    assert!(head.fields.chunks_as_sent());
    let kept = Kept::default();
    let body = Streamed::new(conn, framing, kept.clone());
    let collected = body.collect().await.unwrap();
    assert_eq!(collected.trailers().unwrap()["x-t"], "1");
    assert_eq!(
        collected.to_bytes(),
        b"9\r\ndata: a\n\n\r\n9\r\ndata: b\n\n\r\n"[..],
        "every chunk but the last, as it came but for the extension"
    );
    assert_eq!(kept.0.lock().unwrap().len(), 1);

    // A body that is not chunked is passed as its data.
    let (conn, _seen) = upstream(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"],
        false,
    )
    .await;
    let (head, _, _) = conn
        .send_request(post(Body::from("{}")), &[], true, far())
        .await
        .unwrap();
    assert!(!head.fields.chunks_as_sent());
}

#[tokio::test]
async fn a_field_name_longer_than_http_takes_is_a_protocol_failure() {
    // The head as if it had arrived whole (a read can end a head past MAX_HEAD).
    let (mut conn, _seen) = upstream(vec![], true).await;
    let head = |name_len: usize| {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        head.extend(std::iter::repeat_n(b'x', name_len));
        head.extend(b": 1\r\ncontent-length: 0\r\n\r\n");
        head
    };
    conn.buf.extend_from_slice(&head(usize::from(u16::MAX) + 1));
    let parsed = conn.parse_head(&Method::GET, false);
    assert!(matches!(parsed, Err(Failure::Protocol(e)) if e.contains("too long")));

    conn.buf.clear();
    conn.buf.extend_from_slice(&head(usize::from(u16::MAX)));
    let (head, _) = conn.parse_head(&Method::GET, false).unwrap().unwrap();
    let mut map = HeaderMap::new();
    head.fields.into_map(&mut map);
    assert_eq!(map.len(), 2, "the longest name http takes is kept");
}

/// A body that declares `declared` bytes, sends `sent` (which may be another length), and
/// counts its polls in `polls`.
#[derive(Default)]
struct Scripted {
    declared: u64,
    sent: Option<Bytes>,
    polls: Arc<std::sync::atomic::AtomicUsize>,
}

impl http_body::Body for Scripted {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.polls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Poll::Ready(self.sent.take().map(|d| Ok(Frame::data(d))))
    }
    fn is_end_stream(&self) -> bool {
        self.sent.is_none()
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.declared)
    }
}

#[tokio::test]
async fn a_body_longer_than_declared_is_refused_before_it_is_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all).await;
        all
    });
    let conn = Link::new(Stream::Left(TcpStream::connect(addr).await.unwrap()));
    let body = Body::new(Scripted {
        declared: 2,
        sent: Some(Bytes::from_static(b"{}GET / HTTP/1.1")),
        ..Default::default()
    });
    assert!(matches!(
        conn.send_request(post(body), &[], false, far()).await,
        Err(Failure::ClientBody(_))
    ));
    let received = String::from_utf8(received.await.unwrap()).unwrap();
    assert!(!received.contains("GET /"), "{received}");
}

#[tokio::test]
async fn set_fields_replace_the_requests_own_of_those_names() {
    let req = Request::get("/v1/models")
        .header("host", "vllm")
        .header("x-forwarded-for", "10.0.0.1")
        .header("X-Forwarded-For", "10.0.0.2")
        .header("accept", "*/*")
        .body(Body::empty())
        .unwrap();
    let set = [(
        HeaderName::from_static("x-forwarded-for"),
        HeaderValue::from_static("10.0.0.1, 127.0.0.1"),
    )];
    let answer: &'static [u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (res, _, request, _) = exchange_setting(req, &set, vec![answer], false).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        request,
        "GET /v1/models HTTP/1.1\r\nhost: vllm\r\naccept: */*\r\n\
         x-forwarded-for: 10.0.0.1, 127.0.0.1\r\n\r\n"
    );
}

/// An upstream that answers the first request on its connection with a short JSON body and
/// then reads the next one without answering.
async fn answers_once() -> Conn {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        while !seen.ends_with(b"{}") {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the request ended early");
            seen.extend_from_slice(&chunk[..n]);
        }
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        s.write_all(answer).await.unwrap();
        // Read on, never answering, until the client closes.
        while s.read(&mut [0u8; 4096]).await.is_ok_and(|n| n > 0) {}
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    Link::new(Stream::Left(tcp))
}

/// The first exchange on `conn`, due at `due`; returns the connection for the next.
async fn first_exchange(conn: Conn, due: Instant) -> Conn {
    let kept = Kept::default();
    let (head, framing, conn) = conn
        .send_request(post(Body::from("{}")), &[], false, due)
        .await
        .unwrap();
    assert_eq!(head.status, StatusCode::OK);
    let body = Streamed::new(conn, framing, kept.clone());
    assert_eq!(body.collect().await.unwrap().to_bytes(), "{}");
    let conn = kept.0.lock().unwrap().pop();
    conn.expect("the connection is kept")
}

#[tokio::test]
async fn a_connections_timer_left_by_an_earlier_request_does_not_end_a_later_one_early() {
    let start = Instant::now();
    let conn = first_exchange(answers_once().await, start + Duration::from_millis(100)).await;
    // The next request is due later; the connection's timer still stands at the first
    // request's deadline, fires there, and is moved.
    let due = start + Duration::from_millis(300);
    let failed = conn
        .send_request(post(Body::from("{}")), &[], false, due)
        .await;
    assert!(
        matches!(failed, Err(Failure::TimedOut)),
        "{:?}",
        failed.err()
    );
    assert!(
        Instant::now() >= due,
        "timed out {:?} early",
        due - Instant::now()
    );
}

#[tokio::test]
async fn a_deadline_before_the_connections_timer_is_kept() {
    let start = Instant::now();
    let conn = first_exchange(answers_once().await, start + Duration::from_secs(5)).await;
    let due = Instant::now() + Duration::from_millis(50);
    let failed = conn
        .send_request(post(Body::from("{}")), &[], false, due)
        .await;
    assert!(
        matches!(failed, Err(Failure::TimedOut)),
        "{:?}",
        failed.err()
    );
    let now = Instant::now();
    assert!(
        now >= due && now < start + Duration::from_secs(5),
        "{:?}",
        now - start
    );
}

/// An upstream that reads a request's head, writes `interim` (informational heads, or a
/// final answer given unread), then, if `then` is set, reads the body its head declares
/// and writes `then`. What it had received when it answered comes back.
async fn expecting(
    interim: &'static [u8],
    then: Option<&'static [u8]>,
) -> (Conn, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    played(move |mut s, tx| async move {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the head ended early");
            seen.extend_from_slice(&chunk[..n]);
        };
        // The head came alone: the body waits to be asked for.
        assert_eq!(seen.len(), head_end, "the body came with the head");
        s.write_all(interim).await.unwrap();
        if let Some(then) = then {
            let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.parse().unwrap());
            while seen.len() < head_end + len {
                let n = s.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the body ended early");
                seen.extend_from_slice(&chunk[..n]);
            }
            s.write_all(then).await.unwrap();
        }
        let _ = tx.send(seen);
        // Hold the connection open until the client closes it.
        let _ = s.read(&mut [0u8; 1]).await;
    })
    .await
}

/// A POST of `{}` with `Expect: 100-continue`, and the count of its body's polls.
fn expecting_post() -> (Request<Body>, Arc<std::sync::atomic::AtomicUsize>) {
    let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let body = Scripted {
        declared: 2,
        sent: Some(Bytes::from_static(b"{}")),
        polls: polls.clone(),
    };
    let req = Request::post("/v1/audio/transcriptions")
        .header("host", "vllm")
        .header("expect", "100-Continue")
        .body(Body::new(body))
        .unwrap();
    (req, polls)
}

/// Sends `req` on `conn` and reads the whole answer: status, body, and whether the
/// connection went back for reuse.
async fn answered(conn: Conn, mut req: Request<Body>) -> (StatusCode, Bytes, bool) {
    let kept = Kept::default();
    let (head, framing, conn) = conn.send(&mut req, &[], false, far()).await.unwrap();
    let body = Streamed::new(conn, framing, kept.clone());
    let body = body.collect().await.unwrap().to_bytes();
    let reused = !kept.0.lock().unwrap().is_empty();
    (head.status, body, reused)
}

#[tokio::test]
async fn an_expected_body_is_sent_once_the_upstream_asks_for_it() {
    let (conn, seen) = expecting(
        b"HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n",
        Some(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
    )
    .await;
    let (req, polls) = expecting_post();
    let (status, body, reused) = answered(conn, req).await;
    assert_eq!(
        (status.as_u16(), &body[..], reused),
        (200, &b"ok"[..], true)
    );
    let seen = String::from_utf8(seen.await.unwrap()).unwrap();
    assert!(
        seen.contains("\r\nexpect: 100-Continue\r\n") && seen.ends_with("\r\n\r\n{}"),
        "{seen}"
    );
    assert!(polls.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn a_final_answer_before_100_continue_is_the_answer_and_the_body_is_never_sent() {
    // vLLM's server answers a 401 or a 405 without reading the body, and sends no
    // `100 Continue`: the client is not asked for its body, nor is the connection reused.
    let (conn, seen) = expecting(
        b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 3\r\n\r\nno!",
        None,
    )
    .await;
    let (req, polls) = expecting_post();
    let (status, body, reused) = answered(conn, req).await;
    assert_eq!(
        (status.as_u16(), &body[..], reused),
        (405, &b"no!"[..], false)
    );
    assert_eq!(polls.load(std::sync::atomic::Ordering::SeqCst), 0);
    let seen = String::from_utf8(seen.await.unwrap()).unwrap();
    assert!(seen.ends_with("content-length: 2\r\n\r\n"), "{seen}");
}

#[tokio::test]
async fn an_upstream_silent_on_an_expectation_gets_the_body_after_the_wait() {
    let (conn, seen) =
        expecting(b"", Some(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")).await;
    let (req, _) = expecting_post();
    let start = Instant::now();
    let (status, body, _) = answered(conn, req).await;
    assert_eq!((status.as_u16(), &body[..]), (200, &b"ok"[..]));
    assert!(Instant::now() - start >= CONTINUE_WAIT);
    assert!(seen.await.unwrap().ends_with(b"\r\n\r\n{}"));
}

#[tokio::test]
async fn an_expectation_on_an_empty_body_is_not_waited_on() {
    // An HTTP/2 body of `content-length: 0` may end with a later empty frame: nothing to ask.
    let (conn, _) = upstream(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"],
        false,
    )
    .await;
    let body = Scripted {
        sent: Some(Bytes::new()),
        ..Default::default()
    };
    let req = Request::post("/v1/audio/transcriptions")
        .header("expect", "100-continue")
        .body(Body::new(body))
        .unwrap();
    let (status, body, reused) = answered(conn, req).await;
    assert_eq!(
        (status.as_u16(), &body[..], reused),
        (200, &b"ok"[..], true)
    );
}
