"""``bench.py --graph-quality``: how well the KG itself connects questions to their evidence.

Every graph method walks the KG from the entities a question names, so a gold passage that no
short path joins to those entities is one no walk finds. This measure needs no method and no
decider: for each question of a QA set, on the set's pooled KG (built with the offline extractor,
as the benchmark builds it),

1. **link** the question the way CatRAG's offline anchoring does: the spans
   :func:`~langgraph_kgmem.ingest.extract.offline_entities` finds in the question, each to the
   entity of the same name, else to the nearest entity by embedding when its cosine is at least
   :data:`ANCHOR_THRESHOLD` (CatRAG's ``anchor_threshold`` default);
2. walk out from the linked entities over the graph of entities and passages: a *hop* is one
   relation edge (entity to entity) or one context edge (entity to the passage it occurs in);
   a passage's anchor node counts as the passage;
3. report, per hop limit 1, 2 and 3, the share of the question's gold supporting passages that
   the walk reaches (``reach@2`` is the headline: a bridge entity's passage is two hops from a
   question entity related to it), averaged over questions; and ``spread@2``, the share of all
   the KG's passages within two hops (a graph that joins everything to everything reaches every
   gold passage and guides no walk: reach is worth as much as it exceeds spread).

Also reported: the share of questions with at least one linked entity, linked entities per
question, and the KG's size (entities, relation edges, context edges), so a change to extraction
shows what it bought and what it cost in graph size. Numbers are printed as a Markdown table and
written as JSON (``--json``, default ``bench_output/graph-quality-<dataset>.json``).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from benchlib import corpus as corpora
from benchlib.api import BenchQuestion
from benchlib.datasets import dataset_label, load_questions, pooled_passages

ANCHOR_THRESHOLD = 0.5
HOP_LIMITS = (1, 2, 3)
WALK_EDGE_KINDS = ("relation", "context", "anchor_chunk")


def link_question(kg: Any, question: str, *, threshold: float = ANCHOR_THRESHOLD) -> list[str]:
    """Entity ids the question names, found as CatRAG's offline anchoring finds them."""
    from langgraph_kgmem.ingest.extract import offline_entities
    from langgraph_kgmem.kg.types import entity_id

    linked: list[str] = []
    for name in dict.fromkeys(n.strip() for n in offline_entities(question) if n.strip()):
        node = kg.node(entity_id(name))
        if node is None or node.kind != "entity":
            hits = kg.nearest(name, 1, kinds=("entity",))
            if not hits or hits[0][1] < threshold:
                continue
            node = hits[0][0]
        linked.append(node.id)
    return list(dict.fromkeys(linked))


def walk_graph(kg: Any) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The undirected adjacency the walk uses (entities and chunks; an anchor folded into its
    chunk) and each chunk's passage title."""
    fold: dict[str, str] = {}
    for e in kg.edges("anchor_chunk"):
        fold[e.src] = e.dst
    adj: dict[str, set[str]] = defaultdict(set)
    for kind in ("relation", "context"):
        for e in kg.edges(kind):
            a, b = fold.get(e.src, e.src), fold.get(e.dst, e.dst)
            if a != b:
                adj[a].add(b)
                adj[b].add(a)
    titles = {n.id: str(n.attrs.get("title") or "") for n in kg.nodes("chunk")}
    return adj, titles


def reached_within(adj: dict[str, set[str]], seeds: Iterable[str], hops: int) -> dict[str, int]:
    """Node -> its hop distance from the nearest seed, for every node at most ``hops`` away."""
    dist = {s: 0 for s in seeds}
    frontier = list(dist)
    for d in range(1, hops + 1):
        nxt = []
        for u in frontier:
            for v in adj.get(u, ()):
                if v not in dist:
                    dist[v] = d
                    nxt.append(v)
        frontier = nxt
    return dist


def question_reach(adj: dict[str, set[str]], chunks_by_title: dict[str, list[str]], linked: Sequence[str],
                   gold_titles: Sequence[str], chunk_ids: set[str] | dict[str, str]) -> tuple[dict[int, float], int]:
    """Per hop limit, the share of ``gold_titles`` with a chunk within that many hops of ``linked``
    (empty when no gold title is in the KG); and how many chunks lie within two hops."""
    gold = [t for t in dict.fromkeys(gold_titles) if chunks_by_title.get(t)]
    dist = reached_within(adj, linked, max(HOP_LIMITS))
    spread = sum(1 for c, d in dist.items() if d <= 2 and c in chunk_ids)
    if not gold:
        return {}, spread
    out = {}
    for h in HOP_LIMITS:
        hit = sum(any(dist.get(c, h + 1) <= h for c in chunks_by_title[t]) for t in gold)
        out[h] = hit / len(gold)
    return out, spread


def measure(kg: Any, questions: Sequence[BenchQuestion]) -> dict[str, Any]:
    """The graph-quality figures of ``kg`` for ``questions`` (see the module docstring)."""
    adj, titles = walk_graph(kg)
    chunks_by_title: dict[str, list[str]] = defaultdict(list)
    for cid, t in titles.items():
        chunks_by_title[t].append(cid)
    sums = {h: 0.0 for h in HOP_LIMITS}
    scored = linked_any = linked_total = spread = 0
    for q in questions:
        linked = link_question(kg, q.question)
        linked_total += len(linked)
        linked_any += bool(linked)
        reach, near = question_reach(adj, chunks_by_title, linked, q.supporting_titles, titles)
        spread += near
        if reach:
            scored += 1
            for h in HOP_LIMITS:
                sums[h] += reach[h]
    stats = kg.stats()
    row: dict[str, Any] = {
        "questions": len(questions), "scored": scored,
        "linked_share": round(linked_any / len(questions), 4) if questions else None,
        "linked_per_question": round(linked_total / len(questions), 2) if questions else None,
        "entities": stats["nodes_by_kind"].get("entity", 0),
        "relation_edges": stats["edges_by_kind"].get("relation", 0),
        "context_edges": stats["edges_by_kind"].get("context", 0),
    }
    for h in HOP_LIMITS:
        row[f"reach@{h}"] = round(sums[h] / scored, 4) if scored else None
    # a graph where everything is two hops from everything reaches every gold passage and
    # tells a walk nothing: the share of all passages within two hops shows that
    row["spread@2"] = round(spread / len(questions) / max(1, len(titles)), 4) if questions else None
    return row


def run_graph_quality(args: Any) -> int:
    """The ``--graph-quality`` entry point: one row for ``args.dataset``'s pooled KG."""
    from benchlib.common import OUTPUT_DIR, log, make_embeddings

    emb = make_embeddings(args.embeddings)
    questions = load_questions(args.dataset, args.questions, args.seed)
    passages = pooled_passages(args.dataset, questions)
    built = corpora.build_corpus(passages, emb, backend=args.backend, log=log)
    log(f"pooled KG: {built.passages} passages ({'cached' if built.cached else f'built in {built.build_seconds:.1f}s'})")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        kg = corpora.open_working_copy(built, Path(tmp), emb, backend=args.backend)
        try:
            row = measure(kg, questions)
        finally:
            kg.close()
    row = {"dataset": dataset_label(args.dataset), "passages": built.passages, **row,
           "build_seconds_first_time": round(built.build_seconds, 2), "measure_seconds": round(time.perf_counter() - t0, 2)}
    out = Path(args.json) if args.json else OUTPUT_DIR / f"graph-quality-{dataset_label(args.dataset)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"results": [row], "meta": {"embeddings": args.embeddings, "backend": args.backend,
                                                          "anchor_threshold": ANCHOR_THRESHOLD}}, indent=1))
    print(markdown(row))
    print(f"\nwritten to {out}")
    return 0


def markdown(row: dict[str, Any]) -> str:
    keys = ["dataset", "questions", "passages", "linked_share", "linked_per_question", "reach@1", "reach@2",
            "reach@3", "spread@2", "entities", "relation_edges", "context_edges", "build_seconds_first_time"]
    return "| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n| " + \
        " | ".join("" if row.get(k) is None else str(row[k]) for k in keys) + " |"
