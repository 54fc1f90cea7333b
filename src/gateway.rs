//! The gateway: one handler that reads top to bottom as the life of a request —
//! identify → rate → classify → read (bounded) → inspect → decide (per client, with its pool)
//! → value limits → admit (permits, queue) → forward to a healthy member or answer → record.
//! (`pass` to a pool without value limits skips read → value limits: the body streams unread.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::body::Body;
use bytes::Bytes;
use futures_util::FutureExt;
use http::{header, HeaderValue, Request, Response};
use tokio::time::Instant;

use crate::body::{collect_limited, declared_length, Held, InFlight, Tracked};
use crate::classify::{classify, Route, RouteKind};
use crate::config::{Config, PoolId};
use crate::contract::{judge, Head, UpstreamFacts, Verdict};
use crate::decide::{decide_for, Action, ClientView, Mode};
use crate::error::GateError;
use crate::framing::AmbiguousFraming;
use crate::http1::WholeBody;
use crate::identify::{ClientId, Identifier, ANONYMOUS};
use crate::inspect::Field;
use crate::inventory::Inventory;
use crate::limits::{check_values, Limits, RateClock};
use crate::listen::ConnInfo;
use crate::metrics::Metrics;
use crate::pool::Pool;
use crate::record::{ClientRequests, Outcome, Recorder};
use crate::rewrite::{nullify, strip};
use crate::tunnel::{Handshake, Switch};
use crate::upstream::{remove_hop_by_hop, ResponseFields, SliceBody, Upstream};

/// The response header that lists the fields mmgate removed.
pub const STRIPPED_HEADER: &str = "x-mmgate-stripped";

/// The gateway's answer to one request.
pub struct Answer {
    /// The response. A forwarded one's header map holds only the gateway's own fields.
    pub response: Response<Body>,
    /// A forwarded response's fields as the upstream sent them (less the hop-by-hop ones),
    /// kept out of the header map so that they are written as they came.
    pub upstream_fields: Option<ResponseFields>,
}

impl Answer {
    /// Whether the client's connection closes after this answer, as vLLM's server closes
    /// it: after an unhandled exception's 500 (those mmgate answers in vLLM's place), or
    /// when the upstream said `Connection: close` (a forwarded 500 otherwise leaves it as
    /// vLLM's handled ones do).
    pub fn closes_connection(&self) -> bool {
        match &self.upstream_fields {
            Some(fields) => fields.closes(),
            None => self.response.status() == http::StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response with the upstream's fields in its header map (for hyper); the gateway's
    /// own fields replace the upstream's of the same names.
    pub fn into_response(self) -> Response<Body> {
        let mut response = self.response;
        if let Some(fields) = self.upstream_fields {
            // Chunks are passed only to mmgate's own server (`ConnInfo::own_http1`).
            debug_assert!(
                !fields.chunks_as_sent(),
                "hyper would send chunk framing as data"
            );
            fields.into_map(response.headers_mut());
        }
        response
    }
}

/// What is sent upstream: a request, or a WebSocket handshake ([`crate::tunnel`]).
#[derive(Clone, Copy)]
enum Exchange {
    Request,
    Handshake,
}

/// The running gateway: configuration, identity tables, pools, limiters, metrics and
/// discovered facts.
pub struct Gateway {
    config: Arc<Config>,
    identifier: Identifier,
    pools: Vec<Pool>,
    limits: Limits,
    metrics: Metrics,
    /// Requests by client, for this policy's clients.
    client_requests: ClientRequests,
    inventory: Arc<Inventory>,
    facts: ArcSwap<UpstreamFacts>,
    ids: Arc<AtomicU64>,
    /// Model discovery failed and that was logged (logged again once it works and fails).
    models_unread: AtomicBool,
}

impl Gateway {
    /// Builds a gateway from a validated configuration.
    pub fn new(config: Config) -> Arc<Self> {
        Self::with_clock(config, RateClock::default())
    }

    /// Builds a gateway whose rate limiters read `clock` (tests pass a fake one).
    pub fn with_clock(config: Config, clock: RateClock) -> Arc<Self> {
        let facts = ArcSwap::from_pointee(config.vllm.facts.clone());
        let metrics = Metrics::new();
        let pools = config
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| Pool::new(i, p))
            .collect();
        Arc::new(Gateway {
            identifier: Identifier::new(&config.identity, &config.clients),
            limits: Limits::new(&config, &metrics, clock),
            client_requests: ClientRequests::new(
                metrics.client_requests.clone(),
                config.clients.len(),
            ),
            pools,
            config: Arc::new(config),
            metrics,
            inventory: Arc::default(),
            facts,
            ids: Arc::default(),
            models_unread: AtomicBool::new(false),
        })
    }

    /// The gateway for a reloaded policy ([`crate::reload`]): metrics, inventory, request
    /// ids and discovered facts carry over, and so do the limits and pools whose names
    /// survive (rate budgets, permits held, member health).
    pub fn successor(&self, config: Config) -> Arc<Self> {
        let pools = config
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| Pool::succeed(i, p, self.pools.iter().find(|o| *o.name == *p.name)))
            .collect();
        let old = self.facts.load();
        let mut facts = config.vllm.facts.clone();
        if facts.served_models.is_none() {
            facts.served_models = old.served_models.clone();
        }
        facts.served_routes = old.served_routes.clone();
        Arc::new(Gateway {
            identifier: Identifier::new(&config.identity, &config.clients),
            limits: self.limits.successor(&config, &self.metrics),
            client_requests: ClientRequests::new(
                self.metrics.client_requests.clone(),
                config.clients.len(),
            ),
            pools,
            config: Arc::new(config),
            metrics: self.metrics.clone(),
            inventory: self.inventory.clone(),
            facts: ArcSwap::from_pointee(facts),
            ids: self.ids.clone(),
            models_unread: AtomicBool::new(false),
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

    /// The live inventory of offending clients (served on the admin listener).
    pub fn inventory(&self) -> &Arc<Inventory> {
        &self.inventory
    }

    /// The default pool's first member (discovery of models and routes, readiness).
    pub fn upstream(&self) -> &Upstream {
        &self.pools[0].members()[0].upstream
    }

    /// The pools, `default` first.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Refreshes what mmgate knows of the upstream: its served models (unless the policy
    /// lists them) and its gated routes. Unknown facts skip the checks that need them.
    pub async fn refresh_facts(&self) {
        let static_models = self.config.vllm.facts.served_models.is_some();
        let mut facts = self.config.vllm.facts.clone();
        if self.config.vllm.discover_models && !static_models {
            let key = self.config.vllm.discovery_key.as_ref();
            match self.upstream().served_models(key).await {
                Ok(models) => {
                    facts.served_models = Some(models);
                    self.models_unread.store(false, Ordering::Relaxed);
                }
                Err(why) => {
                    facts.served_models = None;
                    if !self.models_unread.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            upstream = %self.upstream().authority(),
                            "cannot read the served models from /v1/models: {why}{}; vLLM's unknown-model check is skipped until they can be read, or list them in vllm.served_models",
                            why.hint(key.is_some())
                        );
                    }
                }
            }
        }
        if self.config.vllm.discover_routes {
            facts.served_routes = self.upstream().served_routes().await;
        }
        let old = self.facts.load();
        if facts.served_models != old.served_models || facts.served_routes != old.served_routes {
            tracing::info!(models = ?facts.served_models, routes = ?facts.served_routes, "upstream facts discovered");
        }
        self.facts.store(Arc::new(facts));
    }

    /// Handles one request from a client connection.
    pub async fn handle(&self, mut req: Request<Body>, conn: &ConnInfo) -> Answer {
        let mut held = Held {
            _in_flight: InFlight::enter(&self.metrics.in_flight),
            admission: None,
            member: None,
            upstream_fields: None,
        };
        let seq = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut recorder = Recorder::new(
            &self.metrics,
            &self.client_requests,
            &self.inventory,
            Outcome::start(req.headers(), req.uri(), conn, seq),
        );
        let outcome = &mut recorder.outcome;
        // The request stays here and is lent down to the upstream connection that writes it
        // (moved by value into each layer's future instead, it would be copied at each).
        let res = self.serve(&mut req, conn, outcome, &mut held).await;
        let upstream_fields = held.upstream_fields.take().filter(|_| res.is_ok());
        // uvicorn's own refusals of a body's framing never reach vLLM's middleware.
        let framing = matches!(&res, Err(e) if e.refusal_reason() == Some("framing"));
        let res = res.unwrap_or_else(|e| {
            outcome.refusal = e.refusal_reason();
            outcome.outcome = match e {
                GateError::BodyRead(_) => "refused",
                _ if outcome.refusal.is_some() => "refused",
                _ => "error",
            };
            e.to_response()
        });
        recorder.finish(res.status().as_u16());
        if Switch::is_on(&res) {
            // A tunnel: what the request holds is held until it ends.
            Switch::hold(&res, Box::new(held));
            return Answer {
                response: res,
                upstream_fields: None,
            };
        }
        let mut res = res;
        let status = res.status();
        if upstream_fields.is_none()
            && !framing
            && status != http::StatusCode::UNAUTHORIZED
            && status != http::StatusCode::INTERNAL_SERVER_ERROR
        {
            // An answer in vLLM's place, with what vLLM's CORS middleware adds to its own
            // (not to the 401s of its key check, nor to an unhandled exception's 500, which
            // are given outside that middleware).
            let origin = req.headers().get(header::ORIGIN);
            self.config.vllm.cors.apply(origin, res.headers_mut());
        }
        let response = res.map(|inner| {
            Body::new(Tracked {
                inner,
                held: Some(held),
            })
        });
        Answer {
            response,
            upstream_fields,
        }
    }

    /// Classify, identify, take from the client's rate, then serve the route.
    async fn serve(
        &self,
        req: &mut Request<Body>,
        conn: &ConnInfo,
        outcome: &mut Outcome,
        held: &mut Held,
    ) -> Result<Response<Body>, GateError> {
        if req.extensions().get::<AmbiguousFraming>().is_some() {
            return Err(GateError::AmbiguousFraming);
        }
        // A WebSocket handshake (vLLM's realtime sessions) is tunnelled, not judged: vLLM's
        // server reads no body after such a head, and answers it as a WebSocket. It goes on
        // with its fields as they came (its upgrade ones are the point; vLLM refuses one
        // with a body's fields in its own words).
        // (Marked by the server that read the head: [`Handshake`].)
        let websocket = req.extensions().get::<Handshake>().is_some();
        // Everything below reads the headers vLLM will get: a header the client names in
        // `Connection` is removed before forwarding, so no verdict may rest on it.
        if !websocket {
            remove_hop_by_hop(req.headers_mut());
        }
        // A CONNECT with only an authority (HTTP/2's, or HTTP/1's over TLS): forwarded, it
        // would reach vLLM as a request line no server takes. One with a path goes on, and
        // vLLM answers it as any method its route lacks (mmgate's own server refuses the
        // authority form as vLLM's server does).
        if req.method() == http::Method::CONNECT {
            if req.version() == http::Version::HTTP_2 || req.uri().path_and_query().is_none() {
                return Err(GateError::Tunnel);
            }
            // Whatever body it declares, vLLM's server reads none (llhttp takes a CONNECT
            // for an upgrade): none goes on.
            req.headers_mut().remove(header::CONTENT_LENGTH);
            req.headers_mut().remove(header::TRANSFER_ENCODING);
            *req.body_mut() = Body::empty();
        }
        // Classified first (it is pure), so that a refusal is counted on its route too.
        let route = classify(
            req.method(),
            req.uri().path_and_query().map_or("/", |p| p.as_str()),
            &self.config.vllm.root_path,
        );
        if let (Route::Gated(kind), false) = (route, websocket) {
            outcome.route = Some(kind);
        }
        outcome.spoofed_header = self.identifier.drop_spoofed_header(req.headers_mut(), conn);
        let who = self.identifier.identify(req.headers(), conn)?;
        self.identifier.drop_key_header(req.headers_mut());
        outcome.via = Some(who.via);
        outcome.client = who.client;
        outcome.client_id = match who.client {
            ClientId::Named(i) => self.config.clients[i].name.clone().into(),
            ClientId::Anonymous => ANONYMOUS.into(),
        };
        self.limits.check_rate(who.client)?;
        if websocket {
            // A tunnel's bytes cannot be bounded as a trusted pool bounds every request
            // sent to it (`max_body_bytes`): a trusted client's sessions go to the default
            // pool, which is never trusted.
            let pool = match self.client_view(who.client, None).pool {
                own if self.pools[own].trusted => 0,
                own => own,
            };
            return self
                .forward(
                    Exchange::Handshake,
                    pool,
                    who.client,
                    req,
                    conn,
                    outcome,
                    held,
                )
                .await;
        }
        match route {
            Route::Ungated => {
                let pool = &self.pools[self.client_view(who.client, None).pool];
                if pool.trusted {
                    // The bounded deployment: every body sent to it is within its limit.
                    outcome.pool = Some(pool.name);
                    let bytes = self.read_body(req, pool.max_body_bytes).await?;
                    *req.body_mut() = Body::from(bytes);
                }
                self.forward(
                    Exchange::Request,
                    pool.id,
                    who.client,
                    req,
                    conn,
                    outcome,
                    held,
                )
                .await
            }
            Route::Gated(kind) => self.gated(kind, who.client, req, conn, outcome, held).await,
        }
    }

    /// The client's mode on a route (its own, else the `[gate]` one), trust and pool.
    fn client_view(&self, id: ClientId, route: Option<RouteKind>) -> ClientView {
        let gate_mode = route.map_or(Mode::Pass, |r| self.config.gate.mode(r));
        match id {
            ClientId::Named(i) => {
                let c = &self.config.clients[i];
                ClientView {
                    mode: c.mode.unwrap_or(gate_mode),
                    trusted: c.trusted,
                    pool: c.pool,
                }
            }
            ClientId::Anonymous => ClientView {
                mode: gate_mode,
                trusted: false,
                pool: 0,
            },
        }
    }

    async fn gated(
        &self,
        kind: RouteKind,
        id: ClientId,
        req: &mut Request<Body>,
        conn: &ConnInfo,
        outcome: &mut Outcome,
        held: &mut Held,
    ) -> Result<Response<Body>, GateError> {
        let client = self.client_view(id, Some(kind));
        outcome.mode = Some(client.mode);
        // `pass`: mmgate does nothing to this route; the body streams through unread, as on
        // an ungated route. Only a declared `Content-Length` over the pool's limit is refused.
        // A pool with value limits (every trusted pool) needs the body: inspected path below.
        let own = &self.pools[client.pool];
        if client.mode == Mode::Pass && !own.values.active(own.trusted) {
            if declared_length(req.headers()).is_some_and(|n| n > own.max_body_bytes as u64) {
                outcome.pool = Some(own.name);
                return Err(GateError::BodyTooLarge {
                    limit: own.max_body_bytes,
                });
            }
            return self
                .forward(Exchange::Request, own.id, id, req, conn, outcome, held)
                .await;
        }
        // Read up to the largest limit of the pools this client can reach; check the chosen one below.
        let reachable = match client.mode {
            Mode::Route(p) => self.pools[p].max_body_bytes,
            _ => 0,
        };
        let limit = reachable.max(self.pools[client.pool].max_body_bytes);
        let bytes = self.read_body(req, limit).await?;
        outcome.body_bytes = Some(bytes.len());
        let head = Head::of(req.headers(), kind);
        let facts = self.facts.load();
        let configured = self.config.limits.max_json_depth;
        let max_depth = configured.unwrap_or_else(|| facts.max_json_depth());
        let (verdict, findings) = judge(kind, head, &bytes, max_depth, &facts);
        if let Verdict::Reject(field) = verdict {
            outcome.would_reject = Some(field);
        }
        if let Some(f) = &findings {
            outcome.note_fields(f);
            if let Some(max_len) = self.config.log.kwargs_values {
                outcome.note_values(f, max_len);
            }
        }
        let decision = decide_for(
            client,
            |p| self.pools[p].trusted,
            self.config.gate.on_unclassifiable,
            &verdict,
            findings.as_ref(),
        )?;
        let pool = &self.pools[decision.pool];
        outcome.pool = Some(pool.name);
        if bytes.len() > pool.max_body_bytes {
            return Err(GateError::BodyTooLarge {
                limit: pool.max_body_bytes,
            });
        }
        let checks_values = pool.values.active(pool.trusted);
        let action = match (decision.action, &verdict) {
            // A body mmgate cannot read (past its bounds, or one vLLM's parser refuses) has
            // kwargs nobody could check: it never reaches a pool with value limits, whatever
            // the mode or `on_unclassifiable`, but is answered as `reject` answers it.
            (Action::Forward, Verdict::Invalid(inv)) if checks_values && findings.is_none() => {
                Action::RejectUnclassifiable(inv.clone())
            }
            (action, _) => action,
        };
        let nulled = matches!(action, Action::Nullify(_));
        match action {
            Action::Forward => {
                if checks_values {
                    let Some(f) = &findings else {
                        return Err(GateError::Unclassifiable(
                            crate::contract::Invalid::ContentType,
                        ));
                    };
                    check_values(&pool.values, pool.name, f)?;
                }
                *req.body_mut() = Body::from(bytes);
                let res = self
                    .forward(Exchange::Request, pool.id, id, req, conn, outcome, held)
                    .await;
                if pool.id != client.pool {
                    outcome.outcome = "routed";
                }
                res
            }
            Action::Strip(fields) | Action::Nullify(fields) => {
                let Some(findings) = findings else {
                    return Err(GateError::Unclassifiable(
                        crate::contract::Invalid::ContentType,
                    ));
                };
                let stripped = if nulled {
                    nullify(&bytes, &findings, &fields)
                } else {
                    strip(&bytes, &findings, &fields)
                };
                req.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(stripped.len()));
                *req.body_mut() = Body::new(SliceBody::new(stripped.parts));
                let header = stripped_header(&fields);
                // Noted before forwarding: a stripped request whose client leaves (or whose
                // upstream fails) is still recorded and logged as stripped.
                outcome.stripped = fields;
                let mut res = self
                    .forward(Exchange::Request, pool.id, id, req, conn, outcome, held)
                    .await?;
                res.headers_mut().insert(STRIPPED_HEADER, header);
                outcome.outcome = "stripped";
                Ok(res)
            }
            Action::RejectGate(field) => {
                outcome.pool = None;
                outcome.outcome = "rejected";
                Ok(self.in_vllms_name(req, GateError::Gate(field)))
            }
            Action::RejectUnclassifiable(invalid) => {
                outcome.pool = None;
                outcome.outcome = "rejected";
                Ok(self.in_vllms_name(req, GateError::Unclassifiable(invalid)))
            }
        }
    }

    /// The answer to a request refused at the edge in vLLM's place: `error`, unless vLLM's
    /// own `--api-key` check (which runs first) would refuse it with its 401.
    fn in_vllms_name(&self, req: &Request<Body>, error: GateError) -> Response<Body> {
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
        match &self.config.vllm.api_keys {
            Some(keys)
                if !keys.admits(
                    req.method(),
                    path,
                    &self.config.vllm.root_path,
                    req.headers(),
                ) =>
            {
                GateError::UpstreamUnauthorized.to_response()
            }
            _ => error.to_response(),
        }
    }

    /// Admits the request to the pool (permits held in `held` until the body ends), picks a
    /// healthy member and sends it there: a request, or a WebSocket handshake (whose tunnel
    /// then holds the admission, [`crate::tunnel`]).
    #[allow(clippy::too_many_arguments)]
    async fn forward(
        &self,
        kind: Exchange,
        pool: PoolId,
        id: ClientId,
        req: &mut Request<Body>,
        conn: &ConnInfo,
        outcome: &mut Outcome,
        held: &mut Held,
    ) -> Result<Response<Body>, GateError> {
        let pool = &self.pools[pool];
        outcome.pool = Some(pool.name);
        if !pool.available() {
            return Err(pool.pick().err().unwrap_or(GateError::PoolUnavailable {
                pool: pool.name.to_string(),
                members: pool.members().len(),
            }));
        }
        let admission = self.limits.admit(pool.id, id).await?;
        held.admission = Some(admission);
        let (upstream, member) = pool.pick()?;
        held.member = member;
        let sent = Instant::now();
        let errors = &self.metrics.upstream_errors;
        let res = match kind {
            Exchange::Request => upstream
                .forward(req, conn, errors, sent)
                .await
                .map(|(res, fields, arrived)| (res, Some(fields), arrived)),
            Exchange::Handshake => upstream.handshake(req, conn, errors, sent).await,
        };
        let (res, answered) = match res {
            Ok((res, fields, arrived)) => {
                held.upstream_fields = fields;
                (Ok(res), arrived)
            }
            Err(e) => (Err(e), Instant::now()),
        };
        if let Err(GateError::UpstreamUnreachable { .. }) = &res {
            pool.connect_failed(upstream.authority());
        }
        outcome.upstream_elapsed = Some(answered - sent);
        outcome.outcome = "forwarded";
        res
    }

    /// Takes and reads a request's body: refuse on `Content-Length` first, then read at most
    /// the limit; a body mmgate's HTTP/1.1 server offers `whole` is read straight into one
    /// buffer.
    async fn read_body(&self, req: &mut Request<Body>, limit: usize) -> Result<Bytes, GateError> {
        // mmgate meets an `Expect: 100-continue` itself (reading the body sends `100
        // Continue`): the upstream gets the body whole, and no expectation.
        req.headers_mut().remove(header::EXPECT);
        let body = std::mem::take(req.body_mut());
        let whole = req.extensions_mut().remove::<WholeBody>();
        let headers = req.headers();
        let declared = whole
            .as_ref()
            .map(WholeBody::declared)
            .or_else(|| declared_length(headers));
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(GateError::BodyTooLarge { limit });
        }
        let mut read = std::pin::pin!(async {
            match whole {
                Some(whole) => whole
                    .read()
                    .await
                    .map_err(|e| GateError::BodyRead(e.to_string())),
                None => collect_limited(body, limit, declared.unwrap_or(0) as usize).await,
            }
        });
        // A small body usually came with the head: then no timer is armed for it.
        if let Some(done) = read.as_mut().now_or_never() {
            return done;
        }
        match tokio::time::timeout(self.config.limits.body_timeout, read).await {
            Ok(r) => r,
            Err(_) => Err(GateError::BodyRead(format!(
                "not received within {} ms",
                self.config.limits.body_timeout.as_millis()
            ))),
        }
    }
}

fn stripped_header(fields: &[Field]) -> HeaderValue {
    let names: Vec<&str> = fields.iter().map(|f| f.name()).collect();
    HeaderValue::from_str(&names.join(", "))
        .unwrap_or(HeaderValue::from_static("mm_processor_kwargs"))
}
