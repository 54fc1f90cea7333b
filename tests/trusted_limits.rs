//! Trusted clients: the bounds of a pool — concurrency under a burst, the wait queue, rate
//! limits on a fake clock, permits released on disconnect, and member health — against two
//! in-process fake upstreams that hold requests behind semaphores (no sleeps).

#[path = "support/raw.rs"]
mod raw;
mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use governor::clock::FakeRelativeClock;
use http_body_util::{BodyExt, Full};
use mmgate::limits::RateClock;
use support::trusted::*;
use support::*;
use tokio::sync::Semaphore;

#[tokio::test]
async fn the_pool_concurrency_bound_holds_under_a_burst() {
    let hold = Arc::new(Semaphore::new(0));
    let extra = "max_concurrency = 2\nmax_queue = 16\nqueue_timeout_ms = 60000";
    let opts = FakeOpts {
        hold: Some(hold.clone()),
        ..Default::default()
    };
    let s = Arc::new(
        setup_with(
            &policy("anonymous", "\"127.0.0.0/8\"", extra, ""),
            opts,
            None,
        )
        .await,
    );
    let c = client();
    let burst: Vec<_> = (0..6)
        .map(|_| {
            let (s, c) = (s.clone(), c.clone());
            tokio::spawn(async move {
                chat(&c, &s, &[("x-api-key", VISION_KEY)], KWARGS)
                    .await
                    .status
            })
        })
        .collect();
    let queued = "mmgate_pool_queue_depth{pool=\"trusted\"}";
    eventually("4 queued", || async {
        metric(&c, s.gw.admin, queued).await == Some(4.0)
    })
    .await;
    // The two admitted may still be on their way to the pool; the four queued cannot be.
    eventually("2 at the pool", || async {
        s.trusted.received().len() >= 2
    })
    .await;
    assert_eq!(
        s.trusted.received().len(),
        2,
        "more than max_concurrency reached the pool"
    );
    let in_flight = "mmgate_pool_in_flight_requests{pool=\"trusted\"}";
    assert_eq!(metric(&c, s.gw.admin, in_flight).await, Some(2.0));
    hold.add_permits(6);
    for r in burst {
        assert_eq!(r.await.unwrap(), 200);
    }
    assert_eq!(s.trusted.received().len(), 6);
    let admitted = "mmgate_pool_admissions_total{pool=\"trusted\"}";
    assert_eq!(metric(&c, s.gw.admin, admitted).await, Some(6.0));
}

#[tokio::test]
async fn a_full_queue_and_a_queue_timeout_are_refused_with_retry_after() {
    let hold = Arc::new(Semaphore::new(0));
    let extra = "max_concurrency = 1\nmax_queue = 1\nqueue_timeout_ms = 50";
    let opts = FakeOpts {
        hold: Some(hold.clone()),
        ..Default::default()
    };
    let s = Arc::new(
        setup_with(
            &policy("anonymous", "\"127.0.0.0/8\"", extra, "max_concurrency = 1"),
            opts,
            None,
        )
        .await,
    );
    let c = client();
    let (s1, c1) = (s.clone(), c.clone());
    let first = tokio::spawn(async move {
        chat(&c1, &s1, &[("x-api-key", VISION_KEY)], KWARGS)
            .await
            .status
    });
    eventually("first in flight", || async {
        s.trusted.received().len() == 1
    })
    .await;
    // The same client again: over its own share → 429 after the queue timeout.
    let r = chat(&c, &s, &[("x-api-key", VISION_KEY)], KWARGS).await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.headers["retry-after"], "1");
    assert!(
        message(&r).contains("wait for one to finish"),
        "{}",
        r.text()
    );
    // Another trusted client: the pool is saturated → 503 after the queue timeout.
    let r = chat(&c, &s, &[("x-client-id", "partner-a")], KWARGS).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.headers.contains_key("retry-after"));
    assert!(
        message(&r).contains("pool trusted is saturated") && message(&r).contains("retry after")
    );
    let timeouts = "mmgate_refusals_total{pool=\"trusted\",reason=\"queue_timeout\"}";
    assert_eq!(metric(&c, s.gw.admin, timeouts).await, Some(2.0));
    hold.add_permits(1);
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(s.trusted.received().len(), 1);
}

#[tokio::test]
async fn the_rate_limit_follows_a_fake_clock() {
    let clock = FakeRelativeClock::default();
    let p = policy(
        "anonymous",
        "\"127.0.0.0/8\"",
        "",
        "rate_per_second = 1\nburst = 2",
    );
    let s = setup_with(
        &p,
        FakeOpts::default(),
        Some(RateClock::Fake(clock.clone())),
    )
    .await;
    let c = client();
    let h = [("x-api-key", VISION_KEY)];
    assert_eq!(chat(&c, &s, &h, "").await.status, 200);
    assert_eq!(chat(&c, &s, &h, "").await.status, 200);
    let r = chat(&c, &s, &h, "").await;
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["retry-after"], "1");
    assert!(
        message(&r).contains("1 requests per second") && message(&r).contains("retry after 1 s")
    );
    // Other clients are not limited by vision's budget.
    assert_eq!(
        chat(&c, &s, &[("x-api-key", STRIP_KEY)], "").await.status,
        200
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(chat(&c, &s, &h, "").await.status, 200);
    assert_eq!(chat(&c, &s, &h, "").await.status, 429);
    let rate = "mmgate_refusals_total{pool=\"none\",reason=\"rate\"}";
    assert_eq!(metric(&c, s.gw.admin, rate).await, Some(2.0));
}

#[tokio::test]
async fn a_streaming_clients_disconnect_releases_its_permit() {
    let gate = Arc::new(Semaphore::new(0));
    let extra = "max_concurrency = 1\nmax_queue = 0";
    let opts = FakeOpts {
        sse_gate: Some(gate),
        ..Default::default()
    };
    let s = setup_with(
        &policy("anonymous", "\"127.0.0.0/8\"", extra, "max_concurrency = 1"),
        opts,
        None,
    )
    .await;
    let c = client();
    let stream_body =
        r#"{"model":"tiny","messages":[],"stream":true,"mm_processor_kwargs":{"max_pixels":1}}"#;
    let req = http::Request::post(format!("http://{}{CHAT}", s.gw.addr))
        .header("content-type", "application/json")
        .header("x-api-key", VISION_KEY)
        .body(Full::new(Bytes::from(stream_body)))
        .unwrap();
    let res = c.request(req).await.unwrap();
    let mut body = res.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, sse_event(0));
    let in_flight = "mmgate_pool_in_flight_requests{pool=\"trusted\"}";
    assert_eq!(metric(&c, s.gw.admin, in_flight).await, Some(1.0));
    // While the stream is open the client's permit is held.
    assert_eq!(
        chat(&c, &s, &[("x-api-key", VISION_KEY)], KWARGS)
            .await
            .status,
        429
    );
    drop(body);
    eventually("permit released", || async {
        metric(&c, s.gw.admin, in_flight).await == Some(0.0)
    })
    .await;
    assert_eq!(
        chat(&c, &s, &[("x-api-key", VISION_KEY)], KWARGS)
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn dead_members_are_skipped_and_an_all_down_pool_answers_503() {
    let live = FakeVllm::start().await;
    let p = policy("anonymous", "\"127.0.0.0/8\"", "", "").replace(
        "members = [\"{DEFAULT}\"]",
        "members = [\"{DEAD}\", \"{DEFAULT}\"]",
    );
    let gw = gateway_with(
        &p,
        &[
            ("DEFAULT", live.url()),
            ("TRUSTED", dead_url()),
            ("DEAD", dead_url()),
        ],
        None,
    )
    .await;
    let c = client();
    for _ in 0..4 {
        let r = post_json(&c, gw.addr, CHAT, &body("")).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(live.received().len(), 4);
    let h = [
        ("content-type", "application/json"),
        ("x-api-key", VISION_KEY),
    ];
    let r = send(&c, gw.addr, "POST", CHAT, &h, body(KWARGS)).await;
    assert_eq!(r.status, 503);
    assert!(r.headers.contains_key("retry-after"));
    let m = message(&r);
    assert!(
        m.contains("no healthy upstream in pool trusted") && m.contains("Retry later"),
        "{m}"
    );
}

#[tokio::test]
async fn every_body_sent_to_a_trusted_pool_is_within_its_limit_ungated_routes_included() {
    let vision_all_trusted = "pool = \"trusted\"";
    let s = setup(&policy(
        "anonymous",
        "\"127.0.0.0/8\"",
        "max_body_bytes = 400",
        vision_all_trusted,
    ))
    .await;
    let auth = format!("Authorization: Bearer {VISION_KEY}\r\n");
    let ungated = "/v1/messages";
    let small = r#"{"model":"tiny","max_tokens":1,"messages":[]}"#;
    let large = format!(r#"{{"model":"tiny","x":"{}"}}"#, "a".repeat(500));
    // A declared length over the limit, then the same body chunked, then one within it.
    let declared = format!("{auth}Content-Length: {}\r\n", large.len());
    let mut c = raw::Conn::open(s.gw.addr).await;
    c.write(format!("{}{large}", raw::head(ungated, &declared)).as_bytes())
        .await;
    assert_eq!(c.response().await.unwrap().status, 413);
    let mut c = raw::Conn::open(s.gw.addr).await;
    let chunked = format!("{auth}Transfer-Encoding: chunked\r\n");
    let body = format!("{:x}\r\n{large}\r\n0\r\n\r\n", large.len());
    c.write(format!("{}{body}", raw::head(ungated, &chunked)).as_bytes())
        .await;
    assert_eq!(c.response().await.unwrap().status, 413);
    assert!(s.trusted.received().is_empty() && s.default.received().is_empty());
    let mut c = raw::Conn::open(s.gw.addr).await;
    let within = format!("{auth}Transfer-Encoding: chunked\r\n");
    let body = format!("{:x}\r\n{small}\r\n0\r\n\r\n", small.len());
    c.write(format!("{}{body}", raw::head(ungated, &within)).as_bytes())
        .await;
    c.response().await.unwrap();
    let got = s.trusted.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].path.as_str(), &got[0].body[..]),
        (ungated, small.as_bytes())
    );
}
