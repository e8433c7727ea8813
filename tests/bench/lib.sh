# lib.sh -- shared by run.sh and scale.sh (sourced, not run): the release build and one
# private redis-server for a benchmark run.

# bench_build ROOT: builds tern in release mode in ROOT/build-release; sets $build.
bench_build() {
    build="$1/build-release"
    if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build" "$1" --buildtype=release -Dwerror=true >&2
    fi
    meson configure "$build" -Dwerror=true >&2 # also for a tree set up without it
    ninja -C "$build" >&2
    export TERN_BIN="$build/engine/ternd" TERN_TASKS="$build/tasks"
    export TERN_ITEST="$build/tests/integration/plugin/itest.so" CMOCKA_MESSAGE_OUTPUT=STDOUT
}

# bench_redis_start NAME: starts one redis-server on a free loopback port with the
# persistence of production (append-only, fsync every second), in a temporary
# directory /tmp/NAME.XXXXXX; sets $tmp, $port, $redis_pid and $url, and stops it by
# its PID (and removes the directory) when the shell exits.
bench_redis_start() {
    tmp=$(mktemp -d "/tmp/$1.XXXXXX")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --bind 127.0.0.1 --port "$port" --dir "$tmp" --appendonly yes \
        --appendfsync everysec --save '' --logfile "$tmp/redis.log" &
    redis_pid=$!
    trap bench_redis_stop EXIT INT TERM
    url="redis://127.0.0.1:$port"
    i=0
    until redis-cli -p "$port" ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 100 ] || { echo "redis-server did not start" >&2; exit 1; }
        sleep 0.1
    done
    echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') pid $redis_pid at $url" >&2
}

bench_redis_stop() {
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
