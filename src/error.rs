//! Errors the gateway answers itself, and the one place they become HTTP responses.
//!
//! Every body uses vLLM's (OpenAI's) envelope `{"error":{"message","type","param","code"}}`
//! so SDK clients surface it; gate rejections are byte-identical to vLLM 0.31's, and so are
//! the bare `{"error":"Unauthorized"}` of vLLM's own `--api-key` check and its server's
//! plain-text refusal of a badly chunked body ([`INVALID_HTTP_BODY`]).

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::contract::{Invalid, UNAUTHORIZED_BODY};
use crate::inspect::Field;

/// vLLM 0.31's exact gate error body for `mm_processor_kwargs`.
pub const GATE_BODY_MM_PROCESSOR_KWARGS: &str = r#"{"error":{"message":"Per-request mm_processor_kwargs are disabled by default because they can change multimodal preprocessing resource usage. Start the server with --trust-request-mm-kwargs only when clients are trusted. (parameter=mm_processor_kwargs)","type":"BadRequestError","param":"mm_processor_kwargs","code":400}}"#;

/// vLLM 0.31's exact gate error body for `media_io_kwargs`.
pub const GATE_BODY_MEDIA_IO_KWARGS: &str = r#"{"error":{"message":"Per-request media_io_kwargs are disabled by default because they can change multimodal media loading resource usage. Start the server with --trust-request-mm-kwargs only when clients are trusted. (parameter=media_io_kwargs)","type":"BadRequestError","param":"media_io_kwargs","code":400}}"#;

/// vLLM's exact 400 body for a request without a JSON content type (its
/// `validate_json_request`, which runs before anything reads the body). mmgate's check is
/// the same one, so in `strip` and `reject` it answers with vLLM's very words.
pub const CONTENT_TYPE_BODY: &str = r#"{"error":{"message":"1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed","type":"Bad Request","param":null,"code":400}}"#;

/// What vLLM's server (uvicorn) answers, `text/plain` with status 400, to a request it cannot
/// parse as HTTP/1.1: a malformed head or chunked body.
pub const INVALID_HTTP_BODY: &str = "Invalid HTTP request received.";

/// The gate error body vLLM sends for a field.
pub fn gate_body(field: Field) -> &'static str {
    match field {
        Field::MmProcessorKwargs => GATE_BODY_MM_PROCESSOR_KWARGS,
        Field::MediaIoKwargs => GATE_BODY_MEDIA_IO_KWARGS,
    }
}

/// An error the gateway answers at the edge.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// vLLM 0.31 rejects the request at its gate.
    #[error("per-request {} is disabled", .0.name())]
    Gate(Field),
    /// A strip/reject route received a body mmgate cannot inspect.
    #[error("the request body cannot be inspected: {0}")]
    Unclassifiable(Invalid),
    /// The body is larger than the limit.
    #[error("request body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The client's body could not be read (reset, cut short, timeout).
    #[error("the request body could not be read: {0}")]
    BodyRead(String),
    /// The client's chunked body is not HTTP/1.1: answered in vLLM's server's words.
    #[error("the request body's chunked framing is invalid: {0}")]
    MalformedBody(&'static str),
    /// The request head had both `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.3: a
    /// smuggling shape), refused before anything is read or forwarded.
    #[error("the request has both Content-Length and Transfer-Encoding")]
    AmbiguousFraming,
    /// The upstream could not be reached.
    #[error("upstream vLLM at {upstream} is unreachable: {reason}")]
    UpstreamUnreachable {
        /// The upstream authority.
        upstream: String,
        /// What failed.
        reason: String,
    },
    /// The upstream did not answer in time.
    #[error("upstream vLLM at {upstream} sent no response headers within {millis} ms")]
    UpstreamTimeout {
        /// The upstream authority.
        upstream: String,
        /// The configured timeout.
        millis: u128,
    },
    /// The upstream vLLM's own `--api-key` check refuses the request (answered in its name
    /// where mmgate answers at the edge).
    #[error("the upstream's API key check refuses the request")]
    UpstreamUnauthorized,
    /// Missing or unknown credentials, and the policy refuses anonymous clients.
    #[error("authentication failed: {reason}")]
    Unauthorized {
        /// What was wrong (never the key itself).
        reason: &'static str,
    },
    /// The client is over its request rate.
    #[error("client {client} is over its rate of {per_second} requests per second")]
    RateLimited {
        /// The client's policy name.
        client: String,
        /// The configured rate.
        per_second: u32,
        /// Seconds until a request is allowed again.
        retry_after: u64,
    },
    /// The client already has its maximum number of requests in flight.
    #[error("client {client} already has {limit} requests in flight{}", waited(.waited_ms))]
    ClientBusy {
        /// The client's policy name.
        client: String,
        /// Its concurrency limit.
        limit: u32,
        /// How long it waited in the queue, if it did.
        waited_ms: Option<u64>,
        /// Suggested retry delay, seconds.
        retry_after: u64,
    },
    /// The pool is at its concurrency limit and its queue is full or the wait timed out.
    #[error("pool {pool} is saturated ({limit} requests in flight){}", waited(.waited_ms))]
    PoolSaturated {
        /// The pool.
        pool: String,
        /// Its concurrency limit (0: none, the queue is full).
        limit: u32,
        /// How long it waited in the queue, if it did.
        waited_ms: Option<u64>,
        /// Suggested retry delay, seconds.
        retry_after: u64,
    },
    /// A kwarg is not allowed by the pool or is outside its bound.
    #[error("{key} must be {bound} for pool {pool}")]
    ValueBound {
        /// The pool.
        pool: String,
        /// The offending key, as `field.key` (or `media_io_kwargs.modality.key`).
        key: String,
        /// The rule it breaks.
        bound: String,
    },
    /// No member of the pool is healthy.
    #[error("no healthy upstream in pool {pool} (all {members} members fail their /health check)")]
    PoolUnavailable {
        /// The pool.
        pool: String,
        /// How many members it has.
        members: usize,
    },
    /// A request from a client that is not trusted would reach a trusted pool.
    #[error("this client may not use a trusted pool")]
    UntrustedPool,
    /// A `CONNECT` with only an authority (HTTP/2, or HTTP/1 over TLS; mmgate's HTTP/1.1
    /// server refuses that head as vLLM's does).
    #[error("CONNECT tunnels are not opened by this gateway")]
    Tunnel,
    /// The upstream broke the protocol or the connection.
    #[error("upstream vLLM at {upstream} failed: {reason}")]
    UpstreamFailed {
        /// The upstream authority.
        upstream: String,
        /// What failed.
        reason: String,
    },
}

fn waited(ms: &Option<u64>) -> String {
    ms.map(|ms| format!(" after waiting {ms} ms"))
        .unwrap_or_default()
}

#[derive(serde::Serialize)]
struct Envelope<'a> {
    error: Inner<'a>,
}

#[derive(serde::Serialize)]
struct Inner<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: u16,
}

/// Builds an OpenAI-style error body.
pub fn envelope(status: StatusCode, kind: &str, param: Option<&str>, message: &str) -> Bytes {
    let body = Envelope {
        error: Inner {
            message,
            kind,
            param,
            code: status.as_u16(),
        },
    };
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

impl GateError {
    /// The HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            // vLLM's status where mmgate answers in its words (else 400).
            GateError::Unclassifiable(inv) => inv.vllm_status(),
            GateError::Gate(_)
            | GateError::BodyRead(_)
            | GateError::MalformedBody(_)
            | GateError::AmbiguousFraming => StatusCode::BAD_REQUEST,
            GateError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GateError::UpstreamUnreachable { .. } | GateError::UpstreamFailed { .. } => {
                StatusCode::BAD_GATEWAY
            }
            GateError::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            GateError::Unauthorized { .. } | GateError::UpstreamUnauthorized => {
                StatusCode::UNAUTHORIZED
            }
            GateError::RateLimited { .. } | GateError::ClientBusy { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            GateError::PoolSaturated { .. } | GateError::PoolUnavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            GateError::ValueBound { .. } => StatusCode::BAD_REQUEST,
            GateError::UntrustedPool => StatusCode::FORBIDDEN,
            GateError::Tunnel => StatusCode::NOT_IMPLEMENTED,
        }
    }

    /// Why the gateway refused the request (a closed metrics label), if it did.
    pub fn refusal_reason(&self) -> Option<&'static str> {
        Some(match self {
            GateError::Unauthorized { .. } => "auth",
            GateError::RateLimited { .. } => "rate",
            GateError::ClientBusy {
                waited_ms: Some(_), ..
            }
            | GateError::PoolSaturated {
                waited_ms: Some(_), ..
            } => "queue_timeout",
            GateError::ClientBusy { .. } | GateError::PoolSaturated { .. } => "concurrency",
            GateError::ValueBound { .. } => "value_bound",
            GateError::BodyTooLarge { .. } => "body_size",
            GateError::AmbiguousFraming | GateError::MalformedBody(_) => "framing",
            GateError::PoolUnavailable { .. } => "unavailable",
            GateError::UntrustedPool => "untrusted",
            _ => return None,
        })
    }

    /// Seconds the client should wait before retrying (`Retry-After`), for 429 and 503.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            GateError::RateLimited { retry_after, .. }
            | GateError::ClientBusy { retry_after, .. }
            | GateError::PoolSaturated { retry_after, .. } => Some(*retry_after),
            GateError::PoolUnavailable { .. } => Some(5),
            _ => None,
        }
    }

    /// A short, closed label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            GateError::Gate(_) => "gate",
            GateError::Unclassifiable(_) => "unclassifiable",
            GateError::BodyTooLarge { .. } => "body_too_large",
            GateError::BodyRead(_) => "body_read",
            GateError::MalformedBody(_) => "malformed_body",
            GateError::AmbiguousFraming => "ambiguous_framing",
            GateError::UpstreamUnreachable { .. } => "upstream_unreachable",
            GateError::UpstreamTimeout { .. } => "upstream_timeout",
            GateError::UpstreamFailed { .. } => "upstream_failed",
            GateError::Unauthorized { .. } => "unauthorized",
            GateError::UpstreamUnauthorized => "upstream_unauthorized",
            GateError::RateLimited { .. } => "rate_limited",
            GateError::ClientBusy { .. } => "client_busy",
            GateError::PoolSaturated { .. } => "pool_saturated",
            GateError::ValueBound { .. } => "value_bound",
            GateError::PoolUnavailable { .. } => "pool_unavailable",
            GateError::UntrustedPool => "untrusted_pool",
            GateError::Tunnel => "tunnel",
        }
    }

    /// The response body.
    pub fn body(&self) -> Bytes {
        let status = self.status();
        let (kind, message) = match self {
            GateError::Gate(field) => return Bytes::from_static(gate_body(*field).as_bytes()),
            GateError::UpstreamUnauthorized => return Bytes::from_static(UNAUTHORIZED_BODY.as_bytes()),
            // vLLM's server (uvicorn, llhttp) refuses both in these words.
            GateError::MalformedBody(_) | GateError::AmbiguousFraming => {
                return Bytes::from_static(INVALID_HTTP_BODY.as_bytes())
            }
            // vLLM's very words where mmgate knows them, else its own explanation.
            GateError::Unclassifiable(inv) => match inv.vllm_answer() {
                Some(answer) => return answer,
                None if inv.gateway_bound() => (
                    "BadRequestError",
                    format!("mmgate: the request body is past the gateway's inspection bounds ({inv}), so it is refused; vLLM itself may take it. Send fewer members, or ask the operator to set gate.on_unclassifiable = \"forward\"."),
                ),
                None => (
                    "BadRequestError",
                    format!("mmgate: the request body cannot be inspected, so it is refused ({inv}). vLLM refuses this body too; send a JSON object with content-type application/json."),
                ),
            },
            GateError::BodyTooLarge { limit } => (
                "RequestEntityTooLarge",
                format!("mmgate: the request body is larger than the gateway's limit of {limit} bytes; send a smaller request."),
            ),
            GateError::BodyRead(_) => ("BadRequestError", format!("mmgate: {self}; resend the request.")),
            GateError::UpstreamUnreachable { .. } | GateError::UpstreamFailed { .. } => {
                ("BadGateway", format!("mmgate: {self}; retry later."))
            }
            GateError::UpstreamTimeout { .. } => ("GatewayTimeout", format!("mmgate: {self}; retry later.")),
            GateError::Unauthorized { .. } => (
                "AuthenticationError",
                format!("mmgate: {self}. Send your API key as `Authorization: Bearer KEY`; ask the operator for a key if you have none."),
            ),
            GateError::RateLimited { retry_after, .. } => (
                "RateLimitError",
                format!("mmgate: {self}; retry after {retry_after} s, or spread your requests out."),
            ),
            GateError::ClientBusy { retry_after, .. } => (
                "RateLimitError",
                format!("mmgate: {self}; wait for one to finish, then retry after {retry_after} s."),
            ),
            GateError::PoolSaturated { retry_after, .. } => (
                "ServiceUnavailableError",
                format!("mmgate: {self}; retry after {retry_after} s."),
            ),
            GateError::ValueBound { key, .. } => {
                let param = key.split('.').next().unwrap_or("mm_processor_kwargs");
                let message = format!("mmgate: {self}; change or remove {key} and resend (the operator sets the bounds in the policy).");
                return envelope(status, "BadRequestError", Some(param), &message);
            }
            GateError::PoolUnavailable { .. } => (
                "ServiceUnavailableError",
                format!("mmgate: {self}; the operator has been told by the health checks. Retry later."),
            ),
            GateError::Tunnel => (
                "NotImplementedError",
                format!("mmgate: {self}; vLLM serves no CONNECT either."),
            ),
            GateError::UntrustedPool => (
                "PermissionDeniedError",
                format!("mmgate: {self}; send the request without mm_processor_kwargs and media_io_kwargs, or ask the operator to trust your key."),
            ),
        };
        envelope(status, kind, None, &message)
    }

    /// What a client's request body failed with: bad chunked framing from mmgate's own
    /// HTTP/1.1 server ([`MalformedBody`](GateError::MalformedBody)), else a read failure.
    pub fn body_failed(e: axum::Error) -> Self {
        let e = e.into_inner();
        match e.downcast_ref::<crate::http1::BodyError>() {
            Some(crate::http1::BodyError::Chunked(why)) => GateError::MalformedBody(why),
            _ => GateError::BodyRead(e.to_string()),
        }
    }

    /// The full response.
    pub fn to_response<B: From<Bytes>>(&self) -> Response<B> {
        let mut res = Response::new(B::from(self.body()));
        *res.status_mut() = self.status();
        let content_type = match self {
            GateError::MalformedBody(_) | GateError::AmbiguousFraming => {
                "text/plain; charset=utf-8"
            }
            _ => "application/json",
        };
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(secs) = self.retry_after() {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(
            self,
            GateError::AmbiguousFraming | GateError::MalformedBody(_)
        ) {
            // The connection closes after this response (RFC 9112 §6.3): the server sees
            // this field (hyper would close it anyway).
            res.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if matches!(self, GateError::Unauthorized { .. }) {
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_maps_to_a_status_and_an_envelope() {
        let cases = [
            (GateError::Gate(Field::MediaIoKwargs), 400),
            (GateError::Unclassifiable(Invalid::ContentType), 400),
            (GateError::BodyTooLarge { limit: 5 }, 413),
            (GateError::BodyRead("reset".into()), 400),
            (
                GateError::UpstreamUnreachable {
                    upstream: "u".into(),
                    reason: "refused".into(),
                },
                502,
            ),
            (
                GateError::UpstreamTimeout {
                    upstream: "u".into(),
                    millis: 1,
                },
                504,
            ),
            (
                GateError::UpstreamFailed {
                    upstream: "u".into(),
                    reason: "reset".into(),
                },
                502,
            ),
            (GateError::Unauthorized { reason: "no key" }, 401),
            (
                GateError::RateLimited {
                    client: "a".into(),
                    per_second: 1,
                    retry_after: 1,
                },
                429,
            ),
            (
                GateError::ClientBusy {
                    client: "a".into(),
                    limit: 1,
                    waited_ms: Some(5),
                    retry_after: 1,
                },
                429,
            ),
            (
                GateError::PoolSaturated {
                    pool: "p".into(),
                    limit: 1,
                    waited_ms: None,
                    retry_after: 1,
                },
                503,
            ),
            (
                GateError::ValueBound {
                    pool: "p".into(),
                    key: "mm_processor_kwargs.max_pixels".into(),
                    bound: "max_pixels <= 1".into(),
                },
                400,
            ),
            (
                GateError::PoolUnavailable {
                    pool: "p".into(),
                    members: 2,
                },
                503,
            ),
            (GateError::UntrustedPool, 403),
            (GateError::Tunnel, 501),
        ];
        for (e, status) in cases {
            assert_eq!(e.status().as_u16(), status);
            let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
            assert_eq!(v["error"]["code"], status);
            assert!(v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()));
            let res: Response<Bytes> = e.to_response();
            let retry = res.headers().contains_key(header::RETRY_AFTER);
            assert_eq!(retry, matches!(status, 429 | 503), "{e:?}");
        }
    }

    #[test]
    fn bad_framing_is_answered_as_vllms_server_answers_it() {
        let malformed = GateError::MalformedBody("chunk data not followed by CRLF");
        for e in [malformed, GateError::AmbiguousFraming] {
            let res: Response<Bytes> = e.to_response();
            assert_eq!(res.status(), 400);
            assert_eq!(res.body(), INVALID_HTTP_BODY);
            assert_eq!(
                res.headers()[header::CONTENT_TYPE],
                "text/plain; charset=utf-8"
            );
            assert_eq!(res.headers()[header::CONNECTION], "close");
            assert_eq!(e.refusal_reason(), Some("framing"));
        }
        let chunked = axum::Error::new(crate::http1::BodyError::Chunked("invalid chunk size"));
        assert!(matches!(
            GateError::body_failed(chunked),
            GateError::MalformedBody("invalid chunk size")
        ));
        let closed = axum::Error::new(crate::http1::BodyError::Closed);
        assert!(matches!(
            GateError::body_failed(closed),
            GateError::BodyRead(_)
        ));
    }

    #[test]
    fn the_upstream_key_check_answers_vllms_bare_401() {
        let res: Response<Bytes> = GateError::UpstreamUnauthorized.to_response();
        assert_eq!(res.status(), 401);
        assert_eq!(res.body(), r#"{"error":"Unauthorized"}"#);
        assert_eq!(res.headers()[header::CONTENT_TYPE], "application/json");
        assert!(!res.headers().contains_key(header::WWW_AUTHENTICATE));
    }

    #[test]
    fn gate_bodies_are_vllms() {
        let v: serde_json::Value = serde_json::from_str(GATE_BODY_MEDIA_IO_KWARGS).unwrap();
        assert_eq!(v["error"]["param"], "media_io_kwargs");
        assert!(!GATE_BODY_MM_PROCESSOR_KWARGS.ends_with('\n'));
    }

    /// A body past mmgate's own inspection bounds is refused in mmgate's words, which do
    /// not claim that vLLM refuses it too; a body vLLM refuses (in words mmgate does not
    /// know) says so.
    #[test]
    fn an_inspection_bound_is_not_blamed_on_vllm() {
        use crate::inspect::scan::SyntaxError;
        use crate::inspect::InspectError;
        let text = |e: GateError| String::from_utf8(e.body().to_vec()).unwrap();
        let bound = InspectError::Syntax(SyntaxError::TooManyMembers {
            offset: 1,
            limit: 10_000,
            scope: "in the top-level object",
        });
        let body = text(GateError::Unclassifiable(Invalid::Body(bound, None)));
        assert!(body.contains("inspection bounds"), "{body}");
        assert!(!body.contains("vLLM refuses this body too"), "{body}");
        let shallow = InspectError::Syntax(SyntaxError::TooDeep {
            offset: 0,
            limit: 64,
            opens: b'[',
        });
        let body = text(GateError::Unclassifiable(Invalid::Body(shallow, None)));
        assert!(body.contains("vLLM refuses this body too"), "{body}");
    }
}
