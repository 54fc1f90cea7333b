//! The recorded vLLM 0.31 conformance cases.
//!
//! Cases come from `$MMGATE_CASES`, else `../shared/conformance/cases.jsonl` beside the
//! checkout, else the copy in `tests/data/`.

use std::path::PathBuf;

use base64::Engine;
use mmgate::error::{GATE_BODY_MEDIA_IO_KWARGS, GATE_BODY_MM_PROCESSOR_KWARGS};

use super::{send, Reply, TestClient};

#[derive(Clone)]
pub struct Case {
    pub family: String,
    pub id: String,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub status: u16,
    /// The gate error body the untrusted server sent, if it was a gate rejection.
    pub gate: Option<&'static str>,
    /// The body the untrusted server answered.
    pub answer: String,
    /// The recording server did not serve this route (FastAPI's 404): which routes a server
    /// has depends on its task, so only a gateway that asks the upstream can know.
    pub route_missing: bool,
}

pub fn cases_path() -> PathBuf {
    if let Ok(p) = std::env::var("MMGATE_CASES") {
        return p.into();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/conformance/cases.jsonl");
    if shared.exists() {
        shared
    } else {
        root.join("tests/data/cases.jsonl")
    }
}

pub fn cases() -> Vec<Case> {
    let path = cases_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let b64 = base64::engine::general_purpose::STANDARD;
    let cases: Vec<Case> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let r = &v["request"];
            let u = &v["untrusted"];
            let body = u["body"].as_str().unwrap_or("");
            let gate = [GATE_BODY_MM_PROCESSOR_KWARGS, GATE_BODY_MEDIA_IO_KWARGS]
                .into_iter()
                .find(|g| *g == body);
            Case {
                family: v["family"].as_str().unwrap_or("").to_string(),
                id: v["id"].as_str().unwrap().to_string(),
                method: r["method"].as_str().unwrap().to_string(),
                path: r["path"].as_str().unwrap().to_string(),
                headers: r["headers"]
                    .as_object()
                    .map(|h| {
                        h.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                            .collect()
                    })
                    .unwrap_or_default(),
                body: b64.decode(r["body_b64"].as_str().unwrap()).unwrap(),
                status: u["status"].as_u64().unwrap() as u16,
                gate,
                answer: body.to_string(),
                route_missing: body == r#"{"detail":"Not Found"}"#,
            }
        })
        .collect();
    assert!(
        cases.len() > 100,
        "only {} cases in {}",
        cases.len(),
        path.display()
    );
    cases
}

impl Case {
    /// The nesting the recording server's parser took: a render server's, or `vllm
    /// serve`'s (the generating and pooling families).
    pub fn max_depth(&self) -> usize {
        match self.family.as_str() {
            "render" => mmgate::inspect::RENDER_MAX_DEPTH,
            _ => mmgate::inspect::SERVE_MAX_DEPTH,
        }
    }

    /// The case's content type header, if any.
    pub fn content_type(&self) -> Option<&str> {
        self.header("content-type")
    }

    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// What vLLM reads from the request's head besides its route.
    pub fn head(&self) -> mmgate::contract::Head<'_> {
        mmgate::contract::Head {
            content_type: self.content_type().map(str::as_bytes),
            adapter: self
                .header(mmgate::contract::Head::ADAPTER)
                .map(str::as_bytes),
            session: self
                .header(mmgate::contract::Head::SESSION)
                .map(str::as_bytes),
        }
    }

    /// Sends the recorded request (method, raw path, headers, bytes) to `addr`.
    pub async fn replay(&self, client: &TestClient, addr: std::net::SocketAddr) -> Reply {
        self.replay_body(client, addr, self.body.clone()).await
    }

    /// Sends the recorded request with another body.
    pub async fn replay_body(
        &self,
        client: &TestClient,
        addr: std::net::SocketAddr,
        body: Vec<u8>,
    ) -> Reply {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        send(client, addr, &self.method, &self.path, &headers, body).await
    }
}
