//! mmgate's own HTTP/1.1 server (plain TCP), through the real gateway with raw bytes: HTTP/1.0
//! clients, `Connection: close`, bodies the gateway answers without reading, streamed
//! responses, and the fields every response carries. (Abuse and smuggling shapes are in
//! tests/abuse.rs, clients that leave in tests/faults.rs.)

#[path = "support/raw.rs"]
mod raw;
mod support;

use raw::{head, Conn, VERDICT};
use support::*;

const CHAT: &str = "/v1/chat/completions";
const CLEAN: &str = r#"{"model":"tiny","messages":[]}"#;
const STREAM: &str = r#"{"model":"tiny","messages":[],"stream":true}"#;
const LIMIT: usize = 1024;

async fn start() -> (FakeVllm, mmgate::server::Running) {
    let fake = FakeVllm::start().await;
    let policy = format!("[limits]\nmax_body_bytes = {LIMIT}\n[gate]\ndefault = \"reject\"\n");
    let gw = gateway(&policy, &fake).await;
    (fake, gw)
}

fn post(version: &str, extra: &str, body: &str) -> String {
    format!(
        "POST {CHAT} HTTP/{version}\r\nHost: gw\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn an_http10_client_gets_an_http10_answer_and_the_connection_closes() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(post("1.0", "", CLEAN).as_bytes()).await;
    let r = c.response().await.unwrap();
    assert!(r.head.starts_with("HTTP/1.0 200 OK"), "{}", r.head);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(VERDICT).await);
    assert_eq!(fake.received().len(), 1);
}

/// uvicorn keeps no HTTP/1.0 connection, even one that asks (`keep_alive = http_version !=
/// "1.0" and ...`; seen on vLLM's server): the answer says `connection: close`.
#[tokio::test]
async fn an_http10_client_asking_for_keep_alive_is_answered_and_closed_as_uvicorn_does() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let two = post("1.0", "Connection: keep-alive\r\n", CLEAN).repeat(2);
    c.write(two.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert!(r.head.starts_with("HTTP/1.0 200"), "{}", r.head);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(VERDICT).await);
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn http_2_0_and_0_9_request_lines_and_a_chunked_http10_body_are_read_as_vllm_reads_them() {
    // llhttp takes `HTTP/2.0` and `HTTP/0.9` request lines and reads them as HTTP/1.0
    // (kept alive when asked), and a chunked body on any of them; the latter closes.
    let (fake, gw) = start().await;
    for version in ["2.0", "0.9"] {
        let mut c = Conn::open(gw.addr).await;
        for _ in 0..2 {
            c.write(post(version, "Connection: keep-alive\r\n", CLEAN).as_bytes())
                .await;
            let r = c.response().await.unwrap();
            assert!(r.head.starts_with("HTTP/1.0 200"), "{}", r.head);
        }
    }
    let chunked = format!(
        "POST {CHAT} HTTP/1.0\r\nHost: gw\r\nContent-Type: application/json\r\n\
         Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{CLEAN}\r\n0\r\n\r\n",
        CLEAN.len()
    );
    let mut c = Conn::open(gw.addr).await;
    c.write(chunked.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert!(r.head.starts_with("HTTP/1.0 200"), "{}", r.head);
    assert!(
        c.closed_within(VERDICT).await,
        "closed after a chunked HTTP/1.0 body"
    );
    let got = fake.received();
    assert_eq!(got.len(), 5);
    assert_eq!(got[4].body, bytes::Bytes::from(CLEAN));
}

#[tokio::test]
async fn a_stream_to_an_http10_client_runs_to_the_close_and_to_http11_is_chunked() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(post("1.0", "", STREAM).as_bytes()).await;
    let r = c.response().await.unwrap();
    assert!(r.head.starts_with("HTTP/1.0 200"), "{}", r.head);
    assert_eq!(r.header("transfer-encoding"), None);
    assert_eq!(r.header("content-length"), None);
    let events = String::from_utf8(r.body).unwrap();
    assert!(events.starts_with(&String::from_utf8_lossy(&sse_event(0))[..]));
    assert!(events.ends_with("data: [DONE]\n\n"), "{events}");

    let mut c = Conn::open(gw.addr).await;
    c.write(post("1.1", "", STREAM).as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.header("transfer-encoding"), Some("chunked"), "{}", r.head);
    assert!(r.text().ends_with("data: [DONE]\n\n"));
    // The connection carries the next request.
    c.write(post("1.1", "", CLEAN).as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
}

#[tokio::test]
async fn connection_close_is_honoured() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(post("1.1", "Connection: close\r\n", CLEAN).as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(VERDICT).await);
}

#[tokio::test]
async fn an_unread_body_that_has_arrived_is_skipped_and_the_connection_kept() {
    // A declared oversized body is refused before it is read. When it has arrived whole
    // with its head, it is skipped and the next request on the connection is served.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let big = format!(r#"{{"model":"tiny","pad":"{}"}}"#, "a".repeat(2 * LIMIT));
    let both = format!("{}{}", post("1.1", "", &big), post("1.1", "", CLEAN));
    c.write(both.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), None, "{}", r.head);
    assert_eq!(c.response().await.unwrap().status, 200);
    assert_eq!(fake.received().len(), 1);
    assert_eq!(fake.received()[0].body, bytes::Bytes::from(CLEAN));
}

#[tokio::test]
async fn an_unread_body_still_on_its_way_closes_the_connection_after_the_answer() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(head(CHAT, "Content-Length: 5000\r\n").as_bytes())
        .await;
    c.write(b"{\"model\":").await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"), "{}", r.head);
    // What the client goes on sending is read and dropped, never taken as a request.
    let _ = c.write_lossy(post("1.1", "", CLEAN).as_bytes()).await;
    assert!(c.closed_within(VERDICT).await);
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn every_answer_carries_a_date_and_its_framing() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let offending = r#"{"model":"tiny","messages":[],"media_io_kwargs":{"a":1}}"#;
    for body in [CLEAN, offending] {
        c.write(post("1.1", "", body).as_bytes()).await;
        let r = c.response().await.unwrap();
        let date = r.header("date").expect("a date");
        assert!(date.ends_with(" GMT") && date.len() == 29, "{date}");
        assert_eq!(r.header("content-length"), Some(&*r.body.len().to_string()));
    }
}

#[tokio::test]
async fn a_head_over_the_limit_gets_431_and_a_bad_one_400() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let endless = format!("GET / HTTP/1.1\r\nX-Long: {}", "a".repeat(70 * 1024));
    let _ = c.write_lossy(endless.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 431, "{}", r.head);
    assert_eq!(r.header("connection"), Some("close"));

    let mut c = Conn::open(gw.addr).await;
    c.write(b"GET / HTTP/1.1\r\nBad Name: v\r\n\r\n").await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 400, "{}", r.head);
    // vLLM's server (uvicorn) answers a request it cannot parse in these words.
    assert_eq!(r.text(), "Invalid HTTP request received.");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(c.closed_within(VERDICT).await);
    assert!(fake.received().is_empty());
}

/// Offending chat bodies sent with each request line: what vLLM's server routes is gated
/// (the gate's 400 here), what it cannot parse gets its "Invalid HTTP request received.",
/// and nothing of either reaches the upstream.
#[tokio::test]
async fn request_lines_are_read_as_vllms_server_reads_them() {
    let (fake, gw) = start().await;
    let offending = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    let gated = [
        "POST  /v1/chat/completions   HTTP/1.1",
        "POST http://gw/v1/chat/completions HTTP/1.1",
        "POST https://u@gw:65535/v1/chat/completions?x#y HTTP/1.1",
        r#"POST /v1/chat/completions?q={"a":"<b>"} HTTP/1.1"#,
    ];
    let unparsable = [
        "POST /v1/chat/completions HTTP/1.1 ",
        "POST /v1/chat/completions\u{e9} HTTP/1.1",
        "POST /v1/chat/completions?q=\u{e9} HTTP/1.1",
        "POST http://gw HTTP/1.1",
        "POST http://gw:65536/v1/chat/completions HTTP/1.1",
        "POST gw:80 HTTP/1.1",
        "POST v1/chat/completions HTTP/1.1",
    ];
    for (lines, answer) in [
        (&gated[..], "mm_processor_kwargs are disabled"),
        (&unparsable[..], "Invalid HTTP request received."),
    ] {
        for line in lines {
            let wire = format!(
                "{line}\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{offending}",
                offending.len()
            );
            let mut c = Conn::open(gw.addr).await;
            c.write(wire.as_bytes()).await;
            let r = c.response().await.unwrap();
            assert_eq!(r.status, 400, "{line:?}: {}", r.head);
            assert!(r.text().contains(answer), "{line:?}: {}", r.text());
        }
    }
    let bare_lf = post("1.1", "", CLEAN).replace("\r\n", "\n");
    let mut c = Conn::open(gw.addr).await;
    c.write(bare_lf.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(
        (r.status, r.text()),
        (400, "Invalid HTTP request received.".into())
    );
    assert!(fake.received().is_empty());

    // What vLLM's server takes and `http::Uri` does not goes on percent-encoded, which vLLM
    // decodes to the same path and query.
    let wire = post("1.1", "", CLEAN).replacen(CHAT, r#"/v1/chat/completions?q="<`>""#, 1);
    let mut c = Conn::open(gw.addr).await;
    c.write(wire.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    let received = fake.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/v1/chat/completions?q=%22%3C%60%3E%22");
}

#[tokio::test]
async fn a_request_with_another_behind_it_survives_the_clients_half_close() {
    // A client that sent its requests and shut its side down: the one answered first is
    // not taken for a client that left, since the next is already there. (The last one
    // is: with nothing behind it, a closed side is how a client that leaves looks.)
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let both = format!("{}{}", post("1.1", "", CLEAN), post("1.1", "", CLEAN));
    c.write(both.as_bytes()).await;
    tokio::io::AsyncWriteExt::shutdown(&mut c.stream)
        .await
        .unwrap();
    assert_eq!(c.response().await.unwrap().status, 200);
    assert!(c.closed_within(VERDICT).await);
    assert!(!fake.received().is_empty());
}

#[tokio::test]
async fn a_client_that_resets_with_a_request_behind_it_is_gone() {
    // Unlike a half-close, a reset says the client will read nothing more, whatever it
    // pipelined: the request it waits for lets go of the upstream and its permits.
    let hold = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        hold: Some(hold.clone()),
        ..Default::default()
    })
    .await;
    let gw = gateway("", &fake).await;
    let mut c = Conn::open(gw.addr).await;
    let both = format!("{}{}", post("1.1", "", CLEAN), post("1.1", "", CLEAN));
    c.write(both.as_bytes()).await;
    let upstream = &fake;
    eventually("the upstream to hold the request", || async move {
        upstream.received().len() == 1
    })
    .await;
    c.stream.set_zero_linger().unwrap();
    drop(c);
    let_go(gw.admin).await;
}

#[tokio::test]
async fn a_drain_closes_idle_connections_and_lets_the_request_in_flight_finish() {
    let hold = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        hold: Some(hold.clone()),
        ..Default::default()
    })
    .await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    // Idle keep-alive connections (handed to the worker threads in turn, so some share a
    // thread with the next one), then a request the upstream holds.
    hold.add_permits(1);
    let mut idle = Vec::new();
    for _ in 0..8 {
        let mut c = Conn::open(gw.addr).await;
        c.write(post("1.1", "", CLEAN).as_bytes()).await;
        assert_eq!(c.response().await.unwrap().status, 200);
        idle.push(c);
    }
    // And connections that have not sent a byte yet.
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(Conn::open(gw.addr).await);
    }
    assert_eq!(hold.forget_permits(1), 1);
    let mut busy = Conn::open(gw.addr).await;
    busy.write(post("1.1", "", CLEAN).as_bytes()).await;
    let upstream = &fake;
    eventually("the upstream to hold the request", || async move {
        upstream.received().len() == 9
    })
    .await;
    gw.shutdown_handle().shutdown();
    for c in idle.iter_mut().chain(&mut silent) {
        assert!(c.closed_within(VERDICT).await, "the idle ones close");
    }
    hold.add_permits(1);
    let r = busy.response().await.unwrap();
    assert_eq!(r.status, 200, "the request in flight is answered");
    assert_eq!(r.header("connection"), Some("close"), "{}", r.head);
    assert!(busy.closed_within(VERDICT).await);
    gw.wait().await;
}

#[tokio::test]
async fn expect_100_continue_on_a_streamed_route_sends_continue_then_forwards_the_body() {
    // An ungated route streams the body to the upstream as it comes: the upstream client
    // asks for the body, `100 Continue` goes out, and the body follows through.
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let body = r#"{"file":"abc"}"#;
    assert_eq!(
        continued(&mut c, "/v1/audio/transcriptions", body).await,
        200
    );
    assert_eq!(fake.received()[0].body, bytes::Bytes::from(body));
}

#[tokio::test]
async fn a_body_sent_without_waiting_for_100_continue_still_gets_it_first() {
    // vLLM's server sends `100 Continue` when the body is first asked for, whether or not it
    // has come: a client that did not wait sees it before the answer, from both.
    let (fake, gw) = start().await;
    let offending = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    for (body, status, chunked) in [
        (offending, 400, false),
        (CLEAN, 200, false),
        (CLEAN, 200, true),
    ] {
        let framing = if chunked {
            "Transfer-Encoding: chunked\r\n".to_string()
        } else {
            format!("Content-Length: {}\r\n", body.len())
        };
        let sent = if chunked {
            format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len())
        } else {
            body.to_string()
        };
        let mut c = Conn::open(gw.addr).await;
        let h = head(CHAT, &format!("Expect: 100-continue\r\n{framing}"));
        c.write(format!("{h}{sent}").as_bytes()).await;
        assert_eq!(c.response().await.unwrap().status, 100);
        assert_eq!(c.response().await.unwrap().status, status, "{body}");
    }
    assert_eq!(fake.received().len(), 2);
}

#[tokio::test]
async fn an_expectation_on_a_forwarded_body_is_the_upstreams_to_meet() {
    // vLLM's server sends `100 Continue` as a route reads the body; its API-key check
    // answers 401 unread, and sends none. A body mmgate forwards unread waits for the
    // upstream's `100 Continue`; one mmgate reads itself is forwarded whole, without `Expect`.
    let fake = FakeVllm::with_api_key("sk-1").await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    let upload = "0123456789";
    let expecting = |path: &str, key: &str, len: usize| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let ungated = "/v1/audio/transcriptions";

    let mut c = Conn::open(gw.addr).await;
    c.write(expecting(ungated, "wrong", upload.len()).as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(
        r.status, 401,
        "the upstream's answer, no 100 Continue: {}",
        r.head
    );
    assert!(
        c.closed_within(VERDICT).await,
        "the unsent body is not waited for"
    );

    let mut c = Conn::open(gw.addr).await;
    c.write(expecting(ungated, "sk-1", upload.len()).as_bytes())
        .await;
    assert_eq!(c.response().await.unwrap().status, 100);
    c.write(upload.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    c.write(expecting(CHAT, "sk-1", CLEAN.len()).as_bytes())
        .await;
    assert_eq!(c.response().await.unwrap().status, 100);
    c.write(CLEAN.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);

    let got = fake.received();
    assert_eq!(got.len(), 2, "the refused upload never reached a route");
    assert_eq!(
        (&got[0].path[..], &got[0].body[..]),
        (ungated, upload.as_bytes())
    );
    assert_eq!(got[0].headers["expect"], "100-continue");
    assert_eq!(
        (&got[1].path[..], &got[1].body[..]),
        (CHAT, CLEAN.as_bytes())
    );
    assert!(
        got[1].headers.get("expect").is_none(),
        "{:?}",
        got[1].headers
    );
}

#[tokio::test]
async fn an_http10_clients_expectation_is_ignored_and_not_passed_on() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let upload = "0123456789";
    c.write(
        format!(
            "POST /v1/audio/transcriptions HTTP/1.0\r\nExpect: 100-continue\r\n\
             Content-Length: {}\r\n\r\n{upload}",
            upload.len()
        )
        .as_bytes(),
    )
    .await;
    let r = c.response().await.unwrap();
    assert!(
        r.head.starts_with("HTTP/1.0 200"),
        "no 100 Continue: {}",
        r.head
    );
    let got = fake.received();
    assert_eq!(got[0].body, upload.as_bytes());
    assert!(
        got[0].headers.get("expect").is_none(),
        "{:?}",
        got[0].headers
    );
}

/// Sends a head with `Expect: 100-continue`, checks that `100 Continue` comes, sends the
/// body, and returns the final answer's status.
async fn continued(c: &mut Conn, path: &str, body: &str) -> u16 {
    let h = head(
        path,
        &format!("Expect: 100-continue\r\nContent-Length: {}\r\n", body.len()),
    );
    c.write(h.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 100);
    c.write(body.as_bytes()).await;
    c.response().await.unwrap().status
}

#[tokio::test]
async fn a_100_continue_waits_behind_a_pipelined_answer_the_client_has_not_read() {
    // The first request's answer (an SSE stream of megabytes) fills the socket buffers while
    // the client reads nothing; the second request, pipelined behind it, waits for
    // `100 Continue` before it sends its body. The `100 Continue` must come after the whole
    // first answer, in order, and the second request must then go through.
    const EVENTS: usize = 200_000;
    let fake = FakeVllm::start_with(FakeOpts {
        sse_events: Some(EVENTS),
        ..Default::default()
    })
    .await;
    let policy = "[gate]\ndefault = \"reject\"\n";
    let gw = gateway(policy, &fake).await;
    let mut c = Conn::open(gw.addr).await;
    let first = post("1.1", "", STREAM);
    let second = format!(
        "POST {CHAT} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        CLEAN.len()
    );
    c.write(format!("{first}{second}").as_bytes()).await;
    let within = std::time::Duration::from_secs(60);
    let streamed = c.response_within(within).await.unwrap();
    assert_eq!(streamed.status, 200, "{}", streamed.head);
    // More than the socket buffers hold while the client reads nothing (they grow as it reads).
    assert!(
        streamed.body.len() > 12 << 20,
        "{} bytes",
        streamed.body.len()
    );
    let events = streamed.text().matches("data: ").count();
    assert_eq!(events, EVENTS + 1, "every event and [DONE], in one answer");
    assert_eq!(c.response_within(within).await.unwrap().status, 100);
    c.write(CLEAN.as_bytes()).await;
    let answer = c.response_within(within).await.unwrap();
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert_eq!(fake.received().len(), 2);
    assert_eq!(fake.received()[1].body, bytes::Bytes::from(CLEAN));
}

/// The fake upstream, and a gateway in front of it in `mode` with the default body limit.
async fn start_in(mode: &str) -> (FakeVllm, mmgate::server::Running) {
    let fake = FakeVllm::start().await;
    let gw = gateway(&format!("[gate]\ndefault = \"{mode}\"\n"), &fake).await;
    (fake, gw)
}

/// A chat body of about `len` bytes whose `mm_processor_kwargs` (when `kwargs`) comes last,
/// after a long prose message: only a body read to its end shows it.
fn large_chat(len: usize, kwargs: bool) -> String {
    let tail = if kwargs {
        r#"],"mm_processor_kwargs":{"num_crops":4}}"#
    } else {
        "]}"
    };
    let open = r#"{"model":"tiny","messages":[{"role":"user","content":""#;
    let prose = "a picture of a river ".repeat(len / 21);
    format!(r#"{open}{prose}"}}{tail}"#)
}

#[tokio::test]
async fn a_large_body_is_read_whole_and_a_request_pipelined_behind_it_is_answered() {
    // Bodies longer than one read are read by the gateway straight into one buffer of their
    // declared length: never past their end, whatever arrived with them.
    let (fake, gw) = start_in("reject").await;
    let mut c = Conn::open(gw.addr).await;
    let offending = large_chat(300_000, true);
    let clean = large_chat(200_000, false);
    assert!(offending.len() > 256 << 10 && clean.len() > 128 << 10);
    // The first body in pieces, the second request whole right behind its last piece.
    let first = post("1.1", "", &offending);
    let (a, b) = first.as_bytes().split_at(first.len() / 3);
    c.write(a).await;
    c.write(b).await;
    c.write(post("1.1", "", &clean).as_bytes()).await;
    let refused = c.response().await.unwrap();
    assert_eq!(refused.status, 400, "{}", refused.head);
    assert!(
        refused.text().contains("mm_processor_kwargs"),
        "{}",
        refused.text()
    );
    let passed = c.response().await.unwrap();
    assert_eq!(passed.status, 200, "{}", passed.head);
    let received = fake.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, bytes::Bytes::from(clean));
}

#[tokio::test]
async fn a_large_body_read_whole_waits_for_100_continue_and_is_forwarded_unchanged() {
    let (fake, gw) = start_in("shadow").await;
    let mut c = Conn::open(gw.addr).await;
    let body = large_chat(150_000, true);
    assert_eq!(continued(&mut c, CHAT, &body).await, 200);
    assert_eq!(fake.received()[0].body, bytes::Bytes::from(body));
}

#[tokio::test]
async fn a_large_body_cut_short_by_the_client_is_not_forwarded() {
    let (fake, gw) = start_in("shadow").await;
    let mut c = Conn::open(gw.addr).await;
    let body = large_chat(150_000, false);
    let request = post("1.1", "", &body);
    c.write(&request.as_bytes()[..request.len() - 1000]).await;
    tokio::io::AsyncWriteExt::shutdown(&mut c.stream)
        .await
        .unwrap();
    // The gateway answers what it can (or closes); the upstream never sees the request.
    let _ = c.response().await;
    assert!(c.closed_within(VERDICT).await);
    assert!(fake.received().is_empty());
}

/// An upgrade other than WebSocket (`Upgrade: h2c` with `Connection: upgrade`, as
/// `curl --http2` sends): vLLM's server stops reading at the head, serves the request
/// without its body and answers nothing more on the connection (seen on the real server:
/// `missing body`, then silence). So here: a kwargs body is never seen (vLLM's own answer
/// to an empty body, from the upstream), and the connection closes after the answer.
#[tokio::test]
async fn an_upgrade_other_than_websocket_is_served_without_its_body() {
    let (fake, gw) = start().await;
    let kwargs = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    for upgrade in [
        "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n",
        "Connection: keep-alive\r\nConnection: upgrade\r\nUpgrade: foo/2\r\n",
        // No WebSocket handshake by uvicorn's test (the whole last Upgrade value, the
        // last Connection field): served without the body too.
        "Connection: upgrade\r\nUpgrade: h2c, websocket\r\n",
        "Connection: upgrade\r\nConnection: keep-alive\r\nUpgrade: websocket\r\n",
    ] {
        let mut c = Conn::open(gw.addr).await;
        let both = format!("{}{}", post("1.1", upgrade, kwargs), post("1.1", "", CLEAN));
        c.write(both.as_bytes()).await;
        let r = c.response().await.unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.text().contains("'missing'"), "{}", r.text());
        assert_eq!(r.header("connection"), Some("close"), "{}", r.head);
        assert!(c.closed_within(VERDICT).await, "{upgrade}");
    }
    // Only the Upgrade field, or only the token, or an empty Upgrade: no upgrade.
    for plain in [
        "Upgrade: h2c\r\n",
        "Connection: upgrade\r\n",
        "Connection: upgrade\r\nUpgrade: \r\n",
    ] {
        let mut c = Conn::open(gw.addr).await;
        c.write(post("1.1", plain, kwargs).as_bytes()).await;
        let r = c.response().await.unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(
            r.text().contains("Per-request mm_processor_kwargs"),
            "{plain}: {}",
            r.text()
        );
    }
    // A coding without `chunked` (and no length) is not refused then: llhttp never reads
    // the body.
    let mut c = Conn::open(gw.addr).await;
    let gzip = "Connection: upgrade\r\nUpgrade: h2c\r\nTransfer-Encoding: gzip\r\n";
    c.write(format!("{}hello", head(CHAT, gzip)).as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert!(
        r.status == 400 && r.text().contains("'missing'"),
        "{}",
        r.text()
    );
    assert!(c.closed_within(VERDICT).await);
    // Both length fields are refused first, upgrade or not (llhttp refuses the head).
    let mut c = Conn::open(gw.addr).await;
    let chunked = format!("{:x}\r\n{kwargs}\r\n0\r\n\r\n", kwargs.len());
    let both = format!(
        "{}{chunked}",
        head(
            CHAT,
            "Content-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: upgrade\r\nUpgrade: h2c\r\n"
        )
    );
    c.write(both.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("Invalid HTTP request"), "{}", r.text());
    assert!(fake.received().is_empty(), "the upstream saw a body");
    // A WebSocket handshake by uvicorn's test goes on as a handshake, without its body
    // (the fake answers as vLLM: 403, no WebSocket route there).
    let mut c = Conn::open(gw.addr).await;
    c.write(
        post(
            "1.1",
            "Connection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n",
            kwargs,
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(c.response().await.unwrap().status, 403);
    assert!(c.closed_within(VERDICT).await);
    let seen = fake.received();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].body.is_empty(), "the upstream saw a body");
}

/// What llhttp refuses and mmgate's head parser had taken, and what it takes and mmgate
/// had refused (each seen on vLLM's server by a differential hunt): methods it does not
/// know (case matters), a tab after `chunked`, a `Transfer-Encoding` field with no coding,
/// and framing fields in a request's trailers; but empty chunk-extension names and values.
#[tokio::test]
async fn heads_and_chunks_are_refused_and_taken_as_llhttp_does() {
    let (fake, gw) = start().await;
    let kwargs = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    let chunked = |ext: &str, trailer: &str| {
        format!("{:x}{ext}\r\n{kwargs}\r\n0\r\n{trailer}\r\n", kwargs.len())
    };
    let te = "Transfer-Encoding: chunked\r\n";
    let refused = [
        post("1.1", "", kwargs).replacen("POST", "post", 1),
        post("1.1", "", kwargs).replacen("POST", "PRI", 1),
        post("1.1", "", kwargs).replacen("POST", "FOO", 1),
        format!(
            "{}{}",
            head(CHAT, "Transfer-Encoding: chunked\t\r\n"),
            chunked("", "")
        ),
        format!(
            "{}{}",
            head(
                CHAT,
                "Transfer-Encoding: \r\nTransfer-Encoding: chunked\r\n"
            ),
            chunked("", "")
        ),
        format!("{}{}", head(CHAT, te), chunked("", "Content-Length: 0\r\n")),
        format!("{}{}", head(CHAT, te), chunked(";a=b;", "")),
    ];
    for wire in &refused {
        let mut c = Conn::open(gw.addr).await;
        c.write(wire.as_bytes()).await;
        let r = c.response().await.unwrap();
        assert_eq!(r.status, 400, "{wire:?}");
        assert_eq!(r.text(), "Invalid HTTP request received.", "{wire:?}");
        assert!(c.closed_within(VERDICT).await, "{wire:?}");
    }
    let taken = [
        format!(
            "{}{}",
            head(CHAT, "Transfer-Encoding: \tchunked \r\n"),
            chunked("", "")
        ),
        format!(
            "{}{}",
            head(
                CHAT,
                "Transfer-Encoding: chunked\t\r\nTransfer-Encoding: chunked\r\n"
            ),
            chunked("", "")
        ),
        format!("{}{}", head(CHAT, te), chunked(";=x;a=;b=\"q\";;c", "")),
        format!(
            "{}{}",
            head(CHAT, te),
            chunked(&format!(";x={}", "y".repeat(20_000)), "")
        ),
    ];
    for wire in &taken {
        let mut c = Conn::open(gw.addr).await;
        c.write(wire.as_bytes()).await;
        let r = c.response().await.unwrap();
        assert!(
            r.text().contains("Per-request mm_processor_kwargs"),
            "{wire:.200?}: {}",
            r.text()
        );
    }
    assert!(fake.received().is_empty());
}

/// uvicorn sets its `100 Continue` flag for any `Expect: 100-continue` field, and closes the
/// connection after an unhandled exception's 500 (mmgate's `/invocations` recursion answer
/// is one).
#[tokio::test]
async fn any_expect_field_asks_and_a_500_closes_the_connection() {
    let (_fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    let kwargs = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    c.write(
        head(
            CHAT,
            &format!(
                "Expect: 100-continue\r\nExpect: x\r\nContent-Length: {}\r\n",
                kwargs.len()
            ),
        )
        .as_bytes(),
    )
    .await;
    let r = c.response_to_head().await.unwrap();
    assert_eq!(r.status, 100, "{}", r.head);
    c.write(kwargs.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 400);

    let deep = format!("{}{}", "[".repeat(966), "]".repeat(966));
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &_fake).await;
    let mut c = Conn::open(gw.addr).await;
    let wire = format!(
        "{}{deep}{}",
        head(
            "/invocations",
            &format!("Content-Length: {}\r\n", deep.len())
        ),
        head("/invocations", "Content-Length: 2\r\n") + "{}"
    );
    c.write(wire.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(VERDICT).await);
}

/// vLLM's server (llhttp) refuses at the first byte no method it knows begins with, at
/// once; bytes it refuses that came after a request's body in the same read get its 400
/// in place of that request's answer (a client whose `Content-Length` counts characters
/// leaves the body's tail as such bytes); and CR or LF before a request line are skipped.
#[tokio::test]
async fn bytes_that_begin_no_request_are_refused_at_once_as_llhttp_refuses_them() {
    let (fake, gw) = start().await;
    for wire in ["}".to_string(), "GE\x01".to_string()] {
        let mut c = Conn::open(gw.addr).await;
        c.write(wire.as_bytes()).await;
        let r = c.response().await.unwrap();
        assert_eq!(r.status, 400, "{wire:?}");
        assert_eq!(r.text(), "Invalid HTTP request received.");
    }
    let kwargs = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    let short = format!(
        "{}{kwargs}",
        head(CHAT, &format!("Content-Length: {}\r\n", kwargs.len() - 1))
    );
    let trailing = format!("{}xx yy\r\n\r\n", post("1.1", "", kwargs));
    for wire in [short, trailing] {
        let mut c = Conn::open(gw.addr).await;
        c.write(wire.as_bytes()).await;
        let r = c.response().await.unwrap();
        assert_eq!(r.text(), "Invalid HTTP request received.", "{wire:?}");
        assert!(c.closed_within(VERDICT).await);
    }
    // A pipelined request that is whole and valid is answered after the first.
    let mut c = Conn::open(gw.addr).await;
    let two = format!("\r{}{}", post("1.1", "", CLEAN), post("1.1", "", CLEAN));
    c.write(two.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    assert_eq!(c.response().await.unwrap().status, 200);
    assert_eq!(fake.received().len(), 2);
}

/// llhttp takes every CONNECT for an upgrade: no body is read and nothing after it is a
/// request of this connection's (seen on vLLM's server). So here: it goes on without a
/// body, and the connection closes after its answer, whatever the client sends next.
#[tokio::test]
async fn a_connect_with_a_path_goes_on_without_a_body_and_closes() {
    let (fake, gw) = start().await;
    let mut c = Conn::open(gw.addr).await;
    c.write(b"CONNECT /tokenize HTTP/1.1\r\nHost: gw\r\nContent-Length: 80\r\n\r\nabc")
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 200, "{}", r.head);
    c.write_lossy(post("1.1", "", CLEAN).as_bytes()).await;
    assert!(c.closed_within(VERDICT).await);
    let seen = fake.received();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, http::Method::CONNECT);
    assert!(seen[0].body.is_empty() && !seen[0].headers.contains_key("content-length"));
    // Its upstream connection is not reused either: the next request opens another.
    let mut c = Conn::open(gw.addr).await;
    c.write(post("1.1", "", CLEAN).as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    let seen = fake.received();
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0].peer, seen[1].peer);
}

/// uvicorn sets llhttp's `lenient_data_after_close`: bytes after a request that does not
/// keep the connection are ignored, not refused. (Each wire is one write, so on loopback
/// the trailing bytes come in the same read as the request, which is what is tested.)
#[tokio::test]
async fn bytes_after_a_closing_request_are_ignored() {
    let (fake, gw) = start().await;
    for wire in [
        format!("{}}}\r\n\r\n", post("1.1", "Connection: close\r\n", CLEAN)),
        format!("{}}}\r\n\r\n", post("1.0", "", CLEAN)),
    ] {
        let mut c = Conn::open(gw.addr).await;
        c.write(wire.as_bytes()).await;
        assert_eq!(c.response().await.unwrap().status, 200, "{wire:?}");
    }
    assert_eq!(fake.received().len(), 2);
}

/// An upstream answer that says `Connection: close` (uvicorn's own 500 does) closes the
/// client's connection too; the field itself is hop-by-hop and not passed on.
#[tokio::test]
async fn an_upstream_that_closes_after_its_answer_closes_the_clients_connection() {
    const CLOSING: &[u8] = b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\ncontent-length: 21\r\n\r\nInternal Server Error";
    let url = raw::upstream(CLOSING).await;
    let gw = gateway_with("[upstream]\nurl = \"{U}\"\n", &[("U", url)], None).await;
    let mut c = Conn::open(gw.addr).await;
    c.write(format!("{}{}", post("1.1", "", CLEAN), post("1.1", "", CLEAN)).as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "Internal Server Error")
    );
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(VERDICT).await);
}
