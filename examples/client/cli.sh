#!/bin/sh
# The same with the tern CLI: create by workflow name and watch it to the end. The
# exit status is the job's outcome (0 succeeded, 1 failed or canceled).
#   TERN_URL=http://127.0.0.1:8080 examples/client/cli.sh hello who=cli
set -eu
workflow=${1:-hello}
shift || true
args=""
for kv in "$@"; do args="$args -p $kv"; done
# shellcheck disable=SC2086
exec build/cli/tern job create "$workflow" $args --watch
