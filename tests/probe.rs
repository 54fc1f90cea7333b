//! `mmgate probe`: the acceptance matrix against in-process targets — a gateway in `reject`
//! mode in front of the fake vLLM answers exactly like an untrusted vLLM 0.31 at the gate,
//! the fake vLLM itself accepts everything like a trusted one, and a `strip` gateway serves
//! everything and says what it removed.

mod support;

use std::process::Command;
use std::time::Duration;

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
