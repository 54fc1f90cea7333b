#!/usr/bin/env bash
# Proxy-overhead load benchmark (issue #6, part 1), one command, loopback only, bounded:
#
#   bash bench/run.sh                       # 3 reps × 3 workloads × 9 targets, 5 s each
#   DURATION=10 REPS=5 bash bench/run.sh
#   TARGETS="direct haproxy mmgate_shadow" WORKLOADS=chat_2k REPS=1 bash bench/run.sh
#
# wrk (bench/post.lua, bodies from bench/bodies.py) drives, in turn, each target in front of
# the same upstream (examples/fake_vllm: JSON, or 50 SSE events for "stream": true):
#   direct         wrk → fake vLLM
#   nginx_buf      nginx proxy_pass, proxy_request_buffering on
#   nginx_nobuf    nginx proxy_pass, proxy_request_buffering off
#   haproxy        haproxy mode http, http-reuse always
#   haproxy_stream haproxy as above with option http-no-delay (streamed events not held back)
#   mmgate_pass / mmgate_shadow / mmgate_strip / mmgate_reject   release mmgate, gate.default
# bench/measure.py records requests/s, p50/p99 latency and CPU µs per request (utime+stime
# from /proc) of the hop and of the upstream; bench/summarise.py prints the medians of the
# repetitions and the ratios as markdown. See bench/README.md.
#
# Env: DURATION (s, 5), WARMUP (s, 1), REPS (3), CONNS (32), THREADS (wrk threads, 2),
#      WORKLOADS, TARGETS (space-separated subsets of the above), OUT (results directory,
#      default target/bench-overhead/<UTC time>), MMGATE / FAKE_VLLM (prebuilt binaries:
#      when both are set nothing is built; otherwise mmgate is the shipped PGO build,
#      tools/pgo.sh, or with PGO=0 the plain release build), NO_INSTALL=1 (never apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=${DURATION:-5} WARMUP=${WARMUP:-1} REPS=${REPS:-3} CONNS=${CONNS:-32} THREADS=${THREADS:-2}
ALL_WORKLOADS="chat_2k chat_1m_image chat_2k_sse"
ALL_TARGETS="direct nginx_buf nginx_nobuf haproxy haproxy_stream mmgate_pass mmgate_shadow mmgate_strip mmgate_reject"
WORKLOADS=${WORKLOADS:-$ALL_WORKLOADS} TARGETS=${TARGETS:-$ALL_TARGETS}
OUT=${OUT:-$ROOT/target/bench-overhead/$(date -u +%Y%m%dT%H%M%SZ)}
for w in $WORKLOADS; do [[ " $ALL_WORKLOADS " == *" $w "* ]] || { echo "unknown workload $w" >&2; exit 2; }; done
for t in $TARGETS; do [[ " $ALL_TARGETS " == *" $t "* ]] || { echo "unknown target $t" >&2; exit 2; }; done
[[ " $TARGETS " == *" direct "* ]] || TARGETS="direct $TARGETS"   # the ratios need it

log() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# 1. Tools: wrk, nginx, haproxy from Debian's packages when missing.
PATH=$PATH:/usr/sbin:/sbin
source bench/common.sh
install_missing wrk nginx haproxy curl
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 2; }

# 2. Binaries: release mmgate and examples/fake_vllm.
build_binaries

mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/mmgate-bench.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r UP P_NGB P_NGN P_HAP P_HAPS P_PASS P_SHADOW P_STRIP P_REJECT A_PASS A_SHADOW A_STRIP \
  A_REJECT <<<"$(free_ports 13)"

python3 bench/bodies.py "$W" >"$OUT/bodies.txt"

# 3. Servers.
"$FAKE_VLLM" "127.0.0.1:$UP" 2>"$W/fake_vllm.err" & FAKE=$!; PIDS+=("$FAKE")
wait_http "http://127.0.0.1:$UP/health" fake_vllm

declare -A URL HOP
URL[direct]=http://127.0.0.1:$UP; HOP[direct]=

start_nginx() { # NAME PORT on|off
  nginx_conf "$W/$1" "$2" "$3" "$UP"
  nginx -p "$W/$1" -c "$W/$1/nginx.conf" -e "$W/$1/error.log" 2>>"$W/$1/error.log" &
  local pid=$!; PIDS+=("$pid")
  URL[$1]=http://127.0.0.1:$2; HOP[$1]=$pid
  wait_http "${URL[$1]}/health" "$1"
}
[[ " $TARGETS " == *" nginx_buf "* ]] && start_nginx nginx_buf "$P_NGB" on
[[ " $TARGETS " == *" nginx_nobuf "* ]] && start_nginx nginx_nobuf "$P_NGN" off

start_haproxy() { # NAME PORT [no-delay]
  haproxy_config "$W/$1.cfg" "$2" "$UP" ${3:-}
  haproxy -db -f "$W/$1.cfg" >"$W/$1.log" 2>&1 & local pid=$!; PIDS+=("$pid")
  URL[$1]=http://127.0.0.1:$2; HOP[$1]=$pid
  wait_http "${URL[$1]}/health" "$1"
}
[[ " $TARGETS " == *" haproxy "* ]] && start_haproxy haproxy "$P_HAP"
[[ " $TARGETS " == *" haproxy_stream "* ]] && start_haproxy haproxy_stream "$P_HAPS" no-delay

start_mmgate() { # MODE PORT ADMIN
  mmgate_policy "$W/mmgate_$1.toml" "$2" "$3" "$UP" "$1"
  # Offending-request log lines (one per request in shadow/strip/reject) go to /dev/null.
  "$MMGATE" serve --policy "$W/mmgate_$1.toml" --drain-seconds 1 >/dev/null 2>"$W/mmgate_$1.err" &
  local pid=$!; PIDS+=("$pid")
  URL[mmgate_$1]=http://127.0.0.1:$2; HOP[mmgate_$1]=$pid
  wait_http "http://127.0.0.1:$3/readyz" "mmgate_$1"
}
[[ " $TARGETS " == *" mmgate_pass "* ]] && start_mmgate pass "$P_PASS" "$A_PASS"
[[ " $TARGETS " == *" mmgate_shadow "* ]] && start_mmgate shadow "$P_SHADOW" "$A_SHADOW"
[[ " $TARGETS " == *" mmgate_strip "* ]] && start_mmgate strip "$P_STRIP" "$A_STRIP"
[[ " $TARGETS " == *" mmgate_reject "* ]] && start_mmgate reject "$P_REJECT" "$A_REJECT"

# 4. Sanity: every target answers every workload as expected, on one kept-alive connection.
log "checking answers"
bad=0
for t in $TARGETS; do for w in $WORKLOADS; do
  url=${URL[$t]}/v1/chat/completions
  read -r code conns < <(curl -s -o "$W/resp" -D "$W/hdr" -w '%{http_code} %{num_connects}\n' \
    -H 'Content-Type: application/json' --data-binary "@$W/$w.json" "$url" \
    -o /dev/null "$url" | tail -1)
  want=200; [ "$t" = mmgate_reject ] && want=400
  ok=yes why=
  [ "$code" = "$want" ] || { ok=no; why="status $code, want $want"; }
  [ "$conns" = 0 ] || { ok=no; why="$why; second request opened a new connection"; }
  if [ "$want" = 200 ]; then
    if [ "$w" = chat_2k_sse ]; then
      n=$(grep -c '^data: ' "$W/resp" || true)
      [ "$n" = 51 ] || { ok=no; why="$why; $n SSE data lines, want 51"; }
    else
      grep -q '"chat.completion"' "$W/resp" || { ok=no; why="$why; not a chat completion"; }
    fi
  fi
  if [ "$t" = mmgate_strip ]; then
    grep -qi '^x-mmgate-stripped' "$W/hdr" || { ok=no; why="$why; no x-mmgate-stripped"; }
  fi
  printf '  %-14s %-14s %s %s\n' "$t" "$w" "$code" "${why:+($why)}" >&2
  [ $ok = yes ] || bad=1
done; done
[ $bad = 0 ] || { echo "sanity check failed; logs in $W" >&2; exit 1; }

# 5. Environment, then the measured runs (repetitions outermost; the target order rotates).
read -ra T_ARR <<<"$TARGETS"
nw=$(wc -w <<<"$WORKLOADS")
est=$(python3 -c "print(round($REPS*$nw*${#T_ARR[@]}*($DURATION+$WARMUP+0.4)/60,1))")
{
  echo "date_utc: $(date -u +%FT%TZ)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo ' (src modified)')"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
  echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{print $2}')"
  echo "nginx: $(nginx -v 2>&1 | sed 's/.*\///')"
  echo "haproxy: $(haproxy -v | head -1 | awk '{print $3}')"
  echo "rustc: $(rustc --version 2>/dev/null | awk '{print $2}')"
  echo "settings: duration=${DURATION}s warmup=${WARMUP}s reps=$REPS conns=$CONNS wrk_threads=$THREADS"
  echo "loadavg_start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/env.txt"
cat "$OUT/env.txt" >&2
log "measuring: ${REPS} reps × ${nw} workloads × ${#T_ARR[@]} targets, about ${est} min"
RES=$OUT/results.tsv; : >"$RES"
for rep in $(seq "$REPS"); do
  rot=$(( (rep - 1) % ${#T_ARR[@]} ))
  order=("${T_ARR[@]:$rot}" "${T_ARR[@]:0:$rot}")
  for w in $WORKLOADS; do for t in "${order[@]}"; do
    python3 bench/measure.py --out "$RES" --rep "$rep" --workload "$w" --target "$t" \
      --url "${URL[$t]}/v1/chat/completions" --body "$W/$w.json" \
      ${HOP[$t]:+--hop "${HOP[$t]}"} --upstream "$FAKE" \
      --duration "$DURATION" --warmup "$WARMUP" --conns "$CONNS" --threads "$THREADS"
  done; done
done
echo "loadavg_end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
tail -1 "$OUT/env.txt" >&2

# mmgate's own counters, to see that shadow/strip/reject did their work.
for m in pass shadow strip reject; do
  a_var=A_${m^^}
  [ -n "${HOP[mmgate_$m]:-}" ] || continue
  curl -s "http://127.0.0.1:${!a_var}/metrics" | grep -E '^mmgate_(requests|offending_requests)_total' \
    | sed "s/^/mmgate_$m: /" >>"$OUT/mmgate_metrics.txt" || true
done

python3 bench/summarise.py "$RES" "$OUT/env.txt" | tee "$OUT/table.md"
log "raw results: $RES; table: $OUT/table.md"
