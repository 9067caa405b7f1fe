"""Adaptive fusion: each graph method gives its own ranking a share of the evidence by its
confidence, with the guarantee that weak signals cost at most one of vector search's top ``k``
passages and strong ones give the method's own top ``k``."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.catrag import index as catrag
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
from langgraph_kgmem.graphs.autopruned import scoring as autopruned_scoring
from langgraph_kgmem.graphs.catrag import create_catrag_graph
from langgraph_kgmem.graphs.common import dense_passages, fuse_with_dense_adaptive
from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
from langgraph_kgmem.graphs.remindrag.nodes import walk_confidence
from langgraph_kgmem.ranking import adaptive_fuse, interleave, overlap_at, shared_turns, trust_share

WEAK, STRONG = 0.4, 0.8


def _rankings(rng: np.random.Generator) -> tuple[list[str], list[str], int]:
    """Two random rankings over one pool (overlapping, of any lengths, own may hold repeats)."""
    pool = [f"p{i}" for i in range(int(rng.integers(1, 60)))]
    own = [str(x) for x in rng.choice(pool, size=int(rng.integers(0, 2 * len(pool) + 1)))]
    dense = [str(x) for x in rng.permutation(pool)[:int(rng.integers(1, len(pool) + 1))]]
    return own, dense, int(rng.integers(1, 12))


# ------------------------------------------------------------------------------ the guarantee


@pytest.mark.parametrize("seed", range(6))
def test_weak_signals_cost_at_most_one_of_vector_searchs_top_k(seed):
    rng = np.random.default_rng(seed)
    for _ in range(400):
        own, dense, k = _rankings(rng)
        conf = float(rng.uniform(0.0, WEAK - 1e-9))
        fused = [x for x, _ in adaptive_fuse(own, dense, k, confidence=conf, weak=WEAK, strong=STRONG)]
        assert len(fused) == len(set(fused)) == len(set(own) | set(dense))   # everything, once
        top = set(fused[:k])
        assert len(set(dense[:k]) - top) <= 1
        if own:
            assert fused[0] == own[0]                        # the one place the method keeps: its best


@pytest.mark.parametrize("seed", range(6))
def test_strong_signals_give_the_methods_own_top_k(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(400):
        own, dense, k = _rankings(rng)
        conf = float(rng.uniform(STRONG, 1.0))
        fused = [x for x, _ in adaptive_fuse(own, dense, k, confidence=conf, weak=WEAK, strong=STRONG)]
        mine = list(dict.fromkeys(own))
        assert fused[:len(mine)] == mine                     # the method's whole ranking, as it is
        assert fused[len(mine):] == [x for x in dense if x not in set(mine)]   # then vector search's rest


@pytest.mark.parametrize("seed", range(3))
def test_between_the_thresholds_the_lists_take_turns_own_first(seed):
    rng = np.random.default_rng(200 + seed)
    for _ in range(300):
        own, dense, k = _rankings(rng)
        conf = float(rng.uniform(WEAK, STRONG - 1e-9))
        fused = adaptive_fuse(own, dense, k, confidence=conf, weak=WEAK, strong=STRONG, depth=10 ** 6)
        assert fused == interleave([own, dense])


def test_shared_turns_own_holds_its_share_of_every_prefix():
    rng = np.random.default_rng(5)
    for _ in range(300):
        own = [f"a{i}" for i in range(40)]
        dense = [f"b{i}" for i in range(40)]                 # disjoint: every turn is visible
        share = float(rng.uniform(0.0, 1.0))
        fused = [x for x, _ in shared_turns(own, dense, share=share)]
        for n in range(1, 41):
            mine = sum(x.startswith("a") for x in fused[:n])
            assert mine == int(np.ceil(share * n - 1e-9))    # ceil(share · n) of the first n places


def test_scores_are_reciprocal_places():
    fused = adaptive_fuse(["a", "b"], ["c", "a"], 2, confidence=0.5, weak=WEAK, strong=STRONG)
    assert fused == [("a", 1.0), ("c", 0.5), ("b", 1 / 3)]


def test_bad_share_and_thresholds_are_refused():
    with pytest.raises(ValueError, match="share must be within"):
        shared_turns(["a"], ["b"], share=1.5)
    with pytest.raises(ValueError, match="weak <= strong"):
        trust_share(0.5, weak=0.9, strong=0.1, k=5)


def test_overlap_at_reads_distinct_items_at_the_top():
    assert overlap_at(["a", "a", "b", "c"], ["b", "x"], 2) == 0.5
    assert overlap_at([], ["b"], 3) == 0.0


# ------------------------------------------------------------------------------ each method's part


def _catrag_index(n: int):
    idx = type("Idx", (), {})()
    idx.chunk_rows = np.arange(n)
    idx.chunk_ids = [f"c{i}" for i in range(n)]
    return idx


def test_catrag_confidence_is_the_mass_concentration_and_zero_without_a_linked_entity():
    ppr = np.array([0.5, 0.3, 0.1, 0.05, 0.05, 0.0])
    signals = catrag.ppr_signals(ppr, np.zeros(6), seeds=2, k=2)
    assert signals["concentration"] == pytest.approx(0.8 / 0.95)
    assert catrag.ppr_confidence(signals) == pytest.approx(0.8 / 0.95)
    assert catrag.ppr_confidence({**signals, "seeds": 0.0}) == 0.0


def test_catrag_adaptive_ranking_follows_its_confidence():
    idx = _catrag_index(8)
    dense = np.linspace(0.0, 1.0, 8)                          # vector search: c7 > c6 > ... > c0
    peaked = np.array([0.9, 0.05, 0.01, 0.01, 0.01, 0.01, 0.005, 0.005])   # PPR: c0 > c1 > ... (concentrated)
    got, info = catrag.fuse_adaptive(idx, peaked, dense, 8, seeds=1, weak=WEAK, strong=STRONG, top=3)
    assert info["share"] == 1.0 and [p["id"] for p in got][:3] == ["c0", "c1", "c2"]
    assert info["own"][:2] == ["c0", "c1"] and info["dense"][:2] == ["c7", "c6"]
    got, info = catrag.fuse_adaptive(idx, peaked, dense, 8, seeds=0, weak=WEAK, strong=STRONG, top=3)
    assert info["confidence"] == 0.0 and [p["id"] for p in got][:3] == ["c0", "c7", "c6"]
    assert all({"ppr", "dense", "score"} <= set(p) for p in got)


class _ScoredPassages:
    """A stand-in KG for ``dense_passages``: fixed passage scores."""

    def __init__(self, ids, scores):
        self.ids, self.scores = ids, np.asarray(scores, dtype=float)

    def similarity_scores(self, question, kinds):
        return self.ids, self.scores


def test_remindrag_adaptive_keeps_every_find_and_the_weak_guarantee():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 150))
        ids = [f"c{i}" for i in range(n)]
        kg = _ScoredPassages(ids, rng.random(n))
        dense = dense_passages(kg, "q", n)
        walk = [ids[i] for i in rng.choice(n, size=int(rng.integers(0, min(n, 12) + 1)), replace=False)]
        k = max(5, len(walk))
        fused, info = fuse_with_dense_adaptive(kg, "q", walk, k, confidence=walk_confidence, weak=WEAK,
                                               strong=STRONG, top=5)
        got = [c for c, _ in fused]
        assert len(got) == len(set(got)) and set(walk) <= set(got)
        assert info["confidence"] == pytest.approx(overlap_at(walk, dense, 5))
        if info["confidence"] < WEAK:
            assert len(set(dense[:5]) - set(got[:5])) <= 1
        if info["confidence"] >= STRONG:
            assert got[:len(walk)] == walk


def test_autopruned_adaptive_run_fusion_keeps_vector_searchs_runs_when_weak():
    rng = np.random.default_rng(13)
    for _ in range(300):
        pool = [f"c{i}" for i in range(int(rng.integers(2, 30)))]
        runs = [(0.0, 0, type("R", (), {"id": f"r{j}", "channel": "F", "links": [],
                                        "chunks": list(rng.choice(pool, size=int(rng.integers(1, 3))))})())
                for j in range(int(rng.integers(1, 40)))]
        dense = list(rng.permutation(pool))[:int(rng.integers(1, len(pool) + 1))]
        plain = list(autopruned_scoring.fuse_dense(runs, dense))
        weak = list(autopruned_scoring.fuse_dense(runs, dense, adaptive={"confidence": 0.0, "weak": WEAK,
                                                                         "strong": STRONG, "top": 5}))
        assert set(weak) == set(plain)                       # the same runs take part, far runs still left out
        pos = {c: i for i, c in enumerate(dense)}
        best = {}   # passage → the first run (fine order) whose best-placed passage it is
        for _, _, r in runs:
            placed = [c for c in r.chunks if c in pos]
            if placed:
                best.setdefault(min(placed, key=pos.get), r.id)
        by_dense = [best[c] for c in dense if c in best]     # vector search's ranking, as runs
        assert len(set(by_dense[:5]) - set(weak[:5])) <= 1


def test_autopruned_fine_confidence_reads_agreement_and_coverage():
    run = type("R", (), {"id": "r0", "channel": "F", "links": [], "chunks": ["a", "b"]})()
    q = type("R", (), {"id": "q0", "channel": "Q", "links": [], "chunks": ["z"]})()
    conf, signals = autopruned_scoring.fine_confidence([(0.7, 0, q), (0.6, 1, run)], ["b", "x"],
                                                       lambda r: r.chunks, 2)
    assert conf == 0.5 and signals == {"agreement": 0.5, "coverage": 0.7}  # the stored question takes no part


# ------------------------------------------------------------------------------ through the graphs


# facts about the "Zorblat" cluster, which the question names: CatRAG's offline filter keeps them
DOCS = [{"id": f"doc-z{i}", "title": f"Zorblat unit {i}",
         "text": f"Zorblat Corporation owns Unit{i} Holdings. Unit{i} Holdings employs Person{i} Smith. "
                 f"Person{i} Smith lives in Town{i} Valley."} for i in range(6)]
QUESTION = "Where does the Person2 Smith employed by Zorblat Corporation live?"


@pytest.fixture(scope="module")
def town_kg():
    g = KnowledgeGraph.in_memory(name="towns", embeddings="hash")
    g.add_documents(DOCS, model="offline")
    yield g
    g.close()


@pytest.mark.parametrize("opts", [{}, {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}])
def test_catrag_and_hipporag2_record_their_adaptive_fusion(town_kg, opts):
    store = InMemoryStore()
    out = create_catrag_graph(town_kg, model="offline", store=store, offline_fact_threshold=0.0, fusion="adaptive",
                              **opts).compile(store=store).invoke({"question": QUESTION})
    assert out["fallback"] is None                           # the PPR ran: facts survived the filter
    fusion = out["ppr"]["fusion"]
    assert {"confidence", "share", "concentration", "seeds", "agreement", "own", "dense"} <= set(fusion)
    assert fusion["share"] in (1.0, 0.5, 1 / 5)
    fixed = create_catrag_graph(town_kg, model="offline", store=store, offline_fact_threshold=0.0,
                                **opts).compile(store=store).invoke({"question": QUESTION})
    assert "fusion" not in fixed["ppr"]


def test_remindrag_and_autopruned_record_their_adaptive_fusion(town_kg):
    store = InMemoryStore()
    out = create_remindrag_graph(town_kg, model="offline", store=store, max_hops=2,
                                 fusion="adaptive").compile(store=store).invoke({"question": QUESTION})
    assert {"confidence", "share", "agreement", "found", "own", "dense"} <= set(out["fusion"])
    store = InMemoryStore()
    out = create_autopruned_graph(town_kg, model="offline", store=store, fine_m=4, extraction="offline",
                                  phrase_facts="always", memorize=False,
                                  fusion="adaptive").compile(store=store).invoke({"question": QUESTION})
    assert {"confidence", "share", "agreement", "coverage", "own", "dense"} <= set(out["fusion"])


@pytest.mark.parametrize("factory, extra", [(create_catrag_graph, {}), (create_remindrag_graph, {}),
                                            (create_autopruned_graph, {"extraction": "offline"})])
def test_thresholds_out_of_order_are_refused(town_kg, factory, extra):
    with pytest.raises(KgmemInputError, match="fusion_weak"):
        factory(town_kg, model="offline", fusion="adaptive", fusion_weak=0.9, fusion_strong=0.1, **extra)
