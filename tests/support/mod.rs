//! Test helpers: a fake vLLM upstream that records what it receives, a gateway started from a
//! policy string, and a small HTTP client.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;

pub mod cases;
pub mod serving;
pub mod trusted;
pub mod variants;

/// One request as the fake upstream received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The connection it came on (the gateway's side of it).
    pub peer: SocketAddr,
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// How a fake upstream behaves.
#[derive(Default, Clone)]
pub struct FakeOpts {
    /// POST handlers wait for a permit here before answering.
    pub hold: Option<Arc<Semaphore>>,
    /// SSE events before `[DONE]` (default 5).
    pub sse_events: Option<usize>,
    /// When set, an SSE answer sends its first event at once and the rest (with `[DONE]`)
    /// only after taking a permit here, so a test can see the first event arrive first.
    pub sse_gate: Option<Arc<Semaphore>>,
    /// Gated paths the fake's `/openapi.json` leaves out (like a server without that task).
    pub missing_routes: Vec<&'static str>,
    /// Like vLLM's `--api-key`: paths under `/v1` and `/v2` answer 401 without
    /// `Authorization: Bearer KEY`.
    pub api_key: Option<&'static str>,
}

#[derive(Default)]
struct FakeState {
    received: Mutex<Vec<Received>>,
    opts: FakeOpts,
}

/// The gated paths only a full server (`vllm serve`) has: a render server's `/openapi.json`
/// leaves them out.
pub const FULL_SERVER_PATHS: &[&str] = &[
    "/v1/chat/completions",
    "/v1/chat/completions/batch",
    "/v1/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/pooling",
    "/score",
    "/v1/score",
    "/rerank",
    "/v1/rerank",
    "/v2/rerank",
    "/classify",
    "/v1/messages",
    "/v2/embed",
];

/// The gated paths a render server has too.
const RENDER_SERVER_PATHS: &[&str] = &[
    "/tokenize",
    "/v1/chat/completions/render",
    "/v1/completions/render",
    "/v1/responses/render",
    "/invocations",
];

/// A fake vLLM: `/health`, `/v1/models` (serving `tiny`), JSON answers, and SSE for
/// `"stream": true` bodies.
pub struct FakeVllm {
    pub addr: SocketAddr,
    state: Arc<FakeState>,
}

impl FakeVllm {
    pub async fn start() -> Self {
        Self::start_with(FakeOpts::default()).await
    }

    pub async fn start_with(opts: FakeOpts) -> Self {
        let state = Arc::new(FakeState {
            opts,
            ..Default::default()
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            axum::serve(listener, app).await.unwrap();
        });
        FakeVllm { addr, state }
    }

    /// A fake that wants `Authorization: Bearer KEY` on `/v1` and `/v2`, like vLLM's
    /// `--api-key`.
    pub async fn with_api_key(key: &'static str) -> Self {
        Self::start_with(FakeOpts {
            api_key: Some(key),
            ..Default::default()
        })
        .await
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Everything received except health checks and model discovery.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.state.received.lock().unwrap().clear();
    }
}

async fn handle(
    State(state): State<Arc<FakeState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    if req
        .headers()
        .get("upgrade")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
    {
        return websocket(&state, peer, req);
    }
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    if parts.method == Method::GET && path == "/health" {
        return Response::new(Body::empty());
    }
    if let Some(key) = state.opts.api_key {
        let sent = parts
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if (path.starts_with("/v1") || path.starts_with("/v2"))
            && sent != Some(&format!("Bearer {key}"))
        {
            return json(
                StatusCode::UNAUTHORIZED,
                r#"{"error":"Unauthorized"}"#.into(),
            );
        }
    }
    if parts.method == Method::GET && path == "/v1/models" {
        return json(
            StatusCode::OK,
            r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#.into(),
        );
    }
    if parts.method == Method::GET && path == "/openapi.json" {
        let paths: serde_json::Map<String, serde_json::Value> = FULL_SERVER_PATHS
            .iter()
            .chain(RENDER_SERVER_PATHS)
            .filter(|p| !state.opts.missing_routes.contains(p))
            .map(|p| (p.to_string(), serde_json::json!({"post": {}})))
            .collect();
        return json(
            StatusCode::OK,
            serde_json::json!({"openapi": "3.1.0", "paths": paths}).to_string(),
        );
    }
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    state.received.lock().unwrap().push(Received {
        peer,
        method: parts.method.clone(),
        path: path.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    if let Some(hold) = &state.opts.hold {
        let _permit = hold.acquire().await.unwrap();
    }
    let stream = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("stream").and_then(|s| s.as_bool()))
        .unwrap_or(false);
    if stream {
        return sse(
            state.opts.sse_events.unwrap_or(5),
            state.opts.sse_gate.clone(),
        );
    }
    json(
        StatusCode::OK,
        format!(
            r#"{{"id":"cmpl-fake","object":"chat.completion","path":{:?},"received_bytes":{}}}"#,
            path,
            body.len()
        ),
    )
}

/// A WebSocket handshake as vLLM's server answers it, its body never read: `GET
/// /v1/realtime` with a key switches (the fake then sends `session.created\n` and echoes
/// what it gets in upper case until the client ends its side), one without a key gets 400,
/// any other path or method 403; a refused handshake closes the connection.
fn websocket(state: &FakeState, peer: SocketAddr, mut req: Request) -> Response {
    state.received.lock().unwrap().push(Received {
        peer,
        method: req.method().clone(),
        path: req.uri().to_string(),
        headers: req.headers().clone(),
        body: Bytes::new(),
    });
    let refuse = |status: StatusCode, text: &str| {
        Response::builder()
            .status(status)
            .header("connection", "close")
            .header("content-type", "text/plain; charset=utf-8")
            .body(Body::from(text.to_string()))
            .unwrap()
    };
    if req.method() != Method::GET || req.uri().path() != "/v1/realtime" {
        return refuse(StatusCode::FORBIDDEN, "");
    }
    if !req.headers().contains_key("sec-websocket-key") {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Failed to open a WebSocket connection: missing Sec-WebSocket-Key header.\n",
        );
    }
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(upgraded) = upgrade.await else { return };
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        if io.write_all(b"session.created\n").await.is_err() {
            return;
        }
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = io.read(&mut buf).await {
            if io.write_all(&buf[..n].to_ascii_uppercase()).await.is_err() {
                return;
            }
        }
        let _ = io.shutdown().await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .header("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        .body(Body::empty())
        .unwrap()
}

fn json(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}

/// The `i`th SSE event the fake sends (`[DONE]` after the last).
pub fn sse_event(i: usize) -> Bytes {
    Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-fake\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\"}}}}]}}\n\n"
    ))
}

fn sse(events: usize, gate: Option<Arc<Semaphore>>) -> Response {
    // Item i is event i, item `events` is `[DONE]`; with a gate, items after the first wait.
    let chunks = futures_util::stream::unfold(0usize, move |i| {
        let gate = gate.clone();
        async move {
            if i > events {
                return None;
            }
            if let (1, Some(gate)) = (i, &gate) {
                gate.acquire().await.unwrap().forget();
            }
            let chunk = if i == events {
                Bytes::from_static(b"data: [DONE]\n\n")
            } else {
                sse_event(i)
            };
            Some((Ok::<_, std::convert::Infallible>(chunk), i + 1))
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(chunks))
        .unwrap()
}

/// A gateway started in-process on port 0 with `policy` (its `[upstream]` is filled in).
pub async fn gateway(policy: &str, upstream: &FakeVllm) -> mmgate::server::Running {
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\nurl = \"{}\"\n{policy}",
        upstream.url()
    );
    let config = mmgate::config::Config::parse(&text).unwrap();
    mmgate::server::start(config, Duration::from_secs(5))
        .await
        .unwrap()
}

/// A response, collected.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub type TestClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

pub fn client() -> TestClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends one request and collects the reply.
pub async fn send(
    client: &TestClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Reply {
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = client
        .request(req.body(Full::new(body.into())).unwrap())
        .await
        .unwrap();
    let (parts, body) = res.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// POSTs JSON.
pub async fn post_json(client: &TestClient, addr: SocketAddr, path: &str, body: &str) -> Reply {
    send(
        client,
        addr,
        "POST",
        path,
        &[("content-type", "application/json")],
        body.to_string(),
    )
    .await
}

/// Reads one metric sample (name with labels, e.g. `mmgate_requests_total{...}`) from the admin listener.
pub async fn metric(client: &TestClient, admin: SocketAddr, prefix: &str) -> Option<f64> {
    let reply = send(client, admin, "GET", "/metrics", &[], Bytes::new()).await;
    reply
        .text()
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A gateway from a whole policy (no `[upstream]` added) whose `{NAME}` placeholders are
/// replaced by upstream URLs, e.g. `[("DEFAULT", fake.url())]`; `[listen]` is filled in.
/// The rate limiters read `clock` when given.
pub async fn gateway_with(
    policy: &str,
    upstreams: &[(&str, String)],
    clock: Option<mmgate::limits::RateClock>,
) -> mmgate::server::Running {
    let mut text = format!("[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{policy}");
    for (name, url) in upstreams {
        text = text.replace(&format!("{{{name}}}"), url);
    }
    let config = mmgate::config::Config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    mmgate::server::start_with(config, Duration::from_secs(5), clock.unwrap_or_default())
        .await
        .unwrap()
}

/// A URL where nothing listens: a loopback port bound and released.
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

/// Waits (yielding, never sleeping a fixed time) until `check` holds; fails after 10 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::task::yield_now().await;
    }
}

/// The gateway's requests in flight (0 before the first).
async fn in_flight(c: &TestClient, admin: SocketAddr) -> f64 {
    metric(c, admin, "mmgate_in_flight_requests")
        .await
        .unwrap_or(0.0)
}

/// Waits until the gateway has one request in flight, then until it has let it go.
pub async fn in_flight_then_let_go(admin: SocketAddr) {
    let c = client();
    eventually("the request to be in flight", || async {
        in_flight(&c, admin).await == 1.0
    })
    .await;
    let_go(admin).await;
}

/// Waits until the gateway has no request in flight.
pub async fn let_go(admin: SocketAddr) {
    let c = client();
    eventually("the request to be let go", || async {
        in_flight(&c, admin).await == 0.0
    })
    .await;
}
