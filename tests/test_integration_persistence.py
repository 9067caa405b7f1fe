"""Integration: the real local embedding model, Chroma PersistentClient, SQLite graph store and
LangGraph's SqliteSaver/SqliteStore, reopened in a new Python process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.memory import EdgeMemory, RecordMemory

pytestmark = pytest.mark.integration

DUMP = textwrap.dedent("""
    import json, sys
    import numpy as np
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.memory import EdgeMemory, RecordMemory
    kg = KnowledgeGraph.open(sys.argv[1], name="persist")
    ids = sorted(n.id for n in kg.nodes())
    vec = kg.vectors(ids)
    _, store = kg.persistence()
    mem = EdgeMemory(store, "persist", vec.shape[1])
    rec = RecordMemory(store, "persist", "trajectories")
    out = {
        "nodes": sorted((n.id, n.kind, n.text) for n in kg.nodes()),
        "edges": sorted((e.id, e.src, e.dst, e.kind, e.text) for e in kg.edges()),
        "vec_sum": float(np.abs(vec).sum()), "vec_shape": list(vec.shape),
        "facts": kg.vector_index.count("facts"),
        "memory_keys": mem.keys(), "memory_first": mem.get(mem.keys()[0]).round(5).tolist(),
        "records": rec.all(),
        "nearest": kg.nearest("Which river flows through Warsaw?", 1, kinds=("chunk",))[0][0].attrs["title"],
    }
    kg.close()
    print(json.dumps(out))
""")


def test_persistence_across_processes(tmp_path, sample_docs):
    path = tmp_path / "kg"
    kg = KnowledgeGraph.open(path, name="persist")  # real all-MiniLM-L6-v2 + Chroma
    kg.add_documents(sample_docs, model="offline")
    ids = sorted(n.id for n in kg.nodes())
    vec = kg.vectors(ids)
    assert vec.shape[1] == 384
    _, store = kg.persistence()
    edge = sorted(e.id for e in kg.edges("relation"))[0]
    mem = EdgeMemory(store, "persist", 384)
    v = np.zeros(384)
    v[:3] = [0.5, -0.25, 0.125]
    mem.put_many({edge: v})
    RecordMemory(store, "persist", "trajectories").put("t1", {"steps": ["RetrieveNode(Warsaw)"], "ok": True})
    expected = {
        "nodes": sorted([n.id, n.kind, n.text] for n in kg.nodes()),
        "edges": sorted([e.id, e.src, e.dst, e.kind, e.text] for e in kg.edges()),
        "vec_sum": float(np.abs(vec).sum()),
        "facts": kg.vector_index.count("facts"),
    }
    kg.close()

    proc = subprocess.run([sys.executable, "-c", DUMP, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["nodes"] == expected["nodes"]
    assert got["edges"] == expected["edges"]
    assert got["vec_shape"] == [len(ids), 384]
    assert abs(got["vec_sum"] - expected["vec_sum"]) < 1e-3
    assert got["facts"] == expected["facts"] > 0
    assert got["memory_keys"] == [edge]
    assert got["memory_first"][:3] == [0.5, -0.25, 0.125]
    assert got["records"] == {"t1": {"steps": ["RetrieveNode(Warsaw)"], "ok": True}}
    assert got["nearest"] in {"Warsaw", "Vistula"}


def test_reingest_after_reopen_changes_nothing(tmp_path, sample_docs):
    path = tmp_path / "kg"
    with KnowledgeGraph.open(path, name="p") as kg:
        kg.add_documents(sample_docs, model="offline")
        n, m = kg.node_count(), kg.edge_count()
    with KnowledgeGraph.open(path, name="p") as kg:
        report = kg.add_documents(sample_docs, model="offline")
        assert report.documents_added == 0 and (kg.node_count(), kg.edge_count()) == (n, m)
        kg.delete_document("doc-vistula")
        assert kg.document("doc-vistula") is None
    with KnowledgeGraph.open(path, name="p") as kg:
        assert kg.document("doc-vistula") is None
        assert kg.vector_index.count("nodes") == len([x for x in kg.nodes() if x.kind in ("entity", "chunk", "anchor")])


def test_the_memory_store_commits_without_an_fsync_each_write(tmp_path):
    """WAL with synchronous=NORMAL on the store's connection (like the KG's own SQLite): a small
    write (a run record, a route's statistics) costs a fraction of a millisecond, not an fsync."""
    from langgraph_kgmem.persistence import open_persistence

    saver, store = open_persistence(tmp_path)
    try:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1     # NORMAL
    finally:
        store.conn.close()
        saver.conn.close()
