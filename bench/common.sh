# Helpers shared by the bench scripts (sourced; each script defines `log` and `W` first).

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
