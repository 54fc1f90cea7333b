use proptest::prelude::*;

use super::*;
use crate::contract::fields;

const ROUTES: [&[ModelTy]; 10] = [
    fields::CHAT,
    fields::CHAT_BATCH,
    fields::COMPLETION,
    fields::RESPONSES,
    fields::TOKENIZE,
    fields::EMBEDDINGS,
    fields::POOLING,
    fields::SCORE,
    fields::RERANK,
    fields::CLASSIFY,
];

/// Every model of every route.
fn models() -> Vec<&'static ModelTy> {
    ROUTES.iter().flat_map(|r| r.iter()).collect()
}

/// The definition: the table in order, each field against the last member of its name.
fn reference(table: &[FieldTy], findings: &Findings) -> Option<&'static str> {
    table.iter().find_map(|f| match findings.member(f.name) {
        None if f.required
            && (f.filled_from.is_empty()
                || !findings
                    .member(f.filled_from)
                    .is_some_and(|m| f.filled_by(m.chat_form))) =>
        {
            Some(f.name)
        }
        Some(m) if certainly_invalid(f, m, findings) => Some(f.name),
        _ => None,
    })
}

#[test]
fn the_name_hash_is_fnv_1a() {
    let hash = |b: &[u8]| {
        let mut h = Fnv::default();
        h.write(b);
        h.finish()
    };
    // The published FNV-1a 64-bit test vectors.
    assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn every_table_fits_and_names_each_field_once() {
    for model in models() {
        assert!(model.fields.len() <= MAX_FIELDS, "{}", model.name);
        assert_eq!(Model::new(model).position.len(), model.fields.len());
    }
}

fn refusal(route: &'static [ModelTy], body: &str) -> Option<Refusal> {
    let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
    Declared::new(route).refusal(&findings)
}

fn error(route: &'static [ModelTy], body: &str) -> Option<&'static str> {
    refusal(route, body).map(|r| match r {
        Refusal::Field(name) | Refusal::Check(name) => name,
    })
}

/// The bodies vLLM refuses (naming `param`) paired with `Some(param)`, then the ones it
/// takes with `None`.
fn expected<'a>(
    refused: &'a [&'a str],
    taken: &'a [&'a str],
    param: &'static str,
) -> impl Iterator<Item = (&'a str, Option<&'static str>)> {
    let refused = refused.iter().map(move |&b| (b, Some(param)));
    refused.chain(taken.iter().map(|&b| (b, None)))
}

fn check(route: &'static [ModelTy], body: &str) -> Option<&'static str> {
    match refusal(route, body) {
        Some(Refusal::Check(name)) => Some(name),
        _ => None,
    }
}

#[test]
fn a_union_type_refuses_only_what_none_of_its_types_accepts() {
    // CompletionRequest.prompt: str | list[int] | list[str] | list[list[int]] | None.
    let field_error = |model, body: &str| {
        let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        Model::new(model).first_error(&findings)
    };
    for ok in [r#""hi""#, "[1]", "null"] {
        assert_eq!(
            field_error(&fields::COMPLETION[0], &format!(r#"{{"prompt":{ok}}}"#)),
            None
        );
    }
    for bad in [r#"{"a":1}"#, "1", "true", "NaN"] {
        assert_eq!(
            field_error(&fields::COMPLETION[0], &format!(r#"{{"prompt":{bad}}}"#)),
            Some("prompt"),
            "{bad}"
        );
    }
}

#[test]
fn chat_messages_are_refused_only_when_no_message_type_takes_one() {
    // Each checked against the real server, chat and tokenize alike.
    let refused = [
        "{}",
        r#"{"content":"hi"}"#,
        r#"{"role":5,"content":"x"}"#,
        r#"{"role":null}"#,
        r#"{"role":"user","content":5}"#,
        r#"{"role":"user","content":true}"#,
        r#"{"role":"user","content":NaN}"#,
        r#"{"author":{"role":"user"},"content":5}"#,
        r#"{"role":"user","content":"x","name":null}"#,
        r#"{"role":"user","content":"x","name":5}"#,
        r#"{"role":"user","role":5,"content":"x"}"#,
    ];
    let taken = [
        r#"{"role":"user"}"#,
        r#"{"role":"x","content":"hi","name":"n"}"#,
        r#"{"role":"user","content":{}}"#,
        r#"{"role":"assistant","content":null}"#,
        r#"{"role":"user","author":5,"content":"x"}"#,
        r#"{"r\u006fle":"user","content":"x"}"#,
        r#"{"role":5,"role":"user","content":"x"}"#,
        r#"{"author":{"role":"user"}}"#,
    ];
    let ok = r#"{"role":"user","content":"hi"}"#;
    for (message, expected) in expected(&refused, &taken, "messages") {
        for list in [format!("[{message}]"), format!("[{ok},{message}]")] {
            let body = format!(r#"{{"messages":{list}}}"#);
            assert_eq!(error(fields::CHAT, &body), expected, "{body}");
            let body = format!(r#"{{"model":"m","messages":{list}}}"#);
            assert_eq!(
                error(fields::CLASSIFY, &body).is_some(),
                expected.is_some(),
                "{body}"
            );
        }
    }
    // The last `messages` counts; a list of messages under `input` is judged too.
    let body = format!(r#"{{"messages":[{{}}],"messages":[{ok}]}}"#);
    assert_eq!(error(fields::CHAT, &body), None);
    let chat_input = fields::EMBEDDINGS
        .iter()
        .find(|m| m.name == "EmbeddingChatInputRequest");
    let chat_input = chat_input.expect("the chat-input embeddings model");
    let field_error = |body: &str| {
        let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        Model::new(chat_input).first_error(&findings)
    };
    assert_eq!(field_error(&format!(r#"{{"input":[{ok}]}}"#)), None);
    assert_eq!(field_error(r#"{"input":[{}]}"#), Some("input"));
}

#[test]
fn chat_tools_are_refused_only_when_the_tool_type_cannot_take_one() {
    // Each checked against the real server.
    let refused = [
        "{}",
        r#"{"function":{}}"#,
        r#"{"function":"f"}"#,
        r#"{"type":"x","function":{"name":"f"}}"#,
        r#"{"type":null,"function":{"name":"f"}}"#,
        r#"{"function":{"name":5}}"#,
        r#"{"function":{"name":"f","parameters":[]}}"#,
        r#"{"function":{"name":"f","description":5}}"#,
        r#"{"function":{"name":"f","strict":"x"}}"#,
        r#"{"function":{"name":"f"},"defer_loading":"x"}"#,
        r#"{"function":{"name":"f"},"function":{}}"#,
    ];
    let taken = [
        r#"{"function":{"name":"f"}}"#,
        r#"{"type":"\u0066unction","function":{"name":"f"}}"#,
        r#"{"function":{"name":"f","parameters":null,"description":null}}"#,
        r#"{"function":{"name":"f","parameters":{"a":1},"strict":"yes"}}"#,
        r#"{"function":{"name":5,"name":"f"}}"#,
        r#"{"function":{"name":"f"},"defer_loading":0}"#,
    ];
    let messages = r#""messages":[{"role":"user","content":"hi"}]"#;
    for (tool, expected) in expected(&refused, &taken, "tools") {
        let body = format!(r#"{{{messages},"tools":[{tool}]}}"#);
        assert_eq!(error(fields::CHAT, &body), expected, "{body}");
        let tokenize = error(fields::TOKENIZE, &body);
        assert_eq!(tokenize.is_some(), expected.is_some(), "{body}");
    }
}

#[test]
fn responses_tools_are_refused_only_when_no_tool_type_takes_one() {
    // Each checked against the real server.
    let refused = [
        "{}",
        r#"{"type":"function","function":{"name":"f"}}"#,
        r#"{"type":"nope","name":"f"}"#,
        r#"{"type":5,"name":"f"}"#,
        r#"{"type":"function","name":"f","type":null}"#,
        r#"{"type":"file_search"}"#,
        r#"{"type":"mcp"}"#,
        r#"{"type":"function","name":5}"#,
        r#"{"type":"function","name":"f","parameters":5}"#,
        r#"{"type":"function","name":"f","description":5}"#,
        r#"{"type":"mcp","server_label":"s","headers":5}"#,
        // `bool` and `int` fields take only the strings and numbers pydantic reads as such.
        r#"{"type":"function","name":"f","strict":"x"}"#,
        r#"{"type":"function","name":"f","strict":2}"#,
        r#"{"type":"function","name":"f","defer_loading":0.5}"#,
        r#"{"type":"file_search","vector_store_ids":[],"max_num_results":"x"}"#,
        r#"{"type":"file_search","vector_store_ids":[],"max_num_results":1.5}"#,
    ];
    let taken = [
        r#"{"type":"function","name":"f","parameters":null,"strict":"yes"}"#,
        r#"{"type":"function","name":"f","strict":1.0,"defer_loading":"OFF"}"#,
        r#"{"type":"file_search","vector_store_ids":[],"max_num_results":" 5 "}"#,
        r#"{"type":"file_search","vector_store_ids":[],"max_num_results":5.0}"#,
        r#"{"type":"function","name":"f"}"#,
        r#"{"type":"\u0066unction","name":"f","parameters":{}}"#,
        r#"{"type":"web_search"}"#,
        r#"{"type":"file_search","vector_store_ids":[]}"#,
        r#"{"type":"mcp","server_label":"s"}"#,
        r#"{"type":null,"type":"function","name":"f"}"#,
    ];
    for (tool, expected) in expected(&refused, &taken, "tools") {
        let body = format!(r#"{{"input":"hi","tools":[{tool}]}}"#);
        assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
        let body = format!(r#"{{"input":"hi","tools":[{{"type":"web_search"}},{tool}]}}"#);
        assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
    }
}

#[test]
fn a_responses_tool_choice_object_needs_a_type_that_takes_it() {
    // Each checked against the real server.
    let refused = [
        "{}",
        r#"{"name":"f"}"#,
        r#"{"type":"nope"}"#,
        r#"{"type":"function"}"#,
        r#"{"type":"mcp"}"#,
        r#""nope""#,
    ];
    let taken = [
        r#"{"type":"function","name":"f"}"#,
        r#"{"type":"file_search"}"#,
        r#"{"type":"mcp","server_label":"s"}"#,
        r#"{"type":null,"type":"web_search_preview"}"#,
        r#""auto""#,
    ];
    let tools = r#""tools":[{"type":"function","name":"f"}]"#;
    for (choice, expected) in expected(&refused, &taken, "tool_choice") {
        let body = format!(r#"{{"input":"hi",{tools},"tool_choice":{choice}}}"#);
        assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
    }
}

#[test]
fn responses_input_items_are_refused_only_when_no_item_type_takes_one() {
    // Each checked against the real server. (Some taken here are refused by the renderer
    // later, before the gate: `contract::tests` has those.)
    let refused = [
        "{}",
        r#"{"role":"user"}"#,
        r#"{"content":"x"}"#,
        r#"{"type":"msg","role":"user","content":"x"}"#,
        r#"{"type":null,"role":"user","content":"x"}"#,
        r#"{"type":5,"role":"user","content":"x"}"#,
        r#"{"type":"message","type":"x","role":"user","content":"x"}"#,
        r#"{"type":"item_reference"}"#,
        r#"{"type":"reasoning"}"#,
        r#"{"type":"function_call","name":"f"}"#,
        r#"{"type":"function_call","call_id":"c","name":"f","arguments":5}"#,
        r#"{"type":"function_call_output","call_id":"c"}"#,
        r#"{"role":"user","content":5}"#,
        r#"{"role":"user","content":null}"#,
        r#"{"role":5,"content":"x"}"#,
        // `Literal` words: no input message is the tool's.
        r#"{"role":"tool","content":"x"}"#,
        r#"{"type":"additional_tools","role":"user","tools":[]}"#,
        r#"{"type":"function_call_output","call_id":"c","output":"x","status":"bogus"}"#,
    ];
    let taken = [
        r#"{"role":"user","content":"x"}"#,
        r#"{"role":"user","content":[]}"#,
        r#"{"type":"message","role":"user","content":"x"}"#,
        r#"{"type":"x","type":"message","role":"user","content":"x"}"#,
        r#"{"r\u006fle":"user","content":"x","extra":1}"#,
        r#"{"id":"r"}"#,
        r#"{"type":null,"id":"r"}"#,
        // A reasoning item gets an `id` from `input_item_parsing`.
        r#"{"type":"reasoning","summary":[]}"#,
        r#"{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}"#,
        r#"{"type":"compaction_trigger"}"#,
        r#"{"role":"developer","content":"x"}"#,
        r#"{"role":"\u0075ser","content":"x"}"#,
        r#"{"type":"additional_tools","role":"developer","tools":[]}"#,
        r#"{"role":"user","content":"x","type":"message","status":"bogus"}"#,
    ];
    let ok = r#"{"role":"user","content":"x"}"#;
    for (item, expected) in expected(&refused, &taken, "input") {
        for list in [format!("[{item}]"), format!("[{ok},{item}]")] {
            let body = format!(r#"{{"input":{list}}}"#);
            assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
        }
    }
}

#[test]
fn score_inputs_need_a_content_list_of_parts() {
    // Each checked against the real server, as a document, a list of documents, a query.
    let refused = [
        "{}",
        r#"{"content":"x"}"#,
        r#"{"content":{}}"#,
        r#"{"content":[{}]}"#,
        r#"{"content":[1]}"#,
        r#"{"content":[{"text":"x"}]}"#,
        r#"{"content":[{"type":"text"}]}"#,
        r#"{"content":[{"type":"text","text":5}]}"#,
        r#"{"content":[{"type":null,"text":"x"}]}"#,
        r#"{"content":[{"type":"input_text","text":"x"}]}"#,
        r#"{"content":[{"type":"image_url","image_url":"u"}]}"#,
        r#"{"content":[],"content":"x"}"#,
    ];
    let taken = [
        r#"{"content":[]}"#,
        r#"{"content":[{"type":"text","text":"x"}]}"#,
        r#"{"content":[{"type":"image_embeds"}]}"#,
        r#"{"content":[{"type":"image_url","image_url":{"url":"u"}}]}"#,
        r#"{"content":"x","content":[]}"#,
        r#"{"c\u006fntent":[]}"#,
        r#"{"role":"user","content":[]}"#,
    ];
    for (input, expected) in expected(&refused, &taken, "documents") {
        for documents in [input.to_string(), format!(r#"["a",{input}]"#)] {
            let body = format!(r#"{{"query":"a","documents":{documents}}}"#);
            assert_eq!(error(fields::RERANK, &body), expected, "{body}");
            let body = format!(r#"{{"queries":"a","documents":{documents}}}"#);
            let score = error(fields::SCORE, &body);
            assert_eq!(score.is_some(), expected.is_some(), "{body}");
        }
        let body = format!(r#"{{"query":{input},"documents":"b"}}"#);
        let query = expected.map(|_| "query");
        assert_eq!(error(fields::RERANK, &body), query, "{body}");
    }
}

#[test]
fn conversations_and_token_lists_are_read_to_their_elements() {
    // Each checked against the real server (embeddings; the chat batch route alike).
    let message = r#"{"role":"user","content":"x"}"#;
    let batch = |body: &str| error(fields::EMBEDDINGS, body).is_some();
    for (messages, refused) in [
        (format!("[[{message}]]"), false),
        (format!("[[{message}],[{message}]]"), false),
        ("[]".to_string(), false),
        ("[[1]]".to_string(), true),
        ("[[]]".to_string(), true),
        ("[[{}]]".to_string(), true),
        (format!("[[{message}],[]]"), true),
        (format!("[[{message},1]]"), true),
        (format!("[[{message}],{{}}]"), true),
        (format!(r#"[[{message}],[{{"role":5}}]]"#), true),
    ] {
        let body = format!(r#"{{"messages":{messages}}}"#);
        assert_eq!(batch(&body), refused, "{body}");
        // The batch route needs one conversation at least; embeddings take `[]` as no
        // messages of a single conversation.
        let chat_batch = error(fields::CHAT_BATCH, &body).is_some();
        assert_eq!(chat_batch, refused || messages == "[]", "{body}");
    }
    // Token lists under `input` and `prompt`; a chat form under `input` only when
    // `_is_chat_messages` (or its batched form) moves it to `messages`.
    for (input, refused) in [
        ("[[1,2],[3]]", false),
        ("[[]]", false),
        (r#"[["1"]]"#, false),
        ("[[true]]", false),
        (r#"[[{"role":"user","content":"x"}]]"#, false),
        (r#"[{"role":"user","content":"x"}]"#, false),
        ("[[1.5]]", true),
        (r#"[["a"]]"#, true),
        ("[[null]]", true),
        ("[[[1]]]", true),
        ("[[{}]]", true),
        ("[[1],[{}]]", true),
        (r#"[[{"role":"user","content":"x"}],[1]]"#, true),
        (r#"[{"author":{"role":"user"}}]"#, true),
        (r#"[[{"author":{"role":"user"}}]]"#, true),
        (r#"[{"role":"user","content":"x"},{"role":5}]"#, true),
    ] {
        let body = format!(r#"{{"model":"m","input":{input}}}"#);
        assert_eq!(batch(&body), refused, "{body}");
    }
    for (prompt, refused) in [
        ("[[1]]", false),
        ("[[]]", false),
        ("[[1.5]]", true),
        (r#"[["a"]]"#, true),
        (r#"[[1],["a"]]"#, true),
        ("[[{}]]", true),
    ] {
        let body = format!(r#"{{"prompt":{prompt}}}"#);
        let got = error(fields::COMPLETION, &body);
        assert_eq!(got, refused.then_some("prompt"), "{body}");
    }
}

#[test]
fn harmony_messages_need_an_author_with_a_role() {
    // Each checked against the real server (pooling, `messages`).
    let refused = [
        r#"{"author":"user"}"#,
        r#"{"author":null}"#,
        r#"{"author":[]}"#,
        r#"{"author":{}}"#,
        r#"{"author":{"role":5}}"#,
        r#"{"author":{"role":null}}"#,
        r#"{"author":{"role":"nope"}}"#,
        r#"{"author":{"role":"user","role":5}}"#,
        r#"{"author":{"role":"user","name":5}}"#,
        r#"{"author":{"role":"user"},"content":"x"}"#,
        r#"{"author":{"role":"user"},"channel":5}"#,
    ];
    let taken = [
        r#"{"author":{"role":"user"}}"#,
        r#"{"author":{"role":5,"role":"user"}}"#,
        r#"{"author":{"role":"tool","name":null}}"#,
        r#"{"author":{"role":"user"},"content":[]}"#,
        r#"{"author":{"role":"user"},"recipient":null}"#,
    ];
    for (message, expected) in expected(&refused, &taken, "messages") {
        let body = format!(r#"{{"model":"m","messages":[{message}]}}"#);
        let got = error(fields::EMBEDDINGS, &body);
        assert_eq!(got.is_some(), expected.is_some(), "{body}");
    }
}

#[test]
fn chat_documents_are_objects_of_strings() {
    // Checked against the real server.
    let messages = r#""messages":[{"role":"user","content":"hi"}]"#;
    for (documents, expected) in [
        (r#"[{"a":"b"}]"#, None),
        ("[]", None),
        (r#"[{"a":1}]"#, Some("documents")),
        (r#"[{"content":[]}]"#, Some("documents")),
        (r#"[{"author":{}}]"#, Some("documents")),
        (r#"["a"]"#, Some("documents")),
    ] {
        let body = format!(r#"{{{messages},"documents":{documents}}}"#);
        assert_eq!(error(fields::CHAT, &body), expected, "{body}");
    }
}

#[test]
fn response_format_and_structured_outputs_are_checked_as_sent() {
    // Each checked against the real server (chat; completions alike).
    let messages = r#""messages":[{"role":"user","content":"x"}]"#;
    for (members, want) in [
        (
            r#""response_format":{"type":"json_schema"}"#,
            Some("response_format"),
        ),
        (
            r#""response_format":{"type":"json_schema","json_schema":{"name":"x"},"json_schema":null}"#,
            Some("response_format"),
        ),
        (r#""response_format":{"type":"json_object"}"#, None),
        (r#""response_format":"json_schema""#, None),
        (
            r#""structured_outputs":{"json":{},"regex":"a"}"#,
            Some("structured_outputs"),
        ),
        (r#""structured_outputs":{"json":{},"regex":null}"#, None),
        (
            r#""structured_outputs":{"json":{},"regex":"a","json":null}"#,
            None,
        ),
        (
            r#""structured_outputs":{"choice":["a"]},"tool_choice":null"#,
            Some("structured_outputs"),
        ),
        (
            r#""structured_outputs":{"choice":["a"]},"tool_choice":"none""#,
            None,
        ),
    ] {
        let body = format!("{{{messages},{members}}}");
        assert_eq!(check(fields::CHAT, &body), want, "{members}");
        // The completion request's version counts the constraints only: `tool_choice` is
        // no member of it (checked against the render server).
        let want = want.filter(|_| !members.contains("tool_choice"));
        let body = format!(r#"{{"prompt":"x",{members}}}"#);
        assert_eq!(check(fields::COMPLETION, &body), want, "{members}");
    }
}

#[test]
fn a_response_format_is_one_of_its_tagged_types() {
    // Each checked against the real server.
    let messages = r#""messages":[{"role":"user","content":"x"}]"#;
    for (format, refused) in [
        (r#"{"type":"bogus"}"#, true),
        ("{}", true),
        (r#"{"type":"json_schema","json_schema":5}"#, true),
        (r#"{"type":"structural_tag"}"#, true),
        (r#"{"type":"text"}"#, false),
        (r#"{"type":"json_object","json_schema":null}"#, false),
        ("null", false),
    ] {
        let body = format!(r#"{{{messages},"response_format":{format}}}"#);
        assert_eq!(error(fields::CHAT, &body).is_some(), refused, "{body}");
    }
}

#[test]
fn every_tagged_name_fits_inline() {
    // A longer `type` word or field name could never match what the walk keeps.
    let tags = |ty: &Ty| match *ty {
        Ty::TaggedList(tags) | Ty::Tagged(tags) | Ty::ContentList(tags) | Ty::Content(tags) => tags,
        _ => &[],
    };
    for model in models() {
        for f in model.fields {
            for tag in f.tys.iter().flat_map(tags) {
                let words = tag.fields.iter().flat_map(|f| f.3.iter());
                let names = tag.words.iter().chain(tag.fields.iter().map(|f| &f.0));
                let names = names.chain(words);
                for name in names {
                    assert!(
                        name.len() <= crate::inspect::Name::MAX,
                        "{}: {name}",
                        model.name
                    );
                }
            }
        }
    }
}

#[test]
fn every_shaped_type_is_read_for_its_names() {
    // The inspector reads insides for these names only; a type of another name would be
    // judged on nothing and take everything.
    for model in models() {
        for f in model.fields {
            for ty in f.tys {
                let name = f.name.as_bytes();
                let read = match ty {
                    Ty::Content(_) | Ty::ContentList(_) => crate::inspect::CONTENTS.contains(&name),
                    Ty::Nested(outer, _) if *outer == KindSet::OBJECT => {
                        crate::inspect::CONTENTS.contains(&name)
                    }
                    Ty::Nested(..) | Ty::ChatBatches => {
                        matches!(f.name, "messages" | "input" | "prompt")
                    }
                    Ty::ChatMessages => matches!(f.name, "messages" | "input"),
                    Ty::ChatRequestMessages => f.name == "messages",
                    Ty::ChatTools => f.name == "tools",
                    Ty::TaggedList(_) => matches!(f.name, "tools" | "input"),
                    Ty::Tagged(_) => {
                        matches!(f.name, "tool_choice" | "response_format")
                            || crate::inspect::MODELS.contains(&name)
                    }
                    Ty::WordList(_) => f.name == "include",
                    _ => true,
                };
                assert!(read, "{}.{}: {ty:?}", model.name, f.name);
            }
        }
    }
}

#[test]
fn a_list_of_literal_words_takes_only_those_words() {
    // Each checked against the real server.
    for (include, expected) in [
        (r#"["a"]"#, Some("include")),
        (r#"["reasoning.encrypted_content","x"]"#, Some("include")),
        (r#"[1]"#, Some("include")),
        ("[]", None),
        (r#"["reasoning.encrypted_content"]"#, None),
        (
            r#"["reas\u006fning.encrypted_content","file_search_call.results"]"#,
            None,
        ),
        ("null", None),
    ] {
        let body = format!(r#"{{"input":"hi","include":{include}}}"#);
        assert_eq!(error(fields::RESPONSES, &body), expected, "{body}");
    }
}

#[test]
fn a_body_is_refused_only_when_every_model_refuses_it() {
    // Tokenize: a completion form (prompt: str, required) and a chat form (messages).
    assert_eq!(error(fields::TOKENIZE, r#"{"prompt":"hi"}"#), None);
    assert_eq!(error(fields::TOKENIZE, r#"{"messages":[]}"#), None);
    assert_eq!(
        error(fields::TOKENIZE, r#"{"prompt":{},"messages":[]}"#),
        None
    );
    assert_eq!(
        error(fields::TOKENIZE, r#"{"prompt":{"a":1}}"#),
        Some("prompt"),
        "the completion form's error is named"
    );
    assert_eq!(error(fields::TOKENIZE, r#"{"model":"m"}"#), Some("prompt"));
    // A model without plain required fields never refuses on its own.
    let bare = ModelTy {
        name: "Bare",
        checks: &[],
        fields: &[],
    };
    assert_eq!(
        error(
            std::slice::from_ref(Box::leak(Box::new(bare))),
            r#"{"x":1}"#
        ),
        None
    );
    assert_eq!(error(&[], r#"{"x":1}"#), None);
    // One model's before-validator refuses the body even where another model takes it:
    // its error escapes pydantic's union.
    let both = r#"{"prompt":"p","input":"i","messages":[],"continue_final_message":true,"add_generation_prompt":1}"#;
    for route in [
        fields::TOKENIZE,
        fields::EMBEDDINGS,
        fields::POOLING,
        fields::CHAT,
    ] {
        assert_eq!(
            check(route, both),
            Some("continue_final_message"),
            "{}",
            route[0].name
        );
    }
    assert_eq!(check(fields::SCORE, both), None);
    assert_eq!(check(fields::TOKENIZE, r#"{"prompt":"p"}"#), None);
    // EmbeddingChatInputRequest fills `messages` in from a list `input`.
    let chat_input = &fields::EMBEDDINGS[3];
    assert_eq!(chat_input.name, "EmbeddingChatInputRequest");
    let missing = |body: &str| {
        let findings = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        Model::new(chat_input).first_error(&findings)
    };
    assert_eq!(missing(r#"{"input":[{"role":"user"}]}"#), None);
    assert_eq!(missing(r#"{"input":"text"}"#), Some("input"));
    assert_eq!(missing(r#"{"x":1}"#), Some("input"));
}

#[test]
fn the_gated_fields_are_typed_per_model() {
    let findings = |body: &str| crate::inspect::inspect(body.as_bytes(), 970).unwrap();
    let gated = |route, body: &str| Declared::new(route).mistyped_gated(&findings(body));
    // Tokenize: the completion form declares neither field, the chat form both.
    let both_forms = r#"{"prompt":[],"messages":[],"media_io_kwargs":{"image":[]}}"#;
    assert_eq!(error(fields::TOKENIZE, both_forms), Some("prompt"));
    assert_eq!(gated(fields::TOKENIZE, both_forms), [Field::MediaIoKwargs]);
    let completion_form = r#"{"prompt":"hi","mm_processor_kwargs":"x"}"#;
    assert_eq!(error(fields::TOKENIZE, completion_form), None);
    // Chat: an object for mm_processor_kwargs, an object of objects for media_io_kwargs,
    // the last duplicate as pydantic reads it.
    for (body, want) in [
        (
            r#"{"messages":[],"mm_processor_kwargs":"x","media_io_kwargs":{"a":1}}"#,
            &[Field::MmProcessorKwargs, Field::MediaIoKwargs][..],
        ),
        (
            r#"{"messages":[],"media_io_kwargs":{"a":{}},"mm_processor_kwargs":null}"#,
            &[],
        ),
        (
            r#"{"messages":[],"media_io_kwargs":{"a":1},"media_io_kwar\u0067s":{"a":{}}}"#,
            &[],
        ),
        (
            r#"{"messages":[],"media_io_kwargs":{"a":{}},"media_io_kwargs":[]}"#,
            &[Field::MediaIoKwargs],
        ),
    ] {
        assert_eq!(gated(fields::CHAT, body), want, "{body}");
        let refused = error(fields::CHAT, body);
        assert_eq!(refused.is_some(), !want.is_empty(), "{body}");
        assert!(refused.is_none_or(|r| want.iter().any(|f| f.name() == r)));
    }
}

#[test]
fn the_checks_read_the_last_duplicate_and_truthiness() {
    let messages = r#""prompt":"p","messages":[]"#;
    // validate_stream_options: stream_options truthy while stream is not (the batch
    // route's, on its rebuilt requests: `contract::tests`).
    for route in [fields::CHAT, fields::COMPLETION] {
        for (body, refused) in [
            (r#""stream_options":{"include_usage":true}"#, true),
            (r#""stream_options":{"a":1},"stream":0"#, true),
            (r#""stream_options":{"a":1},"stream":true"#, false),
            (r#""stream_options":{},"stream":false"#, false),
            (r#""stream_options":null"#, false),
            (r#""stream_options":{"a":1},"stream_options":{}"#, false),
        ] {
            let got = check(route, &format!("{{{messages},{body}}}"));
            let want = refused.then_some("stream_options");
            assert_eq!(got, want, "{} {body}", route[0].name);
        }
    }
    // check_logprobs (chat) and check_batch_mode.
    for (body, want) in [
        (r#""logprob_token_ids":[1]"#, Some("logprob_token_ids")),
        (r#""logprob_token_ids":[1],"logprobs":true"#, None),
        (
            r#""logprob_token_ids":[1],"logprobs":1,"use_beam_search":true"#,
            Some("logprob_token_ids"),
        ),
        (r#""logprob_token_ids":[],"logprobs":false"#, None),
    ] {
        let body = format!("{{{messages},{body}}}");
        assert_eq!(check(fields::CHAT, &body), want, "{body}");
        assert_eq!(check(fields::CHAT_BATCH, &body), want, "{body}");
    }
    // Not numbers; then the values compared raw (`top_logprobs` -1 or above zero also
    // needs a truthy `logprobs`, absent here).
    for (value, prompt, top) in [
        ("\"1\"", true, true),
        ("[1]", true, true),
        ("{}", true, true),
        ("true", false, true),
        ("NaN", false, false),
        ("-1", false, true),
        ("0", false, false),
        ("-2", true, true),
        ("null", false, false),
    ] {
        for (name, want) in [("prompt_logprobs", prompt), ("top_logprobs", top)] {
            let body = format!(r#"{{{messages},"{name}":{value}}}"#);
            assert_eq!(check(fields::CHAT, &body), want.then_some(name), "{body}");
        }
    }
    let beam = format!(r#"{{{messages},"use_beam_search":1}}"#);
    assert_eq!(check(fields::CHAT_BATCH, &beam), Some("use_beam_search"));
    assert_eq!(check(fields::CHAT, &beam), None);
    // check_generation_prompt: both truthy in the raw body (defaults do not count).
    for (body, refused) in [
        (
            r#""continue_final_message":true,"add_generation_prompt":true"#,
            true,
        ),
        (
            r#""continue_final_message":"x","add_generation_prompt":[0]"#,
            true,
        ),
        (r#""continue_final_message":true"#, false),
        (
            r#""continue_final_message":true,"add_generation_prompt":0"#,
            false,
        ),
    ] {
        let body = format!("{{{messages},{body}}}");
        let want = refused.then_some("continue_final_message");
        assert_eq!(check(fields::CHAT, &body), want, "{body}");
    }
    // check_logprobs (completion): logprobs must be set, and a number.
    for (body, want) in [
        (r#""logprob_token_ids":[1]"#, Some("logprob_token_ids")),
        (
            r#""logprob_token_ids":[1],"logprobs":null"#,
            Some("logprob_token_ids"),
        ),
        (r#""logprob_token_ids":[1],"logprobs":0"#, None),
        (r#""logprobs":"2""#, Some("logprobs")),
        (r#""prompt_logprobs":{}"#, Some("prompt_logprobs")),
    ] {
        let body = format!("{{{messages},{body}}}");
        assert_eq!(check(fields::COMPLETION, &body), want, "{body}");
    }
    // validate_prompt_and_prompt_embeds.
    for (body, refused) in [
        (r#"{}"#, true),
        (r#"{"prompt":""}"#, true),
        (r#"{"prompt":null,"prompt_embeds":[]}"#, true),
        (r#"{"prompt":"x","prompt":""}"#, true),
        (r#"{"prompt":"","prompt":"x"}"#, false),
        (r#"{"prompt":[]}"#, false),
        (r#"{"prompt":"","prompt_embeds":"e"}"#, false),
        (r#"{"prompt_embeds":[""]}"#, false),
    ] {
        assert_eq!(
            check(fields::COMPLETION, body),
            refused.then_some("prompt"),
            "{body}"
        );
    }
    // ResponsesRequest.validate_prompt: any prompt but null.
    assert_eq!(
        check(fields::RESPONSES, r#"{"input":"i","prompt":""}"#),
        Some("prompt")
    );
    assert_eq!(
        check(fields::RESPONSES, r#"{"input":"i","prompt":{}}"#),
        Some("prompt")
    );
    assert_eq!(
        check(fields::RESPONSES, r#"{"input":"i","prompt":null}"#),
        None
    );
    assert_eq!(
        check(
            fields::TOKENIZE,
            r#"{"prompt":"p","stream_options":{"a":1}}"#
        ),
        None
    );
}

proptest! {
    #[test]
    fn the_first_error_is_the_tables_first(
        table in any::<prop::sample::Index>(),
        members in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 0..8usize), 0..24),
    ) {
        let models = models();
        let model = models[table.index(models.len())];
        let table = model.fields;
        prop_assume!(!table.is_empty());
        let values = ["null", "1", "1.5", "\"x\"", "\"12\"", "[1]", "{\"a\":1}", "true"];
        let body = members
            .iter()
            .map(|(name, declared, value)| {
                let name = if *declared { table[name.index(table.len())].name } else { "not_declared" };
                format!("\"{name}\":{}", values[*value])
            })
            .collect::<Vec<_>>()
            .join(",");
        let findings = crate::inspect::inspect(format!("{{{body}}}").as_bytes(), 970).unwrap();
        prop_assert_eq!(Model::new(model).first_error(&findings), reference(table, &findings));
    }
}
