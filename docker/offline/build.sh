#!/usr/bin/env bash
# Builds the deployment's images from Debian packages, for machines that cannot pull from a
# registry (docs/operations.md, "Building the images offline"); `make images-offline` runs it.
#   base      debootstrap --variant=minbase bookworm + docker import   -> acme-offline/base:bookworm
#   airflow   the project's image (docker/offline/airflow.Dockerfile)  -> acme-offline/airflow:latest
#   services  Postgres 15, Redis 7, Prometheus, statsd-exporter (Debian packages) and a loopback
#             S3 server (moto) in MinIO's place, with an `mc` for minio-init -> acme-offline/<name>
# Steps run in that order; name some to run only those (`build.sh airflow`). Every build uses host
# networking (dockerd runs with --bridge=none): apt and pip reach their registries from the host.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/docker/offline
WORK=${ACME_OFFLINE_WORK_DIR:-/var/tmp/acme-offline}
MIRROR=${ACME_OFFLINE_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
# The wheels the Airflow image takes as they are instead of fetching or building them again.
TORCH_WHEELS=${ACME_TORCH_WHEELS:-/opt/wheels}
LLAMA_WHEELS=${ACME_LLAMA_WHEELS:-$HOME/.cache/acme-wheels/llama-cpp-avx2-noamx}
HOST_PYTHON=${ACME_OFFLINE_PYTHON:-python3}
BASE=acme-offline/base:bookworm
# The host's CA bundle, which pip's registry connection may need (a TLS-inspecting proxy): given to
# the builds' pip only (ARG PIP_CERT), not kept in the images. Git-ignored, like wheels/.
ca_bundle() {
    mkdir -p "$HERE/wheels"
    cp "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$HERE/wheels/build-ca.pem"
}
build() { docker build --network host "$@"; }
step() { printf '== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

base() {
    if docker image inspect "$BASE" >/dev/null 2>&1; then echo "$BASE exists"; return; fi
    command -v debootstrap >/dev/null || "$ROOT/docker/dockerd.sh" install
    step "base: debootstrap bookworm from $MIRROR"
    rm -rf "$WORK/rootfs" && mkdir -p "$WORK"
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log"
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
    tar -C "$WORK/rootfs" -c . | docker import - "$BASE"
    rm -rf "$WORK/rootfs"
}

airflow() {
    step "airflow: wheels"
    mkdir -p "$HERE/wheels"
    local torch llama
    torch=$(ls "$TORCH_WHEELS"/torch-2.13.0+cpu-cp311-*.whl 2>/dev/null | head -1 || true)
    llama=$(ls "$LLAMA_WHEELS"/llama_cpp_python-*.whl 2>/dev/null | head -1 || true)
    # A missing wheel is not fatal: pip then fetches torch (the CUDA build) or builds llama.cpp.
    for w in $torch $llama; do ln -f "$w" "$HERE/wheels/" 2>/dev/null || cp -u "$w" "$HERE/wheels/"; done
    [ -n "$torch" ] || echo "warning: no torch CPU wheel in $TORCH_WHEELS" >&2
    # The resolver may backtrack past a local wheel to PyPI's torch 2.13.0 (the CUDA build, gigabytes):
    # pin the CPU build's own version for the build's pip (ARG PIP_CONSTRAINT, not kept in the image).
    : >"$HERE/wheels/offline-pins.txt"
    if [ -n "$torch" ]; then
        basename "$torch" | sed -E 's/^torch-([^-]+)-.*/torch==\1/' >"$HERE/wheels/offline-pins.txt"
    fi
    [ -n "$llama" ] || echo "warning: no llama-cpp-python wheel in $LLAMA_WHEELS (built from source)" >&2
    # Python 3.11 as on the machines that run the project (and in the official image: 3.11's latest
    # patch release): bookworm's python3 is 3.11.2, older than the pins allow (soupsieve 4.1.3 needs
    # 3.11.5). The host's interpreter, without its site-packages, goes in as a tar file.
    local prefix
    prefix=$("$HOST_PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version; print(sys.base_prefix)')
    step "airflow: Python $("$HOST_PYTHON" -c 'import platform; print(platform.python_version())') from $prefix"
    tar -C "$prefix" --exclude='lib/python3.11/site-packages/*' --exclude='lib/python3.11/test' \
        --exclude='__pycache__' -cf "$HERE/wheels/python-3.11.tar.new" bin include lib
    if cmp -s "$HERE/wheels/python-3.11.tar.new" "$HERE/wheels/python-3.11.tar"; then
        rm "$HERE/wheels/python-3.11.tar.new"
    else
        mv "$HERE/wheels/python-3.11.tar.new" "$HERE/wheels/python-3.11.tar"
    fi
    step "airflow: image"
    build -f "$HERE/airflow.Dockerfile" -t acme-offline/airflow:latest "$ROOT"
}

services() {
    local name
    for name in postgres redis prometheus statsd-exporter s3; do
        step "service: $name"
        build -f "$HERE/$name.Dockerfile" -t "acme-offline/$name:latest" "$ROOT"
    done
}

ca_bundle
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(base airflow services)
docker info >/dev/null 2>&1 || { echo "no Docker daemon answers: docker/dockerd.sh start" >&2; exit 1; }
for s in "${steps[@]}"; do
    case "$s" in base | airflow | services) "$s" ;; *) echo "unknown step: $s" >&2; exit 2 ;; esac
done
step done
