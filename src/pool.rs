//! Upstream pools: named lists of vLLM servers, member selection (round robin or least in
//! flight), and active health checks of each member's `/health`.
//!
//! Invariants: a member marked unhealthy is skipped until a check sees it healthy again; a
//! member that refuses a connection is marked unhealthy at once (when the pool checks
//! health). With every member down the pool answers 503 naming itself. A pool without
//! health checks (the `[upstream]` shorthand) always tries its members, so failures stay 502.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::config::{Balance, HealthCheck, PoolConfig, PoolId, ValueRules};
use crate::error::GateError;
use crate::upstream::Upstream;

/// One member of a pool.
pub struct Member {
    /// The member's client.
    pub upstream: Upstream,
    url: http::Uri,
    healthy: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
}

/// Counts a request on its member until dropped (it rides with the response body); taken
/// only in a pool that balances by least in flight, the one reader of the count.
pub struct MemberGuard(Arc<AtomicUsize>);

impl Drop for MemberGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running pool.
pub struct Pool {
    /// Its index in the policy.
    pub id: PoolId,
    /// Its name (a metrics label; `interned`, so each request's record refers to it
    /// without a copy or a shared reference count).
    pub name: &'static str,
    /// Members run `--trust-request-mm-kwargs`.
    pub trusted: bool,
    /// Largest gated body it accepts.
    pub max_body_bytes: usize,
    /// Value limits on the kwargs.
    pub values: ValueRules,
    balance: Balance,
    health: Option<HealthCheck>,
    members: Vec<Member>,
    next: AtomicUsize,
}

impl Pool {
    /// Builds a pool (members start healthy; the first check runs before serving).
    pub fn new(id: PoolId, cfg: &PoolConfig) -> Self {
        Self::succeed(id, cfg, None)
    }

    /// Builds a pool for a reloaded policy: a member whose URL `previous` (the pool of the
    /// same name before) also had keeps its in-flight count, and its health while the pool
    /// is checked.
    pub fn succeed(id: PoolId, cfg: &PoolConfig, previous: Option<&Pool>) -> Self {
        let kept = |m: &crate::config::Upstream| {
            previous
                .and_then(|p| p.members.iter().find(|o| o.url == m.url))
                .map(|o| (o.healthy.clone(), o.in_flight.clone()))
        };
        Pool {
            id,
            name: interned(&cfg.name),
            trusted: cfg.trusted,
            max_body_bytes: cfg.max_body_bytes,
            values: cfg.values.clone(),
            balance: cfg.balance,
            health: cfg.health,
            members: cfg
                .members
                .iter()
                .map(|m| {
                    let (healthy, in_flight) = kept(m).unwrap_or_else(|| {
                        (
                            Arc::new(AtomicBool::new(true)),
                            Arc::new(AtomicUsize::new(0)),
                        )
                    });
                    if cfg.health.is_none() {
                        // Nothing would ever mark it up again: without checks, always tried.
                        healthy.store(true, Ordering::Relaxed);
                    }
                    Member {
                        upstream: Upstream::new(m),
                        url: m.url.clone(),
                        healthy,
                        in_flight,
                    }
                })
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// The health check settings.
    pub fn health(&self) -> Option<HealthCheck> {
        self.health
    }

    /// The members.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Picks a healthy member, and counts the request on it when the pool balances by least
    /// in flight.
    ///
    /// The counters are shared by every worker thread, so a write can move a cache line
    /// between cores: a pool of one member takes no turn, and a round-robin pool keeps no
    /// count.
    pub fn pick(&self) -> Result<(&Upstream, Option<MemberGuard>), GateError> {
        let healthy = |m: &&Member| m.healthy.load(Ordering::Acquire);
        let n = self.members.len();
        let start = match n {
            1 => 0,
            _ => self.next.fetch_add(1, Ordering::Relaxed),
        };
        let mut members = (0..n).map(|i| &self.members[(start + i) % n]);
        let chosen = match self.balance {
            Balance::RoundRobin => members.find(healthy),
            Balance::LeastInFlight => members
                .filter(healthy)
                .min_by_key(|m| m.in_flight.load(Ordering::Acquire)),
        };
        let Some(member) = chosen else {
            return Err(GateError::PoolUnavailable {
                pool: self.name.to_string(),
                members: n,
            });
        };
        let guard = (self.balance == Balance::LeastInFlight).then(|| {
            member.in_flight.fetch_add(1, Ordering::AcqRel);
            MemberGuard(member.in_flight.clone())
        });
        Ok((&member.upstream, guard))
    }

    /// Marks the member serving `authority` down after a failed connect (health-checked pools only).
    pub fn connect_failed(&self, authority: &str) {
        if self.health.is_none() {
            return;
        }
        for m in &self.members {
            if m.upstream.authority() == authority && m.healthy.swap(false, Ordering::AcqRel) {
                tracing::warn!(pool = %self.name, member = authority, "member unreachable; marked unhealthy");
            }
        }
    }

    /// Checks every member's `/health` once (a no-op without health checks).
    pub async fn check(&self) {
        let Some(h) = self.health else { return };
        let checks = self.members.iter().map(|m| async move {
            let ok = matches!(m.upstream.get("/health", h.timeout).await, Ok((s, _)) if s.is_success());
            let was = m.healthy.swap(ok, Ordering::AcqRel);
            if was != ok {
                tracing::warn!(pool = %self.name, member = m.upstream.authority(), healthy = ok, "member health changed");
            }
        });
        futures_util::future::join_all(checks).await;
    }

    /// Whether some member is healthy.
    pub fn available(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.healthy.load(Ordering::Acquire))
    }
}

/// `name` for the life of the process: leaked once per distinct name (pool names are few,
/// and a reload reuses them), so that requests refer to it without a reference count.
fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn pool(balance: &str) -> Pool {
        let c = Config::parse(&format!(
            "[pools.default]\nmembers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:2\", \"http://127.0.0.1:3\"]\nbalance = \"{balance}\"\n"
        ))
        .unwrap();
        Pool::new(0, &c.pools[0])
    }

    #[test]
    fn round_robin_skips_unhealthy_members() {
        let p = pool("round_robin");
        p.members[1].healthy.store(false, Ordering::Release);
        let picks: Vec<_> = (0..4)
            .map(|_| p.pick().unwrap().0.authority().to_string())
            .collect();
        assert_eq!(
            picks,
            ["127.0.0.1:1", "127.0.0.1:3", "127.0.0.1:3", "127.0.0.1:1"]
        );
    }

    #[test]
    fn least_in_flight_prefers_the_idle_member() {
        let p = pool("least_in_flight");
        let (_, a) = p.pick().unwrap();
        let (_, b) = p.pick().unwrap();
        assert!(a.is_some() && b.is_some(), "counted on the member");
        let (third, _c) = p.pick().unwrap();
        assert_eq!(third.authority(), "127.0.0.1:3");
        drop(a);
        let (next, _) = p.pick().unwrap();
        assert_eq!(next.authority(), "127.0.0.1:1");
        drop(b);
    }

    #[test]
    fn round_robin_counts_nothing_in_flight() {
        let p = pool("round_robin");
        let (_, guard) = p.pick().unwrap();
        assert!(guard.is_none());
        assert!(p
            .members
            .iter()
            .all(|m| m.in_flight.load(Ordering::Acquire) == 0));
    }

    #[test]
    fn a_pool_of_one_takes_no_turn() {
        let c = Config::parse("[pools.default]\nmembers = [\"http://127.0.0.1:1\"]\n").unwrap();
        let p = Pool::new(0, &c.pools[0]);
        for _ in 0..3 {
            assert_eq!(p.pick().unwrap().0.authority(), "127.0.0.1:1");
        }
        assert_eq!(p.next.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn names_are_interned_once() {
        let (a, b) = (interned("pool-x"), interned(&String::from("pool-x")));
        assert!(std::ptr::eq(a, b));
        assert_eq!(interned("pool-y"), "pool-y");
    }

    #[test]
    fn a_reload_keeps_the_health_of_surviving_members_only() {
        let p = pool("round_robin");
        for m in &p.members {
            m.healthy.store(false, Ordering::Release);
        }
        let c = Config::parse(
            "[pools.default]\nmembers = [\"http://127.0.0.1:1\", \"http://127.0.0.1:9\"]\n",
        )
        .unwrap();
        let next = Pool::succeed(0, &c.pools[0], Some(&p));
        assert!(!next.members[0].healthy.load(Ordering::Acquire));
        assert!(next.members[1].healthy.load(Ordering::Acquire));
        // Reloaded without health checks, nothing would mark it up again: it is tried.
        let c = Config::parse(
            "[pools.default]\nmembers = [\"http://127.0.0.1:1\"]\nhealth_check = false\n",
        )
        .unwrap();
        let unchecked = Pool::succeed(0, &c.pools[0], Some(&next));
        assert!(unchecked.health.is_none());
        assert!(unchecked.available());
        assert_eq!(unchecked.pick().unwrap().0.authority(), "127.0.0.1:1");
    }

    #[test]
    fn all_down_is_unavailable() {
        let p = pool("round_robin");
        for m in &p.members {
            m.healthy.store(false, Ordering::Release);
        }
        let Err(e) = p.pick() else {
            panic!("expected 503")
        };
        assert_eq!(e.status().as_u16(), 503);
        assert!(!p.available());
    }
}
