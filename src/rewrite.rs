//! The strip rewrite: remove every occurrence of the chosen gated fields from the top-level
//! object and leave every other byte as the client sent it.
//!
//! The result is a list of slices of the original body (no copy). A removed member takes one
//! adjacent comma with it: the separator after it, or for trailing members the separator
//! before them, so the result is valid JSON in the body's own encoding.
//!
//! [`nullify`] is the variant for a request vLLM refuses before its gate: each occurrence
//! becomes `"name":null`, so the body keeps its members and vLLM's validation error, which
//! counts them (`'input': '<dict of 3 items>'`), is the one the client's body gets.

use bytes::Bytes;

use crate::inspect::{Encoding, Field, Findings};

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

/// Replaces the value of every top-level occurrence of `fields` in `body` with `null`: each
/// such member becomes `"name":null` in the body's encoding, and every other byte stays.
pub fn nullify(body: &Bytes, findings: &Findings, fields: &[Field]) -> Stripped {
    let mut parts = Vec::new();
    let mut at = 0;
    for m in &findings.members {
        let Some(field) = m.field.filter(|f| fields.contains(f)) else {
            continue;
        };
        if m.span.start > at {
            parts.push(body.slice(at..m.span.start));
        }
        parts.push(encode(
            findings.encoding,
            &format!("\"{}\":null", field.name()),
        ));
        at = m.span.end;
    }
    if at < body.len() {
        parts.push(body.slice(at..));
    }
    Stripped { parts }
}

/// ASCII `text` in `encoding` (without a byte-order mark).
fn encode(encoding: Encoding, text: &str) -> Bytes {
    let unit = |c: u8| -> Vec<u8> {
        match encoding {
            Encoding::Utf8 | Encoding::Utf8Bom => vec![c],
            Encoding::Utf16Le => vec![c, 0],
            Encoding::Utf16Be => vec![0, c],
            Encoding::Utf32Le => vec![c, 0, 0, 0],
            Encoding::Utf32Be => vec![0, 0, 0, c],
        }
    };
    Bytes::from(text.bytes().flat_map(unit).collect::<Vec<u8>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::{inspect, RENDER_MAX_DEPTH};

    fn run(body: &str) -> String {
        let bytes = Bytes::copy_from_slice(body.as_bytes());
        let f = inspect(&bytes, RENDER_MAX_DEPTH).unwrap();
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

    fn nulled(body: &[u8], fields: &[Field]) -> Vec<u8> {
        let bytes = Bytes::copy_from_slice(body);
        let f = inspect(&bytes, RENDER_MAX_DEPTH).unwrap();
        nullify(&bytes, &f, fields).to_vec()
    }

    #[test]
    fn nullify_keeps_every_member() {
        let body = br#"{"a":1, "mm_processor_kwargs" : {"x":[1]},"media_io_kwargs":{"v":{}}, "mm_processor_kwar\u0067s":2}"#;
        assert_eq!(
            nulled(body, &[Field::MmProcessorKwargs]),
            br#"{"a":1, "mm_processor_kwargs":null,"media_io_kwargs":{"v":{}}, "mm_processor_kwargs":null}"#
        );
        assert_eq!(
            nulled(body, &Field::ALL),
            br#"{"a":1, "mm_processor_kwargs":null,"media_io_kwargs":null, "mm_processor_kwargs":null}"#
        );
        let untouched = br#"{"a":1,"extra":{"mm_processor_kwargs":1}}"#;
        assert_eq!(nulled(untouched, &Field::ALL), untouched);
    }

    #[test]
    fn nullify_writes_the_bodys_encoding() {
        let text = r#"{"m":"x","media_io_kwargs":{"v":{"n":1}}}"#;
        let want = r#"{"m":"x","media_io_kwargs":null}"#;
        let utf16le = |s: &str| {
            s.encode_utf16()
                .flat_map(u16::to_le_bytes)
                .collect::<Vec<u8>>()
        };
        let utf16be = |s: &str| {
            s.encode_utf16()
                .flat_map(u16::to_be_bytes)
                .collect::<Vec<u8>>()
        };
        let utf32le = |s: &str| {
            s.chars()
                .flat_map(|c| (c as u32).to_le_bytes())
                .collect::<Vec<u8>>()
        };
        let utf32be = |s: &str| {
            s.chars()
                .flat_map(|c| (c as u32).to_be_bytes())
                .collect::<Vec<u8>>()
        };
        for enc in [utf16le, utf16be, utf32le, utf32be] {
            assert_eq!(nulled(&enc(text), &Field::ALL), enc(want));
        }
        let mut bom = b"\xef\xbb\xbf".to_vec();
        bom.extend_from_slice(text.as_bytes());
        let mut want_bom = b"\xef\xbb\xbf".to_vec();
        want_bom.extend_from_slice(want.as_bytes());
        assert_eq!(nulled(&bom, &Field::ALL), want_bom);
    }

    #[test]
    fn untouched_when_nothing_to_strip() {
        let body = r#"{"a": [1, 2], "extra_args": {"mm_processor_kwargs": 1}}"#;
        assert_eq!(run(body), body);
    }
}
