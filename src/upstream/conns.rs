//! Upstream connections per member, kept alive and used by one request at a time.
//!
//! A request checks a connection out of the member's idle list (or opens one: TCP, then
//! TLS for an `https://` member), writes its request and reads the response on it from its
//! own task ([`h1`](super::h1)), and the connection comes back when the response body has
//! ended cleanly. There is no connection task and no channel between the request and its
//! connection. Nobody polls an idle connection: one the upstream closed is noticed when it
//! is next checked out (what has already arrived is read, without waiting), or by the
//! sweep that also expires connections idle for longer than `idle_timeout`.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::body::Body;
use http::header::{HeaderName, HeaderValue};
use http::{Request, Response};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::fields::ResponseFields;
use super::h1::{Conn, Failure, Handshake, Link, Reuse, Stream, Streamed};

/// Idle connections kept per member and worker thread at most (the oldest is closed first).
const MAX_IDLE: usize = 1024;
/// Idle lists per member: one per data-plane worker thread (a connection is reused on the
/// thread, and so the runtime, that opened it), and list 0 for every other thread.
const SHARDS: usize = 65;
/// The longest pause between two sweeps of the idle lists.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

thread_local! {
    /// This thread's worker number (0: not a data-plane worker).
    static WORKER: Cell<usize> = const { Cell::new(0) };
}

/// Worker numbers handed out so far (every listener's workers count).
static WORKERS: AtomicUsize = AtomicUsize::new(0);

/// Marks the current thread as a data-plane worker with a runtime of its own: it gets its
/// own idle connections (a socket is used only on the runtime that opened it).
pub(crate) fn on_worker_thread() {
    let n = WORKERS.fetch_add(1, Ordering::Relaxed) + 1;
    WORKER.with(|w| w.set(n));
}

fn worker() -> usize {
    WORKER.with(Cell::get)
}

/// Where one member's connections go: its address, TLS, and idle lists.
pub(super) struct Conns {
    host: String,
    port: u16,
    /// For an `https://` member: the TLS client and the name its certificate must have.
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    connect_timeout: Duration,
    idle: Box<[Mutex<VecDeque<Idle>>]>,
    idle_timeout: Duration,
    sweeping: AtomicBool,
}

/// A connection waiting for its next request.
struct Idle {
    conn: Conn,
    since: Instant,
    /// The worker (runtime) that opened it; only that one takes it again.
    owner: usize,
}

/// Why a request got no response head.
pub(super) enum SendError {
    /// No connection could be opened (TCP or TLS).
    Connect(String),
    /// The exchange failed before a whole response head.
    Failed(Failure),
}

/// What a WebSocket handshake opened (one per handshake, returned once: its size costs
/// nothing worth a box).
#[allow(clippy::large_enum_variant)]
pub(super) enum Opened {
    /// The upstream switched: its `101` head, what it sent after it, the connection.
    Switched(bytes::Bytes, bytes::BytesMut, Stream),
    /// A final answer.
    Answered(Response<Leased>, ResponseFields),
}

/// A response body that hands its connection back to the idle list when it has ended.
pub(super) type Leased = Streamed<Checkin>;

/// Hands a connection back to its member's idle list.
pub(super) struct Checkin(Weak<Conns>);

impl Reuse for Checkin {
    fn reuse(self, conn: Conn) {
        if let Some(conns) = self.0.upgrade() {
            conns.checkin(conn);
        }
    }
}

impl Conns {
    /// An empty pool for the member at `url`; `tls` is used for `https://`.
    pub(super) fn new(
        url: &http::Uri,
        tls: Arc<rustls::ClientConfig>,
        connect_timeout: Duration,
        idle_timeout: Duration,
    ) -> Self {
        let https = url.scheme() == Some(&http::uri::Scheme::HTTPS);
        let host = url.host().unwrap_or("127.0.0.1");
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let tls = https.then(|| {
            let mut config = (*tls).clone();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            let name = rustls::pki_types::ServerName::try_from(host.clone()).unwrap_or_else(|_| {
                rustls::pki_types::ServerName::try_from("invalid.").expect("a valid name")
            });
            (tokio_rustls::TlsConnector::from(Arc::new(config)), name)
        });
        Conns {
            port: url.port_u16().unwrap_or(if https { 443 } else { 80 }),
            host,
            tls,
            connect_timeout,
            idle: (0..SHARDS).map(|_| Mutex::default()).collect(),
            idle_timeout,
            sweeping: AtomicBool::new(false),
        }
    }

    /// Sends `req` (its URI in origin form; its body is taken once a connection is had),
    /// with the fields of `set` in place of its own of the same names, and returns the
    /// response (its status and body, which reads the rest from the connection) and its
    /// fields. `now` is the time of the call, read by the caller; a response head that has
    /// not come by `due` fails the exchange ([`Failure::TimedOut`]); a chunked body comes
    /// as its chunks came when `pass_chunks`.
    pub(super) async fn send(
        self: &Arc<Self>,
        req: &mut Request<Body>,
        set: &[(HeaderName, HeaderValue)],
        now: Instant,
        due: Instant,
        pass_chunks: bool,
    ) -> Result<(Response<Leased>, ResponseFields), SendError> {
        let conn = match self.checkout(now) {
            Some(conn) => conn,
            // Boxed: connecting is rare, and its future would otherwise size every request's.
            None => Box::pin(tokio::time::timeout_at(due, self.connect()))
                .await
                .map_err(|_| SendError::Failed(Failure::TimedOut))??,
        };
        let (head, framing, conn) = conn
            .send(req, set, pass_chunks, due)
            .await
            .map_err(SendError::Failed)?;
        let body = Streamed::new(conn, framing, Checkin(Arc::downgrade(self)));
        let mut res = Response::new(body);
        *res.status_mut() = head.status;
        Ok((res, head.fields))
    }

    /// Sends a WebSocket handshake on a connection of its own (never an idle one, and it
    /// never goes back): the switch ([`Opened::Switched`]), or a final answer as
    /// [`Conns::send`] returns one.
    pub(super) async fn handshake(
        self: &Arc<Self>,
        req: &mut Request<Body>,
        set: &[(HeaderName, HeaderValue)],
        due: Instant,
    ) -> Result<Opened, SendError> {
        let conn = Box::pin(tokio::time::timeout_at(due, self.connect()))
            .await
            .map_err(|_| SendError::Failed(Failure::TimedOut))??;
        Ok(
            match conn
                .handshake(req, set, due)
                .await
                .map_err(SendError::Failed)?
            {
                Handshake::Switched { head, early, io } => Opened::Switched(head, early, io),
                Handshake::Answered(head, framing, conn) => {
                    let body = Streamed::new(conn, framing, Checkin(Arc::downgrade(self)));
                    let mut res = Response::new(body);
                    *res.status_mut() = head.status;
                    Opened::Answered(res, head.fields)
                }
            },
        )
    }

    async fn connect(&self) -> Result<Conn, SendError> {
        let addr = (self.host.as_str(), self.port);
        let tcp = match tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(SendError::Connect(e.to_string())),
            Err(_) => {
                let ms = self.connect_timeout.as_millis();
                return Err(SendError::Connect(format!("no connection within {ms} ms")));
            }
        };
        let _ = tcp.set_nodelay(true);
        let io = match &self.tls {
            None => Stream::Left(tcp),
            Some((connector, name)) => match connector.connect(name.clone(), tcp).await {
                Ok(tls) => Stream::Right(Box::new(tls)),
                Err(e) => return Err(SendError::Connect(format!("TLS: {e}"))),
            },
        };
        Ok(Link::new(io))
    }

    /// This thread's idle list (shared with other workers only beyond `SHARDS - 1` of them).
    fn idle(&self) -> std::sync::MutexGuard<'_, VecDeque<Idle>> {
        let me = worker();
        let shard = &self.idle[if me == 0 {
            0
        } else {
            1 + (me - 1) % (SHARDS - 1)
        }];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recently used open connection this thread opened, if any, at `now`.
    fn checkout(&self, now: Instant) -> Option<Conn> {
        let me = worker();
        let mut idle = self.idle();
        // Oldest first (check-ins push at the back): drop the expired ones from the front.
        while idle
            .front()
            .is_some_and(|i| now.duration_since(i.since) >= self.idle_timeout)
        {
            idle.pop_front();
        }
        while let Some(at) = idle.iter().rposition(|i| i.owner == me) {
            let Some(mut found) = idle.remove(at) else {
                break;
            };
            if !found.conn.is_closed() {
                return Some(found.conn);
            }
        }
        None
    }

    /// Puts a connection whose response has ended back.
    fn checkin(self: &Arc<Self>, conn: Conn) {
        if self.idle_timeout.is_zero() {
            return;
        }
        {
            let mut idle = self.idle();
            if idle.len() >= MAX_IDLE {
                idle.pop_front();
            }
            idle.push_back(Idle {
                conn,
                since: Instant::now(),
                owner: worker(),
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
        let now = Instant::now();
        for shard in &self.idle {
            let mut idle = shard.lock().unwrap_or_else(|p| p.into_inner());
            idle.retain_mut(|i| {
                now.duration_since(i.since) < self.idle_timeout && !i.conn.is_closed()
            });
        }
    }

    /// Idle connections now (tests).
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.idle.iter().map(|s| s.lock().unwrap().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::Uri;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A response deadline no test reaches.
    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    fn conns(target: &Uri, idle: Duration) -> Arc<Conns> {
        let tls = Arc::new(super::super::plain_only());
        Arc::new(Conns::new(target, tls, Duration::from_secs(5), idle))
    }

    /// An upstream that answers `answers` requests per connection (then closes it) and
    /// reports each connection it accepts.
    async fn upstream(answers: usize) -> (Uri, tokio::sync::mpsc::UnboundedReceiver<()>) {
        answering(answers, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await
    }

    /// [`upstream`] answering `res` each time.
    async fn answering(
        answers: usize,
        res: &'static [u8],
    ) -> (Uri, tokio::sync::mpsc::UnboundedReceiver<()>) {
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
                        if s.write_all(res).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (format!("http://{addr}").parse().unwrap(), rx)
    }

    async fn get(conns: &Arc<Conns>) -> Bytes {
        let mut req = Request::get("/")
            .header("host", "x")
            .body(Body::empty())
            .unwrap();
        let Ok((res, _)) = conns
            .send(&mut req, &[], Instant::now(), far(), false)
            .await
        else {
            panic!("no response");
        };
        res.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn a_connection_is_reused_once_its_response_has_ended() {
        let (target, mut accepted) = upstream(100).await;
        let conns = conns(&target, Duration::from_secs(60));
        for _ in 0..5 {
            assert_eq!(get(&conns).await, "ok");
            assert_eq!(conns.idle_count(), 1);
        }
        accepted.recv().await.unwrap();
        assert!(
            accepted.try_recv().is_err(),
            "one connection for five requests"
        );
    }

    #[tokio::test]
    async fn a_connection_that_answered_a_server_error_is_not_reused() {
        // vLLM's server closes the connection after a 500 from an unhandled exception
        // without saying so: a request sent on it next would fail.
        let res = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 2\r\n\r\nno";
        let (target, mut accepted) = answering(100, res).await;
        let conns = conns(&target, Duration::from_secs(60));
        for _ in 0..2 {
            assert_eq!(get(&conns).await, "no");
            assert_eq!(conns.idle_count(), 0);
            accepted.recv().await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_response_dropped_unfinished_closes_its_connection() {
        let (target, _accepted) = upstream(100).await;
        let conns = conns(&target, Duration::from_secs(60));
        let mut req = Request::get("/").body(Body::empty()).unwrap();
        let Ok((res, _)) = conns
            .send(&mut req, &[], Instant::now(), far(), false)
            .await
        else {
            panic!("no response");
        };
        drop(res);
        // Content-Length 2 with nothing read yet: the body had not ended.
        assert_eq!(conns.idle_count(), 0);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_is_not_reused() {
        let (target, mut accepted) = upstream(1).await;
        let conns = conns(&target, Duration::from_secs(60));
        assert_eq!(get(&conns).await, "ok");
        accepted.recv().await.unwrap();
        // The upstream closes after one answer: once the close has arrived, the sweep
        // drops the connection, and the next request opens another.
        while conns.idle_count() > 0 {
            tokio::task::yield_now().await;
            conns.sweep();
        }
        assert_eq!(get(&conns).await, "ok");
        accepted.recv().await.unwrap();
    }

    #[tokio::test]
    async fn a_request_on_a_connection_found_closed_at_checkout_goes_on_a_new_one() {
        let (target, mut accepted) = upstream(1).await;
        let conns = conns(&target, Duration::from_secs(60));
        for _ in 0..3 {
            assert_eq!(get(&conns).await, "ok");
            accepted.recv().await.unwrap();
            // Let the close arrive; the checkout then finds it (no sweep here).
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        }
    }

    #[tokio::test]
    async fn a_worker_takes_back_only_the_connections_it_opened() {
        let (target, _accepted) = upstream(100).await;
        let conns = conns(&target, Duration::from_secs(60));
        on_worker_thread();
        assert_eq!(get(&conns).await, "ok");
        assert_eq!(conns.idle_count(), 1);
        let other = conns.clone();
        let taken = std::thread::spawn(move || {
            on_worker_thread();
            other.checkout(Instant::now()).is_some()
        })
        .join()
        .unwrap();
        assert!(!taken, "another worker's runtime never gets this socket");
        assert!(conns.checkout(Instant::now()).is_some());
    }

    #[tokio::test]
    async fn idle_connections_expire() {
        let (target, mut accepted) = upstream(100).await;
        let conns = conns(&target, Duration::ZERO);
        assert_eq!(get(&conns).await, "ok");
        assert_eq!(conns.idle_count(), 0);
        assert_eq!(get(&conns).await, "ok");
        accepted.recv().await.unwrap();
        accepted.recv().await.unwrap();
    }
}
