//! Prometheus metrics, owned by one [`Metrics`] value with its own registry.
//!
//! Label values come only from closed enums (route kinds, modes, outcomes, fields, error
//! kinds, identity kinds, refusal reasons) or from names the policy lists (pools, clients),
//! never from client input, so cardinality is bounded by the policy.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use prometheus::core::{Collector, MetricVec, MetricVecBuilder};
use prometheus::proto::MetricType;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// How many values each closed label has (the sizes of the [`Series`] tables).
pub mod slots {
    /// Route kinds and `ungated`.
    pub const ROUTE: usize = crate::classify::RouteKind::ALL.len() + 1;
    /// Modes and `none`.
    pub const MODE: usize = 6;
    /// Outcomes ([`crate::record::OUTCOMES`]).
    pub const OUTCOME: usize = crate::record::OUTCOMES.len();
    /// Gated fields.
    pub const FIELD: usize = crate::inspect::Field::ALL.len();
    /// Ways a client is identified.
    pub const VIA: usize = 4;
}

/// All of mmgate's metrics.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Every collector registered, for [`Metrics::exported_names`].
    collectors: Arc<Vec<Box<dyn Collector>>>,
    /// Requests by route, mode and outcome.
    pub requests: Series<IntCounterVec>,
    /// Requests that vLLM 0.31 would reject, by route, mode and field.
    pub offending: Series<IntCounterVec>,
    /// Fields removed by strip, by route and field.
    pub stripped: Series<IntCounterVec>,
    /// Whole request duration, by route.
    pub duration: Series<HistogramVec>,
    /// Upstream time to response headers, by route.
    pub upstream_duration: Series<HistogramVec>,
    /// Gated request body sizes.
    pub body_bytes: Histogram,
    /// Requests in flight.
    pub in_flight: IntGauge,
    /// Upstream failures by kind.
    pub upstream_errors: IntCounterVec,
    /// Requests holding a pool permit (until their response body ends), by pool.
    pub pool_in_flight: IntGaugeVec,
    /// Requests waiting for a permit, by pool.
    pub pool_queue_depth: IntGaugeVec,
    /// Time admitted requests waited for a permit, by pool.
    pub pool_wait: HistogramVec,
    /// Requests admitted to a pool, by pool.
    pub admissions: IntCounterVec,
    /// Requests refused by the gateway's limits, by pool (`none` before one is chosen) and reason.
    pub refusals: IntCounterVec,
    /// Requests by client (a policy name or `anonymous`) and outcome.
    pub client_requests: IntCounterVec,
    /// Identified requests by how the client proved who it is.
    pub identified: Series<IntCounterVec>,
    /// Client headers ignored because they came from outside the trusted networks.
    pub ignored_client_headers: IntCounter,
    /// Policy reloads by result (`success`, `failure`).
    pub config_reloads: IntCounterVec,
}

impl Metrics {
    /// Creates and registers every metric in a fresh registry.
    pub fn new() -> Self {
        let registry = Registry::new();
        let collectors = RefCell::new(Vec::<Box<dyn Collector>>::new());
        // The one way a metric is registered: in the registry, and in `collectors`.
        let register = |c: &dyn CloneCollector| {
            registry.register(c.boxed()).expect("unique metric");
            collectors.borrow_mut().push(c.boxed());
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            register(&c);
            c
        };
        let histogram = |name: &str, help: &str, labels: &[&str], buckets: Vec<f64>| {
            let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
                .expect("valid metric");
            register(&h);
            h
        };
        let latency = vec![
            0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0,
        ];
        let requests = counter(
            "mmgate_requests_total",
            "Requests by route class, policy mode and outcome.",
            &["route", "mode", "outcome"],
        );
        let offending = counter(
            "mmgate_offending_requests_total",
            "Requests that an untrusted vLLM 0.31 rejects at its gate, by route, mode and the field it names.",
            &["route", "mode", "field"],
        );
        let stripped = counter(
            "mmgate_stripped_fields_total",
            "Gated fields removed by strip, by route and field.",
            &["route", "field"],
        );
        let duration = histogram(
            "mmgate_request_duration_seconds",
            "Time from request start to response headers, by route.",
            &["route"],
            latency.clone(),
        );
        let upstream_duration = histogram(
            "mmgate_upstream_duration_seconds",
            "Upstream time to response headers, by route.",
            &["route"],
            latency,
        );
        let body_bytes = Histogram::with_opts(
            HistogramOpts::new(
                "mmgate_request_body_bytes",
                "Sizes of inspected request bodies.",
            )
            .buckets(prometheus::exponential_buckets(1024.0, 4.0, 10).unwrap_or_default()),
        )
        .expect("valid metric");
        register(&body_bytes);
        let in_flight = IntGauge::new("mmgate_in_flight_requests", "Requests in flight.")
            .expect("valid metric");
        register(&in_flight);
        let upstream_errors = counter(
            "mmgate_upstream_errors_total",
            "Upstream failures by kind.",
            &["kind"],
        );
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            register(&g);
            g
        };
        let pool_in_flight = gauge(
            "mmgate_pool_in_flight_requests",
            "Requests holding a pool permit until their response body ends, by pool.",
            &["pool"],
        );
        let pool_queue_depth = gauge(
            "mmgate_pool_queue_depth",
            "Requests waiting for a pool or client permit, by pool.",
            &["pool"],
        );
        let pool_wait = histogram(
            "mmgate_pool_wait_seconds",
            "Time admitted requests waited for their permits, by pool.",
            &["pool"],
            vec![0.0005, 0.005, 0.05, 0.25, 1.0, 5.0, 30.0],
        );
        let admissions = counter(
            "mmgate_pool_admissions_total",
            "Requests admitted to a pool.",
            &["pool"],
        );
        let refusals = counter(
            "mmgate_refusals_total",
            "Requests refused by identity, limits or framing, by pool and reason (auth, rate, concurrency, queue_timeout, value_bound, body_size, framing, unavailable, untrusted).",
            &["pool", "reason"],
        );
        let client_requests = counter(
            "mmgate_client_requests_total",
            "Requests by client (a name the policy lists, or anonymous) and outcome.",
            &["client", "outcome"],
        );
        let identified = counter(
            "mmgate_identified_requests_total",
            "Requests by how the client was identified (api_key, certificate, header, anonymous).",
            &["via"],
        );
        let ignored_client_headers = IntCounter::new(
            "mmgate_ignored_client_headers_total",
            "Client identity headers ignored because the connection came from outside identity.trusted_networks.",
        )
        .expect("valid metric");
        register(&ignored_client_headers);
        let config_reloads = counter(
            "mmgate_config_reloads_total",
            "Policy reloads (SIGHUP, file change) by result (success, failure: the old policy kept serving).",
            &["result"],
        );
        for result in ["success", "failure"] {
            config_reloads.with_label_values(&[result]);
        }
        Metrics {
            registry,
            collectors: Arc::new(collectors.into_inner()),
            config_reloads,
            pool_in_flight,
            pool_queue_depth,
            pool_wait,
            admissions,
            refusals,
            client_requests,
            identified: Series::new(identified, slots::VIA),
            ignored_client_headers,
            requests: Series::new(requests, slots::ROUTE * slots::MODE * slots::OUTCOME),
            offending: Series::new(offending, slots::ROUTE * slots::MODE * slots::FIELD),
            stripped: Series::new(stripped, slots::ROUTE * slots::FIELD),
            duration: Series::new(duration, slots::ROUTE),
            upstream_duration: Series::new(upstream_duration, slots::ROUTE),
            body_bytes,
            in_flight,
            upstream_errors,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Every series name `/metrics` can expose: each registered family's name, and for
    /// histograms its `_bucket`, `_sum` and `_count` series instead. Read from the
    /// collectors themselves (a vector with no children yet still describes its family,
    /// which `gather` would leave out), so dashboards and alert rules can be checked
    /// against what the code registers.
    pub fn exported_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for family in self.collectors.iter().flat_map(|c| c.collect()) {
            let name = family.name();
            let suffixes: &[&str] = match family.get_field_type() {
                MetricType::HISTOGRAM => &["_bucket", "_sum", "_count"],
                MetricType::SUMMARY => &["", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
        }
        names
    }
}

/// A labelled metric whose label values come from closed sets, so each series can be
/// numbered: a series is resolved on first use and then reached by its number, without
/// hashing the label values or taking the vector's lock on every request.
#[derive(Clone)]
pub struct Series<V: Labelled> {
    vec: V,
    slots: Arc<[OnceLock<V::M>]>,
}

impl<V: Labelled> Series<V> {
    /// A table of `slots` numbered series of `vec`, each resolved on first use.
    pub fn new(vec: V, slots: usize) -> Self {
        Series {
            vec,
            slots: (0..slots).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Applies `f` to the series numbered `slot`, whose label values are always `labels`
    /// (a series without a number, or with one out of range, is looked up by its labels).
    pub fn with(&self, slot: Option<usize>, labels: &[&str], f: impl FnOnce(&V::M)) {
        match slot.and_then(|n| self.slots.get(n)) {
            Some(s) => f(s.get_or_init(|| self.vec.resolve(labels))),
            None => f(&self.vec.resolve(labels)),
        }
    }

    /// The underlying vector.
    pub fn vec(&self) -> &V {
        &self.vec
    }
}

/// A metric vector: series by label values.
pub trait Labelled {
    /// One series.
    type M;
    /// The series with these label values.
    fn resolve(&self, labels: &[&str]) -> Self::M;
}

impl<B: MetricVecBuilder> Labelled for MetricVec<B> {
    type M = B::M;
    fn resolve(&self, labels: &[&str]) -> B::M {
        self.with_label_values(labels)
    }
}

/// A collector that can be registered and also kept (every prometheus metric type).
trait CloneCollector {
    fn boxed(&self) -> Box<dyn Collector>;
}

impl<C: Collector + Clone + 'static> CloneCollector for C {
    fn boxed(&self) -> Box<dyn Collector> {
        Box::new(self.clone())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exported_names_cover_every_family_even_without_samples() {
        let m = Metrics::new();
        let names = m.exported_names();
        // Vectors nobody has touched yet are absent from the text exposition ...
        assert!(!m.render().contains("mmgate_refusals_total"));
        // ... but still exported names, histograms by their series.
        for n in [
            "mmgate_refusals_total",
            "mmgate_requests_total",
            "mmgate_in_flight_requests",
            "mmgate_ignored_client_headers_total",
            "mmgate_request_duration_seconds_bucket",
            "mmgate_request_duration_seconds_sum",
            "mmgate_request_duration_seconds_count",
            "mmgate_request_body_bytes_count",
        ] {
            assert!(names.contains(n), "{n} missing from {names:?}");
        }
        assert!(!names.contains("mmgate_request_duration_seconds"));
        // Every family the exposition shows once touched is among them.
        m.refusals.with_label_values(&["none", "auth"]).inc();
        m.pool_wait.with_label_values(&["p"]).observe(0.1);
        for line in m.render().lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            assert!(names.contains(name), "{name} not in exported_names");
        }
    }
}
