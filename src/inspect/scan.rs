//! A validating JSON scanner with the grammar of Python's `json` module (C scanner, strict).
//!
//! It never builds a value: it checks the grammar, tracks nesting depth iteratively, and
//! reports the spans and kinds that the gate needs. Accepted beyond RFC 8259, as Python
//! accepts it: `NaN`, `Infinity`, `-Infinity`, integers and floats of any size, lone
//! surrogate escapes. Rejected as Python rejects it: control characters in strings, bad
//! escapes, leading zeros, comments, trailing commas, whitespace other than `[ \t\n\r]`.
//! Input is UTF-8/WTF-8 text as `decode` leaves it: the non-ASCII bytes of strings are
//! validated here as they are met (the scan and the validation share one pass, and base64
//! media never needs the second); a non-ASCII byte anywhere else is a syntax error, and the
//! caller decides whether the rest of the text would have failed to decode first.

use super::decode::validate_wtf8;
use super::plain::plain_run;

/// Python refuses to convert integers with more digits than this (`sys.int_info.str_digits_check_threshold`
/// default, 3.11+); `json.loads` then raises `ValueError`.
pub const MAX_INT_DIGITS: usize = 4300;

/// What went wrong, and where (an offset in the decoded text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// The grammar was violated.
    #[error("invalid JSON at offset {offset}: {what}")]
    Invalid {
        /// Offset in the decoded text.
        offset: usize,
        /// What Python's parser expected or refused.
        what: &'static str,
    },
    /// Nesting deeper than the configured recursion limit.
    #[error("JSON nesting deeper than {limit} levels at offset {offset}")]
    TooDeep {
        /// Offset in the decoded text.
        offset: usize,
        /// The configured limit.
        limit: usize,
        /// What was to open one level too many: `{`, `[`, or the first byte of `NaN`,
        /// `Infinity` or `-Infinity` (a call to Python's `parse_constant`).
        opens: u8,
    },
    /// Bytes that are not UTF-8 (WTF-8) text inside a string. The text is validated as the
    /// scanner meets it, so this is the first undecodable byte: callers report it as the
    /// decoding error Python raises before it parses anything.
    #[error("undecodable text at offset {offset}")]
    NotText {
        /// Offset in the text of the first undecodable byte.
        offset: usize,
    },
    /// An integer literal longer than Python converts.
    #[error("integer literal with more than {MAX_INT_DIGITS} digits at offset {offset}")]
    IntTooLong {
        /// Offset in the decoded text.
        offset: usize,
        /// Its digits.
        digits: usize,
    },
    /// More members than mmgate records (in the top-level object, or inside its members:
    /// [`MAX_RECORDED`]): a bound on the memory a body can take.
    #[error("more than {limit} members {scope} at offset {offset}")]
    TooManyMembers {
        /// Offset in the decoded text.
        offset: usize,
        /// The bound.
        limit: usize,
        /// Where: in the top-level object, or inside its members.
        scope: &'static str,
    },
}

/// CPython's error for a string without its closing quote, which names the opening one.
fn unterminated(quote: usize) -> SyntaxError {
    SyntaxError::Invalid {
        offset: quote,
        what: "Unterminated string starting at",
    }
}

impl SyntaxError {
    /// Offset in the decoded text where the error was found.
    pub fn offset(&self) -> usize {
        match *self {
            SyntaxError::Invalid { offset, .. }
            | SyntaxError::TooDeep { offset, .. }
            | SyntaxError::NotText { offset }
            | SyntaxError::IntTooLong { offset, .. }
            | SyntaxError::TooManyMembers { offset, .. } => offset,
        }
    }
}

/// The shape of a scanned value, enough to evaluate Python truthiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number; `zero` is whether Python's value compares equal to zero.
    Number {
        /// Whether the parsed value is zero (int 0, or a float that is or underflows to 0.0).
        zero: bool,
    },
    /// `NaN`, `Infinity`, `-Infinity` (all truthy).
    NonFinite,
    /// A string; whether it is empty.
    Str {
        /// `""`
        empty: bool,
    },
    /// An array; whether it is empty.
    Array {
        /// `[]`
        empty: bool,
    },
    /// An object; whether it has no members.
    Object {
        /// `{}`
        empty: bool,
    },
}

impl Kind {
    /// Python truthiness of the value.
    pub fn truthy(self) -> bool {
        match self {
            Kind::Null => false,
            Kind::Bool(b) => b,
            Kind::Number { zero } => !zero,
            Kind::NonFinite => true,
            Kind::Str { empty } | Kind::Array { empty } | Kind::Object { empty } => !empty,
        }
    }

    /// The JSON type name, for messages.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool(_) => "boolean",
            Kind::Number { .. } | Kind::NonFinite => "number",
            Kind::Str { .. } => "string",
            Kind::Array { .. } => "array",
            Kind::Object { .. } => "object",
        }
    }
}

/// A set of JSON kinds, without their details: the kinds of an array's elements, or those
/// a declared element type may accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindSet(u16);

impl KindSet {
    /// No kind.
    pub const NONE: KindSet = KindSet(0);
    /// `null`
    pub const NULL: KindSet = KindSet(1);
    /// `true`, `false`
    pub const BOOL: KindSet = KindSet(1 << 1);
    /// Finite numbers.
    pub const NUMBER: KindSet = KindSet(1 << 2);
    /// `NaN`, `Infinity`, `-Infinity`
    pub const NON_FINITE: KindSet = KindSet(1 << 3);
    /// Strings.
    pub const STR: KindSet = KindSet(1 << 4);
    /// Arrays.
    pub const ARRAY: KindSet = KindSet(1 << 5);
    /// Objects.
    pub const OBJECT: KindSet = KindSet(1 << 6);
    /// Not a kind: a number or string that pydantic's `int` refuses (`1.5`, `"a"`). Found
    /// beside `NUMBER` or `STR`; a declared element type other than `int` may accept it.
    pub const NOT_INT: KindSet = KindSet(1 << 7);
    /// Not a kind: an integer literal too large for a float (`float()` of it overflows),
    /// which pydantic's `float` refuses. Found beside `NUMBER`; `int` accepts it.
    pub const NOT_FLOAT: KindSet = KindSet(1 << 8);
    /// Not a kind: a number written with a fraction or an exponent (`1.0`, `2e3`), which
    /// `json.loads` makes a Python `float`. Pydantic's `int` takes an integral one in lax
    /// mode only, which its smart unions rank below an exact match. Found beside `NUMBER`;
    /// [`KindSet::within`] ignores it.
    pub const FLOAT_LITERAL: KindSet = KindSet(1 << 9);
    /// Every kind.
    pub const ANY: KindSet = KindSet(0x1ff);

    /// Both sets.
    pub const fn or(self, other: KindSet) -> KindSet {
        KindSet(self.0 | other.0)
    }

    /// The set of one kind.
    pub fn of(kind: Kind) -> KindSet {
        match kind {
            Kind::Null => KindSet::NULL,
            Kind::Bool(_) => KindSet::BOOL,
            Kind::Number { .. } => KindSet::NUMBER,
            Kind::NonFinite => KindSet::NON_FINITE,
            Kind::Str { .. } => KindSet::STR,
            Kind::Array { .. } => KindSet::ARRAY,
            Kind::Object { .. } => KindSet::OBJECT,
        }
    }

    /// Whether every kind of this set is in `other` (`FLOAT_LITERAL` aside: it refuses
    /// nothing).
    pub fn within(self, other: KindSet) -> bool {
        self.0 & !KindSet::FLOAT_LITERAL.0 & !other.0 == 0
    }

    /// Whether every kind and mark of this set, `FLOAT_LITERAL` included, is in `other`.
    pub fn exactly_within(self, other: KindSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether this set holds all of `other`'s kinds and marks.
    pub fn has(self, other: KindSet) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A string token: the span of its contents (without quotes) in the text.
#[derive(Debug, Clone, Copy)]
pub struct StrSpan {
    /// First byte after the opening quote.
    pub start: usize,
    /// Offset of the closing quote.
    pub end: usize,
    /// Whether the contents hold a backslash escape.
    pub escaped: bool,
}

/// The scanner: a cursor over validated text.
pub struct Scanner<'a> {
    b: &'a [u8],
    /// Current offset.
    pub pos: usize,
    max_depth: usize,
    stack: Vec<bool>,
    inner: KindSet,
    inner_len: usize,
    /// Whether the last string scanned holds a surrogate: a `\uD800`..`\uDFFF` escape or
    /// an encoded one (`ED A0..BF`, which `surrogatepass` decodes).
    surrogate: bool,
    /// Whether `NaN` and the infinities take a level (the decoder's `parse_constant` call).
    constants_nest: bool,
    /// See [`Scanner::deepest`].
    deepest: usize,
    /// Members recorded so far in objects read as tagged types ([`Scanner::record`]).
    recorded: usize,
    /// And in those read leniently ([`Scanner::record_lenient`]).
    lenient: usize,
}

/// The most values recorded inside the top-level members of one body: the members of
/// the gated fields and of their object values (`media_io_kwargs`' modalities), of the
/// objects read as tagged types (a message, a Responses item, a tool, a score input ...
/// and the objects in their lists), and `include` words. Each is kept with its key and
/// kinds; real requests hold a few thousand. (The objects read leniently, a one-model
/// member and the objects in object fields, have a budget of their own, past which they
/// stop being recorded instead.)
pub const MAX_RECORDED: usize = 100_000;

impl<'a> Scanner<'a> {
    /// A scanner over `text` that refuses nesting deeper than `max_depth` containers.
    pub fn new(text: &'a [u8], max_depth: usize) -> Self {
        Scanner {
            b: text,
            pos: 0,
            max_depth,
            stack: Vec::new(),
            inner: KindSet::NONE,
            inner_len: 0,
            surrogate: false,
            constants_nest: true,
            deepest: 0,
            recorded: 0,
            lenient: 0,
        }
    }

    /// Counts one value recorded leniently (in a budget of its own, so that it takes none
    /// from [`Scanner::record`]): whether it may be, at most [`MAX_RECORDED`] in the body.
    pub fn record_lenient(&mut self) -> bool {
        self.lenient += 1;
        self.lenient <= MAX_RECORDED
    }

    /// Counts one value recorded inside a top-level member, at most [`MAX_RECORDED`] in
    /// the body.
    pub fn record(&mut self) -> Result<(), SyntaxError> {
        self.recorded += 1;
        if self.recorded <= MAX_RECORDED {
            return Ok(());
        }
        Err(SyntaxError::TooManyMembers {
            offset: self.pos,
            limit: MAX_RECORDED,
            scope: "inside the top-level members mmgate reads",
        })
    }

    /// The kinds of the elements of the array scanned last ([`Scanner::value`] or
    /// [`Scanner::elements`]); for an object, of its member values.
    pub fn inner(&self) -> KindSet {
        self.inner
    }

    /// How many elements the array scanned last has (as [`Scanner::inner`]).
    pub fn inner_len(&self) -> usize {
        self.inner_len
    }

    /// The text being scanned.
    pub fn text(&self) -> &'a [u8] {
        self.b
    }

    fn err(&self, what: &'static str) -> SyntaxError {
        SyntaxError::Invalid {
            offset: self.pos,
            what,
        }
    }

    /// Skips Python's JSON whitespace, `[ \t\n\r]*`.
    #[inline]
    pub fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.pos += 1;
        }
    }

    /// The byte at the cursor, if any.
    #[inline]
    pub fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Consumes `c` or fails with `what`.
    #[inline]
    pub fn expect(&mut self, c: u8, what: &'static str) -> Result<(), SyntaxError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(what))
        }
    }

    /// Whether the last string scanned holds a surrogate, escaped or encoded.
    pub fn surrogate(&self) -> bool {
        self.surrogate
    }

    /// Scans a string token starting at the opening quote.
    pub fn string(&mut self) -> Result<StrSpan, SyntaxError> {
        self.expect(b'"', "Expecting '\"'")?;
        let start = self.pos;
        let mut escaped = false;
        self.surrogate = false;
        loop {
            let run = plain_run(self.b, self.pos);
            if run.non_ascii {
                self.surrogate |= validate_wtf8(&self.b[self.pos..run.end]).map_err(|o| {
                    SyntaxError::NotText {
                        offset: self.pos + o,
                    }
                })?;
            }
            let i = run.end;
            self.pos = i;
            match self.b.get(i) {
                // Python names the opening quote.
                None => return Err(unterminated(start - 1)),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(StrSpan {
                        start,
                        end: i,
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    self.escape(start - 1)?;
                }
                Some(_) => return Err(self.err("Invalid control character at")),
            }
        }
    }

    /// The escape at the cursor (a backslash) in the string opened at `quote`.
    fn escape(&mut self, quote: usize) -> Result<(), SyntaxError> {
        match self.b.get(self.pos + 1) {
            None => Err(unterminated(quote)),
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.pos += 2;
                Ok(())
            }
            Some(b'u') => {
                // CPython also wants a character after the four digits (`end >= len`).
                let hex = self.b.get(self.pos + 2..self.pos + 6);
                if self.pos + 6 < self.b.len()
                    && hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
                {
                    self.surrogate |= hex.is_some_and(|h| {
                        h[0].eq_ignore_ascii_case(&b'd')
                            && matches!(h[1], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
                    });
                    self.pos += 6;
                    Ok(())
                } else {
                    self.pos += 1;
                    Err(self.err("Invalid \\uXXXX escape"))
                }
            }
            _ => Err(self.err("Invalid \\escape")),
        }
    }

    fn literal(&mut self, word: &'static [u8], kind: Kind) -> Result<Kind, SyntaxError> {
        if self.b[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(kind)
        } else {
            Err(self.err("Expecting value"))
        }
    }

    fn number(&mut self) -> Result<Kind, SyntaxError> {
        let b = self.b;
        let start = self.pos;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        let int_start = i;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => return Err(self.err("Expecting value")),
        }
        let int_end = i;
        let mut is_float = false;
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            is_float = true;
            i += 1;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if b.get(j).is_some_and(u8::is_ascii_digit) {
                is_float = true;
                while b.get(j).is_some_and(u8::is_ascii_digit) {
                    j += 1;
                }
                i = j;
            }
        }
        self.pos = i;
        let zero = if is_float {
            float_is_zero(&b[start..i])
        } else {
            if int_end - int_start > MAX_INT_DIGITS {
                return Err(SyntaxError::IntTooLong {
                    offset: start,
                    digits: int_end - int_start,
                });
            }
            b[int_start] == b'0'
        };
        Ok(Kind::Number { zero })
    }

    /// Scans any value at `depth` (the level a container there would have) and returns its
    /// kind; containers are walked iteratively.
    pub fn value(&mut self, depth: usize) -> Result<Kind, SyntaxError> {
        match self.peek() {
            Some(b'{' | b'[') => self.container(depth),
            Some(b'"') => {
                let s = self.string()?;
                Ok(Kind::Str {
                    empty: s.start == s.end,
                })
            }
            Some(b'n') => self.literal(b"null", Kind::Null),
            Some(b't') => self.literal(b"true", Kind::Bool(true)),
            Some(b'f') => self.literal(b"false", Kind::Bool(false)),
            // CPython makes these floats by calling `parse_constant`, a Python call that
            // takes one recursion level more than other scalars: at `depth` they count as a
            // container would (the real server refuses NaN inside 970 containers, not 0).
            // (Only a whole word is a call: `Nan` is "Expecting value" at any depth.)
            Some(b'N') => self.constant(b"NaN", depth),
            Some(b'I') => self.constant(b"Infinity", depth),
            Some(b'-') if self.b.get(self.pos + 1) == Some(&b'I') => {
                self.constant(b"-Infinity", depth)
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("Expecting value")),
        }
    }

    fn constant(&mut self, word: &'static [u8], depth: usize) -> Result<Kind, SyntaxError> {
        let start = self.pos;
        let kind = self.literal(word, Kind::NonFinite)?;
        if self.constants_nest {
            self.enter_at(depth, start)?;
        }
        Ok(kind)
    }

    /// Counts only containers as levels (as Python's JSON encoder does), not the constants'
    /// `parse_constant` calls.
    pub fn containers_only(mut self) -> Self {
        self.constants_nest = false;
        self
    }

    /// Enters the container at the cursor, at `depth`.
    fn enter(&mut self, depth: usize) -> Result<(), SyntaxError> {
        self.enter_at(depth, self.pos)?;
        self.deepest = self.deepest.max(depth);
        Ok(())
    }

    /// The level of the deepest container entered so far (the top-level one is 1).
    pub fn deepest(&self) -> usize {
        self.deepest
    }

    /// Enters a level at `depth` for the value at `offset`.
    fn enter_at(&mut self, depth: usize, offset: usize) -> Result<(), SyntaxError> {
        if depth > self.max_depth {
            return Err(SyntaxError::TooDeep {
                offset,
                limit: self.max_depth,
                opens: self.b[offset],
            });
        }
        Ok(())
    }

    /// Walks a container at `depth` (1 = the top-level object) to its end.
    fn container(&mut self, depth: usize) -> Result<Kind, SyntaxError> {
        let is_object = self.peek() == Some(b'{');
        self.stack.clear();
        let mut empty_outer = true;
        let mut inner = KindSet::NONE;
        let mut len = 0;
        // Open the outer container, then loop: each iteration is "just opened" or "after value".
        let mut opened = true;
        self.enter(depth)?;
        self.pos += 1;
        self.stack.push(is_object);
        loop {
            let obj = *self.stack.last().unwrap_or(&false);
            self.ws();
            if opened {
                let close = if obj { b'}' } else { b']' };
                if self.peek() == Some(close) {
                    self.pos += 1;
                    self.stack.pop();
                    if self.stack.is_empty() {
                        (self.inner, self.inner_len) = (KindSet::NONE, 0);
                        return Ok(container_kind(is_object, true));
                    }
                    opened = false;
                    continue;
                }
                if self.stack.len() == 1 {
                    empty_outer = false;
                }
            } else {
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.ws();
                    }
                    Some(b'}') if obj => {
                        self.pos += 1;
                        self.stack.pop();
                        if self.stack.is_empty() {
                            (self.inner, self.inner_len) = (inner, len);
                            return Ok(container_kind(is_object, empty_outer));
                        }
                        continue;
                    }
                    Some(b']') if !obj => {
                        self.pos += 1;
                        self.stack.pop();
                        if self.stack.is_empty() {
                            (self.inner, self.inner_len) = (inner, len);
                            return Ok(container_kind(is_object, empty_outer));
                        }
                        continue;
                    }
                    _ if obj => return Err(self.err("Expecting ',' delimiter")),
                    _ => return Err(self.err("Expecting ',' delimiter")),
                }
            }
            if obj {
                if self.peek() != Some(b'"') {
                    return Err(self.err("Expecting property name enclosed in double quotes"));
                }
                self.string()?;
                self.ws();
                self.expect(b':', "Expecting ':' delimiter")?;
                self.ws();
            }
            let outer = self.stack.len() == 1;
            len += usize::from(outer);
            match self.peek() {
                Some(c @ (b'{' | b'[')) => {
                    self.enter(depth + self.stack.len())?;
                    self.pos += 1;
                    self.stack.push(c == b'{');
                    opened = true;
                    if outer {
                        inner = inner.or(if c == b'{' {
                            KindSet::OBJECT
                        } else {
                            KindSet::ARRAY
                        });
                    }
                }
                _ => {
                    let start = self.pos;
                    let kind = self.value(depth + self.stack.len())?;
                    opened = false;
                    if outer {
                        inner = inner.or(KindSet::of(kind));
                        inner = inner.or(refined(kind, &self.b[start..self.pos], inner));
                    }
                }
            }
        }
    }

    /// Walks the members of the object at the cursor (at `depth`), calling `on_member` with
    /// each key; `on_member` must consume the value (e.g. with [`Scanner::value`]) and may
    /// look at it on the way. Returns whether the object was empty.
    pub fn members<F>(&mut self, depth: usize, mut on_member: F) -> Result<bool, SyntaxError>
    where
        F: FnMut(&mut Self, StrSpan) -> Result<(), SyntaxError>,
    {
        self.enter(depth)?;
        self.expect(b'{', "Expecting value")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(true);
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.err("Expecting property name enclosed in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            self.expect(b':', "Expecting ':' delimiter")?;
            self.ws();
            on_member(self, key)?;
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(false);
                }
                _ => return Err(self.err("Expecting ',' delimiter")),
            }
        }
    }

    /// Walks the elements of the array at the cursor (at `depth`), calling `on_element` for
    /// each; `on_element` must consume the element (e.g. with [`Scanner::value`]) and return
    /// its kind. Returns whether the array was empty.
    pub fn elements<F>(&mut self, depth: usize, mut on_element: F) -> Result<bool, SyntaxError>
    where
        F: FnMut(&mut Self) -> Result<Kind, SyntaxError>,
    {
        self.enter(depth)?;
        self.expect(b'[', "Expecting value")?;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            (self.inner, self.inner_len) = (KindSet::NONE, 0);
            return Ok(true);
        }
        let (mut inner, mut len) = (KindSet::NONE, 0);
        loop {
            inner = inner.or(self.kinds_at());
            len += 1;
            let start = self.pos;
            let kind = on_element(self)?;
            inner = inner.or(refined(kind, &self.b[start..self.pos], inner));
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.pos += 1;
                    (self.inner, self.inner_len) = (inner, len);
                    return Ok(false);
                }
                _ => return Err(self.err("Expecting ',' delimiter")),
            }
        }
    }
}

impl Scanner<'_> {
    /// The kinds of the value just scanned from `start` (`kind`), `NOT_INT` and
    /// `NOT_FLOAT` included.
    pub fn kinds(&self, kind: Kind, start: usize) -> KindSet {
        KindSet::of(kind).or(refined(kind, &self.b[start..self.pos], KindSet::NONE))
    }

    /// The kind of the value at the cursor, from its first bytes (none if it is not a value).
    fn kinds_at(&self) -> KindSet {
        match self.peek() {
            Some(b'{') => KindSet::OBJECT,
            Some(b'[') => KindSet::ARRAY,
            Some(b'"') => KindSet::STR,
            Some(b'n') => KindSet::NULL,
            Some(b't' | b'f') => KindSet::BOOL,
            Some(b'N' | b'I') => KindSet::NON_FINITE,
            Some(b'-') if self.b.get(self.pos + 1) == Some(&b'I') => KindSet::NON_FINITE,
            Some(b'-' | b'0'..=b'9') => KindSet::NUMBER,
            _ => KindSet::NONE,
        }
    }
}

/// `NOT_INT` for a number or string token that pydantic's lax `int` refuses, `NOT_FLOAT`
/// for an integer literal its `float` refuses, and `FLOAT_LITERAL` for a number written with
/// a fraction or exponent; none is looked for when `known` has it already.
fn refined(kind: Kind, token: &[u8], known: KindSet) -> KindSet {
    let int = match kind {
        Kind::Str { .. } if !known.has(KindSet::NOT_INT) => super::coerce::string_int(token),
        Kind::Number { .. } => return refined_number(kind, token, known),
        _ => true,
    };
    if int {
        KindSet::NONE
    } else {
        KindSet::NOT_INT
    }
}

/// [`refined`] for a number token, read once for the common case: digits alone (a token id)
/// are an integer written as one, which any float holds short of 309 digits.
fn refined_number(kind: Kind, token: &[u8], known: KindSet) -> KindSet {
    let digits = token.iter().all(u8::is_ascii_digit);
    let mut marks = KindSet::NONE;
    if !known.has(KindSet::NOT_FLOAT) && super::coerce::overflows_float(token) {
        marks = KindSet::NOT_FLOAT;
    }
    if digits {
        return marks;
    }
    if !known.has(KindSet::FLOAT_LITERAL) && token.iter().any(|&c| matches!(c, b'.' | b'e' | b'E'))
    {
        marks = marks.or(KindSet::FLOAT_LITERAL);
    }
    if !known.has(KindSet::NOT_INT) && !super::coerce::of(kind, token).int {
        marks = marks.or(KindSet::NOT_INT);
    }
    marks
}

fn container_kind(is_object: bool, empty: bool) -> Kind {
    if is_object {
        Kind::Object { empty }
    } else {
        Kind::Array { empty }
    }
}

/// Whether Python's `float(text)` is zero: all mantissa digits zero, or underflow.
fn float_is_zero(text: &[u8]) -> bool {
    let mantissa_end = text
        .iter()
        .position(|&c| c == b'e' || c == b'E')
        .unwrap_or(text.len());
    if text[..mantissa_end]
        .iter()
        .all(|&c| !(b'1'..=b'9').contains(&c))
    {
        return true;
    }
    // Without an exponent, a non-zero digit within the first 320 bytes is above 1e-320, and
    // so above half the smallest subnormal (about 2.5e-324): no underflow, no parse.
    if mantissa_end == text.len() && text.len() <= 320 {
        return false;
    }
    // Only an underflow can still make it zero; Rust's parse is correctly rounded like Python's.
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .is_some_and(|v| v == 0.0)
}

/// A JSON string's contents (already validated) as WTF-8 bytes: unescaped when they hold
/// an escape, else as they are.
pub fn decoded(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if raw.contains(&b'\\') {
        std::borrow::Cow::Owned(unescape(raw))
    } else {
        std::borrow::Cow::Borrowed(raw)
    }
}

/// Decodes a JSON string's contents (already validated) into WTF-8 bytes.
pub fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        // Total on any input (a cut one too): a lone backslash at the end is kept as it is, a
        // short `u` escape is U+FFFD.
        let Some(&c) = raw.get(i + 1) else {
            out.push(b'\\');
            break;
        };
        i += 2;
        let simple = match c {
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => 0,
            other => other,
        };
        if c != b'u' {
            out.push(simple);
            continue;
        }
        let hex = |at: usize| {
            raw.get(at..at + 4)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .unwrap_or(0xFFFD)
        };
        let mut cp = hex(i);
        i += 4;
        if (0xD800..0xDC00).contains(&cp) && raw.get(i..i + 2) == Some(b"\\u") {
            let lo = hex(i + 2);
            if (0xDC00..0xE000).contains(&lo) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
        }
        push_wtf8(&mut out, cp);
    }
    out
}

fn push_wtf8(out: &mut Vec<u8>, cp: u32) {
    let mut buf = [0u8; 4];
    match char::from_u32(cp) {
        Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes()),
        // A lone surrogate: encode it as WTF-8 (3 bytes), as Python keeps it.
        None => out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: &str) -> Result<Kind, SyntaxError> {
        let mut sc = Scanner::new(s.as_bytes(), 1000);
        let k = sc.value(1)?;
        sc.ws();
        if sc.pos != s.len() {
            return Err(sc.err("Extra data"));
        }
        Ok(k)
    }

    #[test]
    fn truthiness_matches_python() {
        for falsy in [
            "null", "false", "0", "-0", "0.0", "-0.0e-5", "1e-400", "0e5", "\"\"", "[]", "{}",
            "{ }", "0.000",
        ] {
            assert!(!kind(falsy).unwrap().truthy(), "{falsy}");
        }
        // Underflow without an exponent: 400 zeros after the point, then a 1.
        let tiny = format!("0.{}1", "0".repeat(400));
        assert!(!kind(&tiny).unwrap().truthy());
        // The smallest positive float written out in full is not zero.
        let smallest = format!("{:.1074}", 4.9e-324_f64);
        assert!(smallest.len() > 320 && smallest.ends_with('5'));
        assert!(kind(&smallest).unwrap().truthy());
        for truthy in [
            "true",
            "1",
            "-1",
            "0.5",
            "1e400",
            "NaN",
            "-Infinity",
            "\"0\"",
            "\" \"",
            "\"\\u0000\"",
            "[[]]",
            "{\"a\":null}",
            "4.9e-324",
        ] {
            assert!(kind(truthy).unwrap().truthy(), "{truthy}");
        }
    }

    #[test]
    fn rejects_what_python_rejects() {
        for bad in [
            "01",
            "1.",
            ".5",
            "+1",
            "-",
            "-NaN",
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\u{1}\"",
            "[1 2]",
            "{\"a\" 1}",
            "nul",
            "\u{c}1",
            "[\u{b}]",
            "1e",
        ] {
            assert!(kind(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn depth_is_bounded() {
        let ok = format!("{}{}", "[".repeat(10), "]".repeat(10));
        let mut sc = Scanner::new(ok.as_bytes(), 10);
        assert!(sc.value(1).is_ok());
        let deep = format!("{}{}", "[".repeat(11), "]".repeat(11));
        let mut sc = Scanner::new(deep.as_bytes(), 10);
        assert!(matches!(sc.value(1), Err(SyntaxError::TooDeep { .. })));
    }

    #[test]
    fn long_integers_fail_like_python() {
        let ok = "9".repeat(MAX_INT_DIGITS);
        assert!(kind(&ok).is_ok());
        assert!(matches!(
            kind(&format!("{ok}9")),
            Err(SyntaxError::IntTooLong { .. })
        ));
        assert!(kind(&format!("{ok}9.0")).is_ok());
    }

    #[test]
    fn unescapes_keys() {
        assert_eq!(
            unescape(br"mm_processor_kwar\u0067s"),
            b"mm_processor_kwargs"
        );
        assert_eq!(unescape(br"\ud83d\ude00"), "\u{1F600}".as_bytes());
        assert_eq!(unescape(br"\ud800"), b"\xED\xA0\x80");
        assert_eq!(unescape(br#"\"\\\/\n"#), b"\"\\/\n");
        // Total on cut escapes.
        assert_eq!(unescape(br"ab\"), br"ab\");
        assert_eq!(unescape(br"ab\u00"), "ab\u{FFFD}".as_bytes());
    }
}
