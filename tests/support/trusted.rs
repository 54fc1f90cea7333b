//! The trusted-client test setup shared by tests/trusted.rs and tests/trusted_limits.rs: a
//! policy with two pools (default, trusted), three keyed clients and a header-identified
//! group, started against two fake upstreams.

use mmgate::config::digest;
use mmgate::limits::RateClock;

use super::*;

pub const CHAT: &str = "/v1/chat/completions";
pub const VISION_KEY: &str = "sk-vision-secret";
pub const STRIP_KEY: &str = "sk-legacy-app";
pub const REJECT_KEY: &str = "sk-untrusted-batch";

pub fn body(kwargs: &str) -> String {
    let extra = if kwargs.is_empty() {
        String::new()
    } else {
        format!(",{kwargs}")
    };
    format!(r#"{{"model":"tiny","messages":[{{"role":"user","content":"hi"}}]{extra}}}"#)
}

pub const KWARGS: &str = r#""mm_processor_kwargs":{"max_pixels":1003520}"#;

/// Two pools, three keyed clients and a header-identified group; `pool_extra` adds lines
/// to the trusted pool, `vision_extra` to the trusted client `vision`.
pub fn policy(unknown: &str, networks: &str, pool_extra: &str, vision_extra: &str) -> String {
    let hash = |k: &str| hex::encode(digest(k));
    format!(
        r#"
[gate]
default = "strip"
[pools.default]
members = ["{{DEFAULT}}"]
health_interval_ms = 3600000
[pools.trusted]
members = ["{{TRUSTED}}"]
trusted = true
health_interval_ms = 3600000
{pool_extra}
[pools.trusted.allow.mm_processor_kwargs]
max_pixels = {{ max = 1003520 }}
do_resize = {{ one_of = [true] }}
[pools.trusted.allow.media_io_kwargs.video]
num_frames = {{ max = 32 }}
fps = {{ max = 2 }}
[identity]
unknown = "{unknown}"
api_key_header = "x-api-key"
client_header = "x-client-id"
trusted_networks = [{networks}]
[clients.vision]
key_sha256 = ["{}"]
trusted = true
mode = "route"
route_to = "trusted"
{vision_extra}
[clients.legacy]
key_sha256 = ["{}"]
mode = "strip"
[clients.batch]
key_sha256 = ["{}"]
mode = "reject"
[clients.partners]
header_ids = ["partner-a", "partner-b"]
trusted = true
mode = "route"
route_to = "trusted"
"#,
        hash(VISION_KEY),
        hash(STRIP_KEY),
        hash(REJECT_KEY)
    )
}

pub struct Setup {
    pub gw: mmgate::server::Running,
    pub default: FakeVllm,
    pub trusted: FakeVllm,
}

pub async fn setup_with(policy: &str, trusted_opts: FakeOpts, clock: Option<RateClock>) -> Setup {
    let default = FakeVllm::start().await;
    let trusted = FakeVllm::start_with(trusted_opts).await;
    let gw = gateway_with(
        policy,
        &[("DEFAULT", default.url()), ("TRUSTED", trusted.url())],
        clock,
    )
    .await;
    Setup {
        gw,
        default,
        trusted,
    }
}

pub async fn setup(policy: &str) -> Setup {
    setup_with(policy, FakeOpts::default(), None).await
}

pub fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

pub async fn chat(c: &TestClient, s: &Setup, headers: &[(&str, &str)], kwargs: &str) -> Reply {
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    send(c, s.gw.addr, "POST", CHAT, &h, body(kwargs)).await
}

pub fn message(r: &Reply) -> String {
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Two fresh fake upstreams as pools `default` and `trusted` (no health checks), `[gate]
/// default = gate`, and one trusted client `vision` known by `key` in `x-api-key`.
/// `trusted_pool` is appended to the trusted pool's table (e.g. its `allow` rules) and
/// `client` to the client's (its `mode`, `pool`, `route_to`).
pub async fn keyed_two_pools(
    gate: &str,
    key: &str,
    trusted_pool: &str,
    client: &str,
) -> (FakeVllm, FakeVllm, mmgate::server::Running) {
    let policy = format!(
        r#"
[gate]
default = "{gate}"
[pools.default]
members = ["{{DEFAULT}}"]
health_check = false
[pools.trusted]
members = ["{{TRUSTED}}"]
trusted = true
health_check = false
{trusted_pool}
[identity]
api_key_header = "x-api-key"
[clients.vision]
key_sha256 = ["{}"]
trusted = true
{client}
"#,
        hex::encode(digest(key))
    );
    let (default, trusted) = (FakeVllm::start().await, FakeVllm::start().await);
    let gw = gateway_with(
        &policy,
        &[("DEFAULT", default.url()), ("TRUSTED", trusted.url())],
        None,
    )
    .await;
    (default, trusted, gw)
}
