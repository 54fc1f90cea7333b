//! WebSocket tunnels (vLLM's realtime `/v1/realtime` sessions).
//!
//! A handshake (a WebSocket upgrade by uvicorn's test, [`asks_websocket`], marked
//! [`Handshake`] by the server that read it) is forwarded as
//! it came, on an upstream connection of its own, and without the bytes after its head:
//! vLLM's server reads none of them as a body. If the upstream switches (`101`), its head
//! goes to the client as it came and the two connections are joined byte for byte
//! ([`Switched::splice`]) until both directions have ended (bounded: see there). Any other
//! answer (vLLM's 403 for a path with no WebSocket route, its 400 for a malformed
//! handshake) is passed on as an answer, and the client's connection closes after it, as
//! vLLM's server closes it.
//!
//! The gateway sends a switched response up with its [`Switch`] among the extensions; the
//! server that wrote the head takes it and splices ([`crate::http1`] for plain HTTP/1.1,
//! hyper's upgrade for TLS, [`crate::listen`]). What the request held (its in-flight count,
//! its pool's admission) is held by the tunnel until it ends.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Response;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// uvicorn's test for a WebSocket handshake: the last `Connection` field holds the
/// `upgrade` token and the last `Upgrade` field is `websocket` (in any case).
pub fn asks_websocket(headers: &HeaderMap) -> bool {
    let last = |name| {
        headers
            .get_all(name)
            .iter()
            .next_back()
            .map(HeaderValue::as_bytes)
    };
    let upgrade_token = last(header::CONNECTION).is_some_and(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
    });
    upgrade_token
        && last(header::UPGRADE).is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"websocket"))
}

/// Marks a request the server that read it found to be a WebSocket handshake
/// ([`asks_websocket`], HTTP/1 only): the gateway tunnels it.
#[derive(Debug, Clone, Copy)]
pub struct Handshake;

/// A byte stream to the upstream.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// An upstream connection that switched to WebSocket, and what the tunnel holds.
pub struct Switched {
    /// The upstream's `101` head, as it came (its status line to its blank line).
    head: Bytes,
    /// What the upstream sent after its head before the splice began.
    early: BytesMut,
    io: Box<dyn Io>,
    /// Held until the tunnel ends (the request's in-flight count, its admission).
    held: Option<Box<dyn Send>>,
}

impl Switched {
    pub(crate) fn new(head: Bytes, early: BytesMut, io: Box<dyn Io>) -> Self {
        Switched {
            head,
            early,
            io,
            held: None,
        }
    }

    /// The upstream's `101` head, to be written to the client as it is.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The `101` head's fields as a header map (for a server that writes the head itself).
    /// Fields `http` cannot hold are left out.
    pub fn header_map(&self) -> HeaderMap {
        let mut fields = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Response::new(&mut fields);
        let mut map = HeaderMap::new();
        if parsed.parse(&self.head).is_ok() {
            for f in parsed.headers.iter() {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(f.name.as_bytes()),
                    HeaderValue::from_bytes(f.value),
                ) {
                    map.append(name, value);
                }
            }
        }
        map
    }

    /// Joins `client` (after its head; `early` is what it sent after that head) and the
    /// upstream: each side's bytes go to the other as they come, and its end of stream as
    /// a shutdown of the other's write side. Once one direction has ended the other has
    /// `stall` to end too, and a write that has waited `stall` for its reader ends the
    /// tunnel: a silent peer or one that takes nothing holds nothing for long. Returns the
    /// bytes carried each way (client to upstream, upstream to client).
    pub async fn splice<C>(
        mut self,
        client: C,
        early: &[u8],
        stall: Duration,
    ) -> std::io::Result<(u64, u64)>
    where
        C: AsyncRead + AsyncWrite + Unpin,
    {
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let early_down = std::mem::take(&mut self.early);
        let (mut up_read, mut up_write) = tokio::io::split(self.io);
        let up = pump(&mut client_read, &mut up_write, early, stall);
        let down = pump(&mut up_read, &mut client_write, &early_down, stall);
        let (mut up, mut down) = (std::pin::pin!(up), std::pin::pin!(down));
        // A direction that failed ends the tunnel at once; one that ended leaves the other
        // `stall` to end.
        let carried = tokio::select! {
            first = &mut up => {
                let first = first?;
                let rest = tokio::time::timeout(stall, &mut down).await;
                (first, rest.map_err(unended)??)
            }
            first = &mut down => {
                let first = first?;
                let rest = tokio::time::timeout(stall, &mut up).await;
                (rest.map_err(unended)??, first)
            }
        };
        drop(self.held.take());
        Ok(carried)
    }
}

/// Copies `from` to `to` after `first`, until `from` ends (then shuts `to`'s write side);
/// fails when a write waits `stall` for its reader. Returns the bytes copied.
async fn pump<R, W>(from: &mut R, to: &mut W, first: &[u8], stall: Duration) -> std::io::Result<u64>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut copied = first.len() as u64;
    if !first.is_empty() {
        write_within(to, first, stall).await?;
    }
    let mut buf = vec![0; 16 << 10];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            let _ = tokio::time::timeout(stall, to.shutdown()).await;
            return Ok(copied);
        }
        write_within(to, &buf[..n], stall).await?;
        copied += n as u64;
    }
}

/// Writes `bytes` to `to` and flushes them, failing when that waits `stall`.
async fn write_within<W: AsyncWrite + Unpin>(
    to: &mut W,
    bytes: &[u8],
    stall: Duration,
) -> std::io::Result<()> {
    let write = async {
        to.write_all(bytes).await?;
        to.flush().await
    };
    tokio::time::timeout(stall, write)
        .await
        .map_err(timed_out)?
}

fn unended(_: tokio::time::error::Elapsed) -> std::io::Error {
    let why = "one side of the tunnel ended, the other did not within the send timeout";
    std::io::Error::new(std::io::ErrorKind::TimedOut, why)
}

fn timed_out(_: tokio::time::error::Elapsed) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the tunnel's peer took nothing",
    )
}

/// A switched upstream connection on its way to the server that wrote the `101`, as a
/// response extension (which must be `Clone`: the connection is taken out once).
#[derive(Clone)]
pub struct Switch(Arc<Mutex<Option<Switched>>>);

impl Switch {
    /// Marks `res` (a `101`) as switched on `switched`.
    pub(crate) fn attach<B>(res: &mut Response<B>, switched: Switched) {
        res.extensions_mut()
            .insert(Switch(Arc::new(Mutex::new(Some(switched)))));
    }

    /// Whether `res` carries a switched connection.
    pub fn is_on<B>(res: &Response<B>) -> bool {
        res.extensions().get::<Switch>().is_some()
    }

    /// Gives the tunnel what it must hold until it ends.
    pub(crate) fn hold<B>(res: &Response<B>, held: Box<dyn Send>) {
        if let Some(Switch(s)) = res.extensions().get::<Switch>() {
            if let Some(switched) = s.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
                switched.held = Some(held);
            }
        }
    }

    /// Takes the switched connection out of `res`, if it carries one.
    pub fn take<B>(res: &mut Response<B>) -> Option<Switched> {
        let Switch(s) = res.extensions_mut().remove::<Switch>()?;
        let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
        s.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (n, v) in fields {
            m.append(*n, HeaderValue::from_static(v));
        }
        m
    }

    #[test]
    fn a_handshake_is_told_by_the_last_fields_as_uvicorn_tells_it() {
        assert!(asks_websocket(&map(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket"),
        ])));
        assert!(!asks_websocket(&map(&[
            ("connection", "upgrade"),
            ("upgrade", "h2c, websocket"),
        ])));
        assert!(!asks_websocket(&map(&[
            ("connection", "upgrade"),
            ("connection", "keep-alive"),
            ("upgrade", "websocket"),
        ])));
        assert!(!asks_websocket(&map(&[("upgrade", "websocket")])));
    }

    #[tokio::test]
    async fn a_splice_passes_both_sides_early_bytes_and_ends_of_stream() {
        use tokio::io::AsyncReadExt;
        let (up_near, mut up_far) = tokio::io::duplex(64);
        let (client_near, mut client_far) = tokio::io::duplex(64);
        let head = Bytes::from_static(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
        let switched = Switched::new(head, BytesMut::from(&b"hi"[..]), Box::new(up_near));
        let map = switched.header_map();
        assert_eq!(map["upgrade"], "websocket");
        assert_eq!(map["connection"], "Upgrade");
        let splice = tokio::spawn(switched.splice(client_near, b"early", STALL));
        client_far.write_all(b" and more").await.unwrap();
        client_far.shutdown().await.unwrap();
        let mut got = Vec::new();
        up_far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"early and more");
        up_far.write_all(b" there").await.unwrap();
        up_far.shutdown().await.unwrap();
        let mut got = Vec::new();
        client_far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hi there");
        assert_eq!(splice.await.unwrap().unwrap(), (14, 8));
    }

    const STALL: Duration = Duration::from_secs(30);

    fn switched(io: tokio::io::DuplexStream) -> Switched {
        let head = Bytes::from_static(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        Switched::new(head, BytesMut::new(), Box::new(io))
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_holds_a_tunnel_the_upstream_ended_for_one_stall_at_most() {
        use tokio::io::AsyncReadExt;
        let (up_near, mut up_far) = tokio::io::duplex(64);
        let (client_near, mut client_far) = tokio::io::duplex(64);
        let splice = tokio::spawn(switched(up_near).splice(client_near, b"", STALL));
        up_far.shutdown().await.unwrap();
        // The client sees the end, but never ends its side.
        let mut got = Vec::new();
        client_far.read_to_end(&mut got).await.unwrap();
        ends_after_one_stall(splice).await;
        drop((up_far, client_far));
    }

    /// Asserts that the tunnel ends with a timeout one `STALL` after the call.
    async fn ends_after_one_stall(splice: tokio::task::JoinHandle<std::io::Result<(u64, u64)>>) {
        let started = tokio::time::Instant::now();
        let ended = tokio::time::timeout(STALL * 2, splice)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ended.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), STALL);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_nothing_ends_its_tunnel() {
        let (up_near, mut up_far) = tokio::io::duplex(64);
        let (client_near, _client_far) = tokio::io::duplex(64);
        let splice = tokio::spawn(switched(up_near).splice(client_near, b"", STALL));
        // More than the client's pipe holds; it reads none of it.
        tokio::spawn(async move { up_far.write_all(&[b'x'; 4096]).await });
        ends_after_one_stall(splice).await;
    }
}
