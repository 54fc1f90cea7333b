//! The checks both fuzz targets run, shared with `tests/fuzz_corpus.rs` (which replays the
//! committed corpus on stable): included with `#[path]`, so it depends only on `mmgate`,
//! `bytes` and `serde_json`.
#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use mmgate::inspect::{inspect, Field, RENDER_MAX_DEPTH};
use mmgate::rewrite::strip;

/// Inspection is total: any bytes, any depth limit, no panic.
pub fn check_inspect(data: &[u8]) {
    for depth in [1, 2, 64, RENDER_MAX_DEPTH] {
        let _ = inspect(data, depth);
    }
    if let Ok(f) = inspect(data, RENDER_MAX_DEPTH) {
        // The accessors are total too.
        for x in Field::ALL {
            let _ = f.field(x).truthy();
        }
        let _ = f.offending().count();
    }
}

/// Stripping any subset of the two fields from a body that inspects yields a body that
/// inspects again, with the same encoding, without the stripped fields, with every other
/// member kept in order and unchanged fields' findings identical; stripping is idempotent,
/// and where `serde_json` parses the original (UTF-8, no NaN) the stripped body parses to
/// the original object minus the stripped fields.
pub fn check_strip(data: &[u8]) {
    let Ok(f) = inspect(data, RENDER_MAX_DEPTH) else {
        return;
    };
    let body = Bytes::copy_from_slice(data);
    let subsets: [&[Field]; 4] = [
        &Field::ALL,
        &[Field::MmProcessorKwargs],
        &[Field::MediaIoKwargs],
        &[],
    ];
    for fields in subsets {
        let once = Bytes::from(strip(&body, &f, fields).to_vec());
        let f1 = inspect(&once, RENDER_MAX_DEPTH).unwrap_or_else(|e| {
            panic!(
                "stripped body does not parse ({e}): {}",
                once.escape_ascii()
            )
        });
        assert_eq!(f1.encoding, f.encoding, "encoding kept");
        let kept: Vec<&str> = f
            .members
            .iter()
            .filter(|m| !m.field.is_some_and(|x| fields.contains(&x)))
            .map(|m| f.name(m))
            .collect();
        let got: Vec<&str> = f1.members.iter().map(|m| f1.name(m)).collect();
        assert_eq!(got, kept, "other members stay, in order");
        for x in Field::ALL {
            if fields.contains(&x) {
                assert!(!f1.field(x).present, "{} removed", x.name());
            } else {
                // Compared as text: a NaN value is never equal to itself.
                let (a, b) = (format!("{:?}", f1.field(x)), format!("{:?}", f.field(x)));
                assert_eq!(a, b, "{} untouched", x.name());
            }
        }
        let twice = strip(&once, &f1, fields).to_vec();
        assert_eq!(&twice[..], &once[..], "idempotent");
        if let Ok(serde_json::Value::Object(mut want)) = serde_json::from_slice(data) {
            for x in fields {
                want.remove(x.name());
            }
            let got: serde_json::Value = serde_json::from_slice(&once)
                .expect("serde_json parses what it parsed before the strip");
            assert_eq!(
                got,
                serde_json::Value::Object(want),
                "original minus the fields"
            );
        }
    }
}
