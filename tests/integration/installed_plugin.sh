#!/bin/sh
# A plugin author's build against an installed tern: `meson install --destdir` of this
# build into a temporary root, examples/plugin built by its Makefile with nothing but
# `pkg-config --cflags tern-task` (tern-task.pc from that root: no Libs, plugindir
# naming the installed tasks), and the result run by the installed ternd with the
# installed plugins, through example_plugin.sh. Usage: installed_plugin.sh SRCDIR BUILDDIR
set -eu
src=$1 build=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/tern-installed-plugin.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

meson install -C "$build" --no-rebuild --quiet --destdir "$root" >/dev/null
pc=$(find "$root" -name tern-task.pc)
[ -n "$pc" ] || fail "meson install put no tern-task.pc under $root"
ternd=$(find "$root" -type f -name ternd -perm -u+x)
[ -n "$ternd" ] || fail "meson install put no ternd under $root"

# The .pc names the installed prefix; the sysroot maps it into the temporary root, as
# for any staged install. The author's own environment chooses nothing else.
export PKG_CONFIG_PATH="${pc%/*}" PKG_CONFIG_SYSROOT_DIR="$root"
unset TERN_INCLUDE
libs=$(pkg-config --libs tern-task | tr -d ' ')
[ -z "$libs" ] || fail "pkg-config --libs tern-task: \"$libs\", expected nothing"
plugindir=$(pkg-config --variable=plugindir tern-task)
case $plugindir in
"$root"/*) ;;                     # pkgconf maps variables into the sysroot too
*) plugindir=$root$plugindir ;; # pkg-config maps only -I and -L
esac
[ -f "$plugindir/core.so" ] || fail "plugindir $plugindir holds no core.so"

# A copy of the example, so nothing of the source tree is in reach but greet.c.
cp -R "$src/examples/plugin" "$work/plugin"
make -s -C "$work/plugin" OUT="$work/out" >/dev/null
[ -f "$work/out/greet.so" ] || fail "make built no greet.so"

sh "${0%/*}/example_plugin.sh" "$src" "$ternd" "$plugindir" "$work/out/greet.so"
