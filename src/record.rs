//! Recording: each request's [`Outcome`] is recorded exactly once, as metrics and, for
//! requests vLLM 0.31 would reject or that mmgate stripped, one JSON log line on stdout.
//!
//! The log line never carries bodies or media: only the route, the field names and their
//! top-level key names (bounded), the client address, user agent and request id, and, only
//! when the policy opts in (`[log] kwargs_values`), the fields' *scalar* member values
//! (never arrays, nested objects, non-finite numbers or strings over the bound). Each
//! offending request also feeds the live [`Inventory`].

use std::cell::RefCell;
use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::classify::RouteKind;
use crate::decide::Mode;
use crate::identify::Via;
use crate::inspect::{Field, Findings, KwargValue};
use crate::inventory::{Inventory, Observation};
use crate::listen::ConnInfo;
use crate::metrics::Metrics;

const MAX_KEYS: usize = 32;
const MAX_TEXT: usize = 256;

/// Everything recorded about one request.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The gated route, or `None` for pass-through traffic.
    pub route: Option<RouteKind>,
    /// The mode applied.
    pub mode: Option<Mode>,
    /// What happened, a closed label: `forwarded`, `routed`, `stripped`, `rejected`, `refused`, `error`.
    pub outcome: &'static str,
    /// The field vLLM 0.31 would name in its gate error, if it would reject.
    pub would_reject: Option<Field>,
    /// Fields stripped before forwarding.
    pub stripped: Vec<Field>,
    /// Offending fields with their key names (bounded), for the log.
    pub fields: Vec<(Field, Vec<String>)>,
    /// With `[log] kwargs_values`: the offending fields' scalar member values, for the log.
    pub values: Vec<(Field, serde_json::Map<String, serde_json::Value>)>,
    /// The response status.
    pub status: u16,
    /// The client address.
    pub client: IpAddr,
    /// The client's policy name, or `anonymous` (never a key or a header value).
    pub client_id: String,
    /// How the client was identified (unset when identification failed).
    pub via: Option<Via>,
    /// A client header from outside the trusted networks was ignored.
    pub spoofed_header: bool,
    /// The pool the request was sent to (or refused by).
    pub pool: Option<String>,
    /// Time waited for permits, when admitted.
    pub waited: Option<Duration>,
    /// Why mmgate refused it (a closed label), if it did.
    pub refusal: Option<&'static str>,
    /// The client's user agent (bounded).
    pub user_agent: Option<String>,
    /// The request id (the client's `x-request-id` or one mmgate made).
    pub request_id: String,
    /// The request path as sent (bounded).
    pub path: String,
    /// Inspected body size.
    pub body_bytes: Option<usize>,
    /// Time to response headers.
    pub elapsed: Duration,
    /// Upstream time to response headers.
    pub upstream_elapsed: Option<Duration>,
}

impl Outcome {
    /// A fresh outcome for a request: its client address, user agent, path and request id
    /// (the client's `x-request-id`, or one made from the connection and `seq`).
    pub fn start(headers: &http::HeaderMap, path: &str, conn: &ConnInfo, seq: u64) -> Outcome {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(bound_text)
        };
        Outcome {
            route: None,
            mode: None,
            outcome: "forwarded",
            would_reject: None,
            stripped: Vec::new(),
            fields: Vec::new(),
            values: Vec::new(),
            status: 0,
            client: conn.remote.ip(),
            client_id: "anonymous".into(),
            via: None,
            spoofed_header: false,
            pool: None,
            waited: None,
            refusal: None,
            user_agent: header("user-agent"),
            request_id: header("x-request-id")
                .unwrap_or_else(|| format!("mmgate-{:x}-{seq:x}", conn.id)),
            path: bound_text(path),
            body_bytes: None,
            elapsed: Duration::ZERO,
            upstream_elapsed: None,
        }
    }

    /// Records the offending fields' key names from the findings.
    pub fn note_fields(&mut self, findings: &Findings) {
        self.fields = findings
            .offending()
            .map(|f| {
                let keys = findings
                    .field(f)
                    .keys
                    .iter()
                    .take(MAX_KEYS)
                    .map(|k| bounded(k))
                    .collect();
                (f, keys)
            })
            .collect();
    }

    /// Records the offending fields' scalar member values (strings up to `max_len` bytes;
    /// one level down for `media_io_kwargs` modalities), for the defaults advisor.
    pub fn note_values(&mut self, findings: &Findings, max_len: usize) {
        self.values = findings
            .offending()
            .map(|f| {
                let ff = findings.field(f);
                let open = f == Field::MediaIoKwargs;
                let map = ff
                    .keys
                    .iter()
                    .zip(&ff.values)
                    .take(MAX_KEYS)
                    .filter_map(|(k, v)| Some((bounded(k), scalar(v, max_len, open)?)))
                    .collect();
                (f, map)
            })
            .collect();
    }
}

/// A member value as logged: scalars only (one level of objects when `open`).
fn scalar(v: &KwargValue, max_len: usize, open: bool) -> Option<serde_json::Value> {
    use serde_json::Value;
    match v {
        KwargValue::Null => Some(Value::Null),
        KwargValue::Bool(b) => Some(Value::Bool(*b)),
        KwargValue::Number(n) if n.is_finite() && n.fract() == 0.0 && n.abs() < 9.0e15 => {
            Some(Value::from(*n as i64))
        }
        KwargValue::Number(n) => serde_json::Number::from_f64(*n).map(Value::Number),
        KwargValue::Str(s) if s.len() <= max_len => Some(Value::String(s.to_string())),
        KwargValue::Object(members) if open => {
            let map: serde_json::Map<String, Value> = members
                .iter()
                .take(MAX_KEYS)
                .filter_map(|(k, v)| Some((bounded(k), scalar(v, max_len, false)?)))
                .collect();
            (!map.is_empty()).then_some(Value::Object(map))
        }
        _ => None,
    }
}

fn bounded(s: &str) -> String {
    if s.len() <= MAX_TEXT {
        return s.to_string();
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// One offending-request log line (the documented schema).
#[derive(Serialize)]
struct LogLine<'a> {
    ts: String,
    event: &'static str,
    route: &'static str,
    path: &'a str,
    mode: &'static str,
    action: &'static str,
    param: Option<&'static str>,
    fields: Vec<LogField<'a>>,
    stripped: Vec<&'static str>,
    status: u16,
    client_addr: String,
    client: &'a str,
    pool: Option<&'a str>,
    user_agent: Option<&'a str>,
    request_id: &'a str,
}

#[derive(Serialize)]
struct LogField<'a> {
    name: &'static str,
    keys: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// Records an outcome: metrics always, a log line when vLLM would reject or mmgate stripped.
/// Records an outcome exactly once: on [`Recorder::finish`], or, when the request is
/// cancelled before its response (the client went away and the handler was dropped), on
/// drop as `cancelled` with status 499, so an offending request is never lost from the
/// inventory.
pub struct Recorder<'a> {
    metrics: &'a Metrics,
    inventory: &'a Inventory,
    start: tokio::time::Instant,
    /// The outcome being filled in by the stages.
    pub outcome: Outcome,
    done: bool,
}

impl<'a> Recorder<'a> {
    /// Starts recording a request.
    pub fn new(metrics: &'a Metrics, inventory: &'a Inventory, outcome: Outcome) -> Self {
        Recorder {
            metrics,
            inventory,
            start: tokio::time::Instant::now(),
            outcome,
            done: false,
        }
    }

    /// Records the finished request with its response status.
    pub fn finish(mut self, status: u16) {
        self.outcome.status = status;
        self.outcome.elapsed = self.start.elapsed();
        record(self.metrics, self.inventory, &self.outcome);
        self.done = true;
    }
}

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.outcome.outcome = "cancelled";
            self.outcome.status = 499;
            self.outcome.elapsed = self.start.elapsed();
            record(self.metrics, self.inventory, &self.outcome);
        }
    }
}

/// Records an outcome: metrics always; a log line and an inventory entry when vLLM would
/// reject or mmgate stripped.
pub fn record(metrics: &Metrics, inventory: &Inventory, o: &Outcome) {
    let route = o.route.map_or("ungated", RouteKind::name);
    let mode = o.mode.map_or("none", Mode::name);
    metrics
        .requests
        .with_label_values(&[route, mode, o.outcome])
        .inc();
    metrics
        .duration
        .with_label_values(&[route])
        .observe(o.elapsed.as_secs_f64());
    if let Some(u) = o.upstream_elapsed {
        metrics
            .upstream_duration
            .with_label_values(&[route])
            .observe(u.as_secs_f64());
    }
    if let Some(n) = o.body_bytes {
        metrics.body_bytes.observe(n as f64);
    }
    if let Some(f) = o.would_reject {
        metrics
            .offending
            .with_label_values(&[route, mode, f.name()])
            .inc();
    }
    for f in &o.stripped {
        metrics.stripped.with_label_values(&[route, f.name()]).inc();
    }
    record_client(metrics, o);
    if o.would_reject.is_some() || !o.stripped.is_empty() {
        let ts = rfc3339(SystemTime::now());
        log_line(o, &ts, route, mode);
        let addr = o.client.to_string();
        inventory.observe(&Observation {
            ts: &ts,
            client: &o.client_id,
            client_addr: &addr,
            user_agent: o.user_agent.as_deref(),
            route,
            fields: o.fields.iter().map(|(f, k)| (f.name(), &k[..])).collect(),
        });
    }
}

/// The identity, pool and limit metrics of one request.
fn record_client(metrics: &Metrics, o: &Outcome) {
    metrics
        .client_requests
        .with_label_values(&[&o.client_id, o.outcome])
        .inc();
    if let Some(via) = o.via {
        metrics.identified.with_label_values(&[via.name()]).inc();
    }
    if o.spoofed_header {
        metrics.ignored_client_headers.inc();
    }
    let pool = o.pool.as_deref().unwrap_or("none");
    if let Some(reason) = o.refusal {
        metrics.refusals.with_label_values(&[pool, reason]).inc();
    }
    if let Some(w) = o.waited {
        metrics.admissions.with_label_values(&[pool]).inc();
        metrics
            .pool_wait
            .with_label_values(&[pool])
            .observe(w.as_secs_f64());
    }
}

/// Log lines batched before one write to stdout, on a thread that batches.
const BATCH_BYTES: usize = 16 << 10;

thread_local! {
    /// This thread's unwritten log lines; `None` on a thread that writes each line at once.
    static BATCH: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// From now on, log lines written on this thread are held until [`flush_log_lines`] (a
/// data-plane worker calls it whenever it goes idle, every second, and when it ends) or
/// until 16 KiB are held: one `write` for many lines, and no contention for stdout.
pub(crate) fn batch_log_lines() {
    BATCH.with(|b| *b.borrow_mut() = Some(Vec::with_capacity(BATCH_BYTES)));
}

/// Writes the log lines this thread holds.
pub(crate) fn flush_log_lines() {
    flush_with(|lines| {
        let _ = std::io::stdout().lock().write_all(lines);
    });
}

fn flush_with(write: impl FnOnce(&[u8])) {
    BATCH.with(|b| {
        if let Some(held) = b.borrow_mut().as_mut().filter(|h| !h.is_empty()) {
            write(held);
            held.clear();
        }
    });
}

fn log_line(o: &Outcome, ts: &str, route: &'static str, mode: &'static str) {
    let Ok(mut text) = log_text(o, ts, route, mode) else {
        return;
    };
    text.push(b'\n');
    let held = BATCH.with(|b| {
        b.borrow_mut().as_mut().map(|held| {
            held.extend_from_slice(&text);
            held.len()
        })
    });
    match held {
        Some(n) if n >= BATCH_BYTES => flush_log_lines(),
        Some(_) => {}
        None => {
            let _ = std::io::stdout().lock().write_all(&text);
        }
    }
}

/// The offending-request log line, without its newline.
fn log_text(
    o: &Outcome,
    ts: &str,
    route: &'static str,
    mode: &'static str,
) -> serde_json::Result<Vec<u8>> {
    let line = LogLine {
        ts: ts.to_string(),
        event: "offending_request",
        route,
        path: &o.path,
        mode,
        action: o.outcome,
        param: o.would_reject.map(Field::name),
        fields: o
            .fields
            .iter()
            .map(|(f, keys)| LogField {
                name: f.name(),
                keys,
                values: o.values.iter().find(|(v, _)| v == f).map(|(_, m)| m),
            })
            .collect(),
        stripped: o.stripped.iter().map(|f| f.name()).collect(),
        status: o.status,
        client_addr: o.client.to_string(),
        client: &o.client_id,
        pool: o.pool.as_deref(),
        user_agent: o.user_agent.as_deref(),
        request_id: &o.request_id,
    };
    serde_json::to_vec(&line)
}

/// Truncates client-supplied text for logs.
pub fn bound_text(s: &str) -> String {
    bounded(s)
}

/// Formats a time as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_timestamps() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_216_515_123);
        assert_eq!(rfc3339(t), "2026-12-02T13:01:55.123Z");
    }

    fn outcome(body: &str, max_len: Option<usize>) -> Outcome {
        let mut o = Outcome {
            route: Some(RouteKind::Chat),
            mode: Some(Mode::Shadow),
            outcome: "forwarded",
            would_reject: Some(Field::MmProcessorKwargs),
            stripped: Vec::new(),
            fields: Vec::new(),
            values: Vec::new(),
            status: 200,
            client: "10.0.0.7".parse().unwrap(),
            client_id: "anonymous".into(),
            via: None,
            spoofed_header: false,
            pool: None,
            waited: None,
            refusal: None,
            user_agent: None,
            request_id: "r".into(),
            path: "/v1/chat/completions".into(),
            body_bytes: None,
            elapsed: Duration::ZERO,
            upstream_elapsed: None,
        };
        let f = crate::inspect::inspect(body.as_bytes(), 970).unwrap();
        o.note_fields(&f);
        if let Some(n) = max_len {
            o.note_values(&f, n);
        }
        o
    }

    #[test]
    fn values_are_logged_only_when_asked_and_only_scalars() {
        let body = r#"{"mm_processor_kwargs":{"max_pixels":1003520,"f":0.5,"s":"ok","long":"xxxxxxxxxx","a":[1],"o":{"x":1},"n":NaN},
            "media_io_kwargs":{"video":{"num_frames":8,"deep":{"a":1}},"image":{"u":[1]}}}"#;
        let line = |o: &Outcome| -> serde_json::Value {
            serde_json::from_slice(&log_text(o, "t", "chat", "shadow").unwrap()).unwrap()
        };
        let off = line(&outcome(body, None));
        assert!(off["fields"][0].get("values").is_none());
        let on = line(&outcome(body, Some(4)));
        assert_eq!(
            on["fields"][0]["values"],
            serde_json::json!({"max_pixels":1003520,"f":0.5,"s":"ok"})
        );
        assert_eq!(
            on["fields"][1]["values"],
            serde_json::json!({"video":{"num_frames":8}})
        );
        assert_eq!(
            on["fields"][1]["keys"],
            serde_json::json!(["video", "image"])
        );
    }

    #[test]
    fn a_batching_thread_holds_whole_lines_in_order_until_flushed() {
        std::thread::spawn(|| {
            batch_log_lines();
            let o = outcome(r#"{"mm_processor_kwargs":{"a":1}}"#, None);
            for id in ["first", "second"] {
                let o = Outcome {
                    request_id: id.into(),
                    ..o.clone()
                };
                log_line(&o, "t", "chat", "shadow");
            }
            let mut written = Vec::new();
            flush_with(|lines| written.extend_from_slice(lines));
            let lines: Vec<serde_json::Value> = String::from_utf8(written)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let ids: Vec<&str> = lines
                .iter()
                .map(|l| l["request_id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, ["first", "second"]);
            flush_with(|_| panic!("nothing is held after a flush"));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn long_text_is_bounded_on_a_char_boundary() {
        let s = "é".repeat(300);
        let b = bound_text(&s);
        assert!(b.len() <= MAX_TEXT && s.starts_with(&b));
    }
}
