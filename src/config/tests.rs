use super::*;

const MINIMAL: &str = r#"
[upstream]
url = "http://127.0.0.1:8000"
"#;

#[test]
fn minimal_policy_takes_defaults() {
    let c = Config::parse(MINIMAL).unwrap();
    assert_eq!(c.gate.mode(RouteKind::Chat), Mode::Shadow);
    assert_eq!(c.limits.max_body_bytes, 64 << 20);
    assert_eq!(c.gate.on_unclassifiable, OnUnclassifiable::Reject);
    assert!(c.vllm.discover_models);
}

#[test]
fn route_overrides_apply() {
    let c = Config::parse(&format!(
        "{MINIMAL}\n[gate]\ndefault = \"strip\"\n[gate.routes]\nchat = \"reject\"\n"
    ))
    .unwrap();
    assert_eq!(c.gate.mode(RouteKind::Chat), Mode::Reject);
    assert_eq!(c.gate.mode(RouteKind::Tokenize), Mode::Strip);
}

#[test]
fn every_problem_is_named() {
    let text = r#"
bogus = 1
[listen]
addr = "nowhere"
[upstream]
url = "https://x:1/path"
connect_timeout_ms = 0
[limits]
max_body_bytes = "big"
[gate]
default = "drop"
on_unclassifiable = "maybe"
[gate.routes]
chat = "reject"
chats = "reject"
[vllm]
served_models = ["a", 2]
"#;
    let Err(ConfigError::Invalid(problems)) = Config::parse(text) else {
        panic!("expected problems")
    };
    let all = problems.join("\n");
    for path in [
        "bogus: unknown key",
        "listen.addr:",
        "upstream.url:",
        "limits.max_body_bytes:",
        "gate.default:",
        "gate.on_unclassifiable:",
        "gate.routes.chats: unknown route",
        "vllm.served_models[1]:",
    ] {
        assert!(all.contains(path), "missing {path} in:\n{all}");
    }
}

#[test]
fn missing_upstream_is_an_error() {
    let Err(ConfigError::Invalid(problems)) = Config::parse("") else {
        panic!("expected problems")
    };
    assert!(problems[0].starts_with("upstream.url: missing"));
}
