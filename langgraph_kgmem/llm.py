"""LLM decisions, model resolution and usage accounting.

Every decision point of every method goes through :func:`decide`: it asks the model for a typed
(pydantic) answer, retries once on malformed or invalid output, then takes the caller's documented
fallback and records that it did. With ``model="offline"`` the decision point's own offline policy
answers instead (no LLM call at all). Every call is counted: calls, prompt/completion tokens and
seconds, per step, in a *usage* dict that graph states merge with :func:`merge_usage`.

Model output is untrusted input. A reply is cut to :data:`MAX_REPLY_CHARS` before it is parsed;
JSON nested deeper than :data:`MAX_JSON_DEPTH`, a parser's ``RecursionError`` and any value the
decision's pydantic schema refuses (lengths, ranges, NaN) count as malformed output (retry, then
the fallback). A model call that raises is retried once, then the decision falls back too; each
fallback is recorded in ``usage["fallbacks"]`` with its ``kind``. Free text (:func:`generate`) is
cut to :data:`MAX_TEXT_CHARS`. Token counting works on any text (:func:`count_tokens`).

How a decision asks a given server for JSON (and how many calls may be in flight to it) is the
business of :mod:`langgraph_kgmem.model_endpoints`: a method the server refuses is detected once
and never retried.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Awaitable, Callable, Generator, Iterator, Literal, NoReturn, Sequence, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy
from pydantic import BaseModel, ValidationError

from langgraph_kgmem.errors import ConfigurationError, KgmemDecisionError, KgmemModelError, describe_error
from langgraph_kgmem.model_endpoints import (ain_flight_slot, feature_refusal, in_flight_slot, innermost_model,
                                             mark_refused, record_decision, structured_methods)
from langgraph_kgmem.prompt_fence import fence

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")
OFFLINE: Literal["offline"] = "offline"
ModelLike = Runnable | str | None

# --------------------------------------------------------------------------------------------
# model resolution


_RESOLVED: dict[str, BaseChatModel] = {}


def resolve_model(model: ModelLike, *, required: bool = True) -> Runnable | Literal["offline"] | None:
    """Turn ``model`` into a chat model, the ``"offline"`` marker, or ``None``.

    Any runnable that takes messages counts as a model: a chat model, or one wrapped by
    ``with_retry`` / ``with_fallbacks`` / ``bind``, or a configurable ``init_chat_model(...)``.
    ``None`` reads ``$KGMEM_MODEL`` (a provider string such as ``openai:gpt-4o-mini``; an
    OpenAI-compatible server is reached with ``OPENAI_BASE_URL``). With nothing configured and
    ``required`` set, a :class:`ConfigurationError` names what to set.
    """
    if isinstance(model, (Runnable, RetryingModel)):
        return model
    if model is None:
        model = os.environ.get("KGMEM_MODEL")
        if not model:
            if not required:
                return None
            raise ConfigurationError(
                "No chat model configured. Pass model=... (any LangChain chat model), "
                "set KGMEM_MODEL (e.g. 'openai:gpt-4o-mini', with OPENAI_API_KEY; add OPENAI_BASE_URL "
                "for an OpenAI-compatible server), or use model='offline' to run without an LLM."
            )
    if model == OFFLINE:
        return OFFLINE
    if not isinstance(model, str):
        raise ConfigurationError(
            f"model must be a chat model (any LangChain runnable that takes messages), a provider string "
            f"such as 'openai:gpt-4o-mini', or 'offline'; got {type(model).__name__}")
    cached = _RESOLVED.get(model)
    if cached is not None:  # one client per provider string, not one per node of every run
        return cached
    from langchain.chat_models import init_chat_model

    try:
        _RESOLVED[model] = init_chat_model(model)
        return _RESOLVED[model]
    except Exception as exc:
        raise ConfigurationError(
            f"Could not create chat model {model!r}: {describe_error(exc)}. Set KGMEM_MODEL to a provider string "
            "such as 'openai:gpt-4o-mini' and the provider's key (OPENAI_API_KEY), or use 'offline'."
        ) from exc


def is_offline(model: Any) -> bool:
    return model == OFFLINE


def model_label(model: Any) -> str:
    if is_offline(model):
        return "offline (no LLM: heuristic decisions, extractive answers)"
    model = innermost_model(model)
    label = getattr(model, "model_name", None) or getattr(model, "model", None)
    return label if isinstance(label, str) and label else type(model).__name__


def through_wrappers(model: Any, make: Callable[[Any], Any]) -> Any:
    """``make(model)`` (``with_structured_output``, ``bind_tools``) applied beneath the wrappers that
    do not offer those methods (``with_retry``, ``with_fallbacks``), which are put back around
    the result. Raises ``AttributeError`` / ``NotImplementedError`` when the model underneath
    has no such method."""
    from langchain_core.runnables.fallbacks import RunnableWithFallbacks
    from langchain_core.runnables.retry import RunnableRetry

    if isinstance(model, RunnableRetry):
        return model.model_copy(update={"bound": through_wrappers(model.bound, make)})
    if isinstance(model, RunnableWithFallbacks):
        return model.model_copy(update={"runnable": through_wrappers(model.runnable, make),
                                        "fallbacks": [through_wrappers(f, make) for f in model.fallbacks]})
    return make(model)


# --------------------------------------------------------------------------------------------
# transient errors: retried per a LangGraph RetryPolicy before a decision falls back

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
    kind ``model_error``). Made by :func:`with_retry_policy`; every factory's ``retry_policy=``."""

    __slots__ = ("model", "policy")

    def __init__(self, model: Any, policy: RetryPolicy) -> None:
        self.model, self.policy = model, policy

    def __repr__(self) -> str:
        return f"RetryingModel({self.model!r}, max_attempts={self.policy.max_attempts})"


def with_retry_policy(model: Any, policy: RetryPolicy | None) -> Any:
    """``model`` whose calls follow ``policy`` (``None``: :data:`DEFAULT_RETRY_POLICY`); the
    offline marker and ``None`` stay as they are."""
    if model is None or is_offline(model):
        return model
    if isinstance(model, RetryingModel):
        model = model.model
    if policy is None:
        policy = DEFAULT_RETRY_POLICY
    if not isinstance(policy, RetryPolicy):
        raise ConfigurationError(f"retry_policy must be a langgraph.types.RetryPolicy, got {type(policy).__name__}")
    if policy.max_attempts < 1:
        raise ConfigurationError(f"retry_policy.max_attempts must be at least 1, got {policy.max_attempts}")
    return RetryingModel(model, policy)


def _unwrap(model: Any) -> tuple[Any, RetryPolicy | None]:
    return (model.model, model.policy) if isinstance(model, RetryingModel) else (model, None)


def _should_retry(policy: RetryPolicy, exc: BaseException) -> bool:
    on = policy.retry_on
    if isinstance(on, type):
        return isinstance(exc, on)
    if isinstance(on, Sequence):
        return isinstance(exc, tuple(on))
    return bool(on(exc))  # type: ignore[operator]


_attempts: ContextVar[list[int] | None] = ContextVar("kgmem_call_attempts", default=None)


@contextmanager
def _counting_attempts() -> Iterator[list[int]]:
    """A box counting the calls :func:`_invoke_with_policy` makes inside (retries included)."""
    box = [0]
    token = _attempts.set(box)
    try:
        yield box
    finally:
        _attempts.reset(token)


def _retry_wait(policy: RetryPolicy | None, exc: Exception, attempt: int, interval: float) -> float:
    """Seconds to wait before attempt ``attempt + 1`` after ``exc``; re-raises ``exc`` when the
    policy does not retry it (or its attempts are spent)."""
    attempts = policy.max_attempts if policy is not None else 1
    if (attempt >= attempts or not _is_model_failure(exc) or feature_refusal(exc)
            or not _should_retry(policy, exc)):  # type: ignore[arg-type]
        raise exc
    return min(interval, policy.max_interval) + (random.uniform(0, 1) if policy.jitter else 0.0)  # type: ignore[union-attr]


def _invoke_with_policy(runnable: Any, messages: list[BaseMessage], policy: RetryPolicy | None) -> Any:
    """``runnable.invoke(messages)``, repeated per ``policy`` on the errors it retries (every
    attempt is counted in the enclosing :func:`_counting_attempts` box)."""
    box = _attempts.get()
    interval = policy.initial_interval if policy is not None else 0.0
    for attempt in range(1, (policy.max_attempts if policy is not None else 1) + 1):
        if box is not None:
            box[0] += 1
        try:
            with in_flight_slot(runnable):
                return runnable.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - re-raised unless the policy retries it
            wait = _retry_wait(policy, exc, attempt, interval)
        if interval > 0:
            time.sleep(wait)
        interval *= policy.backoff_factor  # type: ignore[union-attr]
    raise AssertionError("unreachable")  # pragma: no cover


async def _ainvoke_with_policy(runnable: Any, messages: list[BaseMessage], policy: RetryPolicy | None) -> Any:
    """:func:`_invoke_with_policy` with ``ainvoke`` and ``asyncio.sleep``: the event loop is never blocked."""
    box = _attempts.get()
    interval = policy.initial_interval if policy is not None else 0.0
    for attempt in range(1, (policy.max_attempts if policy is not None else 1) + 1):
        if box is not None:
            box[0] += 1
        try:
            async with ain_flight_slot(runnable):
                return await runnable.ainvoke(messages)
        except Exception as exc:  # noqa: BLE001 - re-raised unless the policy retries it
            wait = _retry_wait(policy, exc, attempt, interval)
        if interval > 0:
            await asyncio.sleep(wait)
        interval *= policy.backoff_factor  # type: ignore[union-attr]
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------------------------
# token counting


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)


TOKEN_ENCODING = os.environ.get("KGMEM_TOKEN_ENCODING", "o200k_base")


TOKEN_SLICE_CHARS = 40_000         # bpe-openai refuses ≥ 1M characters or ≥ 200k tokens in one call
MAX_EXACT_TOKEN_CHARS = 1_000_000  # beyond this many characters the count is an estimate


def count_tokens(text: str, encoding: str | None = None) -> int:
    """Tokens of ``text`` under o200k_base (or ``encoding``), counted offline with bpe-openai.

    Never raises: the text is encoded in slices of :data:`TOKEN_SLICE_CHARS` (a slice boundary
    may split a token, so a long text's count can differ from one-call encoding by a token per
    slice); beyond :data:`MAX_EXACT_TOKEN_CHARS` the count is extrapolated from the counted part
    (tokens per character), and a slice the encoder refuses counts one token per 3 characters.
    """
    if not text:
        return 0
    if not isinstance(text, str):
        text = str(text)
    enc = _encoding(encoding or TOKEN_ENCODING)
    head = text[:MAX_EXACT_TOKEN_CHARS]
    total = 0
    for i in range(0, len(head), TOKEN_SLICE_CHARS):
        part = head[i:i + TOKEN_SLICE_CHARS]
        try:
            total += len(enc.encode(part))
        except Exception:  # noqa: BLE001 - the encoder's own limits or odd input: estimate, never fail
            total += -(-len(part) // 3)
    if len(text) > len(head):
        total = -(-total * len(text) // len(head))
    return total


def message_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        text = content
    else:
        text = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    calls = getattr(msg, "tool_calls", None) or []
    if calls:
        try:
            text += json.dumps([{"name": c["name"], "args": c["args"]} for c in calls], sort_keys=True,
                               default=str)
        except (RecursionError, TypeError, ValueError):  # arguments nested too deep to serialise
            text += "[tool calls that could not be serialised]"
    return text


def count_message_tokens(messages: Sequence[BaseMessage]) -> int:
    # 4 tokens of per-message overhead, as in OpenAI's chat format accounting
    return sum(count_tokens(message_text(m)) + 4 for m in messages) + 2


# --------------------------------------------------------------------------------------------
# usage accounting


def empty_usage() -> dict[str, Any]:
    return {
        "llm_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "llm_seconds": 0.0,
        "max_prompt_tokens": 0,
        "offline_decisions": 0,
        "model_decisions": 0,
        "tokens_reported": 0,
        "tokens_counted": 0,
        "structured_output": {},
        "by_step": {},
        "fallbacks": [],
    }


def merge_usage(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for a graph state's ``usage`` key: sums counters, merges per-step figures. An update
    made by :func:`fresh_usage` starts the count again (a new run on a thread whose checkpoint holds
    the previous run's usage)."""
    out = empty_usage()
    if right is not None and right.get("reset"):
        left = None
    for part in (left, right):
        if not part:
            continue
        for key in ("llm_calls", "prompt_tokens", "completion_tokens", "offline_decisions", "model_decisions",
                    "tokens_reported", "tokens_counted"):
            out[key] += int(part.get(key, 0))
        for method, n in part.get("structured_output", {}).items():
            out["structured_output"][method] = out["structured_output"].get(method, 0) + int(n)
        out["llm_seconds"] += float(part.get("llm_seconds", 0.0))
        out["max_prompt_tokens"] = max(out["max_prompt_tokens"], int(part.get("max_prompt_tokens", 0)))
        out["fallbacks"] = out["fallbacks"] + list(part.get("fallbacks", []))
        for step, fig in part.get("by_step", {}).items():
            cur = out["by_step"].setdefault(
                step, {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "llm_seconds": 0.0}
            )
            for key in ("llm_calls", "prompt_tokens", "completion_tokens"):
                cur[key] += int(fig.get(key, 0))
            cur["llm_seconds"] += float(fig.get("llm_seconds", 0.0))
    return out


def fresh_usage(usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``usage`` update of a run's first node: ``usage`` (if any) counted from zero."""
    return {**(usage or empty_usage()), "reset": True}


def call_usage(step: str, prompt: int, completion: int, seconds: float, calls: int = 1,
               reported: bool = False) -> dict[str, Any]:
    """The usage record of one LLM call made at ``step`` (merge records with :func:`merge_usage`);
    ``calls > 1``: the same prompt sent that many times (attempts a retry policy repeated);
    ``reported``: the token figures are the server's own (``tokens_reported``), not counted here
    with the o200k tokenizer (``tokens_counted``)."""
    u = empty_usage()
    u.update(llm_calls=calls, prompt_tokens=prompt * calls, completion_tokens=completion, llm_seconds=seconds,
             max_prompt_tokens=prompt)
    u["tokens_reported" if reported else "tokens_counted"] = calls
    u["by_step"] = {step: {"llm_calls": calls, "prompt_tokens": prompt * calls, "completion_tokens": completion,
                           "llm_seconds": seconds}}
    return u


def decision_usage(method: str | None = None) -> dict[str, Any]:
    """The usage record of one decision put to a model (``model_decisions``; whether it fell back is
    in ``fallbacks``), with the structured-output method that carried it, if any."""
    u = empty_usage()
    u["model_decisions"] = 1
    if method:
        u["structured_output"] = {method: 1}
    return u


#: Fallback kinds that mean the model did not make the decision (the heuristic did).
DECISION_FALLBACK_KINDS = frozenset({"malformed", "invalid", "model_error", "invalid_tool_call"})


def decision_summary(usage: dict[str, Any] | None) -> dict[str, Any]:
    """How many decisions a model was asked for, how many it made and how many fell back to the
    heuristic, from a run's (or an ingest's) usage: ``{"asked", "made", "fell_back",
    "fallback_share", "offline"}``."""
    usage = usage or {}
    asked = int(usage.get("model_decisions", 0))
    fell = sum(1 for f in usage.get("fallbacks", []) if f.get("kind") in DECISION_FALLBACK_KINDS)
    fell = min(fell, asked)
    return {"asked": asked, "made": asked - fell, "fell_back": fell,
            "fallback_share": round(fell / asked, 3) if asked else 0.0,
            "offline": int(usage.get("offline_decisions", 0))}


def offline_usage() -> dict[str, Any]:
    """The usage record of one decision made by an offline heuristic (no LLM call)."""
    u = empty_usage()
    u["offline_decisions"] = 1
    return u


# --------------------------------------------------------------------------------------------
# the decision request context (read by scripted/oracle models; ignored by real ones)


@dataclass
class DecisionRequest:
    step: str
    schema: type[BaseModel] | None
    context: dict[str, Any]
    attempt: int = 0


current_decision: ContextVar[DecisionRequest | None] = ContextVar("kgmem_current_decision", default=None)


# --------------------------------------------------------------------------------------------
# calling the model


def _as_messages(prompt: str | Sequence[BaseMessage]) -> list[BaseMessage]:
    if isinstance(prompt, str):
        return [HumanMessage(prompt)]
    return list(prompt)


_JSON_BLOCK = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
MAX_REPLY_CHARS = 20_000   # a decision's JSON is small: longer replies are cut before parsing
MAX_TEXT_CHARS = 4_000     # free-text replies (answers, summaries) are cut to this many characters
MAX_JSON_DEPTH = 32        # deeper nesting is malformed output, not something to recurse into
_MAX_JSON_STARTS = 64      # positions tried when the JSON value is embedded in prose


class MalformedOutput(ValueError):
    """Model output that cannot be read as the JSON a decision needs (too deep, none found ...)."""


def _nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting in ``text`` (brackets inside strings count too: an upper bound)."""
    depth = best = 0
    for ch in re.findall(r"[\[\]{}]", text):
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif depth:
            depth -= 1
    return best


def parse_json_object(text: str) -> Any:
    """Parse the first JSON value in ``text`` (bare, fenced, or embedded in prose).

    Raises :class:`MalformedOutput` (a ``ValueError``) when there is none, when the text nests
    deeper than :data:`MAX_JSON_DEPTH`, or when the parser gives up (``RecursionError``, an integer
    too long to convert). Only the first :data:`MAX_REPLY_CHARS` characters are read.
    """
    if not isinstance(text, str):
        raise MalformedOutput(f"model output is {type(text).__name__}, not text")
    text = text[:MAX_REPLY_CHARS].strip()
    if _nesting_depth(text) > MAX_JSON_DEPTH:
        raise MalformedOutput(f"model output nests JSON deeper than {MAX_JSON_DEPTH} levels: {text[:80]!r}")
    candidates = [m.group(1) for m in _JSON_BLOCK.finditer(text)] + [text]
    for cand in candidates:
        try:
            return json.loads(cand)
        except (ValueError, TypeError, RecursionError):  # JSONDecodeError is a ValueError
            pass
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch in "{["][:_MAX_JSON_STARTS]
    for i in starts:
        try:
            obj, _ = decoder.raw_decode(text[i:])
            return obj
        except (ValueError, RecursionError):
            continue
    raise MalformedOutput(f"no JSON object found in model output: {text[:200]!r}")


def schema_instructions(schema: type[BaseModel]) -> str:
    return (
        "Answer with one JSON object only, no prose, matching this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), sort_keys=True)
    )


def _usage_of(raw: BaseMessage | None, messages: list[BaseMessage]) -> tuple[int, int, bool]:
    """(prompt tokens, completion tokens, whether the server reported them)."""
    meta = getattr(raw, "usage_metadata", None) if raw is not None else None
    if isinstance(meta, dict):
        p, c = meta.get("input_tokens"), meta.get("output_tokens", 0)
        if all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10**9 for x in (p, c)):
            return p, c, True  # the provider's own count, when it is a plausible one
    prompt = count_message_tokens(messages)
    completion = count_tokens(message_text(raw)) if raw is not None else 0
    return prompt, completion, False


def _is_model_failure(exc: BaseException) -> bool:
    """Whether an exception raised by a model call is the model's failure (provider error, timeout,
    bad request), to be retried and then fallen back from. LangGraph's control flow (interrupts)
    and assertion failures (a test script run dry, a broken invariant) are not: they propagate."""
    from langgraph.errors import GraphBubbleUp

    return isinstance(exc, Exception) and not isinstance(exc, (GraphBubbleUp, AssertionError))


def _clean_reply(text: str, limit: int) -> str:
    """A model's text cut to ``limit`` characters, lone surrogates replaced (they cannot be sent back)."""
    return text[:limit].encode("utf-8", "replace").decode("utf-8")


class _ModelCallFailed(Exception):
    """The model's own call raised (its cause): retried, then the decision falls back."""


def _as_call_failure(exc: Exception) -> NoReturn:
    """Re-raise a failed model call: the model's own failures as :class:`_ModelCallFailed` (retried,
    then fallen back from), anything else (interrupts, this module's bugs) as it is."""
    if not _is_model_failure(exc):
        raise exc
    raise _ModelCallFailed(f"model call failed: {describe_error(exc)}") from exc


@dataclass
class ModelCall:
    """A model call that a decision's steps (a generator, see :func:`drive`) ask their driver to make."""

    runnable: Any
    messages: list[BaseMessage]
    policy: RetryPolicy | None = None


def drive(steps: Generator[Any, Any, R], perform: Callable[[Any], Any] | None = None) -> R:
    """Run a generator of steps to its return value: each request it yields is performed (default:
    a :class:`ModelCall` made with its retry policy) and the result sent back, or the exception
    thrown in at the ``yield``. One description of a decision serves both :func:`decide` and
    :func:`adecide`; only the driver knows whether calls block."""
    perform = perform or _perform_call
    try:
        request = next(steps)
        while True:
            try:
                result = perform(request)
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which re-raise what they do not handle
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as stop:
        return stop.value
    finally:
        steps.close()   # cancelled or interrupted mid-call: its context blocks unwind here, in this context


async def adrive(steps: Generator[Any, Any, R], perform: Callable[[Any], Awaitable[Any]] | None = None) -> R:
    """:func:`drive` with an async ``perform`` (default: the :class:`ModelCall` made with ``ainvoke``)."""
    perform = perform or _aperform_call
    try:
        request = next(steps)
        while True:
            try:
                result = await perform(request)
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which re-raise what they do not handle
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as stop:
        return stop.value
    finally:
        steps.close()   # cancelled or interrupted mid-call: its context blocks unwind here, in this context


def _perform_call(call: ModelCall) -> Any:
    try:
        return _invoke_with_policy(call.runnable, call.messages, call.policy)
    except Exception as exc:  # noqa: BLE001 - sorted by _as_call_failure
        _as_call_failure(exc)


async def _aperform_call(call: ModelCall) -> Any:
    try:
        return await _ainvoke_with_policy(call.runnable, call.messages, call.policy)
    except Exception as exc:  # noqa: BLE001 - sorted by _as_call_failure
        _as_call_failure(exc)


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
    :data:`~langgraph_kgmem.model_endpoints.STRUCTURED_METHODS`), or ``None`` when the model has
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
    endpoint, never retried). Any other failed call raises :class:`_ModelCallFailed`; this
    module's own bugs propagate."""
    model, policy = _unwrap(model)
    for method in structured_methods(model):
        runnable = _structured_runnable(model, schema, method)
        if runnable is None:
            continue
        msgs = messages if method in ("default", "function_calling") else messages + [
            HumanMessage(schema_instructions(schema))]
        try:
            out = yield ModelCall(runnable, msgs, policy)
        except _ModelCallFailed as exc:
            if method != "prompt" and feature_refusal(exc.__cause__):
                mark_refused(model, method, exc.__cause__)  # type: ignore[arg-type]
                continue
            raise
        return (*_read_structured(out, schema, method), method)
    raise AssertionError("unreachable: the prompt method is always tried")  # pragma: no cover


def fallback_record(step: str, kind: str, error: str | None, raw: str | None = None) -> dict[str, Any]:
    """One entry of ``usage["fallbacks"]``: the step, why (``kind``: ``malformed`` output the schema
    refused, ``invalid`` output the caller's check rejected, ``model_error`` when the call raised,
    or a step's own kind), the error and the raw reply, both cut to 500 characters."""
    # provider errors can quote keys, headers or connection strings: redact before recording
    from langgraph_kgmem.tracing import redact_secrets

    return {"step": step, "kind": kind, "error": redact_secrets(_clean_reply(error or "", 2000))[:500],
            "raw": redact_secrets(_clean_reply(raw or "", 2000))[:500]}


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


def _decide_steps(model: Any, schema: type[T], prompt: str | Sequence[BaseMessage], step: str, offline: Callable[[], T],
                  fallback: Callable[[], T] | None, validate: Callable[[T], str | None] | None,
                  context: dict[str, Any] | None) -> Generator[ModelCall, Any, tuple[T, dict[str, Any]]]:
    if is_offline(model):
        return offline(), offline_usage()
    usage = empty_usage()
    messages = _as_messages(prompt)
    error: str | None = None
    kind = "malformed"
    raw_text: str | None = None
    method: str | None = None
    for attempt in range(2):
        msgs = messages
        if error is not None and kind != "model_error":
            msgs = messages + [
                AIMessage(_clean_reply(raw_text or "", 2_000)),
                HumanMessage(
                    # the error can quote the reply, which can quote a document: data, not instructions
                    f"Your previous answer was not usable: {fence(_clean_reply(error, 1_000), inline=True)}\n"
                    + schema_instructions(schema)
                ),
            ]
        token = current_decision.set(DecisionRequest(step, schema, context or {}, attempt))
        t0 = time.perf_counter()
        raw: BaseMessage | None = None
        try:
            with _counting_attempts() as calls:
                parsed, raw, error, method = yield from _structured_steps(model, schema, msgs)
            kind = "malformed"
        except _ModelCallFailed as exc:
            parsed, error, kind = None, str(exc), "model_error"
        finally:
            current_decision.reset(token)
        seconds = time.perf_counter() - t0
        prompt_toks, completion_toks, reported = _usage_of(raw, msgs)
        usage = merge_usage(usage, call_usage(step, prompt_toks, completion_toks, seconds, max(calls[0], 1),
                                              reported))
        if kind == "model_error" and _unwrap(model)[1] is not None:
            break   # the retry policy has already spent its attempts on this error
        raw_text = message_text(raw) if raw is not None else None
        if parsed is not None and validate is not None:
            error = validate(parsed)
            if error is not None:
                parsed, kind = None, "invalid"
        if parsed is not None:
            record_decision(model, fell_back=False)
            return parsed, merge_usage(usage, decision_usage(method))
    chosen = fallback or offline
    record_decision(model, fell_back=True)
    usage = merge_usage(usage, decision_usage(method))
    usage["fallbacks"] = [fallback_record(step, kind, error, raw_text)]
    return chosen(), usage


def generate(model: Any, prompt: str | Sequence[BaseMessage], *, step: str,
             context: dict[str, Any] | None = None,
             fallback: Callable[[], str] | None = None) -> tuple[str, dict[str, Any]]:
    """Free-text generation (answers, summaries), counted like a decision; the reply is cut to
    :data:`MAX_TEXT_CHARS`. A call that raises is retried once; if the retry fails too,
    ``fallback()`` answers (recorded in ``usage["fallbacks"]``, kind ``model_error``), or, with no
    fallback, :class:`~langgraph_kgmem.errors.KgmemModelError` is raised."""
    if is_offline(model):
        raise KgmemDecisionError(f"step {step!r} needs a model; offline callers must answer extractively")
    usage = decision_usage()
    for attempt in range(2):
        try:
            raw, call = invoke_counted(model, _as_messages(prompt), step=step, context=context, attempt=attempt)
        except KgmemModelError as exc:
            usage = merge_usage(usage, exc.usage)
            if attempt == 0 and _unwrap(model)[1] is None:   # a retry policy has already retried
                continue
            record_decision(model, fell_back=True)
            if fallback is None:
                raise
            usage["fallbacks"] = [fallback_record(step, "model_error", str(exc))]
            return fallback(), usage
        usage = merge_usage(usage, call)
        record_decision(model, fell_back=False)
        return _clean_reply(message_text(raw), MAX_TEXT_CHARS).strip(), usage
    raise AssertionError("unreachable")  # pragma: no cover


def invoke_counted(model: Any, messages: list[BaseMessage], *, step: str, context: dict[str, Any] | None = None,
                   attempt: int = 0) -> tuple[Any, dict[str, Any]]:
    """One plain model call (any runnable taking messages, e.g. a model with bound tools) with the
    decision context set for scripted/oracle models, timed and counted: (raw message, usage).

    A call that raises (a provider error) raises :class:`~langgraph_kgmem.errors.KgmemModelError`
    from it, carrying the failed call's usage as ``.usage``; so does a reply that is no message."""
    model, policy = _unwrap(model)
    token = current_decision.set(DecisionRequest(step, None, context or {}, attempt))
    t0 = time.perf_counter()
    with _counting_attempts() as calls:
        try:
            raw = _invoke_with_policy(model, messages, policy)
        except Exception as exc:  # noqa: BLE001 - filtered: only the model's own failures become KgmemModelError
            if not _is_model_failure(exc):
                raise
            raise KgmemModelError(f"the chat model failed at step {step!r}: {describe_error(exc)}",
                                  call_usage(step, count_message_tokens(messages), 0, time.perf_counter() - t0,
                                             max(calls[0], 1))) from exc
        finally:
            current_decision.reset(token)
    if not isinstance(raw, BaseMessage):
        raise KgmemModelError(f"the chat model returned {type(raw).__name__} at step {step!r}, not a message",
                              call_usage(step, count_message_tokens(messages), 0, time.perf_counter() - t0))
    p, c, reported = _usage_of(raw, messages)
    return raw, call_usage(step, p, c, time.perf_counter() - t0, max(calls[0], 1), reported)


def run_concurrently(calls: Sequence[Callable[[], T]], max_workers: int) -> list[T]:
    """Run independent LLM calls (``decide``/``generate`` closures) in threads; results in input order.

    LLM calls wait on the network, so a node that needs several independent ones (CatRAG's
    per-seed scores) pays for the slowest instead of the sum. The run's context (callbacks, the
    current decision) carries into the threads. ``max_workers <= 1`` runs them one after another.
    """
    if max_workers <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    from langchain_core.runnables.config import ContextThreadPoolExecutor

    with ContextThreadPoolExecutor(max_workers=min(max_workers, len(calls))) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


def render(template: str, **values: Any) -> str:
    """Strict prompt rendering: a missing variable names the template's first line."""
    try:
        return template.format(**values)
    except KeyError as exc:
        head = template.strip().splitlines()[0][:60] if template.strip() else "<empty>"
        raise KgmemDecisionError(f"prompt template {head!r} needs variable {exc.args[0]!r}") from exc

