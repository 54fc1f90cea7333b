//! HTTP-level abuse through the real gateway (raw bytes on a TCP socket): slow headers and
//! bodies, oversized headers and bodies, chunked bodies, `Expect: 100-continue`, pipelining,
//! request-smuggling shapes (conflicting `Content-Length` / `Transfer-Encoding`, duplicate
//! lengths) and HTTP/2 prior knowledge. Each gets a clear status (or a closed connection),
//! and nothing reaches the upstream half-read: the fake upstream's record is checked.

#[path = "support/raw.rs"]
mod raw;
mod support;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS;
use raw::{head, Conn, VERDICT};
use support::*;

const CHAT: &str = "/v1/chat/completions";
/// An ungated route mmgate streams through without reading the body.
const UNGATED: &str = "/v1/audio/transcriptions";
const CLEAN: &str = r#"{"model":"tiny","messages":[]}"#;
const OFFENDING: &str = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"fps":1}}"#;
const LIMIT: usize = 1024;

/// Reject mode, a 1 KiB body limit, and short header and body timeouts.
async fn start() -> (FakeVllm, mmgate::server::Running) {
    let fake = FakeVllm::start().await;
    let policy = format!(
        "[limits]\nmax_body_bytes = {LIMIT}\nheader_timeout_ms = 300\nbody_timeout_ms = 300\n[gate]\ndefault = \"reject\"\n"
    );
    let gw = gateway(&policy, &fake).await;
    (fake, gw)
}

fn post(path: &str, body: &str) -> String {
    post_with(path, "", body)
}

/// A POST with extra header lines before its `Content-Length`.
fn post_with(path: &str, extra: &str, body: &str) -> String {
    format!(
        "{}{body}",
        head(path, &format!("{extra}Content-Length: {}\r\n", body.len()))
    )
}

#[tokio::test]
async fn slow_headers_are_cut_off_by_the_header_timeout_and_nothing_is_forwarded() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Le")
        .await;
    assert!(
        c.closed_within(VERDICT).await,
        "the gateway closes a connection whose headers do not arrive in time"
    );
    let sent = String::from_utf8_lossy(c.unread()).into_owned();
    assert!(
        sent.is_empty() || sent.starts_with("HTTP/1.1 408"),
        "closed silently or with 408, got {sent:?}"
    );
    assert!(fake.received().is_empty());
    // The gateway still serves.
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, CLEAN).as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
}

#[tokio::test]
async fn a_connection_that_never_sends_a_byte_is_closed_by_the_header_timeout() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    assert!(
        c.closed_within(VERDICT).await,
        "an idle new connection is closed (slowloris)"
    );
}

#[tokio::test]
async fn a_keep_alive_connection_idle_after_a_response_is_closed_by_the_header_timeout() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, CLEAN).as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    assert!(c.closed_within(VERDICT).await);
}

/// A gateway with a 300 ms header timeout in front of an upstream that holds each request
/// until given a permit.
async fn holding() -> (
    std::sync::Arc<tokio::sync::Semaphore>,
    FakeVllm,
    mmgate::server::Running,
) {
    let hold = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        hold: Some(hold.clone()),
        ..Default::default()
    })
    .await;
    let gw = gateway(
        "[limits]\nheader_timeout_ms = 300\n[gate]\ndefault = \"reject\"\n",
        &fake,
    )
    .await;
    (hold, fake, gw)
}

/// Waits for the upstream to hold a request, lets three header timeouts pass (the time
/// passing is what is under test, nothing waits on it for synchronisation), then lets the
/// upstream answer.
async fn answer_late(hold: &tokio::sync::Semaphore, fake: &FakeVllm) {
    eventually("the upstream to hold the request", || async move {
        !fake.received().is_empty()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    hold.add_permits(1);
}

#[tokio::test]
async fn an_answer_slower_than_the_header_timeout_is_not_cut_off() {
    // The header timeout times waits for a request head, never a request being answered
    // (a long generation), and it times the wait that follows the late answer.
    let (hold, fake, gw) = holding().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(post(CHAT, CLEAN).as_bytes()).await;
    answer_late(&hold, &fake).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        c.closed_within(VERDICT).await,
        "the idle wait after the answer is timed"
    );
}

#[tokio::test]
async fn a_slow_gated_body_gets_400_after_the_body_timeout_and_nothing_is_forwarded() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(head(CHAT, "Content-Length: 100\r\n").as_bytes())
        .await;
    c.write(br#"{"model":"tiny","#).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("not received within"), "{}", r.text());
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn oversized_headers_get_431_or_a_close_and_nothing_is_forwarded() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let big = format!("X-Big: {}\r\n", "a".repeat(128 * 1024));
    let _ = c
        .write_lossy(head(CHAT, &format!("{big}Content-Length: 2\r\n")).as_bytes())
        .await;
    let _ = c.write_lossy(b"{}").await;
    match c.response().await {
        Ok(r) => assert_eq!(r.status, 431, "{}", r.head),
        Err(e) => assert!(e.contains("closed"), "{e}"),
    }
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn a_declared_oversized_body_gets_413_before_it_is_sent_and_nothing_is_forwarded() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(head(CHAT, "Content-Length: 1000000000\r\n").as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.text().contains("1024"), "names the limit: {}", r.text());
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn an_oversized_chunked_body_without_length_gets_413_and_nothing_is_forwarded() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(head(CHAT, "Transfer-Encoding: chunked\r\n").as_bytes())
        .await;
    let chunk = format!("200\r\n{}\r\n", "x".repeat(0x200));
    for _ in 0..3 {
        if !c.write_lossy(chunk.as_bytes()).await {
            break;
        }
    }
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn chunked_bodies_with_extensions_and_trailers_are_inspected_whole() {
    let (fake, gw) = start().await;
    // A clean body in odd chunk sizes is forwarded as the concatenated bytes.
    let mut c = Conn::open(gw.addr).await;
    let mut req = head(CHAT, "Transfer-Encoding: chunked\r\n");
    for piece in [&CLEAN[..1], &CLEAN[1..9], &CLEAN[9..]] {
        req.push_str(&format!("{:x};ext=1\r\n{piece}\r\n", piece.len()));
    }
    req.push_str("0\r\nX-Trailer: t\r\n\r\n");
    c.write(req.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    assert_eq!(fake.received()[0].body, Bytes::from(CLEAN));
    // An offending body split so that neither chunk holds the field name whole is refused.
    fake.clear();
    let split = OFFENDING.find("mm_proc").unwrap() + 4;
    let mut req = head(CHAT, "Transfer-Encoding: chunked\r\n");
    for piece in [&OFFENDING[..split], &OFFENDING[split..]] {
        req.push_str(&format!("{:x}\r\n{piece}\r\n", piece.len()));
    }
    req.push_str("0\r\n\r\n");
    c.write(req.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), GATE_BODY_MM_PROCESSOR_KWARGS);
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn expect_100_continue_is_honoured_and_an_oversized_one_is_refused_without_continue() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let h = head(
        CHAT,
        &format!(
            "Expect: 100-continue\r\nContent-Length: {}\r\n",
            CLEAN.len()
        ),
    );
    c.write(h.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 100, "100 Continue before the body");
    c.write(CLEAN.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    assert_eq!(fake.received()[0].body, Bytes::from(CLEAN));

    fake.clear();
    let mut c = Conn::open(gw.addr).await;
    let h = head(CHAT, "Expect: 100-continue\r\nContent-Length: 5000\r\n");
    c.write(h.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(
        r.status, 413,
        "refused at once, no 100 Continue: {}",
        r.head
    );
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_each_judged_on_its_own() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let all = [
        post(CHAT, CLEAN),
        post(CHAT, OFFENDING),
        post(UNGATED, "{}"),
        post(CHAT, CLEAN),
    ]
    .concat();
    c.write(all.as_bytes()).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(c.response().await.unwrap().status);
    }
    assert_eq!(statuses, [200, 400, 200, 200]);
    let got: Vec<_> = fake.received().iter().map(|r| r.body.clone()).collect();
    assert_eq!(
        got,
        [Bytes::from(CLEAN), Bytes::from("{}"), Bytes::from(CLEAN)]
    );
}

/// Sends a smuggling-shaped request and checks it is refused (or the connection closed)
/// and that the upstream received nothing.
async fn refused_and_not_forwarded(path: &str, headers: &str, body: &str) {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let _ = c
        .write_lossy(format!("{}{body}", head(path, headers)).as_bytes())
        .await;
    let verdict = c.response().await;
    let received = fake.received();
    assert!(
        received.is_empty(),
        "{path} with {headers:?} reached the upstream: {:?}; client got {verdict:?}",
        received
            .iter()
            .map(|r| (r.headers.clone(), r.body.clone()))
            .collect::<Vec<_>>()
    );
    match verdict {
        Ok(r) => {
            assert!(
                r.status == 400,
                "{path} with {headers:?}: refused with 400, got {}",
                r.head
            );
            // Answered by the HTTP server or by the gateway: counted either way.
            let text = send(&client(), gw.admin, "GET", "/metrics", &[], Bytes::new())
                .await
                .text();
            let framing = r#"mmgate_refusals_total{pool="none",reason="framing"} 1"#;
            assert!(text.contains(framing), "{path} with {headers:?}: {text}");
        }
        Err(e) => assert!(e.contains("closed"), "{e}"),
    }
}

const SMUGGLE: &str = "5\r\n{\"a\":\r\n0\r\n\r\n";

#[tokio::test]
async fn a_badly_chunked_body_is_refused_in_vllms_words_and_not_forwarded() {
    // Read whole on a gated route, streamed through on an ungated one: either way vLLM's
    // server would answer "Invalid HTTP request received." and close the connection.
    for path in [CHAT, UNGATED] {
        for chunks in [
            format!("{:x}\r\n{CLEAN}XX0\r\n\r\n", CLEAN.len()),
            format!("{:x}\r\n{CLEAN}\r\nzz\r\n{CLEAN}\r\n0\r\n\r\n", CLEAN.len()),
            // vLLM's server takes no whitespace in a size line (RFC 9112 would, before `;`).
            format!("{:x} \r\n{CLEAN}\r\n0\r\n\r\n", CLEAN.len()),
            format!("{:x}; a=b\r\n{CLEAN}\r\n0\r\n\r\n", CLEAN.len()),
        ] {
            let (fake, gw) = start().await;
            let mut c = Conn::open(gw.addr).await;
            let te = "Transfer-Encoding: chunked\r\n";
            c.write(format!("{}{chunks}", head(path, te)).as_bytes())
                .await;
            let r = c.response().await.unwrap();
            assert_eq!(r.status, 400, "{path} {chunks:?}: {}", r.head);
            assert_eq!(r.text(), "Invalid HTTP request received.");
            assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
            assert_eq!(r.header("connection"), Some("close"), "{}", r.head);
            assert!(c.closed_within(VERDICT).await, "closed after the refusal");
            assert!(fake.received().is_empty(), "nothing reaches the upstream");
            // Refused before a pool is chosen when read whole, after when streamed.
            let text = send(&client(), gw.admin, "GET", "/metrics", &[], Bytes::new())
                .await
                .text();
            let refused: f64 = text
                .lines()
                .filter(|l| {
                    l.starts_with("mmgate_refusals_total{") && l.contains(r#"reason="framing""#)
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            assert_eq!(refused, 1.0, "counted as a framing refusal");
        }
    }
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_refused_and_nothing_behind_it_is_read() {
    // RFC 9112 §6.3 lets a server decode such a body as chunked (hyper does, and drops the
    // length before the handler sees it); a gateway in front of another parser refuses it.
    for (path, decoded) in [(CHAT, CLEAN), (UNGATED, "{\"a\":")] {
        for order in [
            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
            "transfer-encoding: chunked\r\ncontent-length: 4\r\n",
            // Lengths hyper would skip after `Transfer-Encoding`.
            "Transfer-Encoding: chunked\r\nContent-Length: 4, 4\r\n",
            "Transfer-Encoding: chunked\r\nContent-Length: abc\r\n",
            "Content-Length: 3\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        ] {
            let (fake, gw) = start().await;
            let mut c = Conn::open(gw.addr).await;
            let chunked = format!("{:x}\r\n{decoded}\r\n0\r\n\r\n", decoded.len());
            let smuggled = post(CHAT, OFFENDING);
            c.write(format!("{}{chunked}{smuggled}", head(path, order)).as_bytes())
                .await;
            let r = c.response().await.unwrap();
            assert_eq!(r.status, 400, "{path} {order:?}: {}", r.head);
            assert_eq!(r.text(), "Invalid HTTP request received.", "vLLM's words");
            assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
            assert_eq!(r.header("connection"), Some("close"), "{}", r.head);
            assert!(c.closed_within(VERDICT).await, "closed after the refusal");
            assert!(fake.received().is_empty(), "nothing reaches the upstream");
            let name = r#"mmgate_refusals_total{pool="none",reason="framing"}"#;
            let refused = metric(&client(), gw.admin, name).await;
            assert_eq!(refused, Some(1.0), "counted as a framing refusal");
        }
    }
}

#[tokio::test]
async fn the_ambiguous_request_is_found_behind_keep_alive_requests() {
    // Two well-framed requests (one chunked, one whose body looks like a request head) are
    // served; the third, with both headers, is refused.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let chunked = format!(
        "{}{:x}\r\n{CLEAN}\r\n0\r\n\r\n",
        head(UNGATED, "Transfer-Encoding: chunked\r\n"),
        CLEAN.len()
    );
    let lookalike = "GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let fixed = post(UNGATED, lookalike);
    let ambiguous = format!(
        "{}0\r\n\r\n",
        head(CHAT, "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
    );
    c.write(format!("{chunked}{fixed}{ambiguous}").as_bytes())
        .await;
    for expected in [200, 200, 400] {
        let r = c.response().await.unwrap();
        assert_eq!(r.status, expected, "{}", r.head);
    }
    let got = fake.received();
    assert_eq!(got.len(), 2, "the first two, whole");
    assert_eq!(got[0].body, Bytes::from(CLEAN));
    assert_eq!(got[1].body, Bytes::from(lookalike));
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_refused_on_a_gated_route() {
    refused_and_not_forwarded(
        CHAT,
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
        &format!("{:x}\r\n{CLEAN}\r\n0\r\n\r\n", CLEAN.len()),
    )
    .await;
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_refused_on_an_ungated_route() {
    refused_and_not_forwarded(
        UNGATED,
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
        SMUGGLE,
    )
    .await;
}

#[tokio::test]
async fn transfer_encodings_other_than_chunked_last_are_refused() {
    for te in [
        "gzip",
        "chunked, gzip",
        "chunked\r\nTransfer-Encoding: gzip",
    ] {
        refused_and_not_forwarded(CHAT, &format!("Transfer-Encoding: {te}\r\n"), SMUGGLE).await;
    }
}

#[tokio::test]
async fn duplicate_differing_content_lengths_are_refused() {
    for headers in [
        "Content-Length: 4\r\nContent-Length: 5\r\n",
        "Content-Length: 4, 5\r\n",
        "Content-Length: +4\r\n",
        "Content-Length: -1\r\n",
    ] {
        refused_and_not_forwarded(CHAT, headers, "{\"a\":1}").await;
        refused_and_not_forwarded(UNGATED, headers, "{\"a\":1}").await;
    }
}

#[tokio::test]
async fn http2_prior_knowledge_is_served_with_the_same_gate() {
    let (fake, gw) = start().await;
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let send = |body: &'static str| {
        let req = http::Request::post(format!("http://{}{CHAT}", gw.addr))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let res = h2.request(req);
        async move {
            let res = tokio::time::timeout(VERDICT, res).await.unwrap().unwrap();
            assert_eq!(res.version(), http::Version::HTTP_2);
            let status = res.status();
            (status, res.into_body().collect().await.unwrap().to_bytes())
        }
    };
    let (status, body) = send(OFFENDING).await;
    assert_eq!(status, 400);
    assert_eq!(body, Bytes::from(GATE_BODY_MM_PROCESSOR_KWARGS));
    assert!(fake.received().is_empty());
    let (status, _) = send(CLEAN).await;
    assert_eq!(status, 200);
    assert_eq!(fake.received()[0].body, Bytes::from(CLEAN));
}

#[tokio::test]
async fn a_body_with_more_members_than_mmgate_records_is_refused_in_strip_and_reject() {
    // Every member of the top-level object is recorded: past MAX_MEMBERS, the body is not
    // inspected (a bound on what one body can take).
    let fake = FakeVllm::start().await;
    let many: Vec<String> = (0..mmgate::inspect::MAX_MEMBERS)
        .map(|i| format!(r#""k{i}":0"#))
        .collect();
    let body = format!(r#"{{{},"mm_processor_kwargs":{{"a":1}}}}"#, many.join(","));
    let c = client();
    for (mode, forwarded) in [("reject", false), ("strip", false), ("shadow", true)] {
        fake.clear();
        let gw = gateway(&format!("[gate]\ndefault = \"{mode}\"\n"), &fake).await;
        let r = post_json(&c, gw.addr, "/v1/completions", &body).await;
        if forwarded {
            assert_eq!(r.status, 200, "{mode}");
        } else {
            assert_eq!(r.status, 400, "{mode}");
            assert!(r.text().contains("more than 10000 members"), "{}", r.text());
        }
        assert_eq!(fake.received().len(), usize::from(forwarded), "{mode}");
    }
}

/// A gateway in front of a fake vLLM whose streamed answers run to 200,000 events (some
/// 20 MB, more than the loopback's socket buffers hold), with `limits` lines added.
async fn long_streams(limits: &str) -> (FakeVllm, mmgate::server::Running) {
    let fake = FakeVllm::start_with(FakeOpts {
        sse_events: Some(200_000),
        ..Default::default()
    })
    .await;
    let gw = gateway(&format!("[limits]\n{limits}\n"), &fake).await;
    (fake, gw)
}

#[tokio::test]
async fn a_client_that_takes_none_of_its_answer_is_let_go_after_the_send_timeout() {
    // Its request holds a permit, gauges and the upstream exchange while the answer is
    // written: a client that stops reading must not hold them for ever.
    let (_fake, gw) = long_streams("send_timeout_ms = 300").await;
    let mut c = Conn::open(gw.addr).await;
    let body = r#"{"model":"tiny","messages":[],"stream":true}"#;
    c.write(post(CHAT, body).as_bytes()).await;
    // The client reads nothing; the gateway gives up on it and lets the request go.
    in_flight_then_let_go(gw.admin).await;
    drop(c);
}

#[tokio::test]
async fn an_http2_stream_left_unread_is_let_go_while_its_connection_serves_others() {
    // The client reads its connection (other streams go on) but never this stream's answer,
    // so that stream's flow-control window stays shut and no write of the socket waits.
    let (_fake, gw) = long_streams("send_timeout_ms = 300").await;
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let post = |body: &'static str| {
        http::Request::post(format!("http://{}{CHAT}", gw.addr))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };
    let stream = r#"{"model":"tiny","messages":[],"stream":true}"#;
    let unread = h2.request(post(stream)).await.unwrap();
    assert_eq!(unread.version(), http::Version::HTTP_2);
    // Its head came, so it was in flight: it is let go.
    let_go(gw.admin).await;
    // The same connection still answers.
    let res = h2.request(post(CLEAN)).await.unwrap();
    assert_eq!(res.status(), 200);
    drop(unread);
}

#[tokio::test]
async fn an_http2_one_frame_answer_left_unread_is_let_go_too() {
    // A JSON answer is one frame: hyper takes it and holds it while the stream's window
    // stays shut (here shut from the start), and never asks the body again.
    let (_fake, gw) = long_streams("send_timeout_ms = 300").await;
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .http2_initial_stream_window_size(0)
        .build_http();
    let req = http::Request::post(format!("http://{}{CHAT}", gw.addr))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(CLEAN)))
        .unwrap();
    let unread = h2.request(req).await.unwrap();
    assert_eq!(unread.status(), 200);
    let_go(gw.admin).await;
    drop(unread);
}

#[tokio::test]
async fn an_http2_connect_is_refused_and_not_forwarded() {
    let (fake, gw) = start().await;
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let req = http::Request::connect(format!("http://{}", gw.addr))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let res = h2.request(req).await.unwrap();
    assert_eq!(res.status(), 501);
    assert!(fake.received().is_empty(), "nothing reaches the upstream");
}

#[tokio::test]
async fn an_http2_connection_takes_at_most_32_streams_at_once() {
    // Each stream may buffer a body before admission: the server's SETTINGS bound them.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_fake, gw) = start().await;
    let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    // The server's first frame is its SETTINGS: 9 bytes of header, then 6 per setting.
    let mut header = [0u8; 9];
    s.read_exact(&mut header).await.unwrap();
    assert_eq!(header[3], 0x4, "a SETTINGS frame first");
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).await.unwrap();
    let max_streams = payload
        .chunks(6)
        .find(|e| e[..2] == [0, 0x3])
        .map(|e| u32::from_be_bytes([e[2], e[3], e[4], e[5]]));
    assert_eq!(max_streams, Some(32));
}

#[tokio::test]
async fn idle_admin_connections_are_timed_and_bounded() {
    // The admin listener shares the process's file descriptors with the data plane.
    let (_fake, gw) = start().await;
    let mut silent = Conn::open(gw.admin).await;
    assert!(
        silent.closed_within(VERDICT).await,
        "a connection that sends nothing"
    );
    let mut half = Conn::open(gw.admin).await;
    half.write(b"GET /metrics HTTP/1.1\r\nHost: a\r\n").await;
    assert!(half.closed_within(VERDICT).await, "half a head");

    let fake = FakeVllm::start().await;
    let gw = gateway("[limits]\nheader_timeout_ms = 60000\n", &fake).await;
    let mut idle = Vec::new();
    for _ in 0..64 {
        idle.push(Conn::open(gw.admin).await);
    }
    let mut next = Conn::open(gw.admin).await;
    next.write(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        .await;
    let waiting = next
        .response_within(std::time::Duration::from_millis(300))
        .await;
    assert!(
        waiting.is_err(),
        "64 connections are open: the next one waits"
    );
    drop(idle.pop());
    let answer = next.response_within(VERDICT).await.unwrap();
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_by_the_header_timeout() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    // The preface and an empty SETTINGS frame, then nothing.
    c.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await;
    assert!(c.closed_within(VERDICT).await);
}

#[tokio::test]
async fn an_http2_answer_slower_than_the_header_timeout_is_not_cut_off() {
    let (hold, fake, gw) = holding().await;
    let h2: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let req = http::Request::post(format!("http://{}{CHAT}", gw.addr))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(CLEAN)))
        .unwrap();
    let res = tokio::spawn(h2.request(req));
    answer_late(&hold, &fake).await;
    let res = tokio::time::timeout(VERDICT, res)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.version(), http::Version::HTTP_2);
}

#[tokio::test]
async fn too_many_header_lines_get_431_or_a_close_and_nothing_is_forwarded() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let _ = c
        .write_lossy(post_with(CHAT, &many, CLEAN).as_bytes())
        .await;
    match c.response().await {
        Ok(r) => assert_eq!(r.status, 431, "{}", r.head),
        Err(e) => assert!(e.contains("closed"), "{e}"),
    }
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn headers_trickled_a_byte_at_a_time_are_cut_off_by_the_header_timeout() {
    // The header timeout bounds the whole head, not the gap between bytes: a client that
    // keeps sending one byte every 20 ms never gets its head in.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let started = tokio::time::Instant::now();
    let endless = format!(
        "POST {CHAT} HTTP/1.1\r\nHost: gw\r\nX-Slow: {}",
        "a".repeat(10_000)
    );
    let mut pace = tokio::time::interval(std::time::Duration::from_millis(20));
    let mut closed = false;
    for b in endless.as_bytes() {
        pace.tick().await;
        if !c.write_lossy(&[*b]).await || started.elapsed() > VERDICT {
            closed = true;
            break;
        }
    }
    assert!(closed, "the head never ends, but the connection does");
    assert!(
        c.closed_within(VERDICT).await,
        "the gateway closed the connection"
    );
    assert!(
        started.elapsed() < VERDICT,
        "cut off by the 300 ms header timeout, not by the test's own deadline"
    );
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn a_gated_body_trickled_a_byte_at_a_time_gets_400_after_the_body_timeout() {
    // Likewise the body timeout bounds the whole gated body.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let body = format!(r#"{{"model":"tiny","pad":"{}"}}"#, "a".repeat(900));
    c.write(head(CHAT, &format!("Content-Length: {}\r\n", body.len())).as_bytes())
        .await;
    let started = tokio::time::Instant::now();
    let mut pace = tokio::time::interval(std::time::Duration::from_millis(20));
    for b in body.as_bytes() {
        pace.tick().await;
        if !c.write_lossy(&[*b]).await || started.elapsed() > VERDICT {
            break;
        }
        if !c.unread().is_empty() || c.closed_within(std::time::Duration::ZERO).await {
            break;
        }
    }
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("not received within 300 ms"),
        "{}",
        r.text()
    );
    assert!(started.elapsed() < VERDICT);
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn the_rest_of_a_refused_chunked_body_is_never_read_as_a_request() {
    // A 413 is sent before the body is read to its end. Whatever follows on the
    // connection (here, a whole offending request hidden in the oversized body's last
    // chunk) is never parsed as a request of its own and never forwarded.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let hidden = post(CHAT, OFFENDING);
    let mut req = head(CHAT, "Transfer-Encoding: chunked\r\n");
    let filler = "x".repeat(LIMIT);
    req.push_str(&format!("{:x}\r\n{filler}\r\n", filler.len()));
    req.push_str(&format!("{:x}\r\n{hidden}\r\n0\r\n\r\n", hidden.len()));
    req.push_str(&post(UNGATED, CLEAN));
    let _ = c.write_lossy(req.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    // Either the connection is closed, or the next request on it is the real one.
    match c.response().await {
        Ok(next) => {
            assert_eq!(next.status, 200, "{}", next.head);
            let got = fake.received();
            assert_eq!(got.len(), 1, "only the request after the body");
            assert_eq!(got[0].path, UNGATED);
        }
        Err(e) => {
            assert!(e.contains("closed"), "{e}");
            assert!(fake.received().is_empty(), "nothing reaches the upstream");
        }
    }
}

#[tokio::test]
async fn http2_bodies_over_the_limit_get_413_with_or_without_a_length() {
    use futures_util::stream;
    use http_body_util::combinators::BoxBody;
    use http_body_util::StreamBody;

    let (fake, gw) = start().await;
    type H2Body = BoxBody<Bytes, std::convert::Infallible>;
    let h2: Client<_, H2Body> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let big = format!(r#"{{"model":"tiny","pad":"{}"}}"#, "a".repeat(2 * LIMIT));
    let sized: H2Body = Full::new(Bytes::from(big.clone())).boxed();
    // Without a length: three DATA frames of an unknown total.
    let pieces: Vec<Result<http_body::Frame<Bytes>, std::convert::Infallible>> = big
        .as_bytes()
        .chunks(big.len() / 3 + 1)
        .map(|p| Ok(http_body::Frame::data(Bytes::copy_from_slice(p))))
        .collect();
    let unsized_: H2Body = StreamBody::new(stream::iter(pieces)).boxed();
    for body in [sized, unsized_] {
        let req = http::Request::post(format!("http://{}{CHAT}", gw.addr))
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let res = tokio::time::timeout(VERDICT, h2.request(req))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(res.version(), http::Version::HTTP_2);
        assert_eq!(res.status(), 413);
    }
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn a_websocket_handshake_is_forwarded_with_its_upgrade_and_other_upgrades_are_ignored() {
    // Upgrades are hop-by-hop, but a WebSocket handshake goes on with its own (tests/
    // websocket.rs): vLLM's `/v1/realtime` answers it, here the fake's 403 for a path
    // with no WebSocket route.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 403, "{}", r.head);
    assert_eq!(fake.received()[0].headers["upgrade"], "WebSocket");
    // An h2c upgrade (curl --http2 over plain HTTP) is answered as HTTP/1.1, as before.
    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 200, "{}", r.head);
}
