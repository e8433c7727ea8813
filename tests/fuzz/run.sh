#!/bin/sh
# run.sh -- builds the libFuzzer targets of tests/fuzz with clang and runs each for a
# bounded time, then prints one summary line per target.
#
#   tests/fuzz/run.sh [-t SECONDS] [TARGET ...]     (default: 60 s each, every target)
#
# Targets: workflow, template, job_request, http_route, http_guard, lock_pattern. Builds go
# to build-fuzz/ (the binaries, a working corpus per target that grows across runs, and
# crash artifacts);
# the seed corpus in tests/fuzz/corpus/<target>/ is only read. Exits non-zero when a
# target crashed, leaked or tripped a sanitizer. Needs clang with its libFuzzer
# runtime (Debian: clang, libclang-rt-14-dev) and the -dev packages of jansson,
# libuv, hiredis and libh2o (the headers the engine's headers include).
set -eu

secs=${FUZZ_SECONDS:-60}
while getopts t: opt; do
    case $opt in
    t) secs=$OPTARG ;;
    *) echo "usage: $0 [-t SECONDS] [TARGET ...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

top=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-$top/build-fuzz}
cc=${CC_FUZZ:-clang}
targets=${*:-workflow template job_request http_route http_guard lock_pattern}
mkdir -p "$out"

# The engine sources each target compiles directly.
sources() {
    case $1 in
    workflow) echo model/workflow.c model/template.c model/retry_policy.c base/describe.c ;;
    template) echo model/template.c ;;
    job_request) echo model/job_request.c base/iso8601.c ;;
    http_route) echo http/http_route.c ;;
    lock_pattern) echo model/lock_pattern.c ;;
    http_guard) echo http/http_guard.c ;;
    *) echo "unknown target $1" >&2; return 1 ;;
    esac
}

cflags="-std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
-fno-omit-frame-pointer -I$top/engine -I$top/include \
$(pkg-config --cflags jansson libuv hiredis libh2o) -DH2O_USE_LIBUV=1"
libs="$(pkg-config --libs jansson) -lm"

status=0
summary=""
for t in $targets; do
    srcs=""
    # Every target also gets base's allocation, errors, clocks and identifiers.
    for s in $(sources "$t") base/alloc.c base/error.c base/clock.c base/ident.c base/decimal.c; do srcs="$srcs $top/engine/$s"; done
    bin="$out/fuzz_$t"
    # shellcheck disable=SC2086
    $cc $cflags -o "$bin" "$top/tests/fuzz/fuzz_$t.c" $srcs $libs
    work="$out/corpus/$t"
    art="$out/artifacts/$t"
    rm -rf "$art"
    mkdir -p "$work" "$art"
    log="$out/fuzz_$t.log"
    rc=0
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$art/" "$work" "$top/tests/fuzz/corpus/$t" \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    corp=$(grep -o 'corp: [0-9]*' "$log" | tail -n 1 | sed 's/corp: //')
    crashes=$(find "$art" -type f | wc -l)
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] || grep -q 'ERROR: \(Address\|Leak\|Undefined\)Sanitizer\|runtime error:' "$log"; then
        status=1
        [ "$crashes" -eq 0 ] && crashes=1
        echo "fuzz_$t: FAILED (exit $rc); see $log and $art" >&2
    fi
    line=$(printf '%-12s %4ss  %10s execs  %7s exec/s  corpus %5s  crashes %s' "$t" "$secs" \
        "${execs:-?}" "${rate:-?}" "${corp:-?}" "$crashes")
    echo "$line"
    summary="$summary$line
"
done
echo "---- summary ----"
printf '%s' "$summary"
exit $status
