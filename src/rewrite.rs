//! The strip rewrite: remove every occurrence of the chosen gated fields from the top-level
//! object and leave every other byte as the client sent it.
//!
//! The result is a list of slices of the original body (no copy). A removed member takes one
//! adjacent comma with it: the separator after it, or for trailing members the separator
//! before them, so the result is valid JSON in the body's own encoding.

use bytes::Bytes;

use crate::inspect::{Field, Findings};

/// A body as a list of slices of the original bytes.
#[derive(Debug, Clone, Default)]
pub struct Stripped {
    /// The slices, in order.
    pub parts: Vec<Bytes>,
}

impl Stripped {
    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, copied into one buffer (for tests and the CLI).
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts.iter().flat_map(|p| p.iter().copied()).collect()
    }
}

/// Removes every top-level occurrence of `fields` from `body`.
pub fn strip(body: &Bytes, findings: &Findings, fields: &[Field]) -> Stripped {
    let members = &findings.members;
    let remove: Vec<bool> = members
        .iter()
        .map(|m| m.field.is_some_and(|f| fields.contains(&f)))
        .collect();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let last_kept = remove.iter().rposition(|r| !r);
    for (i, m) in members.iter().enumerate() {
        if !remove[i] {
            continue;
        }
        let cut = match last_kept {
            // Before the last kept member: cut up to the next member's key.
            Some(k) if i < k => (m.span.start, members[i + 1].span.start),
            // After it: cut from the end of the last kept member's value.
            Some(k) => (members[k].span.end, m.span.end),
            // Nothing kept: cut from the first key to the last value.
            None => (members[0].span.start, m.span.end),
        };
        match cuts.last_mut() {
            Some(prev) if cut.0 <= prev.1 => prev.1 = prev.1.max(cut.1),
            _ => cuts.push(cut),
        }
    }
    let mut parts = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for (from, to) in cuts {
        if from > at {
            parts.push(body.slice(at..from));
        }
        at = to;
    }
    if at < body.len() {
        parts.push(body.slice(at..));
    }
    Stripped { parts }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{inspect, DEFAULT_MAX_DEPTH};

    fn run(body: &str) -> String {
        let bytes = Bytes::copy_from_slice(body.as_bytes());
        let f = inspect(&bytes, DEFAULT_MAX_DEPTH).unwrap();
        String::from_utf8(strip(&bytes, &f, &Field::ALL).to_vec()).unwrap()
    }

    #[test]
    fn removes_members_and_one_comma() {
        assert_eq!(
            run(r#"{"a":1, "mm_processor_kwargs":{"x":1}, "b":2}"#),
            r#"{"a":1, "b":2}"#
        );
        assert_eq!(
            run(r#"{"a":1, "mm_processor_kwargs":{"x":1}}"#),
            r#"{"a":1}"#
        );
        assert_eq!(
            run(r#"{"mm_processor_kwargs":{"x":1}, "a":1}"#),
            r#"{"a":1}"#
        );
        assert_eq!(
            run(r#"{ "mm_processor_kwargs":1 , "media_io_kwargs":2 }"#),
            r#"{  }"#
        );
        assert_eq!(
            run(
                r#"{"a":1,"media_io_kwargs":{},"b":2,"mm_processor_kwar\u0067s":3,"media_io_kwargs":4}"#
            ),
            r#"{"a":1,"b":2}"#
        );
    }

    #[test]
    fn untouched_when_nothing_to_strip() {
        let body = r#"{"a": [1, 2], "extra_args": {"mm_processor_kwargs": 1}}"#;
        assert_eq!(run(body), body);
    }
}
