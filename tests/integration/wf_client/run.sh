#!/bin/sh
# run.sh -- Joyent's wf-client against a real ternd: installs wf-client from the npm
# registry into the build directory, starts redis-server (on a unix socket in a
# private directory) and ternd (on a free loopback port), runs wf_client_test.js, and
# stops both by PID.
#
# Usage (meson runs it): run.sh SOURCE_DIR BUILD_DIR, with TERN_BIN and TERN_TASKS set.
# Exit status: 0 passed, 1 failed (a failing npm install included), 77 skipped, which
# happens only when node or npm is not installed.
set -u

src=$1
build=$2

missing=""
command -v node >/dev/null 2>&1 || missing="$missing node"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    echo "SKIP: the wf-client test needs Node.js; not installed:$missing"
    exit 77
fi
for v in TERN_BIN TERN_TASKS; do
    eval "val=\${$v:-}"
    if [ -z "$val" ]; then
        echo "FAIL: $v is not set (run this test through meson)"
        exit 1
    fi
done

# wf-client, pinned to the release this test was written against, installed once per
# build directory (npm makes later runs cheap).
modules="$build/wf_client_modules"
mkdir -p "$modules"
cat > "$modules/package.json" <<'JSON'
{
  "name": "tern-wf-client-test",
  "private": true,
  "description": "wf-client for tern's integration test; written by run.sh",
  "dependencies": { "wf-client": "0.3.1" }
}
JSON
if ! (cd "$modules" && npm install --no-audit --no-fund --loglevel=error >npm.log 2>&1); then
    echo "FAIL: npm install wf-client failed:"
    cat "$modules/npm.log"
    exit 1
fi

work=$(mktemp -d /tmp/tern-wfc.XXXXXX)
redis_pid=""
ternd_pid=""

# Stops a process we started: SIGTERM, then SIGKILL after `secs` seconds.
stop() {
    pid=$1
    secs=$2
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $((secs * 20)) ]; do
        sleep 0.05
        i=$((i + 1))
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

cleanup() {
    stop "$ternd_pid" 15
    stop "$redis_pid" 10
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

redis-server --port 0 --unixsocket "$work/redis.sock" --unixsocketperm 700 --dir "$work" \
    --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
redis_pid=$!

"$TERN_BIN" --redis "unix://$work/redis.sock" --plugin-dir "$TERN_TASKS" \
    --listen 127.0.0.1:0 --runner-id wfc --lease-ms 2000 --heartbeat-ms 500 \
    --shutdown-grace-ms 5000 >"$work/ternd.log" 2>&1 &
ternd_pid=$!

# ternd logs one line when it serves; it carries the API's port.
port=""
i=0
while [ -z "$port" ] && [ "$i" -lt 300 ]; do
    if ! kill -0 "$ternd_pid" 2>/dev/null; then
        echo "FAIL: ternd exited before it was ready:"
        cat "$work/ternd.log"
        exit 1
    fi
    port=$(grep 'ready to serve' "$work/ternd.log" 2>/dev/null |
        sed -n 's/.*"api_port":\([0-9][0-9]*\).*/\1/p' | head -n 1)
    [ -n "$port" ] || sleep 0.05
    i=$((i + 1))
done
if [ -z "$port" ]; then
    echo "FAIL: ternd not ready after 15 s:"
    cat "$work/ternd.log"
    exit 1
fi

NODE_PATH="$modules/node_modules" node "$src/wf_client_test.js" "http://127.0.0.1:$port" \
    "$src/workflows"
rc=$?

stop "$ternd_pid" 15
ternd_pid=""
# A sanitizer build reports into ternd's log; a report fails the test.
if grep -q -e 'ERROR: AddressSanitizer' -e 'ERROR: LeakSanitizer' -e 'runtime error:' \
    "$work/ternd.log"; then
    echo "FAIL: sanitizer report in ternd's log:"
    cat "$work/ternd.log"
    rc=1
fi
if [ "$rc" -ne 0 ]; then
    echo "--- ternd log (last 40 lines) ---"
    tail -n 40 "$work/ternd.log"
fi
exit "$rc"
