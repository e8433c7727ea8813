#!/usr/bin/env python3
"""report.py -- the table of the benchmark suite (tests/bench/run.sh).

Reads the JSON lines of a results file (one measurement per line: system, scenario,
metric, value, rep, and for some peers a "mode"), prints the median of each measurement
over its repetitions, the ratios of tern to each peer for the same scenario and metric,
tern's fraction of the Redis ceiling, and the issue's targets met or missed.

Usage: tests/bench/report.py results.json [--markdown]
"""
import json
import statistics
import sys

# Targets of the issue: (scenario, metric, test, text).
TARGETS = [
    ("a-api", "jobs_per_s", lambda v: v >= 1.5 * 14245, ">= 1.5 x BullMQ's 14,245 (21,368)"),
    ("a-api", "jobs_per_s", lambda v: v >= 10 * 1059, ">= 10 x node-workflow's 1,059 (10,590)"),
    ("b", "steps_per_s", lambda v: v >= 3 * 8167, ">= 3 x 8,167 (24,501)"),
    ("c", "p50_ms", lambda v: v < 1, "< 1 ms"),
    ("c", "p99_ms", lambda v: v < 3, "< 3 ms"),
    ("d", "seconds", lambda v: v < 7, "< 7 s"),
    ("d", "rss_mb", lambda v: v < 100, "< 100 MB"),
]


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                o = json.loads(line)
            except ValueError:
                continue
            system = o.get("system", "?")
            if o.get("mode"):
                system = "%s (%s)" % (system, o["mode"])
            key = (system, o.get("scenario", "?"), o.get("metric", "?"))
            rows.setdefault(key, []).append(float(o["value"]))
    return {k: (statistics.median(v), v) for k, v in rows.items()}


def fmt(v):
    if abs(v) >= 100:
        return "{:,.0f}".format(v)
    return "{:.3g}".format(v)


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    med = load(sys.argv[1])
    md = "--markdown" in sys.argv
    line = (lambda *c: print("| " + " | ".join(c) + " |")) if md else (
        lambda *c: print("  ".join(str(x).ljust(w) for x, w in zip(c, (20, 14, 14, 14, 40)))))
    line("system", "scenario", "metric", "median", "reps")
    if md:
        line("---", "---", "---", "---:", "---")
    for (system, scen, metric), (m, vals) in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        line(system, scen, metric, fmt(m), ", ".join(fmt(v) for v in vals))

    print()
    print("ratios tern / peer (same scenario and metric; for latency, seconds and memory lower is better):")
    for (system, scen, metric), (m, _) in sorted(med.items()):
        if system != "tern":
            continue
        for (s2, sc2, me2), (m2, _) in sorted(med.items()):
            if s2 in ("tern", "redis") or sc2 != scen or me2 != metric or m2 == 0:
                continue
            print("  %-8s %-12s tern %s / %s %s = %.2f" % (scen, metric, fmt(m), s2, fmt(m2), m / m2))

    print()
    print("against the baseline in the same run:")
    for p in ("1", "16"):
        ceil = med.get(("redis", "g-step-commit-p" + p, "ops_per_s"))
        if ceil is None:
            continue
        for scen, metric in (("a-bulk", "jobs_per_s"), ("a-api", "jobs_per_s"), ("b", "steps_per_s")):
            v = med.get(("tern", scen, metric))
            if v is not None:
                print("  %-8s %-12s %s = %.1f%% of Redis's step-commit script rate %s (pipeline %s)"
                      % (scen, metric, fmt(v[0]), 100 * v[0] / ceil[0], fmt(ceil[0]), p))
    d = med.get(("tern", "d", "seconds"))
    if d is not None:
        print("  d        seconds      %.2f s = %.2f x the 5 s sleep" % (d[0], d[0] / 5))

    print()
    print("targets of the issue:")
    for scen, metric, ok, text in TARGETS:
        v = med.get(("tern", scen, metric))
        if v is not None:
            print("  %-8s %-12s %s: %s %s" % (scen, metric, fmt(v[0]), "met" if ok(v[0]) else "MISSED", text))
    ceil = med.get(("redis", "g-step-commit-p16", "ops_per_s"))
    b = med.get(("tern", "b", "steps_per_s"))
    if ceil is not None and b is not None:
        ok = b[0] >= 0.5 * ceil[0]
        print("  b        steps_per_s  %s: %s >= 50%% of the Redis ceiling (%s)"
              % (fmt(b[0]), "met" if ok else "MISSED", fmt(0.5 * ceil[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
