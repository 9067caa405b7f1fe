"""A kind filter on a large embedded vector space scores a contiguous copy of that kind's rows
(``_Space.kind_scores``): the copy is kept across queries, grows with appends, follows in-place
changes, deletes and compactions, and ranks exactly as a full sort of every row's cosine does.
Below ``KIND_SCAN_MIN_ROWS`` no copy is kept (small KGs score the whole space, as before)."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem.kg.backends.embedded import vectors as vec_mod
from langgraph_kgmem.kg.backends.embedded.vectors import NumpyVectorIndex

DIM = 16


@pytest.fixture
def small_threshold(monkeypatch):
    monkeypatch.setattr(vec_mod, "KIND_SCAN_MIN_ROWS", 100)


def _filled(rows: int, seed: int = 0) -> tuple[NumpyVectorIndex, np.ndarray, list[str], list[str]]:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((rows, DIM)).astype(np.float32)
    vecs[rows // 2:rows // 2 + 5] = vecs[3]           # exact ties, broken by insertion order
    ids = [f"n{i}" for i in range(rows)]
    kinds = ["chunk" if i % 3 == 0 else "entity" for i in range(rows)]
    idx = NumpyVectorIndex()
    idx.upsert("nodes", ids, vecs, kinds)
    return idx, vecs, ids, kinds


def _exact(idx: NumpyVectorIndex, q: np.ndarray, kind: str, k: int) -> list[str]:
    """The ranking a full sort gives: cosine over every live row of ``kind``, ties by insertion order."""
    s = idx._space("nodes")
    live = [i for i, nid in enumerate(s.ids) if nid in s.row and s.kinds[i] == kind]
    qn = q / np.linalg.norm(q)
    scores = np.array([float(s.mat[i] @ qn) for i in live])
    order = sorted(range(len(live)), key=lambda j: (-round(scores[j], 5), live[j]))
    return [s.ids[live[j]] for j in order[:k]]


def _search(idx: NumpyVectorIndex, q: np.ndarray, kind: str, k: int) -> list[str]:
    return [i for i, _ in idx.search("nodes", q, k, kinds=(kind,))]


def test_top_k_of_the_copy_equals_the_exact_full_sort(small_threshold):
    idx, vecs, _, _ = _filled(600)
    for q in (vecs[3], vecs[10] + vecs[30], np.random.default_rng(1).standard_normal(DIM)):
        for k in (1, 7, 50, 1000):
            assert _search(idx, q, "chunk", k) == _exact(idx, q, "chunk", k)
    ids, scores = idx.scores("nodes", vecs[3], kinds=("chunk",))
    assert ids == [f"n{i}" for i in range(0, 600, 3)]
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    np.testing.assert_allclose(scores, unit[0:600:3] @ unit[3], rtol=1e-5, atol=1e-6)


def test_the_copy_is_kept_across_queries_and_grows_by_appends(small_threshold):
    idx, vecs, _, _ = _filled(600)
    space = idx._space("nodes")
    idx.search("nodes", vecs[0], 5, kinds=("chunk",))
    scan = space._kind_scans[("chunk",)]
    assert scan.n == 200 and scan.buf.flags.c_contiguous
    buf = scan.buf
    idx.search("nodes", vecs[1], 5, kinds=("chunk",))
    assert space._kind_scans[("chunk",)] is scan and scan.buf is buf   # reused, not copied again
    new = np.random.default_rng(2).standard_normal((4, DIM)).astype(np.float32)
    idx.upsert("nodes", ["a0", "a1", "a2", "a3"], new, ["chunk", "entity", "chunk", "chunk"])
    assert _search(idx, new[2], "chunk", 1) == ["a2"]
    assert space._kind_scans[("chunk",)] is scan and scan.n == 203      # three appended rows copied


def test_the_copy_follows_in_place_changes_deletes_and_compaction(small_threshold):
    idx, vecs, _, _ = _filled(600)
    q = np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    idx.search("nodes", q, 5, kinds=("chunk",))
    idx.upsert("nodes", ["n9"], q[None, :], ["chunk"])                    # changed in place
    assert _search(idx, q, "chunk", 1) == ["n9"]
    idx.delete("nodes", ["n9"])                                            # deleted: gone from results
    assert "n9" not in _search(idx, q, "chunk", 600)
    assert _search(idx, q, "chunk", 20) == _exact(idx, q, "chunk", 20)
    idx.delete("nodes", [f"n{i}" for i in range(0, 400)])                  # a compaction moves rows
    assert _search(idx, q, "chunk", 20) == _exact(idx, q, "chunk", 20)
    ids, scores = idx.scores("nodes", q, kinds=("chunk",))
    assert ids == [f"n{i}" for i in range(402, 600, 3)] and len(scores) == len(ids)


def test_a_kind_holding_most_rows_or_a_small_space_keeps_no_copy(small_threshold, monkeypatch):
    idx, vecs, _, _ = _filled(600)
    idx.search("nodes", vecs[0], 5, kinds=("entity",))                     # two thirds of the rows
    assert ("entity",) not in idx._space("nodes")._kind_scans
    monkeypatch.setattr(vec_mod, "KIND_SCAN_MIN_ROWS", 10_000)
    small, svecs, _, _ = _filled(600)
    assert _search(small, svecs[3], "chunk", 9) == _exact(small, svecs[3], "chunk", 9)
    assert not small._space("nodes")._kind_scans


def test_opening_a_kg_directory_makes_the_passages_copy(tmp_path, monkeypatch):
    """A query worker opens the KG once: the passages' copy is made then, not at its first question."""
    from langgraph_kgmem import KnowledgeGraph

    monkeypatch.setattr(vec_mod, "KIND_SCAN_MIN_ROWS", 5)
    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    for i in range(4):
        g.add_triples([(f"Person {i}", "born in", f"Town {i}")], text=f"Person {i} was born in Town {i}.",
                      source=f"d{i}")
    g.close()
    with KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory") as g2:
        scan = g2._vectors._space("nodes")._kind_scans.get(("chunk",))
        assert scan is not None and scan.n == 4
        assert [n.id for n, _ in g2.nearest("Person 2 was born in Town 2.", k=1, kinds=("chunk",))] == \
            [g2.vector_ids(("chunk",))[2]]
