//! The pooling routes' checks before the gate: the removed parameters their request unions
//! refuse, and what `/pooling`'s handler refuses (`dimensions`, the task). Each case was
//! seen on a real vLLM 0.31 pooling server (`--convert embed`, pooling task `embed`).

use super::*;

const GATE: Verdict = Verdict::Reject(Field::MmProcessorKwargs);

#[test]
fn removed_pooling_parameters_are_refused_before_anything_else() {
    let up = UpstreamFacts::default();
    let check = |parameter| Verdict::Invalid(Invalid::ModelCheck(parameter));
    for route in [
        RouteKind::Embeddings,
        RouteKind::Pooling,
        RouteKind::Classify,
    ] {
        // Any value, null too; ahead of a mistyped `input`; under any key spelling.
        for member in [
            r#""normalize":true"#,
            r#""normalize":null"#,
            r#""n\u006frmalize":1"#,
        ] {
            assert_eq!(
                with_kwargs(route, r#""input":"x""#, member, &up),
                check("normalize")
            );
            assert_eq!(
                with_kwargs(route, r#""input":5"#, member, &up),
                check("normalize")
            );
        }
        for task in ["score", "encode"] {
            let member = format!(r#""task":"{task}""#);
            assert_eq!(
                with_kwargs(route, r#""input":"x""#, &member, &up),
                check("task")
            );
        }
    }
    // The score and generating routes' models have no such validator.
    let score = r#""queries":"a","documents":"b""#;
    assert_eq!(
        with_kwargs(RouteKind::Score, score, r#""normalize":1"#, &up),
        GATE
    );
    let chat = r#""messages":[{"role":"user","content":"x"}]"#;
    assert_eq!(
        with_kwargs(RouteKind::ChatRender, chat, r#""normalize":1"#, &up),
        GATE
    );
}

#[test]
fn the_pooling_handler_refuses_dimensions_before_the_gate() {
    let up = UpstreamFacts::default();
    let dimensions = Verdict::Invalid(Invalid::PoolingTask("dimensions", vec![]));
    let input = r#""input":"x""#;
    for member in [
        r#""dimensions":0"#,
        r#""dimensions":true"#,
        r#""dimensions":"4""#,
        r#""dimensions":null,"dimensions":4"#,
    ] {
        assert_eq!(
            with_kwargs(RouteKind::Pooling, input, member, &up),
            dimensions
        );
    }
    // An `IOProcessorRequest` keeps an undeclared `dimensions` of any type.
    assert_eq!(
        with_kwargs(
            RouteKind::Pooling,
            r#""data":1"#,
            r#""dimensions":"x""#,
            &up
        ),
        dimensions
    );
    for member in [
        r#""dimensions":null"#,
        r#""dimensions":4,"dimensions":null"#,
    ] {
        assert_eq!(with_kwargs(RouteKind::Pooling, input, member, &up), GATE);
    }
    // Pydantic first; and the embeddings handler takes `dimensions`.
    assert!(matches!(
        with_kwargs(RouteKind::Pooling, input, r#""dimensions":"x""#, &up),
        Verdict::Invalid(Invalid::FieldType {
            field: "dimensions",
            ..
        })
    ));
    assert_eq!(
        with_kwargs(RouteKind::Embeddings, input, r#""dimensions":4"#, &up),
        GATE
    );
}

#[test]
fn the_plugin_task_needs_an_io_processor_plugin() {
    let task = Verdict::Invalid(Invalid::PoolingTask("task", vec![]));
    let up = UpstreamFacts::default();
    // A body only an `IOProcessorRequest` takes, whatever its `task`; or `task` "plugin".
    for (base, member) in [
        (r#""data":1"#, r#""user":null"#),
        (r#""data":null"#, r#""task":"embed""#),
        (r#""input":"x""#, r#""task":"plugin""#),
        (r#""input":"x","data":1"#, r#""task":"plugin""#),
    ] {
        assert_eq!(with_kwargs(RouteKind::Pooling, base, member, &up), task);
        let plugin = UpstreamFacts {
            io_processor_plugin: true,
            ..Default::default()
        };
        assert_eq!(with_kwargs(RouteKind::Pooling, base, member, &plugin), GATE);
        let pooling = UpstreamFacts {
            pooling_task: Some("plugin"),
            ..Default::default()
        };
        assert_eq!(
            with_kwargs(RouteKind::Pooling, base, member, &pooling),
            GATE
        );
    }
    // With an `input` or `messages` the body is a pooling completion or chat request.
    for base in [
        r#""input":"x","data":1"#,
        r#""messages":[{"role":"user","content":"x"}],"data":1"#,
    ] {
        assert_eq!(
            with_kwargs(RouteKind::Pooling, base, r#""user":null"#, &up),
            GATE
        );
    }
}

#[test]
fn a_named_task_must_be_the_upstreams_pooling_task() {
    let task = Verdict::Invalid(Invalid::PoolingTask("task", vec![]));
    let input = r#""input":"x""#;
    let embed = UpstreamFacts {
        pooling_task: Some("embed"),
        ..embed_server()
    };
    for word in [
        "classify",
        "token_embed",
        "token_classify",
        "embed&token_classify",
    ] {
        let member = format!(r#""task":"{word}""#);
        assert_eq!(
            with_kwargs(RouteKind::Pooling, input, &member, &embed),
            task
        );
    }
    for member in [
        r#""task":"embed""#,
        r#""task":null"#,
        r#""task":"classify","task":"embed""#,
        r#""user":null"#,
    ] {
        assert_eq!(with_kwargs(RouteKind::Pooling, input, member, &embed), GATE);
    }
    // The pooling task unknown: a task is certainly refused only when the upstream does not
    // serve its route (so does not support it).
    let routes = embed_server();
    let classify = r#""task":"classify""#;
    assert_eq!(
        with_kwargs(RouteKind::Pooling, input, classify, &routes),
        task
    );
    for member in [r#""task":"embed""#, r#""task":"token_embed""#] {
        assert_eq!(
            with_kwargs(RouteKind::Pooling, input, member, &routes),
            GATE
        );
    }
    let unknown = UpstreamFacts::default();
    assert_eq!(
        with_kwargs(RouteKind::Pooling, input, classify, &unknown),
        GATE
    );
    // Other pooling routes' handlers do not read the task.
    assert_eq!(
        with_kwargs(RouteKind::Embeddings, input, classify, &embed),
        GATE
    );
}

/// The handler's checks come before the model check (an unknown model's 404) and follow
/// `/invocations` to `/pooling`.
#[test]
fn the_pooling_handler_runs_before_the_model_check_and_on_invocations() {
    let up = UpstreamFacts {
        served_models: Some(vec!["tiny".into()]),
        ..embed_server()
    };
    let body = r#"{"model":"nope","input":"x","dimensions":4,"mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(
        v(RouteKind::Pooling, body, &up),
        Verdict::Invalid(Invalid::PoolingTask("dimensions", vec![]))
    );
    // Only a pooling request type takes a body with `data` alone.
    let data = r#"{"data":1,"mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(
        v(RouteKind::Invocations, data, &up),
        Verdict::Invalid(Invalid::PoolingTask("task", Field::ALL.to_vec()))
    );
}

/// A gated field's wrong type can make a `/pooling` body an `IOProcessorRequest` (the chat
/// form refuses `media_io_kwargs: 1`, the completion form has no `input`), which the handler
/// refuses without a plugin: the field reaches vLLM as sent, or nulled it would let the chat
/// form take the body. On `/invocations` every gated field goes as sent.
#[test]
fn a_gated_field_that_decides_the_pooling_union_goes_as_sent() {
    let up = UpstreamFacts {
        pooling_task: Some("embed"),
        ..embed_server()
    };
    let body = r#"{"messages":[{"role":"user","content":"x"}],"data":1,"media_io_kwargs":1}"#;
    let verdict = v(RouteKind::Pooling, body, &up);
    assert_eq!(
        verdict,
        Verdict::Invalid(Invalid::PoolingTask("task", vec![Field::MediaIoKwargs]))
    );
    let Verdict::Invalid(inv) = v(RouteKind::Invocations, body, &up) else {
        panic!("refused before the gate")
    };
    assert_eq!(inv.mistyped_gated(), &Field::ALL);
}

/// The embeddings' batched chat requests read their messages' `tool_calls` lazily, after
/// the gate: only the chat batch route rebuilds its first conversation as a chat request.
#[test]
fn embeddings_conversations_are_not_rebuilt_as_chat_requests() {
    let up = embed_server();
    for call in ["[1]", r#""ab""#, r#"{"a":1}"#, r#"[{"id":"1"}]"#] {
        let member = format!(r#""messages":[[{{"role":"assistant","tool_calls":{call}}}]]"#);
        assert_eq!(
            with_kwargs(RouteKind::Embeddings, r#""n":1"#, &member, &up),
            GATE,
            "{call}"
        );
    }
}

/// Of the `/pooling` models that take a body, pydantic's smart mode keeps the one that sets
/// the most fields and, of those that set as many, the first whose values need no lax
/// coercion: a token `input` of floats, bools or mixed kinds loses to an
/// `IOProcessorRequest`'s `data` (refused without a plugin), unless another member is lax
/// for both or a member only the other forms declare is set. (Each case as pydantic's
/// `TypeAdapter` chose on vLLM 0.31's union.)
#[test]
fn the_pooling_union_is_decided_by_fields_set_then_exactness() {
    let up = UpstreamFacts::default();
    let task = Verdict::Invalid(Invalid::PoolingTask("task", vec![]));
    let pooling = |input: &str, member: &str| {
        let base = format!(r#""input":{input},"data":1"#);
        with_kwargs(RouteKind::Pooling, &base, member, &up)
    };
    for input in ["[1.0]", "[true]", "[[1],[2.0]]", r#"["a",1]"#, "[1e0]"] {
        for member in [
            r#""priority":2"#,
            r#""user":null"#,
            r#""encoding_format":"float""#,
        ] {
            assert_eq!(pooling(input, member), task, "{input} {member}");
        }
    }
    for (input, member) in [
        ("[-1]", r#""user":null"#),
        ("[1]", r#""user":null"#),
        (r#"["1"]"#, r#""user":null"#),
        ("[]", r#""user":null"#),
        (r#""x""#, r#""user":null"#),
        ("[[1]]", r#""user":null"#),
        ("[1.0]", r#""priority":1.0"#),
        ("[1.0]", r#""priority":"1""#),
        ("[1.0]", r#""truncate_prompt_tokens":1.0"#),
        ("[1.0]", r#""dimensions":null"#),
        ("[1.0]", r#""messages":[]"#),
    ] {
        assert_eq!(pooling(input, member), GATE, "{input} {member}");
    }
}
