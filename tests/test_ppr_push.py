"""Forward-push PPR against the exact power iteration (#12): error bound, rankings, overrides,
dangling nodes, absent seeds."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.ppr import build_snapshot, personalized_pagerank, push_ppr


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


def test_kg_ppr_methods_agree_and_auto_follows_the_size_rule(kg):
    seed = kg.nearest("Marie Curie", k=1)[0][0].id
    exact = kg.ppr({seed: 1.0}, method="exact", top_k=10)
    push = kg.ppr({seed: 1.0}, method="push", eps=1e-9, top_k=10)
    assert [n for n, _ in push] == [n for n, _ in exact]
    assert all(abs(a[1] - b[1]) < 1e-6 for a, b in zip(push, exact))
    assert kg.ppr({seed: 1.0}, top_k=10) == exact                    # small graph: auto is exact
    kg.PUSH_MIN_ENTRIES = 1
    assert [n for n, _ in kg.ppr({seed: 1.0}, top_k=10, eps=1e-9)] == [n for n, _ in exact]
    only = kg.ppr({seed: 1.0}, method="push", node_kinds=["chunk"], top_k=3)
    assert only and all(kg.node(n).kind == "chunk" for n, _ in only)
    # a seed that is not in the graph: the same answer as the exact method gives
    assert kg.ppr({"ent-missing": 1.0}, method="push", top_k=3) == kg.ppr({"ent-missing": 1.0}, method="exact", top_k=3)
    with pytest.raises(KgmemInputError, match="ppr method"):
        kg.ppr({seed: 1.0}, method="fast")
