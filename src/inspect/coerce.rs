//! What pydantic's lax mode makes of a top-level string or number when the field declares
//! `bool`, `int` or `float`: the rules of pydantic-core that vLLM's request models validate
//! the parsed body with, checked against pydantic in vLLM 0.31's environment.
//!
//! - `bool`: the strings `0 off f false n no` and `1 on t true y yes` in any case and
//!   without surrounding space; the numbers 0 and 1 (int or float).
//! - `int`: a string of an optional sign and digits, with single underscores between digits
//!   and optionally a fraction of zeros (`"1_000"`, `"5.0"`), surrounded by any Unicode
//!   white space; a number that is an integer, or a float with no fraction inside the
//!   64-bit range.
//! - `float`: any number; a string, trimmed the same way, that is a decimal or exponent
//!   number (`".5"`, `"5."`, `"1e3"`), `inf`, `infinity` or `nan` in any case, with an
//!   optional sign and underscores anywhere but first, last or doubled.
//!
//! A string with a lone surrogate is refused by all three (pydantic cannot read it as
//! text); its bytes are never white space, digits or letters, so the grammars refuse it.
//! Strings over 64 bytes as written are classified only as far as a linear look at their
//! bytes allows (see `MAX_SCALAR_TEXT`).

use super::scan::{self, Kind};

/// How a value fares as each scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coerce {
    /// As `bool`: its value, `None` if refused.
    pub bool: Option<bool>,
    /// Accepted as `int`.
    pub int: bool,
    /// Accepted as `float`.
    pub float: bool,
}

impl Coerce {
    /// For values that are neither strings nor numbers: only what their kind decides (see
    /// the type checks), nothing here.
    pub const NONE: Coerce = Coerce {
        bool: None,
        int: false,
        float: false,
    };
}

/// A top-level string or number, kept so that it is classified only if a type check asks:
/// short tokens (most are) as written, longer ones classified at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// Not a string or a number.
    None,
    /// A token of at most [`SHORT`] bytes, and its kind.
    Short(Kind, u8, [u8; SHORT]),
    /// A longer token, classified.
    Classified(Coerce),
    /// An integer of more than [`SHORT`] characters (beyond 10^23 in size, so outside every
    /// finite bound a field declares), classified, and whether it is negative.
    LongInt(Coerce, bool),
}

/// The longest token kept as written.
pub const SHORT: usize = 24;

impl Scalar {
    /// Keeps a top-level value's token (a string with its quotes).
    pub fn new(kind: Kind, token: &[u8]) -> Scalar {
        match kind {
            Kind::Str { .. } | Kind::Number { .. } if token.len() <= SHORT => {
                let mut bytes = [0; SHORT];
                bytes[..token.len()].copy_from_slice(token);
                Scalar::Short(kind, token.len() as u8, bytes)
            }
            Kind::Number { .. } if !token.iter().any(|c| matches!(c, b'.' | b'e' | b'E')) => {
                Scalar::LongInt(of(kind, token), token[0] == b'-')
            }
            Kind::Str { .. } | Kind::Number { .. } => Scalar::Classified(of(kind, token)),
            _ => Scalar::None,
        }
    }

    /// A kept string's decoded (WTF-8) text.
    fn text(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        let Scalar::Short(Kind::Str { .. }, len, ref bytes) = *self else {
            return None;
        };
        Some(scan::decoded(&bytes[1..usize::from(len) - 1]))
    }

    /// A kept string as pydantic reads a number from it: trimmed, without underscores.
    fn number_text(&self) -> Option<String> {
        let text = self.text()?;
        let t = std::str::from_utf8(trim(&text)).ok()?;
        Some(t.chars().filter(|&c| c != '_').collect())
    }

    /// For a kept string that pydantic's lax `int` takes: its value's sign as -1, below,
    /// at or above zero (`Some(-1)`, `Some(-2)`, `Some(0)`, `Some(1)`); `None` otherwise.
    pub fn int_string_sign(&self) -> Option<i8> {
        if !self.coerce().int {
            return None;
        }
        let x: f64 = self.number_text()?.parse().ok()?;
        Some(match x {
            -1.0 => -1,
            x if x < 0.0 => -2,
            0.0 => 0,
            _ => 1,
        })
    }

    /// For a kept string that pydantic's lax `int` (`float`: its `float`) takes: whether its
    /// value lies within `lo..=hi` (`inf` and `nan` never do); `None` for another value, or
    /// a string too long to have been kept.
    pub fn string_within(&self, lo: i128, hi: i128, float: bool) -> Option<bool> {
        let c = self.coerce();
        if !(if float { c.float } else { c.int }) {
            return None;
        }
        let t = self.number_text()?;
        if !float {
            // Digits with an optional fraction of zeros.
            let n: i128 = t.split('.').next()?.parse().ok()?;
            return Some((lo..=hi).contains(&n));
        }
        let word = t.trim_start_matches(['+', '-']).to_ascii_lowercase();
        if matches!(word.as_str(), "inf" | "infinity" | "nan") {
            return Some(false);
        }
        let x: f64 = t.parse().ok()?;
        Some(lo as f64 <= x && x <= hi as f64)
    }

    /// For a string: whether it is one of `words` (exactly, as pydantic compares a
    /// `Literal`); `None` for a string too long to have been kept, or for another value.
    pub fn is_one_of(&self, words: &[&str]) -> Option<bool> {
        let text = self.text()?;
        Some(words.iter().any(|w| w.as_bytes() == &text[..]))
    }

    /// For a string: whether it holds a lone surrogate (`ED A0..BF` in WTF-8); `None` for
    /// a string too long to have been kept, or for another value.
    pub fn lone_surrogate(&self) -> Option<bool> {
        let text = self.text()?;
        Some(super::has_surrogate(&text))
    }

    /// For a number: whether it lies within `lo..=hi` (exactly for integers, as a float
    /// otherwise); `None` for a long number that is no integer literal, or another value.
    pub fn number_within(&self, lo: i128, hi: i128) -> Option<bool> {
        // At least 10^23 either way: within only a bound that is absent (an open end).
        const LONG: i128 = 10i128.pow(23);
        if let Scalar::LongInt(_, negative) = *self {
            let end = if negative { lo } else { hi };
            return match end {
                i128::MIN | i128::MAX => Some(true),
                end if end.abs() < LONG => Some(false),
                _ => None,
            };
        }
        let Scalar::Short(Kind::Number { .. }, len, ref bytes) = *self else {
            return None;
        };
        let text = std::str::from_utf8(&bytes[..usize::from(len)]).ok()?;
        if let Ok(n) = text.parse::<i128>() {
            return Some((lo..=hi).contains(&n));
        }
        let x: f64 = text.parse().ok()?;
        // Bounds are whole numbers; as floats they are exact up to 2^53, beyond which
        // only an equal float could be misjudged.
        Some(lo as f64 <= x && x <= hi as f64)
    }

    /// For a number: whether it is written without fraction or exponent (`json.loads`
    /// makes it an `int`); `None` for a long number that is no integer literal, or another
    /// value.
    pub fn json_int(&self) -> Option<bool> {
        if let Scalar::LongInt(..) = self {
            return Some(true);
        }
        let Scalar::Short(Kind::Number { .. }, len, ref bytes) = *self else {
            return None;
        };
        Some(
            !bytes[..usize::from(len)]
                .iter()
                .any(|c| matches!(c, b'.' | b'e' | b'E')),
        )
    }

    /// What pydantic makes of it.
    pub fn coerce(&self) -> Coerce {
        match *self {
            Scalar::None => Coerce::NONE,
            Scalar::Short(kind, len, ref bytes) => of(kind, &bytes[..usize::from(len)]),
            Scalar::Classified(c) | Scalar::LongInt(c, _) => c,
        }
    }
}

/// What pydantic's lax `int` makes of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntValue {
    /// Refused.
    Refused,
    /// Taken as this (saturated beyond `i128`, which no bound reaches).
    Value(i128),
    /// Not read here (a string too long to decode).
    Unknown,
}

/// What pydantic's lax `int` makes of a value's token (a string with its quotes).
pub fn int_value(kind: Kind, token: &[u8]) -> IntValue {
    let digits = |text: &str| {
        let whole = text.split('.').next().unwrap_or("");
        match whole.parse::<i128>() {
            Ok(n) => IntValue::Value(n),
            Err(_) if whole.starts_with('-') => IntValue::Value(i128::MIN),
            Err(_) => IntValue::Value(i128::MAX),
        }
    };
    match kind {
        Kind::Bool(b) => IntValue::Value(i128::from(b)),
        Kind::Number { .. } => {
            // A valid JSON number is ASCII, and Rust's float text.
            let text = std::str::from_utf8(token).unwrap_or("0");
            if !token.iter().any(|c| matches!(c, b'.' | b'e' | b'E')) {
                return digits(text);
            }
            match of(kind, token).int {
                true => IntValue::Value(text.parse::<f64>().map_or(0, |x| x as i128)),
                false => IntValue::Refused,
            }
        }
        Kind::Str { .. } => {
            let raw = &token[1..token.len() - 1];
            if raw.len() > MAX_SCALAR_TEXT {
                return match no_number(raw) {
                    true => IntValue::Refused,
                    false => IntValue::Unknown,
                };
            }
            let decoded = scan::decoded(raw);
            if !text(&decoded).int {
                return IntValue::Refused;
            }
            match std::str::from_utf8(trim(&decoded)) {
                Ok(t) => digits(&t.replace('_', "")),
                Err(_) => IntValue::Unknown,
            }
        }
        _ => IntValue::Refused,
    }
}

/// Strings longer than this (as written, escapes and all) are not decoded: no bool word is
/// that long, and they are taken as accepted by `int` and `float` (the type checks then
/// refuse nothing on their account; only padding or zeros make such a number) unless a
/// byte shows they are no number ([`no_number`]).
const MAX_SCALAR_TEXT: usize = 64;

/// Whether a string as written holds, before its first escape, an ASCII byte no text that
/// `int` or `float` takes can hold: one that is not a digit, sign, point, underscore, white
/// space, exponent or a letter of `inf`, `infinity` and `nan`. One pass that stops at the
/// first such byte or escape: a long data URL is settled by its fifth byte, not read whole.
fn no_number(raw: &[u8]) -> bool {
    for &b in raw {
        if b == b'\\' {
            return false;
        }
        let numeric = matches!(
            b.to_ascii_lowercase(),
            b'0'..=b'9'
                | b'+'
                | b'-'
                | b'.'
                | b'_'
                | b'\t'..=b'\r'
                | b' '
                | b'e'
                | b'i'
                | b'n'
                | b'f'
                | b't'
                | b'y'
                | b'a'
        );
        if b.is_ascii() && !numeric {
            return true;
        }
    }
    false
}

/// Classifies a top-level value from its token (a string with its quotes).
pub fn of(kind: Kind, token: &[u8]) -> Coerce {
    match kind {
        Kind::Str { .. } => string(&token[1..token.len() - 1]),
        Kind::Number { .. } => number(token),
        _ => Coerce::NONE,
    }
}

/// Whether pydantic's lax `int` may take a string (its token, quotes included): `of`'s
/// `int`, without the other two readings, which are the costly ones.
pub fn string_int(token: &[u8]) -> bool {
    let raw = &token[1..token.len() - 1];
    if raw.len() > MAX_SCALAR_TEXT {
        return !no_number(raw);
    }
    // Most strings are words: an ASCII first byte that is no digit, sign, whitespace or
    // escape settles it (an integer's text starts with a digit or a sign once trimmed).
    let settled = |b: &u8| {
        b.is_ascii() && !matches!(b, b'0'..=b'9' | b'+' | b'-' | b'\t'..=b'\r' | b' ' | b'\\')
    };
    if raw.first().is_none_or(settled) {
        return false;
    }
    int_string(&scan::decoded(raw))
}

/// `text(s).int`.
fn int_string(s: &[u8]) -> bool {
    let t = trim(s);
    starts_number(t) && int_text(t)
}

/// Whether trimmed text may be a number: it starts with a digit, a sign or a point, or
/// spells inf or nan.
fn starts_number(t: &[u8]) -> bool {
    matches!(
        t.first(),
        Some(b'0'..=b'9' | b'+' | b'-' | b'.' | b'i' | b'I' | b'n' | b'N')
    )
}

fn string(raw: &[u8]) -> Coerce {
    if raw.len() > MAX_SCALAR_TEXT {
        let maybe = !no_number(raw);
        return Coerce {
            bool: None,
            int: maybe,
            float: maybe,
        };
    }
    text(&scan::decoded(raw))
}

/// A string's decoded (WTF-8) text.
pub(super) fn text(s: &[u8]) -> Coerce {
    let t = trim(s);
    let number = starts_number(t);
    Coerce {
        bool: bool_word(s),
        int: number && int_text(t),
        float: number && float_text(t),
    }
}

/// pydantic's lax reading of a boolean's word (`None`: no boolean).
pub(super) fn bool_word(s: &[u8]) -> Option<bool> {
    if s.len() > 5 {
        return None;
    }
    const FALSE: [&[u8]; 6] = [b"0", b"off", b"f", b"false", b"n", b"no"];
    const TRUE: [&[u8]; 6] = [b"1", b"on", b"t", b"true", b"y", b"yes"];
    let is = |words: [&[u8]; 6]| words.iter().any(|w| w.eq_ignore_ascii_case(s));
    if is(FALSE) {
        Some(false)
    } else if is(TRUE) {
        Some(true)
    } else {
        None
    }
}

/// Strips Unicode white space (Rust's `char::is_whitespace`, which pydantic-core uses) from
/// both ends. Text that is not UTF-8 (a lone surrogate) is left as it is.
fn trim(s: &[u8]) -> &[u8] {
    if s.is_ascii() {
        // Tab, line feed, vertical tab, form feed, carriage return and space.
        let space = |b: &u8| matches!(b, b'\t'..=b'\r' | b' ');
        let start = s.iter().position(|b| !space(b)).unwrap_or(s.len());
        let end = s.iter().rposition(|b| !space(b)).map_or(start, |i| i + 1);
        return &s[start..end];
    }
    match std::str::from_utf8(s) {
        Ok(t) => t.trim().as_bytes(),
        Err(_) => s,
    }
}

/// Digits with single underscores between them.
fn digits(s: &[u8]) -> bool {
    !s.is_empty()
        && s[0].is_ascii_digit()
        && s[s.len() - 1].is_ascii_digit()
        && s.iter().all(|&b| b.is_ascii_digit() || b == b'_')
        && !s.windows(2).any(|w| w == b"__")
}

fn int_text(s: &[u8]) -> bool {
    let s = s
        .strip_prefix(b"+")
        .or_else(|| s.strip_prefix(b"-"))
        .unwrap_or(s);
    let (whole, fraction) = match s.iter().position(|&b| b == b'.') {
        Some(dot) => (&s[..dot], Some(&s[dot + 1..])),
        None => (s, None),
    };
    digits(whole) && fraction.is_none_or(|f| !f.is_empty() && f.iter().all(|&b| b == b'0'))
}

fn float_text(s: &[u8]) -> bool {
    if s.first() == Some(&b'_') || s.last() == Some(&b'_') || s.windows(2).any(|w| w == b"__") {
        return false;
    }
    // Underscores are then dropped wherever they are (as pydantic-core does).
    let mut bytes = s.iter().copied().filter(|&b| b != b'_').peekable();
    if matches!(bytes.peek(), Some(b'+' | b'-')) {
        bytes.next();
    }
    if [&b"inf"[..], b"infinity", b"nan"]
        .iter()
        .any(|w| is_word(bytes.clone(), w))
    {
        return true;
    }
    // Mantissa: digits with at most one point and at least one digit; then an optional
    // exponent: `e`, an optional sign and at least one digit.
    let (mut digits, mut points) = (0, 0);
    while let Some(&b) = bytes.peek() {
        match b {
            b'0'..=b'9' => digits += 1,
            b'.' => points += 1,
            _ => break,
        }
        bytes.next();
    }
    if digits == 0 || points > 1 {
        return false;
    }
    match bytes.next() {
        None => true,
        Some(b'e' | b'E') => {
            if matches!(bytes.peek(), Some(b'+' | b'-')) {
                bytes.next();
            }
            let mut exponent = 0;
            for b in bytes {
                if !b.is_ascii_digit() {
                    return false;
                }
                exponent += 1;
            }
            exponent > 0
        }
        Some(_) => false,
    }
}

/// Whether `bytes` spell `word` (lower case) in any case, and nothing more.
fn is_word(mut bytes: impl Iterator<Item = u8>, word: &[u8]) -> bool {
    word.iter()
        .all(|&w| bytes.next().is_some_and(|b| b.to_ascii_lowercase() == w))
        && bytes.next().is_none()
}

/// A JSON number token (validated by the scanner).
fn number(token: &[u8]) -> Coerce {
    if !token.iter().any(|&b| matches!(b, b'e' | b'E')) {
        // `-?int(.frac)?`: integral when the fraction is absent or all zeros, and then worth
        // its integer part (a Python int of any size without a fraction).
        let dot = token.iter().position(|&b| b == b'.').unwrap_or(token.len());
        let (whole, fraction) = token.split_at(dot);
        // A fraction that is not all zeros keeps the value off every integer only when its
        // digits fit a double exactly (15 significant digits): `1.00000000000000001` is
        // parsed to 1.0, an integer.
        let whole_fraction = fraction.iter().skip(1).all(|&b| b == b'0');
        if !whole_fraction && significant_digits(token) <= 15 {
            return Coerce {
                bool: None,
                int: false,
                float: true,
            };
        }
        if whole_fraction && (fraction.is_empty() || whole.len() <= 18) {
            let bool = match whole {
                b"0" | b"-0" => Some(false),
                b"1" => Some(true),
                _ => None,
            };
            return Coerce {
                bool,
                int: true,
                float: true,
            };
        }
    }
    // Valid JSON number text is valid Rust float text; overflow gives an infinity.
    let x: f64 = std::str::from_utf8(token)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(f64::NAN);
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    Coerce {
        bool: if x == 0.0 {
            Some(false)
        } else if x == 1.0 {
            Some(true)
        } else {
            None
        },
        int: x.is_finite() && x.fract() == 0.0 && (-TWO_63..TWO_63).contains(&x),
        float: true,
    }
}

/// The significant digits of a number token without an exponent (leading and trailing
/// zeros left out).
fn significant_digits(token: &[u8]) -> usize {
    let digits = || token.iter().filter(|b| b.is_ascii_digit());
    let leading = digits().take_while(|&&b| b == b'0').count();
    let trailing = digits().rev().take_while(|&&b| b == b'0').count();
    digits().count().saturating_sub(leading + trailing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn str_token(s: &str) -> Vec<u8> {
        format!("\"{s}\"").into_bytes()
    }

    /// The tables are pydantic's answers in vLLM 0.31's environment
    /// (`TypeAdapter(bool|int|float).validate_python(json.loads(token))`).
    #[test]
    fn strings_coerce_as_pydantic_coerces_them() {
        let s = |t: &str| {
            let kind = Kind::Str {
                empty: t.is_empty(),
            };
            let c = of(kind, &str_token(t));
            assert_eq!(string_int(&str_token(t)), c.int, "{t}");
            c
        };
        for (t, b) in [
            ("true", true),
            ("True", true),
            ("1", true),
            ("yes", true),
            ("Y", true),
        ] {
            assert_eq!(s(t).bool, Some(b), "{t}");
        }
        for t in ["ON", "t"] {
            assert_eq!(s(t).bool, Some(true), "{t}");
        }
        for t in ["off", "0", "F", "n", "no", "false"] {
            assert_eq!(s(t).bool, Some(false), "{t}");
        }
        for t in [
            " true",
            "true ",
            "2",
            "",
            "1.0",
            "tru",
            "\\u0074rue\\u0000",
            "ｔrue",
            "\\ud800",
        ] {
            assert_eq!(s(t).bool, None, "{t}");
        }
        assert_eq!(s("\\u0074rue").bool, Some(true));

        let ints = [
            "1",
            "0",
            "2",
            "1.0",
            "5",
            " 5 ",
            "+5",
            "-5",
            "5.0",
            "1_000",
            "\\t5\\n",
            "00",
            "007",
            "9223372036854775808",
            "12345678901234567890123",
            "-0",
            "+0.0",
            "\u{a0}5",
            "\u{2003}5",
            "\\u000b5",
            "\\u000c5",
            "\u{85}5",
            "5\\r",
            "0_0",
            "1.000",
        ];
        let not_ints = [
            "true",
            "",
            "5.5",
            "0x10",
            "1e3",
            "inf",
            "nan",
            " 1.5 ",
            ".5",
            "5.",
            "٣",
            "1 000",
            "  ",
            "5\\u0000",
            "_5",
            "5_",
            "1__0",
            "+_5",
            "5_.5",
            "-_0",
            "0.0_0",
            "1.",
            "1.e0",
            "1.0000000000000000000001",
            "\\u001c5",
            "\\ud800",
            "1\\ud800",
            "0b1",
        ];
        let floats = [
            "1",
            "0.5",
            "5.5",
            "1_000",
            "1e3",
            "inf",
            "-inf",
            "nan",
            "NaN",
            "Infinity",
            "infinity",
            " 1.5 ",
            "1.5e3",
            ".5",
            "5.",
            "1e400",
            "5_5.5",
            "+_5",
            "5._5",
            "1_e5",
            "1e_5",
            "-_0",
            "1E+5",
            "+.5",
            "-.5e-3",
            "5.e3",
            "inF",
            "+inf",
            "-nan",
            "infinity ",
            "INFINITY",
            "1.0000000000000000000001",
            "10e-1",
            "0e0",
            "1.e0",
        ];
        let not_floats = [
            "true", "", "0x10", "٣", "1 000", "  ", "5\\u0000", "0b1", "\\u001c5", "_5", "5_",
            "1__0", "1e5_", "+", "-", ".", "e5", "1e", "1e+", "infini", "nan(1)", "5.0.0",
            "\\ud800", "1\\ud800",
        ];
        for t in ints {
            assert!(s(t).int, "int {t:?}");
        }
        for t in not_ints {
            assert!(!s(t).int, "not int {t:?}");
        }
        for t in floats.iter().chain(&ints) {
            assert!(s(t).float, "float {t:?}");
        }
        for t in not_floats {
            assert!(!s(t).float, "not float {t:?}");
        }
    }

    #[test]
    fn numbers_coerce_as_pydantic_coerces_them() {
        let n = |t: &str| of(Kind::Number { zero: false }, t.as_bytes());
        for (t, b) in [
            ("1", true),
            ("0", false),
            ("-0", false),
            ("1.0", true),
            ("0.0", false),
        ] {
            assert_eq!(n(t).bool, Some(b), "{t}");
        }
        for t in ["-0.0", "1e0", "0e5"] {
            assert!(n(t).bool.is_some(), "{t}");
        }
        for t in [
            "2",
            "0.5",
            "5.0",
            "-1",
            "12345678901234567890123",
            "1e20",
            "1e400",
            "10",
        ] {
            assert_eq!(n(t).bool, None, "{t}");
        }
        for t in [
            "1",
            "-7",
            "12345678901234567890123",
            "1.0",
            "1e0",
            "1.0e2",
            "9.2e18",
            "-0.0",
            // Python parses these to whole doubles (more digits than a double holds).
            "1.00000000000000001",
            "0.99999999999999999",
            "9007199254740993.5",
        ] {
            assert!(n(t).int, "int {t}");
        }
        assert_eq!(n("1.00000000000000001").bool, Some(true));
        assert!(!n("0.100000000000001").int && !n("123456789012345.6").int);
        for t in [
            "0.5",
            "5.5",
            "1e20",
            "9.3e18",
            "-9.3e18",
            "9223372036854775807.0",
            "1e400",
        ] {
            assert!(!n(t).int, "not int {t}");
        }
        assert!(n("1e400").float && n("0.5").float);
    }

    #[test]
    fn integers_past_short_lie_outside_every_finite_bound() {
        let number = |t: &str| Scalar::new(Kind::Number { zero: false }, t.as_bytes());
        let (i64_lo, i64_hi) = (i128::from(i64::MIN), i128::from(i64::MAX));
        let big = number("1000000000000000000000000");
        assert_eq!(big.number_within(i64_lo, i64_hi), Some(false));
        assert_eq!(
            big.number_within(-1, i128::MAX),
            Some(true),
            "no upper bound"
        );
        assert_eq!(big.json_int(), Some(true));
        assert!(big.coerce().int && big.coerce().float);
        let small = number("-100000000000000000000000");
        assert_eq!(small.number_within(0, i128::MAX), Some(false));
        assert_eq!(small.number_within(i128::MIN, 5), Some(true));
        // A long float is left unjudged, as before.
        let long_float = number("1.000000000000000000000001");
        assert_eq!(long_float.number_within(-2, 2), None);
    }

    #[test]
    fn long_strings_are_refused_as_numbers_only_when_a_byte_shows_it() {
        let c = |long: &str| {
            let token = format!("\"{long}\"");
            let c = of(Kind::Str { empty: false }, token.as_bytes());
            assert_eq!(c.int, string_int(token.as_bytes()), "{long}");
            (c.bool, c.int, c.float)
        };
        // A letter no number holds (pydantic: float_parsing, int_parsing).
        assert_eq!(c(&"x".repeat(MAX_SCALAR_TEXT + 1)), (None, false, false));
        assert_eq!(
            c(&format!("1{}", "z".repeat(MAX_SCALAR_TEXT))),
            (None, false, false)
        );
        // Before an escape, it is as written (the real server: int_parsing).
        assert_eq!(
            c(&format!("{}x\\n", "7".repeat(MAX_SCALAR_TEXT))),
            (None, false, false)
        );
        // Digits, padding, an escape first or a word's letters: taken as accepted.
        for long in [
            "7".repeat(MAX_SCALAR_TEXT + 1),
            format!("{}\\n", "7".repeat(MAX_SCALAR_TEXT)),
            format!("{}\\nx", "7".repeat(MAX_SCALAR_TEXT)),
            format!("{}infinity", " ".repeat(MAX_SCALAR_TEXT)),
            format!("{}\u{e9}", "7".repeat(MAX_SCALAR_TEXT)),
        ] {
            assert_eq!(c(&long), (None, true, true), "{long}");
        }
        let escaped_word = "\\u0074\\u0072\\u0075\\u0065";
        let c = of(
            Kind::Str { empty: false },
            format!("\"{escaped_word}\"").as_bytes(),
        );
        assert_eq!(c.bool, Some(true));
    }
}
