//! Properties of inspection and strip, and a differential test against Python's own
//! `json.loads`, the parser vLLM runs on every request body.

use bytes::Bytes;
use mmgate::inspect::{inspect, Field, Findings, InspectError, RENDER_MAX_DEPTH};
use mmgate::rewrite::strip;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// A text encoding Python's `json.detect_encoding` recognises: code unit width 1, 2 or 4
/// bytes (UTF-8, UTF-16, UTF-32), byte order, and whether a BOM leads.
#[derive(Debug, Clone, Copy)]
struct Enc {
    width: usize,
    be: bool,
    bom: bool,
}

fn encodings() -> impl Strategy<Value = Enc> {
    (select(vec![1, 1, 1, 1, 2, 4]), any::<bool>(), any::<bool>())
        .prop_map(|(width, be, bom)| Enc { width, be, bom })
}

/// Stands for a lone surrogate: [`encode`] writes U+E000 as the code point U+D800.
const SURROGATE: char = '\u{E000}';

fn put(out: &mut Vec<u8>, unit: u32, e: Enc) {
    let b = if e.be {
        unit.to_be_bytes()
    } else {
        unit.to_le_bytes()
    };
    out.extend_from_slice(match (e.width, e.be) {
        (2, true) => &b[2..],
        (2, false) => &b[..2],
        _ => &b,
    });
}

fn encode(text: &str, e: Enc) -> Vec<u8> {
    let mut out = Vec::new();
    match (e.bom, e.width) {
        (true, 1) => out.extend_from_slice(b"\xEF\xBB\xBF"),
        (true, _) => put(&mut out, 0xFEFF, e),
        _ => {}
    }
    for c in text.chars() {
        match (e.width, c == SURROGATE) {
            (1, true) => out.extend_from_slice(b"\xED\xA0\x80"),
            (1, false) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
            (2, false) => c
                .encode_utf16(&mut [0; 2])
                .iter()
                .for_each(|&u| put(&mut out, u.into(), e)),
            (_, true) => put(&mut out, 0xD800, e),
            (_, false) => put(&mut out, c.into(), e),
        }
    }
    out
}

/// The text of a body produced by [`encode`] (without lone surrogates).
fn decode(b: &[u8], e: Enc) -> String {
    let bom = match (e.bom, e.width) {
        (false, _) => 0,
        (true, 1) => 3,
        (true, w) => w,
    };
    let b = &b[bom..];
    let units = b.chunks(e.width).map(|c| {
        let n = |acc: u32, &x: &u8| acc << 8 | u32::from(x);
        if e.be {
            c.iter().fold(0, n)
        } else {
            c.iter().rev().fold(0, n)
        }
    });
    match e.width {
        1 => String::from_utf8(b.to_vec()).unwrap(),
        2 => String::from_utf16(&units.map(|u| u as u16).collect::<Vec<_>>()).unwrap(),
        _ => units.map(|u| char::from_u32(u).unwrap()).collect(),
    }
}

fn ws() -> impl Strategy<Value = &'static str> {
    select(vec!["", "", " ", "\n", "\t", "\r\n  "])
}

/// Keys: other fields, the two gated ones in several spellings, and near misses.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    "model", "messages", "a", "extra_args", "mm_processor_kwargs", "media_io_kwargs",
    r"mm_processor_kwar\u0067s", r"\u006d\u006d_processor_kwargs", r"media_io_kwarg\u0073",
    r"\u006dedia_io_kwargs", "mm_processor_kwargs ", "Mm_processor_kwargs", r"media_io_kwargs\u0000",
    "\u{e9}", r"\ud83d\ude00",
];

#[rustfmt::skip]
const LEAVES: &[&str] = &[
    "null", "true", "false", "0", "-0", "0.0", "1e-300", "\"\"", "\"0\"", "\" \"", r#""\u0000""#,
    r#""a\"b\\c\/\n""#, r#""\ud83d\ude00""#, "\"\u{e9}\u{1F600}\"", "[]", "{}",
];

/// A JSON value serde_json also reads the way Python does (no NaN, no lone surrogates).
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        select(LEAVES).prop_map(str::to_string),
        any::<i64>().prop_map(|n| n.to_string()),
        (-1e9f64..1e9).prop_map(|f| format!("{f:e}")),
        "[a-z0-9 ]{0,8}".prop_map(|s| format!("\"{s}\"")),
    ];
    leaf.prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec((ws(), inner.clone()), 0..5).prop_map(|items| {
                let items: Vec<_> = items
                    .into_iter()
                    .map(|(w, v)| format!("{w}{v}{w}"))
                    .collect();
                format!("[{}]", items.join(","))
            }),
            prop::collection::vec((select(KEYS), ws(), inner), 0..5).prop_map(|m| {
                let m: Vec<_> = m
                    .into_iter()
                    .map(|(k, w, v)| format!("{w}\"{k}\"{w}:{w}{v}"))
                    .collect();
                format!("{{{}}}", m.join(","))
            }),
        ]
    })
}

/// A top-level object with keys that repeat and gated fields in every spelling.
fn object() -> impl Strategy<Value = String> {
    (
        prop::collection::vec((select(KEYS), ws(), value(), ws()), 0..9),
        ws(),
    )
        .prop_map(|(m, w)| {
            let m: Vec<_> = m
                .into_iter()
                .map(|(k, a, v, b)| format!("{a}\"{k}\"{b}:{a}{v}{b}"))
                .collect();
            format!("{w}{{{}}}{w}", m.join(","))
        })
}

fn field_sets() -> impl Strategy<Value = Vec<Field>> {
    select(vec![
        vec![Field::MmProcessorKwargs],
        vec![Field::MediaIoKwargs],
        Field::ALL.to_vec(),
    ])
}

fn names(f: &Findings) -> Vec<&str> {
    f.members.iter().map(|m| f.name(m)).collect()
}

/// Grammar tokens for JSON-ish soup: many fragments, most of them in some wrong order.
#[rustfmt::skip]
const TOKENS: &[&str] = &[
    "{", "}", "[", "]", ",", ":", " ", "\"", "\\", "\\u", "d800", "\"mm_processor_kwargs\"",
    "\"media_io_kwargs\"", "\"a\"", "0", "1", "-", ".", "e", "E+", "NaN", "Infinity", "-Infinity",
    "null", "true", "false", "\u{1}", "\u{e9}", "\u{FEFF}", "\"\\ud800\"", "1e400", "1e-400", "\n",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(select(TOKENS), 0..48).prop_map(|t| t.concat())
}

/// Inspecting must never panic; whatever parses must strip to a body that parses again.
fn check_total(body: &[u8]) {
    for depth in [1, 3, RENDER_MAX_DEPTH] {
        if let Ok(f) = inspect(body, depth) {
            let b = Bytes::copy_from_slice(body);
            let s = strip(&b, &f, &Field::ALL).to_vec();
            let again = inspect(&s, depth).expect("a stripped body still parses");
            assert!(again.members.iter().all(|m| m.field.is_none()));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn inspection_never_panics_on_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..256)) {
        check_total(&body);
    }

    #[test]
    fn inspection_never_panics_on_json_ish_soup(text in soup(), enc in encodings()) {
        check_total(&encode(&text, enc));
    }

    #[test]
    fn strip_removes_only_the_chosen_fields_and_is_idempotent(
        text in object(), enc in encodings(), fields in field_sets()
    ) {
        let body = Bytes::from(encode(&text, enc));
        let f = inspect(&body, RENDER_MAX_DEPTH).expect("generated bodies parse");
        let once = Bytes::from(strip(&body, &f, &fields).to_vec());
        let f1 = inspect(&once, RENDER_MAX_DEPTH).expect("the stripped body parses");
        prop_assert_eq!(f1.encoding, f.encoding);
        let kept: Vec<&str> = f.members.iter()
            .filter(|m| !m.field.is_some_and(|x| fields.contains(&x)))
            .map(|m| f.name(m))
            .collect();
        prop_assert_eq!(names(&f1), kept, "other members stay, in order");
        for x in Field::ALL {
            if fields.contains(&x) {
                prop_assert!(!f1.field(x).present);
            } else {
                prop_assert_eq!(f1.field(x), f.field(x), "an unchosen field is untouched");
            }
        }
        let twice = strip(&once, &f1, &fields).to_vec();
        prop_assert_eq!(&twice[..], &once[..], "strip is idempotent");

        let mut want: serde_json::Value = serde_json::from_str(&decode(&body, enc)).unwrap();
        for x in &fields {
            want.as_object_mut().unwrap().remove(x.name());
        }
        let got: serde_json::Value = serde_json::from_str(&decode(&once, enc)).unwrap();
        prop_assert_eq!(got, want);
    }
}

fn nest(open: &str, close: &str, n: usize, inner: &str) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

#[test]
fn depth_boundary_is_vllms_970_containers_on_every_path() {
    // (prefix, containers the prefix opens, suffix): the top-level object counts as one.
    let paths = [
        (r#"{"a":"#, 1, "}"),
        (r#"{"mm_processor_kwargs":{"k":"#, 2, "}}"),
        (r#"{"media_io_kwargs":"#, 1, "}"),
        (r#"{"chat_template_kwargs":{"x":"#, 2, "}}"),
        (r#"{"model":"#, 1, "}"),
        ("", 0, ""),
    ];
    for (prefix, opened, suffix) in paths {
        for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
            let body = |total: usize| {
                format!("{prefix}{}{suffix}", nest(open, close, total - opened, "0"))
            };
            let ok = inspect(body(970).as_bytes(), RENDER_MAX_DEPTH);
            let deep = inspect(body(971).as_bytes(), RENDER_MAX_DEPTH);
            assert!(
                ok.is_ok() || matches!(ok, Err(InspectError::NotObject { .. })),
                "{prefix}{open}: 970 parses: {ok:?}"
            );
            assert!(
                matches!(
                    deep,
                    Err(InspectError::Syntax(
                        mmgate::inspect::scan::SyntaxError::TooDeep { .. }
                    ))
                ),
                "{prefix}{open}: 971 is too deep: {deep:?}"
            );
        }
    }
}

/// Every file of both committed fuzz corpora (`fuzz/corpus/*`).
fn fuzz_corpora() -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    for target in ["inspect", "strip"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        for entry in std::fs::read_dir(&dir).unwrap() {
            bodies.push(std::fs::read(entry.unwrap().path()).unwrap());
        }
    }
    bodies
}

/// Python's verdict (refused, not an object, or each field's truthiness) on every body of
/// the differential corpus and both fuzz corpora is mmgate's; skipped without python3.
#[test]
fn predicate_agrees_with_pythons_json_loads() {
    let mut corpus = python::corpus();
    corpus.extend(fuzz_corpora());
    let lines: Vec<Vec<Vec<u8>>> = corpus.iter().map(|b| vec![b.clone()]).collect();
    let Some(answers) = python::run("judge", &lines) else {
        println!("SKIPPED predicate_agrees_with_pythons_json_loads: no usable python3 on PATH");
        return;
    };
    let count = |p: &str| answers.iter().filter(|a| a.starts_with(p)).count();
    println!(
        "{} bodies: {} refused by Python ({} too deep), {} not objects, {} objects ({} with a truthy field), {} skipped",
        corpus.len(),
        count("E"),
        count("E RecursionError"),
        count("N"),
        count("D"),
        count("D") - count("D 0 0"),
        count("S"),
    );
    let mut disagreements = Vec::new();
    for (body, py) in corpus.iter().zip(&answers) {
        let ours = match inspect(body, RENDER_MAX_DEPTH) {
            Err(InspectError::NotObject { .. }) => "N".to_string(),
            Err(InspectError::Json { what, pos, .. }) => format!("J {pos} {what}"),
            // What `json.loads` says of it (as /invocations reports); FastAPI does not call it.
            Err(InspectError::Empty) => "J 0 Expecting value".to_string(),
            Err(e) => format!("E {e}"),
            Ok(f) => format!(
                "D {} {}",
                u8::from(f.field(Field::MmProcessorKwargs).truthy()),
                u8::from(f.field(Field::MediaIoKwargs).truthy())
            ),
        };
        let same = match (ours.as_bytes()[0], py.as_bytes().first()) {
            (_, Some(b'S')) => true,
            (b'E', Some(b'E')) => true,
            (b'J', _) => py == "E JSONDecodeError" || &ours == py,
            _ => &ours == py,
        };
        if !same {
            disagreements.push(format!(
                "{}\n  python: {py}\n  mmgate: {ours}",
                python::shown(body)
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} bodies disagree with Python:\n{}",
        disagreements.len(),
        corpus.len(),
        disagreements.join("\n")
    );
}

/// The rewrite's contract, with Python as the judge: for every body mmgate inspects (the
/// differential corpus, both committed fuzz corpora, generated objects in every encoding)
/// and each set of fields, `json.loads` of the stripped body equals `json.loads` of the
/// original with those keys popped (compared as `json.dumps` text, so NaN, -0.0, key order
/// and lone surrogates count).
#[test]
fn strip_gives_what_python_parses_as_the_original_minus_the_fields() {
    let mut bodies = python::corpus();
    bodies.extend(fuzz_corpora());
    let mut runner = TestRunner::deterministic();
    let (objects, encs) = (object(), encodings());
    for _ in 0..300 {
        let text = objects.new_tree(&mut runner).unwrap().current();
        bodies.push(encode(&text, encs.new_tree(&mut runner).unwrap().current()));
    }
    let subsets: [&[Field]; 3] = [
        &[Field::MmProcessorKwargs],
        &[Field::MediaIoKwargs],
        &Field::ALL,
    ];
    let mut lines = Vec::new();
    for body in &bodies {
        let Ok(f) = inspect(body, RENDER_MAX_DEPTH) else {
            continue;
        };
        let b = Bytes::copy_from_slice(body);
        for fields in subsets {
            let names: Vec<&str> = fields.iter().map(|x| x.name()).collect();
            let stripped = strip(&b, &f, fields).to_vec();
            lines.push(vec![body.clone(), stripped, names.join(",").into_bytes()]);
        }
    }
    let Some(answers) = python::run("strip", &lines) else {
        println!("SKIPPED strip_gives_what_python_parses_as_the_original_minus_the_fields: no usable python3 on PATH");
        return;
    };
    let skipped = answers.iter().filter(|a| *a == "S").count();
    println!(
        "{} strips of {} bodies judged by Python ({skipped} skipped)",
        lines.len(),
        bodies.len()
    );
    let bad: Vec<String> = lines
        .iter()
        .zip(&answers)
        .filter(|(_, a)| *a != "=" && *a != "S")
        .map(|(l, a)| {
            format!(
                "{} without {}:\n  stripped: {}\n  {a}",
                python::shown(&l[0]),
                String::from_utf8_lossy(&l[2]),
                python::shown(&l[1])
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} strips differ from Python's original minus the fields:\n{}",
        bad.len(),
        lines.len(),
        bad.join("\n")
    );
}

/// CPython's `json` scanner turns `NaN`, `Infinity` and `-Infinity` into floats by calling
/// `parse_constant`, and that call takes one more recursion level than any other scalar:
/// inside 970 containers vLLM's server refuses them (checked against the real vLLM 0.31
/// render server: `[`×969 `NaN` `]`×969 in a top-level object is a 400 parse error, `0`
/// there is accepted).
#[test]
fn a_constant_inside_970_containers_is_too_deep_as_in_vllm() {
    for leaf in ["NaN", "Infinity", "-Infinity"] {
        for (arrays, ok) in [(968, true), (969, false)] {
            let body = format!(
                "{{\"a\":{}{leaf}{}}}",
                "[".repeat(arrays),
                "]".repeat(arrays)
            );
            let got = inspect(body.as_bytes(), RENDER_MAX_DEPTH);
            assert_eq!(
                got.is_ok(),
                ok,
                "{leaf} inside {} containers: {got:?}",
                arrays + 1
            );
        }
    }
    // Other scalars at the same depth are fine, in vLLM and in mmgate.
    for leaf in ["0", "1e400", "null", "\"s\""] {
        let body = format!("{{\"a\":{}{leaf}{}}}", "[".repeat(969), "]".repeat(969));
        assert!(inspect(body.as_bytes(), RENDER_MAX_DEPTH).is_ok(), "{leaf}");
    }
}

/// The corpus and the one Python process that judges it.
mod python {
    use super::*;
    use base64::Engine;

    /// Reads lines of space-separated base64 fields. Mode `judge` (one field, a body)
    /// answers `J <pos> <message>` (a `JSONDecodeError`, before Python 3.13), `E
    /// <exception>`, `N` (not a dict) or `D <mm> <media>` (truthiness). Mode
    /// `strip` (original, stripped, comma-separated fields) answers `=` when the stripped
    /// body parses to the original minus the fields, else `! <why>`. Either answers `S`
    /// (skipped) for a body that could reach the nesting limit when this interpreter cannot
    /// be made to count nesting as vLLM's server does.
    const SCRIPT: &str = r#"
import base64, json, sys
if not hasattr(sys, "set_int_max_str_digits"):
    print("OLD"); sys.exit(0)
sys.set_int_max_str_digits(4300)  # vLLM's default, whatever the environment says
sys.setrecursionlimit(6000)

def at(n, f, *a):
    return f(*a) if n == 0 else at(n - 1, f, *a)

class Skip(Exception):
    pass

pad = 0

def loads(b, deep=False):
    # A body with at most 900 bracket bytes (in any encoding) cannot reach either limit.
    if not deep and b.count(b"[") + b.count(b"{") <= 900:
        return json.loads(b)
    if pad is None:
        raise Skip()
    return at(pad, json.loads, b)

def parses(depth):
    # Called from the same stack depth as judge() and strip() below.
    try:
        loads(b"[" * depth + b"]" * depth, deep=True)
        return True
    except RecursionError:
        return False

# A real vLLM 0.31 server's request path leaves room for exactly 970 nested containers
# (Python's default limit of 1000 less its own frames). This interpreter is made to do the
# same by parsing under as many frames as that takes (Python <= 3.11 counts json's nesting
# against the recursion limit; where that does not work, deep bodies are skipped).
lo, hi = 0, 5500
while lo < hi:
    pad = (lo + hi + 1) // 2
    if parses(970):
        lo = pad
    else:
        hi = pad - 1
pad = lo
if not parses(970) or parses(971):
    pad = None
print("OK", "-" if pad is None else pad)

def judge(b):
    try:
        d = loads(b)
    except Skip:
        return "S"
    except json.JSONDecodeError as e:
        # Python 3.13 words a trailing comma otherwise than the 3.11 of vLLM's server.
        if sys.version_info < (3, 13):
            return "J %d %s" % (e.pos, e.msg)
        return "E " + type(e).__name__
    except Exception as e:
        return "E " + type(e).__name__
    if not isinstance(d, dict):
        return "N"
    return "D %d %d" % (bool(d.get("mm_processor_kwargs")), bool(d.get("media_io_kwargs")))

def strip(orig, stripped, fields):
    try:
        want = loads(orig)
    except Skip:
        return "S"
    except Exception as e:
        return "! Python refuses the original: %s" % type(e).__name__
    for f in fields.decode().split(","):
        want.pop(f, None)
    try:
        got = loads(stripped)
    except Exception as e:
        return "! Python refuses the stripped body: %s: %s" % (type(e).__name__, e)
    a, b = json.dumps(want), json.dumps(got)
    return "=" if a == b else "! want %s | got %s" % (a[:400], b[:400])

mode = sys.argv[1]
for line in open(sys.argv[2]):
    f = [base64.b64decode(x) for x in line.rstrip("\n").split(" ")]
    print(judge(*f) if mode == "judge" else strip(*f))
"#;

    /// Python's answers, one per line of fields, or `None` (with the reason printed) when
    /// there is no python3 ≥ 3.10.7.
    pub(super) fn run(mode: &str, lines: &[Vec<Vec<u8>>]) -> Option<Vec<String>> {
        let dir = std::env::temp_dir().join(format!("mmgate-props-{}-{mode}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("corpus.b64");
        let b64 = base64::engine::general_purpose::STANDARD;
        let text: String = lines
            .iter()
            .map(|fields| {
                let f: Vec<String> = fields.iter().map(|x| b64.encode(x)).collect();
                f.join(" ") + "\n"
            })
            .collect();
        std::fs::write(&file, text).unwrap();
        let run = std::process::Command::new("python3")
            .arg("-I")
            .arg("-c")
            .arg(SCRIPT)
            .arg(mode)
            .arg(&file)
            .output();
        let _ = std::fs::remove_dir_all(&dir);
        let out = match run {
            Ok(out) => out,
            Err(e) => {
                println!("python3: {e}");
                return None;
            }
        };
        assert!(
            out.status.success(),
            "python3 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let mut out_lines = stdout.lines();
        match out_lines.next().and_then(|l| l.strip_prefix("OK ")) {
            Some("-") => println!(
                "python3 cannot be made to count nesting as vLLM does: bodies near the limit are skipped"
            ),
            Some(pad) => println!("python3 parses with vLLM's 970-container limit ({pad} frames deep)"),
            None => {
                println!("python3 has no integer digit limit (older than 3.10.7)");
                return None;
            }
        }
        let answers: Vec<String> = out_lines.map(str::to_string).collect();
        assert_eq!(answers.len(), lines.len(), "one answer per line");
        Some(answers)
    }

    /// A body for a failure message (long ones shortened).
    pub(super) fn shown(body: &[u8]) -> String {
        let text = body.escape_ascii().to_string();
        if text.len() <= 600 {
            return text;
        }
        format!(
            "{} …[{} bytes]… {}",
            &text[..300],
            body.len(),
            &text[text.len() - 200..]
        )
    }

    /// The whole differential corpus, the same on every run: hand-picked edge cases,
    /// duplicates, bodies around the nesting limit, and generated bodies (damaged bodies in
    /// every encoding, JSON-ish soup, and objects with whitespace Python accepts or refuses).
    pub(super) fn corpus() -> Vec<Vec<u8>> {
        let mut corpus = edge_cases();
        corpus.extend(duplicate_cases());
        corpus.extend(depth_cases());
        let mut runner = TestRunner::deterministic();
        let wild = wild_body();
        for _ in 0..300 {
            corpus.push(wild.new_tree(&mut runner).unwrap().current());
        }
        let s = soup();
        for _ in 0..100 {
            let enc = encodings().new_tree(&mut runner).unwrap().current();
            corpus.push(encode(&s.new_tree(&mut runner).unwrap().current(), enc));
        }
        let spaced = spaced();
        for _ in 0..300 {
            corpus.push(spaced.new_tree(&mut runner).unwrap().current());
        }
        corpus
    }

    /// Values that may sit anywhere: NaN, infinities, huge and tiny numbers, integers at and
    /// past Python's digit limit, and lone surrogates (escaped and raw).
    fn specials() -> Vec<String> {
        #[rustfmt::skip]
        let mut s: Vec<String> = [
            "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0.0", "-0",
            r#""\ud800""#, r#""\udfff\ud800""#, r#""x\udbff""#, "\"\u{E000}\"", "\"a\u{E000}b\"",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        s.push("9".repeat(4300));
        s.push("9".repeat(4301));
        s.push(format!("1e{}", "9".repeat(400)));
        s.push(format!("0.{}1", "0".repeat(5000)));
        s
    }

    /// Field values: falsy and truthy in every type, the specials at every depth, then
    /// (from [`INVALID`]) values Python refuses.
    fn values() -> Vec<String> {
        #[rustfmt::skip]
        let fixed = [
            "null", "true", "false", "0", "-0", "0.0", "-0.0", "0e5", "-0.0e-5", "0.000", "1e-400",
            "-1e-400", "2.4703282292062327e-324", "2.4703282292062328e-324", "4.9e-324", "1", "-1",
            "0.5", "1e400", "-1e400", "1E+2", "NaN", "Infinity", "-Infinity", "\"\"", "\"0\"",
            "\" \"", r#""\u0000""#, r#""\ud800""#, r#""\udc00\ud800""#, r#""\ud83d\ude00""#,
            "\"\u{E000}\"", "\"\u{e9}\"", "[]", "[ ]", "[[]]", "[0]", "[null]", "{}", "{ }",
            r#"{"a":null}"#, r#"{"image":{}}"#, r#"{"a":1,"a":2}"#, r#"{"mm_processor_kwargs":{}}"#,
        ];
        let mut v: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
        v.push("9".repeat(4300));
        v.push(format!("-{}", "9".repeat(4300)));
        v.push(format!("{}.5", "1".repeat(5000)));
        v.push(format!("{}e-9999", "1".repeat(4400)));
        for s in specials() {
            v.push(format!("[{s}]"));
            v.push(format!("{{\"a\":{s}}}"));
            v.push(format!(
                "{{\"a\":[1,{{\"b\":{s}}}],\"{}\":[{s},{s}]}}",
                r"\ud800"
            ));
            v.push(format!(
                "{{\"\u{E000}\":[[{s}]],\"k\":{{\"\u{E000}\":{s}}}}}"
            ));
        }
        // Nesting below the limit here; depth_cases() holds the bodies around it.
        for d in [2, 60, 600, 898] {
            v.push(nest("[", "]", d, "1"));
            v.push(nest("{\"k\":", "}", d, "[]"));
        }
        v
    }

    #[rustfmt::skip]
    const INVALID: &[&str] = &[
        "01", "1.", "+1", ".5", "-", "1e", "1e+", "tru", "nul", "-NaN", "nan", "[1,]", r#"{"a":1,}"#,
        "{'a':1}", r#""\x""#, r#""\u12""#, "\"\u{1}\"", "\"\t\"", "[1 2]", r#"{"a" 1}"#, "\u{c}1",
        "\u{a0}1", "/*c*/1", "0x10", "\"open", r#"{"a":1"#, "]", "[[[[[[[[[[[[[[[[", "[NaN,]",
        "infinity", "-infinity", "+Infinity", "NaN1", "[1]]", "\u{b}1", "1\u{b}", "[\u{3000}1]",
    ];

    fn invalid() -> Vec<String> {
        let mut v: Vec<String> = INVALID.iter().map(|s| s.to_string()).collect();
        v.push(format!("1{}", "0".repeat(4300)));
        v.push(format!("-{}", "9".repeat(4301)));
        v
    }

    /// Every character escaped (`\u006d\u006d...`).
    fn all_escaped(name: &str) -> String {
        name.chars()
            .map(|c| format!("\\u{:04x}", u32::from(c)))
            .collect()
    }

    /// Spellings of a field's key: plain, one escape (lower and upper hex), all escaped.
    fn spellings(name: &str) -> Vec<String> {
        let (first, rest) = name.split_at(1);
        let (head, last) = name.split_at(name.len() - 1);
        vec![
            name.to_string(),
            format!("{head}\\u{:04x}", u32::from(last.chars().next().unwrap())),
            format!("\\u{:04X}{rest}", u32::from(first.chars().next().unwrap())),
            all_escaped(name),
        ]
    }

    fn keys() -> Vec<String> {
        let mut k: Vec<String> = KEYS.iter().map(|s| s.to_string()).collect();
        for f in Field::ALL {
            k.extend(spellings(f.name()));
        }
        #[rustfmt::skip]
        k.extend([
            r"\ud800", "\u{E000}", r"mm_processor_kwargs\ud800", "mm_processor_kwargs\u{E000}",
            r"\ud800\udc00", r"\udc00\ud800", r"mm_processor\u005Fkwargs", r"media_io_kwargs\/",
            r"mm_processor_kwar\g", r"\u006", r"\U006dm_processor_kwargs", "mm_processor_kwargs\u{1}",
        ].map(str::to_string));
        k
    }

    /// Whitespace `json.loads` skips between tokens, and characters Python (`str.isspace`)
    /// or Unicode call whitespace that it refuses there.
    const JSON_WS: &[&str] = &[" ", "\t", "\n", "\r", "\r\n"];
    #[rustfmt::skip]
    const NOT_JSON_WS: &[&str] = &[
        "\u{b}", "\u{c}", "\u{1c}", "\u{1f}", "\u{85}", "\u{a0}", "\u{1680}", "\u{2000}", "\u{2028}",
        "\u{2029}", "\u{200b}", "\u{3000}", "\u{feff}", "\u{0}",
    ];

    /// Byte offsets of `text` where JSON allows whitespace: on both sides of every
    /// structural character outside strings, and at both ends.
    fn gaps(text: &str) -> Vec<usize> {
        let mut out = vec![0, text.len()];
        let (mut in_str, mut escaped) = (false, false);
        for (i, c) in text.char_indices() {
            if in_str {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_str = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_str = true,
                '{' | '}' | '[' | ']' | ',' | ':' => out.extend([i, i + 1]),
                _ => {}
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Objects with one to three runs of whitespace, accepted or refused, at token gaps
    /// (including the ends, where a U+FEFF in UTF-8 is a BOM Python skips).
    fn spaced() -> impl Strategy<Value = Vec<u8>> {
        let space = prop_oneof![3 => select(JSON_WS), 2 => select(NOT_JSON_WS)];
        let insertions = prop::collection::vec((any::<prop::sample::Index>(), space), 1..4);
        (object(), insertions, encodings()).prop_map(|(text, insertions, enc)| {
            let g = gaps(&text);
            let mut at: Vec<(usize, &str)> = insertions
                .iter()
                .map(|(i, s)| (g[i.index(g.len())], *s))
                .collect();
            at.sort_by_key(|a| std::cmp::Reverse(a.0));
            let mut text = text;
            for (i, s) in at {
                text.insert_str(i, s);
            }
            encode(&text, enc)
        })
    }

    /// Bodies of every shape, encoding and damage.
    pub(super) fn wild_body() -> impl Strategy<Value = Vec<u8>> {
        let v = values();
        let any_value = prop_oneof![9 => select(v.clone()), 1 => select(invalid())];
        let member = (select(keys()), ws(), any_value, ws());
        let shape = prop_oneof![
            8 => prop::collection::vec(member, 0..6).prop_map(|m| {
                let m: Vec<_> = m.into_iter().map(|(k, a, v, b)| format!("{a}\"{k}\"{b}:{a}{v}{b}")).collect();
                format!("{{{}}}", m.join(","))
            }),
            1 => prop::collection::vec(select(v.clone()), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            1 => select(v),
        ];
        let affix = || {
            let odd = select(vec![
                " \n", "\u{FEFF}", "\u{c}", "\u{a0}", "x", "{}", ",", "\u{0}",
            ]);
            prop_oneof![9 => Just(""), 1 => odd]
        };
        let damage = (0u8..30, 0.0f64..1.0, any::<u8>());
        (affix(), shape, affix(), encodings(), damage).prop_map(
            |(pre, shape, post, enc, (kind, at, byte))| {
                let mut b = encode(&format!("{pre}{shape}{post}"), enc);
                let i = (at * b.len() as f64) as usize;
                match kind {
                    0 => b.truncate(i),
                    1 if i < b.len() => b[i] = byte,
                    2 => b.insert(i, byte),
                    _ => {}
                }
                b
            },
        )
    }

    /// Each field two and three times, in every spelling and order, truthy and falsy
    /// (NaN is truthy), alone and interleaved with the other field: the last one wins.
    fn duplicate_cases() -> Vec<Vec<u8>> {
        const TRUTHY: &str = r#"{"a":1}"#;
        const FALSY: &str = "{}";
        let vals = [TRUTHY, FALSY, "null", "NaN"];
        let mut c = Vec::new();
        let member = |k: &str, v: &str| format!("\"{k}\":{v}");
        for f in Field::ALL {
            let sp = spellings(f.name());
            for a in &sp {
                for b in &sp {
                    for x in vals {
                        for y in vals {
                            c.push(format!("{{{},{}}}", member(a, x), member(b, y)));
                        }
                    }
                    for z in &sp {
                        for (x, y, w) in [
                            (TRUTHY, FALSY, FALSY),
                            (FALSY, TRUTHY, FALSY),
                            (FALSY, FALSY, TRUTHY),
                            (TRUTHY, TRUTHY, "null"),
                        ] {
                            let m = [member(a, x), member(b, y), member(z, w)];
                            c.push(format!("{{{}}}", m.join(" , ")));
                        }
                    }
                }
            }
        }
        let (mm, io) = (
            spellings("mm_processor_kwargs"),
            spellings("media_io_kwargs"),
        );
        for a in &mm {
            for c2 in &mm {
                for b in &io[..2] {
                    for d in &io[2..] {
                        for (x, y, z, w) in [
                            (TRUTHY, FALSY, FALSY, TRUTHY),
                            (FALSY, TRUTHY, TRUTHY, FALSY),
                        ] {
                            let m = [member(a, x), member(b, y), member(c2, z), member(d, w)];
                            c.push(format!("{{\"model\":\"m\",{}}}", m.join(",")));
                        }
                    }
                }
            }
        }
        c.into_iter().map(String::into_bytes).collect()
    }

    /// `n` nested containers (arrays `a` and objects `o` in `pattern`'s order, repeated)
    /// around `leaf`.
    fn chain(n: usize, pattern: &str, open_ws: &str, leaf: &str) -> String {
        let kinds: Vec<char> = pattern.chars().cycle().take(n).collect();
        let mut s = String::new();
        for k in &kinds {
            s.push_str(if *k == 'a' { "[" } else { "{\"k\":" });
            s.push_str(open_ws);
        }
        s.push_str(leaf);
        for k in kinds.iter().rev() {
            s.push_str(open_ws);
            s.push(if *k == 'a' { ']' } else { '}' });
        }
        s
    }

    /// Bodies around vLLM's nesting limit (970 containers, the top-level object counting):
    /// arrays, objects and both, empty containers at the bottom, whitespace between
    /// brackets, under each field, beside it, in a top-level array or object chain, two
    /// deep siblings, deep bodies cut short, brackets inside a string, other encodings.
    fn depth_cases() -> Vec<Vec<u8>> {
        let mut c: Vec<String> = Vec::new();
        for total in 966..=975 {
            let below = total - 1;
            for pattern in ["a", "o", "ao", "oa", "aao"] {
                c.push(format!("{{\"a\":{}}}", chain(below, pattern, "", "0")));
            }
            c.push(format!("{{\"a\":{}}}", chain(below - 1, "a", "", "[]")));
            c.push(format!("{{\"a\":{}}}", chain(below - 1, "o", "", "{}")));
            c.push(format!("{{\"a\":{}}}", chain(below, "ao", " \n", "\"s\"")));
            c.push(format!(
                "{{\"mm_processor_kwargs\":{}}}",
                chain(below, "o", "", "1")
            ));
            c.push(format!(
                "{{\"media_io_kwargs\":{{\"video\":{}}}}}",
                chain(below - 1, "a", "", "NaN")
            ));
            c.push(format!(
                "{{\"mm_processor_kwargs\":{{\"x\":1}},\"b\":{}}}",
                chain(below, "a", "", "0")
            ));
            c.push(format!(
                "{{\"b\":{},\"media_io_kwargs\":{{\"v\":1}}}}",
                chain(below, "oa", "", "0")
            ));
            c.push(format!(
                "{{\"a\":{},\"b\":{}}}",
                chain(below, "a", "", "0"),
                chain(below, "o", "", "0")
            ));
            c.push(chain(total, "a", "", "0"));
            c.push(chain(total, "o", "", "0"));
            c.push(format!("{{\"a\":{}", "[".repeat(below)));
            c.push(format!("{{\"a\":{},}}", chain(below, "a", "", "0")));
        }
        c.push(format!("{{\"a\":\"{}\"}}", "[".repeat(2000)));
        c.push(format!("{{\"a\":\"{}\",\"b\":[[1]]}}", "{".repeat(2000)));
        let mut bodies: Vec<Vec<u8>> = c.into_iter().map(String::into_bytes).collect();
        for total in [970, 971] {
            let text = format!(
                "{{\"mm_processor_kwargs\":{}}}",
                chain(total - 1, "ao", "", "1")
            );
            for (width, be, bom) in [(1, false, true), (2, false, true), (4, true, false)] {
                bodies.push(encode(&text, Enc { width, be, bom }));
            }
        }
        bodies
    }

    /// Hand-picked bodies: every value under both fields and each key spelling, and each
    /// encoding's edge cases.
    pub(super) fn edge_cases() -> Vec<Vec<u8>> {
        let mut c: Vec<Vec<u8>> = [
            "", " ", "{}", "{", "[]", "1", "\"s\"", "null", "{ }\n", "{}\u{0}",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        for v in values().into_iter().chain(invalid()) {
            for k in [
                "mm_processor_kwargs",
                "media_io_kwargs",
                r"mm_processor_kwar\u0067s",
            ] {
                c.push(format!("{{\"model\":\"m\",\"{k}\":{v}}}").into_bytes());
            }
        }
        for k in keys() {
            for v in ["{\"a\":1}", "{}", "NaN"] {
                c.push(format!("{{\"{k}\":{v}}}").into_bytes());
            }
        }
        for (width, be, bom) in [
            (2, false, true),
            (2, true, false),
            (2, false, false),
            (2, true, true),
            (4, false, true),
            (4, true, false),
            (4, false, false),
            (4, true, true),
            (1, false, true),
        ] {
            let enc = Enc { width, be, bom };
            let body = encode(
                "{\"mm_processor_kwargs\":{\"a\":\"\u{1F600}\u{E000}\"}}",
                enc,
            );
            c.push(body.clone());
            c.push(body[..body.len() - 1].to_vec());
            c.push(encode("{}", enc));
            c.push(encode(" {\"media_io_kwargs\" : [0] } ", enc));
        }
        #[rustfmt::skip]
        let raws = [
            &b"\xEF\xBB\xBF{}"[..], b"\xEF\xBB\xBF", b"\xEF\xBB\xBF\xEF\xBB\xBF{}", b"{\x00", b"\x00{",
            b"{\"a\":\"\xFF\"}", b"{\"a\":\"\xC0\xAF\"}", b"{\"a\":\"\xED\xA0\x80\"}", b"{\"a\":\"\xED\xB0\x80\"}",
            b"{\"a\":\"\xF4\x90\x80\x80\"}", b"{\x00\x00\x00\x00\x00\x11\x00}\x00\x00\x00", b"\xFF\xFE\x00\x00",
            b"\xFE\xFF\x00{\x00}", b"\xFF\xFE{\x00}\x00", b"{\"mm_processor_kwargs\":1}\xEF\xBB\xBF",
            b"{\"\xED\xA0\x80\":1}", b"{\"mm_processor_kwargs\xED\xBF\xBF\":{\"a\":1}}",
            b"{\"a\":1}\xFF", b"\xFF{\"a\":1}", b"{\"a\":[1,\xFF]}",
            b"\x00\x00\xFE\xFF\x00\x00\x00{\x00\x00\x00}", b"\xFF\xFE\x00\x00{\x00\x00\x00}\x00\x00\x00",
        ];
        c.extend(raws.iter().map(|r| r.to_vec()));
        c
    }
}
