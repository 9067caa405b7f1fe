"""Shared parts of the passage-retrieval baselines (``dense``, ``bm25``).

Both rank the KG's chunk nodes (a benchmark passage is one chunk unless it is longer than the
chunk size) as ``"title\\ntext"`` and hand the top :data:`ANSWER_K` passages to the same answer
step as the KG methods (``graphs.common.ANSWER_PROMPT``):

- ``offline``: the methods' short answer (``graphs.answering.offline_answer``, with no path; no
  LLM call). The prompt an LLM answer *would* need is still built and counted
  (``api.with_offline_answer_prompt``, as every method's adapter does), and reported as
  ``prompt_tokens`` (``llm_calls`` stays 0: calls actually made).
- ``oracle`` / ``llm``: one real call through ``llm.generate``; usage is what the call reports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from langgraph_kgmem.graphs.answering import offline_answer
from langgraph_kgmem.graphs.common import evidence_item
from langgraph_kgmem.llm import empty_usage, generate, is_offline

from benchlib.api import (BenchContext, BenchQuestion, MethodResult, Responder, answer_prompt, oracle_answer,
                          with_offline_answer_prompt)

ANSWER_K = 5          # passages handed to the answer step
RANK_DEPTH = 20       # ranked passage units reported (Recall@k needs k ≤ this)


@dataclass
class PassageTable:
    """The corpus' passage units: chunk ids, their titles, and the text that gets indexed."""

    ids: list[str]
    titles: list[str]
    texts: list[str]          # "title\ntext"


def passage_table(kg: Any) -> PassageTable:
    chunks = sorted(kg.nodes("chunk"), key=lambda n: (n.attrs.get("doc_id", ""), n.attrs.get("index", 0), n.id))
    titles = [str(n.attrs.get("title") or "") for n in chunks]
    return PassageTable([n.id for n in chunks], titles,
                        [f"{t}\n{n.text}" if t else n.text for t, n in zip(titles, chunks)])


def answer_from_passages(ctx: BenchContext, q: BenchQuestion, model: Any, chunk_ids: Sequence[str],
                         method: str) -> MethodResult:
    """The shared answer step: builds the ANSWER_PROMPT over the top :data:`ANSWER_K` of the ranked
    ``chunk_ids`` and counts it; the ranking is reported to :data:`RANK_DEPTH` units, repeats of a
    title kept (the grading reads passages, not titles)."""
    kg = ctx.kg
    evidence = [evidence_item(kg, cid) for cid in chunk_ids[:ANSWER_K]]
    prompt = answer_prompt(q.question, evidence)
    if is_offline(model):
        t0 = time.perf_counter()
        # the methods' shared answer step, reading the next passages of the ranking as CatRAG does
        further = [evidence_item(kg, cid) for cid in chunk_ids[ANSWER_K:2 * ANSWER_K]]
        answer = offline_answer(q.question, evidence + further).answer
        usage = with_offline_answer_prompt(empty_usage(), model, prompt)  # would-be prompt, not sent
        extra = {"answer_ms": (time.perf_counter() - t0) * 1000.0}
    else:
        answer, usage = generate(model, prompt, step="answer",
                                 context={"question": q.question, "evidence_ids": [e["id"] for e in evidence],
                                          "evidence_texts": [e["text"] for e in evidence], "method": method})
        extra = {}
    return MethodResult(retrieved_ids=list(chunk_ids[:RANK_DEPTH]), answer=answer, usage=usage, retrieved_count=len(evidence),
                        extra=extra)


def passage_oracle(ctx: BenchContext, q: BenchQuestion) -> Responder:
    """A competent reader: answers with the gold answer when the evidence it was shown contains it."""

    def respond(messages: list[Any], request: Any) -> str:
        texts = list((getattr(request, "context", None) or {}).get("evidence_texts") or [])
        return oracle_answer(q.answer, texts)

    return respond


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first; ties broken by index (deterministic)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return part[np.lexsort((part, -scores[part]))]
