//! Chat messages and the Responses API's input items as pydantic's unions take them: each
//! case as the real render server answered it (the gate's 400, or a validation 400 first).

use super::*;

/// `route`'s verdict on one message (or input item) in `field`, beside a truthy
/// `mm_processor_kwargs`.
fn one(route: RouteKind, field: &str, message: &str) -> Verdict {
    let member = format!(r#""{field}":[{message}]"#);
    with_kwargs(route, r#""n":1"#, &member, &UpstreamFacts::default())
}

/// Refused before the gate: a validation error, or (the chat request's before-validators)
/// a `TypeError`.
fn refused(v: &Verdict) -> bool {
    matches!(
        v,
        Verdict::Invalid(Invalid::FieldType { .. } | Invalid::ModelCheck(_))
    )
}

const GATE: Verdict = Verdict::Reject(Field::MmProcessorKwargs);

/// vLLM's custom message (any string role) types its keys; OpenAI's types take only their
/// own roles and require `content` (and the tool's `tool_call_id`).
#[test]
fn the_custom_messages_typed_keys_and_openais_required_ones() {
    for route in [RouteKind::ChatRender, RouteKind::Tokenize] {
        for message in [
            r#"{"role":"other","tool_call_id":1}"#,
            r#"{"role":"tool","content":"x","tool_call_id":1}"#,
            r#"{"role":"user","tools":[1]}"#,
            r#"{"role":"x","task":1}"#,
            r#"{"role":"x","reasoning":1}"#,
            r#"{"role":"other","content":[1]}"#,
            r#"{"role":"other","content":{}}"#,
            r#"{"author":{"role":"user"},"content":[1]}"#,
        ] {
            assert!(
                refused(&one(route, "messages", message)),
                "{route:?} {message}"
            );
        }
        for message in [
            r#"{"role":"user","content":"x","tools":1}"#,
            r#"{"role":"other","tool_call_id":null}"#,
            r#"{"role":"tool","content":{},"tool_call_id":"c"}"#,
            r#"{"author":{"role":"user"},"content":[{}]}"#,
            r#"{"role":"x","reasoning":"r","reasoning_content":1}"#,
        ] {
            assert_eq!(one(route, "messages", message), GATE, "{route:?} {message}");
        }
    }
}

/// The chat request's `_normalize_messages_before` makes `tool_calls` a list (a number is a
/// `TypeError`) and moves `reasoning_content` to an absent or null `reasoning`; its
/// after-validator reads the assistant's `tool_calls`. `/tokenize` runs neither.
#[test]
fn only_the_chat_request_normalizes_its_messages() {
    for (message, chat_takes) in [
        (r#"{"role":"user","content":"x","tool_calls":1}"#, false),
        (r#"{"role":"other","tool_calls":{}}"#, true),
        (r#"{"role":"other","reasoning_content":1}"#, false),
        (
            r#"{"role":"x","reasoning":null,"reasoning_content":1}"#,
            false,
        ),
        (r#"{"role":"assistant","tool_calls":[1]}"#, false),
        (r#"{"role":"assistant","tool_calls":"ab"}"#, false),
        (r#"{"role":"assistant","tool_calls":{"a":1}}"#, false),
    ] {
        let chat = one(RouteKind::ChatRender, "messages", message);
        let tokenize = one(RouteKind::Tokenize, "messages", message);
        assert_eq!(chat == GATE, chat_takes, "chat {message}: {chat:?}");
        assert_eq!(
            tokenize == GATE,
            !chat_takes,
            "tokenize {message}: {tokenize:?}"
        );
        assert!(refused(&chat) || refused(&tokenize), "{message}");
    }
    let message = r#"{"role":"assistant","tool_calls":""}"#;
    assert_eq!(one(RouteKind::ChatRender, "messages", message), GATE);
    // Refused both ways: the assistant's `tool_calls` is not `Optional`, and the custom type
    // takes no null `content`.
    let message = r#"{"role":"assistant","content":null,"tool_calls":null}"#;
    assert!(refused(&one(RouteKind::ChatRender, "messages", message)));
    assert!(refused(&one(RouteKind::Tokenize, "messages", message)));
}

/// A Responses input item's lists of tagged parts (`list[...]`) are validated element by
/// element: a message's content parts, a function call output's.
#[test]
fn the_responses_input_items_parts_are_judged() {
    let route = RouteKind::ResponsesRender;
    for item in [
        r#"{"role":"user","content":[{"type":"text","text":"x"}]}"#,
        r#"{"role":"user","content":[{"type":"input_text"}]}"#,
        r#"{"role":"user","content":[{"type":"input_image","detail":"bogus"}]}"#,
        r#"{"role":"user","content":["x"]}"#,
        r#"{"role":"user","content":[{"type":"input_text","text":"x"},1]}"#,
        r#"{"type":"function_call_output","call_id":"c","output":[{"type":"text"}]}"#,
        // Made an output message only when its parts are output parts; else left for
        // pydantic, where the output types need an `id` and a `status`.
        r#"{"type":"message","role":"assistant","content":[{"type":"text","text":"x"}]}"#,
        r#"{"type":"message","role":"assistant","content":{}}"#,
        // OpenAI's `Iterable` fields take only what Python can iterate: no null, number or
        // bool (the output message's `content`, a computer call's `pending_safety_checks`).
        r#"{"type":"message","role":"assistant","id":"m","status":"completed","content":null}"#,
        r#"{"type":"message","role":"assistant","id":"m","status":"completed","content":1.5}"#,
        r#"{"type":"computer_call","id":"c","call_id":"c","pending_safety_checks":true,"status":"completed","action":{"type":"screenshot"}}"#,
    ] {
        assert!(refused(&one(route, "input", item)), "{item}");
    }
    for item in [
        r#"{"role":"user","content":[{"type":"input_text","text":"x"}]}"#,
        // `_default_input_image_details` fills the missing `detail` in.
        r#"{"role":"user","content":[{"type":"input_image"}]}"#,
        r#"{"role":"user","content":[]}"#,
        r#"{"role":"user","content":"x"}"#,
        r#"{"type":"message","role":"assistant","id":"m","status":"completed","content":[{"type":"output_text","text":"x","annotations":[]}]}"#,
        r#"{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}"#,
        // `input_item_parsing` makes an assistant message with a content list an output
        // message, filling its `id`, `status` and output texts' `annotations` in.
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}"#,
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"},{"type":"refusal","refusal":"x"}]}"#,
    ] {
        assert_eq!(one(route, "input", item), GATE, "{item}");
    }
    // The renderer reads the first part's `text`: a refusal has none (vLLM answers 500).
    let item =
        r#"{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"x"}]}"#;
    assert_eq!(
        one(route, "input", item),
        Verdict::Invalid(Invalid::InputItem)
    );
}

/// A member name with a lone surrogate cannot be read as text: no message type takes the
/// message (`string_unicode` on the real server); `names.rs` has the other objects.
#[test]
fn a_message_with_an_unreadable_member_name_is_refused() {
    for (route, field) in [
        (RouteKind::ChatRender, "messages"),
        (RouteKind::Tokenize, "messages"),
        (RouteKind::Embeddings, "messages"),
    ] {
        let message = r#"{"role":"user","content":"hi","x\ud800":1}"#;
        assert!(refused(&one(route, field, message)), "{route:?} {message}");
        let fine = r#"{"role":"user","content":"hi","x\ud800y":1}"#.replace("\\ud800", "\\u00e9");
        assert_eq!(one(route, field, &fine), GATE, "{route:?} {fine}");
    }
}

/// A tool call is OpenAI's function call (`id`, `type` "function", `function` with string
/// `name` and `arguments`) or its custom call (`type` "custom", `custom` with `name` and
/// `input`). The assistant message's `Iterable` of either is read only by the chat
/// request's after-validator; vLLM's custom message lists function calls only, always read.
#[test]
fn tool_calls_are_function_or_custom_calls() {
    let function = r#"{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}"#;
    let custom = r#"{"id":"c","type":"custom","custom":{"name":"f","input":"x"}}"#;
    let no_arguments = r#"{"id":"c","type":"function","function":{"name":"f"}}"#;
    let message = |role: &str, call: &str| format!(r#"{{"role":"{role}","tool_calls":[{call}]}}"#);
    for route in [RouteKind::ChatRender, RouteKind::Tokenize] {
        let chat = route == RouteKind::ChatRender;
        assert_eq!(
            one(route, "messages", &message("assistant", function)),
            GATE
        );
        assert_eq!(one(route, "messages", &message("assistant", custom)), GATE);
        assert_eq!(one(route, "messages", &message("other", function)), GATE);
        let v = one(route, "messages", &message("assistant", no_arguments));
        assert_eq!(
            refused(&v),
            chat,
            "{route:?}: read only by the chat request"
        );
        for call in [custom, no_arguments] {
            let v = one(route, "messages", &message("other", call));
            assert!(refused(&v), "{route:?} {call}");
        }
        // The last `tool_calls` counts, a list or not.
        for role in ["assistant", "other"] {
            let last = format!(r#"{{"role":"{role}","tool_calls":[{{}}],"tool_calls":null}}"#);
            assert_eq!(one(route, "messages", &last), GATE, "{route:?} {last}");
        }
    }
}

/// The Responses API's `text` and `reasoning` are models of their own (`ResponseTextConfig`,
/// `Reasoning`): their fields are typed, `text.format` is a union told apart by its
/// `type`, and other members are extra. A tool's object field of tagged types (a custom
/// tool's `format`) is judged as one such part.
#[test]
fn the_responses_text_reasoning_and_tool_formats_are_judged() {
    let route = RouteKind::ResponsesRender;
    let judged =
        |member: &str| with_kwargs(route, r#""input":"hi""#, member, &UpstreamFacts::default());
    for member in [
        r#""text":{"format":{"type":"bogus"}}"#,
        r#""text":{"format":{}}"#,
        r#""text":{"format":"text"}"#,
        r#""text":{"format":[{"type":"text"}]}"#,
        r#""text":{"format":{"type":"json_schema","name":"n"}}"#,
        r#""text":{"format":{"type":"json_schema","name":1,"schema":{}}}"#,
        r#""text":{"format":{"type":"json_schema","name":"n","schema":{},"strict":"x"}}"#,
        r#""text":{"verbosity":"x"}"#,
        r#""text":{"verbosity":1}"#,
        r#""text":"x""#,
        r#""reasoning":{"effort":"x"}"#,
        r#""reasoning":{"summary":"x"}"#,
        r#""reasoning":{"mode":1}"#,
        // Longer than any word (the words are compared only when short).
        r#""reasoning":{"effort":"lowwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww"}"#,
        r#""tools":[{"type":"custom","name":"c","format":{"type":"bogus"}}]"#,
        r#""tools":[{"type":"custom","name":"c","format":{"type":"grammar"}}]"#,
    ] {
        assert!(refused(&judged(member)), "{member}");
    }
    for member in [
        r#""text":{"format":null}"#,
        r#""text":{"format":{"type":"json_object"}}"#,
        r#""text":{"format":{"type":"json_schema","name":"n","schema":{},"strict":"yes"}}"#,
        r#""text":{"verbosity":"low","type":"zzz","x":1}"#,
        r#""text":{}"#,
        r#""reasoning":{"effort":"low","summary":null,"mode":"zz","x":1}"#,
        r#""tools":[{"type":"custom","name":"c","format":{"type":"grammar","definition":"d","syntax":"lark"}}]"#,
        r#""tools":[{"type":"custom","name":"c","format":null}]"#,
    ] {
        assert_eq!(judged(member), GATE, "{member}");
    }
}

/// A harmony message (an `author`) is read alike under `messages` and under an embeddings
/// request's `input` (its chat form), where the message's members are also read as a
/// Responses item's.
#[test]
fn a_harmony_message_is_read_alike_under_messages_and_input() {
    let message = r#"{"role":"bob","author":{"role":"user"},"name":5,"content":[{"type":"text","text":"hi"}]}"#;
    for field in ["messages", "input"] {
        assert_eq!(one(RouteKind::Embeddings, field, message), GATE, "{field}");
        let no_author = message.replace(r#""author":{"role":"user"},"#, "");
        assert!(
            refused(&one(RouteKind::Embeddings, field, &no_author)),
            "{field}"
        );
    }
}

/// An object read leniently past the recording limit is taken: its members are not all
/// known (a `text` whose `verbosity` comes after 100,001 others).
#[test]
fn an_object_past_the_recording_limit_is_taken() {
    let many: Vec<String> = (0..=crate::inspect::scan::MAX_RECORDED)
        .map(|i| format!(r#""k{i}":0"#))
        .collect();
    let text = format!(r#""text":{{{},"verbosity":"x"}}"#, many.join(","));
    let route = RouteKind::ResponsesRender;
    let up = UpstreamFacts::default();
    assert_eq!(with_kwargs(route, r#""input":"hi""#, &text, &up), GATE);
    let few = r#""text":{"k0":0,"verbosity":"x"}"#;
    assert!(refused(&with_kwargs(route, r#""input":"hi""#, few, &up)));
}

/// The chat request's `check_system_message_content_type` logs each non-text part `type` of
/// a system message through a cache, which cannot hash a non-empty list or object: a
/// `TypeError` before the gate ("unhashable type: 'list'"). Other roles, empty or hashable
/// types, and other requests (`/tokenize`) pass it. (Checked against the render server.)
#[test]
fn a_system_parts_unhashable_type_raises_in_the_chat_request() {
    let raises = Verdict::Invalid(Invalid::ModelCheck("messages"));
    for message in [
        r#"{"role":"system","content":[{"type":[1],"text":"a"}]}"#,
        r#"{"role":"system","content":[{"type":{"a":1}}]}"#,
        r#"{"role":"sys\u0074em","content":[{"text":"a"},{"type":["x"]}]}"#,
        r#"{"role":"system","content":[{"type":"text","type":[1]}]}"#,
    ] {
        assert_eq!(
            one(RouteKind::ChatRender, "messages", message),
            raises,
            "{message}"
        );
        assert_eq!(
            one(RouteKind::Chat, "messages", message),
            raises,
            "{message}"
        );
        assert_ne!(
            one(RouteKind::Tokenize, "messages", message),
            raises,
            "{message}"
        );
    }
    for message in [
        r#"{"role":"system","content":[{"type":[]}]}"#,
        r#"{"role":"system","content":[{"type":{}}]}"#,
        r#"{"role":"user","content":[{"type":[1],"text":"a"}]}"#,
        r#"{"role":"System","content":[{"type":[1],"text":"a"}]}"#,
        r#"{"role":"system","content":[{"type":[1]}],"content":"x"}"#,
        r#"{"role":"system","content":[{"type":[1],"type":"text"}]}"#,
    ] {
        assert_ne!(
            one(RouteKind::ChatRender, "messages", message),
            raises,
            "{message}"
        );
    }
}

/// The batch route rebuilds its first conversation as a chat request before its gate: that
/// request's `_normalize_messages_before` reads the `tool_calls` the batch validation left
/// unread, so a first conversation's assistant `tool_calls` are judged as the chat request
/// judges them; a later conversation's are not (the first one's gate refuses first).
/// `repetition_detection`, an extra member of the batch request, is typed by the rebuilt
/// request. (Checked against `vllm serve`.)
#[test]
fn the_batch_routes_first_conversation_is_judged_as_a_chat_request() {
    let up = UpstreamFacts::default();
    let batch = |conversations: &str, member: &str| {
        let member = format!(r#""messages":{conversations}{member}"#);
        with_kwargs(RouteKind::ChatBatch, r#""n":1"#, &member, &up)
    };
    let fine = r#"[{"role":"user","content":"Hi"}]"#;
    for call in [
        "[5]",
        r#"{"id":"1"}"#,
        r#""abc""#,
        "[{}]",
        "[null]",
        r#"[{"id":"1","type":"function","function":{"name":"a"}}]"#,
    ] {
        let bad = format!(r#"[{{"role":"assistant","tool_calls":{call}}}]"#);
        assert!(refused(&batch(&format!("[{bad}]"), "")), "{call}");
        assert!(refused(&batch(&format!("[{bad},{fine}]"), "")), "{call}");
        assert_eq!(batch(&format!("[{fine},{bad}]"), ""), GATE, "{call}");
    }
    let good = r#"[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"a","arguments":"x"}}]}]"#;
    assert_eq!(batch(&format!("[{good}]"), ""), GATE);
    // Harmony's `Message` takes this one: the batch validation makes it an object, which
    // the rebuilt request's validators skip.
    let harmony = r#"[{"author":{"role":"user"},"tool_calls":5}]"#;
    assert_eq!(batch(&format!("[{harmony}]"), ""), GATE);
    for (member, taken) in [
        (r#","repetition_detection":"x""#, false),
        (r#","repetition_detection":{"max_pattern_size":"x"}"#, false),
        (r#","repetition_detection":{"min_count":null}"#, false),
        (r#","repetition_detection":null"#, true),
        (r#","repetition_detection":{}"#, true),
    ] {
        let verdict = batch(&format!("[{fine}]"), member);
        assert_eq!(verdict == GATE, taken, "{member}: {verdict:?}");
    }
}
