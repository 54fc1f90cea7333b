//! Verdicts on bodies as vLLM 0.31 judges them: routing and content type here, the
//! request models' reading, their earlier checks and `/invocations` in the submodules.

use super::*;
use crate::inspect::{inspect, RENDER_MAX_DEPTH};

fn v(route: RouteKind, body: &str, up: &UpstreamFacts) -> Verdict {
    verdict(
        route,
        &inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap(),
        up,
    )
}

/// `route`'s verdict on a body of `base`'s members, `member` and a truthy
/// `mm_processor_kwargs`.
fn with_kwargs(route: RouteKind, base: &str, member: &str, up: &UpstreamFacts) -> Verdict {
    let body = format!(r#"{{"model":"tiny",{base},{member},"mm_processor_kwargs":{{"a":1}}}}"#);
    v(route, &body, up)
}

/// An embedding server as its `/openapi.json` shows it: no `/classify`.
fn embed_server() -> UpstreamFacts {
    UpstreamFacts {
        served_routes: Some(vec![
            RouteKind::Embeddings,
            RouteKind::Pooling,
            RouteKind::Score,
            RouteKind::Rerank,
            RouteKind::Invocations,
        ]),
        ..Default::default()
    }
}

mod earlier;
mod invocations;
mod long;
mod messages;
mod names;
mod pooling;
mod pydantic;

/// The nesting the upstream's parser takes (measured on real vLLM 0.31 servers): a render
/// server's 970 containers, `vllm serve`'s 968 (generating or pooling alike).
#[test]
fn the_upstreams_depth_follows_its_routes() {
    use crate::inspect::{RENDER_MAX_DEPTH, SERVE_MAX_DEPTH};
    let with = |routes: Option<Vec<RouteKind>>| UpstreamFacts {
        served_routes: routes,
        ..UpstreamFacts::default()
    };
    assert_eq!(with(None).max_json_depth(), SERVE_MAX_DEPTH);
    let render = vec![
        RouteKind::Tokenize,
        RouteKind::ChatRender,
        RouteKind::CompletionsRender,
        RouteKind::ResponsesRender,
        RouteKind::Invocations,
    ];
    assert_eq!(
        with(Some(render.clone())).max_json_depth(),
        RENDER_MAX_DEPTH
    );
    for full in [RouteKind::Chat, RouteKind::Embeddings, RouteKind::Classify] {
        let mut routes = render.clone();
        routes.push(full);
        assert_eq!(
            with(Some(routes)).max_json_depth(),
            SERVE_MAX_DEPTH,
            "{full:?}"
        );
    }
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

/// A body of model `m` with `members` and a truthy `mm_processor_kwargs` last.
fn kwargs_body(members: &str) -> String {
    format!(r#"{{"model":"m",{members},"mm_processor_kwargs":{{"a":1}}}}"#)
}

/// [`kwargs_body`] of a chat request (no messages) with `member`.
fn chat_body(member: &str) -> String {
    kwargs_body(&format!(r#""messages":[],{member}"#))
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
