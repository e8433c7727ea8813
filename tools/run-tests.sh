#!/bin/sh
# Builds tern and runs the whole test suite twice: a normal build, then a build with
# AddressSanitizer and UndefinedBehaviorSanitizer. Integration tests start their own
# redis-server and ternd processes on loopback and stop them by PID.
set -eu
cd "$(dirname "$0")/.."
tools/deps.sh
[ -d build ] || meson setup build >/dev/null
meson test -C build --print-errorlogs --num-processes 2
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3
