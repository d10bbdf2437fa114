# Prometheus from Debian bookworm in the place of prom/prometheus, for host networking: the same
# config and data paths, listening on 127.0.0.1:9090; wget for the compose healthcheck.
ARG BASE_IMAGE=acme-offline/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends prometheus wget \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus /etc/prometheus && chown nobody /prometheus
USER nobody
VOLUME /prometheus
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=127.0.0.1:9090"]
