"""The LLM endpoint for a task, from an Airflow connection (secrets stay in connections, not in env files).

Connection ``ACME_LLM_CONN_ID`` (default ``acme_llm``), of any type (``http`` or ``generic``):

* base URL: extra ``base_url``, else ``host`` when it carries a scheme (``http://vllm:8000/v1``), else
  ``https://host[:port]`` (with ``schema`` as path when set);
* API key: ``password`` (empty for a server without authentication);
* model: extra ``model``; optional extras ``timeout_s``, ``max_retries``, ``backoff_s``, ``max_retry_after_s``,
  ``structured_output`` (``auto``, ``json_schema``, ``json_object_schema``, ``json_object``, ``plain``).

Without that connection the endpoint comes from the environment (:meth:`LLMEndpoint.from_env`), and without
either the result is None: diagnosis runs offline. The key is never logged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from acme.errors import ConfigError

if TYPE_CHECKING:
    from acme.diagnosis.llm_agent import FailureAgent
    from acme.diagnosis.llm_endpoint import LLMEndpoint

log = logging.getLogger(__name__)


def llm_conn_id() -> str:
    from acme.diagnosis.llm_endpoint import llm_conn_id as configured

    return configured()


def _base_url(conn: Any, extra: dict[str, Any]) -> str:
    if extra.get("base_url"):
        return str(extra["base_url"]).rstrip("/")
    host = (conn.host or "").strip()
    if not host:
        raise ConfigError(f"LLM connection {conn.conn_id!r} has neither a host nor extra 'base_url'")
    if "://" in host:
        return host.rstrip("/")
    url = f"https://{host}" + (f":{conn.port}" if conn.port else "")
    return url + (f"/{conn.schema.strip('/')}" if conn.schema else "")


def endpoint_from_connection(conn: Any) -> LLMEndpoint:
    """Build the endpoint from an Airflow ``Connection`` (see the module docstring for the fields)."""
    from acme.diagnosis.llm_endpoint import LLMEndpoint, llm_model

    extra = conn.extra_dejson or {}
    model = extra.get("model") or llm_model()
    if not model:
        raise ConfigError(
            f"LLM connection {conn.conn_id!r} has no extra 'model' (and ACME_LLM_MODEL is unset)"
        )
    options: dict[str, Any] = {}
    for key, name, kind in (
        ("timeout_s", "timeout_s", float),
        ("max_retries", "max_retries", int),
        ("backoff_s", "backoff_base_s", float),
        ("max_retry_after_s", "max_retry_after_s", float),
        ("structured_output", "structured_output", str),
    ):
        if extra.get(key) not in (None, ""):
            try:
                options[name] = kind(extra[key])
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    f"LLM connection {conn.conn_id!r}: extra {key}={extra[key]!r} is invalid"
                ) from exc
    return LLMEndpoint(
        base_url=_base_url(conn, extra), model=str(model), api_key=conn.password or "", **options
    )


def llm_endpoint(conn_id: str | None = None) -> LLMEndpoint | None:
    """The endpoint of connection ``conn_id`` (default ``ACME_LLM_CONN_ID``), else the env's, else None."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    from acme.diagnosis.llm_endpoint import LLMEndpoint

    conn_id = conn_id or llm_conn_id()
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        endpoint = LLMEndpoint.from_env()
        log.info(
            "No Airflow connection %r; LLM endpoint from the environment: %s",
            conn_id,
            endpoint.base_url if endpoint else "none (offline diagnosis)",
        )
        return endpoint
    endpoint = endpoint_from_connection(conn)
    log.info("LLM endpoint from connection %r: %s, model %s", conn_id, endpoint.base_url, endpoint.model)
    return endpoint


def failure_agent(conn_id: str | None = None) -> FailureAgent | None:
    """The failure agent for a task, or None when no LLM is configured (the offline default)."""
    from acme.diagnosis.llm_agent import FailureAgent

    return FailureAgent.from_config(llm_endpoint(conn_id))
