"""Short texts embedded once per KG (``kg.text_vectors``), and AutoPrunedRetriever's codebook
tables read from them: a codebook loaded in a later process embeds none of the KG's symbols, and a
question looks up only the line vectors of the runs it reaches."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph, sync_codebook
from langgraph_kgmem.graphs.autopruned.codebook import Codebook
from langgraph_kgmem.kg.graph import text_vector_id
from langgraph_kgmem.testing import DeterministicEmbeddings

from conftest import SAMPLE_DOCS


class Counting(DeterministicEmbeddings):
    """Records every text it embeds."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed_documents(self, texts):
        self.texts.extend(texts)
        return super().embed_documents(texts)


def _unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_text_vectors_embed_each_text_once_and_survive_a_reopen(tmp_path):
    emb = Counting()
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings=emb, vector_backend="memory")
    version = kg.version
    texts = ["was born in", "of the", "was born in"]
    got = kg.text_vectors(texts)
    assert sorted(emb.texts) == ["of the", "was born in"]            # each distinct text once
    assert np.allclose(got, _unit(emb.embed_documents(texts)), atol=1e-6)
    assert kg.version == version                             # a cache: the graph did not change
    emb.texts.clear()
    assert np.array_equal(kg.text_vectors(["of the"]), got[1:2]) and emb.texts == []
    assert kg.text_vectors([]).shape[0] == 0
    kg.close()
    again = Counting()
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings=again)
    try:   # another process: read from the KG's vector store, nothing embedded
        assert np.array_equal(kg.text_vectors(["was born in", "of the"]), got[:2]) and again.texts == []
        assert kg.has_vectors([text_vector_id("of the")], space="texts") == [True]
    finally:
        kg.close()


def test_text_vector_ids_are_content_hashes():
    assert text_vector_id("of the") == text_vector_id("of the") != text_vector_id("Of the")
    assert text_vector_id("x").startswith("txt-") and len(text_vector_id("x")) == 36


def test_a_kg_directory_written_before_the_texts_space_opens(tmp_path):
    from langgraph_kgmem.kg.backends.embedded import files

    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    kg.add_documents(SAMPLE_DOCS[:1], model="offline")
    kg.close()
    # a vectors.npz as the previous release wrote it: no texts arrays
    path = tmp_path / "kg" / files.VECTORS_FILE
    data = dict(np.load(path))
    np.savez(path, **{k: v for k, v in data.items() if not k.startswith("texts_")})
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash")
    try:
        assert kg.node_count() > 0 and kg.vector_ids(space="texts") == []
    finally:
        kg.close()


@pytest.mark.parametrize("phrase_facts", ["uncovered", "always"])
def test_a_codebook_loaded_later_embeds_none_of_the_kgs_symbols(tmp_path, phrase_facts):
    emb = Counting()
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings=emb, vector_backend="memory")
    kg.add_documents(SAMPLE_DOCS, model="offline")
    _, store = kg.persistence()
    size = sync_codebook(kg, store, phrase_facts=phrase_facts)
    assert size["relations"] > 0
    built = Codebook.load(store, kg.name)
    kg.close()
    fresh = Counting()
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings=fresh)
    try:
        _, store = kg.persistence()
        book = Codebook.load(store, kg.name)
        assert book.size() == built.size()
        ents, rels, lines = book.entity_vectors(kg), book.relation_vectors(kg), book.line_vectors(kg)
        assert fresh.texts == []      # sync_codebook embedded every symbol once, in the KG's store
        assert len(rels) == len(book.rel_text) and len(ents) == len(book.ent_text)
        assert np.allclose(np.linalg.norm(lines, axis=1), 1.0, atol=1e-5)
        # the same vectors a codebook embedding everything itself holds
        ref = Counting()
        for i in range(len(book.rel_text)):
            assert np.allclose(rels[i], _unit(ref.embed_documents([book.rel_text[i]]))[0], atol=1e-5)
    finally:
        kg.close()


def test_a_question_reads_the_lines_of_the_runs_it_reaches_only(tmp_path):
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    docs = SAMPLE_DOCS + [{"id": f"doc-extra-{i}", "title": f"Town {i}",
                           "text": f"Town {i} lies on river R{i}. Its mayor was born in village V{i}."}
                          for i in range(40)]
    kg.add_documents(docs, model="offline")
    _, store = kg.persistence()
    sync_codebook(kg, store, phrase_facts="always")
    app = create_autopruned_graph(kg, model="offline", store=store, coarse_k=5, fine_m=3,
                                  dense_fusion=False).compile(store=store)
    try:
        out = app.invoke({"question": "Where was Marie Curie born?"})
        assert "Warsaw" in out["answer"]
        deps_book = Codebook.load(store, kg.name)   # the stored codebook, as a new process loads it
        lines_total = len(deps_book._line_todo)
        # the question above ran on a codebook loaded the same way: it computed few of its lines
        book = next(iter(_books_of(app).values()))[1]
        assert lines_total > 100
        assert 0 < lines_total - len(book._line_todo) < lines_total / 4
    finally:
        kg.close()


def _books_of(app):
    """The codebooks the compiled graph's nodes hold (AutoprunedDeps)."""
    node = app.builder.nodes["retrieve_coarse"].runnable
    return node.func.keywords["deps"]._books


def test_text_vectors_on_postgresql_are_read_by_a_later_process_and_get_no_hnsw_index(new_database, monkeypatch):
    from langgraph_kgmem.kg.backends.postgres import vectors

    monkeypatch.setattr(vectors, "HNSW_MIN_ROWS", 1)   # every searched space indexed at once
    uri = new_database()
    emb = Counting()
    kg = KnowledgeGraph.open(uri, name="texts", embeddings=emb)
    try:
        kg.add_documents(SAMPLE_DOCS[:1], model="offline")
        emb.texts.clear()
        got = kg.text_vectors(["was born in", "of the"])
        assert sorted(emb.texts) == ["of the", "was born in"]
    finally:
        kg.close()
    again = Counting()
    kg = KnowledgeGraph.open(uri, name="texts", embeddings=again)
    try:   # the server's copy, nothing embedded again
        assert np.allclose(kg.text_vectors(["of the", "was born in"]), got[::-1], atol=1e-6) and again.texts == []
    finally:
        kg.close()
    import psycopg

    with psycopg.connect(uri) as conn:   # read by id alone: an index would only cost inserts
        names = [r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s",
                                            ("%texts%",))]
    assert names == []
    with psycopg.connect(uri) as conn:   # the searched space did get one
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname LIKE %s", ("%nodes_hnsw",)).fetchone()[0] == 1
