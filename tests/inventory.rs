//! The live inventory on the admin listener: `/inventory` (JSON) and `/inventory.html`,
//! fed by the gateway's recording of offending requests, and the page rendered in headless
//! Chromium (skipped with a message when `chromium` is not installed).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use support::{client, gateway, send, FakeVllm, TestClient};

const CHAT: &str = "/v1/chat/completions";

async fn chat(c: &TestClient, addr: std::net::SocketAddr, ua: &str, kwargs: &str) -> u16 {
    let body =
        format!(r#"{{"model":"tiny","messages":[{{"role":"user","content":"hi"}}]{kwargs}}}"#);
    let headers = [("content-type", "application/json"), ("user-agent", ua)];
    send(c, addr, "POST", CHAT, &headers, body)
        .await
        .status
        .as_u16()
}

/// A shadow gateway that has seen 3 + 2 offending requests from two user agents, one
/// stripped completion and clean traffic.
async fn traffic() -> (FakeVllm, mmgate::server::Running) {
    let fake = FakeVllm::start().await;
    let gw = gateway(
        "[gate]\ndefault = \"shadow\"\nroutes.completions = \"strip\"\n",
        &fake,
    )
    .await;
    let c = client();
    let mm = r#","mm_processor_kwargs":{"max_pixels":1003520}"#;
    let both = r#","mm_processor_kwargs":{"min_pixels":1},"media_io_kwargs":{"video":{"fps":2}}"#;
    for _ in 0..3 {
        assert_eq!(chat(&c, gw.addr, "OpenAI/Python 1.30.0", mm).await, 200);
    }
    for _ in 0..2 {
        assert_eq!(chat(&c, gw.addr, "vision-tool/<b>2</b>", both).await, 200);
    }
    assert_eq!(chat(&c, gw.addr, "clean", "").await, 200);
    assert_eq!(
        chat(&c, gw.addr, "clean", r#","mm_processor_kwargs":{}"#).await,
        200
    );
    let completion = r#"{"model":"tiny","prompt":"hi","media_io_kwargs":{"image":{"a":1}}}"#;
    let headers = [
        ("content-type", "application/json"),
        ("user-agent", "batch"),
    ];
    let r = send(&c, gw.addr, "POST", "/v1/completions", &headers, completion).await;
    assert_eq!(r.headers["x-mmgate-stripped"], "media_io_kwargs");
    (fake, gw)
}

#[tokio::test]
async fn the_json_inventory_lists_offending_clients_by_count() {
    let (_fake, gw) = traffic().await;
    let r = send(&client(), gw.admin, "GET", "/inventory", &[], Bytes::new()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let summary: Vec<(String, String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["user_agent"].as_str().unwrap_or("").to_string(),
                r["route"].as_str().unwrap().to_string(),
                r["field"].as_str().unwrap().to_string(),
                r["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let row = |ua: &str, route: &str, field: &str, n: u64| {
        (ua.to_string(), route.to_string(), field.to_string(), n)
    };
    assert_eq!(
        summary,
        [
            row("OpenAI/Python 1.30.0", "chat", "mm_processor_kwargs", 3),
            row("vision-tool/<b>2</b>", "chat", "media_io_kwargs", 2),
            row("vision-tool/<b>2</b>", "chat", "mm_processor_kwargs", 2),
            row("batch", "completions", "media_io_kwargs", 1),
        ]
    );
    assert_eq!(rows[0]["client"], "anonymous");
    assert_eq!(rows[0]["client_addr"], "127.0.0.1");
    assert_eq!(rows[0]["keys"], serde_json::json!(["max_pixels"]));
    assert!(rows[0]["first_seen"].as_str().unwrap() <= rows[0]["last_seen"].as_str().unwrap());
    assert_eq!(
        (v["cap"].clone(), v["overflow"].clone()),
        (1000.into(), 0.into())
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_html_page_is_a_self_contained_table_sorted_by_count() {
    let (_fake, gw) = traffic().await;
    let r = send(
        &client(),
        gw.admin,
        "GET",
        "/inventory.html",
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "text/html; charset=utf-8");
    let page = r.text();
    assert_eq!(page.matches("<tr class=\"row\">").count(), 4, "{page}");
    assert!(page.find("OpenAI/Python").unwrap() < page.find("batch").unwrap());
    // Client text is escaped; nothing is loaded from elsewhere.
    assert!(page.contains("vision-tool/&lt;b&gt;2&lt;/b&gt;") && !page.contains("<b>"));
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("href="));
    gw.stop().await;
}

fn chromium() -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

/// Runs headless Chromium with `args` + `url` (killed after 90 s); returns its stdout.
fn run_chromium(bin: &Path, args: &[String], url: &str) -> String {
    let profile = std::env::temp_dir().join(format!(
        "mmgate-chromium-{}-{}",
        std::process::id(),
        args.len()
    ));
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1000,600",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().unwrap()
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.len() > 24, "a PNG");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_page_renders_its_rows_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!(
            "SKIPPED the_html_page_renders_its_rows_in_headless_chromium: `chromium` is not \
             installed (apt-get install -y chromium; .ci/run tries)"
        );
        return;
    };
    let (_fake, gw) = traffic().await;
    let url = format!("http://{}/inventory.html", gw.admin);
    // An empty inventory for comparison: a gateway that has seen nothing.
    let idle_fake = FakeVllm::start().await;
    let idle = gateway("", &idle_fake).await;
    let idle_url = format!("http://{}/inventory.html", idle.admin);
    let dir = std::env::temp_dir().join(format!("mmgate-inventory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shot = dir.join("inventory.png");
    let idle_shot = dir.join("empty.png");
    let (dom, shot_bytes, idle_bytes) = {
        let (bin, url, idle_url) = (bin.clone(), url.clone(), idle_url.clone());
        let (shot, idle_shot) = (shot.clone(), idle_shot.clone());
        tokio::task::spawn_blocking(move || {
            let dom = run_chromium(&bin, &["--dump-dom".into()], &url);
            run_chromium(&bin, &[format!("--screenshot={}", shot.display())], &url);
            run_chromium(
                &bin,
                &[format!("--screenshot={}", idle_shot.display())],
                &idle_url,
            );
            (
                dom,
                std::fs::read(&shot).unwrap(),
                std::fs::read(&idle_shot).unwrap(),
            )
        })
        .await
        .unwrap()
    };
    // The DOM Chromium built holds the four rows, highest count first.
    assert_eq!(dom.matches("<tr class=\"row\">").count(), 4, "{dom}");
    let first = dom
        .find("OpenAI/Python 1.30.0")
        .expect("first row in the DOM");
    assert!(first < dom.find("completions").expect("last row in the DOM"));
    assert!(dom.contains("vision-tool/&lt;b&gt;2&lt;/b&gt;"), "{dom}");
    // The screenshot is a real 1000×600 PNG, and the rows make it heavier than an empty table.
    assert_eq!(png_size(&shot_bytes), (1000, 600));
    assert!(shot_bytes.len() > 4000, "{} bytes", shot_bytes.len());
    assert_eq!(png_size(&idle_bytes), (1000, 600));
    assert!(
        shot_bytes.len() > idle_bytes.len(),
        "with rows {} bytes, empty {} bytes",
        shot_bytes.len(),
        idle_bytes.len()
    );
    // MMGATE_KEEP_SCREENSHOT=FILE keeps the screenshot for a human look.
    if let Ok(keep) = std::env::var("MMGATE_KEEP_SCREENSHOT") {
        std::fs::write(keep, &shot_bytes).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    gw.stop().await;
    idle.stop().await;
}
