"""Transient model errors and the :class:`~langgraph.types.RetryPolicy` a model's calls run under.

A call that raises an error the policy retries (timeouts, dropped connections, rate limits, server
errors: :func:`transient_model_error`) is repeated after the policy's backoff, up to its
``max_attempts`` calls; then the decision falls back as usual. The calls themselves are made by
:mod:`langgraph_kgmem.llm.calls`; :func:`~langgraph_kgmem.llm.models.with_retry_policy` puts a
model under a policy.
"""

from __future__ import annotations

from typing import Any, Sequence

from langgraph.types import RetryPolicy

from langgraph_kgmem.errors import ConfigurationError

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_TRANSIENT_NAMES = frozenset({"APITimeoutError", "APIConnectionError", "RateLimitError", "InternalServerError",
                              "ServiceUnavailableError", "TimeoutException", "ConnectTimeout", "ReadTimeout",
                              "ConnectError", "RemoteProtocolError", "OverloadedError"})


def transient_model_error(exc: BaseException) -> bool:
    """Whether a model call's exception is worth retrying: timeouts, dropped connections, rate
    limits (429) and server errors (5xx), by type, by the HTTP status the exception carries, or
    by the provider clients' class names (openai, anthropic, httpx). A bad request is not."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return status in _TRANSIENT_STATUS
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__)


DEFAULT_RETRY_POLICY = RetryPolicy(initial_interval=0.5, backoff_factor=2.0, max_interval=10.0, max_attempts=3,
                                   jitter=True, retry_on=transient_model_error)


class RetryingModel:
    """A model with the :class:`~langgraph.types.RetryPolicy` its LLM calls run under: each call
    that raises an error the policy's ``retry_on`` accepts is repeated after the policy's backoff,
    up to ``max_attempts`` calls; then the decision falls back as usual (``usage["fallbacks"]``,
    kind ``model_error``). Made by :func:`~langgraph_kgmem.llm.models.with_retry_policy`; every
    factory's ``retry_policy=``."""

    __slots__ = ("model", "policy")

    def __init__(self, model: Any, policy: RetryPolicy) -> None:
        self.model, self.policy = model, policy

    def __repr__(self) -> str:
        return f"RetryingModel({self.model!r}, max_attempts={self.policy.max_attempts})"


def checked_policy(policy: RetryPolicy | None) -> RetryPolicy:
    """``policy`` (``None``: :data:`DEFAULT_RETRY_POLICY`), refused with a
    :class:`~langgraph_kgmem.errors.ConfigurationError` when it is not a usable RetryPolicy."""
    if policy is None:
        return DEFAULT_RETRY_POLICY
    if not isinstance(policy, RetryPolicy):
        raise ConfigurationError(f"retry_policy must be a langgraph.types.RetryPolicy, got {type(policy).__name__}")
    if policy.max_attempts < 1:
        raise ConfigurationError(f"retry_policy.max_attempts must be at least 1, got {policy.max_attempts}")
    return policy


def policy_retries(policy: RetryPolicy, exc: BaseException) -> bool:
    """Whether ``policy.retry_on`` (an exception class, a sequence of them, or a predicate) accepts ``exc``."""
    on = policy.retry_on
    if isinstance(on, type):
        return isinstance(exc, on)
    if isinstance(on, Sequence):
        return isinstance(exc, tuple(on))
    return bool(on(exc))  # type: ignore[operator]
