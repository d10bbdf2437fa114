"""Telling people: the owner digest, the on-call page and the late notice, with the routing file that says
where each goes (:mod:`acme.notify.routing`), the messages (:mod:`acme.notify.messages`), what a run owes
(:mod:`acme.notify.compose`) and the queue and exactly-once ledger in the lake (:mod:`acme.notify.outbox`).

Plain Python: the channels themselves are Airflow notifiers, in ``acme_airflow.notify``.
"""
