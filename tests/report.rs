//! `mmgate report` over the committed fixture log (tests/data/offending.log: thirteen
//! offending-request lines from five clients, one non-log line), and the defaults advisor's
//! proposal on it; plus the `[log]` policy switch that makes the values appear.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_mmgate");
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/offending.log");

fn report(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(BIN)
        .arg("report")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_json_inventory_counts_each_client_route_and_field() {
    let out = report(&["--json", FIXTURE], None);
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped 1 line"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    assert_eq!(v["overflow"], 0);
    // Offline, nothing bounds the rows.
    assert_eq!(v["cap"], Value::Null);
    // Highest count first.
    let counts: Vec<u64> = rows.iter().map(|r| r["count"].as_u64().unwrap()).collect();
    assert_eq!(counts, [4, 4, 3, 2, 1, 1, 1, 1]);
    let find = |client: &str, ua: Option<&str>, route: &str, field: &str| {
        rows.iter()
            .find(|r| {
                r["client"] == client
                    && r["user_agent"].as_str() == ua
                    && r["route"] == route
                    && r["field"] == field
            })
            .unwrap_or_else(|| panic!("no row {client} {route} {field}"))
            .clone()
    };
    let anon = find(
        "anonymous",
        Some("OpenAI/Python 1.30.0"),
        "chat",
        "mm_processor_kwargs",
    );
    assert_eq!(anon["client_addr"], "10.0.0.7");
    assert_eq!(anon["count"], 3);
    assert_eq!(anon["first_seen"], "2026-11-01T04:00:00.000Z");
    assert_eq!(anon["last_seen"], "2026-11-01T06:00:00.000Z");
    let curl = find(
        "anonymous",
        Some("curl/8.5.0"),
        "chat",
        "mm_processor_kwargs",
    );
    assert_eq!(curl["keys"], json!(["max_pixels", "min_pixels"]));
    // A named client is one row whatever its address or user agent.
    let batch = find("batch-job", None, "completions", "mm_processor_kwargs");
    assert_eq!(
        (batch["count"].clone(), batch["client_addr"].clone()),
        (json!(2), Value::Null)
    );
    assert_eq!(
        batch["last_seen"], "2026-11-02T10:00:00.000Z",
        "last seen spans days"
    );
}

#[test]
fn table_and_csv_show_the_same_rows_and_stdin_reads_like_a_file() {
    let table = stdout(&report(&[FIXTURE], None));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 9, "{table}");
    assert!(lines[0].starts_with("client") && lines[0].contains("first seen"));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("10.0.0.9 (curl/8.5.0)") && l.ends_with("max_pixels,min_pixels")));

    let csv = stdout(&report(&["--csv", FIXTURE], None));
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 9);
    assert_eq!(
        rows[0],
        "client,client_addr,user_agent,route,field,count,first_seen,last_seen,keys"
    );
    assert!(rows.contains(
        &"anonymous,10.0.0.9,curl/8.5.0,chat,mm_processor_kwargs,1,2026-11-01T08:00:00.000Z,2026-11-01T08:00:00.000Z,max_pixels min_pixels"
    ));
    let log = std::fs::read(FIXTURE).unwrap();
    assert_eq!(stdout(&report(&["--csv", "-"], Some(&log))), csv);
    assert_eq!(stdout(&report(&["--csv"], Some(&log))), csv);
    // Two files count twice.
    let twice: Value =
        serde_json::from_slice(&report(&["--json", FIXTURE, FIXTURE], None).stdout).unwrap();
    assert_eq!(twice["rows"][0]["count"], 8);
}

#[test]
fn the_advisor_proposes_the_values_most_clients_send_with_their_share() {
    let v: Value =
        serde_json::from_slice(&report(&["--suggest", "--json", FIXTURE], None).stdout).unwrap();
    let mm = &v["fields"][0];
    assert_eq!(mm["flag"], "--mm-processor-kwargs");
    // min_pixels is sent by one client of four: not proposed.
    assert_eq!(mm["proposal"], json!({"max_pixels": 1003520}));
    assert_eq!(
        (mm["redundant"].clone(), mm["requests"].clone()),
        (json!(9), json!(11))
    );
    assert_eq!(mm["keys"][0]["clients_agreeing"], 3);
    let differing: Vec<&str> = mm["differing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["client"].as_str().unwrap())
        .collect();
    assert_eq!(differing, ["10.0.0.9 (curl/8.5.0)", "legacy"]);
    assert_eq!(
        mm["differing"][0]["values"],
        json!({"max_pixels": 200704, "min_pixels": 3136})
    );

    let io = &v["fields"][1];
    assert_eq!(io["flag"], "--media-io-kwargs");
    assert_eq!(io["proposal"], json!({"video": {"num_frames": 8}}));
    assert_eq!(
        (io["redundant"].clone(), io["requests"].clone()),
        (json!(5), json!(6))
    );
    assert_eq!(io["differing"][0]["client"], "batch-job");
    assert_eq!(
        io["differing"][0]["values"],
        json!({"video.num_frames": 16})
    );

    assert_eq!(
        (v["redundant"].clone(), v["requests"].clone()),
        (json!(10), json!(13))
    );
    assert_eq!(v["without_values"], 1);

    let text = stdout(&report(&["--suggest", FIXTURE], None));
    assert!(
        text.contains("--mm-processor-kwargs '{\"max_pixels\":1003520}'"),
        "{text}"
    );
    assert!(
        text.contains("--media-io-kwargs '{\"video\":{\"num_frames\":8}}'"),
        "{text}"
    );
    assert!(
        text.contains(
            "makes 9 of 11 offending requests sending mm_processor_kwargs redundant (81.8%)"
        ),
        "{text}"
    );
    assert!(
        text.contains("batch-job: 1 request(s) not covered; sends video.num_frames=16"),
        "{text}"
    );
    // README's sample is this output, whole.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let sample = readme
        .split("```\n")
        .find(|block| block.starts_with("--mm-processor-kwargs"))
        .expect("README's report --suggest sample");
    assert_eq!(sample, text, "README's sample differs from the output");
}

#[test]
fn the_advisors_flag_is_quoted_for_a_shell() {
    let line = r#"{"ts":"2026-11-01T08:00:00.000Z","event":"offending_request","route":"chat","path":"/v1/chat/completions","mode":"shadow","action":"forwarded","param":"mm_processor_kwargs","fields":[{"name":"mm_processor_kwargs","keys":["mode"],"values":{"mode":"it's"}}],"stripped":[],"status":200,"client_addr":"10.0.0.9","client":"legacy","pool":null,"user_agent":null,"request_id":"r"}"#;
    let text = stdout(&report(&["--suggest", "-"], Some(line.as_bytes())));
    let flag = text
        .lines()
        .find(|l| l.starts_with("--mm-processor-kwargs "))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(flag, r#"--mm-processor-kwargs '{"mode":"it'\''s"}'"#);
    // What a shell makes of it is the proposal itself.
    let echoed = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("printf %s {}", &flag["--mm-processor-kwargs ".len()..]),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&echoed.stdout),
        r#"{"mode":"it's"}"#
    );
}

#[test]
fn the_advisor_proposes_nothing_from_lines_without_values() {
    let line = r#"{"ts":"2026-11-01T08:00:00.000Z","event":"offending_request","route":"chat","path":"/v1/chat/completions","mode":"shadow","action":"forwarded","param":"mm_processor_kwargs","fields":[{"name":"mm_processor_kwargs","keys":["max_pixels"]}],"stripped":[],"status":200,"client_addr":"10.0.0.9","client":"legacy","pool":null,"user_agent":null,"request_id":"r"}"#;
    let text = stdout(&report(&["--suggest", "-"], Some(line.as_bytes())));
    assert!(!text.contains("--mm-processor-kwargs"), "{text}");
    assert!(
        text.contains("no logged kwargs values: enable [log] kwargs_values = true"),
        "{text}"
    );
    assert!(text.contains("together: 0 of 1"), "{text}");
}

#[test]
fn the_advisor_proposes_no_flag_when_no_value_has_a_majority() {
    let line = |client: &str, px: u32| {
        format!(
            r#"{{"ts":"2026-11-01T08:00:00.000Z","event":"offending_request","route":"chat","path":"/v1/chat/completions","mode":"shadow","action":"forwarded","param":"mm_processor_kwargs","fields":[{{"name":"mm_processor_kwargs","keys":["max_pixels"],"values":{{"max_pixels":{px}}}}}],"stripped":[],"status":200,"client_addr":"10.0.0.9","client":"{client}","pool":null,"user_agent":null,"request_id":"r"}}"#
        )
    };
    let log = [line("a", 100), line("b", 200), line("c", 300)].join("\n");
    let text = stdout(&report(&["--suggest", "-"], Some(log.as_bytes())));
    assert!(!text.contains("--mm-processor-kwargs"), "{text}");
    assert!(
        text.contains("mm_processor_kwargs: no flag proposed: no value is sent by more than half"),
        "{text}"
    );
    for (client, px) in [("a", 100), ("b", 200), ("c", 300)] {
        assert!(
            text.contains(&format!(
                "    {client}: 1 request(s) not covered; sends max_pixels={px}"
            )),
            "{text}"
        );
    }
    assert!(text.contains("together: 0 of 3"), "{text}");
    let v: Value =
        serde_json::from_slice(&report(&["--suggest", "--json", "-"], Some(log.as_bytes())).stdout)
            .unwrap();
    assert_eq!(v["fields"][0]["proposal"], Value::Null);
    assert_eq!(v["fields"][0]["differing"].as_array().unwrap().len(), 3);
}

#[test]
fn the_advisor_says_when_no_value_of_a_field_could_be_logged() {
    // `grid` holds an array: its value is left out of the line, so nothing can be proposed.
    let line = r#"{"ts":"2026-11-01T08:00:00.000Z","event":"offending_request","route":"chat","path":"/v1/chat/completions","mode":"shadow","action":"forwarded","param":"mm_processor_kwargs","fields":[{"name":"mm_processor_kwargs","keys":["grid"],"values":{}}],"stripped":[],"status":200,"client_addr":"10.0.0.9","client":"legacy","pool":null,"user_agent":null,"request_id":"r"}"#;
    let text = stdout(&report(&["--suggest", "-"], Some(line.as_bytes())));
    assert!(
        text.contains("mm_processor_kwargs: no flag proposed: none of its values could be logged"),
        "{text}"
    );
    assert!(!text.contains("more than half"), "{text}");
    let v: Value = serde_json::from_slice(
        &report(&["--suggest", "--json", "-"], Some(line.as_bytes())).stdout,
    )
    .unwrap();
    assert_eq!(v["fields"][0]["proposal"], Value::Null);
    assert_eq!(v["fields"][0]["clients_with_values"], 0);
}

#[test]
fn the_advisor_says_when_it_read_no_offending_lines() {
    let out = report(&["--suggest", "-"], Some(b"not a log line\n"));
    let text = stdout(&out);
    assert!(
        text.contains("no offending-request log lines were read"),
        "{text}"
    );
    assert!(!text.contains("kwargs_values"), "{text}");
}

#[test]
fn suggest_with_csv_is_a_usage_error() {
    let out = Command::new(BIN)
        .args(["report", "--suggest", "--csv", FIXTURE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--csv"));
}

#[test]
fn the_log_values_switch_is_opt_in_and_bounded() {
    use mmgate::config::Config;
    let base = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n";
    assert_eq!(Config::parse(base).unwrap().log.kwargs_values, None);
    let on = Config::parse(&format!("{base}[log]\nkwargs_values = true\n")).unwrap();
    assert_eq!(on.log.kwargs_values, Some(64));
    let bounded = Config::parse(&format!(
        "{base}[log]\nkwargs_values = true\nmax_value_len = 16\n"
    ))
    .unwrap();
    assert_eq!(bounded.log.kwargs_values, Some(16));
    let bad = Config::parse(&format!("{base}[log]\nmax_value_len = 1000\nvalues = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("log.max_value_len: 1000 is out of range (1 to 255)"),
        "{bad}"
    );
    assert!(bad.contains("log.values: unknown key"), "{bad}");
}

/// The whole loop with the real binary: `serve` with `[log] kwargs_values = true` logs the
/// values, and `report --suggest` reads them back into a proposal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_values_feed_the_advisor() {
    use std::io::{BufRead, BufReader};
    let fake = support::FakeVllm::start().await;
    use support::serving::{Serving, ANY};
    let dir = std::env::temp_dir().join(format!("mmgate-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[listen]\naddr = \"{ANY}\"\nadmin = \"{ANY}\"\n[upstream]\nurl = \"{}\"\n\
             [gate]\ndefault = \"shadow\"\n[log]\nkwargs_values = true\nmax_value_len = 8\n",
            fake.url()
        ),
    )
    .unwrap();
    let mut serving = Serving::started(
        Command::new(BIN)
            .args(["serve", "--policy", policy.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped()),
    )
    .await;
    let listen = serving.listen;
    let stdout = BufReader::new(serving.child().stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let http = support::client();
    let body = |pixels: u32| {
        format!(
            r#"{{"model":"tiny","messages":[],"mm_processor_kwargs":{{"max_pixels":{pixels},"mode":"fast","note":"far too long a string","a":[1]}}}}"#
        )
    };
    for pixels in [1003520, 1003520, 200704] {
        let r = support::post_json(&http, listen, "/v1/chat/completions", &body(pixels)).await;
        assert_eq!(r.status, 200);
    }
    let lines: Vec<String> = (0..3)
        .map(|_| {
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("a log line")
        })
        .collect();
    drop(serving);
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(
        first["fields"][0]["values"],
        json!({"max_pixels": 1003520, "mode": "fast"}),
        "scalars only, strings up to 8 bytes"
    );
    assert_eq!(
        first["fields"][0]["keys"],
        json!(["max_pixels", "mode", "note", "a"])
    );
    let log = lines.join("\n");
    let out = report(&["--suggest", "--json", "-"], Some(log.as_bytes()));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // One anonymous client whose requests hold keys that were not logged: a proposal from
    // its values, but no request is covered.
    assert_eq!(
        v["fields"][0]["proposal"],
        json!({"max_pixels": 1003520, "mode": "fast"})
    );
    assert_eq!(v["fields"][0]["redundant"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

const LINE: &str = r#"{"ts":"2026-01-01T00:00:00.000Z","event":"offending_request","route":"chat","path":"/v1/chat/completions","mode":"shadow","action":"forwarded","param":"mm_processor_kwargs","fields":[{"name":"mm_processor_kwargs","keys":["max_pixels"]}],"stripped":[],"status":200,"client_addr":"10.0.0.9","client":"anonymous","pool":"default","user_agent":"curl/8.5.0","request_id":"r1"}"#;

/// README "mmgate report": "other lines are counted on stderr and skipped". A line that is
/// not UTF-8 (another program's output in the same log; mmgate's own last line cut inside a
/// multi-byte character when it was killed) makes the whole report fail with exit 2.
#[test]
fn report_skips_a_line_that_is_not_utf8() {
    // A line of mmgate's own cut in the middle of "é" (0xC3 0xA9) in a user agent.
    let cut = LINE.replace("curl/8.5.0", "caf\u{e9}");
    let cut = &cut.as_bytes()[..cut.find('\u{e9}').unwrap() + 1];
    let mut input = Vec::new();
    for part in [LINE.as_bytes(), b"\n", LINE.as_bytes(), b"\n", cut, b"\n"] {
        input.extend_from_slice(part);
    }
    let out = report(&["-"], Some(&input));
    let (code, err) = (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr),
    );
    let out = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("10.0.0.9 (curl/8.5.0)"), "{out}");
    assert!(err.contains("skipped 1 line"), "{err}");
}
