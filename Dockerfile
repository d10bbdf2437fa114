# The project's Airflow image: the official Airflow 3 image plus the pinned dependency set.
FROM apache/airflow:3.3.2-python3.11
COPY requirements.txt constraints.txt /opt/acme/
RUN pip install --no-cache-dir -r /opt/acme/requirements.txt -c /opt/acme/constraints.txt \
 && pip install --no-cache-dir --no-deps drain3==0.9.11 jsonpickle==1.5.1
