//! Request and response bodies: reading a gated body within a limit, and a response body
//! that holds the request's guards (in-flight gauge, pool and client permits, member count)
//! until it ends or is dropped — so a stream holds them until its last frame or until the
//! client goes away, and a request whose client leaves before the answer releases them too.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

use axum::body::Body;

use crate::error::GateError;
use crate::limits::Admission;
use crate::pool::MemberGuard;
use crate::upstream::ResponseFields;

/// Counts one request in `mmgate_in_flight_requests` until dropped.
pub(crate) struct InFlight(prometheus::IntGauge);

impl InFlight {
    pub(crate) fn enter(gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        InFlight(gauge.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// What a request holds while its response is being sent.
pub(crate) struct Held {
    pub(crate) _in_flight: InFlight,
    pub(crate) admission: Option<Admission>,
    pub(crate) member: Option<MemberGuard>,
    /// A forwarded response's fields as the upstream sent them, until they are answered
    /// with ([`crate::gateway::Answer`]).
    pub(crate) upstream_fields: Option<ResponseFields>,
}

/// A response body that holds its request's [`Held`] until it ends or is dropped.
pub(crate) struct Tracked {
    pub(crate) inner: Body,
    pub(crate) held: Option<Held>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None | Some(Err(_)))) {
            self.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The body length a request declares in `Content-Length`, if it declares a valid one.
#[inline]
pub(crate) fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Collects a body into one buffer, failing once it grows past `limit`. A body that arrives
/// as one frame is taken without a copy; otherwise the buffer is sized from `hint`.
pub(crate) async fn collect_limited(
    mut body: Body,
    limit: usize,
    hint: usize,
) -> Result<Bytes, GateError> {
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(GateError::body_failed)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let total = first.as_ref().map_or(0, Bytes::len) + buf.len() + data.len();
        if total > limit {
            return Err(GateError::BodyTooLarge { limit });
        }
        match first.take() {
            None if buf.is_empty() => first = Some(data),
            prev => {
                if buf.is_empty() {
                    buf.reserve(hint.clamp(total, limit));
                }
                if let Some(p) = prev {
                    buf.extend_from_slice(&p);
                }
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
}
