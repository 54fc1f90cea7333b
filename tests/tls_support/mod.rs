//! TLS test helpers shared by tests/tls.rs, tests/reload.rs, tests/shutdown.rs and
//! tests/websocket.rs: a test
//! PKI made at test time with rcgen (written to a scratch directory as PEM files), TLS
//! clients trusting it, a fake vLLM behind a rustls listener, policy files on disk, and a
//! streaming request whose frames the test reads one at a time.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

static SCRATCH: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory for one test, removed with everything in it when dropped.
pub fn scratch(name: &str) -> Scratch {
    let n = SCRATCH.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("mmgate-tls-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// A scratch directory (see [`scratch`]); derefs to its path.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate and its key, as DER and as PEM files.
pub struct Leaf {
    pub der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
    pub cert_pem: PathBuf,
    pub key_pem: PathBuf,
}

impl Leaf {
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// A test CA that issues server and client certificates into `dir`.
pub struct Pki {
    pub dir: PathBuf,
    pub ca_pem: PathBuf,
    ca: Certificate,
    ca_key: KeyPair,
}

impl Pki {
    pub fn new(dir: &Path, name: &str) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = p.self_signed(&ca_key).unwrap();
        let ca_pem = dir.join(format!("{name}-ca.pem"));
        std::fs::write(&ca_pem, ca.pem()).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            ca_pem,
            ca,
            ca_key,
        }
    }

    fn issue(&self, file: &str, cn: &str, dns: &[&str], server: bool) -> Leaf {
        let mut p =
            CertificateParams::new(dns.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        if server {
            p.subject_alt_names
                .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        }
        p.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        self.sign(file, p)
    }

    /// Signs `p` with the CA under a new key, written as `file.pem` and `file.key`.
    fn sign(&self, file: &str, p: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let cert_pem = self.dir.join(format!("{file}.pem"));
        let key_pem = self.dir.join(format!("{file}.key"));
        std::fs::write(&cert_pem, cert.pem()).unwrap();
        std::fs::write(&key_pem, key.serialize_pem()).unwrap();
        Leaf {
            der: cert.der().clone(),
            key_der: key.serialize_der(),
            cert_pem,
            key_pem,
        }
    }

    /// A client certificate whose subject has a second common name attribute after `cn`
    /// (the CN OID written as a custom attribute, so rcgen keeps both).
    pub fn client_two_cns(&self, file: &str, cn: &str, second_cn: &str) -> Leaf {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.distinguished_name
            .push(DnType::CustomDnType(vec![2, 5, 4, 3]), second_cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(file, p)
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self, file: &str) -> Leaf {
        self.issue(file, "localhost", &["localhost"], true)
    }

    /// A client certificate with subject CN `cn` and DNS SANs `sans`.
    pub fn client(&self, file: &str, cn: &str, sans: &[&str]) -> Leaf {
        self.issue(file, cn, sans, false)
    }

    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        roots
    }

    /// A rustls client config trusting this CA, presenting `identity` when given.
    pub fn client_config(&self, identity: Option<&Leaf>) -> rustls::ClientConfig {
        let b = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(self.roots());
        match identity {
            Some(l) => b
                .with_client_auth_cert(vec![l.der.clone()], l.key())
                .unwrap(),
            None => b.with_no_client_auth(),
        }
    }
}

pub type TlsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTPS client (ALPN h2 and http/1.1) trusting `pki`, presenting `identity` when given.
pub fn tls_client(pki: &Pki, identity: Option<&Leaf>) -> TlsClient {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(pki.client_config(identity))
        .https_only()
        .enable_http1()
        .enable_http2()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

/// The TLS part of a policy: `[tls]` with `pki`'s server certificate and the client mode.
pub fn tls_section(pki: &Pki, server: &Leaf, client_auth: &str) -> String {
    let ca = match client_auth {
        "none" => String::new(),
        _ => format!("client_ca = {:?}\n", pki.ca_pem.display().to_string()),
    };
    format!(
        "[tls]\ncert = {:?}\nkey = {:?}\nclient_auth = \"{client_auth}\"\n{ca}",
        server.cert_pem.display().to_string(),
        server.key_pem.display().to_string()
    )
}

/// A fake vLLM behind a rustls listener: `/health` 200, everything else a JSON answer naming
/// the path; with `client_ca`, a client certificate signed by it is required.
pub struct TlsUpstream {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
}

impl TlsUpstream {
    pub async fn start(pki: &Pki, server: &Leaf, require_client: bool) -> Self {
        let verifier = if require_client {
            rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(pki.roots()),
                provider(),
            )
            .build()
            .unwrap()
        } else {
            rustls::server::WebPkiClientVerifier::no_client_auth()
        };
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![server.der.clone()], server.key())
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, hits) = (acceptor.clone(), counted.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req: http::Request<_>| {
                        let hits = hits.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            if path != "/health" {
                                hits.fetch_add(1, Ordering::Relaxed);
                            }
                            let body = format!(r#"{{"tls_upstream":true,"path":{path:?}}}"#);
                            Ok::<_, std::convert::Infallible>(
                                http::Response::builder()
                                    .header("content-type", "application/json")
                                    .body(Body::from(body))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        TlsUpstream { addr, hits }
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }
}

/// Writes a policy file (listeners on port 0 unless the text sets `[listen]`).
pub fn write_policy(path: &Path, text: &str) {
    let full = if text.contains("[listen]") {
        text.to_string()
    } else {
        format!("[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{text}")
    };
    replace_file(path, full.as_bytes());
}

/// Writes `path` whole at once (a new file renamed over it), so that a watcher polling it
/// never reads it half written.
pub fn replace_file(path: &Path, contents: &[u8]) {
    let mut name = path.file_name().unwrap().to_os_string();
    name.push(".new");
    let next = path.with_file_name(name);
    std::fs::write(&next, contents).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// A response whose body frames the test reads one at a time.
pub struct Stream {
    pub status: http::StatusCode,
    body: hyper::body::Incoming,
}

impl Stream {
    /// Starts a streaming chat request (`"stream": true`).
    pub async fn open(addr: SocketAddr, kwargs: bool) -> Stream {
        let body = if kwargs {
            r#"{"model":"tiny","stream":true,"messages":[],"mm_processor_kwargs":{"max_pixels":1}}"#
        } else {
            r#"{"model":"tiny","stream":true,"messages":[]}"#
        };
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let req = http::Request::post(format!("http://{addr}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let res = client.request(req).await.unwrap();
        Stream {
            status: res.status(),
            body: res.into_body(),
        }
    }

    /// The next data frame (`None` at the end, `Err` if the connection broke).
    pub async fn next(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            match self.body.frame().await? {
                Ok(f) => match f.into_data() {
                    Ok(d) => return Some(Ok(d)),
                    Err(_) => continue,
                },
                Err(e) => return Some(Err(e.to_string())),
            }
        }
    }

    /// Everything until the end of the body.
    pub async fn rest(&mut self) -> Result<String, String> {
        let mut out = Vec::new();
        while let Some(chunk) = self.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// A TLS connection to `gw` (as `localhost`) trusting the test PKI and offering only `alpn`.
pub async fn tls_stream(
    pki: &Pki,
    gw: SocketAddr,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut config = pki.client_config(None);
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = tokio::net::TcpStream::connect(gw).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap()
}
