#!/bin/sh
# Fails when a C file of the project differs from what .clang-format makes of it.
# Skipped (exit 77) when clang-format is not installed.
set -eu
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null 2>&1 || { echo "clang-format not installed: skipped"; exit 77; }
bad=0
for f in $(git ls-files '*.c' '*.h' 2>/dev/null || find engine include tasks tests examples -name '*.[ch]'); do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (run: clang-format -i $f)"
        bad=$((bad + 1))
    fi
done
[ "$bad" -eq 0 ] && echo "formatting: all files follow .clang-format"
[ "$bad" -eq 0 ]
