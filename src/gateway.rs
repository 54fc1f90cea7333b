//! The gateway: one handler that reads top to bottom as the life of a request —
//! classify → read (bounded) → inspect → decide → forward or answer → record.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use tokio::time::Instant;

use crate::classify::{classify, Route, RouteKind};
use crate::config::Config;
use crate::contract::{judge, UpstreamFacts, Verdict};
use crate::decide::{decide, Action};
use crate::error::GateError;
use crate::inspect::Field;
use crate::listen::ConnInfo;
use crate::metrics::Metrics;
use crate::record::{bound_text, record, Outcome};
use crate::rewrite::strip;
use crate::upstream::{SliceBody, Upstream};

/// The response header that lists the fields mmgate removed.
pub const STRIPPED_HEADER: &str = "x-mmgate-stripped";

/// The running gateway: configuration, upstream client, metrics and discovered facts.
pub struct Gateway {
    config: Arc<Config>,
    upstream: Upstream,
    metrics: Metrics,
    facts: ArcSwap<UpstreamFacts>,
    ids: AtomicU64,
}

impl Gateway {
    /// Builds a gateway from a validated configuration.
    pub fn new(config: Config) -> Arc<Self> {
        let upstream = Upstream::new(&config.upstream);
        let facts = ArcSwap::from_pointee(config.vllm.facts.clone());
        Arc::new(Gateway {
            config: Arc::new(config),
            upstream,
            metrics: Metrics::new(),
            facts,
            ids: AtomicU64::new(0),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The upstream.
    pub fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// Refreshes what mmgate knows of the upstream: its served models (unless the policy
    /// lists them) and its gated routes. Unknown facts skip the checks that need them.
    pub async fn refresh_facts(&self) {
        let static_models = self.config.vllm.facts.served_models.is_some();
        let mut facts = self.config.vllm.facts.clone();
        if self.config.vllm.discover_models && !static_models {
            facts.served_models = self.upstream.served_models().await;
        }
        if self.config.vllm.discover_routes {
            facts.served_routes = self.upstream.served_routes().await;
        }
        let old = self.facts.load();
        if facts.served_models != old.served_models || facts.served_routes != old.served_routes {
            tracing::info!(models = ?facts.served_models, routes = ?facts.served_routes, "upstream facts discovered");
        }
        self.facts.store(Arc::new(facts));
    }

    /// Handles one request from a client connection.
    pub async fn handle(&self, req: Request<Body>, conn: &ConnInfo) -> Response<Body> {
        let start = Instant::now();
        let in_flight = InFlight::enter(&self.metrics.in_flight);
        let route = classify(
            req.method(),
            req.uri().path_and_query().map_or("/", |p| p.as_str()),
        );
        let mut outcome = self.outcome(&req, conn);
        let res = match route {
            Route::Ungated => self.forward(req, conn, &mut outcome).await,
            Route::Gated(kind) => self.gated(kind, req, conn, &mut outcome).await,
        };
        let res = res.unwrap_or_else(|e| {
            outcome.outcome = match e {
                GateError::BodyTooLarge { .. } | GateError::BodyRead(_) => "refused",
                _ => "error",
            };
            if let Some(kind) = upstream_error_kind(&e) {
                self.metrics
                    .upstream_errors
                    .with_label_values(&[kind])
                    .inc();
            }
            e.to_response()
        });
        outcome.status = res.status().as_u16();
        outcome.elapsed = start.elapsed();
        record(&self.metrics, &outcome);
        res.map(|inner| {
            Body::new(Tracked {
                inner,
                in_flight: Some(in_flight),
            })
        })
    }

    async fn gated(
        &self,
        kind: RouteKind,
        req: Request<Body>,
        conn: &ConnInfo,
        outcome: &mut Outcome,
    ) -> Result<Response<Body>, GateError> {
        let mode = self.config.gate.mode(kind);
        outcome.route = Some(kind);
        outcome.mode = Some(mode);
        let (parts, body) = req.into_parts();
        let bytes = self.read_body(&parts.headers, body).await?;
        outcome.body_bytes = Some(bytes.len());
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes);
        let facts = self.facts.load();
        let (verdict, findings) = judge(
            kind,
            content_type,
            &bytes,
            self.config.limits.max_json_depth,
            &facts,
        );
        if let Verdict::Reject(field) = verdict {
            outcome.would_reject = Some(field);
        }
        if let Some(f) = &findings {
            outcome.note_fields(f);
        }
        match decide(
            mode,
            self.config.gate.on_unclassifiable,
            &verdict,
            findings.as_ref(),
        ) {
            Action::Forward => {
                let req = Request::from_parts(parts, Body::from(bytes));
                self.forward(req, conn, outcome).await
            }
            Action::Strip(fields) => {
                let Some(findings) = findings else {
                    return Err(GateError::Unclassifiable(
                        crate::contract::Invalid::ContentType,
                    ));
                };
                let stripped = strip(&bytes, &findings, &fields);
                let mut parts = parts;
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(stripped.len()));
                let req = Request::from_parts(parts, Body::new(SliceBody::new(stripped.parts)));
                let mut res = self.forward(req, conn, outcome).await?;
                res.headers_mut()
                    .insert(STRIPPED_HEADER, stripped_header(&fields));
                outcome.outcome = "stripped";
                outcome.stripped = fields;
                Ok(res)
            }
            Action::RejectGate(field) => {
                outcome.outcome = "rejected";
                Ok(GateError::Gate(field).to_response())
            }
            Action::RejectUnclassifiable(invalid) => {
                outcome.outcome = "rejected";
                Ok(GateError::Unclassifiable(invalid).to_response())
            }
        }
    }

    async fn forward(
        &self,
        req: Request<Body>,
        conn: &ConnInfo,
        outcome: &mut Outcome,
    ) -> Result<Response<Body>, GateError> {
        let (parts, body) = req.into_parts();
        let sent = Instant::now();
        let res = self.upstream.forward(parts, body, conn.remote.ip()).await;
        outcome.upstream_elapsed = Some(sent.elapsed());
        outcome.outcome = "forwarded";
        res
    }

    /// Reads a gated body: refuse on `Content-Length` first, then read at most the limit.
    async fn read_body(&self, headers: &http::HeaderMap, body: Body) -> Result<Bytes, GateError> {
        let limit = self.config.limits.max_body_bytes;
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(GateError::BodyTooLarge { limit });
        }
        let read = collect_limited(body, limit, declared.unwrap_or(0) as usize);
        match tokio::time::timeout(self.config.limits.body_timeout, read).await {
            Ok(r) => r,
            Err(_) => Err(GateError::BodyRead(format!(
                "not received within {} s",
                self.config.limits.body_timeout.as_secs()
            ))),
        }
    }

    fn outcome(&self, req: &Request<Body>, conn: &ConnInfo) -> Outcome {
        let header = |name: header::HeaderName| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(bound_text)
        };
        let request_id =
            header(header::HeaderName::from_static("x-request-id")).unwrap_or_else(|| {
                format!(
                    "mmgate-{:x}-{:x}",
                    conn.id,
                    self.ids.fetch_add(1, Ordering::Relaxed)
                )
            });
        Outcome {
            route: None,
            mode: None,
            outcome: "forwarded",
            would_reject: None,
            stripped: Vec::new(),
            fields: Vec::new(),
            status: 0,
            client: conn.remote.ip(),
            user_agent: header(header::USER_AGENT),
            request_id,
            path: bound_text(req.uri().path()),
            body_bytes: None,
            elapsed: Duration::ZERO,
            upstream_elapsed: None,
        }
    }
}

/// Counts one request in `mmgate_in_flight_requests` until dropped. It rides with the
/// response body, so a stream counts until it ends or the client goes away, and a request
/// whose client leaves before the answer stops counting too.
struct InFlight(prometheus::IntGauge);

impl InFlight {
    fn enter(gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        InFlight(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A response body that holds its request's [`InFlight`] until it ends or is dropped.
struct Tracked {
    inner: Body,
    in_flight: Option<InFlight>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None | Some(Err(_)))) {
            self.in_flight = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn upstream_error_kind(e: &GateError) -> Option<&'static str> {
    match e {
        GateError::UpstreamUnreachable { .. } => Some("connect"),
        GateError::UpstreamTimeout { .. } => Some("timeout"),
        GateError::UpstreamFailed { .. } => Some("protocol"),
        _ => None,
    }
}

fn stripped_header(fields: &[Field]) -> HeaderValue {
    let names: Vec<&str> = fields.iter().map(|f| f.name()).collect();
    HeaderValue::from_str(&names.join(", "))
        .unwrap_or(HeaderValue::from_static("mm_processor_kwargs"))
}

/// Collects a body into one buffer, failing once it grows past `limit`. A body that arrives
/// as one frame is taken without a copy; otherwise the buffer is sized from `hint`.
async fn collect_limited(mut body: Body, limit: usize, hint: usize) -> Result<Bytes, GateError> {
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| GateError::BodyRead(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let total = first.as_ref().map_or(0, Bytes::len) + buf.len() + data.len();
        if total > limit {
            return Err(GateError::BodyTooLarge { limit });
        }
        match first.take() {
            None if buf.is_empty() => first = Some(data),
            prev => {
                if buf.is_empty() {
                    buf.reserve(hint.clamp(total, limit));
                }
                if let Some(p) = prev {
                    buf.extend_from_slice(&p);
                }
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
}
