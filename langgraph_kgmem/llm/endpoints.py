"""What a model's server accepts: its structured-output method and how many calls it takes at once.

Servers that speak the OpenAI API differ in what they accept. OpenAI takes ``response_format``
``json_schema``; llama-cpp-python's server refuses it (HTTP 500, "Input should be 'text' or
'json_object'") but takes tool calls and ``json_object`` with a ``schema`` (grammar-constrained);
llama.cpp's own server, Ollama and vLLM each accept another subset. A decision therefore asks in
the first of :data:`STRUCTURED_METHODS` its endpoint has not refused; a refusal is recognised
(:func:`feature_refusal`), remembered for the endpoint (:func:`mark_refused`) and never retried
blindly: the same decision goes on at once with the next method. :func:`configure_model` (or
``$KGMEM_STRUCTURED_OUTPUT``) fixes the method instead.

A local server usually answers one request at a time: concurrent calls only queue there and run
into client timeouts. :func:`configure_model` with ``max_in_flight`` bounds the calls in flight to
an endpoint across every thread and task of the process (:func:`in_flight_slot`).

An endpoint is keyed by the innermost chat model's class, base URL and model name, so every node of
every run that talks to the same server shares one record.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

from langgraph_kgmem.errors import ConfigurationError, describe_error
from langgraph_kgmem.llm.models import innermost_model

logger = logging.getLogger("langgraph_kgmem.llm")

#: The ways a decision can ask for JSON, in the order tried: the model's own
#: ``with_structured_output`` default (``json_schema`` for OpenAI models), a forced tool call
#: (``function_calling``), ``response_format={"type": "json_object", "schema": ...}`` (the
#: grammar-constrained mode of llama-cpp-python's and llama.cpp's servers; OpenAI-style models
#: only), and the schema in the prompt with the reply parsed as text (works with any model, but
#: nothing constrains the output).
STRUCTURED_METHODS: tuple[str, ...] = ("default", "function_calling", "json_object_schema", "prompt")

_lock = threading.Lock()
_refused: dict[str, set[str]] = {}
_fixed_method: dict[str, str] = {}
_limits: dict[str, threading.BoundedSemaphore] = {}

_REFUSAL_STATUS = frozenset({400, 404, 415, 422, 500, 501})
_REFUSAL_TEXT = re.compile(r"response_format|json_schema|json_object|tool|function|grammar|not supported|"
                           r"unsupported|not implemented|input should be", re.I)


def base_url(model: Any) -> str | None:
    """The server a chat model talks to (``openai_api_base`` / ``base_url``), if it says."""
    inner = innermost_model(model)
    for attr in ("openai_api_base", "base_url"):
        value = getattr(inner, attr, None)
        if isinstance(value, str) and value:
            return value.rstrip("/")
    return None


def endpoint_key(model: Any) -> str:
    """Class, base URL and model name of the innermost chat model: one record per server and model."""
    if isinstance(model, str):
        return model
    inner = innermost_model(model)
    name = getattr(inner, "model_name", None) or getattr(inner, "model", None)
    return f"{type(inner).__name__}|{base_url(inner) or ''}|{name if isinstance(name, str) else ''}"


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def feature_refusal(exc: BaseException | None) -> bool:
    """Whether a failed call was the server refusing *how* it was asked (a ``response_format`` or
    tool call it does not support), not a failure worth repeating: an HTTP 4xx/500/501 whose
    message names the feature."""
    if exc is None or _status(exc) not in _REFUSAL_STATUS:
        return False
    return bool(_REFUSAL_TEXT.search(describe_error(exc, 2000, typed=False)))


def configure_model(model: Any, *, structured_output: str | None = None, max_in_flight: int | None = None) -> None:
    """Fix how decisions ask ``model``'s endpoint for JSON and/or how many calls it takes at once.

    Args:
        model: a chat model (its endpoint is configured, for every copy and wrapper of it) or a
            base URL string (``max_in_flight`` only).
        structured_output: one of :data:`STRUCTURED_METHODS`; ``None`` keeps automatic detection.
        max_in_flight: the most calls in flight to this endpoint at once, process-wide
            (``None``: unbounded).

    Raises:
        ConfigurationError: an unknown method or a limit below 1.
    """
    if structured_output is not None:
        if structured_output not in STRUCTURED_METHODS:
            raise ConfigurationError(f"structured_output must be one of {', '.join(STRUCTURED_METHODS)}; "
                                     f"got {structured_output!r}")
        with _lock:
            _fixed_method[endpoint_key(model)] = structured_output
    if max_in_flight is not None:
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ConfigurationError(f"max_in_flight must be a positive integer, got {max_in_flight!r}")
        key = model.rstrip("/") if isinstance(model, str) else (base_url(model) or endpoint_key(model))
        with _lock:
            _limits[key] = threading.BoundedSemaphore(max_in_flight)


def structured_methods(model: Any) -> list[str]:
    """The methods a decision may try for ``model``, in order: the configured one alone, else every
    method its endpoint has not refused (``prompt`` always stays)."""
    key = endpoint_key(model)
    fixed = _fixed_method.get(key) or os.environ.get("KGMEM_STRUCTURED_OUTPUT")
    if fixed:
        if fixed not in STRUCTURED_METHODS:
            raise ConfigurationError(f"KGMEM_STRUCTURED_OUTPUT must be one of {', '.join(STRUCTURED_METHODS)}; "
                                     f"got {fixed!r}")
        return [fixed]
    refused = _refused.get(key, set())
    return [m for m in STRUCTURED_METHODS if m == "prompt" or m not in refused]


def mark_refused(model: Any, method: str, exc: BaseException) -> None:
    """Remember that ``model``'s endpoint refused ``method`` (logged at INFO on the
    ``langgraph_kgmem.llm`` logger, once per endpoint and method)."""
    key = endpoint_key(model)
    with _lock:
        seen = _refused.setdefault(key, set())
        if method in seen:
            return
        seen.add(method)
    logger.info("model endpoint %s refused structured output %r (%s); its decisions use the next method",
                key, method, describe_error(exc, 200))


def refused_methods(model: Any) -> set[str]:
    """The structured-output methods ``model``'s endpoint has refused so far in this process."""
    return set(_refused.get(endpoint_key(model), set()))


#: A model's endpoint warns once when more than this share of its decisions fell back to the
#: offline heuristics, after at least :data:`FALLBACK_WARN_MIN` decisions: beyond half, the
#: heuristics decide the runs, not the model, and the user should know before reading any figure.
FALLBACK_WARN_SHARE = 0.5
FALLBACK_WARN_MIN = 8

_tally: dict[str, list[int]] = {}
_warned: set[str] = set()


class MostlyFallbackWarning(UserWarning):
    """A model's decisions mostly fall back to the offline heuristics."""


def record_decision(model: Any, *, fell_back: bool) -> None:
    """Count one decision put to ``model``'s endpoint; warn (``warnings`` and the
    ``langgraph_kgmem.llm`` logger, once per endpoint) when most of them fell back."""
    key = endpoint_key(model)
    with _lock:
        tally = _tally.setdefault(key, [0, 0])
        tally[0] += 1
        tally[1] += int(fell_back)
        asked, fell = tally
        warn = (key not in _warned and asked >= FALLBACK_WARN_MIN and fell / asked > FALLBACK_WARN_SHARE)
        if warn:
            _warned.add(key)
    if warn:
        import warnings

        msg = (f"{fell} of {asked} decisions put to model {key} fell back to the offline heuristics: the model "
               "(or how its server is asked for JSON) is not deciding these runs. usage['fallbacks'] says why; "
               "langgraph_kgmem.llm.configure_model(model, structured_output=...) picks another method.")
        logger.warning(msg)
        warnings.warn(msg, MostlyFallbackWarning, stacklevel=3)


def decision_tally(model: Any) -> tuple[int, int]:
    """(decisions asked, decisions fallen back) for ``model``'s endpoint in this process."""
    asked, fell = _tally.get(endpoint_key(model), (0, 0))
    return asked, fell


#: Reason steps in a row, each answered in prose twice, after which an endpoint that never made a
#: tool call is asked for its agent actions as JSON at once (a single prose reply proves nothing).
PROSE_STEPS_BEFORE_JSON = 3
_tool_replies: dict[str, list[int]] = {}


def note_tool_reply(model: Any, *, called: bool) -> bool:
    """Record whether a step's replies from ``model`` held a tool call; returns whether the endpoint
    is now known not to call tools (never once, and prose for :data:`PROSE_STEPS_BEFORE_JSON`
    steps in a row), which :func:`mark_refused` then remembers as ``"tool_calls"``."""
    key = endpoint_key(model)
    with _lock:
        seen = _tool_replies.setdefault(key, [0, 0])   # [tool calls ever seen, prose steps in a row]
        if called:
            seen[0], seen[1] = 1, 0
            return False
        seen[1] += 1
        return not seen[0] and seen[1] >= PROSE_STEPS_BEFORE_JSON


def _limit_of(runnable: Any) -> threading.BoundedSemaphore | None:
    if not _limits:
        return None
    url = base_url(runnable)
    return _limits.get(url) if url is not None else _limits.get(endpoint_key(runnable))


@contextmanager
def in_flight_slot(runnable: Any) -> Iterator[None]:
    """Hold one of the endpoint's in-flight slots (if it has a limit) for the duration of a call."""
    sem = _limit_of(runnable)
    if sem is None:
        yield
        return
    sem.acquire()
    try:
        yield
    finally:
        sem.release()


@asynccontextmanager
async def ain_flight_slot(runnable: Any) -> AsyncIterator[None]:
    """:func:`in_flight_slot` for async calls: waits without blocking the event loop."""
    sem = _limit_of(runnable)
    if sem is None:
        yield
        return
    while not sem.acquire(blocking=False):
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        sem.release()


def reset_endpoints() -> None:
    """Forget every refusal, fixed method and limit (tests; a process that switched servers)."""
    with _lock:
        _refused.clear()
        _fixed_method.clear()
        _limits.clear()
        _tally.clear()
        _warned.clear()
        _tool_replies.clear()
