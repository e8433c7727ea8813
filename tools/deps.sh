#!/bin/sh
# Installs the Debian packages tern builds and tests with, when some are missing.
# As root it runs apt-get itself; otherwise it names what to install and fails.
set -eu
PKGS="build-essential pkg-config meson ninja-build python3 libuv1-dev libjansson-dev \
libhiredis-dev libcurl4-openssl-dev libcmocka-dev libh2o-dev libssl-dev redis-server \
openssl clang-format tzdata"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "tern: missing Debian packages:$missing" >&2
    echo "tern: install them with: sudo apt-get install$missing" >&2
    exit 1
fi
echo "tern: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
