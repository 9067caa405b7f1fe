"""KG performance suite (``python tools/bench.py --perf [--quick] [--json F]``).

1. Personalized PageRank on random graphs with 10k, 100k and 1M edges (nodes = edges / 5,
   uniform random endpoints, weights in [0.5, 1.5]), through ``langgraph_kgmem.kg.ppr`` (the
   functions ``KnowledgeGraph.ppr`` runs on its cached snapshot): snapshot build time once, then
   the median over 20 queries of 5 random seed nodes each (damping 0.5). At 10k edges also
   ``kg.ppr`` end to end on an in-memory KG holding the same graph, and ``networkx.pagerank``
   with the same personalization for the speed ratio (and the largest score difference).
2. Per-query overrides: the same queries with 100 random edge-weight multipliers each.
3. Ingest: 1,000 pre-extracted chunks (HotpotQA passages run through the offline extractor
   beforehand, so extraction is not timed) written with ``kg.add_triples`` into a fresh KG
   directory, once with the hashing embedding, once with the local model and once with ``"fast"``
   (static short texts + the local model for passages), uncached, so the model really runs; time
   inside the embedding model (``kg.embed_seconds``) is split out.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.datasets import DatasetError, load_questions
from benchlib.metrics import median_ms
from benchlib.runner import OUTPUT_DIR, log

SIZES = (10_000, 100_000, 1_000_000)
QUERIES = 20
SEEDS_PER_QUERY = 5
OVERRIDES = 100
INGEST_CHUNKS = 1000


def random_graph(edges: int, rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    n = max(10, edges // 5)
    src = rng.integers(0, n, edges)
    dst = rng.integers(0, n, edges)
    dst = np.where(dst == src, (dst + 1) % n, dst)
    return n, src, dst, rng.uniform(0.5, 1.5, edges)


def ppr_suite(sizes: tuple[int, ...], seed: int) -> list[dict[str, Any]]:
    from langgraph_kgmem.kg.ppr import build_snapshot, personalized_pagerank

    out = []
    for edges in sizes:
        rng = np.random.default_rng(seed)
        n, src, dst, w = random_graph(edges, rng)
        ids = [f"n{i}" for i in range(n)]
        t0 = time.perf_counter()
        snap = build_snapshot(ids, ["entity"] * n, src, dst, w, symmetric=True)
        build_s = time.perf_counter() - t0
        seeds = [rng.choice(n, SEEDS_PER_QUERY, replace=False) for _ in range(QUERIES)]
        plain, with_ov = [], []
        for s in seeds:
            reset = np.zeros(n)
            reset[s] = 1.0
            t0 = time.perf_counter()
            personalized_pagerank(snap, reset, damping=0.5)
            plain.append(time.perf_counter() - t0)
            pick = rng.choice(len(src), OVERRIDES, replace=False)
            ov = {(int(src[k]), int(dst[k])): float(rng.uniform(0.0, 3.0)) for k in pick}
            t0 = time.perf_counter()
            personalized_pagerank(snap, reset, damping=0.5, overrides=ov)
            with_ov.append(time.perf_counter() - t0)
        row: dict[str, Any] = {"edges": edges, "nodes": n, "snapshot_build_ms": round(build_s * 1000, 2),
                               "ppr_median_ms": median_ms(plain, 3), "ppr_with_100_overrides_median_ms": median_ms(with_ov, 3)}
        if edges <= 10_000:
            row.update(_compare_small(ids, src, dst, w, seeds, snap))
        out.append(row)
        log(f"perf: PPR at {edges:,} edges: {row}")
    return out


def _compare_small(ids: list[str], src: np.ndarray, dst: np.ndarray, w: np.ndarray, seeds: list[np.ndarray],
                   snap: Any) -> dict[str, Any]:
    """kg.ppr end to end and networkx.pagerank on the same graph and seeds."""
    import networkx as nx

    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.kg.ppr import personalized_pagerank
    from langgraph_kgmem.kg.types import Edge, Node

    kg = KnowledgeGraph.in_memory(name="perf", embeddings="hash")
    kg.add_nodes([Node(i, "entity", i, {}) for i in ids], embed=False)
    kg.add_edges([Edge(f"e{k}", ids[a], ids[b], "relation", f"r{k}", float(x), {})
                  for k, (a, b, x) in enumerate(zip(src.tolist(), dst.tolist(), w.tolist()))], embed_facts=False)
    t0 = time.perf_counter()
    kg.snapshot()
    kg_build = time.perf_counter() - t0
    kg_times = []
    for s in seeds:
        t0 = time.perf_counter()
        kg.ppr({ids[i]: 1.0 for i in s}, damping=0.5, top_k=10)
        kg_times.append(time.perf_counter() - t0)
    g = nx.DiGraph()
    g.add_nodes_from(range(len(ids)))
    for a, b, x in zip(src.tolist(), dst.tolist(), w.tolist()):  # symmetric walk, parallel edges add up
        for u, v in ((a, b), (b, a)):
            if g.has_edge(u, v):
                g[u][v]["weight"] += x
            else:
                g.add_edge(u, v, weight=x)
    nx_times, diffs = [], []
    for s in seeds:
        pers = {int(i): 1.0 for i in s}
        t0 = time.perf_counter()
        pr = nx.pagerank(g, alpha=0.5, personalization=pers, weight="weight", tol=1e-10, max_iter=500,
                         dangling=pers)
        nx_times.append(time.perf_counter() - t0)
        reset = np.zeros(len(ids))
        reset[s] = 1.0
        ours = personalized_pagerank(snap, reset, damping=0.5, tol=1e-10)
        diffs.append(float(np.max(np.abs(ours - np.array([pr[i] for i in range(len(ids))])))))
    ours_ms = median_ms(kg_times, 3)
    nx_ms = median_ms(nx_times, 3)
    kg.close()
    return {"kg_snapshot_build_ms": round(kg_build * 1000, 2), "kg_ppr_median_ms": ours_ms,
            "networkx_pagerank_median_ms": nx_ms, "networkx_over_kg_ppr": round(nx_ms / ours_ms, 1) if ours_ms else None,
            "max_abs_score_diff_vs_networkx": float(f"{max(diffs):.2e}")}


def ingest_suite(chunks: int, specs: tuple[str, ...]) -> list[dict[str, Any]]:
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.config import get_embeddings
    from langgraph_kgmem.ingest.extract import OfflineExtractor

    try:
        qs = load_questions("hotpotqa")
    except DatasetError as exc:
        log(f"perf: ingest skipped: {exc}")
        return []
    passages = list({(p["title"], p["text"]): p for q in qs for p in q.passages}.values())[:chunks]
    ex = OfflineExtractor()
    t0 = time.perf_counter()
    pre = [(p, ex.extract(p["text"], p["title"])) for p in passages]
    extract_s = time.perf_counter() - t0
    out = []
    for spec in specs:
        emb = get_embeddings(spec, cache=False)
        if spec in ("local", "fast"):
            emb.embed_documents(["warm-up"])  # model load is not ingest time
        if spec == "fast":  # nor is distilling the static part (once per machine, then cached)
            emb.embed_short_texts(["warm-up"])
        with tempfile.TemporaryDirectory() as tmp:
            kg = KnowledgeGraph.open(Path(tmp) / "kg", name="perf", embeddings=emb, vector_backend="memory")
            e0 = kg.embed_seconds
            t0 = time.perf_counter()
            for p, x in pre:
                kg.add_triples(x.triples, text=p["text"], title=p["title"])
            total = time.perf_counter() - t0
            embed = kg.embed_seconds - e0
            stats = kg.stats()
            kg.close()
        row = {"embeddings": spec, "chunks": len(pre), "triples": sum(len(x.triples) for _, x in pre),
               "total_s": round(total, 2), "embedding_s": round(embed, 2), "non_embedding_s": round(total - embed, 2),
               "non_embedding_ms_per_chunk": round((total - embed) / len(pre) * 1000, 2),
               "nodes": stats["nodes"], "edges": stats["edges"],
               "offline_extraction_s_not_included": round(extract_s, 2)}
        out.append(row)
        log(f"perf: ingest: {row}")
    return out


def run_perf(args: Any) -> int:
    seed = args.seed if args.seed is not None else 0
    sizes = SIZES[:2] if args.quick else SIZES
    chunks = 200 if args.quick else INGEST_CHUNKS
    specs = ("hash", "local", "fast") if args.embeddings in ("local", "fast") else ("hash",)
    report = {"ppr": ppr_suite(sizes, seed), "ingest": ingest_suite(chunks, specs),
              "config": {"queries": QUERIES, "seeds_per_query": SEEDS_PER_QUERY, "overrides": OVERRIDES,
                         "damping": 0.5, "seed": seed}}
    out = Path(args.json) if args.json else OUTPUT_DIR / "perf.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"perf": report}, indent=1))
    print(perf_markdown(report))
    print(f"\nwritten to {out}")
    return 0


def perf_markdown(report: dict[str, Any]) -> str:
    lines = ["| edges | nodes | snapshot build ms | PPR median ms | PPR + 100 overrides ms |", "|---|---|---|---|---|"]
    for r in report["ppr"]:
        lines.append(f"| {r['edges']:,} | {r['nodes']:,} | {r['snapshot_build_ms']} | {r['ppr_median_ms']} | "
                     f"{r['ppr_with_100_overrides_median_ms']} |")
    for r in report["ppr"]:
        if "networkx_pagerank_median_ms" in r:
            lines.append(f"\nAt {r['edges']:,} edges: kg.ppr {r['kg_ppr_median_ms']} ms vs networkx.pagerank "
                         f"{r['networkx_pagerank_median_ms']} ms ({r['networkx_over_kg_ppr']}× faster; "
                         f"max score difference {r['max_abs_score_diff_vs_networkx']}).")
    if report["ingest"]:
        lines += ["", "| ingest (add_triples) | chunks | triples | total s | embedding s | non-embedding s | "
                      "non-embedding ms/chunk |", "|---|---|---|---|---|---|---|"]
        for r in report["ingest"]:
            lines.append(f"| {r['embeddings']} | {r['chunks']} | {r['triples']} | {r['total_s']} | {r['embedding_s']} | "
                         f"{r['non_embedding_s']} | {r['non_embedding_ms_per_chunk']} |")
    return "\n".join(lines)
