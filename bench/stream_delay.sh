#!/usr/bin/env bash
# How long each hop holds a streamed event back, one command, loopback only (~1 minute):
#
#   bash bench/stream_delay.sh
#   GAP_MS=20 REQUESTS=20 bash bench/stream_delay.sh
#
# An upstream (bench/stream_delay.py) streams 5 SSE events GAP_MS apart, as a model streams
# tokens; each hop of bench/run.sh (nginx with buffering off, haproxy with and without
# `option http-no-delay`, mmgate shadow) is put in front of it, and REQUESTS streamed
# requests, one at a time, time every event from the upstream's send to the client's read.
# Prints the median and largest delay in ms of the first event and of the later ones.
# No load: this measures what one streaming client sees, not CPU.
#
# Env: GAP_MS (50), REQUESTS (10), MMGATE (a prebuilt binary; otherwise the plain release
#      build), NO_INSTALL=1 (never apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
GAP_MS=${GAP_MS:-50} REQUESTS=${REQUESTS:-10}

log() { printf '[stream_delay.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PATH=$PATH:/usr/sbin:/sbin
source bench/common.sh
install_missing nginx haproxy curl
if [ -z "${MMGATE:-}" ]; then
  log "cargo build --release --bin mmgate"
  cargo build --release --bin mmgate
  MMGATE=$PWD/target/release/mmgate
fi

work_dir stream-delay
read -r UP NG HA HS MM ADMIN <<<"$(free_ports 6)"
python3 bench/stream_delay.py upstream "$UP" "$GAP_MS" & PIDS+=($!)
wait_http "http://127.0.0.1:$UP/health" upstream

nginx_conf "$W/nginx" "$NG" off "$UP"
nginx -p "$W/nginx" -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log" 2>>"$W/nginx/error.log" &
PIDS+=($!)
haproxy_config "$W/haproxy.cfg" "$HA" "$UP"
haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.log" 2>&1 & PIDS+=($!)
haproxy_config "$W/haproxy_stream.cfg" "$HS" "$UP" no-delay
haproxy -db -f "$W/haproxy_stream.cfg" >"$W/haproxy_stream.log" 2>&1 & PIDS+=($!)
mmgate_policy "$W/policy.toml" "$MM" "$ADMIN" "$UP" shadow
"$MMGATE" serve --policy "$W/policy.toml" --drain-seconds 1 >/dev/null 2>"$W/mmgate.err" &
PIDS+=($!)
for port in "$NG" "$HA" "$HS"; do wait_http "http://127.0.0.1:$port/health"; done
wait_http "http://127.0.0.1:$ADMIN/readyz" mmgate

log "$REQUESTS streamed requests per hop, 5 events ${GAP_MS} ms apart"
echo "| hop | first event, median ms | largest | later events, median ms | largest |"
echo "|---|---:|---:|---:|---:|"
for hop in "direct $UP" "nginx_nobuf $NG" "haproxy $HA" "haproxy_stream $HS" "mmgate_shadow $MM"; do
  read -r name port <<<"$hop"
  python3 bench/stream_delay.py measure "$name" "http://127.0.0.1:$port/v1/chat/completions" "$REQUESTS"
done
