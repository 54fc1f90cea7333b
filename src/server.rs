//! Starting a gateway: bind the data and admin listeners, start model discovery, serve until
//! told to stop. Used by the binary and by tests (which bind port 0).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::gateway::Gateway;
use crate::limits::RateClock;

/// How often the upstream facts (served models and routes) are refreshed.
const DISCOVERY_INTERVAL: Duration = Duration::from_secs(30);

/// A running gateway.
pub struct Running {
    /// The bound data-plane address.
    pub addr: SocketAddr,
    /// The bound admin address.
    pub admin: SocketAddr,
    /// The gateway (metrics, configuration).
    pub gateway: Arc<Gateway>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Running {
    /// Stops accepting, drains connections, and waits for the data plane to end.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
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
    let listener = TcpListener::bind(config.listen).await?;
    let admin_listener = TcpListener::bind(config.admin).await?;
    let addr = listener.local_addr()?;
    let admin = admin_listener.local_addr()?;
    let gateway = Gateway::with_clock(config, clock);
    // Check the pools' members, then learn the served models, before the first request.
    let checks = gateway.pools().iter().map(|p| p.check());
    futures_util::future::join_all(checks).await;
    gateway.refresh_facts().await;
    let (stop, mut stopped) = watch::channel(false);
    for pool in 0..gateway.pools().len() {
        health_checks(gateway.clone(), pool, stopped.clone());
    }

    let admin_router = crate::admin::router(gateway.clone());
    let mut admin_stop = stopped.clone();
    tokio::spawn(async move {
        let stop = async move {
            let _ = admin_stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(admin_listener, admin_router)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!(error = %e, "admin listener failed");
        }
    });

    let discovery = gateway.clone();
    let mut discovery_stop = stopped.clone();
    tokio::spawn(async move {
        loop {
            let stopped = tokio::select! {
                () = tokio::time::sleep(DISCOVERY_INTERVAL) => false,
                r = discovery_stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped {
                break;
            }
            discovery.refresh_facts().await;
        }
    });

    let gw = gateway.clone();
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        crate::listen::serve(listener, gw, shutdown, drain).await;
    });
    Ok(Running {
        addr,
        admin,
        gateway,
        stop,
        task,
    })
}

/// Checks one pool's members on its interval until stopped (no task without health checks).
fn health_checks(gateway: Arc<Gateway>, pool: usize, mut stop: watch::Receiver<bool>) {
    let Some(health) = gateway.pools()[pool].health() else {
        return;
    };
    tokio::spawn(async move {
        loop {
            let stopped = tokio::select! {
                () = tokio::time::sleep(health.interval) => false,
                r = stop.wait_for(|s| *s) => r.is_ok(),
            };
            if stopped {
                break;
            }
            gateway.pools()[pool].check().await;
        }
    });
}
