"""Entity resolution's candidate search (:class:`HyperplaneIndex`): the closest entity it finds is
the one a full scan finds whenever that one is close enough to merge, on both backends."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem.kg import vectors
from langgraph_kgmem.kg.backends.embedded.vectors import NumpyVectorIndex
from langgraph_kgmem.kg.vectors import HyperplaneIndex, unit_rows

DIM = 96
THRESHOLD = 0.85


def random_rows(n: int, seed: int) -> np.ndarray:
    return unit_rows(np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32))


def at_cosine(base: np.ndarray, cosines: np.ndarray, seed: int) -> np.ndarray:
    """Unit rows whose cosine with the matching row of ``base`` is ``cosines``."""
    noise = random_rows(len(base), seed)
    noise -= (noise * base).sum(axis=1, keepdims=True) * base
    noise = unit_rows(noise)
    return unit_rows(cosines[:, None] * base + np.sqrt(1 - cosines ** 2)[:, None] * noise).astype(np.float32)


def full_scan(rows: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sims = queries @ rows.T
    top = np.argmax(sims, axis=1)
    return top, sims[np.arange(len(queries)), top]


def merge_decisions(rows: np.ndarray, scores: np.ndarray) -> list[int | None]:
    return [int(r) if s >= THRESHOLD else None for r, s in zip(rows, scores)]


def test_same_merges_as_a_full_scan_including_near_the_threshold():
    n = 3 * vectors.TAIL_ROWS + 500   # most rows filed in the tables, the newest in the tail
    rows = random_rows(n, 1)
    index = HyperplaneIndex(DIM)
    for off in range(0, n, 700):   # appended in pieces, as ingest windows do
        index.add(np.arange(off, min(off + 700, n)), rows[off:off + 700])
    assert 0 < index.filed < n
    rng = np.random.default_rng(2)
    targets = rng.choice(n, 3000, replace=False)
    cosines = np.concatenate([rng.uniform(0.80, 0.97, 2000),          # around the threshold
                              THRESHOLD + rng.choice([-2e-4, 2e-4], 1000)])   # just below and just above it
    queries = at_cosine(rows[targets], cosines.astype(np.float32), 3)
    exact = merge_decisions(*full_scan(rows, queries))
    found = merge_decisions(*index.best(queries))
    assert sum(e is not None for e in exact) > 1500 and sum(e is None for e in exact) > 700
    assert found == exact


def test_recall_of_rows_exactly_at_the_threshold():
    """A row at the threshold's cosine is missed with a chance set by the tables alone (about 8 in
    100,000); far fewer than 1 in 1,000 here."""
    n = 2 * vectors.TAIL_ROWS
    rows = random_rows(n, 4)
    index = HyperplaneIndex(DIM)
    index.add(np.arange(n), rows)
    assert index.filed == n
    queries = at_cosine(rows[:4000], np.full(4000, THRESHOLD, dtype=np.float32), 5)
    found, scores = index.best(queries)
    missed = int((found != np.arange(4000)).sum())
    assert missed <= 4, f"{missed} of 4000 rows at cosine {THRESHOLD} not found"


def test_rows_compared_per_query_stay_a_tiny_share_of_the_rows_held():
    """Each candidate costs a gather of its vector and a product. With one shared bucket enough,
    about 1 row in 200 of any KG was compared with every new name, so a name's cost grew in
    proportion to the KG; unrelated rows must now share a probed bucket in several tables, so
    candidates are rows that are near, or rare chances (the square of one table's)."""
    queries = random_rows(64, 12)
    rows = random_rows(64_000, 11)
    index = HyperplaneIndex(DIM)
    index.add(np.arange(len(rows)), rows)
    assert index.filed == len(rows)
    per_query = len(index.candidates(queries)[0]) / len(queries)
    assert per_query <= len(rows) / 2000, f"{per_query:.1f} rows of {len(rows)} compared per query"


def test_ties_go_to_the_lowest_position_as_in_a_full_scan():
    n = vectors.TAIL_ROWS + 10
    rows = random_rows(n + 1, 6)
    rows[n] = rows[7]   # a copy of filed row 7, in the tail
    index = HyperplaneIndex(DIM)
    index.add(np.arange(n), rows[:n])
    index.add(np.array([n]), rows[n:])
    assert index.filed == n and index.n == n + 1
    found, scores = index.best(rows[[7]])
    assert found.tolist() == [7]
    # both copies in the tables
    index.add(np.arange(n + 1, n + 1 + vectors.TAIL_ROWS), random_rows(vectors.TAIL_ROWS, 7))
    assert index.filed == index.n
    found, _ = index.best(rows[[7]])
    assert found.tolist() == [7]


def test_vector_index_best_skips_deleted_rows_other_kinds_and_stale_vectors():
    n = 2 * vectors.TAIL_ROWS
    rows = random_rows(n + 3, 8)
    vi = NumpyVectorIndex()
    vi.upsert("nodes", [f"e{i}" for i in range(n)], rows[:n], ["entity"] * n)
    vi.upsert("nodes", ["chunk"], rows[[n]], ["chunk"])   # same vector as the query below, wrong kind
    query = rows[[n]]
    vi.upsert("nodes", ["near"], at_cosine(query, np.array([0.95], dtype=np.float32), 9), ["entity"])
    assert vi.best("nodes", query, kinds=("entity",))[0][0] == "near"
    vi.delete("nodes", ["near"])   # deleted: never a match again
    assert vi.best("nodes", query, kinds=("entity",))[0][0] != "near"
    # an existing entity's vector replaced in place: found where it is now, not where it was
    old = rows[[5]]
    vi.upsert("nodes", ["e5"], query, ["entity"])
    assert vi.best("nodes", query, kinds=("entity",))[0] == ("e5", pytest.approx(1.0, abs=1e-6))
    assert vi.best("nodes", old, kinds=("entity",))[0][0] != "e5"


def full_scan_best(self, space, queries, kinds=None, columns=None):
    """Reference entity resolution: every live row of these kinds, compared exactly."""
    ids, mat = self.matrix(space, kinds)
    queries = unit_rows(np.asarray(queries, dtype=np.float32))
    if not ids or not len(queries):
        return [(None, -1.0)] * len(queries)
    sims = queries @ np.asarray(mat, dtype=np.float32).T
    top = np.argmax(sims, axis=1)
    return [(ids[j], float(sims[i, j])) for i, j in enumerate(top)]


def near_duplicate_documents(n: int) -> list[dict[str, str]]:
    """One-sentence documents, each naming a person; many names come back later spelled a little
    differently (an initial, a suffix, a title), some close enough to merge, some not."""
    rng = np.random.default_rng(10)
    first = ["Kalo", "Venra", "Tobin", "Mirela", "Osric", "Dalia", "Fenwick", "Ysolde", "Branko", "Lio"]
    last = ["Venrith", "Aldermoor", "Quillon", "Marsh", "Thorncastle", "Ibarra", "Okonkwo", "Laskaris"]
    names: list[str] = []
    docs = []
    for i in range(n):
        if names and rng.random() < 0.4:
            base = names[int(rng.integers(len(names)))]
            variant = str(rng.choice(["{} Jr", "Dr {}", "{} III", "Sir {}", "{} Senior", "{}s"])).format(base)
        else:
            variant = f"{first[i % len(first)]} {last[(i // len(first)) % len(last)]} {chr(65 + i % 26)}{i}"
        names.append(variant)
        docs.append({"id": f"d{i}", "text": f"{variant} joined the Harbor Guild in {1900 + i % 100}."})
    return docs


def test_ingest_makes_the_merges_of_a_full_scan(make_kg, monkeypatch):
    """A KG grown past the exact tail resolves every name to the entity a full scan picks: same
    entities, aliases and edges, on each backend."""
    monkeypatch.setattr(vectors, "TAIL_ROWS", 64)   # the tables in use from a few hundred entities on
    docs = near_duplicate_documents(600)
    indexed = make_kg("indexed")
    for off in range(0, len(docs), 150):
        indexed.add_documents(docs[off:off + 150], model="offline", progress=False)
    with monkeypatch.context() as m:
        m.setattr(type(indexed.vector_index), "best", full_scan_best)
        scanned = make_kg("scanned")
        for off in range(0, len(docs), 150):
            scanned.add_documents(docs[off:off + 150], model="offline", progress=False)
    merged = scanned.aliases()
    assert len(merged) > 30 and len(scanned.nodes("entity")) > 300   # merges and new names both happen
    # the same alias -> entity decisions; cosines agree to float32 rounding (products of other shapes)
    assert [(a, t) for a, t, _ in indexed.aliases()] == [(a, t) for a, t, _ in merged]
    assert [s for _, _, s in indexed.aliases()] == pytest.approx([s for _, _, s in merged], abs=1e-5)
    assert sorted(n.id for n in indexed.nodes()) == sorted(n.id for n in scanned.nodes())
    assert sorted(e.id for e in indexed.edges()) == sorted(e.id for e in scanned.edges())


def test_sqlite_finds_the_next_document_number_by_index(tmp_path):
    """Each document written asks for the highest document number: without an index on it that
    read scans every document, and ingest slows as the KG grows."""
    from langgraph_kgmem.kg.backends.embedded.sqlite import SqliteGraphStore

    store = SqliteGraphStore(tmp_path / "kg.db")
    try:
        plan = " ".join(str(r) for r in store.conn.execute(
            "EXPLAIN QUERY PLAN SELECT COALESCE(MAX(seq), 0) + 1 FROM documents").fetchall())
    finally:
        store.close()
    assert "documents_seq" in plan


def test_bulk_ingests_refresh_planner_statistics_as_the_kg_grows_by_a_quarter(make_kg, monkeypatch):
    """ANALYZE reads the whole KG: run after every bulk ingest, it made each document cost more as
    the KG grew. It runs after the first bulk ingest, then once the KG has grown by a quarter."""
    from langgraph_kgmem.kg import graph

    monkeypatch.setattr(graph, "ANALYZE_AFTER_DOCUMENTS", 4)
    kg = make_kg("analyze")
    calls = []
    monkeypatch.setattr(kg.graph_store, "analyze", lambda: calls.append(kg.graph_store.document_count()))
    docs = [{"id": f"d{i}", "text": f"Person {i} Quillon joined the Harbor Guild."} for i in range(60)]
    kg.add_documents(docs[:40], model="offline", progress=False)
    assert calls == [40]
    kg.add_documents(docs[40:45], model="offline", progress=False)   # 5 more: under a quarter of 40
    kg.add_documents(docs[45:49], model="offline", progress=False)   # 9 since: still under 10
    assert calls == [40]
    kg.add_documents(docs[49:51], model="offline", progress=False)   # 11 since the refresh
    assert calls == [40, 51]
    kg.add_documents(docs[51:60], model="offline", progress=False)   # 9: under a quarter of 51
    assert calls == [40, 51]
