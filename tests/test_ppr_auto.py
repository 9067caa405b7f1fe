"""``method="auto"`` never trades accuracy silently: on hub-heavy graphs, where push at the default eps
gets the top-k wrong, auto answers with the exact top-k (by a certified push or by the exact
iteration); push is chosen only with a certificate, and its known error is reported."""

from __future__ import annotations

import numpy as np
import pytest
import bench_helpers  # noqa: F401  (puts tools/ on sys.path)

from benchlib.perf import power_law_graph, random_graph
from langgraph_kgmem.kg import ppr as ppr_mod
from langgraph_kgmem.kg.ppr import (build_snapshot, certified_top_k, degree_order, personalized_pagerank, ppr_scores,
                                    push_error, push_ppr)
from langgraph_kgmem.ranking import best_first

K = 10


def _snapshot(kind: str, edges: int, seed: int):
    rng = np.random.default_rng(seed)
    n, src, dst, w = random_graph(edges, rng) if kind == "uniform" else power_law_graph(edges, rng, 1.8)
    rank = np.empty(n, dtype=np.int64)
    rank[degree_order(n, src, dst)] = np.arange(n)
    return build_snapshot([f"n{i}" for i in range(n)], ["entity"] * n, rank[src], rank[dst], w)


def _queries(snap, count: int, seed: int):
    rng = np.random.default_rng(seed)
    # seeds among the connected rows (isolated ones make every other score 0: no top-k to speak of)
    connected = np.flatnonzero(snap.out_weight > 0)
    return [rng.choice(connected, 5, replace=False) for _ in range(count)]


def _reference_top(snap, seeds) -> set[int]:
    reset = np.zeros(snap.n)
    reset[seeds] = 1.0
    return set(best_first(personalized_pagerank(snap, reset, tol=1e-12, max_iter=1000), K).tolist())


@pytest.fixture(scope="module")
def hubs():
    return _snapshot("power-law", 60_000, seed=1)


def test_push_at_the_default_eps_gets_the_top_k_of_a_hub_graph_wrong(hubs):
    """The trap auto must not fall into (if this ever stops failing, the graph no longer tests it)."""
    wrong = 0
    for s in _queries(hubs, 8, seed=2):
        rows, scores = push_ppr(hubs, {int(i): 1.0 for i in s}, eps=1e-4)
        wrong += set(rows[best_first(scores, K)].tolist()) != _reference_top(hubs, s)
    assert wrong > 0


def test_auto_answers_the_exact_top_k_on_a_hub_graph(hubs):
    for s in _queries(hubs, 8, seed=2):
        res = ppr_scores(hubs, {int(i): 1.0 for i in s}, method="auto", eps=1e-4, top_k=K, push_min_entries=0)
        assert {r for r, _ in res.ranked(k=K)} == _reference_top(hubs, s), res.method
        if res.method == "push":   # a push answer carries its measured L1 error
            assert res.error == pytest.approx(push_error(res.scores))


def test_auto_pushes_where_push_is_certified_and_cheap():
    snap = _snapshot("uniform", 60_000, seed=3)
    methods = []
    for s in _queries(snap, 6, seed=4):
        res = ppr_scores(snap, {int(i): 1.0 for i in s}, method="auto", top_k=K, push_min_entries=0)
        methods.append(res.method)
        assert {r for r, _ in res.ranked(k=K)} == _reference_top(snap, s)
    assert "push" in methods


def test_without_top_k_auto_pushes_only_within_the_exact_iterations_error(hubs):
    s = _queries(hubs, 1, seed=5)[0]
    res = ppr_scores(hubs, {int(i): 1.0 for i in s}, method="auto", push_min_entries=0)
    reset = np.zeros(hubs.n)
    reset[s] = 1.0
    ref = personalized_pagerank(hubs, reset, tol=1e-12, max_iter=1000)
    assert np.abs(res.dense() - ref).sum() <= ppr_mod.exact_error_bound(0.5, 1e-8) + 1e-9


def test_a_large_budget_still_never_returns_an_uncertified_push(hubs, monkeypatch):
    monkeypatch.setattr(ppr_mod, "PUSH_BUDGET_SHARE", 50.0)   # push may read far more: still only certified answers
    for s in _queries(hubs, 4, seed=6):
        res = ppr_scores(hubs, {int(i): 1.0 for i in s}, method="auto", eps=1e-4, top_k=K, push_min_entries=0)
        assert {r for r, _ in res.ranked(k=K)} == _reference_top(hubs, s)


def test_auto_with_overrides_or_an_asymmetric_graph_uses_only_the_l1_bound(hubs):
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    directed = build_snapshot([f"n{i}" for i in range(300)], ["entity"] * 300, src, dst, np.ones(3000), symmetric=False)
    assert not directed.symmetric() and hubs.symmetric()
    for snap in (directed, hubs):
        s = _queries(snap, 1, seed=7)[0]
        u = int(s[0])
        v = int(snap.w.indices[snap.w.indptr[u]])
        res = ppr_scores(snap, {int(i): 1.0 for i in s}, method="auto", top_k=K, push_min_entries=0,
                         overrides={(u, v): 3.0})
        reset = np.zeros(snap.n)
        reset[s] = 1.0
        ref = personalized_pagerank(snap, reset, tol=1e-12, max_iter=1000, overrides={(u, v): 3.0})
        assert {r for r, _ in res.ranked(k=K)} == set(best_first(ref, K).tolist())


def test_certified_top_k_on_hand_made_scores():
    rows = np.array([0, 1, 2, 3])
    scores = np.array([0.40, 0.30, 0.05, 0.01])
    # top 2 = {0, 1}: 0.30 beats 0.05 + 0.2 (the L1 error) — certified; with error 0.3 it is not
    assert certified_top_k(rows, scores, 2, 4, error=0.2)
    assert not certified_top_k(rows, scores, 2, 4, error=0.3)
    # per-node bounds (weight × residual per weight) certify what the L1 error alone cannot
    weights = np.array([1.0, 1.0, 1.0, 1.0])
    assert certified_top_k(rows, scores, 2, 4, error=0.3, weights=weights, residual_per_weight=0.1)
    # an untouched row with a large weight may still overtake: not certified
    assert not certified_top_k(rows[:3], scores[:3], 2, 5, error=0.3, weights=np.array([1, 1, 1, 1, 9.0]),
                               residual_per_weight=0.1)
    # candidates restricted to rows {1, 2, 3}: top 1 = {1}
    assert certified_top_k(rows, scores, 1, 4, error=0.2, top_rows=np.array([1, 2, 3]))
    # fewer touched candidates than k: cannot certify
    assert not certified_top_k(rows[:1], scores[:1], 2, 4, error=0.0)


def test_the_auto_perf_suite_grades_every_configuration_on_a_small_graph():
    from benchlib.ppr_auto_perf import auto_markdown, auto_suite, split_report

    rows = auto_suite(20_000, (0, 3), graphs=("power-law 1.8",), queries=2, log=lambda *_: None)
    assert [(r["graph"], r["seed"]) for r in rows] == [("power-law 1.8", 0), ("power-law 1.8", 3)]
    for r in rows:
        assert r["exact_top20"] == 1.0 and r["auto_top20"] == 1.0   # auto never below exact's top 20
        assert 0.0 <= r["push@1e-05_top20"] <= 1.0 and 0.0 <= r["auto_push_share"] <= 1.0
    assert [s["seeds"] for s in split_report(rows)] == ["tuning", "held-out"]
    assert "| 20000 | power-law 1.8 | tuning |" in auto_markdown(rows)
