"""Where the language model is and how patiently to call it: an OpenAI-compatible chat endpoint.

Any server speaking the OpenAI chat-completions protocol works (OpenAI, vLLM, LMDeploy, llama.cpp...).
The ``openai`` client is used with its own retries switched off (``max_retries=0``) so that the retry
policy is this module's, explicit and tested:

* timeouts, connection errors, HTTP 408, 429 and 5xx are retried up to ``max_retries`` times with
  exponential backoff and jitter (``backoff_base_s * 2**attempt``, capped at ``backoff_max_s``, times a
  random factor in [0.5, 1]);
* a ``Retry-After`` (or ``retry-after-ms``) header is honoured: the wait is at least what the server asked,
  and a server asking for more than ``max_retry_after_s`` is given up on at once rather than stalling a task;
* any other HTTP error (400, 401, 404...) is not retried;
* when the retries are used up, :class:`AgentUnavailable` says why -- the caller then falls back to the
  offline diagnosis.

Structured output differs between servers, so the request's ``response_format`` is chosen per endpoint
(``ACME_LLM_STRUCTURED_OUTPUT``):

| mode | ``response_format`` sent | servers |
|---|---|---|
| ``json_schema`` | ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`` | OpenAI, vLLM, SGLang |
| ``json_object_schema`` | ``{"type": "json_object", "schema": …}`` (grammar-constrained to the schema) | llama.cpp's server (``llama_cpp.server``), which refuses ``json_schema`` |
| ``json_object`` | ``{"type": "json_object"}`` | servers with JSON mode but no schema |
| ``plain`` | none: the prompt asks for JSON, the caller validates | anything else |
| ``auto`` (default) | probes in that order: a mode the server refuses (HTTP 400 or 422, or any error naming ``response_format``: llama.cpp's server answers HTTP 500 with a validation error) is not retried but followed by the next one, and the first mode that answers is kept for the endpoint | |

Whatever the mode, the answer is validated by the caller: a constrained answer can still be wrong.

The API key never appears in a repr, a log message or an exception text.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acme import settings
from acme.errors import AcmeError, ConfigError
from acme.secrets import redact

log = logging.getLogger(__name__)

_RETRIED_STATUS = {408, 429}
STRUCTURED_OUTPUT_MODES = ("json_schema", "json_object_schema", "json_object", "plain")
_REFUSED_FORMAT_STATUS = {400, 422}
# The mode each endpoint (base URL, model) answered with in this process: probing happens once.
_working_mode: dict[tuple[str, str], str] = {}


class AgentUnavailable(AcmeError):
    """The language model could not give a usable answer (unreachable, overloaded, or invalid answers)."""

    def __init__(self, why: str):
        self.why = why
        super().__init__(why)


DEFAULT_CONN_ID = "acme_llm"


def llm_conn_id() -> str:
    """``ACME_LLM_CONN_ID``: the Airflow connection that holds the endpoint (default ``acme_llm``)."""
    return settings.agents().conn_id or DEFAULT_CONN_ID


def llm_model() -> str:
    """``ACME_LLM_MODEL``: the model name, when neither the connection nor the caller gives one."""
    return settings.agents().model


@dataclass(frozen=True)
class LLMEndpoint:
    """An OpenAI-compatible chat endpoint and the retry policy used with it."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    max_retry_after_s: float = 120.0
    structured_output: str = "auto"

    def __post_init__(self) -> None:
        if self.structured_output not in ("auto", *STRUCTURED_OUTPUT_MODES):
            raise ConfigError(
                f"LLM structured output {self.structured_output!r} must be auto or one of "
                f"{', '.join(STRUCTURED_OUTPUT_MODES)}"
            )
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"LLM base URL {self.shown_url!r} must start with http:// or https://")
        if not self.model:
            raise ConfigError(f"LLM endpoint {self.shown_url}: no model name given")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_base_s < 0:
            raise ConfigError(f"LLM endpoint {self.shown_url}: timeout must be > 0, retries and backoff >= 0")

    @property
    def shown_url(self) -> str:
        """The base URL as errors and logs show it: credentials in it (user:password@) masked, since
        the errors end up in task logs and in the diagnosis records' notes."""
        return redact(self.base_url)

    @classmethod
    def from_env(cls) -> LLMEndpoint | None:
        """``ACME_LLM_BASE_URL`` (None when unset: the offline default), ``ACME_LLM_MODEL``,
        ``ACME_LLM_API_KEY``, ``ACME_LLM_TIMEOUT_S`` (60), ``ACME_LLM_MAX_RETRIES`` (3),
        ``ACME_LLM_BACKOFF_S`` (1), ``ACME_LLM_MAX_RETRY_AFTER_S`` (120), ``ACME_LLM_STRUCTURED_OUTPUT``
        (``auto``)."""
        configured = settings.agents()
        if not configured.base_url:
            return None
        if not configured.model:
            raise ConfigError("ACME_LLM_MODEL must name the model when ACME_LLM_BASE_URL is set")
        return cls(
            base_url=configured.base_url,
            model=configured.model,
            api_key=configured.api_key,
            timeout_s=configured.timeout_s,
            max_retries=configured.max_retries,
            backoff_base_s=configured.backoff_s,
            max_retry_after_s=configured.max_retry_after_s,
            structured_output=configured.structured_output,
        )

    def output_modes(self) -> list[str]:
        """The structured-output modes to try, in order (see module doc)."""
        if self.structured_output != "auto":
            return [self.structured_output]
        known = _working_mode.get((self.base_url, self.model))
        return [known] if known else list(STRUCTURED_OUTPUT_MODES)

    def client(self) -> Any:
        """An ``openai.OpenAI`` client for this endpoint, with the client's own retries off."""
        import openai

        # Servers without authentication (a local vLLM) still need some key for the client to start.
        return openai.OpenAI(
            base_url=self.base_url,
            api_key=self.api_key or "no-key",
            timeout=self.timeout_s,
            max_retries=0,
        )

    def backoff_s(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Wait before retry number ``attempt`` (0-based): exponential, capped, with jitter."""
        return min(self.backoff_max_s, self.backoff_base_s * 2**attempt) * (0.5 + rng() / 2)


def response_format(mode: str, schema: dict[str, Any] | None, name: str = "answer") -> dict[str, Any] | None:
    """The ``response_format`` of a request in ``mode`` (without a schema, both schema modes send JSON mode)."""
    if mode == "plain":
        return None
    if schema is None or mode == "json_object":
        return {"type": "json_object"}
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    return {"type": "json_object", "schema": schema}


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked to wait (``retry-after-ms``, or ``Retry-After`` in seconds or as a date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _classify(exc: Exception) -> tuple[bool, str, float | None]:
    """(retry?, short description, Retry-After seconds) for an exception raised by the openai client."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return True, "timed out", None
    if isinstance(exc, openai.APIConnectionError):
        return True, f"connection failed ({type(exc.__cause__ or exc).__name__})", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        wait = retry_after_s(getattr(exc.response, "headers", None))
        return status in _RETRIED_STATUS or status >= 500, f"HTTP {status}", wait
    return False, type(exc).__name__, None


def chat_completion(
    endpoint: LLMEndpoint,
    messages: list[dict[str, str]],
    *,
    temperature: float,
    max_tokens: int,
    json_mode: bool = True,
    schema: dict[str, Any] | None = None,
    client: Any = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The text of the first choice of one chat completion, retried per the module's policy.

    With ``json_mode`` the answer is asked for as JSON in the endpoint's structured-output mode
    (``schema`` constrains it where the server can); a server refusing a mode gets the next one when the
    endpoint probes (``auto``). Raises :class:`AgentUnavailable` when every attempt failed. An empty or
    cut-off answer is returned as is (possibly ``""``): judging its content is the caller's job.
    """

    client = client if client is not None else endpoint.client()
    modes = endpoint.output_modes() if json_mode else ["plain"]
    for position, mode in enumerate(modes):
        kwargs: dict[str, Any] = {"model": endpoint.model, "messages": messages, "temperature": temperature}
        kwargs["max_tokens"] = max_tokens
        chosen = response_format(mode, schema) if json_mode else None
        if chosen is not None:
            kwargs["response_format"] = chosen
        try:
            content = _complete_with_retries(endpoint, client, kwargs, sleep)
        except _FormatRefused as refused:
            if position + 1 < len(modes):
                log.info(
                    "LLM endpoint %s refused structured output %s (%s); trying %s",
                    endpoint.shown_url,
                    mode,
                    refused.what,
                    modes[position + 1],
                )
                continue
            raise AgentUnavailable(
                f"{endpoint.shown_url}: {refused.what}, not retried"
            ) from refused.__cause__
        if json_mode and endpoint.structured_output == "auto":
            _working_mode[(endpoint.base_url, endpoint.model)] = mode
        return content
    raise AgentUnavailable(f"{endpoint.shown_url}: no structured-output mode to try")


def _refuses_format(exc: Exception) -> bool:
    """A 400/422, or any error whose message names ``response_format`` (llama.cpp's server answers an
    unsupported ``json_schema`` with HTTP 500 and a validation error naming the field)."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return False
    if exc.status_code in _REFUSED_FORMAT_STATUS:
        return True
    return "response_format" in f"{exc.message} {exc.body}"


class _FormatRefused(Exception):
    """HTTP 400/422 to a request: the server may refuse its ``response_format`` (never retried as is)."""

    def __init__(self, what: str):
        self.what = what
        super().__init__(what)


def _complete_with_retries(
    endpoint: LLMEndpoint, client: Any, kwargs: dict[str, Any], sleep: Callable
) -> str:
    import openai

    failures: list[str] = []
    for attempt in range(endpoint.max_retries + 1):
        try:
            completion = client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            retry, what, wait = _classify(exc)
            failures.append(what)
            if "response_format" in kwargs and _refuses_format(exc):
                raise _FormatRefused(what) from exc
            if not retry:
                raise AgentUnavailable(f"{endpoint.shown_url}: {what}, not retried") from exc
            if attempt == endpoint.max_retries:
                break
            if wait is not None and wait > endpoint.max_retry_after_s:
                raise AgentUnavailable(
                    f"{endpoint.shown_url}: {what}, server asked to wait {wait:.0f} s "
                    f"(more than the {endpoint.max_retry_after_s:.0f} s allowed)"
                ) from exc
            delay = max(wait or 0.0, endpoint.backoff_s(attempt))
            log.warning(
                "LLM endpoint %s: %s; retry %d/%d in %.2f s",
                endpoint.shown_url,
                what,
                attempt + 1,
                endpoint.max_retries,
                delay,
            )
            sleep(delay)
            continue
        choices = getattr(completion, "choices", None) or []
        if not choices:
            return ""
        return choices[0].message.content or ""
    attempts = f"{len(failures)} attempt{'s' if len(failures) != 1 else ''}"
    raise AgentUnavailable(f"{endpoint.shown_url}: {attempts} failed ({', '.join(failures)})")
