//! Live reload: the [`Gateway`] in force sits in an [`ArcSwap`]; each connection's requests
//! load it once (no lock on the request path), so in-flight requests finish under the policy
//! they started with and new ones use the new one.
//!
//! Invariants:
//! - A new policy (and every certificate it names) is parsed and validated completely before
//!   anything changes; on any problem the old one keeps serving, the problem is logged and
//!   `mmgate_config_reloads_total{result="failure"}` counts it.
//! - Limits and pools whose names survive keep their state (rate limiter budgets, permits
//!   held, member health): see [`Gateway::successor`].
//! - Listen addresses and turning TLS on or off need a restart; a reload that changes them
//!   is refused as a whole.
//! - Triggers: [`Live::reload`] (SIGHUP in the binary, tests call it directly) and a polling
//!   watcher of the policy and certificate files (`reload.interval_ms`; see
//!   [`Watched`] for what counts as a change).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::{watch, Mutex};

use crate::config::{Config, ConfigError, Watched};
use crate::gateway::Gateway;

/// Why a reload was refused (the old policy keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The gateway was started from a policy given in memory, so there is no file to re-read.
    #[error("no policy file to reload from")]
    NoSource,
    /// The new policy (or a file it names) is invalid.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The new policy changes something only a restart can.
    #[error("{0} changed; that needs a restart")]
    NeedsRestart(&'static str),
}

/// The gateway in force, swappable, and the process's lifecycle state.
pub struct Live {
    current: ArcSwap<Gateway>,
    source: Option<PathBuf>,
    draining: AtomicBool,
    reloading: Mutex<()>,
    generation: watch::Sender<u64>,
}

impl Live {
    /// Wraps the first gateway; `source` is the policy file reloads re-read.
    pub fn new(gateway: Arc<Gateway>, source: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Live {
            current: ArcSwap::new(gateway),
            source,
            draining: AtomicBool::new(false),
            reloading: Mutex::new(()),
            generation: watch::channel(0).0,
        })
    }

    /// The gateway in force (one atomic load).
    pub fn gateway(&self) -> Arc<Gateway> {
        self.current.load_full()
    }

    /// The policy file, if started from one.
    pub fn source(&self) -> Option<&PathBuf> {
        self.source.as_ref()
    }

    /// Whether shutdown has begun (`/readyz` answers 503).
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Marks the gateway as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// Counts reloads: bumped after each successful swap (health checks restart on it).
    pub fn generation(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Re-reads the policy file and swaps it in, or keeps the old one and says why.
    pub async fn reload(&self) -> Result<(), ReloadError> {
        self.attempt().await.1
    }

    /// [`Live::reload`], and the files it read (stamped before each read), valid or not.
    async fn attempt(&self) -> (Option<Watched>, Result<(), ReloadError>) {
        let (read, result) = match &self.source {
            None => (None, Err(ReloadError::NoSource)),
            Some(path) => match Config::attempt(path) {
                (read, Ok(config)) => (Some(read), self.apply(config).await),
                (read, Err(e)) => (Some(read), Err(e.into())),
            },
        };
        if let Err(e) = &result {
            self.count(false);
            tracing::error!(error = %e, "policy reload refused; the old policy keeps serving");
        }
        (read, result)
    }

    /// Swaps in an already validated configuration (unless it changes the listeners).
    async fn apply(&self, config: Config) -> Result<(), ReloadError> {
        let _one_at_a_time = self.reloading.lock().await;
        let old = self.gateway();
        restart_only(old.config(), &config)?;
        let next = old.successor(config);
        self.current.store(next.clone());
        self.count(true);
        self.generation.send_modify(|g| *g += 1);
        tracing::info!(
            pools = next.pools().len(),
            clients = next.config().clients.len(),
            "policy reloaded"
        );
        next.refresh_facts().await;
        Ok(())
    }

    fn count(&self, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        self.gateway()
            .metrics()
            .config_reloads
            .with_label_values(&[result])
            .inc();
    }

    /// Polls the policy and certificate files until `stop`, reloading when one changes,
    /// while the policy in force says to (`reload.watch`: a reload may turn it on or off).
    ///
    /// A change is judged against the stamps taken as the files were last read (at start,
    /// or by the last reload, refused ones included), never against a later look: a file
    /// written during a reload is reloaded next, and a file that only a refused policy
    /// names is watched until the policy is fixed.
    pub async fn watch_files(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        if self.source.is_none() {
            return;
        }
        let mut reloaded = self.generation();
        let mut last = self.gateway().config().watched.clone();
        loop {
            let every = self.gateway().config().reload.watch;
            let poll = async {
                match every {
                    Some(every) => tokio::time::sleep(every).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = poll => {}
                changed = reloaded.changed() => {
                    // A reload (SIGHUP, or this loop's): the policy in force says what its
                    // files were and how to go on.
                    if changed.is_err() {
                        return;
                    }
                    last = self.gateway().config().watched.clone();
                    continue;
                }
                _ = stop.wait_for(|s| *s) => return,
            }
            if last.changed() {
                tracing::info!("policy or certificate file changed; reloading");
                // A refused reload is not retried until one of the files it read changes.
                if let (Some(read), _) = self.attempt().await {
                    last = read;
                }
            }
        }
    }
}

fn restart_only(old: &Config, new: &Config) -> Result<(), ReloadError> {
    if old.listen != new.listen || old.plain != new.plain {
        return Err(ReloadError::NeedsRestart(
            "listen.addr or listen.plain_addr",
        ));
    }
    if old.admin != new.admin {
        return Err(ReloadError::NeedsRestart("listen.admin"));
    }
    if old.workers != new.workers {
        return Err(ReloadError::NeedsRestart("listen.workers"));
    }
    if old.tls.is_some() != new.tls.is_some() {
        return Err(ReloadError::NeedsRestart("turning [tls] on or off"));
    }
    Ok(())
}
