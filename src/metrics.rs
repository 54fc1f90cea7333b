//! Prometheus metrics, owned by one [`Metrics`] value with its own registry.
//!
//! Label values come only from closed enums (route kinds, modes, outcomes, fields, error
//! kinds), never from client input, so cardinality is fixed.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// All of mmgate's metrics.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Requests by route, mode and outcome.
    pub requests: IntCounterVec,
    /// Requests that vLLM 0.31 would reject, by route, mode and field.
    pub offending: IntCounterVec,
    /// Fields removed by strip, by route and field.
    pub stripped: IntCounterVec,
    /// Whole request duration, by route.
    pub duration: HistogramVec,
    /// Upstream time to response headers, by route.
    pub upstream_duration: HistogramVec,
    /// Gated request body sizes.
    pub body_bytes: Histogram,
    /// Requests in flight.
    pub in_flight: IntGauge,
    /// Upstream failures by kind.
    pub upstream_errors: IntCounterVec,
}

impl Metrics {
    /// Creates and registers every metric in a fresh registry.
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let histogram = |name: &str, help: &str, labels: &[&str], buckets: Vec<f64>| {
            let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
                .expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
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
        registry
            .register(Box::new(body_bytes.clone()))
            .expect("unique metric");
        let in_flight = IntGauge::new("mmgate_in_flight_requests", "Requests in flight.")
            .expect("valid metric");
        registry
            .register(Box::new(in_flight.clone()))
            .expect("unique metric");
        let upstream_errors = counter(
            "mmgate_upstream_errors_total",
            "Upstream failures by kind.",
            &["kind"],
        );
        Metrics {
            registry,
            requests,
            offending,
            stripped,
            duration,
            upstream_duration,
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
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
