#!/usr/bin/env python3
"""Markdown tables from bench/run.sh's results.tsv (medians of the repetitions).

    python3 bench/summarise.py RESULTS.tsv [ENV.txt]

Per workload, one row per target:
- req/s, p50, p99: median over repetitions; "× direct" is the median over repetitions of the
  ratio to the direct run of the same repetition and workload (paired, so slow drifts of the
  machine cancel).
- server CPU: hop + upstream CPU µs per request; × direct as above (direct has no hop).
- hop CPU: the proxy's own CPU µs per request (0 for direct by definition), also as a ratio
  to haproxy's and to nginx's (request buffering off) in the same repetition.
- upstream CPU: the fake vLLM's CPU µs per request.
- wrk CPU: the load generator's own CPU µs per request (it shares the cores).
- per workload, the range of the 1-minute load average (wrk and the servers alone make
  about 4-6 of it) and of the CPU share used by other processes (outside load), and the
  lowest machine busy %, to judge outside load and saturation.
Then the issue #6 goals, checked on these medians.
"""
import csv
import statistics
import sys
from collections import defaultdict

WORKLOADS = {
    "chat_2k": "2 KB chat JSON → JSON",
    "chat_1m_image": "1 MB chat JSON with a base64 image → JSON",
    "chat_2k_sse": "2 KB chat, \"stream\": true → 50-event SSE",
}
TARGETS = ["direct", "nginx_buf", "nginx_nobuf", "haproxy", "haproxy_stream",
           "mmgate_pass", "mmgate_shadow", "mmgate_strip", "mmgate_reject"]
LABEL = {"nginx_buf": "nginx (req. buffering on)", "nginx_nobuf": "nginx (req. buffering off)",
         "haproxy_stream": "haproxy (http-no-delay) ²", "mmgate_reject": "mmgate reject ¹"}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def f(x, fmt):
    return "–" if x is None else format(x, fmt)


def main():
    rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
    env = open(sys.argv[2]).read().strip() if len(sys.argv) > 2 else ""
    by = defaultdict(dict)  # (workload, target) -> rep -> row
    for r in rows:
        for k in ("rps", "p50_us", "p99_us", "hop_cpu_us", "up_cpu_us", "wrk_cpu_us",
                  "machine_busy_pct", "load1"):
            r[k] = float(r[k])
        r["server_cpu_us"] = r["hop_cpu_us"] + r["up_cpu_us"]
        by[(r["workload"], r["target"])][r["rep"]] = r
    out = []
    if env:
        out += ["```", env, "```", ""]
    medians = {}
    for w, title in WORKLOADS.items():
        if (w, "direct") not in by:
            continue
        direct = by[(w, "direct")]
        out += [f"**{w}**: {title}", "",
                "| target | req/s | × direct | p50 ms | × direct | p99 ms | × direct "
                "| server CPU µs/req | × direct | hop CPU µs/req | × haproxy | × nginx (buf off) "
                "| upstream CPU µs/req | wrk CPU µs/req | non-2xx |",
                "|---|" + "---:|" * 14]
        for t in TARGETS:
            reps = by.get((w, t))
            if not reps:
                continue

            def paired(key, base_target=None):
                base = direct if base_target is None else by.get((w, base_target), {})
                return med([ratio(r[key], base[k][key]) if k in base else None
                            for k, r in reps.items()])

            m = {k: med([r[k] for r in reps.values()]) for k in
                 ("rps", "p50_us", "p99_us", "server_cpu_us", "hop_cpu_us", "up_cpu_us",
                  "wrk_cpu_us")}
            m["rps_x"] = paired("rps")
            m["non2xx"] = med([int(r["non2xx"]) + int(r["sock_errors"]) for r in reps.values()])
            medians[(w, t)] = m
            hop_h = paired("hop_cpu_us", "haproxy") if t not in ("direct", "haproxy") else None
            hop_n = paired("hop_cpu_us", "nginx_nobuf") if t not in ("direct", "nginx_nobuf") else None
            out.append(
                f"| {LABEL.get(t, t.replace('_', ' '))} | {f(m['rps'], ',.0f')} | {f(m['rps_x'], '.2f')} "
                f"| {f(m['p50_us'] / 1000, '.2f')} | {f(paired('p50_us'), '.2f')} "
                f"| {f(m['p99_us'] / 1000, '.2f')} | {f(paired('p99_us'), '.2f')} "
                f"| {f(m['server_cpu_us'], '.0f')} | {f(paired('server_cpu_us'), '.2f')} "
                f"| {f(m['hop_cpu_us'], '.0f')} | {f(hop_h, '.2f')} | {f(hop_n, '.2f')} "
                f"| {f(m['up_cpu_us'], '.0f')} | {f(m['wrk_cpu_us'], '.0f')} "
                f"| {f(m['non2xx'], '.0f')} |")
        runs = [r for (w2, _), reps in by.items() if w2 == w for r in reps.values()]
        loads = sorted(r["load1"] for r in runs)
        line = (f"1-minute load average at the end of these runs: {loads[0]:.2f} to "
                f"{loads[-1]:.2f} (median {statistics.median(loads):.2f})")
        if all("other_cpu_pct" in r for r in runs):
            other = sorted(float(r["other_cpu_pct"]) for r in runs)
            line += (f"; CPU used by other processes than wrk, the hop and the upstream: "
                     f"{max(other[0], 0):.0f}% to {other[-1]:.0f}% of the cores "
                     f"(median {max(statistics.median(other), 0):.0f}%)")
        out += ["", line + ".", ""]
    nreps = len({r["rep"] for r in rows})
    busy = min(r["machine_busy_pct"] for r in rows)
    out.append(f"Medians of {nreps} repetition(s); the machine was at least {busy:.0f}% busy "
               "during every measured run (/proc/stat). ¹ reject answers vLLM's 400 itself and never "
               "contacts the upstream: its rows measure the gate's own cost, not a proxied request "
               "(non-2xx counts those 400s).")
    if any(t == "haproxy_stream" for (_, t) in by):
        out.append("² haproxy with `option http-no-delay`: without it haproxy sends a response "
                   "that is not complete yet with MSG_MORE, and the kernel holds each streamed "
                   "event back for up to 200 ms (bench/stream_delay.sh); mmgate and nginx send "
                   "each event as it comes.")
    out.append("")
    # Issue #6 goals for mmgate shadow (and how the other modes fare on the same tests).
    goals = []

    def check(desc, a, b, le=True):
        if a is None or b is None:
            return
        ok = a <= b if le else a >= b
        goals.append(f"- {desc}: {a:.1f} vs {b:.1f} → {'met' if ok else 'NOT met'}")

    haproxies = [("haproxy", "haproxy's"), ("haproxy_stream", "haproxy's (http-no-delay)")]
    for w in ("chat_2k", "chat_2k_sse"):
        for target, name in haproxies:
            s, h = medians.get((w, "mmgate_shadow")), medians.get((w, target))
            if s and h:
                check(f"{w}: shadow hop CPU µs/req ≤ {name}", s["hop_cpu_us"], h["hop_cpu_us"])
    s, n = medians.get(("chat_1m_image", "mmgate_shadow")), medians.get(("chat_1m_image", "nginx_nobuf"))
    if s and n:
        check("chat_1m_image: shadow hop CPU µs/req ≤ nginx's (buffering off)",
              s["hop_cpu_us"], n["hop_cpu_us"])
    for w in WORKLOADS:
        for target, name in haproxies:
            s, h = medians.get((w, "mmgate_shadow")), medians.get((w, target))
            if s and h and s["rps_x"] and h["rps_x"]:
                goals.append(f"- {w}: shadow req/s × direct ≥ {name}: {s['rps_x']:.2f} vs "
                             f"{h['rps_x']:.2f} → {'met' if s['rps_x'] >= h['rps_x'] else 'NOT met'}")
    if goals:
        out += ["Issue #6 goals (mmgate shadow):", ""] + goals + [""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
