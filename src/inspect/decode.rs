//! Text decoding exactly as Python's `json.loads(bytes)` does it.
//!
//! Python picks the encoding from the first bytes (`json.detect_encoding`) and decodes with
//! `errors="surrogatepass"`, so encoded lone surrogates are accepted in every encoding. The
//! scanner works on UTF-8 (WTF-8 where surrogates occur); for UTF-16/32 bodies this module
//! transcodes and keeps enough information to map offsets back to the client's bytes, so
//! that a strip still edits the original bytes and nothing else.

use std::borrow::Cow;

/// The text encoding Python detects for a JSON body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 without a byte-order mark.
    Utf8,
    /// UTF-8 with a leading byte-order mark (`utf-8-sig`).
    Utf8Bom,
    /// UTF-16 little endian.
    Utf16Le,
    /// UTF-16 big endian.
    Utf16Be,
    /// UTF-32 little endian.
    Utf32Le,
    /// UTF-32 big endian.
    Utf32Be,
}

impl Encoding {
    /// Python's codec name for this encoding, for messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Utf8Bom => "utf-8-sig",
            Encoding::Utf16Le => "utf-16-le",
            Encoding::Utf16Be => "utf-16-be",
            Encoding::Utf32Le => "utf-32-le",
            Encoding::Utf32Be => "utf-32-be",
        }
    }

    fn unit(self) -> usize {
        match self {
            Encoding::Utf8 | Encoding::Utf8Bom => 1,
            Encoding::Utf16Le | Encoding::Utf16Be => 2,
            Encoding::Utf32Le | Encoding::Utf32Be => 4,
        }
    }
}

/// Why a body could not be decoded as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("body is not valid {encoding} text at byte {offset}")]
pub struct DecodeError {
    /// The encoding that was detected.
    pub encoding: &'static str,
    /// Offset of the first offending byte in the original body.
    pub offset: usize,
}

/// A body decoded to UTF-8 (WTF-8 where lone surrogates occur).
#[derive(Debug)]
pub struct Decoded<'a> {
    /// The detected encoding.
    pub encoding: Encoding,
    /// The text, borrowed from the body when it already was UTF-8.
    pub text: Cow<'a, [u8]>,
    /// Length of the byte-order mark skipped in the original body.
    bom: usize,
}

impl<'a> Decoded<'a> {
    /// Maps an offset in `text` back to the offset of the same character in the original body.
    pub fn original_offset(&self, pos: usize) -> usize {
        self.offsets().map(pos)
    }

    /// A mapper of offsets in `text` back to the original body, for offsets in increasing
    /// order: each costs the text between it and the one before (not the whole prefix).
    pub fn offsets(&self) -> Offsets<'_, 'a> {
        Offsets {
            decoded: self,
            at: 0,
            units: 0,
        }
    }
}

/// Offsets in a decoded text mapped back to the original body ([`Decoded::offsets`]).
pub struct Offsets<'d, 'a> {
    decoded: &'d Decoded<'a>,
    /// The text offset mapped last, and the code units before it in the original body.
    at: usize,
    units: usize,
}

impl Offsets<'_, '_> {
    /// The original offset of the character at `pos` in the text (a character boundary).
    pub fn map(&mut self, pos: usize) -> usize {
        let d = self.decoded;
        let unit = match d.encoding {
            Encoding::Utf8 | Encoding::Utf8Bom => return d.bom + pos,
            enc => enc.unit(),
        };
        if pos < self.at {
            (self.at, self.units) = (0, 0);
        }
        let between = &d.text[self.at..pos];
        // Every character starts with a non-continuation byte; supplementary characters
        // (4-byte sequences) take two UTF-16 code units.
        let chars = between.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        let extra = if unit == 2 {
            between.iter().filter(|&&b| b >= 0xF0).count()
        } else {
            0
        };
        (self.at, self.units) = (pos, self.units + chars + extra);
        d.bom + unit * self.units
    }
}

impl Decoded<'_> {
    /// The decoding error for the first bytes at or after `pos` (in the text) that are not
    /// UTF-8/WTF-8, if any: the error Python raises before it parses a byte.
    pub fn first_undecodable(&self, pos: usize) -> Option<DecodeError> {
        let o = validate_wtf8(&self.text[pos.min(self.text.len())..]).err()?;
        Some(self.undecodable_at(pos + o))
    }

    /// The decoding error for an undecodable byte at `pos` in the text.
    pub fn undecodable_at(&self, pos: usize) -> DecodeError {
        DecodeError {
            encoding: self.encoding.name(),
            offset: self.original_offset(pos),
        }
    }
}

/// Python's `json.detect_encoding`, returning the encoding and the BOM length to skip.
pub fn detect(b: &[u8]) -> (Encoding, usize) {
    const BOM8: &[u8] = b"\xEF\xBB\xBF";
    if b.starts_with(b"\x00\x00\xFE\xFF") {
        return (Encoding::Utf32Be, 4);
    }
    if b.starts_with(b"\xFF\xFE\x00\x00") {
        return (Encoding::Utf32Le, 4);
    }
    if b.starts_with(b"\xFE\xFF") {
        return (Encoding::Utf16Be, 2);
    }
    if b.starts_with(b"\xFF\xFE") {
        return (Encoding::Utf16Le, 2);
    }
    if b.starts_with(BOM8) {
        return (Encoding::Utf8Bom, 3);
    }
    let enc = if b.len() >= 4 {
        if b[0] == 0 {
            if b[1] != 0 {
                Encoding::Utf16Be
            } else {
                Encoding::Utf32Be
            }
        } else if b[1] == 0 {
            if b[2] != 0 || b[3] != 0 {
                Encoding::Utf16Le
            } else {
                Encoding::Utf32Le
            }
        } else {
            Encoding::Utf8
        }
    } else if b.len() == 2 && b[0] == 0 {
        Encoding::Utf16Be
    } else if b.len() == 2 && b[1] == 0 {
        Encoding::Utf16Le
    } else {
        Encoding::Utf8
    };
    (enc, 0)
}

/// Decodes a body as Python's `bytes.decode(detect_encoding(b), "surrogatepass")` would.
///
/// UTF-16 and UTF-32 bodies are transcoded (and so validated) here. UTF-8 bodies are
/// borrowed as they are: the scanner validates the non-ASCII bytes of strings as it meets
/// them (one pass over the body instead of two), and on any other error the caller asks
/// [`Decoded::first_undecodable`] whether decoding would have failed first, as it does in
/// Python.
pub fn decode(body: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    let (encoding, bom) = detect(body);
    let rest = &body[bom..];
    let err = |offset: usize| DecodeError {
        encoding: encoding.name(),
        offset,
    };
    let text = match encoding {
        // Validated as the scanner reads it: see `Decoded::first_undecodable`.
        Encoding::Utf8 | Encoding::Utf8Bom => Cow::Borrowed(rest),
        Encoding::Utf16Le | Encoding::Utf16Be => Cow::Owned(
            utf16_to_wtf8(rest, encoding == Encoding::Utf16Be).map_err(|o| err(bom + o))?,
        ),
        Encoding::Utf32Le | Encoding::Utf32Be => Cow::Owned(
            utf32_to_wtf8(rest, encoding == Encoding::Utf32Be).map_err(|o| err(bom + o))?,
        ),
    };
    Ok(Decoded {
        encoding,
        text,
        bom,
    })
}

/// Validates UTF-8 that may also contain encoded surrogates (`ED A0..BF 80..BF`), which
/// Python's `surrogatepass` accepts: whether it holds one, or the offset of the first
/// invalid byte.
pub(super) fn validate_wtf8(mut b: &[u8]) -> Result<bool, usize> {
    let mut base = 0;
    loop {
        match simdutf8::compat::from_utf8(b) {
            Ok(_) => return Ok(base > 0),
            Err(e) => {
                let i = e.valid_up_to();
                let tail = &b[i..];
                let surrogate = tail.len() >= 3
                    && tail[0] == 0xED
                    && (0xA0..=0xBF).contains(&tail[1])
                    && (0x80..=0xBF).contains(&tail[2]);
                if !surrogate {
                    return Err(base + i);
                }
                base += i + 3;
                b = &b[i + 3..];
            }
        }
    }
}

fn push_code_point(out: &mut Vec<u8>, cp: u32) {
    // WTF-8: like UTF-8, but surrogate code points are encoded as 3-byte sequences too.
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]);
    } else if cp < 0x10000 {
        out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    } else {
        out.extend_from_slice(&[
            0xF0 | (cp >> 18) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]);
    }
}

fn utf16_to_wtf8(b: &[u8], big_endian: bool) -> Result<Vec<u8>, usize> {
    let unit = |i: usize| -> u32 {
        let pair = [b[i], b[i + 1]];
        u32::from(if big_endian {
            u16::from_be_bytes(pair)
        } else {
            u16::from_le_bytes(pair)
        })
    };
    let n = b.len() / 2;
    let mut out = Vec::with_capacity(b.len() / 2 + 16);
    let mut i = 0;
    while i < n {
        let u = unit(2 * i);
        if (0xD800..0xDC00).contains(&u) && i + 1 < n {
            let lo = unit(2 * i + 2);
            if (0xDC00..0xE000).contains(&lo) {
                push_code_point(&mut out, 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00));
                i += 2;
                continue;
            }
        }
        push_code_point(&mut out, u);
        i += 1;
    }
    if b.len() % 2 == 1 {
        return Err(b.len() - 1);
    }
    Ok(out)
}

fn utf32_to_wtf8(b: &[u8], big_endian: bool) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(b.len() / 4 + 16);
    let mut chunks = b.chunks_exact(4);
    for (k, c) in chunks.by_ref().enumerate() {
        let quad = [c[0], c[1], c[2], c[3]];
        let cp = if big_endian {
            u32::from_be_bytes(quad)
        } else {
            u32::from_le_bytes(quad)
        };
        if cp > 0x10FFFF {
            return Err(4 * k);
        }
        push_code_point(&mut out, cp);
    }
    if !chunks.remainder().is_empty() {
        return Err(b.len() - chunks.remainder().len());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16le(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
    }

    #[test]
    fn detects_like_python() {
        assert_eq!(detect(b"{}").0, Encoding::Utf8);
        assert_eq!(detect(b"\xEF\xBB\xBF{}"), (Encoding::Utf8Bom, 3));
        assert_eq!(detect(&utf16le("{}")).0, Encoding::Utf16Le);
        assert_eq!(detect(b"\x00{\x00}").0, Encoding::Utf16Be);
        assert_eq!(detect(b"{\x00\x00\x00").0, Encoding::Utf32Le);
        assert_eq!(detect(b"\x00\x00\x00{").0, Encoding::Utf32Be);
        assert_eq!(
            detect(b"\xFF\xFE\x00\x00{\x00\x00\x00").0,
            Encoding::Utf32Le
        );
    }

    #[test]
    fn utf8_accepts_encoded_surrogates_only() {
        assert_eq!(validate_wtf8(b"a\xED\xA0\x80b"), Ok(true));
        assert_eq!(validate_wtf8("a\u{e9}b".as_bytes()), Ok(false));
        assert_eq!(validate_wtf8(b"ab\xFF"), Err(2));
        assert_eq!(validate_wtf8(b"\xC0\xAF"), Err(0));
    }

    #[test]
    fn utf16_offsets_map_back() {
        let body = utf16le("{\"\u{1F600}\":1}");
        let d = decode(&body).unwrap();
        let text = std::str::from_utf8(&d.text).unwrap();
        let pos = text.find(':').unwrap();
        assert_eq!(d.original_offset(pos), 10);
    }

    #[test]
    fn offsets_in_order_map_as_each_alone() {
        let body = "{\"a\u{1F600}\":1,\"\u{e9}\":[2],\"c\":\"\u{1F600}\u{e9}x\"}";
        let chars: Vec<usize> = body.char_indices().map(|(i, _)| i).collect();
        for encoded in [
            utf16le(body),
            body.encode_utf16().flat_map(|u| u.to_be_bytes()).collect(),
            body.chars()
                .flat_map(|c| (c as u32).to_le_bytes())
                .collect(),
            [b"\xEF\xBB\xBF", body.as_bytes()].concat(),
        ] {
            let d = decode(&encoded).unwrap();
            let mut offsets = d.offsets();
            let unit = match d.encoding {
                Encoding::Utf8Bom => 0,
                Encoding::Utf32Le => 4,
                _ => 2,
            };
            for &pos in &chars {
                let units = match unit {
                    0 => 3 + pos,
                    4 => 4 * body[..pos].chars().count(),
                    _ => 2 * body[..pos].encode_utf16().count(),
                };
                assert_eq!(offsets.map(pos), units, "{pos}");
            }
            // Out of order, it starts again.
            assert_eq!(offsets.map(1), d.original_offset(1));
        }
    }

    #[test]
    fn odd_utf16_is_an_error() {
        assert!(decode(b"{\x00}\x00 ").is_err());
    }
}
