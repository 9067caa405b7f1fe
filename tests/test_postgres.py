"""The server backend on a real PostgreSQL + pgvector: sharing between processes, tenants, the
concurrency contract, and bad input (#11). Storage- and method-level behaviour runs against both
backends through the ``kg`` / ``make_kg`` fixtures; this file holds what only a server has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import psycopg
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import ConfigurationError, KgmemInputError, StorageError
from langgraph_kgmem.kg.backends.postgres import drop_kg, list_kgs
from langgraph_kgmem.memory import EdgeMemory
from tests.conftest import SAMPLE_DOCS

pytestmark = [pytest.mark.integration]
ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str, timeout: float = 120) -> str:
    """Run ``code`` in a new Python process (the repository on its path); return its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         timeout=timeout, env=env, cwd=str(ROOT))
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _fingerprint(g: KnowledgeGraph):
    return (sorted((n.id, n.kind, n.text) for n in g.nodes()),
            sorted((e.id, e.src, e.dst, e.kind, e.text, round(e.weight, 9)) for e in g.edges()))


def test_persistence_uses_postgres_when_configured(tmp_path, monkeypatch, postgres_uri):
    """An embedded KG can still keep checkpoints and memory in Postgres (KGMEM_POSTGRES_URI)."""
    monkeypatch.setenv("KGMEM_POSTGRES_URI", postgres_uri)
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory", name="pgtest")
    saver, store = kg.persistence()
    assert {c.__name__ for c in type(saver).__mro__} >= {"PostgresSaver"} and \
        {c.__name__ for c in type(store).__mro__} >= {"PostgresStore"}
    EdgeMemory(store, "pgtest", 4).put_many({"rel-x": np.array([1.0, 0, 0, 0])})
    kg.close()
    kg2 = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory", name="pgtest")
    _, store2 = kg2.persistence()
    assert EdgeMemory(store2, "pgtest", 4).get("rel-x").tolist() == [1.0, 0, 0, 0]
    kg2.close()


def test_a_postgres_kg_keeps_memory_and_checkpoints_in_its_own_database(new_database):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="mem", embeddings="hash") as kg:
        saver, store = kg.persistence()
        assert {c.__name__ for c in type(saver).__mro__} >= {"PostgresSaver"} and \
        {c.__name__ for c in type(store).__mro__} >= {"PostgresStore"}
        EdgeMemory(store, "mem", 2).put_many({"rel-a": np.array([0.5, 0.5])})
        assert kg.stats()["backend"] == "postgres" and kg.stats()["vector_backend"] == "pgvector"
    with psycopg.connect(uri) as conn:   # the store's rows sit in the KG's database
        assert conn.execute("SELECT count(*) FROM store WHERE prefix = 'kgmem.mem.edge_memory'").fetchone()[0] == 1


def test_another_process_sees_writes_without_reopening(new_database):
    uri = new_database()
    reader = KnowledgeGraph.open(uri, name="shared", embeddings="hash", refresh_interval=3600)
    writer_code = """
        import sys
        from langgraph_kgmem import KnowledgeGraph
        from tests.conftest import SAMPLE_DOCS
        with KnowledgeGraph.open(sys.argv[1], name="shared", embeddings="hash") as kg:
            kg.add_documents(SAMPLE_DOCS[:2], model="offline")
    """
    _python(writer_code, uri)
    assert reader.node_count() == 0        # its cache is a cache: nothing checked yet
    snap = reader.snapshot()
    assert reader.refresh() is True
    assert reader.node_count() > 0 and reader.snapshot() is not snap   # version-keyed caches rebuilt
    assert reader.nearest("Warsaw", k=1)[0][0].text == "Warsaw"
    # a delete in another process reaches the reader too, reading only the rows it touched
    _python("""
        import sys
        from langgraph_kgmem import KnowledgeGraph
        with KnowledgeGraph.open(sys.argv[1], name="shared", embeddings="hash") as kg:
            kg.delete_document("doc-warsaw")
    """, uri)
    reader.refresh()
    with KnowledgeGraph.open(uri, name="shared", embeddings="hash") as fresh:
        assert _fingerprint(reader) == _fingerprint(fresh)
    assert not [n for n in reader.nodes("entity") if n.text == "Vistula"]
    reader.close()


def test_the_time_based_refresh_picks_up_other_writers(new_database):
    uri = new_database()
    reader = KnowledgeGraph.open(uri, name="auto", embeddings="hash", refresh_interval=0.0)
    with KnowledgeGraph.open(uri, name="auto", embeddings="hash") as writer:
        writer.add_triples([("Oslo", "capital of", "Norway")], source="a")
    assert {n.text for n in reader.nodes("entity")} == {"Oslo", "Norway"}   # no explicit refresh
    reader.close()


WRITER = """
    import json, sys
    from langgraph_kgmem import KnowledgeGraph
    uri, worker, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with KnowledgeGraph.open(uri, name="par", embeddings="hash") as kg:
        for d in range(n):
            i = worker * n + d
            kg.add_triples([(f"Person {i}", "lives in", f"City {i % 3}"), (f"Person {i}", "works at", "Acme Corp")],
                           source=f"doc-{i}", text=f"Person {i} lives in City {i % 3} and works at Acme Corp.",
                           merge_threshold=None)
"""


def test_four_processes_ingesting_at_once_build_the_serial_kg(new_database):
    uri, per = new_database(), 6
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), uri, str(w), str(per)],
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-3000:]
    serial = KnowledgeGraph.in_memory(name="par")
    for i in range(4 * per):
        serial.add_triples([(f"Person {i}", "lives in", f"City {i % 3}"), (f"Person {i}", "works at", "Acme Corp")],
                           source=f"doc-{i}", text=f"Person {i} lives in City {i % 3} and works at Acme Corp.",
                           merge_threshold=None)
    with KnowledgeGraph.open(uri, name="par", embeddings="hash") as kg:
        assert _fingerprint(kg) == _fingerprint(serial)
        assert kg.stats()["documents"] == 4 * per and kg.stats()["vectors"] == serial.stats()["vectors"]
        assert all(d["status"] == "done" for d in kg.documents())


SPELLINGS = ["Acme Corporation", "Acme-Corporation", "Acme, Corporation", "Acme / Corporation"]   # one entity
RACER = """
    import sys, time
    from pathlib import Path
    from langgraph_kgmem import KnowledgeGraph
    uri, worker, meet, window = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
    spellings = sys.argv[5:]
    with KnowledgeGraph.open(uri, name="race", embeddings="hash") as kg:
        sync = kg._sync_in_transaction

        def sync_then_wait(conn):
            # the write's view of the KG is taken here; holding it open puts every writer that is not
            # serialised inside the same window, before any of them committed
            sync(conn)
            time.sleep(window)

        kg._sync_in_transaction = sync_then_wait
        (meet / f"ready-{worker}").touch()        # a barrier: all processes write at once
        deadline = time.monotonic() + 120
        while len(list(meet.glob("ready-*"))) < len(spellings) and time.monotonic() < deadline:
            time.sleep(0.01)
        kg.add_triples([(spellings[worker], "makes", f"Product {worker}")], source=f"doc-{worker}")
"""


def test_writers_racing_on_one_new_entity_merge_it_as_serial_writers_do(new_database, tmp_path):
    """The per-KG write lock is what makes entity resolution see the other writers' entities: each
    process adds a spelling of one new company at the same moment, with merging on; serialised, the
    first creates the entity and the others merge into it. Without the lock every writer would
    resolve against the KG as it was before any of them (each sync holds its view open a while, so
    the writers overlap every time) and create an entity of its own."""
    uri = new_database()
    KnowledgeGraph.open(uri, name="race", embeddings="hash").close()   # schema and KG row made once
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(RACER), uri, str(w), str(tmp_path), "1.5",
                               *SPELLINGS], env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(len(SPELLINGS))]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
    with KnowledgeGraph.open(uri, name="race", embeddings="hash") as kg:
        companies = [n for n in kg.nodes("entity") if n.text in SPELLINGS]
        assert len(companies) == 1, f"one company, not {[n.text for n in companies]}"
        aliases = kg.graph_store.aliases(companies[0].id)
        assert len(aliases) == len(SPELLINGS) - 1            # every other spelling merged into it
        products = {n.id for n in kg.nodes("entity") if n.text.startswith("Product ")}
        assert len(products) == len(SPELLINGS)
        assert {e.src for e in kg.edges() if e.dst in products} == {companies[0].id}   # all made by the one company


def test_tenants_are_invisible_to_each_other_and_drop_removes_only_one(new_database):
    uri = new_database()
    a = KnowledgeGraph.open(uri, name="tenant-a", embeddings="hash")
    b = KnowledgeGraph.open(uri, name="tenant-b", embeddings="hash")
    a.add_documents(SAMPLE_DOCS, model="offline")
    b.add_triples([("Oslo", "capital of", "Norway")], source="b1")
    assert {n.text for n in b.nodes("entity")} == {"Oslo", "Norway"}
    assert [n.text for n, _ in b.nearest("Marie Curie", k=5)] and \
        all(n.text in {"Oslo", "Norway"} for n, _ in b.nearest("Marie Curie", k=5))
    assert all(e.src.startswith("ent-") and b.edge(e.id) for e, _ in b.nearest_facts("Curie", k=5))
    assert b.stats()["documents"] == 1 and b.stats()["vectors"]["facts"] == 1
    seed = b.nearest("Oslo", k=1)[0][0].id
    assert {nid for nid, _ in b.ppr({seed: 1.0})} <= {n.id for n in b.nodes()}
    _, store = a.persistence()
    EdgeMemory(store, "tenant-a", 2).put_many({"rel-1": np.array([1.0, 0.0])})
    assert EdgeMemory(store, "tenant-b", 2).keys() == []
    before_b = _fingerprint(b)
    a.close()
    assert drop_kg(uri, "tenant-a") is True and drop_kg(uri, "tenant-a") is False
    assert [k["name"] for k in list_kgs(uri)] == ["tenant-b"]
    b.refresh()
    assert _fingerprint(b) == before_b
    with psycopg.connect(uri) as conn:
        left = conn.execute("SELECT count(*) FROM kgmem_nodes n JOIN kgmem_graphs g ON g.id = n.kg "
                            "WHERE g.name = 'tenant-a'").fetchone()[0]
        assert left == 0
    with pytest.raises(KgmemInputError, match="no KG named 'tenant-a'"):
        KnowledgeGraph.open(uri, name="tenant-a", embeddings="hash", create=False)
    b.close()


def test_kgs_of_different_dimensions_share_a_database(new_database):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="d256", embeddings="hash") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    with KnowledgeGraph.open(uri, name="d64", embeddings="hash:64") as g:
        g.add_triples([("Bergen", "city in", "Norway")], source="a")
        assert g.nearest("Bergen", k=1)[0][0].text == "Bergen"
    with pytest.raises(KgmemInputError, match="built with embeddings 'hash-256'"):
        KnowledgeGraph.open(uri, name="d256", embeddings="hash:64")
    with KnowledgeGraph.open(uri, name="d256", embeddings="hash") as g:   # nothing was changed
        assert {n.text for n in g.nodes("entity")} == {"Oslo", "Norway"}


def test_wrong_uri_or_password_is_a_clear_error(postgres_uri):
    from langgraph_kgmem.kg.backends.postgres.testing import PASSWORD

    port = int(postgres_uri.rsplit(":", 1)[1].split("/")[0])
    bad_port = f"postgresql://postgres@127.0.0.1:{port + 1 if port < 65535 else port - 1}/postgres"
    with pytest.raises(StorageError, match="(?s)failed while connecting.*Connection refused.*Check the server is up"):
        KnowledgeGraph.open(bad_port, name="x", embeddings="hash")
    with pytest.raises(StorageError, match="does not exist"):
        KnowledgeGraph.open(postgres_uri.rsplit("/", 1)[0] + "/no_such_db", name="x", embeddings="hash")
    wrong = f"postgresql://kgmem_secure:not-it@127.0.0.1:{port}/postgres"
    with pytest.raises(StorageError, match="password authentication failed") as info:
        KnowledgeGraph.open(wrong, name="x", embeddings="hash")
    assert "not-it" not in str(info.value)   # the password is never echoed
    right = f"postgresql://kgmem_secure:{PASSWORD}@127.0.0.1:{port}/postgres"
    KnowledgeGraph.open(right, name="pw-ok", embeddings="hash").close()
    drop_kg(right, "pw-ok")


def test_a_server_without_pgvector_is_a_clear_error(new_database):
    uri = new_database()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kgmem_plain') "
                     "THEN CREATE ROLE kgmem_plain LOGIN; END IF; END $$")
        conn.execute("GRANT USAGE, CREATE ON SCHEMA public TO kgmem_plain")
        conn.execute("REVOKE CREATE ON DATABASE " + uri.rsplit("/", 1)[1] + " FROM PUBLIC")
    plain = uri.replace("postgresql://postgres@", "postgresql://kgmem_plain@")
    with pytest.raises(ConfigurationError, match="(?s)no pgvector extension.*CREATE EXTENSION vector"):
        KnowledgeGraph.open(plain, name="x", embeddings="hash")


def test_a_server_that_goes_away_loses_nothing_committed_and_writes_nothing_half(monkeypatch):
    from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

    monkeypatch.setenv("KGMEM_POSTGRES_TIMEOUT", "2")
    pg = TemporaryPostgres().start()
    try:
        kg = KnowledgeGraph.open(pg.uri, name="crash", embeddings="hash")
        kg.add_documents(SAMPLE_DOCS[:2], model="offline")
        before = _fingerprint(kg)
        pg.kill()
        with pytest.raises(StorageError, match="(?s)failed while.*Check the server is up"):
            kg.add_documents(SAMPLE_DOCS[2:], model="offline")
        with pytest.raises(StorageError):
            kg.nearest("Warsaw")
        pg.start()
        kg.refresh()
        assert _fingerprint(kg) == before          # nothing half-written, nothing committed lost
        report = kg.add_documents(SAMPLE_DOCS, model="offline")   # the re-run completes the ingest
        assert report.documents_added == 2 and report.documents_skipped == 2
        kg.close()
        with KnowledgeGraph.open(pg.uri, name="crash", embeddings="hash") as again:
            assert len(again.documents()) == 4 and all(d["status"] == "done" for d in again.documents())
    finally:
        pg.stop()


def test_a_killed_writer_leaves_nothing_half_written(new_database):
    uri = new_database()
    code = """
        import os, sys
        from langgraph_kgmem import KnowledgeGraph
        from langgraph_kgmem import knowledge_graph as graph_module
        kg = KnowledgeGraph.open(sys.argv[1], name="killed", embeddings="hash")
        kg.add_triples([("Oslo", "capital of", "Norway")], source="first")
        real = graph_module.KnowledgeGraph.add_edges
        def die(self, *a, **k):
            real(self, *a, **k)
            os._exit(9)          # killed mid-document: nodes and edges written, not committed
        graph_module.KnowledgeGraph.add_edges = die
        kg.add_triples([("Bergen", "city in", "Norway")], source="second")
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code), uri], env=env, cwd=str(ROOT),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 9, res.stderr[-2000:]
    with KnowledgeGraph.open(uri, name="killed", embeddings="hash") as kg:
        assert {n.text for n in kg.nodes("entity")} == {"Oslo", "Norway"}
        assert kg.document("second") is None and kg.stats()["vectors"]["nodes"] == 2
        kg.add_triples([("Bergen", "city in", "Norway")], source="second")   # a re-run completes it
        assert {n.text for n in kg.nodes("entity")} == {"Oslo", "Norway", "Bergen"}


def test_one_kg_name_is_one_kg_whoever_opens_it(new_database):
    uri = new_database()
    out = json.loads(_python("""
        import json, sys
        from langgraph_kgmem import KnowledgeGraph
        with KnowledgeGraph.open(sys.argv[1], name="named", embeddings="hash") as kg:
            kg.add_triples([("Oslo", "capital of", "Norway")], source="a")
            print(json.dumps(kg.stats()["nodes"]))
    """, uri))
    with KnowledgeGraph.open(uri, name="named", embeddings="hash") as kg:
        assert kg.node_count() == out


def _comparable_stats(g: KnowledgeGraph) -> dict:
    st = g.stats()
    for key in ("path", "backend", "vector_backend"):
        st.pop(key)
    return st


def _answers(g: KnowledgeGraph, methods) -> dict:
    from method_cases import OTHER, QUESTION, compile_method

    _, store = g.persistence()
    out = {}
    for m in methods:
        app = compile_method(m, g, store=store)
        for q in (QUESTION, OTHER):
            r = app.invoke({"question": q})
            out[(m, q)] = (r["answer"], [e["id"] for e in r["evidence"]])
    return out


def test_migrate_to_postgres_and_back_keeps_structure_vectors_memory_and_answers(tmp_path, new_database):
    from langgraph_kgmem.cli import main
    from langgraph_kgmem.graphs.registry import METHODS

    methods = [m for m in METHODS if m != "kgirag"]
    src_dir, back_dir, uri = tmp_path / "src", tmp_path / "back", new_database()
    with KnowledgeGraph.open(src_dir, name="mig", embeddings="hash", vector_backend="memory") as g:
        g.add_documents(SAMPLE_DOCS, model="offline")
        g.add_synonym_edges(threshold=0.3)
        _, store = g.persistence()
        EdgeMemory(store, "mig", 3).put_many({"rel-a": np.array([0.1, 0.2, 0.3])})
        _answers(g, methods)            # memory the methods learn (edge memories, codebook runs) migrates too
        stats = _comparable_stats(g)
    assert main(["migrate", "--from", str(src_dir), "--to", uri, "--embeddings", "hash"]) == 0
    # from identical states, each method answers the same questions the same way on both backends
    with KnowledgeGraph.open(src_dir, embeddings="hash") as g:
        answers = _answers(g, methods)
    with KnowledgeGraph.open(uri, name="mig", embeddings="hash") as g:
        assert _comparable_stats(g) == stats
        _, store = g.persistence()
        assert EdgeMemory(store, "mig", 3).get("rel-a").tolist() == pytest.approx([0.1, 0.2, 0.3])
        assert _answers(g, methods) == answers
        stats = _comparable_stats(g)
    # a second migration into the now non-empty KG is refused
    assert main(["migrate", "--from", str(src_dir), "--to", uri, "--embeddings", "hash"]) == 2
    assert main(["migrate", "--from", uri, "--to", str(back_dir), "--name", "mig", "--embeddings", "hash"]) == 0
    with KnowledgeGraph.open(uri, name="mig", embeddings="hash") as g:
        answers = _answers(g, methods)
    with KnowledgeGraph.open(back_dir, embeddings="hash") as g:
        assert g.name == "mig" and _comparable_stats(g) == stats
        assert _answers(g, methods) == answers


def test_cli_drop_removes_one_kg(new_database, capsys):
    from langgraph_kgmem.cli import main

    uri = new_database()
    for name in ("keep", "gone"):
        with KnowledgeGraph.open(uri, name=name, embeddings="hash") as g:
            g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    assert main(["drop", "--kg", uri, "--name", "gone"]) == 0
    assert [k["name"] for k in list_kgs(uri)] == ["keep"]
    assert main(["drop", "--kg", uri, "--name", "gone"]) == 2
    assert "no KG named 'gone'" in capsys.readouterr().err
    assert main(["stats", "--kg", uri, "--name", "keep", "--embeddings", "hash"]) == 0


def test_a_space_gets_its_hnsw_index_once_it_is_large_and_search_agrees_with_exact(new_database, monkeypatch):
    from langgraph_kgmem.kg.backends.postgres import vectors

    monkeypatch.setattr(vectors, "HNSW_MIN_ROWS", 12)
    uri = new_database()
    exact = KnowledgeGraph.in_memory(name="hnsw")
    with KnowledgeGraph.open(uri, name="hnsw", embeddings="hash") as g:
        for d in SAMPLE_DOCS:
            g.add_documents([d], model="offline")
            exact.add_documents([d], model="offline")
        with psycopg.connect(uri) as conn:
            names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename LIKE 'kgmem_vec_%'")}
        assert any(n.endswith("_nodes_hnsw") for n in names) and any(n.endswith("_facts_hnsw") for n in names)
        for q in ("Marie Curie", "river in Poland", "Nobel Prize in Physics"):
            assert [n.id for n, _ in g.nearest(q, k=5, kinds=None)] == [n.id for n, _ in exact.nearest(q, k=5, kinds=None)]
            assert [e.id for e, _ in g.nearest_facts(q, k=3)] == [e.id for e, _ in exact.nearest_facts(q, k=3)]
        assert g.add_synonym_edges(threshold=0.3) == exact.add_synonym_edges(threshold=0.3)
