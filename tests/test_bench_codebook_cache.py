"""AutoPrunedRetriever's synced codebook cached beside the pristine KG (tools/benchlib/codebook_cache.py):
the cached copy holds exactly what syncing a fresh copy stores, is keyed by the sync's options and
sources, and never picks up what a run memorises."""

from __future__ import annotations

import sqlite3

import numpy as np
from bench_helpers import FIXTURE, TOOLS  # noqa: F401  (puts tools/ on sys.path)
from benchlib import codebook_cache, datasets
from benchlib import corpus as corpora

from langgraph_kgmem.graphs.autopruned import create_autopruned_graph, sync_codebook
from langgraph_kgmem.graphs.autopruned.codebook import Codebook


def _passages():
    return [p for q in datasets.load_questions(str(FIXTURE)) for p in q.passages]


def _store_rows(kg_dir):
    con = sqlite3.connect(kg_dir / "memory.sqlite")
    try:
        return sorted(con.execute("SELECT prefix, key, value FROM store").fetchall())
    finally:
        con.close()


def _book(kg):
    _, store = kg.persistence()
    book = Codebook.load(store, kg.name)
    return book, {"runs": {r: run.to_json() for r, run in book.runs.items()}, "ent": list(book.ent_text),
                  "rel": list(book.rel_text), "edges": [tuple(x) for x in book.edge_hrt]}


def test_the_cached_codebook_is_what_a_fresh_sync_stores(tmp_path):
    built = corpora.build_corpus(_passages(), "hash", cache_dir=tmp_path / "cache")
    fresh = corpora.open_working_copy(built, tmp_path / "fresh", "hash")
    _, store = fresh.persistence()
    size = sync_codebook(fresh, store, phrase_facts="always")
    fresh_book, fresh_state = _book(fresh)
    fresh_lines, fresh_rels = fresh_book.line_vectors(fresh), fresh_book.relation_vectors(fresh)
    fresh.close()

    kg = codebook_cache.synced_copy(built, tmp_path / "run", "hash", cache_dir=tmp_path / "cache",
                                    phrase_facts="always")
    book, state = _book(kg)
    assert size["runs"] > 0 and state == fresh_state
    assert np.array_equal(book.line_vectors(kg), fresh_lines) and np.array_equal(book.relation_vectors(kg), fresh_rels)
    kg.close()
    assert _store_rows(tmp_path / "run" / "kg") == _store_rows(tmp_path / "fresh" / "kg")   # row for row
    # a sync on the cached copy finds every document indexed: no row changes but the save's revision
    kg = corpora.open_existing(tmp_path / "run", "hash")
    _, store = kg.persistence()
    assert sync_codebook(kg, store, phrase_facts="always") == size
    kg.close()
    after = _store_rows(tmp_path / "run" / "kg")
    same = lambda rows: [r for r in rows if r[1] not in ("meta", "revision")]  # noqa: E731
    assert same(after) == same(_store_rows(tmp_path / "fresh" / "kg"))


def test_the_cache_key_follows_the_sync_options_and_sources_and_a_run_leaves_it_pristine(tmp_path, monkeypatch):
    built = corpora.build_corpus(_passages(), "hash", cache_dir=tmp_path / "cache")
    always = codebook_cache.synced_key(built, phrase_facts="always")
    assert always != codebook_cache.synced_key(built, phrase_facts="uncovered")
    source = tmp_path / "codebook_source.py"
    source.write_text("A = 1\n")
    monkeypatch.setattr(codebook_cache, "CODEBOOK_SOURCES", (str(source),))
    one = codebook_cache.synced_key(built, phrase_facts="always")
    source.write_text("A = 2\n")
    assert codebook_cache.synced_key(built, phrase_facts="always") != one

    kg = codebook_cache.synced_copy(built, tmp_path / "a", "hash", cache_dir=tmp_path / "cache",
                                    phrase_facts="always")
    _, store = kg.persistence()
    runs = len(Codebook.load(store, kg.name).runs)
    q = datasets.load_questions(str(FIXTURE))[0]
    app = create_autopruned_graph(kg, model="offline", store=store, extraction="offline", phrase_facts="always",
                                  memorize=True).compile(store=store)
    app.invoke({"question": q.question})
    assert len(Codebook.load(store, kg.name).runs) > runs   # the run memorised its question
    kg.close()
    again = codebook_cache.synced_copy(built, tmp_path / "b", "hash", cache_dir=tmp_path / "cache",
                                       phrase_facts="always")
    _, store = again.persistence()
    assert len(Codebook.load(store, again.name).runs) == runs
    again.close()
