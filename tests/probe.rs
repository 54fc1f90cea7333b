//! `mmgate probe`: the acceptance matrix against in-process targets — a gateway in `reject`
//! mode in front of the fake vLLM answers exactly like an untrusted vLLM 0.31 at the gate,
//! the fake vLLM itself accepts everything like a trusted one, and a `strip` gateway serves
//! everything and says what it removed.

mod support;

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use mmgate::probe::{probe, Expect, ProbeOpts, ProbeReport};
use support::{gateway, FakeVllm};

const BIN: &str = env!("CARGO_BIN_EXE_mmgate");

fn opts(target: String, expect: Expect) -> ProbeOpts {
    ProbeOpts {
        target,
        model: None,
        api_key: None,
        routes: None,
        expect,
        timeout: Duration::from_secs(10),
    }
}

fn mismatches(r: &ProbeReport) -> String {
    r.rows
        .iter()
        .filter(|r| !r.ok)
        .map(|r| format!("{} {} {}: {:?}\n", r.route, r.path, r.case, r.note))
        .collect()
}

fn row<'a>(r: &'a ProbeReport, route: &str, case: &str) -> &'a mmgate::probe::ProbeRow {
    r.rows
        .iter()
        .find(|x| x.route == route && x.case == case)
        .unwrap_or_else(|| panic!("no row {route} {case}"))
}

#[tokio::test]
async fn a_reject_gateway_passes_the_untrusted_matrix_on_every_route() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    let r = probe(opts(format!("http://{}", gw.addr), Expect::Untrusted))
        .await
        .unwrap();
    assert_eq!(r.mismatches, 0, "{}", mismatches(&r));
    assert_eq!(r.routes_from, "openapi");
    assert_eq!(r.model, "tiny");
    // 18 probe rows (17 gated paths, chat twice: text and image) × 6 cases.
    assert_eq!(r.rows.len(), 18 * 6);
    let cell = |route, case| {
        let x = row(&r, route, case);
        (x.status, x.param.as_deref())
    };
    assert_eq!(cell("chat", "none"), (200, None));
    assert_eq!(
        cell("chat", "mm_processor_kwargs"),
        (400, Some("mm_processor_kwargs"))
    );
    assert_eq!(
        cell("chat+image", "media_io_kwargs"),
        (400, Some("media_io_kwargs"))
    );
    assert_eq!(
        cell("completions", "both"),
        (400, Some("mm_processor_kwargs"))
    );
    assert_eq!(cell("pooling", "null"), (200, None));
    assert_eq!(cell("rerank", "{}"), (200, None));
    assert!(r.started.ends_with('Z') && r.finished.ends_with('Z') && r.started <= r.finished);
    assert!(r.version.is_some());
    gw.stop().await;
}

#[tokio::test]
async fn the_fake_vllm_passes_the_trusted_matrix_and_fails_the_untrusted_one() {
    let fake = FakeVllm::start().await;
    let trusted = probe(opts(fake.url(), Expect::Trusted)).await.unwrap();
    assert_eq!(trusted.mismatches, 0, "{}", mismatches(&trusted));
    let untrusted = probe(opts(fake.url(), Expect::Untrusted)).await.unwrap();
    // Every truthy case (mm, io, both) on every route is a mismatch, nothing else.
    assert_eq!(untrusted.mismatches, 18 * 3, "{}", mismatches(&untrusted));
    let x = row(&untrusted, "chat", "both");
    assert!(!x.ok && x.status == 200 && x.expected == "400 param=mm_processor_kwargs");
    assert!(row(&untrusted, "chat", "{}").ok);
    // The probe's requests were benign: small max_tokens, the image a data URL.
    let sent = fake.received();
    let image = sent
        .iter()
        .find(|r| String::from_utf8_lossy(&r.body).contains("data:image/png;base64,"))
        .expect("the chat image row sends a PNG data URL");
    assert!(String::from_utf8_lossy(&image.body).contains("\"max_tokens\":4"));
}

#[tokio::test]
async fn a_strip_gateway_passes_the_strip_matrix_and_names_the_stripped_fields() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"strip\"\n", &fake).await;
    let mut o = opts(format!("http://{}", gw.addr), Expect::Strip);
    o.routes = Some(vec!["chat".into(), "/v1/embeddings".into()]);
    let r = probe(o).await.unwrap();
    assert_eq!(r.mismatches, 0, "{}", mismatches(&r));
    assert_eq!(r.routes_from, "--routes");
    assert_eq!(r.rows.len(), 2 * 6);
    let both = row(&r, "chat", "both");
    assert_eq!(
        both.stripped.as_deref(),
        Some("mm_processor_kwargs, media_io_kwargs")
    );
    assert_eq!(row(&r, "embeddings", "null").stripped, None);
    // Expecting untrusted behaviour of a strip gateway is a mismatch.
    let mut o = opts(format!("http://{}", gw.addr), Expect::Untrusted);
    o.routes = Some(vec!["chat".into()]);
    assert_eq!(probe(o).await.unwrap().mismatches, 3);
    gw.stop().await;
}

/// Runs the real binary off the runtime's threads (the targets are served in-process).
async fn run(args: Vec<String>) -> (i32, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(BIN).args(&args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_the_table_and_exits_non_zero_on_a_mismatch() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"reject\"\n", &fake).await;
    let args = |target: String, expect: &str| -> Vec<String> {
        [
            "probe",
            "--target",
            &target,
            "--expect",
            expect,
            "--routes",
            "chat,completions",
        ]
        .map(String::from)
        .to_vec()
    };
    let (code, out) = run(args(format!("http://{}", gw.addr), "untrusted")).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("expect untrusted"), "{out}");
    assert!(out.contains("12 row(s), 0 mismatch(es)"), "{out}");
    let cells: Vec<&str> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.len() > 2 && c[0] == "completions" && c[2] == "media_io_kwargs")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        cells,
        [
            "completions",
            "/v1/completions",
            "media_io_kwargs",
            "400",
            "media_io_kwargs",
            "400",
            "param=media_io_kwargs",
            "ok"
        ]
    );

    let (code, out) = run(args(fake.url(), "untrusted")).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("MISMATCH"), "{out}");

    let mut json = args(fake.url(), "trusted");
    json.push("--json".into());
    let (code, out) = run(json).await;
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["expect"], "trusted");
    assert_eq!(v["rows"].as_array().unwrap().len(), 12);

    let (code, _) = run(["probe", "--target", "ftp://x"].map(String::from).to_vec()).await;
    assert_eq!(code, 2);
    // A misspelt route is refused before anything is sent, naming the routes there are.
    let target = format!("http://{}", gw.addr);
    let misspelt = [
        "probe",
        "--target",
        &target,
        "--model",
        "tiny",
        "--routes",
        "chat,chats",
    ];
    let err = probe(ProbeOpts {
        routes: Some(vec!["chat".into(), "chats".into()]),
        ..opts(target.clone(), Expect::Trusted)
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("--routes chats: not a route (one of chat, chat+image,"),
        "{err}"
    );
    let (code, _) = run(misspelt.map(String::from).to_vec()).await;
    assert_eq!(code, 2);
    gw.stop().await;
}

#[tokio::test]
async fn routes_the_target_does_not_list_are_not_probed() {
    let fake = FakeVllm::start_with(support::FakeOpts {
        missing_routes: vec!["/classify", "/v1/embeddings"],
        ..Default::default()
    })
    .await;
    let r = probe(opts(fake.url(), Expect::Trusted)).await.unwrap();
    assert_eq!(r.mismatches, 0, "{}", mismatches(&r));
    assert_eq!(r.rows.len(), 16 * 6);
    assert!(!r
        .rows
        .iter()
        .any(|x| x.path == "/classify" || x.path == "/v1/embeddings"));
}

/// README "mmgate probe": "Exit 0 when every row matches, 1 on any mismatch, 2 when the probe
/// cannot run (bad URL, unreachable target, no model, nothing served)". A target where nothing
/// listens is one error that says so, with or without `--model`, and no table.
#[test]
fn probe_of_a_target_that_does_not_answer_exits_2() {
    let dead = support::dead_url();
    for model in [&["--model", "m"][..], &[]] {
        let out = Command::new(BIN)
            .args(["probe", "--target", &dead])
            .args(model)
            .args(["--timeout-seconds", "2"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("{dead} did not answer GET /version: ")),
            "{err}"
        );
        assert!(err.contains("Connection refused"), "{err}");
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn an_unknown_route_lists_each_route_name_once() {
    let out = Command::new(BIN)
        .args(["probe", "--target", "http://127.0.0.1:9", "--routes", "foo"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let names = err
        .split("one of ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{err}"));
    let listed: Vec<&str> = names.split(", ").collect();
    let mut unique = listed.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(listed.len(), unique.len(), "{err}");
    assert!(listed.contains(&"rerank"), "{err}");
}

/// README "mmgate probe": "The image row only has to pass the gate (a text-only model may
/// refuse the image with a non-gate 4xx)". Against an untrusted vLLM serving a text-only
/// model (it refuses the image without kwargs with a non-gate 400, and the truthy cases at
/// its gate), the default route detection drops the `chat+image` row altogether.
#[tokio::test]
async fn the_image_row_is_probed_on_a_text_only_untrusted_server() {
    let text_only = text_only_untrusted_vllm().await;
    let r = probe(ProbeOpts {
        target: format!("http://{text_only}"),
        model: None,
        api_key: None,
        routes: None,
        expect: Expect::Untrusted,
        timeout: Duration::from_secs(10),
    })
    .await
    .unwrap();
    assert_eq!(r.mismatches, 0);
    assert!(
        r.rows.iter().any(|x| x.route == "chat+image"),
        "skipped: {:?}",
        r.skipped
    );
}

/// An untrusted vLLM 0.31 with a text-only model, serving only chat: the gate answers truthy
/// kwargs; an image without them is refused as vLLM refuses it for a text-only model.
async fn text_only_untrusted_vllm() -> std::net::SocketAddr {
    use axum::response::IntoResponse;
    async fn chat(body: Bytes) -> axum::response::Response {
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let truthy = |f: &str| match &v[f] {
            serde_json::Value::Object(m) => !m.is_empty(),
            _ => false,
        };
        let json = |status: u16, text: String| {
            (
                http::StatusCode::from_u16(status).unwrap(),
                [("content-type", "application/json")],
                text,
            )
                .into_response()
        };
        if truthy("mm_processor_kwargs") {
            return json(
                400,
                mmgate::error::gate_body(mmgate::inspect::Field::MmProcessorKwargs).into(),
            );
        }
        if truthy("media_io_kwargs") {
            return json(
                400,
                mmgate::error::gate_body(mmgate::inspect::Field::MediaIoKwargs).into(),
            );
        }
        if String::from_utf8_lossy(&body).contains("image_url") {
            return json(400, r#"{"error":{"message":"tiny is not a multimodal model","type":"BadRequestError","param":null,"code":400}}"#.into());
        }
        json(200, r#"{"choices":[{"message":{"content":"hi"}}]}"#.into())
    }
    let app = axum::Router::new()
        .route(
            "/v1/models",
            axum::routing::get(|| async {
                (
                    [("content-type", "application/json")],
                    r#"{"data":[{"id":"tiny"}]}"#,
                )
            }),
        )
        .route(
            "/openapi.json",
            axum::routing::get(|| async {
                (
                    [("content-type", "application/json")],
                    r#"{"paths":{"/v1/chat/completions":{}}}"#,
                )
            }),
        )
        .route("/v1/chat/completions", axum::routing::post(chat));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The probe "only reads", but its `/v1/responses` rows leave `store` at vLLM's default
/// (`store: bool | None = True`, vllm/entrypoints/openai/responses/protocol.py:210): on a
/// server with `VLLM_ENABLE_RESPONSES_API_STORE=1` each served row is kept in the server's
/// in-memory response store, which vLLM never prunes (serving.py:175-178).
#[tokio::test]
async fn the_probe_asks_the_responses_route_not_to_store_its_answers() {
    let fake = FakeVllm::start().await;
    let mut o = ProbeOpts {
        target: fake.url(),
        model: None,
        api_key: None,
        routes: Some(vec!["responses".into()]),
        expect: Expect::Trusted,
        timeout: Duration::from_secs(10),
    };
    o.expect = Expect::Trusted;
    probe(o).await.unwrap();
    let sent: Vec<serde_json::Value> = fake
        .received()
        .iter()
        .filter(|r| r.path == "/v1/responses")
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(sent.len(), 6);
    for body in sent {
        assert_eq!(body["store"], serde_json::json!(false), "{body}");
    }
}

/// README "mmgate probe": `--timeout-seconds N` is the per-request timeout. It covers only
/// the response head: a target that sends its head and then stalls the body holds the probe
/// forever (here: `/version` answers 200 with `Content-Length: 100` and nothing more).
#[tokio::test]
async fn the_probe_timeout_covers_a_stalled_response_body() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
                .await;
            held.push(s);
        }
    });
    let run = probe(ProbeOpts {
        target: format!("http://{addr}"),
        model: Some("m".into()),
        api_key: None,
        routes: Some(vec!["chat".into()]),
        expect: Expect::Untrusted,
        timeout: Duration::from_secs(1),
    });
    // Seven requests of 1 s each: the bound is far past that, so that only a probe that
    // waits for ever fails, not one slowed by a loaded machine.
    let finished = tokio::time::timeout(Duration::from_secs(120), run).await;
    assert!(
        finished.is_ok(),
        "the probe was still waiting after 120 s with a 1 s timeout"
    );
}
