//! The `[pools.*]` tables (and the `[upstream]` shorthand for pool `default`) → validated
//! [`PoolConfig`]s, including the value limits a trusted pool puts on the kwargs.

use std::num::NonZeroU32;
use std::time::Duration;

use super::file::{Problems, Section};
use super::watched::Watched;
use super::{ms, upstream_url, Upstream};

/// Index of a pool in [`super::Config::pools`]; `0` is always `default`.
pub type PoolId = usize;

/// How a pool spreads requests over its healthy members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// Each member in turn.
    RoundRobin,
    /// The member with the fewest requests in flight.
    LeastInFlight,
}

/// Active health checks of the members' `/health`.
#[derive(Debug, Clone, Copy)]
pub struct HealthCheck {
    /// Time between checks.
    pub interval: Duration,
    /// Deadline of one check.
    pub timeout: Duration,
}

/// The bound on one key: a number within `min <= value <= max`, or one of listed values;
/// no bound means any value.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRule {
    /// The key inside the field (or modality).
    pub key: String,
    /// Smallest allowed value.
    pub min: Option<f64>,
    /// Largest allowed value.
    pub max: Option<f64>,
    /// The values allowed (`one_of`), compared with their JSON type; empty: not listed.
    pub one_of: Vec<Scalar>,
}

/// A value a key may be held to (`one_of`).
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `true` / `false`.
    Bool(bool),
    /// A number.
    Number(f64),
    /// A string.
    Text(String),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Number(n) => write!(f, "{n}"),
            Scalar::Text(t) => write!(f, "{t:?}"),
        }
    }
}

/// The longest string `one_of` may list: a kwarg's string is kept up to
/// [`MAX_VALUE_TEXT`](crate::inspect::values::MAX_VALUE_TEXT) bytes (cut on a character
/// boundary), so a longer one could not be told apart from a value it is a prefix of.
const MAX_ONE_OF_TEXT: usize = crate::inspect::values::MAX_VALUE_TEXT / 2;

/// The keys a pool accepts inside the gated fields, with their bounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValueRules {
    /// Keys not listed are allowed (otherwise a 400 names them).
    pub allow_unknown_keys: bool,
    /// Rules for `mm_processor_kwargs` keys.
    pub mm_processor_kwargs: Vec<KeyRule>,
    /// Rules per `media_io_kwargs` modality (`image`, `video`, `audio`, …).
    pub media_io_kwargs: Vec<(String, Vec<KeyRule>)>,
}

impl ValueRules {
    /// Whether the pool checks kwarg values at all (every trusted pool does).
    pub fn active(&self, trusted: bool) -> bool {
        trusted
            || !self.mm_processor_kwargs.is_empty()
            || !self.media_io_kwargs.is_empty()
            || self.allow_unknown_keys
    }
}

/// One named pool of upstream vLLM servers.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The pool's name (a metrics label; from the policy, so bounded).
    pub name: String,
    /// Its members.
    pub members: Vec<Upstream>,
    /// Member selection.
    pub balance: Balance,
    /// Members run `--trust-request-mm-kwargs`: only trusted clients may reach it.
    pub trusted: bool,
    /// Active health checks (`None`: members are always tried).
    pub health: Option<HealthCheck>,
    /// Requests in flight in the whole pool (`None`: unbounded).
    pub max_concurrency: Option<NonZeroU32>,
    /// Requests allowed to wait for a permit.
    pub max_queue: usize,
    /// How long a request waits for a permit.
    pub queue_timeout: Duration,
    /// Largest gated body the pool accepts.
    pub max_body_bytes: usize,
    /// Value limits on the kwargs.
    pub values: ValueRules,
}

/// Reads `[upstream]` (pool `default`, one member) and `[pools.*]`.
pub(super) fn pools(
    root: &mut Section<'_>,
    body_limit: usize,
    watched: &mut Watched,
    p: &mut Problems,
) -> Vec<PoolConfig> {
    let mut up = root.section("upstream", p);
    let tables = root.section("pools", p);
    let mut out = Vec::new();
    let shorthand = up.present();
    if shorthand {
        let url = match up.str("url", p) {
            Some(u) => upstream_url(u, up.path(), p),
            None => {
                p.add(
                    "upstream.url",
                    "missing (the vLLM base URL, e.g. \"http://127.0.0.1:8000\")",
                );
                None
            }
        };
        let member = timeouts(&mut up, url, watched, p);
        out.push(PoolConfig {
            name: "default".into(),
            members: member.into_iter().collect(),
            balance: Balance::RoundRobin,
            trusted: false,
            health: None,
            max_concurrency: None,
            max_queue: 0,
            queue_timeout: Duration::from_secs(1),
            max_body_bytes: body_limit,
            values: ValueRules::default(),
        });
    }
    up.finish(p);
    for (name, s) in tables.named(p) {
        if name == "default" && shorthand {
            p.add(
                "pools.default",
                "defined twice: [upstream] is already pool \"default\"",
            );
            continue;
        }
        out.extend(pool(name, s, body_limit, watched, p));
    }
    tables.finish_free(p);
    match out.iter().position(|pool| pool.name == "default") {
        Some(i) => out.swap(0, i),
        None if p.found.is_empty() => p.add(
            "upstream.url",
            "missing (the vLLM base URL, e.g. \"http://127.0.0.1:8000\"), or define [pools.default]",
        ),
        None => {}
    }
    if out.first().is_some_and(|d| d.trusted) {
        p.add(
            "pools.default.trusted",
            "the default pool serves anonymous and untrusted clients, so it cannot be trusted",
        );
    }
    shared_with_trusted(&out, shorthand, p);
    out
}

/// An untrusted pool must not list a server of a trusted pool: every client it serves would
/// reach a deployment started with `--trust-request-mm-kwargs` unchecked. `shorthand`: pool
/// `default` is `[upstream]`.
fn shared_with_trusted(pools: &[PoolConfig], shorthand: bool, p: &mut Problems) {
    for open in pools.iter().filter(|pool| !pool.trusted) {
        for (i, member) in open.members.iter().enumerate() {
            let at = server(&member.url);
            let Some(trusted) = pools
                .iter()
                .find(|t| t.trusted && t.members.iter().any(|m| server(&m.url) == at))
            else {
                continue;
            };
            let path = match open.name.as_str() {
                "default" if shorthand => "upstream.url".to_string(),
                name => format!("pools.{name}.members[{i}]"),
            };
            p.add(
                &path,
                format!(
                    "{} is also a member of trusted pool \"{}\": an untrusted pool must not reach a server started with --trust-request-mm-kwargs",
                    member.url, trusted.name
                ),
            );
        }
    }
}

/// Scheme, host (case-folded) and port (the scheme's default when none is written) of a
/// member's URL: two spellings of one server compare equal.
fn server(url: &http::Uri) -> (String, String, u16) {
    let scheme = url.scheme_str().unwrap_or("http").to_ascii_lowercase();
    let host = url.host().unwrap_or("").to_ascii_lowercase();
    let port = url
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    (scheme, host, port)
}

/// The member settings of `[upstream]` or a pool: timeouts, and TLS when `url` (the pool's
/// first `https://` member, if any) needs it.
fn timeouts(
    s: &mut Section<'_>,
    url: Option<http::Uri>,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<Upstream> {
    let connect_timeout = ms(s, "connect_timeout_ms", 2_000, p);
    let response_timeout = ms(s, "response_timeout_ms", 600_000, p);
    // Below uvicorn's 5 s keep-alive: vLLM closes idle connections first otherwise, and a
    // request written as it does so fails.
    let idle_timeout = ms(s, "idle_timeout_ms", 4_000, p);
    let ca = s.str("tls_ca", p);
    let cert = s.str("tls_cert", p);
    let key = s.str("tls_key", p);
    let https = url
        .as_ref()
        .is_some_and(|u| u.scheme_str() == Some("https"));
    let path = s.path().to_string();
    let tls = match (https, ca.or(cert).or(key)) {
        (true, _) => Some(super::tls::upstream(&path, ca, cert, key, watched, p)?),
        (false, Some(_)) => {
            p.add(
                &path,
                "tls_ca / tls_cert / tls_key set, but no member is https://",
            );
            None
        }
        (false, None) => None,
    };
    url.map(|url| Upstream {
        url,
        connect_timeout,
        response_timeout,
        idle_timeout,
        tls,
    })
}

fn pool(
    name: String,
    mut s: Section<'_>,
    body_limit: usize,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<PoolConfig> {
    let path = s.path().to_string();
    let urls = s.strings("members", p).unwrap_or_else(|| {
        p.add(
            &format!("{path}.members"),
            "missing (a list of vLLM base URLs)",
        );
        Vec::new()
    });
    if urls.is_empty() {
        p.add(
            &format!("{path}.members"),
            "a pool needs at least one member",
        );
    }
    let parsed: Vec<_> = urls
        .iter()
        .enumerate()
        .map(|(i, u)| upstream_url(u, &format!("{path}.members[{i}]"), p))
        .collect();
    let first_https = parsed
        .iter()
        .flatten()
        .find(|u| u.scheme_str() == Some("https"));
    let template_url = first_https
        .cloned()
        .unwrap_or(http::Uri::from_static("http://127.0.0.1"));
    let template = timeouts(&mut s, Some(template_url), watched, p);
    let members = parsed
        .into_iter()
        .flatten()
        .filter_map(|url| template.clone().map(|t| Upstream { url, ..t }))
        .collect();
    let balance = match s.str("balance", p) {
        None | Some("round_robin") => Balance::RoundRobin,
        Some("least_in_flight") => Balance::LeastInFlight,
        Some(other) => {
            p.add(
                &format!("{path}.balance"),
                format!("\"{other}\" is not one of \"round_robin\", \"least_in_flight\""),
            );
            Balance::RoundRobin
        }
    };
    let trusted = s.bool("trusted", p).unwrap_or(false);
    let checks = s.bool("health_check", p).unwrap_or(true);
    let health = HealthCheck {
        interval: ms(&mut s, "health_interval_ms", 5_000, p),
        timeout: ms(&mut s, "health_timeout_ms", 2_000, p),
    };
    let max_concurrency = s
        .positive("max_concurrency", 1_000_000, p)
        .and_then(|n| NonZeroU32::new(n as u32));
    let max_queue = s.count("max_queue", 1_000_000, p).unwrap_or(0) as usize;
    let queue_timeout = ms(&mut s, "queue_timeout_ms", 1_000, p);
    let max_body_bytes = s
        .positive("max_body_bytes", 1 << 34, p)
        .map_or(body_limit, |n| n as usize);
    let allow_unknown_keys = s.bool("allow_unknown_keys", p).unwrap_or(false);
    let allow = s.section("allow", p);
    let values = rules(allow, allow_unknown_keys, p);
    s.finish(p);
    Some(PoolConfig {
        name,
        members,
        balance,
        trusted,
        health: checks.then_some(health),
        max_concurrency,
        max_queue,
        queue_timeout,
        max_body_bytes,
        values,
    })
}

/// `[pools.X.allow.mm_processor_kwargs]` and `[pools.X.allow.media_io_kwargs.<modality>]`.
fn rules(mut allow: Section<'_>, allow_unknown_keys: bool, p: &mut Problems) -> ValueRules {
    let mm = allow.section("mm_processor_kwargs", p);
    let mm_processor_kwargs = key_rules(&mm, p);
    mm.finish_free(p);
    let io = allow.section("media_io_kwargs", p);
    let media_io_kwargs = io
        .named(p)
        .into_iter()
        .map(|(modality, s)| {
            let rules = key_rules(&s, p);
            s.finish_free(p);
            (modality, rules)
        })
        .collect();
    io.finish_free(p);
    allow.finish(p);
    ValueRules {
        allow_unknown_keys,
        mm_processor_kwargs,
        media_io_kwargs,
    }
}

fn key_rules(s: &Section<'_>, p: &mut Problems) -> Vec<KeyRule> {
    let mut out = Vec::new();
    for (key, mut bound) in s.named(p) {
        let min = bound.number("min", p);
        let max = bound.number("max", p);
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo > hi {
                p.add(bound.path(), format!("min {lo} is greater than max {hi}"));
            }
        }
        let one_of = bound.scalars("one_of", p);
        match &one_of {
            Some(list) if list.is_empty() => p.add(bound.path(), "one_of lists no value"),
            Some(_) if min.is_some() || max.is_some() => p.add(
                bound.path(),
                "one_of with min or max: give one or the other",
            ),
            Some(list) => {
                let unreadable = |t: &str| t.len() > MAX_ONE_OF_TEXT || t.contains('\u{FFFD}');
                if list
                    .iter()
                    .any(|v| matches!(v, Scalar::Text(t) if unreadable(t)))
                {
                    p.add(
                        bound.path(),
                        format!(
                            "one_of strings are at most {MAX_ONE_OF_TEXT} bytes, without U+FFFD"
                        ),
                    );
                }
            }
            None => {}
        }
        bound.finish(p);
        let one_of = one_of.unwrap_or_default();
        out.push(KeyRule {
            key,
            min,
            max,
            one_of,
        });
    }
    out
}
