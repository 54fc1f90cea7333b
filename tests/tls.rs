//! TLS: the data-plane listener (handshake, ALPN, versions), mTLS identity end to end
//! (`required` and `optional`), the plain listener beside it, and `https://` upstreams with a
//! configured CA and a client certificate. Certificates are made at test time with rcgen.

#[path = "support/raw.rs"]
mod raw;
mod support;
mod tls_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use mmgate::config::Config;
use support::*;
use tls_support::*;

const CHAT: &str = "/v1/chat/completions";
const KWARGS_BODY: &str = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"max_pixels":1003520}}"#;

async fn tls_post(c: &TlsClient, addr: std::net::SocketAddr, body: &str) -> Result<Reply, String> {
    let req = http::Request::post(format!("https://127.0.0.1:{}{CHAT}", addr.port()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let res = c.request(req).await.map_err(|e| format!("{e:?}"))?;
    let (parts, body) = res.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// Two pools (default, trusted) behind a TLS listener; `vision` is identified by its
/// certificate's SAN and routed to the trusted pool.
fn mtls_policy(pki: &Pki, server: &Leaf, client_auth: &str, extra: &str) -> String {
    format!(
        r#"{}
[gate]
default = "strip"
[pools.default]
members = ["{{DEFAULT}}"]
health_check = false
[pools.trusted]
members = ["{{TRUSTED}}"]
trusted = true
health_check = false
allow_unknown_keys = true
[clients.vision]
certificate_names = ["vision.clients.test"]
trusted = true
mode = "route"
route_to = "trusted"
{extra}"#,
        tls_section(pki, server, client_auth)
    )
}

#[tokio::test]
async fn tls_handshake_offers_h2_and_http1_over_tls_1_2_and_1_3_only() {
    let dir = scratch("handshake");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start().await;
    let gw = gateway(&tls_section(&pki, &server, "none"), &fake).await;

    // ALPN h2 over TLS 1.3; a TLS 1.2-only client is served too, with http/1.1.
    for (versions, alpn, want) in [
        (
            &[&rustls::version::TLS13][..],
            vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            (rustls::ProtocolVersion::TLSv1_3, &b"h2"[..]),
        ),
        (
            &[&rustls::version::TLS12][..],
            vec![b"http/1.1".to_vec()],
            (rustls::ProtocolVersion::TLSv1_2, &b"http/1.1"[..]),
        ),
    ] {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(pki.roots())
            .with_no_client_auth();
        config.alpn_protocols = alpn;
        let tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap();
        let (_, session) = tls.get_ref();
        assert_eq!(session.protocol_version(), Some(want.0));
        assert_eq!(session.alpn_protocol(), Some(want.1));
    }

    // A request over HTTPS (h2 negotiated) reaches the upstream.
    let c = tls_client(&pki, None);
    let req = http::Request::get(format!("https://127.0.0.1:{}/v1/models", gw.addr.port()))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let res = c.request(req).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.version(), http::Version::HTTP_2);

    // A client that does not trust the gateway's CA fails the handshake.
    let other = Pki::new(&dir, "other");
    let stranger = tls_client(&other, None);
    assert!(tls_post(&stranger, gw.addr, KWARGS_BODY).await.is_err());
    gw.stop().await;
}

#[tokio::test]
async fn client_certificate_san_identifies_a_trusted_client_end_to_end() {
    let dir = scratch("mtls");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let vision = pki.client("vision", "Vision Team", &["vision.clients.test"]);
    let someone = pki.client("someone", "someone", &["someone.clients.test"]);
    let default = FakeVllm::start().await;
    let trusted = FakeVllm::start().await;
    let gw = gateway_with(
        &mtls_policy(&pki, &server, "required", ""),
        &[("DEFAULT", default.url()), ("TRUSTED", trusted.url())],
        None,
    )
    .await;

    // The SAN maps to `vision`: its offending request goes to the trusted pool as sent.
    let r = tls_post(&tls_client(&pki, Some(&vision)), gw.addr, KWARGS_BODY)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(trusted.received().len(), 1);
    assert_eq!(trusted.received()[0].body, KWARGS_BODY.as_bytes());
    assert_eq!(trusted.received()[0].headers["x-forwarded-proto"], "https");
    assert!(default.received().is_empty());

    // A verified certificate naming no client is anonymous: stripped, to the default pool.
    let r = tls_post(&tls_client(&pki, Some(&someone)), gw.addr, KWARGS_BODY)
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-mmgate-stripped"], "mm_processor_kwargs");
    assert_eq!(default.received().len(), 1);

    let c = client();
    let via = |v: &str| format!("mmgate_identified_requests_total{{via=\"{v}\"}}");
    assert_eq!(metric(&c, gw.admin, &via("certificate")).await, Some(1.0));
    assert_eq!(metric(&c, gw.admin, &via("anonymous")).await, Some(1.0));
    gw.stop().await;
}

#[tokio::test]
async fn required_client_auth_refuses_a_client_without_a_certificate() {
    let dir = scratch("required");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let default = FakeVllm::start().await;
    let trusted = FakeVllm::start().await;
    let gw = gateway_with(
        &mtls_policy(&pki, &server, "required", ""),
        &[("DEFAULT", default.url()), ("TRUSTED", trusted.url())],
        None,
    )
    .await;
    // Without a certificate, and with one from a CA the gateway does not trust.
    let other = Pki::new(&dir, "other");
    let foreign = other.client("foreign", "vision", &["vision.clients.test"]);
    for identity in [None, Some(&foreign)] {
        let r = tls_post(&tls_client(&pki, identity), gw.addr, KWARGS_BODY).await;
        assert!(r.is_err(), "served without a valid certificate: {r:?}");
    }
    assert!(default.received().is_empty() && trusted.received().is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn optional_client_auth_serves_clients_without_a_certificate_by_their_key() {
    let dir = scratch("optional");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let vision = pki.client("vision", "vision.clients.test", &[]);
    let default = FakeVllm::start().await;
    let trusted = FakeVllm::start().await;
    let extra = "[identity]\nunknown = \"reject\"\n";
    let gw = gateway_with(
        &mtls_policy(&pki, &server, "optional", extra),
        &[("DEFAULT", default.url()), ("TRUSTED", trusted.url())],
        None,
    )
    .await;
    // No certificate: the handshake succeeds, and with no other credential it is a 401.
    let r = tls_post(&tls_client(&pki, None), gw.addr, KWARGS_BODY)
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    // The subject CN identifies the client too.
    let r = tls_post(&tls_client(&pki, Some(&vision)), gw.addr, KWARGS_BODY)
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(trusted.received().len(), 1);
    gw.stop().await;
}

/// A raw TLS connection to `gw` offering only `alpn`.
async fn raw_tls(
    pki: &Pki,
    gw: std::net::SocketAddr,
    alpn: &[u8],
) -> raw::Conn<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    raw::Conn::over(tls_stream(pki, gw, alpn).await)
}

#[tokio::test]
async fn over_tls_zero_padded_chunk_sizes_leave_the_framing_watch_and_timeout_on() {
    // hyper serves TLS connections and reads chunk sizes with any number of leading zeros;
    // the watch that times heads and finds ambiguous framing must follow such a body.
    let dir = scratch("padded");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start().await;
    let policy = format!(
        "{}[limits]\nheader_timeout_ms = 300\n",
        tls_section(&pki, &server, "none")
    );
    let gw = gateway(&policy, &fake).await;
    let padded = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000000005\r\nhello\r\n0\r\n\r\n";
    let ambiguous = "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let mut c = raw_tls(&pki, gw.addr, b"http/1.1").await;
    c.write(padded.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    c.write(ambiguous.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 400);
    assert_eq!(fake.received().len(), 1);

    // And the wait for a head after such a body is still timed.
    let mut c = raw_tls(&pki, gw.addr, b"http/1.1").await;
    c.write(padded.as_bytes()).await;
    assert_eq!(c.response().await.unwrap().status, 200);
    c.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
        .await;
    assert!(c.closed_within(raw::VERDICT).await);

    // An idle HTTP/2 connection (ALPN h2) is closed too.
    let mut c = raw_tls(&pki, gw.addr, b"h2").await;
    c.write(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await;
    assert!(c.closed_within(raw::VERDICT).await);
    gw.stop().await;
}

#[tokio::test]
async fn over_tls_both_framing_fields_are_refused_whatever_the_length_says() {
    // hyper skips a `Content-Length` after `Transfer-Encoding` (and reads the body as
    // chunked), so a length it would refuse alone must not hide the ambiguity from the watch.
    let dir = scratch("both-fields");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start().await;
    let gw = gateway(&tls_section(&pki, &server, "none"), &fake).await;
    let fields = [
        "Transfer-Encoding: chunked\r\nContent-Length: 5, 5\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: abc\r\n",
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
    ];
    for f in fields {
        let mut c = raw_tls(&pki, gw.addr, b"http/1.1").await;
        let head = format!(
            "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: gw\r\n{f}\r\n3\r\nabc\r\n0\r\n\r\n"
        );
        c.write(head.as_bytes()).await;
        assert_eq!(c.response().await.unwrap().status, 400, "{f:?}");
    }
    assert!(fake.received().is_empty(), "nothing reaches the upstream");
    let name = r#"mmgate_refusals_total{pool="none",reason="framing"}"#;
    let refused = metric(&client(), gw.admin, name).await;
    assert_eq!(
        refused,
        Some(fields.len() as f64),
        "each counted as a framing refusal"
    );
    gw.stop().await;
}

#[tokio::test]
async fn over_tls_a_client_that_takes_none_of_its_answer_is_let_go() {
    let dir = scratch("stalled");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start_with(FakeOpts {
        sse_events: Some(200_000),
        ..Default::default()
    })
    .await;
    let policy = format!(
        "{}[limits]\nsend_timeout_ms = 300\n",
        tls_section(&pki, &server, "none")
    );
    let gw = gateway(&policy, &fake).await;
    let body = r#"{"model":"tiny","messages":[],"stream":true}"#;
    let mut c = raw_tls(&pki, gw.addr, b"http/1.1").await;
    let head = format!(
        "POST {CHAT} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write(head.as_bytes()).await;
    in_flight_then_let_go(gw.admin).await;
    drop(c);
    gw.stop().await;
}

#[tokio::test]
async fn plain_http_stays_available_beside_the_tls_listener() {
    let dir = scratch("plain");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start().await;
    let listen = "plain_addr = \"127.0.0.1:0\"\n";
    let tls = tls_section(&pki, &server, "none");
    let gw = started(&fake, listen, &tls, std::time::Duration::from_secs(5)).await;
    let plain = gw.plain.expect("a plain listener");
    let r = post_json(&client(), plain, CHAT, KWARGS_BODY).await;
    assert_eq!(r.status, 200);
    let r = tls_post(&tls_client(&pki, None), gw.addr, KWARGS_BODY)
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(fake.received().len(), 2);
    gw.stop().await;
}

#[tokio::test]
async fn https_upstream_with_a_configured_ca_and_client_certificate() {
    let dir = scratch("upstream");
    let pki = Pki::new(&dir, "up");
    let server = pki.server("upstream");
    let me = pki.client("gateway", "mmgate", &["gateway.test"]);
    let up = TlsUpstream::start(&pki, &server, true).await;
    let ca = pki.ca_pem.display().to_string();
    let with_cert = format!(
        "[upstream]\nurl = \"{}\"\ntls_ca = {ca:?}\ntls_cert = {:?}\ntls_key = {:?}\n[vllm]\ndiscover_models = false\ndiscover_routes = false\n",
        up.url(),
        me.cert_pem.display().to_string(),
        me.key_pem.display().to_string()
    );
    let gw = gateway_with(&with_cert, &[], None).await;
    let r = post_json(&client(), gw.addr, CHAT, KWARGS_BODY).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("tls_upstream"), "{}", r.text());
    assert_eq!(up.hits.load(Ordering::Relaxed), 1);
    gw.stop().await;

    // Without the client certificate the upstream refuses the handshake: a 502.
    let without = format!(
        "[upstream]\nurl = \"{}\"\ntls_ca = {ca:?}\n[vllm]\ndiscover_models = false\ndiscover_routes = false\n",
        up.url()
    );
    let gw = gateway_with(&without, &[], None).await;
    let r = post_json(&client(), gw.addr, CHAT, KWARGS_BODY).await;
    assert_eq!(r.status, 502, "{}", r.text());
    gw.stop().await;
}

#[test]
fn tls_policy_problems_name_their_fields() {
    let dir = scratch("problems");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let base = "[upstream]\nurl = \"http://127.0.0.1:1\"\n";
    let cases = [
        (
            "[tls]\nkey = \"/nonexistent.key\"\n".to_string(),
            "tls.cert: missing",
        ),
        (
            format!(
                "[tls]\ncert = {:?}\nkey = \"/nonexistent.key\"\n",
                server.cert_pem.display().to_string()
            ),
            "tls.key: cannot read",
        ),
        (
            tls_section(&pki, &server, "none").replace("\"none\"", "\"sometimes\""),
            "tls.client_auth",
        ),
        (
            tls_section(&pki, &server, "required").replace("client_ca", "#"),
            "tls.client_ca: missing",
        ),
        (
            "[listen]\nplain_addr = \"127.0.0.1:0\"\n".into(),
            "listen.plain_addr",
        ),
        // Required certificates, and a plain listener others can reach without one.
        (
            format!(
                "[listen]\nplain_addr = \"0.0.0.0:0\"\n{}",
                tls_section(&pki, &server, "required")
            ),
            "listen.plain_addr: 0.0.0.0:0 is not loopback",
        ),
        // Certificate names with no certificate asked for.
        (
            format!(
                "{}[clients.a]\ncertificate_names = [\"a.test\"]\n",
                tls_section(&pki, &server, "none")
            ),
            "clients.a.certificate_names: needs [tls] with client_auth",
        ),
        (
            "[clients.a]\ncertificate_names = [\"a.test\"]\n".into(),
            "clients.a.certificate_names: needs [tls] with client_auth",
        ),
    ];
    for (extra, want) in cases {
        let err = Config::parse(&format!("{base}{extra}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    // On loopback, or with certificates optional, the plain listener loads.
    for (addr, auth) in [
        ("127.0.0.1:0", "required"),
        ("[::1]:0", "required"),
        ("0.0.0.0:0", "optional"),
    ] {
        let text = format!(
            "{base}[listen]\nplain_addr = \"{addr}\"\n{}[clients.a]\ncertificate_names = [\"a.test\"]\n",
            tls_section(&pki, &server, auth)
        );
        Config::parse(&text).unwrap_or_else(|e| panic!("{addr} {auth}: {e}"));
    }
    let err = Config::parse("[upstream]\nurl = \"http://127.0.0.1:1\"\ntls_ca = \"/x.pem\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no member is https://"), "{err}");
    let err =
        Config::parse("[upstream]\nurl = \"https://127.0.0.1:1\"\ntls_ca = \"/nonexistent.pem\"\n")
            .unwrap_err()
            .to_string();
    assert!(err.contains("upstream.tls_ca"), "{err}");
}

#[test]
fn the_example_tls_policy_is_valid_once_its_certificates_exist() {
    let dir = scratch("example");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let me = pki.client("me", "mmgate", &[]);
    let path = |p: &std::path::Path| p.display().to_string();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies/tls.toml"
    ))
    .unwrap();
    let text = [
        ("/etc/mmgate/tls/server.pem", path(&server.cert_pem)),
        ("/etc/mmgate/tls/server.key", path(&server.key_pem)),
        ("/etc/mmgate/tls/clients-ca.pem", path(&pki.ca_pem)),
        ("/etc/mmgate/tls/upstream-ca.pem", path(&pki.ca_pem)),
        ("/etc/mmgate/tls/mmgate-client.pem", path(&me.cert_pem)),
        ("/etc/mmgate/tls/mmgate-client.key", path(&me.key_pem)),
    ]
    .iter()
    .fold(text, |t, (from, to)| t.replace(from, to));
    let c = Config::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.tls.is_some() && c.plain.is_some());
    assert!(c.pools[1].members[0].tls.is_some());
    assert_eq!(c.watched.len(), 6);
}

#[tokio::test]
async fn a_stop_does_not_wait_for_a_tls_handshake_that_never_comes() {
    // A TCP connection to the TLS listener that never sends a ClientHello (a port scan, a
    // load balancer's TCP probe) is no request in flight: the drain does not wait for it.
    let dir = scratch("silent");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start().await;
    let rest = format!(
        "[limits]\nheader_timeout_ms = 600000\n{}",
        tls_section(&pki, &server, "none")
    );
    let gw = started(&fake, "", &rest, std::time::Duration::from_secs(600)).await;
    let _silent = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    // Connections are accepted in order: once a later one is answered, the silent one is
    // in its handshake.
    let mut c = raw_tls(&pki, gw.addr, b"http/1.1").await;
    c.write(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(c.response().await.unwrap().status, 200);
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(60), gw.stop()).await;
    assert!(stopped.is_ok(), "the stop waited for the handshake");
}

/// A verified certificate whose subject carries two CN attributes, each naming a client,
/// is taken as the first one's (here a trusted client's, routed to the trusted pool).
#[tokio::test]
async fn a_certificate_with_two_common_names_of_two_clients_identifies_neither() {
    let dir = scratch("two-cns");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let two = pki.client_two_cns("two", "vision.clients.test", "other.clients.test");
    // Both names are in the certificate.
    let names = mmgate::tls::peer_names(&two.der);
    assert_eq!(names.subject_cn.as_deref(), Some("vision.clients.test"));
    let default = FakeVllm::start().await;
    let trusted = FakeVllm::start().await;
    let extra = "[clients.other]\ncertificate_names = [\"other.clients.test\"]\n\
                 [identity]\nunknown = \"reject\"\n";
    let policy = mtls_policy(&pki, &server, "required", extra);
    let gw = gateway_with(
        &policy,
        &[("DEFAULT", default.url()), ("TRUSTED", trusted.url())],
        None,
    )
    .await;
    let c = tls_client(&pki, Some(&two));
    let req = http::Request::post(format!("https://127.0.0.1:{}{CHAT}", gw.addr.port()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(KWARGS_BODY)))
        .unwrap();
    let res = c.request(req).await.unwrap();
    let status = res.status();
    let _ = res.into_body().collect().await;
    let trusted_hits = trusted.received().len();
    gw.stop().await;
    assert_eq!(
        (status.as_u16(), trusted_hits),
        (401, 0),
        "a certificate naming two clients was identified as one of them"
    );
}

/// A gateway in front of `fake` with `listen` lines added to `[listen]`, then `rest`, that
/// drains for `drain` when stopped.
async fn started(
    fake: &FakeVllm,
    listen: &str,
    rest: &str,
    drain: std::time::Duration,
) -> mmgate::server::Running {
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n{listen}[upstream]\nurl = \"{}\"\n{rest}",
        fake.url()
    );
    let config = Config::parse(&text).unwrap();
    mmgate::server::start(config, drain).await.unwrap()
}
