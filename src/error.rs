//! Errors the gateway answers itself, and the one place they become HTTP responses.
//!
//! Every body uses vLLM's (OpenAI's) envelope `{"error":{"message","type","param","code"}}`
//! so SDK clients surface it; gate rejections are byte-identical to vLLM 0.31's.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::contract::Invalid;
use crate::inspect::Field;

/// vLLM 0.31's exact gate error body for `mm_processor_kwargs`.
pub const GATE_BODY_MM_PROCESSOR_KWARGS: &str = r#"{"error":{"message":"Per-request mm_processor_kwargs are disabled by default because they can change multimodal preprocessing resource usage. Start the server with --trust-request-mm-kwargs only when clients are trusted. (parameter=mm_processor_kwargs)","type":"BadRequestError","param":"mm_processor_kwargs","code":400}}"#;

/// vLLM 0.31's exact gate error body for `media_io_kwargs`.
pub const GATE_BODY_MEDIA_IO_KWARGS: &str = r#"{"error":{"message":"Per-request media_io_kwargs are disabled by default because they can change multimodal media loading resource usage. Start the server with --trust-request-mm-kwargs only when clients are trusted. (parameter=media_io_kwargs)","type":"BadRequestError","param":"media_io_kwargs","code":400}}"#;

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
    /// The client's body could not be read (reset, timeout, bad framing).
    #[error("the request body could not be read: {0}")]
    BodyRead(String),
    /// The upstream could not be reached.
    #[error("upstream vLLM at {upstream} is unreachable: {reason}")]
    UpstreamUnreachable {
        /// The upstream authority.
        upstream: String,
        /// What failed.
        reason: String,
    },
    /// The upstream did not answer in time.
    #[error("upstream vLLM at {upstream} sent no response headers within {seconds} s")]
    UpstreamTimeout {
        /// The upstream authority.
        upstream: String,
        /// The configured timeout.
        seconds: u64,
    },
    /// The upstream broke the protocol or the connection.
    #[error("upstream vLLM at {upstream} failed: {reason}")]
    UpstreamFailed {
        /// The upstream authority.
        upstream: String,
        /// What failed.
        reason: String,
    },
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
            GateError::Gate(_) | GateError::Unclassifiable(_) | GateError::BodyRead(_) => {
                StatusCode::BAD_REQUEST
            }
            GateError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GateError::UpstreamUnreachable { .. } | GateError::UpstreamFailed { .. } => {
                StatusCode::BAD_GATEWAY
            }
            GateError::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// A short, closed label for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            GateError::Gate(_) => "gate",
            GateError::Unclassifiable(_) => "unclassifiable",
            GateError::BodyTooLarge { .. } => "body_too_large",
            GateError::BodyRead(_) => "body_read",
            GateError::UpstreamUnreachable { .. } => "upstream_unreachable",
            GateError::UpstreamTimeout { .. } => "upstream_timeout",
            GateError::UpstreamFailed { .. } => "upstream_failed",
        }
    }

    /// The response body.
    pub fn body(&self) -> Bytes {
        let status = self.status();
        let (kind, message) = match self {
            GateError::Gate(field) => return Bytes::from_static(gate_body(*field).as_bytes()),
            GateError::Unclassifiable(inv) => (
                "BadRequestError",
                format!("mmgate: the request body cannot be inspected, so it is refused ({inv}). vLLM refuses this body too; send a JSON object with content-type application/json."),
            ),
            GateError::BodyTooLarge { limit } => (
                "RequestEntityTooLarge",
                format!("mmgate: the request body is larger than the gateway's limit of {limit} bytes; send a smaller request."),
            ),
            GateError::BodyRead(_) => ("BadRequestError", format!("mmgate: {self}; resend the request.")),
            GateError::UpstreamUnreachable { .. } | GateError::UpstreamFailed { .. } => {
                ("BadGateway", format!("mmgate: {self}; retry later."))
            }
            GateError::UpstreamTimeout { .. } => ("GatewayTimeout", format!("mmgate: {self}; retry later.")),
        };
        envelope(status, kind, None, &message)
    }

    /// The full response.
    pub fn to_response<B: From<Bytes>>(&self) -> Response<B> {
        let mut res = Response::new(B::from(self.body()));
        *res.status_mut() = self.status();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
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
                    seconds: 1,
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
        ];
        for (e, status) in cases {
            assert_eq!(e.status().as_u16(), status);
            let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
            assert_eq!(v["error"]["code"], status);
            assert!(v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()));
        }
    }

    #[test]
    fn gate_bodies_are_vllms() {
        let v: serde_json::Value = serde_json::from_str(GATE_BODY_MEDIA_IO_KWARGS).unwrap();
        assert_eq!(v["error"]["param"], "media_io_kwargs");
        assert!(!GATE_BODY_MM_PROCESSOR_KWARGS.ends_with('\n'));
    }
}
