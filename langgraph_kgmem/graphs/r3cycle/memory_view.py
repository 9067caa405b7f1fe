"""R3-Cycle's memory kinds as ``kgmem memory`` shows them: reflections (the question, what went
wrong and the advice kept for next time) and trajectories (the question, answer and outcome of
each attempt)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_kgmem.memory.kinds import MemoryKind
from langgraph_kgmem.memory.view import cut

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def describe_reflection(kg: "KnowledgeGraph", key: str, value: dict[str, Any]) -> dict[str, Any]:
    """One reflection as a person reads it."""
    return {"question": value.get("question", ""), "attempt": value.get("attempt"),
            "failure": value.get("failure_type", ""), "answer": value.get("answer"),
            "root_cause": value.get("root_cause", ""), "advice": value.get("advice", "")}


def format_reflection(r: dict[str, Any]) -> list[str]:
    """A described reflection's lines in ``kgmem memory``."""
    return [f"  Q: {cut(r['question'], 120)}  (attempt {r['attempt']}, {r['failure'] or 'no failure'})",
            f"      answered {cut(r['answer'], 60)!s}; why it failed: {cut(r['root_cause'])}",
            f"      advice kept: {cut(r['advice'])}"]


def describe_trajectory(kg: "KnowledgeGraph", key: str, value: dict[str, Any]) -> dict[str, Any]:
    """One trajectory as a person reads it."""
    return {"question": value.get("question", ""), "attempt": value.get("attempt"),
            "answer": value.get("answer"), "outcome": value.get("outcome"), "steps": len(value.get("steps", []))}


def format_trajectory(r: dict[str, Any]) -> list[str]:
    """A described trajectory's lines in ``kgmem memory``."""
    return [f"  Q: {cut(r['question'], 120)}  (attempt {r['attempt']}, {r['steps']} step(s))",
            f"      answer {cut(r['answer'], 80)}; outcome {r['outcome']}"]


REFLECTIONS = MemoryKind(label="reflections", short="reflection",
                         title="R3-Cycle reflections: lessons from failed attempts",
                         describe=describe_reflection, format=format_reflection)
TRAJECTORIES = MemoryKind(label="trajectories", short="trajectory",
                          title="R3-Cycle trajectories: the steps of each attempt",
                          describe=describe_trajectory, format=format_trajectory)
