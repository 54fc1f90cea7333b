#!/usr/bin/env python3
"""One measured wrk run for bench/run.sh; appends one row to a TSV file.

    python3 bench/measure.py --out results.tsv --rep 1 --workload chat_2k --target haproxy \
        --url http://127.0.0.1:PORT/v1/chat/completions --body DIR/chat_2k.json \
        --hop PID --upstream PID [--duration 5] [--warmup 1] [--conns 32] [--threads 2]

CPU: utime + stime from /proc/PID/stat (all threads of the process, in clock ticks) of every
--hop / --upstream PID and of all their descendants (nginx's workers are children of its
master), read just before wrk starts and just after it exits. CPU per request is the
difference divided by the requests wrk completed. wrk's own CPU comes from wait4's rusage;
the hop's user-space share is its utime alone (hop_user_us); machine busy % from the first line of /proc/stat over the same window, and from it the share
of all cores used by other processes than these (outside load that distorts the run).
"""
import argparse
import os
import re
import subprocess
import sys

TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")
HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ("rep workload target requests seconds rps p50_us p90_us p99_us mean_us non2xx "
           "sock_errors hop_cpu_us up_cpu_us wrk_cpu_us machine_busy_pct other_cpu_pct load1 "
           "hop_user_us").split()


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            pass
    return out


def ticks(pids):
    """utime + stime, and utime alone, of the processes, in clock ticks."""
    total = user = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            sys.exit(f"process {pid} is gone")
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        user += int(fields[11])
    return total, user


def machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]), v[3] + v[4]  # total (without guest), idle + iowait


def wrk(args, seconds):
    cmd = ["wrk", f"-t{args.threads}", f"-c{args.conns}", f"-d{seconds}s", "--timeout", "10s",
           "-s", os.path.join(HERE, "post.lua"), args.url, "--", args.body]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"wrk failed ({p.returncode}):\n{out}")
    return out, (ru.ru_utime + ru.ru_stime) * 1e6


def main():
    ap = argparse.ArgumentParser()
    for a in ("out", "rep", "workload", "target", "url", "body"):
        ap.add_argument(f"--{a}", required=True)
    ap.add_argument("--hop", type=int, action="append", default=[])
    ap.add_argument("--upstream", type=int, action="append", default=[])
    ap.add_argument("--duration", type=int, default=5)  # wrk takes whole seconds
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    if args.warmup > 0:
        wrk(args, args.warmup)
    hop = [p for h in args.hop for p in descendants(h)]
    up = [p for u in args.upstream for p in descendants(u)]
    (h0, hu0), (u0, _), m0 = ticks(hop), ticks(up), machine()
    out, wrk_us = wrk(args, args.duration)
    (h1, hu1), (u1, _), m1 = ticks(hop), ticks(up), machine()
    with open("/proc/loadavg") as f:
        load1 = f.read().split()[0]

    m = re.search(r"^RESULT (.*)$", out, re.M)
    if not m:
        sys.exit(f"no RESULT line from wrk:\n{out}")
    r = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    n = int(r["requests"])
    if n == 0:
        sys.exit(f"wrk completed no request:\n{out}")
    seconds = r["duration_us"] / 1e6
    total, idle = m1[0] - m0[0], m1[1] - m0[1]
    own = (h1 - h0) + (u1 - u0) + wrk_us / TICK_US
    row = {
        "rep": args.rep, "workload": args.workload, "target": args.target,
        "requests": n, "seconds": f"{seconds:.3f}", "rps": f"{n / seconds:.1f}",
        "p50_us": int(r["p50_us"]), "p90_us": int(r["p90_us"]), "p99_us": int(r["p99_us"]),
        "mean_us": r["mean_us"], "non2xx": int(r["status"]),
        "sock_errors": int(r["connect"] + r["read"] + r["write"] + r["timeout"]),
        "hop_cpu_us": f"{(h1 - h0) * TICK_US / n:.2f}",
        "up_cpu_us": f"{(u1 - u0) * TICK_US / n:.2f}",
        "wrk_cpu_us": f"{wrk_us / n:.2f}",
        "machine_busy_pct": f"{100 * (total - idle) / max(total, 1):.1f}",
        # CPU used by anything but the hop, the upstream and wrk (other work on the machine),
        # as a share of all the cores over the run.
        "other_cpu_pct": f"{100 * (total - idle - own) / max(total, 1):.1f}",
        "load1": load1,
        # The hop's user-space part of hop_cpu_us (the rest is the kernel's, for it).
        "hop_user_us": f"{(hu1 - hu0) * TICK_US / n:.2f}",
    }
    new = not os.path.exists(args.out) or os.path.getsize(args.out) == 0
    with open(args.out, "a") as f:
        if new:
            f.write("\t".join(COLUMNS) + "\n")
        f.write("\t".join(str(row[c]) for c in COLUMNS) + "\n")
    print(f"  rep {args.rep} {args.workload:<13} {args.target:<12} {n / seconds:9.1f} req/s "
          f"p50 {r['p50_us'] / 1000:7.2f} ms p99 {r['p99_us'] / 1000:7.2f} ms "
          f"hop {row['hop_cpu_us']:>8} µs up {row['up_cpu_us']:>8} µs "
          f"wrk {row['wrk_cpu_us']:>7} µs busy {row['machine_busy_pct']}% other {row['other_cpu_pct']}% "
          f"non2xx {row['non2xx']} err {row['sock_errors']}", flush=True)


if __name__ == "__main__":
    main()
