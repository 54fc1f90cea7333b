//! The real binary, `mmgate serve`, on listeners the binary picks itself.
//!
//! A port picked free and released before the binary binds it can be taken by another test
//! in between, and the binary then exits. So the tests give it port 0 ([`ANY`]) and read
//! where it listens from its "mmgate serving" line on stderr.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// A loopback listener on a port the binary picks: for `listen.addr` and `listen.admin`.
pub const ANY: &str = "127.0.0.1:0";

/// A started `mmgate serve`, killed when dropped.
pub struct Serving {
    child: Option<Child>,
    /// The data-plane listener.
    pub listen: SocketAddr,
    /// The admin listener.
    pub admin: SocketAddr,
    /// Every stderr line (the serving line included), until the binary exits.
    pub stderr: Receiver<String>,
}

impl Serving {
    /// Spawns `cmd`, an `mmgate serve` whose policy listens on [`ANY`] (its stdout is the
    /// caller's to set; stderr is read here), and waits for the line that says where.
    pub fn start(cmd: &mut Command) -> Serving {
        let (child, stderr, addrs) = spawn(cmd);
        let found = addrs.recv_timeout(Duration::from_secs(60));
        Serving::found(child, stderr, found)
    }

    /// [`Serving::start`] from async code: the wait does not hold the runtime's thread, so
    /// an in-process upstream the binary asks before it serves still answers.
    pub async fn started(cmd: &mut Command) -> Serving {
        let (child, stderr, addrs) = spawn(cmd);
        let found =
            tokio::task::spawn_blocking(move || addrs.recv_timeout(Duration::from_secs(60)))
                .await
                .unwrap();
        Serving::found(child, stderr, found)
    }

    fn found(
        mut child: Child,
        stderr: Receiver<String>,
        found: Result<(SocketAddr, SocketAddr), mpsc::RecvTimeoutError>,
    ) -> Serving {
        // The reader drops its sender when stderr closes: a binary that exits is seen at once.
        match found {
            Ok((listen, admin)) => Serving {
                child: Some(child),
                listen,
                admin,
                stderr,
            },
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                let said: Vec<String> = stderr.try_iter().collect();
                panic!("mmgate serve did not start ({status:?}); it said: {said:#?}");
            }
        }
    }

    /// The process.
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("not taken")
    }

    /// Sends SIGTERM and waits for the exit (the binary drains first); kills it and fails
    /// if it has not exited `within`.
    pub fn terminate(&mut self, within: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        let (tx, exited) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match exited.recv_timeout(within) {
            Ok(status) => status.expect("wait for mmgate"),
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                panic!("mmgate did not exit within {within:?} of SIGTERM");
            }
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Spawns `cmd` with stderr piped: the child, every stderr line, and the two addresses of
/// the serving line once it comes.
fn spawn(cmd: &mut Command) -> (Child, Receiver<String>, Receiver<(SocketAddr, SocketAddr)>) {
    let mut child = cmd
        .env("MMGATE_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mmgate");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (line_tx, lines) = mpsc::channel();
    let (addr_tx, addrs) = mpsc::channel();
    // Reads to the end whoever listens, so the binary never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut addr_tx = Some(addr_tx);
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("mmgate serving") {
                if let Some(tx) = addr_tx.take() {
                    let _ = tx.send((address(&line, "listen"), address(&line, "admin")));
                }
            }
            let _ = line_tx.send(line);
        }
    });
    (child, lines, addrs)
}

/// The address after `name=` in a serving line.
pub fn address(line: &str, name: &str) -> SocketAddr {
    let key = format!("{name}=");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        + key.len();
    let value = line[at..].split_whitespace().next().unwrap_or_default();
    value
        .parse()
        .unwrap_or_else(|e| panic!("{name} {value:?} in {line:?}: {e}"))
}
