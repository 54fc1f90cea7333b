//! Replays every committed fuzz input (`fuzz/corpus/<target>/*`) through the same checks the
//! `cargo fuzz` targets run, so `cargo test` on stable keeps them passing.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!("{} fails the {target} check", path.display());
        }
        n += 1;
    }
    assert!(n > 0, "{} holds the corpus", dir.display());
    println!("{target}: {n} inputs replayed");
}

#[test]
fn the_inspect_corpus_never_panics() {
    replay("inspect", checks::check_inspect);
}

#[test]
fn the_strip_corpus_strips_to_the_original_minus_the_fields() {
    replay("strip", checks::check_strip);
}
