#!/usr/bin/env bash
# Where haproxy's and mmgate's CPU per request goes, kernel included, one command, loopback
# only:
#
#   bash bench/profile.sh                         # mmgate shadow vs haproxy, chat_2k
#   MODE=pass WORKLOAD=chat_2k_sse bash bench/profile.sh
#   OF=upstream bash bench/profile.sh             # the upstream's CPU behind each hop
#
# For each hop in front of examples/fake_vllm: a 1 s wrk warm-up (2 threads, 32 connections,
# as bench/run.sh), then `perf record -e cpu-clock -F 4000` attached to the hop for a
# DURATION s wrk run. Samples (250 µs of CPU each) are divided by the requests wrk
# completed, per symbol (`[k]` kernel, `[u]` the hop's own code, libraries by name), and the
# symbols whose µs per request differ most between the two hops are printed. Sampling
# slows the hops a little; compare the two rows of one run, not with bench/run.sh.
# Needs `perf` (root, or kernel.perf_event_paranoid ≤ 1) and the tools of bench/run.sh.
#
# With OF=upstream the profile is of the upstream's process (examples/fake_vllm) while it
# serves through each hop, instead of the hop's (`[u]` is then the upstream's own code).
#
# Env: DURATION (s, 6), MODE (shadow), WORKLOAD (chat_2k), TOP (30), OF (hop or upstream;
#      hop), MMGATE and FAKE_VLLM (prebuilt binaries; otherwise built), NO_INSTALL=1 (never
#      apt-get).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-6} MODE=${MODE:-shadow} WORKLOAD=${WORKLOAD:-chat_2k} TOP=${TOP:-30}
OF=${OF:-hop}
case $OF in hop | upstream) ;; *) echo "OF must be hop or upstream, not '$OF'" >&2; exit 2 ;; esac

log() { printf '[profile.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PATH=$PATH:/usr/sbin:/sbin
source bench/common.sh
install_missing wrk haproxy curl
command -v perf >/dev/null || { echo "perf is required (Debian: apt-get install linux-perf)" >&2; exit 2; }
build_binaries
work_dir profile

start_haproxy_and_mmgate "$MODE"

for hop in haproxy mmgate; do
  case $hop in
    haproxy) pid=$H url=http://127.0.0.1:$HAP/v1/chat/completions ;;
    *) pid=$M url=http://127.0.0.1:$PORT/v1/chat/completions ;;
  esac
  [ "$OF" = upstream ] && pid=${PIDS[0]}
  wrk -t2 -c32 -d1s -s bench/post.lua "$url" -- "$W/$WORKLOAD.json" >/dev/null 2>&1
  perf record -q -e cpu-clock -F 4000 -p "$pid" -o "$W/$hop.data" 2>/dev/null & rec=$!
  out=$(wrk -t2 -c32 -d"${DURATION}"s --timeout 10s -s bench/post.lua "$url" -- "$W/$WORKLOAD.json" 2>&1)
  kill -INT "$rec"; wait "$rec" 2>/dev/null || true
  n=$(sed -n 's/.*RESULT requests=\([0-9]*\).*/\1/p' <<<"$out")
  [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "$hop: wrk failed: $out" >&2; exit 1; }
  perf report -i "$W/$hop.data" --sort dso,sym -n --stdio 2>/dev/null >"$W/$hop.txt"
  echo "$hop $n" >>"$W/requests"
done

python3 - "$W" "$TOP" "mmgate $MODE" "$OF" <<'PY'
import collections, sys
w, top, name, of = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
reqs = dict(l.split() for l in open(f"{w}/requests"))
def load(hop):
    d = collections.Counter()
    for line in open(f"{w}/{hop}.txt"):
        p = line.split(None, 4)
        if len(p) < 4 or line.startswith("#"):
            continue
        dso, sym = p[2], (p[4] if len(p) > 4 else p[3]).strip()
        if "kernel" in dso:
            key = "[k] " + sym
        elif dso in ("haproxy", "mmgate", "fake_vllm"):
            key = "[u] " + sym
        else:
            key = dso
        d[key] += int(p[1])
    n = int(reqs[hop])
    return {k: v * 250.0 / n for k, v in d.items()}  # 4,000 samples/s: 250 µs each
a, b = load("haproxy"), load("mmgate")
if of == "upstream":
    print("the upstream's process, behind each hop")
ka, kb = (sum(v for k, v in x.items() if k.startswith("[k]")) for x in (a, b))
print(f"requests: haproxy {reqs['haproxy']}, {name} {reqs['mmgate']}")
print(f"µs per request: haproxy {sum(a.values()):.2f} (kernel {ka:.2f}), {name} {sum(b.values()):.2f} (kernel {kb:.2f})")
print(f"\n| haproxy µs | {name} µs | difference | where |\n|---:|---:|---:|---|")
rows = sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))
for k in rows[:top]:
    x, y = a.get(k, 0.0), b.get(k, 0.0)
    print(f"| {x:.3f} | {y:.3f} | {y - x:+.3f} | `{k[:90]}` |")
PY
