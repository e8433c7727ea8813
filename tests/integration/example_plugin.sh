#!/bin/sh
# The out-of-tree plugin of examples/plugin builds against include/tern/task.h alone,
# exports only its entry point, and runs its workflow end to end in ternd on the
# embedded Redis, and the greeting it kept is read back through the plugin's views.
# Usage: example_plugin.sh SRCDIR TERND TASKSDIR [GREET_SO]; with
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

# The greeting the job kept is served by the plugin's views, from the same data
# directory: a ternd with the API only, on a port it chose (its "ready" line names it).
"$ternd" --data-dir "$work/data" --plugin-dir "$work/plugins" --role api \
    --listen 127.0.0.1:0 --log-level info >"$work/api.log" 2>&1 &
api=$!
trap 'if [ -n "$api" ]; then kill "$api" 2>/dev/null || :; wait "$api" 2>/dev/null || :; fi
    rm -rf "$work"' EXIT
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*"api_port":\([1-9][0-9]*\).*/\1/p' "$work/api.log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$api" 2>/dev/null || { cat "$work/api.log" >&2; echo "FAIL: ternd ended" >&2; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { cat "$work/api.log" >&2; echo "FAIL: ternd not ready in 10 s" >&2; exit 1; }
list=$(curl -sS --max-time 10 "http://127.0.0.1:$port/greet/greetings")
echo "$list"
[ "$list" = '[{"greeting":"hello, example","name":"example"}]' ] ||
    { echo "FAIL: GET /greet/greetings" >&2; exit 1; }
one=$(curl -sS --max-time 10 "http://127.0.0.1:$port/greet/greetings/example")
[ "$one" = '{"greeting":"hello, example","name":"example"}' ] ||
    { echo "FAIL: GET /greet/greetings/example: $one" >&2; exit 1; }
code=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' \
    "http://127.0.0.1:$port/greet/greetings/nobody")
[ "$code" = 404 ] || { echo "FAIL: GET /greet/greetings/nobody: $code" >&2; exit 1; }
kill "$api"
wait "$api" || :
api=
echo "1 passed, 0 failed"
