#!/usr/bin/env bash
# User-space instructions per request of mmgate (callgrind), one command, loopback only:
#
#   bash bench/instructions.sh                     # shadow and pass, 2 KB and SSE
#   MODES=shadow WORKLOADS=chat_2k bash bench/instructions.sh
#   MMGATE=/tmp/old-mmgate bash bench/instructions.sh   # measure another build
#
# Instruction counts do not depend on what else runs on the machine, so two builds can be
# compared to within about 0.1% where wall-clock CPU moves by 10–30% (see BENCHMARKS.md).
# They count mmgate's own work (hyper, tokio, inspection, recording, allocation), not the
# kernel's: system calls and wake-ups are measured by bench/run.sh.
#
# For each mode × workload: mmgate runs under `valgrind --tool=callgrind` in front of
# examples/fake_vllm; wrk (one thread, 4 connections) warms it for 2 s, the counters are
# zeroed, wrk runs for DURATION seconds, the counters are dumped, and the instruction total
# is divided by the requests wrk completed (a run with failed requests is an error). The
# five largest parts of mmgate's request path (inclusive) are printed under each figure.
#
# Env: DURATION (s, 8), MODES (shadow pass), WORKLOADS (chat_2k chat_2k_sse), MMGATE and
#      FAKE_VLLM (prebuilt binaries; otherwise built), NO_INSTALL=1 (never apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-8} MODES=${MODES:-shadow pass} WORKLOADS=${WORKLOADS:-chat_2k chat_2k_sse}

log() { printf '[instructions.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

source bench/common.sh
install_missing wrk valgrind curl

build_binaries

work_dir instructions

read -r UP PORT ADMIN <<<"$(free_ports 3)"
python3 bench/bodies.py "$W" >/dev/null
"$FAKE_VLLM" "127.0.0.1:$UP" 2>"$W/fake_vllm.err" & PIDS+=($!)

WAIT_TRIES=300 # mmgate starts slowly under valgrind
wait_http "http://127.0.0.1:$UP/health"

field() { # NAME < post.lua's RESULT line -> the value
  sed -n "s/.*RESULT.* $1=\([0-9]*\).*/\1/p"
}

printf '| mode | workload | requests | instructions / request |\n|---|---|---:|---:|\n' >"$W/table"
for mode in $MODES; do
  mmgate_policy "$W/policy.toml" "$PORT" "$ADMIN" "$UP" "$mode"
  for workload in $WORKLOADS; do
    out="$W/callgrind.$mode.$workload"
    valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$MMGATE" serve --policy "$W/policy.toml" --drain-seconds 1 >/dev/null 2>"$W/valgrind.err" &
    vg=$!; PIDS+=("$vg")
    wait_http "http://127.0.0.1:$ADMIN/readyz"
    url="http://127.0.0.1:$PORT/v1/chat/completions"
    wrk -t1 -c4 -d2s -s bench/post.lua "$url" -- "$W/$workload.json" >/dev/null 2>&1
    callgrind_control -z "$vg" >"$W/control.log" 2>&1
    result=$(wrk -t1 -c4 -d"${DURATION}s" --timeout 10s -s bench/post.lua "$url" -- "$W/$workload.json" 2>&1)
    callgrind_control -d "$vg" >>"$W/control.log" 2>&1
    kill -TERM "$vg"; wait "$vg" 2>/dev/null || true
    n=$(field requests <<<"$result")
    failed=1
    if [ -n "$n" ]; then
      s=$(field status <<<"$result") t=$(field timeout <<<"$result") r=$(field read <<<"$result")
      failed=$(( ${s:-1} + ${t:-1} + ${r:-1} ))
    fi
    if [ -z "$n" ] || [ "$n" -eq 0 ] || [ "$failed" -ne 0 ]; then
      echo "$mode $workload: wrk failed ($result); logs in $W" >&2; trap - EXIT; exit 1
    fi
    dump="$out.1"
    [ -s "$dump" ] || { echo "no callgrind dump; see $W/valgrind.err, $W/control.log" >&2; trap - EXIT; exit 1; }
    total=$(sed -n 's/^summary: //p' "$dump")
    per=$((total / n))
    log "$mode $workload: $n requests, $per instructions per request"
    printf '| %s | %s | %d | %d |\n' "$mode" "$workload" "$n" "$per" >>"$W/table"
    echo "$mode $workload — largest parts of a request (inclusive instructions per request):"
    { callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null || true; } \
      | { grep -E 'mmgate::(gateway|contract::judge|record::record|upstream::conns::Conns::send)|Conn<I,B,T>::poll_read_head' || true; } \
      | sed -E -n 's/^ *([0-9,]+) \( *[0-9.]+%\) +[^:]*:([^ ]+).*/\1 \2/p' \
      | awk -v n="$n" 'NR <= 5 { gsub(",", "", $1); printf "  %8d  %s\n", $1 / n, $2 }'
  done
done
echo
cat "$W/table"
