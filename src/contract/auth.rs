//! vLLM's own `--api-key` check (`AuthenticationMiddleware`), which runs before anything
//! else: on a path under `/v1`, `/v2`, `/inference` or `/cohere` (percent-decoded, as
//! Starlette sees it, and with vLLM's `--root-path` taken off its front), any method but
//! OPTIONS, a request is answered
//! `401 {"error":"Unauthorized"}` unless its first `Authorization` field is `Bearer KEY`
//! (the scheme in any case, one space, then the key as sent) for one of the server's keys.
//!
//! Keys are compared as vLLM compares them: SHA-256 digests, in constant time. The field's
//! bytes are read as Latin-1 and the key hashed as UTF-8 (Starlette, then vLLM): a non-ASCII
//! key matches when sent as Latin-1 bytes, not when sent as its UTF-8 bytes, as on the real
//! server.

use http::{header, HeaderMap, Method};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::classify::{decoded_path, RootPath};
use crate::config::KeyDigest;

/// vLLM's body for a request its `--api-key` check refuses.
pub const UNAUTHORIZED_BODY: &str = r#"{"error":"Unauthorized"}"#;

/// The path prefixes vLLM's check guards (`GUARDED_PREFIX`).
const GUARDED: [&[u8]; 4] = [b"/v1", b"/v2", b"/inference", b"/cohere"];

/// The upstream's API keys, as digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeys {
    digests: Vec<KeyDigest>,
}

impl ApiKeys {
    /// The keys whose SHA-256 digests these are.
    pub fn new(digests: Vec<KeyDigest>) -> Self {
        ApiKeys { digests }
    }

    /// Whether vLLM lets the request past its key check (`false`: it answers 401).
    pub fn admits(
        &self,
        method: &Method,
        path_and_query: &str,
        root: &RootPath,
        headers: &HeaderMap,
    ) -> bool {
        if method == Method::OPTIONS || !guarded(path_and_query, root) {
            return true;
        }
        let Some(presented) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| bearer_digest(v.as_bytes()))
        else {
            return false;
        };
        let mut hit = subtle::Choice::from(0u8);
        for d in &self.digests {
            hit |= d.ct_eq(&presented);
        }
        bool::from(hit)
    }
}

/// Whether the path (its query left out, percent-decoded, the root path taken off) starts
/// with a guarded prefix.
fn guarded(path_and_query: &str, root: &RootPath) -> bool {
    let decoded = decoded_path(path_and_query);
    let path = root.strip(&decoded);
    GUARDED.iter().any(|p| path.starts_with(p))
}

/// The digest of the key in an `Authorization` value, if it names the Bearer scheme: the
/// value (without surrounding whitespace, which the HTTP server drops) is split at its
/// first space, and the rest, as sent, is the key.
fn bearer_digest(value: &[u8]) -> Option<KeyDigest> {
    let value = value.trim_ascii();
    if value.is_empty() {
        return None;
    }
    let (scheme, key) = match value.iter().position(|&b| b == b' ') {
        Some(i) => (&value[..i], &value[i + 1..]),
        None => (value, &[][..]),
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    // Latin-1 to UTF-8: each byte is a code point.
    let mut hasher = Sha256::new();
    for &b in key {
        match b {
            0..=0x7f => hasher.update([b]),
            _ => hasher.update([0xc0 | (b >> 6), 0x80 | (b & 0x3f)]),
        }
    }
    Some(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn keys(k: &[&str]) -> ApiKeys {
        ApiKeys::new(
            k.iter()
                .map(|k| Sha256::digest(k.as_bytes()).into())
                .collect(),
        )
    }

    fn admits(keys: &ApiKeys, path: &str, auth: &[&[u8]]) -> bool {
        admits_under(keys, "", path, auth)
    }

    fn admits_under(keys: &ApiKeys, root: &str, path: &str, auth: &[&[u8]]) -> bool {
        let mut h = HeaderMap::new();
        for a in auth {
            h.append(header::AUTHORIZATION, HeaderValue::from_bytes(a).unwrap());
        }
        keys.admits(&Method::POST, path, &RootPath::new(root), &h)
    }

    #[test]
    fn guarded_paths_need_one_of_the_keys() {
        let k = keys(&["sk-one", "sk-two"]);
        for path in [
            "/v1/chat/completions",
            "/v2/rerank",
            "/v1/score?x=1",
            "/%761/completions",
        ] {
            assert!(!admits(&k, path, &[]), "{path}");
            assert!(!admits(&k, path, &[b"Bearer sk-three"]), "{path}");
            assert!(admits(&k, path, &[b"Bearer sk-one"]), "{path}");
            assert!(admits(&k, path, &[b"Bearer sk-two"]), "{path}");
        }
        for path in [
            "/tokenize",
            "/score",
            "/rerank",
            "/pooling",
            "/classify",
            "/invocations",
        ] {
            assert!(admits(&k, path, &[]), "{path}");
        }
        let mut h = HeaderMap::new();
        let none = RootPath::default();
        assert!(k.admits(&Method::OPTIONS, "/v1/chat/completions", &none, &h));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        assert!(!k.admits(&Method::GET, "/v1/models", &none, &h));
    }

    #[test]
    fn the_root_path_is_taken_off_first() {
        // Checked against a render server started with `--root-path /api --api-key`.
        let k = keys(&["sk-one"]);
        for path in [
            "/api/v1/chat/completions",
            "/%61pi/v1/chat/completions",
            "/v1/chat/completions",
        ] {
            assert!(!admits_under(&k, "/api", path, &[]), "{path}");
            assert!(
                admits_under(&k, "/api", path, &[b"Bearer sk-one"]),
                "{path}"
            );
        }
        // `removeprefix`: what follows the root path need not start with `/`.
        for path in ["/api/tokenize", "/apiv1/chat/completions", "/api"] {
            assert!(admits_under(&k, "/api", path, &[]), "{path}");
        }
        // A root path of `/` leaves no path starting with `/v1`.
        assert!(admits_under(&k, "/", "/v1/chat/completions", &[]));
    }

    #[test]
    fn the_value_is_read_as_vllm_reads_it() {
        let k = keys(&["sk-one", "a b", "é"]);
        let path = "/v1/completions";
        // The scheme in any case; surrounding whitespace dropped by the HTTP server.
        assert!(admits(&k, path, &[b"bearer sk-one"]));
        assert!(admits(&k, path, &[b"BEARER sk-one"]));
        assert!(admits(&k, path, &[b"  Bearer sk-one\t"]));
        // One space only: a second one is part of the key; the key may hold spaces.
        assert!(!admits(&k, path, &[b"Bearer  sk-one"]));
        assert!(admits(&k, path, &[b"Bearer a b"]));
        // Another scheme, no key, an empty value.
        assert!(!admits(&k, path, &[b"Basic sk-one"]));
        assert!(!admits(&k, path, &[b"Bearer"]));
        assert!(!admits(&k, path, &[b""]));
        assert!(!admits(&k, path, &[b"sk-one"]));
        // Only the first field counts.
        assert!(!admits(&k, path, &[b"Bearer nope", b"Bearer sk-one"]));
        assert!(admits(&k, path, &[b"Bearer sk-one", b"Bearer nope"]));
        // Bytes are Latin-1: "é" sent as its UTF-8 bytes is "Ã©" to vLLM, and does not match.
        assert!(!admits(&k, path, &[b"Bearer \xc3\xa9"]));
        assert!(admits(&keys(&["Ã©"]), path, &[b"Bearer \xc3\xa9"]));
        assert!(admits(&k, path, &[b"Bearer \xe9"]));
    }
}
