//! The TLS handshake on an accepted connection, and the verified client certificate's names
//! as a [`PeerCertificate`] (read once per connection; `identify` never re-parses).
//!
//! Security notes: rustls verified the chain against `tls.client_ca` before any name is read
//! here, so a name comes only from a certificate the CA signed; with `client_auth =
//! "optional"` a client without a certificate has no peer identity and falls through to its
//! API key or header. The handshake has the header timeout as its deadline, so a client that
//! opens a connection and sends nothing holds no task for long.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::identify::PeerCertificate;

/// Runs the server handshake within `deadline`; returns the stream and the client's
/// verified certificate names, if it sent a certificate.
pub async fn accept(
    config: Arc<rustls::ServerConfig>,
    stream: TcpStream,
    deadline: Duration,
) -> std::io::Result<(TlsStream<TcpStream>, Option<PeerCertificate>)> {
    let handshake = TlsAcceptor::from(config).accept(stream);
    let tls = match tokio::time::timeout(deadline, handshake).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "TLS handshake not finished within the header timeout",
            ))
        }
    };
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| peer_names(leaf.as_ref()));
    Ok((tls, peer))
}

/// The subject CN and the DNS and URI SANs of a DER certificate (empty if unparsable, which
/// cannot happen after rustls verified it).
pub fn peer_names(der: &[u8]) -> PeerCertificate {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return PeerCertificate::default();
    };
    let mut cns = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .map(str::to_string);
    let subject_cn = cns.next();
    // Further CN attributes are names too: a certificate naming two clients names neither.
    let extra_cns: Vec<String> = cns.collect();
    let mut sans: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(ext)) => ext
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(s) | GeneralName::URI(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    sans.extend(extra_cns);
    PeerCertificate { subject_cn, sans }
}
