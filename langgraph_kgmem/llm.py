"""LLM decisions, model resolution and usage accounting.

Every decision point of every method goes through :func:`decide`: it asks the model for a typed
(pydantic) answer, retries once on malformed or invalid output, then takes the caller's documented
fallback and records that it did. With ``model="offline"`` the decision point's own offline policy
answers instead (no LLM call at all). Every call is counted: calls, prompt/completion tokens and
seconds, per step, in a *usage* dict that graph states merge with :func:`merge_usage`.
"""

from __future__ import annotations

import json
import os
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Literal, Sequence, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError

from langgraph_kgmem.errors import ConfigurationError, KgmemDecisionError

T = TypeVar("T", bound=BaseModel)
OFFLINE: Literal["offline"] = "offline"
ModelLike = BaseChatModel | str | None

# --------------------------------------------------------------------------------------------
# model resolution


_RESOLVED: dict[str, BaseChatModel] = {}


def resolve_model(model: ModelLike, *, required: bool = True) -> BaseChatModel | Literal["offline"] | None:
    """Turn ``model`` into a chat model, the ``"offline"`` marker, or ``None``.

    ``None`` reads ``$KGMEM_MODEL`` (a provider string such as ``openai:gpt-4o-mini``; an
    OpenAI-compatible server is reached with ``OPENAI_BASE_URL``). With nothing configured and
    ``required`` set, a :class:`ConfigurationError` names what to set.
    """
    if isinstance(model, BaseChatModel):
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
    cached = _RESOLVED.get(model)
    if cached is not None:  # one client per provider string, not one per node of every run
        return cached
    from langchain.chat_models import init_chat_model

    try:
        _RESOLVED[model] = init_chat_model(model)
        return _RESOLVED[model]
    except Exception as exc:
        raise ConfigurationError(
            f"Could not create chat model {model!r}: {exc}. Set KGMEM_MODEL to a provider string "
            "such as 'openai:gpt-4o-mini' and the provider's key (OPENAI_API_KEY), or use 'offline'."
        ) from exc


def is_offline(model: Any) -> bool:
    return model == OFFLINE


def model_label(model: Any) -> str:
    if is_offline(model):
        return "offline (no LLM: heuristic decisions, extractive answers)"
    return getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__


# --------------------------------------------------------------------------------------------
# token counting


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)


TOKEN_ENCODING = os.environ.get("KGMEM_TOKEN_ENCODING", "o200k_base")


def count_tokens(text: str, encoding: str | None = None) -> int:
    """Tokens of ``text`` under o200k_base (or ``encoding``), counted offline with bpe-openai."""
    if not text:
        return 0
    return len(_encoding(encoding or TOKEN_ENCODING).encode(text))


def message_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        text = content
    else:
        text = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    calls = getattr(msg, "tool_calls", None) or []
    if calls:
        text += json.dumps([{"name": c["name"], "args": c["args"]} for c in calls], sort_keys=True)
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
        for key in ("llm_calls", "prompt_tokens", "completion_tokens", "offline_decisions"):
            out[key] += int(part.get(key, 0))
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


def call_usage(step: str, prompt: int, completion: int, seconds: float) -> dict[str, Any]:
    """The usage record of one LLM call made at ``step`` (merge records with :func:`merge_usage`)."""
    u = empty_usage()
    u.update(llm_calls=1, prompt_tokens=prompt, completion_tokens=completion, llm_seconds=seconds,
             max_prompt_tokens=prompt)
    u["by_step"] = {step: {"llm_calls": 1, "prompt_tokens": prompt, "completion_tokens": completion,
                           "llm_seconds": seconds}}
    return u


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


def parse_json_object(text: str) -> Any:
    """Parse the first JSON value in ``text`` (bare, fenced, or embedded in prose)."""
    text = text.strip()
    candidates = [m.group(1) for m in _JSON_BLOCK.finditer(text)] + [text]
    for cand in candidates:
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, TypeError):
            pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                obj, _ = decoder.raw_decode(text[i:])
                return obj
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object found in model output: {text[:200]!r}")


def schema_instructions(schema: type[BaseModel]) -> str:
    return (
        "Answer with one JSON object only, no prose, matching this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), sort_keys=True)
    )


def _usage_of(raw: BaseMessage | None, messages: list[BaseMessage]) -> tuple[int, int]:
    meta = getattr(raw, "usage_metadata", None) if raw is not None else None
    if meta and meta.get("input_tokens") is not None:
        return int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
    prompt = count_message_tokens(messages)
    completion = count_tokens(message_text(raw)) if raw is not None else 0
    return prompt, completion


def _structured_call(model: BaseChatModel, schema: type[T], messages: list[BaseMessage]) -> tuple[T | None, BaseMessage | None, str | None]:
    """One call; returns (parsed, raw message, error text)."""
    try:
        runnable = model.with_structured_output(schema, include_raw=True)
    except (NotImplementedError, TypeError, ValueError):
        runnable = None
    if runnable is not None:
        out = runnable.invoke(messages)
        raw, parsed, err = out.get("raw"), out.get("parsed"), out.get("parsing_error")
        if parsed is not None and not isinstance(parsed, schema):
            try:
                parsed = schema.model_validate(parsed)
            except ValidationError as exc:
                return None, raw, str(exc)
        if parsed is None:
            text = message_text(raw) if raw is not None else ""
            # some providers answer in text even when asked for a tool call: parse it
            try:
                return schema.model_validate(parse_json_object(text)), raw, None
            except (ValueError, ValidationError) as exc:
                return None, raw, str(err or exc)
        return parsed, raw, None
    raw = model.invoke(messages + [HumanMessage(schema_instructions(schema))])
    try:
        return schema.model_validate(parse_json_object(message_text(raw))), raw, None
    except (ValueError, ValidationError) as exc:
        return None, raw, str(exc)


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
    - otherwise: one structured call; if the output is malformed or ``validate`` rejects it (e.g.
      a node id the model invented), the model is asked once more with the error; if that fails
      too, ``fallback()`` (default: ``offline()``) answers and the fallback is recorded in
      ``usage["fallbacks"]``. A decision therefore always has a safe answer.
    - ``context``: structured facts about the decision (candidates and their ids) that scripted
      and oracle models in tests and benchmarks read; real models see only the prompt.
    """
    if is_offline(model):
        return offline(), offline_usage()
    usage = empty_usage()
    messages = _as_messages(prompt)
    error: str | None = None
    raw_text: str | None = None
    for attempt in range(2):
        msgs = messages
        if error is not None:
            msgs = messages + [
                AIMessage(raw_text or ""),
                HumanMessage(
                    f"Your previous answer was not usable: {error}\n" + schema_instructions(schema)
                ),
            ]
        token = current_decision.set(DecisionRequest(step, schema, context or {}, attempt))
        t0 = time.perf_counter()
        try:
            parsed, raw, error = _structured_call(model, schema, msgs)
        finally:
            current_decision.reset(token)
        seconds = time.perf_counter() - t0
        prompt_toks, completion_toks = _usage_of(raw, msgs)
        usage = merge_usage(usage, call_usage(step, prompt_toks, completion_toks, seconds))
        raw_text = message_text(raw) if raw is not None else None
        if parsed is not None and validate is not None:
            error = validate(parsed)
            if error is not None:
                parsed = None
        if parsed is not None:
            return parsed, usage
    chosen = fallback or offline
    usage["fallbacks"] = [{"step": step, "error": (error or "")[:500], "raw": (raw_text or "")[:500]}]
    return chosen(), usage


def generate(model: Any, prompt: str | Sequence[BaseMessage], *, step: str,
             context: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """Free-text generation (answers, summaries), counted like a decision."""
    if is_offline(model):
        raise KgmemDecisionError(f"step {step!r} needs a model; offline callers must answer extractively")
    raw, usage = invoke_counted(model, _as_messages(prompt), step=step, context=context)
    return message_text(raw).strip(), usage


def invoke_counted(model: Any, messages: list[BaseMessage], *, step: str, context: dict[str, Any] | None = None,
                   attempt: int = 0) -> tuple[Any, dict[str, Any]]:
    """One plain model call (any runnable taking messages, e.g. a model with bound tools) with the
    decision context set for scripted/oracle models, timed and counted: (raw message, usage)."""
    token = current_decision.set(DecisionRequest(step, None, context or {}, attempt))
    t0 = time.perf_counter()
    try:
        raw = model.invoke(messages)
    finally:
        current_decision.reset(token)
    p, c = _usage_of(raw, messages)
    return raw, call_usage(step, p, c, time.perf_counter() - t0)


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

