"""Forward-push PPR against the exact power iteration (#12): error bound, rankings, overrides,
dangling nodes, absent seeds."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.ppr import build_snapshot, personalized_pagerank, push_ppr
from langgraph_kgmem.testing import ScriptedChatModel


def _random_graph(n: int, m: int, seed: int, symmetric: bool = True):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = (src + 1 + rng.zipf(1.8, m) % (n - 1)) % n   # skewed degrees
    w = rng.uniform(0.5, 2.0, m)
    ids = [f"n{i}" for i in range(n)]
    return build_snapshot(ids, ["entity"] * n, src, dst, w, symmetric=symmetric)


def _exact(snap, seeds, damping=0.5, overrides=None):
    reset = np.zeros(snap.n)
    for u, x in seeds.items():
        reset[u] = x
    return personalized_pagerank(snap, reset, damping=damping, tol=1e-13, max_iter=1000, overrides=overrides)


@pytest.mark.parametrize("eps", [1e-4, 1e-5, 1e-6])
@pytest.mark.parametrize("symmetric", [True, False])
def test_push_error_is_bounded_by_eps_times_degree(eps, symmetric):
    snap = _random_graph(400, 2000, seed=3, symmetric=symmetric)
    seeds = {0: 1.0, 17: 0.5, 99: 2.0}
    exact = _exact(snap, seeds, damping=0.5)
    rows, scores = push_ppr(snap, seeds, damping=0.5, eps=eps)
    approx = np.zeros(snap.n)
    approx[rows] = scores
    deg = np.maximum(1, np.diff(snap.w.indptr))
    assert np.all(approx <= exact + 1e-12)            # push only ever underestimates
    if symmetric:                                     # ACL's per-node bound on an undirected graph
        assert np.max((exact - approx) / deg) <= eps
    assert (exact - approx).sum() <= eps * deg.sum()  # the unpushed mass
    top_exact = set(np.argsort(-exact)[:20].tolist())
    top_push = set(rows[np.argsort(-scores)[:20]].tolist())
    overlap = len(top_exact & top_push) / 20
    assert overlap >= {1e-4: 0.7, 1e-5: 0.9, 1e-6: 0.95}[eps]


def test_push_touches_only_the_seeds_neighbourhood():
    # two components: mass from a seed in the first never reaches the second
    a = _random_graph(200, 800, seed=1)
    b_src = np.arange(200, 399)
    src = np.concatenate([a.w.tocoo().row, b_src])
    dst = np.concatenate([a.w.tocoo().col, b_src + 1])
    w = np.concatenate([a.w.tocoo().data, np.ones(len(b_src))])
    snap = build_snapshot([f"n{i}" for i in range(400)], ["entity"] * 400, src, dst, w, symmetric=False)
    rows, _ = push_ppr(snap, {0: 1.0}, eps=1e-7)
    assert rows.max() < 200


def test_push_honours_overrides_and_dangling_nodes():
    snap = _random_graph(300, 1200, seed=5, symmetric=False)
    coo = snap.w.tocoo()
    ov = {(int(u), int(v)): 5.0 for u, v in zip(coo.row[:40], coo.col[:40])}
    ov[(int(coo.row[0]), int(coo.col[0]))] = 0.0
    seeds = {int(coo.row[0]): 1.0, 7: 1.0}
    exact = _exact(snap, seeds, overrides=ov)
    rows, scores = push_ppr(snap, seeds, eps=1e-8, overrides=ov)
    approx = np.zeros(snap.n)
    approx[rows] = scores
    assert np.abs(approx - exact).sum() < 1e-4
    assert (snap.out_weight == 0).any()   # the graph has dangling nodes: their mass went back to the seeds


def test_push_error_shrinks_with_eps_and_rankings_converge():
    """As functions of eps: the L1 error never grows and stays under the unpushed-mass bound, and
    the top-20 overlap with the exact ranking never drops."""
    snap = _random_graph(2000, 12000, seed=11)
    seeds = {5: 1.0, 900: 1.0}
    exact = _exact(snap, seeds)
    deg = np.maximum(1, np.diff(snap.w.indptr))
    top_exact = set(np.argsort(-exact)[:20].tolist())
    errors, overlaps = [], []
    for eps in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7):
        rows, scores = push_ppr(snap, seeds, eps=eps)
        approx = np.zeros(snap.n)
        approx[rows] = scores
        errors.append(float((exact - approx).sum()))
        assert errors[-1] <= eps * deg.sum()
        assert np.max((exact - approx) / deg) <= eps
        overlaps.append(len(top_exact & set(rows[np.argsort(-scores)[:20]].tolist())) / 20)
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0] / 100
    assert overlaps == sorted(overlaps) and overlaps[-1] == 1.0


def test_push_with_no_seed_in_the_graph_returns_nothing():
    snap = _random_graph(50, 200, seed=2)
    assert len(push_ppr(snap, {-1: 1.0, 50: 2.0, 3: 0.0, 4: float("nan")})[0]) == 0
    with pytest.raises(ValueError, match="eps"):
        push_ppr(snap, {0: 1.0}, eps=0.0)


def test_exact_stops_early_once_the_top_k_is_certified():
    snap = _random_graph(3000, 20000, seed=4)
    reset = np.zeros(snap.n)
    reset[[1, 2, 3]] = 1.0
    strict = personalized_pagerank(snap, reset, tol=1e-12, max_iter=1000)
    for k in (5, 20, 100):
        fast = personalized_pagerank(snap, reset, strict=False, top_k=k)
        assert set(np.argsort(-fast)[:k].tolist()) == set(np.argsort(-strict)[:k].tolist())
        assert np.abs(fast - strict).sum() < 1e-2
    # restricted to some rows (e.g. passages): the top-k among them
    rows = np.arange(0, snap.n, 3)
    fast = personalized_pagerank(snap, reset, strict=False, top_k=10, top_rows=rows)
    assert set(rows[np.argsort(-fast[rows])[:10]].tolist()) == set(rows[np.argsort(-strict[rows])[:10]].tolist())
    # float32 without a top-k: within its tolerance of the float64 answer
    assert np.abs(personalized_pagerank(snap, reset, strict=False) - strict).sum() < 1e-5


def test_kg_ppr_methods_agree_and_auto_is_exact_on_small_graphs(kg):
    seed = kg.nearest("Marie Curie", k=1)[0][0].id
    exact = kg.ppr({seed: 1.0}, method="exact", strict=True, top_k=10)
    push = kg.ppr({seed: 1.0}, method="push", eps=1e-9, top_k=10)
    assert [n for n, _ in push] == [n for n, _ in exact]
    assert all(abs(a[1] - b[1]) < 1e-6 for a, b in zip(push, exact))
    assert [n for n, _ in kg.ppr({seed: 1.0}, top_k=10)] == [n for n, _ in exact]   # small graph: auto is exact
    assert kg.ppr_scores({seed: 1.0}).method == "exact"
    kg.PUSH_MIN_ENTRIES = 1
    # big enough now: auto may push, but only an answer as accurate as exact's (here its top 10)
    assert {n for n, _ in kg.ppr({seed: 1.0}, top_k=10)} == {n for n, _ in exact}
    assert kg.ppr_scores({seed: 1.0}, strict=True).method == "exact"   # float64 asked: no push
    assert [n for n, _ in kg.ppr({seed: 1.0}, top_k=10, eps=1e-9, method="push")] == [n for n, _ in exact]
    only = kg.ppr({seed: 1.0}, method="push", eps=1e-9, node_kinds=["chunk"], top_k=3)
    assert only and all(kg.node(n).kind == "chunk" for n, _ in only)
    assert [n for n, _ in only] == [n for n, _ in kg.ppr({seed: 1.0}, method="exact", strict=True,
                                                          node_kinds=["chunk"], top_k=3)]
    # a seed that is not in the graph: the same answer as the exact method gives
    assert kg.ppr({"ent-missing": 1.0}, method="push", top_k=3) == kg.ppr({"ent-missing": 1.0}, method="exact", top_k=3)
    with pytest.raises(KgmemInputError, match="ppr method"):
        kg.ppr({seed: 1.0}, method="fast")
    with pytest.raises(KgmemInputError, match="ppr eps"):
        kg.ppr({seed: 1.0}, method="push", eps=0)


def test_kg_push_honours_overrides_given_by_id(kg):
    seed = kg.nearest("Marie Curie", k=1)[0][0].id
    nbs = [nb.id for _, nb in kg.neighbors(seed)]
    ov = {(seed, nbs[0]): 5.0, (seed, nbs[-1]): 0.0, (seed, "ent-missing"): 3.0}
    exact = dict(kg.ppr({seed: 1.0}, method="exact", strict=True, overrides=ov))
    push = dict(kg.ppr({seed: 1.0}, method="push", eps=1e-10, overrides=ov))
    assert exact != dict(kg.ppr({seed: 1.0}, method="exact", strict=True))
    assert max(abs(exact[n] - push.get(n, 0.0)) for n in exact) < 1e-6


@pytest.mark.parametrize("switches", [{}, {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}],
                         ids=["catrag", "hipporag2"])
def test_catrag_and_hipporag2_rank_passages_alike_by_push_and_exact(kg, store, switches):
    from langgraph_kgmem.graphs.catrag import create_catrag_graph
    from tests.test_catrag import responder

    def run(**opts):
        model = ScriptedChatModel(responder=responder(score=lambda n: 10 if "Poland" in n["text"] else 2))
        app = create_catrag_graph(kg, model=model, store=store, answer=False, **switches, **opts).compile(store=store)
        return app.invoke({"question": "Where was Marie Curie born?"})

    exact, push = run(ppr_method="exact"), run(ppr_method="push", ppr_eps=1e-9)
    assert exact["ppr"]["method"] == "exact" and push["ppr"]["method"] == "push"
    assert exact["ppr"]["overrides"] == push["ppr"]["overrides"] and (exact["ppr"]["overrides"] > 0) == bool(switches == {})
    assert [p["id"] for p in push["passages"]] == [p["id"] for p in exact["passages"]]
    assert all(abs(a["score"] - b["score"]) < 1e-5 for a, b in zip(push["passages"], exact["passages"]))
    assert run()["ppr"]["method"] == "exact"                       # auto, on a small graph
    with pytest.raises(KgmemInputError, match="ppr_method"):
        create_catrag_graph(kg, model="offline", ppr_method="fast")
    with pytest.raises(KgmemInputError, match="ppr_eps"):
        create_catrag_graph(kg, model="offline", ppr_eps=0.0)


def test_perf_push_suite_on_a_small_power_law_graph():
    import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
    from benchlib.perf import power_law_graph, push_suite

    n, src, dst, _ = power_law_graph(20_000, np.random.default_rng(1))
    deg = np.bincount(np.concatenate([src, dst]), minlength=n)
    assert n == 4000 and not np.any(src == dst) and deg.max() > 50 * np.median(deg)   # hubs: a power law
    small, big = push_suite((5_000, 20_000), seed=2)
    for row in (small, big):
        assert row["top20_overlap_exact_fast"] >= 0.95 and row["top20_overlap_push"] >= 0.8
        assert row["push_median_ms"] > 0 and row["exact_strict_median_ms"] > 0
    assert big["push_ratio_to_smallest"] > 0
