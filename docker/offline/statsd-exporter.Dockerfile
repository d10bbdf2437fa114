# A StatsD-to-Prometheus exporter in the place of prom/statsd-exporter, for host networking: Debian
# bookworm has no statsd-exporter package, so statsd_exporter.py (Python and Debian's
# python3-prometheus-client) takes StatsD on 127.0.0.1:9125/udp and serves /metrics on
# 127.0.0.1:9102, as prom/statsd-exporter does with its default mapping; wget for the healthcheck.
ARG BASE_IMAGE=acme-offline/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-prometheus-client wget tini \
 && rm -rf /var/lib/apt/lists/*
COPY docker/offline/statsd_exporter.py /opt/statsd/statsd_exporter.py
USER nobody
ENTRYPOINT ["/usr/bin/tini", "--", "python3", "/opt/statsd/statsd_exporter.py"]
CMD ["--web.listen-address=127.0.0.1:9102", "--statsd.listen-udp=127.0.0.1:9125"]
