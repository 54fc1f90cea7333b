//! `mmgate report`: the offending-request log lines (README "Log lines") folded into the
//! inventory — per client × route × field: count, first/last seen, the keys used — printed
//! as a table, JSON or CSV.
//!
//! Reading is tolerant: lines that are not JSON or not `offending_request` events (other
//! output sharing the stream) are counted and skipped, never fatal.

use std::io::BufRead;

use serde::Deserialize;

use crate::identify::ANONYMOUS;
use crate::inventory::{Aggregate, Observation, Snapshot};

/// One gated field of a log line.
#[derive(Debug, Clone, Deserialize)]
pub struct EntryField {
    /// `mm_processor_kwargs` or `media_io_kwargs`.
    pub name: String,
    /// Its top-level key names.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Its scalar member values, when the policy logs them.
    #[serde(default)]
    pub values: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One offending-request log line.
#[derive(Debug, Clone, Deserialize)]
pub struct Entry {
    /// RFC 3339 UTC time.
    pub ts: String,
    /// Always `offending_request`.
    pub event: String,
    /// The route name.
    pub route: String,
    /// The client's policy name, or `anonymous` (absent in old lines).
    #[serde(default = "anonymous")]
    pub client: String,
    /// The client address.
    #[serde(default)]
    pub client_addr: String,
    /// The user agent.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The offending fields.
    #[serde(default)]
    pub fields: Vec<EntryField>,
}

fn anonymous() -> String {
    ANONYMOUS.into()
}

impl Entry {
    /// The client as one label: its name, or `address (user agent)` when anonymous.
    pub fn client_label(&self) -> String {
        match (&self.client[..], &self.user_agent) {
            (ANONYMOUS, Some(ua)) => format!("{} ({ua})", self.client_addr),
            (ANONYMOUS, None) => self.client_addr.clone(),
            (name, _) => name.to_string(),
        }
    }
}

/// The log lines read: the offending-request entries and how many other lines were skipped.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The entries, in input order.
    pub entries: Vec<Entry>,
    /// Lines that were not offending-request JSON lines.
    pub skipped: usize,
}

/// Reads log lines, keeping the offending-request entries.
pub fn parse(input: impl BufRead, into: &mut Parsed) -> std::io::Result<()> {
    for line in input.split(b'\n') {
        let line = line?;
        if line.trim_ascii().is_empty() {
            continue;
        }
        // Not UTF-8 (another program's output, a line cut when mmgate was killed): skipped.
        match serde_json::from_slice::<Entry>(&line) {
            Ok(e) if e.event == "offending_request" => into.entries.push(e),
            _ => into.skipped += 1,
        }
    }
    Ok(())
}

/// The inventory of the entries (unbounded).
pub fn inventory(entries: &[Entry]) -> Snapshot {
    let mut agg = Aggregate::new(usize::MAX);
    for e in entries {
        agg.add(&Observation {
            ts: &e.ts,
            client: &e.client,
            client_addr: &e.client_addr,
            user_agent: e.user_agent.as_deref(),
            route: &e.route,
            fields: e
                .fields
                .iter()
                .map(|f| (&f.name[..], &f.keys[..]))
                .collect(),
        });
    }
    agg.snapshot()
}

const COLUMNS: [&str; 9] = [
    "client",
    "client_addr",
    "user_agent",
    "route",
    "field",
    "count",
    "first_seen",
    "last_seen",
    "keys",
];

/// The inventory as an aligned text table.
pub fn table(s: &Snapshot) -> String {
    let mut rows = vec![[
        "client",
        "route",
        "field",
        "count",
        "first seen",
        "last seen",
        "keys",
    ]
    .map(String::from)];
    for r in &s.rows {
        let keys: Vec<&str> = r.keys.iter().map(String::as_str).collect();
        rows.push([
            r.key.client_label(),
            r.key.route.clone(),
            r.key.field.clone(),
            r.count.to_string(),
            r.first_seen.clone(),
            r.last_seen.clone(),
            keys.join(","),
        ]);
    }
    let mut out = align(&rows);
    if s.overflow > 0 {
        out.push_str(&format!(
            "({} observations over the cap of {} rows)\n",
            s.overflow,
            s.cap.unwrap_or(usize::MAX)
        ));
    }
    out
}

/// Rows of cells as left-aligned columns separated by two spaces.
pub fn align<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The inventory as CSV (RFC 4180 quoting; keys separated by spaces).
pub fn csv(s: &Snapshot) -> String {
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for r in &s.rows {
        let keys: Vec<&str> = r.keys.iter().map(String::as_str).collect();
        let cells = [
            r.key.client.clone(),
            r.key.client_addr.clone().unwrap_or_default(),
            r.key.user_agent.clone().unwrap_or_default(),
            r.key.route.clone(),
            r.key.field.clone(),
            r.count.to_string(),
            r.first_seen.clone(),
            r.last_seen.clone(),
            keys.join(" "),
        ];
        let quoted: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
        out.push_str(&quoted.join(","));
        out.push('\n');
    }
    out
}

fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_commas_and_quotes() {
        assert_eq!(csv_cell("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(csv_cell("plain"), "plain");
    }

    #[test]
    fn other_lines_are_skipped() {
        let text = "not json\n{\"event\":\"other\",\"ts\":\"t\",\"route\":\"chat\"}\n\n";
        let mut p = Parsed::default();
        parse(text.as_bytes(), &mut p).unwrap();
        assert_eq!((p.entries.len(), p.skipped), (0, 2));
    }
}
