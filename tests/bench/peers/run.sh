#!/bin/sh
# Runs the peer systems' side of the benchmark suite (node-workflow and BullMQ)
# against a private Redis that the caller started, and prints one JSON line per
# measurement on stdout. Progress goes to stderr.
#
# Usage: tests/bench/peers/run.sh --redis redis://127.0.0.1:PORT --reps N [--first-rep K]
#                                 [--systems bullmq,nodeworkflow] [--bullmq-scenarios LIST]
#                                 [--jobs-a N]
# (--bullmq-scenarios a-api,a-bulk,b,c: BullMQ's scenarios to run, all by default; e comes
# with b; --jobs-a N: BullMQ's jobs per (a) run, 20,000 by default.)
# node-workflow uses Redis DB 1 and BullMQ DB 2; each driver flushes only its
# own DB, and only on a loopback Redis. PEERS_QUICK=1 shrinks the job counts;
# WF_MODES=inproc skips node-workflow's slow fork-per-task mode.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
redis=""
reps=3
first=1
systems=bullmq,nodeworkflow
bullmq_scenarios=""
jobs_a=""
while [ $# -gt 0 ]; do
    case "$1" in
    --redis) redis="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --first-rep) first="$2"; shift 2 ;;
    --systems) systems="$2"; shift 2 ;;
    --bullmq-scenarios) bullmq_scenarios="$2"; shift 2 ;;
    --jobs-a) jobs_a="$2"; shift 2 ;;
    *) echo "usage: $0 --redis redis://127.0.0.1:PORT --reps N [--first-rep K] [--systems LIST] [--bullmq-scenarios LIST]" >&2; exit 2 ;;
    esac
done
[ -n "$redis" ] || { echo "$0: --redis is required" >&2; exit 2; }
# Drop a trailing /DB from the URL: the DB numbers are fixed per system.
redis=$(printf '%s' "$redis" | sed 's#^\(redis://[^/]*\).*#\1#')

# Install the pinned peers (exact versions in package.json) once.
if [ ! -d "$here/node_modules/bullmq" ] || [ ! -d "$here/node_modules/wf-redis-backend" ]; then
    (cd "$here" && npm install --no-audit --no-fund >&2)
fi

quick=""
[ "${PEERS_QUICK:-0}" = 1 ] && quick="--quick"
status=0
scen=""
[ -n "$bullmq_scenarios" ] && scen="--scenarios $bullmq_scenarios"
[ -n "$jobs_a" ] && scen="$scen --jobs-a $jobs_a"
# Each system is bounded in time; a failure of one still lets the other run.
case ",$systems," in
*,bullmq,*)
    timeout 900 node "$here/bullmq.js" --redis "$redis" --db 2 --reps "$reps" --first-rep "$first" \
        $quick $scen || status=1 ;;
esac
case ",$systems," in
*,nodeworkflow,*)
    timeout 1200 node "$here/nodeworkflow.js" --redis "$redis" --db 1 --reps "$reps" \
        --first-rep "$first" $quick || status=1 ;;
esac
exit $status
