//! WebSocket tunnels (vLLM's realtime `/v1/realtime` sessions).
//!
//! A handshake (a WebSocket upgrade by uvicorn's test, [`asks_websocket`], marked
//! [`Handshake`] by the server that read it) is forwarded as
//! it came, on an upstream connection of its own, and without the bytes after its head:
//! vLLM's server reads none of them as a body. If the upstream switches (`101`), its head
//! goes to the client as it came and the two connections are joined byte for byte
//! ([`Switched::splice`]) until both directions have ended. Any other answer (vLLM's 403
//! for a path with no WebSocket route, its 400 for a malformed handshake) is passed on as
//! an answer, and the client's connection closes after it, as vLLM's server closes it.
//!
//! The gateway sends a switched response up with its [`Switch`] among the extensions; the
//! server that wrote the head takes it and splices ([`crate::http1`] for plain HTTP/1.1,
//! hyper's upgrade for TLS, [`crate::listen`]). What the request held (its in-flight count,
//! its pool's admission) is held by the tunnel until it ends.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Response;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

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
    /// The upstream's `101` head, as it came (its request line to its blank line).
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
    /// upstream until both directions have ended: each side's end of stream is passed on
    /// as a shutdown of the other's write side. Returns the bytes carried each way
    /// (client to upstream, upstream to client).
    pub async fn splice<C>(mut self, mut client: C, early: &[u8]) -> std::io::Result<(u64, u64)>
    where
        C: AsyncRead + AsyncWrite + Unpin,
    {
        if !self.early.is_empty() {
            client.write_all(&self.early).await?;
            client.flush().await?;
        }
        if !early.is_empty() {
            self.io.write_all(early).await?;
            self.io.flush().await?;
        }
        let (up, down) = tokio::io::copy_bidirectional(&mut client, &mut self.io).await?;
        drop(self.held.take());
        Ok((up + early.len() as u64, down + self.early.len() as u64))
    }
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
        let splice = tokio::spawn(switched.splice(client_near, b"early"));
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
}
