//! Upstream HTTP/1.1 connections, kept alive and driven by the request that holds them.
//!
//! A pooled client that runs each connection in a task of its own (hyper-util's) hands
//! every request, response head and response chunk across a channel to or from that task:
//! a task wake-up each. Here a request checks a connection out of the member's idle list
//! (or opens one), polls the connection's future itself while its request is written and
//! its response read ([`Leased`]), and puts it back once the response has ended and the
//! connection is ready for another request. Nobody polls an idle connection: one the
//! upstream closed is noticed when it is next checked out, or by the sweep that also
//! expires connections idle for longer than `idle_timeout`.
//!
//! A request whose reused connection turns out to be closed before the request was written
//! is sent again on another connection; one that was written is never resent.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::Body as _;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::ServiceExt;

type Io = MaybeHttpsStream<TokioIo<TcpStream>>;

/// Idle connections kept per member at most (the oldest is closed first).
const MAX_IDLE: usize = 1024;
/// The longest pause between two sweeps of the idle list.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// One member's connections: the connector and the idle list.
pub(super) struct Conns {
    connector: HttpsConnector<HttpConnector>,
    idle: Mutex<VecDeque<Idle>>,
    idle_timeout: Duration,
    sweeping: AtomicBool,
}

/// A connection waiting for its next request.
struct Idle {
    lease: Lease,
    since: Instant,
}

/// A connection held by one request: the sender and the connection's future.
struct Lease {
    tx: SendRequest<Body>,
    /// `None` once the connection has ended.
    conn: Option<Connection<Io, Body>>,
}

impl Lease {
    /// Lets the connection read and write what it can; notes its end.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = &mut self.conn {
            if Pin::new(conn).poll(cx).is_ready() {
                self.conn = None;
            }
        }
    }

    /// Drives it once without a task to wake (a closed connection ends here).
    fn drive_now(&mut self) {
        self.drive(&mut Context::from_waker(Waker::noop()));
    }

    /// Open, and ready to send a request.
    fn reusable(&self) -> bool {
        self.conn.is_some() && self.tx.is_ready()
    }
}

/// Why a request got no response head.
pub(super) enum SendError {
    /// No connection could be opened (TCP or TLS).
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed, or the request's own body did.
    Http(hyper::Error),
}

impl Conns {
    /// An empty pool opening connections with `connector`.
    pub(super) fn new(connector: HttpsConnector<HttpConnector>, idle_timeout: Duration) -> Self {
        Conns {
            connector,
            idle: Mutex::default(),
            idle_timeout,
            sweeping: AtomicBool::new(false),
        }
    }

    /// Sends `req` (its URI in origin form) to `target` (scheme and authority) and returns
    /// the response, whose body keeps driving the connection.
    pub(super) async fn send(
        self: &Arc<Self>,
        target: &Uri,
        mut req: Request<Body>,
    ) -> Result<Response<Leased>, SendError> {
        loop {
            let (mut lease, reused) = match self.checkout() {
                Some(lease) => (lease, true),
                None => (self.connect(target).await?, false),
            };
            let mut sent = std::pin::pin!(lease.tx.try_send_request(req));
            let res = poll_fn(|cx| {
                lease.drive(cx);
                sent.as_mut().poll(cx)
            })
            .await;
            match res {
                Ok(res) => {
                    let home = Arc::downgrade(self);
                    return Ok(res.map(|body| Leased {
                        body,
                        lease: Some(lease),
                        ended: false,
                        home,
                    }));
                }
                Err(mut e) => match e.take_message() {
                    Some(again) if reused => req = again,
                    _ => return Err(SendError::Http(e.into_error())),
                },
            }
        }
    }

    async fn connect(&self, target: &Uri) -> Result<Lease, SendError> {
        let io = self
            .connector
            .clone()
            .oneshot(target.clone())
            .await
            .map_err(SendError::Connect)?;
        let (tx, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(SendError::Http)?;
        Ok(Lease {
            tx,
            conn: Some(conn),
        })
    }

    /// The most recently used open connection, if any.
    fn checkout(&self) -> Option<Lease> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(Idle { mut lease, since }) = idle.pop_back() {
            if since.elapsed() >= self.idle_timeout {
                idle.clear(); // the rest are older
                return None;
            }
            lease.drive_now();
            if lease.reusable() {
                return Some(lease);
            }
        }
        None
    }

    /// Puts a connection whose response has ended back, if it can take another request.
    fn checkin(self: &Arc<Self>, mut lease: Lease) {
        lease.drive_now();
        if !lease.reusable() || self.idle_timeout.is_zero() {
            return;
        }
        {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() >= MAX_IDLE {
                idle.pop_front();
            }
            idle.push_back(Idle {
                lease,
                since: Instant::now(),
            });
        }
        if !self.sweeping.swap(true, Ordering::Relaxed) {
            self.start_sweeping();
        }
    }

    /// Closes, every few seconds, the idle connections that expired or that the upstream
    /// closed; ends with the pool.
    fn start_sweeping(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.sweeping.store(false, Ordering::Relaxed);
            return;
        };
        let home = Arc::downgrade(self);
        let period = self.idle_timeout.min(SWEEP_EVERY);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(conns) = home.upgrade() else { return };
                conns.sweep();
            }
        });
    }

    fn sweep(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain_mut(|i| {
            i.lease.drive_now();
            i.since.elapsed() < self.idle_timeout && i.lease.reusable()
        });
    }

    /// Idle connections now (tests).
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

/// A response body read from a leased connection: polling it drives the connection, and
/// when it has ended the connection goes back to the idle list (dropped unfinished, the
/// connection is closed).
pub(super) struct Leased {
    body: Incoming,
    lease: Option<Lease>,
    ended: bool,
    home: Weak<Conns>,
}

impl Leased {
    fn release(&mut self) {
        if !(self.ended || self.body.is_end_stream()) {
            return;
        }
        if let (Some(lease), Some(home)) = (self.lease.take(), self.home.upgrade()) {
            home.checkin(lease);
        }
    }
}

impl http_body::Body for Leased {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let mut next = Pin::new(&mut this.body).poll_frame(cx);
        if next.is_pending() {
            if let Some(lease) = &mut this.lease {
                lease.drive(cx);
                next = Pin::new(&mut this.body).poll_frame(cx);
            }
        }
        match &next {
            Poll::Ready(None) => {
                this.ended = true;
                this.release();
            }
            Poll::Ready(Some(Err(_))) => this.lease = None,
            _ => {}
        }
        next
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn conns(idle: Duration) -> Arc<Conns> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(super::super::plain_only())
            .https_or_http()
            .enable_http1()
            .wrap_connector(HttpConnector::new());
        Arc::new(Conns::new(connector, idle))
    }

    /// An upstream that answers `answers` requests per connection (then closes it) and
    /// reports each connection it accepts.
    async fn upstream(answers: usize) -> (Uri, tokio::sync::mpsc::UnboundedReceiver<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let _ = tx.send(());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for _ in 0..answers {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            let mut chunk = [0u8; 1024];
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.clear();
                        let res = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if s.write_all(res).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (format!("http://{addr}").parse().unwrap(), rx)
    }

    async fn get(conns: &Arc<Conns>, target: &Uri) -> Bytes {
        let req = Request::get("/")
            .header("host", "x")
            .body(Body::empty())
            .unwrap();
        let Ok(res) = conns.send(target, req).await else {
            panic!("no response");
        };
        res.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn a_connection_is_reused_once_its_response_has_ended() {
        let (target, mut accepted) = upstream(100).await;
        let conns = conns(Duration::from_secs(60));
        for _ in 0..5 {
            assert_eq!(get(&conns, &target).await, "ok");
            assert_eq!(conns.idle_count(), 1);
        }
        accepted.recv().await.unwrap();
        assert!(
            accepted.try_recv().is_err(),
            "one connection for five requests"
        );
    }

    #[tokio::test]
    async fn a_response_dropped_unfinished_closes_its_connection() {
        let (target, _accepted) = upstream(100).await;
        let conns = conns(Duration::from_secs(60));
        let req = Request::get("/").body(Body::empty()).unwrap();
        let Ok(res) = conns.send(&target, req).await else {
            panic!("no response");
        };
        drop(res);
        // Content-Length 2 with nothing read yet: the body had not ended.
        assert_eq!(conns.idle_count(), 0);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_is_not_reused() {
        let (target, mut accepted) = upstream(1).await;
        let conns = conns(Duration::from_secs(60));
        assert_eq!(get(&conns, &target).await, "ok");
        accepted.recv().await.unwrap();
        // The upstream closes after one answer: once the close has arrived, the sweep
        // drops the connection, and the next request opens another.
        while conns.idle_count() > 0 {
            tokio::task::yield_now().await;
            conns.sweep();
        }
        assert_eq!(get(&conns, &target).await, "ok");
        accepted.recv().await.unwrap();
    }

    #[tokio::test]
    async fn a_request_on_a_connection_found_closed_at_checkout_goes_on_a_new_one() {
        let (target, mut accepted) = upstream(1).await;
        let conns = conns(Duration::from_secs(60));
        for _ in 0..3 {
            assert_eq!(get(&conns, &target).await, "ok");
            accepted.recv().await.unwrap();
            // Let the close arrive; the checkout then finds it (no sweep here).
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        }
    }

    #[tokio::test]
    async fn idle_connections_expire() {
        let (target, mut accepted) = upstream(100).await;
        let conns = conns(Duration::ZERO);
        assert_eq!(get(&conns, &target).await, "ok");
        assert_eq!(conns.idle_count(), 0);
        assert_eq!(get(&conns, &target).await, "ok");
        accepted.recv().await.unwrap();
        accepted.recv().await.unwrap();
    }
}
