//! SageMaker's `/invocations`: dispatch by the body's shape and its session layer.

use super::*;

/// A generating server as its `/openapi.json` shows it: chat and completion handlers.
fn generating_server() -> UpstreamFacts {
    UpstreamFacts {
        served_routes: Some(vec![
            RouteKind::Chat,
            RouteKind::Completions,
            RouteKind::Invocations,
        ]),
        ..Default::default()
    }
}

/// `/invocations` tries only the request types of the handlers the server has: on a pooling
/// server a chat-shaped body is an embedding request (whose model neither checks
/// `tool_choice` nor types `tools`), so its kwargs meet the gate.
#[test]
fn invocations_dispatch_to_the_types_the_server_has() {
    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","fn":{}}],"tool_choice":"auto","mm_processor_kwargs":{"a":1}}"#;
    let generating = generating_server();
    assert!(matches!(
        v(RouteKind::Invocations, body, &generating),
        Verdict::Invalid(_)
    ));
    let pooling = UpstreamFacts {
        served_routes: Some(vec![
            RouteKind::Embeddings,
            RouteKind::Pooling,
            RouteKind::Invocations,
        ]),
        ..Default::default()
    };
    assert_eq!(
        v(RouteKind::Invocations, body, &pooling),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
}

/// A body no request type of the server's handlers takes is vLLM's "Cannot find suitable
/// handler": it reaches vLLM as sent, kwargs and all (vLLM refuses it before any gate).
#[test]
fn invocations_without_a_taking_type_have_no_handler() {
    let pooling = embed_server();
    let texts = r#"{"model":"tiny","texts":["hi"],"mm_processor_kwargs":{"a":1}}"#;
    let verdict = v(RouteKind::Invocations, texts, &pooling);
    assert_eq!(verdict, Verdict::Invalid(Invalid::NoHandler));
    let Verdict::Invalid(inv) = verdict else {
        unreachable!()
    };
    assert_eq!(inv.mistyped_gated(), &Field::ALL, "forwarded as sent");
    // A render server has no /invocations handler at all.
    let render = UpstreamFacts {
        served_routes: Some(vec![RouteKind::ChatRender, RouteKind::Invocations]),
        ..Default::default()
    };
    let chat = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(
        v(RouteKind::Invocations, chat, &render),
        Verdict::Invalid(Invalid::NoHandler)
    );
    // The handlers unknown, the type the body's shape names judges it.
    assert_eq!(
        v(RouteKind::Invocations, chat, &UpstreamFacts::default()),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
}

/// SageMaker's adapter injection replaces an `/invocations` body's `model` (with the adapter
/// header's value, null without one): neither its type nor an unknown name is refused there,
/// but an unknown adapter header is.
#[test]
fn invocations_bodies_name_no_model() {
    let up = UpstreamFacts {
        served_models: Some(vec!["tiny".into()]),
        ..generating_server()
    };
    for model in [r#""nope""#, "5"] {
        let body = format!(
            r#"{{"model":{model},"messages":[{{"role":"user","content":"hi"}}],"mm_processor_kwargs":{{"a":1}}}}"#
        );
        assert_eq!(
            v(RouteKind::Invocations, &body, &up),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{model}"
        );
        assert!(matches!(
            v(RouteKind::Chat, &body, &up),
            Verdict::Invalid(_)
        ));
    }
    // The adapter header's value is the model then, checked as a body's is elsewhere
    // (Latin-1 text, as Starlette decodes it; an empty one names none). Checked against
    // the generating server.
    let body = br#"{"model":"nope","messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"a":1}}"#;
    let judged = |adapter: Option<&[u8]>| {
        let head = Head {
            content_type: Some(b"application/json"),
            adapter,
            ..Head::default()
        };
        judge(RouteKind::Invocations, head, body, 970, &up).0
    };
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    assert_eq!(judged(Some(b"tiny")), gate);
    assert_eq!(judged(Some(b"")), gate);
    assert_eq!(judged(None), gate);
    assert_eq!(
        judged(Some(b"caf\xe9")),
        Verdict::Invalid(Invalid::UnknownModel("café".into()))
    );
    // Only on /invocations.
    let head = Head {
        content_type: Some(b"application/json"),
        adapter: Some(b"nope"),
        ..Head::default()
    };
    let chat = br#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(judge(RouteKind::Chat, head, chat, 970, &up).0, gate);
}

/// SageMaker's session layer reads an `/invocations` request before anything else: a body
/// with a top-level `requestType` is a session request (a malformed one with any other
/// member), and a session header is refused while stateful sessions are off. (Checked
/// against the generating server.)
#[test]
fn invocations_pass_sagemakers_session_layer_first() {
    let mut up = UpstreamFacts {
        served_models: Some(vec!["tiny".into()]),
        ..Default::default()
    };
    let chat = r#""messages":[{"role":"user","content":"hi"}],"mm_processor_kwargs":{"a":1}"#;
    let judged = |up: &UpstreamFacts, body: &str, session: Option<&[u8]>| {
        let head = Head {
            content_type: Some(b"application/json"),
            session,
            ..Head::default()
        };
        judge(RouteKind::Invocations, head, body.as_bytes(), 970, up).0
    };
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let session = Verdict::Invalid(Invalid::SageMakerSession);
    let plain = format!("{{{chat}}}");
    assert_eq!(judged(&up, &plain, None), gate);
    assert_eq!(judged(&up, &plain, Some(b"")), gate);
    assert_eq!(judged(&up, &plain, Some(b"abc")), session);
    for member in [
        r#""requestType":"NEW_SESSION""#,
        r#""request\u0054ype":null"#,
    ] {
        let body = format!("{{{chat},{member}}}");
        assert_eq!(judged(&up, &body, None), session, "{member}");
    }
    // With sessions on, the header may name a live session: not judged.
    up.sagemaker_sessions = true;
    assert_eq!(judged(&up, &plain, Some(b"abc")), gate);
    // Other routes have no session layer.
    let head = Head {
        content_type: Some(b"application/json"),
        session: Some(b"abc"),
        ..Head::default()
    };
    let body = format!(r#"{{"model":"tiny",{chat},"requestType":"CLOSE"}}"#);
    assert_eq!(
        judge(RouteKind::Chat, head, body.as_bytes(), 970, &up).0,
        gate
    );
    // The session layer goes first, and vLLM's answer counts every member: sent as is.
    assert_eq!(Invalid::SageMakerSession.mistyped_gated(), &Field::ALL);
}

#[test]
fn sagemaker_headers_are_read_on_invocations_only() {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().unwrap(),
    );
    headers.insert(Head::ADAPTER, "other".parse().unwrap());
    headers.insert(Head::SESSION, "s1".parse().unwrap());
    let chat = Head::of(&headers, RouteKind::Chat);
    assert_eq!(chat.content_type, Some(&b"application/json"[..]));
    assert_eq!((chat.adapter, chat.session), (None, None));
    let inv = Head::of(&headers, RouteKind::Invocations);
    assert_eq!(inv.content_type, Some(&b"application/json"[..]));
    assert_eq!(inv.adapter, Some(&b"other"[..]));
    assert_eq!(inv.session, Some(&b"s1"[..]));
}

/// `/invocations` parses the body from a deeper frame than FastAPI does (measured on a
/// real `vllm serve`, pooling and generating alike): 964 levels pass, at 965 the body's
/// re-encoding fails, past that its decoding; an integer of over 4300 digits is Python's
/// `ValueError`, answered with a 400. Each is vLLM's answer, given before the gate.
#[test]
fn invocations_parse_limits_are_its_own() {
    let up = UpstreamFacts::default();
    let answer = |body: &str| match judge(
        RouteKind::Invocations,
        Head::content_type(Some(b"application/json")),
        body.as_bytes(),
        up.max_json_depth(),
        &up,
    ) {
        (Verdict::Invalid(inv @ Invalid::Body(..)), _) => {
            let status = inv.vllm_status().as_u16();
            inv.vllm_answer()
                .map(|b| (status, String::from_utf8(b.to_vec()).unwrap()))
        }
        (other, _) => panic!("{other:?}"),
    };
    // `depth` levels in all, the top-level object counted; `inner` innermost.
    let nested = |depth: usize, open: &str, close: &str, inner: &str| {
        let n = depth - 2;
        format!(
            r#"{{"model":"tiny","input":"hi","mm_processor_kwargs":{{"a":1}},"x":{}{inner}{}}}"#,
            open.repeat(n),
            close.repeat(n)
        )
    };
    let internal = |m: &str| {
        format!(
            r#"{{"error":{{"message":"{m}","type":"InternalServerError","param":null,"code":500}}}}"#
        )
    };
    let gated = judge(
        RouteKind::Invocations,
        Head::content_type(Some(b"application/json")),
        nested(964, "[", "]", "[]").as_bytes(),
        up.max_json_depth(),
        &up,
    );
    assert_eq!(gated.0, Verdict::Reject(Field::MmProcessorKwargs));
    // A constant innermost takes a level to parse but none to encode: 964 containers and
    // a `NaN` are gated as 965 containers are not.
    for constant in ["[NaN]", "[-Infinity]"] {
        let (v, _) = judge(
            RouteKind::Invocations,
            Head::content_type(Some(b"application/json")),
            nested(964, "[", "]", constant).as_bytes(),
            up.max_json_depth(),
            &up,
        );
        assert_eq!(v, Verdict::Reject(Field::MmProcessorKwargs), "{constant}");
    }
    for (open, close, inner) in [("[", "]", "[]"), (r#"{"a":"#, "}", "{}")] {
        assert_eq!(
            answer(&nested(965, open, close, inner)).unwrap(),
            (
                500,
                internal("maximum recursion depth exceeded while encoding a JSON object")
            )
        );
    }
    for (open, close, inner, what) in [
        ("[", "]", "[[]]", "array"),
        (r#"{"a":"#, "}", r#"{"a":{}}"#, "object"),
        ("[", "]", r#"{"a":{"b":[]}}"#, "object"),
        (r#"{"a":"#, "}", "[[[[1]]]]", "array"),
    ] {
        assert_eq!(
            answer(&nested(965, open, close, inner)).unwrap(),
            (
                500,
                internal(&format!(
                    "maximum recursion depth exceeded while decoding a JSON {what} from a unicode string"
                ))
            ),
            "{what}"
        );
    }
    assert_eq!(
        answer(&nested(965, "[", "]", "[NaN]")).unwrap(),
        (
            500,
            internal("maximum recursion depth exceeded while calling a Python object")
        )
    );
    // Other routes of the same server still parse 968 levels.
    let chat = nested(968, "[", "]", "[]").replace(r#""input":"hi""#, r#""messages":[]"#);
    let (v, _) = judge(
        RouteKind::Chat,
        Head::content_type(Some(b"application/json")),
        chat.as_bytes(),
        up.max_json_depth(),
        &up,
    );
    assert!(!matches!(v, Verdict::Invalid(Invalid::Body(..))), "{v:?}");
    for (digits, sign) in [(4301, ""), (4301, "-"), (5000, "")] {
        let body = format!(
            r#"{{"model":"tiny","input":"hi","mm_processor_kwargs":{{"a":1}},"x":[1,{sign}{}]}}"#,
            "1".repeat(digits)
        );
        assert_eq!(
            answer(&body).unwrap().1,
            format!(
                r#"{{"error":{{"message":"Exceeds the limit (4300 digits) for integer string conversion: value has {digits} digits; use sys.set_int_max_str_digits() to increase the limit","type":"BadRequestError","param":null,"code":400}}}}"#
            )
        );
    }
}

/// SageMaker's dispatch moves on to the next request type only past a pydantic
/// `ValidationError`. The chat request's before-validators run on every body, `messages` or
/// not, and raise other errors (`VLLMValidationError`, a `TypeError`): those end the
/// dispatch with vLLM's 400 (or 500) before any gate, even where the completion type would
/// take the body. (Checked against `vllm serve`.)
#[test]
fn a_chat_check_that_raises_ends_the_invocations_dispatch() {
    let generating = generating_server();
    let ended = [
        r#""tools":[]"#,
        r#""messages":null"#,
        r#""messages":true"#,
        r#""messages":5"#,
        r#""messages":[{"role":"assistant","tool_calls":5}]"#,
        r#""messages":[{"role":"system","content":[{"type":["x"]}]}]"#,
        r#""continue_final_message":true,"add_generation_prompt":true"#,
        r#""top_logprobs":1"#,
        r#""tool_choice":"auto""#,
        r#""tools":[{"type":"function"}],"tool_choice":{"type":"function","function":{"name":"f"}}"#,
        // The validators skip what is not a dict, and raise on a later message.
        r#""messages":[1,{"role":"assistant","tool_calls":5}]"#,
        // `RepetitionDetectionParams.__post_init__` raises vLLM's own error.
        r#""repetition_detection":{"max_pattern_size":-1}"#,
        r#""repetition_detection":{"max_pattern_size":3,"min_count":1}"#,
    ];
    for member in ended {
        let verdict = with_kwargs(
            RouteKind::Invocations,
            r#""prompt":"Hi""#,
            member,
            &generating,
        );
        assert!(
            matches!(verdict, Verdict::Invalid(Invalid::DispatchEnded(_))),
            "{member}: {verdict:?}"
        );
    }
    // The chat type refuses the kwargs' type, the completion type's check raises without a
    // prompt: the body reaches vLLM as sent, for the chat type's refusal to stand.
    let body =
        r#"{"model":"tiny","messages":[{"role":"user","content":"a"}],"mm_processor_kwargs":true}"#;
    let verdict = v(RouteKind::Invocations, body, &generating);
    assert_eq!(verdict, Verdict::Invalid(Invalid::DispatchEnded("prompt")));
    let Verdict::Invalid(inv) = verdict else {
        unreachable!()
    };
    assert_eq!(inv.mistyped_gated(), &Field::ALL, "forwarded as sent");
    // Validation errors of the chat type move the dispatch on: the completion type takes
    // these, and the gate refuses them.
    let moved_on = [
        r#""messages":"ab""#,
        r#""messages":{"a":1}"#,
        r#""messages":[{"role":"assistant","tool_calls":[5]}]"#,
        r#""messages":[{"role":"system","content":[{"type":[]}]}]"#,
        r#""messages":[{"role":"user","content":[{"type":["x"]}]}]"#,
    ];
    for member in moved_on {
        assert_eq!(
            with_kwargs(
                RouteKind::Invocations,
                r#""prompt":"Hi""#,
                member,
                &generating
            ),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{member}"
        );
    }
    // A validation error of both types: no handler takes it.
    assert_eq!(
        with_kwargs(
            RouteKind::Invocations,
            r#""prompt":"Hi""#,
            r#""repetition_detection":"x""#,
            &generating
        ),
        Verdict::Invalid(Invalid::NoHandler)
    );
}
