"""KnowledgeGraph layer: ingestion, idempotency, deletion, PPR, overrides, bad input."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError
from langgraph_kgmem.kg.ppr import build_snapshot, personalized_pagerank
from langgraph_kgmem.kg.types import Edge, Node, edge_id


def _fingerprint(g: KnowledgeGraph):
    return (sorted((n.id, n.kind, n.text) for n in g.nodes()),
            sorted((e.id, e.src, e.dst, e.kind, e.text, e.weight) for e in g.edges()))


def test_reingest_is_idempotent(kg, sample_docs):
    before = _fingerprint(kg)
    report = kg.add_documents(sample_docs, model="offline")
    assert report.documents_added == 0 and report.documents_skipped == len(sample_docs)
    assert _fingerprint(kg) == before


def test_anchor_next_chain_and_context_edges(kg):
    long_doc = {"id": "doc-long", "title": "Long",
                "text": " ".join(f"Sentence number {i} mentions Alpha Centauri and Proxima." for i in range(60))}
    kg.add_documents([long_doc], model="offline", chunk_tokens=64)
    anchors = [n for n in kg.nodes("anchor") if n.attrs["doc_id"] == "doc-long"]
    assert len(anchors) > 3
    nexts = [e for e in kg.edges("next") if kg.node(e.src).attrs["doc_id"] == "doc-long"]
    assert len(nexts) == len(anchors) - 1
    chunk_ids = {n.id for n in kg.nodes("chunk") if n.attrs["doc_id"] == "doc-long"}
    ctx = [e for e in kg.edges("context") if e.dst in chunk_ids]
    assert ctx and all(kg.node(e.src).kind == "entity" for e in ctx)


def test_delete_document_removes_only_its_contribution(kg):
    shared = kg.nearest("Marie Curie", 1)[0][0]
    assert shared.text == "Marie Curie"
    result = kg.delete_document("doc-curie")
    assert result["nodes_removed"] > 0
    assert kg.document("doc-curie") is None
    # Marie Curie is also mentioned by doc-pierre: she stays; polonium was only in doc-curie
    assert kg.node(shared.id) is not None
    assert not [n for n in kg.nodes("entity") if n.text.lower() == "polonium"]
    assert all(kg.node(e.src) and kg.node(e.dst) for e in kg.edges())
    with pytest.raises(KgmemInputError, match="no document"):
        kg.delete_document("doc-curie")


def test_entity_merge_records_alias():
    g = KnowledgeGraph.in_memory()
    g.add_triples([("Marie Curie", "born in", "Warsaw")], source="d1")
    # the hashing embedding maps case/punctuation variants of the same words to the same vector
    g.add_triples([("Marie  Curie.", "won", "Nobel Prize")], source="d2", merge_threshold=0.85)
    names = sorted(n.text for n in g.nodes("entity"))
    assert names.count("Marie Curie") == 1
    g.add_triples([("Curie Marie", "won", "Physics Prize")], source="d3", merge_threshold=0.85)
    assert any(alias == "curie marie" for alias, _, _ in g.aliases())
    assert len([n for n in g.nodes("entity") if "Curie" in n.text]) == 1


def test_ppr_matches_networkx_on_random_graph():
    rng = np.random.default_rng(7)
    n, m = 200, 900
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.uniform(0.5, 2.0, m)
    ids = [f"n{i}" for i in range(n)]
    snap = build_snapshot(ids, ["entity"] * n, src, dst, w, symmetric=True)
    reset = np.zeros(n)
    reset[[3, 17, 42]] = [1.0, 0.5, 0.25]
    ours = personalized_pagerank(snap, reset, damping=0.5, tol=1e-12, max_iter=500)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for a, b, x in zip(src, dst, w):
        if a == b:
            continue
        if g.has_edge(a, b):
            g[a][b]["weight"] += x
        else:
            g.add_edge(a, b, weight=x)
    pers = {i: float(reset[i]) for i in range(n)}
    ref = nx.pagerank(g, alpha=0.5, personalization=pers, weight="weight", tol=1e-14, max_iter=1000)
    ref_vec = np.array([ref[i] for i in range(n)])
    assert np.allclose(ours, ref_vec, atol=1e-8)
    assert list(np.argsort(-ours)[:20]) == list(np.argsort(-ref_vec)[:20])


def test_ppr_overrides_do_not_touch_stored_graph(kg):
    seed = kg.nearest("Warsaw", 1)[0][0].id
    base = kg.ppr({seed: 1.0})
    snap_before = kg.snapshot()
    data_before = snap_before.w.data.copy()
    neighbours = [nb.id for _, nb in kg.neighbors(seed)]
    boosted = kg.ppr({seed: 1.0}, overrides={(seed, neighbours[0]): 5.0, (seed, neighbours[-1]): 0.0})
    assert dict(boosted) != dict(base)
    assert kg.snapshot() is snap_before
    assert np.array_equal(kg.snapshot().w.data, data_before)
    assert all(e.weight == 1.0 for e in kg.edges() if e.kind != "synonym")
    assert kg.ppr({seed: 1.0}) == base


def test_ppr_zero_override_blocks_flow():
    g = KnowledgeGraph.in_memory()
    g.add_nodes([Node("a", "entity", "a"), Node("b", "entity", "b"), Node("c", "entity", "c")])
    g.add_edges([Edge(edge_id("a", "b", "relation"), "a", "b", "relation", "r"),
                 Edge(edge_id("a", "c", "relation"), "a", "c", "relation", "r")])
    scores = dict(g.ppr({"a": 1.0}, overrides={("a", "b"): 0.0}))
    assert scores["b"] < 1e-9 < scores["c"]


def test_snapshot_rebuilt_after_write(kg):
    s1 = kg.snapshot()
    kg.add_triples([("Alpha", "orbits", "Beta")], source="d-new")
    s2 = kg.snapshot()
    assert s2 is not s1 and s2.n == s1.n + 2


def test_subgraph_and_neighbours(kg):
    warsaw = kg.nearest("Warsaw", 1)[0][0].id
    sub = kg.subgraph([warsaw], hops=1)
    ids = {n["id"] for n in sub["nodes"]}
    assert warsaw in ids and len(ids) > 1
    assert all(e["src"] in ids and e["dst"] in ids for e in sub["edges"])
    rel = kg.neighbors(warsaw, kinds=("relation",))
    assert all(e.kind == "relation" for e, _ in rel)


def test_synonym_edges_weighted_by_similarity():
    g = KnowledgeGraph.in_memory()
    g.add_triples([("Lake Geneva", "borders", "Lausanne"), ("Geneva Lake", "borders", "Montreux")], source="d",
                  merge_threshold=None)
    added = g.add_synonym_edges(threshold=0.8)
    syn = g.edges("synonym")
    assert added == len(syn) >= 1
    assert all(abs(e.weight - 2.0 * e.attrs["similarity"]) < 1e-5 for e in syn)
    # idempotent: nothing to add or change → returns 0 and the version (caches) stays
    version = g.version
    assert g.add_synonym_edges(threshold=0.8) == 0 and len(g.edges("synonym")) == len(syn)
    assert g.version == version


@pytest.mark.parametrize("content, match", [
    (b"", "empty"),
    (b"\x00\x01binary\x00", "binary"),
    ("caf\u00e9".encode("latin-1"), "not UTF-8"),
])
def test_bad_files_give_clear_errors_and_keep_data(kg, tmp_path, content, match):
    before = _fingerprint(kg)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    good = tmp_path / "good.txt"
    good.write_text("Zed Alpha met Yara Beta.")
    with pytest.raises(KgmemInputError, match=match):
        kg.add_documents([good, bad], model="offline")
    assert _fingerprint(kg) == before  # validation happens before any write


def test_oversize_document_rejected(kg):
    with pytest.raises(KgmemInputError, match="over the limit"):
        kg.add_documents(["x " * 100], model="offline", max_chars=50)


def test_open_refuses_non_kg_paths(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("hi")
    with pytest.raises(NotAKnowledgeGraphError, match="is a file"):
        KnowledgeGraph.open(f, embeddings="hash")
    d = tmp_path / "project"
    d.mkdir()
    (d / "notes.md").write_text("mine")
    with pytest.raises(NotAKnowledgeGraphError, match="non-empty directory"):
        KnowledgeGraph.open(d, embeddings="hash")
    assert (d / "notes.md").read_text() == "mine"
    with pytest.raises(NotAKnowledgeGraphError, match="not a langgraph_kgmem KG"):
        KnowledgeGraph.open(tmp_path / "missing", embeddings="hash", create=False)


def test_second_writer_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("KGMEM_LOCK_TIMEOUT", "0.1")
    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    try:
        with pytest.raises(NotAKnowledgeGraphError, match="another writer"):
            KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    finally:
        g.close()


def test_reopen_with_other_embeddings_is_refused(tmp_path):
    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    g.close()
    with pytest.raises(KgmemInputError, match="was built with embeddings"):
        KnowledgeGraph.open(tmp_path / "kg", embeddings="hash:64", vector_backend="memory")


def test_interrupted_ingest_is_completed_by_rerun(tmp_path, sample_docs):
    class Boom(Exception):
        pass

    from langgraph_kgmem.ingest.extract import OfflineExtractor

    class Flaky(OfflineExtractor):
        calls = 0

        def extract(self, text, title=None):
            Flaky.calls += 1
            if Flaky.calls == 3:
                raise Boom("crash midway")
            return super().extract(text, title)

    g = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory")
    with pytest.raises(Boom):
        g.add_documents(sample_docs, extractor=Flaky())
    statuses = {d["id"]: d["status"] for d in g.documents()}
    assert statuses["doc-curie"] == "done" and statuses["doc-pierre"] == "pending"
    report = g.add_documents(sample_docs, model="offline")
    assert report.documents_repaired == 1 and report.documents_skipped == 2 and report.documents_added == 2
    ref = KnowledgeGraph.in_memory()
    ref.add_documents(sample_docs, model="offline")
    assert _fingerprint(g) == _fingerprint(ref)
    g.close()


def test_vector_index_upsert_delete_and_compaction():
    from langgraph_kgmem.kg.backends.embedded.vectors import NumpyVectorIndex

    idx = NumpyVectorIndex()
    eye = np.eye(4, dtype=np.float32)
    idx.upsert("s", ["a", "b", "a"], eye[:3], ["x", "y", "x"])  # duplicate id in one call: last wins
    assert idx.count("s") == 2
    assert np.allclose(idx.get("s", ["a"]), eye[2])
    for i in range(100):
        idx.upsert("s", [f"n{i}"], eye[[i % 4]], ["y"])
    idx.delete("s", [f"n{i}" for i in range(60)])  # triggers compaction
    assert idx.count("s") == 42
    hits = idx.search("s", eye[2], 3, kinds=("x",))
    assert hits[0][0] == "a" and len(hits) == 1
    ids, mat = idx.matrix("s", kinds=("y",))
    assert len(ids) == 41 and mat.shape == (41, 4)
    with pytest.raises(KeyError):
        idx.get("s", ["n0"])


def test_vector_search_never_returns_deleted_or_filtered_rows_and_is_exact():
    from langgraph_kgmem.kg.backends.embedded.vectors import NumpyVectorIndex

    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    ids, kinds = [f"v{i}" for i in range(300)], ["entity" if i % 3 else "chunk" for i in range(300)]
    idx = NumpyVectorIndex()
    idx.upsert("nodes", ids, vecs, kinds)
    idx.delete("nodes", ids[:50])  # tombstones (below the compaction threshold)
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    for q in rng.normal(size=(5, 16)).astype(np.float32):
        qn = q / np.linalg.norm(q)
        live = [i for i in range(50, 300) if kinds[i] == "entity"]
        want = sorted(live, key=lambda i: (-float(unit[i] @ qn), i))[:7]
        got = idx.search("nodes", q, 7, kinds=("entity",))
        assert [g for g, _ in got] == [ids[i] for i in want]
        assert np.allclose([s for _, s in got], [unit[i] @ qn for i in want], atol=1e-5)
    # k larger than what the filter keeps: only live rows of that kind come back
    assert len(idx.search("nodes", vecs[0], 10_000, kinds=("chunk",))) == sum(
        1 for i in range(50, 300) if kinds[i] == "chunk")
    idx.upsert("nodes", ["v60"], vecs[[60]], ["chunk"])  # a write changes a row's kind: the filter follows
    assert "v60" not in [i for i, _ in idx.search("nodes", vecs[60], 300, kinds=("entity",))]


def test_scores_follow_every_write_though_their_rows_are_cached():
    """``scores`` (dense scores of every passage) keeps each kind filter's rows and ids until the
    next write: an upsert, a kind change and a delete (with compaction) each show at once."""
    from langgraph_kgmem.kg.backends.embedded.vectors import NumpyVectorIndex

    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(40, 8)).astype(np.float32)
    idx = NumpyVectorIndex()
    idx.upsert("nodes", [f"c{i}" for i in range(20)], vecs[:20], ["chunk" if i % 2 else "entity" for i in range(20)])

    def check():
        ids, scores = idx.scores("nodes", vecs[0], ("chunk",))
        live = idx.matrix("nodes", kinds=("chunk",))
        assert ids == list(live[0])
        q = vecs[0] / np.linalg.norm(vecs[0])
        assert np.allclose(scores, live[1] @ q, atol=1e-6)
        return ids

    assert check() == [f"c{i}" for i in range(1, 20, 2)]
    assert check() is idx.scores("nodes", vecs[0], ("chunk",))[0]   # cached: the same list
    idx.upsert("nodes", ["c20", "c21"], vecs[20:22], ["chunk", "entity"])
    assert check()[-1] == "c20"
    idx.upsert("nodes", ["c1"], vecs[[1]], ["entity"])     # a kind change
    assert "c1" not in check()
    idx.delete("nodes", [f"c{i}" for i in range(3, 15)])   # past a third dead: compaction
    assert check() == ["c15", "c17", "c19", "c20"]


def test_ingest_batches_embedding_calls_per_document(sample_docs):
    from langgraph_kgmem.testing import DeterministicEmbeddings

    class Counting(DeterministicEmbeddings):
        calls = 0

        def embed_documents(self, texts):
            Counting.calls += 1
            return super().embed_documents(texts)

    g = KnowledgeGraph.in_memory(embeddings=Counting(64))
    g.add_documents(sample_docs, model="offline")
    # one batched call per document (prefetch) plus at most one per document for merged-fact texts
    assert Counting.calls <= 2 * len(sample_docs)


def test_a_window_embeds_its_merged_entities_facts_in_one_call():
    """A fact whose subject resolved to an entity spelled otherwise (its text is not the one
    prefetched) is embedded with the rest of its window's such facts, not in a call per chunk;
    every relation still gets the vector of its stored text."""
    from langgraph_kgmem.ingest.extract import Extraction
    from langgraph_kgmem.kg.types import Triple
    from langgraph_kgmem.testing import DeterministicEmbeddings

    class Counting(DeterministicEmbeddings):
        calls = 0

        def embed_documents(self, texts):
            Counting.calls += 1
            return super().embed_documents(texts)

    class Shouting:
        """Every document after the first names Kalo Venrith in capitals."""

        def extract(self, text, title):
            i = int(text.split()[-1].rstrip("."))
            name = "Kalo Venrith" if i == 0 else "KALO VENRITH"
            return Extraction([name, f"Town {i}"], [Triple(name, "visited", f"Town {i}")], f"Visit {i}")

    g = KnowledgeGraph.in_memory(embeddings=Counting(64))
    g.add_documents([f"Kalo Venrith visited town {i}." for i in range(12)], extractor=Shouting())
    assert Counting.calls <= 3      # the window's passages and short texts, and its merged facts
    facts = g.edges("relation")
    assert len(facts) == 12 and all(g.fact_text(e).startswith("Kalo Venrith visited") for e in facts)
    want = np.asarray(g.embeddings.embed_documents([g.fact_text(e) for e in facts]), dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert np.allclose(g.vectors([e.id for e in facts], space="facts"), want, atol=1e-5)


def test_texts_go_to_the_model_in_batches_of_about_one_length():
    """A model pads a batch to its longest text: the KG's embedding calls send texts shortest
    first, so a batch of names is not padded to a long fact's length, and the vectors come back
    in the caller's order."""
    from langgraph_kgmem.testing import DeterministicEmbeddings

    class Recording(DeterministicEmbeddings):
        batches: list[list[str]] = []

        def embed_documents(self, texts):
            Recording.batches.append(list(texts))
            return super().embed_documents(texts)

    g = KnowledgeGraph.in_memory(embeddings=Recording(64))
    texts = [("long fact " * (i % 7 + 1)) + str(i) for i in range(40)]
    got = g.embed_texts(texts, batch_size=8)
    lengths = [[len(t) for t in b] for b in Recording.batches]
    assert len(lengths) == 5
    assert all(max(a) <= min(b) for a, b in zip(lengths, lengths[1:]))
    want = np.asarray(DeterministicEmbeddings(64).embed_documents(texts), dtype=np.float32)
    assert np.allclose(got, want)


def test_embed_facts_embeds_only_relations_without_a_vector_and_refuses_unknown_edges(kg):
    a, b = kg.add_node("entity", "Kalo Venrith"), kg.add_node("entity", "Oslo")
    rel = Edge(edge_id(a, b, "relation", "lives in"), a, b, "relation", "lives in")
    ctx = Edge(edge_id(a, b, "context"), a, b, "context")
    kg.add_edges([rel, ctx], embed_facts=False)
    assert kg.embed_facts([rel, ctx]) == 1
    assert kg.embed_facts([rel]) == 0
    other = Edge(edge_id(b, a, "relation", "holds"), b, a, "relation", "holds")
    with pytest.raises(KgmemInputError, match="does not hold"):
        kg.embed_facts([other])
    assert kg.embed_facts([rel]) == 0      # nothing lost


def test_best_first_is_deterministic_at_ties_and_bounds():
    import numpy as np

    from langgraph_kgmem.ranking import best_first

    s = np.array([0.5, 0.9, 0.5, 0.9, 0.1, 0.5])
    assert best_first(s).tolist() == [1, 3, 0, 2, 5, 4]
    assert best_first(s, 3).tolist() == [1, 3, 0]        # the tie at the cut goes to the lowest index
    assert best_first(s, 4).tolist() == [1, 3, 0, 2]
    assert best_first(s, 0).tolist() == [] and best_first(s, 99).tolist() == [1, 3, 0, 2, 5, 4]
    assert best_first(np.zeros(0), 3).tolist() == []
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=500).astype(float)  # many ties
    for k in (1, 7, 100, 499, 500):
        assert best_first(x, k).tolist() == np.lexsort((np.arange(500), -x))[:k].tolist()


def test_empty_kind_filters_mean_nothing_not_everything(kg):
    assert kg.snapshot([]).n == kg.snapshot().n and kg.snapshot([]) is not kg.snapshot()
    seeds = {n.id: 1.0 for n in kg.nodes("entity")[:1]}
    assert kg.ppr(seeds, node_kinds=[]) == []
    assert kg.ppr(seeds)  # a plain call after it still ranks every node


def _chunk_vectors(g: KnowledgeGraph) -> dict[str, np.ndarray]:
    ids, mat = g.vector_matrix(("chunk",))
    return {g.node(i).text: v for i, v in zip(ids, mat)}


def _unit(g: KnowledgeGraph, text: str) -> np.ndarray:
    v = np.asarray(g.embeddings.embed_documents([text])[0], dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_new_kg_embeds_each_chunk_with_its_documents_title(make_kg):
    g = make_kg("titled")
    g.add_documents([{"title": "Marie Curie", "text": "She was born in Warsaw in 1867."},
                     "Warsaw is the capital of Poland."], model="offline")
    assert g.stats()["passage_text"] == "title+text"
    vecs = _chunk_vectors(g)
    assert np.allclose(vecs["She was born in Warsaw in 1867."], _unit(g, "Marie Curie\nShe was born in Warsaw in 1867."))
    # an untitled document's chunk: the extractor's title (its own first words) is shown, not embedded
    assert np.allclose(vecs["Warsaw is the capital of Poland."], _unit(g, "Warsaw is the capital of Poland."))
    g.add_triples([["Pierre Curie", "married", "Marie Curie"]], text="He married her in 1895.", title="Pierre Curie")
    assert np.allclose(_chunk_vectors(g)["He married her in 1895."], _unit(g, "Pierre Curie\nHe married her in 1895."))


def _embeds_chunk_text_alone(target, title: str, text: str) -> None:
    """Open KG ``target``: it records passage_text "text", and a titled document added now gets a
    chunk vector of its text alone."""
    g = KnowledgeGraph.open(target, name="old", embeddings="hash", create=False)
    try:
        assert g.stats()["passage_text"] == "text"
        g.add_documents([{"title": title, "text": text}], model="offline")
        assert np.allclose(_chunk_vectors(g)[text], _unit(g, text))
    finally:
        g.close()


@pytest.mark.integration
def test_a_kg_created_before_titles_were_embedded_keeps_embedding_chunk_text_alone(tmp_path, new_database):
    import sqlite3

    from langgraph_kgmem.migrate import migrate

    g = KnowledgeGraph.open(tmp_path / "old", name="old", embeddings="hash", vector_backend="memory")
    g.add_documents([{"title": "Marie Curie", "text": "She was born in Warsaw in 1867."}], model="offline")
    g.close()
    with sqlite3.connect(tmp_path / "old" / "kg.sqlite") as conn:   # as a KG written before the setting
        conn.execute("DELETE FROM meta WHERE key='passage_text'")
    _embeds_chunk_text_alone(tmp_path / "old", "Pierre Curie", "He married her in 1895.")
    # vectors are migrated as stored, so the setting goes with them: into a directory and into PostgreSQL
    for target in (tmp_path / "new", new_database()):
        migrate(tmp_path / "old", target, embeddings="hash")
        _embeds_chunk_text_alone(target, "Warsaw", "It lies on the Vistula.")
    with sqlite3.connect(tmp_path / "new" / "kg.sqlite") as conn:
        conn.execute("UPDATE meta SET value='summary' WHERE key='passage_text'")
    with pytest.raises(KgmemInputError, match="passage_text 'summary'"):
        KnowledgeGraph.open(tmp_path / "new", embeddings="hash", create=False)
