//! Live reload: a valid policy is swapped in, an invalid one is refused while the old one
//! keeps serving (and counted), an open stream finishes under the old policy while new
//! requests use the new one, rate limits keep their state, the file watcher notices a
//! change (to the policy or a key file it names), a rotated server certificate is served,
//! and SIGHUP reloads the real binary.

mod support;
mod tls_support;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use mmgate::limits::RateClock;
use support::*;
use tls_support::*;
use tokio::sync::Semaphore;

const CHAT: &str = "/v1/chat/completions";
const KWARGS_BODY: &str =
    r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"max_pixels":1003520}}"#;

fn policy(fake: &FakeVllm, mode: &str, extra: &str) -> String {
    format!(
        "[upstream]\nurl = \"{}\"\n[gate]\ndefault = \"{mode}\"\n[reload]\nwatch = false\n{extra}",
        fake.url()
    )
}

async fn start(path: &std::path::Path, clock: Option<RateClock>) -> mmgate::server::Running {
    mmgate::server::start_file(path, Duration::from_secs(5), clock.unwrap_or_default())
        .await
        .unwrap()
}

async fn reloads(gw: &mmgate::server::Running, result: &str) -> f64 {
    let name = format!("mmgate_config_reloads_total{{result=\"{result}\"}}");
    metric(&client(), gw.admin, &name).await.unwrap_or(-1.0)
}

#[tokio::test]
async fn a_valid_policy_is_swapped_in_and_an_invalid_one_keeps_the_old_serving() {
    let fake = FakeVllm::start().await;
    let dir = scratch("valid");
    let path = dir.join("policy.toml");
    write_policy(&path, &policy(&fake, "shadow", ""));
    let gw = start(&path, None).await;
    let c = client();
    assert_eq!(post_json(&c, gw.addr, CHAT, KWARGS_BODY).await.status, 200);

    write_policy(&path, &policy(&fake, "reject", ""));
    gw.reload().await.unwrap();
    let r = post_json(&c, gw.addr, CHAT, KWARGS_BODY).await;
    assert_eq!(r.text(), mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS);
    assert_eq!(reloads(&gw, "success").await, 1.0);

    // An unknown key, then a bad value, then a certificate that does not exist: each is
    // refused whole, and the reject policy keeps serving.
    for bad in [
        policy(&fake, "pass", "[limits]\nmax_body = 1\n"),
        policy(&fake, "sometimes", ""),
        policy(
            &fake,
            "pass",
            "[tls]\ncert = \"/nonexistent.pem\"\nkey = \"/nonexistent.key\"\n",
        ),
    ] {
        write_policy(&path, &bad);
        let err = gw.reload().await.unwrap_err().to_string();
        assert!(!err.is_empty());
        let r = post_json(&c, gw.addr, CHAT, KWARGS_BODY).await;
        assert_eq!(r.status, 400, "the old policy keeps serving");
    }
    assert_eq!(reloads(&gw, "failure").await, 3.0);
    assert_eq!(reloads(&gw, "success").await, 1.0);

    // Changing the listeners needs a restart: refused too.
    write_policy(
        &path,
        &format!(
            "[listen]\naddr = \"127.0.0.1:1\"\n{}",
            policy(&fake, "pass", "")
        ),
    );
    assert!(gw
        .reload()
        .await
        .unwrap_err()
        .to_string()
        .contains("restart"));
    assert_eq!(reloads(&gw, "failure").await, 4.0);
    gw.stop().await;
}

#[tokio::test]
async fn an_open_stream_finishes_under_the_old_policy_while_new_requests_use_the_new() {
    let gate = Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        sse_gate: Some(gate.clone()),
        ..Default::default()
    })
    .await;
    let dir = scratch("stream");
    let path = dir.join("policy.toml");
    write_policy(&path, &policy(&fake, "shadow", ""));
    let gw = start(&path, None).await;

    // Shadow forwards the offending stream; its first event arrives, the rest is held.
    let mut stream = Stream::open(gw.addr, true).await;
    assert_eq!(stream.status, 200);
    let first = stream.next().await.unwrap().unwrap();
    assert_eq!(first, sse_event(0));

    write_policy(&path, &policy(&fake, "reject", ""));
    gw.reload().await.unwrap();
    let r = post_json(&client(), gw.addr, CHAT, KWARGS_BODY).await;
    assert_eq!(r.text(), mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS);

    gate.add_permits(1);
    let rest = stream.rest().await.unwrap();
    assert!(rest.starts_with(std::str::from_utf8(&sse_event(1)).unwrap()));
    assert!(rest.ends_with("data: [DONE]\n\n"), "{rest}");
    gw.stop().await;
}

#[tokio::test]
async fn a_surviving_clients_rate_limit_is_not_refilled_by_a_reload() {
    let fake = FakeVllm::start().await;
    let dir = scratch("rate");
    let path = dir.join("policy.toml");
    let key = hex::encode(mmgate::config::digest("sk-rate"));
    let client_table =
        format!("[clients.app]\nkey_sha256 = [\"{key}\"]\nrate_per_second = 1\nburst = 1\n");
    write_policy(&path, &policy(&fake, "shadow", &client_table));
    let clock = FakeRelativeClock::default();
    let gw = start(&path, Some(RateClock::Fake(clock.clone()))).await;
    let c = client();
    let auth = [("authorization", "Bearer sk-rate")];
    let call = || send(&c, gw.addr, "GET", "/v1/models", &auth, "");
    assert_eq!(call().await.status, 200);
    assert_eq!(call().await.status, 429);

    // Same client, same rate, another gate mode: the spent burst stays spent.
    write_policy(&path, &policy(&fake, "strip", &client_table));
    gw.reload().await.unwrap();
    assert_eq!(call().await.status, 429);
    clock.advance(Duration::from_secs(1));
    assert_eq!(call().await.status, 200);
    gw.stop().await;
}

#[tokio::test]
async fn the_file_watcher_reloads_a_changed_policy() {
    let fake = FakeVllm::start().await;
    let dir = scratch("watch");
    let path = dir.join("policy.toml");
    let watching = |mode: &str| {
        format!(
            "[upstream]\nurl = \"{}\"\n[gate]\ndefault = \"{mode}\"\n[reload]\ninterval_ms = 20\n",
            fake.url()
        )
    };
    write_policy(&path, &watching("shadow"));
    let gw = start(&path, None).await;
    let c = client();
    assert_eq!(post_json(&c, gw.addr, CHAT, KWARGS_BODY).await.status, 200);
    write_policy(&path, &watching("reject"));
    eventually("the watcher to swap in the reject policy", || async {
        post_json(&c, gw.addr, CHAT, KWARGS_BODY).await.status == 400
    })
    .await;
    assert_eq!(reloads(&gw, "success").await, 1.0);
    // A broken file is counted once, and the reject policy keeps serving.
    write_policy(&path, &format!("{}[nonsense]\n", watching("pass")));
    eventually("the watcher to refuse the broken policy", || async {
        reloads(&gw, "failure").await == 1.0
    })
    .await;
    assert_eq!(post_json(&c, gw.addr, CHAT, KWARGS_BODY).await.status, 400);
    gw.stop().await;
}

/// The status of `GET /v1/models` through the gateway with `key` as the bearer.
async fn models_with_key(
    c: &TestClient,
    addr: std::net::SocketAddr,
    key: &str,
) -> http::StatusCode {
    let auth = format!("Bearer {key}");
    send(
        c,
        addr,
        "GET",
        "/v1/models",
        &[("authorization", &auth)],
        "",
    )
    .await
    .status
}

/// A watched policy (`upstream`, then a client `app` whose key is in a file holding
/// `sk-first`) in a scratch directory `name`: the directory (removed when dropped), the
/// policy's path and the key file's.
fn key_file_policy(
    name: &str,
    upstream: &str,
) -> (Scratch, std::path::PathBuf, std::path::PathBuf) {
    let dir = scratch(name);
    let key_file = dir.join("app.key");
    std::fs::write(&key_file, "sk-first\n").unwrap();
    let path = dir.join("policy.toml");
    let text = format!(
        "{upstream}[reload]\ninterval_ms = 20\n[identity]\nunknown = \"reject\"\n[clients.app]\nkey_file = {:?}\n",
        key_file.display().to_string()
    );
    write_policy(&path, &text);
    (dir, path, key_file)
}

#[tokio::test]
async fn the_file_watcher_reloads_a_rotated_client_key() {
    let fake = FakeVllm::start().await;
    let upstream = format!("[upstream]\nurl = \"{}\"\n", fake.url());
    let (_dir, path, key_file) = key_file_policy("key-file", &upstream);
    let gw = start(&path, None).await;
    let c = client();
    let call = |key: &'static str| models_with_key(&c, gw.addr, key);
    assert_eq!(call("sk-first").await, 200);
    assert_eq!(call("sk-second-key").await, 401);
    // Only the key file changes: the watcher reloads, and the new key is the client's.
    replace_file(&key_file, b"sk-second-key\n");
    eventually("the watcher to read the rotated key", || async {
        call("sk-second-key").await == 200
    })
    .await;
    assert_eq!(call("sk-first").await, 401);
    assert_eq!(reloads(&gw, "success").await, 1.0);
    gw.stop().await;
}

/// An upstream that answers every request `200` with an empty body, but holds the answer to
/// a request whose head starts with `held` while `release` is unset; `asked` is notified
/// when such a request is held.
async fn held_upstream(
    held: &'static str,
    release: tokio::sync::watch::Receiver<bool>,
    asked: Arc<tokio::sync::Notify>,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut release = release.clone();
            let asked = asked.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.starts_with(held.as_bytes()) && !*release.borrow() {
                    asked.notify_one();
                    let _ = release.wait_for(|r| *r).await;
                }
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = conn.write_all(answer).await;
            });
        }
    });
    url
}

#[tokio::test]
async fn a_file_changed_while_the_gateway_starts_is_reloaded() {
    let (release, held) = tokio::sync::watch::channel(false);
    let asked = Arc::new(tokio::sync::Notify::new());
    let upstream = held_upstream("GET /health ", held, asked.clone()).await;
    let pool = format!(
        "[pools.default]\nmembers = [\"{upstream}\"]\n[vllm]\ndiscover_models = false\ndiscover_routes = false\n"
    );
    let (_dir, path, key_file) = key_file_policy("key-during-start", &pool);
    // The start waits for the pool's first health check, which the upstream holds: the
    // key file changes after the policy was read and before the gateway serves.
    let starting = tokio::spawn(async move { start(&path, None).await });
    asked.notified().await;
    replace_file(&key_file, b"sk-second-key\n");
    release.send(true).unwrap();
    let gw = starting.await.unwrap();
    let c = client();
    let call = |key: &'static str| models_with_key(&c, gw.addr, key);
    eventually(
        "the watcher to read the key changed during the start",
        || async { call("sk-second-key").await == 200 },
    )
    .await;
    assert_eq!(call("sk-first").await, 401);
    gw.stop().await;
}

#[tokio::test]
async fn a_file_changed_during_a_reload_is_reloaded() {
    let (release, held) = tokio::sync::watch::channel(true);
    let asked = Arc::new(tokio::sync::Notify::new());
    let upstream = held_upstream("GET /v1/models ", held, asked.clone()).await;
    let pool = format!("[upstream]\nurl = \"{upstream}\"\n[vllm]\ndiscover_routes = false\n");
    let (_dir, path, key_file) = key_file_policy("key-during-reload", &pool);
    let gw = start(&path, None).await;
    // The policy changes; the watcher's reload then asks the upstream for its models, which
    // it holds: the key file changes after the reload read it and before the reload ends.
    release.send(false).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    write_policy(&path, &format!("{text}# edited\n"));
    asked.notified().await;
    replace_file(&key_file, b"sk-second-key\n");
    release.send(true).unwrap();
    let c = client();
    let call = |key: &'static str| models_with_key(&c, gw.addr, key);
    eventually(
        "the watcher to read the key changed during the reload",
        || async { call("sk-second-key").await == 200 },
    )
    .await;
    assert_eq!(call("sk-first").await, 401);
    assert_eq!(reloads(&gw, "success").await, 2.0);
    gw.stop().await;
}

#[tokio::test]
async fn a_file_only_a_refused_policy_names_is_watched_until_it_loads() {
    let fake = FakeVllm::start().await;
    let upstream = format!("[upstream]\nurl = \"{}\"\n", fake.url());
    let (_dir, path, key_file) = key_file_policy("key-file-later", &upstream);
    // Start without the client; then name it, with a key file that is not there yet.
    let text = std::fs::read_to_string(&path).unwrap();
    let without = text.split("[identity]").next().unwrap().to_string();
    write_policy(&path, &without);
    std::fs::remove_file(&key_file).unwrap();
    let gw = start(&path, None).await;
    let c = client();
    let call = |key: &'static str| models_with_key(&c, gw.addr, key);
    assert_eq!(call("sk-first").await, 200);
    write_policy(&path, &text);
    eventually("the watcher to refuse the policy", || async {
        reloads(&gw, "failure").await == 1.0
    })
    .await;
    assert_eq!(call("sk-other").await, 200, "the old policy keeps serving");
    // The missing file appears: the policy that names it loads.
    replace_file(&key_file, b"sk-first\n");
    eventually(
        "the watcher to load the policy once its key file exists",
        || async { call("sk-other").await == 401 },
    )
    .await;
    assert_eq!(call("sk-first").await, 200);
    assert_eq!(reloads(&gw, "success").await, 1.0);
    assert_eq!(reloads(&gw, "failure").await, 1.0);
    gw.stop().await;
}

#[tokio::test]
async fn a_reload_that_turns_watching_on_starts_the_file_watcher() {
    let fake = FakeVllm::start().await;
    let dir = scratch("watch-on");
    let path = dir.join("policy.toml");
    write_policy(&path, &policy(&fake, "shadow", ""));
    let gw = start(&path, None).await;
    let c = client();
    assert_eq!(post_json(&c, gw.addr, CHAT, KWARGS_BODY).await.status, 200);
    let watching = |mode: &str| {
        format!(
            "[upstream]\nurl = \"{}\"\n[gate]\ndefault = \"{mode}\"\n[reload]\ninterval_ms = 20\n",
            fake.url()
        )
    };
    write_policy(&path, &watching("shadow"));
    gw.reload().await.unwrap();
    // The file changes: the watcher the reload turned on picks it up.
    write_policy(&path, &watching("reject"));
    eventually("the watcher to swap in the reject policy", || async {
        post_json(&c, gw.addr, CHAT, KWARGS_BODY).await.status == 400
    })
    .await;
    // Each change reloaded once: the SIGHUP-like reload, then the watcher's.
    assert_eq!(reloads(&gw, "success").await, 2.0);
    gw.stop().await;
}

#[tokio::test]
async fn a_rotated_server_certificate_is_served_after_reload() {
    let dir = scratch("rotate");
    let pki = Pki::new(&dir, "gw");
    let first = pki.server("first");
    let second = pki.server("second");
    let fake = FakeVllm::start().await;
    let path = dir.join("policy.toml");
    let with = |leaf: &Leaf| {
        format!(
            "{}{}",
            policy(&fake, "shadow", ""),
            tls_section(&pki, leaf, "none")
        )
    };
    write_policy(&path, &with(&first));
    let gw = start(&path, None).await;
    let presented = || async {
        let tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(pki.client_config(None)))
            .connect(name, tcp)
            .await
            .unwrap();
        tls.get_ref().1.peer_certificates().unwrap()[0].clone()
    };
    assert_eq!(presented().await, first.der);
    write_policy(&path, &with(&second));
    gw.reload().await.unwrap();
    assert_eq!(presented().await, second.der);
    gw.stop().await;
}

#[tokio::test]
async fn sighup_reloads_the_real_binary() {
    use support::serving::{Serving, ANY};
    let fake = FakeVllm::start().await;
    let dir = scratch("sighup");
    let path = dir.join("policy.toml");
    let text = |mode: &str| {
        format!(
            "[listen]\naddr = \"{ANY}\"\nadmin = \"{ANY}\"\n{}",
            policy(&fake, mode, "")
        )
    };
    write_policy(&path, &text("shadow"));
    let mut serving = Serving::started(
        Command::new(env!("CARGO_BIN_EXE_mmgate"))
            .args(["serve", "--policy", path.to_str().unwrap()])
            .stdout(Stdio::null()),
    )
    .await;
    let (listen, admin) = (serving.listen, serving.admin);
    let c = client();
    assert_eq!(post_json(&c, listen, CHAT, KWARGS_BODY).await.status, 200);
    write_policy(&path, &text("reject"));
    let pid = serving.child().id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    eventually("SIGHUP to swap in the reject policy", || async {
        post_json(&c, listen, CHAT, KWARGS_BODY).await.status == 400
    })
    .await;
    let name = "mmgate_config_reloads_total{result=\"success\"}";
    assert_eq!(metric(&c, admin, name).await, Some(1.0));
}
