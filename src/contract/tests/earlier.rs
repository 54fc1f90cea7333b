//! The request models' own checks and the serving code's checks that run before the gate.

use super::*;

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
    // Token ids are `ge=0`, inner lists' too; zero is one; a text list takes "-1".
    for prompt in [
        r#"[-1]"#,
        r#"[[0],[2,-3]]"#,
        r#"[1,"-2"]"#,
        r#"[" -1_0 "]"#,
        r#"[-1e0]"#,
        r#"["\u002d1",0]"#,
    ] {
        let negative = with(&format!(r#""prompt":{prompt}"#));
        let (is_text, verdict) = (prompt == r#"[" -1_0 "]"#, v(render, &negative, &up));
        if is_text {
            assert_eq!(verdict, gate, "{prompt}");
        } else {
            assert!(
                matches!(
                    verdict,
                    Verdict::Invalid(Invalid::FieldType {
                        field: "prompt",
                        ..
                    })
                ),
                "{prompt}: {verdict:?}"
            );
        }
    }
    for prompt in [r#"[0,-0,-0.0,"-0"]"#, r#"[[-0e5],[1]]"#, r#"[true,false]"#] {
        assert_eq!(
            v(render, &with(&format!(r#""prompt":{prompt}"#)), &up),
            gate,
            "{prompt}"
        );
    }
    // A model that renders fill-in-the-middle takes a suffix with a text prompt.
    up.fim_suffix = true;
    assert_eq!(v(render, &with(r#""prompt":"p","suffix":"s""#), &up), gate);
    let tokens = with(r#""prompt":[1],"suffix":"s""#);
    assert_eq!(v(render, &tokens, &up), Verdict::Invalid(Invalid::Suffix));
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

/// Chat's `check_tool_usage` reads each tool's `function` `name` from the raw objects, in
/// order, before pydantic types them: a tool pydantic refuses still names its function (the
/// body then gets pydantic's error, the gated fields' included), and the check raises at the
/// first tool without a `function` object holding a `name`. (Checked against the render
/// server with a tool parser.)
#[test]
fn a_named_tool_choice_is_matched_on_the_raw_tools() {
    let up = UpstreamFacts {
        tool_call_parser: true,
        ..UpstreamFacts::default()
    };
    let base = r#""messages":[{"role":"user","content":"hi"}]"#;
    let with = |tools: &str| {
        let member = format!(r#""tools":{tools},"tool_choice":{{"function":{{"name":"f"}}}}"#);
        with_kwargs(RouteKind::ChatRender, base, &member, &up)
    };
    // Matched, then refused by pydantic: a tool's own types, or a tool after the match.
    for mistyped in [
        r#"[{"type":"function","function":{"name":"f","parameters":1}}]"#,
        r#"[{"type":"function","function":{"name":"f","description":5}}]"#,
        r#"[{"type":"function","function":{"name":"g"}},{"type":"x","function":{"name":"f"}}]"#,
        r#"[{"type":"function","function":{"name":1}},{"type":"function","function":{"name":"f"}}]"#,
        r#"[{"type":"function","function":{"name":"f"}},{"type":"x"}]"#,
    ] {
        let verdict = with(mistyped);
        assert!(
            matches!(
                verdict,
                Verdict::Invalid(Invalid::FieldType { field: "tools", .. })
            ),
            "{mistyped}: {verdict:?}"
        );
    }
    let raises = Verdict::Invalid(Invalid::ModelCheck("tool_choice"));
    for unread in [
        r#"[{"type":"function","function":{"name":"g"}},{"type":"x"},{"type":"function","function":{"name":"f"}}]"#,
        r#"[1,{"type":"function","function":{"name":"f"}}]"#,
        r#"[{"function":"f"}]"#,
        r#"[{"type":"function","function":{}},{"type":"function","function":{"name":"f"}}]"#,
    ] {
        assert_eq!(with(unread), raises, "{unread}");
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

/// The render endpoint is stateless: any `previous_response_id` but null is refused after
/// the model check and before the gate (seen on the real render server); the generating
/// route refuses it only without a response store.
#[test]
fn the_render_endpoint_refuses_a_previous_response() {
    let up = UpstreamFacts::default();
    let previous = Verdict::Invalid(Invalid::PreviousResponse);
    for value in [r#""x""#, r#""""#, r#""\ud800""#] {
        let member = format!(r#""previous_response_id":{value}"#);
        let verdict = with_kwargs(RouteKind::ResponsesRender, r#""input":"x""#, &member, &up);
        assert_eq!(verdict, previous, "{value}");
    }
    let null = r#""previous_response_id":null"#;
    assert_eq!(
        with_kwargs(RouteKind::ResponsesRender, r#""input":"x""#, null, &up),
        Verdict::Reject(Field::MmProcessorKwargs)
    );
    let stored = UpstreamFacts {
        responses_store: true,
        ..Default::default()
    };
    let member = r#""previous_response_id":"x""#;
    assert_eq!(
        with_kwargs(
            RouteKind::ResponsesRender,
            r#""input":"x""#,
            member,
            &stored
        ),
        previous
    );
    let unknown_model = UpstreamFacts {
        served_models: Some(vec!["tiny".into()]),
        ..Default::default()
    };
    let body = r#"{"model":"nope","input":"x","previous_response_id":"x"}"#;
    assert!(matches!(
        v(RouteKind::ResponsesRender, body, &unknown_model),
        Verdict::Invalid(Invalid::UnknownModel(_))
    ));
}

/// `/tokenize` is a union of a completion form and a chat form, both open to extra members:
/// a body with `prompt` and `messages` validates as either, and pydantic's smart mode takes
/// the form that sets more fields (a message's own count; a tie goes to the completion form).
/// The chat form's checks (the chat template's trust) then run before the gate. (Checked
/// against the render server.)
#[test]
fn tokenize_takes_the_form_that_sets_more_fields() {
    let up = UpstreamFacts::default();
    let template = Verdict::Invalid(Invalid::ChatTemplate);
    let gate = Verdict::Reject(Field::MmProcessorKwargs);
    for (members, chat) in [
        // messages and mm_processor_kwargs (chat's) against prompt.
        (r#""prompt":"","messages":[]"#, true),
        (r#""prompt":"x","messages":[{"role":"user"}]"#, true),
        // A message no type takes: the chat form fails.
        (r#""prompt":"x","messages":[{}]"#, false),
        // No prompt form: a prompt that is not text.
        (r#""prompt":1,"messages":[]"#, true),
    ] {
        let body = format!(r#"{{{members},"chat_template":"","mm_processor_kwargs":{{"a":1}}}}"#);
        let want = if chat { &template } else { &gate };
        assert_eq!(&v(RouteKind::Tokenize, &body, &up), want, "{members}");
    }
    // Without the kwargs: messages and the template against prompt, the shared members
    // counting for both.
    for body in [
        r#"{"model":"tiny","prompt":"x","messages":[],"chat_template":"","media_io_kwargs":null}"#,
        r#"{"model":"tiny","add_special_tokens":true,"prompt":"x","messages":[],"chat_template":""}"#,
        r#"{"model":"tiny","prompt":"x","messages":[{"role":"user","content":"hi"}],"chat_template":""}"#,
    ] {
        assert_eq!(v(RouteKind::Tokenize, body, &up), template, "{body}");
    }
}
