//! The incompatible-client inventory: offending requests aggregated per client × route ×
//! field (count, first and last seen, the set of top-level keys used).
//!
//! One [`Aggregate`] type serves both views: `mmgate report` folds log lines into an
//! unbounded one, and the gateway keeps a bounded live one ([`Inventory`], fed by
//! `record`) that the admin listener serves as `/inventory` (JSON) and `/inventory.html`.
//! The live aggregate caps the number of distinct rows and counts the requests it could not
//! place ([`Snapshot::overflow`]), so a client rotating user agents cannot grow it without
//! bound. It holds only names the log line already carries: never values, bodies or keys.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Mutex;

use serde::Serialize;

/// Distinct rows the live inventory keeps.
pub const LIVE_ROWS: usize = 1000;
/// Key names kept per row.
pub const MAX_ROW_KEYS: usize = 64;
/// Bytes of key names kept per row (a key that would pass it is left out): with the row
/// cap, a bound on what the live inventory holds and serves (a client's key names can be
/// up to 256 bytes each, and many of them).
pub const MAX_ROW_KEY_BYTES: usize = 1024;

/// Who sent a request: a named client, or an anonymous one by address and user agent.
#[derive(Debug, Clone, Serialize)]
pub struct RowKey {
    /// The client's policy name, or `anonymous`.
    pub client: String,
    /// The client address (anonymous clients only).
    pub client_addr: Option<String>,
    /// The user agent (anonymous clients only).
    pub user_agent: Option<String>,
    /// The route name (`chat`, `completions`, …).
    pub route: String,
    /// The gated field.
    pub field: String,
}

/// A row key's fields, in their order: owned in the map, borrowed from an observation when
/// looking a row up (no string is copied for a row that exists).
type KeyParts<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a str, &'a str);

/// A row key, owned or borrowed: what the map is searched by.
trait KeyView {
    fn parts(&self) -> KeyParts<'_>;
}

impl KeyView for RowKey {
    fn parts(&self) -> KeyParts<'_> {
        (
            &self.client,
            self.client_addr.as_deref(),
            self.user_agent.as_deref(),
            &self.route,
            &self.field,
        )
    }
}

/// An observation's row key, borrowed.
struct Borrowed<'a>(KeyParts<'a>);

impl KeyView for Borrowed<'_> {
    fn parts(&self) -> KeyParts<'_> {
        self.0
    }
}

impl<'a> std::borrow::Borrow<dyn KeyView + 'a> for RowKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyView + '_ {}

impl PartialOrd for dyn KeyView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn KeyView + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

// Ordered and compared as its parts, exactly as the borrowed form (`Borrow` requires it).
impl PartialEq for RowKey {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for RowKey {}

impl PartialOrd for RowKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RowKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl RowKey {
    fn owned(parts: KeyParts<'_>) -> Self {
        let (client, client_addr, user_agent, route, field) = parts;
        RowKey {
            client: client.to_string(),
            client_addr: client_addr.map(str::to_string),
            user_agent: user_agent.map(str::to_string),
            route: route.to_string(),
            field: field.to_string(),
        }
    }

    /// The client as one label: its name, or `address (user agent)` when anonymous.
    pub fn client_label(&self) -> String {
        match (&self.client_addr, &self.user_agent) {
            (None, _) => self.client.clone(),
            (Some(a), Some(ua)) => format!("{a} ({ua})"),
            (Some(a), None) => a.clone(),
        }
    }
}

/// One offending request, as the log line (or `record`) describes it.
#[derive(Debug, Clone)]
pub struct Observation<'a> {
    /// RFC 3339 UTC time.
    pub ts: &'a str,
    /// The client's policy name, or `anonymous`.
    pub client: &'a str,
    /// The client address.
    pub client_addr: &'a str,
    /// The user agent, if sent.
    pub user_agent: Option<&'a str>,
    /// The route name.
    pub route: &'a str,
    /// The offending fields with their top-level key names.
    pub fields: Vec<(&'a str, &'a [String])>,
}

/// One row of the inventory.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Who, where and which field.
    #[serde(flatten)]
    pub key: RowKey,
    /// Offending requests.
    pub count: u64,
    /// First seen (RFC 3339 UTC).
    pub first_seen: String,
    /// Last seen (RFC 3339 UTC).
    pub last_seen: String,
    /// The top-level key names used (at most [`MAX_ROW_KEYS`], of [`MAX_ROW_KEY_BYTES`]
    /// together).
    pub keys: BTreeSet<String>,
}

/// Rows by key, with a cap on distinct rows.
#[derive(Debug)]
pub struct Aggregate {
    rows: BTreeMap<RowKey, Row>,
    cap: usize,
    overflow: u64,
}

/// The aggregate, sorted by count (highest first), as served and printed.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// The rows, highest count first.
    pub rows: Vec<Row>,
    /// Distinct rows kept at most (`None`: no bound, as for `mmgate report`).
    pub cap: Option<usize>,
    /// Field observations not counted because the cap was reached.
    pub overflow: u64,
}

impl Aggregate {
    /// An aggregate keeping at most `cap` distinct rows.
    pub fn new(cap: usize) -> Self {
        Aggregate {
            rows: BTreeMap::new(),
            cap,
            overflow: 0,
        }
    }

    /// Counts one offending request (one row per field).
    pub fn add(&mut self, o: &Observation<'_>) {
        let named = o.client != crate::identify::ANONYMOUS;
        for (field, keys) in &o.fields {
            let parts = (
                o.client,
                (!named).then_some(o.client_addr),
                if named { None } else { o.user_agent },
                o.route,
                *field,
            );
            let full = self.rows.len() >= self.cap;
            let row = match self.rows.get_mut(&Borrowed(parts) as &dyn KeyView) {
                Some(row) => row,
                None if full => {
                    self.overflow += 1;
                    continue;
                }
                None => {
                    let key = RowKey::owned(parts);
                    let row = Row {
                        key: key.clone(),
                        count: 0,
                        first_seen: o.ts.to_string(),
                        last_seen: o.ts.to_string(),
                        keys: BTreeSet::new(),
                    };
                    self.rows.entry(key).or_insert(row)
                }
            };
            row.count += 1;
            if o.ts < row.first_seen.as_str() {
                row.first_seen.replace_range(.., o.ts);
            }
            if o.ts > row.last_seen.as_str() {
                row.last_seen.replace_range(.., o.ts);
            }
            let mut bytes: usize = row.keys.iter().map(String::len).sum();
            for k in keys.iter() {
                if row.keys.len() >= MAX_ROW_KEYS {
                    break;
                }
                if bytes + k.len() <= MAX_ROW_KEY_BYTES && !row.keys.contains(k) {
                    bytes += k.len();
                    row.keys.insert(k.clone());
                }
            }
        }
    }

    /// The rows sorted by count (highest first, then by key).
    pub fn snapshot(&self) -> Snapshot {
        let mut rows: Vec<Row> = self.rows.values().cloned().collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        Snapshot {
            rows,
            cap: (self.cap != usize::MAX).then_some(self.cap),
            overflow: self.overflow,
        }
    }
}

/// The gateway's live, bounded inventory.
#[derive(Debug)]
pub struct Inventory {
    inner: Mutex<Aggregate>,
}

impl Default for Inventory {
    fn default() -> Self {
        Inventory::new(LIVE_ROWS)
    }
}

impl Inventory {
    /// A live inventory of at most `cap` distinct rows.
    pub fn new(cap: usize) -> Self {
        Inventory {
            inner: Mutex::new(Aggregate::new(cap)),
        }
    }

    /// Counts one offending request.
    pub fn observe(&self, o: &Observation<'_>) {
        if let Ok(mut agg) = self.inner.lock() {
            agg.add(o);
        }
    }

    /// The current rows, highest count first.
    pub fn snapshot(&self) -> Snapshot {
        match self.inner.lock() {
            Ok(agg) => agg.snapshot(),
            Err(e) => e.into_inner().snapshot(),
        }
    }
}

/// The inventory as a small self-contained HTML page (no scripts, no external assets).
pub fn html(s: &Snapshot) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>mmgate inventory</title>\n\
         <style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}\
         th,td{border:1px solid #999;padding:4px 8px;text-align:left}th{background:#ddd}\
         td.n{text-align:right}td.t{white-space:nowrap}</style></head><body>\n\
         <h1>Clients sending per-request multimodal kwargs</h1>\n",
    );
    let _ = writeln!(
        out,
        "<p>{} row(s), highest count first; at most {} distinct rows kept, {} request field(s) over the cap. Reload the page to refresh.</p>",
        s.rows.len(),
        s.cap.map_or("any number of".to_string(), |c| c.to_string()),
        s.overflow
    );
    out.push_str(
        "<table id=\"inventory\">\n<tr><th>client</th><th>route</th><th>field</th><th>count</th>\
         <th>first seen</th><th>last seen</th><th>keys</th></tr>\n",
    );
    for r in &s.rows {
        let keys: Vec<&str> = r.keys.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "<tr class=\"row\"><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td></tr>",
            escape(&r.key.client_label()),
            escape(&r.key.route),
            escape(&r.key.field),
            r.count,
            escape(&r.first_seen),
            escape(&r.last_seen),
            escape(&keys.join(", "))
        );
    }
    out.push_str("</table>\n</body></html>\n");
    out
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs<'a>(ts: &'a str, ua: &'a str, keys: &'a [String]) -> Observation<'a> {
        Observation {
            ts,
            client: "anonymous",
            client_addr: "10.0.0.7",
            user_agent: Some(ua),
            route: "chat",
            fields: vec![("mm_processor_kwargs", keys)],
        }
    }

    #[test]
    fn rows_aggregate_and_the_cap_counts_overflow() {
        let k1 = vec!["max_pixels".to_string()];
        let k2 = vec!["min_pixels".to_string()];
        let mut a = Aggregate::new(1);
        a.add(&obs("2026-01-02T00:00:00.000Z", "a", &k1));
        a.add(&obs("2026-01-01T00:00:00.000Z", "a", &k2));
        a.add(&obs("2026-01-03T00:00:00.000Z", "b", &k1));
        let s = a.snapshot();
        assert_eq!(s.rows.len(), 1);
        assert_eq!(s.overflow, 1);
        let r = &s.rows[0];
        assert_eq!(r.count, 2);
        assert_eq!(r.first_seen, "2026-01-01T00:00:00.000Z");
        assert_eq!(r.last_seen, "2026-01-02T00:00:00.000Z");
        assert_eq!(r.keys.len(), 2);
        assert_eq!(r.key.client_label(), "10.0.0.7 (a)");
    }

    #[test]
    fn a_row_keeps_key_names_up_to_its_count_and_byte_bounds() {
        let long: Vec<String> = (0..10).map(|i| format!("{i}{}", "k".repeat(255))).collect();
        let short: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let mut a = Aggregate::new(2);
        a.add(&obs("2026-01-01T00:00:00.000Z", "long", &long));
        a.add(&obs("2026-01-01T00:00:00.000Z", "short", &short));
        let s = a.snapshot();
        for r in &s.rows {
            let bytes: usize = r.keys.iter().map(String::len).sum();
            assert!(bytes <= MAX_ROW_KEY_BYTES && r.keys.len() <= MAX_ROW_KEYS);
        }
        let count = |ua: &str| {
            let row = s
                .rows
                .iter()
                .find(|r| r.key.user_agent.as_deref() == Some(ua));
            row.unwrap().keys.len()
        };
        assert_eq!(count("long"), MAX_ROW_KEY_BYTES / 256);
        assert_eq!(count("short"), MAX_ROW_KEYS);
    }

    #[test]
    fn a_named_client_is_one_row_whatever_its_address_and_agent() {
        let k = vec!["max_pixels".to_string()];
        let mut a = Aggregate::new(1);
        for (addr, ua) in [("10.0.0.7", Some("a")), ("10.0.0.8", None)] {
            a.add(&Observation {
                client: "batch",
                client_addr: addr,
                user_agent: ua,
                ..obs("2026-01-01T00:00:00.000Z", "", &k)
            });
        }
        let s = a.snapshot();
        assert_eq!((s.rows.len(), s.overflow), (1, 0));
        assert_eq!(s.rows[0].count, 2);
        assert_eq!(s.rows[0].key.client_label(), "batch");
        assert_eq!(s.rows[0].key.user_agent, None);
    }

    #[test]
    fn html_escapes_client_text() {
        let k = vec!["<k>".to_string()];
        let mut a = Aggregate::new(10);
        a.add(&obs("t", "<script>", &k));
        let page = html(&a.snapshot());
        assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"));
    }
}
