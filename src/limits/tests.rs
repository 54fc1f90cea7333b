use super::*;
use crate::config::Config;

fn limits(extra: &str) -> (Limits, FakeRelativeClock) {
    let c = Config::parse(&format!(
        "[pools.default]\nmembers = [\"http://127.0.0.1:1\"]\nhealth_check = false\nmax_concurrency = 1\nmax_queue = 1\nqueue_timeout_ms = 20\n\
         [clients.a]\nkey_sha256 = [\"{}\"]\nmax_concurrency = 1\n{extra}",
        hex::encode(crate::config::digest("k"))
    ))
    .unwrap();
    let clock = FakeRelativeClock::default();
    (
        Limits::new(&c, &Metrics::new(), RateClock::Fake(clock.clone())),
        clock,
    )
}

#[test]
fn rate_limit_refills_with_the_clock() {
    let (l, clock) = limits("rate_per_second = 1\nburst = 2\n");
    let a = ClientId::Named(0);
    l.check_rate(a).unwrap();
    l.check_rate(a).unwrap();
    let Err(GateError::RateLimited { retry_after, .. }) = l.check_rate(a) else {
        panic!("burst spent")
    };
    assert_eq!(retry_after, 1);
    clock.advance(Duration::from_secs(1));
    l.check_rate(a).unwrap();
    assert!(l.check_rate(a).is_err());
    l.check_rate(ClientId::Anonymous).unwrap();
}

#[tokio::test]
async fn a_client_over_its_share_gets_429_and_a_full_pool_503() {
    let (l, _) = limits("");
    let held = l.admit(0, ClientId::Named(0)).await.unwrap();
    // The client's own share is taken: it waits, then 429 (queue timeout).
    let e = l.admit(0, ClientId::Named(0)).await.err().unwrap();
    assert_eq!(
        (e.status().as_u16(), e.refusal_reason()),
        (429, Some("queue_timeout"))
    );
    // Anonymous is not over a share, but the pool is full: 503.
    let e = l.admit(0, ClientId::Anonymous).await.err().unwrap();
    assert_eq!(
        (e.status().as_u16(), e.refusal_reason()),
        (503, Some("queue_timeout"))
    );
    drop(held);
    let again = l.admit(0, ClientId::Anonymous).await.unwrap();
    assert_eq!(again.waited, Duration::ZERO);
}

#[tokio::test]
async fn a_request_dropped_while_queued_gives_its_place_back() {
    // A client that leaves while queued drops its request's future mid-wait.
    let (l, _) = limits("");
    let held = l.admit(0, ClientId::Anonymous).await.unwrap();
    {
        let mut waiting = std::pin::pin!(l.admit(0, ClientId::Anonymous));
        let polled = futures_poll_once(waiting.as_mut()).await;
        assert!(polled.is_none(), "queued behind the held permit");
        assert_eq!(l.pools[0].queued.load(Ordering::Acquire), 1);
    }
    assert_eq!(l.pools[0].queued.load(Ordering::Acquire), 0);
    // The one place is free again: a request waits in it instead of being refused at once.
    let mut waiter = std::pin::pin!(l.admit(0, ClientId::Anonymous));
    assert!(futures_poll_once(waiter.as_mut()).await.is_none(), "queued");
    drop(held);
    assert!(waiter.await.is_ok());
    assert_eq!(l.pools[0].queued.load(Ordering::Acquire), 0);
}

/// Polls `f` once: its output if it was ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[test]
fn retry_after_rounds_up_to_whole_seconds() {
    assert_eq!(retry_secs(Duration::from_millis(20)), 1);
    assert_eq!(retry_secs(Duration::from_millis(1500)), 2);
    assert_eq!(retry_secs(Duration::from_secs(3)), 3);
}

#[tokio::test]
async fn a_successor_keeps_held_permits_and_spent_rate_where_bounds_are_unchanged() {
    let (l, _) = limits("rate_per_second = 1\nburst = 1\n");
    let a = ClientId::Named(0);
    l.check_rate(a).unwrap();
    let held = l.admit(0, a).await.unwrap();
    let same = Config::parse(&format!(
        "[pools.default]\nmembers = [\"http://127.0.0.1:2\"]\nhealth_check = false\nmax_concurrency = 1\nqueue_timeout_ms = 20\n\
         [clients.a]\nkey_sha256 = [\"{}\"]\nrate_per_second = 1\nburst = 1\n",
        hex::encode(crate::config::digest("k"))
    ))
    .unwrap();
    let next = l.successor(&same, &Metrics::new());
    assert!(next.check_rate(a).is_err(), "the spent burst stays spent");
    assert!(
        next.admit(0, a).await.is_err(),
        "the held pool permit still counts"
    );
    drop(held);
    next.admit(0, a).await.unwrap();
}
