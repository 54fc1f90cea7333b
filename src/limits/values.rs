//! Value limits on the kwargs a request carries to a pool: an allowlist of keys per field
//! (per modality for `media_io_kwargs`), numeric bounds and listed values. Pure.
//!
//! Only truthy fields are checked (a falsy field is a no-op in vLLM). A key the pool does
//! not list is refused unless `allow_unknown_keys`; a bounded key must hold a finite number
//! within its bounds, and a key with `one_of` one of its values, of the same JSON type. The
//! first violation is reported, naming the key and the bound.

use crate::config::{KeyRule, Scalar, ValueRules};
use crate::error::GateError;
use crate::inspect::{Field, Findings, KwargValue};

/// Checks the offending fields of a request against a pool's rules.
pub fn check_values(rules: &ValueRules, pool: &str, findings: &Findings) -> Result<(), GateError> {
    let violation = |key: String, bound: String| GateError::ValueBound {
        pool: pool.to_string(),
        key,
        bound,
    };
    for field in findings.offending() {
        let f = findings.field(field);
        if !matches!(f.kind, Some(crate::inspect::Kind::Object { .. })) {
            return Err(violation(
                field.name().into(),
                "an object of allowed keys".into(),
            ));
        }
        match field {
            Field::MmProcessorKwargs => {
                let members = f.keys.iter().map(String::as_str).zip(&f.values);
                check_members(
                    field.name(),
                    members,
                    &rules.mm_processor_kwargs,
                    rules.allow_unknown_keys,
                )
                .map_err(|(k, b)| violation(k, b))?;
            }
            Field::MediaIoKwargs => {
                for (modality, value) in f.keys.iter().zip(&f.values) {
                    let at = format!("{}.{modality}", field.name());
                    let Some((_, modality_rules)) =
                        rules.media_io_kwargs.iter().find(|(m, _)| m == modality)
                    else {
                        if rules.allow_unknown_keys {
                            continue;
                        }
                        let allowed: Vec<_> = rules
                            .media_io_kwargs
                            .iter()
                            .map(|(m, _)| m.as_str())
                            .collect();
                        return Err(violation(
                            at,
                            format!("an allowed modality ({})", list(&allowed)),
                        ));
                    };
                    let KwargValue::Object(members) = value else {
                        return Err(violation(at, "an object".into()));
                    };
                    let members = members.iter().map(|(k, v)| (&**k, v));
                    check_members(&at, members, modality_rules, rules.allow_unknown_keys)
                        .map_err(|(k, b)| violation(k, b))?;
                }
            }
        }
    }
    Ok(())
}

fn check_members<'a>(
    at: &str,
    members: impl Iterator<Item = (&'a str, &'a KwargValue)>,
    rules: &[KeyRule],
    allow_unknown: bool,
) -> Result<(), (String, String)> {
    for (key, value) in members {
        let path = format!("{at}.{key}");
        let Some(rule) = rules.iter().find(|r| r.key == key) else {
            if allow_unknown {
                continue;
            }
            let allowed: Vec<_> = rules.iter().map(|r| r.key.as_str()).collect();
            return Err((path, format!("an allowed key ({})", list(&allowed))));
        };
        if !rule.one_of.is_empty() {
            if !rule.one_of.iter().any(|allowed| equals(allowed, value)) {
                return Err((path, format!("{} (got {})", describe(rule), shown(value))));
            }
            continue;
        }
        if rule.min.is_none() && rule.max.is_none() {
            continue;
        }
        let bound = describe(rule);
        let KwargValue::Number(n) = value else {
            return Err((
                path,
                format!("a number, {bound}, not {}", value.type_name()),
            ));
        };
        let within = n.is_finite()
            && rule.min.is_none_or(|lo| *n >= lo)
            && rule.max.is_none_or(|hi| *n <= hi);
        if !within {
            return Err((path, format!("{bound} (got {n})")));
        }
    }
    Ok(())
}

/// Whether a value is the allowed one, of the same JSON type (`1` is not `true`).
fn equals(allowed: &Scalar, value: &KwargValue) -> bool {
    match (allowed, value) {
        (Scalar::Bool(a), KwargValue::Bool(v)) => a == v,
        (Scalar::Number(a), KwargValue::Number(v)) => a == v,
        (Scalar::Text(a), KwargValue::Str(v)) => **a == **v,
        _ => false,
    }
}

/// A refused value for the message: scalars as JSON shows them, anything else by type.
fn shown(value: &KwargValue) -> String {
    match value {
        KwargValue::Bool(b) => b.to_string(),
        KwargValue::Number(n) => n.to_string(),
        KwargValue::Str(s) => format!("{s:?}"),
        other => other.type_name().to_string(),
    }
}

fn describe(rule: &KeyRule) -> String {
    if !rule.one_of.is_empty() {
        let listed: Vec<String> = rule.one_of.iter().map(ToString::to_string).collect();
        return format!("{} one of {}", rule.key, listed.join(", "));
    }
    match (rule.min, rule.max) {
        (Some(lo), Some(hi)) => format!("{lo} <= {} <= {hi}", rule.key),
        (Some(lo), None) => format!("{} >= {lo}", rule.key),
        (None, Some(hi)) => format!("{} <= {hi}", rule.key),
        (None, None) => format!("{} (any value)", rule.key),
    }
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none are allowed".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{inspect, RENDER_MAX_DEPTH};

    fn rules() -> ValueRules {
        let rule = |key: &str, min, max| KeyRule {
            key: key.into(),
            min,
            max,
            one_of: vec![],
        };
        let one_of = |key: &str, one_of| KeyRule {
            key: key.into(),
            min: None,
            max: None,
            one_of,
        };
        ValueRules {
            allow_unknown_keys: false,
            mm_processor_kwargs: vec![
                rule("max_pixels", None, Some(1_003_520.0)),
                rule("do_resize", None, None),
                one_of("resample", vec![Scalar::Number(2.0), Scalar::Number(3.0)]),
                one_of("do_rescale", vec![Scalar::Bool(true)]),
                one_of("mode", vec![Scalar::Text("RGB".into())]),
            ],
            media_io_kwargs: vec![(
                "video".into(),
                vec![
                    rule("num_frames", Some(1.0), Some(32.0)),
                    rule("fps", None, Some(2.0)),
                ],
            )],
        }
    }

    fn check(body: &str) -> Result<(), String> {
        let f = inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap();
        check_values(&rules(), "trusted", &f).map_err(|e| e.to_string())
    }

    #[test]
    fn values_within_bounds_pass() {
        check(r#"{"mm_processor_kwargs":{"max_pixels":1003520,"do_resize":"yes"},"media_io_kwargs":{"video":{"fps":2,"num_frames":32}}}"#).unwrap();
        check(r#"{"mm_processor_kwargs":{},"media_io_kwargs":null}"#).unwrap();
    }

    #[test]
    fn violations_name_the_key_and_the_bound() {
        let e = check(r#"{"mm_processor_kwargs":{"max_pixels":1003521}}"#).unwrap_err();
        assert!(
            e.contains("mm_processor_kwargs.max_pixels") && e.contains("max_pixels <= 1003520"),
            "{e}"
        );
        let e = check(r#"{"media_io_kwargs":{"video":{"num_frames":64}}}"#).unwrap_err();
        assert!(
            e.contains("media_io_kwargs.video.num_frames") && e.contains("1 <= num_frames <= 32"),
            "{e}"
        );
        let e = check(r#"{"media_io_kwargs":{"video":{"fps":"2"}}}"#).unwrap_err();
        assert!(e.contains("a number"), "{e}");
        let e = check(r#"{"media_io_kwargs":{"video":{"fps":NaN}}}"#).unwrap_err();
        assert!(e.contains("fps <= 2"), "{e}");
    }

    #[test]
    fn one_of_holds_a_key_to_listed_values_of_the_same_type() {
        check(r#"{"mm_processor_kwargs":{"resample":3,"do_rescale":true,"mode":"RGB"}}"#).unwrap();
        check(r#"{"mm_processor_kwargs":{"resample":2.0}}"#).unwrap();
        for (body, got) in [
            (
                r#"{"mm_processor_kwargs":{"do_rescale":false}}"#,
                "(got false)",
            ),
            (r#"{"mm_processor_kwargs":{"do_rescale":1}}"#, "(got 1)"),
            (
                r#"{"mm_processor_kwargs":{"do_rescale":"true"}}"#,
                r#"(got "true")"#,
            ),
            (
                r#"{"mm_processor_kwargs":{"do_rescale":null}}"#,
                "(got null)",
            ),
            (r#"{"mm_processor_kwargs":{"resample":1}}"#, "(got 1)"),
            (
                r#"{"mm_processor_kwargs":{"mode":"rgb"}}"#,
                r#"(got "rgb")"#,
            ),
            (
                r#"{"mm_processor_kwargs":{"mode":["RGB"]}}"#,
                "(got an array)",
            ),
        ] {
            let e = check(body).unwrap_err();
            assert!(e.contains(got), "{body}: {e}");
        }
        let e = check(r#"{"mm_processor_kwargs":{"resample":0}}"#).unwrap_err();
        assert!(
            e.contains("mm_processor_kwargs.resample") && e.contains("resample one of 2, 3"),
            "{e}"
        );
        let e = check(r#"{"mm_processor_kwargs":{"mode":"P"}}"#).unwrap_err();
        assert!(e.contains(r#"mode one of "RGB""#), "{e}");
    }

    #[test]
    fn unknown_keys_and_modalities_are_refused_unless_allowed() {
        let e = check(r#"{"mm_processor_kwargs":{"size":{"a":1}}}"#).unwrap_err();
        assert!(
            e.contains("mm_processor_kwargs.size") && e.contains("max_pixels, do_resize"),
            "{e}"
        );
        let e = check(r#"{"media_io_kwargs":{"audio":{"x":1}}}"#).unwrap_err();
        assert!(
            e.contains("media_io_kwargs.audio") && e.contains("video"),
            "{e}"
        );
        let mut open = rules();
        open.allow_unknown_keys = true;
        let f = inspect(
            br#"{"mm_processor_kwargs":{"size":1},"media_io_kwargs":{"audio":{}}}"#,
            RENDER_MAX_DEPTH,
        )
        .unwrap();
        check_values(&open, "trusted", &f).unwrap();
    }
}
