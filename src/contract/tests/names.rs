//! Member names that hold a lone surrogate, which pydantic cannot read as text: a model, a
//! `TypedDict` or a dataclass refuses an object with one (`string_unicode`), a `dict` takes
//! it, and a list that OpenAI's types read lazily (`Iterable`) is not looked at before the
//! gate. Each case as the real render server answered it.

use super::*;

/// A chat request's messages, unless the case brings its own.
const HI: &str = r#""messages":[{"role":"user","content":"hi"}]"#;
const TOOLS: &str = r#""tools":[{"type":"function","function":{"name":"f"}}]"#;

/// `route`'s verdict on a body of `members` and a truthy `mm_processor_kwargs`.
fn of(route: RouteKind, members: &str) -> Verdict {
    let body = format!(r#"{{"model":"tiny",{members},"mm_processor_kwargs":{{"a":1}}}}"#);
    v(route, &body, &UpstreamFacts::default())
}

const GATE: Verdict = Verdict::Reject(Field::MmProcessorKwargs);

/// Refused before the gate; with the name made text (`\u00e9`), the gate's 400 (or, where
/// the case says, another earlier refusal that the name no longer precedes).
#[test]
fn a_model_refuses_an_object_with_an_unreadable_name() {
    use RouteKind::{ChatRender, CompletionsRender, ResponsesRender, Tokenize};
    let cases: &[(RouteKind, String, bool)] = &[
        (ChatRender, format!(r#"{HI},"tools":[{{"type":"function","function":{{"name":"f"}},"x\ud800":1}}],"tool_choice":"none""#), true),
        (ChatRender, format!(r#"{HI},"tools":[{{"type":"function","function":{{"name":"f","x\ud800":1}}}}],"tool_choice":"none""#), true),
        // Named: with a readable name, the tool parser check comes next.
        (ChatRender, format!(r#"{HI},{TOOLS},"tool_choice":{{"type":"function","function":{{"name":"f"}},"x\ud800":1}}"#), false),
        (ChatRender, format!(r#"{HI},"stream":true,"stream_options":{{"x\ud800":1}}"#), true),
        (ChatRender, format!(r#"{HI},"response_format":{{"type":"text","x\ud800":1}}"#), true),
        (ChatRender, format!(r#"{HI},"response_format":{{"type":"json_schema","json_schema":{{"name":"n","x\ud800":1}}}}"#), true),
        // With a readable name, no constraint is set: refused all the same.
        (ChatRender, format!(r#"{HI},"structured_outputs":{{"x\ud800":1}}"#), false),
        (ChatRender, format!(r#"{HI},"repetition_detection":{{"x\ud800":1}}"#), true),
        (ChatRender, r#""messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"},"x\ud800":1}]}]"#.into(), true),
        (ChatRender, r#""messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}","x\ud800":1}}]}]"#.into(), true),
        (ChatRender, r#""messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"custom","custom":{"name":"f","input":"{}","x\ud800":1}}]}]"#.into(), true),
        (ChatRender, r#""messages":[{"role":"bob","content":[{"type":"text","text":"hi","x\ud800":1}]}]"#.into(), true),
        (ChatRender, r#""messages":[{"role":"bob","content":[{"type":"text","text":"hi"},{"x\ud800":1}]}]"#.into(), true),
        (ChatRender, r#""messages":[{"role":"bob","content":["hi",{"x\ud800":1}]}]"#.into(), true),
        (Tokenize, r#""messages":[{"role":"bob","content":[{"type":"text","text":"hi","x\ud800":1}]}]"#.into(), true),
        (CompletionsRender, r#""prompt":"hi","response_format":{"type":"text","x\ud800":1}"#.into(), true),
        (ResponsesRender, r#""input":[{"role":"user","content":"hi","x\ud800":1}]"#.into(), true),
        (ResponsesRender, r#""input":[{"role":"user","content":[{"type":"input_text","text":"hi","x\ud800":1}]}]"#.into(), true),
        (ResponsesRender, r#""input":"hi","tools":[{"type":"function","name":"f","parameters":{},"x\ud800":1}]"#.into(), true),
        (ResponsesRender, r#""input":"hi","tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":{"type":"function","name":"f","x\ud800":1}"#.into(), true),
        (ResponsesRender, r#""input":"hi","text":{"x\ud800":1}"#.into(), true),
        (ResponsesRender, r#""input":"hi","reasoning":{"x\ud800":1}"#.into(), true),
    ];
    for (route, members, readable_is_gate) in cases {
        let got = of(*route, members);
        assert!(
            matches!(got, Verdict::Invalid(_)),
            "{route:?} {members}: {got:?}"
        );
        let readable = members.replace(r"\ud800", r"\u00e9");
        let got = of(*route, &readable);
        assert_eq!(
            got == GATE,
            *readable_is_gate,
            "{route:?} {readable}: {got:?}"
        );
    }
}

/// Taken up to the gate: dicts, objects inside a model's untyped members, lists that
/// OpenAI's message types read lazily, harmony's message (not a pydantic model), and the
/// assistant's tool calls on `/tokenize` (read lazily there).
#[test]
fn dicts_lazy_lists_and_harmony_take_an_unreadable_name() {
    use RouteKind::{ChatRender, Tokenize};
    let cases: &[(RouteKind, String)] = &[
        (ChatRender, r#""messages":[{"role":"user","content":[{"type":"text","text":"hi","x\ud800":1}]}]"#.into()),
        (ChatRender, r#""messages":[{"role":"system","content":[{"type":"text","text":"hi","x\ud800":1}]}]"#.into()),
        (ChatRender, r#""messages":[{"role":"bob","content":[{"type":"image_url","image_url":{"url":"data:,x","x\ud800":1}}]}]"#.into()),
        (ChatRender, r#""messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}","x\ud800":1}}]"#.into()),
        (ChatRender, r#""messages":[{"author":{"role":"user","x\ud800":1},"content":[{"type":"text","text":"hi"}]}]"#.into()),
        (ChatRender, r#""messages":[{"author":{"role":"user"},"content":[{"type":"text","text":"hi","x\ud800":1}]}]"#.into()),
        (ChatRender, r#""messages":[{"author":{"role":"user"},"content":[{"type":"text","text":"hi"}],"x\ud800":1}]"#.into()),
        (ChatRender, format!(r#"{HI},"chat_template_kwargs":{{"x\ud800":1}}"#)),
        (ChatRender, format!(r#"{HI},"logit_bias":{{"x\ud800":1}}"#)),
        (ChatRender, format!(r#"{HI},"vllm_xargs":{{"x\ud800":1}}"#)),
        (ChatRender, format!(r#"{HI},"structured_outputs":{{"json":{{"x\ud800":1}}}}"#)),
        (ChatRender, format!(r#"{HI},"tools":[{{"type":"function","function":{{"name":"f","parameters":{{"x\ud800":1}}}}}}],"tool_choice":"none""#)),
        (Tokenize, r#""messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"},"x\ud800":1}]}]"#.into()),
    ];
    for (route, members) in cases {
        assert_eq!(of(*route, members), GATE, "{route:?} {members}");
    }
}

/// A score input object (`ScoreMultiModalParam`) and its content parts are `TypedDict`s:
/// a name that is not text in either is refused (seen on a real embedding server).
#[test]
fn a_score_input_with_an_unreadable_name_is_refused() {
    let up = embed_server();
    for (documents, refused) in [
        (
            r#"{"content":[{"type":"text","text":"d"}],"x\ud800":1}"#,
            true,
        ),
        (
            r#"[{"content":[{"type":"text","text":"d","x\ud800":1}]}]"#,
            true,
        ),
        (
            r#"{"content":[{"type":"text","text":"d"}],"x\u00e9":1}"#,
            false,
        ),
        (
            r#"[{"content":[{"type":"text","text":"d","x\u00e9":1}]}]"#,
            false,
        ),
    ] {
        let member = format!(r#""documents":{documents}"#);
        let got = with_kwargs(RouteKind::Score, r#""queries":"q""#, &member, &up);
        assert_eq!(got != GATE, refused, "{documents}: {got:?}");
    }
}
