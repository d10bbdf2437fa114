# Postgres 15 from Debian bookworm in the place of postgres:15, for host networking: the official
# image's POSTGRES_USER/POSTGRES_PASSWORD/POSTGRES_DB/PGDATA/PGPORT on first start, listening on
# 127.0.0.1 only (POSTGRES_LISTEN_ADDRESSES), databases in UTF-8 as the official image makes them.
ARG BASE_IMAGE=acme-offline/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 tini \
 && rm -rf /var/lib/apt/lists/*
COPY docker/offline/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
VOLUME /var/lib/postgresql/data
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
