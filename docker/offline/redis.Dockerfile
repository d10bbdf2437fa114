# Redis 7 from Debian bookworm in the place of redis:7, for host networking: the compose file's
# `redis-server ...` command, listening on 127.0.0.1 only, its data in /data.
ARG BASE_IMAGE=acme-offline/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server redis-tools tini \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
COPY docker/offline/redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
WORKDIR /data
VOLUME /data
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/docker-entrypoint.sh"]
CMD ["redis-server"]
