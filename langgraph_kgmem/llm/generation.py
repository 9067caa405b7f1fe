"""Free text from a model (answers, summaries) and plain counted calls (a model with bound tools).

Both are timed and counted like decisions (:mod:`langgraph_kgmem.llm.usage`). :func:`generate`
retries a failed call once, then takes the caller's fallback (recorded, logged at INFO on the
``langgraph_kgmem.llm`` logger) or raises :class:`~langgraph_kgmem.errors.KgmemModelError`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

from langchain_core.messages import BaseMessage

from langgraph_kgmem.errors import KgmemDecisionError, KgmemModelError, describe_error
from langgraph_kgmem.llm.calls import (DecisionRequest, as_messages, counting_attempts, current_decision,
                                       invoke_with_policy, is_model_failure)
from langgraph_kgmem.llm.endpoints import record_decision
from langgraph_kgmem.llm.models import is_offline, unwrap
from langgraph_kgmem.llm.parsing import MAX_TEXT_CHARS, clean_reply
from langgraph_kgmem.llm.tokens import count_message_tokens, message_text
from langgraph_kgmem.redaction import redact_secrets
from langgraph_kgmem.llm.usage import call_usage, decision_usage, fallback_record, merge_usage, reply_tokens
from langgraph_kgmem.storable import storable

logger = logging.getLogger("langgraph_kgmem.llm")


def generate(model: Any, prompt: str | Sequence[BaseMessage], *, step: str,
             context: dict[str, Any] | None = None,
             fallback: Callable[[], str] | None = None) -> tuple[str, dict[str, Any]]:
    """Free-text generation (answers, summaries), counted like a decision; the reply is cut to
    :data:`~langgraph_kgmem.llm.parsing.MAX_TEXT_CHARS`. A call that raises is retried once; if
    the retry fails too, ``fallback()`` answers (recorded in ``usage["fallbacks"]``, kind
    ``model_error``), or, with no fallback, :class:`~langgraph_kgmem.errors.KgmemModelError` is raised.
    Secrets in the reply (API keys, passwords, tokens) come back as ``<redacted>``."""
    if is_offline(model):
        raise KgmemDecisionError(f"step {step!r} needs a model; offline callers must answer extractively")
    usage = decision_usage()
    for attempt in range(2):
        try:
            raw, call = invoke_counted(model, as_messages(prompt), step=step, context=context, attempt=attempt)
        except KgmemModelError as exc:
            usage = merge_usage(usage, exc.usage)
            if attempt == 0 and unwrap(model)[1] is None:   # a retry policy has already retried
                continue
            record_decision(model, fell_back=True)
            if fallback is None:
                raise
            usage["fallbacks"] = [fallback_record(step, "model_error", str(exc))]
            logger.info("generation %s fell back (model_error): %s", step, usage["fallbacks"][0]["error"][:200])
            return fallback(), usage
        usage = merge_usage(usage, call)
        record_decision(model, fell_back=False)
        logger.debug("generation %s answered by the model, attempt %d", step, attempt + 1)
        # what a model says is kept (answers, summaries, checkpoints): a key it echoes is not
        return redact_secrets(clean_reply(message_text(raw), MAX_TEXT_CHARS)).strip(), usage
    raise AssertionError("unreachable")  # pragma: no cover


def invoke_counted(model: Any, messages: list[BaseMessage], *, step: str, context: dict[str, Any] | None = None,
                   attempt: int = 0) -> tuple[Any, dict[str, Any]]:
    """One plain model call (any runnable taking messages, e.g. a model with bound tools) with the
    decision context set for scripted/oracle models, timed and counted: (raw message, usage).

    A call that raises (a provider error) raises :class:`~langgraph_kgmem.errors.KgmemModelError`
    from it, carrying the failed call's usage as ``.usage``; so does a reply that is no message."""
    model, policy = unwrap(model)
    token = current_decision.set(DecisionRequest(step, None, context or {}, attempt))
    t0 = time.perf_counter()
    with counting_attempts() as calls:
        try:
            raw = invoke_with_policy(model, messages, policy)
        except Exception as exc:  # noqa: BLE001 - filtered: only the model's own failures become KgmemModelError
            if not is_model_failure(exc):
                raise
            raise KgmemModelError(f"the chat model failed at step {step!r}: {describe_error(exc)}",
                                  call_usage(step, count_message_tokens(messages), 0, time.perf_counter() - t0,
                                             max(calls[0], 1))) from exc
        finally:
            current_decision.reset(token)
    if not isinstance(raw, BaseMessage):
        raise KgmemModelError(f"the chat model returned {type(raw).__name__} at step {step!r}, not a message",
                              call_usage(step, count_message_tokens(messages), 0, time.perf_counter() - t0))
    p, c, reported = reply_tokens(raw, messages)
    return storable_message(raw), call_usage(step, p, c, time.perf_counter() - t0, max(calls[0], 1), reported)


def storable_message(raw: BaseMessage) -> BaseMessage:
    """A model's message with its text and tool calls normalised as model text
    (:func:`~langgraph_kgmem.storable.storable`: lone surrogates replaced, NUL dropped), so what a
    method keeps of it (a thought, a tool's arguments, an answer) is stored and checkpointed alike
    on every backend; the message itself when nothing needed it."""
    update: dict[str, Any] = {}
    for name in ("content", "tool_calls", "invalid_tool_calls"):
        value = getattr(raw, name, None)
        if value is not None:
            clean = storable(value, f"the {name} of a model's reply", source="model")
            if clean is not value:
                update[name] = clean
    return raw.model_copy(update=update) if update else raw
