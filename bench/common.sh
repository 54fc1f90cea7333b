# Helpers shared by the bench scripts (sourced from the project root; each script defines
# `log` first, and `W` itself or with `work_dir`).

# Installs the Debian packages of the given commands when they are missing (`apt-get`,
# noninteractive); with NO_INSTALL=1 a missing command is an error instead.
install_missing() { # COMMAND...
  local need=() c SUDO=
  for c in "$@"; do command -v "$c" >/dev/null || need+=("$c"); done
  ((${#need[@]})) || return 0
  [ "${NO_INSTALL:-}" = 1 ] && { echo "missing: ${need[*]} (NO_INSTALL=1)" >&2; exit 2; }
  [ "$(id -u)" = 0 ] || SUDO=sudo
  log "installing ${need[*]} (apt-get)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
}

# N free loopback ports, all bound at once so they differ (then released for the servers).
free_ports() { # N
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Waits until URL answers (WAIT_TRIES × 0.1 s, default 100), else stops with the logs' place.
wait_http() { # URL [NAME]
  local _
  for _ in $(seq "${WAIT_TRIES:-100}"); do
    curl -s -o /dev/null --max-time 1 "$1" && return 0; sleep 0.1
  done
  echo "${2:-$1} did not come up; logs in $W" >&2; ls -l "$W" >&2; exit 1
}

# Sets MMGATE and FAKE_VLLM: the prebuilt binaries when both are given, else the shipped
# build of mmgate (profile-guided, tools/pgo.sh; PGO=0 for the plain release build) and a
# release build of fake_vllm (run from the project root).
build_binaries() {
  if [ -n "${MMGATE:-}" ] && [ -n "${FAKE_VLLM:-}" ]; then
    log "using MMGATE=$MMGATE FAKE_VLLM=$FAKE_VLLM"
    return 0
  fi
  FAKE_VLLM=$PWD/target/release/examples/fake_vllm
  if [ "${PGO:-1}" = 0 ]; then
    log "cargo build --release --bin mmgate --example fake_vllm"
    cargo build --release --bin mmgate --example fake_vllm
    MMGATE=$PWD/target/release/mmgate
  else
    log "cargo build --release --example fake_vllm; bash tools/pgo.sh (PGO=0: plain release)"
    cargo build --release --example fake_vllm
    bash tools/pgo.sh
    MMGATE=$PWD/target/pgo/mmgate
  fi
}

# haproxy as every bench measures it: `mode http`, 2 threads, upstream connections reused.
# A fourth argument adds `option http-no-delay`: by default haproxy sends a response that is
# not complete yet with MSG_MORE, and the kernel then holds a streamed event for up to
# 200 ms (bench/stream_delay.sh); with the option each event goes out as it comes.
haproxy_config() { # FILE PORT UPSTREAM_PORT [no-delay]
  cat >"$1" <<HAP
global
  nbthread 2
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
  http-reuse always
${4:+  option http-no-delay}
frontend fe
  bind 127.0.0.1:$2
  default_backend vllm
backend vllm
  server up1 127.0.0.1:$3
HAP
}

# nginx as every bench measures it (`proxy_request_buffering` on or off). WORKERS=1 runs one
# process without a master (bench/instructions.sh, so valgrind sees every request).
nginx_conf() { # DIR PORT on|off UPSTREAM_PORT [WORKERS (2)]
  mkdir -p "$1/tmp"
  cat >"$1/nginx.conf" <<NGINX
# 2 worker processes match mmgate's two data-plane threads (nproc = 2 here).
$( [ "$(id -u)" = 0 ] && echo "user root;" )
worker_processes ${5:-2};
daemon off;
master_process $( [ "${5:-2}" = 1 ] && echo off || echo on );
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  client_max_body_size 64m;
  client_body_buffer_size 2m;   # bodies up to 2 MiB stay in memory, as in mmgate
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  upstream vllm {
    server 127.0.0.1:$4;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:$2;
    location / {
      proxy_pass http://vllm;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_request_buffering $3;
      proxy_buffering off;      # stream responses (SSE) as they come
    }
  }
}
NGINX
}

# The mmgate policy every bench measures: one upstream, `gate.default` = MODE, facts fixed
# (the fake vLLM's /openapi.json is not vLLM's: no discovery), no file watching.
mmgate_policy() { # FILE PORT ADMIN_PORT UPSTREAM_PORT MODE
  cat >"$1" <<TOML
[listen]
addr = "127.0.0.1:$2"
admin = "127.0.0.1:$3"
workers = ${MMGATE_WORKERS:-0}
[upstream]
url = "http://127.0.0.1:$4"
[gate]
default = "$5"
[vllm]
served_models = ["tiny"]
discover_models = false
discover_routes = false
[reload]
watch = false
TOML
}

# Makes the work directory W and the list PIDS: on exit, every process in PIDS is sent TERM
# and waited for, and W is removed.
work_dir() { # NAME
  W=$(mktemp -d "${TMPDIR:-/tmp}/mmgate-$1.XXXXXX")
  PIDS=()
  trap stop_all EXIT
  trap 'exit 130' INT TERM
}
stop_all() {
  local p
  for p in ${PIDS[@]+"${PIDS[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
  for p in ${PIDS[@]+"${PIDS[@]}"}; do wait "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "kept $W" >&2; else rm -rf "$W"; fi
}

# Writes the bodies into W and starts, on free loopback ports, examples/fake_vllm (port UP),
# haproxy in front of it (port HAP, pid H) and mmgate in MODE (port PORT, admin ADMIN,
# pid M), each added to PIDS. For the scripts that compare one mmgate with haproxy.
start_haproxy_and_mmgate() { # MODE
  read -r UP HAP PORT ADMIN <<<"$(free_ports 4)"
  python3 bench/bodies.py "$W" >/dev/null
  "$FAKE_VLLM" "127.0.0.1:$UP" 2>"$W/fake_vllm.err" & PIDS+=($!)
  wait_http "http://127.0.0.1:$UP/health" fake_vllm
  haproxy_config "$W/haproxy.cfg" "$HAP" "$UP"
  haproxy -db -f "$W/haproxy.cfg" >"$W/haproxy.log" 2>&1 & H=$!; PIDS+=("$H")
  wait_http "http://127.0.0.1:$HAP/health" haproxy
  mmgate_policy "$W/policy.toml" "$PORT" "$ADMIN" "$UP" "$1"
  "$MMGATE" serve --policy "$W/policy.toml" --drain-seconds 1 >/dev/null 2>"$W/mmgate.err" & M=$!
  PIDS+=("$M")
  wait_http "http://127.0.0.1:$ADMIN/readyz" mmgate
}
