//! The accept loop: TCP connections → HTTP/1.1 or HTTP/2 (prior knowledge) served by the
//! gateway, with a per-connection [`ConnInfo`], a header read timeout, and graceful drain.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::gateway::Gateway;
use crate::identify::PeerCertificate;

/// What is known about a client connection, attached to each of its requests.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// A process-unique connection number.
    pub id: u64,
    /// The client's address.
    pub remote: SocketAddr,
    /// The verified client certificate's identity (mTLS); filled in by a TLS listener,
    /// `None` on plain TCP.
    pub peer: Option<PeerCertificate>,
}

static CONN_IDS: AtomicU64 = AtomicU64::new(1);

/// Serves the gateway on `listener` until `shutdown` completes, then drains open connections
/// for at most `drain`.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(gateway.config().limits.header_timeout)
        .max_buf_size(64 * 1024);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = Arc::new(ConnInfo {
            id: CONN_IDS.fetch_add(1, Ordering::Relaxed),
            remote,
            peer: None,
        });
        let gw = gateway.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let gw = gw.clone();
            let conn = conn.clone();
            async move { Ok::<_, Infallible>(gw.handle(req.map(Body::new), &conn).await) }
        });
        let served = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let watched = graceful.watch(served);
        tokio::spawn(async move {
            if let Err(e) = watched.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            seconds = drain.as_secs(),
            "drain deadline passed; closing open connections"
        );
    }
}
