"""Bulk loads on PostgreSQL: HNSW indexes dropped while many vectors go in and built once at the
end (kg/backends/postgres/hnsw.py), searches exact meanwhile, a crash repaired by the next
opener, and the resolution copy's check that does not grow with the KG (#43)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.kg.backends.postgres import hnsw, vectors

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]
QUERIES = ("Harbor Guild", "Kalo Venrith", "the Meridian Press in 1990", "Dova Astor")


def docs(start: int, n: int) -> list[dict[str, str]]:
    """One-sentence documents, each naming a new person (as tools/ingest_scale.py writes them)."""
    orgs = ["Harbor Guild", "Meridian Press", "Valley Water Board", "Royal Botanic Society"]
    first = ["Kalo", "Bren", "Dova", "Sira", "Tomas", "Ulla", "Vero", "Wenn", "Yara", "Zeth"]
    last = ["Venrith", "Astor", "Morrow", "Quill", "Harte", "Ivers", "Lund", "Orrin", "Pike", "Reyes"]
    return [{"id": f"d{i}", "text": f"{first[i % 10]} {last[(i // 10) % 10]} joined the {orgs[i % 4]} in {1900 + i}."}
            for i in range(start, start + n)]


def state(uri: str) -> tuple[set[str], set[str]]:
    """(spaces with an HNSW index, spaces with a bulk-load marker) of the database's only KG."""
    with psycopg.connect(uri) as conn:
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%_hnsw'")}
        keys = {r[0] for r in conn.execute("SELECT key FROM kgmem_meta WHERE key LIKE %s", (hnsw.MARKER + "%",))}
    return ({sp for sp in hnsw.SPACES if any(n.endswith(f"_{sp}_hnsw") for n in names)},
            {k[len(hnsw.MARKER):] for k in keys})


def _ranked(hits) -> list[tuple[float, str]]:
    """Hits as (score, id), equal scores in id order: the two backends break exact ties differently."""
    return sorted((-round(s, 4), x.id) for x, s in hits)


def same_answers(g: KnowledgeGraph, exact: KnowledgeGraph) -> None:
    """``g`` (PostgreSQL, with or without its HNSW indexes) ranks as exhaustive in-memory search does."""
    for q in QUERIES:
        assert _ranked(g.nearest(q, k=5, kinds=None)) == _ranked(exact.nearest(q, k=5, kinds=None))
        assert _ranked(g.nearest_facts(q, k=3)) == _ranked(exact.nearest_facts(q, k=3))


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(vectors, "HNSW_MIN_ROWS", 10)


def test_a_bulk_load_builds_the_indexes_at_its_end_and_searches_stay_exact(new_database, low_threshold):
    uri = new_database()
    exact = KnowledgeGraph.in_memory(name="bulk")
    with KnowledgeGraph.open(uri, name="bulk", embeddings="hash") as g, \
            KnowledgeGraph.open(uri, name="bulk", embeddings="hash") as reader:
        for kg in (g, exact):
            kg.add_documents(docs(0, 8), model="offline")
        assert state(uri) == ({"nodes", "facts"}, set())
        with g.bulk_load():
            assert state(uri) == (set(), {"nodes", "facts"})   # dropped, marked, before any write
            for start in (8, 20):
                g.add_documents(docs(start, 12), model="offline")
                exact.add_documents(docs(start, 12), model="offline")
                assert state(uri) == (set(), {"nodes", "facts"})   # an inner call builds nothing
                reader.refresh()
                same_answers(reader, exact)   # another handle during the load: exact scans, same rows
        assert state(uri) == ({"nodes", "facts"}, set())
        same_answers(g, exact)   # the rebuilt indexes give exact search's top k on this small KG
        reader.refresh()
        same_answers(reader, exact)
        assert g.add_synonym_edges(threshold=0.3) == exact.add_synonym_edges(threshold=0.3)


def test_an_ingest_call_rebuilds_only_a_space_it_at_least_doubles(new_database, low_threshold, monkeypatch):
    uri = new_database()
    deferred: list[str] = []
    real = hnsw.HnswIndexes.defer

    def spy(self, conn, space):
        deferred.append(space)
        real(self, conn, space)

    monkeypatch.setattr(hnsw.HnswIndexes, "defer", spy)
    with KnowledgeGraph.open(uri, name="rule", embeddings="hash") as g:
        g.add_documents(docs(0, 30), model="offline")   # crosses the threshold inside the call
        assert state(uri) == ({"nodes", "facts"}, set()) and set(deferred) == {"nodes", "facts"}
        deferred.clear()
        held = g.stats()["vectors"]["nodes"]
        g.add_documents(docs(30, 5), model="offline")   # far fewer vectors than the space holds: index kept
        assert deferred == [] and state(uri) == ({"nodes", "facts"}, set())
        g.add_documents(docs(35, 40), model="offline")   # more than the space held: dropped, built at the end
        assert "nodes" in deferred and g.stats()["vectors"]["nodes"] - held >= held
        assert state(uri) == ({"nodes", "facts"}, set())


def _die_inside_a_bulk_load(uri: str) -> None:
    code = """
        import os, sys
        sys.path.insert(0, os.getcwd())
        from langgraph_kgmem import KnowledgeGraph
        from langgraph_kgmem.kg.backends.postgres import vectors
        from tests.test_pg_bulk_load import docs
        vectors.HNSW_MIN_ROWS = 10
        kg = KnowledgeGraph.open(sys.argv[1], name="crash", embeddings="hash")
        scope = kg.bulk_load()   # kept: a collected generator would run its end
        scope.__enter__()
        kg.add_documents(docs(8, 12), model="offline")
        os._exit(9)          # killed between the drop and the build
    """
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code), uri], cwd=str(ROOT), capture_output=True,
                         text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 9, res.stderr[-2000:]


def test_a_crash_inside_a_bulk_load_is_repaired_by_the_next_open(new_database, low_threshold):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="crash", embeddings="hash") as g:
        g.add_documents(docs(0, 8), model="offline")
    _die_inside_a_bulk_load(uri)
    assert state(uri) == (set(), {"nodes", "facts"})   # left without indexes, the markers say why
    exact = KnowledgeGraph.in_memory(name="crash")
    exact.add_documents(docs(0, 20), model="offline")
    with KnowledgeGraph.open(uri, name="crash", embeddings="hash") as g:
        assert state(uri) == ({"nodes", "facts"}, set())   # the opener built them
        same_answers(g, exact)


def test_no_one_builds_the_indexes_while_a_load_holds_its_lock(new_database, low_threshold):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="lock", embeddings="hash") as g:
        g.add_documents(docs(0, 8), model="offline")
        with g.bulk_load():
            g.add_documents(docs(8, 6), model="offline")
            with KnowledgeGraph.open(uri, name="lock", embeddings="hash") as other:   # an opener: no repair
                assert state(uri) == (set(), {"nodes", "facts"})
                other.add_documents(docs(14, 20), model="offline")   # a writer crossing the threshold: no build
                assert state(uri) == (set(), {"nodes", "facts"})
        assert state(uri) == ({"nodes", "facts"}, set())


def test_a_rolled_back_drop_leaves_the_index_and_no_marker(new_database, low_threshold):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="rollback", embeddings="hash") as g:
        g.add_documents(docs(0, 8), model="offline")
        with pytest.raises(RuntimeError):
            with g.transaction(), g.bulk_load():
                g.add_documents(docs(8, 4), model="offline")
                raise RuntimeError("abandoned")
        assert state(uri) == ({"nodes", "facts"}, set())
        g.add_documents(docs(8, 4), model="offline")
        assert state(uri) == ({"nodes", "facts"}, set())


def test_resolution_notices_another_writers_deletion_without_counting_rows(new_database):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="res", embeddings="hash") as a, \
            KnowledgeGraph.open(uri, name="res", embeddings="hash") as b:
        a.add_documents(docs(0, 6), model="offline")
        vec = a._vectors
        for name in ("Kalo Venrith", "Bren Venrith"):   # the first deletion and a later one
            q = a.embed_texts([name])
            gone, score = vec.best("nodes", q, kinds=["entity"])[0]   # copied into a's process
            assert score == pytest.approx(1.0, abs=1e-5)
            b.refresh()
            victim = next(d for d in b.documents() if gone in b.document_nodes(d["id"]))
            b.remove_document(victim["id"])   # another process deletes the entity's vector
            assert gone not in vec.ids("nodes")
            assert vec.best("nodes", q, kinds=["entity"])[0][0] != gone


def test_resolution_forgets_rows_a_rollback_undid(new_database):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="undo", embeddings="hash") as g:
        g.add_documents(docs(0, 4), model="offline")
        vec, q = g._vectors, g.embed_texts(["Kalo Astor"])
        with pytest.raises(RuntimeError):
            with g.transaction():
                g.add_triples([("Kalo Astor", "joined", "Harbor Guild")], source="undone")
                seen = vec.best("nodes", q, kinds=["entity"])[0]   # the copy now holds the uncommitted row
                assert seen[1] == pytest.approx(1.0, abs=1e-5)
                raise RuntimeError("rolled back")
        assert seen[0] not in vec.ids("nodes")
        assert vec.best("nodes", q, kinds=["entity"])[0][0] != seen[0]


def test_an_index_build_asks_for_the_memory_its_graph_needs_up_to_the_configured_cap(monkeypatch):
    """A build asks for what its graph needs up to a cap, and KGMEM_HNSW_BUILD_MEMORY_MB raises the
    cap for a server with the memory to build a large graph in memory."""
    from langgraph_kgmem.errors import ConfigurationError

    monkeypatch.delenv(hnsw.BUILD_MEMORY_ENV, raising=False)
    assert hnsw.build_memory_mb(1_000, 256) == 1                       # a small graph asks for what it needs
    assert hnsw.build_memory_mb(3_000_000, 256) == hnsw.HNSW_BUILD_MEMORY_MB == 1024
    monkeypatch.setenv(hnsw.BUILD_MEMORY_ENV, "8192")
    assert hnsw.build_memory_mb(3_000_000, 256) == 5_918           # 3 million node vectors: 5.8 GB
    assert hnsw.build_memory_mb(1_000, 256) == 1
    for bad in ("lots", "12.5", "0"):
        monkeypatch.setenv(hnsw.BUILD_MEMORY_ENV, bad)
        with pytest.raises(ConfigurationError, match="KGMEM_HNSW_BUILD_MEMORY_MB"):
            hnsw.build_memory_mb(1_000, 256)
