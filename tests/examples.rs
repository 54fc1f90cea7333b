//! The deployment examples under `examples/` stay true to the code:
//! - every YAML file (multi-document too) and JSON file parses;
//! - every mmgate policy they carry (Kubernetes ConfigMaps, the compose mount, standalone
//!   `.toml` files) loads with mmgate's own parser, and the manifests agree with it: the
//!   kubelet probes `/readyz` and `/healthz` on the policy's admin port, bound to all
//!   interfaces, and the Service port is the data listener;
//! - the Grafana dashboard and the alert rules name only metrics mmgate exports (names from
//!   [`Metrics::exported_names`], not a hand list);
//! - the OpenAI SDK snippet answers as it documents, against the real binary in front of two
//!   in-process fake upstreams, when a Python with `openai` is at hand (skipped otherwise).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mmgate::config::Config;
use mmgate::metrics::Metrics;
use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

#[path = "support/serving.rs"]
mod serving;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `examples/` whose name ends in one of `exts`.
fn example_files(exts: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, exts, out);
            } else if path
                .extension()
                .is_some_and(|e| exts.iter().any(|x| e == *x))
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("examples"), exts, &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A YAML document as JSON (keys as strings), to walk it like the JSON files.
fn to_json(y: &Yaml) -> Value {
    match y {
        Yaml::Real(s) => serde_json::Number::from_f64(s.parse().unwrap())
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Yaml::Hash(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match to_json(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Yaml::Null => Value::Null,
        Yaml::Alias(_) | Yaml::BadValue => panic!("unsupported YAML node {y:?}"),
    }
}

/// Every document of a YAML file (a parse error, a duplicate key or an empty file fails).
fn yaml_docs(path: &Path) -> Vec<Value> {
    let docs = YamlLoader::load_from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()));
    assert!(!docs.is_empty(), "{} has no document", path.display());
    docs.iter().map(to_json).collect()
}

/// The metric names a PromQL expression uses: identifiers starting with `mmgate_`, outside
/// string literals (label values) and comments.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut chars = expr.char_indices().peekable();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while let Some((i, c)) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                while let Some((_, d)) = chars.next() {
                    if d == '\\' && c != '`' {
                        chars.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '#' => {
                for (_, d) in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            c if ident(c) => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if !ident(d) {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                let word = &expr[i..end];
                if word.starts_with("mmgate_") {
                    names.insert(word.to_string());
                }
            }
            _ => {}
        }
    }
    names
}

/// The mmgate metric names `exprs` use, and those of them mmgate does not export.
fn unknown_metrics<'a>(
    exprs: impl IntoIterator<Item = &'a str>,
    exported: &BTreeSet<String>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let used: BTreeSet<String> = exprs.into_iter().flat_map(metric_names).collect();
    let unknown = used.difference(exported).cloned().collect();
    (used, unknown)
}

#[test]
fn the_metric_extractor_finds_names_and_flags_unknown_ones() {
    let expr = r#"sum by (le) (rate(mmgate_request_duration_seconds_bucket{route="chat", x="mmgate_not_a_metric"}[5m]))
        / ignoring(x) mmgate_requests_total # mmgate_in_a_comment
        + on() rate(mmgate_nope_total[$__rate_interval]) > 1e-3"#;
    let names: Vec<_> = metric_names(expr).into_iter().collect();
    assert_eq!(
        names,
        [
            "mmgate_nope_total",
            "mmgate_request_duration_seconds_bucket",
            "mmgate_requests_total"
        ]
    );
    let exported = Metrics::new().exported_names();
    let (used, unknown) = unknown_metrics([expr], &exported);
    assert_eq!(used.len(), 3);
    assert_eq!(unknown, BTreeSet::from(["mmgate_nope_total".to_string()]));
    // A histogram's base name is not a series; its suffixed names are.
    let (_, unknown) = unknown_metrics(["rate(mmgate_pool_wait_seconds[5m])"], &exported);
    assert_eq!(unknown.len(), 1);
    let (_, unknown) = unknown_metrics(["rate(mmgate_pool_wait_seconds_count[5m])"], &exported);
    assert!(unknown.is_empty());
}

#[test]
fn every_example_yaml_and_json_file_parses() {
    let yaml = example_files(&["yaml", "yml"]);
    let json = example_files(&["json"]);
    for path in &yaml {
        for (i, doc) in yaml_docs(path).iter().enumerate() {
            assert!(
                doc.is_object(),
                "{} document {i} is not a mapping",
                path.display()
            );
        }
    }
    for path in &json {
        serde_json::from_str::<Value>(&read(path))
            .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()));
    }
    let names: BTreeSet<_> = yaml
        .iter()
        .chain(&json)
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for expected in [
        "examples/kubernetes/sidecar.yaml",
        "examples/kubernetes/edge.yaml",
        "examples/compose/docker-compose.yaml",
        "examples/monitoring/prometheus.yml",
        "examples/monitoring/alerts.yml",
        "examples/monitoring/grafana-dashboard.json",
    ] {
        assert!(names.contains(expected), "{expected} missing: {names:?}");
    }
}

/// The Kubernetes objects of every manifest under `examples/kubernetes/`.
fn k8s_objects() -> Vec<(PathBuf, Value)> {
    let dir = root().join("examples/kubernetes");
    let mut out = Vec::new();
    for path in example_files(&["yaml", "yml"]) {
        if path.starts_with(&dir) {
            for doc in yaml_docs(&path) {
                for key in ["apiVersion", "kind"] {
                    assert!(doc[key].is_string(), "{}: no {key}", path.display());
                }
                assert!(
                    doc["metadata"]["name"].is_string(),
                    "{}: no name",
                    path.display()
                );
                out.push((path.clone(), doc));
            }
        }
    }
    out
}

/// A container port: a number, or the name of one of the container's ports.
fn port_of(container: &Value, port: &Value) -> u64 {
    if let Some(n) = port.as_u64() {
        return n;
    }
    let name = port.as_str().expect("a port number or name");
    container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no container port named {name}"))
}

#[test]
fn the_kubernetes_policies_load_and_agree_with_their_manifests() {
    let objects = k8s_objects();
    let mut checked = 0;
    for (path, obj) in &objects {
        if obj["kind"] != "Deployment" {
            continue;
        }
        let pod = &obj["spec"]["template"];
        let containers = pod["spec"]["containers"].as_array().unwrap();
        for c in containers.iter().filter(|c| c["name"] == "mmgate") {
            let at = format!("{}: Deployment {}", path.display(), obj["metadata"]["name"]);
            // The policy file the container serves, through its volume, to its ConfigMap.
            let args: Vec<&str> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            let policy_at = args.windows(2).find(|w| w[0] == "--policy").unwrap()[1];
            let (dir, file) = policy_at.rsplit_once('/').unwrap();
            let mount = c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == dir)
                .unwrap_or_else(|| panic!("{at}: nothing mounted at {dir}"));
            assert!(
                mount.get("subPath").is_none(),
                "{at}: a subPath mount never updates"
            );
            let volume = pod["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap();
            let map_name = &volume["configMap"]["name"];
            let map = objects
                .iter()
                .map(|(_, o)| o)
                .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == *map_name)
                .unwrap_or_else(|| panic!("{at}: no ConfigMap {map_name}"));
            let text = map["data"][file].as_str().unwrap();
            let policy = Config::parse(text)
                .unwrap_or_else(|e| panic!("{at}: ConfigMap {map_name} {file}: {e}"));
            // Probes and scrapes reach the admin listener; the data port is the listener's.
            assert!(
                policy.admin.ip().is_unspecified(),
                "{at}: the kubelet and Prometheus cannot reach an admin listener on {}",
                policy.admin
            );
            for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
                let get = &c[probe]["httpGet"];
                assert_eq!(get["path"], path, "{at}: {probe}");
                assert_eq!(
                    port_of(c, &get["port"]),
                    u64::from(policy.admin.port()),
                    "{at}: {probe}"
                );
            }
            assert_eq!(port_of(c, &"admin".into()), u64::from(policy.admin.port()));
            assert_eq!(port_of(c, &"http".into()), u64::from(policy.listen.port()));
            assert_eq!(
                pod["metadata"]["annotations"]["prometheus.io/scrape"],
                "true"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 2,
        "expected the sidecar and the edge mmgate, found {checked}"
    );
    // Every Service in front of a pod with mmgate targets mmgate's data port, never vLLM.
    for (path, svc) in objects.iter().filter(|(_, o)| o["kind"] == "Service") {
        let selector = svc["spec"]["selector"].as_object().unwrap();
        let gated = objects.iter().any(|(_, o)| {
            o["kind"] == "Deployment"
                && selector
                    .iter()
                    .all(|(k, v)| o["spec"]["template"]["metadata"]["labels"][k] == *v)
                && o["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["name"] == "mmgate")
        });
        if gated {
            for port in svc["spec"]["ports"].as_array().unwrap() {
                assert_eq!(port["targetPort"], "http", "{}: {}", path.display(), svc);
            }
        }
    }
}

#[test]
fn the_compose_file_mounts_files_that_exist_and_a_policy_that_loads() {
    let dir = root().join("examples/compose");
    let compose = &yaml_docs(&dir.join("docker-compose.yaml"))[0];
    for (name, service) in compose["services"].as_object().unwrap() {
        for volume in service["volumes"].as_array().into_iter().flatten() {
            let source = volume.as_str().unwrap().split(':').next().unwrap();
            if source.starts_with('.') {
                assert!(
                    dir.join(source).exists(),
                    "service {name} mounts missing {source}"
                );
            }
        }
    }
    let mmgate = &compose["services"]["mmgate"];
    let command: Vec<&str> = mmgate["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let policy_at = command.windows(2).find(|w| w[0] == "--policy").unwrap()[1];
    let (target, file) = policy_at.rsplit_once('/').unwrap();
    let source = mmgate["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .find_map(|v| {
            let mut parts = v.split(':');
            let source = parts.next()?;
            (parts.next()? == target).then_some(source)
        })
        .unwrap_or_else(|| panic!("nothing mounted at {target}"));
    let policy = Config::parse(&read(&dir.join(source).join(file))).unwrap();
    assert!(
        policy.admin.ip().is_unspecified(),
        "Prometheus scrapes mmgate:9464"
    );
    let ports: Vec<&str> = mmgate["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(ports.contains(&format!("{0}:{0}", policy.listen.port()).as_str()));
    assert!(ports.contains(&format!("127.0.0.1:{0}:{0}", policy.admin.port()).as_str()));
}

#[test]
fn every_standalone_example_policy_loads_given_its_files() {
    // Certificate and key paths in the examples are placeholders under /etc/mmgate/tls/:
    // point them at generated ones (one self-signed certificate and its key for all).
    let tmp = std::env::temp_dir().join(format!("mmgate-examples-tls-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let mut loaded = 0;
    for path in example_files(&["toml"]) {
        let mut text = read(&path);
        for quoted in text.clone().split('"').skip(1).step_by(2) {
            if let Some(name) = quoted.strip_prefix("/etc/mmgate/tls/") {
                let pem = match name.ends_with(".key") {
                    true => ck.key_pair.serialize_pem(),
                    false => ck.cert.pem(),
                };
                let file = tmp.join(name);
                std::fs::write(&file, pem).unwrap();
                text = text.replace(quoted, file.to_str().unwrap());
            }
        }
        Config::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        loaded += 1;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(loaded >= 2, "the compose and TLS example policies");
}

#[test]
fn the_dashboard_names_only_metrics_mmgate_exports() {
    let path = root().join("examples/monitoring/grafana-dashboard.json");
    let dashboard: Value = serde_json::from_str(&read(&path)).unwrap();
    // Every PromQL string: panel targets' expr, and the template variables' queries.
    fn exprs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("expr" | "query" | "definition", Value::String(s)) => out.push(s),
                        _ => exprs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    exprs(&dashboard, &mut found);
    let exported = Metrics::new().exported_names();
    let (used, unknown) = unknown_metrics(found, &exported);
    assert!(
        unknown.is_empty(),
        "the dashboard names metrics mmgate does not export: {unknown:?}"
    );
    assert!(
        used.len() >= 15,
        "the dashboard should cover most metrics: {used:?}"
    );
    let ids: Vec<_> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        ids.len(),
        ids.iter().collect::<BTreeSet<_>>().len(),
        "panel ids are unique"
    );
}

#[test]
fn the_alert_rules_name_only_metrics_mmgate_exports() {
    let path = root().join("examples/monitoring/alerts.yml");
    let rules = &yaml_docs(&path)[0];
    let mut exprs = Vec::new();
    for group in rules["groups"].as_array().unwrap() {
        assert!(group["name"].is_string());
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["alert"].as_str().expect("an alerting rule");
            assert!(rule["labels"]["severity"].is_string(), "{name}: severity");
            assert!(
                rule["annotations"]["summary"].is_string(),
                "{name}: summary"
            );
            exprs.push(rule["expr"].as_str().unwrap().to_string());
        }
    }
    let exported = Metrics::new().exported_names();
    let (used, unknown) = unknown_metrics(exprs.iter().map(String::as_str), &exported);
    assert!(
        unknown.is_empty(),
        "alert rules name unknown metrics: {unknown:?}"
    );
    assert!(used.len() >= 6, "{used:?}");
    // Both Prometheus configurations load these rules.
    for config in [
        "examples/monitoring/prometheus.yml",
        "examples/compose/prometheus.yml",
    ] {
        let doc = &yaml_docs(&root().join(config))[0];
        let files = doc["rule_files"].as_array().unwrap();
        assert!(
            files
                .iter()
                .any(|f| f.as_str().unwrap().ends_with("alerts.yml")),
            "{config}"
        );
        assert!(
            !doc["scrape_configs"].as_array().unwrap().is_empty(),
            "{config}"
        );
    }
}

// --- the OpenAI SDK snippet, against the real binary ---

/// A fake vLLM on loopback in its own thread: `/health`, `/v1/models` (`tiny`) and a chat
/// completion naming `who` for every POST, counted.
fn fake_upstream(who: &'static str) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let posts = Arc::new(AtomicU64::new(0));
    let counted = posts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let counted = counted.clone();
            std::thread::spawn(move || serve_fake(stream, who, &counted));
        }
    });
    (addr, posts)
}

/// One keep-alive HTTP/1.1 connection of the fake (Content-Length bodies only).
fn serve_fake(mut stream: TcpStream, who: &str, posts: &AtomicU64) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap_or(0));
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let post = head.starts_with("post");
        buf.drain(..head_end + length);
        let body = match (post, path.as_str()) {
            (false, "/health") => String::new(),
            (false, "/v1/models") => {
                r#"{"object":"list","data":[{"id":"tiny","object":"model","owned_by":"vllm"}]}"#
                    .to_string()
            }
            (true, _) => {
                posts.fetch_add(1, Ordering::SeqCst);
                format!(
                    r#"{{"id":"chatcmpl-fake","object":"chat.completion","created":0,"model":"tiny","choices":[{{"index":0,"message":{{"role":"assistant","content":"hello from {who}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}}}"#
                )
            }
            _ => {
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
                continue;
            }
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// A Python that can `import openai`: `$MMGATE_PYTHON`, the vLLM oracle's venv, or python3.
fn python_with_openai() -> Option<PathBuf> {
    let oracle = std::env::var("VLLM_ORACLE_HOME").unwrap_or_else(|_| "/tmp/vllm-oracle".into());
    let candidates = [
        std::env::var("MMGATE_PYTHON").ok().map(PathBuf::from),
        Some(Path::new(&oracle).join("venv/bin/python")),
        Some(PathBuf::from("python3")),
    ];
    candidates.into_iter().flatten().find(|py| {
        Command::new(py)
            .args(["-c", "import openai"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn the_openai_snippet_sees_what_it_documents_in_every_mode() {
    let snippet = root().join("examples/clients/openai_modes.py");
    let Some(python) = python_with_openai() else {
        println!(
            "skipped: no Python with the openai package (set MMGATE_PYTHON, or install the \
             vLLM oracle as .ci/run does); {} was not run",
            snippet.display()
        );
        return;
    };
    let (default, default_posts) = fake_upstream("default");
    let (trusted, trusted_posts) = fake_upstream("trusted");
    // The compose policy, on loopback.
    let policy = read(&root().join("examples/compose/mmgate/policy.toml"))
        .replace("http://fake-vllm:8000", &format!("http://{default}"))
        .replace(
            "http://fake-vllm-trusted:8000",
            &format!("http://{trusted}"),
        )
        .replace("0.0.0.0:8080", serving::ANY)
        .replace("0.0.0.0:9464", serving::ANY);
    let dir = std::env::temp_dir().join(format!("mmgate-examples-sdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy_file = dir.join("policy.toml");
    std::fs::write(&policy_file, policy).unwrap();
    let gateway = serving::Serving::start(
        Command::new(env!("CARGO_BIN_EXE_mmgate"))
            .args(["serve", "--policy"])
            .arg(&policy_file)
            .stdout(Stdio::null()),
    );
    let (data, admin) = (gateway.listen, gateway.admin);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !http_get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(Instant::now() < deadline, "mmgate did not become ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new(&python)
        .arg(&snippet)
        .args(["--base-url", &format!("http://{data}/v1"), "--check"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The trusted client's in-bounds request, and only it, reached the trusted upstream;
    // shadow, strip and the request without kwargs the default one (reject and the
    // out-of-bounds request never left mmgate).
    assert!(stdout.contains("'hello from trusted'"), "{stdout}");
    assert_eq!(trusted_posts.load(Ordering::SeqCst), 1);
    assert_eq!(default_posts.load(Ordering::SeqCst), 3);
}
