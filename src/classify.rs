//! Classification: method + path → [`Route`], as vLLM's router (uvicorn + Starlette) sees it.
//!
//! The path is percent-decoded before matching (`/v1/chat/%63ompletions` and
//! `/v1/chat%2Fcompletions` reach the chat handler), the query is ignored, and matching is
//! exact and case-sensitive. A path with trailing slashes is not gated: Starlette answers it
//! with a 307 redirect to the slash-less path without running the handler (checked against
//! the real server), and the redirected request is gated when it comes back. Anything that
//! is not a POST to a gated path passes through ungated.

use http::Method;

/// A gated vLLM route: every one of them runs `validate_request_mm_kwargs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteKind {
    /// `/v1/chat/completions`
    Chat,
    /// `/v1/chat/completions/batch`
    ChatBatch,
    /// `/v1/completions`
    Completions,
    /// `/v1/responses`
    Responses,
    /// `/tokenize`
    Tokenize,
    /// `/v1/embeddings`
    Embeddings,
    /// `/pooling`
    Pooling,
    /// `/score`, `/v1/score`
    Score,
    /// `/rerank`, `/v1/rerank`, `/v2/rerank`
    Rerank,
    /// `/classify`
    Classify,
    /// `/v1/chat/completions/render`
    ChatRender,
    /// `/v1/completions/render`
    CompletionsRender,
    /// `/v1/responses/render`
    ResponsesRender,
    /// `/invocations` (SageMaker): dispatched by the body's shape.
    Invocations,
}

impl RouteKind {
    /// Every gated route kind.
    pub const ALL: [RouteKind; 14] = [
        RouteKind::Chat,
        RouteKind::ChatBatch,
        RouteKind::Completions,
        RouteKind::Responses,
        RouteKind::Tokenize,
        RouteKind::Embeddings,
        RouteKind::Pooling,
        RouteKind::Score,
        RouteKind::Rerank,
        RouteKind::Classify,
        RouteKind::ChatRender,
        RouteKind::CompletionsRender,
        RouteKind::ResponsesRender,
        RouteKind::Invocations,
    ];

    /// The name used in policies, metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::Chat => "chat",
            RouteKind::ChatBatch => "chat_batch",
            RouteKind::Completions => "completions",
            RouteKind::Responses => "responses",
            RouteKind::Tokenize => "tokenize",
            RouteKind::Embeddings => "embeddings",
            RouteKind::Pooling => "pooling",
            RouteKind::Score => "score",
            RouteKind::Rerank => "rerank",
            RouteKind::Classify => "classify",
            RouteKind::ChatRender => "chat_render",
            RouteKind::CompletionsRender => "completions_render",
            RouteKind::ResponsesRender => "responses_render",
            RouteKind::Invocations => "invocations",
        }
    }

    /// Parses a policy route name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    fn from_path(path: &[u8]) -> Option<Self> {
        Some(match path {
            b"/v1/chat/completions" => RouteKind::Chat,
            b"/v1/chat/completions/batch" => RouteKind::ChatBatch,
            b"/v1/completions" => RouteKind::Completions,
            b"/v1/responses" => RouteKind::Responses,
            b"/tokenize" => RouteKind::Tokenize,
            b"/v1/embeddings" => RouteKind::Embeddings,
            b"/pooling" => RouteKind::Pooling,
            b"/score" | b"/v1/score" => RouteKind::Score,
            b"/rerank" | b"/v1/rerank" | b"/v2/rerank" => RouteKind::Rerank,
            b"/classify" => RouteKind::Classify,
            b"/v1/chat/completions/render" => RouteKind::ChatRender,
            b"/v1/completions/render" => RouteKind::CompletionsRender,
            b"/v1/responses/render" => RouteKind::ResponsesRender,
            b"/invocations" => RouteKind::Invocations,
            _ => return None,
        })
    }
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A POST to a gated route: the body is inspected.
    Gated(RouteKind),
    /// Anything else: forwarded and streamed untouched.
    Ungated,
}

/// Classifies a request by method and path (the path may carry a query; it is ignored).
pub fn classify(method: &Method, path_and_query: &str) -> Route {
    if method != Method::POST {
        return Route::Ungated;
    }
    let path = path_and_query.split('?').next().unwrap_or("");
    let kind = if path.contains('%') {
        let decoded: std::borrow::Cow<'_, [u8]> = percent_encoding::percent_decode_str(path).into();
        RouteKind::from_path(&decoded)
    } else {
        RouteKind::from_path(path.as_bytes())
    };
    kind.map_or(Route::Ungated, Route::Gated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(p: &str) -> Route {
        classify(&Method::POST, p)
    }

    #[test]
    fn routes_as_vllm_routes() {
        assert_eq!(post("/v1/chat/completions"), Route::Gated(RouteKind::Chat));
        assert_eq!(
            post("/v1/chat/%63ompletions"),
            Route::Gated(RouteKind::Chat)
        );
        assert_eq!(
            post("/v1/chat%2Fcompletions"),
            Route::Gated(RouteKind::Chat)
        );
        assert_eq!(
            post("/%761/chat/completions?x=1"),
            Route::Gated(RouteKind::Chat)
        );
        assert_eq!(post("/v2/rerank"), Route::Gated(RouteKind::Rerank));
        assert_eq!(post("/invocations"), Route::Gated(RouteKind::Invocations));
    }

    #[test]
    fn other_paths_and_methods_pass_through() {
        for p in [
            "/V1/chat/completions",
            "//v1/chat/completions",
            "/v1/chat/./completions",
            "/v1/messages",
            "/v2/embed",
            "/v1/chat/completions;x",
            // Redirected (307) by Starlette, gated when the client follows the redirect.
            "/v1/chat/completions/",
            "/v1/chat/completions//?a=1",
            "/v1/chat/completions%2F",
            "/tokenize/",
            "/",
        ] {
            assert_eq!(post(p), Route::Ungated, "{p}");
        }
        assert_eq!(
            classify(&Method::PUT, "/v1/chat/completions"),
            Route::Ungated
        );
    }

    #[test]
    fn names_round_trip() {
        for r in RouteKind::ALL {
            assert_eq!(RouteKind::from_name(r.name()), Some(r));
        }
    }
}
