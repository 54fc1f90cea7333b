//! Nothing is changed silently: over the whole conformance corpus, for each action (the
//! modes `pass`, `shadow`, `strip`, `reject`, and `route` for a trusted client with two
//! pools), every request is exactly one of
//!
//! 1. forwarded byte-identical (one upstream received the client's method, path and bytes,
//!    and the response carries no `x-mmgate-stripped` header),
//! 2. stripped: the response carries `x-mmgate-stripped` naming the removed fields, the
//!    upstream received the same method and path and the body minus exactly those members,
//!    or (for a request vLLM refuses before its gate) with exactly those members' values
//!    `null` (every other member's value unchanged where `serde_json` reads the body), and
//!    (checked with the real binary) one stdout log line with the same request id lists
//!    the same fields,
//! 3. answered by mmgate itself (no upstream received anything) with an error status and
//!    an error envelope whose message says why.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use mmgate::gateway::STRIPPED_HEADER;
use mmgate::inspect::{inspect, RENDER_MAX_DEPTH};
use serde_json::Value;
use support::cases::{cases, Case};
use support::serving::{Serving, ANY};
use support::*;

const MODES: [&str; 4] = ["pass", "shadow", "strip", "reject"];

/// What happened to one request.
#[derive(Debug, PartialEq)]
enum Fate {
    Forwarded,
    Stripped(Vec<String>),
    Answered,
}

/// Checks that one replayed case had exactly one of the three fates, and says which.
fn fate_of(case: &Case, reply: &Reply, received: &[Received]) -> Result<Fate, String> {
    let header = reply
        .headers
        .get(STRIPPED_HEADER)
        .map(|v| v.to_str().unwrap_or("<not text>").to_string());
    match (received, header) {
        ([], Some(h)) => Err(format!("stripped header {h:?} but nothing forwarded")),
        ([], None) => {
            let status = reply.status.as_u16();
            if status < 400 {
                return Err(format!("answered {status} by mmgate without forwarding"));
            }
            // vLLM's own words for the case (FastAPI's `{"detail":...}` for a body it cannot
            // parse at all) say why as well as vLLM would.
            if reply.body == case.answer.as_bytes() {
                return Ok(Fate::Answered);
            }
            let v: Value = serde_json::from_slice(&reply.body)
                .map_err(|e| format!("mmgate's answer is not JSON ({e}): {}", reply.text()))?;
            let message = v["error"]["message"].as_str().unwrap_or("");
            if message.trim().len() < 10 {
                return Err(format!(
                    "mmgate's {status} does not say why: {}",
                    reply.text()
                ));
            }
            Ok(Fate::Answered)
        }
        ([got], _) if got.method.as_str() != case.method || got.path != case.path => Err(format!(
            "forwarded as {} {} instead of {} {}",
            got.method, got.path, case.method, case.path
        )),
        ([got], None) => {
            if got.body != case.body[..] {
                return Err(format!(
                    "forwarded a changed body without saying so:\n  sent {}\n  got  {}",
                    case.body.escape_ascii(),
                    got.body.escape_ascii()
                ));
            }
            Ok(Fate::Forwarded)
        }
        ([got], Some(h)) => {
            let fields: Vec<String> = h.split(',').map(|s| s.trim().to_string()).collect();
            let before = inspect(&case.body, RENDER_MAX_DEPTH)
                .map_err(|e| format!("stripped a body mmgate cannot inspect: {e}"))?;
            let after = inspect(&got.body, RENDER_MAX_DEPTH)
                .map_err(|e| format!("the stripped body does not parse: {e}"))?;
            let names = |f: &mmgate::inspect::Findings| -> Vec<String> {
                f.members.iter().map(|m| f.name(m).to_string()).collect()
            };
            let listed = |n: &str| fields.iter().any(|f| f == n);
            // Removed, or (members kept) every occurrence's value nulled.
            let nulled = names(&after) == names(&before);
            let want: Vec<String> = names(&before)
                .into_iter()
                .filter(|n| nulled || !listed(n))
                .collect();
            let kept = names(&after);
            let values_nulled = after
                .members
                .iter()
                .filter(|m| listed(after.name(m)))
                .all(|m| m.kind == mmgate::inspect::Kind::Null);
            if kept != want
                || fields.is_empty()
                || got.body == case.body[..]
                || (nulled && !values_nulled)
            {
                return Err(format!(
                    "header says {fields:?} but members went from {:?} to {kept:?}",
                    names(&before)
                ));
            }
            if let Ok(Value::Object(mut original)) = serde_json::from_slice::<Value>(&case.body) {
                for f in &fields {
                    if nulled {
                        if let Some(v) = original.get_mut(f) {
                            *v = Value::Null;
                        }
                    } else {
                        original.remove(f);
                    }
                }
                let sent: Value = serde_json::from_slice(&got.body)
                    .map_err(|e| format!("the stripped body does not parse as JSON: {e}"))?;
                if sent != Value::Object(original) {
                    return Err(format!(
                        "the stripped body is not the original with {fields:?} removed or nulled: {}",
                        got.body.escape_ascii()
                    ));
                }
            }
            Ok(Fate::Stripped(fields))
        }
        (many, _) => Err(format!("forwarded {} times", many.len())),
    }
}

fn policy(mode: &str) -> String {
    format!("[gate]\ndefault = \"{mode}\"\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_in_every_mode_is_forwarded_as_sent_stripped_visibly_or_refused_with_a_reason() {
    let cases = cases();
    let http = client();
    let mut failures = Vec::new();
    for mode in MODES {
        let fake = FakeVllm::start().await;
        let gw = gateway(&policy(mode), &fake).await;
        let (mut fwd, mut stripped, mut answered) = (0, 0, 0);
        for case in &cases {
            fake.clear();
            let reply = case.replay(&http, gw.addr).await;
            match fate_of(case, &reply, &fake.received()) {
                Ok(Fate::Forwarded) => fwd += 1,
                Ok(Fate::Stripped(_)) => stripped += 1,
                Ok(Fate::Answered) => answered += 1,
                Err(e) => failures.push(format!("[{mode}] {}: {e}", case.id)),
            }
        }
        println!(
            "{mode}: {} cases: {fwd} forwarded as sent, {stripped} stripped, {answered} answered by mmgate",
            cases.len()
        );
        if matches!(mode, "pass" | "shadow") && fwd != cases.len() {
            failures.push(format!(
                "[{mode}] only {fwd} of {} forwarded as sent",
                cases.len()
            ));
        }
        if mode == "strip" && stripped == 0 {
            failures.push("[strip] the corpus has offending cases but none was stripped".into());
        }
        if mode == "reject" && answered == 0 {
            failures.push("[reject] the corpus has offending cases but none was refused".into());
        }
        gw.stop().await;
    }
    assert!(
        failures.is_empty(),
        "{} silent changes:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A keyed trusted client in `route` mode: offending requests go to the trusted pool,
/// the others to the default one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_route_mode_every_case_goes_to_one_pool_as_sent_or_is_refused_with_a_reason() {
    const KEY: &str = "sk-nothing-silent";
    let (default, trusted, gw) = support::trusted::keyed_two_pools(
        "reject",
        KEY,
        "allow_unknown_keys = true",
        "mode = \"route\"\nroute_to = \"trusted\"",
    )
    .await;
    let http = client();
    let (mut failures, mut counts) = (Vec::new(), [0usize; 4]);
    for case in cases() {
        default.clear();
        trusted.clear();
        let mut headers: Vec<(&str, &str)> = case
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        headers.push(("x-api-key", KEY));
        let reply = send(
            &http,
            gw.addr,
            &case.method,
            &case.path,
            &headers,
            case.body.clone(),
        )
        .await;
        let (d, t) = (default.received(), trusted.received());
        let received: Vec<Received> = d.iter().chain(&t).cloned().collect();
        match fate_of(&case, &reply, &received) {
            Ok(Fate::Forwarded) if t.is_empty() => counts[0] += 1,
            Ok(Fate::Forwarded) => counts[1] += 1,
            Ok(Fate::Stripped(_)) => counts[2] += 1,
            Ok(Fate::Answered) => counts[3] += 1,
            Err(e) => failures.push(format!("[route] {}: {e}", case.id)),
        }
    }
    println!(
        "route: {} forwarded as sent to the default pool, {} to the trusted pool, {} stripped, {} answered by mmgate",
        counts[0], counts[1], counts[2], counts[3]
    );
    assert!(counts[1] > 0, "offending cases reach the trusted pool");
    assert!(
        failures.is_empty(),
        "{} silent changes:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs the real binary in `mode` over the corpus (each case with its own `x-request-id`)
/// and checks that every stripped response has its log line and every log line its response.
async fn stripped_requests_each_log_one_line(mode: &str) {
    let cases = cases();
    let fake = FakeVllm::start().await;
    let dir = std::env::temp_dir().join(format!("mmgate-silent-{}-{mode}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("policy.toml");
    let text = format!(
        "[listen]\naddr = \"{ANY}\"\nadmin = \"{ANY}\"\n[upstream]\nurl = \"{}\"\n{}",
        fake.url(),
        policy(mode)
    );
    std::fs::write(&file, text).unwrap();
    let mut serving = Serving::started(
        Command::new(env!("CARGO_BIN_EXE_mmgate"))
            .args(["serve", "--policy", file.to_str().unwrap()])
            .args(["--drain-seconds", "5"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped()),
    )
    .await;
    let listen = serving.listen;
    let stdout = BufReader::new(serving.child().stdout.take().unwrap());
    let lines =
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).collect::<Vec<_>>());

    let http = client();

    let mut stripped: Vec<(String, Vec<String>)> = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let id = format!("silent-{mode}-{i}");
        let mut headers: Vec<(&str, &str)> = case
            .headers
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("x-request-id"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        headers.push(("x-request-id", &id));
        let reply = send(
            &http,
            listen,
            &case.method,
            &case.path,
            &headers,
            case.body.clone(),
        )
        .await;
        if let Some(h) = reply.headers.get(STRIPPED_HEADER) {
            let fields = h.to_str().unwrap().split(',').map(|s| s.trim().to_string());
            stripped.push((id, fields.collect()));
        }
    }
    drop(http);
    let exit = serving.terminate(Duration::from_secs(10));
    assert!(exit.success(), "{exit:?}");

    let logged: Vec<(String, Vec<String>)> = lines
        .join()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "offending_request")
        .filter(|v| v["stripped"].as_array().is_some_and(|a| !a.is_empty()))
        .map(|v| {
            let fields = v["stripped"].as_array().unwrap().iter();
            (
                v["request_id"].as_str().unwrap_or("").to_string(),
                fields
                    .map(|f| f.as_str().unwrap_or("").to_string())
                    .collect(),
            )
        })
        .collect();
    assert!(!stripped.is_empty(), "[{mode}] some case was stripped");
    let mut missing = Vec::new();
    for s in &stripped {
        let n = logged.iter().filter(|l| l.0 == s.0).count();
        if n != 1 || !logged.contains(s) {
            missing.push(format!("{s:?}: {n} log lines"));
        }
    }
    for l in &logged {
        if !stripped.contains(l) {
            missing.push(format!("log line {l:?} without a stripped response"));
        }
    }
    assert!(
        missing.is_empty(),
        "[{mode}] {} stripped responses, {} log lines; mismatches:\n{}",
        stripped.len(),
        logged.len(),
        missing.join("\n")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_strip_mode_every_stripped_request_logs_one_line_with_its_fields() {
    stripped_requests_each_log_one_line("strip").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_reject_mode_every_stripped_request_logs_one_line_with_its_fields() {
    stripped_requests_each_log_one_line("reject").await;
}
