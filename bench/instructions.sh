#!/usr/bin/env bash
# User-space instructions per request (callgrind), one command, loopback only:
#
#   bash bench/instructions.sh                     # mmgate shadow and pass, and haproxy; 2 KB and SSE
#   MODES=shadow BASELINES= WORKLOADS=chat_2k bash bench/instructions.sh
#   BASELINES="haproxy nginx_nobuf" MODES= bash bench/instructions.sh   # the baselines alone
#   MMGATE=/tmp/old-mmgate bash bench/instructions.sh   # measure another build
#
# Instruction counts do not depend on what else runs on the machine, so two builds can be
# compared to within about 0.2% where wall-clock CPU moves by 10–30% (see BENCHMARKS.md).
# They count the hop's own user-space work (for mmgate: hyper, tokio, inspection, recording,
# allocation), not the kernel's: system calls and wake-ups are measured by bench/run.sh.
#
# For each target × workload: the hop runs under `valgrind --tool=callgrind` in front of
# examples/fake_vllm; wrk (one thread, 4 connections) warms it for 2 s, the counters are
# zeroed, wrk runs for DURATION seconds, the counters are dumped, and the instruction total
# is divided by the requests wrk completed (a run with failed requests is an error). For
# mmgate, the five largest parts of its request path (inclusive) are printed under each
# figure. The baselines are the proxies of bench/run.sh with the same configuration, except
# that nginx runs one process without a master, so that valgrind sees every request (the
# count per request does not depend on the number of workers).
#
# Env: DURATION (s, 8), MODES (mmgate modes: shadow pass), BASELINES (haproxy; also
#      nginx_nobuf), WORKLOADS (chat_2k chat_2k_sse), MMGATE and FAKE_VLLM (prebuilt
#      binaries; otherwise built: mmgate with tools/pgo.sh unless PGO=0), NO_INSTALL=1,
#      KEEP=1 (keep the work directory with the callgrind dumps), LOCKED=1 (also count the
#      atomic instructions per request, with bench/locked.py: callgrind then records costs
#      per instruction, and the run takes longer), BRANCHES=1 (also simulate branch
#      prediction, `--branch-sim=yes`, and print the conditional and indirect branches
#      mispredicted per request: callgrind's predictors are simpler than a real CPU's, so
#      compare builds and hops with each other, not with hardware counts).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-8} MODES=${MODES-shadow pass} BASELINES=${BASELINES-haproxy}
WORKLOADS=${WORKLOADS:-chat_2k chat_2k_sse}

log() { printf '[instructions.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

source bench/common.sh
tools=(wrk valgrind curl)
for b in $BASELINES; do
  case $b in
    haproxy) tools+=(haproxy) ;;
    nginx_nobuf) tools+=(nginx) ;;
    *) echo "unknown baseline $b (haproxy, nginx_nobuf)" >&2; exit 2 ;;
  esac
done
install_missing "${tools[@]}"

build_binaries

work_dir instructions

read -r UP PORT ADMIN <<<"$(free_ports 3)"
python3 bench/bodies.py "$W" >/dev/null
"$FAKE_VLLM" "127.0.0.1:$UP" 2>"$W/fake_vllm.err" & PIDS+=($!)

WAIT_TRIES=300 # the hops start slowly under valgrind
wait_http "http://127.0.0.1:$UP/health"

field() { # NAME < post.lua's RESULT line -> the value
  sed -n "s/.*RESULT.* $1=\([0-9]*\).*/\1/p"
}

# Starts TARGET under callgrind (writing OUT), sets VG to its pid and waits until it proxies.
start_hop() { # TARGET OUT
  local vg=(valgrind --tool=callgrind --callgrind-out-file="$2")
  [ "${LOCKED:-0}" = 1 ] && vg+=(--dump-instr=yes)
  [ "${BRANCHES:-0}" = 1 ] && vg+=(--branch-sim=yes)
  case $1 in
    haproxy)
      haproxy_config "$W/haproxy.cfg" "$PORT" "$UP"
      "${vg[@]}" haproxy -db -f "$W/haproxy.cfg" >/dev/null 2>"$W/valgrind.err" &
      ;;
    nginx_nobuf)
      nginx_conf "$W/nginx" "$PORT" off "$UP" 1
      "${vg[@]}" nginx -p "$W/nginx" -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log" \
        >/dev/null 2>"$W/valgrind.err" &
      ;;
    mmgate_*)
      mmgate_policy "$W/policy.toml" "$PORT" "$ADMIN" "$UP" "${1#mmgate_}"
      "${vg[@]}" "$MMGATE" serve --policy "$W/policy.toml" --drain-seconds 1 \
        >/dev/null 2>"$W/valgrind.err" &
      ;;
  esac
  VG=$!; PIDS+=("$VG")
  case $1 in
    mmgate_*) wait_http "http://127.0.0.1:$ADMIN/readyz" "$1" ;;
    *) wait_http "http://127.0.0.1:$PORT/health" "$1" ;;
  esac
}

targets=()
for m in $MODES; do targets+=("mmgate_$m"); done
for b in $BASELINES; do targets+=("$b"); done

printf '| target | workload | requests | instructions / request |\n|---|---|---:|---:|\n' >"$W/table"
for target in "${targets[@]}"; do
  for workload in $WORKLOADS; do
    out="$W/callgrind.$target.$workload"
    start_hop "$target" "$out"
    url="http://127.0.0.1:$PORT/v1/chat/completions"
    wrk -t1 -c4 -d2s -s bench/post.lua "$url" -- "$W/$workload.json" >/dev/null 2>&1
    callgrind_control -z "$VG" >"$W/control.log" 2>&1
    result=$(wrk -t1 -c4 -d"${DURATION}s" --timeout 10s -s bench/post.lua "$url" -- "$W/$workload.json" 2>&1)
    callgrind_control -d "$VG" >>"$W/control.log" 2>&1
    kill -TERM "$VG"; wait "$VG" 2>/dev/null || true
    n=$(field requests <<<"$result")
    failed=1
    if [ -n "$n" ]; then
      s=$(field status <<<"$result") t=$(field timeout <<<"$result") r=$(field read <<<"$result")
      failed=$(( ${s:-1} + ${t:-1} + ${r:-1} ))
    fi
    if [ -z "$n" ] || [ "$n" -eq 0 ] || [ "$failed" -ne 0 ]; then
      echo "$target $workload: wrk failed ($result); logs in $W" >&2; trap - EXIT; exit 1
    fi
    # The dump callgrind_control asked for (of the thread or process that served).
    dump=$(ls -t "$out".* 2>/dev/null | head -1 || true)
    [ -s "$dump" ] || { echo "no callgrind dump; see $W/valgrind.err, $W/control.log" >&2; trap - EXIT; exit 1; }
    # With --branch-sim the summary is `Ir Bc Bcm Bi Bim`.
    read -r total _ bcm _ bim _ < <(sed -n 's/^summary: //p' "$dump")
    per=$((total / n))
    log "$target $workload: $n requests, $per instructions per request"
    if [ "${BRANCHES:-0}" = 1 ]; then
      echo "$target $workload — mispredicted per request: $((bcm / n)) conditional, $((bim / n)) indirect"
    fi
    printf '| %s | %s | %d | %d |\n' "$target" "$workload" "$n" "$per" >>"$W/table"
    if [ "${LOCKED:-0}" = 1 ]; then
      echo "$target $workload — atomic instructions:"
      python3 bench/locked.py "$dump" "$n" 8
    fi
    [[ $target == mmgate_* ]] || continue
    echo "$target $workload — largest parts of a request (inclusive instructions per request):"
    { callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null || true; } \
      | { grep -E 'mmgate::(gateway|contract::judge|record::record|upstream::conns::Conns::send)|Conn<I,B,T>::poll_read_head' || true; } \
      | sed -E -n 's/^ *([0-9,]+) \( *[0-9.]+%\) +[^:]*:([^ ]+).*/\1 \2/p' \
      | awk -v n="$n" 'NR <= 5 { gsub(",", "", $1); printf "  %8d  %s\n", $1 / n, $2 }'
  done
done
echo
cat "$W/table"
