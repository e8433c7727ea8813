#!/usr/bin/env python3
"""report.py -- the tables of the benchmark suite (tests/bench/run.sh, tests/bench/scale.sh).

Reads the JSON lines of a results file (one measurement per line: system, scenario,
metric, value, rep, for some peers a "mode", for the scaling study an "x") and prints
the median of each measurement over its repetitions, the ratios of tern to each peer,
tern's fraction of the Redis ceiling, and each target met or missed. Every target that
compares with a peer or with Redis uses that figure as measured in the same results
file; when the file lacks it, the target says so instead of falling back to a constant.
Lines with an "x" (tests/bench/scale.sh) get a table of their own: per dimension, the
median at each point and its ratio to the dimension's first point.

Usage: tests/bench/report.py results.json [--markdown]
  --markdown: the comparison table (scenario, metric, tern, BullMQ, node-workflow,
  ratios, target) and the scaling summary (a row per point), as Markdown for docs/PERFORMANCE.md;
  without it, every median, ratio and target, and the scaling tables per dimension.
"""
import json
import signal
import statistics
import sys

TERN, BULLMQ, NWF, REDIS = "tern", "bullmq", "node-workflow", "redis"


def is_bulk(mode):
    return "bulk" in (mode or "").lower()


# The targets. "peer": tern's median against `factor` x the peer's same-run median for
# the same scenario and metric, over the peer's modes that `modes` accepts, taking its
# best (the highest rate, or the lowest bytes when `op` is "<="). "redis": against
# `factor` x a Redis-alone figure of the same run. "abs": against a constant (latency,
# time and memory targets have no peer term).
TARGETS = [
    # 1-step jobs over each system's API: BullMQ's library call, node-workflow's HTTP.
    dict(scen="a-api", metric="jobs_per_s", kind="peer", peer=BULLMQ, factor=1.5, op=">=",
         modes=lambda m: not is_bulk(m), what="BullMQ's library figure (queue.add)"),
    dict(scen="a-api", metric="jobs_per_s", kind="peer", peer=NWF, factor=10, op=">=",
         modes=lambda m: "http" in (m or "").lower(), what="node-workflow's best HTTP mode"),
    # The same through each system's bulk path.
    dict(scen="a-bulk", metric="jobs_per_s", kind="peer", peer=BULLMQ, factor=1.5, op=">=",
         modes=is_bulk, what="BullMQ's bulk figure (addBulk)"),
    dict(scen="a-bulk", metric="jobs_per_s", kind="peer", peer=NWF, factor=10, op=">=",
         modes=lambda m: True, what="node-workflow's best bulk figure"),
    # 10-step jobs.
    dict(scen="b", metric="steps_per_s", kind="peer", peer=BULLMQ, factor=3, op=">=",
         modes=lambda m: True, what="BullMQ's FlowProducer chain"),
    dict(scen="b", metric="steps_per_s", kind="redis", ref=("g-step-commit-p1", "ops_per_s"),
         factor=0.5, op=">=", what="the Redis ceiling (step-commit script, unpipelined)"),
    # Latency, the sleepers and memory.
    dict(scen="c", metric="p50_ms", kind="abs", limit=1, op="<", unit="ms"),
    dict(scen="c", metric="p99_ms", kind="abs", limit=3, op="<", unit="ms"),
    dict(scen="d", metric="seconds", kind="abs", limit=7, op="<", unit="s"),
    dict(scen="d", metric="rss_mb", kind="abs", limit=100, op="<", unit="MB"),
    dict(scen="e", metric="bytes_per_job", kind="peer", peer=NWF, factor=0.5, op="<=",
         modes=lambda m: True, what="node-workflow's lowest mode"),
]

# The rows of the comparison table, in order.
ROWS = [("a-api", "jobs_per_s"), ("a-api", "redis_us_per_job"), ("a-bulk", "jobs_per_s"),
        ("a-bulk", "redis_us_per_job"), ("b", "jobs_per_s"), ("b", "steps_per_s"),
        ("b", "redis_us_per_job"), ("c", "p50_ms"), ("c", "p99_ms"), ("d", "seconds"),
        ("d", "rss_mb"), ("e", "bytes_per_job"), ("f-create", "req_per_s"),
        ("f-read", "req_per_s")]

LOWER_IS_BETTER = ("p50_ms", "p99_ms", "seconds", "rss_mb", "bytes_per_job", "redis_us_per_job")

OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}


def load(path):
    """Returns (medians, scale): medians maps (system, mode, scenario, metric) to
    (median, values); scale maps (scenario, metric, x) to (median, values)."""
    rows, scale, by_rep = {}, {}, {}
    shapes.clear()
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                o = json.loads(line)
                v = float(o["value"])
            except (ValueError, KeyError, TypeError):
                continue
            if o.get("x") is not None:
                key = (o.get("scenario", "?"), o.get("metric", "?"), float(o["x"]))
                scale.setdefault(key, []).append(v)
                by_rep.setdefault(key, {})[o.get("rep")] = v
                for f in SHAPE:
                    if f in o:
                        shapes.setdefault((key[0], f), set()).add(o[f])
                continue
            key = (o.get("system", "?"), o.get("mode") or "", o.get("scenario", "?"),
                   o.get("metric", "?"))
            rows.setdefault(key, []).append(v)
    med = {k: (statistics.median(v), v) for k, v in rows.items()}
    # CPU time per job, from each repetition's share of the wall time and its rate: what
    # one job costs Redis, the ternds and the submitting client.
    for (scen, metric, x), reps in list(by_rep.items()):
        if not metric.endswith("_cpu_pct"):
            continue
        rate = by_rep.get((scen, "jobs_per_s", x), {})
        vals = [pct / 100 / rate[r] * 1e6 for r, pct in reps.items() if rate.get(r)]
        if vals:
            scale[(scen, metric.replace("_cpu_pct", "_cpu_us_per_job"), x)] = vals
    return med, {k: (statistics.median(v), v) for k, v in scale.items()}


def fmt(v):
    if abs(v) >= 100:
        return "{:,.0f}".format(v)
    return "{:.3g}".format(v)


def label(system, mode):
    return "%s (%s)" % (system, mode) if mode else system


def tern(med, scen, metric):
    v = med.get((TERN, "", scen, metric))
    return v[0] if v is not None else None


def peer_best(med, system, scen, metric, accept=lambda m: True):
    """The peer's best median over its accepted modes: (value, mode), or None."""
    lower = metric in LOWER_IS_BETTER
    best = None
    for (s, mode, sc, me), (m, _) in med.items():
        if s == system and sc == scen and me == metric and accept(mode):
            if best is None or (m < best[0] if lower else m > best[0]):
                best = (m, mode)
    return best


def judge(med, t):
    """One target: (tern value or None, verdict text, met True/False/None)."""
    v = tern(med, t["scen"], t["metric"])
    if t["kind"] == "abs":
        text = "%s %s %s" % (t["op"], fmt(t["limit"]), t["unit"])
        if v is None:
            return None, "no tern figure (%s)" % text, None
        ok = OPS[t["op"]](v, t["limit"])
        return v, "%s: %s" % ("met" if ok else "MISSED", text), ok
    if t["kind"] == "redis":
        ref = med.get((REDIS, "", t["ref"][0], t["ref"][1]))
        text = "%s %g x %s" % (t["op"], t["factor"], t["what"])
        if ref is None:
            return v, "%s: no same-run figure" % text, None
        goal = t["factor"] * ref[0]
    else:
        ref = peer_best(med, t["peer"], t["scen"], t["metric"], t["modes"])
        text = "%s %g x %s" % (t["op"], t["factor"], t["what"])
        if ref is None:
            return v, "%s: no same-run figure" % text, None
        goal = t["factor"] * ref[0]
    if v is None:
        return None, "%s (%s): no tern figure" % (text, fmt(goal)), None
    ok = OPS[t["op"]](v, goal)
    who = {BULLMQ: "BullMQ", NWF: "node-workflow"}.get(t.get("peer"), "Redis")
    ratio = "tern = %.2f x %s" % (v / ref[0], who) if ref[0] else "n/a"
    return v, "%s: %s = %s (%s)" % ("met" if ok else "MISSED", text, fmt(goal), ratio), ok


def print_plain(med):
    line = lambda *c: print("  ".join(str(x).ljust(w) for x, w in zip(c, (16, 18, 14, 14, 30))))
    line("system", "scenario", "metric", "median", "reps")
    for (system, mode, scen, metric), (m, vals) in sorted(
            med.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1], kv[0][3])):
        line(system, scen, metric, fmt(m), ", ".join(fmt(v) for v in vals))
        if mode:
            print("    mode: " + mode)

    print()
    print("ratios tern / peer (same scenario and metric; for latency, seconds and memory lower is better):")
    if not any(k[0] not in (TERN, REDIS) for k in med):
        print("  no peer figures in this file")
    for (system, mode, scen, metric), (m, _) in sorted(med.items()):
        if system != TERN:
            continue
        for (s2, mo2, sc2, me2), (m2, _) in sorted(med.items()):
            if s2 in (TERN, REDIS) or sc2 != scen or me2 != metric or m2 == 0:
                continue
            print("  %-8s %-14s tern %s / %s %s = %.2f"
                  % (scen, metric, fmt(m), label(s2, mo2), fmt(m2), m / m2))

    print()
    print("against the Redis baseline in the same run:")
    for p in ("1", "16"):
        ceil = med.get((REDIS, "", "g-step-commit-p" + p, "ops_per_s"))
        if ceil is None:
            print("  no same-run figure for the step-commit script (pipeline %s)" % p)
            continue
        for scen, metric in (("a-bulk", "jobs_per_s"), ("a-api", "jobs_per_s"), ("b", "steps_per_s")):
            v = tern(med, scen, metric)
            if v is not None:
                print("  %-8s %-14s %s = %.1f%% of Redis's step-commit script rate %s (pipeline %s)"
                      % (scen, metric, fmt(v), 100 * v / ceil[0], fmt(ceil[0]), p))
    d = tern(med, "d", "seconds")
    if d is not None:
        print("  d        seconds        %.2f s = %.2f x the 5 s sleep" % (d, d / 5))

    print()
    print("targets (peers and Redis as measured in this file):")
    for t in TARGETS:
        v, text, _ = judge(med, t)
        print("  %-8s %-14s %s: %s" % (t["scen"], t["metric"], fmt(v) if v is not None else "-", text))


def print_markdown(med):
    print("| scenario | metric | tern | BullMQ | node-workflow | ratio(s) | target met? |")
    print("|---|---|---:|---:|---:|---|---|")
    for scen, metric in ROWS:
        v = tern(med, scen, metric)
        targets = [t for t in TARGETS if t["scen"] == scen and t["metric"] == metric]
        if v is None and not targets:
            continue
        cells = [scen, metric, fmt(v) if v is not None else "—"]
        ratios = []
        for system, name in ((BULLMQ, "BullMQ"), (NWF, "node-workflow")):
            # The peer figure a target names, else the peer's best mode for the row.
            t = next((t for t in targets if t.get("peer") == system), None)
            best = peer_best(med, system, scen, metric, t["modes"] if t else lambda m: True)
            if best is None:
                cells.append("no same-run figure")
                continue
            cells.append(fmt(best[0]) + (" (%s)" % short_mode(best[1]) if best[1] else ""))
            if v is not None and best[0]:
                ratios.append("%.2f x %s" % (v / best[0], name))
        for t in targets:
            if t["kind"] == "redis":
                ref = med.get((REDIS, "", t["ref"][0], t["ref"][1]))
                if ref is not None and v is not None:
                    ratios.append("%.0f %% of Redis %s" % (100 * v / ref[0], t["ref"][0]))
        cells.append(", ".join(ratios) or "—")
        cells.append("; ".join(judge(med, t)[1] for t in targets) or "—")
        print("| " + " | ".join(cells) + " |")


def short_mode(mode):
    """The distinguishing head of a peer's mode label."""
    m = mode.lower()
    if "do_fork=false" in m:
        return "tasks in process"
    if "do_fork=true" in m:
        return "process per task"
    return mode.split(",")[0]


# ---- the scaling study ------------------------------------------------------------

SCALE_DIMS = [("scale-jobs", "jobs submitted at once"), ("scale-steps", "steps per job"),
              ("scale-params", "params string size"), ("scale-runners", "ternd processes")]
# The shape fields of a scale line, and (scenario, field) -> the values seen.
SHAPE = ("n", "steps", "params_bytes", "runners")
shapes = {}


def fixed_shape(scen):
    """What stayed the same across a dimension's points, e.g. "5,000 jobs, 1 step"."""
    parts = []
    for f in SHAPE:
        vals = shapes.get((scen, f), set())
        if len(vals) != 1:
            continue
        v = float(next(iter(vals)))
        parts.append({"n": lambda: "{:,.0f} jobs".format(v),
                      "steps": lambda: x_label("scale-steps", v),
                      "params_bytes": lambda: "no params" if v == 0 else
                      x_label("scale-params", v) + " params",
                      "runners": lambda: x_label("scale-runners", v)}[f]())
    return ", ".join(parts)
SCALE_METRICS = ["jobs_per_s", "steps_per_s", "bytes_per_job", "rss_mb", "redis_cpu_pct",
                 "ternd_cpu_pct", "client_cpu_pct", "redis_cpu_us_per_job",
                 "ternd_cpu_us_per_job", "client_cpu_us_per_job"]


def x_label(scen, x):
    if scen == "scale-params":
        return "%g KB" % (x / 1024) if x >= 1024 else "%d B" % x
    if scen == "scale-runners":
        return "%d ternd%s" % (x, "" if x == 1 else "s")
    if scen == "scale-steps":
        return "%d step%s" % (x, "" if x == 1 else "s")
    return "{:,.0f} jobs".format(x)


def print_scale(scale, md):
    scens = [d for d in SCALE_DIMS if any(k[0] == d[0] for k in scale)]
    scens += [(s, s) for s in sorted({k[0] for k in scale}) if s not in dict(SCALE_DIMS)]
    for scen, title in scens:
        xs = sorted({k[2] for k in scale if k[0] == scen})
        metrics = [m for m in SCALE_METRICS if any(k[0] == scen and k[1] == m for k in scale)]
        metrics += sorted({k[1] for k in scale if k[0] == scen} - set(SCALE_METRICS))
        fixed = fixed_shape(scen)
        caption = scen + ": " + title + ("; " + fixed if fixed else "")
        head = ["metric"] + [x_label(scen, x) for x in xs]
        if md:
            print("**%s**" % caption)
            print()
            print("| " + " | ".join(head) + " |")
            print("|---" + "|---:" * len(xs) + "|")
        else:
            print()
            print(caption)
            print("  " + "  ".join(h.ljust(w) for h, w in zip(head, [22] + [20] * len(xs))))
        for metric in metrics:
            first = scale.get((scen, metric, xs[0]))
            cells = [metric]
            for i, x in enumerate(xs):
                v = scale.get((scen, metric, x))
                if v is None:
                    cells.append("—")
                elif i == 0 or first is None or first[0] == 0:
                    cells.append(fmt(v[0]))
                else:
                    cells.append("%s (x%.2f)" % (fmt(v[0]), v[0] / first[0]))
            if md:
                print("| " + " | ".join(cells) + " |")
            else:
                print("  " + "  ".join(c.ljust(w) for c, w in zip(cells, [22] + [20] * len(xs))))
        if md:
            print()
    n = {len(v[1]) for v in scale.values()}
    print(("" if md else "\n") + "medians of %s repetitions; (xR): ratio to the first point"
          % "/".join(str(k) for k in sorted(n)))


def print_scale_summary(scale):
    """One Markdown table for docs/PERFORMANCE.md: a row per point, the ratios to the dimension's
    first point in parentheses."""
    print("| dimension | point | jobs/s | steps/s | Redis bytes/job | ternd peak RSS MB "
          "| Redis busy % | CPU µs per job: Redis / ternd / client |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    scens = [d for d, _ in SCALE_DIMS if any(k[0] == d for k in scale)]
    scens += sorted({k[0] for k in scale} - set(scens))
    for scen in scens:
        xs = sorted({k[2] for k in scale if k[0] == scen})
        for i, x in enumerate(xs):
            def cell(metric, ratio=False):
                v = scale.get((scen, metric, x))
                if v is None:
                    return "—"
                first = scale.get((scen, metric, xs[0]))
                if not ratio or i == 0 or first is None or first[0] == 0:
                    return fmt(v[0])
                return "%s (x%.2f)" % (fmt(v[0]), v[0] / first[0])
            cpu = " / ".join(cell(m) for m in ("redis_cpu_us_per_job", "ternd_cpu_us_per_job",
                                               "client_cpu_us_per_job"))
            fixed = fixed_shape(scen)
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                scen + (" (%s)" % fixed if fixed and i == 0 else ""), x_label(scen, x),
                cell("jobs_per_s", True), cell("steps_per_s", True),
                cell("bytes_per_job", True), cell("rss_mb"), cell("redis_cpu_pct"), cpu))
    n = {len(v[1]) for v in scale.values()}
    print()
    print("Medians of %s repetitions; (xR): ratio to the dimension's first point."
          % "/".join(str(k) for k in sorted(n)))


def main():
    # Piped into head and the like: stop quietly when the reader goes away.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print("usage: report.py results.json [--markdown]", file=sys.stderr)
        return 2
    med, scale = load(args[0])
    md = "--markdown" in sys.argv
    if med:
        print_markdown(med) if md else print_plain(med)
    if scale:
        if med:
            print()
        print_scale_summary(scale) if md else print_scale(scale, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
