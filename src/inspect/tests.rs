use super::*;

fn find(body: &str) -> Findings {
    inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap()
}

#[test]
fn last_duplicate_wins_across_spellings() {
    let f = find(r#"{"mm_processor_kwargs":{"a":1},"mm_processor_kwar\u0067s":{}}"#);
    let mm = f.field(Field::MmProcessorKwargs);
    assert!(!mm.truthy());
    assert_eq!(mm.occurrences, 2);
    let f = find(r#"{"mm_processor_kwargs":{},"mm_processor_kwargs":{"a":1}}"#);
    assert!(f.field(Field::MmProcessorKwargs).truthy());
}

#[test]
fn nested_and_differently_cased_keys_are_not_gated() {
    let f = find(r#"{"extra_args":{"mm_processor_kwargs":{"a":1}},"MM_PROCESSOR_KWARGS":{"a":1}}"#);
    assert_eq!(f.offending().count(), 0);
}

#[test]
fn object_keys_are_deduplicated_in_first_order() {
    let f = find(r#"{"media_io_kwargs":{"video":{"n":1},"image":5,"video":{}}}"#);
    let m = f.field(Field::MediaIoKwargs);
    assert_eq!(m.keys, ["video", "image"]);
    assert_eq!(m.non_object_key(), Some("image"));
    // The last duplicate decides, across escapes; two different lone surrogates are two
    // keys (Python keeps both) though both print as replacement characters.
    let f = find(
        r#"{"media_io_kwargs":{"\ud800":{},"image":{},"\ud801":5,"imag\u0065":7,"\ud800":{}}}"#,
    );
    let m = f.field(Field::MediaIoKwargs);
    assert_eq!(m.keys.len(), 3);
    assert_eq!(m.keys[1], "image");
    assert_eq!(m.values[1], KwargValue::Number(7.0));
    assert_eq!(m.non_object_key(), Some("image"));
}

#[test]
fn facts_are_read() {
    let f = find(
        r#"{"model":"ti\u006ey","messages":[],"chat_template_kwargs":{"chat_template":"x"},"tool_choice":"none","use_beam_search":true}"#,
    );
    assert_eq!(f.facts.model, StrField::Str("tiny".into()));
    assert!(f.facts.has_messages && f.facts.sends_chat_template() && f.facts.use_beam_search());
    assert!(!f.facts.needs_tool_parser());
}

#[test]
fn utf16_bodies_report_original_spans() {
    let text = r#"{"a":1,"mm_processor_kwargs":{"x":1}}"#;
    let body: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
    let f = inspect(&body, RENDER_MAX_DEPTH).unwrap();
    assert_eq!(f.encoding, Encoding::Utf16Be);
    assert!(f.field(Field::MmProcessorKwargs).truthy());
    assert_eq!(f.members[1].span, 14..text.len() * 2 - 2);
}

#[test]
fn bad_bodies_are_errors() {
    for bad in [
        "",
        "[]",
        "{} x",
        "{\"a\":1",
        "\u{feff}\u{feff}{}",
        "{\"a\":01}",
    ] {
        assert!(
            inspect(bad.as_bytes(), RENDER_MAX_DEPTH).is_err(),
            "{bad:?}"
        );
    }
    assert!(inspect(b"\xEF\xBB\xBF{}", RENDER_MAX_DEPTH).is_ok());
    assert!(inspect(b"{\"a\":\"\xff\"}", RENDER_MAX_DEPTH).is_err());
}

/// UTF-8 is validated as it is scanned, but the error is still the one Python raises first:
/// `bytes.decode` fails on the first undecodable byte before `json` parses anything.
#[test]
fn decoding_errors_win_over_syntax_errors_wherever_they_are() {
    let decode_at = |body: &[u8]| match inspect(body, RENDER_MAX_DEPTH) {
        Err(InspectError::Decode(e)) => Some(e.offset),
        _ => None,
    };
    // In a string, before and after a syntax error, in trailing data, after a BOM.
    assert_eq!(decode_at(b"{\"a\":\"x\xffy\"}"), Some(7));
    assert_eq!(decode_at(b"{\"a\":01, \"b\":\"\xff\"}"), Some(14));
    assert_eq!(decode_at(b"{\"a\":1} \xc3"), Some(8));
    assert_eq!(decode_at(b"\xEF\xBB\xBF{\"a\":[1,]} \xff"), Some(14));
    assert_eq!(
        decode_at(b"{\"a\":\"\xc3\xa9\xed\xa0\x80\"}\xc0\xaf"),
        Some(13)
    );
    // Valid non-ASCII outside a string is a syntax error, in a string it is text; a lone
    // encoded surrogate passes (surrogatepass).
    assert!(matches!(
        inspect("{\"a\":é}".as_bytes(), RENDER_MAX_DEPTH),
        Err(InspectError::Json { pos: 5, .. })
    ));
    let mut bad = format!("{{\"a\":\"{}é\\n€\u{1F600}", "x".repeat(100)).into_bytes();
    bad.extend_from_slice(b"\xed\"}");
    assert_eq!(decode_at(&bad), Some(bad.len() - 3));
    let mut body = format!("{{\"a\":\"{}é\\n€\u{1F600}", "x".repeat(100)).into_bytes();
    body.extend_from_slice(b"\xed\xa0\x80\"}");
    assert!(inspect(&body, RENDER_MAX_DEPTH).is_ok());
}

/// Member names come back decoded, a lone surrogate (escaped or raw) as U+FFFD, each name
/// whole and in body order.
/// The kinds of a top-level array's own elements (not of what they hold), with `NOT_INT`
/// for a number or string that pydantic's `int` refuses and `NOT_FLOAT` for an integer its
/// `float` refuses.
#[test]
fn array_members_note_their_elements_kinds() {
    let huge = format!("1{}", "0".repeat(400));
    let f = find(&format!(
        r#"{{"a":[1,"x",null,true,NaN,[{{}}],{{"b":[]}}],"b":[],"c":[1,"2",true,2.0," 3 "],"d":[1.5],"e":["a"],"f":[[1.5]],"g":{{"h":[1]}},"i":-Infinity,"j":[{huge},-{huge},{huge}.0]}}"#
    ));
    let elements = |name: &str| {
        f.members
            .iter()
            .find(|m| f.name(m) == name)
            .unwrap()
            .elements
    };
    let k = |kinds: &[KindSet]| kinds.iter().fold(KindSet::NONE, |a, &b| a.or(b));
    use KindSet as K;
    // Every kind, and "x" is not an integer.
    let every = [
        K::NULL,
        K::BOOL,
        K::NUMBER,
        K::NON_FINITE,
        K::STR,
        K::ARRAY,
        K::OBJECT,
        K::NOT_INT,
    ];
    assert_eq!(elements("a"), k(&every));
    // An integer too large for a float (not so with a fraction: a float, infinite).
    assert_eq!(
        elements("j"),
        k(&[K::NUMBER, K::NOT_FLOAT, K::NOT_INT, K::FLOAT_LITERAL])
    );
    assert_eq!(elements("b"), K::NONE);
    // `2.0` is an integer written as a float: lax for an `int`, exact for a `float`.
    assert_eq!(
        elements("c"),
        k(&[K::NUMBER, K::STR, K::BOOL, K::FLOAT_LITERAL])
    );
    assert!(elements("c").within(k(&[K::NUMBER, K::STR, K::BOOL])));
    assert!(!elements("c").exactly_within(k(&[K::NUMBER, K::STR, K::BOOL])));
    assert_eq!(elements("d"), k(&[K::NUMBER, K::NOT_INT, K::FLOAT_LITERAL]));
    assert_eq!(elements("e"), k(&[K::STR, K::NOT_INT]));
    assert_eq!(elements("f"), K::ARRAY);
    assert_eq!(elements("g"), K::NONE);
    assert_eq!(elements("i"), K::NONE);
    let len = |name: &str| f.members.iter().find(|m| f.name(m) == name).unwrap().len;
    assert_eq!(
        (len("a"), len("b"), len("c"), len("f"), len("g")),
        (7, 0, 5, 1, 0)
    );
    let prompt = find(r#"{"prompt":[1,[2],"x"]}"#);
    assert_eq!(prompt.members[0].len, 3);
    assert_eq!(
        prompt.members[0].elements,
        k(&[K::NUMBER, K::ARRAY, K::STR, K::NOT_INT])
    );
    // The lists walked element by element (`prompt`, `messages`, `input`) are noted as any
    // other list is.
    for list in [
        r#"[1,"2",true,2.0," 3 "]"#,
        r#"[1.5,"a",{},[],null,NaN]"#,
        "[]",
        "[{}]",
    ] {
        let of = |name: &str| {
            let f = find(&format!(r#"{{"{name}":{list}}}"#));
            (f.members[0].elements, f.members[0].len)
        };
        for name in ["prompt", "messages", "input"] {
            assert_eq!(of(name), of("other"), "{name}: {list}");
        }
    }
    assert!(KindSet::NUMBER.within(K::ANY) && !K::ANY.within(K::NUMBER));
}

#[test]
fn member_names_are_decoded_in_order() {
    let body = b"{\"a\\u00e9\":1,\"\\ud800x\":2,\"\xed\xb0\x80\":3,\"m\\u006fdel\":\"x\"}";
    let f = inspect(body, RENDER_MAX_DEPTH).unwrap();
    let names: Vec<&str> = f.members.iter().map(|m| f.name(m)).collect();
    assert_eq!(
        names,
        [
            "aé",
            "\u{FFFD}\u{FFFD}\u{FFFD}x",
            "\u{FFFD}\u{FFFD}\u{FFFD}",
            "model"
        ]
    );
    assert!(f.facts.surrogate_key);
    assert_eq!(
        f.member("model").map(|m| m.kind),
        Some(Kind::Str { empty: false })
    );
}

/// The names buffer is made total: a byte that is not UTF-8 (which the scanner never lets
/// through) would become `?`, one byte for one, so every range still falls on a boundary.
#[test]
fn names_text_keeps_byte_offsets() {
    assert_eq!(super::names_text(b"ab\xffc\xe2\x82".to_vec()), "ab?c??");
    assert_eq!(super::names_text("é€".as_bytes().to_vec()), "é€");
}

/// A body Python's `json` refuses is refused with its message, at its position: in
/// characters of the decoded text (not bytes), with its line and column.
#[test]
fn syntax_errors_are_pythons_message_and_position() {
    let json = |body: &[u8]| match inspect(body, RENDER_MAX_DEPTH) {
        Err(InspectError::Json {
            what,
            pos,
            line,
            column,
        }) => (what, pos, line, column),
        other => panic!("{}: {other:?}", body.escape_ascii()),
    };
    // (body, (message, position, line, column))
    type Case = (&'static [u8], (&'static str, usize, usize, usize));
    let cases: [Case; 10] = [
        (
            b"{\"a\":\"abc",
            ("Unterminated string starting at", 5, 1, 6),
        ),
        (
            b"{\"a\":\"x\\",
            ("Unterminated string starting at", 5, 1, 6),
        ),
        (b"{\"a\":\"\\u1234", ("Invalid \\uXXXX escape", 7, 1, 8)),
        (b"{\"a\":\"\\u12\"}", ("Invalid \\uXXXX escape", 7, 1, 8)),
        (b"{\"a\":\"\\q\"}", ("Invalid \\escape", 6, 1, 7)),
        (
            b"{\"a\":1,}",
            ("Expecting property name enclosed in double quotes", 7, 1, 8),
        ),
        (
            "{\"é€\":\n \"ü\" x}".as_bytes(),
            ("Expecting ',' delimiter", 12, 2, 6),
        ),
        (
            b"\xEF\xBB\xBF{x",
            ("Expecting property name enclosed in double quotes", 1, 1, 2),
        ),
        (b"{\"a\":1}\n\n x", ("Extra data", 10, 3, 2)),
        (
            b"{\x00\"\x00a\x00\"\x00 \x00",
            ("Expecting ':' delimiter", 5, 1, 6),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(json(body), want, "{}", body.escape_ascii());
    }
    // Only a whole `NaN` is a call that counts as a level of nesting.
    let deep = format!("{}Nan{}", "[".repeat(970), "]".repeat(970));
    assert_eq!(json(deep.as_bytes()).0, "Expecting value");
}

#[test]
fn what_a_body_records_is_bounded() {
    let members = |n: usize| -> String {
        (0..n)
            .map(|i| format!(r#""k{i}":0"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    let items = |n: usize| -> String { vec![r#"{"role":"user","content":"x"}"#; n].join(",") };
    let (at, over) = (members(MAX_MEMBERS), members(MAX_MEMBERS + 1));
    let (all, more) = (members(scan::MAX_RECORDED), members(scan::MAX_RECORDED + 1));
    // Two members recorded per message.
    let (half, past) = (scan::MAX_RECORDED / 2, scan::MAX_RECORDED / 2 + 1);
    for (body, fits) in [
        (format!("{{{at}}}"), true),
        (format!("{{{over}}}"), false),
        (format!(r#"{{"mm_processor_kwargs":{{{all}}}}}"#), true),
        (format!(r#"{{"mm_processor_kwargs":{{{more}}}}}"#), false),
        (
            format!(r#"{{"media_io_kwargs":{{"image":{{{more}}}}}}}"#),
            false,
        ),
        (format!(r#"{{"input":[{}]}}"#, items(half)), true),
        (format!(r#"{{"input":[{}]}}"#, items(past)), false),
        // Members read for nothing, or only for their values' kinds, are not recorded; nor
        // are those of objects read leniently past the limit (a one-model member, an
        // object field of a tool or item).
        (format!(r#"{{"extra_args":{{{more}}}}}"#), true),
        (format!(r#"{{"stream_options":{{{more}}}}}"#), true),
        (format!(r#"{{"text":{{"format":{{{more}}}}}}}"#), true),
        (
            format!(r#"{{"tools":[{{"type":"function","name":"f","parameters":{{{more}}}}}]}}"#),
            true,
        ),
        (
            format!(r#"{{"input":[{{"type":"function_call","caller":{{{more}}}}}]}}"#),
            true,
        ),
        (format!(r#"{{"metadata":{{{more}}}}}"#), true),
        (
            format!(r#"{{"mm_processor_kwargs":{{"a":{{"b":{{{more}}}}}}}}}"#),
            true,
        ),
    ] {
        let found = inspect(body.as_bytes(), RENDER_MAX_DEPTH);
        let refused = matches!(
            found,
            Err(InspectError::Syntax(SyntaxError::TooManyMembers { .. }))
        );
        assert_eq!(refused, !fits, "{}", &body[..40]);
    }
}

#[test]
fn each_model_member_is_read_as_one_tagged_object_with_its_parts() {
    for name in MODELS {
        let name = std::str::from_utf8(name).unwrap();
        let f = find(&format!(
            r#"{{"{name}":{{"a":1,"b":{{"type":"t"}},"c":[{{}}]}}}}"#
        ));
        let tagged: Vec<_> = f.members[0].tagged().collect();
        assert_eq!(tagged.len(), 1, "{name}");
        let t = tagged[0];
        for (field, parts) in [(&b"b"[..], 1), (b"c", 1), (b"a", 0)] {
            let list = t.get(field).and_then(|k| k.list.as_ref());
            assert_eq!(list.map_or(0, |l| t.objects(l).count()), parts, "{name}");
        }
        // Not an object: read as any other value.
        let f = find(&format!(r#"{{"{name}":[{{}}]}}"#));
        assert_eq!(f.members[0].tagged().count(), 0, "{name}");
    }
}
