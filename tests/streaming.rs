//! Server-sent events through the gateway: a `"stream": true` chat request gets the upstream's
//! events unchanged and in order, frame by frame (the gateway never collects a response), a
//! stream request the gate refuses gets a plain JSON 400, and the in-flight gauge covers the
//! whole stream.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS;
use support::*;
use tokio::sync::Semaphore;

const CHAT: &str = "/v1/chat/completions";
const STREAM_BODY: &str = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"stream":true,"mm_processor_kwargs":{"num_crops":4}}"#;
/// Upper bound for anything the test waits on; reaching it is a failure, not a pace.
const PATIENCE: Duration = Duration::from_secs(10);

fn policy(mode: &str) -> String {
    format!("[gate]\ndefault = \"{mode}\"\n")
}

/// Starts a streaming POST and returns the response with its body not yet read.
async fn open_stream(client: &TestClient, addr: std::net::SocketAddr) -> http::Response<Incoming> {
    let req = http::Request::post(format!("http://{addr}{CHAT}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(STREAM_BODY.as_bytes())))
        .unwrap();
    tokio::time::timeout(PATIENCE, client.request(req))
        .await
        .expect("response headers in time")
        .unwrap()
}

/// Reads body frames into `buf` until it holds `want` complete events (`\n\n`-terminated).
async fn read_events(body: &mut Incoming, buf: &mut BytesMut, want: usize) {
    while buf.windows(2).filter(|w| w == b"\n\n").count() < want {
        let frame = tokio::time::timeout(PATIENCE, body.frame())
            .await
            .expect("the next frame arrives without the stream being finished")
            .expect("the stream is not over yet")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
    }
}

/// The events of a collected SSE body, each without its `\n\n` terminator.
fn events(body: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(body).unwrap();
    assert!(
        text.ends_with("\n\n"),
        "unterminated event stream: {text:?}"
    );
    text.trim_end_matches("\n\n")
        .split("\n\n")
        .map(str::to_string)
        .collect()
}

fn expected_events(n: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..n)
        .map(|i| String::from_utf8(sse_event(i).to_vec()).unwrap())
        .map(|e| e.trim_end().to_string())
        .collect();
    v.push("data: [DONE]".into());
    v
}

#[tokio::test]
async fn stream_arrives_as_the_same_events_in_order_in_pass_shadow_and_strip() {
    let fake = FakeVllm::start_with(FakeOpts {
        sse_events: Some(7),
        ..Default::default()
    })
    .await;
    let c = client();
    let direct = post_json(
        &c,
        fake.addr,
        CHAT,
        &STREAM_BODY.replace(r#","mm_processor_kwargs":{"num_crops":4}"#, ""),
    )
    .await;
    assert_eq!(events(&direct.body), expected_events(7));
    for mode in ["pass", "shadow", "strip"] {
        let gw = gateway(&policy(mode), &fake).await;
        let r = post_json(&c, gw.addr, CHAT, STREAM_BODY).await;
        assert_eq!(r.status, 200, "{mode}: {}", r.text());
        assert_eq!(r.headers["content-type"], "text/event-stream", "{mode}");
        assert_eq!(r.body, direct.body, "{mode}: the events changed on the way");
        assert_eq!(events(&r.body).last().unwrap(), "data: [DONE]", "{mode}");
        assert_eq!(
            r.headers.contains_key("x-mmgate-stripped"),
            mode == "strip",
            "{mode}"
        );
        gw.stop().await;
    }
    let got = fake.received();
    assert_eq!(got.len(), 4);
    let sent = |i: usize| std::str::from_utf8(&got[i].body).unwrap().to_string();
    assert_eq!(sent(1), STREAM_BODY, "pass forwards the body as sent");
    assert_eq!(sent(2), STREAM_BODY, "shadow forwards the body as sent");
    assert!(!sent(3).contains("mm_processor_kwargs"), "strip removes it");
}

#[tokio::test]
async fn first_event_reaches_the_client_before_the_upstream_sends_the_rest() {
    let gate = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        sse_events: Some(3),
        sse_gate: Some(gate.clone()),
        ..Default::default()
    })
    .await;
    for mode in ["pass", "shadow", "strip"] {
        let gw = gateway(&policy(mode), &fake).await;
        let c = client();
        let res = open_stream(&c, gw.addr).await;
        assert_eq!(res.status(), 200, "{mode}");
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        let mut body = res.into_body();
        let mut buf = BytesMut::new();
        // The fake holds everything after event 0 until the gate opens: if the gateway
        // collected the response, this read would never complete.
        read_events(&mut body, &mut buf, 1).await;
        assert_eq!(
            &buf[..],
            &sse_event(0)[..],
            "{mode}: only the first event so far"
        );
        assert_eq!(
            gate.available_permits(),
            0,
            "{mode}: the rest is still held"
        );
        gate.add_permits(1);
        let rest = tokio::time::timeout(PATIENCE, body.collect())
            .await
            .expect("the stream ends once released")
            .unwrap()
            .to_bytes();
        buf.extend_from_slice(&rest);
        assert_eq!(events(&buf), expected_events(3), "{mode}");
        gw.stop().await;
    }
}

#[tokio::test]
async fn stream_request_rejected_at_the_gate_gets_plain_json_not_events() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&policy("reject"), &fake).await;
    let r = post_json(&client(), gw.addr, CHAT, STREAM_BODY).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.text(), GATE_BODY_MM_PROCESSOR_KWARGS);
    assert!(!r.text().starts_with("data:"));
    assert!(
        fake.received().is_empty(),
        "a rejected request never reaches vLLM"
    );
}

/// Polls until `cond` holds, at most 1000 times (5 ms apart: a poll interval, not a wait).
async fn eventually<F: std::future::Future<Output = bool>>(mut cond: impl FnMut() -> F) -> bool {
    for _ in 0..1000 {
        if cond().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// Whether the admin `/metrics` comes to show `want` requests in flight.
async fn in_flight_becomes(c: &TestClient, admin: std::net::SocketAddr, want: f64) -> bool {
    eventually(|| async move { metric(c, admin, "mmgate_in_flight_requests ").await == Some(want) })
        .await
}

#[tokio::test]
async fn in_flight_gauge_counts_a_stream_until_it_ends() {
    let gate = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        sse_events: Some(2),
        sse_gate: Some(gate.clone()),
        ..Default::default()
    })
    .await;
    let gw = gateway(&policy("shadow"), &fake).await;
    let c = client();
    let res = open_stream(&c, gw.addr).await;
    let mut body = res.into_body();
    let mut buf = BytesMut::new();
    read_events(&mut body, &mut buf, 1).await;
    assert!(
        in_flight_becomes(&c, gw.admin, 1.0).await,
        "a stream whose body is still open is in flight"
    );
    gate.add_permits(1);
    let rest = tokio::time::timeout(PATIENCE, body.collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    buf.extend_from_slice(&rest);
    assert_eq!(events(&buf), expected_events(2));
    assert!(
        in_flight_becomes(&c, gw.admin, 0.0).await,
        "the gauge goes back to 0 once the stream has ended"
    );
}

#[tokio::test]
async fn in_flight_gauge_is_released_when_the_client_drops_the_stream() {
    let gate = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        sse_gate: Some(gate.clone()),
        ..Default::default()
    })
    .await;
    let gw = gateway(&policy("pass"), &fake).await;
    let c = client();
    let res = open_stream(&c, gw.addr).await;
    let mut body = res.into_body();
    read_events(&mut body, &mut BytesMut::new(), 1).await;
    assert!(in_flight_becomes(&c, gw.admin, 1.0).await);
    drop(body);
    drop(c);
    let admin = client();
    assert!(
        in_flight_becomes(&admin, gw.admin, 0.0).await,
        "a client that goes away mid-stream no longer counts as in flight"
    );
}

#[tokio::test]
async fn in_flight_gauge_is_released_when_the_client_leaves_before_the_answer() {
    let hold = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        hold: Some(hold),
        ..Default::default()
    })
    .await;
    let gw = gateway(&policy("pass"), &fake).await;
    let addr = gw.addr;
    let pending = tokio::spawn(async move { open_stream(&client(), addr).await });
    let fake = &fake;
    assert!(eventually(|| async move { !fake.received().is_empty() }).await);
    assert_eq!(fake.received().len(), 1, "the upstream holds the request");
    let admin = client();
    assert!(in_flight_becomes(&admin, gw.admin, 1.0).await);
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());
    assert!(
        in_flight_becomes(&admin, gw.admin, 0.0).await,
        "a client that hangs up while vLLM is still thinking no longer counts"
    );
}

#[tokio::test]
async fn a_request_cancelled_by_its_client_is_still_recorded() {
    let hold = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        hold: Some(hold),
        ..Default::default()
    })
    .await;
    let gw = gateway(&policy("shadow"), &fake).await;
    let addr = gw.addr;
    let body = r#"{"model":"tiny","messages":[],"stream":true,"mm_processor_kwargs":{"a":1}}"#;
    let pending =
        tokio::spawn(async move { post_json(&client(), addr, "/v1/chat/completions", body).await });
    let fake = &fake;
    assert!(eventually(|| async move { !fake.received().is_empty() }).await);
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());
    let admin = client();
    let (admin, c) = (gw.admin, &admin);
    let cancelled = r#"mmgate_requests_total{mode="shadow",outcome="cancelled",route="chat"}"#;
    assert!(
        eventually(|| async move { metric(c, admin, cancelled).await == Some(1.0) }).await,
        "the cancelled request is counted once"
    );
    let offending = r#"mmgate_offending_requests_total{field="mm_processor_kwargs",mode="shadow",route="chat"}"#;
    assert_eq!(
        metric(c, admin, offending).await,
        Some(1.0),
        "and still counts as offending"
    );
}
