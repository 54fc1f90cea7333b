//! A fake vLLM for manual runs and load tests: `/health`, `/v1/models` (serving `tiny`),
//! a JSON chat completion for every POST, and a 50-event SSE stream for `"stream": true`.
//! It does not gate anything: put mmgate in front of it to see what mmgate does.
//!
//! ```text
//! cargo run --release --example fake_vllm -- 127.0.0.1:8000
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

const EVENTS: usize = 50;

fn json(body: &'static str) -> Response<Body> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(body.as_bytes())).boxed())
        .unwrap_or_default()
}

fn sse() -> Response<Body> {
    let events = (0..=EVENTS).map(|i| {
        let data = if i == EVENTS {
            Bytes::from_static(b"data: [DONE]\n\n")
        } else {
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"model\":\"tiny\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i} \"}},\"finish_reason\":null}}]}}\n\n"
            ))
        };
        Ok::<_, Infallible>(Frame::data(data))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(StreamBody::new(futures_util::stream::iter(events)).boxed())
        .unwrap_or_default()
}

async fn handle(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let get = req.method() == Method::GET;
    Ok(match req.uri().path() {
        "/health" if get => Response::new(Full::new(Bytes::new()).boxed()),
        "/version" if get => json(r#"{"version":"0.31.0"}"#),
        "/v1/models" if get => {
            json(r#"{"object":"list","data":[{"id":"tiny","object":"model","owned_by":"vllm"}]}"#)
        }
        _ => {
            let body = req
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let stream = memchr::memmem::find(&body, b"\"stream\":true").is_some()
                || memchr::memmem::find(&body, b"\"stream\": true").is_some();
            if stream {
                sse()
            } else {
                json(
                    r#"{"id":"chatcmpl-fake","object":"chat.completion","created":0,"model":"tiny","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#,
                )
            }
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
    eprintln!("fake vLLM on http://{}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let conn = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), hyper::service::service_fn(handle))
                .await;
            if let Err(e) = conn {
                eprintln!("connection error: {e}");
            }
        });
    }
}
