//! `mmgate probe`: the acceptance matrix of the vLLM 0.31 upgrade, sent to a vLLM server or
//! to a gateway in front of one.
//!
//! Every gated route the target serves (its `/openapi.json`, then trying each route without
//! kwargs: a 404/405 means not served, another 4xx that the route cannot be judged) × six
//! cases — no kwargs, `mm_processor_kwargs` only, `media_io_kwargs` only, both, both
//! `null`, both `{}` — with benign values, text-only prompts (plus one chat row with a tiny
//! generated PNG as a data URL) and small
//! `max_tokens`. Each answer is compared with what vLLM 0.31 does for the expected mode:
//! `untrusted` rejects truthy kwargs at its gate (400, `param` naming the first truthy field
//! in vLLM's order), `trusted` and `shadow` serve all six, `strip` serves all six and says
//! which fields it removed in `x-mmgate-stripped`. The probe only reads; it sends no media
//! beyond its own 2×2 image and never prints keys.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde_json::Value;

use crate::record::rfc3339;

mod matrix;
mod png;

use matrix::{body, Shape, CASES, ROUTES};

/// The behaviour the target should show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// vLLM 0.31 without `--trust-request-mm-kwargs` (or mmgate in `reject` mode).
    Untrusted,
    /// vLLM with `--trust-request-mm-kwargs` (or mmgate routing to a trusted pool).
    Trusted,
    /// mmgate in `strip` mode.
    Strip,
    /// mmgate in `shadow` (or `pass`) mode: transparent.
    Shadow,
}

impl Expect {
    /// The mode's name, as `--expect` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Expect::Untrusted => "untrusted",
            Expect::Trusted => "trusted",
            Expect::Strip => "strip",
            Expect::Shadow => "shadow",
        }
    }
}

/// What to probe.
#[derive(Debug, Clone)]
pub struct ProbeOpts {
    /// The target's base URL (`http://host:port`).
    pub target: String,
    /// The model; the first one `/v1/models` lists when unset.
    pub model: Option<String>,
    /// Sent as `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// Route names or paths to probe (all served gated routes when unset).
    pub routes: Option<Vec<String>>,
    /// The expected behaviour.
    pub expect: Expect,
    /// Per-request timeout.
    pub timeout: Duration,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRow {
    /// Route name (`chat`, `chat+image`, `completions`, …).
    pub route: String,
    /// Request path.
    pub path: String,
    /// Case name (`none`, `mm_processor_kwargs`, `media_io_kwargs`, `both`, `null`, `{}`).
    pub case: String,
    /// When it was sent (RFC 3339 UTC).
    pub at: String,
    /// Response status (0 when the request failed).
    pub status: u16,
    /// The error body's `param`, if any.
    pub param: Option<String>,
    /// The `x-mmgate-stripped` header, if any.
    pub stripped: Option<String>,
    /// What vLLM 0.31 does in the expected mode.
    pub expected: String,
    /// Whether the answer matches.
    pub ok: bool,
    /// Why not, or the transport error.
    pub note: Option<String>,
}

/// The probe's result.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// The target URL.
    pub target: String,
    /// The expected mode.
    pub expect: Expect,
    /// Start and end (RFC 3339 UTC).
    pub started: String,
    /// End time.
    pub finished: String,
    /// The target's `/version` answer, if any.
    pub version: Option<Value>,
    /// The model used.
    pub model: String,
    /// How the routes were chosen: `--routes`, `openapi`, or `trying`.
    pub routes_from: String,
    /// The matrix.
    pub rows: Vec<ProbeRow>,
    /// Routes not probed, with why.
    pub skipped: Vec<(String, String)>,
    /// Rows that do not match.
    pub mismatches: usize,
}

/// Why the probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The target URL is not `http://host:port`.
    #[error("--target {0}: expected an http:// URL with a host and no path")]
    Target(String),
    /// The target did not answer its first request (`GET /version`): nothing listens, the
    /// connection failed, or no answer came in time.
    #[error("{0} did not answer GET /version: {1}")]
    Unreachable(String, String),
    /// No model could be learned.
    #[error("cannot learn the served model from {0}/v1/models ({1}); pass --model")]
    Model(String, String),
    /// A `--routes` entry that is neither a route name nor a gated path.
    #[error("--routes {0}: not a route (one of {1}) or its path")]
    Route(String, String),
}

struct Answer {
    status: u16,
    param: Option<String>,
    gate: bool,
    stripped: Option<String>,
    body: Value,
}

struct Prober {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    opts: ProbeOpts,
}

impl Prober {
    async fn send(&self, method: &str, path: &str, body: Vec<u8>) -> Result<Answer, String> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(
                "user-agent",
                concat!("mmgate-probe/", env!("CARGO_PKG_VERSION")),
            );
        if !body.is_empty() {
            req = req.header("content-type", "application/json");
        }
        if let Some(k) = &self.opts.api_key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        // The timeout covers the whole answer, its body included.
        let exchange = async {
            let res = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("request failed: {}", causes(&e)))?;
            let (parts, body) = res.into_parts();
            let bytes = Limited::new(body, 1 << 20)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            Ok::<_, String>((parts, bytes))
        };
        let (parts, bytes) = tokio::time::timeout(self.opts.timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {} ms", self.opts.timeout.as_millis()))??;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let error = body.get("error");
        let param = error
            .and_then(|e| e.get("param"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let gate = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .is_some_and(|m| m.starts_with("Per-request "));
        let stripped = parts
            .headers
            .get(crate::gateway::STRIPPED_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok(Answer {
            status: parts.status.as_u16(),
            param,
            gate,
            stripped,
            body,
        })
    }

    /// The JSON of a 200 answer; `Err` when there was no answer or another status.
    async fn get_json(&self, path: &str) -> Result<Value, String> {
        let a = self.send("GET", path, Vec::new()).await?;
        match a.status {
            200 => Ok(a.body),
            status => Err(format!("status {status}")),
        }
    }
}

/// An error and its causes, outermost first ("client error (Connect): tcp connect error:
/// Connection refused (os error 111)").
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}

/// Runs the acceptance matrix against the target.
pub async fn probe(opts: ProbeOpts) -> Result<ProbeReport, ProbeError> {
    let base = opts.target.trim_end_matches('/').to_string();
    match base.parse::<http::Uri>() {
        Ok(u) if u.scheme_str() == Some("http") && u.authority().is_some() && u.path() == "/" => {}
        _ => return Err(ProbeError::Target(opts.target.clone())),
    }
    for wanted in opts.routes.iter().flatten() {
        if !ROUTES
            .iter()
            .any(|(n, path, _)| wanted == n || wanted == path)
        {
            let mut names: Vec<&str> = ROUTES.iter().map(|(n, ..)| *n).collect();
            names.dedup();
            return Err(ProbeError::Route(wanted.clone(), names.join(", ")));
        }
    }
    let started = rfc3339(SystemTime::now());
    let p = Prober {
        client: Client::builder(TokioExecutor::new()).build_http(),
        base: base.clone(),
        opts,
    };
    // The first request tells whether anything answers there at all.
    let version = match p.send("GET", "/version", Vec::new()).await {
        Ok(a) => (a.status == 200).then_some(a.body),
        Err(why) => return Err(ProbeError::Unreachable(base, why)),
    };
    let model = match &p.opts.model {
        Some(m) => m.clone(),
        None => p
            .get_json("/v1/models")
            .await
            .and_then(|m| {
                m["data"][0]["id"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| "no model listed".to_string())
            })
            .map_err(|why| ProbeError::Model(base.clone(), why))?,
    };
    let (candidates, routes_from) = candidates(&p).await;
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (name, path, shape) in candidates {
        let cells = probe_route(&p, name, path, shape, &model, routes_from != "--routes").await;
        match cells {
            Ok(mut r) => rows.append(&mut r),
            Err(why) => skipped.push((format!("{name} {path}"), why)),
        }
    }
    let mismatches = rows.iter().filter(|r| !r.ok).count();
    Ok(ProbeReport {
        target: base,
        expect: p.opts.expect,
        started,
        finished: rfc3339(SystemTime::now()),
        version,
        model,
        routes_from: routes_from.into(),
        rows,
        skipped,
        mismatches,
    })
}

/// The routes to probe: `--routes` (names or paths), else those the target's
/// `/openapi.json` lists, else all of them (tried one by one).
async fn candidates(p: &Prober) -> (Vec<(&'static str, &'static str, Shape)>, &'static str) {
    if let Some(wanted) = &p.opts.routes {
        let pick = ROUTES
            .iter()
            .filter(|(n, path, _)| wanted.iter().any(|w| w == n || w == path))
            .copied()
            .collect();
        return (pick, "--routes");
    }
    let served: Option<BTreeSet<String>> = p
        .get_json("/openapi.json")
        .await
        .ok()
        .and_then(|doc| Some(doc.get("paths")?.as_object()?.keys().cloned().collect()));
    match served {
        Some(paths) => (
            ROUTES
                .iter()
                .filter(|(_, path, _)| paths.contains(*path))
                .copied()
                .collect(),
            "openapi",
        ),
        None => (ROUTES.to_vec(), "trying"),
    }
}

async fn probe_route(
    p: &Prober,
    name: &str,
    path: &str,
    shape: Shape,
    model: &str,
    detect: bool,
) -> Result<Vec<ProbeRow>, String> {
    let mut rows = Vec::new();
    for (case, extra, gated_field) in CASES {
        let at = rfc3339(SystemTime::now());
        let answer = p.send("POST", path, body(shape, model, extra)).await;
        if detect && case == "none" {
            if let Ok(a) = &answer {
                if matches!(a.status, 404 | 405) {
                    return Err(format!("answered {} without kwargs: not served", a.status));
                }
                // A route that refuses even the benign request (e.g. /invocations on a render
                // server, which has no handler for it) cannot be judged on its kwargs.
                // The image row is exempt: a text-only model refuses the image (README).
                if (400..500).contains(&a.status) && !a.gate && shape != Shape::ChatImage {
                    let why = a
                        .body
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let why: String = why.chars().take(120).collect();
                    return Err(format!(
                        "refuses the request without kwargs ({}: {why})",
                        a.status
                    ));
                }
            }
        }
        let lenient = shape == Shape::ChatImage;
        let gate = gated_field.filter(|_| p.opts.expect == Expect::Untrusted);
        let strip: Vec<&str> = match (p.opts.expect, extra) {
            (Expect::Strip, "mm") => vec!["mm_processor_kwargs"],
            (Expect::Strip, "io") => vec!["media_io_kwargs"],
            (Expect::Strip, "both") => vec!["mm_processor_kwargs", "media_io_kwargs"],
            _ => Vec::new(),
        };
        let expected = match (gate, strip.is_empty()) {
            (Some(f), _) => format!("400 param={f}"),
            (None, false) => format!("served, stripped {}", strip.join(", ")),
            (None, true) if lenient => "not gated".to_string(),
            (None, true) => "2xx".to_string(),
        };
        let mut row = ProbeRow {
            route: name.into(),
            path: path.into(),
            case: case.into(),
            at,
            status: 0,
            param: None,
            stripped: None,
            expected,
            ok: false,
            note: None,
        };
        match answer {
            Err(e) => row.note = Some(e),
            Ok(a) => {
                row.note = judge(&a, gate, &strip, lenient).err();
                row.ok = row.note.is_none();
                row.status = a.status;
                row.param = a.param;
                row.stripped = a.stripped;
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Whether an answer matches the expectation (`Err` says how it does not).
fn judge(a: &Answer, gate: Option<&str>, strip: &[&str], lenient: bool) -> Result<(), String> {
    if let Some(f) = gate {
        return match (a.status, a.param.as_deref(), a.gate) {
            (400, Some(p), true) if p == f => Ok(()),
            _ => Err(format!("expected vLLM's gate error naming {f}")),
        };
    }
    if a.gate {
        return Err("rejected by the gate".into());
    }
    let served = (200..300).contains(&a.status) || (lenient && a.status < 500);
    if !served {
        return Err(format!("status {}", a.status));
    }
    let got: Vec<&str> = a
        .stripped
        .as_deref()
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    if got != strip {
        return Err(format!("x-mmgate-stripped {:?}, expected {strip:?}", got));
    }
    Ok(())
}

/// The report as a table, a header with the target, version and times, and a summary.
pub fn table(r: &ProbeReport) -> String {
    let version = r
        .version
        .as_ref()
        .and_then(|v| v.get("version").cloned())
        .map_or_else(|| "unknown".to_string(), |v| v.to_string());
    let mut out = format!(
        "target {} (version {version}), model {}, expect {}, routes from {}\nstarted {}  finished {}\n",
        r.target,
        r.model,
        r.expect.name(),
        r.routes_from,
        r.started,
        r.finished
    );
    let mut cells = vec![[
        "route", "path", "case", "status", "param", "expected", "result",
    ]
    .map(String::from)];
    for row in &r.rows {
        cells.push([
            row.route.clone(),
            row.path.clone(),
            row.case.clone(),
            row.status.to_string(),
            row.param.clone().unwrap_or_else(|| "-".into()),
            row.expected.clone(),
            match &row.note {
                None => "ok".into(),
                Some(n) => format!("MISMATCH: {n}"),
            },
        ]);
    }
    out.push_str(&crate::report::align(&cells));
    for (route, why) in &r.skipped {
        out.push_str(&format!("skipped {route}: {why}\n"));
    }
    out.push_str(&format!(
        "{} row(s), {} mismatch(es)\n",
        r.rows.len(),
        r.mismatches
    ));
    out
}
