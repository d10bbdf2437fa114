#!/bin/bash
# `redis-server ARGS` as user redis, bound to loopback (later --bind arguments win over earlier ones).
set -euo pipefail
if [ "${1:-}" = redis-server ]; then
    shift
    exec runuser -u redis -- redis-server --dir /data "$@" --bind "${REDIS_BIND:-127.0.0.1}"
fi
exec "$@"
