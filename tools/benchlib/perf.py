"""KG performance suite (``python tools/bench.py --perf [--quick] [--json F]``).

1. Personalized PageRank on random graphs with 10k, 100k and 1M edges (nodes = edges / 5,
   uniform random endpoints, weights in [0.5, 1.5]), through ``langgraph_kgmem.kg.ppr`` (the
   functions ``KnowledgeGraph.ppr`` runs on its cached snapshot): snapshot build time once, then
   the median over 20 queries of 5 random seed nodes each (damping 0.5). At 10k edges also
   ``kg.ppr`` end to end on an in-memory KG holding the same graph, and ``networkx.pagerank``
   with the same personalization for the speed ratio (and the largest score difference).
2. Per-query overrides: the same queries with 100 random edge-weight multipliers each.
3. Push vs exact (#16) on power-law graphs of 1M and 10M edges (Chung–Lu endpoints, degree
   exponent 2.1, node ids shuffled; generated in the run, never stored): median ms per query
   (5 random seeds each) of the strict exact iteration (float64 to 1e-8, the reference), the
   default exact one (float32, stops once the top 20 is certified) and push (eps 1e-5), with
   their top-20 overlap against the reference; 10M / 1M push time. Rows are ordered by falling
   degree, as ``KnowledgeGraph.snapshot`` orders them.
4. Add one document to an in-memory KG holding the 1M-edge power-law graph, then query
   (``kg.add_triples`` of one pre-extracted HotpotQA passage, then ``kg.ppr`` from one of its
   entities): the write, the first query (which replays the write into the cached snapshot)
   and, for comparison, a full snapshot rebuild.
5. HotpotQA-300 pooled KG (offline extractor, the run's ``--embeddings``): CatRAG and HippoRAG 2
   with ``ppr_method="push"`` at eps 1e-5, 1e-6 and 1e-7 against ``"exact"`` on every question
   (offline decisions): top-20 passage overlap with exact, R@5 and FCR, ``run_ppr`` ms.
6. Ingest: 1,000 pre-extracted chunks (HotpotQA passages run through the offline extractor
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

from benchlib.datasets import DatasetError, load_questions, pooled_passages
from benchlib.metrics import median_ms
# shared with the PostgreSQL suite, which imports them from synthetic.py rather than from here
from benchlib.synthetic import power_law_graph, seeded_extractions
from benchlib.common import OUTPUT_DIR, log, make_embeddings

SIZES = (10_000, 100_000, 1_000_000)
PUSH_SIZES = (1_000_000, 10_000_000)
PUSH_EPS = 1e-5
HOTPOT_EPS = (1e-5, 1e-6, 1e-7)   # CatRAG's reset covers every passage: finer eps than kg.ppr's default
TOP = 20
EXACT_QUERIES_AT_10M = 5      # a strict exact query at 10M edges takes seconds: fewer of them
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


def _overlap(a: np.ndarray, b: np.ndarray, k: int = TOP) -> float:
    return len(set(a[:k].tolist()) & set(b[:k].tolist())) / k


def push_suite(sizes: tuple[int, ...], seed: int) -> list[dict[str, Any]]:
    from langgraph_kgmem.kg.ppr import build_snapshot, degree_order, personalized_pagerank, push_ppr
    from langgraph_kgmem.ranking import best_first

    out = []
    for edges in sizes:
        rng = np.random.default_rng(seed)
        t0 = time.perf_counter()
        n, src, dst, w = power_law_graph(edges, rng)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        # rows by falling degree, as KnowledgeGraph.snapshot orders them
        rank = np.empty(n, dtype=np.int64)
        rank[degree_order(n, src, dst)] = np.arange(n)
        snap = build_snapshot([f"n{i}" for i in range(n)], ["entity"] * n, rank[src], rank[dst], w, symmetric=True)
        build_s = time.perf_counter() - t0
        del src, dst, w, rank
        seeds = [rng.choice(n, SEEDS_PER_QUERY, replace=False) for _ in range(QUERIES)]
        n_exact = EXACT_QUERIES_AT_10M if edges >= 5_000_000 else QUERIES
        strict_t, fast_t, push_t, ov_push, ov_fast, touched = [], [], [], [], [], []
        for qi, s in enumerate(seeds):
            t0 = time.perf_counter()
            rows, scores = push_ppr(snap, {int(i): 1.0 for i in s}, damping=0.5, eps=PUSH_EPS)
            push_t.append(time.perf_counter() - t0)
            touched.append(len(rows))
            if qi >= n_exact:
                continue
            reset = np.zeros(n)
            reset[s] = 1.0
            t0 = time.perf_counter()
            ref = personalized_pagerank(snap, reset, damping=0.5)
            strict_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fast = personalized_pagerank(snap, reset, damping=0.5, strict=False, top_k=TOP)
            fast_t.append(time.perf_counter() - t0)
            top_ref = best_first(ref, TOP)
            ov_fast.append(_overlap(top_ref, best_first(fast, TOP)))
            ov_push.append(_overlap(top_ref, rows[best_first(scores, TOP)]))
        row = {"edges": edges, "nodes": n, "directed_entries": snap.nnz, "generate_s": round(gen_s, 1),
               "snapshot_build_s": round(build_s, 1), "queries": QUERIES, "exact_queries": n_exact,
               "exact_strict_median_ms": median_ms(strict_t, 2), "exact_fast_median_ms": median_ms(fast_t, 2),
               "push_median_ms": median_ms(push_t, 2), "push_touched_nodes_median": int(np.median(touched)),
               "top20_overlap_push": round(float(np.mean(ov_push)), 4),
               "top20_overlap_exact_fast": round(float(np.mean(ov_fast)), 4)}
        out.append(row)
        log(f"perf: push vs exact at {edges:,} edges: {row}")
        del snap
    if len(out) >= 2:
        out[-1]["push_ratio_to_smallest"] = round(out[-1]["push_median_ms"] / out[0]["push_median_ms"], 2)
    return out


def incremental_suite(edges: int, seed: int, docs: int = 5) -> dict[str, Any]:
    """A KG holding a power-law graph of ``edges`` edges; then ``docs`` times: add one document
    (pre-extracted), query from one of its entities."""
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.kg.types import Edge, Node

    try:
        qs = load_questions("hotpotqa")
    except DatasetError as exc:
        log(f"perf: add-one-document suite skipped: {exc}")
        return {}
    rng = np.random.default_rng(seed)
    n, src, dst, w = power_law_graph(edges, rng)
    ids = [f"ent-synthetic-{i}" for i in range(n)]
    t0 = time.perf_counter()
    kg = KnowledgeGraph.in_memory(name="perf", embeddings="hash")
    kg.add_nodes([Node(i, "entity", i, {}) for i in ids], embed=False)
    step = 200_000
    for off in range(0, edges, step):
        kg.add_edges([Edge(f"rel-s{k}", ids[a], ids[b], "relation", "r", float(x), {})
                      for k, a, b, x in zip(range(off, off + step), src[off:off + step].tolist(),
                                            dst[off:off + step].tolist(), w[off:off + step].tolist())],
                     embed_facts=False)
    fill_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kg.snapshot()
    first_build = time.perf_counter() - t0
    add_t, query_t, total_t, exact_t = [], [], [], []
    for p, x, seed_id in seeded_extractions(pooled_passages("hotpotqa", qs)[:docs]):
        t0 = time.perf_counter()
        kg.add_triples(x.triples, text=p["text"], title=p["title"])
        t1 = time.perf_counter()
        top = kg.ppr({seed_id: 1.0}, top_k=TOP)             # auto: push at this size
        t2 = time.perf_counter()
        assert top, "the new document's entity is in the graph"
        add_t.append(t1 - t0)
        query_t.append(t2 - t1)
        total_t.append(t2 - t0)
        t0 = time.perf_counter()
        kg.ppr({seed_id: 1.0}, top_k=TOP, method="exact")
        exact_t.append(time.perf_counter() - t0)
    snap = kg.snapshot()
    delta = snap.delta.nnz if snap.delta is not None else 0
    t0 = time.perf_counter()
    kg.drop_snapshots()
    kg.snapshot()
    rebuild = time.perf_counter() - t0
    kg.close()
    row = {"edges": edges, "documents_added": len(add_t), "kg_fill_s": round(fill_s, 1),
           "first_snapshot_build_ms": round(first_build * 1000, 1), "add_document_median_ms": median_ms(add_t, 2),
           "first_query_after_add_median_ms": median_ms(query_t, 2), "add_then_query_median_ms": median_ms(total_t, 2),
           "exact_query_after_add_median_ms": median_ms(exact_t, 2), "delta_entries_at_end": delta,
           "full_rebuild_ms": round(rebuild * 1000, 1)}
    log(f"perf: add one document then query: {row}")
    return row


def hotpot_push_suite(embeddings: str, seed: int, questions: int = 300) -> dict[str, Any]:
    """CatRAG and HippoRAG 2 on the pooled HotpotQA-300 KG, push against exact, offline decisions."""
    import shutil

    from benchlib import corpus as corpora
    from benchlib.api import gold_passage_keys, ranked_passages
    from benchlib.datasets import pooled_passages
    from benchlib.metrics import full_chain, recall_at_k

    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.graphs.catrag import create_catrag_graph, prepare_catrag_kg

    try:
        qs = load_questions("hotpotqa", 300, 0)
    except DatasetError as exc:
        log(f"perf: HotpotQA push suite skipped: {exc}")
        return {}
    emb = make_embeddings(embeddings)
    built = corpora.build_corpus(pooled_passages("hotpotqa", qs), emb, log=log)
    out: dict[str, Any] = {"embeddings": embeddings, "questions": len(qs), "passages": built.passages,
                           "nodes": built.stats.get("nodes"), "edges": built.stats.get("edges"), "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(built.path / "kg", Path(tmp) / "kg")
        kg = KnowledgeGraph.open(Path(tmp) / "kg", embeddings=emb)
        prepare_catrag_kg(kg)
        from langgraph.store.memory import InMemoryStore

        for name, switches in (("catrag", {}), ("hipporag2", {"anchoring": False, "dynamic_weighting": False,
                                                             "key_fact_boost": False})):
            configs = {"exact": ("exact", PUSH_EPS)} | {f"push@{e:g}": ("push", e) for e in HOTPOT_EPS}
            apps = {c: create_catrag_graph(kg, model="offline", store=InMemoryStore(), answer=False, ppr_method=m,
                                           ppr_eps=e, **switches).compile() for c, (m, e) in configs.items()}
            res: dict[str, dict[str, list[float]]] = {c: {"r5": [], "fcr": [], "ms": [], "overlap": []} for c in apps}
            for q in qs[:questions]:
                ranked = {}
                for c, app in apps.items():
                    o = app.invoke({"question": q.question})
                    ranked[c] = [p["id"] for p in o.get("passages", [])]
                    got, gold = ranked_passages(kg, ranked[c]).keys, gold_passage_keys(q)
                    res[c]["r5"].append(recall_at_k(got, gold, 5))
                    res[c]["fcr"].append(full_chain(got, gold, 5))
                    if o.get("ppr"):
                        res[c]["ms"].append(o["ppr"]["ms"] / 1000.0)
                        k = min(TOP, len(ranked["exact"])) or 1
                        res[c]["overlap"].append(len(set(ranked["exact"][:k]) & set(ranked[c][:k])) / k)
            row: dict[str, Any] = {}
            for c, r in res.items():
                row[c] = {"recall@5": round(float(np.mean(r["r5"])), 4), "fcr": round(float(np.mean(r["fcr"])), 4),
                          "run_ppr_median_ms": median_ms(r["ms"], 2),
                          "top20_passage_overlap": round(float(np.mean(r["overlap"])), 4) if r["overlap"] else None}
                if c != "exact":
                    row[c]["recall@5_delta"] = round(row[c]["recall@5"] - row["exact"]["recall@5"], 4)
                    row[c]["fcr_delta"] = round(row[c]["fcr"] - row["exact"]["fcr"], 4)
            row["ppr_questions"] = len(res["exact"]["ms"])
            out["methods"][name] = row
            log(f"perf: HotpotQA-300 {name} push vs exact: {row}")
        kg.close()
    return out


def ingest_suite(chunks: int, specs: tuple[str, ...]) -> list[dict[str, Any]]:
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.embeddings import get_embeddings
    from langgraph_kgmem.ingest.extract import OfflineExtractor

    try:
        qs = load_questions("hotpotqa")
    except DatasetError as exc:
        log(f"perf: ingest skipped: {exc}")
        return []
    passages = pooled_passages("hotpotqa", qs)[:chunks]
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


def _passages(docs: int) -> list[dict[str, str]]:
    """The first ``docs`` distinct HotpotQA passages (empty when the data is not there)."""
    try:
        qs = load_questions("hotpotqa")
    except DatasetError as exc:
        log(f"perf: no HotpotQA passages for add-one-document: {exc}")
        return []
    return pooled_passages("hotpotqa", qs)[:docs]


def run_perf_postgres(args: Any, seed: int) -> dict[str, Any]:
    """PPR with the KG on PostgreSQL (benchlib.pg_perf) beside the in-memory figures, one run."""
    from benchlib.pg_perf import pg_suite

    sizes = tuple(int(x) for x in str(args.perf_edges).split(","))
    return {"push": push_suite(sizes, seed), "add_one_document": incremental_suite(sizes[0], seed),
            "postgres": pg_suite(sizes, seed, _passages(5), uri=args.postgres_uri),
            "config": {"queries": QUERIES, "seeds_per_query": SEEDS_PER_QUERY, "damping": 0.5, "eps": PUSH_EPS,
                       "seed": seed}}


def run_perf(args: Any) -> int:
    seed = args.seed if args.seed is not None else 0
    if getattr(args, "perf_backend", "memory") == "postgres":
        from benchlib.pg_perf import pg_markdown

        report = run_perf_postgres(args, seed)
        out = Path(args.json) if args.json else OUTPUT_DIR / "perf-postgres.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"perf": report}, indent=1))
        print(pg_markdown(report["postgres"], report["push"], report["add_one_document"]))
        print(f"\nwritten to {out}")
        return 0
    sizes = SIZES[:2] if args.quick else SIZES
    chunks = 200 if args.quick else INGEST_CHUNKS
    specs = ("hash", "local", "fast") if args.embeddings in ("local", "fast") else ("hash",)
    push_sizes = PUSH_SIZES[:1] if args.quick else PUSH_SIZES
    report = {"ppr": ppr_suite(sizes, seed), "push": push_suite(push_sizes, seed),
              "add_one_document": incremental_suite(push_sizes[0], seed),
              "hotpotqa_push": {} if args.quick else hotpot_push_suite(args.embeddings, seed),
              "ingest": ingest_suite(chunks, specs),
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
    if report.get("push"):
        lines += ["", "| power-law edges | nodes | exact strict ms | exact (top-20 certified) ms | push ms | "
                      "top-20 overlap push / exact |", "|---|---|---|---|---|---|"]
        for r in report["push"]:
            lines.append(f"| {r['edges']:,} | {r['nodes']:,} | {r['exact_strict_median_ms']} | {r['exact_fast_median_ms']} | "
                         f"{r['push_median_ms']} | {r['top20_overlap_push']} / {r['top20_overlap_exact_fast']} |")
    inc = report.get("add_one_document")
    if inc:
        lines.append(f"\nAdd one document to the {inc['edges']:,}-edge KG, then query: {inc['add_then_query_median_ms']} ms "
                     f"(write {inc['add_document_median_ms']} + first query {inc['first_query_after_add_median_ms']}); "
                     f"a full snapshot rebuild costs {inc['full_rebuild_ms']} ms.")
    hp = report.get("hotpotqa_push")
    if hp:
        lines += ["", "| HotpotQA-300 pooled | PPR | top-20 passage overlap with exact | R@5 | FCR | run_ppr ms |",
                  "|---|---|---|---|---|---|"]
        for name, r in hp["methods"].items():
            for c, x in r.items():
                if isinstance(x, dict):
                    lines.append(f"| {name} | {c} | {x['top20_passage_overlap']} | {x['recall@5']} | {x['fcr']} | "
                                 f"{x['run_ppr_median_ms']} |")
    if report["ingest"]:
        lines += ["", "| ingest (add_triples) | chunks | triples | total s | embedding s | non-embedding s | "
                      "non-embedding ms/chunk |", "|---|---|---|---|---|---|---|"]
        for r in report["ingest"]:
            lines.append(f"| {r['embeddings']} | {r['chunks']} | {r['triples']} | {r['total_s']} | {r['embedding_s']} | "
                         f"{r['non_embedding_s']} | {r['non_embedding_ms_per_chunk']} |")
    return "\n".join(lines)
