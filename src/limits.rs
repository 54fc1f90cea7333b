//! Admission: per-client rate limits (governor), per-pool and per-client concurrency with a
//! bounded wait queue, and the value limits a pool puts on the kwargs.
//!
//! Invariants:
//! - An [`Admission`] holds its permits until dropped; the gateway moves it into the
//!   response body, so a permit is released when the body ends (SSE included), fails, or
//!   the client goes away — never earlier.
//! - At most `max_queue` requests wait per pool, each for at most `queue_timeout`. A request
//!   refused for its client's share is a 429, one refused because the pool is full a 503,
//!   both with `Retry-After`.
//! - The rate limiters read an injectable [`RateClock`], so tests drive time explicitly.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use prometheus::{Histogram, IntCounter, IntGauge};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::{Config, PoolId, Rate};
use crate::error::GateError;
use crate::identify::ClientId;
use crate::metrics::Metrics;

pub mod values;

pub use values::check_values;

/// The clock the rate limiters read: real monotonic time, or a fake one tests advance.
#[derive(Debug, Clone)]
pub enum RateClock {
    /// Monotonic time since the gateway started.
    Real(Instant),
    /// A fake clock (`FakeRelativeClock::advance`).
    Fake(FakeRelativeClock),
}

impl Default for RateClock {
    fn default() -> Self {
        RateClock::Real(Instant::now())
    }
}

impl Clock for RateClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        match self {
            RateClock::Real(origin) => Nanos::from(origin.elapsed()),
            RateClock::Fake(fake) => fake.now(),
        }
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, RateClock, NoOpMiddleware<Nanos>>;

struct PoolLimiter {
    name: String,
    permits: Option<(Arc<Semaphore>, NonZeroU32)>,
    max_queue: usize,
    queue_timeout: Duration,
    queued: Arc<AtomicUsize>,
    queue_gauge: IntGauge,
    in_flight: IntGauge,
    /// This pool's series of `mmgate_pool_admissions_total` and `mmgate_pool_wait_seconds`.
    admissions: IntCounter,
    wait: Histogram,
}

struct ClientLimiter {
    name: String,
    permits: Option<(Arc<Semaphore>, NonZeroU32)>,
    rate: Option<(Arc<Limiter>, Rate)>,
}

/// Counts a request in a gauge until dropped.
struct GaugeGuard(IntGauge);

impl GaugeGuard {
    fn enter(g: &IntGauge) -> Self {
        g.inc();
        GaugeGuard(g.clone())
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A place in a pool's wait queue, given back when dropped (the wait ended, or the
/// request was: a client that leaves while queued).
struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    /// Takes a place in `queue` unless it holds `max` already.
    fn take(queue: &'a AtomicUsize, max: usize) -> Option<Self> {
        queue
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| QueueSlot(queue))
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The permits of one admitted request; dropping it releases them.
pub struct Admission {
    /// Time spent in the wait queue.
    pub waited: Duration,
    _client: Option<OwnedSemaphorePermit>,
    _pool: Option<OwnedSemaphorePermit>,
    _in_flight: GaugeGuard,
}

/// Every pool's and client's limiters.
pub struct Limits {
    clock: RateClock,
    pools: Vec<PoolLimiter>,
    clients: Vec<ClientLimiter>,
    anonymous: ClientLimiter,
}

fn semaphore(n: Option<NonZeroU32>) -> Option<(Arc<Semaphore>, NonZeroU32)> {
    n.map(|n| (Arc::new(Semaphore::new(n.get() as usize)), n))
}

impl Limits {
    /// Builds the limiters for a policy, reading `clock`.
    pub fn new(config: &Config, metrics: &Metrics, clock: RateClock) -> Self {
        Self::build(config, metrics, clock, None)
    }

    /// The limiters for a reloaded policy. A pool or client whose name survives keeps its
    /// state where its bound is unchanged: the same semaphore (permits held stay counted,
    /// waiters keep their place) and the same rate limiter (its budget is not refilled).
    pub fn successor(&self, config: &Config, metrics: &Metrics) -> Self {
        Self::build(config, metrics, self.clock.clone(), Some(self))
    }

    fn build(config: &Config, metrics: &Metrics, clock: RateClock, old: Option<&Self>) -> Self {
        let same = |old: &Option<(Arc<Semaphore>, NonZeroU32)>, n: Option<NonZeroU32>| match old {
            Some((sem, m)) if Some(*m) == n => Some((sem.clone(), *m)),
            _ => semaphore(n),
        };
        let pools = config
            .pools
            .iter()
            .map(|p| {
                let prev = old.and_then(|o| o.pools.iter().find(|o| o.name == p.name));
                PoolLimiter {
                    name: p.name.clone(),
                    permits: prev.map_or_else(
                        || semaphore(p.max_concurrency),
                        |o| same(&o.permits, p.max_concurrency),
                    ),
                    max_queue: p.max_queue,
                    queue_timeout: p.queue_timeout,
                    queued: prev.map_or_else(Arc::default, |o| o.queued.clone()),
                    queue_gauge: metrics.pool_queue_depth.with_label_values(&[&p.name]),
                    in_flight: metrics.pool_in_flight.with_label_values(&[&p.name]),
                    admissions: metrics.admissions.with_label_values(&[&p.name]),
                    wait: metrics.pool_wait.with_label_values(&[&p.name]),
                }
            })
            .collect();
        let clients = config
            .clients
            .iter()
            .map(|c| {
                let prev = old.and_then(|o| o.clients.iter().find(|o| o.name == c.name));
                let kept_rate = prev.and_then(|o| match (&o.rate, c.rate) {
                    (Some((l, r)), Some(n))
                        if r.per_second == n.per_second && r.burst == n.burst =>
                    {
                        Some((l.clone(), *r))
                    }
                    _ => None,
                });
                ClientLimiter {
                    name: c.name.clone(),
                    permits: prev.map_or_else(
                        || semaphore(c.max_concurrency),
                        |o| same(&o.permits, c.max_concurrency),
                    ),
                    rate: kept_rate.or_else(|| {
                        c.rate.map(|r| {
                            let quota = Quota::per_second(r.per_second).allow_burst(r.burst);
                            let limiter = RateLimiter::direct_with_clock(quota, clock.clone());
                            (Arc::new(limiter), r)
                        })
                    }),
                }
            })
            .collect();
        let anonymous = ClientLimiter {
            name: "anonymous".into(),
            permits: None,
            rate: None,
        };
        Limits {
            clock,
            pools,
            clients,
            anonymous,
        }
    }

    fn client(&self, id: ClientId) -> &ClientLimiter {
        match id {
            ClientId::Named(i) => &self.clients[i],
            ClientId::Anonymous => &self.anonymous,
        }
    }

    /// Takes one request from the client's rate budget, or says when to retry.
    pub fn check_rate(&self, id: ClientId) -> Result<(), GateError> {
        let c = self.client(id);
        let Some((limiter, rate)) = &c.rate else {
            return Ok(());
        };
        limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now());
            GateError::RateLimited {
                client: c.name.clone(),
                per_second: rate.per_second.get(),
                retry_after: retry_secs(wait),
            }
        })
    }

    /// Admits a request to a pool: the client's permit, then the pool's, waiting in the
    /// pool's bounded queue for at most its timeout.
    pub async fn admit(&self, pool: PoolId, id: ClientId) -> Result<Admission, GateError> {
        let p = &self.pools[pool];
        let c = self.client(id);
        let try_take = |s: &Option<(Arc<Semaphore>, NonZeroU32)>| match s {
            None => Ok(None),
            Some((sem, _)) => sem.clone().try_acquire_owned().map(Some),
        };
        let immediate = match try_take(&c.permits) {
            Err(_) => Err(true),
            Ok(cp) => try_take(&p.permits).map(|pp| (cp, pp)).map_err(|_| false),
        };
        let client_waiting = match immediate {
            Ok((cp, pp)) => return Ok(self.admitted(p, cp, pp, Duration::ZERO)),
            Err(client_waiting) => client_waiting,
        };
        let Some(slot) = QueueSlot::take(&p.queued, p.max_queue) else {
            return Err(self.refusal(p, c, client_waiting, false));
        };
        let queued = GaugeGuard::enter(&p.queue_gauge);
        let start = Instant::now();
        let deadline = start + p.queue_timeout;
        let wait = |s: &Option<(Arc<Semaphore>, NonZeroU32)>| {
            let s = s.as_ref().map(|(sem, _)| sem.clone());
            async move {
                match s {
                    None => Ok(None),
                    Some(sem) => match tokio::time::timeout_at(deadline, sem.acquire_owned()).await
                    {
                        Ok(Ok(permit)) => Ok(Some(permit)),
                        _ => Err(()),
                    },
                }
            }
        };
        let result = match wait(&c.permits).await {
            Err(()) => Err(self.refusal(p, c, true, true)),
            Ok(cp) => match wait(&p.permits).await {
                Err(()) => Err(self.refusal(p, c, false, true)),
                Ok(pp) => Ok((cp, pp)),
            },
        };
        drop((slot, queued));
        let (cp, pp) = result?;
        Ok(self.admitted(p, cp, pp, start.elapsed()))
    }

    fn admitted(
        &self,
        p: &PoolLimiter,
        client: Option<OwnedSemaphorePermit>,
        pool: Option<OwnedSemaphorePermit>,
        waited: Duration,
    ) -> Admission {
        p.admissions.inc();
        p.wait.observe(waited.as_secs_f64());
        Admission {
            waited,
            _client: client,
            _pool: pool,
            _in_flight: GaugeGuard::enter(&p.in_flight),
        }
    }

    fn refusal(&self, p: &PoolLimiter, c: &ClientLimiter, client: bool, waited: bool) -> GateError {
        let waited_ms = waited.then_some(p.queue_timeout.as_millis() as u64);
        let retry_after = retry_secs(p.queue_timeout);
        match (client, &c.permits, &p.permits) {
            (true, Some((_, limit)), _) => GateError::ClientBusy {
                client: c.name.clone(),
                limit: limit.get(),
                waited_ms,
                retry_after,
            },
            (_, _, limit) => GateError::PoolSaturated {
                pool: p.name.clone(),
                limit: limit.as_ref().map_or(0, |(_, l)| l.get()),
                waited_ms,
                retry_after,
            },
        }
    }
}

/// Whole seconds to wait, at least 1.
fn retry_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests;
