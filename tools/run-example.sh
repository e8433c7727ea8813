#!/bin/sh
# Builds tern and runs the shipped workflow "hello" end to end on the embedded
# default: ternd starts a private redis-server on a unix socket in a fresh data
# directory, loads workflows/, runs one job, prints each step and the results, and
# stops everything it started. Extra arguments go to ternd (e.g. --run retry-demo).
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
data=$(mktemp -d "${TMPDIR:-/tmp}/tern-example.XXXXXX")
trap 'rm -rf "$data"' EXIT
if [ $# -eq 0 ]; then
    set -- --run hello --params '{"who": "operator"}'
fi
build/engine/ternd --data-dir "$data" --workflows workflows --listen 127.0.0.1:0 --log-level warn "$@"
