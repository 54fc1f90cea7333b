use super::*;
use crate::inspect::{inspect, DEFAULT_MAX_DEPTH};

fn v(route: RouteKind, body: &str, up: &UpstreamFacts) -> Verdict {
    verdict(
        route,
        &inspect(body.as_bytes(), DEFAULT_MAX_DEPTH).unwrap(),
        up,
    )
}

/// `route`'s verdict on a body of `base`'s members, `member` and a truthy
/// `mm_processor_kwargs`.
fn with_kwargs(route: RouteKind, base: &str, member: &str, up: &UpstreamFacts) -> Verdict {
    let body = format!(r#"{{"model":"tiny",{base},{member},"mm_processor_kwargs":{{"a":1}}}}"#);
    v(route, &body, up)
}

/// FastAPI routes before it reads anything: a route the upstream does not serve is its
/// 404 whatever the content type or body (seen on a real embedding server's /classify).
#[test]
fn a_route_not_served_comes_before_the_content_type_and_the_body() {
    let up = UpstreamFacts {
        served_routes: Some(vec![RouteKind::Embeddings]),
        ..UpstreamFacts::default()
    };
    let body = br#"{"mm_processor_kwargs":{"a":1}}"#;
    for ct in [
        None,
        Some(&b"text/plain"[..]),
        Some(&b"application/json"[..]),
    ] {
        let (v, _) = judge(RouteKind::Classify, Head::content_type(ct), body, 970, &up);
        assert_eq!(v, Verdict::Invalid(Invalid::RouteNotServed), "{ct:?}");
        let (v, _) = judge(RouteKind::Classify, Head::content_type(ct), b"{", 970, &up);
        assert_eq!(v, Verdict::Invalid(Invalid::RouteNotServed), "{ct:?}");
    }
    let (v, _) = judge(RouteKind::Embeddings, Head::default(), body, 970, &up);
    assert_eq!(v, Verdict::Invalid(Invalid::ContentType));
}

#[test]
fn content_type_is_exactly_application_json() {
    for ok in [
        "application/json",
        "Application/JSON",
        "application/json; charset=latin-1",
        "application/json;",
    ] {
        assert!(json_content_type(Some(ok.as_bytes())), "{ok}");
    }
    for bad in [
        "text/plain",
        "application/x-json",
        "application/vnd.api+json",
        "application/json ; x",
        "application/jsonx",
    ] {
        assert!(!json_content_type(Some(bad.as_bytes())), "{bad}");
    }
    assert!(!json_content_type(None));
}

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

/// A body of model `m` with `members` and a truthy `mm_processor_kwargs` last.
fn kwargs_body(members: &str) -> String {
    format!(r#"{{"model":"m",{members},"mm_processor_kwargs":{{"a":1}}}}"#)
}

/// [`kwargs_body`] of a chat request (no messages) with `member`.
fn chat_body(member: &str) -> String {
    kwargs_body(&format!(r#""messages":[],{member}"#))
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

/// The request models' own checks of `cache_salt`, `tools`, `tool_choice` and
/// `background` refuse before the gate (seen on the real render server, without a tool
/// parser).
#[test]
fn salt_tool_and_background_checks_run_before_the_gate() {
    let up = UpstreamFacts::default();
    let message = r#"{"role":"user","content":"x"}"#;
    let chat = |member: &str| kwargs_body(&format!(r#""messages":[{message}],{member}"#));
    let responses = |member: &str| kwargs_body(&format!(r#""input":"x",{member}"#));
    let tool = r#"{"type":"function","function":{"name":"f"}}"#;
    let (long, longer) = (r"\u00e9".repeat(128), "x".repeat(129));
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (route, body) in [
        (RouteKind::ChatRender, chat(r#""cache_salt":"""#)),
        (RouteKind::ChatRender, chat(r#""cache_salt":"a/b""#)),
        (RouteKind::ChatRender, chat(r#""cache_salt":"a\u0000""#)),
        (RouteKind::ChatRender, chat(r#""cache_salt":1"#)),
        (
            RouteKind::ChatRender,
            chat(&format!(r#""cache_salt":"{longer}""#)),
        ),
        (RouteKind::ChatRender, chat(r#""cache_salt":"\ud800""#)),
        (
            RouteKind::Embeddings,
            kwargs_body(r#""input":"x","cache_salt":"a@b""#),
        ),
        (RouteKind::ChatRender, chat(r#""tools":[]"#)),
        (RouteKind::ChatRender, chat(r#""tool_choice":"auto""#)),
        (
            RouteKind::ChatRender,
            chat(&format!(r#""tools":[{tool}],"tool_choice":"foo""#)),
        ),
        (
            RouteKind::ChatRender,
            chat(&format!(r#""tools":[{tool}],"tool_choice":1"#)),
        ),
        (RouteKind::ChatRender, chat(&format!(r#""tools":[{tool}]"#))),
        (
            RouteKind::ResponsesRender,
            responses(r#""tool_choice":"required""#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""tools":[],"tool_choice":{"name":"f","type":"function"}"#),
        ),
        (
            RouteKind::ResponsesRender,
            kwargs_body(r#""input":{"a":1}"#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""background":true,"store":false"#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""background":"x","store":null"#),
        ),
    ] {
        let got = v(route, &body, &up);
        assert!(matches!(got, Verdict::Invalid(_)), "{body}: {got:?}");
    }
    for (route, body) in [
        (
            RouteKind::ChatRender,
            chat(&format!(r#""cache_salt":"{long}""#)),
        ),
        (RouteKind::ChatRender, chat(r#""cache_salt":null"#)),
        (RouteKind::ChatRender, chat(r#""tool_choice":"none""#)),
        (
            RouteKind::ChatRender,
            chat(r#""tool_choice":null,"tools":null"#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""tool_choice":"auto""#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""tool_choice":"none""#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""background":true"#),
        ),
        (
            RouteKind::ResponsesRender,
            responses(r#""background":false,"store":false"#),
        ),
        // `list({})` is `[]`.
        (RouteKind::ResponsesRender, kwargs_body(r#""input":{}"#)),
        // The batch route's `tool_choice` stays `"none"`, and no renderer checks it.
        (
            RouteKind::ChatBatch,
            kwargs_body(&format!(r#""messages":[[{message}]],"tools":[{tool}]"#)),
        ),
    ] {
        assert_eq!(v(route, &body, &up), gate, "{body}");
    }
}

/// The completion handler's checks before the gate, in its order (seen on the real
/// render and serve servers).
#[test]
fn responses_input_items_the_renderer_cannot_take_are_refused_before_the_gate() {
    // Each checked against the real server, render and serve routes alike.
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (item, taken) in [
        (r#"{"role":"user","content":"x"}"#, true),
        (r#"{"role":"user","id":"r"}"#, true),
        (r#"{"type":"compaction_trigger","role":"user"}"#, true),
        (r#"{"type":"function_call_output","output":"x"}"#, true),
        (r#"{"type":"reasoning","summary":[]}"#, true),
        (
            r#"{"type":"reasoning","summary":[],"encrypted_content":""}"#,
            true,
        ),
        (
            r#"{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}"#,
            true,
        ),
        (r#"{"id":"r"}"#, false),
        (r#"{"type":null,"id":"r"}"#, false),
        (r#"{"type":"item_reference","id":"r"}"#, false),
        (r#"{"type":"compaction_trigger"}"#, false),
        (r#"{"type":"configuration_update"}"#, false),
        (r#"{"type":"reasoning","summary":{}}"#, false),
        (
            r#"{"type":"reasoning","summary":[],"encrypted_content":"x"}"#,
            false,
        ),
        (
            r#"{"type":"reasoning","summary":[],"encrypted_content":"x","role":"user"}"#,
            false,
        ),
        // An empty assistant answer: vLLM fails on it (500), before the gate.
        (
            r#"{"type":"message","role":"assistant","content":[]}"#,
            false,
        ),
        (r#"{"role":"assistant","content":[]}"#, true),
        (
            r#"{"type":"message","role":"assistant","content":[],"status":"x"}"#,
            true,
        ),
    ] {
        let body = kwargs_body(&format!(r#""input":[{item}]"#));
        for route in [RouteKind::Responses, RouteKind::ResponsesRender] {
            let want = if taken {
                gate.clone()
            } else {
                Verdict::Invalid(Invalid::InputItem)
            };
            assert_eq!(v(route, &body, &up), want, "{body}");
        }
        // Harmony models render items their own way, and never reach the gate.
        let harmony = UpstreamFacts {
            harmony: true,
            ..UpstreamFacts::default()
        };
        assert_eq!(v(RouteKind::Responses, &body, &harmony), Verdict::Accept);
    }
}

#[test]
fn a_stored_background_response_needs_the_store_on_the_generating_route() {
    // Each checked against the real server (`vllm serve`, no response store).
    let up = UpstreamFacts::default();
    let store = UpstreamFacts {
        responses_store: true,
        ..UpstreamFacts::default()
    };
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (members, stored) in [
        (r#""background":true"#, true),
        (r#""background":true,"store":true"#, true),
        (r#""background":"yes","store":1"#, true),
        (r#""background":false"#, false),
        (r#""background":null"#, false),
    ] {
        let body = kwargs_body(&format!(r#""input":"x",{members}"#));
        let want = if stored {
            Verdict::Invalid(Invalid::BackgroundStore)
        } else {
            gate.clone()
        };
        assert_eq!(v(RouteKind::Responses, &body, &up), want, "{members}");
        assert_eq!(v(RouteKind::Responses, &body, &store), gate, "{members}");
        assert_eq!(v(RouteKind::ResponsesRender, &body, &up), gate, "{members}");
    }
}

#[test]
fn the_batch_routes_rebuilt_requests_are_checked_as_chat_requests() {
    // Each checked against the real server: the batch request's fields as validated,
    // defaults included (`add_generation_prompt` is true), its extra members as sent.
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let check = |parameter| Verdict::Invalid(Invalid::ModelCheck(parameter));
    for (members, want) in [
        (
            r#""continue_final_message":true"#,
            check("continue_final_message"),
        ),
        (
            r#""continue_final_message":"yes""#,
            check("continue_final_message"),
        ),
        (
            r#""continue_final_message":1,"add_generation_prompt":"on""#,
            check("continue_final_message"),
        ),
        (
            r#""continue_final_message":true,"add_generation_prompt":false"#,
            gate.clone(),
        ),
        (
            r#""continue_final_message":"false","add_generation_prompt":true"#,
            gate.clone(),
        ),
        (r#""top_logprobs":2"#, check("top_logprobs")),
        (r#""top_logprobs":-1"#, check("top_logprobs")),
        (r#""top_logprobs":true"#, check("top_logprobs")),
        (
            r#""top_logprobs":-2,"logprobs":true"#,
            check("top_logprobs"),
        ),
        (r#""top_logprobs":"2""#, check("top_logprobs")),
        (r#""top_logprobs":" -1 ""#, check("top_logprobs")),
        (r#""top_logprobs":"1_0","logprobs":true"#, gate.clone()),
        (r#""top_logprobs":2,"logprobs":true"#, gate.clone()),
        (r#""top_logprobs":0"#, gate.clone()),
        (r#""prompt_logprobs":"1""#, check("prompt_logprobs")),
        (r#""prompt_logprobs":1"#, gate.clone()),
        (r#""tools":[]"#, check("tools")),
        (
            r#""stream_options":{"include_usage":true}"#,
            check("stream_options"),
        ),
        (r#""stream":true"#, gate.clone()),
        // check_batch_mode's own: `n` must equal 1 (as Python compares).
        (r#""n":2"#, check("n")),
        (r#""n":"1""#, check("n")),
        (r#""n":1.0"#, gate.clone()),
        (r#""n":true"#, gate.clone()),
        (r#""n":null"#, gate.clone()),
    ] {
        let messages = r#""messages":[[{"role":"user","content":"x"}]]"#;
        let body = kwargs_body(&format!("{messages},{members}"));
        assert_eq!(v(RouteKind::ChatBatch, &body, &up), want, "{members}");
    }
}

#[test]
fn completion_checks_run_before_the_gate() {
    let mut up = UpstreamFacts::default();
    let with = kwargs_body;
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let render = RouteKind::CompletionsRender;
    for (members, expect) in [
        (r#""prompt":"p","suffix":"s""#, Invalid::Suffix),
        (r#""prompt":["a","b"],"suffix":"""#, Invalid::Suffix),
        (r#""prompt":[1,2],"suffix":"s""#, Invalid::Suffix),
        (r#""prompt":"p","suffix":"s","echo":"yes""#, Invalid::Suffix),
        (
            r#""prompt":"p","suffix":"s","truncate_prompt_tokens":3"#,
            Invalid::Suffix,
        ),
        (
            r#""prompt":"p","prompt_embeds":"e","echo":1"#,
            Invalid::PromptEmbeds,
        ),
        (
            r#""prompt":"p","prompt_embeds":"e","prompt_logprobs":1"#,
            Invalid::PromptEmbeds,
        ),
    ] {
        assert_eq!(
            v(render, &with(members), &up),
            Verdict::Invalid(expect),
            "{members}"
        );
    }
    for members in [
        r#""prompt":[],"suffix":"s""#,
        r#""prompt":"p","suffix":null,"echo":true"#,
        r#""prompt":"p","prompt_embeds":null,"prompt_logprobs":1"#,
        r#""prompt":[1,"2"]"#,
        r#""prompt":"p","stream":true,"use_beam_search":true"#,
    ] {
        assert_eq!(v(render, &with(members), &up), gate, "{members}");
    }
    // Only the serving handler refuses a streamed beam search, before the model check.
    let beam = with(r#""model":"nope","prompt":"p","stream":"on","use_beam_search":1"#);
    up.served_models = Some(vec!["m".into()]);
    assert_eq!(
        v(RouteKind::Completions, &beam, &up),
        Verdict::Invalid(Invalid::StreamBeamSearch)
    );
    // `bytes` must encode as UTF-8: a lone surrogate cannot.
    let embeds = with(r#""prompt":"p","prompt_embeds":"\ud800""#);
    assert!(matches!(
        v(render, &embeds, &up),
        Verdict::Invalid(Invalid::FieldType { .. })
    ));
    // A list prompt of mixed kinds is a pydantic error.
    let mixed = with(r#""prompt":["a",1]"#);
    assert!(matches!(
        v(render, &mixed, &up),
        Verdict::Invalid(Invalid::FieldType {
            field: "prompt",
            ..
        })
    ));
    // A model that renders fill-in-the-middle takes a suffix with a text prompt.
    up.fim_suffix = true;
    assert_eq!(v(render, &with(r#""prompt":"p","suffix":"s""#), &up), gate);
    let tokens = with(r#""prompt":[1],"suffix":"s""#);
    assert_eq!(v(render, &tokens, &up), Verdict::Invalid(Invalid::Suffix));
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

#[test]
fn earlier_checks_win_on_generate_routes_not_on_pooling() {
    let up = UpstreamFacts {
        served_models: Some(vec!["tiny".into()]),
        ..Default::default()
    };
    let body = r#"{"model":"nope","messages":[],"mm_processor_kwargs":{"a":1}}"#;
    assert!(matches!(
        v(RouteKind::Chat, body, &up),
        Verdict::Invalid(Invalid::UnknownModel(_))
    ));
    let body = r#"{"model":"nope","input":"x","mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(
        v(RouteKind::Pooling, body, &up),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
    let body =
        r#"{"model":"tiny","messages":[],"chat_template":"t","mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(
        v(RouteKind::Chat, body, &up),
        Verdict::Invalid(Invalid::ChatTemplate)
    );
    let body = r#"{"messages":[],"use_beam_search":true,"mm_processor_kwargs":{"a":1}}"#;
    assert_eq!(
        v(RouteKind::ChatRender, body, &up),
        Verdict::Invalid(Invalid::BeamSearchRender)
    );
    assert_eq!(
        v(RouteKind::Chat, body, &up),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
}

/// `/invocations` tries only the request types of the handlers the server has: on a pooling
/// server a chat-shaped body is an embedding request (whose model neither checks
/// `tool_choice` nor types `tools`), so its kwargs meet the gate.
#[test]
fn invocations_dispatch_to_the_types_the_server_has() {
    let body = r#"{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","fn":{}}],"tool_choice":"auto","mm_processor_kwargs":{"a":1}}"#;
    let generating = UpstreamFacts {
        served_routes: Some(vec![
            RouteKind::Chat,
            RouteKind::Completions,
            RouteKind::Invocations,
        ]),
        ..Default::default()
    };
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
    let pooling = UpstreamFacts {
        served_routes: Some(vec![
            RouteKind::Embeddings,
            RouteKind::Pooling,
            RouteKind::Score,
            RouteKind::Rerank,
            RouteKind::Invocations,
        ]),
        ..Default::default()
    };
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
        served_routes: Some(vec![
            RouteKind::Chat,
            RouteKind::Completions,
            RouteKind::Invocations,
        ]),
        ..Default::default()
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

/// `VLLM_MAX_COMPLETION_PROMPTS` (1024 unless the policy names the server's): a completion
/// listing more prompts is refused before the gate, unless its first prompt is a token id
/// (vLLM's `is_list_of` looks at the first element only); so is a longer `prompt_embeds`.
#[test]
fn completions_list_at_most_the_servers_prompts() {
    let body = |prompt: &str| {
        format!(r#"{{"model":"tiny","prompt":{prompt},"mm_processor_kwargs":{{"a":1}}}}"#)
    };
    let list = |first: &str, n: usize| format!("[{first}{}]", r#","a""#.repeat(n - 1));
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let prompts = Verdict::Invalid(Invalid::ModelCheck("prompt"));
    for route in [RouteKind::Completions, RouteKind::CompletionsRender] {
        assert_eq!(v(route, &body(&list(r#""a""#, 1024)), &up), gate);
        assert_eq!(v(route, &body(&list(r#""a""#, 1025)), &up), prompts);
    }
    // The first element decides whether it is a token list.
    for first in ["7", "true"] {
        let mixed = body(&list(first, 1025));
        assert!(
            !matches!(
                v(RouteKind::Completions, &mixed, &up),
                Verdict::Invalid(Invalid::ModelCheck(_))
            ),
            "{first}"
        );
    }
    assert_eq!(
        v(RouteKind::Completions, &body(&list("7.0", 1025)), &up),
        prompts
    );
    let tokens = format!("[{}]", ["1"; 2000].join(","));
    assert_eq!(v(RouteKind::Completions, &body(&tokens), &up), gate);
    let embeds = format!(
        r#"{{"model":"tiny","prompt_embeds":[{}],"mm_processor_kwargs":{{"a":1}}}}"#,
        [r#""e""#; 1025].join(",")
    );
    assert_eq!(
        v(RouteKind::Completions, &embeds, &up),
        Verdict::Invalid(Invalid::ModelCheck("prompt_embeds"))
    );
    // The server's own setting, from the policy.
    let raised = UpstreamFacts {
        max_completion_prompts: Some(4096),
        ..Default::default()
    };
    assert_eq!(
        v(
            RouteKind::Completions,
            &body(&list(r#""a""#, 1025)),
            &raised
        ),
        gate
    );
}

/// With a Mistral tokenizer vLLM's chat renderer runs `validate_request_params` instead of
/// the tool-parser check: `tool_choice` reaches the gate without a parser, and any
/// `chat_template` or `chat_template_kwargs` (even `{}`) is refused first.
#[test]
fn a_mistral_tokenizer_trades_the_tool_parser_check_for_its_own() {
    let chat = |member: &str| {
        format!(
            r#"{{"model":"tiny","messages":[{{"role":"user","content":"hi"}}],{member},"mm_processor_kwargs":{{"a":1}}}}"#
        )
    };
    let tools =
        chat(r#""tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto""#);
    let kwargs = chat(r#""chat_template_kwargs":{}"#);
    let plain = UpstreamFacts::default();
    let mistral = UpstreamFacts {
        mistral_tokenizer: true,
        ..Default::default()
    };
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for route in [RouteKind::Chat, RouteKind::ChatRender] {
        assert_eq!(
            v(route, &tools, &plain),
            Verdict::Invalid(Invalid::ToolChoice)
        );
        assert_eq!(v(route, &tools, &mistral), gate);
        assert_eq!(v(route, &kwargs, &plain), gate);
        assert_eq!(
            v(route, &kwargs, &mistral),
            Verdict::Invalid(Invalid::MistralTemplate)
        );
        let null = chat(r#""chat_template":null"#);
        assert_eq!(v(route, &null, &mistral), gate);
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

/// Chat's `check_tool_usage` takes an object `tool_choice` only if its `function` is an
/// object whose `name` is a non-empty string that some tool's function has. (Each case
/// checked against a render server with a tool parser.)
#[test]
fn a_named_tool_choice_names_one_of_the_tools() {
    let up = UpstreamFacts {
        tool_call_parser: true,
        ..UpstreamFacts::default()
    };
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let base = r#""messages":[{"role":"user","content":"hi"}]"#;
    let tools =
        r#""tools":[{"type":"function","function":{"name":"f"}},{"function":{"name":"g\u00e9"}}]"#;
    let with = |choice: &str| {
        let member = format!(r#"{tools},"tool_choice":{choice}"#);
        with_kwargs(RouteKind::ChatRender, base, &member, &up)
    };
    for taken in [
        r#"{"type":"function","function":{"name":"f"}}"#,
        r#"{"function":{"name":"gé"}}"#,
        r#"{"function":{"name":"gé"},"type":"function"}"#,
        r#"{"function":{"name":"x","name":"f"}}"#,
        r#"{"function":5,"function":{"name":"f"}}"#,
    ] {
        assert_eq!(with(taken), gate, "{taken}");
    }
    for refused in [
        r#"{"type":"function","function":{"name":"h"}}"#,
        r#"{"function":{"name":""}}"#,
        r#"{"function":{"name":5}}"#,
        r#"{"function":{"name":"f","name":null}}"#,
        r#"{"function":{}}"#,
        r#"{"function":"f"}"#,
        r#"{"type":"function"}"#,
        r#"{"function":{"name":"f"},"function":null}"#,
        "{}",
    ] {
        assert!(matches!(with(refused), Verdict::Invalid(_)), "{refused}");
    }
    // A later list replaces the tools; a list of no tools, or a tools object, names none.
    for tools in [
        r#""tools":[{"function":{"name":"f"}}],"tools":[{"function":{"name":"g"}}]"#,
        r#""tools":{"f":1}"#,
        r#""tools":"f""#,
    ] {
        let member = format!(r#"{tools},"tool_choice":{{"function":{{"name":"f"}}}}"#);
        let verdict = with_kwargs(RouteKind::ChatRender, base, &member, &up);
        assert!(matches!(verdict, Verdict::Invalid(_)), "{tools}");
    }
}

/// The Responses API's `check_tool_usage` takes a named tool choice (`type` `"function"`)
/// with tools only if its `name` is one of the tools' names, or a namespace's tool's name
/// alone or after the namespace's. (Each case checked against the render server.)
#[test]
fn a_responses_named_tool_choice_names_one_of_the_tools() {
    let up = UpstreamFacts::default();
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    let verdict = |tools: &str, name: &str| {
        let member =
            format!(r#""tools":{tools},"tool_choice":{{"type":"function","name":{name}}}"#);
        with_kwargs(RouteKind::ResponsesRender, r#""input":"hi""#, &member, &up)
    };
    let function = r#"[{"type":"function","name":"f","parameters":{}},{"type":"function","name":"g\u00e9","parameters":{}}]"#;
    let spaced = r#"[{"type":"namespace","name":"ns","description":"d","tools":[{"type":"function","name":"f","parameters":{}}]}]"#;
    for (tools, name) in [
        (function, r#""f""#),
        (function, r#""gé""#),
        (spaced, r#""f""#),
        (spaced, r#""ns__f""#),
    ] {
        assert_eq!(verdict(tools, name), gate, "{tools} {name}");
    }
    for (tools, name) in [
        (function, r#""h""#),
        (function, r#""""#),
        (function, "null"),
        (function, "0"),
        (spaced, r#""ns""#),
        (spaced, r#""ns__g""#),
        (r#"{"f":1}"#, r#""f""#),
    ] {
        let refused = verdict(tools, name);
        assert!(matches!(refused, Verdict::Invalid(_)), "{tools} {name}");
    }
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
