"""Typed, bounded decisions: a pydantic answer from the model, or a documented fallback.

Every decision point of every method goes through :func:`decide` (or :func:`adecide`): it asks the
model for a typed (pydantic) answer, retries once on malformed or invalid output, then takes the
caller's documented fallback and records that it did (``usage["fallbacks"]``). With
``model="offline"`` the decision point's own offline policy answers instead (no LLM call at all).

How a decision asks a given server for JSON is the business of
:mod:`langgraph_kgmem.llm.endpoints`: it asks in the first structured-output method the endpoint
has not refused; a refusal is detected once and never retried.

Each decision is logged on the ``langgraph_kgmem.llm`` logger: at DEBUG when the model made it,
at INFO when it fell back (with the step and why).
"""

from __future__ import annotations

import json
import logging
import time
from functools import lru_cache
from typing import Any, Callable, Generator, Sequence, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError

from langgraph_kgmem.errors import describe_error
from langgraph_kgmem.llm.calls import (DecisionRequest, ModelCall, ModelCallFailed, adrive, as_messages,
                                       counting_attempts, current_decision, drive)
from langgraph_kgmem.llm.endpoints import feature_refusal, mark_refused, record_decision, structured_methods
from langgraph_kgmem.llm.models import innermost_model, is_offline, through_wrappers, unwrap
from langgraph_kgmem.llm.parsing import clean_reply, parse_json_object
from langgraph_kgmem.llm.prompts import fence, schema_instructions
from langgraph_kgmem.llm.tokens import message_text
from langgraph_kgmem.llm.usage import (call_usage, decision_usage, empty_usage, fallback_record, merge_usage,
                                       offline_usage, reply_tokens)
from langgraph_kgmem.storable import storable

T = TypeVar("T", bound=BaseModel)
logger = logging.getLogger("langgraph_kgmem.llm")

# JSON-schema keywords a server may compile into a decoding grammar that grows with the bound
# (llama.cpp expands a long maxLength into nested rules, can refuse the grammar, and its Python
# server may then die mid-request); the pydantic schema still enforces them on the reply
_GRAMMAR_HEAVY = frozenset({"maxLength", "minLength", "maxItems", "minItems", "pattern", "maxProperties",
                            "minProperties", "uniqueItems", "multipleOf"})


@lru_cache(maxsize=256)
def _wire_schema_json(schema: type[BaseModel]) -> str:
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in _GRAMMAR_HEAVY}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(schema.model_json_schema()))


def wire_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a decision sends to the server: the pydantic schema without the length,
    count and pattern bounds that grammar-constrained decoders expand into huge grammars. The
    reply is still validated against the full pydantic schema (a value over a bound is malformed)."""
    return json.loads(_wire_schema_json(schema))


def _structured_runnable(model: Any, schema: type[BaseModel], method: str) -> Any:
    """The runnable that asks ``model`` for ``schema`` by ``method`` (see
    :data:`~langgraph_kgmem.llm.endpoints.STRUCTURED_METHODS`), or ``None`` when the model has
    no such way (it then goes on to the next method)."""
    try:
        if method == "default":
            return through_wrappers(model, lambda m: m.with_structured_output(schema, include_raw=True))
        if method == "function_calling":
            wire = wire_schema(schema)
            return through_wrappers(model, lambda m: m.with_structured_output(wire, method="function_calling",
                                                                              include_raw=True))
        if method == "json_object_schema":
            if not hasattr(innermost_model(model), "openai_api_base"):
                return None   # a response_format is an OpenAI-API request field
            fmt = {"type": "json_object", "schema": wire_schema(schema)}
            return through_wrappers(model, lambda m: m.bind(response_format=fmt))
    except (NotImplementedError, TypeError, ValueError, AttributeError):
        return None
    return model


def _read_structured(out: Any, schema: type[T], method: str) -> tuple[T | None, BaseMessage | None, str | None]:
    """(parsed, raw message, error text) of one structured call's output; never raises for what
    the model sent."""
    if method in ("json_object_schema", "prompt"):
        raw = out if isinstance(out, BaseMessage) else None
        try:
            return schema.model_validate(parse_json_object(message_text(raw) if raw is not None else "")), raw, None
        except (ValueError, ValidationError, RecursionError) as exc:
            return None, raw, describe_error(exc, 2000, typed=False)
    if not isinstance(out, dict):
        return None, None, f"structured output returned {type(out).__name__}, not a dict"
    raw, parsed, err = out.get("raw"), out.get("parsed"), out.get("parsing_error")
    raw = raw if isinstance(raw, BaseMessage) else None
    if parsed is not None and not isinstance(parsed, schema):
        try:
            parsed = schema.model_validate(parsed)
        except (ValidationError, ValueError, TypeError, RecursionError) as exc:
            return None, raw, describe_error(exc, 2000, typed=False)
    if parsed is None:
        text = message_text(raw) if raw is not None else ""
        # some providers answer in text even when asked for a tool call: parse it
        try:
            return schema.model_validate(parse_json_object(text)), raw, None
        except (ValueError, ValidationError, RecursionError) as exc:
            return None, raw, str(err) if isinstance(err, str) else describe_error(err or exc, 2000, typed=False)
    return parsed, raw, None


def _structured_steps(model: Any, schema: type[T], messages: list[BaseMessage]) -> Generator[ModelCall, Any, tuple[T | None, BaseMessage | None, str | None, str]]:
    """One structured call (steps for :func:`drive`); returns (parsed, raw message, error text,
    method used). Output the schema refuses, output that is not JSON, JSON too deep to parse: all
    come back as an error text, never raised. The call asks in the first method the model's
    endpoint has not refused; a refusal moves on to the next method at once (remembered for the
    endpoint, never retried). Any other failed call raises :class:`ModelCallFailed`; this
    module's own bugs propagate."""
    model, policy = unwrap(model)
    for method in structured_methods(model):
        runnable = _structured_runnable(model, schema, method)
        if runnable is None:
            continue
        msgs = messages if method in ("default", "function_calling") else messages + [
            HumanMessage(schema_instructions(schema))]
        try:
            out = yield ModelCall(runnable, msgs, policy)
        except ModelCallFailed as exc:
            if method != "prompt" and feature_refusal(exc.__cause__):
                mark_refused(model, method, exc.__cause__)  # type: ignore[arg-type]
                continue
            raise
        return (*_read_structured(out, schema, method), method)
    raise AssertionError("unreachable: the prompt method is always tried")  # pragma: no cover


def decide(
    model: Any,
    schema: type[T],
    prompt: str | Sequence[BaseMessage],
    *,
    step: str,
    offline: Callable[[], T],
    fallback: Callable[[], T] | None = None,
    validate: Callable[[T], str | None] | None = None,
    context: dict[str, Any] | None = None,
) -> tuple[T, dict[str, Any]]:
    """Run one typed decision. Returns ``(decision, usage_delta)``.

    - ``model="offline"``: ``offline()`` answers; no call is made or counted as LLM usage.
    - otherwise: one structured call; if the output is malformed (not JSON, nested too deep, cut
      at :data:`MAX_REPLY_CHARS`, refused by the schema's constraints), ``validate`` rejects it
      (e.g. a node id the model invented) or the call raises (a provider error), the model is
      asked once more; if that fails too, ``fallback()`` (default: ``offline()``) answers and the
      fallback is recorded in ``usage["fallbacks"]`` (:func:`fallback_record`). A decision
      therefore always has a safe answer and never raises because of what the model did.
    - ``context``: structured facts about the decision (candidates and their ids) that scripted
      and oracle models in tests and benchmarks read; real models see only the prompt.
    """
    return drive(_decide_steps(model, schema, prompt, step, offline, fallback, validate, context))


async def adecide(
    model: Any,
    schema: type[T],
    prompt: str | Sequence[BaseMessage],
    *,
    step: str,
    offline: Callable[[], T],
    fallback: Callable[[], T] | None = None,
    validate: Callable[[T], str | None] | None = None,
    context: dict[str, Any] | None = None,
) -> tuple[T, dict[str, Any]]:
    """:func:`decide` for async callers: the same decision, its model calls made with ``ainvoke``
    and its retry waits with ``asyncio.sleep``, so the event loop is never blocked."""
    return await adrive(_decide_steps(model, schema, prompt, step, offline, fallback, validate, context))


def _storable_decision(schema: type[T], parsed: T) -> tuple[T | None, str | None]:
    """A model's decision with every string in it normalised as model text
    (:func:`~langgraph_kgmem.storable.storable`), checked by its schema again when one changed; a
    decision the schema refuses once normalised (a field that was only NUL) is malformed output."""
    data = parsed.model_dump()
    clean = storable(data, f"a {schema.__name__} decision", source="model")
    if clean is data:
        return parsed, None
    try:
        return schema.model_validate(clean), None
    except (ValidationError, ValueError, TypeError, RecursionError) as exc:
        return None, describe_error(exc, 2000, typed=False)


def _decide_steps(model: Any, schema: type[T], prompt: str | Sequence[BaseMessage], step: str, offline: Callable[[], T],
                  fallback: Callable[[], T] | None, validate: Callable[[T], str | None] | None,
                  context: dict[str, Any] | None) -> Generator[ModelCall, Any, tuple[T, dict[str, Any]]]:
    if is_offline(model):
        return offline(), offline_usage()
    usage = empty_usage()
    messages = as_messages(prompt)
    error: str | None = None
    kind = "malformed"
    raw_text: str | None = None
    method: str | None = None
    for attempt in range(2):
        msgs = messages
        if error is not None and kind != "model_error":
            msgs = messages + [
                AIMessage(clean_reply(raw_text or "", 2_000)),
                HumanMessage(
                    # the error can quote the reply, which can quote a document: data, not instructions
                    f"Your previous answer was not usable: {fence(clean_reply(error, 1_000), inline=True)}\n"
                    + schema_instructions(schema)
                ),
            ]
        token = current_decision.set(DecisionRequest(step, schema, context or {}, attempt))
        t0 = time.perf_counter()
        raw: BaseMessage | None = None
        try:
            with counting_attempts() as calls:
                parsed, raw, error, method = yield from _structured_steps(model, schema, msgs)
            kind = "malformed"
        except ModelCallFailed as exc:
            parsed, error, kind = None, str(exc), "model_error"
        finally:
            current_decision.reset(token)
        seconds = time.perf_counter() - t0
        prompt_toks, completion_toks, reported = reply_tokens(raw, msgs)
        usage = merge_usage(usage, call_usage(step, prompt_toks, completion_toks, seconds, max(calls[0], 1),
                                              reported))
        if kind == "model_error" and unwrap(model)[1] is not None:
            break   # the retry policy has already spent its attempts on this error
        raw_text = message_text(raw) if raw is not None else None
        if parsed is not None:
            parsed, problem = _storable_decision(schema, parsed)
            error = problem or error
        if parsed is not None and validate is not None:
            error = validate(parsed)
            if error is not None:
                parsed, kind = None, "invalid"
        if parsed is not None:
            record_decision(model, fell_back=False)
            logger.debug("decision %s (%s) made by the model via %s, attempt %d", step, schema.__name__, method,
                         attempt + 1)
            return parsed, merge_usage(usage, decision_usage(method))
    chosen = fallback or offline
    record_decision(model, fell_back=True)
    usage = merge_usage(usage, decision_usage(method))
    record = fallback_record(step, kind, error, raw_text)
    usage["fallbacks"] = [record]
    logger.info("decision %s (%s) fell back (%s): %s", step, schema.__name__, kind, record["error"][:200])
    return chosen(), usage
