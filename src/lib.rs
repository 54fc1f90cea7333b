//! mmgate: a reverse proxy in front of vLLM that enforces, observes and migrates vLLM 0.31's
//! per-request multimodal kwargs contract.
//!
//! The life of a request, stage by stage (one module each):
//!
//! 1. [`listen`] accepts a connection, hands it to one of the data-plane worker threads
//!    (each a single-threaded runtime; the connection never leaves it), runs the handshake
//!    ([`tls`]: the client certificate's names) and records its [`listen::ConnInfo`]. Plain
//!    HTTP/1.1 is served by [`http1`] (heads parsed, bodies read as the gateway asks,
//!    responses written); HTTP/2 and TLS by hyper, with [`framing`] watching its HTTP/1 heads
//!    for the `Content-Length` + `Transfer-Encoding` ambiguity; each request takes the
//!    gateway in force.
//! 2. [`identify`] resolves the client ([`identify::ClientId`]) from its certificate, API key
//!    or trusted header, once per request on every route; [`limits`] takes from its rate.
//! 3. [`classify`] maps method + path to a gated [`classify::RouteKind`] or pass-through.
//! 4. [`inspect`] reads the (bounded, [`body`]) body as Python's `json.loads` would → [`inspect::Findings`].
//! 5. [`contract`] turns findings into vLLM 0.31's [`contract::Verdict`].
//! 6. [`decide`] applies the client's policy → [`decide::Decision`] (forward as sent, strip,
//!    reject, or route to a trusted pool), with the pool it goes to.
//! 7. [`limits`] checks the pool's value limits on the kwargs and admits the request
//!    (concurrency permits, bounded queue) for as long as its response body lives.
//! 8. [`rewrite`] strips the gated fields when the action says so; [`pool`] picks a healthy
//!    member and [`upstream`] forwards on its own kept-alive HTTP/1.1 connections, written
//!    and read from the request's task, and streams the response back; [`error`] is the one
//!    place errors become HTTP responses. A WebSocket handshake is forwarded alone and,
//!    once the upstream switches, joined to it byte for byte ([`tunnel`]).
//! 9. [`record`] records the [`record::Outcome`] once: metrics ([`metrics`]) and one log line.
//!
//! [`server`] binds the listeners, starts it all and drains on shutdown; [`reload`] swaps in a
//! re-read policy atomically. [`gateway`] is the only module that knows this order; [`config`] parses the policy file once
//! into the validated runtime form every stage reads; [`admin`] serves metrics, health and the
//! live [`inventory`].
//!
//! The migration toolkit sits beside the request path: [`probe`] sends the acceptance matrix
//! to a vLLM or a gateway, [`report`] aggregates the offending-request log lines, and
//! [`advise`] proposes deployment-level defaults from the logged values.

pub mod admin;
pub mod advise;
pub mod alloc;
pub mod body;
mod chunked;
pub mod classify;
pub mod config;
pub mod contract;
pub mod decide;
mod digits;
pub mod error;
pub mod framing;
pub mod gateway;
pub mod http1;
pub mod identify;
pub mod inspect;
pub mod inventory;
pub mod limits;
pub mod listen;
pub mod metrics;
pub mod pool;
pub mod probe;
pub mod record;
pub mod reload;
pub mod report;
pub mod rewrite;
pub mod server;
pub mod tls;
pub mod tunnel;
pub mod upstream;
mod vectored;
