#!/bin/sh
# Installs what switchyard needs to build and test on Debian 12. Run it as
# root (a container's root shell has no sudo), or as a user who has sudo: it
# then asks sudo to run it again as root.
set -eu
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "$0: apt-get needs root, but this is uid $(id -u) and there is no sudo: run it as root" >&2
        exit 1
    }
    exec sudo sh "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libinih-dev libjansson-dev libpcre2-dev libnghttp2-dev libssl-dev \
    python3 python3-numpy python3-jsonschema python3-venv curl nghttp2-client \
    libopenmpi-dev openmpi-bin \
    clang libclang-rt-14-dev
