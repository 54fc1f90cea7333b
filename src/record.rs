//! Recording: each request's [`Outcome`] is recorded exactly once, as metrics and, for
//! requests vLLM 0.31 would reject or that mmgate stripped, one JSON log line on stdout.
//!
//! The log line never carries bodies or media: only the route, the field names and their
//! top-level key names (bounded), the client address, user agent and request id, and, only
//! when the policy opts in (`[log] kwargs_values`), the fields' *scalar* member values
//! (never arrays, nested objects, non-finite numbers or strings over the bound). Each
//! offending request also feeds the live [`Inventory`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::classify::RouteKind;
use crate::decide::Mode;
use crate::identify::{ClientId, Via, ANONYMOUS};
use crate::inspect::{Field, Findings, KwargValue};
use crate::inventory::{Inventory, Observation};
use crate::listen::ConnInfo;
use crate::metrics::Metrics;

mod line;
mod series;

pub use series::{ClientRequests, OUTCOMES};

const MAX_KEYS: usize = 32;
const MAX_TEXT: usize = 256;

/// Everything recorded about one request.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The gated route, or `None` for pass-through traffic.
    pub route: Option<RouteKind>,
    /// The mode applied.
    pub mode: Option<Mode>,
    /// What happened, one of [`OUTCOMES`].
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
    /// The client's IP address.
    pub client_addr: http::HeaderValue,
    /// The client's policy name, or `anonymous` (never a key or a header value).
    pub client_id: Cow<'static, str>,
    /// The client (anonymous until identified).
    pub client: ClientId,
    /// How the client was identified (unset when identification failed).
    pub via: Option<Via>,
    /// A client header from outside the trusted networks was ignored.
    pub spoofed_header: bool,
    /// The pool the request was sent to (or refused by).
    pub pool: Option<&'static str>,
    /// Why mmgate refused it (a closed label), if it did.
    pub refusal: Option<&'static str>,
    /// The client's user agent, as sent (bounded when logged).
    pub user_agent: Option<http::HeaderValue>,
    /// The request id.
    pub request_id: RequestId,
    /// The request's target as sent (a shared handle: its path goes to the log, bounded,
    /// only when a line is written).
    pub uri: http::Uri,
    /// Inspected body size.
    pub body_bytes: Option<usize>,
    /// Time to response headers.
    pub elapsed: Duration,
    /// Upstream time to response headers.
    pub upstream_elapsed: Option<Duration>,
}

/// The client's request id header (a constant name: a lookup by `&str` parses it first).
const X_REQUEST_ID: http::HeaderName = http::HeaderName::from_static("x-request-id");

impl Outcome {
    /// A fresh outcome for a request: its client address, user agent, path and request id
    /// (the client's `x-request-id`, or one made from the connection and `seq`).
    pub fn start(headers: &http::HeaderMap, uri: &http::Uri, conn: &ConnInfo, seq: u64) -> Outcome {
        Outcome {
            route: None,
            mode: None,
            outcome: "forwarded",
            would_reject: None,
            stripped: Vec::new(),
            fields: Vec::new(),
            values: Vec::new(),
            status: 0,
            client_addr: conn.remote_ip().clone(),
            client_id: ANONYMOUS.into(),
            client: ClientId::Anonymous,
            via: None,
            spoofed_header: false,
            pool: None,
            refusal: None,
            user_agent: headers.get(http::header::USER_AGENT).cloned(),
            request_id: RequestId {
                sent: headers.get(X_REQUEST_ID).cloned(),
                conn: conn.id,
                seq,
            },
            uri: uri.clone(),
            body_bytes: None,
            elapsed: Duration::ZERO,
            upstream_elapsed: None,
        }
    }

    /// The request path as sent, bounded for the log.
    pub fn path(&self) -> &str {
        bounded_str(self.uri.path())
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
    /// one level down for `media_io_kwargs` modalities, each logged only whole), for the
    /// defaults advisor, which takes a key without its value as one it cannot cover. A field
    /// with more keys than are logged gets no values.
    pub fn note_values(&mut self, findings: &Findings, max_len: usize) {
        self.values = findings
            .offending()
            .map(|f| {
                let ff = findings.field(f);
                let open = f == Field::MediaIoKwargs;
                let listed_whole = ff.keys.len() <= MAX_KEYS;
                let map = ff
                    .keys
                    .iter()
                    .zip(&ff.values)
                    .filter(|_| listed_whole)
                    .filter_map(|(k, v)| Some((bounded(k), scalar(v, max_len, open)?)))
                    .collect();
                (f, map)
            })
            .collect();
    }
}

/// A request's id: the client's `x-request-id` (bounded), or, when it sent none (or one
/// that is not text), one made from the connection and request numbers. Formatted only
/// when logged.
#[derive(Debug, Clone)]
pub struct RequestId {
    sent: Option<http::HeaderValue>,
    conn: u64,
    seq: u64,
}

impl RequestId {
    /// The id as logged.
    pub fn text(&self) -> Cow<'_, str> {
        match self.sent() {
            Some(sent) => Cow::Borrowed(sent),
            None => {
                let mut made = Vec::with_capacity(40);
                self.write_made(&mut made);
                Cow::Owned(String::from_utf8(made).expect("ASCII"))
            }
        }
    }

    /// The client's id, when it is text (bounded).
    fn sent(&self) -> Option<&str> {
        self.sent
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(bounded_str)
    }

    /// `mmgate-<connection>-<sequence>`, in hexadecimal.
    fn write_made(&self, w: &mut Vec<u8>) {
        w.extend_from_slice(b"mmgate-");
        line::hex(w, self.conn);
        w.push(b'-');
        line::hex(w, self.seq);
    }

    /// The id as a JSON string, written into `w` (the one the client sent is escaped).
    pub(crate) fn write_json(&self, w: &mut Vec<u8>) {
        match self.sent() {
            Some(sent) => line::string(w, sent),
            None => {
                w.push(b'"');
                self.write_made(w);
                w.push(b'"');
            }
        }
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
        KwargValue::Object(members) if open && !members.is_empty() && members.len() <= MAX_KEYS => {
            let map = members
                .iter()
                .map(|(k, v)| Some((bounded(k), scalar(v, max_len, false)?)))
                .collect::<Option<serde_json::Map<String, Value>>>()?;
            Some(Value::Object(map))
        }
        _ => None,
    }
}

/// Client text for the log, owned and bounded ([`bounded_str`]).
fn bounded(s: &str) -> String {
    bounded_str(s).to_string()
}

/// `s` up to its first [`MAX_TEXT`] bytes, cut on a character boundary.
fn bounded_str(s: &str) -> &str {
    if s.len() <= MAX_TEXT {
        return s;
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Records an outcome exactly once: on [`Recorder::finish`], or, when the request is
/// cancelled before its response (the client went away and the handler was dropped), on
/// drop as `cancelled` with status 499, so an offending request is never lost from the
/// inventory.
pub struct Recorder<'a> {
    metrics: &'a Metrics,
    clients: &'a ClientRequests,
    inventory: &'a Inventory,
    start: tokio::time::Instant,
    /// The outcome being filled in by the stages.
    pub outcome: Outcome,
    done: bool,
}

impl<'a> Recorder<'a> {
    /// Starts recording a request.
    pub fn new(
        metrics: &'a Metrics,
        clients: &'a ClientRequests,
        inventory: &'a Inventory,
        outcome: Outcome,
    ) -> Self {
        Recorder {
            metrics,
            clients,
            inventory,
            start: tokio::time::Instant::now(),
            outcome,
            done: false,
        }
    }

    /// Records the finished request with its response status (the first call only; the
    /// recorder is not moved, so a large outcome is not copied on the way).
    pub fn finish(&mut self, status: u16) {
        if self.done {
            return;
        }
        self.outcome.status = status;
        self.outcome.elapsed = self.start.elapsed();
        record(self.metrics, self.clients, self.inventory, &self.outcome);
        self.done = true;
    }
}

impl Drop for Recorder<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.outcome.outcome = "cancelled";
            self.outcome.status = 499;
            self.outcome.elapsed = self.start.elapsed();
            record(self.metrics, self.clients, self.inventory, &self.outcome);
        }
    }
}

/// Records an outcome: metrics always; a log line and an inventory entry when vLLM would
/// reject or mmgate stripped.
pub fn record(metrics: &Metrics, clients: &ClientRequests, inventory: &Inventory, o: &Outcome) {
    let route = o.route.map_or("ungated", RouteKind::name);
    let mode = o.mode.map_or("none", Mode::name);
    let r = series::route(o.route);
    let slot = series::requests(o.route, o.mode, o.outcome);
    metrics
        .requests
        .with(slot, &[route, mode, o.outcome], |c| c.inc());
    let seconds = o.elapsed.as_secs_f64();
    metrics
        .duration
        .with(Some(r), &[route], |h| h.observe(seconds));
    if let Some(u) = o.upstream_elapsed {
        let seconds = u.as_secs_f64();
        metrics
            .upstream_duration
            .with(Some(r), &[route], |h| h.observe(seconds));
    }
    if let Some(n) = o.body_bytes {
        metrics.body_bytes.observe(n as f64);
    }
    if let Some(f) = o.would_reject {
        let slot = Some(series::offending(o.route, o.mode, f));
        metrics
            .offending
            .with(slot, &[route, mode, f.name()], |c| c.inc());
    }
    for &f in &o.stripped {
        let slot = Some(series::stripped(o.route, f));
        metrics.stripped.with(slot, &[route, f.name()], |c| c.inc());
    }
    record_client(metrics, clients, o);
    if o.would_reject.is_some() || !o.stripped.is_empty() {
        let ts = rfc3339_now();
        log_line(o, &ts, route, mode);
        inventory.observe(&Observation {
            ts: &ts,
            client: &o.client_id,
            client_addr: o.client_addr.to_str().unwrap_or_default(),
            user_agent: user_agent(o),
            route,
            fields: o.fields.iter().map(|(f, k)| (f.name(), &k[..])).collect(),
        });
    }
}

/// The client metrics of one request: its requests by client, how it was identified, and
/// its refusal by a limit. (Admissions are counted by the pool's limiter.)
fn record_client(metrics: &Metrics, clients: &ClientRequests, o: &Outcome) {
    clients.inc(o.client, &o.client_id, o.outcome);
    if let Some(via) = o.via {
        metrics
            .identified
            .with(Some(series::via(via)), &[via.name()], |c| c.inc());
    }
    if o.spoofed_header {
        metrics.ignored_client_headers.inc();
    }
    if let Some(reason) = o.refusal {
        let pool = o.pool.unwrap_or("none");
        metrics.refusals.with_label_values(&[pool, reason]).inc();
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
    // Written straight into this thread's batch when it keeps one.
    let held = BATCH.with(|b| {
        b.borrow_mut().as_mut().map(|held| {
            line::write(held, o, ts, route, mode);
            held.push(b'\n');
            held.len()
        })
    });
    match held {
        Some(n) if n >= BATCH_BYTES => flush_log_lines(),
        Some(_) => {}
        None => {
            let mut text = Vec::with_capacity(384);
            line::write(&mut text, o, ts, route, mode);
            text.push(b'\n');
            let _ = std::io::stdout().lock().write_all(&text);
        }
    }
}

/// The client's user agent as logged: text only, bounded.
fn user_agent(o: &Outcome) -> Option<&str> {
    let sent = o.user_agent.as_ref()?.to_str().ok()?;
    Some(bounded_str(sent))
}

thread_local! {
    /// The second [`rfc3339_now`] last formatted on this thread, and its text up to the
    /// milliseconds.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// The current time as [`rfc3339`] formats it; the date and time of day are formatted once
/// per second per thread.
pub fn rfc3339_now() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, ms) = (now.as_secs(), now.subsec_millis());
    SECOND.with(|second| {
        let mut second = second.borrow_mut();
        if second.0 != secs {
            let mut text = rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
            text.truncate(text.len() - "000Z".len());
            *second = (secs, text);
        }
        let mut ts = String::with_capacity(second.1.len() + 4);
        ts.push_str(&second.1);
        for digit in [ms / 100, ms / 10 % 10, ms % 10] {
            ts.push(char::from(b'0' + digit as u8));
        }
        ts.push('Z');
        ts
    })
}

/// The (year, month, day) of the day `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub(crate) fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + u64::from(month <= 2), month, day)
}

/// Formats a time as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
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

    #[test]
    fn a_request_id_is_the_clients_text_or_one_made_from_the_numbers() {
        let id = |sent: Option<&[u8]>| RequestId {
            sent: sent.map(|s| http::HeaderValue::from_bytes(s).unwrap()),
            conn: 7,
            seq: 26,
        };
        assert_eq!(id(Some(b"abc")).text(), "abc");
        assert_eq!(id(None).text(), "mmgate-7-1a");
        assert_eq!(id(Some(b"caf\xc3\xa9")).text(), "mmgate-7-1a");
        let long = "x".repeat(MAX_TEXT + 5);
        assert_eq!(id(Some(long.as_bytes())).text().len(), MAX_TEXT);
    }

    #[test]
    fn the_cached_second_gives_the_same_text() {
        for _ in 0..3 {
            let before = SystemTime::now();
            let ts = rfc3339_now();
            let after = SystemTime::now();
            // Within the same millisecond as one of the two readings, or between them.
            assert!(rfc3339(before) <= ts && ts <= rfc3339(after), "{ts}");
            assert_eq!(ts.len(), "2026-12-02T13:01:55.123Z".len());
        }
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
            client_addr: http::HeaderValue::from_static("10.0.0.7"),
            client_id: "anonymous".into(),
            client: ClientId::Anonymous,
            via: None,
            spoofed_header: false,
            pool: None,
            refusal: None,
            user_agent: None,
            request_id: RequestId {
                sent: Some(http::HeaderValue::from_static("r")),
                conn: 1,
                seq: 1,
            },
            uri: http::Uri::from_static("/v1/chat/completions"),
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
            "media_io_kwargs":{"video":{"num_frames":8},"image":{"mode":"RGB","u":[1]},"audio":{"deep":{"a":1}}}}"#;
        let line = |o: &Outcome| -> serde_json::Value {
            serde_json::from_slice(&line::text(o, "t", "chat", "shadow")).unwrap()
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
            serde_json::json!(["video", "image", "audio"])
        );
        // More keys than a line lists: no values, so none looks covered.
        let many: Vec<String> = (0..=MAX_KEYS).map(|i| format!("\"k{i}\":1")).collect();
        let body = format!(r#"{{"mm_processor_kwargs":{{{}}}}}"#, many.join(","));
        let on = line(&outcome(&body, Some(4)));
        assert_eq!(on["fields"][0]["keys"].as_array().unwrap().len(), MAX_KEYS);
        assert!(on["fields"][0]["values"]
            .as_object()
            .is_none_or(|m| m.is_empty()));
    }

    #[test]
    fn a_batching_thread_holds_whole_lines_in_order_until_flushed() {
        std::thread::spawn(|| {
            batch_log_lines();
            let o = outcome(r#"{"mm_processor_kwargs":{"a":1}}"#, None);
            for id in ["first", "second"] {
                let o = Outcome {
                    request_id: RequestId {
                        sent: Some(http::HeaderValue::from_static(id)),
                        conn: 1,
                        seq: 1,
                    },
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
    fn recorded_requests_count_in_the_series_of_their_labels() {
        let (metrics, inventory) = (Metrics::new(), Inventory::default());
        let shadow = outcome(r#"{"mm_processor_kwargs":{"a":1}}"#, None);
        let ungated = Outcome {
            route: None,
            mode: None,
            would_reject: None,
            outcome: "made-up",
            ..shadow.clone()
        };
        let named = |i: usize, name: &'static str| Outcome {
            client: ClientId::Named(i),
            client_id: name.into(),
            ..shadow.clone()
        };
        // Two named clients in the policy; client 2 is out of its table (looked up by label).
        let clients = ClientRequests::new(metrics.client_requests.clone(), 2);
        for o in [
            &shadow,
            &shadow,
            &ungated,
            &named(1, "beta"),
            &named(2, "gamma"),
        ] {
            record(&metrics, &clients, &inventory, o);
        }
        let by_client = |l: &[&str]| metrics.client_requests.with_label_values(l).get();
        assert_eq!(by_client(&["anonymous", "forwarded"]), 2);
        assert_eq!(by_client(&["anonymous", "made-up"]), 1);
        assert_eq!(by_client(&["beta", "forwarded"]), 1);
        assert_eq!(by_client(&["gamma", "forwarded"]), 1);
        assert_eq!(by_client(&["alpha", "forwarded"]), 0);
        let requests = |l: &[&str]| metrics.requests.vec().with_label_values(l).get();
        assert_eq!(requests(&["chat", "shadow", "forwarded"]), 4);
        assert_eq!(requests(&["ungated", "none", "made-up"]), 1);
        assert_eq!(requests(&["chat", "none", "forwarded"]), 0);
        let offending = metrics.offending.vec();
        let f = offending.with_label_values(&["chat", "shadow", "mm_processor_kwargs"]);
        assert_eq!(f.get(), 4);
        let d = metrics.duration.vec().with_label_values(&["ungated"]);
        assert_eq!(d.get_sample_count(), 1);
    }

    #[test]
    fn long_text_is_bounded_on_a_char_boundary() {
        let s = "é".repeat(300);
        let b = bounded(&s);
        assert!(b.len() <= MAX_TEXT && s.starts_with(&b));
    }
}
