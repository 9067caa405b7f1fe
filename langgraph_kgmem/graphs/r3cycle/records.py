"""R3-Cycle's verifiers and its memory records: verdicts from any verifier, closed attempts, and
the trajectories and reflections a run persists (and :func:`load_run`, which reads them back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from pydantic import BaseModel

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.common import MAX_REASON_CHARS, normalize_answer
from langgraph_kgmem.graphs.r3cycle.schemas import Outcome, Verdict
from langgraph_kgmem.memory import RecordMemory
from langgraph_kgmem.memory.provenance import record_holds
from langgraph_kgmem.storable import storable

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

def exact_match_verifier(gold: str | Sequence[str]) -> Callable[[str, str, list[dict[str, Any]]], Verdict]:
    """A verifier for evaluation: ok iff the normalized answer equals a normalized gold answer."""
    golds = [gold] if isinstance(gold, str) else list(gold)
    if not golds:
        raise KgmemInputError("exact_match_verifier needs at least one gold answer")
    targets = {normalize_answer(g) for g in golds}

    def verify(question: str, answer: str, evidence: list[dict[str, Any]]) -> Verdict:
        ok = normalize_answer(answer) in targets
        return Verdict(ok=ok, reason="matches the gold answer" if ok else f"{answer!r} is not the gold answer")

    return verify


def _reason(text: Any) -> str:
    # a verifier is the caller's code: its reason is normalised like a model's text, since it
    # is stored with the trajectory (and a pydantic string refuses a lone surrogate)
    return storable(str(text)[:MAX_REASON_CHARS], "a verifier's reason", source="model")


def as_verdict(result: Any) -> tuple[Verdict, dict[str, Any]]:
    """Normalize a verifier's result into (Verdict, usage); its reason normalised as model text
    (:func:`~langgraph_kgmem.storable.storable`)."""
    usage: dict[str, Any] = {}
    if isinstance(result, Verdict):
        reason = _reason(result.reason)
        return (result if reason == result.reason else result.model_copy(update={"reason": reason})), usage
    if isinstance(result, bool):
        return Verdict(ok=result, reason="accepted" if result else "rejected by the verifier"), usage
    if isinstance(result, tuple) and len(result) == 2:
        return Verdict(ok=bool(result[0]), reason=_reason(result[1])), usage
    if isinstance(result, BaseModel):
        result = result.model_dump()
    if isinstance(result, dict):
        usage = result.get("usage") or {}
        data = result.get("verdict", result)
        if isinstance(data, BaseModel):
            data = data.model_dump()
        if isinstance(data, dict) and "ok" in data:
            return Verdict(ok=bool(data["ok"]), reason=_reason(data.get("reason", ""))), usage
    raise KgmemInputError(
        f"a verifier must return a Verdict, a bool, (ok, reason) or a dict with 'ok'; got {type(result).__name__}: "
        f"{str(result)[:200]}")


def close_attempt(state: dict[str, Any], outcome: Outcome, verdict: dict[str, Any] | None) -> dict[str, Any]:
    """The record of a finished attempt: its budget, outcome, answer, guidance, steps, path, visited
    nodes and verdict (copies of the state's lists)."""
    return {"attempt": state["attempt"], "budget": state["budget"], "outcome": outcome,
            "answer": state.get("final"), "guidance": state.get("guidance", ""),
            "steps": list(state.get("steps", [])), "path": list(state.get("path", [])),
            "visited": list(state.get("visited", [])), "verdict": verdict}


def load_run(store: "BaseStore", kg_name: str, run_id: str, scope: Sequence[str] = (), *,
             kg: Any = None) -> dict[str, list[dict[str, Any]]]:
    """The persisted trajectories and reflections of one run (``out["run_id"]``), by attempt:
    ``{"trajectories": [...], "reflections": [...]}`` (``scope``: the run's memory scope labels).
    With ``kg``, a record resting on a document version that is gone reads as absent
    (:func:`~langgraph_kgmem.memory.provenance.record_holds`)."""
    trajectories = RecordMemory(store, kg_name, "trajectories", scope)
    reflections = RecordMemory(store, kg_name, "reflections", scope)
    out: dict[str, list[dict[str, Any]]] = {"trajectories": [], "reflections": []}
    attempt = 0
    while (rec := trajectories.get(f"{run_id}-{attempt}")) is not None:
        if kg is None or record_holds(kg, rec):
            out["trajectories"].append(rec)
        attempt += 1
    for n in range(attempt):
        if (ref := reflections.get(f"{run_id}-{n}")) is not None and (kg is None or record_holds(kg, ref)):
            out["reflections"].append(ref)
    return out
