#!/bin/sh
# run.sh -- the benchmark suite (docs/PERFORMANCE.md): builds tern in release mode, starts one
# private redis-server (append-only, fsync every second) on a free loopback port, runs
# every tern scenario, redis-benchmark's ceiling and the peers' side
# (tests/bench/peers/run.sh) against the same Redis, one repetition of each in turn,
# REPS times, collects every JSON line into the results file and prints the table of
# medians and ratios (tests/bench/report.py).
#
# Usage: tests/bench/run.sh [-r REPS] [-o results.json] [--only tern|peers]
# Environment: BENCH_QUICK=1 shrinks the job counts (a smoke run, not a measurement).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=3
out="$root/tests/bench/results/results.json"
only=""
while [ $# -gt 0 ]; do
    case "$1" in
    -r) reps="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: $0 [-r REPS] [-o results.json] [--only tern|peers]" >&2; exit 2 ;;
    esac
done
mkdir -p "$(dirname "$out")"
: >"$out"

# The release build (-O3; warnings are errors there too) and one private Redis.
. "$here/lib.sh"
bench_build "$root"
bench_redis_start tern-bench

# Empties DB 0 (tern's scenarios' data; the peers use DBs 1 and 2, redis-benchmark 3).
quiet_db0() {
    redis-cli -p "$port" -n 0 flushdb >/dev/null
}

# Keeps only the measurement lines of a command's output (and shows them).
collect() {
    awk -v out="$out" '/^\{"system"/ { print; print >>out; fflush(); next }
        /ERROR|FAILED/ { print >"/dev/stderr" }'
}
n_a=20000 n_b=5000 n_c=1000 n_e=1000 n_f=20000 n_d=10000
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    n_a=2000 n_b=500 n_c=200 n_e=200 n_f=2000 n_d=1000
fi
ulimit -n 65536 2>/dev/null || true

# One repetition of tern's scenarios, then of Redis's ceiling, then of the peers, in
# turn, REPS times: the machine is shared and its speed drifts over minutes, and a
# drift then falls on every system alike instead of on whichever ran last. (a), whose
# target is closest to what is measured, goes first and in pairs: tern's a-api then
# BullMQ's, tern's a-bulk then BullMQ's, each pair a few seconds apart, the order of
# each pair swapped every time, so that a drift within minutes, or within a repetition,
# favours neither; and A_PAIRS times per repetition (numbered 1, 2, ... across the
# run): each system's rate moves by a sixth between runs a minute apart here, and a
# median of more runs moves less.
sha=$(redis-cli -p "$port" script load "$(cat "$here/g_step_commit.lua")")
# A 200-byte argument like a step event (no commas: they would split the CSV).
ev=$(printf '%0200d' 0)
a_pairs=${A_PAIRS:-2}
tern_a() {
    [ "$only" != peers ] || return 0
    timeout 600 "$build/tests/bench/bench_tern" "$1" "$url" "$n_a" "$2" 2>"$tmp/bench.err" | collect
}
bullmq_a() {
    [ "$only" != tern ] && [ -x "$here/peers/run.sh" ] || return 0
    "$here/peers/run.sh" --redis "$url" --reps 1 --first-rep "$2" --systems bullmq \
        --bullmq-scenarios "$1" | collect
}
rep=1
while [ "$rep" -le "$reps" ]; do
    k=1
    while [ "$k" -le "$a_pairs" ]; do
        a_rep=$(((rep - 1) * a_pairs + k))
        echo "rep $rep of $reps: (a) in pairs, run $a_rep" >&2
        for s in a-api a-bulk; do
            if [ $((a_rep % 2)) = 1 ]; then
                tern_a "$s" "$a_rep"
                bullmq_a "$s" "$a_rep"
            else
                bullmq_a "$s" "$a_rep"
                tern_a "$s" "$a_rep"
            fi
        done
        k=$((k + 1))
    done
    if [ "$only" != peers ]; then
        echo "tern rep $rep of $reps" >&2
        for s in b:$n_b c:$n_c e:$n_e f-create:$n_f f-read:$n_f; do
            # Memory is measured on a quiet Redis: the jobs of earlier scenarios (tern's
            # DB 0 only) would otherwise give memory back while it is measured, as their
            # streams expire (a succeeded job keeps its own for 60 s).
            [ "${s%%:*}" = e ] && quiet_db0
            timeout 600 "$build/tests/bench/bench_tern" "${s%%:*}" "$url" "${s#*:}" "$rep" \
                2>"$tmp/bench.err" | collect
        done
        timeout 600 "$build/tests/bench/bench_sleepers" "$n_d" 5000 "$url" "$rep" \
            2>"$tmp/bench.err" | collect

        # The ceiling: redis-benchmark on the Redis work of one step commit (a Lua
        # script like step_commit.lua), unpipelined and with 16 in flight per
        # connection, in a DB of its own (3) that is flushed afterwards.
        for p in 1 16; do
            rps=$(redis-benchmark -p "$port" --dbnum 3 -c 50 -n 200000 -r 100000 -P "$p" --csv \
                evalsha "$sha" 1 'bench:g:__rand_int__' "$ev" 4 | tail -n 1 | cut -d, -f2 | tr -d '"')
            echo "{\"system\": \"redis\", \"scenario\": \"g-step-commit-p$p\", \"metric\": \"ops_per_s\", \"value\": $rps, \"rep\": $rep}" | collect
        done
        rps=$(redis-benchmark -p "$port" --dbnum 3 -c 50 -n 200000 -P 1 --csv -t ping_mbulk | tail -n 1 | cut -d, -f2 | tr -d '"')
        echo "{\"system\": \"redis\", \"scenario\": \"g-ping\", \"metric\": \"ops_per_s\", \"value\": $rps, \"rep\": $rep}" | collect
        redis-cli -p "$port" -n 3 flushdb >/dev/null
    fi
    if [ "$only" != tern ] && [ -x "$here/peers/run.sh" ]; then
        quiet_db0 # the same for the peers' memory figures
        "$here/peers/run.sh" --redis "$url" --reps 1 --first-rep "$rep" \
            --bullmq-scenarios b,c | collect
    fi
    rep=$((rep + 1))
done

python3 "$here/report.py" "$out"
