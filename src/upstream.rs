//! Forwarding to the upstream vLLM: kept-alive HTTP/1.1 connections driven by the request
//! that uses them (`conns`, `h1`), hop-by-hop header handling (RFC 9110 §7.6.1),
//! `X-Forwarded-*` (written with the head), and responses streamed back as they arrive
//! (chunks that arrive together are passed on as one frame).
//!
//! The client's `Host` header is kept so that vLLM's redirects point back at the gateway.
//! An `https://` member is reached over rustls with the roots (and optional client
//! certificate) its policy configured; the server name checked is the member's host.
//!
//! A forwarded response's body is watched: one that breaks off after its headers, or whose
//! upstream sends nothing for `response_timeout` while the gateway waits for the next frame
//! (a stalled stream), ends in an error: the client's response is cut short, the upstream
//! connection dropped, and what the request holds released. Each failure is counted in
//! `mmgate_upstream_errors_total{kind}`: `connect`, `timeout` (no response headers in time),
//! `reset` (the connection closed or was reset before a whole response head), `protocol` (an
//! answer that is not HTTP), `truncated` (the body broke off) and `stalled`. A client that
//! breaks off an upload being streamed through gets a 400 and counts as no upstream error.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::{Frame, SizeHint};
use prometheus::IntCounterVec;
use tokio::time::Instant;

use crate::config;
use crate::error::GateError;
use crate::listen::ConnInfo;
use crate::tunnel::{Switch, Switched};

mod conns;
mod fields;
mod h1;
pub mod host;
pub(crate) use conns::on_worker_thread;
use conns::{Conns, Leased, Opened, SendError};
pub use fields::ResponseFields;
use h1::Failure;

/// The upstream vLLM and the client that reaches it.
#[derive(Clone)]
pub struct Upstream {
    conns: Arc<Conns>,
    authority: http::uri::Authority,
    response_timeout: Duration,
}

impl Upstream {
    /// Builds the connection pool for the configured upstream.
    pub fn new(cfg: &config::Upstream) -> Self {
        let tls = cfg.tls.clone().unwrap_or_else(|| Arc::new(plain_only()));
        let conns = Conns::new(&cfg.url, tls, cfg.connect_timeout, cfg.idle_timeout);
        let parts = cfg.url.clone().into_parts();
        let authority = parts
            .authority
            .unwrap_or_else(|| http::uri::Authority::from_static("127.0.0.1"));
        Upstream {
            conns: Arc::new(conns),
            authority,
            response_timeout: cfg.response_timeout,
        }
    }

    /// The upstream's `host:port`, for messages.
    pub fn authority(&self) -> &str {
        self.authority.as_str()
    }

    fn failed(&self, reason: String) -> GateError {
        GateError::UpstreamFailed {
            upstream: self.authority.to_string(),
            reason,
        }
    }

    /// Forwards a request sent at `sent`, and returns the streaming response (its header
    /// map empty), its fields as the upstream sent them, and when its head arrived. The
    /// caller has removed the hop-by-hop fields ([`remove_hop_by_hop`]: what it judged is
    /// what goes out). The request is left as it went out: `Host` set where it had none
    /// valid, HTTP/1.1, and its body taken once a connection was had. Failures (before
    /// the headers, and of the body after them) are counted in `errors` by kind.
    pub async fn forward(
        &self,
        req: &mut Request<Body>,
        conn: &ConnInfo,
        errors: &IntCounterVec,
        sent: Instant,
    ) -> Result<(Response<Body>, ResponseFields, Instant), GateError> {
        let forwarded = self.prepare(req, conn);
        // mmgate's own server sends an HTTP/1.1 client a chunked body as the chunks came.
        let pass_chunks = conn.own_http1() && req.version() == http::Version::HTTP_11;
        if req.version() < http::Version::HTTP_11 {
            // An HTTP/1.0 client's expectation is ignored (RFC 9110 §10.1.1): it does not go on
            // in the HTTP/1.1 request.
            req.headers_mut().remove(header::EXPECT);
        }
        *req.version_mut() = http::Version::HTTP_11;
        let due = sent + self.response_timeout;
        match self
            .conns
            .send(req, &forwarded, sent, due, pass_chunks)
            .await
        {
            Ok((res, fields)) => {
                let arrived = Instant::now();
                Ok((self.watched(res, errors, arrived), fields, arrived))
            }
            Err(e) => Err(self.failure(e, errors)),
        }
    }

    /// Sends a WebSocket handshake ([`crate::tunnel`]) at `sent`, its head alone (with its
    /// fields as they came, hop-by-hop ones included) on a connection of its own. A switch
    /// comes back as a `101` carrying its [`Switch`] (no fields: the head goes to the client
    /// as it came); any other answer as [`Upstream::forward`] returns it.
    pub async fn handshake(
        &self,
        req: &mut Request<Body>,
        conn: &ConnInfo,
        errors: &IntCounterVec,
        sent: Instant,
    ) -> Result<(Response<Body>, Option<ResponseFields>, Instant), GateError> {
        let forwarded = self.prepare(req, conn);
        let due = sent + self.response_timeout;
        match self.conns.handshake(req, &forwarded, due).await {
            Ok(Opened::Switched(head, early, io)) => {
                let mut res = Response::new(Body::empty());
                *res.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                Switch::attach(&mut res, Switched::new(head, early, Box::new(io)));
                Ok((res, None, Instant::now()))
            }
            Ok(Opened::Answered(res, fields)) => {
                let arrived = Instant::now();
                Ok((self.watched(res, errors, arrived), Some(fields), arrived))
            }
            Err(e) => Err(self.failure(e, errors)),
        }
    }

    /// Readies a request to go out: `Host` set where it had none valid (an HTTP/2 client's
    /// authority, `host::replacement`; its scheme is not sent), and the `X-Forwarded-*`
    /// fields to write in place of its own.
    fn prepare(&self, req: &mut Request<Body>, conn: &ConnInfo) -> Forwarded {
        if let Some(h) = host::replacement(req, conn.own_host()) {
            req.headers_mut().insert(header::HOST, h);
        }
        forwarded(req.headers(), conn.remote_ip())
    }

    /// A response whose body is watched for breaking off or stalling.
    fn watched(
        &self,
        res: Response<Leased>,
        errors: &IntCounterVec,
        arrived: Instant,
    ) -> Response<Body> {
        res.map(|inner| {
            Body::new(Watched {
                inner,
                idle: self.response_timeout,
                waiting: Some(arrived),
                deadline: None,
                errors: errors.clone(),
            })
        })
    }

    /// Maps a failed exchange to a [`GateError`], counted in `errors` by kind.
    fn failure(&self, e: SendError, errors: &IntCounterVec) -> GateError {
        let (e, kind) = self.failure_kind(e);
        if let Some(kind) = kind {
            errors.with_label_values(&[kind]).inc();
        }
        e
    }

    /// A failed exchange as a [`GateError`] and its `kind` label (none when the request's
    /// own body failed: the client broke off its upload).
    fn failure_kind(&self, e: SendError) -> (GateError, Option<&'static str>) {
        match e {
            SendError::Failed(Failure::TimedOut) => {
                let e = GateError::UpstreamTimeout {
                    upstream: self.authority.to_string(),
                    millis: self.response_timeout.as_millis(),
                };
                (e, Some("timeout"))
            }
            SendError::Connect(reason) => {
                let unreachable = GateError::UpstreamUnreachable {
                    upstream: self.authority.to_string(),
                    reason,
                };
                (unreachable, Some("connect"))
            }
            SendError::Failed(Failure::Reset(e)) => (self.failed(e), Some("reset")),
            SendError::Failed(Failure::Protocol(e)) => (self.failed(e), Some("protocol")),
            SendError::Failed(Failure::ClientBody(e)) => (e, None),
        }
    }

    /// A GET to the upstream with a short deadline (health checks, route discovery).
    pub async fn get(
        &self,
        path: &str,
        deadline: Duration,
    ) -> Result<(StatusCode, Bytes), GateError> {
        self.get_with(path, deadline, None).await
    }

    /// [`Upstream::get`] with an `Authorization` field (the upstream's own API key).
    async fn get_with(
        &self,
        path: &str,
        deadline: Duration,
        authorization: Option<&HeaderValue>,
    ) -> Result<(StatusCode, Bytes), GateError> {
        let mut req = Request::get(path)
            .header(header::HOST, self.authority.as_str())
            .body(Body::empty())
            .map_err(|e| self.failed(e.to_string()))?;
        if let Some(value) = authorization {
            req.headers_mut()
                .insert(header::AUTHORIZATION, value.clone());
        }
        let fetch = async {
            let now = Instant::now();
            let due = now + self.response_timeout;
            let (res, _) = self
                .conns
                .send(&mut req, &[], now, due, false)
                .await
                .map_err(|e| self.failure_kind(e).0)?;
            let status = res.status();
            let body = axum::body::to_bytes(Body::new(res.into_body()), 16 << 20)
                .await
                .map_err(|e| self.failed(e.to_string()))?;
            Ok((status, body))
        };
        tokio::time::timeout(deadline, fetch)
            .await
            .unwrap_or_else(|_| {
                Err(GateError::UpstreamTimeout {
                    upstream: self.authority.to_string(),
                    millis: deadline.as_millis(),
                })
            })
    }

    /// Served model names from the upstream's `/v1/models`, asked with `authorization` (the
    /// upstream's own API key, which vLLM's `--api-key` requires there) when given; else
    /// why they could not be read.
    pub async fn served_models(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<Vec<String>, Unread> {
        let (status, body) = self
            .get_with("/v1/models", Duration::from_secs(5), authorization)
            .await
            .map_err(Unread::Failed)?;
        if !status.is_success() {
            return Err(Unread::Status(status));
        }
        let list = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let ids = v.get("data")?.as_array()?.iter();
                Some(
                    ids.filter_map(|m| m.get("id")?.as_str().map(str::to_string))
                        .collect(),
                )
            });
        list.ok_or(Unread::NotAList)
    }

    /// The gated routes the upstream serves, from its FastAPI `/openapi.json`.
    pub async fn served_routes(&self) -> Option<Vec<crate::classify::RouteKind>> {
        let (status, body) = self
            .get("/openapi.json", Duration::from_secs(5))
            .await
            .ok()?;
        if !status.is_success() {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let mut routes: Vec<_> = v
            .get("paths")?
            .as_object()?
            .iter()
            .filter(|(_, ops)| ops.get("post").is_some())
            .filter_map(|(path, _)| {
                match crate::classify::classify(
                    &http::Method::POST,
                    path,
                    &crate::classify::RootPath::default(),
                ) {
                    crate::classify::Route::Gated(kind) => Some(kind),
                    crate::classify::Route::Ungated => None,
                }
            })
            .collect();
        routes.sort();
        routes.dedup();
        Some(routes)
    }
}

/// Why the served models could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Unread {
    /// The request failed.
    #[error(transparent)]
    Failed(GateError),
    /// The upstream answered with another status than 2xx.
    #[error("it answered {0}")]
    Status(StatusCode),
    /// The answer is not vLLM's model list.
    #[error("its answer is not a model list")]
    NotAList,
}

impl Unread {
    /// What the operator can do about it, when that is known: a 401 is vLLM's own
    /// `--api-key` check, which wants the key the policy gives (`keyed`) or lacks.
    pub fn hint(&self, keyed: bool) -> &'static str {
        match (self, keyed) {
            (Unread::Status(StatusCode::UNAUTHORIZED), false) => {
                " (an upstream started with --api-key needs its key in vllm.api_key_file or vllm.api_key_env)"
            }
            (Unread::Status(StatusCode::UNAUTHORIZED), true) => {
                " (it refused the key in vllm.api_key_file or vllm.api_key_env)"
            }
            _ => "",
        }
    }
}

/// A TLS configuration that trusts nothing, for members reached over plain HTTP (the
/// connector needs one, and never uses it for `http://`).
fn plain_only() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map(|b| {
            b.with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        })
        .expect("ring supports the default protocol versions")
}

/// A forwarded response's body: counts a body that breaks off (`truncated`) and ends one
/// that sends nothing for `idle` (`stalled`) with an error, which cuts the client's response
/// short and drops the upstream connection.
struct Watched {
    inner: Leased,
    idle: Duration,
    /// Since when the gateway has been waiting for the next frame (not while the client is
    /// slow to take the last one): from the headers, then from the first poll after a frame.
    waiting: Option<Instant>,
    /// At or before `waiting + idle`; moved on lazily when it fires early. Armed the first
    /// time a frame is not ready (a JSON response that came with its head never needs it).
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    errors: IntCounterVec,
}

/// The error a stalled response body ends with.
#[derive(Debug, thiserror::Error)]
#[error("the upstream sent nothing for {0} ms")]
struct Stalled(u128);

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.waiting = None;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.errors.with_label_values(&["truncated"]).inc();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => loop {
                let since = *this.waiting.get_or_insert_with(Instant::now);
                let due = since + this.idle;
                let deadline = this
                    .deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                if deadline.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if due > Instant::now() {
                    deadline.as_mut().reset(due);
                    continue;
                }
                this.errors.with_label_values(&["stalled"]).inc();
                let e = Stalled(this.idle.as_millis());
                return Poll::Ready(Some(Err(e.into())));
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Removes hop-by-hop headers: the fixed list and every header `Connection` names.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the names finds the fixed ones (most messages carry none, and then
    // nothing is allocated); removing by `HeaderName` skips parsing a name per lookup.
    let mut named: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_hop_by_hop(n))
        .cloned()
        .collect();
    if named.is_empty() {
        return;
    }
    named.extend(
        headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok()),
    );
    for name in &named {
        headers.remove(name);
    }
}

/// The headers that are always hop-by-hop.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
}

/// The forwarding fields sent in place of the client's: `X-Forwarded-For` with the client's
/// address appended to the first value it sent (replaced when that is not text), and
/// `X-Forwarded-Proto: http` unless the request has one. Written by the connection as it
/// writes the head, so the request's header map is not grown for them.
fn forwarded(headers: &HeaderMap, client: &HeaderValue) -> Forwarded {
    const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
    const XFP: HeaderName = HeaderName::from_static("x-forwarded-proto");
    let chain = headers
        .get(XFF)
        .filter(|prev| prev.to_str().is_ok())
        .and_then(|prev| {
            HeaderValue::from_bytes(&[prev.as_bytes(), b", ", client.as_bytes()].concat()).ok()
        })
        .unwrap_or_else(|| client.clone());
    let fields = [(XFF, chain), (XFP, HeaderValue::from_static("http"))];
    Forwarded {
        fields,
        len: if headers.contains_key(XFP) { 1 } else { 2 },
    }
}

/// The fields [`forwarded`] sets (no allocation for the list).
struct Forwarded {
    fields: [(HeaderName, HeaderValue); 2],
    len: usize,
}

impl std::ops::Deref for Forwarded {
    type Target = [(HeaderName, HeaderValue)];

    fn deref(&self) -> &Self::Target {
        &self.fields[..self.len]
    }
}

/// A body made of slices of one buffer (the strip result), with an exact length.
pub struct SliceBody {
    parts: std::collections::VecDeque<Bytes>,
    remaining: u64,
}

impl SliceBody {
    /// A body that sends `parts` in order.
    pub fn new(parts: Vec<Bytes>) -> Self {
        let remaining = parts.iter().map(|p| p.len() as u64).sum();
        SliceBody {
            parts: parts.into_iter().filter(|p| !p.is_empty()).collect(),
            remaining,
        }
    }
}

impl http_body::Body for SliceBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let next = self.parts.pop_front();
        if let Some(p) = &next {
            self.remaining -= p.len() as u64;
        }
        Poll::Ready(next.map(|p| Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        remove_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::CONTENT_TYPE));
    }

    #[test]
    fn forwarded_for_is_appended() {
        let client = HeaderValue::from_static("127.0.0.1");
        let set = |h: &HeaderMap| -> Vec<(String, String)> {
            forwarded(h, &client)
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
                .collect()
        };
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        let mut h = HeaderMap::new();
        assert_eq!(
            set(&h),
            [
                pair("x-forwarded-for", "127.0.0.1"),
                pair("x-forwarded-proto", "http")
            ]
        );
        h.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.1"));
        h.append("x-forwarded-for", HeaderValue::from_static("10.0.0.2"));
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert_eq!(
            set(&h),
            [pair("x-forwarded-for", "10.0.0.1, 127.0.0.1")],
            "the first value is extended, a client's proto is kept"
        );
        let opaque = HeaderValue::from_bytes(b"10.0.0.1, caf\xe9").unwrap();
        h.insert("x-forwarded-for", opaque);
        assert_eq!(set(&h), [pair("x-forwarded-for", "127.0.0.1")]);
    }
}
