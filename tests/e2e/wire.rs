//! Requests written as raw bytes, for what an HTTP client library will not send: request
//! lines, heads and chunked bodies that vLLM's server (uvicorn with httptools) reads or
//! refuses.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A body vLLM's gate refuses, on a route every kind of server has.
const OFFENDING: &str = r#"{"model":"tiny","prompt":"Hello","mm_processor_kwargs":{"a":1}}"#;

/// (request line, the fields after `Host`) of requests each sent with [`OFFENDING`]: some
/// reach the gate, the others vLLM's server cannot parse.
const HEADS: &[(&str, &str)] = &[
    ("POST /tokenize HTTP/1.1", ""),
    ("POST  /tokenize   HTTP/1.1", ""),
    ("POST http://gw/tokenize HTTP/1.1", ""),
    ("POST https://u@gw:65535/tokenize?x#y HTTP/1.1", ""),
    ("POST /tokenize HTTP/1.1 ", ""),
    ("POST /tokenize?q={\"a\":\"<`>\"} HTTP/1.1", ""),
    ("POST /tokenize<` HTTP/1.1", ""),
    ("POST *?a HTTP/1.1", ""),
    ("POST /tokenize HTTP/2.0", ""),
    ("POST /tokenize HTTP/0.9", ""),
    ("POST /tokenize HTTP/1.2", ""),
    ("POST /tokenize HTTP/1.1", "Transfer-Encoding: chunked\r\n"),
    ("POST */tokenize HTTP/1.1", ""),
    ("POST /tokenize\u{e9} HTTP/1.1", ""),
    ("POST /tokenize?q=\u{e9} HTTP/1.1", ""),
    ("POST /tok\tenize HTTP/1.1", ""),
    ("POST http://gw HTTP/1.1", ""),
    ("POST http://gw:65536/tokenize HTTP/1.1", ""),
    ("POST http://g_w/tokenize HTTP/1.1", ""),
    ("POST gw:80 HTTP/1.1", ""),
    ("POST tokenize HTTP/1.1", ""),
    ("POST /tokenize HTTP/1.1", "X-A: 1\nX-B: 2\r\n"),
    ("POST /tokenize HTTP/1.1", "Content-Length: 63\r\n"),
    ("POST /tokenize HTTP/1.1", "Bad Name: v\r\n"),
    ("post /tokenize HTTP/1.1", ""),
    ("PRI /tokenize HTTP/1.1", ""),
    ("CONNECT /tokenize HTTP/1.1", ""),
    (
        "POST /tokenize HTTP/1.1",
        "Expect: 100-continue\r\nExpect: x\r\n",
    ),
];

/// The status, content type and body of the answer to `wire`, read to the connection's end.
async fn exchange(addr: SocketAddr, wire: &[u8]) -> (String, Option<String>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(wire).await.expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    // A `100 Continue` head before the answer is noted in its status; the fields of the
    // answer after it are compared as any answer's.
    let mut interim = String::new();
    while out.starts_with(b"HTTP/1.1 1") {
        let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") else {
            break;
        };
        interim += &String::from_utf8_lossy(&out[9..12]);
        interim += "+";
        out.drain(..end + 4);
    }
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(out.len());
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    let status = interim + head.split(' ').nth(1).unwrap_or("none");
    let content_type = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-type")
            .then(|| value.trim().to_owned())
    });
    (
        status,
        content_type,
        out[(split + 4).min(out.len())..].to_vec(),
    )
}

/// Sends `wire` to the untrusted server and to the reject gateway in front of a trusted one,
/// and notes in `failures` an answer that differs.
async fn compare(
    what: &str,
    wire: &[u8],
    (untrusted, reject): (SocketAddr, SocketAddr),
    failures: &mut Vec<String>,
) {
    let want = exchange(untrusted, wire).await;
    let got = exchange(reject, wire).await;
    if want != got {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        failures.push(format!(
            "{what}: vLLM {} {:?} {}, mmgate {} {:?} {}",
            want.0,
            want.1,
            text(&want.2),
            got.0,
            got.1,
            text(&got.2)
        ));
    }
}

/// Chunked framings of [`OFFENDING`], well and badly formed.
fn chunkings() -> [String; 12] {
    let n = OFFENDING.len();
    [
        format!("{n:x}\r\n{OFFENDING}\r\n0\r\n\r\n"),
        format!("{n:x};ext=1\r\n{OFFENDING}\r\n0\r\nX-Trailer: 1\r\n\r\n"),
        format!("{n:x};a;b=\"c d\"\r\n{OFFENDING}\r\n0\r\n\r\n"),
        format!("{n:x} \r\n{OFFENDING}\r\n0\r\n\r\n"),
        format!("{n:x}; a = b\r\n{OFFENDING}\r\n0\r\n\r\n"),
        format!("{n:x}\r\n{OFFENDING}XX0\r\n\r\n"),
        format!("{n:x}\n{OFFENDING}\n0\n\n"),
        format!(
            "{}{n:x}\r\n{OFFENDING}\r\n{}\r\n\r\n",
            "0".repeat(20),
            "0".repeat(20)
        ),
        format!("{n:x};=x;a=;;b\r\n{OFFENDING}\r\n0\r\n\r\n"),
        format!("{n:x};a=b;\r\n{OFFENDING}\r\n0\r\n\r\n"),
        format!("{n:x}\r\n{OFFENDING}\r\n0\r\nContent-Length: 0\r\n\r\n"),
        format!("{n:x};x={}\r\n{OFFENDING}\r\n0\r\n\r\n", "y".repeat(20_000)),
    ]
}

/// Every head of [`HEADS`], and each of [`chunkings`], gets the same answer, byte for byte,
/// from the untrusted server and from a reject gateway in front of a trusted one.
pub(crate) async fn request_lines(
    untrusted: SocketAddr,
    reject: SocketAddr,
    failures: &mut Vec<String>,
) {
    let length = OFFENDING.len();
    let framed = HEADS.iter().map(|(line, fields)| {
        let fields = format!("{fields}Content-Length: {length}\r\n");
        (*line, fields, OFFENDING.to_owned())
    });
    let lines = ["POST /tokenize HTTP/1.1", "POST /tokenize HTTP/1.0"];
    let chunked = lines.into_iter().flat_map(|line| {
        chunkings().map(move |body| (line, "Transfer-Encoding: chunked\r\n".to_owned(), body))
    });
    for (line, fields, body) in framed.chain(chunked) {
        let wire = format!(
            "{line}\r\nHost: gw\r\nContent-Type: application/json\r\n{fields}Connection: close\r\n\r\n{body}"
        );
        let what = format!("request {line:?} {fields:?} {body:?}");
        compare(&what, wire.as_bytes(), (untrusted, reject), failures).await;
    }
}

/// WebSocket handshakes (vLLM's realtime sessions; these servers have no realtime model):
/// (request line, the fields after `Host`, the bytes after the head).
const HANDSHAKES: &[(&str, &str, &str)] = &[
    ("GET /v1/realtime HTTP/1.1", KEY, ""),
    ("GET /v1/realtime HTTP/1.1", "", ""),
    (
        "GET /v1/realtime HTTP/1.1",
        "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: x\r\n",
        "",
    ),
    ("GET /v1/realtime HTTP/1.0", KEY, ""),
    ("HEAD /v1/realtime HTTP/1.1", KEY, ""),
    ("GET /tokenize HTTP/1.1", KEY, ""),
    (
        "POST /tokenize HTTP/1.1",
        "Content-Type: application/json\r\nContent-Length: 63\r\n",
        OFFENDING,
    ),
    (
        "GET /v1/realtime HTTP/1.1",
        "Transfer-Encoding: chunked\r\n",
        "2\r\n{}\r\n0\r\n\r\n",
    ),
];

const KEY: &str = "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

/// Each of [`HANDSHAKES`] gets the same answer from the untrusted server and through a
/// reject gateway (which forwards handshakes, `crate::tunnel`), and the connection closes
/// after it.
pub(crate) async fn handshakes(
    untrusted: SocketAddr,
    reject: SocketAddr,
    failures: &mut Vec<String>,
) {
    for (line, fields, after) in HANDSHAKES {
        let wire = format!(
            "{line}\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n{fields}\r\n{after}"
        );
        let what = format!("handshake {line:?} {fields:?}");
        compare(&what, wire.as_bytes(), (untrusted, reject), failures).await;
    }
}

/// Bytes after a whole request, in the same write, that vLLM's server cannot parse as the
/// next one (its 400 comes in place of the first answer), and bytes no request begins with.
pub(crate) async fn leftovers(
    untrusted: SocketAddr,
    reject: SocketAddr,
    failures: &mut Vec<String>,
) {
    let length = OFFENDING.len();
    let request = |length: usize| {
        format!("POST /tokenize HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{OFFENDING}")
    };
    let wires = [
        format!("{}}}\r\n\r\n", request(length)),
        format!("{}xx yy\r\n\r\n", request(length)),
        format!("{}GET / HTTP/9.9\r\n\r\n", request(length)),
        request(length - 1),
        "}".to_owned(),
        "GE\u{1}".to_owned(),
    ];
    for wire in wires {
        let what = format!("leftover {wire:?}");
        compare(&what, wire.as_bytes(), (untrusted, reject), failures).await;
    }
}
