//! mmgate: a reverse proxy in front of vLLM that enforces, observes and migrates vLLM 0.31's
//! per-request multimodal kwargs contract.
//!
//! The life of a request, stage by stage (one module each):
//!
//! 1. [`listen`] accepts a connection and records its [`listen::ConnInfo`].
//! 2. [`classify`] maps method + path to a gated [`classify::RouteKind`] or pass-through.
//! 3. [`inspect`] reads the (bounded) body as Python's `json.loads` would → [`inspect::Findings`].
//! 4. [`contract`] turns findings into vLLM 0.31's [`contract::Verdict`].
//! 5. [`decide`] applies the policy → [`decide::Action`] (forward as sent, strip, reject).
//! 6. [`rewrite`] strips the gated fields when the action says so; [`upstream`] forwards and
//!    streams the response back; [`error`] is the one place errors become HTTP responses.
//! 7. [`record`] records the [`record::Outcome`] once: metrics ([`metrics`]) and one log line.
//!
//! [`server`] binds the listeners and starts it all. [`gateway`] is the only module that knows this order; [`config`] parses the policy file once
//! into the validated runtime form every stage reads; [`admin`] serves metrics and health.

pub mod admin;
pub mod classify;
pub mod config;
pub mod contract;
pub mod decide;
pub mod error;
pub mod gateway;
pub mod inspect;
pub mod listen;
pub mod metrics;
pub mod record;
pub mod rewrite;
pub mod server;
pub mod upstream;
