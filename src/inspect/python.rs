//! A JSON value as Python shows it: the `repr()` of the `str()` of what `json.loads` makes
//! of it, cut as vLLM's validation errors cut an `input` (`_summarize_error_input`), and the
//! `repr()` of a string.

use super::scan::{self, Kind};

/// The longest text vLLM shows of an input before it cuts it.
const SHOWN_CHARS: usize = 200;

/// What vLLM's validation error shows of the scanned value `literal` (its source text, of
/// kind `kind`; `len` elements for an array), as its message writes it: the `repr()` of its
/// text. `None` for an object.
pub(super) fn shown(kind: Kind, literal: &[u8], len: usize) -> Option<String> {
    let text = match kind {
        Kind::Null => "None".to_owned(),
        Kind::Bool(b) => if b { "True" } else { "False" }.to_owned(),
        Kind::NonFinite => match literal {
            b"NaN" => "nan",
            b"Infinity" => "inf",
            _ => "-inf",
        }
        .to_owned(),
        Kind::Number { .. } => {
            let literal = std::str::from_utf8(literal).ok()?;
            if literal.contains(['.', 'e', 'E']) {
                float_repr(literal.parse().ok()?)
            } else if literal.bytes().all(|c| matches!(c, b'-' | b'0')) {
                "0".to_owned()
            } else {
                literal.to_owned()
            }
        }
        Kind::Str { .. } => {
            // WTF-8: a lone surrogate is a code point of its own, which `repr()` escapes.
            let text = scan::decoded(&literal[1..literal.len() - 1]);
            let points: Vec<u32> = code_points(&text).take(SHOWN_CHARS + 1).collect();
            let cut_at = points.len().min(SHOWN_CHARS);
            let mut shown = repr_points(&points[..cut_at]);
            if cut_at < points.len() {
                shown.insert_str(shown.len() - 1, "...[truncated]");
            }
            return Some(shown);
        }
        Kind::Array { .. } => format!("<list of {len} items>"),
        Kind::Object { .. } => return None,
    };
    Some(repr(&cut(text)))
}

/// The code points of WTF-8 text (UTF-8 in which a lone surrogate is encoded as any other
/// code point; the scanner checked it).
fn code_points(text: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let lead = *text.get(at)?;
        let (len, bits) = match lead {
            0..0x80 => (1, u32::from(lead)),
            0xC0..0xE0 => (2, u32::from(lead & 0x1F)),
            0xE0..0xF0 => (3, u32::from(lead & 0x0F)),
            _ => (4, u32::from(lead & 0x07)),
        };
        let tail = text.get(at + 1..at + len).unwrap_or_default();
        at += len;
        Some(
            tail.iter()
                .fold(bits, |c, &b| (c << 6) | u32::from(b & 0x3F)),
        )
    })
}

/// The name of the Python type `json.loads` makes of the scanned value `literal`.
pub(super) fn type_name(kind: Kind, literal: &[u8]) -> &'static str {
    match kind {
        Kind::Null => "NoneType",
        Kind::Bool(_) => "bool",
        Kind::Number { .. } if !literal.iter().any(|c| matches!(c, b'.' | b'e' | b'E')) => "int",
        Kind::Number { .. } | Kind::NonFinite => "float",
        Kind::Str { .. } => "str",
        Kind::Array { .. } => "list",
        Kind::Object { .. } => "dict",
    }
}

/// Whether Python's `str.isprintable()` takes `c` (its `repr()` shows it as it is).
pub fn printable(c: char) -> bool {
    !within(&super::unicode::NOT_PRINTABLE, c)
}

/// Whether `re`'s `\w` matches `c` in a str pattern (`str.isalnum()`, or `_`).
pub fn word(c: char) -> bool {
    within(&super::unicode::WORD, c)
}

/// Whether `c` is in one of the sorted inclusive `ranges`.
fn within(ranges: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    let after = ranges.partition_point(|&(lo, _)| lo <= c);
    after > 0 && c <= ranges[after - 1].1
}

/// Python's `repr()` of a string: single quotes unless it holds one and no double quote;
/// backslash, tab, newline, return and the quote escaped; characters `str.isprintable()`
/// refuses as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
pub fn repr(s: &str) -> String {
    let points: Vec<u32> = s.chars().map(u32::from).collect();
    repr_points(&points)
}

/// [`repr`] of a Python string's code points, lone surrogates included (never printable).
fn repr_points(points: &[u32]) -> String {
    let has = |c: char| points.contains(&u32::from(c));
    let quote = if has('\'') && !has('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(points.len() + 2);
    out.push(quote);
    for &point in points {
        match char::from_u32(point) {
            Some('\\') => out.push_str("\\\\"),
            Some('\t') => out.push_str("\\t"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some(c) if c == quote => {
                out.push('\\');
                out.push(c);
            }
            Some(c) if printable(c) => out.push(c),
            _ if point < 0x100 => out.push_str(&format!("\\x{point:02x}")),
            _ if point < 0x10000 => out.push_str(&format!("\\u{point:04x}")),
            _ => out.push_str(&format!("\\U{point:08x}")),
        }
    }
    out.push(quote);
    out
}

/// `text[:200] + "...[truncated]"` when it is longer than 200 characters.
fn cut(mut text: String) -> String {
    if let Some((at, _)) = text.char_indices().nth(SHOWN_CHARS) {
        text.truncate(at);
        text.push_str("...[truncated]");
    }
    text
}

/// Python's `repr()` of a float: the shortest digits that read back as `x`, in positional
/// notation with at least one decimal (`1.0`, `0.0001`) from 1e-4 up to 1e16, else in
/// exponent notation with a signed exponent of at least two digits (`1e+16`, `1.5e-05`).
pub(super) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d[.ddd]e<exp>`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` writes an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().expect("`{:e}` writes an integer exponent");
    // The decimal point sits after `point` digits (CPython's `decpt`).
    let point = exp + 1;
    let body = if !(-4 < point && point <= 16) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{first}{dot}{rest}e{esign}{:02}", exp.abs())
    } else if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else {
        let point = point as usize;
        if point >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point - digits.len()))
        } else {
            format!("{}.{}", &digits[..point], &digits[point..])
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_repred_as_python_does() {
        // Each from Python 3.11 (Unicode 14.0.0).
        for (s, want) in [
            ("x", "'x'"),
            ("it's", "\"it's\""),
            ("q'\"", "'q\\'\"'"),
            ("a\\b", "'a\\\\b'"),
            (
                "a\nb\t\u{1}\u{7f}\u{a0}\u{ad}é",
                "'a\\nb\\t\\x01\\x7f\\xa0\\xadé'",
            ),
            ("Expecting ':' delimiter", "\"Expecting ':' delimiter\""),
            ("€", "'€'"),
            ("a\u{2028}b", "'a\\u2028b'"),
            ("\u{1F600}", "'\u{1F600}'"),
            ("\u{E0001}", "'\\U000e0001'"),
            ("\u{378}", "'\\u0378'"),
            ("é\u{a0}", "'é\\xa0'"),
            ("日本", "'日本'"),
        ] {
            assert_eq!(repr(s), want, "{s:?}");
        }
    }

    #[test]
    fn floats_read_as_python_writes_them() {
        for (x, want) in [
            (1.5e300, "1.5e+300"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (0.00012, "0.00012"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (1.0, "1.0"),
            (123.456, "123.456"),
            (0.1, "0.1"),
            (-2.5e-7, "-2.5e-07"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (1234567890123456.7, "1234567890123456.8"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn values_are_shown_as_vllm_shows_them() {
        let show = |kind, lit: &str, len| shown(kind, lit.as_bytes(), len);
        let num = Kind::Number { zero: false };
        assert_eq!(show(num, "-0", 0).as_deref(), Some("'0'"));
        assert_eq!(show(num, "-12", 0).as_deref(), Some("'-12'"));
        assert_eq!(show(num, "1E400", 0).as_deref(), Some("'inf'"));
        assert_eq!(show(num, "-1e-400", 0).as_deref(), Some("'-0.0'"));
        assert_eq!(
            show(Kind::NonFinite, "-Infinity", 0).as_deref(),
            Some("'-inf'")
        );
        assert_eq!(show(Kind::Null, "null", 0).as_deref(), Some("'None'"));
        assert_eq!(
            show(Kind::Bool(false), "false", 0).as_deref(),
            Some("'False'")
        );
        let list = Kind::Array { empty: false };
        assert_eq!(
            show(list, "[1,[2]]", 2).as_deref(),
            Some("'<list of 2 items>'")
        );
        let s = Kind::Str { empty: false };
        assert_eq!(show(s, r#""a\nb\u00e9""#, 0).as_deref(), Some("'a\\nbé'"));
        // A lone surrogate is a code point Python's `repr()` escapes (checked against the
        // render server); WTF-8 is what the scanner decodes it to.
        assert_eq!(
            show(s, "\"x\u{e9}\\ud800'\"", 0).as_deref(),
            Some("\"xé\\ud800'\"")
        );
        let raw = shown(s, b"\"\xed\xb0\x80\"", 0);
        assert_eq!(raw.as_deref(), Some("'\\udc00'"));
        let long = format!("\"{}\"", "é".repeat(250));
        let want = format!("'{}...[truncated]'", "é".repeat(200));
        assert_eq!(show(s, &long, 0), Some(want));
        let surrogates = format!("\"{}\"", "\\ud800".repeat(201));
        let want = format!("'{}...[truncated]'", "\\ud800".repeat(200));
        assert_eq!(show(s, &surrogates, 0), Some(want));
        assert_eq!(show(num, &"7".repeat(201), 0).map(|t| t.len()), Some(216));
        assert_eq!(show(Kind::Object { empty: true }, "{}", 0), None);
    }
}
