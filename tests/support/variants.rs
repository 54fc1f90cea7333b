//! Generated variants of the recorded gate-rejected requests: the same body under other
//! content types and other spellings of the path, and bodies that an earlier check of vLLM
//! may refuse first. The real vLLM server is the reference
//! (tests/e2e_vllm.rs replays each variant to it and through mmgate), so the generator only
//! has to be varied, not right: whatever the server does is the expected answer.
//!
//! Deterministic: a fixed-seed xorshift picks the mutations, so a failure names a variant
//! that the next run generates again.

use super::cases::Case;

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// Media types around `application/json`: accepted ones, near misses and others.
const MEDIA: &[&str] = &[
    "application/json",
    "application/json",
    "application/json",
    "application/x-json",
    "application/jsonl",
    "application/vnd.api+json",
    "application/problem+json",
    "text/json",
    "text/plain",
    "application/jso",
    "application/json5",
    "application",
    "*/*",
    "",
];

/// Parameters and their separators, as clients and attackers write them.
const PARAMS: &[&str] = &[
    "; charset=utf-8",
    ";charset=UTF-8",
    "; charset=latin-1",
    "; charset=\"utf-16\"",
    ";",
    "; boundary=x; charset=utf-8",
    " ; charset=utf-8",
    "\t;charset=utf-8",
    ", text/plain",
    ",application/json",
    "; q=0.9",
];

const PADDING: &[&str] = &["", "", " ", "  ", "\t", " \t"];

fn random_case(rng: &mut Rng, s: &str) -> String {
    let mode = rng.below(4);
    s.chars()
        .map(|c| match mode {
            0 => c,
            1 => c.to_ascii_uppercase(),
            _ if rng.chance(50) => c.to_ascii_uppercase(),
            _ => c,
        })
        .collect()
}

/// One generated `Content-Type` header list (possibly empty, possibly two headers).
fn content_types(rng: &mut Rng) -> Vec<String> {
    let one = |rng: &mut Rng| {
        let media = rng.pick(MEDIA);
        let mut v = random_case(rng, media);
        if rng.chance(45) {
            v.push_str(rng.pick(PARAMS));
        }
        let (before, after) = (rng.pick(PADDING), rng.pick(PADDING));
        format!("{before}{v}{after}")
    };
    match rng.below(10) {
        0 => Vec::new(),
        1 => vec![one(rng), one(rng)],
        _ => vec![one(rng)],
    }
}

/// Byte-level spellings that uvicorn decodes (or routes) differently.
fn path_variant(rng: &mut Rng, path: &str) -> String {
    let mut out = String::new();
    for (i, c) in path.chars().enumerate() {
        // The first slash stays: the request target must be origin-form.
        if c == '/' && i > 0 && rng.chance(6) {
            out.push_str(if rng.chance(50) { "%2F" } else { "%2f" });
        } else if c.is_ascii_alphanumeric() && rng.chance(12) {
            let hex = format!("%{:02X}", c as u8);
            out.push_str(&if rng.chance(50) {
                hex.to_ascii_lowercase()
            } else {
                hex
            });
        } else if c.is_ascii_lowercase() && rng.chance(2) {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push(c);
        }
    }
    match rng.below(12) {
        0 => out.push('/'),
        1 => out.push_str("?stream=false"),
        2 => out.push_str("/?a=1"),
        3 => out.push_str(";v=1"),
        4 => out.push_str("%20"),
        5 => out.push_str("/."),
        6 => out = format!("/{out}"),
        7 => out = out.replacen("/v1/", "/v1/./", 1),
        8 => out = out.replacen("/v1/", "/x/../v1/", 1),
        9 => out.push('?'),
        10 => out.push_str("%23frag"),
        _ => {}
    }
    assert!(
        format!("http://127.0.0.1:1{out}")
            .parse::<http::Uri>()
            .is_ok(),
        "generated an unsendable path {out:?}"
    );
    out
}

fn with_content_types(c: &Case, types: Vec<String>) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = c
        .headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-type"))
        .cloned()
        .collect();
    headers.extend(types.into_iter().map(|t| ("content-type".to_string(), t)));
    headers
}

/// Members that a request model or a handler refuses before the gate runs on some routes
/// and not on others (types, required fields, `model_validator`s, `/pooling`'s task and
/// `dimensions`), each put first in the body: a later member of the same name still wins,
/// as in vLLM.
const EARLIER: &[&str] = &[
    r#""stream_options":{"include_usage":true}"#,
    r#""stream_options":{"include_usage":true},"stream":true"#,
    r#""stream_options":1"#,
    r#""prompt":{"id":"p"}"#,
    r#""prompt":5"#,
    r#""prompt":"""#,
    r#""prompt_embeds":{}"#,
    r#""input":{"a":1}"#,
    r#""temperature":"hot""#,
    r#""priority":"high""#,
    r#""top_n":"x""#,
    r#""logprob_token_ids":[1]"#,
    r#""top_logprobs":"2""#,
    r#""continue_final_message":true,"add_generation_prompt":true"#,
    r#""use_beam_search":"yes""#,
    r#""use_beam_search":"tru""#,
    r#""max_tokens":5.5"#,
    r#""max_tokens":" 1_000 ""#,
    r#""temperature":"1_0.5e-1""#,
    r#""n":"\ud83d\ude00""#,
    r#""suffix":"s""#,
    r#""suffix":"s","echo":true"#,
    r#""prompt_embeds":"e","echo":1"#,
    r#""stream":"on","use_beam_search":true"#,
    r#""prompt":["a",1]"#,
    r#""truncate_prompt_tokens":-5"#,
    r#""reasoning_effort":"LOW""#,
    r#""encoding_format":"hex""#,
    r#""top_logprobs":-3"#,
    r#""prompt_logprobs":1,"stream":true"#,
    r#""stop":[1]"#,
    r#""stop":["a","1"]"#,
    r#""stop_token_ids":["a"]"#,
    r#""stop_token_ids":[1.5]"#,
    r#""stop_token_ids":["1",true,2.0]"#,
    r#""tools":[true]"#,
    r#""tools":[{}]"#,
    r#""tools":[{"function":{"name":"f","parameters":[]}}]"#,
    r#""messages":[{"content":"x"}]"#,
    r#""messages":[{"role":"user","content":5}]"#,
    r#""documents":["d"]"#,
    r#""input":[null]"#,
    r#""bad_words":[NaN]"#,
    r#""cache_salt":"a/b""#,
    r#""cache_salt":"""#,
    r#""tools":[]"#,
    r#""tools":[{"type":"function","function":{"name":"f"}}]"#,
    r#""tool_choice":"required""#,
    r#""background":true,"store":false"#,
    r#""input":["a",1]"#,
    r#""documents":[null]"#,
    r#""stop":["a","b","c","d","e"]"#,
    r#""input":[{"id":"r"}]"#,
    r#""input":[{"type":"reasoning","summary":[]}]"#,
    r#""input":[[1.5]]"#,
    r#""messages":[[{"role":"user","content":"x"}],[]]"#,
    r#""messages":[{"author":{}}]"#,
    r#""documents":[{"content":"x"}]"#,
    r#""documents":[{"content":[{"type":"text","text":"x"}]}]"#,
    r#""documents":[{"a":1}]"#,
    r#""query":{"content":[]}"#,
    r#""prompt":[[1],["a"]]"#,
    r#""frequency_penalty":NaN"#,
    r#""frequency_penalty":"3""#,
    r#""stream_interval":"0.0""#,
    r#""seed":"-9223372036854775809""#,
    r#""truncate_prompt_tokens":" -2 ""#,
    r#""structured_outputs":{}"#,
    r#""structured_outputs":{"regex":5}"#,
    r#""structured_outputs":{"grammar":"g","json_object":false}"#,
    r#""logit_bias":{"1":"x"}"#,
    r#""thinking_token_budget":1.0"#,
    r#""stream_interval":false"#,
    r#""metadata":{"a":"b","a":1}"#,
    r#""previous_response_id":"r""#,
    r#""messages":[{"role":"user","content":null}]"#,
    r#""messages":[{"role":"assistant","content":null}]"#,
];

/// Members the pooling routes read before the gate (the pooling unions' removed parameters;
/// `/pooling`'s handler: `dimensions` and the task, `plugin` for a body with `data` alone):
/// each is put first in every gate-rejected body sent to those routes.
const POOLING: &[&str] = &[
    r#""normalize":null"#,
    r#""task":"encode""#,
    r#""dimensions":4"#,
    r#""dimensions":null"#,
    r#""task":"classify""#,
    r#""task":"token_embed""#,
    r#""task":"plugin""#,
    r#""task":"embed""#,
    r#""data":{"x":1}"#,
];

/// Chat messages that one message type or another takes or refuses by their typed keys, or
/// only as the chat request's validators reshape them: one of them at a time replaces the
/// `messages` of gate-rejected bodies that have some (put last, so that it counts).
const MESSAGES: &[&str] = &[
    r#""messages":[{"role":"other","tool_call_id":1}]"#,
    r#""messages":[{"role":"tool","content":"x","tool_call_id":1}]"#,
    r#""messages":[{"role":"user","tools":[1]}]"#,
    r#""messages":[{"role":"x","task":1}]"#,
    r#""messages":[{"role":"other","content":[1]}]"#,
    r#""messages":[{"role":"user","content":"x","tools":1}]"#,
    r#""messages":[{"role":"tool","content":{},"tool_call_id":"c"}]"#,
    r#""messages":[{"role":"user","content":"x","tool_calls":1}]"#,
    r#""messages":[{"role":"other","tool_calls":{}}]"#,
    r#""messages":[{"role":"other","reasoning_content":1}]"#,
    r#""messages":[{"role":"assistant","tool_calls":[1]}]"#,
    r#""messages":[{"role":"assistant","tool_calls":"ab"}]"#,
    r#""messages":[{"author":{"role":"user"},"content":[1]}]"#,
    r#""messages":[{"author":{"role":"user"},"content":[{}]}]"#,
    r#""messages":[{"role":"assistant","content":null,"tool_calls":null}]"#,
    r#""messages":[{"role":"assistant","tool_calls":{"a":1}}]"#,
];

/// Responses input items whose lists of parts pydantic validates element by element: each
/// replaces the `input` of gate-rejected Responses bodies.
const INPUT_ITEMS: &[&str] = &[
    r#""input":[{"role":"user","content":[{"type":"text","text":"x"}]}]"#,
    r#""input":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]"#,
    r#""input":[{"role":"user","content":[{"type":"input_text"}]}]"#,
    r#""input":[{"role":"user","content":[{"type":"input_image"}]}]"#,
    r#""input":[{"role":"user","content":["x"]}]"#,
    r#""input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}]"#,
    r#""input":[{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"x"}]}]"#,
    r#""input":[{"type":"message","role":"assistant","content":[{"type":"text","text":"x"}]}]"#,
    r#""input":[{"type":"function_call_output","call_id":"c","output":[{"type":"text"}]}]"#,
    r#""input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]"#,
];

/// The routes whose request unions refuse removed pooling parameters.
const POOLING_ROUTES: &[&str] = &["/pooling", "/v1/embeddings", "/classify"];

/// The body with `member` put first, or last (`None` for a body that is not a UTF-8
/// object).
fn with_member(body: &[u8], member: &str, first: bool) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    let body = if first {
        let rest = text.trim_start().strip_prefix('{')?;
        let sep = if rest.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        format!("{{{member}{sep}{rest}")
    } else {
        let rest = text.trim_end().strip_suffix('}')?;
        let sep = if rest.trim_end().ends_with('{') {
            ""
        } else {
            ","
        };
        format!("{rest}{sep}{member}}}")
    };
    Some(body.into_bytes())
}

/// The body with one member that an earlier check may refuse put first, or with one of the
/// members that some model requires left out (`None` for a body that is not a UTF-8 object).
fn earlier_check(rng: &mut Rng, body: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(body).ok()?;
    if rng.chance(70) {
        return with_member(body, rng.pick(EARLIER), true);
    }
    let serde_json::Value::Object(mut object) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let name = rng.pick(&[
        "messages",
        "prompt",
        "input",
        "query",
        "queries",
        "documents",
    ]);
    object.remove(name)?;
    serde_json::to_vec(&object).ok()
}

/// The case sent to `/invocations` (which dispatches it by its shape), with or without a
/// SageMaker adapter header, which names the model there, and now and then a session header,
/// which SageMaker's session layer refuses on a server without sessions.
fn invocation(rng: &mut Rng, c: &Case) -> Case {
    const ADAPTERS: [Option<&str>; 5] = [None, Some("tiny"), Some(""), Some("nope"), Some("tiny ")];
    const SESSIONS: [Option<&str>; 4] = [None, None, None, Some("s-1")];
    let (adapter, session) = (rng.pick(&ADAPTERS), rng.pick(&SESSIONS));
    let mut headers = c.headers.clone();
    for (name, value) in [
        (mmgate::contract::Head::ADAPTER, adapter),
        (mmgate::contract::Head::SESSION, session),
    ] {
        if let Some(v) = value {
            headers.push((name.to_string(), v.to_string()));
        }
    }
    Case {
        id: format!("{}~invocations:{adapter:?}:{session:?}", c.id),
        path: "/invocations".into(),
        headers,
        ..c.clone()
    }
}

/// `per_case` content-type variants, `per_case` path variants and `per_case` earlier-check
/// body variants of every gate-rejected case of `family`, one `/invocations` variant, and
/// two with their messages or Responses input replaced ([`MESSAGES`], [`INPUT_ITEMS`]), and
/// on the pooling routes one variant per [`POOLING`] member.
pub fn variants(all: &[Case], family: &str, per_case: usize, seed: u64) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for c in all
        .iter()
        .filter(|c| c.family == family && c.gate.is_some())
    {
        for i in 0..per_case {
            let types = content_types(&mut rng);
            out.push(Case {
                id: format!("{}~ct{i}:{types:?}", c.id),
                headers: with_content_types(c, types),
                ..c.clone()
            });
            let path = path_variant(&mut rng, &c.path);
            out.push(Case {
                id: format!("{}~path{i}:{path}", c.id),
                path,
                ..c.clone()
            });
            if i == 0 {
                out.push(invocation(&mut rng, c));
            }
            if let Some(body) = earlier_check(&mut rng, &c.body) {
                out.push(Case {
                    id: format!("{}~body{i}:{}", c.id, String::from_utf8_lossy(&body)),
                    body,
                    ..c.clone()
                });
            }
        }
        let replaced = if c.path.contains("/responses") {
            Some(INPUT_ITEMS)
        } else if std::str::from_utf8(&c.body).is_ok_and(|b| b.contains(r#""messages":[{"#)) {
            Some(MESSAGES)
        } else {
            None
        };
        if let Some(members) = replaced {
            // Two distinct ones.
            let first = rng.below(members.len());
            let second = (first + 1 + rng.below(members.len() - 1)) % members.len();
            for member in [members[first], members[second]] {
                if let Some(body) = with_member(&c.body, member, false) {
                    out.push(Case {
                        id: format!("{}~shape:{member}", c.id),
                        body,
                        ..c.clone()
                    });
                }
            }
        }
        if POOLING_ROUTES.contains(&c.path.as_str()) {
            for member in POOLING {
                if let Some(body) = with_member(&c.body, member, true) {
                    out.push(Case {
                        id: format!("{}~pooling:{member}", c.id),
                        body,
                        ..c.clone()
                    });
                }
            }
        }
    }
    out
}
