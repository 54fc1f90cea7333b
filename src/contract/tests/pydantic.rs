//! How the request models read declared fields before the gate: pydantic's types,
//! coercions, list elements, bounds and the models nested in fields.

use super::*;

#[test]
fn declared_fields_are_type_checked_undeclared_are_not() {
    let up = UpstreamFacts::default();
    let body = r#"{"model":"m","messages":[],"mm_processor_kwargs":"x"}"#;
    assert!(matches!(
        v(RouteKind::Chat, body, &up),
        Verdict::Invalid(Invalid::FieldType { .. })
    ));
    let body = r#"{"model":"m","prompt":"p","mm_processor_kwargs":"x"}"#;
    assert_eq!(
        v(RouteKind::Completions, body, &up),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
    assert_eq!(
        v(RouteKind::Tokenize, body, &up),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
    let body = r#"{"input":"x","media_io_kwargs":"x"}"#;
    assert_eq!(
        v(RouteKind::Embeddings, body, &up),
        Verdict::Reject(Field::MediaIoKwargs)
    );
}

/// Scalars are read as pydantic's lax mode reads them (seen on the real server): a
/// string or number a `bool`/`int`/`float` field cannot take is refused before the gate,
/// and `use_beam_search: "yes"` is beam search.
#[test]
fn declared_scalars_are_coerced_as_pydantic_coerces_them() {
    let up = UpstreamFacts::default();
    let with = chat_body;
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for refused in [
        r#""use_beam_search":"tru""#,
        r#""use_beam_search":2"#,
        r#""use_beam_search":"\ud800""#,
        r#""max_tokens":5.5"#,
        r#""max_tokens":"1e3""#,
        r#""max_tokens":"\ud83d\ude00""#,
        r#""temperature":"hot""#,
        r#""temperature":"1\ud800""#,
    ] {
        let got = v(RouteKind::Chat, &with(refused), &up);
        assert!(
            matches!(got, Verdict::Invalid(Invalid::FieldType { .. })),
            "{refused}: {got:?}"
        );
    }
    for taken in [
        r#""use_beam_search":"no""#,
        r#""use_beam_search":0.0"#,
        r#""max_tokens":" 1_000 ""#,
        r#""max_tokens":2.0"#,
        r#""temperature":"1_0.5e-1""#,
        r#""temperature":"-Infinity""#,
        r#""user":"\ud800""#,
    ] {
        assert_eq!(v(RouteKind::Chat, &with(taken), &up), gate, "{taken}");
    }
    for beam in [r#""use_beam_search":"yes""#, r#""use_beam_search":1"#] {
        assert_eq!(
            v(RouteKind::ChatRender, &with(beam), &up),
            Verdict::Invalid(Invalid::BeamSearchRender),
            "{beam}"
        );
    }
}

/// A list's elements are read as pydantic reads them (seen on the real server): an
/// element of a kind the declared element type never takes, a number or string that
/// a list of `int` cannot take, or more elements than `max_length`, is refused before
/// the gate. (What an object element
/// holds is not judged: `messages: [{}]` is taken to reach the gate, which vLLM refuses.)
#[test]
fn list_elements_are_read_as_pydantic_reads_them() {
    let up = UpstreamFacts::default();
    let message = r#"{"role":"user","content":"x"}"#;
    let chat = |member: &str| kwargs_body(&format!(r#""messages":[{message}],{member}"#));
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (route, body) in [
        (RouteKind::Chat, kwargs_body(r#""messages":[1]"#)),
        (
            RouteKind::Chat,
            kwargs_body(&format!(r#""messages":[{message},"hi"]"#)),
        ),
        (RouteKind::Chat, chat(r#""stop":[1]"#)),
        (RouteKind::Chat, chat(r#""stop":["a",null]"#)),
        (RouteKind::Chat, chat(r#""stop_token_ids":["a"]"#)),
        (RouteKind::Chat, chat(r#""stop_token_ids":[1.5]"#)),
        (RouteKind::Chat, chat(r#""allowed_token_ids":[1,[2]]"#)),
        (RouteKind::Chat, chat(r#""stop":["a","b","c","d","e"]"#)),
        (RouteKind::Chat, chat(r#""tools":[true]"#)),
        (RouteKind::Chat, chat(r#""documents":["d"]"#)),
        (
            RouteKind::ChatBatch,
            kwargs_body(&format!(r#""messages":[{message}]"#)),
        ),
        (
            RouteKind::Completions,
            kwargs_body(r#""prompt":"p","bad_words":[NaN]"#),
        ),
        (RouteKind::Responses, kwargs_body(r#""input":[1]"#)),
    ] {
        let got = v(route, &body, &up);
        assert!(
            matches!(got, Verdict::Invalid(Invalid::FieldType { .. })),
            "{body}: {got:?}"
        );
    }
    for (route, body) in [
        (RouteKind::Chat, chat(r#""stop":["a","1"]"#)),
        (RouteKind::Chat, chat(r#""stop":["a","b","c","d"]"#)),
        (
            RouteKind::Chat,
            chat(r#""stop_token_ids":["1",true,2.0," 3 "]"#),
        ),
        (RouteKind::Chat, chat(r#""stop_token_ids":[]"#)),
        (
            RouteKind::Chat,
            chat(r#""stop_token_ids":[1.00000000000000001]"#),
        ),
        (RouteKind::Chat, chat(r#""documents":[{"title":"t"}]"#)),
        (
            RouteKind::ChatBatch,
            kwargs_body(&format!(r#""messages":[[{message}]]"#)),
        ),
        (RouteKind::Completions, kwargs_body(r#""prompt":[[1],[2]]"#)),
        (
            RouteKind::Responses,
            kwargs_body(&format!(r#""input":[{message}]"#)),
        ),
        (RouteKind::Embeddings, kwargs_body(r#""input":["a","b"]"#)),
        (
            RouteKind::Rerank,
            kwargs_body(r#""query":"q","documents":["d"]"#),
        ),
    ] {
        assert_eq!(v(route, &body, &up), gate, "{body}");
    }
}

/// A field that is a union of list types takes a list only when one of them takes every
/// element (seen on the real pooling server): `["a",1]` fits neither `list[int]` nor
/// `list[str]`.
#[test]
fn list_unions_take_a_list_when_one_list_type_takes_all_of_it() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (route, members) in [
        (RouteKind::Pooling, r#""input":[1.5]"#),
        (RouteKind::Embeddings, r#""input":[null]"#),
        (RouteKind::Embeddings, r#""input":["a",1]"#),
        (RouteKind::Score, r#""queries":"a","documents":[null]"#),
        (RouteKind::Rerank, r#""query":"a","documents":[1]"#),
    ] {
        let got = v(route, &kwargs_body(members), &up);
        assert!(matches!(got, Verdict::Invalid(_)), "{members}: {got:?}");
    }
    for (route, members) in [
        (RouteKind::Embeddings, r#""input":[[1,2]]"#),
        (RouteKind::Embeddings, r#""input":[1,2]"#),
        (RouteKind::Embeddings, r#""input":["a","b"]"#),
        (RouteKind::Score, r#""queries":["a"],"documents":["b"]"#),
    ] {
        assert_eq!(v(route, &kwargs_body(members), &up), gate, "{members}");
    }
}

/// A score input's content parts are strict `TypedDict`s down to their objects (seen on
/// the real pooling server): an `image_url` needs a string `url` and a `detail` of its
/// words, a `video_url` a string `url`, a `prompt_cache_breakpoint` the `explicit` mode.
#[test]
fn score_content_parts_are_read_down_to_their_objects() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let query = |part: &str| {
        kwargs_body(&format!(
            r#""query":{{"content":[{part}]}},"documents":["b"]"#
        ))
    };
    for refused in [
        r#"{"type":"image_url","image_url":{}}"#,
        r#"{"type":"image_url","image_url":{"url":1}}"#,
        r#"{"type":"image_url","image_url":{"url":"u","detail":"x"}}"#,
        r#"{"type":"image_url","image_url":{"url":"u","detail":null}}"#,
        r#"{"type":"video_url","video_url":{"url":null}}"#,
        r#"{"type":"text","text":"a","prompt_cache_breakpoint":{"mode":"x"}}"#,
        r#"{"type":"text","text":"a","prompt_cache_breakpoint":{"mode":"explicit","ttl":"1h"}}"#,
    ] {
        let got = v(RouteKind::Rerank, &query(refused), &up);
        assert!(matches!(got, Verdict::Invalid(_)), "{refused}: {got:?}");
    }
    for taken in [
        r#"{"type":"image_url","image_url":{"url":"u","detail":"original","x":1}}"#,
        r#"{"type":"video_url","video_url":{"url":"u"}}"#,
        r#"{"type":"text","text":"a","prompt_cache_breakpoint":{"mode":"explicit","ttl":"30m"}}"#,
    ] {
        assert_eq!(v(RouteKind::Rerank, &query(taken), &up), gate, "{taken}");
    }
}

/// `Literal` fields take exactly their words; constrained (`Annotated`) fields are typed
/// as their inner type, and numbers must lie within their `ge`/`le` bounds.
#[test]
fn literal_and_constrained_fields_are_type_checked() {
    let up = UpstreamFacts::default();
    let chat = chat_body;
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for refused in [
        r#""reasoning_effort":"LOW""#,
        r#""reasoning_effort":"low ""#,
        r#""reasoning_effort":1"#,
        r#""truncation_side":true"#,
        r#""truncate_prompt_tokens":"many""#,
        r#""stop":{"a":1}"#,
        r#""truncate_prompt_tokens":-5"#,
        r#""seed":99999999999999999999"#,
        r#""priority":-9223372036854775809"#,
        r#""routed_experts_prompt_start":-0.5"#,
    ] {
        let got = v(RouteKind::Chat, &chat(refused), &up);
        assert!(
            matches!(got, Verdict::Invalid(Invalid::FieldType { .. })),
            "{refused}: {got:?}"
        );
    }
    for taken in [
        r#""reasoning_effort":"low""#,
        r#""reasoning_effort":"\u006cow""#,
        r#""reasoning_effort":null"#,
        r#""truncate_prompt_tokens":"5""#,
        r#""stop":["a"]"#,
        r#""tool_choice":"none""#,
        r#""truncate_prompt_tokens":-1"#,
        r#""seed":-9223372036854775808"#,
        r#""priority":9223372036854775807"#,
        r#""stream_interval":1.0"#,
    ] {
        assert_eq!(v(RouteKind::Chat, &chat(taken), &up), gate, "{taken}");
    }
    // The batch route rebuilds each conversation as a chat request (nulls dropped).
    let batch = |member: &str| {
        let messages = r#""messages":[[{"role":"user","content":"hi"}]]"#;
        kwargs_body(&format!("{messages},{member}"))
    };
    let got = v(
        RouteKind::ChatBatch,
        &batch(r#""truncate_prompt_tokens":-5"#),
        &up,
    );
    assert!(
        matches!(got, Verdict::Invalid(Invalid::FieldType { .. })),
        "{got:?}"
    );
    let nulled = batch(r#""truncate_prompt_tokens":null"#);
    assert_eq!(v(RouteKind::ChatBatch, &nulled, &up), gate);
    let embed =
        r#"{"model":"m","input":"x","encoding_format":"hex","mm_processor_kwargs":{"a":1}}"#;
    assert!(matches!(
        v(RouteKind::Embeddings, embed, &up),
        Verdict::Invalid(Invalid::FieldType { .. })
    ));
}

/// The logprobs before-validators compare the raw numbers (seen on the real server).
#[test]
fn logprobs_checks_compare_the_raw_numbers() {
    let up = UpstreamFacts::default();
    let chat = chat_body;
    let cmpl = |member: &str| kwargs_body(&format!(r#""prompt":"p",{member}"#));
    let check = |parameter| Verdict::Invalid(Invalid::ModelCheck(parameter));
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (member, expect) in [
        (
            r#""logprobs":true,"top_logprobs":-3"#,
            check("top_logprobs"),
        ),
        (r#""top_logprobs":2"#, check("top_logprobs")),
        (r#""top_logprobs":true"#, check("top_logprobs")),
        (r#""top_logprobs":-Infinity"#, check("top_logprobs")),
        (r#""prompt_logprobs":-2"#, check("prompt_logprobs")),
        (
            r#""prompt_logprobs":1,"stream":"x""#,
            check("prompt_logprobs"),
        ),
        (r#""top_logprobs":0"#, gate.clone()),
        (r#""logprobs":true,"top_logprobs":-1"#, gate.clone()),
        (r#""prompt_logprobs":0,"stream":true"#, gate.clone()),
        (r#""prompt_logprobs":-1"#, gate.clone()),
    ] {
        assert_eq!(v(RouteKind::Chat, &chat(member), &up), expect, "{member}");
    }
    let ids = r#""logprob_token_ids":[1],"logprobs":1,"echo":true"#;
    for (member, expect) in [
        (r#""logprobs":-0.5"#.to_string(), check("logprobs")),
        (
            format!(r#"{ids},"max_tokens":0.0"#),
            check("logprob_token_ids"),
        ),
        (
            format!(r#"{ids},"max_tokens":false"#),
            check("logprob_token_ids"),
        ),
        (r#""logprobs":-1"#.to_string(), gate.clone()),
        (format!(r#"{ids},"max_tokens":1"#), gate.clone()),
    ] {
        assert_eq!(
            v(RouteKind::Completions, &cmpl(&member), &up),
            expect,
            "{member}"
        );
    }
}

/// A bounded number field refuses NaN and the infinities, and reads a numeric string as
/// its number before it bounds it (as pydantic's lax mode does).
#[test]
fn bounds_hold_for_non_finite_numbers_and_numeric_strings() {
    let up = UpstreamFacts::default();
    let responses = |value: &str| {
        let member = format!(r#""frequency_penalty":{value}"#);
        with_kwargs(RouteKind::Responses, r#""input":"hi""#, &member, &up)
    };
    for refused in [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e400",
        r#""3""#,
        r#""nan""#,
        r#""-inf""#,
        r#""2_0""#,
        r#""-2.5""#,
    ] {
        assert!(
            matches!(responses(refused), Verdict::Invalid(_)),
            "{refused}"
        );
    }
    for taken in [
        "2",
        r#""1.5""#,
        r#"" 2 ""#,
        r#""1e0""#,
        "2.0000000000000001",
    ] {
        assert_eq!(
            responses(taken),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{taken}"
        );
    }
    let chat = |member: &str| {
        let base = r#""messages":[{"role":"user","content":"hi"}]"#;
        with_kwargs(RouteKind::Chat, base, member, &up)
    };
    for refused in [
        r#""stream_interval":"0""#,
        r#""stream_interval":"0.0""#,
        r#""stream_interval":" +0 ""#,
        r#""stream_interval":NaN"#,
        r#""truncate_prompt_tokens":"-2""#,
        r#""priority":"9223372036854775808""#,
        r#""seed":"-9223372036854775809""#,
    ] {
        assert!(matches!(chat(refused), Verdict::Invalid(_)), "{refused}");
    }
    for taken in [
        r#""stream_interval":"1""#,
        r#""truncate_prompt_tokens":"-1""#,
        r#""seed":"1_0""#,
    ] {
        assert_eq!(
            chat(taken),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{taken}"
        );
    }
}

/// `structured_outputs` is vLLM's `StructuredOutputsParams` dataclass: an object (or null)
/// whose fields take their types, with exactly one of its six constraints set.
#[test]
fn structured_outputs_are_read_as_the_dataclass_reads_them() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let bodies = [
        (
            RouteKind::Chat,
            r#""messages":[{"role":"user","content":"hi"}]"#,
        ),
        (RouteKind::CompletionsRender, r#""prompt":"hi""#),
        (RouteKind::Responses, r#""input":"hi""#),
    ];
    for (route, base) in bodies {
        let with =
            |so: &str| with_kwargs(route, base, &format!(r#""structured_outputs":{so}"#), &up);
        for taken in [
            "null",
            r#"{"regex":"a"}"#,
            r#"{"json":{}}"#,
            r#"{"json_object":false}"#,
            r#"{"json_object":"yes"}"#,
            r#"{"choice":["a"]}"#,
            r#"{"regex":"a","extra":1,"disable_additional_properties":1}"#,
            r#"{"json_object":1.0}"#,
            r#"{"json_object":1e0}"#,
            r#"{"choice":[]}"#,
            r#"{"choice":[1],"choice":["a"]}"#,
            r#"{"regex":"a","regex":null,"regex":"b"}"#,
        ] {
            assert_eq!(with(taken), gate, "{route:?} {taken}");
        }
        for refused in [
            "{}",
            r#""x""#,
            "[]",
            r#"{"regex":null}"#,
            r#"{"grammar":"x","regex":"y"}"#,
            r#"{"json_object":true,"regex":"a"}"#,
            r#"{"regex":5}"#,
            r#"{"json":[]}"#,
            r#"{"choice":"a"}"#,
            r#"{"json_object":"x"}"#,
            r#"{"regex":"a","disable_any_whitespace":null}"#,
            r#"{"regex":"a","whitespace_pattern":5}"#,
            r#"{"json_object":2}"#,
            r#"{"json_object":0.5}"#,
            r#"{"json_object":"2"}"#,
            r#"{"json_object":true,"disable_any_whitespace":-1}"#,
            r#"{"choice":["a",1]}"#,
            r#"{"choice":[null]}"#,
            r#"{"choice":[["a"]]}"#,
            r#"{"choice":["a"],"choice":[1]}"#,
        ] {
            assert!(
                matches!(with(refused), Verdict::Invalid(_)),
                "{route:?} {refused}"
            );
        }
    }
    // Routes whose models do not declare it leave it to the gate.
    let tokenize =
        r#"{"model":"tiny","prompt":"hi","structured_outputs":{},"mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(v(RouteKind::Tokenize, tokenize, &up), gate);
}

/// A `response_format` of the words `ResponseFormat` takes has its `json_schema` validated
/// as `JsonSchemaResponseFormat`: a string `name` is required, and `description`, `schema`
/// and `strict` take their types. (Each case checked against the render server.)
#[test]
fn a_response_formats_json_schema_is_read_as_its_model_reads_it() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let bodies = [
        (
            RouteKind::ChatRender,
            r#""messages":[{"role":"user","content":"hi"}]"#,
        ),
        (RouteKind::Completions, r#""prompt":"hi""#),
    ];
    for (route, base) in bodies {
        let with = |schema: &str| {
            let member =
                format!(r#""response_format":{{"type":"json_schema","json_schema":{schema}}}"#);
            with_kwargs(route, base, &member, &up)
        };
        for taken in [
            r#"{"name":"x"}"#,
            r#"{"name":"x","schema":null,"strict":"yes","description":null}"#,
            r#"{"name":"x","json_schema":3}"#,
            r#"{},"json_schema":{"name":"x"}"#,
        ] {
            assert_eq!(with(taken), gate, "{route:?} {taken}");
        }
        for refused in [
            "{}",
            r#"{"schema":{}}"#,
            r#"{"name":5}"#,
            r#"{"name":"x","name":null}"#,
            r#"{"name":"x","schema":[]}"#,
            r#"{"name":"x","strict":2}"#,
            r#"{"name":"x","description":3}"#,
            r#"{"name":"x"},"json_schema":{}"#,
        ] {
            assert!(
                matches!(with(refused), Verdict::Invalid(_)),
                "{route:?} {refused}"
            );
        }
        // `text` and `json_object` validate it too; a structural tag takes it as an extra.
        let member =
            |ty: &str| format!(r#""response_format":{{"type":"{ty}","json_schema":{{}}}}"#);
        assert!(matches!(
            with_kwargs(route, base, &member("text"), &up),
            Verdict::Invalid(_)
        ));
        let tag = r#""response_format":{"type":"structural_tag","json_schema":{},"structures":[{"begin":"<a>","schema":{},"end":"</a>"}],"triggers":["<a"]}"#;
        assert_eq!(with_kwargs(route, base, tag, &up), gate);
    }
    // The Responses API has no `response_format`.
    let responses = with_kwargs(
        RouteKind::Responses,
        r#""input":"hi""#,
        r#""response_format":{"type":"json_schema","json_schema":{}}"#,
        &up,
    );
    assert_eq!(responses, gate);
}

/// `logit_bias` is `dict[str, float]`: a value pydantic's lax `float` refuses (null, a
/// list, an object, a string that spells no number, however long) is refused before the
/// gate; as in Python's dict, a key's last value is the one read. (Each case checked
/// against the render server.)
#[test]
fn logit_bias_values_are_floats() {
    let up = UpstreamFacts::default();
    let with = |lb: &str| {
        let member = format!(r#""logit_bias":{lb}"#);
        with_kwargs(RouteKind::Completions, r#""prompt":"hi""#, &member, &up)
    };
    for taken in [
        r#"{"1":1}"#,
        r#"{"1":" 2 "}"#,
        r#"{"1":true}"#,
        r#"{"1":NaN}"#,
        r#"{"1":"1_000"}"#,
        r#"{"1":"                                        1.5"}"#,
        r#"{"1":null,"1":2}"#,
        r#"{"1":null,"\u0031":2}"#,
        r#"{"1":"x","2":3,"1":4}"#,
        "{}",
        "null",
    ] {
        assert_eq!(
            with(taken),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{taken}"
        );
    }
    for refused in [
        r#"{"1":"x"}"#,
        r#"{"1":null}"#,
        r#"{"1":[]}"#,
        r#"{"1":{}}"#,
        r#"{"1":1,"2":"y"}"#,
        r#"{"1":2,"1":null}"#,
        r#"{"1":"1.5                                                                        x"}"#,
    ] {
        assert!(matches!(with(refused), Verdict::Invalid(_)), "{refused}");
    }
}

/// Each case as the real render server answered it.
#[test]
fn a_field_validator_may_take_fewer_values_than_its_type() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let chat = r#""messages":[{"role":"user","content":"x"}]"#;
    // `validate_thinking_token_budget`: only an int as `json.loads` made it, -1 or above.
    for (route, base) in [
        (RouteKind::ChatRender, chat),
        (RouteKind::CompletionsRender, r#""prompt":"x""#),
    ] {
        let budget = |value: &str| {
            with_kwargs(
                route,
                base,
                &format!(r#""thinking_token_budget":{value}"#),
                &up,
            )
        };
        for refused in [
            "\"1\"", "1.0", "0.0", "-0.0", "1e6", "true", "false", "-2", "NaN",
        ] {
            assert!(
                matches!(budget(refused), Verdict::Invalid(Invalid::FieldType { .. })),
                "{refused}"
            );
        }
        for taken in ["-1", "0", "20", "1000000", "null"] {
            assert_eq!(budget(taken), gate, "{taken}");
        }
    }
    // A bool is a bounded int's 0 or 1 (`stream_interval` is at least 1).
    let interval = |value: &str| {
        let member = format!(r#""stream_interval":{value}"#);
        with_kwargs(
            RouteKind::CompletionsRender,
            r#""prompt":"x""#,
            &member,
            &up,
        )
    };
    assert!(matches!(
        interval("false"),
        Verdict::Invalid(Invalid::FieldType { .. })
    ));
    assert_eq!(interval("true"), gate);
}

/// A `dict[str, V]` field refuses an object with a value no `V` takes, the last of
/// duplicate keys counting (Responses `metadata`: `dict[str, str]`; seen on the real
/// render server).
#[test]
fn dict_values_are_read_as_json_loads_leaves_them() {
    let up = UpstreamFacts::default();
    let metadata = |value: &str| {
        let member = format!(r#""metadata":{value}"#);
        with_kwargs(RouteKind::ResponsesRender, r#""input":"x""#, &member, &up)
    };
    for refused in [
        r#"{"a":1}"#,
        r#"{"a":null}"#,
        r#"{"a":["b"]}"#,
        r#"{"a":"b","a":1}"#,
        r#"{"a":1,"b":"b"}"#,
    ] {
        assert!(
            matches!(
                metadata(refused),
                Verdict::Invalid(Invalid::FieldType { .. })
            ),
            "{refused}"
        );
    }
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for taken in [
        r#"{"a":"b"}"#,
        r#"{}"#,
        r#"{"a":"\ud800"}"#,
        r#"{"a":1,"a":"b"}"#,
        r#"{"a":1,"\u0061":"b"}"#,
    ] {
        assert_eq!(metadata(taken), gate, "{taken}");
    }
    // However many keys (the real server, 40 keys): the last of duplicates counts.
    let many: Vec<String> = (0..40).map(|i| format!(r#""k{i}":"v""#)).collect();
    let many = many.join(",");
    for refused in [r#","k0":1"#, r#","k39":1"#] {
        let value = format!("{{{many}{refused}}}");
        let verdict = metadata(&value);
        assert!(
            matches!(verdict, Verdict::Invalid(Invalid::FieldType { .. })),
            "{refused}"
        );
    }
    assert_eq!(metadata(&format!(r#"{{{many},"k0":1,"k0":"v"}}"#)), gate);
}

/// A chat message's `content` may be null only for the assistant, or for a `function`
/// message with a `name` (seen on the real render server, for each role).
#[test]
fn only_the_assistant_and_a_named_function_take_null_content() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let chat = |message: &str| {
        let member = format!(r#""messages":[{message}]"#);
        with_kwargs(RouteKind::ChatRender, r#""n":1"#, &member, &up)
    };
    for refused in [
        r#"{"role":"user","content":null}"#,
        r#"{"role":"system","content":null,"name":"n"}"#,
        r#"{"role":"tool","content":null,"tool_call_id":"c"}"#,
        r#"{"role":"developer","content":null}"#,
        r#"{"role":"function","content":null}"#,
        r#"{"role":"x","content":null}"#,
        r#"{"role":"assistant","role":"user","content":null}"#,
    ] {
        assert!(
            matches!(chat(refused), Verdict::Invalid(Invalid::FieldType { .. })),
            "{refused}"
        );
    }
    for taken in [
        r#"{"role":"assistant","content":null}"#,
        r#"{"role":"\u0061ssistant","content":null}"#,
        r#"{"role":"function","content":null,"name":"f"}"#,
        r#"{"role":"user","content":"hi"}"#,
        r#"{"role":"user"}"#,
    ] {
        assert_eq!(chat(taken), gate, "{taken}");
    }
}

/// `stream_options` is a `StreamOptions`: `include_usage` and `continuous_usage_stats` are
/// `bool | None` (pydantic's lax words and 0/1 taken), the last of each counting; other
/// members are allowed. Declared by the chat and completion requests only. (Checked
/// against the render server.)
#[test]
fn stream_options_members_are_booleans() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let with = |route, so: &str| {
        let member = format!(r#""stream":true,"stream_options":{so}"#);
        with_kwargs(route, r#""prompt":"hi""#, &member, &up)
    };
    for route in [RouteKind::Completions, RouteKind::CompletionsRender] {
        for taken in [
            r#"{"include_usage":true}"#,
            r#"{"include_usage":null,"continuous_usage_stats":"yes"}"#,
            r#"{"continuous_usage_stats":1.0}"#,
            r#"{"include_usage":"x","include_usage":false}"#,
            r#"{"other":[]}"#,
            "{}",
        ] {
            assert_eq!(with(route, taken), gate, "{taken}");
        }
        for refused in [
            r#"{"include_usage":"x"}"#,
            r#"{"continuous_usage_stats":2}"#,
            r#"{"include_usage":[]}"#,
            r#"{"include_usage":true,"include_usage":" true"}"#,
        ] {
            assert!(
                matches!(
                    with(route, refused),
                    Verdict::Invalid(Invalid::FieldType {
                        field: "stream_options",
                        ..
                    })
                ),
                "{refused}"
            );
        }
    }
    // `/tokenize` declares no `stream_options`.
    assert_eq!(with(RouteKind::Tokenize, r#"{"include_usage":"x"}"#), gate);
}

/// `vllm_xargs` is `dict[str, str | int | float | list[str | int | float]]`: a list value
/// holding null, an object or a list is refused. (Checked against the render server.)
#[test]
fn vllm_xargs_list_values_hold_strings_and_numbers() {
    let up = UpstreamFacts::default();
    let with = |xargs: &str| {
        let member = format!(r#""vllm_xargs":{xargs}"#);
        with_kwargs(RouteKind::Completions, r#""prompt":"hi""#, &member, &up)
    };
    for taken in [
        r#"{"a":[1,"s",1.5,true]}"#,
        r#"{"a":[]}"#,
        r#"{"a":[[]],"a":[1]}"#,
    ] {
        assert_eq!(
            with(taken),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{taken}"
        );
    }
    for refused in [
        r#"{"a":[[]]}"#,
        r#"{"a":[null]}"#,
        r#"{"a":[1,{}]}"#,
        r#"{"a":[1],"a":[[1]]}"#,
    ] {
        assert!(
            matches!(with(refused), Verdict::Invalid(Invalid::FieldType { .. })),
            "{refused}"
        );
    }
}

/// `repetition_detection` is vLLM's `RepetitionDetectionParams` dataclass: its three
/// members are lax `int`s (not null), then its `__post_init__` refuses sizes below zero, a
/// minimum size above the maximum, and `min_count` below 2 once the maximum is set.
/// (Checked against the render server.)
#[test]
fn repetition_detection_is_read_as_its_dataclass() {
    let up = UpstreamFacts::default();
    let with = |rd: &str| {
        let member = format!(r#""repetition_detection":{rd}"#);
        with_kwargs(RouteKind::Completions, r#""prompt":"hi""#, &member, &up)
    };
    for taken in [
        "null",
        "{}",
        r#"{"max_pattern_size":"2","min_count":" 3 "}"#,
        r#"{"max_pattern_size":2,"min_pattern_size":2,"min_count":2,"x":[]}"#,
        r#"{"max_pattern_size":0,"min_count":0}"#,
        r#"{"min_count":null,"min_count":5}"#,
    ] {
        assert_eq!(
            with(taken),
            Verdict::Reject(Field::MmProcessorKwargs),
            "{taken}"
        );
    }
    for refused in [
        "[]",
        r#"{"min_count":null}"#,
        r#"{"max_pattern_size":2.5}"#,
        r#"{"max_pattern_size":2,"min_count":1}"#,
        r#"{"max_pattern_size":2.0,"min_count":true}"#,
        r#"{"max_pattern_size":-1}"#,
        r#"{"min_pattern_size":3,"max_pattern_size":2,"min_count":2}"#,
        r#"{"min_count":"x"}"#,
    ] {
        assert!(
            matches!(with(refused), Verdict::Invalid(_)),
            "{refused}: {:?}",
            with(refused)
        );
    }
}
