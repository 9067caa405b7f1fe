"""Corrupt or missing files end in the package's own error and lose nothing (#39, item 3).

Each case of the hostile audit, table-driven: a KG is built, one thing in its storage is damaged
the way the audit damaged it, and reopening or using it must raise the package's error (never a
raw ``JSONDecodeError``, ``KeyError``, ``MemoryError`` ..., never an open that silently holds
less) while every file stays as it was. Cases that apply to PostgreSQL run there too.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import CorruptStoredDataError, KgmemError, NotAKnowledgeGraphError, StorageError
from langgraph_kgmem.kg.backends.embedded.files import VECTORS_FILE

DOCS = [{"id": "doc-oslo", "title": "Oslo", "text": "Oslo is the capital of Norway. Oslo lies on a fjord."},
        {"id": "doc-bergen", "title": "Bergen", "text": "Bergen is a city in Norway. Bergen has a harbour."}]


def _digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the lock apart) and its content hash."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def _built(root: Path, vector_backend: str = "memory") -> None:
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend=vector_backend) as g:
        g.add_documents(DOCS, model="offline")


def _sql(root: Path, statement: str) -> None:
    conn = sqlite3.connect(root / "kg.sqlite")
    with conn:
        conn.execute(statement)
    conn.close()


def _open(root: Path, **kw):
    g = KnowledgeGraph.open(root, embeddings="hash", **kw)
    try:
        g.documents()
        g.search("Oslo", k=3)
    finally:
        g.close()


# (case, SQL on kg.sqlite, SQL on PostgreSQL or None, error, message)
ROW_CASES = [
    ("non-JSON node attributes", "UPDATE nodes SET attrs='{not json' WHERE rowid=1", None,
     CorruptStoredDataError, r"the attributes of node .* not JSON"),
    ("a JSON array as node attributes", "UPDATE nodes SET attrs='[1, 2]' WHERE rowid=1",
     "UPDATE kgmem_nodes SET attrs='[1, 2]'::jsonb WHERE id = (SELECT min(id) FROM kgmem_nodes)",
     CorruptStoredDataError, r"the attributes of node .* a JSON list, not an object"),
    ("an edge to a missing node", "DELETE FROM nodes WHERE id = (SELECT src FROM edges LIMIT 1)",
     "DELETE FROM kgmem_nodes WHERE id = (SELECT min(src) FROM kgmem_edges)",
     CorruptStoredDataError, r"edge .* joins node .* which the database does not hold"),
    ("a text weight", "UPDATE edges SET weight='heavy' WHERE rowid=1", None,
     CorruptStoredDataError, r"edge .* has the weight 'heavy', not a finite number"),
    ("a NaN or infinite weight", "UPDATE edges SET weight=9e999 WHERE rowid=1",
     "UPDATE kgmem_edges SET weight='NaN' WHERE id = (SELECT min(id) FROM kgmem_edges)",
     CorruptStoredDataError, r"edge .* has the weight .*not a finite number"),
    ("non-JSON edge attributes", "UPDATE edges SET attrs='nope' WHERE rowid=1", None,
     CorruptStoredDataError, r"edge .*'s attributes holds 'nope', which is not JSON"),
    ("non-JSON document metadata", "UPDATE documents SET meta='{{{' WHERE id='doc-oslo'",
     "UPDATE kgmem_documents SET meta='\"a string\"'::jsonb WHERE id='doc-oslo'",
     CorruptStoredDataError, r"the metadata of document 'doc-oslo'"),
    ("a dropped nodes table", "DROP TABLE nodes", None,
     NotAKnowledgeGraphError, r"kg\.sqlite is a KG database without its table\(s\) nodes"),
]


@pytest.mark.parametrize("case, sql, _pg, error, match", ROW_CASES, ids=[c[0] for c in ROW_CASES])
def test_a_damaged_kg_database_row_is_the_packages_error_and_nothing_changes(tmp_path, case, sql, _pg, error,
                                                                               match):
    root = tmp_path / "kg"
    _built(root)
    _sql(root, sql)
    before = _digest(root)
    with pytest.raises(error, match=match):
        _open(root)
    assert issubclass(error, KgmemError)
    assert _digest(root) == before


@pytest.mark.integration
@pytest.mark.parametrize("case, _sql, pg_sql, error, match", [c for c in ROW_CASES if c[2]],
                         ids=[c[0] for c in ROW_CASES if c[2]])
def test_a_damaged_postgres_row_is_the_packages_error(new_database, case, _sql, pg_sql, error, match):
    import psycopg

    uri = new_database()
    with KnowledgeGraph.open(uri, name="t", embeddings="hash") as g:
        g.add_documents(DOCS, model="offline")
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(pg_sql)
    with pytest.raises(error, match=match):
        _open(uri, name="t")


@pytest.mark.parametrize("create", [False, True])
def test_an_emptied_kg_database_is_refused_and_the_vectors_are_kept(tmp_path, create):
    """The audit: a 0-byte kg.sqlite opened as an empty KG named "default", and closing it rewrote
    vectors.npz from 43 KB to 1.5 KB."""
    root = tmp_path / "kg"
    _built(root)
    (root / "kg.sqlite").write_bytes(b"")
    npz = (root / VECTORS_FILE).read_bytes()
    match = "holds no knowledge graph" + ("" if create else r".*create=True")
    with pytest.raises(NotAKnowledgeGraphError, match=match):
        _open(root, create=create)
    assert (root / VECTORS_FILE).read_bytes() == npz


@pytest.mark.parametrize("create", [False, True])
def test_an_emptied_kg_database_beside_chroma_is_refused(tmp_path, create):
    root = tmp_path / "kg"
    _built(root, "chroma")
    (root / "kg.sqlite").write_bytes(b"")
    with pytest.raises(NotAKnowledgeGraphError, match="holds no knowledge graph"):
        _open(root, create=create)
    (root / "kg.sqlite").unlink()
    with pytest.raises(NotAKnowledgeGraphError, match="no kg.sqlite|non-empty directory without kg.sqlite"):
        _open(root, create=create)


@pytest.mark.parametrize("backend, gone", [("chroma", ["chroma"]), ("memory", [VECTORS_FILE])])
def test_a_missing_vector_index_is_refused_not_opened_empty(tmp_path, backend, gone):
    """The audit: with chroma/ removed the KG opened and every search returned []."""
    import shutil

    root = tmp_path / "kg"
    _built(root, backend)
    for name in gone:
        path = root / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    before = _digest(root)
    for vb in (None, backend):
        with pytest.raises(NotAKnowledgeGraphError, match=r"vector index is missing .*not found.*Nothing was created"):
            _open(root, vector_backend=vb)
    assert _digest(root) == before
    assert not (root / "chroma").exists() or backend == "chroma" and False


def test_a_kg_killed_before_its_first_save_reopens_with_its_own_vector_backend(tmp_path):
    """The audit: a memory-backend KG killed before anything reached vectors.npz reopened as Chroma."""
    root = tmp_path / "kg"
    script = ("import os, sys\nfrom langgraph_kgmem import KnowledgeGraph\n"
              f"g = KnowledgeGraph.open({str(root)!r}, embeddings='hash', vector_backend='memory')\n"
              "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert not (root / VECTORS_FILE).exists() and not (root / "chroma").exists()
    with KnowledgeGraph.open(root, embeddings="hash") as g:
        assert g.stats()["vector_backend"] == "memory"
        g.add_documents(DOCS[:1], model="offline")
    assert (root / VECTORS_FILE).exists() and not (root / "chroma").exists()
    with pytest.raises(KgmemError, match="keeps its vectors in the 'memory' backend, not 'chroma'"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma")


def _legacy_npz_claiming(rows: int) -> bytes:
    """A vectors.npz in the old format (ids as a pickled object array) whose pickle asks for an
    array of ``rows`` rows while holding one string."""
    class Huge:
        def __reduce__(self):
            from numpy._core.multiarray import _reconstruct
            return (_reconstruct, (np.ndarray, (0,), b"b"),
                    (1, (rows,), np.dtype(object), False, ["ent-x"]))

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": (1,)})
    member = header.getvalue() + pickle.dumps(Huge(), protocol=3)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("nodes_ids.npy", member)
        for name, arr in (("nodes_kinds", np.asarray(["entity"])), ("nodes_mat", np.ones((1, 256), np.float32)),
                          ("facts_ids", np.asarray([], str)), ("facts_kinds", np.asarray([], str)),
                          ("facts_mat", np.zeros((0, 256), np.float32))):
            out = io.BytesIO()
            np.save(out, arr)
            zf.writestr(name + ".npy", out.getvalue())
    return buf.getvalue()


def test_a_legacy_pickled_npz_claiming_two_to_the_forty_rows_is_refused_before_allocating(tmp_path):
    root = tmp_path / "kg"
    KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory").close()
    (root / VECTORS_FILE).write_bytes(_legacy_npz_claiming(2 ** 40))
    with pytest.raises(NotAKnowledgeGraphError, match=r"not a valid vector file .*1099511627776"):
        _open(root)


def test_the_corrupt_data_error_is_a_storage_error():
    assert issubclass(CorruptStoredDataError, StorageError)


# ------------------------------------------------------------------------------- stored memory

def _asked(tmp_path, method: str):
    """A KG directory with its SQLite memory, one question answered by ``method``; returns the
    KG (open), its store and a function that asks again on a freshly compiled graph."""
    from langgraph_kgmem.graphs.registry import get_factory

    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    g.add_documents(DOCS, model="offline")
    checkpointer, store = g.persistence()
    factory, preset = get_factory(method)

    def ask(question: str = "What is the capital of Norway?"):
        app = factory(g, model="offline", **preset).compile(checkpointer=checkpointer, store=store)
        return app.invoke({"question": question}, {"configurable": {"thread_id": question}})

    ask()
    return g, store, ask


def _within(seconds: float, fn):
    """``fn()``, failing the test when it has not returned after ``seconds`` (a loop that never
    ends would otherwise hang the run instead of failing it)."""
    import threading

    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds}s: it never stops"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _codebook_items(store):
    from langgraph_kgmem.memory import namespace

    ns = namespace("default", "codebook")
    return ns, {it.key: it.value for it in store.search(ns, limit=1000)}


def _cycle(items):
    page = [list(r) for r in items["M:000000"]["rows"]]
    assert len(page) >= 2
    page[0][4], page[1][4] = 1, 0          # edge 0 → edge 1 → edge 0
    return "M:000000", {"rows": page}


def _entity_cycle(items):
    page = [list(r) for r in items["E:000000"]["rows"]]
    page[0][2], page[1][2] = 1, 0
    return "E:000000", {"rows": page}


def _short_row(items):
    page = [list(r) for r in items["M:000000"]["rows"]]
    page[0] = page[0][:3]
    return "M:000000", {"rows": page}


def _far_representative(items):
    page = [list(r) for r in items["M:000000"]["rows"]]
    page[0][4] = -1                        # Python would read the last edge
    return "M:000000", {"rows": page}


def _other_format(items):
    return "meta", {**items["meta"], "format": "two"}


def _text_rows(items):
    return "E:000000", {"rows": "entity rows"}


CODEBOOK_CASES = [("a cycle among edge representatives", _cycle, r"edge representatives form a cycle"),
                  ("a cycle among entity representatives", _entity_cycle, r"entity representatives form a cycle"),
                  ("a codebook row of the wrong shape", _short_row, r"cannot be read: ValueError"),
                  ("a representative outside the table", _far_representative, r"representative -1, outside"),
                  ("another codebook format", _other_format, r"cannot be read: ValueError: .*format 'two'"),
                  ("a page that is not rows", _text_rows, r"cannot be read")]


@pytest.mark.parametrize("case, tamper, match", CODEBOOK_CASES, ids=[c[0] for c in CODEBOOK_CASES])
def test_a_damaged_codebook_is_refused_as_a_storage_error_not_a_hang(tmp_path, case, tamper, match):
    """The audit: a cycle in the representatives made resolve_edge loop forever; rows of the
    wrong shape or format raised whatever their first use hit."""
    g, store, ask = _asked(tmp_path, "autopruned")
    ns, items = _codebook_items(store)
    key, value = tamper(items)
    store.put(ns, key, value, index=False)
    with pytest.raises(CorruptStoredDataError, match="AutoPrunedRetriever codebook of KG 'default'.*" + match):
        _within(60, lambda: ask("Where does Bergen lie?"))
    assert store.get(ns, key).value == value   # refused, not repaired behind the caller's back
    g.close()


@pytest.mark.parametrize("value, match", [
    ({"v": [0.5, 0.5], "n": 1}, r"holds 2 values where a vector of 256 finite numbers belongs"),
    ({"v": "fast", "n": 1}, r"holds str where a vector"),
    ({"n": 1}, r"holds NoneType where a vector"),
    ({"v": [0.0] * 256, "n": "many"}, r"has the update count 'many'"),
])
def test_a_damaged_edge_memory_record_is_a_storage_error(tmp_path, value, match):
    """The audit: an edge-memory vector of the wrong length raised numpy's ValueError."""
    from langgraph_kgmem.memory import EdgeMemory

    g, store, ask = _asked(tmp_path, "remindrag")
    mem = EdgeMemory(store, "default", 256)
    keys = mem.keys()
    assert keys, "ReMindRAG remembered no edge to damage"
    store.put(mem.ns, keys[0], value, index=False)
    with pytest.raises(CorruptStoredDataError, match=match):
        mem.many(keys)
    with pytest.raises(CorruptStoredDataError, match=match):
        mem.update(keys, lambda k, old: old + 1.0)
    assert store.get(mem.ns, keys[0]).value == value
    g.close()


def test_a_memory_value_that_is_not_json_is_a_storage_error(tmp_path):
    """The audit: a non-JSON value in memory.sqlite's store raised orjson.JSONDecodeError."""
    g, store, ask = _asked(tmp_path, "remindrag")
    conn = sqlite3.connect(tmp_path / "kg" / "memory.sqlite")
    with conn:
        changed = conn.execute("UPDATE store SET value = 'not json' WHERE prefix LIKE '%edge_memory%'").rowcount
    conn.close()
    assert changed
    with pytest.raises(CorruptStoredDataError, match=r"memory\.sqlite holds a memory value that is not JSON"):
        ask("Where does Bergen lie?")
    from langgraph_kgmem.memory import EdgeMemory

    with pytest.raises(CorruptStoredDataError, match="not JSON"):
        EdgeMemory(store, "default", 256).keys()
    g.close()


@pytest.mark.parametrize("payload, said", [(5, "holds a int, not a checkpoint"), ([1, 2], "holds a list"),
                                           ({"x": 1}, "without the checkpoint's v, id, ts")])
def test_msgpack_that_is_not_a_checkpoint_is_a_storage_error(tmp_path, payload, said):
    """The audit: valid msgpack that is not a checkpoint gave a raw KeyError: 'v' or TypeError."""
    import asyncio

    import ormsgpack

    g, store, ask = _asked(tmp_path, "catrag")
    conn = sqlite3.connect(tmp_path / "kg" / "memory.sqlite")
    with conn:
        conn.execute("UPDATE checkpoints SET checkpoint = ?", (ormsgpack.packb(payload),))
    conn.close()
    question = "What is the capital of Norway?"
    with pytest.raises(CorruptStoredDataError, match=rf"memory\.sqlite: the checkpoint of thread .*{said}"):
        ask(question)
    checkpointer, _ = g.persistence()
    with pytest.raises(CorruptStoredDataError, match=said):
        list(checkpointer.list({"configurable": {"thread_id": question}}))

    async def read_async():
        async with g.apersistence() as (saver, _):
            return await saver.aget_tuple({"configurable": {"thread_id": question}})

    with pytest.raises(CorruptStoredDataError, match=said):
        asyncio.run(read_async())
    g.close()


@pytest.mark.integration
@pytest.mark.parametrize("value", ["5", "[1, 2]", '{"x": 1}'])
def test_a_postgres_checkpoint_that_is_not_one_is_a_storage_error(new_database, value):
    import psycopg

    from langgraph_kgmem.graphs.registry import get_factory

    uri = new_database()
    g = KnowledgeGraph.open(uri, name="t", embeddings="hash")
    g.add_documents(DOCS, model="offline")
    checkpointer, store = g.persistence()
    factory, preset = get_factory("catrag")
    app = factory(g, model="offline", **preset).compile(checkpointer=checkpointer, store=store)
    config = {"configurable": {"thread_id": "one"}}
    app.invoke({"question": "What is the capital of Norway?"}, config)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("UPDATE checkpoints SET checkpoint = %s::jsonb", (value,))
    try:
        with pytest.raises(CorruptStoredDataError, match="checkpoint of thread 'one' holds"):
            app.invoke({"question": "What is the capital of Norway?"}, config)
        with pytest.raises(CorruptStoredDataError):
            list(checkpointer.list(config))
    finally:
        g.close()


def test_a_config_without_a_thread_keeps_its_own_error(tmp_path):
    """Only a read of a well-formed config is blamed on the stored row."""
    from langgraph_kgmem.checked_savers import checked_tuple

    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    checkpointer, _ = g.persistence()
    with pytest.raises(KeyError):
        checkpointer.get_tuple({"configurable": {}})
    assert checkpointer.get_tuple({"configurable": {"thread_id": "none yet"}}) is None
    assert checked_tuple(None, "x") is None
    g.close()


@pytest.mark.parametrize("value", [{"revision": "x"}, {"revision": True}, "a string"])
def test_a_damaged_codebook_revision_is_a_storage_error(value):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.autopruned.codebook import Codebook
    from langgraph_kgmem.memory import namespace

    store = InMemoryStore()
    assert Codebook.stored_revision(store, "default") is None
    store.put(namespace("default", "codebook"), "revision", {"revision": 3})
    assert Codebook.stored_revision(store, "default") == 3
    store.put(namespace("default", "codebook"), "revision", value if isinstance(value, dict) else {"v": value})
    with pytest.raises(CorruptStoredDataError, match="records the revision"):
        Codebook.stored_revision(store, "default")


def test_the_checked_memory_store_still_takes_its_file_lock(tmp_path):
    """memory_lock picks a store's cross-process lock by its class; the checked subclass must keep
    SqliteStore's file lock (without it, 3 concurrent AutoPrunedRetriever writers lost runs)."""
    from langgraph_kgmem.kg.backends.embedded.memory_store import CheckedSqliteStore
    from langgraph_kgmem.memory.locks import memory_lock

    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    _, store = g.persistence()
    assert isinstance(store, CheckedSqliteStore)
    with memory_lock(store, "codebook:probe"):
        stripes = [p.name for p in (tmp_path / "kg").iterdir() if p.name.startswith("memory.sqlite.lock-")
                   and p.name != "memory.sqlite.lock-setup"]
    assert stripes
    g.close()
