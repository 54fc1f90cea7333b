//! Upstream and client faults. A small raw-TCP fake upstream misbehaves on command (refuses,
//! resets before or during the response, stalls before headers or mid-stream, sends garbage,
//! closes keep-alive connections after each answer). Each time the client gets a clear
//! 502/504 or a terminated stream, `mmgate_upstream_errors_total{kind}` counts it, the gateway
//! still serves the next normal request, and `mmgate_in_flight_requests` returns to 0.
//! Clients that leave mid-upload or mid-stream cancel the upstream request (its connection
//! closes) and release what they held.

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

#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    Normal,
    /// Reads the request, then resets the connection without a byte.
    ResetBeforeHeaders,
    /// Sends headers and part of a fixed-length body, then resets.
    ResetMidBody,
    /// Reads the request, then sends nothing (until the gateway gives up).
    StallBeforeHeaders,
    /// Sends SSE headers and one event, then sends nothing more.
    StallMidStream,
    /// Answers with bytes that are not HTTP.
    Garbage,
    /// Answers normally (keep-alive) and then closes the connection at once.
    CloseAfterEach,
}

/// What the fake saw of one connection: requests read, and whether it then saw the gateway
/// close it (EOF or reset while waiting).
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

    fn set(&self, b: Behaviour) {
        *self.behaviour.lock().unwrap() = b;
    }

    /// Waits (bounded) for the fake to see the gateway close a connection it was holding.
    async fn peer_closed(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + VERDICT;
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(Event::PeerClosed)) => return true,
                Ok(Some(Event::Request)) => continue,
                _ => return false,
            }
        }
    }
}

/// Reads one request head and its Content-Length body; `None` at EOF.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = raw::find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < end + len {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..end + len);
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
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"partial\":")
                    .await;
                let _ = s.flush().await;
                return reset(s);
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

/// A gateway in front of `upstream` with a short response timeout and no discovery.
async fn gateway_for(upstream: &str) -> mmgate::server::Running {
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\nurl = \"{upstream}\"\nresponse_timeout_ms = 300\nconnect_timeout_ms = 500\n[vllm]\ndiscover_models = false\ndiscover_routes = false\n[gate]\ndefault = \"strip\"\n"
    );
    let config = mmgate::config::Config::parse(&text).unwrap();
    mmgate::server::start(config, Duration::from_secs(5))
        .await
        .unwrap()
}

async fn errors(c: &TestClient, admin: SocketAddr, kind: &str) -> f64 {
    let name = format!("mmgate_upstream_errors_total{{kind=\"{kind}\"}}");
    metric(c, admin, &name).await.unwrap_or(0.0)
}

async fn in_flight_returns_to_zero(c: &TestClient, admin: SocketAddr) {
    eventually("mmgate_in_flight_requests to return to 0", || async {
        metric(c, admin, "mmgate_in_flight_requests ").await == Some(0.0)
    })
    .await;
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

/// After a fault: a normal request succeeds, nothing is left in flight.
async fn still_healthy(fake: &Faulty, gw: &mmgate::server::Running, http: &TestClient) {
    fake.set(Behaviour::Normal);
    let r = ask(gw, CHAT, CLEAN).await;
    assert_eq!(r.status, 200, "the gateway serves again: {}", r.text());
    in_flight_returns_to_zero(http, gw.admin).await;
}

#[tokio::test]
async fn a_refused_connection_gives_502_naming_the_upstream_and_counts_connect() {
    let dead = dead_url();
    let gw = gateway_for(&dead).await;
    let http = client();
    for path in [CHAT, UNGATED] {
        let r = ask(&gw, path, CLEAN).await;
        assert_eq!(r.status, 502, "{}", r.text());
        assert!(
            r.text().contains(dead.trim_start_matches("http://")),
            "{}",
            r.text()
        );
    }
    assert_eq!(errors(&http, gw.admin, "connect").await, 2.0);
    in_flight_returns_to_zero(&http, gw.admin).await;
}

#[tokio::test]
async fn a_reset_before_headers_gives_502_and_counts_protocol() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
    let http = client();
    fake.set(Behaviour::ResetBeforeHeaders);
    let r = ask(&gw, CHAT, CLEAN).await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert!(
        r.text().contains("mmgate"),
        "says it is the gateway: {}",
        r.text()
    );
    assert_eq!(errors(&http, gw.admin, "protocol").await, 1.0);
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_reset_mid_body_terminates_the_clients_response_without_a_clean_end() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
    let http = client();
    fake.set(Behaviour::ResetMidBody);
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, CLEAN).as_bytes()).await;
    let r = c.response().await;
    // Headers went out already: the client sees its body cut short, never a complete one.
    let e = r.expect_err("a body shorter than its length is not a complete response");
    assert!(e.contains("cut short") || e.contains("closed"), "{e}");
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_stall_before_headers_gives_504_counts_timeout_and_closes_the_upstream_connection() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
    let http = client();
    fake.set(Behaviour::StallBeforeHeaders);
    let r = ask(&gw, CHAT, CLEAN).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(errors(&http, gw.admin, "timeout").await, 1.0);
    assert!(
        fake.peer_closed().await,
        "the gateway gave up on the connection"
    );
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_stall_mid_stream_keeps_the_stream_open_until_the_client_leaves_then_cancels() {
    // Defined behaviour: response_timeout_ms bounds only the time to response headers; once
    // a stream has started mmgate passes it through for as long as the upstream holds it
    // open (vLLM may take long between tokens). The client ends it by leaving, and that
    // closes the upstream connection and releases the request.
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
    let http = client();
    fake.set(Behaviour::StallMidStream);
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, STREAM).as_bytes()).await;
    assert!(
        !c.closed_within(Duration::from_millis(600)).await,
        "the stream is still open past the response timeout"
    );
    assert!(
        raw::find(c.unread(), b"data: {\"t\":0}").is_some(),
        "the first event arrived"
    );
    assert_eq!(
        metric(&http, gw.admin, "mmgate_in_flight_requests ").await,
        Some(1.0)
    );
    drop(c);
    assert!(
        fake.peer_closed().await,
        "the upstream sees the cancellation"
    );
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn garbage_from_the_upstream_gives_502_and_counts_protocol() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
    let http = client();
    fake.set(Behaviour::Garbage);
    for path in [CHAT, UNGATED] {
        let r = ask(&gw, path, CLEAN).await;
        assert_eq!(r.status, 502, "{}", r.text());
    }
    assert_eq!(errors(&http, gw.admin, "protocol").await, 2.0);
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_closing_each_keep_alive_connection_loses_no_request_and_never_hangs() {
    let fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
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
    println!("200 requests: {ok} answered 200, {bad} answered 502");
    assert_eq!(ok + bad, 200);
    assert_eq!(
        fake.answered.load(Ordering::SeqCst),
        ok,
        "every 200 is one upstream answer, none answered twice"
    );
    let protocol = errors(&http, gw.admin, "protocol").await;
    assert_eq!(protocol as usize, bad, "every 502 is counted");
    still_healthy(&fake, &gw, &http).await;
}

#[tokio::test]
async fn a_client_leaving_mid_upload_cancels_the_upstream_request_and_releases_it() {
    let mut fake = Faulty::start().await;
    let gw = gateway_for(&format!("http://{}", fake.addr)).await;
    let http = client();
    // An ungated route streams the body through: the upstream has the request open.
    let mut c = Conn::open(gw.addr).await;
    c.write(head(UNGATED, "Content-Length: 100000\r\n").as_bytes())
        .await;
    c.write(&[b'x'; 1000]).await;
    drop(c);
    assert!(
        fake.peer_closed().await,
        "the upstream connection is closed"
    );
    // A gated route reads the body first: nothing is forwarded at all.
    let mut c = Conn::open(gw.addr).await;
    c.write(head(CHAT, "Content-Length: 100000\r\n").as_bytes())
        .await;
    c.write(&[b' '; 1000]).await;
    drop(c);
    in_flight_returns_to_zero(&http, gw.admin).await;
    still_healthy(&fake, &gw, &http).await;
    assert_eq!(
        fake.answered.load(Ordering::SeqCst),
        1,
        "only the health probe"
    );
}
