//! The decision: (policy mode, vLLM verdict, findings) → [`Action`]. Pure.
//!
//! `pass` and `shadow` always forward the client's bytes: `shadow` after inspecting them,
//! `pass` without reading them at all (the gateway streams them through and never gets here,
//! unless the client's pool has value limits to check). To a pool with value limits the
//! gateway then checks the kwargs, and refuses a body it could not read (see
//! [`Gateway`](crate::gateway::Gateway)). `strip` and `reject` differ only on
//! a gate rejection: `reject` answers vLLM's own error at the edge, `strip` removes the
//! offending fields. Whenever a request with truthy gated fields is forwarded under
//! `strip`/`reject` (because vLLM would refuse it earlier for another reason), the fields are
//! stripped first, so a prediction mmgate gets wrong can never let them reach the upstream.
//!
//! Per client, [`decide_for`] adds the pool: `route` sends a trusted client's offending
//! requests to its trusted pool as sent, everything else goes to the client's own pool.
//! Invariant (checked here as well as in the policy): a client that is not trusted never
//! gets a trusted pool, whatever it sends.

use crate::config::PoolId;
use crate::contract::{Invalid, Verdict};
use crate::error::GateError;
use crate::inspect::{Field, Findings};

/// The per-route policy mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Do nothing: stream the body through unread and uninspected, like an ungated route
    /// (only a declared `Content-Length` over the pool's limit is refused), not counted or
    /// logged as offending. To a pool with value limits (every trusted pool) the body is still
    /// read, inspected and checked against them as before, then forwarded as sent (or
    /// refused, if it cannot be read).
    Pass,
    /// Forward untouched; log and count what vLLM 0.31 would reject.
    Shadow,
    /// Remove offending fields, say so in a header.
    Strip,
    /// Answer vLLM's gate error at the edge.
    Reject,
    /// Forward offending requests as sent to this (trusted) pool; per client only.
    Route(PoolId),
}

impl Mode {
    /// The name used in policies, metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pass => "pass",
            Mode::Shadow => "shadow",
            Mode::Strip => "strip",
            Mode::Reject => "reject",
            Mode::Route(_) => "route",
        }
    }
}

/// What strip/reject do with a body mmgate cannot inspect (one vLLM refuses too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnclassifiable {
    /// Answer 400 at the edge (fail closed).
    Reject,
    /// Forward unchanged; vLLM answers with its own error.
    Forward,
}

/// What the gateway does with a gated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Forward the client's bytes unchanged.
    Forward,
    /// Forward with these fields removed.
    Strip(Vec<Field>),
    /// Forward with these fields' values replaced by `null` ([`crate::rewrite::nullify`]):
    /// vLLM refuses the request before its gate, and its error counts the body's members.
    Nullify(Vec<Field>),
    /// Answer vLLM's gate error for this field.
    RejectGate(Field),
    /// Answer 400: the body cannot be inspected.
    RejectUnclassifiable(Invalid),
}

/// An action and the pool it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// Where a forwarded request goes.
    pub pool: PoolId,
}

/// Who is asking, as the decision sees it.
#[derive(Debug, Clone, Copy)]
pub struct ClientView {
    /// The client's mode on this route.
    pub mode: Mode,
    /// The client may reach trusted pools.
    pub trusted: bool,
    /// The client's own pool (for requests that are not routed).
    pub pool: PoolId,
}

/// Decides what to do with a gated request from this client, and where it goes.
/// `pool_trusted` says which pools run `--trust-request-mm-kwargs`; a forward from an
/// untrusted client to such a pool is refused with [`GateError::UntrustedPool`].
pub fn decide_for(
    client: ClientView,
    pool_trusted: impl Fn(PoolId) -> bool,
    on_unclassifiable: OnUnclassifiable,
    verdict: &Verdict,
    findings: Option<&Findings>,
) -> Result<Decision, GateError> {
    let offending = findings.is_some_and(|f| f.offending().next().is_some());
    let (action, pool) = match client.mode {
        Mode::Route(target) if client.trusted && offending => (Action::Forward, target),
        // Untrusted (impossible by the policy, kept as a guard): vLLM's own answer.
        Mode::Route(_) if offending => (
            decide(Mode::Reject, on_unclassifiable, verdict, findings),
            client.pool,
        ),
        Mode::Route(_) => (
            decide(Mode::Pass, on_unclassifiable, verdict, findings),
            client.pool,
        ),
        mode => (
            decide(mode, on_unclassifiable, verdict, findings),
            client.pool,
        ),
    };
    let forwards = matches!(
        action,
        Action::Forward | Action::Strip(_) | Action::Nullify(_)
    );
    if forwards && pool_trusted(pool) && !client.trusted {
        return Err(GateError::UntrustedPool);
    }
    Ok(Decision { action, pool })
}

/// Decides what to do with a gated request.
pub fn decide(
    mode: Mode,
    on_unclassifiable: OnUnclassifiable,
    verdict: &Verdict,
    findings: Option<&Findings>,
) -> Action {
    if matches!(mode, Mode::Pass | Mode::Shadow | Mode::Route(_)) {
        return Action::Forward;
    }
    let offending = |except: &[Field]| -> Vec<Field> {
        findings
            .map(|f| f.offending().filter(|o| !except.contains(o)).collect())
            .unwrap_or_default()
    };
    let (fields, rewrite): (_, fn(Vec<Field>) -> Action) = match verdict {
        Verdict::Accept => return Action::Forward,
        Verdict::Reject(field) if mode == Mode::Reject => return Action::RejectGate(*field),
        Verdict::Reject(_) => (offending(&[]), Action::Strip),
        Verdict::Invalid(inv) if inv.unclassifiable() => {
            return match on_unclassifiable {
                OnUnclassifiable::Reject => Action::RejectUnclassifiable(inv.clone()),
                OnUnclassifiable::Forward => Action::Forward,
            };
        }
        // vLLM refuses it before the gate: a mistyped field must reach it as sent, and the
        // others keep their place (its validation errors count the body's members).
        Verdict::Invalid(inv) => (offending(inv.mistyped_gated()), Action::Nullify),
    };
    if fields.is_empty() {
        Action::Forward
    } else {
        rewrite(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{inspect, RENDER_MAX_DEPTH};

    fn findings(body: &str) -> Findings {
        inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap()
    }

    #[test]
    fn pass_and_shadow_never_change_traffic() {
        let f = findings(r#"{"mm_processor_kwargs":{"a":1}}"#);
        let v = Verdict::Reject(Field::MmProcessorKwargs);
        for mode in [Mode::Pass, Mode::Shadow] {
            assert_eq!(
                decide(mode, OnUnclassifiable::Reject, &v, Some(&f)),
                Action::Forward
            );
        }
    }

    #[test]
    fn strip_removes_every_offending_field_reject_answers() {
        let f = findings(r#"{"mm_processor_kwargs":{"a":1},"media_io_kwargs":{"image":{}}}"#);
        let v = Verdict::Reject(Field::MmProcessorKwargs);
        assert_eq!(
            decide(Mode::Strip, OnUnclassifiable::Reject, &v, Some(&f)),
            Action::Strip(vec![Field::MmProcessorKwargs, Field::MediaIoKwargs])
        );
        assert_eq!(
            decide(Mode::Reject, OnUnclassifiable::Reject, &v, Some(&f)),
            Action::RejectGate(Field::MmProcessorKwargs)
        );
    }

    #[test]
    fn earlier_errors_are_forwarded_with_the_fields_nulled() {
        let f = findings(r#"{"model":"x","mm_processor_kwargs":{"a":1}}"#);
        let v = Verdict::Invalid(Invalid::UnknownModel("x".into()));
        for mode in [Mode::Reject, Mode::Strip] {
            assert_eq!(
                decide(mode, OnUnclassifiable::Reject, &v, Some(&f)),
                Action::Nullify(vec![Field::MmProcessorKwargs])
            );
        }
        let f = findings(r#"{"mm_processor_kwargs":"x"}"#);
        let v = Verdict::Invalid(Invalid::FieldType {
            field: "mm_processor_kwargs",
            expected: "an object",
            gated: vec![Field::MmProcessorKwargs],
        });
        assert_eq!(
            decide(Mode::Reject, OnUnclassifiable::Reject, &v, Some(&f)),
            Action::Forward
        );
    }

    #[test]
    fn route_sends_only_a_trusted_clients_offending_requests_to_its_pool() {
        let trusted = |p: PoolId| p == 1;
        let offending = findings(r#"{"mm_processor_kwargs":{"a":1}}"#);
        let clean = findings(r#"{"model":"x"}"#);
        let reject = Verdict::Reject(Field::MmProcessorKwargs);
        let client = ClientView {
            mode: Mode::Route(1),
            trusted: true,
            pool: 0,
        };
        let d = decide_for(
            client,
            trusted,
            OnUnclassifiable::Reject,
            &reject,
            Some(&offending),
        );
        assert_eq!(
            d.unwrap(),
            Decision {
                action: Action::Forward,
                pool: 1
            }
        );
        let d = decide_for(
            client,
            trusted,
            OnUnclassifiable::Reject,
            &Verdict::Accept,
            Some(&clean),
        );
        assert_eq!(
            d.unwrap(),
            Decision {
                action: Action::Forward,
                pool: 0
            }
        );
        let untrusted = ClientView {
            trusted: false,
            ..client
        };
        let d = decide_for(
            untrusted,
            trusted,
            OnUnclassifiable::Reject,
            &reject,
            Some(&offending),
        );
        let d = d.unwrap();
        assert_eq!(d.action, Action::RejectGate(Field::MmProcessorKwargs));
        assert_eq!(d.pool, 0);
        // Even a misconfigured untrusted client whose own pool is trusted is refused.
        let misplaced = ClientView {
            mode: Mode::Shadow,
            trusted: false,
            pool: 1,
        };
        let d = decide_for(
            misplaced,
            trusted,
            OnUnclassifiable::Reject,
            &Verdict::Accept,
            Some(&clean),
        );
        assert!(matches!(d, Err(GateError::UntrustedPool)));
    }

    #[test]
    fn unclassifiable_follows_the_policy() {
        let v = Verdict::Invalid(Invalid::ContentType);
        assert_eq!(
            decide(Mode::Strip, OnUnclassifiable::Reject, &v, None),
            Action::RejectUnclassifiable(Invalid::ContentType)
        );
        assert_eq!(
            decide(Mode::Strip, OnUnclassifiable::Forward, &v, None),
            Action::Forward
        );
    }
}
