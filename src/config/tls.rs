//! `[tls]` (the data-plane TLS listener and its client-certificate check) and the upstream
//! TLS keys → ready rustls configurations, built once at load so that a bad certificate, key
//! or CA bundle is a policy problem naming its field, never a failure at the first handshake.
//!
//! Invariants: only TLS 1.3 and 1.2 with rustls' default (ring) cipher suites; the listener
//! offers ALPN `h2` and `http/1.1`; every file read is listed in [`super::Config::watched`]
//! so a change to it triggers a reload.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};

use super::file::{Problems, Section};
use super::watched::Watched;

/// Whether the TLS listener asks for a client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificates.
    None,
    /// Verified against the CA bundle when sent; clients without one are served too.
    Optional,
    /// A certificate that verifies against the CA bundle is required for the handshake.
    Required,
}

/// The data-plane TLS listener's settings (`[tls]`).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The rustls configuration (certificate chain, key, client verifier, ALPN).
    pub config: Arc<ServerConfig>,
    /// The client-certificate mode.
    pub client_auth: ClientAuth,
}

const VERSIONS: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads `[tls]`; `None` when the section is absent (plain HTTP).
pub(super) fn server(
    mut s: Section<'_>,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<ServerTls> {
    let cert = s.str("cert", p);
    let key = s.str("key", p);
    let ca = s.str("client_ca", p);
    let auth = match s.str("client_auth", p) {
        None | Some("none") => ClientAuth::None,
        Some("optional") => ClientAuth::Optional,
        Some("required") => ClientAuth::Required,
        Some(other) => {
            p.add(
                "tls.client_auth",
                format!("\"{other}\" is not one of \"none\", \"optional\", \"required\""),
            );
            ClientAuth::None
        }
    };
    let present = s.present();
    s.finish(p);
    if !present {
        return None;
    }
    let (Some(cert), Some(key)) = (
        required(cert, "tls.cert", "a PEM certificate chain", p),
        required(key, "tls.key", "a PEM private key", p),
    ) else {
        return None;
    };
    // All three read before any is given up on, so that every bad file is named.
    let chain = certs(cert, "tls.cert", watched, p);
    let key = private_key(key, "tls.key", watched, p);
    let verifier = verifier(auth, ca, watched, p);
    let (Some(chain), Some(key), Some(verifier)) = (chain, key, verifier) else {
        return None;
    };
    let built = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            b.with_client_cert_verifier(verifier)
                .with_single_cert(chain, key)
                .map_err(|e| e.to_string())
        });
    match built {
        Ok(mut config) => {
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Some(ServerTls {
                config: Arc::new(config),
                client_auth: auth,
            })
        }
        Err(e) => {
            p.add("tls.key", format!("does not match tls.cert: {e}"));
            None
        }
    }
}

/// The client-certificate verifier for `client_auth` against the CA bundle `ca`.
fn verifier(
    auth: ClientAuth,
    ca: Option<&str>,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    match (auth, ca) {
        (ClientAuth::None, None) => Some(WebPkiClientVerifier::no_client_auth()),
        (ClientAuth::None, Some(_)) => {
            p.add("tls.client_ca", "set, but client_auth is \"none\"");
            None
        }
        (_, None) => {
            p.add(
                "tls.client_ca",
                "missing (the PEM CA bundle client certificates are verified against)",
            );
            None
        }
        (_, Some(ca)) => {
            let roots = roots(ca, "tls.client_ca", watched, p)?;
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let b = match auth {
                ClientAuth::Optional => b.allow_unauthenticated(),
                _ => b,
            };
            b.build().map_err(|e| p.add("tls.client_ca", e)).ok()
        }
    }
}

/// The client configuration for `https://` members: the CA bundle `ca` (else the system
/// roots) and an optional client certificate for mTLS to the upstream.
pub(super) fn upstream(
    path: &str,
    ca: Option<&str>,
    cert: Option<&str>,
    key: Option<&str>,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<Arc<ClientConfig>> {
    let roots = match ca {
        Some(ca) => roots(ca, &format!("{path}.tls_ca"), watched, p),
        None => Some(system_roots()),
    };
    // The client certificate is read even when the CA bundle is bad, so that `check` names
    // every bad file.
    let identity = match (cert, key) {
        (None, None) => Some(None),
        (Some(cert), Some(key)) => {
            let chain = certs(cert, &format!("{path}.tls_cert"), watched, p);
            let key = private_key(key, &format!("{path}.tls_key"), watched, p);
            chain.zip(key).map(Some)
        }
        _ => {
            p.add(
                &format!("{path}.tls_cert"),
                "tls_cert and tls_key go together",
            );
            None
        }
    };
    let (Some(roots), Some(identity)) = (roots, identity) else {
        return None;
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(|e| p.add(path, e))
        .ok()?
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => match builder.with_client_auth_cert(chain, key) {
            Ok(c) => c,
            Err(e) => {
                p.add(
                    &format!("{path}.tls_key"),
                    format!("does not match tls_cert: {e}"),
                );
                return None;
            }
        },
    };
    Some(Arc::new(config))
}

fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::warn!("no system root certificates found; https:// upstreams need tls_ca");
    }
    roots
}

fn required<'a>(v: Option<&'a str>, path: &str, what: &str, p: &mut Problems) -> Option<&'a str> {
    if v.is_none() {
        p.add(path, format!("missing ({what})"));
    }
    v
}

fn certs(
    file: &str,
    path: &str,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<Vec<CertificateDer<'static>>> {
    watched.add(file);
    let certs: Result<Vec<_>, _> = match CertificateDer::pem_file_iter(file) {
        Ok(it) => it.collect(),
        Err(e) => Err(e),
    };
    match certs {
        Ok(c) if !c.is_empty() => Some(c),
        Ok(_) => {
            p.add(path, format!("{file} holds no PEM certificate"));
            None
        }
        Err(e) => {
            p.add(path, format!("cannot read certificates from {file}: {e}"));
            None
        }
    }
}

fn private_key(
    file: &str,
    path: &str,
    watched: &mut Watched,
    p: &mut Problems,
) -> Option<PrivateKeyDer<'static>> {
    watched.add(file);
    PrivateKeyDer::from_pem_file(file)
        .map_err(|e| p.add(path, format!("cannot read a private key from {file}: {e}")))
        .ok()
}

fn roots(file: &str, path: &str, watched: &mut Watched, p: &mut Problems) -> Option<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in certs(file, path, watched, p)? {
        if let Err(e) = roots.add(c) {
            p.add(path, format!("{file}: {e}"));
            return None;
        }
    }
    Some(roots)
}
