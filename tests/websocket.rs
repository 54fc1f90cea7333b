//! WebSocket handshakes (vLLM's realtime `/v1/realtime` sessions) through the real gateway:
//! a switch becomes a tunnel both ways (plain HTTP/1.1 and TLS), early bytes on either side
//! included; a refused handshake gets the upstream's own answer and the connection closes;
//! what the request holds is held while the tunnel lasts. The fake upstream answers
//! handshakes as vLLM's server does (tests/support).

#[path = "support/raw.rs"]
mod raw;
mod support;
mod tls_support;

use raw::{Conn, VERDICT};
use support::*;
use tls_support::*;

const KEYED: &str = "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

fn handshake(method: &str, path: &str, extra: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n{extra}\r\n"
    )
}

/// Drives one session on `c`: the handshake and early bytes in one write, the `101`, the
/// upstream's first message, an echo each way, then the client's end, which the upstream
/// answers by ending its side.
async fn session<S>(c: &mut Conn<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let opening = format!("{}early", handshake("GET", "/v1/realtime", KEYED));
    c.write(opening.as_bytes()).await;
    let r = c.response_to_head().await.unwrap();
    assert_eq!(r.status, 101, "{}", r.head);
    assert_eq!(r.header("upgrade"), Some("websocket"));
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert_eq!(r.header("content-length"), None, "{}", r.head);
    assert_eq!(c.take(16).await.unwrap(), b"session.created\n");
    assert_eq!(c.take(5).await.unwrap(), b"EARLY");
    c.write(b"{\"type\":\"input_audio_buffer.commit\"}").await;
    assert_eq!(
        c.take(36).await.unwrap(),
        b"{\"TYPE\":\"INPUT_AUDIO_BUFFER.COMMIT\"}"
    );
    use tokio::io::AsyncWriteExt;
    c.stream.shutdown().await.unwrap();
    assert!(c.closed_within(VERDICT).await);
    assert!(c.unread().is_empty(), "{:?}", c.unread().escape_ascii());
}

#[tokio::test]
async fn a_websocket_session_is_tunnelled_both_ways_and_holds_its_request_until_it_ends() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    let client = client();
    let in_flight = || metric(&client, gw.admin, "mmgate_in_flight_requests ");

    // While the tunnel is open it counts as a request in flight.
    let mut c = Conn::open(gw.addr).await;
    c.write(handshake("GET", "/v1/realtime", KEYED).as_bytes())
        .await;
    assert_eq!(c.response_to_head().await.unwrap().status, 101);
    assert_eq!(c.take(16).await.unwrap(), b"session.created\n");
    assert_eq!(in_flight().await, Some(1.0));
    drop(c);
    eventually("the tunnel's end", || async {
        in_flight().await == Some(0.0)
    })
    .await;

    let mut c = Conn::open(gw.addr).await;
    session(&mut c).await;
    // The upstream got the handshake with its fields as they came, and the forwarding ones.
    let seen = fake.received();
    assert_eq!(seen.len(), 2);
    let h = &seen[1].headers;
    assert_eq!(h["upgrade"], "websocket");
    assert_eq!(h["connection"], "keep-alive, Upgrade");
    assert_eq!(h["sec-websocket-key"], "dGhlIHNhbXBsZSBub25jZQ==");
    assert_eq!(h["x-forwarded-for"], "127.0.0.1");
    let forwarded = metric(
        &client,
        gw.admin,
        "mmgate_requests_total{mode=\"none\",outcome=\"forwarded\",route=\"ungated\"}",
    )
    .await;
    assert_eq!(forwarded, Some(2.0));
    eventually("the tunnel's end", || async {
        in_flight().await == Some(0.0)
    })
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_refused_handshake_gets_the_upstreams_answer_and_its_body_is_never_judged() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    // A handshake on a gated route: vLLM's server takes it as a WebSocket (403, no such
    // route) and never reads the body, so neither is it judged here.
    let kwargs = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    let extra = format!(
        "{KEYED}Content-Type: application/json\r\nContent-Length: {}\r\n",
        kwargs.len()
    );
    let mut c = Conn::open(gw.addr).await;
    let sent = format!(
        "{}{kwargs}",
        handshake("POST", "/v1/chat/completions", &extra)
    );
    c.write(sent.as_bytes()).await;
    let r = c.response().await.unwrap();
    assert_eq!((r.status, r.text().as_str()), (403, ""), "{}", r.head);
    assert!(c.closed_within(VERDICT).await);
    let seen = fake.received();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert!(seen[0].body.is_empty());
    drop(c);

    // A malformed handshake: the upstream's words.
    let mut c = Conn::open(gw.addr).await;
    c.write(handshake("GET", "/v1/realtime", "").as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 400, "{}", r.head);
    assert_eq!(
        r.text(),
        "Failed to open a WebSocket connection: missing Sec-WebSocket-Key header.\n"
    );
    assert!(c.closed_within(VERDICT).await);
    drop(c);
    gw.stop().await;
}

#[tokio::test]
async fn a_websocket_session_is_tunnelled_over_tls() {
    let dir = scratch("websocket");
    let pki = Pki::new(&dir, "gw");
    let server = pki.server("server");
    let fake = FakeVllm::start().await;
    let gw = gateway(&tls_section(&pki, &server, "none"), &fake).await;
    let mut c = Conn::over(tls_stream(&pki, gw.addr, b"http/1.1").await);
    session(&mut c).await;
    let seen = fake.received();
    assert_eq!(seen[0].headers["x-forwarded-proto"], "https");

    // A refused one closes the connection there too.
    let mut c = Conn::over(tls_stream(&pki, gw.addr, b"http/1.1").await);
    c.write(handshake("GET", "/v1/models", KEYED).as_bytes())
        .await;
    let r = c.response().await.unwrap();
    assert_eq!(r.status, 403, "{}", r.head);
    assert!(c.closed_within(VERDICT).await);
    gw.stop().await;
}

#[tokio::test]
async fn a_head_handshake_gets_its_refusal_with_the_body_as_a_websocket_server_sends_it() {
    // vLLM's server answers any handshake as a WebSocket server, `HEAD` too: with a body.
    const REFUSAL: &[u8] = b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 70\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nFailed to open a WebSocket connection: unsupported HTTP method: HEAD.\n";
    let url = raw::upstream(REFUSAL).await;
    let gw = gateway_with("[upstream]\nurl = \"{U}\"\n", &[("U", url)], None).await;
    for version in ["1.1", "1.0"] {
        let mut c = Conn::open(gw.addr).await;
        let head = handshake("HEAD", "/v1/realtime", KEYED)
            .replace("HTTP/1.1", &format!("HTTP/{version}"));
        c.write(head.as_bytes()).await;
        let r = c.response().await.unwrap();
        assert_eq!(r.status, 405, "{}", r.head);
        assert_eq!(
            r.text(),
            "Failed to open a WebSocket connection: unsupported HTTP method: HEAD.\n"
        );
        assert!(c.closed_within(VERDICT).await);
    }
    gw.stop().await;
}

/// A client whose own pool is trusted: its sessions go to the default pool, since a
/// tunnel's bytes cannot be bounded as the trusted pool bounds every request.
#[tokio::test]
async fn a_trusted_pools_client_opens_its_sessions_on_the_default_pool() {
    let default = FakeVllm::start().await;
    let trusted = FakeVllm::start().await;
    let policy = format!(
        "[pools.default]\nmembers = [\"{{D}}\"]\n[pools.trusted]\nmembers = [\"{{T}}\"]\ntrusted = true\n\
         [identity]\nunknown = \"reject\"\n[clients.rt]\nkey_sha256 = [\"{}\"]\ntrusted = true\npool = \"trusted\"\n",
        hex::encode(mmgate::config::digest("sk-rt"))
    );
    let gw = gateway_with(&policy, &[("D", default.url()), ("T", trusted.url())], None).await;
    let mut c = Conn::open(gw.addr).await;
    let keyed = format!("{KEYED}Authorization: Bearer sk-rt\r\n");
    c.write(handshake("GET", "/v1/realtime", &keyed).as_bytes())
        .await;
    assert_eq!(c.response_to_head().await.unwrap().status, 101);
    assert_eq!(c.take(16).await.unwrap(), b"session.created\n");
    assert_eq!(default.received().len(), 1);
    assert!(trusted.received().is_empty());
    drop(c);
    // An unknown client is refused before any pool.
    let mut c = Conn::open(gw.addr).await;
    c.write(handshake("GET", "/v1/realtime", KEYED).as_bytes())
        .await;
    assert_eq!(c.response().await.unwrap().status, 401);
    gw.stop().await;
}
