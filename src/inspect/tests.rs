use super::*;

fn find(body: &str) -> Findings {
    inspect(body.as_bytes(), DEFAULT_MAX_DEPTH).unwrap()
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
    assert_eq!(m.non_object_member.as_deref(), Some("image"));
}

#[test]
fn facts_are_read() {
    let f = find(
        r#"{"model":"ti\u006ey","messages":[],"chat_template_kwargs":{"chat_template":"x"},"tool_choice":"none","use_beam_search":true}"#,
    );
    assert_eq!(f.facts.model, StrField::Str("tiny".into()));
    assert!(f.facts.has_messages && f.facts.sends_chat_template() && f.facts.use_beam_search);
    assert!(!f.facts.needs_tool_parser());
}

#[test]
fn utf16_bodies_report_original_spans() {
    let text = r#"{"a":1,"mm_processor_kwargs":{"x":1}}"#;
    let body: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
    let f = inspect(&body, DEFAULT_MAX_DEPTH).unwrap();
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
            inspect(bad.as_bytes(), DEFAULT_MAX_DEPTH).is_err(),
            "{bad:?}"
        );
    }
    assert!(inspect(b"\xEF\xBB\xBF{}", DEFAULT_MAX_DEPTH).is_ok());
    assert!(inspect(b"{\"a\":\"\xff\"}", DEFAULT_MAX_DEPTH).is_err());
}
