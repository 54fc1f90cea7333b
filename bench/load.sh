#!/usr/bin/env bash
# Bounded loopback load test: wrk (many connections, large bodies) → release mmgate (strip
# mode) → examples/counting_upstream. Measures mmgate's peak RSS (VmHWM) and counts requests
# answered (wrk), recorded (mmgate metrics) and received whole upstream. Stops by itself.
#
#   bash bench/load.sh            # defaults below; override with env vars
#   CONNS=512 SECONDS_=30 BODY_KB=900 bash bench/load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-256} THREADS=${THREADS:-4} SECONDS_=${SECONDS_:-20}
BODY_KB=${BODY_KB:-512} LIMIT_BYTES=${LIMIT_BYTES:-1048576}
command -v wrk >/dev/null || { echo "wrk not found (apt-get install -y wrk)"; exit 2; }
cargo build --release --bin mmgate --example counting_upstream >/dev/null 2>&1
T=target/release; W=$(mktemp -d)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
UP=$(port); GW=$(port); ADMIN=$(port)
cleanup() { kill "${MM_PID:-}" "${UP_PID:-}" 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
"$T/examples/counting_upstream" "127.0.0.1:$UP" 2>/dev/null & UP_PID=$!
cat >"$W/policy.toml" <<TOML
[listen]
addr = "127.0.0.1:$GW"
admin = "127.0.0.1:$ADMIN"
[upstream]
url = "http://127.0.0.1:$UP"
[limits]
max_body_bytes = $LIMIT_BYTES
[gate]
default = "strip"
TOML
"$T/mmgate" serve --policy "$W/policy.toml" >"$W/stdout" 2>/dev/null & MM_PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ADMIN/healthz" >/dev/null && break; sleep 0.1; done
# A chat body of BODY_KB KiB (one long message) with an offending field to strip.
python3 - "$BODY_KB" >"$W/body.json" <<'PY'
import json, sys
n = int(sys.argv[1]) * 1024
print(json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "x" * n}],
                  "mm_processor_kwargs": {"num_crops": 4}}), end="")
PY
cat >"$W/post.lua" <<LUA
local f = io.open("$W/body.json", "rb"); wrk.body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.headers["Content-Type"] = "application/json"
LUA
RSS0=$(awk '/VmRSS/{print $2}' /proc/$MM_PID/status)
wrk -t"$THREADS" -c"$CONNS" -d"${SECONDS_}s" --timeout 10s -s "$W/post.lua" \
  "http://127.0.0.1:$GW/v1/chat/completions" | tee "$W/wrk"
# Let cut-off requests finish or cancel, then read the counters.
for _ in $(seq 100); do
  inflight=$(curl -s "http://127.0.0.1:$ADMIN/metrics" | awk '/^mmgate_in_flight_requests /{print $2}')
  [ "$inflight" = "0" ] && break; sleep 0.1
done
M=$(curl -s "http://127.0.0.1:$ADMIN/metrics")
sum() { echo "$M" | awk -v p="$1" 'index($0,p)==1{s+=$NF} END{print s+0}'; }
HWM=$(awk '/VmHWM/{print $2}' /proc/$MM_PID/status)
ANSWERED=$(awk '/requests in/{print $1}' "$W/wrk")
NON2XX=$(awk '/Non-2xx/{print $NF}' "$W/wrk"); NON2XX=${NON2XX:-0}
RECORDED=$(sum 'mmgate_requests_total{')
STRIPPED=$(echo "$M" | awk '/^mmgate_requests_total\{/ && /outcome="stripped"/{s+=$NF} END{print s+0}')
UPSTREAM=$(curl -s "http://127.0.0.1:$UP/count")
LOGLINES=$(grep -c '"event":"offending_request"' "$W/stdout" || true)
BYACTION=$(grep '"event":"offending_request"' "$W/stdout" | grep -o '"action":"[a-z]*"' | cut -d'"' -f4 \
  | sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}')
cat <<OUT
---
connections=$CONNS threads=$THREADS seconds=$SECONDS_ body=${BODY_KB}KiB limit=$LIMIT_BYTES
mmgate RSS at start: ${RSS0} kB; peak RSS (VmHWM): ${HWM} kB; bound limit×conns: $((LIMIT_BYTES*CONNS/1024)) kB
answered (wrk): $ANSWERED (non-2xx: $NON2XX)
recorded by mmgate: $RECORDED (stripped: $STRIPPED); in flight after: ${inflight:-?}
received whole upstream: $UPSTREAM
log lines: $LOGLINES (by action: $BYACTION)
OUT
