"""The router's prompt (rendered strictly by ``llm.render``: a missing placeholder is an error).
The question and anything learned from earlier runs enter only through the fence."""

from __future__ import annotations

from typing import Any, Sequence

from langgraph_kgmem.graphs.common import DATA_NOTE, fence

ROUTE_PROMPT = """You choose which retrieval method answers a question over a knowledge graph.
""" + DATA_NOTE + """

The knowledge graph holds: {holds}.
Question form the rules read: {form}.

Question: {question}

Methods you may choose (name: what it is for; expected LLM calls; what past runs showed):
{methods}

Choose the one method most likely to answer correctly at a reasonable cost."""


def method_lines(candidates: Sequence[dict[str, Any]], summaries: dict[str, str]) -> str:
    """One fenced line per candidate method: name, summary, expected calls and the rules' reading."""
    return fence([f"{c['method']}: {summaries.get(c['method'], '')} ~{c['cost']:.1f} calls; {c['why']}"
                  for c in candidates])
