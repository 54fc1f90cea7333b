//! Configuration: the policy file is parsed once into a validated runtime [`Config`].
//!
//! Every problem (unknown key, wrong type, bad value) is collected with its field path and
//! reported together; a policy with any problem is refused as a whole.

mod clients;
mod file;
mod pools;
mod tls;
mod watched;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Uri};

use crate::classify::{RootPath, RouteKind};
use crate::contract::{ApiKeys, UpstreamFacts};
use crate::decide::{Mode, OnUnclassifiable};
pub use clients::{digest, ClientConfig, Identity, KeyDigest, Rate, Unknown};
use file::{Problems, Section};
pub use pools::{Balance, HealthCheck, KeyRule, PoolConfig, PoolId, Scalar, ValueRules};
pub use tls::{ClientAuth, ServerTls};
pub use watched::Watched;

/// The validated runtime configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Data-plane listener (TLS when [`Config::tls`] is set).
    pub listen: SocketAddr,
    /// An extra plain-HTTP data-plane listener beside the TLS one (`listen.plain_addr`,
    /// e.g. loopback for a sidecar).
    pub plain: Option<SocketAddr>,
    /// Data-plane threads (`listen.workers`; 0 there means one per CPU), at least 1.
    pub workers: usize,
    /// The TLS listener's certificate and client-certificate check (`[tls]`).
    pub tls: Option<ServerTls>,
    /// Live reload (`[reload]`).
    pub reload: Reload,
    /// The policy file (when loaded from one) and every certificate, private key, CA and API
    /// key file it names, each stamped just before it was read (watched for changes).
    pub watched: Watched,
    /// Admin listener (`/metrics`, `/healthz`, `/readyz`).
    pub admin: SocketAddr,
    /// The upstream pools; `pools[0]` is `default` (from `[upstream]` or `[pools.default]`).
    pub pools: Vec<PoolConfig>,
    /// How clients are identified.
    pub identity: Identity,
    /// The clients the policy names.
    pub clients: Vec<ClientConfig>,
    /// Body limits.
    pub limits: Limits,
    /// What to do with gated requests.
    pub gate: Gate,
    /// What mmgate knows of the upstream's configuration.
    pub vllm: Vllm,
    /// What the offending-request log lines carry.
    pub log: LogPolicy,
}

/// What the offending-request log lines carry beyond names (`[log]`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogPolicy {
    /// Log the kwargs' scalar values, strings up to this many bytes (`kwargs_values = true`,
    /// `max_value_len`); `None` logs key names only.
    pub kwargs_values: Option<usize>,
}

/// Live reload of the policy and certificates (`[reload]`).
#[derive(Debug, Clone, Copy)]
pub struct Reload {
    /// Poll the policy and certificate files for changes this often (`None`: SIGHUP only).
    pub watch: Option<Duration>,
}

/// One upstream vLLM server (a pool member).
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Base URL (`http://host:port`).
    pub url: Uri,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Time allowed until the response headers arrive.
    pub response_timeout: Duration,
    /// How long idle keep-alive connections are kept.
    pub idle_timeout: Duration,
    /// TLS for an `https://` member (roots, optional client certificate).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Request limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest body read on a gated route; larger is 413.
    pub max_body_bytes: usize,
    /// JSON nesting limit (Python's recursion limit as vLLM's parser meets it); `None`:
    /// the upstream's ([`UpstreamFacts::max_json_depth`]).
    pub max_json_depth: Option<usize>,
    /// Time allowed to read the request headers.
    pub header_timeout: Duration,
    /// Time a client may take to accept a write of its response (the gathered bytes, at
    /// most 256 KiB); past it, the client is gone.
    pub send_timeout: Duration,
    /// Time allowed to read a gated request's body.
    pub body_timeout: Duration,
}

/// The gate policy.
#[derive(Debug, Clone)]
pub struct Gate {
    modes: [Mode; RouteKind::ALL.len()],
    /// What strip/reject do with a body that cannot be inspected.
    pub on_unclassifiable: OnUnclassifiable,
}

impl Gate {
    /// The mode for a route.
    pub fn mode(&self, route: RouteKind) -> Mode {
        self.modes[RouteKind::ALL.iter().position(|r| *r == route).unwrap_or(0)]
    }
}

/// Facts about the upstream vLLM, for the checks that run before the gate.
#[derive(Debug, Clone)]
pub struct Vllm {
    /// Static facts (served models fixed in the policy, trust flags).
    pub facts: UpstreamFacts,
    /// Discover served models from the upstream's `/v1/models` when none are configured.
    pub discover_models: bool,
    /// Discover the upstream's gated routes from its `/openapi.json`.
    pub discover_routes: bool,
    /// The upstream's `--api-key` keys, when the policy names them: `reject` then answers
    /// vLLM's 401 first to a request without one, as vLLM would.
    pub api_keys: Option<ApiKeys>,
    /// `Bearer KEY` for the first upstream key the policy gives as a key (a file or an
    /// environment variable, not a digest): sent with model discovery.
    pub discovery_key: Option<HeaderValue>,
    /// The upstream's `--root-path`: requests are classified, and its key check applied,
    /// as that server routes and checks them.
    pub root_path: RootPath,
    /// The upstream's CORS settings, for the answers mmgate gives in its place.
    pub cors: Cors,
}

/// vLLM's CORS settings (`--allowed-origins`, `--allow-credentials`; Starlette's
/// `CORSMiddleware`), applied to the answers mmgate gives itself as vLLM's middleware
/// applies them to its own (forwarded answers carry vLLM's).
#[derive(Debug, Clone, Default)]
pub struct Cors {
    /// The allowed origins; `None`: all (`*`, vLLM's default).
    pub origins: Option<Vec<String>>,
    /// `--allow-credentials`.
    pub credentials: bool,
}

impl Cors {
    /// Adds to `headers` what vLLM's middleware adds to an answer to a request from
    /// `origin` (its `Origin` field, if any): `access-control-allow-origin` (`*`, or the
    /// origin where it must be named) and `-allow-credentials` when the origin is allowed,
    /// and `vary: Origin` to every answer that does not name one.
    pub fn apply(&self, origin: Option<&HeaderValue>, headers: &mut http::HeaderMap) {
        use http::header::{ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_ORIGIN, VARY};
        let allowed = |o: &HeaderValue| match &self.origins {
            None => true,
            Some(list) => list.iter().any(|a| a.as_bytes() == o.as_bytes()),
        };
        if let Some(origin) = origin {
            if self.origins.is_none() {
                headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
            }
            if self.credentials {
                headers.insert(
                    ACCESS_CONTROL_ALLOW_CREDENTIALS,
                    HeaderValue::from_static("true"),
                );
            }
            if (self.origins.is_none() && self.credentials)
                || (self.origins.is_some() && allowed(origin))
            {
                headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            }
        }
        headers.append(VARY, HeaderValue::from_static("Origin"));
    }
}

/// `Bearer KEY` as a sensitive header value whose bytes are the key's Latin-1 encoding:
/// vLLM reads a field's bytes as Latin-1 and hashes the key as UTF-8, so that is how a
/// non-ASCII key matches. `None` for a key no field can carry.
fn bearer_latin1(key: &str) -> Option<HeaderValue> {
    let mut bytes = b"Bearer ".to_vec();
    for c in key.chars() {
        bytes.push(u8::try_from(u32::from(c)).ok()?);
    }
    let mut value = HeaderValue::from_bytes(&bytes).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read policy {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not TOML.
    #[error("policy is not valid TOML: {0}")]
    Toml(String),
    /// TOML, but with problems; each names its field.
    #[error("invalid policy:\n  {}", .0.join("\n  "))]
    Invalid(Vec<String>),
}

impl Config {
    /// Loads and validates a policy file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::attempt(path).1
    }

    /// Loads and validates a policy file: the files read (the policy first), valid or not,
    /// each stamped just before it was read, and the configuration or why it was refused.
    pub fn attempt(path: &Path) -> (Watched, Result<Config, ConfigError>) {
        let mut watched = Watched::default();
        watched.add(path);
        let config = match std::fs::read_to_string(path) {
            Ok(text) => Self::read(&text, &mut watched).and_then(|r| r.config),
            Err(source) => Err(ConfigError::Read {
                path: path.display().to_string(),
                source,
            }),
        };
        (watched, config)
    }

    /// Parses and validates policy text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        Self::read(text, &mut Watched::default())?.config
    }

    /// Every key path the policy reader asks for when it reads `text`, valid or not, with the
    /// names of free-form entries as `*` (`pools.*.members`): the policy schema, which the
    /// documentation is checked against.
    pub fn keys_read(text: &str) -> Result<std::collections::BTreeSet<String>, ConfigError> {
        Ok(Self::read(text, &mut Watched::default())?.keys)
    }

    /// Reads policy text: the validated configuration (or every problem), and the keys asked
    /// for; each file read is added to `watched`. Only text that is not TOML at all fails
    /// outright.
    fn read(text: &str, watched: &mut Watched) -> Result<Read, ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml(e.to_string()))?;
        let mut p = Problems::default();
        let mut root = Section::root(&table);

        let mut listen = root.section("listen", &mut p);
        let addr = addr_or(&mut listen, "addr", "0.0.0.0:8080", &mut p);
        let admin = addr_or(&mut listen, "admin", "127.0.0.1:9464", &mut p);
        let plain = listen
            .str("plain_addr", &mut p)
            .map(|_| addr_or(&mut listen, "plain_addr", "127.0.0.1:0", &mut p));
        let workers = match listen.count("workers", 1024, &mut p).unwrap_or(0) {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n as usize,
        };
        listen.finish(&mut p);
        let tls_section = root.section("tls", &mut p);
        let tls_present = tls_section.present();
        let tls = tls::server(tls_section, watched, &mut p);
        if plain.is_some() && !tls_present {
            p.add(
                "listen.plain_addr",
                "only with [tls] (listen.addr is plain HTTP without it)",
            );
        }
        let required = tls
            .as_ref()
            .is_some_and(|t| t.client_auth == tls::ClientAuth::Required);
        if let Some(plain) = plain.filter(|a| required && !a.ip().is_loopback()) {
            p.add(
                "listen.plain_addr",
                format!("{plain} is not loopback, and tls.client_auth = \"required\": clients could skip the certificate there (a plain listener is for a sidecar's local clients)"),
            );
        }
        let reload = reload(root.section("reload", &mut p), &mut p);

        let mut lim = root.section("limits", &mut p);
        let limits = Limits {
            max_body_bytes: lim
                .positive("max_body_bytes", 1 << 34, &mut p)
                .unwrap_or(64 << 20) as usize,
            max_json_depth: lim
                .positive("max_json_depth", 100_000, &mut p)
                .map(|d| d as usize),
            header_timeout: ms(&mut lim, "header_timeout_ms", 30_000, &mut p),
            body_timeout: ms(&mut lim, "body_timeout_ms", 120_000, &mut p),
            send_timeout: ms(&mut lim, "send_timeout_ms", 120_000, &mut p),
        };
        lim.finish(&mut p);
        let pools = pools::pools(&mut root, limits.max_body_bytes, watched, &mut p);
        let identity = clients::identity(root.section("identity", &mut p), &mut p);
        // A [tls] that failed to load has its own problems: no second one for its clients.
        let certificates = tls
            .as_ref()
            .map_or(tls_present, |t| t.client_auth != tls::ClientAuth::None);
        let clients = clients::clients(
            root.section("clients", &mut p),
            &identity,
            &pools,
            certificates,
            watched,
            &mut p,
        );

        let gate = gate(root.section("gate", &mut p), &mut p);

        let mut v = root.section("vllm", &mut p);
        let (api_keys, secrets) = clients::key_digests(
            &mut v,
            ["api_key_sha256", "api_key_file", "api_key_env"],
            watched,
            &mut p,
        );
        let discovery_key = secrets.first().and_then(|k| {
            let value = bearer_latin1(k);
            if value.is_none() {
                p.add(
                    "vllm",
                    "the upstream's key (api_key_file or api_key_env) cannot be sent in a header field as vLLM reads one (Latin-1, no control characters)",
                );
            }
            value
        });
        let vllm = Vllm {
            facts: UpstreamFacts {
                served_models: v.strings("served_models", &mut p),
                trust_request_chat_template: v
                    .bool("trust_request_chat_template", &mut p)
                    .unwrap_or(false),
                tool_call_parser: v.bool("tool_call_parser", &mut p).unwrap_or(false),
                served_routes: None,
                harmony: v.bool("harmony", &mut p).unwrap_or(false),
                responses_store: v.bool("responses_store", &mut p).unwrap_or(false),
                fim_suffix: v.bool("fim_suffix", &mut p).unwrap_or(false),
                mistral_tokenizer: v.bool("mistral_tokenizer", &mut p).unwrap_or(false),
                sagemaker_sessions: v.bool("sagemaker_sessions", &mut p).unwrap_or(false),
                pooling_task: pooling_task(&mut v, &mut p),
                io_processor_plugin: v.bool("io_processor_plugin", &mut p).unwrap_or(false),
                max_completion_prompts: v
                    .positive("max_completion_prompts", 1 << 32, &mut p)
                    .map(|n| n as usize),
            },
            discover_models: v.bool("discover_models", &mut p).unwrap_or(true),
            discover_routes: v.bool("discover_routes", &mut p).unwrap_or(true),
            api_keys: (!api_keys.is_empty()).then(|| ApiKeys::new(api_keys)),
            discovery_key,
            root_path: root_path(&mut v, &mut p),
            cors: cors(&mut v, &mut p),
        };
        v.finish(&mut p);
        let log = log_policy(root.section("log", &mut p), &mut p);
        root.finish(&mut p);

        let config = match p.found.is_empty() && !pools.is_empty() {
            true => Ok(Config {
                listen: addr,
                admin,
                plain,
                workers,
                tls,
                reload,
                watched: watched.clone(),
                pools,
                identity,
                clients,
                limits,
                gate,
                vllm,
                log,
            }),
            false => Err(ConfigError::Invalid(p.found)),
        };
        Ok(Read {
            config,
            keys: p.keys,
        })
    }
}

/// `vllm.allowed_origins` (default `["*"]`, as vLLM's) and `vllm.allow_credentials`.
fn cors(v: &mut Section<'_>, p: &mut Problems) -> Cors {
    let origins = v.strings("allowed_origins", p);
    if let Some(bad) = origins
        .iter()
        .flatten()
        .find(|o| HeaderValue::from_str(o).is_err())
    {
        p.add(
            "vllm.allowed_origins",
            format!("{bad:?} is no header value (an origin such as \"https://app.example\")"),
        );
    }
    Cors {
        origins: origins.filter(|o| !o.iter().any(|o| o == "*")),
        credentials: v.bool("allow_credentials", p).unwrap_or(false),
    }
}

/// `vllm.pooling_task`: one of vLLM's pooling tasks, as the upstream's `/pooling` runs it.
fn pooling_task(v: &mut Section<'_>, p: &mut Problems) -> Option<&'static str> {
    let task = v.str("pooling_task", p)?;
    let known = crate::contract::POOLING_TASKS
        .into_iter()
        .find(|&t| t == task);
    if known.is_none() {
        p.add(
            "vllm.pooling_task",
            format!(
                "unknown pooling task {task:?}; expected one of {}",
                crate::contract::POOLING_TASKS.join(", ")
            ),
        );
    }
    known
}

/// What [`Config::read`] makes of policy text.
struct Read {
    config: Result<Config, ConfigError>,
    keys: std::collections::BTreeSet<String>,
}

fn gate(mut s: Section<'_>, p: &mut Problems) -> Gate {
    let default = s
        .str("default", p)
        .and_then(|m| parse_mode(m, "gate.default", p))
        .unwrap_or(Mode::Shadow);
    let mut modes = [default; RouteKind::ALL.len()];
    let routes = s.section("routes", p);
    for (name, value) in routes.entries() {
        let path = format!("gate.routes.{name}");
        let Some(route) = RouteKind::from_name(&name) else {
            let names: Vec<_> = RouteKind::ALL.iter().map(|r| r.name()).collect();
            p.add(
                &path,
                format!("unknown route (expected one of {})", names.join(", ")),
            );
            continue;
        };
        match value.as_str() {
            Some(m) => {
                if let Some(mode) = parse_mode(m, &path, p) {
                    modes[RouteKind::ALL.iter().position(|r| *r == route).unwrap_or(0)] = mode;
                }
            }
            None => p.add(
                &path,
                format!("expected a string, found {}", value.type_str()),
            ),
        }
    }
    routes.finish_free(p);
    let on_unclassifiable = match s.str("on_unclassifiable", p) {
        None | Some("reject") => OnUnclassifiable::Reject,
        Some("forward") => OnUnclassifiable::Forward,
        Some(other) => {
            p.add(
                "gate.on_unclassifiable",
                format!("\"{other}\" is not one of \"reject\", \"forward\""),
            );
            OnUnclassifiable::Reject
        }
    };
    s.finish(p);
    Gate {
        modes,
        on_unclassifiable,
    }
}

/// `[vllm] root_path`: the upstream's `--root-path` as given to it ([`RootPath::parse`]).
fn root_path(s: &mut Section<'_>, p: &mut Problems) -> RootPath {
    let root = s.str("root_path", p).map(RootPath::parse);
    root.unwrap_or(Ok(RootPath::default())).unwrap_or_else(|e| {
        p.add("vllm.root_path", e);
        RootPath::default()
    })
}

fn reload(mut s: Section<'_>, p: &mut Problems) -> Reload {
    let watch = s.bool("watch", p).unwrap_or(true);
    let interval = ms(&mut s, "interval_ms", 2_000, p);
    s.finish(p);
    Reload {
        watch: watch.then_some(interval),
    }
}

fn log_policy(mut s: Section<'_>, p: &mut Problems) -> LogPolicy {
    let on = s.bool("kwargs_values", p).unwrap_or(false);
    let max = s.positive("max_value_len", 255, p).unwrap_or(64) as usize;
    s.finish(p);
    LogPolicy {
        kwargs_values: on.then_some(max),
    }
}

fn parse_mode(m: &str, path: &str, p: &mut Problems) -> Option<Mode> {
    let mode = match m {
        "pass" => Mode::Pass,
        "shadow" => Mode::Shadow,
        "strip" => Mode::Strip,
        "reject" => Mode::Reject,
        other => {
            p.add(
                path,
                format!("\"{other}\" is not one of \"pass\", \"shadow\", \"strip\", \"reject\""),
            );
            return None;
        }
    };
    Some(mode)
}

fn addr_or(s: &mut Section<'_>, key: &'static str, default: &str, p: &mut Problems) -> SocketAddr {
    let fallback: SocketAddr = default
        .parse()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
    match s.str(key, p) {
        None => fallback,
        Some(v) => v.parse().unwrap_or_else(|_| {
            p.add(
                &format!("{}.{key}", s.path()),
                format!("\"{v}\" is not an address like \"127.0.0.1:8080\""),
            );
            fallback
        }),
    }
}

fn ms(s: &mut Section<'_>, key: &'static str, default: u64, p: &mut Problems) -> Duration {
    Duration::from_millis(s.positive(key, 86_400_000, p).unwrap_or(default))
}

fn upstream_url(u: &str, path: &str, p: &mut Problems) -> Option<Uri> {
    let at = format!("{path}.url");
    let uri: Uri = match u.parse() {
        Ok(uri) => uri,
        Err(e) => {
            p.add(&at, format!("\"{u}\" is not a URL: {e}"));
            return None;
        }
    };
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        p.add(
            &at,
            format!("\"{u}\" must be an http:// or https:// URL with a host"),
        );
        return None;
    }
    if uri.path() != "/" && !uri.path().is_empty() {
        p.add(
            &at,
            format!("\"{u}\" must not have a path (requests keep their own path)"),
        );
        return None;
    }
    Some(uri)
}

#[cfg(test)]
mod tests;
