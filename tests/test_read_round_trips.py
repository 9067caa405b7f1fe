"""Round trips a question makes to the KG's storage: document rows read in one batch, the
linking facts of every seed read in one call, and the statements a steady question sends to
PostgreSQL counted (each one waits for the server's turn on a loaded machine)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from langgraph_kgmem.kg.backends.embedded.sqlite import SqliteGraphStore
from langgraph_kgmem.kg.vector_cache import VectorReadCache

DOCS = [{"id": f"doc-{i}", "title": f"T{i}",
         "text": f"{name} joined the Harbor Guild in {1900 + i}. {name} was born in {town}."}
        for i, (name, town) in enumerate([("Kalo Venrith", "Oslo"), ("Mira Stend", "Bergen"),
                                          ("Tovan Brask", "Oslo"), ("Edda Lorn", "Bergen"),
                                          ("Sven Rauk", "Oslo"), ("Ilse Marr", "Bergen")])]
QUESTION = "In which year did Kalo Venrith join the Harbor Guild?"


def _count_calls(monkeypatch, cls, name: str, calls: Counter) -> None:
    original = getattr(cls, name)

    def counted(self, *args, **kwargs):
        calls[name] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)


def _app(kg, method: str):
    from langgraph_kgmem.graphs.registry import registered

    _, store = kg.persistence()
    reg = registered()[method]
    return reg.factory(kg, model="offline", store=store, **dict(reg.preset)).compile(store=store)


def _store_class(backend: str):
    if backend == "sqlite":
        return SqliteGraphStore
    from langgraph_kgmem.kg.backends.postgres.graph import PostgresGraphStore

    return PostgresGraphStore


@pytest.mark.parametrize("method", ["hipporag2", "catrag"])
def test_a_question_reads_its_documents_in_one_batch(make_kg, backend, monkeypatch, method):
    """A run's provenance names every evidence passage's document: their content hashes come in
    one batched read, not one point read per document."""
    kg = make_kg("trips")
    kg.add_documents(DOCS, model="offline")
    app = _app(kg, method)
    calls: Counter = Counter()
    cls = _store_class(backend)
    for name in ("document", "document_hashes"):
        _count_calls(monkeypatch, cls, name, calls)
    out = app.invoke({"question": QUESTION})
    docs = {kg.node(e["id"]).attrs.get("doc_id") for e in out["evidence"]}
    assert len(docs) >= 3, "the evidence should span several documents for this check to mean anything"
    assert calls["document"] == 0 and calls["document_hashes"] == 1, dict(calls)


def test_catrag_reads_every_seeds_facts_in_one_call(make_kg, monkeypatch):
    """Stage I of CatRAG's edge weighting reads the linking facts of all its seeds at once."""
    kg = make_kg("seeds")
    kg.add_documents(DOCS, model="offline")
    app = _app(kg, "catrag")
    reads: list[tuple[str, int]] = []
    original = type(kg).vectors

    def vectors(self, ids, space="nodes"):
        reads.append((space, len(ids)))
        return original(self, ids, space)

    monkeypatch.setattr(type(kg), "vectors", vectors)
    out = app.invoke({"question": "Who joined the Harbor Guild, born in Oslo?"})
    weights = out["edge_weights"]
    assert weights["stage1_weak"] + weights["strong"] + weights["weak"] > 0, "no seed had neighbours"
    assert [s for s, _ in reads if s == "facts"] == ["facts"], reads


def test_catrag_fact_vectors_missing_at_the_first_read_and_present_at_the_second(make_kg, monkeypatch):
    """Stage I's fallback for edges stored without a fact vector: when every vector turns out to be
    there at its second look (written, or the first read failed, in between) it reads them rather
    than stacking zero-width rows (a ValueError under four callers)."""
    from langgraph_kgmem.errors import KgmemInputError
    from langgraph_kgmem.graphs.catrag.nodes import fact_vectors

    kg = make_kg("facts")
    kg.add_documents(DOCS, model="offline")
    edges = [e for e in kg.edges() if e.kind == "relation"][:5]
    want = kg.vectors([e.id for e in edges], space="facts")
    original, failed = type(kg).vectors, []

    def once_missing(self, ids, space="nodes"):
        if not failed:
            failed.append(1)
            raise KgmemInputError("no facts vector")
        return original(self, ids, space)

    monkeypatch.setattr(type(kg), "vectors", once_missing)
    np.testing.assert_array_equal(fact_vectors(kg, edges), want)


class _Vectors:
    """A vector backend of four rows counting its reads."""

    def __init__(self) -> None:
        self.rows = {f"v{i}": np.eye(4, dtype=np.float32)[i] for i in range(4)}
        self.reads = 0

    def get(self, space, ids):
        self.reads += 1
        return np.asarray([self.rows[i] for i in ids])

    def get_present(self, space, ids):
        self.reads += 1
        return {i: self.rows[i] for i in ids if i in self.rows}

    def dimension(self):
        return 4


def test_vector_cache_answers_a_call_larger_than_itself():
    """A call asking for more vectors than the cache holds gets them all (the cache is trimmed
    after), and what it kept answers the next call without a read."""
    backend = _Vectors()
    cache = VectorReadCache(backend, size=2)
    got = cache.get("facts", ["v0", "v1", "v2", "v3"])
    np.testing.assert_array_equal(got, np.eye(4, dtype=np.float32))
    reads = backend.reads
    np.testing.assert_array_equal(cache.get("facts", ["v3"]), np.eye(4, dtype=np.float32)[[3]])
    assert backend.reads == reads
    assert cache.has("facts", ["v0", "v1", "v2", "v3", "nope"]) == [True, True, True, True, False]


class _Interrupted(_Vectors):
    """A backend whose round trip lets another caller act on the cache meanwhile (``during``)."""

    during = None

    def get(self, space, ids):
        if self.during:
            self.during()
        return super().get(space, ids)

    get_present = _Vectors.get_present


@pytest.mark.parametrize("meanwhile", ["clear", "trim"])
def test_a_vector_cache_call_keeps_its_rows_whatever_another_caller_does_meanwhile(meanwhile):
    """Four callers of one KG on PostgreSQL at 100,000 passages: a caller's rows taken from the
    cache were evicted by another's trim (or a write's clear) during its round trip for the rest,
    and its CatRAG question failed. A call now answers from its own copy, and what it read across
    a clear is not cached (it may predate the write)."""
    backend = _Interrupted()
    cache = VectorReadCache(backend, size=2)
    cache.get("facts", ["v0"])

    def other_caller():
        backend.during = None
        cache.clear() if meanwhile == "clear" else cache.get("facts", ["v2", "v3"])

    backend.during = other_caller
    got = cache.get("facts", ["v0", "v1"])
    np.testing.assert_array_equal(got, np.eye(4, dtype=np.float32)[[0, 1]])
    reads = backend.reads
    cache.get("facts", ["v1"])
    assert (backend.reads == reads + 1) is (meanwhile == "clear")


# statements one steady question sends, measured after batching the document reads and the
# seeds' fact vectors (hipporag2 7, catrag 9 on this KG), and ReMindRAG's memory reads and
# writes (docs/capacity.md); a new per-item read breaks the bound
STATEMENTS = {"hipporag2": 6, "catrag": 8, "remindrag": 11}


@pytest.mark.integration
@pytest.mark.parametrize("method", sorted(STATEMENTS))
def test_statements_per_question_on_postgres(new_database, monkeypatch, method):
    """Every statement a steady question sends to PostgreSQL, counted at the driver."""
    import psycopg

    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(new_database(), name="trips", embeddings="hash")
    try:
        kg.add_documents(DOCS, model="offline")
        app = _app(kg, method)
        app.invoke({"question": "In which year did Mira Stend join the Harbor Guild?"})   # warm caches
        sent: list[str] = []
        original = psycopg.Cursor.execute

        def execute(self, query, *args, **kwargs):
            sent.append(query if isinstance(query, str) else repr(query))
            return original(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)
        app.invoke({"question": QUESTION})
        monkeypatch.undo()
        documents = [q for q in sent if "kgmem_documents" in q]
        assert len(documents) <= 1, documents
        assert len(sent) <= STATEMENTS[method], f"{len(sent)} statements:\n" + "\n".join(q[:120] for q in sent)
    finally:
        kg.close()


@pytest.mark.integration
def test_a_refresh_with_nothing_new_is_one_statement(new_database, monkeypatch):
    """Reads check for other processes' writes at most every ``refresh_interval`` seconds (and a
    run at its start): when nothing moved that is one statement, not a transaction."""
    import psycopg

    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(new_database(), name="trips", embeddings="hash")
    try:
        kg.add_documents(DOCS[:2], model="offline")
        sent: list[str] = []
        begun: list[int] = []
        execute, transaction = psycopg.Cursor.execute, psycopg.Connection.transaction

        def counted_execute(self, query, *args, **kwargs):
            sent.append(query if isinstance(query, str) else repr(query))
            return execute(self, query, *args, **kwargs)

        def counted_transaction(self, *args, **kwargs):
            begun.append(1)
            return transaction(self, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
        monkeypatch.setattr(psycopg.Connection, "transaction", counted_transaction)
        assert kg.refresh() is False
        monkeypatch.undo()
        assert len(sent) == 1 and not begun, (sent, len(begun))
    finally:
        kg.close()


@pytest.mark.integration
def test_passage_scores_on_postgres_come_from_one_copy_per_version(new_database, monkeypatch):
    """Scoring every passage was a scan of every row in the server at each question (750-1,130 ms
    at 100,000 passages); the KG now keeps one copy of the passage vectors per version. Its scores
    are the server's, a second question reads nothing, and a write (here another process's,
    applied by a refresh) gives the next question the new passages."""
    from langgraph_kgmem import KnowledgeGraph

    uri = new_database()
    kg = KnowledgeGraph.open(uri, name="copy", embeddings="hash")
    other = None
    try:
        ids, scores = kg.similarity_scores(QUESTION, ("chunk",))   # nothing stored yet
        assert ids == [] and scores.shape == (0,)
        kg.add_documents(DOCS, model="offline")
        reads = Counter()
        _count_calls(monkeypatch, type(kg._vectors), "matrix", reads)
        kg.prefetch_scores(("chunk",))
        ids, scores = kg.similarity_scores(QUESTION, ("chunk",))
        server_ids, server = kg._vectors.scores("nodes", kg.embed_query(QUESTION), ("chunk",))
        assert ids == server_ids and np.allclose(scores, server, atol=1e-5)
        kg.similarity_scores("Who was born in Oslo?", ("chunk",))
        assert reads["matrix"] == 1
        other = KnowledgeGraph.open(uri, name="copy", embeddings="hash")
        other.add_documents([{"id": "doc-new", "text": "Rolf Hane joined the Harbor Guild in 1950."}], model="offline")
        assert kg.refresh()
        ids2, _ = kg.similarity_scores(QUESTION, ("chunk",))
        assert len(ids2) == len(ids) + 1 and reads["matrix"] == 2
    finally:
        kg.close()
        if other is not None:
            other.close()


@pytest.mark.integration
def test_a_space_too_large_to_copy_is_scored_in_the_server_and_counted_once_per_version(new_database, monkeypatch):
    """Past ``SCORE_COPY_MAX_ROWS`` the scores come from the server's scan, as before the copy,
    and the size check is not repeated at every question of the same version."""
    import langgraph_kgmem.kg.graph as graph_module
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(new_database(), name="big", embeddings="hash")
    try:
        kg.add_documents(DOCS, model="offline")
        monkeypatch.setattr(graph_module, "SCORE_COPY_MAX_ROWS", 0)
        calls = Counter()
        for name in ("count", "matrix", "scores"):
            _count_calls(monkeypatch, type(kg._vectors), name, calls)
        for q in (QUESTION, "Who was born in Oslo?"):
            ids, scores = kg.similarity_scores(q, ("chunk",))
            assert len(ids) == len(DOCS) and scores.shape == (len(DOCS),)
        assert calls == Counter({"scores": 2})   # the kind's rows are counted in the structure
    finally:
        kg.close()


@pytest.mark.integration
def test_the_copy_cap_counts_the_rows_of_the_kinds_copied_not_the_whole_space(new_database, monkeypatch):
    """The node space holds every kind: a kind under the cap is copied even when the space is
    over it, and a kind over the cap is scored in the server."""
    import langgraph_kgmem.kg.graph as graph_module
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(new_database(), name="kinds", embeddings="hash")
    try:
        kg.add_documents(DOCS, model="offline")
        chunks = kg.stats()["nodes_by_kind"]["chunk"]
        assert kg._vectors.count("nodes") > chunks
        monkeypatch.setattr(graph_module, "SCORE_COPY_MAX_ROWS", chunks)   # below the space, at the kind
        calls = Counter()
        for name in ("matrix", "scores"):
            _count_calls(monkeypatch, type(kg._vectors), name, calls)
        ids, scores = kg.similarity_scores(QUESTION, ("chunk",))
        assert len(ids) == len(DOCS) and calls == Counter({"matrix": 1})   # scored on the copy
        monkeypatch.setattr(graph_module, "SCORE_COPY_MAX_ROWS", chunks - 1)
        kg.add_documents([{"id": "doc-new", "text": "Rolf Hane joined the Harbor Guild in 1950."}], model="offline")
        kg.similarity_scores(QUESTION, ("chunk",))
        assert calls["scores"] == 1   # more rows of the kind than the cap: the server scores them
    finally:
        kg.close()


@pytest.mark.integration
def test_entity_search_on_postgres_runs_on_the_copy_and_finds_what_the_server_finds(new_database, monkeypatch):
    """The server's HNSW index covers the whole node space, so a search for entities among many
    passages discarded most rows it read (1.1-3.1 s a search at 100,000 passages). With a copy of
    the entity vectors in the process, ``nearest`` ranks there: the server's ids and scores, no
    statement; ``restrict`` and a space too large to copy still search in the server."""
    import langgraph_kgmem.kg.graph as graph_module
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(new_database(), name="near", embeddings="hash")
    try:
        kg.add_documents(DOCS, model="offline")
        queries = [QUESTION, "Who was born in Oslo?", "Harbor Guild", "Bergen"]
        server = {q: kg._vectors.search("nodes", kg.embed_query(q), 4, kinds=("entity",)) for q in queries}
        calls = Counter()
        _count_calls(monkeypatch, type(kg._vectors), "search", calls)
        kg.prefetch_scores(("entity",))
        for q in queries:
            got = [(n.id, s) for n, s in kg.nearest(q, 4, kinds=("entity",))]
            assert [i for i, _ in got] == [i for i, _ in server[q]], q
            assert all(kg.node(i).kind == "entity" for i, _ in got)
        assert calls["search"] == 0
        some = [i for i, _ in server[QUESTION]][:2]
        assert [n.id for n, _ in kg.nearest(QUESTION, 4, kinds=("entity",), restrict=some)] == some
        assert calls["search"] == 1
        monkeypatch.setattr(graph_module, "SCORE_COPY_MAX_ROWS", 0)
        kg.add_documents([{"id": "doc-new", "text": "Rolf Hane joined the Harbor Guild in 1950."}], model="offline")
        kg.nearest(QUESTION, 4, kinds=("entity",))
        assert calls["search"] == 2
    finally:
        kg.close()
