//! The training load of mmgate's profile-guided build (`tools/pgo.sh`): starts
//! `examples/fake_vllm` and, for each gate mode (`pass`, `shadow`, `strip`, `reject`), a
//! given `mmgate` binary in front of it; sends a mix of requests over 8 keep-alive
//! connections; and stops that gateway with SIGTERM, so that an instrumented build writes
//! its profile as it exits.
//!
//! ```text
//! pgo_train MMGATE FAKE_VLLM [ROUNDS]
//! ```
//!
//! The mix is broader than the benchmark's bodies: chat with and without kwargs, streamed and
//! not, with 256 KiB and 1 MiB images, completions, embeddings, tokenize, and a malformed
//! body. Every answer must be a complete HTTP response below 500 (a gateway that fails
//! trains the wrong paths), and every gateway must exit cleanly; otherwise the exit status
//! is 1 with the reason.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

const CONNECTIONS: usize = 8;
const MODES: [&str; 4] = ["pass", "shadow", "strip", "reject"];

/// One kind of request of the mix: path, body, and how many to send per round.
struct Kind {
    path: &'static str,
    body: Bytes,
    count: usize,
}

fn prose(len: usize) -> String {
    const WORDS: [&str; 12] = [
        "a", "river", "small", "house", "bridge", "describe", "picture", "where", "every", "tree",
        "red", "object",
    ];
    let mut s = String::with_capacity(len + 8);
    let mut i = 7usize;
    while s.len() < len {
        i = (i * 31 + 17) % WORDS.len();
        s.push_str(WORDS[i]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

fn chat(text: &str, stream: bool, kwargs: &str) -> Bytes {
    let stream = if stream { r#", "stream": true"# } else { "" };
    Bytes::from(format!(
        r#"{{"model": "tiny", "messages": [{{"role": "system", "content": "Answer briefly."}}, {{"role": "user", "content": "{text}"}}], "max_tokens": 64, "temperature": 0.7{stream}{kwargs}}}"#
    ))
}

fn image_chat(data_len: usize) -> Bytes {
    let data: String = (0..data_len)
        .map(|i| {
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i * 7 % 64] as char
        })
        .collect();
    Bytes::from(format!(
        r#"{{"model": "tiny", "messages": [{{"role": "user", "content": [{{"type": "text", "text": "What is in this image?"}}, {{"type": "image_url", "image_url": {{"url": "data:image/png;base64,{data}"}}}}]}}], "max_tokens": 64, "mm_processor_kwargs": {{"num_crops": 4}}}}"#
    ))
}

fn mix() -> Vec<Kind> {
    let kwargs = r#", "mm_processor_kwargs": {"num_crops": 4}"#;
    let long = prose(1900);
    let kind = |path, body: Bytes, count| Kind { path, body, count };
    vec![
        kind("/v1/chat/completions", chat(&long, false, kwargs), 300),
        kind("/v1/chat/completions", chat(&long, true, kwargs), 150),
        kind("/v1/chat/completions", chat(&long, false, ""), 150),
        kind(
            "/v1/chat/completions",
            chat(&prose(200), false, r#", "mm_processor_kwargs": {}"#),
            50,
        ),
        kind("/v1/chat/completions", image_chat(256 << 10), 24),
        kind("/v1/chat/completions", image_chat(1 << 20), 8),
        kind(
            "/v1/completions",
            Bytes::from(format!(
                r#"{{"model": "tiny", "prompt": "{}", "max_tokens": 16, "media_io_kwargs": {{"image": {{"mode": "RGB"}}}}}}"#,
                prose(400)
            )),
            100,
        ),
        kind(
            "/v1/embeddings",
            Bytes::from(format!(
                r#"{{"model": "tiny", "input": "{}", "mm_processor_kwargs": {{"a": 1}}}}"#,
                prose(300)
            )),
            100,
        ),
        kind(
            "/tokenize",
            Bytes::from_static(br#"{"model": "tiny", "prompt": "hello"}"#),
            50,
        ),
        kind(
            "/v1/chat/completions",
            Bytes::from_static(br#"{"model": "tiny", "messages": ["#),
            30,
        ),
    ]
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Polls `addr` with `GET path` until it answers 200 (at most 60 s: an instrumented build
/// starts slowly).
async fn wait_up(addr: SocketAddr, path: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = tokio::net::TcpStream::connect(addr).await {
            if let Ok((mut send, conn)) =
                hyper::client::conn::http1::handshake(TokioIo::new(s)).await
            {
                tokio::spawn(conn);
                let req = Request::get(path)
                    .header("host", "localhost")
                    .body(Full::new(Bytes::new()));
                if let Ok(res) = send.send_request(req.expect("a valid request")).await {
                    if res.status() == 200 {
                        return Ok(());
                    }
                }
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{addr}{path} did not answer 200 within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends this connection's share of each kind (`conn` of `CONNECTIONS`), reading every answer.
async fn drive(
    addr: SocketAddr,
    mix: &[Kind],
    rounds: usize,
    conn: usize,
) -> Result<usize, String> {
    let s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = s.set_nodelay(true);
    let (mut send, c) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(c);
    let mut sent = 0;
    for _ in 0..rounds {
        for kind in mix {
            for _ in (conn..kind.count).step_by(CONNECTIONS) {
                let req = Request::post(kind.path)
                    .header("host", "localhost")
                    .header("content-type", "application/json")
                    .body(Full::new(kind.body.clone()))
                    .expect("a valid request");
                let res = send
                    .send_request(req)
                    .await
                    .map_err(|e| format!("{}: {e}", kind.path))?;
                let status = res.status();
                res.into_body()
                    .collect()
                    .await
                    .map_err(|e| format!("{}: body: {e}", kind.path))?;
                if status.is_server_error() {
                    return Err(format!("{} answered {status}", kind.path));
                }
                sent += 1;
            }
        }
    }
    Ok(sent)
}

fn policy(port: u16, admin: u16, upstream: u16, mode: &str) -> String {
    format!(
        "[listen]\naddr = \"127.0.0.1:{port}\"\nadmin = \"127.0.0.1:{admin}\"\n\
         [upstream]\nurl = \"http://127.0.0.1:{upstream}\"\n[gate]\ndefault = \"{mode}\"\n\
         [vllm]\nserved_models = [\"tiny\"]\ndiscover_models = false\ndiscover_routes = false\n\
         [reload]\nwatch = false\n"
    )
}

/// Kills a child on drop (the fake upstream, or a gateway left behind by an error).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn train(mmgate: &Path, fake: &Path, rounds: usize) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("mmgate-pgo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let up = free_port()?;
    let upstream = Command::new(fake)
        .arg(format!("127.0.0.1:{up}"))
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", fake.display()))?;
    let _upstream = Reaped(upstream);
    wait_up(([127, 0, 0, 1], up).into(), "/health").await?;
    let mix = mix();
    for mode in MODES {
        let (port, admin) = (free_port()?, free_port()?);
        let file = dir.join(format!("{mode}.toml"));
        std::fs::write(&file, policy(port, admin, up, mode)).map_err(|e| e.to_string())?;
        let child = Command::new(mmgate)
            .args(["serve", "--policy"])
            .arg(&file)
            .args(["--drain-seconds", "5"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", mmgate.display()))?;
        let mut gateway = Reaped(child);
        wait_up(([127, 0, 0, 1], admin).into(), "/readyz").await?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let started = Instant::now();
        let drivers = (0..CONNECTIONS).map(|c| drive(addr, &mix, rounds, c));
        let sent: usize = futures_util::future::try_join_all(drivers)
            .await?
            .into_iter()
            .sum();
        let pid = gateway.0.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status();
        if !killed.is_ok_and(|s| s.success()) {
            return Err(format!("could not send SIGTERM to mmgate ({pid})"));
        }
        let status = gateway.0.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("mmgate ({mode}) exited with {status}"));
        }
        eprintln!(
            "{mode}: {sent} requests in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: pgo_train MMGATE FAKE_VLLM [ROUNDS]");
        std::process::exit(2);
    }
    let rounds = match args.get(3).map(|r| r.parse::<usize>()) {
        None => 1,
        Some(Ok(r)) if r > 0 => r,
        Some(_) => {
            eprintln!("ROUNDS must be a positive number");
            std::process::exit(2);
        }
    };
    if let Err(e) = train(Path::new(&args[1]), Path::new(&args[2]), rounds).await {
        eprintln!("pgo_train: {e}");
        std::process::exit(1);
    }
}
