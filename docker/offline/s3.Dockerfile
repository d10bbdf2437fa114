# A loopback S3 server in MinIO's place (minio/minio and minio/mc): moto's S3 server, pinned as in
# constraints.txt, run by s3_server.py, which takes MinIO's `server DIR --address HOST:PORT`
# arguments and keeps the objects in DIR across restarts (moto holds them in memory). `mc` is a
# small stand-in for the MinIO client commands the compose file runs (mc.py).
ARG BASE_IMAGE=acme-offline/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
COPY constraints.txt /opt/s3/constraints.txt
COPY docker/offline/wheels/build-ca.pem /opt/s3/build-ca.pem
ARG PIP_CERT=/opt/s3/build-ca.pem
RUN python3 -m venv /opt/s3/venv \
 && /opt/s3/venv/bin/pip install --no-cache-dir "moto[server]" boto3 -c /opt/s3/constraints.txt
COPY docker/offline/s3_server.py /opt/s3/s3_server.py
COPY docker/offline/mc.py /opt/s3/mc.py
RUN printf '#!/bin/sh\nexec /opt/s3/venv/bin/python /opt/s3/s3_server.py "$@"\n' >/usr/local/bin/minio \
 && printf '#!/bin/sh\nexec /opt/s3/venv/bin/python /opt/s3/mc.py "$@"\n' >/usr/local/bin/mc \
 && chmod +x /usr/local/bin/minio /usr/local/bin/mc
VOLUME /data
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/minio"]
CMD ["server", "/data"]
