//! What of an upstream's response passes as it came. Its header fields reach the client as
//! the upstream sent them, less the hop-by-hop ones (the fixed list and those `Connection`
//! names), with the gateway's own fields in place of any the upstream sent of the same
//! names: over mmgate's HTTP/1.1 server (which writes the upstream's lines as they came,
//! CRLF-ended) and over HTTP/2 (hyper). A chunked body reaches an HTTP/1.1 client as the
//! upstream's chunks (size lines written bare, without its trailers), or cut short when
//! the upstream's breaks off; an HTTP/1.0 or HTTP/2 client gets its data. (And one thing
//! of a request: a target `http::Uri` cannot hold, which vLLM's server takes.)

#[path = "support/raw.rs"]
mod raw;
mod support;

use std::net::SocketAddr;

use bytes::Bytes;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use raw::{find, Conn};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CHAT: &str = "/v1/chat/completions";
const KWARGS: &str = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"num_crops":4}}"#;

/// The answer's fields: mixed case, repeated, hop-by-hop, one named by `Connection`, a
/// forged gateway field, and a line ended by a bare LF.
const FIELDS: &str = "Server: raw-upstream\r\nX-Multi: a\r\nConnection: keep-alive, X-Hop\r\n\
X-Hop: secret\r\nKeep-Alive: timeout=5\r\nContent-Type: application/json\r\n\
X-Mmgate-Stripped: forged\r\nContent-Length: 11\r\nX-Multi: b\r\nProxy-Connection: x\r\n\
X-Bare: lf\n";

/// The chunks of the upstream's `/stream` answer (then the last chunk and a trailer).
const CHUNKS: &str = "d\r\ndata: first\n\n\r\ne;ext=1\r\ndata: second\n\n\r\n";

/// The upstream's own `Date`, passed on in place of the gateway's.
const DATE: &str = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";

/// An upstream that answers every request with `fields` (and, but to HEAD, a body); a
/// request for `/not-modified` gets a 304 with the same fields, one for `/stream` a chunked
/// body ([`CHUNKS`]), one for `/broken` a chunked body that breaks off.
async fn upstream(fields: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(answer(s, fields.clone()));
        }
    });
    addr
}

async fn answer(mut s: TcpStream, fields: String) {
    let mut buf = Vec::new();
    loop {
        let end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buf.len() < end + length {
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        }
        let raw_head: Vec<u8> = buf.drain(..end + length).take(end).collect();
        if head.starts_with("get /broken ") {
            // One whole chunk, part of the next, then the connection closes.
            let _ = s
                .write_all(
                    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                      d\r\ndata: first\n\n\r\ne\r\ndata: sec",
                )
                .await;
            return;
        }
        let answer = if head.contains("\r\nx-echo: line\r\n") {
            // The request line as it arrived (from the raw bytes, not the lowercased copy).
            let line = String::from_utf8_lossy(
                &raw_head[..raw_head.iter().position(|&b| b == b'\r').unwrap()],
            )
            .into_owned();
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{line}",
                line.len()
            )
        } else if head.starts_with("get /stream ") {
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             transfer-encoding: chunked\r\n\r\n"
                .to_string()
                + CHUNKS
                + "0\r\nx-t: 1\r\n\r\n"
        } else if head.starts_with("get /both-framings ") {
            // A length beside chunked coding (RFC 9112 §6.3: the chunks win).
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n\
             a\r\n0123456789\r\n0\r\n\r\n"
                .to_string()
        } else if head.starts_with("get /not-modified ") {
            format!("HTTP/1.1 304 Not Modified\r\n{fields}\r\n")
        } else if head.starts_with("head ") {
            format!("HTTP/1.1 200 OK\r\n{fields}\r\n")
        } else {
            format!("HTTP/1.1 200 OK\r\n{fields}\r\n{{\"ok\":true}}")
        };
        if s.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn start(fields: String) -> mmgate::server::Running {
    let up = upstream(fields).await;
    let policy = "[upstream]\nurl = \"{UP}\"\n[gate]\ndefault = \"strip\"\n";
    gateway_with(policy, &[("UP", format!("http://{up}"))], None).await
}

/// An HTTP/2 client (prior knowledge, so hyper serves it).
fn h2() -> Client<HttpConnector, http_body_util::Full<Bytes>> {
    Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// A GET for `path` over HTTP/2.
async fn h2_get(addr: SocketAddr, path: &str) -> http::Response<hyper::body::Incoming> {
    let get = http::Request::get(format!("http://{addr}{path}"))
        .body(http_body_util::Full::default())
        .unwrap();
    h2().request(get).await.unwrap()
}

/// Asserts that the connection answers another request: the last response ended where it
/// said it would.
async fn next_request_is_answered(c: &mut Conn) {
    c.write(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await;
    let r = c.response().await.unwrap();
    assert_eq!((r.status, r.text().as_str()), (200, r#"{"ok":true}"#));
}

/// The field lines of a raw head, less `date` (the gateway adds one).
fn lines(head: &str) -> Vec<&str> {
    head.split("\r\n")
        .skip(1)
        .filter(|l| !l.to_ascii_lowercase().starts_with("date:"))
        .collect()
}

/// The `date` lines of a raw head, in any case.
fn dates(head: &str) -> Vec<&str> {
    head.split("\r\n")
        .filter(|l| l.to_ascii_lowercase().starts_with("date:"))
        .collect()
}

#[tokio::test]
async fn an_http11_client_gets_the_upstreams_lines_as_they_came_less_the_hop_by_hop_ones() {
    let gw = start(FIELDS.into()).await;
    let mut c = Conn::open(gw.addr).await;
    let post = format!(
        "POST {CHAT} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{KWARGS}",
        KWARGS.len()
    );
    c.write(post.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), r#"{"ok":true}"#);
    let mut got = lines(&r.head);
    got.sort_unstable();
    let mut want = vec![
        "Server: raw-upstream",
        "X-Multi: a",
        "Content-Type: application/json",
        "X-Multi: b",
        "X-Bare: lf",
        "x-mmgate-stripped: mm_processor_kwargs",
        "content-length: 11",
    ];
    want.sort_unstable();
    assert_eq!(got, want, "{}", r.head);
    let multi: Vec<_> = lines(&r.head)
        .into_iter()
        .filter(|l| l.starts_with("X-Multi"))
        .collect();
    assert_eq!(
        multi,
        ["X-Multi: a", "X-Multi: b"],
        "same-name fields keep their order"
    );
    assert_eq!(dates(&r.head).len(), 1, "the gateway adds one: {}", r.head);

    // HEAD: the upstream's own Content-Length stands for the body it did not send.
    c.write(b"HEAD /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await;
    let r = c.response_to_head().await.unwrap();
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.header("content-length"), Some("11"), "{}", r.head);
    assert_eq!(r.head.matches("ontent-").count(), 2, "{}", r.head);
    assert!(
        !r.head.contains("X-Hop") && !r.head.contains("Keep-Alive"),
        "{}",
        r.head
    );

    // A 304 has no body: no Content-Length of the upstream's, and the connection goes on.
    c.write(b"GET /not-modified HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 304, "{}", r.head);
    assert_eq!(r.header("content-length"), None, "{}", r.head);
    assert_eq!(r.header("server"), Some("raw-upstream"), "{}", r.head);
    next_request_is_answered(&mut c).await;
}

#[tokio::test]
async fn an_upstreams_date_is_passed_on_and_none_added() {
    let gw = start(format!("{DATE}{FIELDS}")).await;
    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(dates(&r.head), [DATE.trim_end()], "{}", r.head);

    let res = h2_get(gw.addr, "/v1/models").await;
    let dates: Vec<_> = res.headers().get_all("date").iter().collect();
    assert_eq!(dates, ["Sun, 06 Nov 1994 08:49:37 GMT"]);
}

#[tokio::test]
async fn an_http2_client_gets_the_same_fields() {
    let gw = start(FIELDS.into()).await;
    let req = http::Request::post(format!("http://{}{CHAT}", gw.addr))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from(KWARGS)))
        .unwrap();
    let res = h2().request(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers();
    assert_eq!(h["server"], "raw-upstream");
    assert_eq!(h.get_all("x-multi").iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(h["content-type"], "application/json");
    assert_eq!(h["x-bare"], "lf");
    assert_eq!(h["x-mmgate-stripped"], "mm_processor_kwargs");
    assert_eq!(h.get_all("x-mmgate-stripped").iter().count(), 1);
    for gone in ["x-hop", "keep-alive", "connection", "proxy-connection"] {
        assert!(!h.contains_key(gone), "{gone}: {h:?}");
    }
}

#[tokio::test]
async fn a_chunked_body_reaches_an_http11_client_as_the_upstreams_chunks() {
    let gw = start(FIELDS.into()).await;
    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET /stream HTTP/1.1\r\nHost: gw\r\n\r\n").await;
    // The head, then the bytes of the body as they came.
    let mut wire = Vec::new();
    // The chunks as they came (but for the size line's extension), then the last chunk.
    let want = format!("{}0\r\n\r\n", CHUNKS.replace(";ext=1", ""));
    while !wire.ends_with(want.as_bytes()) {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(raw::VERDICT, c.stream.read(&mut chunk))
            .await
            .expect("the rest of the body in time")
            .unwrap();
        assert!(n > 0, "closed early: {}", wire.escape_ascii());
        wire.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8(wire).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("\r\ntransfer-encoding: chunked"), "{head}");
    assert_eq!(body, want, "the chunks, without the trailer");

    next_request_is_answered(&mut c).await;
}

#[tokio::test]
async fn a_chunked_body_reaches_http10_and_http2_clients_as_its_data() {
    let gw = start(FIELDS.into()).await;
    let data = "data: first\n\ndata: second\n\n";
    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET /stream HTTP/1.0\r\nHost: gw\r\n\r\n").await;
    let r = c.response().await.unwrap();
    assert_eq!(r.header("transfer-encoding"), None, "{}", r.head);
    assert_eq!(r.text(), data);

    let res = h2_get(gw.addr, "/stream").await;
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap();
    assert_eq!(body.to_bytes(), data);
}

#[tokio::test]
async fn a_passed_body_that_breaks_off_reaches_the_client_cut_short() {
    let gw = start(FIELDS.into()).await;
    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET /broken HTTP/1.1\r\nHost: gw\r\n\r\n").await;
    assert!(c.closed_within(raw::VERDICT).await, "the connection closes");
    let got = String::from_utf8_lossy(c.unread()).into_owned();
    let (_, body) = got.split_once("\r\n\r\n").expect("a head");
    // What came before the break, and never a last chunk: the client sees the body unended.
    assert!(body.starts_with("d\r\ndata: first\n\n\r\n"), "{body:?}");
    assert!(!body.contains("\r\n0\r\n"), "{body:?}");
}

#[tokio::test]
async fn a_target_vllms_server_takes_goes_on_as_it_reads_it() {
    // `*` and what follows it (vLLM's 404 for any method) as written; `"`, `<`, `>` and
    // `` ` `` percent-encoded, which vLLM decodes to the same path and query.
    let gw = start(FIELDS.into()).await;
    for (target, forwarded) in [
        ("*?a", "*?a"),
        ("*/v1/models#x", "*/v1/models#x"),
        ("*", "*"),
        (
            r#"/v1/models?q={"a":"<`>"}"#,
            "/v1/models?q={%22a%22:%22%3C%60%3E%22}",
        ),
    ] {
        let mut c = Conn::open(gw.addr).await;
        c.write(format!("GET {target} HTTP/1.1\r\nHost: gw\r\nX-Echo: line\r\n\r\n").as_bytes())
            .await;
        let r = c.response().await.unwrap();
        assert_eq!(r.status, 200, "{target}: {}", r.head);
        assert_eq!(r.text(), format!("GET {forwarded} HTTP/1.1"), "{target}");
    }
}

#[tokio::test]
async fn a_length_beside_chunked_coding_is_not_passed_on() {
    // The chunks frame the body: the stale length must not cut it short (over TLS, where
    // hyper writes it) nor break the stream (HTTP/2).
    let gw = start(FIELDS.into()).await;
    let res = h2_get(gw.addr, "/both-framings").await;
    assert_eq!(res.headers().get("content-length"), None);
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap();
    assert_eq!(body.to_bytes(), "0123456789");
    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET /both-framings HTTP/1.1\r\nHost: gw\r\n\r\n")
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.header("content-length"), None, "{}", r.head);
    assert_eq!(r.text(), "0123456789");
}
