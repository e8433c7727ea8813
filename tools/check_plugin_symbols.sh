#!/bin/sh
# Checks that each built plugin keeps the ABI rule: it exports tern_plugin_entry and
# nothing else (tasks/lib's helpers included, which are hidden), and every symbol it
# uses is defined by a library it was linked with (libc, jansson, libuv...), so none
# can be an engine symbol that only ternd's process would provide.
# Usage: check_plugin_symbols.sh PLUGIN.so...
set -eu
bad=0
for so in "$@"; do
    exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVWi]$/ {print $3}' | tr '\n' ' ')
    if [ "$exported" != "tern_plugin_entry " ]; then
        echo "$so: exports \"$exported\", expected only tern_plugin_entry"
        bad=1
    fi
    provided=$(mktemp)
    for lib in $(ldd "$so" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
        nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//'
    done | sort -u >"$provided"
    missing=$(nm -D --undefined-only "$so" | awk '$1 == "U" {print $2}' | sed 's/@.*//' |
        sort -u | comm -23 - "$provided" | tr '\n' ' ')
    rm -f "$provided"
    if [ -n "$missing" ]; then
        echo "$so: uses symbols no linked library defines (engine symbols?): $missing"
        bad=1
    fi
done
[ "$bad" -eq 0 ] && echo "$# plugins: only tern_plugin_entry exported, no engine symbol used"
exit "$bad"
