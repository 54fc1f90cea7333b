//! End to end against real vLLM 0.31 servers (the shared oracle), with the real `mmgate`
//! binary in front and a real OpenAI Python client.
//!
//! Skipped, with a message, when the oracle is not installed (`$VLLM_ORACLE_HOME`, default
//! `/tmp/vllm-oracle`; `.ci/run` installs it). Servers start in parallel once per run on free
//! loopback ports and are killed (process group) when the test ends, also on failure.
//! `MMGATE_E2E_POOLING=0` leaves out the pooling servers. One more render server runs with
//! its own `--api-key`, behind a reject gateway that knows the key.

mod support;
#[path = "e2e/wire.rs"]
mod wire;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mmgate::contract::{judge, UpstreamFacts};
use support::cases::{cases, Case};
use support::serving::{address, ANY};
use support::variants::variants;
use support::*;

struct Oracle {
    home: PathBuf,
    scripts: PathBuf,
}

fn oracle() -> Option<Oracle> {
    let home = PathBuf::from(
        std::env::var("VLLM_ORACLE_HOME").unwrap_or_else(|_| "/tmp/vllm-oracle".into()),
    );
    let scripts = std::env::var("MMGATE_ORACLE_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/oracle"));
    let ready = home.join("venv/bin/python").exists()
        && home.join("models/tiny-qwen2vl/config.json").exists()
        && scripts.join("run.sh").exists();
    ready.then_some(Oracle { home, scripts })
}

/// A child process killed with its whole process group on drop.
struct Proc {
    child: Child,
    name: String,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on, never one this test handed out before, and below the
/// kernel's ephemeral range: the vLLM servers bind theirs seconds later, and in the meantime
/// a port-0 bind (any other test's listener or upstream, or a vLLM server's own internal
/// sockets) can only be given a port inside that range, so nothing else can take this one.
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .expect("the kernel's ephemeral port range");
    let low: u16 = range
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("ip_local_port_range starts with a port number");
    // Ports from 10,000 up to the range's start; each test process starts at its own
    // offset so that two concurrent runs of this suite rarely try the same ports.
    let first = 10_000u16;
    assert!(low > first + 1_000, "ephemeral range starts too low: {low}");
    let span = u32::from(low - first);
    let start = std::process::id() % span;
    let mut given = GIVEN.lock().unwrap();
    (0..span)
        .map(|i| first + ((start + i) % span) as u16)
        .find(|port| {
            !given.contains(port) && std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok()
        })
        .inspect(|port| given.push(*port))
        .expect("a free loopback port below the ephemeral range")
}

fn spawn(name: &str, cmd: &mut Command, dir: &Path) -> Proc {
    use std::os::unix::process::CommandExt;
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    Proc {
        child,
        name: name.into(),
        log,
    }
}

struct Vllm {
    proc: Proc,
    addr: SocketAddr,
}

fn start_vllm(
    o: &Oracle,
    dir: &Path,
    name: &str,
    mode: &str,
    model: Option<&str>,
    flags: &[&str],
) -> Vllm {
    let port = free_port();
    let mut cmd = Command::new("bash");
    cmd.arg(o.scripts.join("run.sh"))
        .args(["--mode", mode, "--port", &port.to_string()])
        .env("VLLM_ORACLE_HOME", &o.home);
    if let Some(m) = model {
        cmd.args(["--model", &o.home.join("models").join(m).to_string_lossy()]);
    }
    cmd.args(["--", "--served-model-name", "tiny"]).args(flags);
    Vllm {
        proc: spawn(name, &mut cmd, dir),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    }
}

async fn wait_healthy(client: &TestClient, servers: &mut [&mut Vllm], limit: Duration) {
    let start = Instant::now();
    for s in servers.iter_mut() {
        loop {
            if let Ok(Some(status)) = s.proc.child.try_wait() {
                panic!(
                    "{} exited with {status}; see {}",
                    s.proc.name,
                    s.proc.log.display()
                );
            }
            let req = http::Request::get(format!("http://{}/health", s.addr))
                .body(http_body_util::Full::new(Bytes::new()))
                .unwrap();
            if let Ok(Ok(r)) =
                tokio::time::timeout(Duration::from_secs(2), client.request(req)).await
            {
                if r.status() == 200 {
                    break;
                }
            }
            assert!(
                start.elapsed() < limit,
                "{} not healthy after {limit:?}; see {}",
                s.proc.name,
                s.proc.log.display()
            );
            // Polling an external process that has no readiness signal.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

struct Gate {
    proc: Proc,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Gate {
    /// A gateway just spawned on the ports it picks ([`ANY`]): its addresses are read from
    /// its log by [`wait_gateway`].
    fn spawned(proc: Proc) -> Gate {
        let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
        Gate {
            proc,
            addr: unknown,
            admin: unknown,
        }
    }
}

fn start_gateway(dir: &Path, name: &str, mode: &str, upstream: SocketAddr) -> Gate {
    start_gateway_with(dir, name, mode, upstream, "")
}

/// [`start_gateway`] with more policy text after `[gate]`.
fn start_gateway_with(
    dir: &Path,
    name: &str,
    mode: &str,
    upstream: SocketAddr,
    extra: &str,
) -> Gate {
    let policy = dir.join(format!("{name}.toml"));
    std::fs::write(
        &policy,
        format!(
            "[listen]\naddr = \"{ANY}\"\nadmin = \"{ANY}\"\n[upstream]\nurl = \"http://{upstream}\"\n[gate]\ndefault = \"{mode}\"\n{extra}"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mmgate"));
    // The serving line, which says where it listens, is an `info` one.
    cmd.args(["serve", "--policy"])
        .arg(&policy)
        .env("MMGATE_LOG", "info");
    Gate::spawned(spawn(name, &mut cmd, dir))
}

async fn wait_gateway(client: &TestClient, g: &mut Gate) {
    for _ in 0..200 {
        if let Ok(Some(status)) = g.proc.child.try_wait() {
            panic!(
                "{} exited with {status}: {}",
                g.proc.name,
                std::fs::read_to_string(&g.proc.log).unwrap_or_default()
            );
        }
        if g.admin.port() == 0 {
            let log = std::fs::read_to_string(&g.proc.log).unwrap_or_default();
            // A whole line only: the last one may be half written.
            let mut whole = log.split_inclusive('\n').filter(|l| l.ends_with('\n'));
            match whole.find(|l| l.contains("mmgate serving")) {
                Some(line) => {
                    g.addr = address(line, "listen");
                    g.admin = address(line, "admin");
                }
                None => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let req = http::Request::get(format!("http://{}/healthz", g.admin))
            .body(http_body_util::Full::new(Bytes::new()))
            .unwrap();
        if matches!(client.request(req).await, Ok(r) if r.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} did not come up", g.proc.name);
}

/// Removes what differs between two identical requests (ids, timestamps), and puts in
/// order what two servers list in their own orders.
fn normalized(body: &[u8]) -> Option<serde_json::Value> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            // `/pooling`'s "Unsupported task: ... Supported tasks: [...]" lists a set, whose
            // order differs between two vLLM processes (Python's string hash is seeded).
            serde_json::Value::String(s) => {
                if let Some((head, rest)) = s.split_once("Supported tasks: [") {
                    if let Some((list, tail)) = rest.split_once(']') {
                        let mut items: Vec<&str> = list.split(", ").collect();
                        items.sort_unstable();
                        *s = format!("{head}Supported tasks: [{}]{tail}", items.join(", "));
                    }
                }
            }
            serde_json::Value::Object(m) => {
                // kwargs_data is the serialized processor output, whose key order differs
                // between a trusted and an untrusted server for the same image.
                for k in ["id", "request_id", "created", "created_at", "kwargs_data"] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(body).ok()?;
    strip(&mut v);
    Some(v)
}

fn is_gate(body: &[u8]) -> bool {
    body == mmgate::error::GATE_BODY_MM_PROCESSOR_KWARGS.as_bytes()
        || body == mmgate::error::GATE_BODY_MEDIA_IO_KWARGS.as_bytes()
}

/// Deterministic answers: render and tokenize return the same body for the same request.
fn deterministic(c: &Case) -> bool {
    c.family == "render" || c.path.starts_with("/tokenize")
}

/// What the family's gateways know of their upstream beyond what they discover: the pooling
/// servers run `--convert embed`, whose pooling task is `embed`.
const POOL_POLICY: &str = "[vllm]\npooling_task = \"embed\"\n";

fn facts(family: &str) -> UpstreamFacts {
    UpstreamFacts {
        pooling_task: (family == "pool").then_some("embed"),
        ..Default::default()
    }
}

/// What mmgate's strip mode makes of a request: the body it forwards (None when it answers
/// at the edge because the body cannot be inspected).
fn strip_decision(c: &Case) -> Option<Vec<u8>> {
    use mmgate::decide::{decide, Action, Mode, OnUnclassifiable};
    let route =
        mmgate::classify::classify(&c.method.parse().unwrap(), &c.path, &Default::default());
    let mmgate::classify::Route::Gated(kind) = route else {
        return Some(c.body.clone());
    };
    let (verdict, findings) = judge(kind, c.head(), &c.body, c.max_depth(), &facts(&c.family));
    match decide(
        Mode::Strip,
        OnUnclassifiable::Reject,
        &verdict,
        findings.as_ref(),
    ) {
        Action::Strip(fields) => {
            let f = findings.expect("strip has findings");
            Some(mmgate::rewrite::strip(&Bytes::from(c.body.clone()), &f, &fields).to_vec())
        }
        Action::Nullify(fields) => {
            let f = findings.expect("nullify has findings");
            Some(mmgate::rewrite::nullify(&Bytes::from(c.body.clone()), &f, &fields).to_vec())
        }
        Action::RejectUnclassifiable(_) | Action::RejectGate(_) => None,
        Action::Forward => Some(c.body.clone()),
    }
}

/// Whether mmgate refuses the case at the edge in its own words: a body it cannot parse
/// (a wrong content type gets vLLM's very body).
fn own_words(c: &Case) -> bool {
    use mmgate::contract::{Invalid, Verdict};
    let route =
        mmgate::classify::classify(&c.method.parse().unwrap(), &c.path, &Default::default());
    let mmgate::classify::Route::Gated(kind) = route else {
        return false;
    };
    let (verdict, _) = judge(kind, c.head(), &c.body, c.max_depth(), &facts(&c.family));
    matches!(verdict, Verdict::Invalid(inv) if inv.unclassifiable() && inv != Invalid::ContentType)
}

struct Pair<'a> {
    family: &'static str,
    untrusted: SocketAddr,
    trusted: SocketAddr,
    reject: &'a Gate,
    strip: &'a Gate,
    shadow: &'a Gate,
}

/// Generated variants per gate-rejected case and family (content type and path spellings,
/// see tests/support/variants.rs); render servers answer fastest, so they get the most.
fn variants_per_case(family: &str) -> usize {
    if family == "render" {
        3
    } else {
        1
    }
}

/// The equivalence checks over every case of the pair's family and their generated
/// content-type and path variants, with the real untrusted server as the reference.
async fn equivalence(client: &TestClient, p: &Pair<'_>, failures: &mut Vec<String>) -> usize {
    let mut offending = 0;
    let all = cases();
    let mut family_cases: Vec<Case> = all
        .iter()
        .filter(|c| c.family == p.family)
        .cloned()
        .collect();
    assert!(!family_cases.is_empty());
    let generated = variants(&all, p.family, variants_per_case(p.family), 0x5eed);
    println!(
        "{}: {} recorded cases, {} generated variants",
        p.family,
        family_cases.len(),
        generated.len()
    );
    family_cases.extend(generated);
    for c in &family_cases {
        let direct = c.replay(client, p.untrusted).await;
        let direct_gate = is_gate(&direct.body);
        offending += usize::from(direct_gate);

        let rejected = c.replay(client, p.reject.addr).await;
        // The gate's answer exactly when vLLM gives it, and any other 400 as vLLM words it
        // (validation errors count the body's members: a forwarded body keeps them all),
        // except a body mmgate refuses in its own words because it cannot parse it.
        let same_error = direct.status != 400
            || own_words(c)
            || if direct_gate {
                rejected.body == direct.body
            } else {
                normalized(&rejected.body) == normalized(&direct.body)
            };
        if rejected.status != direct.status || !same_error {
            failures.push(format!(
                "reject {}: vLLM untrusted {} {}, mmgate(reject)->trusted {} {}",
                c.id,
                direct.status,
                direct.text(),
                rejected.status,
                rejected.text()
            ));
        }

        let stripped = c.replay(client, p.strip.addr).await;
        // Refused at the edge (an uninspectable body): vLLM refuses it too, with the same status.
        let (expected, compare) = match strip_decision(c) {
            Some(body) => (
                c.replay_body(client, p.trusted, body).await,
                deterministic(c),
            ),
            None => (c.replay(client, p.trusted).await, false),
        };
        let same_body = !compare || normalized(&stripped.body) == normalized(&expected.body);
        if is_gate(&stripped.body) || stripped.status != expected.status || !same_body {
            failures.push(format!(
                "strip {}: mmgate(strip)->untrusted {} {}, trusted(stripped) {} {}",
                c.id,
                stripped.status,
                stripped.text(),
                expected.status,
                expected.text()
            ));
        }

        let shadowed = c.replay(client, p.shadow.addr).await;
        let same_body = !deterministic(c) || normalized(&shadowed.body) == normalized(&direct.body);
        if shadowed.status != direct.status || !same_body {
            failures.push(format!(
                "shadow {}: direct {} {}, mmgate(shadow) {} {}",
                c.id,
                direct.status,
                direct.text(),
                shadowed.status,
                shadowed.text()
            ));
        }
    }
    offending
}

/// A gateway with two pools: the untrusted server as `default`, the trusted one as `trusted`,
/// and one keyed client routed there; everyone else is rejected at the edge.
fn start_trusted_gateway(dir: &Path, default: SocketAddr, trusted: SocketAddr) -> Gate {
    let policy = dir.join("trusted-routing.toml");
    let digest = hex::encode(mmgate::config::digest(TRUSTED_KEY));
    std::fs::write(
        &policy,
        format!(
            r#"[listen]
addr = "{ANY}"
admin = "{ANY}"
[gate]
default = "reject"
[pools.default]
members = ["http://{default}"]
[pools.trusted]
members = ["http://{trusted}"]
trusted = true
allow_unknown_keys = true
[identity]
unknown = "anonymous"
[clients.vision]
key_sha256 = ["{digest}"]
trusted = true
mode = "route"
route_to = "trusted"
"#
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mmgate"));
    // The serving line, which says where it listens, is an `info` one.
    cmd.args(["serve", "--policy"])
        .arg(&policy)
        .env("MMGATE_LOG", "info");
    Gate::spawned(spawn("trusted-routing", &mut cmd, dir))
}

const TRUSTED_KEY: &str = "sk-e2e-vision";

/// A trusted client's offending request is served by the trusted vLLM; an anonymous
/// client's, or one with a spoofed key, gets vLLM's own gate error.
async fn trusted_routing(client: &TestClient, g: &Gate, failures: &mut Vec<String>) {
    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"mm_processor_kwargs":{"max_pixels":1003520}}"#;
    let path = "/v1/chat/completions";
    let bearer = format!("Bearer {TRUSTED_KEY}");
    for (who, headers, want) in [
        (
            "trusted client",
            vec![("authorization", bearer.as_str())],
            200u16,
        ),
        ("anonymous client", vec![], 400),
        ("wrong key", vec![("authorization", "Bearer sk-guess")], 400),
    ] {
        let mut h = vec![("content-type", "application/json")];
        h.extend(headers);
        let r = send(client, g.addr, "POST", path, &h, body.to_string()).await;
        let ok = r.status.as_u16() == want && (want == 200 || is_gate(&r.body));
        if !ok {
            failures.push(format!("trusted routing, {who}: {} {}", r.status, r.text()));
        }
    }
}

/// `mmgate probe` against a real server or a gateway: exit 0 means every case matched.
fn probe(target: SocketAddr, expect: &str, failures: &mut Vec<String>) {
    let out = Command::new(env!("CARGO_BIN_EXE_mmgate"))
        .args([
            "probe",
            "--target",
            &format!("http://{target}"),
            "--model",
            "tiny",
        ])
        .args(["--expect", expect, "--timeout-seconds", "120"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("probe {target} --expect {expect}:\n{text}");
    if out.status.code() != Some(0) {
        failures.push(format!(
            "probe {target} --expect {expect} exited {:?}:\n{text}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
}

/// A reject gateway that knows the key and the root path of a render server started with
/// `--api-key` and `--root-path /api` answers as that server does: its 401 before the gate on
/// `/v1/...` and `/api/v1/...`, the gate's 400 with the key and on paths it does not guard,
/// (model discovery sending the key) its 404 for an unknown model, and its own 404 (the path
/// forwarded) where the root path is not followed by `/`.
async fn keyed(client: &TestClient, direct: SocketAddr, g: &Gate, failures: &mut Vec<String>) {
    let msgs = r#""messages":[{"role":"user","content":"hi"}]"#;
    let offending = format!(r#"{{"model":"tiny",{msgs},"mm_processor_kwargs":{{"a":1}}}}"#);
    let unknown = format!(r#"{{"model":"nope",{msgs},"mm_processor_kwargs":{{"a":1}}}}"#);
    let tokenize = r#"{"model":"tiny","prompt":"hi","mm_processor_kwargs":{"a":1}}"#;
    let render = "/v1/chat/completions/render";
    // (path, Authorization, body, answered at the edge rather than forwarded)
    let cases = [
        (render, None, offending.as_str(), true),
        (render, Some("Bearer sk-e2e"), &offending, true),
        (render, Some("bEaReR sk-e2e"), &offending, true),
        (render, Some("Bearer  sk-e2e"), &offending, true),
        (render, Some("Basic sk-e2e"), &offending, true),
        (render, Some("Bearer sk-other"), &offending, true),
        (render, Some(""), &offending, true),
        ("/%761/chat/completions/render", None, &offending, true),
        (render, Some("Bearer sk-e2e"), &unknown, false),
        ("/tokenize", None, tokenize, true),
        ("/api/v1/chat/completions/render", None, &offending, true),
        (
            "/api/v1/chat/completions/render",
            Some("Bearer sk-e2e"),
            &offending,
            true,
        ),
        (
            "/%61pi/v1/chat/completions/render",
            Some("Bearer sk-e2e"),
            &offending,
            true,
        ),
        ("/api/tokenize", None, tokenize, true),
        (
            "/apix/v1/chat/completions/render",
            Some("Bearer sk-e2e"),
            &offending,
            false,
        ),
        (
            "/api//v1/chat/completions/render",
            Some("Bearer sk-e2e"),
            &offending,
            false,
        ),
        ("/api", Some("Bearer sk-e2e"), &offending, false),
    ];
    let mut rejected = rejected_total(client, g).await;
    for (path, auth, body, edge) in cases {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(auth.map(|a| ("authorization", a)));
        let want = send(client, direct, "POST", path, &headers, body.to_string()).await;
        let got = send(client, g.addr, "POST", path, &headers, body.to_string()).await;
        let now = rejected_total(client, g).await;
        if (got.status, &got.body) != (want.status, &want.body) || (now > rejected) != edge {
            failures.push(format!(
                "keyed {path} {auth:?}: vLLM {} {}, mmgate {} {} (at the edge: {}, expected {edge})",
                want.status,
                want.text(),
                got.status,
                got.text(),
                now > rejected
            ));
        }
        rejected = now;
    }
}

/// How many requests the gateway has answered at the edge (`outcome="rejected"`).
async fn rejected_total(client: &TestClient, g: &Gate) -> f64 {
    let text = send(client, g.admin, "GET", "/metrics", &[], String::new())
        .await
        .text();
    text.lines()
        .filter(|l| l.starts_with("mmgate_requests_total{") && l.contains(r#"outcome="rejected""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A strip gateway that knows the server's root path strips a request sent under it: vLLM
/// answers it as it answers the request without the field (ids aside).
async fn rooted_strip(
    client: &TestClient,
    direct: SocketAddr,
    g: &Gate,
    failures: &mut Vec<String>,
) {
    let msgs = r#""model":"tiny","messages":[{"role":"user","content":"hi"}]"#;
    let offending = format!(r#"{{{msgs},"mm_processor_kwargs":{{"a":1}}}}"#);
    let clean = format!("{{{msgs}}}");
    let headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-e2e"),
    ];
    let path = "/api/v1/chat/completions/render";
    let want = send(client, direct, "POST", path, &headers, clean).await;
    let got = send(client, g.addr, "POST", path, &headers, offending).await;
    let stripped = got.headers.get("x-mmgate-stripped").is_some();
    if want.status != 200
        || !stripped
        || (got.status, normalized(&got.body)) != (want.status, normalized(&want.body))
    {
        failures.push(format!(
            "rooted strip {path}: vLLM (clean body) {} {}, mmgate {} {}",
            want.status,
            want.text(),
            got.status,
            got.text()
        ));
    }
}

/// Around the nesting the family's parser takes (a render server's is two containers more
/// than `vllm serve`'s), a reject gateway that discovered its upstream answers byte for byte
/// as the untrusted server: the gate's 400 up to the limit, the parse error beyond it (and a
/// `NaN` leaf one container sooner).
async fn depth_boundary(client: &TestClient, p: &Pair<'_>, failures: &mut Vec<String>) {
    let limit = match p.family {
        "render" => mmgate::inspect::RENDER_MAX_DEPTH,
        _ => mmgate::inspect::SERVE_MAX_DEPTH,
    };
    let headers = [("content-type", "application/json")];
    for (total, leaf) in [
        (limit, "1"),
        (limit + 1, "1"),
        (limit - 1, "NaN"),
        (limit, "NaN"),
    ] {
        // The top-level object and the kwargs object count: `total - 2` arrays inside.
        let arrays = total - 2;
        let body = format!(
            r#"{{"model":"tiny","prompt":"hi","mm_processor_kwargs":{{"a":{}{leaf}{}}}}}"#,
            "[".repeat(arrays),
            "]".repeat(arrays)
        );
        let want = send(
            client,
            p.untrusted,
            "POST",
            "/tokenize",
            &headers,
            body.clone(),
        )
        .await;
        let got = send(client, p.reject.addr, "POST", "/tokenize", &headers, body).await;
        if (got.status, &got.body) != (want.status, &want.body) {
            failures.push(format!(
                "{} depth {total} ({leaf}): vLLM {} {}, mmgate {} {}",
                p.family,
                want.status,
                want.text(),
                got.status,
                got.text()
            ));
        }
    }
}

fn log_lines(g: &Gate) -> usize {
    std::fs::read_to_string(&g.proc.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(r#""event":"offending_request""#))
        .count()
}

/// Streams a chat completion and returns (first chunk, whole body, time to first byte).
async fn stream_chat(client: &TestClient, addr: SocketAddr) -> (Bytes, String, Duration) {
    use http_body_util::BodyExt;
    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":48,"stream":true,"ignore_eos":true}"#;
    let req = http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from_static(
            body.as_bytes(),
        )))
        .unwrap();
    let start = Instant::now();
    let res = client.request(req).await.unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.into_body();
    let mut first = None;
    let mut ttfb = Duration::ZERO;
    let mut all = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            if first.is_none() {
                ttfb = start.elapsed();
                first = Some(data.clone());
            }
            all.extend_from_slice(&data);
        }
    }
    (
        first.unwrap_or_default(),
        String::from_utf8(all).unwrap(),
        ttfb,
    )
}

fn check_sse(what: &str, first: &Bytes, all: &str, failures: &mut Vec<String>) {
    let events: Vec<&str> = all.split("\n\n").filter(|e| !e.is_empty()).collect();
    if events.last() != Some(&"data: [DONE]") || events.len() < 3 {
        failures.push(format!(
            "{what}: stream does not end with data: [DONE]: {all}"
        ));
    }
    if first.windows(6).any(|w| w == b"[DONE]") {
        failures.push(format!(
            "{what}: the first chunk already held the end of the stream (buffered)"
        ));
    }
    for e in &events[..events.len().saturating_sub(1)] {
        let ok = e
            .strip_prefix("data: ")
            .and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok())
            .is_some();
        if !ok {
            failures.push(format!("{what}: not a data event: {e}"));
        }
    }
}

fn openai_sdk(
    o: &Oracle,
    reject: &Gate,
    strip: &Gate,
    untrusted: SocketAddr,
    failures: &mut Vec<String>,
) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/openai_client.py");
    let out = Command::new(o.home.join("venv/bin/python"))
        .arg(script)
        .args([
            format!("http://{}/v1", reject.addr),
            format!("http://{}/v1", strip.addr),
            format!("http://{untrusted}/v1"),
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("openai client:\n{text}");
    if !out.status.success() {
        failures.push(format!("OpenAI SDK checks failed:\n{text}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_vllm_end_to_end() {
    let Some(o) = oracle() else {
        println!("skipped: no vLLM 0.31 oracle (set VLLM_ORACLE_HOME; .ci/run installs it with ../shared/oracle/setup.sh)");
        return;
    };
    let pooling = std::env::var("MMGATE_E2E_POOLING").map_or(true, |v| v != "0");
    let dir = std::env::temp_dir().join(format!("mmgate-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let client = client();
    let trust = ["--trust-request-mm-kwargs"];
    let started = Instant::now();
    let mut render_u = start_vllm(&o, &dir, "render-untrusted", "render", None, &[]);
    let mut render_t = start_vllm(&o, &dir, "render-trusted", "render", None, &trust);
    let mut render_keyed = start_vllm(
        &o,
        &dir,
        "render-keyed",
        "render",
        None,
        &["--api-key", "sk-e2e", "--root-path", "/api"],
    );
    let mut serve_u = start_vllm(&o, &dir, "serve-untrusted", "serve", None, &[]);
    let mut serve_t = start_vllm(&o, &dir, "serve-trusted", "serve", None, &trust);
    let pool_flags = ["--runner", "pooling", "--convert", "embed"];
    let pool_trusted = [
        "--runner",
        "pooling",
        "--convert",
        "embed",
        "--trust-request-mm-kwargs",
    ];
    let mut pools = pooling.then(|| {
        (
            start_vllm(
                &o,
                &dir,
                "pool-untrusted",
                "serve",
                Some("tiny-qwen2"),
                &pool_flags,
            ),
            start_vllm(
                &o,
                &dir,
                "pool-trusted",
                "serve",
                Some("tiny-qwen2"),
                &pool_trusted,
            ),
        )
    });
    {
        let mut all: Vec<&mut Vllm> = vec![
            &mut render_u,
            &mut render_t,
            &mut render_keyed,
            &mut serve_u,
            &mut serve_t,
        ];
        if let Some((pu, pt)) = pools.as_mut() {
            all.push(pu);
            all.push(pt);
        }
        wait_healthy(&client, &mut all, Duration::from_secs(900)).await;
    }
    println!("vLLM servers healthy after {:?}", started.elapsed());

    let mut failures = Vec::new();
    let mut families = vec![
        ("render", render_u.addr, render_t.addr),
        ("serve", serve_u.addr, serve_t.addr),
    ];
    if let Some((pu, pt)) = &pools {
        families.push(("pool", pu.addr, pt.addr));
    }
    for (family, untrusted, trusted) in families {
        let extra = if family == "pool" { POOL_POLICY } else { "" };
        let gateway = |mode, upstream| {
            start_gateway_with(&dir, &format!("{family}-{mode}"), mode, upstream, extra)
        };
        let mut reject = gateway("reject", trusted);
        let mut strip = gateway("strip", untrusted);
        let mut shadow = gateway("shadow", untrusted);
        for g in [&mut reject, &mut strip, &mut shadow] {
            wait_gateway(&client, g).await;
        }
        let pair = Pair {
            family,
            untrusted,
            trusted,
            reject: &reject,
            strip: &strip,
            shadow: &shadow,
        };
        let offending = equivalence(&client, &pair, &mut failures).await;
        depth_boundary(&client, &pair, &mut failures).await;
        wire::request_lines(untrusted, reject.addr, &mut failures).await;
        wire::handshakes(untrusted, reject.addr, &mut failures).await;
        wire::leftovers(untrusted, reject.addr, &mut failures).await;
        // Workers write their batched log lines when they go idle: wait for them, bounded.
        let mut lines = log_lines(&shadow);
        for _ in 0..200 {
            if lines >= offending {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
            lines = log_lines(&shadow);
        }
        if lines != offending {
            failures.push(format!(
                "{family}: shadow logged {lines} offending requests, vLLM rejected {offending}"
            ));
        }
        println!("{family}: equivalence checked, {offending} offending requests");
        // The acceptance probe: the real servers as they are, and the gateways in front
        // (shadow in front of an untrusted 0.31 server is transparent: it answers like it).
        probe(untrusted, "untrusted", &mut failures);
        probe(trusted, "trusted", &mut failures);
        probe(reject.addr, "untrusted", &mut failures);
        probe(strip.addr, "strip", &mut failures);
        probe(shadow.addr, "untrusted", &mut failures);
        if family == "serve" {
            let (first, all, ttfb_direct) = stream_chat(&client, untrusted).await;
            check_sse("direct", &first, &all, &mut failures);
            let (first, all, ttfb_gateway) = stream_chat(&client, shadow.addr).await;
            check_sse("through mmgate", &first, &all, &mut failures);
            println!("time to first byte: direct {ttfb_direct:?}, through mmgate {ttfb_gateway:?}");
            let reject_untrusted = start_gateway(&dir, "sdk-reject", "reject", untrusted);
            let mut reject_untrusted = reject_untrusted;
            wait_gateway(&client, &mut reject_untrusted).await;
            openai_sdk(&o, &reject_untrusted, &strip, untrusted, &mut failures);
            let mut routing = start_trusted_gateway(&dir, untrusted, trusted);
            wait_gateway(&client, &mut routing).await;
            trusted_routing(&client, &routing, &mut failures).await;
        }
    }
    let key_file = dir.join("upstream-key");
    std::fs::write(&key_file, "sk-e2e\n").unwrap();
    let vllm = format!(
        "[vllm]\napi_key_file = {:?}\nroot_path = \"/api\"\n",
        key_file.display().to_string()
    );
    let mut keyed_reject =
        start_gateway_with(&dir, "keyed-reject", "reject", render_keyed.addr, &vllm);
    let mut keyed_strip =
        start_gateway_with(&dir, "keyed-strip", "strip", render_keyed.addr, &vllm);
    wait_gateway(&client, &mut keyed_reject).await;
    wait_gateway(&client, &mut keyed_strip).await;
    keyed(&client, render_keyed.addr, &keyed_reject, &mut failures).await;
    rooted_strip(&client, render_keyed.addr, &keyed_strip, &mut failures).await;
    println!("end-to-end suite took {:?}", started.elapsed());
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
