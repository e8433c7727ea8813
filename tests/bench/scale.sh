#!/bin/sh
# scale.sh -- how tern's costs grow (docs/PERFORMANCE.md): builds tern in release mode, starts
# one private redis-server (append-only, fsync every second, like run.sh) on a free
# loopback port and runs tests/bench/bench_tern's scale-* scenarios at three points per
# dimension, REPS times each, varying one thing at a time from 1-step no-op jobs without
# params on one ternd:
#   scale-jobs     jobs submitted at once: 2,000 / 20,000 / 100,000
#   scale-steps    steps per job: 1 / 10 / 50 (5,000 jobs)
#   scale-params   one string param of 100 B / 10 KB / 100 KB (5,000 jobs)
#   scale-runners  ternd processes: 1 / 2 / 4 (20,000 jobs; the first also serves the API)
# The JSON lines go to the results file; the table of medians and ratios to each
# dimension's first point is printed at the end (tests/bench/report.py).
#
# Usage: tests/bench/scale.sh [-r REPS] [-o scale.json]
# Environment: SCALE_QUICK=1 shrinks the job counts ten times (a smoke run, not a
# measurement).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=3
out="$root/tests/bench/results/scale.json"
while [ $# -gt 0 ]; do
    case "$1" in
    -r) reps="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    *) echo "usage: $0 [-r REPS] [-o scale.json]" >&2; exit 2 ;;
    esac
done
mkdir -p "$(dirname "$out")"
: >"$out"

. "$here/lib.sh"
bench_build "$root"
bench_redis_start tern-scale

div=1
[ "${SCALE_QUICK:-0}" = 1 ] && div=10
failures=0

# run SCENARIO N STEPS PARAMS_BYTES RUNNERS: one bench_tern call (bounded by timeout),
# its measurement lines appended to the results file. Afterwards this script's own
# Redis is emptied, so that every run starts from the same empty dataset and the
# append-only file's rewrites stay small (a rewrite forks and competes for the 2 cores).
run() {
    jobs=$(($2 / div))
    echo "rep $rep: $1 jobs=$jobs steps=$3 params_bytes=$4 runners=$5" >&2
    if BENCH_STEPS="$3" BENCH_PARAMS_BYTES="$4" BENCH_RUNNERS="$5" \
        timeout 300 "$build/tests/bench/bench_tern" "$1" "$url" "$jobs" "$rep" \
        >"$tmp/bench.out" 2>"$tmp/bench.err"; then
        grep '^{"system"' "$tmp/bench.out" | tee -a "$out" >&2
    else
        failures=$((failures + 1))
        echo "FAILED: $1 jobs=$jobs steps=$3 params_bytes=$4 runners=$5" >&2
        grep -E 'ERROR|error|FAILED' "$tmp/bench.out" "$tmp/bench.err" >&2 || true
    fi
    redis-cli -p "$port" flushall >/dev/null
}

# Anything else running on the machine skews every figure: the load is shown at both ends.
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
start=$(date +%s)
rep=1
# Repetitions outermost, so that a slow spell of the machine spreads over all points
# instead of landing on one.
while [ "$rep" -le "$reps" ]; do
    for n in 2000 20000 100000; do run scale-jobs "$n" 1 0 1; done
    for s in 1 10 50; do run scale-steps 5000 "$s" 0 1; done
    for p in 100 10240 102400; do run scale-params 5000 1 "$p" 1; done
    for r in 1 2 4; do run scale-runners 20000 1 0 "$r"; done
    rep=$((rep + 1))
done
echo "scale.sh: $(($(date +%s) - start)) s, $failures failed runs; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 "$here/report.py" "$out"
[ "$failures" -eq 0 ]
