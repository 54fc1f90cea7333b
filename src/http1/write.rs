//! Writing a response: its head (status line, the gateway's fields, `date` unless it has
//! one, and the framing this side decides), then its body as the frames come, gathered into
//! as few writes as their readiness allows. While the body is waited for, the client's side
//! is watched: a client that leaves ends the response (and so releases what the request
//! holds, and cancels the upstream exchange).
//!
//! Framing (RFC 9112 §6): no body for `HEAD`, 1xx, 204 and 304; `Content-Length` when the
//! body's length is known; else chunked to an HTTP/1.1 client, and to an HTTP/1.0 client the
//! body runs to the connection's close.
//!
//! A write that ends a response, or that sends what has gathered before more of the body is
//! waited for, first waits for the end of the thread's scheduler pass while the thread
//! answers other requests ([`end_of_pass`]).

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::task::Poll;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{header, StatusCode, Version};
use http_body::Body as _;
use tokio::net::tcp::OwnedWriteHalf;

use super::body::Shared;
use crate::digits::{decimal, size_line};
use crate::gateway::Answer;
use crate::upstream::ResponseFields;
use crate::vectored::Gather;

/// Bytes gathered before they are written even though more frames are ready.
const WRITE_BATCH: usize = 256 << 10;

/// How the response body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    Close,
}

/// What of the request decides how the response is written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked {
    pub(super) version: Version,
    pub(super) head: bool,
    /// Whether the connection may carry another request after this response.
    pub(super) keep_alive: bool,
    /// How long the client may take to accept one write (`limits.send_timeout_ms`).
    pub(super) send_timeout: Duration,
}

/// Writes `res` for a request as `asked` says; whether the connection can carry another
/// request after it (`Err` when the client went away or a write failed).
pub(super) async fn respond(
    io: &mut OwnedWriteHalf,
    out: &mut Gather,
    shared: &Shared,
    answer: Answer,
    asked: Asked,
) -> Result<bool, ()> {
    let (parts, mut body) = answer.response.into_parts();
    let upstream = answer.upstream_fields;
    let status = parts.status;
    let mut keep_alive = asked.keep_alive
        && !parts
            .headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| has_token(v.as_bytes(), b"close"));
    let bodiless = asked.head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let exact = body.size_hint().exact();
    // A body that is the upstream's chunks as they came (asked only for HTTP/1.1 clients)
    // goes out as it is.
    let chunks_as_sent = upstream
        .as_ref()
        .is_some_and(ResponseFields::chunks_as_sent);
    debug_assert!(!chunks_as_sent || asked.version == Version::HTTP_11);
    let framing = match exact {
        _ if bodiless => Framing::None,
        _ if chunks_as_sent => Framing::Chunked,
        Some(n) => Framing::Length(n),
        None if asked.version == Version::HTTP_10 => Framing::Close,
        None => Framing::Chunked,
    };
    keep_alive &= framing != Framing::Close;

    status_line(out, asked.version, status);
    for (name, value) in &parts.headers {
        let framing_field = *name == header::CONTENT_LENGTH || *name == header::TRANSFER_ENCODING;
        // A HEAD response keeps the length of the body it stands for.
        if (framing_field && !(asked.head && *name == header::CONTENT_LENGTH))
            || *name == header::CONNECTION
        {
            continue;
        }
        field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    // A forwarded response's own fields, as the upstream sent them (less hop-by-hop ones).
    if let Some(fields) = &upstream {
        for piece in fields.pieces(&parts.headers, asked.head) {
            out.put(piece);
        }
    }
    let has = |name: header::HeaderName, says: fn(&ResponseFields) -> bool| {
        parts.headers.contains_key(name) || upstream.as_ref().is_some_and(says)
    };
    // A HEAD answer made here says the length of the body it stands for (one from the
    // upstream keeps the upstream's field, and an empty body there says nothing).
    let head_length = exact.filter(|&n| {
        n > 0 && asked.head && !has(header::CONTENT_LENGTH, ResponseFields::has_length)
    });
    match (framing, head_length) {
        (Framing::Length(n), _) | (Framing::None, Some(n)) => {
            field(out, b"content-length", decimal(n, &mut [0; 20]));
        }
        (Framing::Chunked, _) => field(out, b"transfer-encoding", b"chunked"),
        _ => {}
    }
    if !has(header::DATE, ResponseFields::has_date) {
        field(out, b"date", &date());
    }
    match (keep_alive, asked.version) {
        (false, _) => field(out, b"connection", b"close"),
        (true, Version::HTTP_10) => field(out, b"connection", b"keep-alive"),
        (true, _) => {}
    }
    out.put(b"\r\n");
    // A forwarded head's fields share the upstream connection's read buffer; while they
    // live, that connection's next read takes a new buffer. Let them go now.
    drop((parts, upstream));

    if framing == Framing::None {
        end_of_pass().await;
        send(io, out, asked.send_timeout).await?;
        return Ok(keep_alive);
    }
    let mut sent = 0u64;
    loop {
        // Frames that are ready are gathered; the gathered bytes are written once the body
        // has to be waited for, or once there are enough of them.
        let next = poll_fn(|cx| {
            if out.len() < WRITE_BATCH {
                if let Poll::Ready(frame) = std::pin::Pin::new(&mut body).poll_frame(cx) {
                    return Poll::Ready(Some(frame));
                }
            }
            if out.len() > 0 || shared.lock().poll_gone(cx) {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        let frame = match next {
            None if out.len() > 0 => {
                end_of_pass().await;
                send(io, out, asked.send_timeout).await?;
                continue;
            }
            None => return Err(()),
            Some(frame) => frame,
        };
        let frame = match frame {
            Some(Ok(frame)) => frame,
            // A body that failed midway: the client learns it from a connection closed
            // before the body's end (a chunked body without its last chunk, fewer bytes
            // than the length), and when the close is the end, from a reset.
            Some(Err(_)) => {
                send(io, out, asked.send_timeout).await?;
                if framing == Framing::Close {
                    shared.lock().reset_on_close();
                }
                return Err(());
            }
            None => {
                match framing {
                    Framing::Chunked => out.put(b"0\r\n\r\n"),
                    Framing::Length(n) if n != sent => keep_alive = false,
                    _ => {}
                }
                end_of_pass().await;
                send(io, out, asked.send_timeout).await?;
                return Ok(keep_alive);
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        if let Framing::Length(n) = framing {
            if sent + data.len() as u64 > n {
                // More than the body declared: the declared part, then the connection ends.
                let fits = usize::try_from(n - sent).unwrap_or(0);
                out.put_bytes(data.slice(..fits));
                send(io, out, asked.send_timeout).await?;
                return Err(());
            }
        }
        sent += data.len() as u64;
        if framing == Framing::Chunked && !chunks_as_sent {
            out.put(size_line(data.len() as u64, &mut [0; 22]));
            out.put_bytes(data);
            out.put(b"\r\n");
        } else {
            out.put_bytes(data);
        }
    }
}

thread_local! {
    /// Requests this thread is answering: from a whole head to the end of the response.
    static ANSWERING: Cell<u32> = const { Cell::new(0) };
}

/// Counts one request in [`ANSWERING`] while it lives (on the thread that serves it).
pub(super) struct Answering(());

impl Answering {
    pub(super) fn enter() -> Self {
        ANSWERING.with(|n| n.set(n.get() + 1));
        Answering(())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        ANSWERING.with(|n| n.set(n.get() - 1));
    }
}

/// While this thread answers other requests too: returns once the other tasks it has ready
/// have run, and the I/O that became ready meanwhile has been taken in (tokio's `yield_now`
/// on a current-thread runtime). Awaited before a response's last write and before each
/// write of what has gathered while more of its body is awaited.
///
/// So the connections served in one pass write one after another at its end, instead of
/// each as soon as it is done, between the others' work, and the clients (and the upstream,
/// whose next requests follow) can take more at each wake-up, much as haproxy's and Envoy's
/// event loops write at the end of a pass. In A/B runs of plain builds under load, wrk's CPU
/// per request fell by 0.4–0.6 µs and the hop's did not rise; in profile-guided builds the
/// difference was within the runs' spread (BENCHMARKS.md, item 58). A thread with one
/// request to answer writes at once: there is nothing to gather, and the pass would cost
/// one more poll of the I/O driver per write.
async fn end_of_pass() {
    if ANSWERING.with(Cell::get) > 1 {
        tokio::task::yield_now().await;
    }
}

/// Writes what `out` gathered. A client that has not taken it within `limit` is gone:
/// `Err`, and the response is dropped, which releases what the request holds (permits,
/// the upstream exchange), as when a client leaves.
async fn send(io: &mut OwnedWriteHalf, out: &mut Gather, limit: Duration) -> Result<(), ()> {
    let mut flush = std::pin::pin!(out.flush(io));
    let mut timer = None;
    poll_fn(|cx| {
        if let Poll::Ready(done) = flush.as_mut().poll(cx) {
            return Poll::Ready(done.map_err(drop));
        }
        // Nearly every write finishes at once: a timer is made only for one that waits.
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        timer.as_mut().poll(cx).map(|()| Err(()))
    })
    .await
}

/// Writes a response that refuses a request head, and says the connection closes. A 400
/// carries uvicorn's words, as vLLM would answer; other statuses have no body.
pub(super) async fn refuse(io: &mut OwnedWriteHalf, out: &mut Gather, status: StatusCode) {
    let body = if status == StatusCode::BAD_REQUEST {
        crate::error::INVALID_HTTP_BODY.as_bytes()
    } else {
        b""
    };
    status_line(out, Version::HTTP_11, status);
    if !body.is_empty() {
        field(out, b"content-type", b"text/plain; charset=utf-8");
    }
    field(
        out,
        b"content-length",
        decimal(body.len() as u64, &mut [0; 20]),
    );
    field(out, b"date", &date());
    field(out, b"connection", b"close");
    out.put(b"\r\n");
    out.put(body);
    let _ = out.flush(io).await;
}

/// The `100 Continue` interim response.
pub(super) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

fn status_line(out: &mut Gather, version: Version, status: StatusCode) {
    out.put(if version == Version::HTTP_10 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    out.put(status.as_str().as_bytes());
    out.put(b" ");
    out.put(status.canonical_reason().unwrap_or("").as_bytes());
    out.put(b"\r\n");
}

fn field(out: &mut Gather, name: &[u8], value: &[u8]) {
    out.put(name);
    out.put(b": ");
    out.put(value);
    out.put(b"\r\n");
}

/// Whether the comma-separated `list` holds `token` (any case).
fn has_token(list: &[u8], token: &[u8]) -> bool {
    list.split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

thread_local! {
    /// The `date` value of the current second, made once per second per thread.
    static DATE: Cell<(u64, [u8; 29])> = const { Cell::new((u64::MAX, [0; 29])) };
}

/// Now as an HTTP date (RFC 9110 §5.6.7).
fn date() -> [u8; 29] {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|cached| {
        let (at, text) = cached.get();
        if at == secs {
            return text;
        }
        let text = http_date(secs);
        cached.set((secs, text));
        text
    })
}

/// `secs` after the epoch as an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let of_day = secs % 86_400;
    let (year, month, day) = crate::record::civil_from_days(days);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    let two = |out: &mut [u8; 29], at: usize, v: u64| {
        out[at] = b'0' + (v / 10 % 10) as u8;
        out[at + 1] = b'0' + (v % 10) as u8;
    };
    out[..3].copy_from_slice(DAYS[((days + 4) % 7) as usize]);
    two(&mut out, 5, day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    two(&mut out, 12, year / 100);
    two(&mut out, 14, year % 100);
    two(&mut out, 17, of_day / 3600);
    two(&mut out, 20, of_day / 60 % 60);
    two(&mut out, 23, of_day % 60);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_are_imf_fixdates() {
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(&http_date(1_796_342_399), b"Thu, 03 Dec 2026 23:59:59 GMT");
        assert_eq!(&http_date(4_107_542_400), b"Mon, 01 Mar 2100 00:00:00 GMT");
    }

    #[test]
    fn a_response_waits_for_the_pass_only_while_the_thread_answers_others() {
        use futures_util::FutureExt;
        let answering = || ANSWERING.with(Cell::get);
        let first = Answering::enter();
        assert_eq!(answering(), 1);
        assert!(
            end_of_pass().now_or_never().is_some(),
            "alone: writes at once"
        );
        let second = Answering::enter();
        assert!(
            end_of_pass().now_or_never().is_none(),
            "with another request: waits for the pass"
        );
        drop(second);
        drop(first);
        assert_eq!(answering(), 0);
    }
}
