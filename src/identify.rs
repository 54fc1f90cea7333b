//! Identification: request headers + [`ConnInfo`] → [`Identified`], once per request, on
//! every route (vLLM's own `--api-key` leaves `/tokenize`, `/pooling`, … open; mmgate does not).
//!
//! Order: a peer certificate (mTLS, filled in by the TLS listener) → an API key
//! (`Authorization: Bearer KEY` or the configured key header) → the trusted client header →
//! anonymous (or 401, per policy).
//!
//! Security notes:
//! - Keys are compared as SHA-256 digests in constant time against every configured digest
//!   (no early exit), so neither the key nor which client matched leaks through timing; the
//!   policy never holds a plaintext key.
//! - The client header is honoured only when the connection's source address lies in
//!   `identity.trusted_networks` (the auth proxies). From anywhere else it is ignored, counted
//!   and removed before forwarding, so it can never select a client, let alone a trusted pool.

use std::collections::HashMap;

use http::{header, HeaderMap, HeaderName, HeaderValue};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::config::{digest, ClientConfig, Identity, KeyDigest, Unknown};
use crate::error::GateError;
use crate::listen::ConnInfo;

/// The identity a TLS listener found in the client's certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    /// The subject's (first) common name.
    pub subject_cn: Option<String>,
    /// DNS and URI subject alternative names, and the subject's further common names.
    pub sans: Vec<String>,
}

/// How a client proved who it is (a closed metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// An mTLS client certificate.
    Certificate,
    /// An API key.
    ApiKey,
    /// The trusted client header from an auth proxy.
    Header,
    /// No credentials.
    Anonymous,
}

impl Via {
    /// The metrics label.
    pub fn name(self) -> &'static str {
        match self {
            Via::Certificate => "certificate",
            Via::ApiKey => "api_key",
            Via::Header => "header",
            Via::Anonymous => "anonymous",
        }
    }
}

/// The client name of requests from clients the policy does not name (in metrics, logs
/// and the inventory; reserved in policies).
pub const ANONYMOUS: &str = "anonymous";

/// The client a request comes from: an index into the policy's clients, or anonymous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientId {
    /// A client the policy names (`Config::clients[i]`).
    Named(usize),
    /// No (or, with `unknown = "anonymous"`, unknown) credentials.
    Anonymous,
}

/// The result of identification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identified {
    /// Who.
    pub client: ClientId,
    /// How.
    pub via: Via,
}

/// A credential header that arrived more than once.
struct Repeated;

/// A header's one value; [`Repeated`] when it came more than once.
fn only<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'h HeaderValue>, Repeated> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    match values.next() {
        Some(_) => Err(Repeated),
        None => Ok(first),
    }
}

/// Prebuilt lookup tables for identification.
#[derive(Debug)]
pub struct Identifier {
    identity: Identity,
    keys: Vec<(KeyDigest, usize)>,
    headers: HashMap<String, usize>,
    certificates: HashMap<String, usize>,
}

impl Identifier {
    /// Builds the tables from the policy.
    pub fn new(identity: &Identity, clients: &[ClientConfig]) -> Self {
        let mut t = Identifier {
            identity: identity.clone(),
            keys: Vec::new(),
            headers: HashMap::new(),
            certificates: HashMap::new(),
        };
        for (i, c) in clients.iter().enumerate() {
            t.keys.extend(c.keys.iter().map(|k| (*k, i)));
            t.headers
                .extend(c.header_ids.iter().map(|h| (h.clone(), i)));
            t.certificates
                .extend(c.certificate_names.iter().map(|n| (n.clone(), i)));
        }
        t
    }

    /// Removes the client header when it came from outside the trusted networks (first,
    /// so that it is counted even when identification then refuses the request); true
    /// when it did.
    pub fn drop_spoofed_header(&self, headers: &mut HeaderMap, conn: &ConnInfo) -> bool {
        let Some(h) = &self.identity.client_header else {
            return false;
        };
        headers.contains_key(h) && !self.is_trusted_source(conn) && headers.remove(h).is_some()
    }

    /// Removes the key header, mmgate's own credential (vLLM never reads it), before the
    /// request is forwarded.
    pub fn drop_key_header(&self, headers: &mut HeaderMap) {
        if let Some(h) = &self.identity.api_key_header {
            headers.remove(h);
        }
    }

    /// Identifies one request. A client header is honoured only from the trusted networks.
    pub fn identify(&self, headers: &HeaderMap, conn: &ConnInfo) -> Result<Identified, GateError> {
        let found = |client, via| Identified {
            client: ClientId::Named(client),
            via,
        };
        if let Some(cert) = &conn.peer {
            let names = cert.subject_cn.iter().chain(&cert.sans);
            let mut owners = names.filter_map(|n| self.certificates.get(n));
            if let Some(&i) = owners.next() {
                // Names of two clients in one certificate identify neither.
                if owners.any(|&other| other != i) {
                    return self.unknown("the certificate names more than one client");
                }
                return Ok(found(i, Via::Certificate));
            }
        }
        match self.presented_key(headers) {
            Ok(Some(key)) => match self.key_owner(key) {
                Some(i) => return Ok(found(i, Via::ApiKey)),
                // A bearer key mmgate does not know may be vLLM's own (`--api-key`): an auth
                // proxy's client header from a trusted network still names the client.
                None if self.key_is_bearer(headers)
                    && self.identity.client_header.as_ref().is_some_and(|h| {
                        headers.contains_key(h) && self.is_trusted_source(conn)
                    }) => {}
                None => return self.unknown("the API key is not known to this gateway"),
            },
            Ok(None) => {}
            Err(Repeated) => return self.unknown("more than one API key header was sent"),
        }
        if let Some(h) = &self.identity.client_header {
            match only(headers, h) {
                Ok(None) => {}
                Ok(Some(_)) | Err(Repeated) if !self.is_trusted_source(conn) => {}
                Ok(Some(v)) => {
                    return match v.to_str().ok().and_then(|v| self.headers.get(v)) {
                        Some(&i) => Ok(found(i, Via::Header)),
                        None => self.unknown("the client header names no known client"),
                    }
                }
                Err(Repeated) => return self.unknown("the client header was sent more than once"),
            }
        }
        self.unknown("no credentials were sent")
    }

    fn unknown(&self, reason: &'static str) -> Result<Identified, GateError> {
        match self.identity.unknown {
            Unknown::Anonymous => Ok(Identified {
                client: ClientId::Anonymous,
                via: Via::Anonymous,
            }),
            Unknown::Reject => Err(GateError::Unauthorized { reason }),
        }
    }

    fn is_trusted_source(&self, conn: &ConnInfo) -> bool {
        let ip = conn.remote.ip().to_canonical();
        self.identity
            .trusted_networks
            .iter()
            .any(|n| n.contains(&ip))
    }

    /// The configured key header when the request has it, not blank (its `Authorization` is
    /// then left to vLLM's own `--api-key`), else `Authorization: Bearer KEY` (scheme
    /// case-insensitive); either one repeated is ambiguous (an appending proxy must not let
    /// the client's win).
    fn presented_key<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h str>, Repeated> {
        if let Some(h) = &self.identity.api_key_header {
            // A blank key header carries no key: as if it were not sent.
            if let Some(v) = only(headers, h)?.filter(|v| !blank(v)) {
                return Ok(v.to_str().ok().map(str::trim));
            }
        }
        let bearer = only(headers, &header::AUTHORIZATION)?
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, key) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
            });
        Ok(bearer.filter(|k| !k.is_empty()))
    }

    /// Whether the presented key is the `Authorization` bearer (not the key header).
    fn key_is_bearer(&self, headers: &HeaderMap) -> bool {
        self.identity
            .api_key_header
            .as_ref()
            .is_none_or(|h| headers.get_all(h).iter().all(blank))
    }

    /// The owner of a key: its digest compared with every configured digest in constant time.
    fn key_owner(&self, key: &str) -> Option<usize> {
        let presented = digest(key);
        let mut found = subtle::Choice::from(0u8);
        let mut owner = 0u64;
        for (stored, client) in &self.keys {
            let hit = stored.ct_eq(&presented);
            owner = u64::conditional_select(&owner, &(*client as u64), hit);
            found |= hit;
        }
        bool::from(found).then_some(owner as usize)
    }
}

/// A header value of only spaces and tabs (or none at all).
fn blank(v: &HeaderValue) -> bool {
    v.as_bytes().iter().all(|b| matches!(b, b' ' | b'\t'))
}

#[cfg(test)]
mod tests;
