#!/bin/sh
# Installs what switchyard needs to build and test on Debian 12 (run as root).
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
    build-essential autoconf automake libtool pkg-config \
    libinih-dev libjansson-dev libpcre2-dev libnghttp2-dev libssl-dev \
    python3 python3-numpy python3-venv curl nghttp2-client \
    libopenmpi-dev openmpi-bin \
    clang libclang-rt-14-dev
