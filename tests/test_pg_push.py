"""Push PPR over a PostgreSQL KG without loading its edges (#16): the lazy reader against the
in-memory snapshot's push and the exact iteration on the same graph, its bounded neighbour cache,
and its invalidation after another process writes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.backends.postgres.push import LazyPushPpr
from langgraph_kgmem.kg.types import Edge, Node

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]


def _fill(kg: KnowledgeGraph, n: int = 300, m: int = 1500, seed: int = 4, simple: bool = True) -> None:
    """A skewed random graph with two edge kinds, chunk nodes and an isolated node (dangling).
    ``simple``: no parallel edges, no pair linked both ways, no self-loop (then incident edges =
    distinct neighbours, and the lazy push equals the snapshot's); otherwise all three occur."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = (src + rng.zipf(1.7, m)) % n
    if simple:
        pairs = {tuple(sorted(p)) for p in zip(src.tolist(), dst.tolist()) if p[0] != p[1]}
        src, dst = np.array(sorted(pairs)).T
    w = rng.uniform(0.5, 2.0, len(src))
    kg.add_nodes([Node(f"n{i}", "chunk" if i % 7 == 0 else "entity", f"n{i}", {}) for i in range(n + 1)], embed=False)
    kg.add_edges([Edge(f"e{k}", f"n{a}", f"n{b}", "relation" if k % 5 else "synonym", "r", float(x), {})
                  for k, (a, b, x) in enumerate(zip(src.tolist(), dst.tolist(), w.tolist()))], embed_facts=False)


def _python(code: str, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         timeout=120, env=env, cwd=str(ROOT))
    assert res.returncode == 0, res.stderr[-3000:]


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    da, db = dict(a), dict(b)
    assert set(da) == set(db)
    assert np.allclose([da[k] for k in da], [db[k] for k in da], rtol=1e-9, atol=1e-14)


@pytest.fixture
def shared(new_database):
    uri = new_database()
    kg = KnowledgeGraph.open(uri, name="lazy", embeddings="hash")
    _fill(kg)
    yield uri, kg
    kg.close()


@pytest.mark.parametrize("eps", [1e-4, 1e-6])
def test_lazy_push_equals_the_snapshots_push_and_ranks_like_exact(shared, eps):
    uri, kg = shared
    seeds = {"n0": 1.0, "n17": 0.5, "n99": 2.0}
    with LazyPushPpr.open(uri, name="lazy") as lazy:
        got = lazy.ppr(seeds, eps=eps)
        _same(got, kg.ppr(seeds, method="push", eps=eps))
        exact = kg.ppr(seeds, method="exact", strict=True, top_k=20)
        overlap = len({i for i, _ in got[:20]} & {i for i, _ in exact}) / 20
        assert overlap >= {1e-4: 0.7, 1e-6: 0.95}[eps]
        # edge kinds, node kinds and overrides, as kg.ppr takes them
        kinds = {"edge_kinds": ["relation"], "node_kinds": ["entity"], "top_k": 10}
        _same(lazy.ppr(seeds, eps=eps, **kinds), kg.ppr(seeds, method="push", eps=eps, **kinds))
        lonely = f"n{kg.node_count() - 1}"          # no such entry: ignored by both
        nb = [e for e in kg.edges_of("n0") if e.src != e.dst][:3]
        overrides = {(e.src, e.dst): 0.0 for e in nb} | {(e.dst, e.src): 3.0 for e in nb} | {("n0", lonely): 5.0}
        with_ov = lazy.ppr(seeds, eps=eps, overrides=overrides)
        _same(with_ov, kg.ppr(seeds, method="push", eps=eps, overrides=overrides))
        assert dict(with_ov) != dict(got)
        stats = lazy.stats()
        assert stats["all"]["round_trips"] > 1 and stats["all"]["rows_hit"] > 0


@pytest.mark.parametrize("eps", [1e-4, 1e-6])
def test_on_a_multigraph_lazy_push_stays_within_its_bound_of_exact(new_database, eps):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="multi", embeddings="hash") as kg, LazyPushPpr.open(uri, name="multi") as lazy:
        _fill(kg, simple=False)
        incident: dict[str, int] = {}
        for e in kg.edges():
            for x in (e.src, e.dst):
                incident[x] = incident.get(x, 0) + 1
        seeds = {"n0": 1.0, "n17": 0.5, "n99": 2.0}
        exact = dict(kg.ppr(seeds, method="exact", strict=True, tol=1e-13, max_iter=1000))
        got = dict(lazy.ppr(seeds, eps=eps))
        assert all(got[i] <= exact[i] + 1e-12 for i in got)             # never above the exact score
        assert max((exact[i] - got.get(i, 0.0)) / max(1, incident.get(i, 0)) for i in exact) <= eps
        top_exact = sorted(exact, key=lambda i: -exact[i])[:20]
        top_lazy = sorted(got, key=lambda i: -got[i])[:20]
        assert len(set(top_exact) & set(top_lazy)) / 20 >= {1e-4: 0.7, 1e-6: 0.95}[eps]
        snap_push = dict(kg.ppr(seeds, method="push", eps=eps))         # thresholds differ a little here
        assert len(set(top_lazy) & set(sorted(snap_push, key=lambda i: -snap_push[i])[:20])) / 20 >= 0.9


def test_lazy_push_with_dangling_and_absent_seeds(shared):
    uri, kg = shared
    with LazyPushPpr.open(uri, name="lazy") as lazy:
        lonely = f"n{kg.node_count() - 1}"          # a node without edges: all its mass stays
        _same(lazy.ppr({lonely: 1.0}), kg.ppr({lonely: 1.0}, method="push"))
        assert lazy.ppr({lonely: 1.0}) == [(lonely, pytest.approx(1.0, abs=1e-5))]   # all its mass stays
        _same(lazy.ppr({"n3": 1.0, "no-such-node": 5.0}), kg.ppr({"n3": 1.0, "no-such-node": 5.0}, method="push"))
        assert lazy.ppr({"no-such-node": 1.0}) == []   # the uniform walk would need the whole graph
        assert lazy.ppr({}) == []
        with pytest.raises(KgmemInputError, match="eps"):
            lazy.ppr({"n3": 1.0}, eps=0.0)
    with pytest.raises(KgmemInputError, match="no KG named"):
        LazyPushPpr.open(uri, name="missing")


def test_a_bounded_cache_gives_the_same_answers_and_stays_bounded(shared):
    uri, kg = shared
    queries = [{f"n{i}": 1.0, f"n{i + 50}": 1.0} for i in range(0, 200, 20)]
    with LazyPushPpr.open(uri, name="lazy", max_entries=300) as small, LazyPushPpr.open(uri, name="lazy") as big:
        for _ in range(2):
            for q in queries:
                _same(small.ppr(q, eps=1e-5), big.ppr(q, eps=1e-5))
                assert small.cache().entries <= 300
        s, b = small.stats()["all"], big.stats()["all"]
        assert s["evicted"] > 0 and s["rows_fetched"] > b["rows_fetched"]
        assert b["evicted"] == 0 and b["rows_hit"] > s["rows_hit"]
    with LazyPushPpr.open(uri, name="lazy", max_entries=20) as tiny:   # the id table passes 4 x 20: reset
        for q in queries[:3]:
            _same(tiny.ppr(q, eps=1e-5), kg.ppr(q, method="push", eps=1e-5))
            assert tiny.cache().entries == 0 and len(tiny.cache().ids) == 0
        assert tiny.stats()["all"]["clears"] == 3
    with LazyPushPpr.open(uri, name="lazy") as fresh:
        # one statement per push round, however many rows the round needs
        fresh.ppr(queries[0], eps=1e-6)
        st = fresh.stats()["all"]
        assert st["rows_fetched"] > 200 and st["round_trips"] <= st["rows_fetched"] / 10


def test_the_cache_follows_another_processes_writes(shared):
    uri, kg = shared
    seeds = {"n5": 1.0}
    with LazyPushPpr.open(uri, name="lazy") as lazy:
        before = lazy.ppr(seeds, eps=1e-6)
        assert lazy.ppr({"fresh": 1.0}) == []          # not a node yet (and remembered as such)
        _python("""
            import sys
            from langgraph_kgmem import KnowledgeGraph
            from langgraph_kgmem.kg.types import Edge, Node
            with KnowledgeGraph.open(sys.argv[1], name="lazy", embeddings="hash") as kg:
                kg.add_nodes([Node("fresh", "entity", "fresh", {})], embed=False)
                kg.add_edges([Edge("e-new", "n5", "fresh", "relation", "r", 4.0, {}),
                              Edge("e1", kg.edge("e1").src, kg.edge("e1").dst, "relation", "r", 9.0, {})],
                             embed_facts=False)
        """, uri)
        after = lazy.ppr(seeds, eps=1e-6)
        assert "fresh" in dict(after) and dict(after) != dict(before)
        assert lazy.ppr({"fresh": 1.0})[0][0] == "fresh"   # the write made it a node: the log said so
        stats = lazy.stats()["all"]
        assert stats["rows_invalidated"] >= 1 and stats["clears"] == 0   # only the written rows went
        kg.refresh()
        _same(after, kg.ppr(seeds, method="push", eps=1e-6))
        # a deleted edge: its endpoints are gone from the log's reach, so the cache starts over
        _python("""
            import sys
            from langgraph_kgmem import KnowledgeGraph
            with KnowledgeGraph.open(sys.argv[1], name="lazy", embeddings="hash") as kg:
                kg.delete_edges(["e-new"])
        """, uri)
        again = lazy.ppr(seeds, eps=1e-6)
        assert "fresh" not in dict(again) and lazy.stats()["all"]["clears"] == 1
        kg.refresh()
        _same(again, kg.ppr(seeds, method="push", eps=1e-6))


def test_the_postgres_perf_suite_runs_on_a_small_graph(postgres_uri):
    import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
    from benchlib.pg_perf import pg_markdown, pg_suite

    from tests.conftest import SAMPLE_DOCS

    passages = [{"title": d["title"], "text": d["text"]} for d in SAMPLE_DOCS[:2]]
    (row,) = pg_suite((3000,), 1, passages, uri=postgres_uri, queries=4)
    full, lazy = row["queries"]["full"], row["queries"]["lazy"]
    assert row["open"]["full"]["open_s"] > 0 and row["memory"]["full"]["rss_mb"] > 0
    assert full["top20_overlap_push"] >= 0.8 and lazy["top20_agreement_with_full_push"] >= 0.95
    assert lazy["round_trips_per_query_warm"] < lazy["round_trips_per_query_first_pass"]
    add = row["add_one_document"]
    assert add["documents"] == 2 and add["full"]["add_then_query_median_ms"] > add["write_median_ms"] > 0
    assert add["lazy"]["add_then_query_median_ms"] > 0
    assert "lazy worker" in pg_markdown([row], [], {})
    # beyond full_max_edges only the lazy worker runs; its overlap is against exact in this process
    (lazy_only,) = pg_suite((3000,), 1, [], uri=postgres_uri, queries=3, full_max_edges=0)
    assert set(lazy_only["open"]) == {"lazy"} and lazy_only["queries"]["lazy"]["top20_overlap_push"] >= 0.8
