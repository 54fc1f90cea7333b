//! Graceful shutdown: `/readyz` turns 503 at once, new connections are refused, an open
//! stream finishes, and whatever is still open at the drain deadline is closed.

mod support;
mod tls_support;

use std::sync::Arc;
use std::time::Duration;

use support::*;
use tls_support::*;
use tokio::sync::Semaphore;

async fn readyz(admin: std::net::SocketAddr) -> u16 {
    send(&client(), admin, "GET", "/readyz", &[], "")
        .await
        .status
        .as_u16()
}

async fn held_stream_gateway(
    drain: Duration,
) -> (mmgate::server::Running, FakeVllm, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        sse_gate: Some(gate.clone()),
        ..Default::default()
    })
    .await;
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\nurl = \"{}\"\n",
        fake.url()
    );
    let config = mmgate::config::Config::parse(&text).unwrap();
    let gw = mmgate::server::start(config, drain).await.unwrap();
    (gw, fake, gate)
}

#[tokio::test]
async fn shutdown_drains_an_open_stream_while_readyz_is_503_and_new_connections_are_refused() {
    let (gw, _fake, gate) = held_stream_gateway(Duration::from_secs(30)).await;
    let (addr, admin) = (gw.addr, gw.admin);
    assert_eq!(readyz(admin).await, 200);
    let mut stream = Stream::open(addr, false).await;
    assert_eq!(stream.next().await.unwrap().unwrap(), sse_event(0));

    let shutdown = gw.shutdown_handle();
    shutdown.shutdown();
    let done = tokio::spawn(gw.wait());
    assert_eq!(readyz(admin).await, 503, "readyz turns 503 at once");
    eventually("the data listener to close", || async {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    assert!(!done.is_finished(), "the open stream holds the drain");

    gate.add_permits(1);
    let rest = stream.rest().await.unwrap();
    assert!(rest.ends_with("data: [DONE]\n\n"), "{rest}");
    tokio::time::timeout(Duration::from_secs(10), done)
        .await
        .expect("the drain ends once the stream is done")
        .unwrap();
    // The admin listener stops only after the drain.
    assert!(tokio::net::TcpStream::connect(admin).await.is_err());
}

#[tokio::test]
async fn the_drain_deadline_closes_a_stream_that_does_not_finish() {
    let (gw, _fake, _gate) = held_stream_gateway(Duration::from_millis(200)).await;
    let mut stream = Stream::open(gw.addr, false).await;
    assert_eq!(stream.next().await.unwrap().unwrap(), sse_event(0));
    tokio::time::timeout(Duration::from_secs(10), gw.stop())
        .await
        .expect("stop returns at the drain deadline");
    // The held stream never completes normally once the gateway has stopped.
    let end = tokio::time::timeout(Duration::from_secs(10), stream.rest())
        .await
        .expect("the connection is closed at the deadline");
    if let Ok(rest) = end {
        assert!(!rest.contains("[DONE]"), "{rest}");
    }
}
