use super::*;

const MINIMAL: &str = r#"
[upstream]
url = "http://127.0.0.1:8000"
"#;

/// The problems `Config::parse` reports for `text` (the test fails if it parses).
fn problems(text: &str) -> Vec<String> {
    let Err(ConfigError::Invalid(problems)) = Config::parse(text) else {
        panic!("expected problems for {text}")
    };
    problems
}

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
pooling_task = "encode"
"#;
    let problems = problems(text);
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
        "vllm.pooling_task: unknown pooling task \"encode\"",
    ] {
        assert!(all.contains(path), "missing {path} in:\n{all}");
    }
}

#[test]
fn the_upstreams_pooling_facts_are_read() {
    let base = "[upstream]\nurl = \"http://127.0.0.1:8000\"\n";
    let c = Config::parse(base).unwrap();
    assert_eq!(c.vllm.facts.pooling_task, None);
    assert!(!c.vllm.facts.io_processor_plugin);
    let text = format!(
        "{base}[vllm]\npooling_task = \"embed&token_classify\"\nio_processor_plugin = true\n"
    );
    let c = Config::parse(&text).unwrap();
    assert_eq!(c.vllm.facts.pooling_task, Some("embed&token_classify"));
    assert!(c.vllm.facts.io_processor_plugin);
}

#[test]
fn missing_upstream_is_an_error() {
    let problems = problems("");
    assert!(problems[0].starts_with("upstream.url: missing"));
}

const POOLS: &str = r#"
[pools.default]
members = ["http://127.0.0.1:8000", "http://127.0.0.1:8001"]
balance = "least_in_flight"
[pools.trusted]
members = ["http://127.0.0.1:9000"]
trusted = true
max_concurrency = 4
max_body_bytes = 1000
[pools.trusted.allow.mm_processor_kwargs]
max_pixels = { max = 1003520 }
[pools.trusted.allow.media_io_kwargs.video]
num_frames = { min = 1, max = 32 }
[clients.vision]
key_sha256 = ["0000000000000000000000000000000000000000000000000000000000000000"]
trusted = true
mode = "route"
route_to = "trusted"
"#;

#[test]
fn pools_and_clients_are_resolved() {
    let c = Config::parse(POOLS).unwrap();
    assert_eq!(c.pools[0].name, "default");
    assert_eq!(c.pools[0].members.len(), 2);
    assert_eq!(c.pools[0].balance, Balance::LeastInFlight);
    let t = &c.pools[1];
    assert!(t.trusted && t.health.is_some());
    assert_eq!(t.max_body_bytes, 1000);
    assert_eq!(t.values.mm_processor_kwargs[0].max, Some(1_003_520.0));
    assert_eq!(t.values.media_io_kwargs[0].0, "video");
    assert_eq!(c.clients[0].mode, Some(Mode::Route(1)));
    assert_eq!(c.clients[0].pool, 0);
}

#[test]
fn trust_and_identity_problems_are_named() {
    let text = r#"
[upstream]
url = "http://127.0.0.1:8000"
[pools.trusted]
members = ["http://127.0.0.1:9000"]
trusted = true
bogus = 1
[pools.trusted.allow.mm_processor_kwargs]
max_pixels = { max = 1, min = 5 }
[identity]
client_header = "x-client-id"
unknown = "maybe"
[clients.untrusted]
key_sha256 = ["abc"]
mode = "route"
route_to = "trusted"
[clients.nokey]
mode = "strip"
pool = "nowhere"
[clients.anonymous]
key_env = "MMGATE_TEST_UNSET_VARIABLE"
[pools.plain]
members = ["http://127.0.0.1:9001"]
[clients.a]
key_sha256 = ["{K}"]
header_ids = ["h"]
certificate_names = ["a.test", "shared.test"]
trusted = true
mode = "route"
route_to = "plain"
[clients.b]
key_sha256 = ["{K}"]
header_ids = ["h"]
certificate_names = ["shared.test"]
"#
    .replace("{K}", &hex::encode(crate::config::digest("k")));
    let problems = problems(&text);
    let all = problems.join("\n");
    for path in [
        "clients.untrusted.mode: \"route\" sends offending requests to a trusted pool",
        "clients.a.route_to: pool \"plain\" is not trusted",
        "clients.b: shares an API key with clients.a",
        "clients.b.header_ids: shares an id with clients.a",
        "clients.b.certificate_names: shares a name with clients.a",
        "pools.trusted.bogus: unknown key",
        "pools.trusted.allow.mm_processor_kwargs.max_pixels: min",
        "identity.trusted_networks: required",
        "identity.unknown:",
        "clients.untrusted.key_sha256[0]: not a SHA-256",
        "clients.untrusted.route_to: pool \"trusted\" is trusted",
        "clients.nokey: no identity",
        "clients.nokey.pool: no pool named",
        "clients.anonymous: \"anonymous\" is reserved",
    ] {
        assert!(all.contains(path), "missing {path} in:\n{all}");
    }
}

#[test]
fn upstream_and_pools_default_cannot_both_be_given() {
    let text = format!("{MINIMAL}\n[pools.default]\nmembers = [\"http://127.0.0.1:1\"]\n");
    let problems = problems(&text);
    assert!(problems[0].starts_with("pools.default: defined twice"));
    let trusted_default = "[pools.default]\nmembers = [\"http://127.0.0.1:1\"]\ntrusted = true\n";
    assert!(Config::parse(trusted_default).is_err());
}

#[test]
fn pools_load_whatever_their_names_sort_as() {
    // Table order is name order: "Alpha" and "batch" come before "default".
    let text = "[pools.default]\nmembers = [\"http://127.0.0.1:1\"]\n\
                [pools.batch]\nmembers = [\"http://127.0.0.1:2\"]\n\
                [pools.Alpha]\nmembers = [\"http://127.0.0.1:3\"]\n";
    let c = Config::parse(text).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = c.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[0], "default");
    assert_eq!(names.len(), 3);
}

#[test]
fn an_untrusted_pool_cannot_list_a_trusted_server() {
    let trusted = "[pools.trusted]\nmembers = [\"http://10.0.0.2:8000\"]\ntrusted = true\n";
    for (untrusted, path) in [
        ("[upstream]\nurl = \"http://10.0.0.2:8000\"\n", "upstream.url"),
        (
            "[pools.default]\nmembers = [\"http://10.0.0.1:8000\", \"HTTP://10.0.0.2:8000/\"]\n",
            "pools.default.members[1]",
        ),
        (
            "[upstream]\nurl = \"http://10.0.0.1:8000\"\n[pools.alias]\nmembers = [\"http://10.0.0.2:8000\"]\n",
            "pools.alias.members[0]",
        ),
    ] {
        let problems = problems(&format!("{untrusted}{trusted}"));
        let want = format!("{path}: http://10.0.0.2:8000/ is also a member of trusted pool \"trusted\"");
        assert!(problems.iter().any(|p| p.starts_with(&want)), "{want} not in {problems:?}");
    }
    // The scheme's default port is the same server; another port is another server.
    let text = "[upstream]\nurl = \"http://10.0.0.2\"\n[pools.trusted]\nmembers = [\"http://10.0.0.2:80\"]\ntrusted = true\n";
    assert!(Config::parse(text).is_err());
    let text = "[upstream]\nurl = \"http://10.0.0.2:8001\"\n".to_string() + trusted;
    Config::parse(&text).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn identity_headers_that_cannot_work_are_refused() {
    for (identity, want) in [
        (
            "api_key_header = \"Authorization\"\n",
            "identity.api_key_header: Authorization is already read",
        ),
        (
            "client_header = \"authorization\"\ntrusted_networks = [\"10.0.0.0/8\"]\n",
            "identity.client_header: Authorization is already read",
        ),
        (
            "api_key_header = \"x-api-key\"\nclient_header = \"X-API-KEY\"\ntrusted_networks = [\"10.0.0.0/8\"]\n",
            "identity.client_header: the same header as api_key_header",
        ),
        (
            "client_header = \"x-client-id\"\ntrusted_networks = [\"10.0.0.0/8\"]\n[clients.a]\nheader_ids = [\"a\", \" \"]\n",
            "clients.a.header_ids[1]: empty",
        ),
    ] {
        let text = format!("{MINIMAL}\n[identity]\n{identity}");
        let problems = problems(&text);
        assert!(problems.iter().any(|p| p.starts_with(want)), "{want} not in {problems:?}");
    }
}

#[test]
fn keys_from_files_and_environment_are_hashed() {
    let path = std::env::temp_dir().join(format!("mmgate-key-{}", std::process::id()));
    std::fs::write(&path, "sk-file\n").unwrap();
    let text = format!(
        "{MINIMAL}\n[clients.a]\nkey_file = \"{}\"\n[clients.b]\nkey_env = \"PATH\"\n",
        path.display()
    );
    let c = Config::parse(&text).unwrap();
    assert_eq!(c.clients[0].keys, vec![digest("sk-file")]);
    assert_eq!(
        c.clients[1].keys,
        vec![digest(&std::env::var("PATH").unwrap())]
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn the_upstreams_api_keys_are_read_as_digests() {
    assert!(Config::parse(MINIMAL).unwrap().vllm.api_keys.is_none());
    let path = std::env::temp_dir().join(format!("mmgate-vllm-key-{}", std::process::id()));
    std::fs::write(&path, "sk-vllm\n").unwrap();
    let one = hex::encode(digest("sk-one"));
    let text = format!(
        "{MINIMAL}\n[vllm]\napi_key_sha256 = [\"{one}\"]\napi_key_file = \"{}\"\n",
        path.display()
    );
    let c = Config::parse(&text).unwrap();
    let _ = std::fs::remove_file(path);
    let expected = crate::contract::ApiKeys::new(vec![digest("sk-one"), digest("sk-vllm")]);
    assert_eq!(c.vllm.api_keys, Some(expected));
    let sent = c
        .vllm
        .discovery_key
        .expect("the file's key is sent with discovery");
    assert_eq!(sent, "Bearer sk-vllm");
    assert!(sent.is_sensitive());
    assert_eq!(bearer_latin1("é").unwrap().as_bytes(), b"Bearer \xe9");
    assert!(bearer_latin1("€").is_none() && bearer_latin1("a\u{7}b").is_none());
    let only_digest = format!("{MINIMAL}\n[vllm]\napi_key_sha256 = [\"{one}\"]\n");
    assert!(Config::parse(&only_digest)
        .unwrap()
        .vllm
        .discovery_key
        .is_none());
    let bad = format!(
        "{MINIMAL}\n[vllm]\napi_key_sha256 = [\"abc\"]\napi_key_env = \"MMGATE_TEST_UNSET_VARIABLE\"\n"
    );
    let problems = problems(&bad);
    let all = problems.join("\n");
    assert!(
        all.contains("vllm.api_key_sha256[0]: not a SHA-256"),
        "{all}"
    );
    assert!(
        all.contains("vllm.api_key_env: environment variable"),
        "{all}"
    );
}

#[test]
fn the_upstreams_root_path_needs_a_leading_slash() {
    use crate::classify::RootPath;
    let root = |r: &str| Config::parse(&format!("{MINIMAL}\n[vllm]\nroot_path = \"{r}\"\n"));
    assert_eq!(
        Config::parse(MINIMAL).unwrap().vllm.root_path,
        RootPath::default()
    );
    assert_eq!(root("").unwrap().vllm.root_path, RootPath::default());
    assert_eq!(root("/api").unwrap().vllm.root_path, RootPath::new("/api"));
    let Err(ConfigError::Invalid(problems)) = root("api") else {
        panic!("expected problems")
    };
    assert!(
        problems[0].starts_with("vllm.root_path: \"api\" does not start with \"/\""),
        "{problems:?}"
    );
}

#[test]
fn shipped_trusted_pool_policy_loads() {
    let text = include_str!("../../policies/trusted-pool.toml");
    let c = Config::parse(text).unwrap();
    assert_eq!(c.pools.len(), 2);
    assert!(c.pools[1].trusted && !c.pools[0].trusted);
    assert_eq!(c.identity.unknown, Unknown::Reject);
    let vision = c.clients.iter().find(|k| k.name == "vision").unwrap();
    assert_eq!(vision.mode, Some(Mode::Route(1)));
    assert_eq!(vision.keys, vec![digest("sk-vision-example")]);
    let partners = c.clients.iter().find(|k| k.name == "partners").unwrap();
    assert_eq!(partners.header_ids.len(), 2);
}

#[test]
fn plain_by_default_with_reload_watching() {
    let c = Config::parse(MINIMAL).unwrap();
    assert!(c.tls.is_none() && c.plain.is_none() && c.watched.is_empty());
    assert_eq!(c.reload.watch, Some(Duration::from_millis(2000)));
    let c = Config::parse(&format!("{MINIMAL}[reload]\nwatch = false\n")).unwrap();
    assert_eq!(c.reload.watch, None);
    assert!(c.pools[0].members[0].tls.is_none());
}

#[test]
fn https_members_get_a_tls_client_with_the_system_roots() {
    let c = Config::parse(
        "[pools.default]\nmembers = [\"http://127.0.0.1:1\", \"https://vllm.internal:8443\"]\n",
    )
    .unwrap();
    assert!(c.pools[0].members.iter().all(|m| m.tls.is_some()));
    let err = Config::parse("[upstream]\nurl = \"ftp://127.0.0.1:1\"\n").unwrap_err();
    assert!(err.to_string().contains("http:// or https://"), "{err}");
}

#[test]
fn plain_addr_is_refused_without_tls_and_not_blamed_for_a_tls_section_that_fails() {
    let named = |tls: &str| {
        let text = format!(
            "[listen]\nplain_addr = \"127.0.0.1:8080\"\n{tls}\n[upstream]\nurl = \"http://127.0.0.1:8000\"\n"
        );
        problems(&text).join("\n")
    };
    assert!(named("").contains("listen.plain_addr: only with [tls]"));
    let missing = named("[tls]\ncert = \"/nonexistent/c.pem\"\nkey = \"/nonexistent/k.pem\"");
    assert!(missing.contains("tls.cert: cannot read"), "{missing}");
    assert!(!missing.contains("listen.plain_addr"), "{missing}");
}

#[test]
fn every_unreadable_tls_file_is_named() {
    let text = r#"
[tls]
cert = "/nonexistent/c.pem"
key = "/nonexistent/k.pem"
client_auth = "required"
client_ca = "/nonexistent/ca.pem"
[pools.default]
members = ["https://127.0.0.1:8443"]
tls_ca = "/nonexistent/up-ca.pem"
tls_cert = "/nonexistent/up-c.pem"
tls_key = "/nonexistent/up-k.pem"
"#;
    let problems = problems(text);
    let all = problems.join("\n");
    for field in [
        "tls.cert",
        "tls.key",
        "tls.client_ca",
        "pools.default.tls_ca",
        "pools.default.tls_cert",
        "pools.default.tls_key",
    ] {
        assert!(
            all.contains(&format!("{field}: cannot read")),
            "{field}: {all}"
        );
    }
}

#[test]
fn one_of_lists_scalars_alone() {
    let parse = |bounds: &str| {
        Config::parse(&format!(
            "[upstream]\nurl = \"http://127.0.0.1:8000\"\n[pools.trusted]\nmembers = [\"http://127.0.0.1:9000\"]\ntrusted = true\n[pools.trusted.allow.mm_processor_kwargs]\n{bounds}\n"
        ))
    };
    let c =
        parse("do_resize = { one_of = [true] }\nresample = { one_of = [2, 3.0, \"x\"] }").unwrap();
    let pool = c.pools.iter().find(|p| p.name == "trusted").unwrap();
    let rules = &pool.values.mm_processor_kwargs;
    let find = |k: &str| rules.iter().find(|r| r.key == k).unwrap().one_of.clone();
    assert_eq!(find("do_resize"), [Scalar::Bool(true)]);
    assert_eq!(
        find("resample"),
        [
            Scalar::Number(2.0),
            Scalar::Number(3.0),
            Scalar::Text("x".into())
        ]
    );
    let long = format!("a = {{ one_of = [\"{}\"] }}", "x".repeat(129));
    for (bounds, problem) in [
        ("a = { one_of = [] }", "one_of lists no value"),
        ("a = { one_of = [1], max = 2 }", "one_of with min or max"),
        ("a = { one_of = [[1]] }", "one_of[0]: expected a boolean"),
        ("a = { one_of = true }", "expected a list"),
        (long.as_str(), "at most 128 bytes"),
    ] {
        let e = parse(bounds).unwrap_err().to_string();
        assert!(e.contains(problem), "{bounds}: {e}");
    }
}

/// What vLLM's CORS middleware (Starlette's, with vLLM's defaults or its flags) adds to an
/// answer, for the answers mmgate gives in its place.
#[test]
fn cors_headers_follow_starlettes_middleware() {
    let headers = |cors: &Cors, origin: Option<&'static str>| {
        let mut h = http::HeaderMap::new();
        cors.apply(origin.map(HeaderValue::from_static).as_ref(), &mut h);
        let mut out: Vec<String> = h
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
            .collect();
        out.sort();
        out
    };
    let c = Config::parse(MINIMAL).unwrap();
    let all = &c.vllm.cors;
    assert_eq!(headers(all, None), ["vary: Origin"]);
    assert_eq!(
        headers(all, Some("https://a.example")),
        ["access-control-allow-origin: *", "vary: Origin"]
    );
    let listed = Config::parse(&format!(
        "{MINIMAL}[vllm]\nallowed_origins = [\"https://a.example\"]\nallow_credentials = true\n"
    ))
    .unwrap();
    let listed = &listed.vllm.cors;
    assert_eq!(
        headers(listed, Some("https://a.example")),
        [
            "access-control-allow-credentials: true",
            "access-control-allow-origin: https://a.example",
            "vary: Origin"
        ]
    );
    assert_eq!(
        headers(listed, Some("https://b.example")),
        ["access-control-allow-credentials: true", "vary: Origin"]
    );
    assert!(
        problems(&format!("{MINIMAL}[vllm]\nallowed_origins = [\"a\\nb\"]\n"))
            .iter()
            .any(|p| p.contains("vllm.allowed_origins"))
    );
}
