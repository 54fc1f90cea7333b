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

use http::{header, HeaderMap};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::config::{digest, ClientConfig, Identity, KeyDigest, Unknown};
use crate::error::GateError;
use crate::listen::ConnInfo;

/// The identity a TLS listener found in the client's certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    /// The subject's common name.
    pub subject_cn: Option<String>,
    /// DNS and URI subject alternative names.
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
    /// A client header arrived from outside the trusted networks and was ignored.
    pub spoofed_header: bool,
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

    /// The client header name, if one is configured.
    pub fn client_header(&self) -> Option<&header::HeaderName> {
        self.identity.client_header.as_ref()
    }

    /// Identifies one request.
    pub fn identify(&self, headers: &HeaderMap, conn: &ConnInfo) -> Result<Identified, GateError> {
        let spoofed_header = self
            .identity
            .client_header
            .as_ref()
            .is_some_and(|h| headers.contains_key(h) && !self.is_trusted_source(conn));
        let found = |client, via| Identified {
            client: ClientId::Named(client),
            via,
            spoofed_header,
        };
        if let Some(cert) = &conn.peer {
            let names = cert.subject_cn.iter().chain(&cert.sans);
            if let Some(&i) = names.filter_map(|n| self.certificates.get(n)).next() {
                return Ok(found(i, Via::Certificate));
            }
        }
        if let Some(key) = self.presented_key(headers) {
            return match self.key_owner(key) {
                Some(i) => Ok(found(i, Via::ApiKey)),
                None => self.unknown("the API key is not known to this gateway", spoofed_header),
            };
        }
        if let Some(h) = &self.identity.client_header {
            if !spoofed_header {
                if let Some(v) = headers.get(h) {
                    return match v.to_str().ok().and_then(|v| self.headers.get(v)) {
                        Some(&i) => Ok(found(i, Via::Header)),
                        None => self.unknown("the client header names no known client", false),
                    };
                }
            }
        }
        self.unknown("no credentials were sent", spoofed_header)
    }

    fn unknown(&self, reason: &'static str, spoofed_header: bool) -> Result<Identified, GateError> {
        match self.identity.unknown {
            Unknown::Anonymous => Ok(Identified {
                client: ClientId::Anonymous,
                via: Via::Anonymous,
                spoofed_header,
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

    /// `Authorization: Bearer KEY` (scheme case-insensitive), else the configured key header.
    fn presented_key<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, key) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
            });
        let extra = || {
            let h = self.identity.api_key_header.as_ref()?;
            headers.get(h)?.to_str().ok().map(str::trim)
        };
        bearer.or_else(extra).filter(|k| !k.is_empty())
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

#[cfg(test)]
mod tests;
