//! A counting fake vLLM for the load test (`bench/load.sh`): answers every POST with a small
//! JSON body after reading its whole body, and counts requests and body bytes received.
//! `GET /count` returns `{"posts":N,"bytes":M}`; `/health` and `/v1/models` answer as vLLM's.
//!
//! ```text
//! cargo run --release --example counting_upstream -- 127.0.0.1:8000
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

static POSTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

fn json(body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let get = req.method() == Method::GET;
    Ok(match req.uri().path() {
        "/health" if get => Response::new(Full::new(Bytes::new())),
        "/count" if get => json(format!(
            r#"{{"posts":{},"bytes":{}}}"#,
            POSTS.load(Ordering::SeqCst),
            BYTES.load(Ordering::SeqCst)
        )),
        "/v1/models" if get => {
            json(r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#.into())
        }
        _ if get => json(r#"{"paths":{}}"#.into()),
        _ => {
            let Ok(body) = req.into_body().collect().await else {
                // A cancelled request (the client or mmgate went away): not received whole.
                return Ok(Response::new(Full::new(Bytes::new())));
            };
            BYTES.fetch_add(body.to_bytes().len() as u64, Ordering::SeqCst);
            POSTS.fetch_add(1, Ordering::SeqCst);
            json(r#"{"id":"cmpl-count","object":"chat.completion","choices":[]}"#.into())
        }
    })
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8000".into())
        .parse()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!("counting_upstream listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handle))
                .await;
        });
    }
}
