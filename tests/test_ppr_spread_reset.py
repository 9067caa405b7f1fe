"""PPR with a reset spread over much of the graph (HippoRAG 2 and CatRAG put weight on every
passage): the reset is checked in arrays (:func:`sparse_reset`), ``"auto"`` goes to the exact
iteration without trying push when the reset's rows alone hold more entries than push may read,
and a push round that would pass its budget is not started."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem.kg import ppr as ppr_mod
from langgraph_kgmem.kg.ppr import (PushBudget, auto_ppr, build_snapshot, personalized_pagerank, ppr_scores, push_ppr,
                                    sparse_reset)


def _graph():
    rng = np.random.default_rng(7)
    n = 3000
    src = np.concatenate([np.arange(n), rng.integers(0, n, 6 * n)])
    dst = np.concatenate([(np.arange(n) + 1) % n, rng.integers(0, n, 6 * n)])
    keep = src != dst
    return build_snapshot([f"n{i}" for i in range(n)], ["entity"] * n, src[keep], dst[keep],
                          rng.uniform(0.5, 2.0, int(keep.sum())))


@pytest.fixture(scope="module")
def snap():
    return _graph()


def test_sparse_reset_reads_mappings_and_arrays_alike():
    rows, weights = sparse_reset({5: 1.0, 2: 3.0, 9: -1.0, 11: float("nan"), 40: 2.0}, 20)
    assert rows.tolist() == [2, 5] and weights.tolist() == [0.75, 0.25]
    rows2, weights2 = sparse_reset((np.array([5, 2, 9, 11, 40]), np.array([1.0, 3.0, -1.0, np.nan, 2.0])), 20)
    assert rows2.tolist() == rows.tolist() and np.allclose(weights2, weights)
    rows3, weights3 = sparse_reset((np.array([4, 1, 4]), np.array([1.0, 1.0, 2.0])), 10)   # repeats add up
    assert rows3.tolist() == [1, 4] and np.allclose(weights3, [0.25, 0.75])
    assert len(sparse_reset({}, 10)[0]) == 0 and len(sparse_reset({3: 0.0}, 10)[0]) == 0


def test_push_from_arrays_equals_push_from_a_mapping(snap):
    seeds = {3: 1.0, 70: 0.5, 900: 2.0}
    a_rows, a_scores = push_ppr(snap, seeds, eps=1e-6)
    b_rows, b_scores = push_ppr(snap, (np.array(list(seeds)), np.array(list(seeds.values()))), eps=1e-6)
    assert a_rows.tolist() == b_rows.tolist()
    np.testing.assert_allclose(a_scores, b_scores, rtol=1e-12, atol=1e-15)


def test_auto_goes_exact_at_once_for_a_reset_over_most_rows(snap, monkeypatch):
    calls = []
    real = ppr_mod.push_ppr
    monkeypatch.setattr(ppr_mod, "push_ppr", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    spread = {i: 1.0 + (i % 7) for i in range(0, snap.n, 2)}   # half the rows: far more entries than the budget
    assert auto_ppr(snap, spread, damping=0.5, eps=1e-5, tol=1e-8, top_k=5, top_rows=None, overrides=None) is None
    assert calls == []
    res = ppr_scores(snap, spread, method="auto", top_k=5, push_min_entries=0)
    assert res.method == "exact" and calls == []
    reset = np.zeros(snap.n)
    reset[list(spread)] = list(spread.values())
    exact = personalized_pagerank(snap, reset, strict=False, top_k=5)
    np.testing.assert_array_equal(res.scores, exact)
    auto_ppr(snap, {3: 1.0}, damping=0.5, eps=1e-5, tol=1e-8, top_k=5, top_rows=None, overrides=None)
    assert calls   # a few seeds still try push


def test_a_push_round_that_would_pass_the_budget_is_not_started(snap):
    budget = PushBudget(limit=50)
    spread = {i: 1.0 for i in range(0, 200)}   # the first round alone reads about 1,400 entries
    push_ppr(snap, spread, eps=1e-9, budget=budget)
    assert budget.spent == 0 and not budget.complete
    roomy = PushBudget(limit=10 ** 9)
    push_ppr(snap, spread, eps=1e-4, budget=roomy)
    assert roomy.spent > 0 and roomy.complete


def test_the_walk_arrays_are_kept_per_snapshot_and_overrides_bring_their_own():
    reset = np.zeros(3000)
    reset[[5, 17, 400]] = 1.0
    kept = _graph()
    first = personalized_pagerank(kept, reset, strict=False)
    assert "walk:float32" in kept._memo
    np.testing.assert_array_equal(personalized_pagerank(kept, reset, strict=False), first)
    u = 5
    v = int(kept.w.indices[kept.w.indptr[u]])
    ov = {(u, v): 0.0}
    np.testing.assert_array_equal(personalized_pagerank(kept, reset, strict=False, overrides=ov),
                                  personalized_pagerank(_graph(), reset, strict=False, overrides=ov))
