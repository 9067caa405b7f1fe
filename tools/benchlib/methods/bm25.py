"""Baseline ``bm25``: lexical ranking with the maintained ``bm25s`` package (Lucene BM25,
k1=1.5, b=0.75, English stopwords, no stemming), over the same passage units as ``dense``.

Passages with a zero score (no query term in common) are not reported as retrieved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchlib.api import BenchContext, BenchQuestion, MethodResult, Responder
from benchlib.passage_rag import RANK_DEPTH, answer_from_passages, passage_oracle, passage_table


class BM25Adapter:
    name = "bm25"
    corpus = "per-question"
    datasets = None

    def setup(self, ctx: BenchContext) -> None:
        import bm25s
        from bm25s.tokenization import Tokenizer

        table = passage_table(ctx.kg)
        tokenizer = Tokenizer(stopwords="en")
        retriever = None
        if table.texts:
            ids = tokenizer.tokenize(table.texts, return_as="ids", show_progress=False)
            retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
            retriever.index(ids, show_progress=False)
        ctx.cache["bm25"] = (table, tokenizer, retriever)

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        table, tokenizer, retriever = ctx.cache["bm25"]
        order: list[int] = []
        if retriever is not None:
            qids = tokenizer.tokenize([q.question], update_vocab=False, return_as="ids", show_progress=False)
            k = min(len(table.ids), RANK_DEPTH)
            docs, scores = retriever.retrieve(qids, k=k, show_progress=False, n_threads=1)
            docs, scores = np.asarray(docs[0]), np.asarray(scores[0])
            keep = scores > 0
            docs, scores = docs[keep], scores[keep]
            order = [int(d) for d in docs[np.lexsort((docs, -scores))]]  # ties by index: deterministic
        return answer_from_passages(ctx, q, model, [table.ids[i] for i in order], self.name)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return passage_oracle(ctx, q)


ADAPTERS = [BM25Adapter()]
