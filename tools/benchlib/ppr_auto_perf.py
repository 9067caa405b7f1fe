"""PPR ``"auto"`` against exact and fixed-eps push on hub-heavy power-law graphs (part of ``--perf``).

Each graph is a Chung–Lu power law (``perf.power_law_graph``; degree exponent 2.1, and 1.8 for
heavier hubs) or, for contrast, uniform random endpoints without hubs (``perf.random_graph``),
rows ordered by falling degree as ``KnowledgeGraph.snapshot`` orders them. Per
graph seed, ``QUERIES`` queries of ``SEEDS_PER_QUERY`` random seed nodes (damping 0.5): the strict
exact iteration (float64 to 1e-8) is the reference; the default exact one (float32, stops once the
top 20 is certified), push at fixed eps, and ``"auto"`` asking for the top 20
(``ppr_scores(method="auto", top_k=20)``) are timed and graded by their top-20 agreement with the
reference. ``auto_push_share`` is how often ``"auto"`` answered by push.

The rule's constant ``PUSH_BUDGET_SHARE`` (``langgraph_kgmem.kg.ppr``) is chosen on the tuning
seeds and checked on the held-out ones: :func:`split_report` gives both halves side by side.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from benchlib.metrics import median_ms
from benchlib.perf import power_law_graph, random_graph

TOP = 20
QUERIES = 10
SEEDS_PER_QUERY = 5
FIXED_EPS = (1e-5, 1e-6, 1e-7)
GRAPHS = ("power-law 2.1", "power-law 1.8", "uniform")
TUNING_SEEDS = (0, 1, 2)
HELD_OUT_SEEDS = (3, 4)


def hub_graph(edges: int, kind: str, seed: int) -> Any:
    """The snapshot of one graph of :data:`GRAPHS` (rows by falling degree)."""
    from langgraph_kgmem.kg.ppr import build_snapshot, degree_order

    rng = np.random.default_rng(seed)
    if kind == "uniform":
        n, src, dst, w = random_graph(edges, rng)
    else:
        n, src, dst, w = power_law_graph(edges, rng, float(kind.split()[-1]))
    rank = np.empty(n, dtype=np.int64)
    rank[degree_order(n, src, dst)] = np.arange(n)
    return build_snapshot([f"n{i}" for i in range(n)], ["entity"] * n, rank[src], rank[dst], w, symmetric=True)


def _agreement(ref: set[int], got: Sequence[int]) -> float:
    return len(ref & set(int(r) for r in got)) / len(ref)


def measure_graph(snap: Any, seed: int, queries: int = QUERIES) -> dict[str, Any]:
    """Time and top-20 agreement of every configuration over ``queries`` random seed sets."""
    from langgraph_kgmem.kg.ppr import personalized_pagerank, ppr_scores, push_ppr
    from langgraph_kgmem.ranking import best_first

    rng = np.random.default_rng(1000 + seed)
    configs = ["exact", *(f"push@{e:g}" for e in FIXED_EPS), "auto"]
    ms: dict[str, list[float]] = {c: [] for c in configs}
    agree: dict[str, list[float]] = {c: [] for c in configs}
    auto_push = 0
    for _ in range(queries):
        s = rng.choice(snap.n, SEEDS_PER_QUERY, replace=False)
        reset = np.zeros(snap.n)
        reset[s] = 1.0
        ref = set(best_first(personalized_pagerank(snap, reset, damping=0.5), TOP).tolist())
        t0 = time.perf_counter()
        fast = personalized_pagerank(snap, reset, damping=0.5, strict=False, top_k=TOP)
        ms["exact"].append(time.perf_counter() - t0)
        agree["exact"].append(_agreement(ref, best_first(fast, TOP)))
        for e in FIXED_EPS:
            t0 = time.perf_counter()
            rows, scores = push_ppr(snap, {int(i): 1.0 for i in s}, damping=0.5, eps=e)
            ms[f"push@{e:g}"].append(time.perf_counter() - t0)
            agree[f"push@{e:g}"].append(_agreement(ref, rows[best_first(scores, TOP)]))
        t0 = time.perf_counter()
        res = ppr_scores(snap, {int(i): 1.0 for i in s}, method="auto", damping=0.5, top_k=TOP, push_min_entries=0)
        ms["auto"].append(time.perf_counter() - t0)
        agree["auto"].append(_agreement(ref, [r for r, _ in res.ranked(k=TOP)]))
        auto_push += res.method == "push"
    row: dict[str, Any] = {"queries": queries}
    for c in configs:
        row[f"{c}_ms"] = median_ms(ms[c], 2)
        row[f"{c}_top20"] = round(float(np.mean(agree[c])), 4)
    row["auto_push_share"] = round(auto_push / queries, 3)
    return row


def auto_suite(edges: int, seeds: Sequence[int], graphs: Sequence[str] = GRAPHS,
               queries: int = QUERIES, log: Any = print) -> list[dict[str, Any]]:
    """One row per (graph kind, graph seed) at ``edges`` edges."""
    out = []
    for kind in graphs:
        for seed in seeds:
            snap = hub_graph(edges, kind, seed)
            row = {"edges": edges, "graph": kind, "seed": seed, "directed_entries": snap.nnz,
                   "max_degree": int(snap.degree.max()), **measure_graph(snap, seed, queries)}
            log(f"perf: PPR auto at {edges:,} edges, {kind}, seed {seed}: {row}")
            out.append(row)
            del snap
    return out


def split_report(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means over the tuning seeds and over the held-out ones, per (edges, graph kind)."""
    out = []
    keys = sorted({(r["edges"], r["graph"]) for r in rows})
    for edges, kind in keys:
        for part, seeds in (("tuning", TUNING_SEEDS), ("held-out", HELD_OUT_SEEDS)):
            sel = [r for r in rows if (r["edges"], r["graph"]) == (edges, kind) and r["seed"] in seeds]
            if not sel:
                continue
            agg: dict[str, Any] = {"edges": edges, "graph": kind, "seeds": part, "graphs": len(sel)}
            for k in sel[0]:
                if k.endswith(("_ms", "_top20", "_share")):
                    agg[k] = round(float(np.mean([r[k] for r in sel])), 4 if not k.endswith("_ms") else 2)
            out.append(agg)
    return out


def auto_markdown(rows: Sequence[dict[str, Any]]) -> str:
    cols = ["edges", "graph", "seeds", "exact_ms", "exact_top20"]
    cols += [c for e in FIXED_EPS for c in (f"push@{e:g}_ms", f"push@{e:g}_top20")]
    cols += ["auto_ms", "auto_top20", "auto_push_share"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in split_report(rows)]
    return "\n".join(lines)


def run_auto(args: Any, *, log: Any, default_out: Any) -> int:
    """``tools/bench.py --perf-auto [--perf-edges N,M] [--quick] [--json F]``: the suite on every size,
    tuning and held-out seeds, written as JSON (``--json``, else ``default_out``) and printed as a table."""
    import json
    from pathlib import Path

    sizes = [int(x) for x in str(args.perf_edges).split(",") if x.strip()]
    seeds = TUNING_SEEDS[:1] + HELD_OUT_SEEDS[:1] if args.quick else TUNING_SEEDS + HELD_OUT_SEEDS
    rows = [r for edges in sizes for r in auto_suite(edges, seeds, queries=3 if args.quick else QUERIES, log=log)]
    out = Path(args.json) if args.json else Path(default_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"ppr_auto": rows, "summary": split_report(rows)}, indent=1))
    print(auto_markdown(rows))
    print(f"\nwritten to {out}")
    return 0
