//! The data plane's HTTP/1.1 server for plain TCP connections (TLS and HTTP/2 are served by
//! hyper, [`crate::listen`]): read a head → hand the request to the gateway in force, its
//! body read from the connection as the gateway asks → write the response → the next head.
//!
//! It exists for cost: hyper's server, with its per-request channel and dispatch, was the
//! largest part of a request that mmgate forwards without reading. What a client can
//! observe is what hyper's server did: the same refusals of bad heads (`head.rs`), pipelined
//! requests answered in order, `100 Continue` sent when the body is first asked for, a
//! client that leaves cancelling its request (the gateway's future is dropped), the header
//! timeout (from the connection's start or the last response's end until a head is whole,
//! never while a request is answered), and a drain that lets the request in flight finish.
//!
//! A body the gateway did not read is skipped when it is already in the buffer; otherwise the
//! connection closes after the response (`connection: close`), without reading further.

mod body;
mod head;
mod write;

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::chunked::Chunked;
use crate::gateway::Answer;
use crate::listen::ConnInfo;
use crate::reload::Live;
use crate::tunnel::{Handshake, Switch, Switched};
use crate::vectored::Gather;
use body::{Continue, Remaining, RequestBody, Shared};
use head::{Fields, Framing};
use write::Asked;

pub use body::BodyError;
pub(crate) use body::WholeBody;
pub(crate) use head::{asks_continue, VerbatimTarget};

/// How long a closing connection goes on reading (and discarding) what the client still
/// sends, so that the response before it is not lost to a reset.
const LINGER: Duration = Duration::from_secs(1);
/// The most a closing connection reads before it gives up on lingering.
const LINGER_BYTES: usize = 256 << 10;

/// Serves HTTP/1.1 on `stream`, opened at `opened`, until the client closes it, the header
/// timeout passes while a head is awaited, or `drain` turns true while no request is in
/// flight.
pub async fn serve(
    stream: TcpStream,
    conn: Arc<ConnInfo>,
    live: Arc<Live>,
    (opened, header_timeout): (Instant, Duration),
    mut drain: watch::Receiver<bool>,
) {
    let (read, mut io) = stream.into_split();
    let shared = Shared::new(read);
    let mut out = Gather::default();
    let mut fields = Fields::default();
    let stopping = drain.clone();
    let mut draining = pin!(async move {
        let _ = drain.wait_for(|d| *d).await;
    });
    // One timer for the connection's life, moved only when it fires early.
    let mut wait_began = opened;
    let mut timer = pin!(tokio::time::sleep_until(wait_began + header_timeout));
    loop {
        // Await a head.
        let deadline = wait_began + header_timeout;
        // Bytes already looked at for a line end; a head can only end at one, so a head
        // trickled in is parsed again only when a line has ended, not on every read.
        let mut seen = 0;
        let head = poll_fn(|cx| {
            let mut r = shared.lock();
            loop {
                if memchr::memchr(b'\n', &r.buf[seen..]).is_some() {
                    match head::parse(&mut r.buf, &mut fields) {
                        Ok(None) => {}
                        // What came with the head after its body is parsed by vLLM's server
                        // before the request is answered: bytes it refuses get its 400 in
                        // place of the answer.
                        Ok(Some(head)) if doomed_after(&head, &r.buf) => {
                            return Poll::Ready(Err(http::StatusCode::BAD_REQUEST))
                        }
                        done => return Poll::Ready(done),
                    }
                }
                // No whole head yet: llhttp would already refuse bytes no method begins.
                if r.buf.len() > seen && head::unknown_method(&r.buf[..r.buf.len().min(16)]) {
                    return Poll::Ready(Err(http::StatusCode::BAD_REQUEST));
                }
                seen = r.buf.len();
                if seen >= head::MAX_HEAD {
                    return Poll::Ready(Err(http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
                }
                match r.poll_fill(cx, 8 << 10) {
                    Poll::Ready(true) => {}
                    Poll::Ready(false) => return Poll::Ready(Ok(None)),
                    Poll::Pending => break,
                }
            }
            // No whole head is waiting: a drain closes the connection now.
            if draining.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Ok(None));
            }
            while timer.as_mut().poll(cx).is_ready() {
                if Instant::now() >= deadline {
                    return Poll::Ready(Ok(None));
                }
                timer.as_mut().reset(deadline);
            }
            Poll::Pending
        })
        .await;
        let mut head = match head {
            Ok(Some(head)) => head,
            Ok(None) => break,
            Err(status) => {
                if status == http::StatusCode::BAD_REQUEST {
                    // A head vLLM's server cannot parse either: counted with the framing
                    // refusals the gateway answers (smuggling shapes among them).
                    let gateway = live.gateway();
                    let refusals = &gateway.metrics().refusals;
                    refusals.with_label_values(&["none", "framing"]).inc();
                }
                write::refuse(&mut io, &mut out, status).await;
                break;
            }
        };
        let answering = write::Answering::enter();

        // Hand the request to the gateway; its body is read from the connection.
        let version = head.request.version();
        // A WebSocket handshake's answer is no HTTP answer to `HEAD`: its body is sent.
        let is_head = head.request.method() == http::Method::HEAD
            && head.request.extensions().get::<Handshake>().is_none();
        let body = {
            let mut r = shared.lock();
            r.expect = if head.expect_continue && head.framing != Framing::Empty {
                Continue::Expected
            } else {
                Continue::No
            };
            r.body = match head.framing {
                Framing::Empty => Remaining::Done,
                Framing::Length(n) => Remaining::Length(n),
                Framing::Chunked => Remaining::Chunked(Chunked::request()),
            };
            r.request += 1;
            if let Framing::Length(n) = head.framing {
                if n > WholeBody::MIN {
                    let whole = WholeBody::new(shared.clone(), r.request, n);
                    head.request.extensions_mut().insert(whole);
                }
            }
            match head.framing {
                Framing::Empty => Body::empty(),
                _ => Body::new(RequestBody::new(shared.clone(), r.request)),
            }
        };
        let gateway = live.gateway();
        let answer = pin!(gateway.handle(head.request.map(|()| body), &conn));
        let Some(mut answer) = answer_or_gone(answer, &shared, &mut io).await else {
            // The client left (or `100 Continue` could not be sent): the request is dropped.
            return;
        };
        if let Some(switched) = Switch::take(&mut answer.response) {
            drop((answer, answering));
            let stall = live.gateway().config().limits.send_timeout;
            return tunnel(switched, shared, io, stall).await;
        }

        // Write the response.
        let body_done = {
            let mut r = shared.lock();
            r.skip_buffered_body();
            r.body_done()
        };
        let asked = Asked {
            version,
            head: is_head,
            keep_alive: head.keep_alive
                && body_done
                && !*stopping.borrow()
                && !answer.closes_connection(),
            send_timeout: gateway.config().limits.send_timeout,
        };
        match write::respond(&mut io, &mut out, &shared, answer, asked).await {
            Ok(true) => wait_began = Instant::now(),
            Ok(false) => break,
            Err(()) => return,
        }
    }
    linger(&shared, io).await;
}

/// Whether the bytes already read (`buf`, from the end of `head`) after its body (when it
/// has a length and came whole) cannot begin a request ([`head::doomed`]); never after an
/// upgrade, whose bytes are not HTTP, nor after a request llhttp does not keep the
/// connection for (what follows it is ignored).
fn doomed_after(head: &head::Head, buf: &[u8]) -> bool {
    let len = match head.framing {
        _ if head.upgrade || !head.pipelines => return false,
        Framing::Empty => 0,
        Framing::Length(n) => n,
        Framing::Chunked => return false,
    };
    usize::try_from(len).is_ok_and(|len| buf.len() > len && head::doomed(&buf[len..]))
}

/// Writes the upstream's `101` head as it came, then joins the client's connection (with
/// what it sent after its handshake) to the upstream's until both directions have ended.
async fn tunnel(switched: Switched, shared: Arc<Shared>, mut io: OwnedWriteHalf, stall: Duration) {
    // Bounded as every write to the client is (it may have stopped reading).
    match tokio::time::timeout(stall, io.write_all(switched.head())).await {
        Ok(Ok(())) => {}
        _ => return,
    }
    // The handshake had no body: nothing else holds the read side now.
    let Some((read, early)) = Shared::into_parts(shared) else {
        return;
    };
    let Ok(stream) = read.reunite(io) else {
        return;
    };
    if let Err(e) = switched.splice(stream, &early, stall).await {
        tracing::debug!(error = %e, "WebSocket tunnel ended with an error");
    }
}

/// Polls the gateway's `answer`, sending `100 Continue` when the body asks for it and
/// watching for the client to leave once the body has been read; `None` if it left.
async fn answer_or_gone<F: Future<Output = Answer>>(
    mut answer: Pin<&mut F>,
    shared: &Shared,
    io: &mut OwnedWriteHalf,
) -> Option<Answer> {
    let mut sent = 0;
    poll_fn(|cx| {
        if let Poll::Ready(res) = answer.as_mut().poll(cx) {
            return Poll::Ready(Some(res));
        }
        let mut r = shared.lock();
        // Nothing else is written while a request is answered.
        while r.expect == Continue::Wanted {
            match Pin::new(&mut *io).poll_write(cx, &write::CONTINUE[sent..]) {
                Poll::Ready(Ok(n)) if n > 0 => sent += n,
                Poll::Ready(_) => return Poll::Ready(None),
                Poll::Pending => break,
            }
            if sent == write::CONTINUE.len() {
                r.expect = Continue::No;
                cx.waker().wake_by_ref();
            }
        }
        if r.poll_gone(cx) {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

/// Closes the connection: the write side first, then what the client still sends is read
/// and dropped for a while, so that a response it has not read yet is not lost to a reset.
async fn linger(shared: &Shared, mut io: OwnedWriteHalf) {
    if io.shutdown().await.is_err() {
        return;
    }
    let mut read = 0;
    let drained = poll_fn(|cx| {
        let mut r = shared.lock();
        loop {
            r.buf.clear();
            match r.poll_fill(cx, 16 << 10) {
                Poll::Ready(true) if read < LINGER_BYTES => read += r.buf.len(),
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    });
    let _ = tokio::time::timeout(LINGER, drained).await;
}
