//! `[identity]` and `[clients.*]` → validated [`Identity`] and [`ClientConfig`]s.
//!
//! Keys are stored as SHA-256 digests only: a policy lists digests (`key_sha256`, printed by
//! `mmgate hash-key`), or names a file or environment variable holding the key, which is
//! hashed at load and never kept. A client may reach a trusted pool only if it is marked
//! `trusted`; that is checked here, so an invalid policy never starts.

use std::num::NonZeroU32;

use http::HeaderName;
use ipnet::IpNet;
use sha2::{Digest, Sha256};

use super::file::{Problems, Section};
use super::pools::{PoolConfig, PoolId};
use super::watched::Watched;
use crate::decide::Mode;

/// A SHA-256 digest of an API key.
pub type KeyDigest = [u8; 32];

/// The SHA-256 digest of a key.
pub fn digest(key: &str) -> KeyDigest {
    Sha256::digest(key.trim().as_bytes()).into()
}

/// What happens to a request with missing or unknown credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// Served as the `anonymous` client (the `[gate]` modes, the default pool).
    Anonymous,
    /// 401 in the OpenAI envelope.
    Reject,
}

/// How clients are identified.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Missing or unknown credentials.
    pub unknown: Unknown,
    /// An extra header carrying the API key (besides `Authorization: Bearer`).
    pub api_key_header: Option<HeaderName>,
    /// A header set by a trusted auth proxy naming the client.
    pub client_header: Option<HeaderName>,
    /// Source networks the client header is honoured from.
    pub trusted_networks: Vec<IpNet>,
}

/// A per-client request rate (governor: `per_second` sustained, `burst` at once).
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// Requests per second.
    pub per_second: NonZeroU32,
    /// Requests allowed at once.
    pub burst: NonZeroU32,
}

/// One client (or group of clients) named in the policy.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The policy name: the client id in logs and the metrics label.
    pub name: String,
    /// Digests of its API keys.
    pub keys: Vec<KeyDigest>,
    /// Values of the trusted client header that identify it.
    pub header_ids: Vec<String>,
    /// Certificate subject CNs / SANs that identify it (mTLS).
    pub certificate_names: Vec<String>,
    /// May reach trusted pools.
    pub trusted: bool,
    /// Its mode on every gated route (`None`: the `[gate]` modes).
    pub mode: Option<Mode>,
    /// The pool its requests go to unless routed.
    pub pool: PoolId,
    /// Requests in flight for this client (`None`: unbounded).
    pub max_concurrency: Option<NonZeroU32>,
    /// Request rate limit.
    pub rate: Option<Rate>,
}

pub(super) fn identity(mut s: Section<'_>, p: &mut Problems) -> Identity {
    let unknown = match s.str("unknown", p) {
        None | Some("anonymous") => Unknown::Anonymous,
        Some("reject") => Unknown::Reject,
        Some(other) => {
            p.add(
                "identity.unknown",
                format!("\"{other}\" is not one of \"anonymous\", \"reject\""),
            );
            Unknown::Anonymous
        }
    };
    let mut header = |key: &'static str, p: &mut Problems| {
        let v = s.str(key, p)?;
        HeaderName::from_bytes(v.as_bytes())
            .map_err(|_| {
                p.add(
                    &format!("identity.{key}"),
                    format!("\"{v}\" is not a header name"),
                )
            })
            .ok()
    };
    let api_key_header = header("api_key_header", p);
    let client_header = header("client_header", p);
    let mut trusted_networks = Vec::new();
    for (i, net) in s
        .strings("trusted_networks", p)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        match net
            .parse::<IpNet>()
            .or_else(|_| net.parse::<std::net::IpAddr>().map(IpNet::from))
        {
            // An IPv4-mapped network is its IPv4 network: sources are matched canonically.
            Ok(IpNet::V6(v6)) if v6.prefix_len() >= 96 && v6.addr().to_ipv4_mapped().is_some() => {
                let v4 = v6.addr().to_ipv4_mapped().expect("checked");
                let n = ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).expect("at most 32");
                trusted_networks.push(IpNet::V4(n.trunc()))
            }
            Ok(n) => trusted_networks.push(n.trunc()),
            Err(_) => p.add(
                &format!("identity.trusted_networks[{i}]"),
                format!("\"{net}\" is not a CIDR like \"10.0.0.0/8\""),
            ),
        }
    }
    // Authorization is vLLM's own (`--api-key`) and already read as `Bearer KEY`; one header
    // cannot be both a key and a client name.
    for (key, h) in [
        ("api_key_header", &api_key_header),
        ("client_header", &client_header),
    ] {
        if h.as_ref() == Some(&http::header::AUTHORIZATION) {
            p.add(
                &format!("identity.{key}"),
                "Authorization is already read for `Bearer KEY` (and left to vLLM's --api-key when a key header is sent): name another header",
            );
        }
    }
    if api_key_header.is_some() && api_key_header == client_header {
        p.add(
            "identity.client_header",
            "the same header as api_key_header: one header cannot carry both a key and a client id",
        );
    }
    if client_header.is_some() && trusted_networks.is_empty() {
        p.add(
            "identity.trusted_networks",
            "required with client_header (the auth proxies' networks)",
        );
    }
    s.finish(p);
    Identity {
        unknown,
        api_key_header,
        client_header,
        trusted_networks,
    }
}

/// Reads `[clients.*]`; `certificates`: the TLS listener asks clients for a certificate.
/// Key files are added to `watched`.
pub(super) fn clients(
    s: Section<'_>,
    identity: &Identity,
    pools: &[PoolConfig],
    certificates: bool,
    watched: &mut Watched,
    p: &mut Problems,
) -> Vec<ClientConfig> {
    let mut out: Vec<ClientConfig> = Vec::new();
    for (name, c) in s.named(p) {
        if name == crate::identify::ANONYMOUS {
            p.add(
                c.path(),
                "\"anonymous\" is reserved for clients without credentials",
            );
            continue;
        }
        let client = client(name, c, identity, pools, certificates, watched, p);
        // A credential identifies one client: none may be shared.
        fn shares<T: PartialEq>(a: &[T], b: &[T]) -> bool {
            a.iter().any(|x| b.contains(x))
        }
        for earlier in &out {
            for (shared, path, what) in [
                (shares(&earlier.keys, &client.keys), "", "an API key"),
                (
                    shares(&earlier.header_ids, &client.header_ids),
                    ".header_ids",
                    "an id",
                ),
                (
                    shares(&earlier.certificate_names, &client.certificate_names),
                    ".certificate_names",
                    "a name",
                ),
            ] {
                if shared {
                    p.add(
                        &format!("clients.{}{path}", client.name),
                        format!("shares {what} with clients.{}", earlier.name),
                    );
                }
            }
        }
        out.push(client);
    }
    s.finish_free(p);
    out
}

/// The key digests a section lists under `names`: hex digests (`key_sha256`), a file holding
/// one key (`key_file`) and an environment variable holding one (`key_env`); and the keys
/// read from the file and the variable (trimmed), which a caller that only checks keys drops
/// at once.
pub(super) fn key_digests(
    c: &mut Section<'_>,
    names: [&'static str; 3],
    watched: &mut Watched,
    p: &mut Problems,
) -> (Vec<KeyDigest>, Vec<String>) {
    let path = c.path().to_string();
    let mut keys = Vec::new();
    let mut secrets = Vec::new();
    let [sha256, file_key, env_key] = names;
    for (i, hex_digest) in c.strings(sha256, p).unwrap_or_default().iter().enumerate() {
        match hex::decode(hex_digest.trim())
            .ok()
            .and_then(|b| KeyDigest::try_from(b).ok())
        {
            Some(d) => keys.push(d),
            None => p.add(
                &format!("{path}.{sha256}[{i}]"),
                "not a SHA-256 hex digest (64 hex digits; see `mmgate hash-key`)",
            ),
        }
    }
    if let Some(file) = c.str(file_key, p) {
        watched.add(file);
        match std::fs::read_to_string(file) {
            Ok(k) if !k.trim().is_empty() => {
                keys.push(digest(&k));
                secrets.push(k.trim().to_string());
            }
            Ok(_) => p.add(&format!("{path}.{file_key}"), format!("{file} is empty")),
            Err(e) => p.add(
                &format!("{path}.{file_key}"),
                format!("cannot read {file}: {e}"),
            ),
        }
    }
    if let Some(var) = c.str(env_key, p) {
        match std::env::var(var) {
            Ok(k) if !k.trim().is_empty() => {
                keys.push(digest(&k));
                secrets.push(k.trim().to_string());
            }
            _ => p.add(
                &format!("{path}.{env_key}"),
                format!("environment variable {var} is not set or empty"),
            ),
        }
    }
    (keys, secrets)
}

fn client(
    name: String,
    mut c: Section<'_>,
    identity: &Identity,
    pools: &[PoolConfig],
    certificates: bool,
    watched: &mut Watched,
    p: &mut Problems,
) -> ClientConfig {
    let path = c.path().to_string();
    // A client's keys are only checked: the keys themselves are dropped here.
    let (keys, _) = key_digests(&mut c, ["key_sha256", "key_file", "key_env"], watched, p);
    let header_ids = c.strings("header_ids", p).unwrap_or_default();
    if !header_ids.is_empty() && identity.client_header.is_none() {
        p.add(
            &format!("{path}.header_ids"),
            "needs identity.client_header",
        );
    }
    let certificate_names = c.strings("certificate_names", p).unwrap_or_default();
    if !certificate_names.is_empty() && !certificates {
        p.add(
            &format!("{path}.certificate_names"),
            "needs [tls] with client_auth = \"optional\" or \"required\" (no certificate is asked for otherwise)",
        );
    }
    for (key, names) in [
        ("header_ids", &header_ids),
        ("certificate_names", &certificate_names),
    ] {
        if let Some(i) = names.iter().position(|n| n.trim().is_empty()) {
            p.add(
                &format!("{path}.{key}[{i}]"),
                "empty: it would name no one, or anyone",
            );
        }
    }
    if keys.is_empty() && header_ids.is_empty() && certificate_names.is_empty() {
        p.add(
            &path,
            "no identity (key_sha256, key_file, key_env, header_ids or certificate_names)",
        );
    }
    let trusted = c.bool("trusted", p).unwrap_or(false);
    let pool_ref = |key: &'static str, c: &mut Section<'_>, p: &mut Problems| -> Option<PoolId> {
        let name = c.str(key, p)?;
        let Some(id) = pools.iter().position(|pl| pl.name == name) else {
            p.add(
                &format!("{path}.{key}"),
                format!("no pool named \"{name}\""),
            );
            return None;
        };
        if pools[id].trusted && !trusted {
            p.add(
                &format!("{path}.{key}"),
                format!("pool \"{name}\" is trusted; only a client with trusted = true may use it"),
            );
            return None;
        }
        Some(id)
    };
    let pool = pool_ref("pool", &mut c, p).unwrap_or(0);
    let route_to = pool_ref("route_to", &mut c, p);
    let mode = c.str("mode", p).and_then(|m| match m {
        "route" => {
            if !trusted {
                p.add(
                    &format!("{path}.mode"),
                    "\"route\" sends offending requests to a trusted pool: needs trusted = true",
                );
            }
            match route_to {
                None => p.add(
                    &format!("{path}.route_to"),
                    "required with mode = \"route\" (the trusted pool)",
                ),
                Some(id) if !pools[id].trusted => p.add(
                    &format!("{path}.route_to"),
                    format!("pool \"{}\" is not trusted", pools[id].name),
                ),
                Some(_) => {}
            }
            route_to.map(Mode::Route)
        }
        other => super::parse_mode(other, &format!("{path}.mode"), p),
    });
    if route_to.is_some() && !matches!(mode, Some(Mode::Route(_))) {
        p.add(
            &format!("{path}.route_to"),
            "only used with mode = \"route\"",
        );
    }
    let max_concurrency = c
        .positive("max_concurrency", 1_000_000, p)
        .and_then(|n| NonZeroU32::new(n as u32));
    let per_second = c.positive("rate_per_second", 1_000_000, p);
    let burst = c.positive("burst", 1_000_000, p);
    let rate = per_second.and_then(|r| {
        Some(Rate {
            per_second: NonZeroU32::new(r as u32)?,
            burst: NonZeroU32::new(burst.unwrap_or(r) as u32)?,
        })
    });
    if burst.is_some() && per_second.is_none() {
        p.add(&format!("{path}.burst"), "needs rate_per_second");
    }
    c.finish(p);
    ClientConfig {
        name,
        keys,
        header_ids,
        certificate_names,
        trusted,
        mode,
        pool,
        max_concurrency,
        rate,
    }
}
