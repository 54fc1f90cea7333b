//! The recorded vLLM 0.31 conformance cases: `mmgate inspect`, the library, and the live
//! gateway in every mode agree with the real untrusted server's verdict.
//!
//! Cases: see `support::cases` (the shared recordings beside the checkout, else tests/data).
//! Every failing case is reported, not only the first.

mod support;

use mmgate::contract::{judge, UpstreamFacts, Verdict};
use support::cases::{cases, Case};
use support::*;

fn report(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} case(s) disagree with vLLM:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The expected verdict: the gate body for gate rejections; for others, accept when vLLM
/// answered 200, and anything but a gate rejection otherwise.
fn check_verdict(c: &Case, verdict: &Verdict) -> Option<String> {
    let got = match verdict {
        Verdict::Reject(f) => Some(mmgate::error::gate_body(*f)),
        _ => None,
    };
    if got != c.gate {
        return Some(format!(
            "{}: gate verdict {:?}, vLLM said status {} gate={}",
            c.id,
            verdict,
            c.status,
            c.gate.is_some()
        ));
    }
    if c.status == 200 && *verdict != Verdict::Accept {
        return Some(format!("{}: vLLM accepted, mmgate says {verdict:?}", c.id));
    }
    None
}

#[test]
fn library_agrees_with_vllm() {
    let mut failures = Vec::new();
    for c in cases() {
        let facts = UpstreamFacts {
            served_models: Some(vec!["tiny".into()]),
            served_routes: Some(
                mmgate::classify::RouteKind::ALL
                    .into_iter()
                    .filter(|r| !c.route_missing || *r != mmgate::classify::RouteKind::Classify)
                    .collect(),
            ),
            ..Default::default()
        };
        let route =
            mmgate::classify::classify(&c.method.parse().unwrap(), &c.path, &Default::default());
        let verdict = match route {
            mmgate::classify::Route::Gated(kind) => {
                judge(kind, c.head(), &c.body, c.max_depth(), &facts).0
            }
            mmgate::classify::Route::Ungated => Verdict::Accept,
        };
        failures.extend(check_verdict(&c, &verdict));
    }
    report(failures);
}

#[test]
fn inspect_command_agrees_with_vllm() {
    let dir = std::env::temp_dir().join(format!("mmgate-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for c in cases()
        .into_iter()
        .filter(|c| c.method == "POST" && !c.route_missing)
    {
        let file = dir.join("body");
        std::fs::write(&file, &c.body).unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mmgate"));
        cmd.args(["inspect", "--path", &c.path, "--model", "tiny"]);
        cmd.args(["--max-json-depth", &c.max_depth().to_string()]);
        // A case without a content type is inspected as such.
        cmd.args(["--content-type", c.content_type().unwrap_or("")]);
        let out = cmd.arg(&file).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "{}: inspect printed no JSON: {}",
                c.id,
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let code = out.status.code().unwrap_or(-1);
        let verdict = v["verdict"].as_str().unwrap_or("");
        let expected_code = match verdict {
            "accept" => 0,
            "reject" => 1,
            "invalid" => 3,
            _ => -2,
        };
        if code != expected_code {
            failures.push(format!("{}: verdict {verdict} but exit code {code}", c.id));
        }
        match c.gate {
            Some(body)
                if verdict != "reject"
                    || v["body"].as_str() != Some(body)
                    || v["status"] != 400 =>
            {
                failures.push(format!("{}: expected the gate rejection, got {v}", c.id))
            }
            Some(_) => {}
            None if c.status == 200 && verdict != "accept" => {
                failures.push(format!("{}: vLLM accepted, inspect says {v}", c.id))
            }
            None if verdict == "reject" => {
                failures.push(format!("{}: vLLM did not gate, inspect rejects", c.id))
            }
            None => {}
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    report(failures);
}

#[tokio::test]
async fn gateway_in_reject_mode_answers_like_vllm() {
    let full = FakeVllm::start().await;
    // Like the recorded embedding server, which has no /classify.
    let embed = FakeVllm::start_with(FakeOpts {
        missing_routes: vec!["/classify"],
        ..Default::default()
    })
    .await;
    // Like the recorded render server, which only renders (its parser takes more nesting).
    let render = FakeVllm::start_with(FakeOpts {
        missing_routes: FULL_SERVER_PATHS.to_vec(),
        ..Default::default()
    })
    .await;
    let policy = "[gate]\ndefault = \"reject\"\n";
    let (gw_full, gw_embed) = (gateway(policy, &full).await, gateway(policy, &embed).await);
    let gw_render = gateway(policy, &render).await;
    let client = client();
    let mut failures = Vec::new();
    for c in cases() {
        let (fake, gw) = if c.route_missing {
            (&embed, &gw_embed)
        } else if c.family == "render" {
            (&render, &gw_render)
        } else {
            (&full, &gw_full)
        };
        fake.clear();
        let reply = c.replay(&client, gw.addr).await;
        let reached = !fake.received().is_empty();
        match c.gate {
            Some(body) => {
                let ct = reply.headers.get("content-type").map(|v| v.as_bytes());
                if reply.status != 400
                    || reply.body != body.as_bytes()
                    || ct != Some(b"application/json")
                    || reached
                {
                    failures.push(format!("{}: expected vLLM's gate rejection at the edge, got {} {} (upstream reached: {reached})", c.id, reply.status, reply.text()));
                }
            }
            None => {
                let gate_like = reply.text().contains("are disabled by default");
                // What mmgate answers itself is vLLM's very answer.
                let answered_here = !reached;
                if gate_like
                    || (answered_here
                        && (reply.status.as_u16() != c.status || reply.body != c.answer.as_bytes()))
                {
                    failures.push(format!(
                        "{}: vLLM answered {}, mmgate {} {} (upstream reached: {reached})",
                        c.id,
                        c.status,
                        reply.status,
                        reply.text()
                    ));
                }
            }
        }
    }
    gw_full.stop().await;
    gw_embed.stop().await;
    gw_render.stop().await;
    report(failures);
}

#[tokio::test]
async fn gateway_in_strip_mode_never_yields_a_gate_rejection() {
    let fake = FakeVllm::start().await;
    let gw = gateway("[gate]\ndefault = \"strip\"\n", &fake).await;
    let client = client();
    let mut failures = Vec::new();
    for c in cases() {
        fake.clear();
        let reply = c.replay(&client, gw.addr).await;
        if reply.text().contains("are disabled by default") {
            failures.push(format!("{}: gate rejection in strip mode", c.id));
        }
        let stripped = reply
            .headers
            .get(mmgate::gateway::STRIPPED_HEADER)
            .is_some();
        if c.gate.is_some() && !stripped {
            failures.push(format!(
                "{}: vLLM would reject, but nothing was stripped",
                c.id
            ));
        }
        for r in fake.received() {
            // What reached the upstream must pass an untrusted vLLM's gate.
            let route = mmgate::classify::classify(&r.method, &r.path, &Default::default());
            if let mmgate::classify::Route::Gated(kind) = route {
                let ct = r.headers.get("content-type").map(|v| v.as_bytes());
                let (v, _) = judge(
                    kind,
                    mmgate::contract::Head::content_type(ct),
                    &r.body,
                    c.max_depth(),
                    &UpstreamFacts::default(),
                );
                if matches!(v, Verdict::Reject(_)) {
                    failures.push(format!(
                        "{}: upstream received a body the gate rejects",
                        c.id
                    ));
                }
                let len: Option<usize> = r
                    .headers
                    .get("content-length")
                    .and_then(|v| v.to_str().ok()?.parse().ok());
                if len != Some(r.body.len()) {
                    failures.push(format!(
                        "{}: content-length {len:?} for {} bytes",
                        c.id,
                        r.body.len()
                    ));
                }
            }
            if !stripped && r.body != c.body {
                failures.push(format!("{}: body changed without the strip header", c.id));
            }
        }
    }
    gw.stop().await;
    report(failures);
}

#[tokio::test]
async fn pass_and_shadow_forward_every_case_byte_identical_and_only_shadow_counts() {
    for mode in ["pass", "shadow"] {
        let fake = FakeVllm::start().await;
        let gw = gateway(&format!("[gate]\ndefault = \"{mode}\"\n"), &fake).await;
        let client = client();
        let mut failures = Vec::new();
        for c in cases() {
            fake.clear();
            let reply = c.replay(&client, gw.addr).await;
            let received = fake.received();
            if received.len() != 1 || received[0].body != c.body || received[0].path != c.path {
                failures.push(format!(
                    "{mode} {}: not forwarded byte-identical ({} received)",
                    c.id,
                    received.len()
                ));
            }
            if reply.status != 200 || reply.headers.contains_key(mmgate::gateway::STRIPPED_HEADER) {
                failures.push(format!("{mode} {}: reply {} changed", c.id, reply.status));
            }
        }
        // The fake serves every route, so the 404 recordings count as gated here too.
        let offending = cases()
            .iter()
            .filter(|c| {
                c.gate.is_some() || (c.route_missing && c.body.windows(7).any(|w| w == b"_kwargs"))
            })
            .count() as f64;
        let counted = metric(&client, gw.admin, "mmgate_offending_requests_total")
            .await
            .unwrap_or(0.0);
        // One series per (route, field): sum them.
        let text = send(
            &client,
            gw.admin,
            "GET",
            "/metrics",
            &[],
            bytes::Bytes::new(),
        )
        .await
        .text();
        let total: f64 = text
            .lines()
            .filter(|l| l.starts_with("mmgate_offending_requests_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        // `shadow` inspects and counts; `pass` never reads the body, so it counts nothing.
        let expected = if mode == "pass" { 0.0 } else { offending };
        assert!(mode == "pass" || counted > 0.0);
        assert_eq!(total, expected, "{mode}: offending requests counted");
        gw.stop().await;
        report(failures);
    }
}
