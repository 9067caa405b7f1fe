"""KG integrity: provenance after deletes, memory/disk agreement, rollbacks, vector persistence,
input validation, idempotent derived edges, one id recipe per kind, and cheap store reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import numpy as np
import pytest

import langgraph_kgmem
from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import ConfigurationError, KgmemInputError
from langgraph_kgmem.kg.types import content_hash, entity_id

PKG_ROOT = str(Path(langgraph_kgmem.__file__).resolve().parents[1])


def _relation(g: KnowledgeGraph, subject: str, obj: str):
    return next(e for e in g.edges("relation") if e.src == entity_id(subject) and e.dst == entity_id(obj))


# ------------------------------------------------------------------ 1. delete_document keeps provenance exact


def test_delete_document_prunes_its_chunks_from_surviving_relations(tmp_path):
    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    g.add_triples([("Marie Curie", "born in", "Warsaw")], text="Marie Curie was born in Warsaw.", source="d1")
    g.add_triples([("Marie Curie", "born in", "Warsaw")], text="Curie's birthplace: Warsaw.", source="d2")
    e = _relation(g, "Marie Curie", "Warsaw")
    assert len(e.attrs["chunks"]) == 2
    d2_chunk = [c for c in e.attrs["chunks"] if g.node(c).attrs["doc_id"] == "d2"]
    g.delete_document("d1")
    assert _relation(g, "Marie Curie", "Warsaw").attrs["chunks"] == d2_chunk
    assert all(g.node(c) is not None for c in _relation(g, "Marie Curie", "Warsaw").attrs["chunks"])
    g.close()
    with KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory") as g2:  # persisted
        assert _relation(g2, "Marie Curie", "Warsaw").attrs["chunks"] == d2_chunk


# ------------------------------------------------------------------ 2. a node keeps its kind, memory = disk


def test_changing_a_node_kind_is_refused_and_memory_matches_disk():
    g = KnowledgeGraph.in_memory()
    g.add_node("entity", "Warsaw", id="n-1")
    with pytest.raises(KgmemInputError, match="cannot become 'chunk'"):
        g.add_node("chunk", "Warsaw is a city.", id="n-1")
    with pytest.raises(KgmemInputError, match="cannot become"):  # the same id twice in one batch
        from langgraph_kgmem.kg.types import Node

        g.add_nodes([Node("n-2", "entity", "A"), Node("n-2", "anchor", "A")])
    on_disk = {n.id: n.kind for n in g.graph_store.load_nodes()}
    assert g.node("n-1").kind == on_disk["n-1"] == "entity" and "n-2" not in on_disk and not g.has_node("n-2")
    g.add_node("entity", "Warsaw, Poland", id="n-1")  # same kind: an ordinary update
    assert g.node("n-1").text == "Warsaw, Poland"


# ------------------------------------------------------------------ 3. metadata must be JSON before any write


@pytest.mark.parametrize("bad", [
    {"text": "Second document about Paris.", "published": date(2024, 1, 1)},
    {"text": "Second document about Paris.", "tags": {"a", "b"}},
])
def test_non_json_metadata_is_refused_before_anything_is_written(bad):
    g = KnowledgeGraph.in_memory()
    g.add_documents(["An earlier document about Rome."], model="offline")
    before = (g.documents(), g.node_count(), g.edge_count())
    with pytest.raises(KgmemInputError, match="not JSON-serialisable") as info:
        g.add_documents([{"text": "A fine document about Lyon."}, bad], model="offline")
    assert repr(next(k for k in bad if k != "text")) in str(info.value)
    assert (g.documents(), g.node_count(), g.edge_count()) == before


def test_document_metadata_from_langchain_documents_is_checked_too():
    from langchain_core.documents import Document

    g = KnowledgeGraph.in_memory()
    with pytest.raises(KgmemInputError, match="isoformat"):
        g.add_documents([Document(page_content="Berlin is big.", metadata={"day": date(2024, 5, 1)})],
                        model="offline")
    assert g.documents() == []


# ------------------------------------------------------------------ 4. bad input → clear KgmemError


def test_records_row_without_location_is_a_clear_error():
    g = KnowledgeGraph.in_memory()
    rows = [{"time": "2024-05-01 00:00", "location": "North", "rain": 1.0},
            {"time": "2024-05-01 01:00", "rain": 0.0}]
    with pytest.raises(KgmemInputError, match="record 2 has no 'location'"):
        g.add_records(rows, event_rule="rain > 0")
    assert g.node_count() == 0 and g.documents() == []


@pytest.mark.parametrize("month", ["13", "May", None])
def test_records_bad_date_part_is_a_clear_error(month):
    g = KnowledgeGraph.in_memory()
    rows = [{"year": 2024, "month": month, "day": 1, "hour": 3, "rain": 1.0}]
    with pytest.raises(KgmemInputError, match="cannot build a timestamp"):
        g.add_records(rows, time_col=("year", "month", "day", "hour"), location_col=None, location="Depot")
    assert g.node_count() == 0


@pytest.mark.parametrize("spec", ["hash:abc", "hash:4", "hash:-1"])
def test_bad_hash_embedding_spec_is_a_configuration_error(spec):
    from langgraph_kgmem.embeddings import get_embeddings

    with pytest.raises(ConfigurationError, match="hash:256"):
        get_embeddings(spec)
    assert get_embeddings("hash:64").dim == 64


@pytest.mark.parametrize("content", [None, "{not json", "[1, 2]", '{"evidence": [{"no_id": 1}]}'])
def test_cli_export_with_bad_run_file_prints_an_error(tmp_path, capsys, content):
    from langgraph_kgmem.cli import main

    doc = tmp_path / "a.txt"
    doc.write_text("Marie Curie was born in Warsaw.")
    kg = str(tmp_path / "kg")
    assert main(["ingest", str(doc), "--kg", kg, "--embeddings", "hash", "--model", "offline"]) == 0
    capsys.readouterr()
    run = tmp_path / "run.json"
    if content is not None:
        run.write_text(content)
    code = main(["export", "--kg", kg, "--embeddings", "hash", "--html", str(tmp_path / "v.html"), "--run", str(run)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --run") and "kgmem ask" in err


def test_vectors_of_unknown_id_is_an_input_error(kg):
    with pytest.raises(KgmemInputError, match="has_vectors"):
        kg.vectors(["no-such-node"])
    assert kg.vectors([entity_id("Warsaw")]).shape[0] == 1


# ------------------------------------------------------------------ 5. event rules: no silent and/or mix


def test_event_rule_mixing_and_or_is_refused():
    from langgraph_kgmem.ingest.records import ThresholdRule

    with pytest.raises(KgmemInputError, match="mixes 'and' and 'or'"):
        ThresholdRule("a > 1 and b > 2 or c > 3")
    both = ThresholdRule("a > 1 and b > 2")
    either = ThresholdRule("a > 1 or b > 2")
    assert both({"a": 2, "b": 3}) and not both({"a": 2, "b": 0})
    assert either({"a": 0, "b": 3}) and not either({"a": 0, "b": 0})
    with pytest.raises(KgmemInputError, match="not a number"):
        either({"a": "wet", "b": 0})


# ------------------------------------------------------------------ 6. time_next chain across batches


def _chain(g: KnowledgeGraph) -> list[tuple[str, str]]:
    return sorted((g.node(e.src).text, g.node(e.dst).text) for e in g.edges("time_next"))


def _consecutive(g: KnowledgeGraph) -> list[tuple[str, str]]:
    times = [n.text for n in sorted(g.nodes("time"), key=lambda n: n.attrs["slot"])]
    return list(zip(times, times[1:]))


def test_time_chain_is_correct_across_batches_and_deletions():
    g = KnowledgeGraph.in_memory()
    row = lambda h: {"time": f"2024-05-01 {h:02d}:00", "location": "North", "rain": float(h)}  # noqa: E731
    g.add_records([row(0), row(2)], event_rule="rain > 0", source="s1")
    g.add_records([row(1)], event_rule="rain > 0", source="s2")
    assert _chain(g) == _consecutive(g) == [("2024-05-01 00:00", "2024-05-01 01:00"),
                                            ("2024-05-01 01:00", "2024-05-01 02:00")]
    g.add_records([row(5), row(3)], event_rule="rain > 0", source="s3")
    assert _chain(g) == _consecutive(g) and len(_chain(g)) == 4
    g.delete_document("s2")   # 01:00 goes: 00:00 → 02:00 again
    assert _chain(g) == _consecutive(g) and ("2024-05-01 00:00", "2024-05-01 02:00") in _chain(g)
    g.delete_document("s1")
    assert _chain(g) == _consecutive(g) == [("2024-05-01 03:00", "2024-05-01 05:00")]


# ------------------------------------------------------------------ 7. rollback drops the vectors it added


def test_rollback_removes_vectors_added_inside_the_transaction():
    g = KnowledgeGraph.in_memory()
    g.add_node("entity", "Zeta river")
    ghost = entity_id("Alpha Centauri")
    with pytest.raises(RuntimeError):
        with g.transaction():
            g.add_node("entity", "Alpha Centauri")
            g.add_triples([("Alpha Centauri", "is near", "Proxima")], source="d-ghost")
            raise RuntimeError("boom")
    assert not g.has_node(ghost) and g.has_vectors([ghost]) == [False]
    assert g.vector_index.count("facts") == 0 and g.vector_index.count("nodes") == 1
    hits = g.nearest("Alpha Centauri", k=1)
    assert [n.text for n, _ in hits] == ["Zeta river"]


# ------------------------------------------------------------------ 8. memory-backend vectors survive a crash


def test_memory_backend_vectors_survive_a_crash_without_close(tmp_path):
    root = tmp_path / "kg"
    script = textwrap.dedent(f"""
        import os
        from langgraph_kgmem import KnowledgeGraph
        g = KnowledgeGraph.open({str(root)!r}, embeddings="hash", vector_backend="memory")
        g.add_documents([{{"id": "a", "title": "Curie", "text": "Marie Curie was born in Warsaw."}}], model="offline")
        g.add_triples([("Warsaw", "capital of", "Poland")], text="Warsaw is the capital of Poland.", source="b")
        os._exit(0)   # a crash: no close()
    """)
    env = {**os.environ, "PYTHONPATH": PKG_ROOT}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=str(tmp_path), timeout=120)
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        embedded = [n.id for n in g.nodes() if n.kind in ("entity", "chunk", "anchor")]
        assert embedded and all(g.has_vectors(embedded))
        assert all(g.has_vectors([e.id for e in g.edges("relation")], space="facts"))
        assert g.nearest("Warsaw", k=1)[0][0].text == "Warsaw"
    # closing folded the journal into vectors.npz; reopening reads the same vectors bit for bit
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        ids, mat = g.vector_matrix()
    assert (root / "vectors.npz").exists() and not (root / "vectors.journal").exists()
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        ids2, mat2 = g.vector_matrix()
    assert ids == ids2 and np.array_equal(mat, mat2)


def test_vector_journal_with_a_torn_tail_still_opens(tmp_path):
    root = tmp_path / "kg"
    g = KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory")
    g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    g.add_triples([("Bergen", "city in", "Norway")], source="b")
    journal = root / "vectors.journal"
    size = journal.stat().st_size
    g.graph_store.close()   # simulate a crash while the last record was being written:
    g._backend.releases[-1]()   # the directory lock goes with the process, nothing is flushed
    with open(journal, "r+b") as fh:
        fh.truncate(size - 100)
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g2:
        assert g2.has_vectors([entity_id("Oslo")]) == [True]


def test_close_releases_lock_and_connection_when_saving_fails(tmp_path, monkeypatch):
    import sqlite3

    from langgraph_kgmem.kg.backends.embedded import vectors as embedded_vectors

    monkeypatch.setenv("KGMEM_LOCK_TIMEOUT", "0.2")
    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    g.add_triples([("Oslo", "capital of", "Norway")], source="a")

    def broken(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(embedded_vectors, "save_npz_vectors", broken)
    with pytest.raises(OSError, match="disk full"):
        g.close()
    with pytest.raises(sqlite3.ProgrammingError):
        g.graph_store.conn.execute("SELECT 1")
    monkeypatch.undo()
    with KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory") as g2:  # lock is free
        assert g2.has_vectors([entity_id("Oslo")]) == [True]   # the journal still had them


# ------------------------------------------------------------------ 9. add_synonym_edges is version-stable


def test_add_synonym_edges_changes_nothing_when_there_is_nothing_to_do():
    g = KnowledgeGraph.in_memory()
    g.add_triples([("Lake Geneva", "borders", "Lausanne"), ("Geneva Lake", "borders", "Montreux")], source="d",
                  merge_threshold=None)
    added = g.add_synonym_edges(threshold=0.8)
    assert added >= 1
    version = g.version
    assert g.add_synonym_edges(threshold=0.8) == 0 and g.version == version
    g.add_triples([("Zurich", "lies on", "Limmat")], source="e", merge_threshold=None)  # no new synonym pair
    version = g.version
    assert g.add_synonym_edges(threshold=0.8) == 0 and g.version == version
    assert g.add_synonym_edges(threshold=0.8, weight_scale=3.0) == added  # other weights: real changes


def test_add_synonym_edges_after_a_rollback_adds_them_again():
    g = KnowledgeGraph.in_memory()
    g.add_triples([("Lake Geneva", "borders", "Lausanne"), ("Geneva Lake", "borders", "Montreux")], source="d",
                  merge_threshold=None)
    with pytest.raises(RuntimeError):
        with g.transaction():
            assert g.add_synonym_edges(threshold=0.8) >= 1
            raise RuntimeError("boom")
    assert g.edges("synonym") == []
    assert g.add_synonym_edges(threshold=0.8) >= 1 and g.edges("synonym")


# ------------------------------------------------------------------ 10. one id recipe per kind


@pytest.mark.parametrize("title", ["", "Warsaw"])
def test_add_documents_and_add_triples_give_the_same_text_the_same_id(title):
    text = "Warsaw is the capital of Poland."
    a = KnowledgeGraph.in_memory().add_documents([{"text": text, "title": title}], model="offline")
    b = KnowledgeGraph.in_memory().add_triples([("Warsaw", "capital of", "Poland")], text=text, title=title or None)
    assert a.document_ids == b.document_ids
    # the add_documents recipe is unchanged, so existing stores keep their ids
    key = f"{title}\x1f{text}" if title else text
    assert a.document_ids == [f"doc-{content_hash('document', key)}"]


def test_record_node_ids_come_from_the_id_helpers():
    from langgraph_kgmem.ingest.records import event_node_id, slot_of, parse_time, time_node_id

    g = KnowledgeGraph.in_memory()
    g.add_records([{"time": "2024-05-01 03:00", "location": " North ", "rain": 1.0}], event_rule="rain > 0")
    slot = slot_of(parse_time("2024-05-01 03:00"))
    assert [n.id for n in g.nodes("time")] == [time_node_id(slot)]
    assert [n.id for n in g.nodes("event")] == [event_node_id(slot, "North")]


# ------------------------------------------------------------------ 11. batched entity merging, cheap store reads


def test_entity_resolution_is_batched_and_keeps_merge_decisions(monkeypatch, sample_docs):
    calls = []
    monkeypatch.setattr(KnowledgeGraph, "nearest", lambda self, *a, **k: calls.append(a) or [])
    g = KnowledgeGraph.in_memory()
    g.add_documents(sample_docs, model="offline")
    assert calls == []  # one matrix product per document, not a search per new name
    g = KnowledgeGraph.in_memory()
    # "Marie-Curie" and "Marie Curie" are different entities with the same hashing vector
    g.add_triples([("Marie-Curie", "won", "Nobel Prize")], source="d0", merge_threshold=None)
    g.add_triples([("Marie Curie", "born in", "Warsaw")], source="d1", merge_threshold=None)
    g.add_triples([("Curie Marie", "met", "Pierre Curie"), ("Pierre  Curie", "lived in", "Paris")], source="d2")
    # a tie between equally similar entities goes to the older one, within a call too
    assert g.graph_store.alias_target("curie marie") == entity_id("Marie-Curie")
    assert g.graph_store.alias_target("pierre curie") is None and g.has_node(entity_id("Pierre Curie"))
    assert calls == []


def test_documents_and_stats_use_one_query_each():
    g = KnowledgeGraph.in_memory()
    g.add_documents([f"Document number {i} mentions City{i}." for i in range(6)], model="offline")
    seen: list[str] = []
    g.graph_store.conn.set_trace_callback(seen.append)
    docs = g.documents()
    assert len(docs) == 6 and len(seen) == 1
    seen.clear()
    assert g.stats()["documents"] == 6
    assert sum("documents" in q for q in seen) == 1 and len(seen) <= 3
    g.graph_store.conn.set_trace_callback(None)


# ------------------------------------------------------------------ 12. unit vectors are not rescaled on load


def test_npz_vectors_round_trip_bit_exact(tmp_path):
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        from langgraph_kgmem.kg.types import Node

        rng = np.random.default_rng(3)
        raw = rng.normal(size=(50, 256)).astype(np.float32) * rng.uniform(0.1, 10, size=(50, 1)).astype(np.float32)
        g.add_nodes([Node(f"ent-{i}", "entity", f"e{i}") for i in range(50)], vectors=raw)
        before = g.vectors([f"ent-{i}" for i in range(50)]).copy()
    assert np.allclose(np.linalg.norm(before, axis=1), 1.0, atol=1e-6)
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="memory") as g:
        assert np.array_equal(g.vectors([f"ent-{i}" for i in range(50)]), before)


def test_json_metadata_round_trips():
    g = KnowledgeGraph.in_memory()
    g.add_documents([{"id": "m", "text": "Quito is high.", "published": "2024-01-01", "n": 3}], model="offline")
    assert g.document("m")["meta"] == {"published": "2024-01-01", "n": 3}
    assert json.dumps(g.stats())  # stats stay JSON


# ------------------------------------------------------------------ Chroma writes: once per transaction


def _count_chroma_upserts(monkeypatch) -> list[str]:
    from chromadb.api.models.Collection import Collection

    calls: list[str] = []
    real = Collection.upsert

    def counting(self, *args, **kwargs):
        calls.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", counting)
    return calls


def _assert_same_vectors(g, want: dict) -> None:
    for space, (ids, mat) in want.items():
        got_ids, got = g.vector_index.matrix(space)
        order = {i: r for r, i in enumerate(got_ids)}
        assert sorted(got_ids) == sorted(ids) and len(ids) > 0
        np.testing.assert_allclose(got[[order[i] for i in ids]], mat, atol=1e-6)


def _all_vectors(g) -> dict:
    return {space: (g.vector_index.ids(space), g.vector_index.matrix(space)[1]) for space in ("nodes", "facts")}


def test_chroma_gets_the_documents_vectors_in_one_upsert_per_space_and_persists_them(tmp_path, monkeypatch,
                                                                                        sample_docs):
    calls = _count_chroma_upserts(monkeypatch)
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:
        g.add_documents(sample_docs[:3], model="offline")
        want = _all_vectors(g)
        # each document's transaction journals its vectors before it commits; Chroma (a call
        # costs ~50 ms on a 2-core machine whatever its size) gets them once enough gather, or at close
        assert calls == [] and (root / "chroma.journal").exists()
    assert sorted(calls) == ["kgmem_facts", "kgmem_nodes"] and not (root / "chroma.journal").exists()
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g2:  # read from Chroma
        _assert_same_vectors(g2, want)


def test_chroma_writes_once_the_journal_holds_enough_rows(tmp_path, monkeypatch, sample_docs):
    from langgraph_kgmem.kg.backends.embedded import vectors as embedded_vectors

    monkeypatch.setattr(embedded_vectors, "CHROMA_FLUSH_ROWS", 20)
    calls = _count_chroma_upserts(monkeypatch)
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:
        for doc in sample_docs[:3]:
            g.add_documents([doc], model="offline")
        assert 0 < len(calls) <= 2 * 3
        want = _all_vectors(g)
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g2:
        _assert_same_vectors(g2, want)


CRASHER = """
    import os, sys
    from langgraph_kgmem import KnowledgeGraph
    sys.path.insert(0, sys.argv[2])
    from tests.conftest import SAMPLE_DOCS
    g = KnowledgeGraph.open(sys.argv[1], embeddings="hash", vector_backend="chroma")
    g.add_documents(SAMPLE_DOCS, model="offline")
    os._exit(0)   # killed before close: the committed documents' vectors are only in the journal
"""


def test_an_open_after_a_crash_replays_the_chroma_journal(tmp_path, sample_docs):
    root = tmp_path / "kg"
    repo = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", textwrap.dedent(CRASHER), str(root), str(repo)], check=True,
                   cwd=str(repo), env={**os.environ, "PYTHONPATH": str(repo)})
    assert (root / "chroma.journal").exists()
    ref = KnowledgeGraph.in_memory(embeddings="hash")
    ref.add_documents(sample_docs, model="offline")
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:
        assert not (root / "chroma.journal").exists()
        _assert_same_vectors(g, _all_vectors(ref))
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:   # now from Chroma itself
        _assert_same_vectors(g, _all_vectors(ref))


def test_chroma_keeps_nothing_of_a_rolled_back_transaction_and_a_later_delete_wins(tmp_path):
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:
        keep = g.add_node("entity", "Zeta river")
        with pytest.raises(RuntimeError):
            with g.transaction():
                g.add_node("entity", "Alpha Centauri")
                raise RuntimeError("boom")
        with g.transaction():   # written then deleted in one transaction: the delete wins
            g.add_triples([("Beta Pictoris", "orbits", "Gamma Star")], source="d-beta")
            g.delete_document("d-beta")
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g2:
        assert g2.vector_index.ids("nodes") == [keep] and g2.vector_index.count("facts") == 0
        assert g2.has_vectors([entity_id("Alpha Centauri"), entity_id("Beta Pictoris")]) == [False, False]
