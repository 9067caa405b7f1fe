"""Baseline ``dense``: cosine top-k over passage embeddings (the KG's embedding model).

Each passage is embedded once per corpus as ``"title\\ntext"`` with ``kg.embed_texts`` (the
local model's on-disk embedding cache makes later runs free); a question is one matrix-vector
product. The top 5 passages go to the shared answer step (see ``benchlib.passage_rag``).
"""

from __future__ import annotations

import time
from typing import Any

from benchlib.api import BenchContext, BenchQuestion, MethodResult, Responder
from benchlib.passage_rag import RANK_DEPTH, answer_from_passages, passage_oracle, passage_table, top_indices


class DenseAdapter:
    name = "dense"
    corpus = "per-question"
    datasets = None

    def setup(self, ctx: BenchContext) -> None:
        table = passage_table(ctx.kg)
        t0 = time.perf_counter()
        mat = ctx.kg.embed_texts(table.texts) if table.texts else None
        if mat is not None and len(mat):
            mat = mat / (((mat ** 2).sum(axis=1, keepdims=True)) ** 0.5).clip(min=1e-9)
        ctx.cache["dense"] = (table, mat)
        ctx.cache["dense_index_seconds"] = time.perf_counter() - t0

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        table, mat = ctx.cache["dense"]
        if mat is None:
            return MethodResult(retrieved_ids=[], answer="no answer", retrieved_count=0)
        scores = mat @ ctx.kg.embed_query(q.question)
        order = top_indices(scores, RANK_DEPTH)
        return answer_from_passages(ctx, q, model, [table.ids[i] for i in order], self.name)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return passage_oracle(ctx, q)


ADAPTERS = [DenseAdapter()]
