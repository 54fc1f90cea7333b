#!/usr/bin/env bash
# Builds the shipped mmgate binary with profile-guided optimisation (PGO):
#
#   bash tools/pgo.sh            # → target/pgo/mmgate
#
# 1. an instrumented release build of `mmgate` (target/pgo/gen);
# 2. examples/pgo_train runs it in front of examples/fake_vllm in each gate mode with a
#    mix of requests (about a minute), and the instrumented binary writes its counts as it
#    exits;
# 3. llvm-profdata merges them (rustup's `llvm-tools` component, added if missing);
# 4. the release build again, optimised with those counts (target/pgo/use), copied to
#    target/pgo/mmgate.
#
# Same source, same release profile (fat LTO, one codegen unit); what changes is where LLVM
# inlines and how it lays out branches, and that switches are not made into jump tables
# (below). bench/instructions.sh counts about a fifth fewer instructions per proxied
# request (BENCHMARKS.md). Loopback only; about 6 minutes on 2 cores. bench/run.sh,
# bench/instructions.sh and bench/syscalls.sh build with it unless PGO=0 (bench/load.sh
# measures memory and keeps the plain release build).
#
# Env: PGO_ROUNDS (repetitions of the training mix, 2).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[pgo.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  say "adding rustup's llvm-tools component (llvm-profdata)"
  rustup component add llvm-tools >&2 || true
fi
[ -x "$profdata" ] || { echo "pgo.sh: $profdata not found (rustup component add llvm-tools)" >&2; exit 1; }

out=$PWD/target/pgo
# Switches compiled as compare-and-branch chains, not jump tables (LLVM makes a table from
# four cases on): a byte dispatch such as the JSON scan's then goes through the branch
# predictor's history instead of one indirect jump per value, which predicts poorly when
# the values vary. In callgrind's simulation, mispredicted indirect branches per 2 KB
# shadow request fall from 76 to 34 and the instructions by 0.6%; under load the hop's CPU
# moved by less than the spread between runs (BENCHMARKS.md, item 62). Both builds of a
# PGO pair need the same flags.
codegen="-Cllvm-args=-min-jump-table-entries=1000"
rm -rf "$out/profiles" "$out/mmgate.profdata"
mkdir -p "$out/profiles"

# The helpers are built as they are for the tests (not instrumented, so only mmgate's own
# counts are collected). `--target` keeps RUSTFLAGS off build scripts and proc macros.
say "building the training helpers (examples pgo_train, fake_vllm)"
cargo build --locked --example pgo_train --example fake_vllm >&2

say "instrumented build"
RUSTFLAGS="-Cprofile-generate=$out/profiles $codegen" \
  cargo build --locked --release --bin mmgate --target "$host" --target-dir "$out/gen" >&2

say "training"
target/debug/examples/pgo_train "$out/gen/$host/release/mmgate" target/debug/examples/fake_vllm \
  "${PGO_ROUNDS:-2}"
"$profdata" merge -o "$out/mmgate.profdata" "$out/profiles"

say "optimised build"
RUSTFLAGS="-Cprofile-use=$out/mmgate.profdata $codegen" \
  cargo build --locked --release --bin mmgate --target "$host" --target-dir "$out/use" >&2
cp "$out/use/$host/release/mmgate" "$out/mmgate"
say "built $out/mmgate"
