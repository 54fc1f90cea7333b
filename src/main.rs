//! The `mmgate` command: `serve`, `check`, `inspect`, `hash-key`, and the migration
//! toolkit `probe` and `report`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use mmgate::classify::{classify, RootPath, Route};
use mmgate::config::Config;
use mmgate::contract::{judge, Head, UpstreamFacts, Verdict};
use mmgate::error::gate_body;
use mmgate::inspect::{Field, Findings};

/// The allocator: mimalloc, measured against glibc malloc on the proxy hop (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mmgate::alloc::Allocator = mmgate::alloc::Allocator;

#[derive(Parser)]
#[command(
    name = "mmgate",
    version,
    about = "A gateway for vLLM 0.31's multimodal kwargs contract"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        /// The policy file (see policies/).
        #[arg(long)]
        policy: PathBuf,
        /// Seconds to let in-flight requests finish after SIGTERM/SIGINT.
        #[arg(long, default_value_t = 30)]
        drain_seconds: u64,
    },
    /// Validate a policy; exits non-zero naming every bad field.
    Check {
        /// The policy file.
        #[arg(long)]
        policy: PathBuf,
    },
    /// Print the SHA-256 digest of an API key, for a policy's `key_sha256`.
    HashKey {
        /// The key; read from standard input when omitted (keeps it out of shell history).
        key: Option<String>,
    },
    /// Classify one request body offline, as an untrusted vLLM 0.31 would.
    Inspect {
        /// The request path (e.g. /v1/chat/completions).
        #[arg(long)]
        path: String,
        /// The upstream's `--root-path` (as `vllm.root_path`), under which `--path` may be.
        #[arg(long, default_value = "")]
        root_path: String,
        /// The nesting the upstream's parser takes (as `limits.max_json_depth`; default
        /// `vllm serve`'s, 968; a render server's is 970).
        #[arg(long)]
        max_json_depth: Option<usize>,
        /// The Content-Type header (default application/json).
        #[arg(long, default_value = "application/json")]
        content_type: String,
        /// A served model name, for vLLM's model check (repeatable; unknown models are then 404).
        #[arg(long = "model")]
        models: Vec<String>,
        /// The body file, or - for standard input.
        #[arg(default_value = "-")]
        file: String,
    },
    /// Send the vLLM 0.31 acceptance matrix to a vLLM server or a gateway; exits 1 on any
    /// mismatch with the expected behaviour, 2 when the probe cannot run.
    Probe {
        /// The target's base URL (http://host:port).
        #[arg(long)]
        target: String,
        /// The model (default: the first one /v1/models lists).
        #[arg(long)]
        model: Option<String>,
        /// Sent as `Authorization: Bearer KEY`.
        #[arg(long)]
        api_key: Option<String>,
        /// Comma-separated route names or paths (default: every gated route it serves).
        #[arg(long, value_delimiter = ',')]
        routes: Option<Vec<String>>,
        /// The behaviour expected of the target.
        #[arg(long, value_enum, default_value = "untrusted")]
        expect: mmgate::probe::Expect,
        /// Per-request timeout in seconds.
        #[arg(long, default_value_t = 120)]
        timeout_seconds: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Ask a running gateway's admin listener for `/healthz` (or `/readyz`); exits 0 when it
    /// answers 200, 1 otherwise. For container health checks: the image has no curl.
    Health {
        /// The admin listener (host:port).
        #[arg(long, default_value = "127.0.0.1:9464", conflicts_with = "policy")]
        admin: String,
        /// Read the admin address from this policy instead (`0.0.0.0` is asked on loopback).
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Ask `/readyz` (ready for traffic) instead of `/healthz` (alive).
        #[arg(long)]
        ready: bool,
        /// Connect and read timeout in seconds.
        #[arg(long, default_value_t = 3)]
        timeout_seconds: u64,
    },
    /// Aggregate offending-request log lines per client × route × field.
    Report {
        /// Log files, or - for standard input (the default).
        files: Vec<String>,
        /// Print JSON.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print CSV (not with --suggest, whose output is text or JSON).
        #[arg(long, conflicts_with = "suggest")]
        csv: bool,
        /// Propose deployment-level --mm-processor-kwargs / --media-io-kwargs from logged values.
        #[arg(long)]
        suggest: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            policy,
            drain_seconds,
        } => serve(policy, Duration::from_secs(drain_seconds)),
        Command::Check { policy } => match Config::load(&policy) {
            Ok(c) => {
                let pools: Vec<String> = c
                    .pools
                    .iter()
                    .map(|p| {
                        let urls: Vec<String> =
                            p.members.iter().map(|m| m.url.to_string()).collect();
                        format!(
                            "{}{} [{}]",
                            p.name,
                            if p.trusted { " (trusted)" } else { "" },
                            urls.join(", ")
                        )
                    })
                    .collect();
                emit(
                    ExitCode::SUCCESS,
                    format_args!(
                        "policy OK: listen {}, admin {}, upstream {}, {} client(s)\n",
                        c.listen,
                        c.admin,
                        pools.join("; "),
                        c.clients.len()
                    ),
                )
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        },
        Command::HashKey { key } => hash_key(key),
        Command::Inspect {
            path,
            root_path,
            max_json_depth,
            content_type,
            models,
            file,
        } => inspect(
            &path,
            &root_path,
            max_json_depth,
            &content_type,
            models,
            &file,
        ),
        Command::Probe {
            target,
            model,
            api_key,
            routes,
            expect,
            timeout_seconds,
            json,
        } => probe(
            mmgate::probe::ProbeOpts {
                target,
                model,
                api_key,
                routes,
                expect,
                timeout: Duration::from_secs(timeout_seconds),
            },
            json,
        ),
        Command::Report {
            files,
            json,
            csv,
            suggest,
        } => report_logs(&files, json, csv, suggest),
        Command::Health {
            admin,
            policy,
            ready,
            timeout_seconds,
        } => health(
            &admin,
            policy.as_deref(),
            ready,
            Duration::from_secs(timeout_seconds),
        ),
    }
}

/// One blocking HTTP/1.1 GET of the health endpoint; prints the status line.
fn health(admin: &str, policy: Option<&Path>, ready: bool, timeout: Duration) -> ExitCode {
    use std::io::Write;
    let addr = match policy {
        Some(p) => match Config::load(p) {
            Ok(c) if c.admin.ip().is_unspecified() => {
                let lo: std::net::IpAddr = if c.admin.is_ipv6() {
                    std::net::Ipv6Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv4Addr::LOCALHOST.into()
                };
                std::net::SocketAddr::new(lo, c.admin.port())
            }
            Ok(c) => c.admin,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        },
        None => match std::net::ToSocketAddrs::to_socket_addrs(admin).map(|mut a| a.next()) {
            Ok(Some(a)) => a,
            _ => {
                eprintln!("--admin {admin:?} is not a host:port");
                return ExitCode::FAILURE;
            }
        },
    };
    let path = if ready { "/readyz" } else { "/healthz" };
    let asked = (|| -> std::io::Result<String> {
        let mut conn = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        conn.set_read_timeout(Some(timeout))?;
        conn.set_write_timeout(Some(timeout))?;
        write!(
            conn,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )?;
        let mut reply = Vec::new();
        conn.take(4096).read_to_end(&mut reply)?;
        let text = String::from_utf8_lossy(&reply);
        Ok(text.lines().next().unwrap_or("").to_string())
    })();
    match asked {
        Ok(status) if status.split(' ').nth(1) == Some("200") => {
            emit(ExitCode::SUCCESS, format_args!("{addr}{path}: {status}\n"))
        }
        Ok(status) => {
            eprintln!("{addr}{path}: {status:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{addr}{path}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(policy: PathBuf, drain: Duration) -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MMGATE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .init();
    // The control plane (admin listener, health checks, discovery, reload); the data plane
    // runs on `listen.workers` threads of its own (`mmgate::listen::serve`).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("mmgate-control")
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        // Before serving: a signal that arrives once the gateway answers is handled, never
        // left to its default action (which ends the process without a drain).
        let signals = Signals::install();
        let clock = mmgate::limits::RateClock::default();
        let running = match mmgate::server::start_file(&policy, drain, clock).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(listen = %running.addr, admin = %running.admin, "mmgate serving");
        let stop = running.shutdown_handle();
        let Signals {
            stop: stop_signal,
            hangup,
        } = signals;
        tokio::spawn(async move {
            stop_signal.await;
            tracing::info!("shutdown signal received; draining");
            stop.shutdown();
        });
        reload_on_hangup(hangup, running.live());
        running.wait().await;
        ExitCode::SUCCESS
    })
}

/// The signals the gateway answers: the stop (SIGTERM, SIGINT) and, on Unix, SIGHUP.
struct Signals {
    stop: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
    #[cfg(not(unix))]
    hangup: Option<()>,
}

impl Signals {
    /// Registers the handlers now (inside the runtime), so none is missed later (on Unix;
    /// elsewhere, or if SIGTERM or SIGINT cannot be handled, Ctrl-C is registered when first
    /// awaited).
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let (term, int) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            );
            let stop = async move {
                match (term, int) {
                    (Ok(mut term), Ok(mut int)) => {
                        tokio::select! {
                            _ = term.recv() => {}
                            _ = int.recv() => {}
                        }
                    }
                    _ => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            };
            Signals {
                stop: Box::pin(stop),
                hangup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {
            stop: Box::pin(async {
                let _ = tokio::signal::ctrl_c().await;
            }),
            hangup: None,
        }
    }
}

/// SIGHUP re-reads the policy and certificates (errors are logged and counted there).
#[cfg(unix)]
fn reload_on_hangup(
    hangup: Option<tokio::signal::unix::Signal>,
    live: std::sync::Arc<mmgate::reload::Live>,
) {
    let Some(mut hup) = hangup else {
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP received; reloading the policy");
            let _ = live.reload().await;
        }
    });
}

#[cfg(not(unix))]
fn reload_on_hangup(_: Option<()>, _: std::sync::Arc<mmgate::reload::Live>) {}

fn hash_key(key: Option<String>) -> ExitCode {
    let key = match key {
        Some(k) => k,
        None => {
            let mut k = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut k) {
                eprintln!("cannot read the key from standard input: {e}");
                return ExitCode::from(2);
            }
            k
        }
    };
    if key.trim().is_empty() {
        eprintln!("the key is empty");
        return ExitCode::from(2);
    }
    let digest = hex::encode(mmgate::config::digest(&key));
    emit(ExitCode::SUCCESS, format_args!("{digest}\n"))
}

fn inspect(
    path: &str,
    root_path: &str,
    max_depth: Option<usize>,
    content_type: &str,
    models: Vec<String>,
    file: &str,
) -> ExitCode {
    let root = match RootPath::parse(root_path) {
        Ok(root) => root,
        Err(e) => {
            eprintln!("--root-path: {e}");
            return ExitCode::from(2);
        }
    };
    let mut body = Vec::new();
    let read = if file == "-" {
        std::io::stdin().read_to_end(&mut body)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_end(&mut body))
    };
    if let Err(e) = read {
        eprintln!("cannot read {file}: {e}");
        return ExitCode::from(2);
    }
    let facts = UpstreamFacts {
        served_models: (!models.is_empty()).then_some(models),
        ..Default::default()
    };
    let (verdict, findings) = match classify(&http::Method::POST, path, &root) {
        Route::Gated(kind) => judge(
            kind,
            Head::content_type(Some(content_type.as_bytes())),
            &body,
            max_depth.unwrap_or_else(|| facts.max_json_depth()),
            &facts,
        ),
        Route::Ungated => (Verdict::Accept, None),
    };
    let (out, code) = report(&verdict, findings.as_ref());
    emit(ExitCode::from(code), format_args!("{out}\n"))
}

fn report(verdict: &Verdict, findings: Option<&Findings>) -> (serde_json::Value, u8) {
    use serde_json::json;
    let fields: Vec<_> = Field::ALL
        .iter()
        .map(|&f| {
            let ff = findings.map(|x| x.field(f).clone()).unwrap_or_default();
            json!({"name": f.name(), "present": ff.present, "truthy": ff.truthy(), "keys": ff.keys})
        })
        .collect();
    match verdict {
        Verdict::Accept => (
            json!({"verdict": "accept", "status": 200, "param": null, "fields": fields, "body": null}),
            0,
        ),
        Verdict::Reject(f) => (
            json!({"verdict": "reject", "status": 400, "param": f.name(), "fields": fields, "body": gate_body(*f)}),
            1,
        ),
        Verdict::Invalid(inv) => {
            let status = inv.vllm_status().as_u16();
            (
                json!({"verdict": "invalid", "status": status, "param": null, "fields": fields, "body": inv.vllm_answer().map(|b| String::from_utf8_lossy(&b).into_owned()), "reason": inv.to_string()}),
                3,
            )
        }
    }
}

fn probe(opts: mmgate::probe::ProbeOpts, json: bool) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(mmgate::probe::probe(opts)) {
        Ok(r) => {
            let code = if r.rows.iter().all(|row| row.status == 0) {
                eprintln!("no gated route answered; nothing was probed");
                ExitCode::from(2)
            } else if r.mismatches > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
            if json {
                emit(code, format_args!("{}\n", pretty(&r)))
            } else {
                emit(code, format_args!("{}", mmgate::probe::table(&r)))
            }
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn report_logs(files: &[String], json: bool, csv: bool, suggest: bool) -> ExitCode {
    use mmgate::report;
    let mut parsed = report::Parsed::default();
    let stdin = ["-".to_string()];
    let files = if files.is_empty() { &stdin[..] } else { files };
    for file in files {
        let read = if file == "-" {
            report::parse(std::io::stdin().lock(), &mut parsed)
        } else {
            std::fs::File::open(file)
                .and_then(|f| report::parse(std::io::BufReader::new(f), &mut parsed))
        };
        if let Err(e) = read {
            eprintln!("cannot read {file}: {e}");
            return ExitCode::from(2);
        }
    }
    if parsed.skipped > 0 {
        eprintln!(
            "skipped {} line(s) that are not offending-request log lines",
            parsed.skipped
        );
    }
    if suggest {
        let s = mmgate::advise::suggest(&parsed.entries);
        return match json {
            true => emit(ExitCode::SUCCESS, format_args!("{}\n", pretty(&s))),
            false => emit(
                ExitCode::SUCCESS,
                format_args!("{}", mmgate::advise::text(&s)),
            ),
        };
    }
    let inv = report::inventory(&parsed.entries);
    if json {
        emit(ExitCode::SUCCESS, format_args!("{}\n", pretty(&inv)))
    } else if csv {
        emit(ExitCode::SUCCESS, format_args!("{}", report::csv(&inv)))
    } else {
        emit(ExitCode::SUCCESS, format_args!("{}", report::table(&inv)))
    }
}

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// Writes a command's output to standard output and exits with `code`. A reader that
/// stopped early (`mmgate report ... | head`) ends the output quietly; any other failure
/// to write is reported and exits 2, so no output is lost unnoticed.
fn emit(code: ExitCode, text: std::fmt::Arguments) -> ExitCode {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        Ok(()) => code,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Err(e) => {
            eprintln!("cannot write the output: {e}");
            ExitCode::from(2)
        }
    }
}
