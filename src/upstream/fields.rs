//! An upstream response's header fields, kept as the bytes they arrived in.
//!
//! A forwarded response's fields are only passed on, so they are not parsed into a
//! `HeaderMap` (a name lookup, a copy and an allocation per value, a hash per insertion, and
//! all of it written out again field by field): the response head is kept as one shared
//! slice of the connection's read buffer, with the runs of lines to pass on. They travel
//! beside the response, not in its extensions (a map allocated per response). The HTTP/1.1
//! server writes the runs as they are; hyper (HTTP/2, TLS) gets them as a map
//! ([`ResponseFields::into_map`]). The hop-by-hop fields (RFC 9110 §7.6.1: the fixed ones
//! and those `Connection` names) are left out here.
//!
//! httparse accepts exactly the names and values `http` does (tokens; tab, space, visible
//! ASCII and bytes above 0x7f), so the map made of them is the one the fields would have
//! been parsed into.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The fields of an upstream response head, less its hop-by-hop ones; carried beside the
/// response ([`crate::gateway::Answer`]), whose `HeaderMap` holds only the gateway's own.
#[derive(Debug)]
pub struct ResponseFields {
    /// The head's bytes, or the kept fields rewritten when a line did not end in CRLF.
    head: Bytes,
    /// Runs of whole lines (CRLF included) in `head`, in order.
    runs: Vec<Run>,
    date: bool,
    /// Whether the response's body comes as the upstream's chunks (size lines and all).
    chunks: bool,
    /// Whether the upstream said `Connection: close` (a hop-by-hop field, not passed on).
    close: bool,
}

/// Lines `start..end` of the head; `length` when they are one `Content-Length` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    start: u32,
    end: u32,
    length: bool,
}

/// What of a parsed head is kept, found while httparse's fields still borrow its bytes.
pub(super) struct Kept {
    runs: Vec<Run>,
    date: bool,
    /// The lines rewritten, when one of them ended in a bare LF.
    rewritten: Option<Vec<u8>>,
}

impl Kept {
    /// The lines of `fields` (parsed from `head`) to pass on.
    pub(super) fn of(head: &[u8], fields: &[httparse::Header<'_>]) -> Kept {
        // The names `Connection` lists (most heads have none, and nothing is allocated).
        let named: Vec<&[u8]> = fields
            .iter()
            .filter(|f| is(f.name, "connection"))
            .flat_map(|f| f.value.split(|&b| b == b','))
            .map(|t| t.trim_ascii())
            .collect();
        let passed = |f: &&httparse::Header<'_>| {
            !is_hop_by_hop(f.name)
                && !named
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(f.name.as_bytes()))
        };
        let mut kept = Kept {
            runs: Vec::with_capacity(fields.len()),
            date: false,
            rewritten: None,
        };
        let base = head.as_ptr() as usize;
        for f in fields {
            if !passed(&f) {
                continue;
            }
            // A name is never empty, so it points into the head; its line ends at the
            // first LF after it (a value cannot hold one).
            let start = f.name.as_ptr() as usize - base;
            let end = start + memchr::memchr(b'\n', &head[start..]).map_or(0, |i| i + 1);
            if !head[..end].ends_with(b"\r\n") {
                return Kept::rewritten(fields.iter().filter(passed));
            }
            kept.add(f, start as u32, end as u32);
        }
        kept
    }

    /// The lines of `fields` written again as `name: value` CRLF (a head with a bare LF).
    fn rewritten<'h, 'b: 'h>(fields: impl Iterator<Item = &'h httparse::Header<'b>>) -> Kept {
        let mut out = Vec::new();
        let mut kept = Kept {
            runs: Vec::new(),
            date: false,
            rewritten: None,
        };
        for f in fields {
            let start = out.len() as u32;
            out.extend_from_slice(f.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(f.value);
            out.extend_from_slice(b"\r\n");
            kept.add(f, start, out.len() as u32);
        }
        kept.rewritten = Some(out);
        kept
    }

    /// Keeps field `f`, on lines `start..end`: joined to the run before it unless either is
    /// a `Content-Length` (a run of its own, left out of a response that is not to HEAD).
    #[inline(always)]
    fn add(&mut self, f: &httparse::Header<'_>, start: u32, end: u32) {
        let length = is(f.name, "content-length");
        self.date |= is(f.name, "date");
        match self.runs.last_mut() {
            Some(run) if run.end == start && !run.length && !length => run.end = end,
            _ => self.runs.push(Run { start, end, length }),
        }
    }

    /// Leaves out `Content-Length`: the body is framed otherwise (`Transfer-Encoding` wins).
    pub(super) fn without_length(mut self) -> Kept {
        self.runs.retain(|r| !r.length);
        self
    }

    /// The kept fields over `head`, the bytes they were found in, of a response whose body
    /// comes as the upstream's chunks when `chunks`.
    pub(super) fn over(self, head: Bytes, chunks: bool) -> ResponseFields {
        ResponseFields {
            head: self.rewritten.map_or(head, Bytes::from),
            runs: self.runs,
            date: self.date,
            chunks,
            close: false,
        }
    }
}

impl ResponseFields {
    /// Whether the response's body data is the upstream's chunked coding as it came (chunk
    /// size lines, data and CRLFs, without the last chunk): to be written as it is to a
    /// client sent a chunked body.
    pub fn chunks_as_sent(&self) -> bool {
        self.chunks
    }

    /// These fields, of a response after which the upstream closes when `close`.
    pub(super) fn closing(mut self, close: bool) -> Self {
        self.close = close;
        self
    }

    /// Whether the upstream said it closes its connection after this response
    /// (`Connection: close`, as uvicorn says after its own 500): the client's closes too.
    pub fn closes(&self) -> bool {
        self.close
    }

    /// Whether the upstream sent a `Date`.
    pub fn has_date(&self) -> bool {
        self.date
    }

    /// Whether the upstream sent a `Content-Length`.
    pub fn has_length(&self) -> bool {
        self.runs.iter().any(|r| r.length)
    }

    /// The bytes to write for the fields, whole lines, in order: without `Content-Length`
    /// unless `with_length`, and without the fields `own` has (the gateway's replace them).
    pub fn pieces<'a>(
        &'a self,
        own: &'a HeaderMap,
        with_length: bool,
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.runs
            .iter()
            .filter(move |r| with_length || !r.length)
            .flat_map(move |r| {
                let run = &self.head[r.start as usize..r.end as usize];
                // Most responses get no field from the gateway: a run is then written whole.
                let whole = own.is_empty().then_some(run);
                let lines = (!own.is_empty()).then(|| lines(run)).into_iter().flatten();
                whole.into_iter().chain(lines.filter(|line| {
                    let name = std::str::from_utf8(name_of(line)).unwrap_or("");
                    !own.contains_key(name)
                }))
            })
    }

    /// Adds the fields to `map`, but for the names it already has (the gateway's).
    pub fn into_map(self, map: &mut HeaderMap) {
        let own: Vec<HeaderName> = map.keys().cloned().collect();
        for r in &self.runs {
            for line in lines(&self.head[r.start as usize..r.end as usize]) {
                let (name, value) = split(line);
                // httparse took both, and it takes what `http` does (see the module's doc).
                let (Ok(name), Ok(value)) =
                    (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
                else {
                    continue;
                };
                if !own.contains(&name) {
                    map.append(name, value);
                }
            }
        }
    }
}

/// The lines of a run, CRLF included.
fn lines(run: &[u8]) -> impl Iterator<Item = &[u8]> {
    run.split_inclusive(|&b| b == b'\n')
}

fn name_of(line: &[u8]) -> &[u8] {
    let colon = memchr::memchr(b':', line).unwrap_or(line.len());
    &line[..colon]
}

/// A line's name and its value without the surrounding whitespace.
fn split(line: &[u8]) -> (&[u8], &[u8]) {
    let name = name_of(line);
    let value = line.get(name.len() + 1..).unwrap_or_default();
    let value = value.trim_ascii();
    (name, value)
}

fn is(name: &str, lower: &str) -> bool {
    name.eq_ignore_ascii_case(lower)
}

/// Whether `name` is always hop-by-hop.
fn is_hop_by_hop(name: &str) -> bool {
    super::HOP_BY_HOP.iter().any(|h| is(name, h))
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
