//! Starting a gateway: bind the data (TLS and/or plain) and admin listeners, start model
//! discovery, health checks and the file watcher, serve until told to stop. Used by the
//! binary and by tests (which bind port 0).
//!
//! Shutdown order: `/readyz` answers 503 at once, the data listeners close (new connections
//! are refused), in-flight requests and streams finish up to the drain deadline, and only
//! then does the admin listener stop, so a load balancer sees the 503 while draining.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{Config, ConfigError};
use crate::gateway::Gateway;
use crate::limits::RateClock;
use crate::listen::Transport;
use crate::reload::{Live, ReloadError};

/// How often the upstream facts (served models and routes) are refreshed.
const DISCOVERY_INTERVAL: Duration = Duration::from_secs(30);

/// A running gateway.
pub struct Running {
    /// The bound data-plane address (TLS when the policy has `[tls]`).
    pub addr: SocketAddr,
    /// The bound plain-HTTP address beside a TLS listener (`listen.plain_addr`).
    pub plain: Option<SocketAddr>,
    /// The bound admin address.
    pub admin: SocketAddr,
    /// The gateway the server started with (metrics are shared with its successors; see
    /// [`Running::live`] for the one in force).
    pub gateway: Arc<Gateway>,
    live: Arc<Live>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Admin connections open at once, at most (more wait in the listen backlog).
const ADMIN_CONNECTIONS: usize = 64;

/// Begins a graceful shutdown from anywhere (a signal handler).
#[derive(Clone)]
pub struct Shutdown {
    live: Arc<Live>,
    stop: watch::Sender<bool>,
}

impl Shutdown {
    /// `/readyz` turns 503, the listeners close and open requests drain.
    pub fn shutdown(&self) {
        self.live.start_draining();
        let _ = self.stop.send(true);
    }
}

impl Running {
    /// Stops accepting, drains connections, and waits for the data plane to end.
    pub async fn stop(self) {
        self.shutdown_handle().shutdown();
        let _ = self.task.await;
    }

    /// Waits until the data plane ends (after [`Running::stop`] or a signal handler).
    pub async fn wait(self) {
        let _ = self.task.await;
    }

    /// A handle that stops the gateway when sent `true`.
    pub fn stopper(&self) -> watch::Sender<bool> {
        self.stop.clone()
    }

    /// A handle that begins a graceful shutdown.
    pub fn shutdown_handle(&self) -> Shutdown {
        Shutdown {
            live: self.live.clone(),
            stop: self.stop.clone(),
        }
    }

    /// The gateway in force and the reload machinery.
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    /// Re-reads the policy file (and the certificates it names) and swaps it in; on error
    /// the old policy keeps serving.
    pub async fn reload(&self) -> Result<(), ReloadError> {
        self.live.reload().await
    }
}

/// Binds both listeners and starts serving.
pub async fn start(config: Config, drain: Duration) -> std::io::Result<Running> {
    start_with(config, drain, RateClock::default()).await
}

/// [`start`], with the rate limiters reading `clock` (tests pass a fake one).
pub async fn start_with(
    config: Config,
    drain: Duration,
    clock: RateClock,
) -> std::io::Result<Running> {
    launch(config, None, drain, clock).await
}

/// Why a gateway could not start from a policy file.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The policy is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// A listener could not be bound.
    #[error("cannot bind: {0}")]
    Bind(#[from] std::io::Error),
}

/// Loads `policy` and starts serving; reloads (SIGHUP, [`Running::reload`], file changes)
/// re-read it.
pub async fn start_file(
    policy: &Path,
    drain: Duration,
    clock: RateClock,
) -> Result<Running, StartError> {
    let config = Config::load(policy)?;
    Ok(launch(config, Some(policy.to_path_buf()), drain, clock).await?)
}

/// Binds `addr`; an error names the policy key and the address.
async fn bind(key: &str, addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("{key} = \"{addr}\": {e}")))
}

/// `source`: the policy file `config` was read from, re-read by reloads.
async fn launch(
    config: Config,
    source: Option<PathBuf>,
    drain: Duration,
    clock: RateClock,
) -> std::io::Result<Running> {
    let listener = bind("listen.addr", config.listen).await?;
    let plain_listener = match config.plain {
        Some(a) => Some(bind("listen.plain_addr", a).await?),
        None => None,
    };
    let admin_listener = bind("listen.admin", config.admin).await?;
    let addr = listener.local_addr()?;
    let plain = plain_listener
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()?;
    let admin = admin_listener.local_addr()?;
    let transport = match config.tls {
        Some(_) => Transport::Tls,
        None => Transport::Plain,
    };
    let gateway = Gateway::with_clock(config, clock);
    // Check the pools' members, then learn the served models, before the first request.
    let checks = gateway.pools().iter().map(|p| p.check());
    futures_util::future::join_all(checks).await;
    gateway.refresh_facts().await;
    let live = Live::new(gateway.clone(), source);
    let (stop, stopped) = watch::channel(false);
    health_checks(live.clone(), stopped.clone());
    tokio::spawn(live.clone().watch_files(stopped.clone()));
    discovery(live.clone(), stopped.clone());

    let (admin_stop, admin_stopped) = watch::channel(false);
    serve_admin(admin_listener, gateway.clone(), live.clone(), admin_stopped);

    let data = live.clone();
    let workers = gateway.config().workers;
    let task = tokio::spawn(async move {
        // However the stop comes (a signal, `Running::stop`, a `stopper`), `/readyz` turns 503.
        let mut rx = stopped.clone();
        let draining = data.clone();
        tokio::spawn(async move {
            if rx.wait_for(|s| *s).await.is_ok() {
                draining.start_draining();
            }
        });
        let main = crate::listen::serve(
            listener,
            data.clone(),
            transport,
            stopped.clone(),
            drain,
            workers,
        );
        let side = async {
            if let Some(l) = plain_listener {
                let (stop, plain) = (stopped.clone(), Transport::Plain);
                crate::listen::serve(l, data.clone(), plain, stop, drain, workers).await;
            }
        };
        futures_util::future::join(main, side).await;
        let _ = admin_stop.send(true);
    });
    Ok(Running {
        addr,
        plain,
        admin,
        gateway,
        live,
        stop,
        task,
    })
}

fn serve_admin(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    live: Arc<Live>,
    mut stop: watch::Receiver<bool>,
) {
    let header_timeout = gateway.config().limits.header_timeout;
    let router = crate::admin::router(gateway).layer(axum::Extension(live));
    // HTTP/1.1 with a timed head (a connection that sends nothing, or half a head, is
    // closed) and a bound on open connections, so that idle ones cannot take the file
    // descriptors the data plane needs.
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(ADMIN_CONNECTIONS));
    tokio::spawn(async move {
        let mut stopping = std::pin::pin!(async move {
            let _ = stop.wait_for(|s| *s).await;
        });
        loop {
            let accepted = tokio::select! {
                () = &mut stopping => return,
                slot = slots.clone().acquire_owned() => match slot {
                    Ok(slot) => tokio::select! {
                        () = &mut stopping => return,
                        a = listener.accept() => a.map(|(stream, _)| (stream, slot)),
                    },
                    Err(_) => return,
                },
            };
            let (stream, slot) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "admin accept failed");
                    continue;
                }
            };
            let router = router.clone();
            let service =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    tower::ServiceExt::oneshot(router.clone(), req.map(axum::body::Body::new))
                });
            let conn = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::spawn(async move {
                let _ = conn.await;
                drop(slot);
            });
        }
    });
}

fn discovery(live: Arc<Live>, mut stop: watch::Receiver<bool>) {
    tokio::spawn(async move {
        loop {
            let stopped = tokio::select! {
                () = tokio::time::sleep(DISCOVERY_INTERVAL) => false,
                r = stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped {
                break;
            }
            live.gateway().refresh_facts().await;
        }
    });
}

/// Checks each pool's members on its interval until stopped; after a reload the checks
/// restart for the new gateway's pools (no task for a pool without health checks).
fn health_checks(live: Arc<Live>, stop: watch::Receiver<bool>) {
    tokio::spawn(async move {
        let mut generation = live.generation();
        loop {
            let gateway = live.gateway();
            let (end, ended) = watch::channel(false);
            for pool in 0..gateway.pools().len() {
                pool_checks(gateway.clone(), pool, stop.clone(), ended.clone());
            }
            let mut s = stop.clone();
            let stopped = tokio::select! {
                r = generation.changed() => r.is_err(),
                _ = s.wait_for(|s| *s) => true,
            };
            let _ = end.send(true);
            if stopped {
                return;
            }
        }
    });
}

fn pool_checks(
    gateway: Arc<Gateway>,
    pool: usize,
    mut stop: watch::Receiver<bool>,
    mut ended: watch::Receiver<bool>,
) {
    let Some(health) = gateway.pools()[pool].health() else {
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(health.interval) => {}
                _ = stop.wait_for(|s| *s) => break,
                _ = ended.wait_for(|s| *s) => break,
            }
            gateway.pools()[pool].check().await;
        }
    });
}
