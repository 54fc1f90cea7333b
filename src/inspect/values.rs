//! The values of a gated field's top-level members, for the trusted pool's value limits.
//!
//! Only read while a gated field's object value is scanned anyway: numbers become `f64`
//! (as Python's `float()` would read them; overflow is ±inf), strings are kept up to
//! [`MAX_VALUE_TEXT`] bytes, and one level of nested objects (the modalities of
//! `media_io_kwargs`) keeps its members' scalars. Deeper containers are only named.

use super::scan::{self, Kind, Scanner, SyntaxError};

/// Longest string value kept, in bytes (longer strings are cut on a char boundary).
pub const MAX_VALUE_TEXT: usize = 256;

/// One member value of a gated field.
#[derive(Debug, Clone, PartialEq)]
pub enum KwargValue {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number (`NaN`/`Infinity` included).
    Number(f64),
    /// A string, bounded.
    Str(Box<str>),
    /// An array (its items are not kept).
    Array,
    /// An object one level down: its members, last duplicate winning.
    Object(Vec<(Box<str>, KwargValue)>),
    /// An object deeper than one level (its members are not kept).
    Nested,
}

impl KwargValue {
    /// The JSON type name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            KwargValue::Null => "null",
            KwargValue::Bool(_) => "a boolean",
            KwargValue::Number(_) => "a number",
            KwargValue::Str(_) => "a string",
            KwargValue::Array => "an array",
            KwargValue::Object(_) | KwargValue::Nested => "an object",
        }
    }
}

/// Scans the value at the cursor (a container at `depth`), keeping what the limits read.
/// With `open`, an object's members are kept one level down.
pub(super) fn scan_value(
    sc: &mut Scanner<'_>,
    depth: usize,
    open: bool,
) -> Result<(Kind, KwargValue), SyntaxError> {
    if open && sc.peek() == Some(b'{') {
        let mut distinct = super::distinct::Distinct::default();
        let mut members: Vec<(Box<str>, KwargValue)> = Vec::new();
        let empty = sc.members(depth, |sc, key| {
            sc.record()?;
            let name = super::key_bytes(sc.text(), key);
            let (_, value) = scan_value(sc, depth + 1, false)?;
            match distinct.place(name.clone()) {
                (i, false) => members[i].1 = value,
                (_, true) => members.push((super::lossy(&name).into_boxed_str(), value)),
            }
            Ok(())
        })?;
        return Ok((Kind::Object { empty }, KwargValue::Object(members)));
    }
    let start = sc.pos;
    let kind = sc.value(depth)?;
    let raw = &sc.text()[start..sc.pos];
    let value = match kind {
        Kind::Null => KwargValue::Null,
        Kind::Bool(b) => KwargValue::Bool(b),
        Kind::Number { .. } => KwargValue::Number(number(raw)),
        Kind::NonFinite => KwargValue::Number(match raw {
            b"NaN" => f64::NAN,
            b"-Infinity" => f64::NEG_INFINITY,
            _ => f64::INFINITY,
        }),
        Kind::Str { .. } => KwargValue::Str(text(&raw[1..raw.len() - 1]).into_boxed_str()),
        Kind::Array { .. } => KwargValue::Array,
        Kind::Object { .. } => KwargValue::Nested,
    };
    Ok((kind, value))
}

fn number(raw: &[u8]) -> f64 {
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(f64::NAN)
}

fn text(raw: &[u8]) -> String {
    let cut = &raw[..escape_boundary(raw, MAX_VALUE_TEXT * 6)];
    let s = super::lossy(&scan::decoded(cut));
    if s.len() <= MAX_VALUE_TEXT {
        return s;
    }
    let mut end = MAX_VALUE_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// About `limit` bytes of a JSON string's raw text (its length, or less so that no escape
/// is cut).
fn escape_boundary(raw: &[u8], limit: usize) -> usize {
    if raw.len() <= limit {
        return raw.len();
    }
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\\', &raw[at..limit]) {
        let escape = at + i;
        let len = if raw.get(escape + 1) == Some(&b'u') {
            6
        } else {
            2
        };
        if escape + len > limit {
            return escape;
        }
        at = escape + len;
    }
    limit
}

#[cfg(test)]
mod tests {
    use super::super::{inspect, Field, RENDER_MAX_DEPTH};
    use super::KwargValue as V;

    #[test]
    fn member_values_are_read_one_level_down() {
        let body = r#"{"mm_processor_kwargs":{"max_pixels":1003520,"m":1e400,"s":"a\u0062","x":[1],"max_pixels":5},
            "media_io_kwargs":{"video":{"fps":2.5,"num_frames":NaN,"deep":{"a":1}},"image":true}}"#;
        let f = inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap();
        let mm = f.field(Field::MmProcessorKwargs);
        assert_eq!(mm.keys, ["max_pixels", "m", "s", "x"]);
        assert_eq!(mm.values[0], V::Number(5.0));
        assert_eq!(mm.values[1], V::Number(f64::INFINITY));
        assert_eq!(mm.values[2], V::Str("ab".into()));
        assert_eq!(mm.values[3], V::Array);
        let io = f.field(Field::MediaIoKwargs);
        let V::Object(video) = &io.values[0] else {
            panic!("video is an object")
        };
        assert_eq!(video[0], ("fps".into(), V::Number(2.5)));
        assert!(matches!(video[1].1, V::Number(n) if n.is_nan()));
        assert_eq!(video[2].1, V::Nested);
        assert_eq!(io.values[1], V::Bool(true));
        assert_eq!(io.non_object_key(), Some("image"));
    }

    #[test]
    fn long_strings_are_bounded() {
        let body = format!(r#"{{"mm_processor_kwargs":{{"s":"{}"}}}}"#, "é".repeat(400));
        let f = inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap();
        let V::Str(s) = &f.field(Field::MmProcessorKwargs).values[0] else {
            panic!("a string")
        };
        assert!(s.len() <= super::MAX_VALUE_TEXT);
    }

    #[test]
    fn a_long_string_is_cut_between_escapes_never_inside_one() {
        let limit = super::MAX_VALUE_TEXT * 6;
        for escape in [r"\n", r"\u0041", r"\ud83d\ude00", r"\\"] {
            for before in limit - 12..=limit {
                let s = format!("{}{escape}{}", "a".repeat(before), "b".repeat(20));
                let body = format!(r#"{{"mm_processor_kwargs":{{"s":"{s}"}}}}"#);
                let f = inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap();
                let V::Str(text) = &f.field(Field::MmProcessorKwargs).values[0] else {
                    panic!("a string")
                };
                assert_eq!(text.len(), super::MAX_VALUE_TEXT, "{escape} after {before}");
            }
        }
    }

    #[test]
    fn many_keys_keep_json_loads_order_and_the_last_duplicate() {
        // Past the few compared one by one (`distinct`), the same answers.
        let mut members: Vec<String> = (0..100).map(|i| format!(r#""k{i}":{i}"#)).collect();
        members.push(r#""k\u0037":{"a":1}"#.into());
        members.push(r#""k99":"last""#.into());
        let body = format!(
            r#"{{"mm_processor_kwargs":{{{m}}},"media_io_kwargs":{{{m}}}}}"#,
            m = members.join(",")
        );
        let f = inspect(body.as_bytes(), RENDER_MAX_DEPTH).unwrap();
        for field in [Field::MmProcessorKwargs, Field::MediaIoKwargs] {
            let found = f.field(field);
            assert_eq!(found.keys.len(), 100);
            assert_eq!(found.keys[99], "k99");
            assert_eq!(found.values[3], V::Number(3.0));
            assert_eq!(found.values[99], V::Str("last".into()));
        }
        let V::Object(k7) = &f.field(Field::MmProcessorKwargs).values[7] else {
            panic!("k7 became an object")
        };
        assert_eq!(k7[0], ("a".into(), V::Number(1.0)));
        assert_eq!(f.field(Field::MediaIoKwargs).non_object_key(), Some("k0"));
    }
}
