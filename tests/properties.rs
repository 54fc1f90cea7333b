//! Properties of inspection and strip, and a differential test against Python's own
//! `json.loads`, the parser vLLM runs on every request body.

use bytes::Bytes;
use mmgate::inspect::{inspect, Field, Findings, InspectError, DEFAULT_MAX_DEPTH};
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
    f.members.iter().map(|m| &*m.name).collect()
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
    for depth in [1, 3, DEFAULT_MAX_DEPTH] {
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
        let f = inspect(&body, DEFAULT_MAX_DEPTH).expect("generated bodies parse");
        let once = Bytes::from(strip(&body, &f, &fields).to_vec());
        let f1 = inspect(&once, DEFAULT_MAX_DEPTH).expect("the stripped body parses");
        prop_assert_eq!(f1.encoding, f.encoding);
        let kept: Vec<&str> = f.members.iter()
            .filter(|m| !m.field.is_some_and(|x| fields.contains(&x)))
            .map(|m| &*m.name)
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
            let ok = inspect(body(970).as_bytes(), DEFAULT_MAX_DEPTH);
            let deep = inspect(body(971).as_bytes(), DEFAULT_MAX_DEPTH);
            assert!(
                ok.is_ok() || matches!(ok, Err(InspectError::NotObject(_))),
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

#[test]
fn predicate_agrees_with_pythons_json_loads() {
    let mut corpus = python::edge_cases();
    let mut runner = TestRunner::deterministic();
    let wild = python::wild_body();
    for _ in 0..300 {
        corpus.push(wild.new_tree(&mut runner).unwrap().current());
    }
    let s = soup();
    for _ in 0..100 {
        let enc = encodings().new_tree(&mut runner).unwrap().current();
        corpus.push(encode(&s.new_tree(&mut runner).unwrap().current(), enc));
    }
    let Some(answers) = python::answers(&corpus) else {
        println!("SKIPPED predicate_agrees_with_pythons_json_loads: no usable python3 on PATH");
        return;
    };
    let count = |p: &str| answers.iter().filter(|a| a.starts_with(p)).count();
    println!(
        "{} bodies: {} refused by Python, {} not objects, {} objects ({} with a truthy field)",
        corpus.len(),
        count("E"),
        count("N"),
        count("D"),
        count("D") - count("D 0 0")
    );
    let mut disagreements = Vec::new();
    for (body, py) in corpus.iter().zip(&answers) {
        let ours = match inspect(body, DEFAULT_MAX_DEPTH) {
            Err(InspectError::NotObject(_)) => "N".to_string(),
            Err(e) => format!("E {e}"),
            Ok(f) => format!(
                "D {} {}",
                u8::from(f.field(Field::MmProcessorKwargs).truthy()),
                u8::from(f.field(Field::MediaIoKwargs).truthy())
            ),
        };
        let same = match (ours.as_bytes()[0], py.as_bytes().first()) {
            (b'E', Some(b'E')) => true,
            _ => &ours == py,
        };
        if !same {
            disagreements.push(format!(
                "{}\n  python: {py}\n  mmgate: {ours}",
                body.escape_ascii()
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

/// The corpus and the one Python process that judges it.
mod python {
    use super::*;
    use base64::Engine;

    /// For each base64 line: `E <exception>`, `N` (not a dict), or `D <mm> <media>` truthiness.
    const SCRIPT: &str = r#"
import base64, json, sys
if not hasattr(sys, "set_int_max_str_digits"):
    print("OLD"); sys.exit(0)
sys.set_int_max_str_digits(4300)  # vLLM's default, whatever the environment says
print("OK")
for line in open(sys.argv[1]):
    b = base64.b64decode(line.strip())
    try:
        d = json.loads(b)
    except Exception as e:
        print("E", type(e).__name__); continue
    if not isinstance(d, dict):
        print("N"); continue
    print("D", int(bool(d.get("mm_processor_kwargs"))), int(bool(d.get("media_io_kwargs"))))
"#;

    /// Python's answers, or `None` (with the reason printed) when there is no python3 ≥ 3.10.7.
    pub(super) fn answers(corpus: &[Vec<u8>]) -> Option<Vec<String>> {
        let dir = std::env::temp_dir().join(format!("mmgate-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("corpus.b64");
        let b64 = base64::engine::general_purpose::STANDARD;
        let lines: String = corpus.iter().map(|b| b64.encode(b) + "\n").collect();
        std::fs::write(&file, lines).unwrap();
        let run = std::process::Command::new("python3")
            .arg("-I")
            .arg("-c")
            .arg(SCRIPT)
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
        let mut lines = stdout.lines();
        if lines.next() != Some("OK") {
            println!("python3 has no integer digit limit (older than 3.10.7)");
            return None;
        }
        let answers: Vec<String> = lines.map(str::to_string).collect();
        assert_eq!(answers.len(), corpus.len(), "one answer per body");
        Some(answers)
    }

    /// Field values: falsy and truthy in every type, then (from [`INVALID`]) values Python refuses.
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
        // Nesting stays below 900 here (a bare python3's recursion limit is not vLLM's);
        // the 970/971 boundary has its own test.
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
        "\u{a0}1", "/*c*/1", "0x10", "\"open", r#"{"a":1"#, "]", "[[[[[[[[[[[[[[[[",
    ];

    fn invalid() -> Vec<String> {
        let mut v: Vec<String> = INVALID.iter().map(|s| s.to_string()).collect();
        v.push(format!("1{}", "0".repeat(4300)));
        v.push(format!("-{}", "9".repeat(4301)));
        v
    }

    fn keys() -> Vec<&'static str> {
        let mut k = KEYS.to_vec();
        k.extend([
            r"\ud800",
            "\u{E000}",
            r"mm_processor_kwargs\ud800",
            "mm_processor_kwargs\u{E000}",
        ]);
        k
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

    /// Hand-picked bodies: every value under both fields, duplicates in every order and
    /// spelling, and each encoding's edge cases.
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
        let spellings = [
            "mm_processor_kwargs",
            r"mm_processor_kwar\u0067s",
            r"\u006dm_processor_kwargs",
        ];
        for a in spellings {
            for b in spellings {
                for (x, y) in [
                    ("{\"a\":1}", "{}"),
                    ("{}", "{\"a\":1}"),
                    ("0", "1"),
                    ("[0]", "null"),
                ] {
                    c.push(
                        format!("{{\"{a}\":{x},\"media_io_kwargs\":{y},\"{b}\":{y}}}").into_bytes(),
                    );
                }
            }
        }
        for (width, be, bom) in [
            (2, false, true),
            (2, true, false),
            (4, false, true),
            (4, true, false),
        ] {
            let enc = Enc { width, be, bom };
            let body = encode(
                "{\"mm_processor_kwargs\":{\"a\":\"\u{1F600}\u{E000}\"}}",
                enc,
            );
            c.push(body.clone());
            c.push(body[..body.len() - 1].to_vec());
        }
        #[rustfmt::skip]
        let raws = [
            &b"\xEF\xBB\xBF{}"[..], b"\xEF\xBB\xBF", b"\xEF\xBB\xBF\xEF\xBB\xBF{}", b"{\x00", b"\x00{",
            b"{\"a\":\"\xFF\"}", b"{\"a\":\"\xC0\xAF\"}", b"{\"a\":\"\xED\xA0\x80\"}", b"{\"a\":\"\xED\xB0\x80\"}",
            b"{\"a\":\"\xF4\x90\x80\x80\"}", b"{\x00\x00\x00\x00\x00\x11\x00}\x00\x00\x00", b"\xFF\xFE\x00\x00",
            b"\xFE\xFF\x00{\x00}", b"\xFF\xFE{\x00}\x00", b"{\"mm_processor_kwargs\":1}\xEF\xBB\xBF",
        ];
        c.extend(raws.iter().map(|r| r.to_vec()));
        c
    }
}
