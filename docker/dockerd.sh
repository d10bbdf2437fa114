#!/usr/bin/env bash
# Starts (or stops) a Docker daemon for the compose test tier and the offline image build, on
# machines where none runs: Debian's docker.io, with no bridge network and no iptables rules, so
# containers can only use host networking (docker-compose.offline.yaml) and nothing leaves loopback.
#   docker/dockerd.sh install # Debian's docker.io and debootstrap when missing (root: apt-get)
#   docker/dockerd.sh start   # idempotent (installs first); waits until `docker info` answers
#   docker/dockerd.sh stop    # stops the daemon this script started (its pid file)
set -euo pipefail
RUN_DIR=${ACME_DOCKERD_RUN_DIR:-/var/run/acme-dockerd}
PID_FILE=$RUN_DIR/dockerd.pid
LOG_FILE=$RUN_DIR/dockerd.log

running() { [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; }

# What the compose tier and docker/offline/build.sh need of Debian: dockerd (with docker-init, for
# `init: true`) and debootstrap; installed from the Debian registry when missing.
install() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
        echo "needs ${missing[*]}: apt-get install ${missing[*]} (as root)" >&2
        return 1
    fi
    echo "dockerd.sh: installing ${missing[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

case "${1:-}" in
install) install ;;
start)
    install
    if docker info >/dev/null 2>&1; then echo "dockerd: already answering"; exit 0; fi
    mkdir -p "$RUN_DIR"
    nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
    for _ in $(seq 1 60); do
        if docker info >/dev/null 2>&1; then echo "dockerd: started (pid $(cat "$PID_FILE"), log $LOG_FILE)"; exit 0; fi
        running || { echo "dockerd exited; its log:" >&2; tail -20 "$LOG_FILE" >&2; exit 1; }
        sleep 1
    done
    echo "dockerd did not answer within 60 s; log $LOG_FILE" >&2; exit 1
    ;;
stop)
    if running; then
        kill "$(cat "$PID_FILE")"
        for _ in $(seq 1 30); do running || break; sleep 1; done
        rm -f "$PID_FILE"; echo "dockerd: stopped"
    else
        echo "dockerd: not started by this script"
    fi
    ;;
*) echo "usage: $0 install|start|stop" >&2; exit 2 ;;
esac
