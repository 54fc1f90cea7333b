//! The policy reference (docs/policy.md) documents exactly the keys the policy reader accepts:
//! every key the reader asks for when it reads a policy that uses every section is in the
//! reference's tables, and every key in the tables is one the reader asks for.

use std::collections::BTreeSet;

/// A policy with every section and every kind of free-form entry, so the reader asks for
/// every key it knows. It need not be valid (files it names do not exist).
const EVERYTHING: &str = r#"
[listen]
addr = "127.0.0.1:8443"
admin = "127.0.0.1:9464"
plain_addr = "127.0.0.1:8080"
[tls]
cert = "/nonexistent/server.pem"
key = "/nonexistent/server.key"
client_auth = "optional"
client_ca = "/nonexistent/ca.pem"
[reload]
watch = true
interval_ms = 2000
[upstream]
url = "http://127.0.0.1:8000"
[limits]
max_body_bytes = 1024
[gate]
default = "reject"
[gate.routes]
chat = "strip"
[pools.default]
members = ["http://127.0.0.1:8000"]
[pools.trusted]
members = ["https://127.0.0.1:8001"]
trusted = true
[pools.trusted.allow.mm_processor_kwargs]
max_pixels = { min = 1, max = 2 }
[pools.trusted.allow.media_io_kwargs.video]
num_frames = { min = 1, max = 32 }
[identity]
unknown = "reject"
[clients.a]
key_sha256 = ["00"]
key_file = "/nonexistent/key"
key_env = "MMGATE_UNSET"
header_ids = ["a"]
certificate_names = ["a.example"]
[vllm]
served_models = ["tiny"]
max_completion_prompts = 1024
pooling_task = "embed"
allowed_origins = ["https://app.example"]
allow_credentials = true
[log]
kwargs_values = true
"#;

fn documented() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policy.md");
    let text = std::fs::read_to_string(path).expect("docs/policy.md");
    // Reference rows look like: | `pools.*.members` | ... |
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(key, _)| key.to_string())
        .collect()
}

#[test]
fn the_policy_reference_lists_exactly_the_keys_the_reader_accepts() {
    let read = mmgate::config::Config::keys_read(EVERYTHING).expect("TOML");
    let documented = documented();
    let undocumented: Vec<_> = read.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&read).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "keys the reader accepts but docs/policy.md does not list: {undocumented:?}\n\
         keys docs/policy.md lists but the reader does not accept (or the test policy above \
         does not use their section): {unknown:?}"
    );
}

#[test]
fn every_key_of_the_shipped_policies_is_documented() {
    let documented = documented();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let read = mmgate::config::Config::keys_read(&text).unwrap();
        let missing: Vec<_> = read.difference(&documented).collect();
        assert!(missing.is_empty(), "{}: {missing:?}", path.display());
    }
}
