//! The PGO training driver (`examples/pgo_train`, run by `tools/pgo.sh`) against the real
//! binary: every mode starts, answers the whole mix below 500, and exits cleanly on SIGTERM.
//! A driver that breaks would otherwise only show in a slower shipped build.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn pgo_training_load_runs_every_mode_against_the_binary() {
    let mmgate = PathBuf::from(env!("CARGO_BIN_EXE_mmgate"));
    let examples = mmgate
        .parent()
        .expect("the binary's directory")
        .join("examples");
    let (driver, fake) = (examples.join("pgo_train"), examples.join("fake_vllm"));
    assert!(
        driver.exists() && fake.exists(),
        "{} and {} are built by `cargo test` (or `cargo build --examples`)",
        driver.display(),
        fake.display()
    );
    let out = Command::new(&driver)
        .arg(&mmgate)
        .arg(&fake)
        .arg("1")
        .output()
        .expect("pgo_train runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pgo_train failed:\n{log}");
    // 962: the requests of one round of the mix, each answered.
    for mode in ["pass", "shadow", "strip", "reject"] {
        assert!(
            log.contains(&format!("{mode}: 962 requests")),
            "{mode} missing:\n{log}"
        );
    }
}
