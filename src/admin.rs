//! The admin listener: Prometheus `/metrics`, `/healthz` (process up) and `/readyz` (the
//! upstream's `/health` answers 200).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::gateway::Gateway;

/// The admin router.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(gateway)
}

async fn metrics(State(gw): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        gw.metrics().render(),
    )
}

async fn ready(State(gw): State<Arc<Gateway>>) -> impl IntoResponse {
    match gw.upstream().get("/health", Duration::from_secs(2)).await {
        Ok((s, _)) if s.is_success() => (StatusCode::OK, "ready\n".to_string()),
        Ok((s, _)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "upstream {} /health answered {s}\n",
                gw.upstream().authority()
            ),
        ),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    }
}
