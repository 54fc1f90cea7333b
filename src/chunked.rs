//! HTTP/1.1 chunked transfer coding (RFC 9112 §7.1), decoded from a read buffer: for
//! request bodies from clients ([`crate::http1`]) and response bodies from upstreams
//! ([`crate::upstream`]).
//!
//! Every chunk whole or begun in the buffer is decoded in one call, and their data is
//! returned as one frame: an SSE burst costs one write downstream, not one per event.
//!
//! A decoder made with [`Chunked::passing`] checks the coding the same way but returns the
//! chunks as they came (size lines, data and CRLFs; not the last chunk or the trailers):
//! for an HTTP/1.1 client that is sent the same chunks, with no copy or re-encoding. A size
//! line with whitespace or extensions is written again bare (`HEX CRLF`).
//!
//! A request body's decoder ([`Chunked::request`]) reads size lines as vLLM's server
//! (llhttp) does: no whitespace anywhere in them, and extensions `;name` or `;name=value`
//! (a token or a quoted string). Responses are read as RFC 9112 allows, whitespace included.

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::digits::size_line;

/// The longest chunk-size line, trailer line or trailer section accepted (vLLM's server
/// has no bound; a head's is mmgate's).
pub(crate) const MAX_LINE: usize = 64 << 10;

/// The chunked decoder's place in the body.
#[derive(Default)]
pub(crate) struct Chunked {
    state: State,
    trailers: Option<HeaderMap>,
    trailer_bytes: usize,
    /// Whether the chunks are returned as they came, not their data.
    passing: bool,
    /// Whether size lines are read as vLLM's server reads a request's.
    strict: bool,
}

#[derive(Default, Clone, Copy)]
enum State {
    /// Before a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// The trailer section after the last chunk.
    Trailers,
    /// After the trailer section.
    End,
}

/// What one decoding step found.
pub(crate) enum Step {
    /// The data of every chunk that was whole or begun in the buffer (when passing: those
    /// chunks, or what of them has come, as they came).
    Data(Bytes),
    /// The body ended (with these trailers).
    End(Option<HeaderMap>),
    /// Nothing yet: read more.
    More,
}

impl Chunked {
    /// A decoder that returns the chunks as they came, checked but not decoded.
    pub(crate) fn passing() -> Self {
        Chunked {
            passing: true,
            ..Chunked::default()
        }
    }

    /// A decoder for a client's request body, as strict as vLLM's server.
    pub(crate) fn request() -> Self {
        Chunked {
            strict: true,
            ..Chunked::default()
        }
    }

    /// Decodes what `buf` holds: the data of every chunk there, merged into one frame.
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, &'static str> {
        let mut out = Merged::default();
        loop {
            match self.state {
                State::Size => {
                    // Whole plain chunks first; what stops that pass is read below.
                    burst(buf, &mut out, self.passing);
                    let Some(end) = memchr::memchr(b'\n', buf) else {
                        if buf.len() > MAX_LINE {
                            return Err("chunk-size line too long");
                        }
                        break;
                    };
                    if end >= MAX_LINE {
                        return Err("chunk-size line too long");
                    }
                    let size = chunk_size(&buf[..=end], self.strict)?;
                    buf.advance(end + 1);
                    if self.passing && size > 0 {
                        // Written again bare: whitespace and extensions, which RFC 9112
                        // allows and strict clients may not, are not passed on.
                        let mut line = [0; 22];
                        let line = size_line(size, &mut line);
                        out.copy(line, line.len() + buf.len());
                    }
                    self.state = match size {
                        0 => State::Trailers,
                        n => State::Data(n),
                    };
                }
                State::Data(left) => {
                    if buf.is_empty() {
                        break;
                    }
                    let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    // All the read holds, or a large piece: split off.
                    out.take_from(buf, n, n == buf.len() || n >= SPLIT_MIN);
                    self.state = match left - n as u64 {
                        0 => State::DataEnd,
                        rest => State::Data(rest),
                    };
                }
                State::DataEnd => {
                    if buf.len() < 2 {
                        break;
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err("chunk data not followed by CRLF");
                    }
                    if self.passing {
                        out.take_from(buf, 2, false);
                    } else {
                        buf.advance(2);
                    }
                    self.state = State::Size;
                }
                State::End => {
                    // Data decoded before the end goes first; the end comes with the next call.
                    return Ok(match out.take() {
                        Some(data) => Step::Data(data),
                        None => Step::End(self.trailers.take()),
                    });
                }
                State::Trailers => {
                    let Some(end) = memchr::memchr(b'\n', buf) else {
                        if buf.len() > MAX_LINE {
                            return Err("trailer line too long");
                        }
                        break;
                    };
                    self.trailer_bytes += end + 1;
                    if self.trailer_bytes > MAX_LINE {
                        return Err("trailer section too long");
                    }
                    let line = buf.split_to(end + 1);
                    let line = line
                        .strip_suffix(b"\r\n")
                        .ok_or("trailer line without CRLF")?;
                    if line.is_empty() {
                        self.state = State::End;
                        continue;
                    }
                    self.trailer(line)?;
                }
            }
        }
        Ok(match out.take() {
            Some(data) => Step::Data(data),
            None => Step::More,
        })
    }

    fn trailer(&mut self, line: &[u8]) -> Result<(), &'static str> {
        let colon = memchr::memchr(b':', line).ok_or("trailer line without a colon")?;
        let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| "invalid trailer name")?;
        // llhttp checks a request's trailers as it checks its head: a framing field there is
        // refused (seen on vLLM's server).
        if self.strict
            && (name == http::header::CONTENT_LENGTH || name == http::header::TRANSFER_ENCODING)
        {
            return Err("framing field in the trailers");
        }
        let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii())
            .map_err(|_| "invalid trailer value")?;
        self.trailers
            .get_or_insert_with(HeaderMap::new)
            .append(name, value);
        Ok(())
    }
}

/// The chunk data decoded from one read, as one piece. A piece that is all the read has
/// left, a large one, or a burst's data gathered in place is split off the read buffer when
/// it comes first (no copy); later pieces are copied together with it into a buffer sized
/// once.
#[derive(Default)]
struct Merged {
    first: Option<Bytes>,
    rest: Option<BytesMut>,
}

/// Chunk data pieces at least this long, when first in a read, are split off the read
/// buffer instead of copied.
const SPLIT_MIN: usize = 4 << 10;

impl Merged {
    /// Moves the first `n` bytes of `buf` to the decoded data: split off the buffer when they
    /// come first and `split` allows it (no copy), else copied.
    fn take_from(&mut self, buf: &mut BytesMut, n: usize, split: bool) {
        if split && self.is_empty() {
            self.first = Some(buf.split_to(n).freeze());
            return;
        }
        self.copy(&buf[..n], buf.len());
        buf.advance(n);
    }

    /// Appends a copy of `data`; the buffer, made on first use, has room for `room` more.
    fn copy(&mut self, data: &[u8], room: usize) {
        let first = &mut self.first;
        let all = self.rest.get_or_insert_with(|| {
            let before = first.take().unwrap_or_default();
            let mut all = BytesMut::with_capacity(before.len() + room);
            all.extend_from_slice(&before);
            all
        });
        all.extend_from_slice(data);
    }

    fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_none()
    }

    fn take(&mut self) -> Option<Bytes> {
        match self.rest.take() {
            Some(all) => Some(all.freeze()),
            None => self.first.take(),
        }
    }
}

/// Takes the whole chunks at the start of `buf` that have a bare size line (`HEX CRLF`) in
/// one pass: an SSE burst, many small chunks in one read. Their data is moved down over the
/// framing in place, then split off the buffer at once (or, when `out` already holds data,
/// copied to it); when `passing`, the chunks are split off as they are. It stops before a
/// chunk that is not whole, has extensions, is the last one, or is malformed (the state
/// machine takes those, and reports the errors), and, unless passing, before a large first
/// piece (split off, not moved).
fn burst(buf: &mut BytesMut, out: &mut Merged, passing: bool) {
    let (mut pos, mut kept) = (0, 0);
    while let Some((start, end)) = whole_chunk(buf, pos) {
        let first = kept == 0 && out.is_empty() && !passing;
        if first && end - start >= SPLIT_MIN {
            break;
        }
        if !passing {
            buf.copy_within(start..end, kept);
        }
        kept += end - start;
        pos = end + 2;
    }
    if passing {
        if pos > 0 {
            out.take_from(buf, pos, true);
        }
    } else if kept > 0 {
        // Gathered at the front: split off whatever its length.
        out.take_from(buf, kept, true);
        buf.advance(pos - kept);
    }
}

/// The data (`start..end`) of the chunk at `pos` in `b`, if it is whole (its CRLF too), has
/// a bare size line (`HEX CRLF`, at most 15 digits) and is not the last one.
#[inline]
fn whole_chunk(b: &[u8], pos: usize) -> Option<(usize, usize)> {
    // Over 15 digits (maybe leading zeros), none, or the last chunk: the state machine
    // reads those.
    let (size, digits) = hex_prefix(b.get(pos..)?)?;
    if digits == 0 || size == 0 {
        return None;
    }
    let size = usize::try_from(size).ok()?;
    let start = pos + digits + 2;
    let end = start.checked_add(size)?;
    let framed = b.get(start - 2..start)? == b"\r\n" && b.get(end..end.checked_add(2)?)? == b"\r\n";
    framed.then_some((start, end))
}

/// The size on a chunk-size line (`HEX [; extensions] CRLF`), at most 15 significant hex
/// digits; `strict`, with extensions as [`strict_extensions`] reads them.
fn chunk_size(line: &[u8], strict: bool) -> Result<u64, &'static str> {
    let line = line
        .strip_suffix(b"\r\n")
        .ok_or("chunk-size line without CRLF")?;
    // Leading zeros do not count toward the 15 digits (llhttp reads any number of them):
    // each zero with another digit after it is skipped.
    let zeros = (line.windows(2))
        .take_while(|w| w[0] == b'0' && w[1].is_ascii_hexdigit())
        .count();
    let (size, digits) = hex_prefix(&line[zeros..])
        .filter(|&(_, digits)| digits > 0)
        .ok_or("invalid chunk size")?;
    let rest = &line[zeros + digits..];
    if strict {
        return if strict_extensions(rest) {
            Ok(size)
        } else {
            Err("invalid chunk extension")
        };
    }
    // Then only optional whitespace (space, tab) and extensions, with no bare CR in them.
    let rest = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    if !rest.is_empty() && rest[0] != b';' || memchr::memchr(b'\r', rest).is_some() {
        return Err("invalid chunk size");
    }
    Ok(size)
}

/// Whether `rest`, what follows a chunk size, is extensions as llhttp reads them (seen on
/// vLLM's server): after each `;` a name of token characters, maybe empty when `=` or
/// another `;` follows; after `=` a value, maybe empty, of token characters and quoted
/// strings, of which nothing but `;` or the line's end may follow a quoted one; no
/// whitespace outside quotes.
fn strict_extensions(rest: &[u8]) -> bool {
    #[derive(PartialEq)]
    enum At {
        NameStart,
        Name,
        Value,
    }
    let Some(mut rest) = rest.strip_prefix(b";") else {
        return rest.is_empty();
    };
    let mut at = At::NameStart;
    while let Some((&c, more)) = rest.split_first() {
        rest = more;
        at = match (at, c) {
            (At::NameStart | At::Name | At::Value, b';') => At::NameStart,
            (At::NameStart | At::Name, b'=') => At::Value,
            (At::NameStart | At::Name, c) if is_token(c) => At::Name,
            (At::Value, c) if is_token(c) => At::Value,
            (At::Value, b'"') => match quoted_len(rest) {
                Some(n) => {
                    rest = &rest[n..];
                    match rest.split_first() {
                        None => return true,
                        Some((b';', more)) => {
                            rest = more;
                            At::NameStart
                        }
                        Some(_) => return false,
                    }
                }
                None => return false,
            },
            _ => return false,
        };
    }
    // A `;` with nothing after it ends no extension.
    at != At::NameStart
}

/// The length of a quoted string's rest after its opening quote, closing quote included
/// (`\` escapes the next byte); `None` when it does not close or holds a control byte.
fn quoted_len(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            c if c < b' ' && c != b'\t' || c == 0x7f => return None,
            _ => i += 1,
        }
    }
    None
}

/// Whether `c` is a `tchar` (RFC 9110 §5.6.2).
fn is_token(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// The number in the hex digits `b` starts with, and how many there are (maybe none);
/// `None` past 15 digits. Inlined: it reads every chunk of an SSE burst.
#[inline(always)]
fn hex_prefix(b: &[u8]) -> Option<(u64, usize)> {
    let (mut size, mut digits) = (0u64, 0);
    for &c in b {
        let value = HEX[usize::from(c)];
        if value > 0xF {
            break;
        }
        if digits == 15 {
            return None;
        }
        size = size << 4 | u64::from(value);
        digits += 1;
    }
    Some((size, digits))
}

/// Each byte's value as a hex digit, or 0xFF for a byte that is not one.
const HEX: [u8; 256] = {
    let mut table = [0xFF; 256];
    let mut c = 0;
    while c < 256 {
        table[c] = match c as u8 {
            d @ b'0'..=b'9' => d - b'0',
            d @ b'a'..=b'f' => d - b'a' + 10,
            d @ b'A'..=b'F' => d - b'A' + 10,
            _ => 0xFF,
        };
        c += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Decodes `wire` fed in pieces cut at `cuts`; the data and trailers, or the error.
    fn decode_in_pieces(
        wire: &[u8],
        cuts: &[usize],
    ) -> Result<(Vec<u8>, Option<HeaderMap>), String> {
        decode_in_pieces_with(Chunked::default(), wire, cuts)
    }

    /// [`decode_in_pieces`] with `chunked`, a decoder that may be passing.
    fn decode_in_pieces_with(
        mut chunked: Chunked,
        wire: &[u8],
        cuts: &[usize],
    ) -> Result<(Vec<u8>, Option<HeaderMap>), String> {
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
        points.push(wire.len());
        points.sort_unstable();
        let (mut buf, mut data, mut fed) = (BytesMut::new(), Vec::new(), 0);
        for point in points {
            buf.extend_from_slice(&wire[fed..point]);
            fed = point;
            loop {
                match chunked.decode(&mut buf).map_err(str::to_string)? {
                    Step::Data(d) => data.extend_from_slice(&d),
                    Step::End(trailers) => {
                        if !buf.is_empty() {
                            return Err("bytes after the end".into());
                        }
                        return Ok((data, trailers));
                    }
                    Step::More => break,
                }
            }
        }
        Err("no end".into())
    }

    fn encode(chunks: &[Vec<u8>], ext: bool, trailers: &[(&str, &str)]) -> Vec<u8> {
        encode_hex(chunks, ext, trailers, false)
    }

    /// As `encode`, with the sizes in lower-case hex when `lower`.
    fn encode_hex(
        chunks: &[Vec<u8>],
        ext: bool,
        trailers: &[(&str, &str)],
        lower: bool,
    ) -> Vec<u8> {
        let mut wire = Vec::new();
        for c in chunks.iter().filter(|c| !c.is_empty()) {
            let ext = if ext { " ;name=value" } else { "" };
            let size = if lower {
                format!("{:x}", c.len())
            } else {
                format!("{:X}", c.len())
            };
            wire.extend_from_slice(format!("{size}{ext}\r\n").as_bytes());
            wire.extend_from_slice(c);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(b"0\r\n");
        for (n, v) in trailers {
            wire.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        wire.extend_from_slice(b"\r\n");
        wire
    }

    proptest! {
        #[test]
        fn chunked_bodies_decode_and_pass_whatever_the_read_boundaries(
            // Small chunks (copied together) and large ones (split off the read buffer).
            chunks in prop::collection::vec(prop_oneof![
                4 => prop::collection::vec(any::<u8>(), 0..300),
                1 => prop::collection::vec(any::<u8>(), SPLIT_MIN..SPLIT_MIN + 600),
            ], 0..12),
            cuts in prop::collection::vec(any::<usize>(), 0..20),
            ext in any::<bool>(),
            with_trailer in any::<bool>(),
            lower in any::<bool>(),
        ) {
            let trailers: &[(&str, &str)] = if with_trailer { &[("x-check", "abc")] } else { &[] };
            let trailer = with_trailer.then(|| HeaderValue::from_static("abc"));
            let wire = encode_hex(&chunks, ext, trailers, lower);
            let (data, got) = decode_in_pieces(&wire, &cuts).unwrap();
            prop_assert_eq!(data, chunks.concat());
            prop_assert_eq!(got.map(|t| t["x-check"].clone()), trailer.clone());

            // Passing, the same body comes as chunks.
            let (passed, got) = decode_in_pieces_with(Chunked::passing(), &wire, &cuts).unwrap();
            prop_assert_eq!(got.map(|t| t["x-check"].clone()), trailer);
            // Valid chunks of the same data, up to the last chunk, which is not passed.
            let mut ended = passed.clone();
            ended.extend_from_slice(b"0\r\n\r\n");
            let (data, _) = decode_in_pieces(&ended, &[]).unwrap();
            prop_assert_eq!(data, chunks.concat());
            // Bare lower-case size lines: everything before the last chunk, byte for byte.
            if lower && !ext {
                let last = encode_hex(&[], false, trailers, lower);
                prop_assert_eq!(&passed[..], &wire[..wire.len() - last.len()]);
            }
        }
    }

    #[test]
    fn chunks_that_arrive_together_are_one_frame() {
        let wire = encode(
            &[b"data: a\n\n".to_vec(), b"data: b\n\n".to_vec()],
            false,
            &[],
        );
        let mut buf = BytesMut::from(&wire[..]);
        let mut chunked = Chunked::default();
        let Ok(Step::Data(d)) = chunked.decode(&mut buf) else {
            panic!("data expected");
        };
        assert_eq!(&d[..], b"data: a\n\ndata: b\n\n");
        assert!(matches!(chunked.decode(&mut buf), Ok(Step::End(None))));
    }

    #[test]
    fn size_lines_are_passed_bare_and_zero_padded_sizes_are_read() {
        let wire =
            b"1\r\na\r\n000000000000000000001\r\nb\r\n2 ;x=\"y\"\r\ncd\r\n1\t\r\ne\r\n0\r\n\r\n";
        assert_eq!(decode_in_pieces(wire, &[]).unwrap().0, b"abcde");
        for cuts in [&[][..], &[3, 9, 30], &[1, 2, 4, 8, 16, 32]] {
            let (passed, _) = decode_in_pieces_with(Chunked::passing(), wire, cuts).unwrap();
            let passed = String::from_utf8(passed).unwrap();
            // Whole bare chunks go as they came; the others' size lines are written bare.
            assert!(passed.starts_with("1\r\na\r\n"), "{passed:?}");
            assert!(passed.ends_with("2\r\ncd\r\n1\r\ne\r\n"), "{passed:?}");
        }
        let long = format!("1;{}\r\na\r\n0\r\n\r\n", "x".repeat(MAX_LINE));
        assert!(decode_in_pieces(long.as_bytes(), &[]).is_err());
    }

    #[test]
    fn invalid_chunked_bodies_are_errors() {
        for wire in [
            &b"zz\r\n"[..],
            b"5\r\nhelloXX0\r\n\r\n",
            b"5 x\r\nhello\r\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"fffffffffffffffff\r\n",
            b"-5\r\n",
            b"0\r\nno colon\r\n\r\n",
            // The same faults after whole chunks that are taken in one pass (an SSE burst).
            b"1\r\na\r\n2\r\nbc\r\n5\r\nhelloXX0\r\n\r\n",
            b"1\r\na\r\n5 x\r\nhello\r\n0\r\n\r\n",
            b"1\r\na\r\n5\nhello\r\n0\r\n\r\n",
            b"1\r\na\r\nfffffffffffffffff\r\n",
            b"1\r\na\r\n-5\r\n",
            b"1\r\na\r\n0\r\nno colon\r\n\r\n",
            b"1\r\naXX2\r\nbc\r\n0\r\n\r\n",
            // 16 significant digits, after a whole chunk and alone.
            b"1\r\na\r\n1000000000000000\r\nb\r\n0\r\n\r\n",
            b"01000000000000000\r\nb\r\n0\r\n\r\n",
        ] {
            assert!(
                decode_in_pieces(wire, &[]).is_err(),
                "{}",
                String::from_utf8_lossy(wire)
            );
            assert!(
                decode_in_pieces_with(Chunked::passing(), wire, &[]).is_err(),
                "passing: {}",
                String::from_utf8_lossy(wire)
            );
        }
        let long = vec![b'1'; MAX_LINE + 10];
        assert!(decode_in_pieces(&long, &[]).is_err());
        assert!(decode_in_pieces_with(Chunked::passing(), &long, &[]).is_err());
    }

    #[test]
    fn chunk_sizes_are_up_to_15_significant_hex_digits_then_extensions() {
        // (line, size as a response's, as a request's: no whitespace, strict extensions)
        let cases: &[(&[u8], Option<u64>, Option<u64>)] = &[
            (b"0\r\n", Some(0), Some(0)),
            (b"1a\r\n", Some(26), Some(26)),
            (b"1A;name=value\r\n", Some(26), Some(26)),
            (b"1a;name;x=\"q \\\" ;\"\r\n", Some(26), Some(26)),
            (b"ff ; ext\r\n", Some(255), None),
            (
                b"fffffffffffffff\r\n",
                Some(0xfff_ffff_ffff_ffff),
                Some(0xfff_ffff_ffff_ffff),
            ),
            (b"1000000000000000\r\n", None, None),
            (b"0000000000000000000001a\r\n", Some(26), Some(26)),
            (
                b"00fffffffffffffff\r\n",
                Some(0xfff_ffff_ffff_ffff),
                Some(0xfff_ffff_ffff_ffff),
            ),
            (b"\r\n", None, None),
            (b";ext\r\n", None, None),
            (b"g\r\n", None, None),
            (b"1 x\r\n", None, None),
            (b"1\t \r\n", Some(1), None),
            (b"1a; name\r\n", Some(26), None),
            (b"1a;name = v\r\n", Some(26), None),
            (b"1a;\r\n", Some(26), None),
            // llhttp's extensions, as vLLM's server reads them: empty names and values,
            // a quoted string ending a value; but no `;` with nothing after it, and nothing
            // after a closing quote but `;`.
            (b"1a;name=\r\n", Some(26), Some(26)),
            (b"1a;=x\r\n", Some(26), Some(26)),
            (b"1a;=\r\n", Some(26), Some(26)),
            (b"1a;a;;b\r\n", Some(26), Some(26)),
            (b"1a;a=b\"c\"\r\n", Some(26), Some(26)),
            (b"1a;a=\"b\";c\r\n", Some(26), Some(26)),
            (b"1a;a=\"b\"c\r\n", Some(26), None),
            (b"1a;;\r\n", Some(26), None),
            (b"1a;a=b;\r\n", Some(26), None),
            (b"1a;\"a\"\r\n", Some(26), None),
            (b"1a;a=b=c\r\n", Some(26), None),
            (b"1a;x=\"open\r\n", Some(26), None),
            (b"1a;x=\"a\x01\"\r\n", Some(26), None),
            (b"1a;x=v w\r\n", Some(26), None),
            (b"5\r\r\n", None, None),
            (b"5\x0c\r\n", None, None),
            (b"5;a\rb\r\n", None, None),
            (b"1", None, None),
        ];
        for (line, lenient, strict) in cases {
            let got = (chunk_size(line, false).ok(), chunk_size(line, true).ok());
            assert_eq!(
                got,
                (*lenient, *strict),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn a_requests_trailers_may_not_carry_framing_fields() {
        // llhttp checks them as head fields (seen on vLLM's server); a response's are read.
        let end = |mut c: Chunked, trailer: &str| {
            let wire = format!("1\r\na\r\n0\r\n{trailer}\r\n\r\n");
            let mut buf = BytesMut::from(wire.as_bytes());
            loop {
                match c.decode(&mut buf) {
                    Ok(Step::Data(_)) => continue,
                    Ok(Step::End(_)) => return true,
                    _ => return false,
                }
            }
        };
        for trailer in ["Content-Length: 0", "transfer-encoding: chunked"] {
            assert!(!end(Chunked::request(), trailer), "{trailer}");
            assert!(end(Chunked::default(), trailer), "{trailer}");
        }
        assert!(end(Chunked::request(), "X-Checksum: 1"));
    }
}
