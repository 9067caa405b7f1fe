"""``tools/method_scale.py --dataset D``: each method's first and steady question on a shipped
set's pooled benchmark KG, asked that set's own questions.

The synthetic KGs ``method_scale`` grows answer one kind of question about one-sentence
documents; the benchmark sets' KGs are what the methods are judged on (the pooled MuSiQue-type
KG of 100 questions holds 1,839 passages). The pristine KG comes from the benchmark cache
(:func:`benchlib.corpus.build_corpus`, built once per passages, embedding and extractor) and is
copied into a temporary directory, with AutoPrunedRetriever's codebook synced as
``benchlib.apr_curve`` syncs it (:func:`benchlib.codebook_cache.synced_copy`, cached as well), so
nothing a run memorises reaches the cache. A query worker then opens the copy and asks, per
method, callers' lists of the set's questions: each method its own slice (so no method finds
another's runs of the same question), the first question of each caller cold.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from benchlib import corpus as corpora
from benchlib.datasets import load_questions, pooled_passages


def dataset_kg(dataset: str, pool: int, embeddings: str, workdir: Path, methods: list[str]) -> dict[str, Any]:
    """Copy ``dataset``'s pooled KG of its first ``pool`` questions into ``workdir`` (the codebook
    synced when AutoPrunedRetriever is measured); returns the KG directory, its size and the
    questions' texts."""
    from langgraph_kgmem.embeddings import get_embeddings

    from benchlib.codebook_cache import synced_copy

    questions = load_questions(dataset, pool)
    emb = get_embeddings(embeddings)
    built = corpora.build_corpus(pooled_passages(dataset, questions), emb, log=print)
    if "autopruned" in methods:
        kg = synced_copy(built, workdir, emb, log=print, phrase_facts="always")
    else:
        kg = corpora.open_working_copy(built, workdir, emb)
    try:
        info = {"passages": built.passages, "nodes": kg.node_count(), "edges": kg.edge_count()}
    finally:
        kg.close()
    return {"target": str(workdir / "kg"), "questions": [q.question for q in questions], **info}


def slices(texts: list[str], method_index: int, callers: int, per_caller: int) -> list[list[str]]:
    """``callers`` lists of ``per_caller`` of the set's questions, a slice of its own per method.

    Raises:
        SystemExit: the set has too few questions for every method's slice."""
    n = callers * per_caller
    start = method_index * n
    if start + n > len(texts):
        raise SystemExit(f"--dataset: {len(texts)} questions cannot give each method {n} of its own; "
                         f"ask fewer --questions or --clients, or a larger --pool")
    picked = texts[start:start + n]
    return [picked[c::callers] for c in range(callers)]


def run_dataset(args: argparse.Namespace, methods: list[str], clients: list[int], tmp: str) -> list[dict]:
    """One row per method and caller count on the set's KG (embedded backend), printed as measured."""
    import json

    from benchlib.scale_clients import QueryWorker

    kg = dataset_kg(args.dataset, args.pool, args.embeddings, Path(tmp) / "dataset", methods)
    print(f"{args.dataset}: {kg['passages']} passages ({kg['nodes']} nodes, {kg['edges']} edges)", flush=True)
    rows: list[dict] = []
    worker = QueryWorker(kg["target"], corpora.KG_NAME, args.embeddings)
    try:
        for i, m in enumerate(methods):
            for j, n in enumerate(clients):
                qs = slices(kg["questions"], i * len(clients) + j, n, args.questions + 1)
                rows.append({"backend": "embedded", "dataset": args.dataset, "method": m,
                             "passages": kg["passages"], "clients": n, "open_s": worker.open_s, **worker.ask(m, qs),
                             "load": round(os.getloadavg()[0], 1)})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        worker.close()
    return rows
