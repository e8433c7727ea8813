#!/bin/sh
# The out-of-tree plugin of examples/plugin builds against include/tern/task.h alone,
# exports only its entry point, and runs its workflow end to end in ternd on the
# embedded Redis. Usage: example_plugin.sh SRCDIR TERND TASKSDIR [GREET_SO]; with
# GREET_SO (a greet.so built elsewhere, as installed_plugin.sh does) nothing is built.
set -eu
src=$1 ternd=$2 tasks=$3 greet=${4:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/tern-example-plugin.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -z "$greet" ]; then
    make -s -C "$src/examples/plugin" TERN_INCLUDE="$src/include" OUT="$work/out" >/dev/null
    greet=$work/out/greet.so
fi
mkdir "$work/plugins"
cp "$tasks"/*.so "$greet" "$work/plugins/"
exported=$(nm -D --defined-only "$work/plugins/greet.so" | awk '$2 == "T" {print $3}')
if [ "$exported" != "tern_plugin_entry" ]; then
    echo "FAIL: greet.so exports: $exported" >&2
    exit 1
fi
out=$("$ternd" --data-dir "$work/data" --plugin-dir "$work/plugins" \
    --workflows "$src/examples/plugin" --listen 127.0.0.1:0 --log-level warn \
    --run greet --params '{"name": "example"}')
echo "$out"
echo "$out" | grep -q '"greeting":"hello, example"' || { echo "FAIL: no greeting" >&2; exit 1; }
echo "$out" | grep -q 'succeeded in' || { echo "FAIL: job did not succeed" >&2; exit 1; }
echo "1 passed, 0 failed"
