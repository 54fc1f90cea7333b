//! The admin listener: Prometheus `/metrics`, `/healthz` (process up), `/readyz` (the
//! upstream's `/health` answers 200), and the live inventory of offending clients as
//! `/inventory` (JSON) and `/inventory.html` (a table, highest count first).

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
        .route("/inventory", get(inventory_json))
        .route("/inventory.html", get(inventory_html))
        .with_state(gateway)
}

async fn metrics(State(gw): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        gw.metrics().render(),
    )
}

async fn inventory_json(State(gw): State<Arc<Gateway>>) -> impl IntoResponse {
    let body = serde_json::to_string(&gw.inventory().snapshot()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body)
}

async fn inventory_html(State(gw): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        crate::inventory::html(&gw.inventory().snapshot()),
    )
}

/// `/readyz`: 503 at once while draining (so a load balancer drains first), else whether the
/// default upstream of the policy in force answers `/health`.
async fn ready(
    State(gw): State<Arc<Gateway>>,
    live: Option<axum::Extension<Arc<crate::reload::Live>>>,
) -> impl IntoResponse {
    let gw = match live {
        Some(axum::Extension(live)) if live.draining() => {
            return (StatusCode::SERVICE_UNAVAILABLE, "draining\n".to_string());
        }
        Some(axum::Extension(live)) => live.gateway(),
        None => gw,
    };
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
