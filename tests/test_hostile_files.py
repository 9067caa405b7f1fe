"""Hostile files and bad input (#14): nothing read from a KG directory executes code, KG files are
private, secrets never reach traces, and bad input is refused at the point of entry with nothing
already stored changed."""

from __future__ import annotations

import io
import os
import stat
import zipfile

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError
from langgraph_kgmem.kg.backends.embedded.files import VECTORS_FILE
from langgraph_kgmem.kg.types import entity_id
from langgraph_kgmem.tracing import redact_secrets, scrub


class _Exploit:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _planted_npz(path, marker) -> None:
    ids = np.empty(1, dtype=object)
    ids[0] = _Exploit(str(marker))
    np.savez(path, nodes_ids=ids, nodes_kinds=np.asarray(["entity"]),
             nodes_mat=np.ones((1, 256), dtype=np.float32), facts_ids=np.asarray([], dtype=str),
             facts_kinds=np.asarray([], dtype=str), facts_mat=np.zeros((0, 256), dtype=np.float32))


def test_a_planted_pickle_in_vectors_npz_runs_nothing(tmp_path, monkeypatch):
    root = tmp_path / "kg"
    KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory").close()
    marker = tmp_path / "pwned"
    _planted_npz(root / VECTORS_FILE, marker)
    # the planted file really is an exploit: unpickling it the old way runs the command
    with np.load(root / VECTORS_FILE, allow_pickle=True) as npz:
        npz["nodes_ids"]
    assert marker.exists()
    marker.unlink()
    with pytest.raises(NotAKnowledgeGraphError, match="not a valid vector file.*nothing in it was executed"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    assert not marker.exists()
    # the served graph picks the memory backend by itself when the file exists: same refusal
    from langgraph_kgmem import serve

    monkeypatch.setenv(serve.ENV_KG_DIR, str(root))
    monkeypatch.setenv(serve.ENV_EMBEDDINGS, "hash")
    with pytest.raises(NotAKnowledgeGraphError):
        serve.served_kg()
    assert not marker.exists()


def test_old_pickled_string_arrays_are_converted_once_then_hold_no_pickles(tmp_path):
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    with np.load(root / VECTORS_FILE) as npz:
        arrays = {k: npz[k] for k in npz.files}
    # rewrite as the old format did: ids and kinds as object arrays (pickled)
    old = {k: (v.astype(object) if v.dtype.kind == "U" else v) for k, v in arrays.items()}
    np.savez(root / VECTORS_FILE, **old)
    with pytest.raises(ValueError):
        np.load(root / VECTORS_FILE, allow_pickle=False)["nodes_ids"]
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        assert g.has_vectors([entity_id("Oslo")]) == [True]
    with np.load(root / VECTORS_FILE, allow_pickle=False) as npz:   # rewritten: loads with no pickle
        assert entity_id("Oslo") in npz["nodes_ids"].tolist()


def test_a_corrupt_vectors_file_is_a_clear_error(tmp_path):
    root = tmp_path / "kg"
    KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory").close()
    (root / VECTORS_FILE).write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(NotAKnowledgeGraphError, match="not a valid vector file"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    with zipfile.ZipFile(root / VECTORS_FILE, "w") as zf:
        zf.writestr("nodes_ids.npy", b"junk")
    with pytest.raises(NotAKnowledgeGraphError, match="not a valid vector file"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")


@pytest.mark.parametrize("backend,journal", [("memory", "vectors.journal"), ("chroma", "chroma.journal")])
def test_a_tampered_vector_journal_is_a_clear_error(tmp_path, backend, journal):
    from langgraph_kgmem.kg.backends.embedded.files import write_journal

    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend) as g:
        g.add_node("entity", "Zeta river")
    for record, match in ((("nodes", ["x"], ["entity"], np.ones((1, 7))), "dimension 7"),
                          (("nodes", ["x", "y"], ["entity", "entity"], np.ones((1, 256))), "one row per id"),
                          (("nodes", ["x"], ["entity"], np.full((1, 256), np.nan)), "NaN"),
                          (("other", ["x"], ["entity"], np.ones((1, 256))), "space 'other'")):
        write_journal(root / journal, [record])
        with pytest.raises(NotAKnowledgeGraphError, match=match):
            KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend)
        (root / journal).unlink()
    garbage = b"\x93NUMPY" + b"not an array" * 8   # not a record, and not one cut short: refused, kept
    (root / journal).write_bytes(garbage)
    with pytest.raises(NotAKnowledgeGraphError, match="is not a vector journal: at byte 0"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend)
    assert (root / journal).read_bytes() == garbage


def _journal_records(ids):
    """One journal record per id, each a basis vector (unlike any vector the hashing embedding gives)."""
    return [("nodes", [i], ["entity"], np.eye(1, 256, k, dtype=np.float32)) for k, i in enumerate(ids)]


@pytest.mark.parametrize("backend,journal", [("memory", "vectors.journal"), ("chroma", "chroma.journal")])
def test_a_journal_cut_short_by_a_crash_is_reported_and_its_tail_dropped(tmp_path, backend, journal):
    """A crash during an append leaves the last record cut short: the complete records are replayed,
    a KgmemRecoveryWarning says how much was dropped, the KG records it, and the tail is cut off so
    records appended later stay readable."""
    from langgraph_kgmem.errors import KgmemRecoveryWarning
    from langgraph_kgmem.kg.backends.embedded.files import write_journal

    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend) as g:
        ids = [g.add_node("entity", f"River {i}") for i in range(3)]
    write_journal(root / journal, _journal_records(ids)[:2])   # new vectors for rivers 0 and 1 ...
    whole = (root / journal).read_bytes()
    write_journal(root / journal, _journal_records(ids)[2:])   # ... and river 2, whose write a crash cut
    (root / journal).write_bytes((root / journal).read_bytes()[:-40])   # the third record cut short
    with pytest.warns(KgmemRecoveryWarning, match=r"cut short \(\d+ bytes.*2 complete records"):
        g = KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend)
    with g:
        assert g.vector_index.journal_dropped_bytes > 0
        got = g.vector_index.get("nodes", ids)
        assert got[0].argmax() == 0 and got[1].argmax() == 1 and got[0].max() == got[1].max() == 1.0
        assert got[2].max() < 1.0   # the cut-short record was not applied
        if backend == "memory":   # the journal stays until close: its tail is gone, later appends readable
            assert (root / journal).read_bytes() == whole
    # a header that claims more than the file holds is cut short too: nothing that size is allocated
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**40, 384)})
    (root / journal).write_bytes(whole + header.getvalue() + b"\0" * 64)
    with pytest.warns(KgmemRecoveryWarning, match="cut short"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend).close()




def test_a_garbage_database_is_a_clear_error_and_stays_as_it_was(tmp_path):
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
        g.persistence()
    (root / "kg.sqlite").write_bytes(b"garbage " * 512)
    with pytest.raises(NotAKnowledgeGraphError, match=r"kg\.sqlite is not a langgraph_kgmem KG database: SQLite "
                                                      r"cannot read it.*nothing was written"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    assert (root / "kg.sqlite").read_bytes() == b"garbage " * 512


def test_a_garbage_memory_database_is_a_clear_error_sync_and_async(tmp_path):
    import asyncio

    root = tmp_path / "kg"
    g = KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    (root / "memory.sqlite").write_bytes(b"garbage " * 512)
    match = r"memory\.sqlite is not a langgraph_kgmem memory database: SQLite cannot read it"
    with pytest.raises(NotAKnowledgeGraphError, match=match):
        g.persistence()

    async def use():
        async with g.apersistence():
            pass

    with pytest.raises(NotAKnowledgeGraphError, match=match):
        asyncio.run(use())
    g.close()
    assert (root / "memory.sqlite").read_bytes() == b"garbage " * 512


@pytest.mark.parametrize("file, ddl, match", [
    ("kg.sqlite", "CREATE TABLE nodes(x)",
     r"kg\.sqlite is not a langgraph_kgmem KG database \(its table 'nodes' lacks"),
    ("kg.sqlite", "CREATE TABLE invoices(x)", r"has a table 'invoices'"),
    ("memory.sqlite", "CREATE TABLE checkpoints(x)", r"memory\.sqlite is not a langgraph_kgmem memory database "
                                                     r"\(its table 'checkpoints' lacks"),
    ("memory.sqlite", "CREATE TABLE invoices(x)", r"has a table 'invoices'"),
])
def test_a_foreign_database_is_refused_before_anything_is_created_in_it(tmp_path, file, ddl, match):
    import asyncio
    import sqlite3

    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    (root / file).unlink(missing_ok=True)
    with sqlite3.connect(root / file) as conn:
        conn.execute(ddl)
    conn.close()

    def tables():
        with sqlite3.connect(root / file) as c:
            return sorted(r[0] for r in c.execute("SELECT name FROM sqlite_master"))

    before = tables()
    if file == "kg.sqlite":
        with pytest.raises(NotAKnowledgeGraphError, match=match):
            KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    else:
        g = KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
        with pytest.raises(NotAKnowledgeGraphError, match=match):
            g.persistence()

        async def use():
            async with g.apersistence():
                pass

        with pytest.raises(NotAKnowledgeGraphError, match=match):
            asyncio.run(use())
        g.close()
    assert tables() == before


def test_a_broken_chroma_folder_is_a_clear_error(tmp_path):
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    (root / "chroma" / "chroma.sqlite3").write_bytes(b"junk " * 100)
    with pytest.raises(NotAKnowledgeGraphError, match=r"chroma is not a readable Chroma vector folder.*not a database"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma")


def test_an_npy_header_claiming_a_huge_array_is_refused_before_allocating(tmp_path):
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    with np.load(root / VECTORS_FILE) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (2**40, 384)})
    with zipfile.ZipFile(root / VECTORS_FILE, "w") as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, arr)
            zf.writestr(name + ".npy", header.getvalue() + b"\0" * 64 if name == "nodes_mat" else buf.getvalue())
    with pytest.raises(NotAKnowledgeGraphError, match=r"not a valid vector file.*shape \(1099511627776, 384\)"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")


@pytest.mark.parametrize("backend", ["memory", "chroma"])
def test_kg_directories_and_files_are_private(tmp_path, backend):
    root = tmp_path / "kg"
    g = KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend)
    g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    g.persistence()
    g.close()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    found = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            assert stat.S_IMODE(os.stat(os.path.join(dirpath, d)).st_mode) & 0o077 == 0, d
        for f in filenames:
            found += 1
            mode = stat.S_IMODE(os.stat(os.path.join(dirpath, f)).st_mode)
            assert mode & 0o077 == 0, f"{f} is {oct(mode)}"
    assert found >= 3   # kg.sqlite, memory.sqlite (checkpoints + memory), vectors


@pytest.mark.parametrize("name", ["../x", "my.kg", "", "a b", "x/y", "-lead", "ä" * 3, "n" * 65, 7])
def test_bad_kg_names_are_refused_at_open(tmp_path, name):
    with pytest.raises(KgmemInputError, match="invalid KG name"):
        KnowledgeGraph.open(tmp_path / "kg", name=name, embeddings="hash", vector_backend="memory")
    assert not (tmp_path / "kg").exists()
    with pytest.raises(KgmemInputError, match="invalid KG name"):
        KnowledgeGraph.in_memory(name=name)


class _BadEmbeddings:
    """Embeddings that return NaN, or vectors of another dimension, on demand."""

    def __init__(self, mode: str) -> None:
        from langgraph_kgmem.embeddings import HashingEmbeddings

        self.inner, self.mode = HashingEmbeddings(), mode

    def _fix(self, vecs):
        if self.mode == "nan":
            return [[float("nan")] * len(v) for v in vecs]
        if self.mode == "inf":
            return [[float("inf")] + v[1:] for v in vecs]
        if self.mode == "dim":
            return [v[:100] for v in vecs]
        return vecs

    def embed_documents(self, texts):
        return self._fix(self.inner.embed_documents(texts))

    def embed_query(self, text):
        return self._fix([self.inner.embed_query(text)])[0]


@pytest.mark.parametrize("mode,match", [("nan", "NaN or inf"), ("inf", "NaN or inf"), ("dim", "dimension 100")])
def test_invalid_embeddings_are_refused_and_nothing_stored_changes(tmp_path, mode, match):
    g = KnowledgeGraph.in_memory(name="bad")
    g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    before = g.stats()
    before.pop("embeddings")
    bad = _BadEmbeddings(mode)
    g.embeddings = bad
    with pytest.raises(KgmemInputError, match=match):
        g.add_triples([("Bergen", "city in", "Norway")], source="b")
    after = g.stats()
    after.pop("embeddings")
    assert after == before
    assert g.document("b") is None or g.document("b")["status"] != "done"
    with pytest.raises(KgmemInputError, match=match):
        g.nearest("Bergen")
    g.embeddings = bad.inner
    assert [n.text for n, _ in g.nearest("Oslo", k=1)] == ["Oslo"]


def test_lone_surrogates_are_refused_with_a_clear_error(kg):
    before = kg.stats()
    with pytest.raises(KgmemInputError, match="lone surrogate"):
        kg.add_documents(["Warsaw is big \udcff here."], model="offline")
    with pytest.raises(KgmemInputError, match="lone surrogate"):
        kg.add_documents([{"title": "T\ud800", "text": "fine text."}], model="offline")
    with pytest.raises(KgmemInputError, match="lone surrogate"):
        kg.add_triples([("Oslo\udc80", "capital of", "Norway")])
    assert kg.stats() == before


def test_a_megabyte_sentence_is_chunked(kg):
    from langgraph_kgmem.ingest.chunking import chunk_text

    text = "word " * 240_000   # 1.2 MB, one sentence, no punctuation
    chunks = chunk_text(text, 750)
    assert len(chunks) > 100 and all(c for c in chunks)
    assert sum(c.count("word") for c in chunks) == 240_000


def test_secrets_are_redacted_in_traces():
    out = scrub({
        "api_key": "sk-proj-abcdefghijklmnopqrstuvwx",
        "headers": {"Authorization": "Bearer eyJhbGciOi.payload.sig", "X-Other": "fine"},
        "password": "hunter2",
        "text": "error calling https://api.example with OPENAI_API_KEY=sk-abcdefghijklmnopqrstu "
                "via postgresql://bob:hunter2@db:5432/x (lsv2_pt_0123456789abcdef0123456789)",
        "nested": [{"token": "t0k3n-value"}],
        "tokens": 12,
    })
    flat = repr(out)
    for secret in ("sk-proj-abcdefghijklmnopqrstuvwx", "eyJhbGciOi", "hunter2", "sk-abcdefghijklmnopqrstu",
                   "lsv2_pt_0123456789abcdef0123456789", "t0k3n-value"):
        assert secret not in flat
    assert out["headers"]["X-Other"] == "fine" and out["tokens"] == 12
    assert "postgresql://bob:<redacted>@db:5432/x" in out["text"]
    assert redact_secrets("nothing secret here: 42 tokens") == "nothing secret here: 42 tokens"


# ------------------------------------------------------------------ symbolic links in a KG directory


def _kg_with_vectors(root, backend="memory"):
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend=backend) as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")


@pytest.mark.parametrize("name", ["vectors.journal", "vectors.npz", "kg.sqlite", "kg.sqlite-wal", "memory.sqlite",
                                  ".lock", "memory.sqlite.lock-03"])
def test_a_file_linked_out_of_the_kg_directory_is_refused_at_open(tmp_path, name):
    root, outside = tmp_path / "kg", tmp_path / "outside"
    _kg_with_vectors(root)
    outside.write_bytes((root / name).read_bytes() if (root / name).exists() else b"")
    (root / name).unlink(missing_ok=True)
    (root / name).symlink_to(outside)
    before = outside.read_bytes()
    with pytest.raises(NotAKnowledgeGraphError, match=rf"{name} is a symbolic link \(to '{outside}'\).*does not "
                                                      r"follow links inside a KG directory.*Replace the link"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    assert outside.read_bytes() == before


def test_a_lock_file_linked_to_itself_is_a_clear_error(tmp_path):
    root = tmp_path / "kg"
    _kg_with_vectors(root)
    (root / ".lock").unlink(missing_ok=True)
    (root / ".lock").symlink_to(".lock")   # a loop: FileLock's open raised ELOOP
    with pytest.raises(NotAKnowledgeGraphError, match=r"\.lock is a symbolic link"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")


def test_a_chroma_folder_linked_elsewhere_is_refused(tmp_path):
    root = tmp_path / "kg"
    _kg_with_vectors(root, "chroma")
    (root / "chroma").rename(tmp_path / "elsewhere")
    (root / "chroma").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(NotAKnowledgeGraphError, match=r"chroma is a symbolic link"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma")


def test_a_special_file_in_the_kg_directory_is_refused(tmp_path):
    root = tmp_path / "kg"
    _kg_with_vectors(root)
    os.mkfifo(root / "vectors.journal")   # opening it would block forever
    with pytest.raises(NotAKnowledgeGraphError, match=r"vectors\.journal is not a regular file"):
        KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")


def test_a_journal_link_planted_while_the_kg_is_open_is_not_followed(tmp_path):
    """The package opens its own files without following links, so a link planted after the open
    check is refused at the write, and the file it points to stays as it was."""
    root, outside = tmp_path / "kg", tmp_path / "outside"
    outside.write_bytes(b"not yours")
    g = KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    (root / "vectors.journal").symlink_to(outside)
    with pytest.raises(NotAKnowledgeGraphError, match=r"vectors\.journal is a symbolic link"):
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    assert outside.read_bytes() == b"not yours"
    (root / "vectors.journal").unlink()
    g.close()


def test_a_memory_database_link_planted_while_the_kg_is_open_is_refused(tmp_path):
    root, outside = tmp_path / "kg", tmp_path / "outside.sqlite"
    outside.write_bytes(b"")
    g = KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    (root / "memory.sqlite").symlink_to(outside)
    with pytest.raises(NotAKnowledgeGraphError, match=r"memory\.sqlite is a symbolic link"):
        g.persistence()
    assert outside.read_bytes() == b""
    (root / "memory.sqlite").unlink()
    g.close()
