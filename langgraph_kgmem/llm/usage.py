"""Usage accounting: what every model call and decision cost, as one mergeable dict per run.

A *usage* dict counts LLM calls, prompt/completion tokens and seconds, per step, and the decisions
put to a model or answered offline; ``fallbacks`` lists every decision that took its fallback
(:func:`fallback_record`). Graph states merge updates with :func:`merge_usage` (their ``usage``
reducer); :func:`decision_summary` says how many decisions the model made and how many fell back.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from langgraph_kgmem.llm.parsing import clean_reply
from langgraph_kgmem.llm.tokens import count_message_tokens, count_tokens, message_text
from langgraph_kgmem.redaction import redact_secrets

_COUNTERS = ("llm_calls", "prompt_tokens", "completion_tokens", "offline_decisions", "model_decisions",
             "tokens_reported", "tokens_counted")


def empty_usage() -> dict[str, Any]:
    """A usage dict with every counter at zero."""
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
        for key in _COUNTERS:
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


def reply_tokens(raw: BaseMessage | None, messages: list[BaseMessage]) -> tuple[int, int, bool]:
    """(prompt tokens, completion tokens, whether the server reported them) of one call: the
    provider's own figures when the reply carries plausible ones, else counted here."""
    meta = getattr(raw, "usage_metadata", None) if raw is not None else None
    if isinstance(meta, dict):
        p, c = meta.get("input_tokens"), meta.get("output_tokens", 0)
        if all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10**9 for x in (p, c)):
            return p, c, True  # the provider's own count, when it is a plausible one
    prompt = count_message_tokens(messages)
    completion = count_tokens(message_text(raw)) if raw is not None else 0
    return prompt, completion, False


def decision_usage(method: str | None = None) -> dict[str, Any]:
    """The usage record of one decision put to a model (``model_decisions``; whether it fell back is
    in ``fallbacks``), with the structured-output method that carried it, if any."""
    u = empty_usage()
    u["model_decisions"] = 1
    if method:
        u["structured_output"] = {method: 1}
    return u


def offline_usage() -> dict[str, Any]:
    """The usage record of one decision made by an offline heuristic (no LLM call)."""
    u = empty_usage()
    u["offline_decisions"] = 1
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


def fallback_record(step: str, kind: str, error: str | None, raw: str | None = None) -> dict[str, Any]:
    """One entry of ``usage["fallbacks"]``: the step, why (``kind``: ``malformed`` output the schema
    refused, ``invalid`` output the caller's check rejected, ``model_error`` when the call raised,
    or a step's own kind), the error and the raw reply, both cut to 500 characters."""
    # provider errors can quote keys, headers or connection strings: redact before recording
    return {"step": step, "kind": kind, "error": redact_secrets(clean_reply(error or "", 2000))[:500],
            "raw": redact_secrets(clean_reply(raw or "", 2000))[:500]}
