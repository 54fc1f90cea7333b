//! Classification: method + path → [`Route`], as vLLM's router (uvicorn + Starlette) sees it.
//!
//! The path is percent-decoded before matching (`/v1/chat/%63ompletions` and
//! `/v1/chat%2Fcompletions` reach the chat handler), the query is ignored, and matching is
//! exact and case-sensitive. Under vLLM's `--root-path` ([`RootPath`]) a path that starts
//! with it is matched without it, and any other path as it is. A path with trailing
//! slashes is not gated: Starlette answers it
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

/// vLLM's `--root-path` (FastAPI's `root_path`), which Starlette takes off the front of a
/// request's path before routing. Empty when the server was started without one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RootPath(Box<[u8]>);

impl RootPath {
    /// The root path vLLM was started with (`""`: none).
    pub fn new(root: &str) -> Self {
        RootPath(root.as_bytes().into())
    }

    /// A root path given by an operator: `""` (none) or one starting with `/` (without it,
    /// it would change nothing in vLLM, so it is taken for a mistake).
    pub fn parse(root: &str) -> Result<Self, String> {
        if root.is_empty() || root.starts_with('/') {
            Ok(RootPath::new(root))
        } else {
            Err(format!(
                "\"{root}\" does not start with \"/\" (vLLM matches it against request paths)"
            ))
        }
    }

    /// The path Starlette routes by (`get_route_path`): a path that is the root path routes
    /// as `""`, one that continues it with `/` without it, and any other as it is.
    pub fn route<'p>(&self, path: &'p [u8]) -> &'p [u8] {
        match path.strip_prefix(&*self.0) {
            Some(rest) if !self.0.is_empty() && (rest.is_empty() || rest[0] == b'/') => rest,
            _ => path,
        }
    }

    /// The path vLLM's `--api-key` check looks at: the root path taken off the front as a
    /// plain prefix (`str.removeprefix`), whatever follows it.
    pub fn strip<'p>(&self, path: &'p [u8]) -> &'p [u8] {
        path.strip_prefix(&*self.0).unwrap_or(path)
    }
}

/// The percent-decoded path of a request target, its query left out.
pub fn decoded_path(path_and_query: &str) -> std::borrow::Cow<'_, [u8]> {
    let path = path_and_query.split('?').next().unwrap_or("");
    if path.contains('%') {
        percent_encoding::percent_decode_str(path).into()
    } else {
        path.as_bytes().into()
    }
}

/// Classifies a request by method and path (the path may carry a query; it is ignored), as
/// a server started with `root` routes it.
pub fn classify(method: &Method, path_and_query: &str, root: &RootPath) -> Route {
    if method != Method::POST {
        return Route::Ungated;
    }
    let path = decoded_path(path_and_query);
    RouteKind::from_path(root.route(&path)).map_or(Route::Ungated, Route::Gated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(p: &str) -> Route {
        classify(&Method::POST, p, &RootPath::default())
    }

    fn under(root: &str, p: &str) -> Route {
        classify(&Method::POST, p, &RootPath::new(root))
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
            classify(&Method::PUT, "/v1/chat/completions", &RootPath::default()),
            Route::Ungated
        );
    }

    #[test]
    fn under_a_root_path_as_starlette_routes() {
        let chat = Route::Gated(RouteKind::Chat);
        // Checked against a render server started with `--root-path /api`.
        assert_eq!(under("/api", "/api/v1/chat/completions"), chat);
        assert_eq!(under("/api", "/v1/chat/completions"), chat);
        assert_eq!(under("/api", "/%61pi/v1/chat/completions?x"), chat);
        assert_eq!(
            under("/api", "/api/tokenize"),
            Route::Gated(RouteKind::Tokenize)
        );
        for p in [
            "/api",
            "/api/",
            "/api//v1/chat/completions",
            "/apix/v1/chat/completions",
            "/api/api/v1/chat/completions",
            "/API/v1/chat/completions",
            "/api/v1/chat/completions/",
        ] {
            assert_eq!(under("/api", p), Route::Ungated, "{p}");
        }
        // `get_route_path`: a root path ending in `/` only strips where another `/` follows.
        assert_eq!(under("/api/", "/api/v1/chat/completions"), Route::Ungated);
        assert_eq!(under("/api/", "/api//v1/chat/completions"), chat);
        assert_eq!(under("/", "//v1/chat/completions"), chat);
    }

    #[test]
    fn the_key_check_takes_the_root_path_off_as_a_plain_prefix() {
        let root = RootPath::new("/api");
        assert_eq!(root.strip(b"/api/v1/models"), b"/v1/models");
        assert_eq!(root.strip(b"/apiv1/models"), b"v1/models");
        assert_eq!(root.strip(b"/v1/models"), b"/v1/models");
        assert_eq!(RootPath::new("/").strip(b"/v1/models"), b"v1/models");
        assert_eq!(RootPath::default().strip(b"/v1/models"), b"/v1/models");
    }

    #[test]
    fn names_round_trip() {
        for r in RouteKind::ALL {
            assert_eq!(RouteKind::from_name(r.name()), Some(r));
        }
    }
}
