//! The offending-request log line (the documented schema), written straight into bytes.
//!
//! Keys and closed labels need no escaping; client text is written as it is when JSON allows
//! that, else escaped by serde_json (so the bytes are serde_json's either way); the opt-in
//! member values go through serde_json. The tests hold it to a serde-derived definition of
//! the schema, byte for byte.

use super::{user_agent, Outcome};

/// Appends the line for `o`, without its newline, to `w`.
pub(super) fn write(w: &mut Vec<u8>, o: &Outcome, ts: &str, route: &str, mode: &str) {
    w.extend_from_slice(b"{\"ts\":");
    string(w, ts);
    w.extend_from_slice(b",\"event\":\"offending_request\",\"route\":");
    label(w, route);
    w.extend_from_slice(b",\"path\":");
    string(w, o.path());
    w.extend_from_slice(b",\"mode\":");
    label(w, mode);
    w.extend_from_slice(b",\"action\":");
    label(w, o.outcome);
    w.extend_from_slice(b",\"param\":");
    match o.would_reject {
        Some(f) => label(w, f.name()),
        None => w.extend_from_slice(b"null"),
    }
    w.extend_from_slice(b",\"fields\":[");
    for (i, (field, keys)) in o.fields.iter().enumerate() {
        if i > 0 {
            w.push(b',');
        }
        w.extend_from_slice(b"{\"name\":");
        label(w, field.name());
        w.extend_from_slice(b",\"keys\":");
        list(w, keys.iter().map(String::as_str), string);
        if let Some((_, values)) = o.values.iter().find(|(f, _)| f == field) {
            w.extend_from_slice(b",\"values\":");
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *w, values);
        }
        w.push(b'}');
    }
    w.extend_from_slice(b"],\"stripped\":");
    list(w, o.stripped.iter().map(|f| f.name()), label);
    w.extend_from_slice(b",\"status\":");
    w.extend_from_slice(crate::digits::decimal(o.status.into(), &mut [0; 20]));
    w.extend_from_slice(b",\"client_addr\":");
    string(w, o.client_addr.to_str().unwrap_or_default());
    w.extend_from_slice(b",\"client\":");
    string(w, &o.client_id);
    w.extend_from_slice(b",\"pool\":");
    optional(w, o.pool);
    w.extend_from_slice(b",\"user_agent\":");
    optional(w, user_agent(o));
    w.extend_from_slice(b",\"request_id\":");
    o.request_id.write_json(w);
    w.push(b'}');
}

/// The line for `o` on its own (for tests).
#[cfg(test)]
pub(super) fn text(o: &Outcome, ts: &str, route: &str, mode: &str) -> Vec<u8> {
    let mut w = Vec::new();
    write(&mut w, o, ts, route, mode);
    w
}

/// A closed label (a route, mode, action or field name): never needs escaping.
fn label(w: &mut Vec<u8>, s: &str) {
    debug_assert!(!needs_escape(s.as_bytes()), "{s:?} is not a label");
    w.push(b'"');
    w.extend_from_slice(s.as_bytes());
    w.push(b'"');
}

/// A JSON string: as it is unless it has a byte JSON requires escaped.
pub(super) fn string(w: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        w.reserve(s.len() + 2);
        w.push(b'"');
        w.extend_from_slice(s.as_bytes());
        w.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *w, s);
    }
}

/// Whether `s` has a control character, `"` or `\\`: eight bytes at a time, with the
/// exact "has a byte below n" and "has a zero byte" word tests (Bit Twiddling Hacks).
fn needs_escape(s: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH != 0;
    let has = |x: u64, byte: u8| below(x ^ (ONES * u64::from(byte)), 1);
    let mut words = s.chunks_exact(8);
    for word in &mut words {
        let x = u64::from_ne_bytes(word.try_into().expect("eight bytes"));
        if below(x, 0x20) || has(x, b'"') || has(x, b'\\') {
            return true;
        }
    }
    // The tail as one more word, padded with a byte that needs no escape.
    let rest = words.remainder();
    let mut tail = [b'a'; 8];
    tail[..rest.len()].copy_from_slice(rest);
    let x = u64::from_ne_bytes(tail);
    below(x, 0x20) || has(x, b'"') || has(x, b'\\')
}

fn optional(w: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(w, s),
        None => w.extend_from_slice(b"null"),
    }
}

/// A JSON array of strings, each written by `item` ([`string`] or [`label`]).
fn list<'a>(w: &mut Vec<u8>, items: impl Iterator<Item = &'a str>, item: fn(&mut Vec<u8>, &str)) {
    w.push(b'[');
    for (i, s) in items.enumerate() {
        if i > 0 {
            w.push(b',');
        }
        item(w, s);
    }
    w.push(b']');
}

/// `n` in lowercase hexadecimal.
pub(super) fn hex(w: &mut Vec<u8>, n: u64) {
    w.extend_from_slice(crate::digits::hex(n, &mut [0; 20]));
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use proptest::prelude::*;
    use serde::Serialize;

    use super::super::{user_agent, Outcome, RequestId};
    use super::*;
    use crate::classify::RouteKind;
    use crate::decide::Mode;
    use crate::inspect::Field;

    /// The documented schema, as serde writes it: the reference the line is held to.
    #[derive(Serialize)]
    struct LogLine<'a> {
        ts: &'a str,
        event: &'static str,
        route: &'a str,
        path: &'a str,
        mode: &'a str,
        action: &'static str,
        param: Option<&'static str>,
        fields: Vec<LogField<'a>>,
        stripped: Vec<&'static str>,
        status: u16,
        client_addr: &'a str,
        client: &'a str,
        pool: Option<&'a str>,
        user_agent: Option<&'a str>,
        request_id: Cow<'a, str>,
    }

    #[derive(Serialize)]
    struct LogField<'a> {
        name: &'static str,
        keys: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        values: Option<&'a serde_json::Map<String, serde_json::Value>>,
    }

    fn reference(o: &Outcome, ts: &str, route: &str, mode: &str) -> Vec<u8> {
        let line = LogLine {
            ts,
            event: "offending_request",
            route,
            path: o.path(),
            mode,
            action: o.outcome,
            param: o.would_reject.map(Field::name),
            fields: o
                .fields
                .iter()
                .map(|(f, keys)| LogField {
                    name: f.name(),
                    keys,
                    values: o.values.iter().find(|(v, _)| v == f).map(|(_, m)| m),
                })
                .collect(),
            stripped: o.stripped.iter().map(|f| f.name()).collect(),
            status: o.status,
            client_addr: o.client_addr.to_str().unwrap_or_default(),
            client: &o.client_id,
            pool: o.pool,
            user_agent: user_agent(o),
            request_id: o.request_id.text(),
        };
        serde_json::to_vec(&line).unwrap()
    }

    fn outcome(text: &str, keys: Vec<String>, status: u16, seq: u64) -> Outcome {
        let header = http::HeaderValue::from_bytes(text.as_bytes()).ok();
        Outcome {
            route: Some(RouteKind::Chat),
            mode: Some(Mode::Strip),
            outcome: "stripped",
            would_reject: Some(Field::MediaIoKwargs),
            stripped: vec![Field::MmProcessorKwargs, Field::MediaIoKwargs],
            fields: vec![
                (Field::MmProcessorKwargs, keys.clone()),
                (Field::MediaIoKwargs, Vec::new()),
            ],
            values: vec![(
                Field::MmProcessorKwargs,
                keys.iter()
                    .map(|k| (k.clone(), serde_json::Value::from(text)))
                    .collect(),
            )],
            status,
            client_addr: http::HeaderValue::from_static("::1"),
            client_id: text.to_string().into(),
            client: crate::identify::ClientId::Anonymous,
            via: None,
            spoofed_header: false,
            pool: seq
                .is_multiple_of(2)
                .then(|| &*Box::leak(text.to_owned().into_boxed_str())),
            refusal: None,
            user_agent: header.clone(),
            request_id: RequestId {
                sent: header.filter(|_| seq.is_multiple_of(3)),
                conn: seq / 7,
                seq,
            },
            // A path holds only what a request target may: text that is none falls back to `/`
            // (the other text fields hold it, with the same escaping).
            uri: http::Uri::try_from(text).unwrap_or_else(|_| http::Uri::from_static("/")),
            body_bytes: None,
            elapsed: std::time::Duration::ZERO,
            upstream_elapsed: None,
        }
    }

    proptest! {
        #[test]
        fn the_line_is_serde_jsons_byte_for_byte(
            text in any::<String>(),
            // Header values (user agent, request id) are visible ASCII, tabs and spaces,
            // up to and beyond the bound.
            sent in "[ -~\t]{0,300}",
            keys in prop::collection::vec(any::<String>(), 0..4),
            status in any::<u16>(),
            seq in any::<u64>(),
        ) {
            let mut o = outcome(&text, keys, status, seq);
            let sent = http::HeaderValue::from_str(&sent).unwrap();
            o.user_agent = Some(sent.clone());
            o.request_id.sent = seq.is_multiple_of(3).then(|| sent.clone());
            // Bounding and the made id, checked independently of the code under test.
            let line: serde_json::Value = serde_json::from_slice(&text_of(&o)).unwrap();
            let bounded = &sent.to_str().unwrap()[..sent.len().min(super::super::MAX_TEXT)];
            prop_assert_eq!(line["user_agent"].as_str(), Some(bounded));
            let id = if seq.is_multiple_of(3) {
                bounded.to_string()
            } else {
                format!("mmgate-{:x}-{seq:x}", seq / 7)
            };
            prop_assert_eq!(line["request_id"].as_str(), Some(id.as_str()));
            prop_assert_eq!(
                String::from_utf8(text_of(&o)).unwrap(),
                String::from_utf8(reference(&o, "2026-12-03T10:00:00.000Z", "chat", "strip")).unwrap()
            );
        }
    }

    fn text_of(o: &Outcome) -> Vec<u8> {
        text(o, "2026-12-03T10:00:00.000Z", "chat", "strip")
    }

    #[test]
    fn text_that_json_requires_escaped_is_escaped() {
        let o = outcome("a\"b\\c\nd\u{1}é", vec!["\u{7f}".into()], 200, 0);
        assert_eq!(
            text_of(&o),
            reference(&o, "2026-12-03T10:00:00.000Z", "chat", "strip")
        );
        let parsed: serde_json::Value = serde_json::from_slice(&text_of(&o)).unwrap();
        assert_eq!(parsed["client"], "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn escaping_is_needed_exactly_for_control_characters_quotes_and_backslashes() {
        let definition = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        for len in [1, 7, 8, 9, 16, 17, 24] {
            for at in 0..len {
                for b in 0..=255u8 {
                    // Every other byte is one that needs no escaping, low and high.
                    let mut text: Vec<u8> =
                        (0..len).map(|i| [b'a', 0x7f, 0xc3, b' '][i % 4]).collect();
                    text[at] = b;
                    assert_eq!(
                        needs_escape(&text),
                        definition(b),
                        "{b:#x} at {at} of {len}"
                    );
                }
            }
        }
        assert!(!needs_escape(b""));
    }
}
