//! The real `mmgate` binary: `check` validates policies and names every bad field,
//! `inspect` classifies a body offline with documented exit codes and JSON, and `serve`
//! forwards, logs one JSON line per offending request (never the values), and exits 0 on
//! SIGTERM.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_mmgate");

/// A fresh scratch directory for this test process and `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mmgate-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, file: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // A child that exits without reading (a usage error) closes the pipe: that is fine.
    let _ = input.write_all(stdin.unwrap_or_default());
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn check_accepts_every_shipped_policy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = run(&["check", "--policy", path.to_str().unwrap()], None);
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                text(&out.stderr)
            );
            assert!(text(&out.stdout).starts_with("policy OK"));
            checked += 1;
        }
    }
    assert!(checked >= 3, "the shipped policies were found");
}

#[test]
fn check_refuses_a_bad_policy_naming_every_bad_field() {
    let dir = scratch("bad-policy");
    let bad = br#"
[listen]
addr = "nowhere"
adress = "127.0.0.1:1"
[upstream]
url = "ftp://127.0.0.1:8000"
response_timeout_ms = 0
[limits]
max_body_bytes = "big"
[gate]
default = "block"
on_unclassifiable = "maybe"
[gate.routes]
chatt = "strip"
tokenize = 3
[vllm]
served_models = ["tiny", 7]
[extra]
"#;
    let out = run(
        &[
            "check",
            "--policy",
            write(&dir, "bad.toml", bad).to_str().unwrap(),
        ],
        None,
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    for field in [
        "listen.addr",
        "listen.adress",
        "upstream.url",
        "upstream.response_timeout_ms",
        "limits.max_body_bytes",
        "gate.default",
        "gate.on_unclassifiable",
        "gate.routes.chatt",
        "gate.routes.tokenize",
        "vllm.served_models[1]",
        "extra",
    ] {
        assert!(
            err.contains(&format!("{field}:")),
            "{field} is named in:\n{err}"
        );
    }
    let out = run(
        &[
            "check",
            "--policy",
            write(&dir, "x.toml", b"[gate").to_str().unwrap(),
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("not valid TOML"));
    let missing = dir.join("missing.toml");
    assert!(
        !run(&["check", "--policy", missing.to_str().unwrap()], None)
            .status
            .success()
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn inspect(args: &[&str], body: &[u8]) -> (i32, Value) {
    let mut all = vec!["inspect"];
    all.extend_from_slice(args);
    let out = run(&all, Some(body));
    let code = out.status.code().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (code, v)
}

const CHAT: &str = "/v1/chat/completions";

#[test]
fn inspect_accepts_a_clean_body_with_exit_0() {
    let (code, v) = inspect(&["--path", CHAT, "-"], br#"{"model":"m","messages":[]}"#);
    assert_eq!(code, 0);
    let fields = json!([
        {"name": "mm_processor_kwargs", "present": false, "truthy": false, "keys": []},
        {"name": "media_io_kwargs", "present": false, "truthy": false, "keys": []},
    ]);
    assert_eq!(
        v,
        json!({"verdict": "accept", "status": 200, "param": null, "fields": fields, "body": null})
    );
    let (code, _) = inspect(
        &["--path", "/v1/messages"],
        br#"{"mm_processor_kwargs":{"a":1}}"#,
    );
    assert_eq!(
        code, 0,
        "ungated routes are accepted (the default file is stdin)"
    );
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    // `mmgate inspect ... | head -c0`: standard output is closed before mmgate writes.
    let mut child = Command::new(BIN)
        .args(["inspect", "--path", CHAT, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(br#"{"model":"m","messages":[],"mm_processor_kwargs":{"a":1}}"#)
        .unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the verdict's exit code, not a panic's: {}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stderr), "", "nothing to report on stderr");
}

#[test]
fn inspect_reports_a_gate_rejection_with_exit_1() {
    let dir = scratch("inspect-reject");
    let body = br#"{"messages":[],"mm_processor_kwargs":{"b":1,"a":2,"b":3},"media_io_kwargs":{}}"#;
    let file = write(&dir, "body.json", body);
    let (code, v) = inspect(&["--path", CHAT, file.to_str().unwrap()], b"");
    let _ = std::fs::remove_dir_all(dir);
    assert_eq!(code, 1);
    assert_eq!(v["verdict"], "reject");
    assert_eq!(v["status"], 400);
    assert_eq!(v["param"], "mm_processor_kwargs");
    assert_eq!(v["body"], mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS);
    assert_eq!(
        v["fields"],
        json!([
            {"name": "mm_processor_kwargs", "present": true, "truthy": true, "keys": ["b", "a"]},
            {"name": "media_io_kwargs", "present": true, "truthy": false, "keys": []},
        ])
    );
    let (code, v) = inspect(
        &["--path", "/tokenize", "-"],
        br#"{"prompt":"p","media_io_kwargs":[0]}"#,
    );
    assert_eq!((code, &v["param"]), (1, &json!("media_io_kwargs")));
    assert_eq!(v["body"], mmgate::error::GATE_BODY_MEDIA_IO_KWARGS);
    // Under the upstream's root path, as vLLM routes it; without it, the path is not gated.
    let offending = br#"{"messages":[],"mm_processor_kwargs":{"a":1}}"#;
    let under = ["--path", "/api/v1/chat/completions", "--root-path", "/api"];
    assert_eq!(inspect(&under, offending).0, 1);
    assert_eq!(inspect(&under[..2], offending).0, 0);
}

#[test]
fn inspect_reports_bodies_vllm_refuses_first_with_exit_3_and_a_reason() {
    // With vLLM's own answer where mmgate knows its words (what strip and reject send).
    type Case<'a> = (&'a [&'a str], &'a [u8], u16, Option<&'a str>);
    let cases: [Case; 4] = [
        (
            &["--path", CHAT],
            b"{\"messages\":[],",
            400,
            Some("'ctx': {'error': 'Expecting property name enclosed in double quotes'}}\",\"type\":\"Bad Request\",\"param\":\"body.15\""),
        ),
        (
            &["--path", CHAT],
            b"[1]",
            400,
            Some("'input': '<list of 1 items>'}"),
        ),
        (
            &["--path", CHAT, "--content-type", "text/plain"],
            b"{\"messages\":[]}",
            400,
            Some(mmgate::error::CONTENT_TYPE_BODY),
        ),
        (
            &["--path", CHAT, "--model", "tiny"],
            br#"{"model":"other","messages":[],"mm_processor_kwargs":{"a":1}}"#,
            404,
            None,
        ),
    ];
    for (args, body, status, answer) in cases {
        let (code, v) = inspect(args, body);
        assert_eq!(code, 3, "{args:?}");
        assert_eq!(v["verdict"], "invalid");
        assert_eq!(v["status"], status, "{args:?}");
        assert_eq!(v["param"], Value::Null);
        match answer {
            Some(words) => assert!(v["body"].as_str().unwrap().contains(words), "{v}"),
            None => assert_eq!(v["body"], Value::Null),
        }
        assert_eq!(v["fields"].as_array().map(Vec::len), Some(2));
        assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
    }
}

#[test]
fn inspect_usage_errors_exit_2() {
    for args in [
        &["inspect"][..],
        &["inspect", "--path"],
        &["inspect", "--path", CHAT, "--bogus"],
        &["inspect", "--path", CHAT, "/nonexistent/mmgate/body.json"],
        &["inspect", "--path", CHAT, "--root-path", "api"],
        &["frobnicate"],
    ] {
        let out = run(args, Some(b"{}"));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
}

#[test]
fn serve_names_the_listener_it_cannot_bind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap();
    let dir = scratch("bind");
    for (key, listen, admin) in [
        ("listen.addr", busy.to_string(), "127.0.0.1:0".to_string()),
        ("listen.admin", "127.0.0.1:0".to_string(), busy.to_string()),
    ] {
        let policy = write(
            &dir,
            "policy.toml",
            format!(
                "[listen]\naddr = \"{listen}\"\nadmin = \"{admin}\"\n\
                 [upstream]\nurl = \"http://127.0.0.1:9\"\n\
                 [vllm]\ndiscover_models = false\ndiscover_routes = false\nserved_models = [\"tiny\"]\n"
            )
            .as_bytes(),
        );
        let out = run(&["serve", "--policy", policy.to_str().unwrap()], None);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("cannot bind: {key} = \"{busy}\"")),
            "{err}"
        );
    }
    drop(taken);
}

/// Kills the child if the test ends early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_forwards_logs_one_line_without_values_and_exits_0_on_sigterm() {
    let fake = FakeVllm::start().await;
    use support::serving::{Serving, ANY};
    let dir = scratch("serve");
    // The shipped shadow policy, on loopback ports the binary picks, and the fake.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/shadow.toml");
    let mut policy = std::fs::read_to_string(shipped).unwrap();
    for (from, to) in [
        (
            "addr = \"0.0.0.0:8080\"".to_string(),
            format!("addr = \"{ANY}\""),
        ),
        (
            "admin = \"127.0.0.1:9464\"".to_string(),
            format!("admin = \"{ANY}\""),
        ),
        (
            "url = \"http://127.0.0.1:8000\"".to_string(),
            format!("url = \"{}\"", fake.url()),
        ),
    ] {
        assert_eq!(policy.matches(&from).count(), 1, "shadow.toml has {from}");
        policy = policy.replace(&from, &to);
    }
    let shipped_ports = policy.clone();
    let policy = write(&dir, "policy.toml", policy.as_bytes());
    let mut serving = Serving::started(
        Command::new(BIN)
            .args([
                "serve",
                "--policy",
                policy.to_str().unwrap(),
                "--drain-seconds",
                "5",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped()),
    )
    .await;
    let (listen, admin) = (serving.listen, serving.admin);
    let stdout = BufReader::new(serving.child().stdout.take().unwrap());
    let lines =
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).collect::<Vec<_>>());
    // `health --policy` reads the admin address from a policy: the same one, with the port
    // the binary took.
    let found = format!("admin = \"{admin}\"");
    let with_port = shipped_ports.replace(&format!("admin = \"{ANY}\""), &found);
    let policy = write(&dir, "policy-found.toml", with_port.as_bytes());

    // The container health check's command, by address and by policy.
    let admin_s = admin.to_string();
    let policy_s = policy.to_str().unwrap();
    for args in [
        vec!["health", "--admin", &admin_s],
        vec!["health", "--admin", &admin_s, "--ready"],
        vec!["health", "--policy", policy_s],
    ] {
        let out = tokio::task::spawn_blocking({
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            move || run(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains(" 200 "), "{}", text(&out.stdout));
    }
    let http = client();

    let body = r#"{"model":"tiny","messages":[],"mm_processor_kwargs":{"num_crops":"SECRET-VALUE-7f3a","secret_knob":987654321}}"#;
    let r = post_json(&http, listen, "/v1/chat/completions", body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        fake.received()[0].body,
        Bytes::from(body),
        "forwarded as sent"
    );
    drop(http);

    let exit = serving.terminate(Duration::from_secs(10));
    assert!(exit.success(), "exit 0 after SIGTERM: {exit:?}");
    let down = run(
        &["health", "--admin", &admin_s, "--timeout-seconds", "1"],
        None,
    );
    assert_eq!(
        down.status.code(),
        Some(1),
        "a stopped gateway is unhealthy"
    );
    assert!(!down.stderr.is_empty(), "and says why");

    let lines = lines.join().unwrap();
    let stderr = serving.stderr.iter().collect::<Vec<_>>().join("\n");
    let events: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &Value| v["event"] == "offending_request")
        .collect();
    assert_eq!(events.len(), 1, "one log line: {lines:?}\n{stderr}");
    let e = &events[0];
    assert_eq!(e["route"], "chat");
    assert_eq!(e["mode"], "shadow");
    assert_eq!(e["param"], "mm_processor_kwargs");
    assert_eq!(
        e["fields"],
        json!([{"name": "mm_processor_kwargs", "keys": ["num_crops", "secret_knob"]}])
    );
    let all = format!("{}\n{stderr}", lines.join("\n"));
    assert!(
        !all.contains("SECRET-VALUE-7f3a"),
        "values never reach the logs"
    );
    assert!(!all.contains("987654321"), "values never reach the logs");
    let _ = std::fs::remove_dir_all(dir);
}
