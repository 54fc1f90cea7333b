//! The defaults advisor (`mmgate report --suggest`): from log lines carrying the kwargs'
//! scalar values (`[log] kwargs_values = true`), propose deployment-level
//! `--mm-processor-kwargs` / `--media-io-kwargs` JSON.
//!
//! Per field and key (`modality.key` for `media_io_kwargs`), each client votes once for the
//! value it sends most; the value most clients send wins (ties: more requests, then the
//! smaller JSON text), and is proposed only when more than half of the clients sending the
//! field send it. A request is made *redundant* by the proposal when every key it sends
//! was logged with exactly the proposed value: served by a deployment with that default, it
//! needs no per-request kwargs. Clients with a request that is not redundant are listed with
//! their values: they are the candidates for a trusted pool.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::report::{Entry, EntryField};

/// The proposal for one field.
#[derive(Debug, Clone, Serialize)]
pub struct FieldProposal {
    /// `mm_processor_kwargs` or `media_io_kwargs`.
    pub field: String,
    /// The vLLM flag (`--mm-processor-kwargs` / `--media-io-kwargs`).
    pub flag: String,
    /// The proposed JSON value for the flag; `null` when no flag is proposed: no value of
    /// any key is sent by more than half of the field's clients, or none was logged.
    pub proposal: Option<Value>,
    /// Offending requests sending this field.
    pub requests: u64,
    /// Of those, requests the proposal makes redundant.
    pub redundant: u64,
    /// `redundant / requests`.
    pub share: f64,
    /// Each proposed key with its support.
    pub keys: Vec<KeySupport>,
    /// Clients with requests the proposal does not cover, with the values they send.
    pub differing: Vec<Differing>,
    /// Clients with at least one of the field's keys logged with its value (0: every
    /// value was left out of the log lines: arrays, objects, long strings).
    pub clients_with_values: usize,
}

/// How many clients agree with one proposed key.
#[derive(Debug, Clone, Serialize)]
pub struct KeySupport {
    /// `key`, or `modality.key`.
    pub key: String,
    /// The proposed value.
    pub value: Value,
    /// Clients whose most common value it is.
    pub clients_agreeing: usize,
    /// Clients sending the key with a logged value.
    pub clients_sending: usize,
}

/// A client whose requests the proposal does not cover.
#[derive(Debug, Clone, Serialize)]
pub struct Differing {
    /// The client (name, or address and user agent).
    pub client: String,
    /// Its requests not made redundant.
    pub requests: u64,
    /// Its most common value per key (`null` keys with no logged value are listed as such).
    pub values: BTreeMap<String, Value>,
}

/// The advisor's output.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// One proposal per field that offending traffic sends.
    pub fields: Vec<FieldProposal>,
    /// Offending requests read.
    pub requests: u64,
    /// Requests every one of whose fields the proposals make redundant.
    pub redundant: u64,
    /// `redundant / requests`.
    pub share: f64,
    /// Requests whose lines carry no values (logged without `kwargs_values`).
    pub without_values: u64,
}

/// An entry sending a field: its index, the entry, and the field's flattened values.
type Sent<'a> = (usize, &'a Entry, Option<(BTreeMap<String, Value>, bool)>);

const FIELDS: [(&str, &str); 2] = [
    ("mm_processor_kwargs", "--mm-processor-kwargs"),
    ("media_io_kwargs", "--media-io-kwargs"),
];

/// A field's logged values flattened to `key` / `modality.key` → value, and whether every
/// key it sends was logged (a non-scalar or a long string is not, so it cannot be covered);
/// `None` when the line carries no values.
fn flat(f: &EntryField) -> Option<(BTreeMap<String, Value>, bool)> {
    let values = f.values.as_ref()?;
    let mut out = BTreeMap::new();
    let mut complete = true;
    for k in &f.keys {
        let Some(v) = values.get(k) else {
            complete = false;
            continue;
        };
        match v {
            Value::Object(m) if f.name == "media_io_kwargs" => {
                for (k2, v) in m {
                    out.insert(format!("{k}.{k2}"), v.clone());
                }
            }
            v => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Some((out, complete))
}

/// Proposes deployment defaults from the entries.
pub fn suggest(entries: &[Entry]) -> Suggestion {
    let mut covered = vec![true; entries.len()];
    let without_values = entries
        .iter()
        .filter(|e| e.fields.iter().all(|f| f.values.is_none()))
        .count() as u64;
    let mut fields = Vec::new();
    for (name, flag) in FIELDS {
        let sent: Vec<Sent<'_>> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((i, e, flat(e.fields.iter().find(|f| f.name == name)?))))
            .collect();
        if sent.iter().all(|(_, _, values)| values.is_none()) {
            // Nothing logged to propose from: these requests stay uncovered.
            sent.iter().for_each(|(i, ..)| covered[*i] = false);
            continue;
        }
        // client → key → value text → count
        let mut votes: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> = BTreeMap::new();
        for (_, e, values) in &sent {
            let client = votes.entry(e.client_label()).or_default();
            for (k, v) in values.iter().flat_map(|(m, _)| m) {
                *client
                    .entry(k.clone())
                    .or_default()
                    .entry(v.to_string())
                    .or_default() += 1;
            }
        }
        let (chosen, keys) = choose(&votes);
        let mut redundant = 0;
        let mut differing: BTreeMap<String, u64> = BTreeMap::new();
        for (i, e, values) in &sent {
            let ok = values.as_ref().is_some_and(|(m, complete)| {
                *complete && m.iter().all(|(k, v)| chosen.get(k) == Some(v))
            });
            if ok {
                redundant += 1;
            } else {
                covered[*i] = false;
                *differing.entry(e.client_label()).or_default() += 1;
            }
        }
        let differing = differing
            .into_iter()
            .map(|(client, requests)| Differing {
                values: preferred(&votes[&client]),
                client,
                requests,
            })
            .collect();
        let requests = sent.len() as u64;
        let clients_with_values = votes.values().filter(|keys| !keys.is_empty()).count();
        fields.push(FieldProposal {
            field: name.into(),
            flag: flag.into(),
            proposal: (!chosen.is_empty()).then(|| unflatten(&chosen, name == "media_io_kwargs")),
            requests,
            redundant,
            share: redundant as f64 / requests as f64,
            keys,
            differing,
            clients_with_values,
        });
    }
    let requests = entries.len() as u64;
    let redundant = entries
        .iter()
        .zip(&covered)
        .filter(|(e, c)| **c && !e.fields.is_empty())
        .count() as u64;
    Suggestion {
        fields,
        requests,
        redundant,
        share: if requests == 0 {
            0.0
        } else {
            redundant as f64 / requests as f64
        },
        without_values,
    }
}

/// Each client's most common value per key (ties: the smaller JSON text).
fn preferred(keys: &BTreeMap<String, BTreeMap<String, u64>>) -> BTreeMap<String, Value> {
    keys.iter()
        .filter_map(|(k, counts)| {
            let (text, _) = counts
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))?;
            Some((k.clone(), serde_json::from_str(text).ok()?))
        })
        .collect()
}

/// The value per key that most clients prefer (ties: more requests, then smaller text).
fn choose(
    votes: &BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>,
) -> (BTreeMap<String, Value>, Vec<KeySupport>) {
    // key → value text → (clients, requests)
    let mut tally: BTreeMap<String, BTreeMap<String, (usize, u64)>> = BTreeMap::new();
    for keys in votes.values() {
        let pref = preferred(keys);
        for (k, counts) in keys {
            let slot = tally.entry(k.clone()).or_default();
            for (text, n) in counts {
                slot.entry(text.clone()).or_default().1 += n;
            }
            if let Some(v) = pref.get(k) {
                slot.entry(v.to_string()).or_default().0 += 1;
            }
        }
    }
    let mut chosen = BTreeMap::new();
    let mut support = Vec::new();
    for (k, values) in tally {
        let sending = votes.values().filter(|c| c.contains_key(&k)).count();
        let best = values
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)));
        if let Some((text, (clients, _))) = best {
            // Only a value most of the field's clients send becomes a deployment default.
            if *clients * 2 <= votes.len() {
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            chosen.insert(k.clone(), value.clone());
            support.push(KeySupport {
                key: k,
                value,
                clients_agreeing: *clients,
                clients_sending: sending,
            });
        }
    }
    (chosen, support)
}

fn unflatten(chosen: &BTreeMap<String, Value>, nested: bool) -> Value {
    let mut out = Map::new();
    for (k, v) in chosen {
        match k.split_once('.').filter(|_| nested) {
            Some((modality, key)) => {
                let slot = out
                    .entry(modality.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(m) = slot {
                    m.insert(key.to_string(), v.clone());
                }
            }
            None => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The suggestion as text: one flag per field, its share, its keys' support and the
/// clients that differ.
pub fn text(s: &Suggestion) -> String {
    let mut out = String::new();
    if s.requests == 0 {
        out.push_str("no offending-request log lines were read\n");
    } else if s.fields.is_empty() {
        out.push_str("no logged kwargs values: enable [log] kwargs_values = true in the policy\n");
    }
    for f in &s.fields {
        let Some(proposal) = &f.proposal else {
            let why = if f.clients_with_values == 0 {
                "none of its values could be logged (only scalars and short strings are)"
            } else {
                "no value is sent by more than half of the clients sending it"
            };
            out.push_str(&format!(
                "{}: no flag proposed: {why} ({} offending request(s))\n",
                f.field, f.requests
            ));
            list_differing(&mut out, &f.differing);
            continue;
        };
        // Single-quoted for a shell: a quote inside (a string value) is closed, escaped
        // and reopened.
        let quoted = proposal.to_string().replace('\'', r"'\''");
        out.push_str(&format!("{} '{quoted}'\n", f.flag));
        out.push_str(&format!(
            "  makes {} of {} offending requests sending {} redundant ({:.1}%)\n",
            f.redundant,
            f.requests,
            f.field,
            f.share * 100.0
        ));
        for k in &f.keys {
            out.push_str(&format!(
                "  {} = {}  ({} of {} clients)\n",
                k.key, k.value, k.clients_agreeing, k.clients_sending
            ));
        }
        list_differing(&mut out, &f.differing);
    }
    out.push_str(&format!(
        "together: {} of {} offending requests ({:.1}%) would need no per-request kwargs\n",
        s.redundant,
        s.requests,
        s.share * 100.0
    ));
    if s.without_values > 0 {
        out.push_str(&format!(
            "{} request(s) were logged without values and are not covered\n",
            s.without_values
        ));
    }
    out
}

/// The clients a field's proposal does not cover, with their values.
fn list_differing(out: &mut String, differing: &[Differing]) {
    if differing.is_empty() {
        return;
    }
    out.push_str("  clients whose values differ (candidates for the trusted pool):\n");
    for d in differing {
        let vals: Vec<String> = d.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "    {}: {} request(s) not covered; sends {}\n",
            d.client,
            d.requests,
            if vals.is_empty() {
                "values that were not logged".to_string()
            } else {
                vals.join(" ")
            }
        ));
    }
}
