//! The accept loop: TCP (or TLS, see [`crate::tls`]) connections → HTTP/1.1 or HTTP/2 (ALPN
//! `h2`, or prior knowledge on plain TCP) served by the gateway in force, with a
//! per-connection [`ConnInfo`], a header read timeout, and graceful drain. Plain HTTP/1.1,
//! the common case on the data plane, is served by [`crate::http1`]; HTTP/2 and everything
//! over TLS by hyper.
//!
//! Invariants: each request loads the gateway in force once ([`Live::gateway`], an atomic
//! load), so a reload never changes the policy under an in-flight request; a TLS
//! connection's certificate is read once, at the handshake, with the certificates in force
//! then. On shutdown the listener is closed at once (new connections are refused), open
//! connections finish their in-flight requests and streams, and whatever is still open at
//! the drain deadline is closed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

mod stall;

use crate::framing::{AmbiguousFraming, Exchange, Watched};
use crate::identify::PeerCertificate;
use crate::reload::Live;
use crate::tunnel::{Handshake, Switch};

/// What is known about a client connection, attached to each of its requests.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// A process-unique connection number.
    pub id: u64,
    /// The client's address.
    pub remote: SocketAddr,
    /// `remote`'s IP address as text, formatted once ([`ConnInfo::remote_ip`]).
    remote_ip: http::HeaderValue,
    /// How the server the client reached names itself ([`ConnInfo::own_host`]).
    own_host: http::HeaderValue,
    /// The verified client certificate's identity (mTLS); filled in by a TLS listener,
    /// `None` on plain TCP.
    pub peer: Option<PeerCertificate>,
    /// Whether mmgate's own HTTP/1.1 server serves the connection ([`crate::http1`]).
    own_http1: bool,
}

impl ConnInfo {
    /// What is known of a connection from `remote` to `local` (over TLS when `peer` is
    /// `Some`), with the certificate identity `peer` holds.
    pub fn new(
        id: u64,
        remote: SocketAddr,
        local: SocketAddr,
        peer: Option<Option<PeerCertificate>>,
    ) -> Self {
        let ip = remote.ip().to_string();
        ConnInfo {
            id,
            remote,
            remote_ip: http::HeaderValue::from_str(&ip).expect("an IP address is a header value"),
            own_host: crate::upstream::host::own(local, peer.is_some()),
            peer: peer.flatten(),
            own_http1: false,
        }
    }

    /// Marks the connection as served by mmgate's own HTTP/1.1 server, which writes a
    /// forwarded chunked body to an HTTP/1.1 client as the upstream's chunks came.
    pub(crate) fn served_by_own_http1(mut self) -> Self {
        self.own_http1 = true;
        self
    }

    /// Whether mmgate's own HTTP/1.1 server serves the connection.
    pub fn own_http1(&self) -> bool {
        self.own_http1
    }

    /// The `Host` for a request that has no valid one of its own: the address the client
    /// connected to, as vLLM reached directly would name itself in a redirect.
    pub fn own_host(&self) -> &http::HeaderValue {
        &self.own_host
    }

    /// The client's IP address as text (`X-Forwarded-For`, logs).
    pub fn remote_ip(&self) -> &http::HeaderValue {
        &self.remote_ip
    }
}

static CONN_IDS: AtomicU64 = AtomicU64::new(1);

/// A process-unique connection number.
fn next_id() -> u64 {
    CONN_IDS.fetch_add(1, Ordering::Relaxed)
}

/// Whether a listener speaks TLS (with the certificates of the policy in force) or plain TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plain HTTP.
    Plain,
    /// TLS with `[tls]` of the policy in force at each handshake.
    Tls,
}

/// The client preface every HTTP/2 connection starts with (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether the first bytes of a plain connection may still be HTTP/2's preface.
fn may_be_http2(first: &[u8]) -> bool {
    H2_PREFACE.starts_with(first)
}

/// Whether a plain connection opens with HTTP/2's preface, by peeking until its bytes
/// say: the whole preface, or a byte that leaves it (`None`: closed first). A request split
/// after `P` must not reach hyper's HTTP/1, which takes heads mmgate's own server refuses.
async fn opens_http2(stream: &tokio::net::TcpStream) -> std::io::Result<Option<bool>> {
    let mut first = [0u8; H2_PREFACE.len()];
    let mut seen = 0;
    loop {
        let n = stream.peek(&mut first).await?;
        if n == 0 {
            return Ok(None);
        }
        let h2 = may_be_http2(&first[..n]);
        if !h2 || n == first.len() {
            return Ok(Some(h2));
        }
        if n == seen {
            // Part of the preface, and nothing more since the last look: wait for the next
            // segment. The readiness tokio keeps is cleared first (a peek leaves it set),
            // then the socket is looked at once more without it, so that a segment that
            // came in between is not missed.
            let _ = stream.try_io(tokio::io::Interest::READABLE, || {
                Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
            });
            let mut again = [std::mem::MaybeUninit::uninit(); H2_PREFACE.len()];
            match socket2::SockRef::from(stream).peek(&mut again) {
                Ok(m) if m != n => continue,
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => return Err(e),
                _ => stream.readable().await?,
            }
        }
        seen = n;
    }
}

/// Serves the gateway in force on `listener` from `workers` threads until `stop` turns
/// true, then drains open connections for at most `drain`.
///
/// This task accepts; each worker thread runs a single-threaded runtime that serves the
/// connections handed to it, in turn. A connection, its requests and their upstream
/// connections stay on one thread: no work stealing and no cross-thread wake-ups per
/// request, and the threads get equal shares of the connections.
pub async fn serve(
    listener: TcpListener,
    live: Arc<Live>,
    transport: Transport,
    mut stop: watch::Receiver<bool>,
    drain: Duration,
    workers: usize,
) {
    let mut handoff = Vec::with_capacity(workers);
    let mut ended = Vec::with_capacity(workers);
    for worker in 0..workers.max(1) {
        let (to_worker, accepted) = mpsc::unbounded_channel();
        let (done, finished) = oneshot::channel::<()>();
        let live = live.clone();
        let started = std::thread::Builder::new()
            .name(format!("mmgate-worker-{worker}"))
            .spawn(move || {
                let _done = done;
                crate::upstream::on_worker_thread();
                crate::record::batch_log_lines();
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .on_thread_park(crate::record::flush_log_lines)
                    .build();
                match rt {
                    Ok(rt) => rt.block_on(async move {
                        // A thread that never goes idle still writes its lines within a second.
                        let flush = async {
                            let mut every = tokio::time::interval(Duration::from_secs(1));
                            loop {
                                every.tick().await;
                                crate::record::flush_log_lines();
                            }
                        };
                        tokio::select! {
                            () = work(accepted, live, transport, drain) => {}
                            () = flush => {}
                        }
                    }),
                    Err(e) => tracing::error!(error = %e, worker, "cannot start a worker"),
                }
                crate::record::flush_log_lines();
            });
        match started {
            Ok(_) => {
                handoff.push(to_worker);
                ended.push(finished);
            }
            Err(e) => tracing::error!(error = %e, worker, "cannot start a worker thread"),
        }
    }
    let shutdown = stop.wait_for(|s| *s);
    tokio::pin!(shutdown);
    let mut next = 0;
    while !handoff.is_empty() {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut shutdown => break,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors, say: the listener stays readable, so back off.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        let mut accepted = (stream, remote);
        while !handoff.is_empty() {
            next = (next + 1) % handoff.len();
            match handoff[next].send(accepted) {
                Ok(()) => break,
                Err(mpsc::error::SendError(back)) => {
                    tracing::error!("a worker thread ended; serving on the others");
                    handoff.swap_remove(next);
                    accepted = back;
                }
            }
        }
    }
    // New connections are refused from here; the workers drain what they hold.
    drop(listener);
    drop(handoff);
    futures_util::future::join_all(ended).await;
}

/// A connection handed to a worker.
type Accepted = (std::net::TcpStream, SocketAddr);

/// One worker: serves the connections it is handed until the acceptor stops, then drains
/// them for at most `drain`.
async fn work(
    mut accepted: mpsc::UnboundedReceiver<Accepted>,
    live: Arc<Live>,
    transport: Transport,
    drain: Duration,
) {
    // On hyper's connections the header timeout is kept by the framing watch (one timer per
    // connection instead of hyper's one per request head).
    const MAX_BUF: usize = 64 * 1024;
    // Each stream may buffer a body up to the pool's limit before admission: hyper's
    // default of 200 streams per connection would let one connection take 200 of them.
    const MAX_STREAMS: u32 = 32;
    let mut auto = auto::Builder::new(TokioExecutor::new());
    auto.http1().header_read_timeout(None).max_buf_size(MAX_BUF);
    auto.http2().max_concurrent_streams(MAX_STREAMS);
    let builder = Arc::new(auto);
    // hyper's connections drain through `graceful`, the plain HTTP/1 ones through `drain`.
    let graceful = GracefulShutdown::new();
    let (drain_all, drain_one) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    while let Some((stream, remote)) = accepted.recv().await {
        while tasks.try_join_next().is_some() {}
        let (stream, local) = match tokio::net::TcpStream::from_std(stream)
            .and_then(|s| s.local_addr().map(|local| (s, local)))
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot serve an accepted connection");
                continue;
            }
        };
        let watcher = graceful.watcher();
        let (live, builder, mut drain_one) = (live.clone(), builder.clone(), drain_one.clone());
        tasks.spawn(async move {
            let opened = tokio::time::Instant::now();
            // The policy in force when the connection opened.
            let header_timeout = live.gateway().config().limits.header_timeout;
            let tls = match transport {
                Transport::Plain => None,
                Transport::Tls => live.gateway().config().tls.clone(),
            };
            let served = match tls {
                None => {
                    // A connection that never sends a byte is closed here, before any
                    // per-connection state is built for it (slowloris), or at a drain.
                    let peeked = tokio::select! {
                        p = tokio::time::timeout(header_timeout, opens_http2(&stream)) => p,
                        _ = drain_one.wait_for(|d| *d) => return,
                    };
                    let h2 = match peeked {
                        Ok(Ok(Some(h2))) => h2,
                        _ => return,
                    };
                    if !h2 {
                        let conn = ConnInfo::new(next_id(), remote, local, None);
                        let conn = Arc::new(conn.served_by_own_http1());
                        let timeout = (opened, header_timeout);
                        crate::http1::serve(stream, conn, live, timeout, drain_one).await;
                        return;
                    }
                    let conn = (stream, remote, local, None);
                    connection(&builder, live, conn, header_timeout, watcher).await
                }
                Some(tls) => match tokio::select! {
                    // A handshake not finished when the drain begins is no request in flight.
                    a = crate::tls::accept(tls.config, stream, header_timeout) => a,
                    _ = drain_one.wait_for(|d| *d) => return,
                } {
                    Ok((stream, peer)) => {
                        let conn = (stream, remote, local, Some(peer));
                        connection(&builder, live, conn, header_timeout, watcher).await
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, %remote, "TLS handshake failed");
                        return;
                    }
                },
            };
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    let _ = drain_all.send(true);
    let drained = async {
        graceful.shutdown().await;
        while tasks.join_next().await.is_some() {}
    };
    if tokio::time::timeout(drain, drained).await.is_err() {
        tracing::warn!(
            seconds = drain.as_secs(),
            "drain deadline passed; closing open connections"
        );
    }
    tasks.abort_all();
}

/// Serves one connection with hyper (HTTP/2, or anything over TLS): its stream, the client's
/// and its own address and, over TLS, the handshake's client certificate names (`Some(None)`
/// without a certificate), until it ends or shutdown drains it. Requests over TLS are marked
/// `X-Forwarded-Proto: https` (replacing what the client sent).
async fn connection<S>(
    builder: &auto::Builder<TokioExecutor>,
    live: Arc<Live>,
    (stream, remote, local, tls): (S, SocketAddr, SocketAddr, Option<Option<PeerCertificate>>),
    header_timeout: Duration,
    watcher: hyper_util::server::graceful::Watcher,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let https = tls.is_some();
    let conn = Arc::new(ConnInfo::new(next_id(), remote, local, tls));
    let send_timeout = live.gateway().config().limits.send_timeout;
    let (stream, progress) = Watched::new(stream, header_timeout, send_timeout);
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let exchange = progress.begin();
        let http2 = req.version() == http::Version::HTTP_2;
        if req.version() < http::Version::HTTP_2 && exchange.ambiguous() {
            req.extensions_mut().insert(AmbiguousFraming);
        }
        if https {
            req.headers_mut()
                .insert("x-forwarded-proto", http::HeaderValue::from_static("https"));
        }
        let connect = req.method() == http::Method::CONNECT;
        // A WebSocket handshake's connection, once hyper has written the `101`.
        let upgrade = (req.version() < http::Version::HTTP_2
            && crate::tunnel::asks_websocket(req.headers()))
        .then(|| {
            req.extensions_mut().insert(Handshake);
            hyper::upgrade::on(&mut req)
        });
        let gw = live.gateway();
        let conn = conn.clone();
        async move {
            // hyper writes the header map: a forwarded response's fields join it.
            let answer = gw.handle(req.map(Body::new), &conn).await;
            // After a CONNECT too, as mmgate's own server closes (HTTP/1 only).
            let mut close = !http2 && (answer.closes_connection() || connect);
            let mut res = answer.into_response();
            if let Some(upgrade) = upgrade {
                match Switch::take(&mut res) {
                    Some(switched) => {
                        *res.headers_mut() = switched.header_map();
                        // The connection is the tunnel's: timed as busy while it lasts.
                        exchange.switched();
                        tokio::spawn(async move {
                            let _exchange = exchange;
                            let spliced = match upgrade.await {
                                Ok(client) => {
                                    let client = TokioIo::new(client);
                                    switched.splice(client, &[], send_timeout).await
                                }
                                Err(e) => Err(std::io::Error::other(e)),
                            };
                            if let Err(e) = spliced {
                                tracing::debug!(error = %e, "WebSocket tunnel ended with an error");
                            }
                        });
                        return Ok(res.map(|inner| Answer {
                            inner,
                            _exchange: None,
                        }));
                    }
                    // A refused handshake: the connection closes after the answer, as
                    // vLLM's server closes it.
                    None => close = true,
                }
            }
            if close {
                res.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            Ok::<_, Infallible>(res.map(|inner| {
                let answer = Answer {
                    inner,
                    _exchange: Some(exchange),
                };
                match http2 {
                    // One stream's window can stay shut while the connection's writes go
                    // on: the body, and the exchange with it, are let go when the client
                    // takes nothing (so the connection is timed as idle again).
                    true => Answer {
                        inner: stall::watch(Body::new(answer), send_timeout),
                        _exchange: None,
                    },
                    false => answer,
                }
            }))
        }
    });
    let served = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    watcher.watch(served.into_owned()).await
}

/// A response body that holds its request's [`Exchange`] until it has ended (hyper drops
/// it once it is written, or when the connection fails), so that the wait for the next
/// request head is timed only from then on.
struct Answer {
    inner: Body,
    _exchange: Option<Exchange>,
}

impl http_body::Body for Answer {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::{may_be_http2, opens_http2};
    use futures_util::FutureExt;
    use std::io::Write;

    /// Sends `parts` one write at a time, driving `opens_http2` between them, and returns
    /// what it decided once all were sent.
    async fn decided(parts: &[&[u8]]) -> Option<bool> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.set_nodelay(true).unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let deciding = opens_http2(&server);
        let mut deciding = std::pin::pin!(deciding);
        for part in &parts[..parts.len() - 1] {
            client.write_all(part).unwrap();
            // Let it look at what has come: a prefix of the preface does not decide.
            for _ in 0..50 {
                assert!(deciding.as_mut().now_or_never().is_none(), "{part:?}");
                tokio::task::yield_now().await;
            }
        }
        client.write_all(parts[parts.len() - 1]).unwrap();
        deciding.await.unwrap()
    }

    #[tokio::test]
    async fn a_request_split_inside_the_preface_is_decided_by_its_later_bytes() {
        let preface: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        assert_eq!(decided(&[b"P", b"OST / HTTP/1.1\r\n"]).await, Some(false));
        assert_eq!(
            decided(&[b"P", b"R", b"I * HTTP/1.1\r\n"]).await,
            Some(false)
        );
        assert_eq!(decided(&[b"P", &preface[1..]]).await, Some(true));
        assert_eq!(decided(&[b"PRI * HT", &preface[8..]]).await, Some(true));
        assert_eq!(decided(&[b"GET / HTTP/1.1\r\n\r\n"]).await, Some(false));
        assert_eq!(decided(&[preface]).await, Some(true));
    }

    #[test]
    fn only_a_prefix_of_the_http2_preface_goes_to_auto_detection() {
        for first in [
            &b"P"[..],
            b"PR",
            b"PRI * HTTP/2",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ] {
            assert!(may_be_http2(first), "{first:?}");
        }
        for first in [
            &b"POST /v1/chat"[..],
            b"PUT",
            b"GET /",
            b"PRI * HTTP/1.1",
            b"\r\n",
        ] {
            assert!(!may_be_http2(first), "{first:?}");
        }
    }
}
