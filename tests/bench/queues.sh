#!/bin/sh
# queues.sh -- what a step queue costs: the q-same and q-hop scenarios of bench_tern
# (N 2-step no-op jobs on two ternds; in q-hop the second step names a queue only the
# second ternd serves), one after the other, the order swapped every repetition so a
# drift of the shared machine favours neither, then the medians and the ratio.
#
# Usage: tests/bench/queues.sh [-r REPS] [-n JOBS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=5
n=5000
while [ $# -gt 0 ]; do
    case "$1" in
    -r) reps="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    *) echo "usage: $0 [-r REPS] [-n JOBS]" >&2; exit 2 ;;
    esac
done
. "$here/lib.sh"
bench_build "$root"
bench_redis_start tern-bench-queues
out="$tmp/lines.json"
: >"$out"
rep=1
while [ "$rep" -le "$reps" ]; do
    if [ $((rep % 2)) = 1 ]; then order="q-same q-hop"; else order="q-hop q-same"; fi
    for s in $order; do
        redis-cli -p "$port" flushdb >/dev/null
        timeout 600 "$build/tests/bench/bench_tern" "$s" "$url" "$n" "$rep" 2>"$tmp/bench.err" |
            awk -v out="$out" '/^\{"system"/ { print; print >>out; fflush() }'
    done
    rep=$((rep + 1))
done
python3 - "$out" <<'PY'
import json, statistics, sys
by = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    by.setdefault((d['scenario'], d['metric']), []).append(d['value'])
for metric in ('jobs_per_s', 'redis_us_per_job', 'evalsha_calls_per_job'):
    same = statistics.median(by.get(('q-same', metric), [float('nan')]))
    hop = statistics.median(by.get(('q-hop', metric), [float('nan')]))
    print('%-22s q-same %10.2f  q-hop %10.2f  hop/same %.3f' % (metric, same, hop, hop / same))
PY
