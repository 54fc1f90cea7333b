//! What each policy action does to a request, through the live gateway in front of a fake
//! vLLM: pass streams the client's bytes through unread, shadow forwards them and counts
//! what vLLM 0.31 would reject, strip removes exactly the offending fields, reject answers
//! vLLM's own gate error; plus limits, upstream failures and the admin listener.

#[path = "support/raw.rs"]
mod raw;
mod support;

use std::convert::Infallible;

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use mmgate::error::{GATE_BODY_MEDIA_IO_KWARGS, GATE_BODY_MM_PROCESSOR_KWARGS};
use serde_json::Value;
use support::*;
use tokio::sync::Semaphore;

const CHAT: &str = "/v1/chat/completions";
const MSGS: &str = r#""model":"tiny","messages":[{"role":"user","content":"hi"}]"#;

fn chat(extra: &str) -> String {
    format!("{{{MSGS}{extra}}}")
}

fn mode(m: &str) -> String {
    format!("[gate]\ndefault = \"{m}\"\n")
}

/// A gateway with its own `[upstream]` lines (the upstream need not answer).
async fn gateway_at(upstream: &str, policy: &str) -> mmgate::server::Running {
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\n{upstream}\n{policy}"
    );
    let config = mmgate::config::Config::parse(&text).unwrap();
    mmgate::server::start(config, std::time::Duration::from_secs(5))
        .await
        .unwrap()
}

/// An upstream address where nothing listens: a port bound on loopback and released.
fn dead_upstream() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn url_line(authority: &str) -> String {
    format!("url = \"http://{authority}\"")
}

async fn metrics_text(c: &TestClient, admin: std::net::SocketAddr) -> String {
    send(c, admin, "GET", "/metrics", &[], Bytes::new())
        .await
        .text()
}

fn has_sample(text: &str, sample: &str) -> bool {
    text.lines().any(|l| l == sample)
}

fn error_of(r: &Reply) -> Value {
    assert_eq!(
        r.headers["content-type"],
        "application/json",
        "{}",
        r.text()
    );
    let v: Value = serde_json::from_slice(&r.body).expect("an OpenAI error envelope");
    v["error"].clone()
}

#[tokio::test]
async fn pass_forwards_bytes_host_path_and_query_as_sent_and_appends_forwarded_for() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("pass"), &fake).await;
    // Odd spacing, a duplicate key, an escape and a truthy gated field: all must arrive as sent.
    let body = "{\"model\":\"tiny\",  \"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9\"}],\n\t\"x\":1.50,\"x\":2,\"mm_processor_kwargs\":{\"num_crops\":4}}";
    let path = "/v1/chat/completions?api-version=2024-06-01&q=a%20b";
    let headers = [
        ("content-type", "application/json"),
        ("host", "api.example.test:8443"),
        ("x-client-tag", "abc"),
    ];
    let r = send(&client(), gw.addr, "POST", path, &headers, body.to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.headers.contains_key("x-mmgate-stripped"));
    let got = &fake.received()[0];
    assert_eq!(got.body, body.as_bytes(), "the body arrives byte for byte");
    assert_eq!(got.path, path);
    assert_eq!(got.headers["host"], "api.example.test:8443");
    assert_eq!(got.headers["x-client-tag"], "abc");
    assert_eq!(got.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(got.headers["content-length"], &body.len().to_string());

    let headers = [
        ("content-type", "application/json"),
        ("x-forwarded-for", "10.0.0.1"),
    ];
    send(&client(), gw.addr, "POST", CHAT, &headers, chat("")).await;
    let xff = &fake.received()[1].headers["x-forwarded-for"];
    assert_eq!(xff, "10.0.0.1, 127.0.0.1", "the client is appended");
}

#[tokio::test]
async fn a_request_without_a_valid_host_is_forwarded_with_the_address_the_client_reached() {
    // vLLM builds its redirect's `Location` from `Host`, or from its own address when
    // `Host` is missing or invalid: through mmgate, that address is mmgate's.
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("pass"), &fake).await;
    let body = chat("");
    for (host, expect) in [
        (None, gw.addr.to_string()),
        (Some("a b"), gw.addr.to_string()),
        (Some("api.test:99999"), gw.addr.to_string()),
        (Some("api.test:8443"), "api.test:8443".to_string()),
        (Some("[::1]:8000"), "[::1]:8000".to_string()),
    ] {
        fake.clear();
        let mut conn = raw::Conn::open(gw.addr).await;
        let host = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
        let head = format!(
            "POST {CHAT} HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write(head.as_bytes()).await;
        conn.write(body.as_bytes()).await;
        let r = conn.response().await.unwrap();
        assert_eq!(r.status, 200, "{host:?}: {}", r.text());
        assert_eq!(fake.received()[0].headers["host"], expect, "{host:?}");
    }

    // An HTTP/2 client's authority is its Host (RFC 9113 §8.3.1).
    fake.clear();
    let h2: Client<_, http_body_util::Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let authority = format!("localhost:{}", gw.addr.port());
    let req = http::Request::post(format!("http://{authority}{CHAT}"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from(body)))
        .unwrap();
    let res = h2.request(req).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(fake.received()[0].headers["host"], authority);
}

/// The offending-request log lines (their request ids) the real binary writes for one
/// offending chat request per `(api key, request id)` under `policy`.
async fn offending_log_ids(fake: &FakeVllm, policy: &str, sends: &[(&str, &str)]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use support::serving::{Serving, ANY};
    let dir = std::env::temp_dir().join(format!("mmgate-actions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pass-log.toml");
    let text = format!(
        "[listen]\naddr = \"{ANY}\"\nadmin = \"{ANY}\"\n[upstream]\nurl = \"{}\"\n{policy}",
        fake.url()
    );
    std::fs::write(&file, text).unwrap();
    let mut serving = Serving::started(
        Command::new(env!("CARGO_BIN_EXE_mmgate"))
            .args([
                "serve",
                "--policy",
                file.to_str().unwrap(),
                "--drain-seconds",
                "5",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped()),
    )
    .await;
    let listen = serving.listen;
    let stdout = BufReader::new(serving.child().stdout.take().unwrap());
    let lines =
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).collect::<Vec<_>>());
    let c = client();
    let body = chat(r#", "mm_processor_kwargs": {"num_crops": 4}"#);
    for (key, id) in sends {
        let headers = [
            ("content-type", "application/json"),
            ("x-api-key", key),
            ("x-request-id", id),
        ];
        let r = send(&c, listen, "POST", CHAT, &headers, body.clone()).await;
        assert_eq!(r.status, 200, "{id}: {}", r.text());
    }
    drop(c);
    let exit = serving.terminate(std::time::Duration::from_secs(10));
    assert!(exit.success(), "{exit:?}");
    let _ = std::fs::remove_dir_all(dir);
    lines
        .join()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "offending_request")
        .map(|v| v["request_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn pass_forwards_an_offending_request_unread_uncounted_and_unlisted() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("pass"), &fake).await;
    let c = client();
    let body = chat(r#", "mm_processor_kwargs": {"num_crops": 4}"#);
    let r = post_json(&c, gw.addr, CHAT, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!r.headers.contains_key("x-mmgate-stripped"));
    assert_eq!(fake.received()[0].body, body.as_bytes(), "byte-identical");
    let m = metrics_text(&c, gw.admin).await;
    assert!(
        has_sample(
            &m,
            r#"mmgate_requests_total{mode="pass",outcome="forwarded",route="chat"} 1"#
        ),
        "{m}"
    );
    assert!(
        !m.contains("mmgate_offending_requests_total{"),
        "pass counts no offending request: {m}"
    );
    assert!(
        has_sample(&m, "mmgate_request_body_bytes_count 0"),
        "pass never reads the body: {m}"
    );
    let inv = send(&c, gw.admin, "GET", "/inventory", &[], Bytes::new()).await;
    assert!(
        !inv.text().contains("mm_processor_kwargs"),
        "{}",
        inv.text()
    );
}

#[tokio::test]
async fn pass_writes_no_offending_log_line_where_a_shadow_client_does() {
    const KEY: &str = "sk-actions-watcher";
    let policy = format!(
        "[gate]\ndefault = \"pass\"\n[identity]\napi_key_header = \"x-api-key\"\n\
         [clients.watcher]\nkey_sha256 = [\"{}\"]\nmode = \"shadow\"\n",
        hex::encode(mmgate::config::digest(KEY))
    );
    let fake = FakeVllm::start().await;
    let sends = [("sk-unknown", "as-pass"), (KEY, "as-shadow")];
    let logged = offending_log_ids(&fake, &policy, &sends).await;
    assert_eq!(logged, ["as-shadow"], "only the shadow request is logged");
    let got = fake.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].body, got[1].body, "both forwarded as sent");
}

#[tokio::test]
async fn pass_refuses_a_declared_oversize_body_and_streams_an_undeclared_one() {
    let fake = FakeVllm::start().await;
    let gw = gateway(
        &format!("{}[limits]\nmax_body_bytes = 64\n", mode("pass")),
        &fake,
    )
    .await;
    let big = chat(&format!(r#","pad":"{}""#, "x".repeat(100)));
    let r = post_json(&client(), gw.addr, CHAT, &big).await;
    assert_eq!(r.status, 413);
    assert_eq!(error_of(&r)["code"], 413);
    assert!(
        fake.received().is_empty(),
        "a 413 never reaches the upstream"
    );

    // No Content-Length: nothing to refuse on, so the body streams through, limit or not.
    let pad = format!(r#""pad":"{}","#, "x".repeat(40));
    let chunks = [
        r#"{"model":"tiny","#,
        &pad,
        &pad,
        r#""mm_processor_kwargs":{"num_crops":4},"messages":[]}"#,
    ];
    let (status, _) = post_chunked(gw.addr, &chunks).await;
    assert_eq!(status, 200);
    let got = fake.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, chunks.concat().as_bytes(), "byte-identical");
    assert!(got[0].body.len() > 64);
    assert!(!got[0].headers.contains_key("content-length"));
}

#[tokio::test]
async fn pass_to_a_trusted_pool_still_enforces_its_value_limits() {
    const KEY: &str = "sk-actions-vision";
    let (default, trusted, gw) = support::trusted::keyed_two_pools(
        "pass",
        KEY,
        "[pools.trusted.allow.mm_processor_kwargs]\nmax_pixels = { max = 1003520 }",
        "mode = \"pass\"\npool = \"trusted\"",
    )
    .await;
    let (c, addr) = (client(), gw.addr);
    let post = |key: &'static str, kwargs: &'static str| {
        let body = chat(&format!(r#", "mm_processor_kwargs": {kwargs}"#));
        let c = c.clone();
        async move {
            let h = [("content-type", "application/json"), ("x-api-key", key)];
            (send(&c, addr, "POST", CHAT, &h, body.clone()).await, body)
        }
    };
    let (r, _) = post(KEY, r#"{"max_pixels": 2000000}"#).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(error_of(&r)["message"]
        .as_str()
        .unwrap()
        .contains("max_pixels <= 1003520"));
    assert!(
        trusted.received().is_empty(),
        "over the bound: not forwarded"
    );
    let (r, body) = post(KEY, r#"{"max_pixels": 1003520}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(trusted.received()[0].body, body.as_bytes());
    // An anonymous pass request to the plain default pool is not inspected: of the three
    // offending requests only the trusted client's two (refused and forwarded) are counted.
    let (r, body) = post("sk-unknown", r#"{"max_pixels": 2000000}"#).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(default.received()[0].body, body.as_bytes());
    let m = metrics_text(&c, gw.admin).await;
    let total: f64 = m
        .lines()
        .filter(|l| l.starts_with("mmgate_offending_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(total, 2.0, "{m}");
}

#[tokio::test]
async fn shadow_forwards_unchanged_and_counts_the_offending_request() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("shadow"), &fake).await;
    let c = client();
    let body = chat(r#", "mm_processor_kwargs": {"num_crops": 4}"#);
    let r = post_json(&c, gw.addr, CHAT, &body).await;
    assert_eq!(r.status, 200);
    assert!(!r.headers.contains_key("x-mmgate-stripped"));
    assert_eq!(fake.received()[0].body, body.as_bytes());
    let m = metrics_text(&c, gw.admin).await;
    assert!(
        has_sample(
            &m,
            r#"mmgate_offending_requests_total{field="mm_processor_kwargs",mode="shadow",route="chat"} 1"#
        ),
        "{m}"
    );
    assert!(has_sample(
        &m,
        r#"mmgate_requests_total{mode="shadow",outcome="forwarded",route="chat"} 1"#
    ));
}

#[tokio::test]
async fn strip_removes_both_truthy_fields_and_nothing_else() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("strip"), &fake).await;
    let c = client();
    let body = chat(concat!(
        r#", "mm_processor_kwargs": {"num_crops": 4}, "temperature": 0.5,"#,
        r#" "media_io_kwargs": {"image": {"fps": 2}}, "extra_args": {"mm_processor_kwargs": {"a": 1}}"#
    ));
    let r = post_json(&c, gw.addr, CHAT, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.headers["x-mmgate-stripped"],
        "mm_processor_kwargs, media_io_kwargs"
    );
    let got = &fake.received()[0];
    assert_eq!(
        got.headers["content-length"],
        got.body.len().to_string().as_str(),
        "Content-Length is that of the stripped body"
    );
    assert!(got.body.len() < body.len());
    let mut want: Value = serde_json::from_str(&body).unwrap();
    let obj = want.as_object_mut().unwrap();
    obj.remove("mm_processor_kwargs");
    obj.remove("media_io_kwargs");
    let sent: Value = serde_json::from_slice(&got.body).expect("the stripped body is JSON");
    assert_eq!(sent, want);
    let m = metrics_text(&c, gw.admin).await;
    for f in ["mm_processor_kwargs", "media_io_kwargs"] {
        let line = format!(r#"mmgate_stripped_fields_total{{field="{f}",route="chat"}} 1"#);
        assert!(has_sample(&m, &line), "{line} in\n{m}");
    }
}

#[tokio::test]
async fn strip_keeps_fields_whose_value_is_an_empty_object() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("strip"), &fake).await;
    let c = client();
    let one = chat(r#","mm_processor_kwargs":{"num_crops":4},"media_io_kwargs":{}"#);
    let r = post_json(&c, gw.addr, CHAT, &one).await;
    assert_eq!(r.headers["x-mmgate-stripped"], "mm_processor_kwargs");
    assert_eq!(
        std::str::from_utf8(&fake.received()[0].body).unwrap(),
        chat(r#","media_io_kwargs":{}"#)
    );
    fake.clear();
    let none = chat(r#","mm_processor_kwargs":{},"media_io_kwargs":{}"#);
    let r = post_json(&c, gw.addr, CHAT, &none).await;
    assert_eq!(r.status, 200);
    assert!(!r.headers.contains_key("x-mmgate-stripped"));
    assert_eq!(fake.received()[0].body, none.as_bytes());
}

#[tokio::test]
async fn reject_answers_vllms_exact_gate_body_and_upstream_sees_nothing() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("reject"), &fake).await;
    let c = client();
    let cases = [
        (
            r#","mm_processor_kwargs":{"a":1}"#,
            GATE_BODY_MM_PROCESSOR_KWARGS,
        ),
        (
            r#","media_io_kwargs":{"image":{}}"#,
            GATE_BODY_MEDIA_IO_KWARGS,
        ),
        (
            r#","media_io_kwargs":{"image":{}},"mm_processor_kwargs":{"a":1}"#,
            GATE_BODY_MM_PROCESSOR_KWARGS,
        ),
    ];
    for (extra, want) in cases {
        let r = post_json(&c, gw.addr, CHAT, &chat(extra)).await;
        assert_eq!(r.status, 400, "{extra}");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.text(), want, "{extra}");
    }
    assert!(fake.received().is_empty());
    let r = post_json(&c, gw.addr, CHAT, &chat(r#","mm_processor_kwargs":{}"#)).await;
    assert_eq!(r.status, 200, "a falsy field passes the gate");
}

#[tokio::test]
async fn a_header_the_client_names_in_connection_is_judged_as_absent() {
    // Such a header is removed before forwarding, so the verdict may not rest on it: with
    // it, vLLM's SageMaker layer refuses the request; without it, vLLM dispatches the body
    // to chat, which gates the kwargs.
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("reject"), &fake).await;
    let body = chat(r#","mm_processor_kwargs":{"fps":1}"#);
    let named = "X-Amzn-SageMaker-Session-Id: s1\r\nConnection: x-amzn-sagemaker-session-id\r\n";
    for extra in ["", named] {
        let mut conn = raw::Conn::open(gw.addr).await;
        let len = format!("{extra}Content-Length: {}\r\n", body.len());
        conn.write(raw::head("/invocations", &len).as_bytes()).await;
        conn.write(body.as_bytes()).await;
        let r = conn.response().await.unwrap();
        assert_eq!(r.status, 400, "{extra:?}: {}", r.text());
        assert_eq!(r.text(), GATE_BODY_MM_PROCESSOR_KWARGS, "{extra:?}");
    }
    // Named but not removed by the client, the session header is vLLM's refusal: forwarded.
    let mut conn = raw::Conn::open(gw.addr).await;
    let extra = format!(
        "X-Amzn-SageMaker-Session-Id: s1\r\nContent-Length: {}\r\n",
        body.len()
    );
    conn.write(raw::head("/invocations", &extra).as_bytes())
        .await;
    conn.write(body.as_bytes()).await;
    assert_eq!(conn.response().await.unwrap().status, 200);
    assert_eq!(fake.received().len(), 1);

    // A content type named in `Connection` is vLLM's missing one.
    let mut conn = raw::Conn::open(gw.addr).await;
    let extra = format!(
        "Connection: content-type\r\nContent-Length: {}\r\n",
        body.len()
    );
    conn.write(raw::head(CHAT, &extra).as_bytes()).await;
    conn.write(body.as_bytes()).await;
    let r = conn.response().await.unwrap();
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Unsupported Media Type"), "{}", r.text());
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn reject_answers_vllms_401_first_when_the_upstreams_key_is_missing() {
    let fake = FakeVllm::start().await;
    let digest = hex::encode(mmgate::config::digest("sk-up"));
    let policy = format!(
        "{}[vllm]\napi_key_sha256 = [\"{digest}\"]\n",
        mode("reject")
    );
    let gw = gateway(&policy, &fake).await;
    let c = client();
    let offending = chat(r#","mm_processor_kwargs":{"a":1}"#);
    let with = |auth: &'static str| {
        [
            ("content-type", "application/json"),
            ("authorization", auth),
        ]
    };
    // vLLM's key check runs before its gate on /v1/...: no key, or a wrong one, is its 401.
    for auth in ["", "Bearer sk-other", "Basic sk-up", "Bearer  sk-up"] {
        let r = send(&c, gw.addr, "POST", CHAT, &with(auth), offending.clone()).await;
        assert_eq!(r.status, 401, "{auth:?}");
        assert_eq!(r.text(), r#"{"error":"Unauthorized"}"#, "{auth:?}");
        assert_eq!(r.headers["content-type"], "application/json");
    }
    let r = post_json(&c, gw.addr, CHAT, &offending).await;
    assert_eq!(r.status, 401);
    // With the key, the gate's own error; on a path vLLM does not guard, the gate's error.
    let r = send(
        &c,
        gw.addr,
        "POST",
        CHAT,
        &with("bearer sk-up"),
        offending.clone(),
    )
    .await;
    assert_eq!(
        (r.status.as_u16(), r.text()),
        (400, GATE_BODY_MM_PROCESSOR_KWARGS.to_string())
    );
    let tok = r#"{"model":"tiny","prompt":"hi","mm_processor_kwargs":{"a":1}}"#;
    let r = post_json(&c, gw.addr, "/tokenize", tok).await;
    assert_eq!(
        (r.status.as_u16(), r.text()),
        (400, GATE_BODY_MM_PROCESSOR_KWARGS.to_string())
    );
    assert!(fake.received().is_empty());
    // A request that passes the gate goes on as sent: the upstream checks its key itself.
    let r = send(
        &c,
        gw.addr,
        "POST",
        CHAT,
        &with("Bearer sk-other"),
        chat(""),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        fake.received()[0].headers["authorization"],
        "Bearer sk-other"
    );
    let rejected = r#"mmgate_requests_total{mode="reject",outcome="rejected",route="chat"} 6"#;
    let text = metrics_text(&c, gw.admin).await;
    assert!(has_sample(&text, rejected), "{rejected} in\n{text}");
}

#[tokio::test]
async fn under_the_upstreams_root_path_prefixed_paths_are_gated_as_vllm_routes_them() {
    let fake = FakeVllm::start().await;
    let c = client();
    let offending = chat(r#","mm_processor_kwargs":{"a":1}"#);
    let prefixed = "/api/v1/chat/completions";
    // Without `root_path`, vLLM would answer 404 to the prefixed path: forwarded unread.
    let plain = gateway(&mode("strip"), &fake).await;
    let r = post_json(&c, plain.addr, prefixed, &offending).await;
    assert!(!r.headers.contains_key("x-mmgate-stripped"));
    assert_eq!(fake.received()[0].body, offending.as_bytes());
    fake.clear();
    // Under `--root-path /api` it is the chat route: stripped, and forwarded to the path sent.
    let root = "[vllm]\nroot_path = \"/api\"\n";
    let strip = gateway(&format!("{}{root}", mode("strip")), &fake).await;
    for path in [prefixed, "/%61pi/v1/chat/completions", CHAT] {
        let r = post_json(&c, strip.addr, path, &offending).await;
        assert_eq!(
            r.headers["x-mmgate-stripped"], "mm_processor_kwargs",
            "{path}"
        );
        let got = fake.received().pop().unwrap();
        assert_eq!(
            (got.path.as_str(), &got.body[..]),
            (path, chat("").as_bytes())
        );
    }
    for path in [
        "/apix/v1/chat/completions",
        "/api//v1/chat/completions",
        "/api",
    ] {
        let r = post_json(&c, strip.addr, path, &offending).await;
        assert!(!r.headers.contains_key("x-mmgate-stripped"), "{path}");
    }
    // vLLM's key check takes the root path off first: 401 on `/api/v1/...` without the key,
    // the gate's 400 on `/api/tokenize`, which it does not guard.
    let digest = hex::encode(mmgate::config::digest("sk-up"));
    let policy = format!("{}{root}api_key_sha256 = [\"{digest}\"]\n", mode("reject"));
    let reject = gateway(&policy, &fake).await;
    let r = post_json(&c, reject.addr, prefixed, &offending).await;
    assert_eq!(
        (r.status.as_u16(), r.text()),
        (401, r#"{"error":"Unauthorized"}"#.into())
    );
    let tok = r#"{"model":"tiny","prompt":"hi","mm_processor_kwargs":{"a":1}}"#;
    let r = post_json(&c, reject.addr, "/api/tokenize", tok).await;
    assert_eq!(
        (r.status.as_u16(), r.text()),
        (400, GATE_BODY_MM_PROCESSOR_KWARGS.to_string())
    );
}

#[tokio::test]
async fn the_nesting_limit_is_the_discovered_upstreams() {
    let full = FakeVllm::start().await;
    let render = FakeVllm::start_with(FakeOpts {
        missing_routes: FULL_SERVER_PATHS.to_vec(),
        ..Default::default()
    })
    .await;
    let c = client();
    let parse_error = mmgate::contract::PARSE_ERROR_BODY;
    let gate = GATE_BODY_MM_PROCESSOR_KWARGS;
    // `total` containers, the top-level object and the kwargs object included.
    let body = |total: usize| {
        let arrays = total - 2;
        format!(
            r#"{{"model":"tiny","prompt":"hi","mm_processor_kwargs":{{"a":{}1{}}}}}"#,
            "[".repeat(arrays),
            "]".repeat(arrays)
        )
    };
    // A render server (only render routes) takes 970, `vllm serve` 968; a set limit wins.
    let override_ = format!("{}[limits]\nmax_json_depth = 970\n", mode("reject"));
    for (fake, policy, limit) in [
        (&render, mode("reject"), 970),
        (&full, mode("reject"), 968),
        (&full, override_, 970),
    ] {
        let gw = gateway(&policy, fake).await;
        for (total, want) in [(limit, gate), (limit + 1, parse_error)] {
            let r = post_json(&c, gw.addr, "/tokenize", &body(total)).await;
            assert_eq!(
                (r.status.as_u16(), r.text()),
                (400, want.to_string()),
                "{limit} {total}"
            );
        }
        gw.stop().await;
    }
    assert!(full.received().is_empty() && render.received().is_empty());
}

#[tokio::test]
async fn model_discovery_sends_the_upstreams_key_when_the_policy_gives_it() {
    let fake = FakeVllm::with_api_key("sk-up").await;
    let file = std::env::temp_dir().join(format!("mmgate-up-key-{}", std::process::id()));
    std::fs::write(&file, "sk-up\n").unwrap();
    let digest = hex::encode(mmgate::config::digest("sk-up"));
    let c = client();
    // An unknown model is vLLM's 404 before its gate: judged only once discovery has the
    // served models, so the request then goes on (its field nulled) instead of the gate's 400.
    let body = r#"{"model":"nope","messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"a":1}}"#;
    let key = [
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-up"),
    ];
    for (vllm, discovered) in [
        (
            format!("api_key_file = {:?}", file.display().to_string()),
            true,
        ),
        (format!("api_key_sha256 = [\"{digest}\"]"), false),
    ] {
        fake.clear();
        let gw = gateway(&format!("{}[vllm]\n{vllm}\n", mode("reject")), &fake).await;
        let r = send(&c, gw.addr, "POST", CHAT, &key, body.to_string()).await;
        if discovered {
            assert_eq!(r.status, 200, "{vllm}: {}", r.text());
            assert_eq!(fake.received().len(), 1);
        } else {
            assert_eq!(
                (r.status.as_u16(), r.text()),
                (400, GATE_BODY_MM_PROCESSOR_KWARGS.to_string())
            );
            assert!(fake.received().is_empty());
        }
    }
    let _ = std::fs::remove_file(file);
}

/// Log output of the current thread's tracing events.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl tracing_subscriber::fmt::MakeWriter<'_> for Captured {
    type Writer = Captured;
    fn make_writer(&self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn a_failed_model_discovery_is_logged_once_with_why() {
    let fake = FakeVllm::with_api_key("sk-up").await;
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    // The test's runtime has one thread: the gateway's start and refreshes log on it.
    let _guard = tracing::subscriber::set_default(subscriber);
    let file = std::env::temp_dir().join(format!("mmgate-wrong-key-{}", std::process::id()));
    std::fs::write(&file, "sk-wrong\n").unwrap();
    let wrong = format!("[vllm]\napi_key_file = {:?}\n", file.display().to_string());
    for (policy, hint) in [
        (String::new(), "needs its key in vllm.api_key_file"),
        (wrong, "it refused the key in vllm.api_key_file"),
    ] {
        logs.0.lock().unwrap().clear();
        let gw = gateway(&format!("{}{policy}", mode("reject")), &fake).await;
        gw.gateway.refresh_facts().await;
        let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        let warnings: Vec<_> = text.lines().filter(|l| l.contains("/v1/models")).collect();
        assert_eq!(warnings.len(), 1, "logged once: {text}");
        assert!(warnings[0].contains("WARN"), "{text}");
        assert!(warnings[0].contains("answered 401"), "{text}");
        assert!(warnings[0].contains(hint), "{hint} in {text}");
        assert!(
            !text.contains("sk-wrong"),
            "the key is never logged: {text}"
        );
    }
    let _ = std::fs::remove_file(file);
}

#[tokio::test]
async fn a_route_override_strips_tokenize_while_the_default_rejects() {
    let fake = FakeVllm::start().await;
    let policy = "[gate]\ndefault = \"reject\"\n[gate.routes]\ntokenize = \"strip\"\n";
    let gw = gateway(policy, &fake).await;
    let c = client();
    let tok = r#"{"model":"tiny","prompt":"hi","mm_processor_kwargs":{"a":1}}"#;
    let r = post_json(&c, gw.addr, "/tokenize", tok).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.headers["x-mmgate-stripped"], "mm_processor_kwargs");
    assert_eq!(
        fake.received()[0].body,
        r#"{"model":"tiny","prompt":"hi"}"#.as_bytes()
    );
    let r = post_json(
        &c,
        gw.addr,
        CHAT,
        &chat(r#","mm_processor_kwargs":{"a":1}"#),
    )
    .await;
    assert_eq!(r.text(), GATE_BODY_MM_PROCESSOR_KWARGS);
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn unclassifiable_bodies_are_refused_or_forwarded_as_the_policy_says() {
    let body = chat(r#","mm_processor_kwargs":{"a":1}"#);
    let plain = [("content-type", "text/plain")];
    let fake = FakeVllm::start().await;
    let gw = gateway(
        &format!("{}on_unclassifiable = \"reject\"\n", mode("strip")),
        &fake,
    )
    .await;
    let r = send(&client(), gw.addr, "POST", CHAT, &plain, body.clone()).await;
    assert_eq!(r.status, 400);
    // vLLM's check, so vLLM's very body.
    assert_eq!(r.body, mmgate::error::CONTENT_TYPE_BODY.as_bytes());
    let json = [("content-type", "application/json")];
    let r = send(
        &client(),
        gw.addr,
        "POST",
        CHAT,
        &json,
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(r.status, 400);
    // vLLM's own answer to a body its JSON parser refuses.
    assert_eq!(
        r.text(),
        r#"{"error":{"message":"1 validation error:\n  {'type': 'json_invalid', 'loc': 'body.1', 'msg': 'JSON decode error', 'input': '<dict of 0 items>', 'ctx': {'error': 'Expecting property name enclosed in double quotes'}}","type":"Bad Request","param":"body.1","code":400}}"#
    );
    // One whose words mmgate cannot be sure of (what vLLM's `sanitize_message` makes of a
    // traceback's `File "..."` text) gets its own.
    let r = send(
        &client(),
        gw.addr,
        "POST",
        CHAT,
        &json,
        br#""File \"x\", line 1, in f""#.to_vec(),
    )
    .await;
    assert_eq!(r.status, 400);
    let e = error_of(&r);
    assert_eq!(e["code"], 400);
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("cannot be inspected"));
    assert!(fake.received().is_empty());

    let gw = gateway(
        &format!("{}on_unclassifiable = \"forward\"\n", mode("strip")),
        &fake,
    )
    .await;
    let r = send(&client(), gw.addr, "POST", CHAT, &plain, body.clone()).await;
    assert_eq!(r.status, 200, "vLLM answers it itself");
    let got = &fake.received()[0];
    assert_eq!(got.body, body.as_bytes(), "forwarded unchanged");
    assert_eq!(got.headers["content-type"], "text/plain");
}

#[tokio::test]
async fn ungated_routes_and_non_post_methods_pass_through_untouched() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("reject"), &fake).await;
    let c = client();
    let r = send(&c, gw.addr, "GET", "/v1/models", &[], Bytes::new()).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#
    );
    let offending = chat(r#", "mm_processor_kwargs": {"a": 1}"#);
    let json = [("content-type", "application/json")];
    for (method, path) in [("POST", "/v1/messages"), ("PUT", CHAT), ("GET", CHAT)] {
        fake.clear();
        let r = send(&c, gw.addr, method, path, &json, offending.clone()).await;
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
        let got = fake.received();
        assert_eq!(got.len(), 1, "{method} {path} reaches the upstream");
        assert_eq!(got[0].method.as_str(), method);
        assert_eq!(got[0].body, offending.as_bytes(), "{method} {path}");
    }
}

#[tokio::test]
async fn a_body_over_the_limit_with_content_length_gets_413() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[limits]\nmax_body_bytes = 64\n", &fake).await;
    let big = chat(&format!(r#","pad":"{}""#, "x".repeat(100)));
    let r = post_json(&client(), gw.addr, CHAT, &big).await;
    assert_eq!(r.status, 413);
    let e = error_of(&r);
    assert_eq!(e["code"], 413);
    assert_eq!(e["type"], "RequestEntityTooLarge");
    assert!(e["message"].as_str().unwrap().contains("64 bytes"), "{e}");
    assert!(fake.received().is_empty());
}

type Chunks = futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>;

/// POSTs `chunks` as a streamed body: hyper sends it chunked, with no Content-Length.
async fn post_chunked(addr: std::net::SocketAddr, chunks: &[&str]) -> (u16, Bytes) {
    let frames: Vec<_> = chunks
        .iter()
        .map(|c| Ok(Frame::data(Bytes::from(c.to_string()))))
        .collect();
    let body: StreamBody<Chunks> = StreamBody::new(futures_util::stream::iter(frames));
    assert_eq!(
        body.size_hint().exact(),
        None,
        "no length is known up front"
    );
    let c: Client<_, StreamBody<Chunks>> = Client::builder(TokioExecutor::new()).build_http();
    let req = http::Request::post(format!("http://{addr}{CHAT}"))
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let res = c.request(req).await.unwrap();
    let status = res.status().as_u16();
    (status, res.into_body().collect().await.unwrap().to_bytes())
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_gets_413_and_one_under_it_is_forwarded() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[limits]\nmax_body_bytes = 64\n", &fake).await;
    let pad = "x".repeat(40);
    let (status, body) = post_chunked(gw.addr, &[r#"{"model":"tiny","#, &pad, &pad]).await;
    assert_eq!(status, 413);
    let e: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(e["error"]["code"], 413);
    assert!(fake.received().is_empty());

    let (status, _) = post_chunked(gw.addr, &[r#"{"model":"tiny","#, r#""messages":[]}"#]).await;
    assert_eq!(status, 200);
    assert_eq!(
        fake.received()[0].body,
        r#"{"model":"tiny","messages":[]}"#.as_bytes()
    );
}

#[tokio::test]
async fn an_unreachable_upstream_gives_502_naming_it_and_is_counted() {
    let authority = dead_upstream();
    let gw = gateway_at(&url_line(&authority), &mode("shadow")).await;
    let c = client();
    for path in [CHAT, "/v1/models"] {
        let r = post_json(&c, gw.addr, path, &chat("")).await;
        assert_eq!(r.status, 502, "{path}");
        let e = error_of(&r);
        assert_eq!(e["code"], 502);
        assert!(
            e["message"].as_str().unwrap().contains(&authority),
            "{e} names {authority}"
        );
    }
    let m = metrics_text(&c, gw.admin).await;
    assert!(
        has_sample(&m, r#"mmgate_upstream_errors_total{kind="connect"} 2"#),
        "{m}"
    );
}

#[tokio::test]
async fn an_upstream_that_sends_no_headers_in_time_gives_504_and_is_counted() {
    // The fake takes the request and then waits for a permit that never comes.
    let hold = std::sync::Arc::new(Semaphore::new(0));
    let fake = FakeVllm::start_with(FakeOpts {
        hold: Some(hold),
        ..Default::default()
    })
    .await;
    let upstream = format!(
        "{}\nresponse_timeout_ms = 200",
        url_line(&fake.addr.to_string())
    );
    let gw = gateway_at(&upstream, "").await;
    let c = client();
    let r = post_json(&c, gw.addr, CHAT, &chat("")).await;
    assert_eq!(r.status, 504);
    let e = error_of(&r);
    assert_eq!(e["code"], 504);
    assert_eq!(e["type"], "GatewayTimeout");
    assert_eq!(
        fake.received().len(),
        1,
        "the request did reach the upstream"
    );
    let m = metrics_text(&c, gw.admin).await;
    assert!(
        has_sample(&m, r#"mmgate_upstream_errors_total{kind="timeout"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn admin_reports_health_readiness_and_metrics() {
    let fake = FakeVllm::start().await;
    let gw = gateway(&mode("shadow"), &fake).await;
    let c = client();
    let get = |addr, path: &'static str| send(&c, addr, "GET", path, &[], Bytes::new());
    assert_eq!(get(gw.admin, "/healthz").await.status, 200);
    assert_eq!(get(gw.admin, "/readyz").await.status, 200);
    post_json(&c, gw.addr, CHAT, &chat("")).await;
    let m = get(gw.admin, "/metrics").await;
    assert_eq!(m.status, 200);
    assert!(m.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert!(
        has_sample(
            &m.text(),
            r#"mmgate_requests_total{mode="shadow",outcome="forwarded",route="chat"} 1"#
        ),
        "{}",
        m.text()
    );

    let down = gateway_at(&url_line(&dead_upstream()), "").await;
    assert_eq!(
        get(down.admin, "/healthz").await.status,
        200,
        "the process is up"
    );
    let r = get(down.admin, "/readyz").await;
    assert_eq!(r.status, 503, "not ready while vLLM is down: {}", r.text());
}

/// reject's answer carries what vLLM's CORS middleware adds to vLLM's own (its defaults:
/// every origin), so a browser client reads it as it reads vLLM's; a forwarded answer
/// carries the upstream's.
#[tokio::test]
async fn a_rejected_request_gets_vllms_cors_headers() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    let c = client();
    let body = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    const JSON: (&str, &str) = ("content-type", "application/json");
    const ORIGIN: (&str, &str) = ("origin", "https://app.example");
    let chat = |headers: &'static [(&'static str, &'static str)], body: &'static str| {
        send(&c, gw.addr, "POST", "/v1/chat/completions", headers, body)
    };
    let r = chat(&[JSON, ORIGIN], body).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body, GATE_BODY_MM_PROCESSOR_KWARGS.as_bytes());
    assert_eq!(r.headers["access-control-allow-origin"], "*");
    assert_eq!(r.headers["vary"], "Origin");
    let r = chat(&[JSON], body).await;
    assert!(!r.headers.contains_key("access-control-allow-origin"));
    assert_eq!(r.headers["vary"], "Origin");
    let r = chat(&[JSON, ORIGIN], r#"{"model":"tiny","messages":[]}"#).await;
    assert_eq!(r.status, 200);
    assert!(!r.headers.contains_key("vary"), "the fake sends none");
    // An unhandled exception's 500 is given outside the middleware: none there.
    let deep = format!("{}{}", "[".repeat(966), "]".repeat(966));
    let r = send(&c, gw.addr, "POST", "/invocations", &[JSON, ORIGIN], deep).await;
    assert_eq!(r.status, 500);
    assert!(
        !r.headers.contains_key("vary") && !r.headers.contains_key("access-control-allow-origin")
    );
    gw.stop().await;
}
