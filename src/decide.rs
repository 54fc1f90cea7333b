//! The decision: (policy mode, vLLM verdict, findings) → [`Action`]. Pure.
//!
//! `pass` and `shadow` always forward the client's bytes. `strip` and `reject` differ only on
//! a gate rejection: `reject` answers vLLM's own error at the edge, `strip` removes the
//! offending fields. Whenever a request with truthy gated fields is forwarded under
//! `strip`/`reject` (because vLLM would refuse it earlier for another reason), the fields are
//! stripped first, so a prediction mmgate gets wrong can never let them reach the upstream.

use crate::contract::{Invalid, Verdict};
use crate::inspect::{Field, Findings};

/// The per-route policy mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Forward untouched, count.
    Pass,
    /// Forward untouched; log and count what vLLM 0.31 would reject.
    Shadow,
    /// Remove offending fields, say so in a header.
    Strip,
    /// Answer vLLM's gate error at the edge.
    Reject,
}

impl Mode {
    /// The name used in policies, metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pass => "pass",
            Mode::Shadow => "shadow",
            Mode::Strip => "strip",
            Mode::Reject => "reject",
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
    /// Answer vLLM's gate error for this field.
    RejectGate(Field),
    /// Answer 400: the body cannot be inspected.
    RejectUnclassifiable(Invalid),
}

/// Decides what to do with a gated request.
pub fn decide(
    mode: Mode,
    on_unclassifiable: OnUnclassifiable,
    verdict: &Verdict,
    findings: Option<&Findings>,
) -> Action {
    if matches!(mode, Mode::Pass | Mode::Shadow) {
        return Action::Forward;
    }
    let offending = |except: Option<Field>| -> Vec<Field> {
        findings
            .map(|f| f.offending().filter(|o| Some(*o) != except).collect())
            .unwrap_or_default()
    };
    let fields = match verdict {
        Verdict::Accept => return Action::Forward,
        Verdict::Reject(field) if mode == Mode::Reject => return Action::RejectGate(*field),
        Verdict::Reject(_) => offending(None),
        Verdict::Invalid(inv) if inv.unclassifiable() => {
            return match on_unclassifiable {
                OnUnclassifiable::Reject => Action::RejectUnclassifiable(inv.clone()),
                OnUnclassifiable::Forward => Action::Forward,
            };
        }
        // vLLM refuses it before the gate; a mistyped field must reach it as sent.
        Verdict::Invalid(inv) => offending(inv.mistyped_field()),
    };
    if fields.is_empty() {
        Action::Forward
    } else {
        Action::Strip(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{inspect, DEFAULT_MAX_DEPTH};

    fn findings(body: &str) -> Findings {
        inspect(body.as_bytes(), DEFAULT_MAX_DEPTH).unwrap()
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
    fn earlier_errors_are_forwarded_without_the_fields() {
        let f = findings(r#"{"model":"x","mm_processor_kwargs":{"a":1}}"#);
        let v = Verdict::Invalid(Invalid::UnknownModel("x".into()));
        assert_eq!(
            decide(Mode::Reject, OnUnclassifiable::Reject, &v, Some(&f)),
            Action::Strip(vec![Field::MmProcessorKwargs])
        );
        let f = findings(r#"{"mm_processor_kwargs":"x"}"#);
        let v = Verdict::Invalid(Invalid::FieldType {
            field: "mm_processor_kwargs",
            expected: "an object",
        });
        assert_eq!(
            decide(Mode::Reject, OnUnclassifiable::Reject, &v, Some(&f)),
            Action::Forward
        );
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
