//! Raw HTTP/1.1 over a tokio `TcpStream` (or any stream: TLS), for requests no well-behaved
//! client would send: bytes written as given, responses read with a deadline (never a
//! fixed sleep).
//!
//! Included with `#[path = "support/raw.rs"] mod raw;` by the tests that need it.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// The longest any verdict is waited for.
pub const VERDICT: Duration = Duration::from_secs(5);

/// One response as read off the wire.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// The status line and headers, as text.
    pub head: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A connection with its unread bytes.
pub struct Conn<S = TcpStream> {
    pub stream: S,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        Conn::over(TcpStream::connect(addr).await.unwrap())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn over(stream: S) -> Conn<S> {
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    pub async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Writes, tolerating a peer that already closed (it may answer before reading it all).
    pub async fn write_lossy(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// Reads more bytes before `deadline`: `Ok(0)` at EOF, `Err` on timeout.
    async fn fill(&mut self, deadline: Instant) -> Result<usize, String> {
        let mut chunk = [0u8; 8192];
        match timeout_at(deadline, self.stream.read(&mut chunk)).await {
            Err(_) => Err("timed out".into()),
            Ok(Err(e)) => {
                // A reset counts as the end of the stream.
                let _ = e;
                Ok(0)
            }
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
        }
    }

    /// Reads one response (Content-Length, chunked, or to EOF) within [`VERDICT`].
    pub async fn response(&mut self) -> Result<RawResponse, String> {
        self.response_within(VERDICT).await
    }

    pub async fn response_within(&mut self, within: Duration) -> Result<RawResponse, String> {
        self.read_response(within, false).await
    }

    /// Reads one response to a HEAD request (a head, never a body) within [`VERDICT`].
    pub async fn response_to_head(&mut self) -> Result<RawResponse, String> {
        self.read_response(VERDICT, true).await
    }

    async fn read_response(
        &mut self,
        within: Duration,
        to_head: bool,
    ) -> Result<RawResponse, String> {
        let deadline = Instant::now() + within;
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.fill(deadline).await? == 0 {
                return Err(format!(
                    "connection closed before a response head ({} bytes: {})",
                    self.buf.len(),
                    self.buf.escape_ascii()
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line: {head}"))?;
        let mut res = RawResponse {
            status,
            head,
            body: Vec::new(),
        };
        if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(res);
        }
        if let Some(n) = res.header("content-length") {
            let n: usize = n.parse().map_err(|_| "bad content-length")?;
            while self.buf.len() < n {
                if self.fill(deadline).await? == 0 {
                    return Err(format!("body cut short: {} of {n}", self.buf.len()));
                }
            }
            res.body = self.buf.drain(..n).collect();
        } else if res
            .header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"))
        {
            res.body = self.chunked(deadline).await?;
        } else {
            while self.fill(deadline).await? > 0 {}
            res.body = std::mem::take(&mut self.buf);
        }
        Ok(res)
    }

    async fn chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let line = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                if self.fill(deadline).await? == 0 {
                    return Err("chunked body cut short".into());
                }
            };
            let size = String::from_utf8_lossy(&self.buf[..line]).into_owned();
            let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16)
                .map_err(|_| format!("bad chunk size {size:?}"))?;
            self.buf.drain(..line + 2);
            while self.buf.len() < size + 2 {
                if self.fill(deadline).await? == 0 {
                    return Err("chunk cut short".into());
                }
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
            if size == 0 {
                return Ok(body);
            }
        }
    }

    /// Whether the peer closes the connection within `within` (bytes it sends are kept).
    pub async fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            match self.fill(deadline).await {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }

    /// The next `n` bytes (past any response read), within [`VERDICT`].
    pub async fn take(&mut self, n: usize) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + VERDICT;
        while self.buf.len() < n {
            if self.fill(deadline).await? == 0 {
                return Err(format!("closed after {:?}", self.buf.escape_ascii()));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Bytes received but not yet consumed as a response.
    pub fn unread(&self) -> &[u8] {
        &self.buf
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A POST head for `path` with extra header lines (each ending in `\r\n`).
pub fn head(path: &str, extra: &str) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n{extra}\r\n")
}

/// An upstream that answers each connection's first request head with `answer`, as raw
/// bytes, and closes it: for answers no server library writes.
pub async fn upstream(answer: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1024];
                while find(&head, b"\r\n\r\n").is_none() {
                    match s.read(&mut b).await {
                        Ok(n @ 1..) => head.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                }
                let _ = s.write_all(answer).await;
            });
        }
    });
    format!("http://{addr}")
}
