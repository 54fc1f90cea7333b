#!/usr/bin/env bash
# System calls and context switches per request of the hop (kernel-side counts that
# bench/instructions.sh does not see), one command, loopback only:
#
#   bash bench/syscalls.sh                          # mmgate shadow and haproxy, chat_2k
#   MODE=pass WORKLOADS="chat_2k chat_2k_sse" bash bench/syscalls.sh
#   OF=upstream HOPS="haproxy mmgate_shadow haproxy mmgate_shadow" bash bench/syscalls.sh
#
# For each workload and each hop (by default haproxy, then mmgate in MODE) in front of
# examples/fake_vllm: a 1 s wrk warm-up (2 threads, 32 connections, as bench/run.sh), then
# two measured wrk runs of DURATION seconds:
#   1. with `perf stat -e 'syscalls:sys_enter_*'` attached to the hop: system calls of each
#      kind per completed request (tracing slows the hop, so its CPU is not taken from here);
#   2. untraced: voluntary and involuntary context switches of all the hop's threads
#      (/proc/PID/task/*/status), its user and kernel CPU (/proc/PID/stat), and the TCP
#      segments carrying data on all the loop's legs (wrk, hop, upstream; `nstat`'s
#      TcpExtTCPOrigDataSent, machine-wide) and all segments, pure ACKs included
#      (TcpOutSegs), per request. An answer the hop writes in two
#      pieces shows there, not in run 1: tracing slows the hop enough to change how much
#      of a streamed answer has come when it writes.
# Needs `perf` with tracepoint access (root, or kernel.perf_event_paranoid ≤ 1), `nstat`
# (iproute2) and the tools of bench/run.sh.
#
# With OF=upstream every count but the segments is of the upstream's process
# (examples/fake_vllm) while it serves through each hop, instead of the hop's.
#
# Env: DURATION (s, 4), MODE (shadow), WORKLOADS (chat_2k), HOPS (the hops measured, in
#      this order, a hop named twice measured twice; "haproxy mmgate_$MODE"), OF (hop or
#      upstream; hop), MMGATE and FAKE_VLLM (prebuilt binaries; otherwise built),
#      NO_INSTALL=1 (never apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-4} MODE=${MODE:-shadow} WORKLOADS=${WORKLOADS:-chat_2k}
HOPS=${HOPS:-haproxy mmgate_$MODE} OF=${OF:-hop}
case $OF in hop | upstream) ;; *) echo "OF must be hop or upstream, not '$OF'" >&2; exit 2 ;; esac

log() { printf '[syscalls.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PATH=$PATH:/usr/sbin:/sbin
source bench/common.sh
install_missing wrk haproxy curl
command -v nstat >/dev/null || { echo "nstat is required (Debian: apt-get install iproute2)" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is required (Debian: apt-get install linux-perf)" >&2; exit 2; }
perf stat -e raw_syscalls:sys_enter -o /dev/null -- true 2>/dev/null \
  || { echo "perf cannot read tracepoints here (try as root)" >&2; exit 2; }

build_binaries

work_dir syscalls

start_haproxy_and_mmgate "$MODE"

# Sums over all threads of PID: voluntary and involuntary switches, utime and stime ticks.
counters() { # PID
  local t v n u s sv=0 sn=0 su=0 ss=0
  for t in /proc/"$1"/task/*; do
    read -r v n < <(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' "$t/status")
    # utime and stime are fields 14 and 15, counted after "PID (COMM) " whatever COMM holds.
    read -r u s < <(sed 's/.*) //' "$t/stat" | awk '{print $12, $13}')
    sv=$((sv + v)) sn=$((sn + n)) su=$((su + u)) ss=$((ss + s))
  done
  echo "$sv $sn $su $ss"
}
requests() { sed -n 's/.*RESULT requests=\([0-9]*\).*/\1/p'; }
drive() { # URL BODY SECONDS
  wrk -t2 -c32 -d"$3"s --timeout 10s -s bench/post.lua "$1" -- "$2" 2>&1
}

# Data segments and all segments (pure ACKs included) sent on loopback since the last call
# (nstat keeps its history in $W).
export NSTAT_HISTORY=$W/nstat.history
segments() {
  nstat -z TcpExtTCPOrigDataSent TcpOutSegs \
    | awk '$1 == "TcpExtTCPOrigDataSent" { d = $2 } $1 == "TcpOutSegs" { a = $2 } END { print d, a }'
}

TICK=$(getconf CLK_TCK)
printf '| workload | hop | system calls / request | of which | voluntary switches / request | involuntary switches / request | user µs / request | kernel µs / request | data segments / request (all legs) | all segments / request (all legs) |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n' >"$W/table"
for workload in $WORKLOADS; do
  for hop in $HOPS; do
    case $hop in
      haproxy) pid=$H url=http://127.0.0.1:$HAP/v1/chat/completions ;;
      "mmgate_$MODE") pid=$M url=http://127.0.0.1:$PORT/v1/chat/completions ;;
      *) echo "HOPS: '$hop' is neither haproxy nor mmgate_$MODE" >&2; exit 2 ;;
    esac
    [ "$OF" = upstream ] && pid=${PIDS[0]}
    body=$W/$workload.json
    drive "$url" "$body" 1 >/dev/null
    perf stat -x, -e 'syscalls:sys_enter_*' -p "$pid" -o "$W/perf.txt" & perf=$!
    traced=$(drive "$url" "$body" "$DURATION")
    kill -INT "$perf"; wait "$perf" 2>/dev/null || true
    n=$(requests <<<"$traced")
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "$hop $workload: wrk failed: $traced" >&2; exit 1; }
    # Total per request, then each kind at 0.05 or more per request, most frequent first.
    calls=$(awk -F, -v n="$n" '$1 + 0 > 0 { t += $1 } END { printf "%.2f", t / n }' "$W/perf.txt")
    kinds=$(awk -F, -v n="$n" '$1 + 0 >= 0.05 * n { sub("syscalls:sys_enter_", "", $3); printf "%.2f %s\n", $1 / n, $3 }' \
      "$W/perf.txt" | sort -rn | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }')
    segments >/dev/null
    read -r v0 n0 u0 s0 < <(counters "$pid")
    plain=$(drive "$url" "$body" "$DURATION")
    read -r v1 n1 u1 s1 < <(counters "$pid")
    read -r segs all < <(segments)
    m=$(requests <<<"$plain")
    [ -n "$m" ] && [ "$m" -gt 0 ] || { echo "$hop $workload: wrk failed: $plain" >&2; exit 1; }
    row=$(awk -v m="$m" -v t="$TICK" -v dv=$((v1 - v0)) -v dn=$((n1 - n0)) \
      -v du=$((u1 - u0)) -v ds=$((s1 - s0)) -v sg="$segs" -v al="$all" \
      'BEGIN { printf "%.3f | %.3f | %.1f | %.1f | %.2f | %.2f", dv / m, dn / m, du * 1e6 / t / m, ds * 1e6 / t / m, sg / m, al / m }')
    log "$workload $hop: $calls system calls per request"
    printf '| %s | %s | %s | %s | %s |\n' "$workload" "$hop" "$calls" "$kinds" "$row" >>"$W/table"
  done
done
echo
echo "Counts of the $OF's process, per request:"
cat "$W/table"
