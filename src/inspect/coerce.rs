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
//! - `float`: any number but an integer too large for a float (`float()` of it overflows);
//!   a string, trimmed the same way, that is a decimal or exponent number (`".5"`, `"5."`,
//!   `"1e3"`), `inf`, `infinity` or `nan` in any case, with an optional sign and
//!   underscores anywhere but first, last or doubled.
//!
//! A string with a lone surrogate is refused by all three (pydantic cannot read it as
//! text); its bytes are never white space, digits or letters, so the grammars refuse it.
//! Strings of any length are classified by these rules: one that a byte shows to be no
//! number ([`no_number`], which reads up to the first such byte) is not decoded. Not
//! modelled: pydantic-core's refusal of an integer string of over about 4300 digits
//! (`int_parsing_size`), which mmgate takes as an `int`.

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
/// its token as written, inline when short (most are), else copied; a long string that can
/// be no number, no `Literal` word and no lone surrogate is not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    /// Not a string or a number.
    None,
    /// A token of at most [`SHORT`] bytes, and its kind.
    Short(Kind, u8, [u8; SHORT]),
    /// A longer token, and its kind.
    Long(Kind, Box<[u8]>),
    /// A string longer than [`WORDY`] bytes that a byte shows to be no number ([`no_number`])
    /// and that holds no surrogate (prose, media): not kept.
    Text,
}

/// The longest token kept inline.
pub const SHORT: usize = 24;

/// Strings up to this long as written may decode to a `Literal`'s word: no word is longer
/// than a sixth of it (an escape takes at most six bytes for one byte of text).
const WORDY: usize = 6 * MAX_WORD + 2;

/// The longest word of any `Literal` mmgate compares a string with.
pub const MAX_WORD: usize = 64;

impl Scalar {
    /// Keeps a top-level value's token (a string with its quotes); `surrogate`: whether a
    /// string holds a surrogate, escaped or encoded.
    pub fn new(kind: Kind, token: &[u8], surrogate: bool) -> Scalar {
        match kind {
            Kind::Str { .. } | Kind::Number { .. } if token.len() <= SHORT => {
                let mut bytes = [0; SHORT];
                bytes[..token.len()].copy_from_slice(token);
                Scalar::Short(kind, token.len() as u8, bytes)
            }
            Kind::Str { .. }
                if token.len() > WORDY && !surrogate && no_number(&token[1..token.len() - 1]) =>
            {
                Scalar::Text
            }
            Kind::Str { .. } | Kind::Number { .. } => Scalar::Long(kind, token.into()),
            _ => Scalar::None,
        }
    }

    /// The kept token and its kind.
    fn token(&self) -> Option<(Kind, &[u8])> {
        match self {
            Scalar::Short(kind, len, bytes) => Some((*kind, &bytes[..usize::from(*len)])),
            Scalar::Long(kind, token) => Some((*kind, token)),
            Scalar::None | Scalar::Text => None,
        }
    }

    /// A kept string's decoded (WTF-8) text.
    fn text(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        match self.token()? {
            (Kind::Str { .. }, token) => Some(scan::decoded(&token[1..token.len() - 1])),
            _ => None,
        }
    }

    /// A kept number's token.
    fn number(&self) -> Option<&[u8]> {
        match self.token()? {
            (Kind::Number { .. }, token) => Some(token),
            _ => None,
        }
    }

    /// A kept string as pydantic reads a number from it: trimmed, without underscores.
    fn number_text(&self) -> Option<String> {
        let text = self.text()?;
        let t = std::str::from_utf8(trim(&text)).ok()?;
        Some(t.chars().filter(|&c| c != '_').collect())
    }

    /// For a string that pydantic's lax `int` takes: its value's sign as -1, below, at or
    /// above zero (`Some(-1)`, `Some(-2)`, `Some(0)`, `Some(1)`); `None` otherwise.
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

    /// For a string that pydantic's lax `int` (`float`: its `float`) takes: whether its
    /// value lies within `lo..=hi` (`inf` and `nan` never do); `None` for another value.
    pub fn string_within(&self, lo: i128, hi: i128, float: bool) -> Option<bool> {
        let c = self.coerce();
        if !(if float { c.float } else { c.int }) {
            return None;
        }
        let t = self.number_text()?;
        if !float {
            // Digits with an optional fraction of zeros.
            return Some((lo..=hi).contains(&saturating_int(t.split('.').next()?)?));
        }
        let word = t.trim_start_matches(['+', '-']).to_ascii_lowercase();
        if matches!(word.as_str(), "inf" | "infinity" | "nan") {
            return Some(false);
        }
        Some(float_within(t.parse().ok()?, lo, hi))
    }

    /// For a string: whether it is one of `words` (exactly, as pydantic compares a
    /// `Literal`; none longer than [`MAX_WORD`]); `None` for another value.
    pub fn is_one_of(&self, words: &[&str]) -> Option<bool> {
        debug_assert!(words.iter().all(|w| w.len() <= MAX_WORD));
        match self {
            Scalar::Text => Some(false),
            _ => {
                let text = self.text()?;
                Some(words.iter().any(|w| w.as_bytes() == &text[..]))
            }
        }
    }

    /// For a string: whether it holds a lone surrogate (`ED A0..BF` in WTF-8); `None` for
    /// another value.
    pub fn lone_surrogate(&self) -> Option<bool> {
        match self {
            Scalar::Text => Some(false),
            _ => Some(super::has_surrogate(&self.text()?)),
        }
    }

    /// For a number: whether it lies within `lo..=hi` (exactly, as Python compares its
    /// `int` or `float` with the bounds); `None` for another value.
    pub fn number_within(&self, lo: i128, hi: i128) -> Option<bool> {
        let token = std::str::from_utf8(self.number()?).ok()?;
        if !token.contains(['.', 'e', 'E']) {
            return Some((lo..=hi).contains(&saturating_int(token)?));
        }
        // Valid JSON number text is valid Rust float text; overflow gives an infinity, as
        // `json.loads` does.
        Some(float_within(token.parse().ok()?, lo, hi))
    }

    /// For a number: whether it is written without fraction or exponent (`json.loads`
    /// makes it an `int`); `None` for another value.
    pub fn json_int(&self) -> Option<bool> {
        Some(
            !self
                .number()?
                .iter()
                .any(|c| matches!(c, b'.' | b'e' | b'E')),
        )
    }

    /// What pydantic makes of it.
    pub fn coerce(&self) -> Coerce {
        match self.token() {
            Some((kind, token)) => of(kind, token),
            None => Coerce::NONE,
        }
    }
}

/// Digits with an optional sign as an `i128`, saturated beyond its range (no bound that a
/// field declares reaches it; an open end is `i128::MIN` or `i128::MAX`).
fn saturating_int(digits: &str) -> Option<i128> {
    match digits.parse::<i128>() {
        Ok(n) => Some(n),
        Err(_)
            if !digits
                .trim_start_matches(['+', '-'])
                .bytes()
                .all(|b| b.is_ascii_digit()) =>
        {
            None
        }
        Err(_) if digits.starts_with('-') => Some(i128::MIN),
        Err(_) => Some(i128::MAX),
    }
}

/// Whether a float lies within integer bounds, compared exactly as Python compares a float
/// with an int (`inf` past every bound but an open end, `nan` within none).
fn float_within(x: f64, lo: i128, hi: i128) -> bool {
    // For integers, `lo <= x` exactly when `lo <= floor(x)`, and `x <= hi` when
    // `ceil(x) <= hi`; the casts saturate, so the infinities meet only an open end.
    !x.is_nan() && lo <= x.floor() as i128 && x.ceil() as i128 <= hi
}

/// Whether a number token is an integer literal too large for a float: Python's `float()`
/// of the `int` that `json.loads` makes of it overflows (at 2^1024 − 2^970, where it would
/// round to 2^1024), so pydantic's `float` refuses it.
pub fn overflows_float(token: &[u8]) -> bool {
    // 2^1024 has 309 digits; a shorter integer is a finite float.
    token.len() >= 309
        && !token.iter().any(|c| matches!(c, b'.' | b'e' | b'E'))
        && std::str::from_utf8(token)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .is_some_and(f64::is_infinite)
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
        IntValue::Value(saturating_int(whole).unwrap_or(i128::MAX))
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
            if no_number(raw) {
                return IntValue::Refused;
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

/// Whether a string as written holds a character no text that `int` or `float` takes can
/// hold: an ASCII one that is not a digit, sign, point, underscore, white space, exponent or
/// a letter of `inf`, `infinity` and `nan`, written as it is or as a one-letter escape. One
/// pass that stops at the first such character, or at a `\u` escape (which it does not
/// decode): a long data URL or prose is settled by its first bytes, not read whole.
fn no_number(raw: &[u8]) -> bool {
    let mut bytes = raw.iter();
    while let Some(&b) = bytes.next() {
        let c = match b {
            b'\\' => match bytes.next() {
                Some(b'u') | None => return false,
                Some(b'f') => 0x0C,
                Some(b'n') => b'\n',
                Some(b'r') => b'\r',
                Some(b't') => b'\t',
                // `\b`, `\"`, `\\` and `\/`: none is numeric.
                Some(_) => return true,
            },
            b => b,
        };
        let numeric = matches!(
            c.to_ascii_lowercase(),
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
        if c.is_ascii() && !numeric {
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
    // Bool words are short, and a byte that shows no number settles the rest unread.
    if raw.len() > 6 * 5 && no_number(raw) {
        return Coerce::NONE;
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
                float: !(fraction.is_empty() && overflows_float(token)),
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
        // pydantic-core's float-to-int test is open at both ends: −2^63 is refused too.
        int: x.fract() == 0.0 && x > -TWO_63 && x < TWO_63,
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
            "-9.2233720368547748e18",
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
            // −2^63 as a float: pydantic-core's range is open at both ends.
            "-9223372036854775808.0",
            "-9.223372036854776e18",
            "1e400",
        ] {
            assert!(!n(t).int, "not int {t}");
        }
        assert!(n("1e400").float && n("0.5").float);
    }

    #[test]
    fn long_numbers_are_judged_exactly() {
        let number = |t: &str| Scalar::new(Kind::Number { zero: false }, t.as_bytes(), false);
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
        // Past i128 too: saturated, still outside every finite bound.
        let huge = number(&format!("-{}", "9".repeat(60)));
        assert_eq!(huge.number_within(i128::MIN, 0), Some(true));
        assert_eq!(huge.number_within(i64_lo, 0), Some(false));
        // Floats of any length, as Python compares them (the real server: `stream_interval`
        // of `0.00000000000000000000000` is below its bound of 1).
        let zero = number("0.00000000000000000000000");
        assert_eq!(zero.number_within(1, i128::MAX), Some(false));
        assert_eq!(zero.json_int(), Some(false));
        assert_eq!(
            number("3.00000000000000000000000").number_within(-2, 2),
            Some(false)
        );
        assert_eq!(
            number("1.000000000000000000000001").number_within(-2, 2),
            Some(true)
        );
        assert_eq!(
            number("1e400").number_within(0, i128::MAX),
            Some(true),
            "inf, open end"
        );
        assert_eq!(number("1e400").number_within(0, 2), Some(false));
    }

    #[test]
    fn floats_compare_with_integer_bounds_exactly() {
        // 2^63 as a float is above i64::MAX, which `i64::MAX as f64` (2^63) would not show.
        let two_63 = 9_223_372_036_854_775_808.0;
        assert!(!float_within(two_63, 0, i128::from(i64::MAX)));
        assert!(float_within(two_63, 0, i128::from(i64::MAX) + 1));
        assert!(float_within(-0.5, -1, 0) && !float_within(-1.5, -1, 0));
        assert!(!float_within(f64::NAN, i128::MIN, i128::MAX));
        assert!(float_within(f64::INFINITY, 0, i128::MAX));
        assert!(!float_within(f64::NEG_INFINITY, 0, i128::MAX));
    }

    #[test]
    fn integers_too_large_for_a_float_are_no_float() {
        // Python: float(2**1024 - 2**970) overflows, float(2**1024 - 2**970 - 1) does not
        // (the real server: `float_type` from the first on; the second is accepted).
        let threshold = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792";
        let below = "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791";
        assert!(overflows_float(threshold.as_bytes()));
        assert!(overflows_float(format!("-{threshold}").as_bytes()));
        assert!(!overflows_float(below.as_bytes()));
        let n = |t: &str| of(Kind::Number { zero: false }, t.as_bytes());
        assert!(!n(threshold).float && n(threshold).int);
        assert!(n(below).float);
        // Written with a fraction or an exponent it is a float: `json.loads` makes it inf.
        assert!(n(&format!("{threshold}.0")).float);
        assert!(n("2e308").float);
    }

    #[test]
    fn long_strings_are_classified_exactly() {
        let c = |long: &str| {
            let token = format!("\"{long}\"");
            let c = of(Kind::Str { empty: false }, token.as_bytes());
            assert_eq!(c.int, string_int(token.as_bytes()), "{long}");
            (c.bool, c.int, c.float)
        };
        // A letter no number holds (pydantic: float_parsing, int_parsing).
        assert_eq!(c(&"x".repeat(200)), (None, false, false));
        assert_eq!(c(&format!("1{}", "z".repeat(200))), (None, false, false));
        assert_eq!(c(&format!("{}x\\n", "7".repeat(200))), (None, false, false));
        // A one-letter escape is read as its character: a newline pads, a quote settles it.
        assert_eq!(c(&format!("\\n{}\\n", "7".repeat(200))), (None, true, true));
        assert_eq!(
            c(&format!("\\n{}\\\"", "7".repeat(200))),
            (None, false, false)
        );
        assert_eq!(c(&format!("{}\\nx", "7".repeat(200))), (None, false, false));
        // Digits and padding of any length are numbers; a word's letters or a non-ASCII
        // character are read whole (full-width digits are no digits: int_parsing).
        assert_eq!(c(&"7".repeat(200)), (None, true, true));
        assert_eq!(
            c(&format!("{}infinity", " ".repeat(200))),
            (None, false, true)
        );
        assert_eq!(
            c(&format!("{}\u{e9}", "7".repeat(200))),
            (None, false, false)
        );
        assert_eq!(c(&"\u{ff15}".repeat(30)), (None, false, false));
        assert_eq!(
            c(&format!("\u{3000}{}\u{3000}", "5".repeat(40))),
            (None, true, true)
        );
        let escaped_word = "\\u0074\\u0072\\u0075\\u0065";
        let c = of(
            Kind::Str { empty: false },
            format!("\"{escaped_word}\"").as_bytes(),
        );
        assert_eq!(c.bool, Some(true));
    }

    #[test]
    fn long_strings_keep_what_the_type_checks_ask() {
        let string = |s: &str, surrogate: bool| {
            Scalar::new(
                Kind::Str { empty: false },
                format!("\"{s}\"").as_bytes(),
                surrogate,
            )
        };
        // A Literal's word, past the inline length (the real server: `literal_error`).
        let effort = string(&"a".repeat(23), false);
        assert_eq!(effort.is_one_of(&["low", "medium", "high"]), Some(false));
        let escaped = string("\\u006c\\u006f\\u0077", false);
        assert_eq!(escaped.is_one_of(&["low", "medium", "high"]), Some(true));
        // A lone surrogate after a long run (the real server: `string_unicode`).
        let salt = string(&format!("{}\\ud800", "a".repeat(300)), true);
        assert_eq!(salt.lone_surrogate(), Some(true));
        let pair = string(&format!("{}\\ud83d\\ude00", "a".repeat(300)), true);
        assert_eq!(pair.lone_surrogate(), Some(false));
        // A numeric string's value, however long (the real server: `seed` past its bound).
        let seed = string(&"1".repeat(23), false);
        assert_eq!(
            seed.string_within(i128::from(i64::MIN), i128::from(i64::MAX), false),
            Some(false)
        );
        let padded = string(&format!("{}7", "0".repeat(40)), false);
        assert_eq!(padded.string_within(0, 10, false), Some(true));
        assert_eq!(padded.int_string_sign(), Some(1));
        // Prose is not kept, and is no word, number or surrogate.
        let prose = string(&"Tell me about the picture. ".repeat(40), false);
        assert_eq!(prose, Scalar::Text);
        assert_eq!(prose.is_one_of(&["auto"]), Some(false));
        assert_eq!(prose.lone_surrogate(), Some(false));
        assert_eq!(prose.coerce(), Coerce::NONE);
    }
}
