//! Upstream and client faults. A small raw-TCP fake upstream misbehaves on command (refuses,
//! resets or closes before or during the response, stalls before headers or mid-stream,
//! sends garbage before or after the headers, closes keep-alive connections after each
//! answer). Each time the client gets a clear 502/504 or a response cut short,
//! `mmgate_upstream_errors_total{kind}` counts that kind (`connect`, `reset`, `protocol`,
//! `timeout`, `truncated`, `stalled`), the gateway still serves the next normal request, and
//! the in-flight gauges return to 0. The pool allows one request at a time with no queue,
//! so a permit that was not released would turn that next request into a 503.
//!
//! Clients that leave mid-upload, while the upstream works, or mid-stream cancel the upstream
//! request (its connection closes; a partial upload is never completed) and release what
//! they held.

#[path = "support/raw.rs"]
mod raw;
mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use raw::{head, Conn, VERDICT};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const CHAT: &str = "/v1/chat/completions";
const UNGATED: &str = "/v1/audio/transcriptions";
const CLEAN: &str = r#"{"model":"tiny","messages":[]}"#;
const STREAM: &str = r#"{"model":"tiny","messages":[],"stream":true}"#;
const OK: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}";
/// Every kind `mmgate_upstream_errors_total` counts.
const KINDS: [&str; 6] = [
    "connect",
    "timeout",
    "reset",
    "protocol",
    "truncated",
    "stalled",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    Normal,
    /// Reads the request, then resets the connection without a byte.
    ResetBeforeHeaders,
    /// Sends headers and part of a fixed-length body, then resets.
    ResetMidBody,
    /// Sends headers and part of a fixed-length body, then closes cleanly (FIN).
    CloseMidBody,
    /// Sends chunked headers, one chunk, then bytes that are not a chunk.
    GarbageMidBody,
    /// Reads the request, then sends nothing (until the gateway gives up).
    StallBeforeHeaders,
    /// Sends SSE headers and one event, then sends nothing more.
    StallMidStream,
    /// Answers with bytes that are not HTTP.
    Garbage,
    /// Answers normally (keep-alive) and then closes the connection at once.
    CloseAfterEach,
}

/// What the fake saw of one connection: whole requests read, and whether it then saw the
/// gateway close it (EOF or reset while waiting, or in the middle of a request).
#[derive(Debug)]
enum Event {
    Request,
    PeerClosed,
}

struct Faulty {
    addr: SocketAddr,
    behaviour: Arc<Mutex<Behaviour>>,
    answered: Arc<AtomicUsize>,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Faulty {
    async fn start() -> Faulty {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let behaviour = Arc::new(Mutex::new(Behaviour::Normal));
        let answered = Arc::new(AtomicUsize::new(0));
        let (tx, events) = mpsc::unbounded_channel();
        let (b, a) = (behaviour.clone(), answered.clone());
        tokio::spawn(async move {
            loop {
                let (s, _) = listener.accept().await.unwrap();
                tokio::spawn(connection(s, b.clone(), a.clone(), tx.clone()));
            }
        });
        Faulty {
            addr,
            behaviour,
            answered,
            events,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn set(&self, b: Behaviour) {
        *self.behaviour.lock().unwrap() = b;
    }

    /// Waits (bounded) for the next event; `None` after [`VERDICT`].
    async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(VERDICT, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// Waits (bounded) for the fake to see the gateway close a connection it was holding;
    /// returns the whole requests it read before that.
    async fn peer_closed(&mut self) -> Option<usize> {
        let mut requests = 0;
        loop {
            match self.next().await? {
                Event::PeerClosed => return Some(requests),
                Event::Request => requests += 1,
            }
        }
    }
}

/// Reads more bytes into `buf`; `None` at EOF or on an error.
async fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    match s.read(&mut chunk).await {
        Ok(n) if n > 0 => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
        _ => None,
    }
}

/// Reads one line (without its CRLF) from the front of `buf`.
async fn line(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(i) = raw::find(buf, b"\r\n") {
            let l = String::from_utf8_lossy(&buf[..i]).into_owned();
            buf.drain(..i + 2);
            return Some(l);
        }
        fill(s, buf).await?;
    }
}

/// Reads one whole request (head, then a Content-Length or chunked body); `None` if the
/// connection ends first, so a partial upload is never taken for a request.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let end = loop {
        if let Some(i) = raw::find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        fill(s, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    buf.drain(..end);
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    if header("transfer-encoding:").is_some_and(|te| te.ends_with("chunked")) {
        loop {
            let size = line(s, buf).await?;
            let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                while !line(s, buf).await?.is_empty() {}
                return Some(());
            }
            while buf.len() < size + 2 {
                fill(s, buf).await?;
            }
            buf.drain(..size + 2);
        }
    }
    let len: usize = header("content-length:").map_or(0, |v| v.parse().unwrap_or(0));
    while buf.len() < len {
        fill(s, buf).await?;
    }
    buf.drain(..len);
    Some(())
}

/// Waits until the gateway closes the connection, and reports it.
async fn until_closed(mut s: TcpStream, tx: &mpsc::UnboundedSender<Event>) {
    let mut chunk = [0u8; 4096];
    while let Ok(n) = s.read(&mut chunk).await {
        if n == 0 {
            break;
        }
    }
    let _ = tx.send(Event::PeerClosed);
}

/// Drops the connection with an RST (zero linger does not block).
#[allow(deprecated)]
fn reset(s: TcpStream) {
    let _ = s.set_linger(Some(Duration::ZERO));
    drop(s);
}

const PARTIAL: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"partial\":";

async fn connection(
    mut s: TcpStream,
    behaviour: Arc<Mutex<Behaviour>>,
    answered: Arc<AtomicUsize>,
    tx: mpsc::UnboundedSender<Event>,
) {
    let mut buf = Vec::new();
    while read_request(&mut s, &mut buf).await.is_some() {
        let _ = tx.send(Event::Request);
        let b = *behaviour.lock().unwrap();
        match b {
            Behaviour::Normal | Behaviour::CloseAfterEach => {
                if s.write_all(OK).await.is_err() {
                    return;
                }
                answered.fetch_add(1, Ordering::SeqCst);
                if b == Behaviour::CloseAfterEach {
                    return;
                }
            }
            Behaviour::ResetBeforeHeaders => return reset(s),
            Behaviour::ResetMidBody => {
                let _ = s.write_all(PARTIAL).await;
                let _ = s.flush().await;
                return reset(s);
            }
            Behaviour::CloseMidBody => {
                let _ = s.write_all(PARTIAL).await;
                let _ = s.shutdown().await;
                return;
            }
            Behaviour::GarbageMidBody => {
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nf\r\ndata: {\"t\":0}\n\n\r\nzz\x00\xff not a chunk\r\n",
                    )
                    .await;
                return until_closed(s, &tx).await;
            }
            Behaviour::StallBeforeHeaders => return until_closed(s, &tx).await,
            Behaviour::StallMidStream => {
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\nf\r\ndata: {\"t\":0}\n\n\r\n",
                    )
                    .await;
                return until_closed(s, &tx).await;
            }
            Behaviour::Garbage => {
                let _ = s
                    .write_all(b"SSH-2.0-OpenSSH_9.6 \x00\xff garbage\r\n\r\n")
                    .await;
                return;
            }
        }
    }
    let _ = tx.send(Event::PeerClosed);
}

/// A gateway in front of `upstream` (strip mode, no discovery, no health checks) with the
/// given response timeout; its pool admits one request at a time, without a queue, unless
/// `pool` says otherwise.
async fn gateway_for(
    upstream: &str,
    response_timeout_ms: u64,
    pool: &str,
) -> mmgate::server::Running {
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[pools.default]\nmembers = [\"{upstream}\"]\nhealth_check = false\nresponse_timeout_ms = {response_timeout_ms}\nconnect_timeout_ms = 500\n{pool}\n[vllm]\ndiscover_models = false\ndiscover_routes = false\n[gate]\ndefault = \"strip\"\n"
    );
    let config = mmgate::config::Config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    mmgate::server::start(config, Duration::from_secs(5))
        .await
        .unwrap()
}

const ONE_AT_A_TIME: &str = "max_concurrency = 1\nmax_queue = 0";
/// A short response timeout (also the longest silence of a response body).
const SHORT: u64 = 300;
/// A response timeout no test reaches.
const LONG: u64 = 60_000;

/// `mmgate_upstream_errors_total` for every kind.
async fn errors(c: &TestClient, admin: SocketAddr) -> Vec<(&'static str, u64)> {
    let mut out = Vec::new();
    for kind in KINDS {
        let name = format!("mmgate_upstream_errors_total{{kind=\"{kind}\"}}");
        out.push((kind, metric(c, admin, &name).await.unwrap_or(0.0) as u64));
    }
    out
}

/// Asserts the error counts: `expected` for the kinds it names, 0 for the others.
async fn counted(c: &TestClient, admin: SocketAddr, expected: &[(&str, u64)]) {
    let want: Vec<(&str, u64)> = KINDS
        .iter()
        .map(|k| {
            let n = expected.iter().find(|(e, _)| e == k).map_or(0, |e| e.1);
            (*k, n)
        })
        .collect();
    assert_eq!(errors(c, admin).await, want, "mmgate_upstream_errors_total");
}

/// Waits until nothing is in flight, in the gateway and in the pool.
async fn released(c: &TestClient, admin: SocketAddr) {
    for gauge in [
        "mmgate_in_flight_requests ",
        "mmgate_pool_in_flight_requests{pool=\"default\"}",
    ] {
        eventually(&format!("{gauge} to return to 0"), || async {
            metric(c, admin, gauge).await.unwrap_or(0.0) == 0.0
        })
        .await;
    }
}

fn post(path: &str, body: &str) -> String {
    format!(
        "{}{body}",
        head(path, &format!("Content-Length: {}\r\n", body.len()))
    )
}

/// One request through a raw connection, its verdict read with a deadline.
async fn ask(gw: &mmgate::server::Running, path: &str, body: &str) -> raw::RawResponse {
    let mut c = Conn::open(gw.addr).await;
    c.write(post(path, body).as_bytes()).await;
    c.response().await.unwrap()
}

/// After a fault: everything is released, and a normal request (which needs the pool's one
/// permit) succeeds.
async fn still_healthy(fake: &Faulty, gw: &mmgate::server::Running, http: &TestClient) {
    released(http, gw.admin).await;
    fake.set(Behaviour::Normal);
    let r = ask(gw, CHAT, CLEAN).await;
    assert_eq!(r.status, 200, "the gateway serves again: {}", r.text());
    released(http, gw.admin).await;
}

#[tokio::test]
async fn a_refused_connection_gives_502_naming_the_upstream_and_counts_connect() {
    let dead = dead_url();
    let gw = gateway_for(&dead, SHORT, ONE_AT_A_TIME).await;
    let http = client();
    for path in [CHAT, UNGATED, CHAT] {
        let r = ask(&gw, path, CLEAN).await;
        assert_eq!(r.status, 502, "{}", r.text());
        assert!(
            r.text().contains(dead.trim_start_matches("http://")),
            "{}",
            r.text()
        );
    }
    counted(&http, gw.admin, &[("connect", 3)]).await;
    released(&http, gw.admin).await;
}

#[tokio::test]
async fn a_reset_before_headers_gives_502_and_counts_reset() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::ResetBeforeHeaders);
    let r = ask(&gw, CHAT, CLEAN).await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(
        r.text().contains("mmgate"),
        "says it is the gateway: {}",
        r.text()
    );
    counted(&http, gw.admin, &[("reset", 1)]).await;
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_response_broken_off_mid_body_is_cut_short_for_the_client_and_counts_truncated() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, ONE_AT_A_TIME).await;
    let http = client();
    let faults = [
        Behaviour::ResetMidBody,
        Behaviour::CloseMidBody,
        Behaviour::GarbageMidBody,
    ];
    for (n, b) in faults.into_iter().enumerate() {
        fake.set(b);
        let mut c = Conn::open(gw.addr).await;
        c.write(post(CHAT, CLEAN).as_bytes()).await;
        // Headers went out already: the client sees its body cut short, never a whole one.
        let e = c
            .response()
            .await
            .expect_err("a body cut short is not a complete response");
        assert!(e.contains("short") || e.contains("closed"), "{b:?}: {e}");
        counted(&http, gw.admin, &[("truncated", n as u64 + 1)]).await;
        still_healthy(&fake, &gw, &http).await;
    }
}

#[tokio::test]
async fn a_stall_before_headers_gives_504_counts_timeout_and_closes_the_upstream_connection() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::StallBeforeHeaders);
    let r = ask(&gw, CHAT, CLEAN).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        r.text().contains("300 ms"),
        "names the timeout: {}",
        r.text()
    );
    counted(&http, gw.admin, &[("timeout", 1)]).await;
    assert_eq!(
        fake.peer_closed().await,
        Some(1),
        "the gateway gave up on the connection"
    );
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_stall_mid_stream_ends_the_stream_after_the_response_timeout_and_counts_stalled() {
    // response_timeout_ms also bounds the silence between a response's body frames: a
    // stream that stops is cut (never ended cleanly) and releases what it held.
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::StallMidStream);
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, STREAM).as_bytes()).await;
    assert!(
        c.closed_within(VERDICT).await,
        "the gateway ends a stalled stream"
    );
    let got = c.unread();
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", got.escape_ascii());
    assert!(
        raw::find(got, b"data: {\"t\":0}").is_some(),
        "the first event arrived"
    );
    assert!(
        raw::find(got, b"\r\n0\r\n\r\n").is_none(),
        "the stream is cut, not ended cleanly: {}",
        got.escape_ascii()
    );
    counted(&http, gw.admin, &[("stalled", 1)]).await;
    assert_eq!(
        fake.peer_closed().await,
        Some(1),
        "the upstream connection is closed"
    );
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn garbage_from_the_upstream_gives_502_and_counts_protocol() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::Garbage);
    for path in [CHAT, UNGATED] {
        let r = ask(&gw, path, CLEAN).await;
        assert_eq!(r.status, 502, "{}", r.text());
    }
    counted(&http, gw.admin, &[("protocol", 2)]).await;
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_closing_each_keep_alive_connection_loses_no_request_and_never_hangs() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, "").await;
    let http = client();
    fake.set(Behaviour::CloseAfterEach);
    let (mut ok, mut bad) = (0usize, 0usize);
    // Several clients in parallel, each sending requests back to back on one connection.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let addr = gw.addr;
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(addr).await;
            let mut statuses = Vec::new();
            for _ in 0..25 {
                c.write(post(CHAT, CLEAN).as_bytes()).await;
                statuses.push(c.response().await.expect("an answer, never a hang").status);
            }
            statuses
        }));
    }
    for t in tasks {
        for s in t.await.unwrap() {
            match s {
                200 => ok += 1,
                502 => bad += 1,
                other => panic!("unexpected status {other}"),
            }
        }
    }
    let counts = errors(&http, gw.admin).await;
    println!("200 requests: {ok} answered 200, {bad} answered 502; errors {counts:?}");
    assert_eq!(ok + bad, 200);
    assert_eq!(
        fake.answered.load(Ordering::SeqCst),
        ok,
        "every 200 is one upstream answer, none answered twice"
    );
    let get = |k: &str| counts.iter().find(|c| c.0 == k).unwrap().1 as usize;
    assert_eq!(
        get("reset") + get("protocol"),
        bad,
        "every 502 is counted, as a reset (or a broken answer)"
    );
    released(&http, gw.admin).await;
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_client_leaving_mid_upload_cancels_the_upstream_request_and_releases_it() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), LONG, ONE_AT_A_TIME).await;
    let http = client();
    // An ungated route streams the body through: the upstream has the request open, and
    // it is closed before the body is whole, with a length or chunked.
    for framing in [
        "Content-Length: 100000\r\n",
        "Transfer-Encoding: chunked\r\n",
    ] {
        let mut c = Conn::open(gw.addr).await;
        c.write(head(UNGATED, framing).as_bytes()).await;
        if framing.starts_with("Transfer") {
            c.write(format!("3e8\r\n{}\r\n", "x".repeat(1000)).as_bytes())
                .await;
        } else {
            c.write(&[b'x'; 1000]).await;
        }
        drop(c);
        assert_eq!(
            fake.peer_closed().await,
            Some(0),
            "{framing:?}: the upstream connection is closed, the request never whole"
        );
        released(&http, gw.admin).await;
    }
    // A gated route reads the body first: nothing is forwarded at all.
    let mut c = Conn::open(gw.addr).await;
    c.write(head(CHAT, "Content-Length: 100000\r\n").as_bytes())
        .await;
    c.write(&[b' '; 1000]).await;
    drop(c);
    still_healthy(&fake, &gw, &http).await;
    assert_eq!(
        fake.answered.load(Ordering::SeqCst),
        1,
        "only the health probe"
    );
    counted(&http, gw.admin, &[]).await;
}

#[tokio::test]
async fn a_client_leaving_while_the_upstream_works_cancels_it_and_is_recorded() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), LONG, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::StallBeforeHeaders);
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, CLEAN).as_bytes()).await;
    assert!(
        matches!(fake.next().await, Some(Event::Request)),
        "the upstream has the request"
    );
    drop(c);
    assert_eq!(
        fake.peer_closed().await,
        Some(0),
        "the upstream sees the cancellation"
    );
    let cancelled = r#"mmgate_requests_total{mode="strip",outcome="cancelled",route="chat"}"#;
    eventually("the cancelled request to be recorded", || async {
        metric(&http, gw.admin, cancelled).await == Some(1.0)
    })
    .await;
    counted(&http, gw.admin, &[]).await;
    still_healthy(&fake, &gw, &http).await;
}

/// A stripped request whose client leaves while the upstream works is still recorded and
/// logged as stripped (the strip happened; only the answer was lost).
#[tokio::test]
async fn a_stripped_request_whose_client_leaves_is_still_counted_as_stripped() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), LONG, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::StallBeforeHeaders);
    let mut c = Conn::open(gw.addr).await;
    let offending = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"max_pixels":1}}"#;
    c.write(post(CHAT, offending).as_bytes()).await;
    assert!(matches!(fake.next().await, Some(Event::Request)));
    drop(c);
    assert_eq!(fake.peer_closed().await, Some(0));
    let cancelled = r#"mmgate_requests_total{mode="strip",outcome="cancelled",route="chat"}"#;
    eventually("the cancelled request to be recorded", || async {
        metric(&http, gw.admin, cancelled).await == Some(1.0)
    })
    .await;
    let stripped = r#"mmgate_stripped_fields_total{field="mm_processor_kwargs",route="chat"}"#;
    assert_eq!(metric(&http, gw.admin, stripped).await, Some(1.0));
    counted(&http, gw.admin, &[]).await;
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_client_leaving_mid_stream_cancels_the_upstream_stream_and_releases_it() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), LONG, ONE_AT_A_TIME).await;
    let http = client();
    fake.set(Behaviour::StallMidStream);
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, STREAM).as_bytes()).await;
    let deadline = tokio::time::Instant::now() + VERDICT;
    while raw::find(c.unread(), b"data: {\"t\":0}").is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the first event");
        let closed = c.closed_within(Duration::from_millis(50)).await;
        assert!(!closed, "the stream stays open");
    }
    assert_eq!(
        metric(
            &http,
            gw.admin,
            "mmgate_pool_in_flight_requests{pool=\"default\"}"
        )
        .await,
        Some(1.0),
        "the stream holds the pool's permit"
    );
    drop(c);
    assert_eq!(
        fake.peer_closed().await,
        Some(1),
        "the upstream sees the cancellation"
    );
    counted(&http, gw.admin, &[]).await;
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_slow_upload_on_a_streamed_route_gets_504_and_never_reaches_the_upstream_whole() {
    // Ungated routes stream the client's body to vLLM as it comes (no body timeout of
    // their own): an upload that stops is bounded by response_timeout_ms (vLLM answers
    // only once it has the whole body), and then the upstream connection is dropped
    // before the body is whole.
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), SHORT, ONE_AT_A_TIME).await;
    let http = client();
    let mut c = Conn::open(gw.addr).await;
    c.write(head(UNGATED, "Content-Length: 100\r\n").as_bytes())
        .await;
    c.write(b"{\"file\":").await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(
        fake.peer_closed().await,
        Some(0),
        "the upstream never had a whole request"
    );
    counted(&http, gw.admin, &[("timeout", 1)]).await;
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn an_http2_client_resetting_its_stream_cancels_the_upstream_request() {
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Full, StreamBody};
    type H2Body = BoxBody<bytes::Bytes, std::io::Error>;

    let mut fake = Faulty::start().await;
    let gw = gateway_for(&fake.url(), LONG, ONE_AT_A_TIME).await;
    let http = client();
    let h2: hyper_util::client::legacy::Client<_, H2Body> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build_http();
    let url = |path: &str| format!("http://{}{path}", gw.addr);

    // Mid-stream: the first event arrives, then the client drops the response (RST_STREAM).
    fake.set(Behaviour::StallMidStream);
    let body: H2Body = Full::new(bytes::Bytes::from(STREAM))
        .map_err(|never| match never {})
        .boxed();
    let req = http::Request::post(url(CHAT))
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let res = tokio::time::timeout(VERDICT, h2.request(req))
        .await
        .unwrap()
        .unwrap();
    let mut res_body = res.into_body();
    let first = tokio::time::timeout(VERDICT, res_body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first
        .data_ref()
        .is_some_and(|d| raw::find(d, b"data:").is_some()));
    drop(res_body);
    assert_eq!(
        fake.peer_closed().await,
        Some(1),
        "the upstream stream is cancelled"
    );
    released(&http, gw.admin).await;

    // Mid-upload on a streamed route: part of the body, then the client gives up on the
    // request (its body stream fails, and the client resets the stream).
    fake.set(Behaviour::Normal);
    let (tx, rx) =
        tokio::sync::mpsc::channel::<Result<http_body::Frame<bytes::Bytes>, std::io::Error>>(1);
    let body: H2Body = StreamBody::new(tokio_stream_from(rx)).boxed();
    let req = http::Request::post(url(UNGATED))
        .header("content-length", "100000")
        .body(body)
        .unwrap();
    let pending = tokio::spawn(h2.request(req));
    tx.send(Ok(http_body::Frame::data(bytes::Bytes::from(vec![
        b'x';
        1000
    ]))))
    .await
    .unwrap();
    tx.send(Err(std::io::Error::other("the client gives up")))
        .await
        .unwrap();
    let _ = tokio::time::timeout(VERDICT, pending).await.unwrap();
    assert_eq!(
        fake.peer_closed().await,
        Some(0),
        "the upstream connection is closed, the request never whole"
    );
    counted(&http, gw.admin, &[]).await;
    still_healthy(&fake, &gw, &http).await;
}

/// A stream of the receiver's items (no tokio-stream dependency).
fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|t| (t, rx)) })
}
