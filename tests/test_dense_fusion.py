"""Dense fusion (issue 17): interleaving (and reciprocal-rank fusion, which AutoPrunedRetriever
orders its runs by), each graph method's passage ranking merged with the dense ranking so that a
passage vector search ranks first is not lost to the walk, and the offline heuristics' grounding in
what the question names."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.graphs import catrag
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
from langgraph_kgmem.graphs.autopruned import scoring as autopruned_scoring
from langgraph_kgmem.graphs.catrag import create_catrag_graph
from langgraph_kgmem.graphs.common import content_words, dense_passages, fuse_with_dense, named_in
from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
from langgraph_kgmem.ranking import RRF_K, dense_led, fusion_depth, interleave, reciprocal_rank_fusion

# ------------------------------------------------------------------------------ the fusion itself


def test_rrf_score_is_the_sum_of_reciprocal_ranks():
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]]))
    assert fused["a"] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert fused["b"] == pytest.approx(1 / (RRF_K + 2))                  # absent from list 2: adds nothing
    assert fused["c"] == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))


def test_rrf_an_item_both_lists_rank_beats_the_top_of_one_list():
    # "x" tops list 1 only; "y" is 5th in both: consensus wins
    one = ["x", "p1", "p2", "p3", "y"]
    two = ["q1", "q2", "q3", "q4", "y"]
    order = [d for d, _ in reciprocal_rank_fusion([one, two])]
    assert order.index("y") < order.index("x")


def test_rrf_uses_ranks_only_and_is_symmetric_in_its_lists():
    a, b = ["a", "b", "c", "d"], ["d", "c", "b", "a"]
    ab = dict(reciprocal_rank_fusion([a, b]))
    ba = dict(reciprocal_rank_fusion([b, a]))
    assert ab == pytest.approx(ba)
    assert len({round(v, 12) for v in ab.values()}) == 2       # a=d, b=c: mirrored ranks tie


def test_rrf_ties_go_to_the_earlier_lists_rank_and_the_cut_is_deterministic():
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "a"]])
    assert [d for d, _ in fused] == ["a", "b"]                 # tie: a is first in list 1
    assert [d for d, _ in reciprocal_rank_fusion([["b", "a"], ["a", "b"]])] == ["b", "a"]
    assert reciprocal_rank_fusion([["a", "b", "c"], ["c", "b"]], 1) == reciprocal_rank_fusion([["a", "b", "c"], ["c", "b"]])[:1]
    assert reciprocal_rank_fusion([["a", "a", "b"]]) == reciprocal_rank_fusion([["a", "b"]])  # a repeat counts once
    assert reciprocal_rank_fusion([]) == [] and reciprocal_rank_fusion([[], []], 3) == []


def test_rrf_constant_must_be_positive():
    with pytest.raises(ValueError, match="rrf_k"):
        reciprocal_rank_fusion([["a"]], rrf_k=0)


def test_rrf_keeps_the_top_items_both_lists_agree_on():
    # random rankings of a 30-item pool whose top 3 are the same: the fusion's top 3 are those
    rng = np.random.default_rng(0)
    for _ in range(50):
        items = [f"d{i}" for i in range(30)]
        a = list(rng.permutation(items))
        b = a[:3] + list(rng.permutation(a[3:]))               # lists agree on their top 3
        fused = [d for d, _ in reciprocal_rank_fusion([a, b], 3)]
        assert fused == a[:3]


def test_interleave_takes_turns_best_untaken_first():
    assert interleave([["a", "b", "c"], ["b", "d", "e"]]) == [("a", 1.0), ("b", 0.5), ("c", 1 / 3), ("d", 0.25), ("e", 0.2)]
    assert [d for d, _ in interleave([["a", "b"], ["x", "y", "z"]])] == ["a", "x", "b", "y", "z"]  # a short list drops out
    assert interleave([["a", "b", "c"], ["b", "d"]], 2) == interleave([["a", "b", "c"], ["b", "d"]])[:2]
    assert interleave([["a", "a", "b"]]) == [("a", 1.0), ("b", 0.5)]                   # a repeat counts once
    assert interleave([]) == [] and interleave([[], []], 3) == [] and interleave([["a"]], 0) == []


def test_dense_led_opens_with_vector_search_then_takes_turns_own_first():
    # d1 opens (own's turn), d2 is dense's turn; then w1 / d3, and own's d2 is taken: w2
    assert [d for d, _ in dense_led(["w1", "d2", "w2"], ["d1", "d2", "d3"])] == ["d1", "d2", "w1", "d3", "w2"]
    assert [d for d, _ in dense_led(["w1", "w2"], ["d1", "d2"], 3)] == ["d1", "d2", "w1"]
    assert dense_led([], []) == [] and [d for d, _ in dense_led(["w"], [])] == ["w"]


def test_interleave_top_2m_holds_each_lists_top_m_whatever_the_other_says():
    # the guarantee behind "never worse than vector search": a method's ranking can add passages
    # to the top 2m but never push out dense's top m (and vice versa), for any two rankings
    rng = np.random.default_rng(1)
    for _ in range(200):
        pool = [f"d{i}" for i in range(int(rng.integers(1, 25)))]
        a = list(rng.permutation(pool))[:int(rng.integers(0, len(pool) + 1))]
        b = list(rng.permutation(pool))[:int(rng.integers(0, len(pool) + 1))]
        merged = [d for d, _ in interleave([a, b])]
        assert sorted(merged) == sorted(set(a) | set(b))
        for m in range(1, 8):
            top = set(merged[:2 * m])
            assert set(a[:m]) <= top and set(b[:m]) <= top


# ------------------------------------------------------------------------------ a corpus for the methods

# The question's facts all point into the "Zorblat" cluster (entities, relations, context edges);
# the passage that answers it has no entity at all (lower-case prose): no walk reaches it, and
# the dense ranking puts it first.
CLUSTER = [
    {"id": f"doc-z{i}", "title": f"Zorblat unit {i}",
     "text": f"Zorblat Corporation owns Unit{i} Holdings. Unit{i} Holdings employs Person{i} Smith. "
             f"Person{i} Smith lives in Town{i} Valley."}
    for i in range(8)
]
LONELY = {"id": "doc-soup",   # no title either: a title would become an entity of the passage
          "text": "the secret ingredient of the famous company soup recipe is saffron, said the cook."}
QUESTION = "What is the secret ingredient of the famous Zorblat Corporation soup recipe?"


@pytest.fixture
def soup_kg():
    g = KnowledgeGraph.in_memory(name="soup", embeddings="hash")
    g.add_documents(CLUSTER + [LONELY], model="offline")
    yield g
    g.close()


def _lonely_chunk(kg) -> str:
    return next(n.id for n in kg.nodes("chunk") if n.attrs.get("doc_id") == "doc-soup")


def test_the_corpus_puts_the_lonely_passage_first_for_vector_search(soup_kg):
    lonely = _lonely_chunk(soup_kg)
    assert dense_passages(soup_kg, QUESTION, 3)[0] == lonely
    # no entity, so no edge leads to it: a walk over the graph never collects it
    assert not [e for e, _ in soup_kg.neighbors(lonely, kinds=("context", "relation"))]


def test_fuse_with_dense_keeps_the_methods_passages_and_adds_the_dense_top(soup_kg):
    dense = dense_passages(soup_kg, QUESTION, 20)
    assert dense[0] == _lonely_chunk(soup_kg)
    walk = dense[-2:]                                          # two weak finds, in the walk's order
    fused = [c for c, _ in fuse_with_dense(soup_kg, QUESTION, walk, 5)]
    assert len(fused) == 5 and set(walk) <= set(fused)         # nothing the walk found is lost
    # vector search's best two, then the walk's finds and vector search's next in turns
    assert fused == [dense[0], dense[1], walk[0], dense[2], walk[1]]


def test_fuse_with_dense_puts_a_find_far_from_the_question_after_the_fused_top():
    g = KnowledgeGraph.in_memory(name="far", embeddings="hash")
    try:   # more passages than the fusion depth (120 for a top 5), so some rank beyond it
        g.add_documents([{"id": f"d{i}", "text": f"filler note number {i} on subject {i % 7}."} for i in range(130)]
                        + [LONELY], model="offline")
        dense = dense_passages(g, QUESTION, 200)
        assert len(dense) > fusion_depth(5)
        far, near = dense[-1], dense[3]
        fused = [c for c, _ in fuse_with_dense(g, QUESTION, [far, near], 5)]
        assert fused[:5] == [dense[0], dense[1], near, dense[2], dense[4]]   # the far find takes no turn
        assert fused[5:] == [far]                                            # but is kept, after them
        assert [c for c, _ in fuse_with_dense(g, QUESTION, [near], 3)] == [dense[0], dense[1], near]
    finally:
        g.close()


class _ScoredPassages:
    """A stand-in KG for ``dense_passages``: fixed passage scores."""

    def __init__(self, ids, scores):
        self.ids, self.scores = ids, np.asarray(scores, dtype=float)

    def similarity_scores(self, question, kinds):
        return self.ids, self.scores


def test_walk_fusion_opens_with_dense_top_two_and_keeps_every_find_for_any_walk():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        ids = [f"c{i}" for i in range(n)]
        kg = _ScoredPassages(ids, rng.random(n))
        dense = dense_passages(kg, "q", n)
        walk = [ids[i] for i in rng.choice(n, size=int(rng.integers(0, min(n, 12) + 1)), replace=False)]
        k = max(5, len(walk))
        fused = [c for c, _ in fuse_with_dense(kg, "q", walk, k)]
        assert fused[:2] == dense[:2]                         # R@2 is never below vector search's
        assert len(fused) == len(set(fused)) and set(walk) <= set(fused)   # every find kept, once
        near = [c for c in walk if c in dense[:fusion_depth(k)]]
        for m in range(1, (k - 1) // 2 + 1):                  # the top 2m+1 <= k: dense's top m+1, the walk's first m
            assert set(dense[:m + 1]) | set(near[:m]) <= set(fused[:2 * m + 1])


def test_run_fusion_opens_with_the_runs_of_the_dense_top_two_for_any_runs():
    rng = np.random.default_rng(11)
    for _ in range(300):
        pool = [f"c{i}" for i in range(int(rng.integers(2, 30)))]
        runs = [(0.0, 0, type("R", (), {"id": f"r{j}", "channel": "F", "links": [],
                                        "chunks": list(rng.choice(pool, size=int(rng.integers(1, 3))))})())
                for j in range(int(rng.integers(1, 40)))]
        dense = list(rng.permutation(pool))[:int(rng.integers(1, len(pool) + 1))]
        fused = list(autopruned_scoring.fuse_dense(runs, dense))
        pos = {c: i for i, c in enumerate(dense)}
        best = {}   # passage → the first run (fine order) whose best-placed passage it is
        for _, _, r in runs:
            placed = [c for c in r.chunks if c in pos]
            if placed:
                best.setdefault(min(placed, key=pos.get), r.id)
        assert set(fused) == {r.id for _, _, r in runs if any(c in pos for c in r.chunks)}   # far runs: no turn
        top = [best[c] for c in dense if c in best][:2]
        assert fused[:len(top)] == top                        # vector search's two best passages open it


def test_catrag_fusion_keeps_the_passage_only_vector_search_finds(soup_kg):
    store = InMemoryStore()
    lonely = _lonely_chunk(soup_kg)
    # passage_weight=0: the PPR seeded by the facts' entities alone, whose walk never reaches the
    # passage (HippoRAG 2's small dense reset would hold it at 5th of 9 in a corpus this small)
    common = {"model": "offline", "store": store, "offline_fact_threshold": 0.0, "passage_weight": 0.0}
    for opts in ({}, {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}):  # CatRAG, HippoRAG 2
        plain = create_catrag_graph(soup_kg, dense_fusion=False, **common, **opts).compile(store=store).invoke(
            {"question": QUESTION})
        fused = create_catrag_graph(soup_kg, **common, **opts).compile(store=store).invoke({"question": QUESTION})
        assert plain["fallback"] is None and fused["fallback"] is None  # the PPR ran (facts survived)
        assert lonely not in [e["id"] for e in plain["evidence"]]
        assert lonely in [e["id"] for e in fused["evidence"]]
        top = fused["passages"]
        assert all({"ppr", "dense", "score"} <= set(p) for p in top)
        assert [p["score"] for p in top] == sorted((p["score"] for p in top), reverse=True)


def test_catrag_fused_ranking_takes_ppr_and_dense_in_turns():
    idx = type("Idx", (), {})()
    idx.chunk_rows = np.array([3, 1, 2, 0])
    idx.chunk_ids = ["c3", "c1", "c2", "c0"]
    ppr = np.array([0.4, 0.3, 0.2, 0.1])                       # by row: c0 > c1 > c2 > c3
    dense = np.array([0.9, 0.1, 0.2, 0.3])                     # by chunk position: c3 > c0 > c2 > c1
    got = [p["id"] for p in catrag.fuse_dense(idx, ppr, dense, 4)]
    assert got == ["c0", "c3", "c1", "c2"]                    # PPR's best, dense's best, PPR's next, dense's next


def test_remindrag_fusion_fills_the_evidence_with_the_dense_top(soup_kg):
    lonely = _lonely_chunk(soup_kg)
    outs = {}
    for fusion in (False, True):
        store = InMemoryStore()   # a fresh edge memory each: the second walk must not replay the first
        app = create_remindrag_graph(soup_kg, model="offline", store=store, max_hops=2,
                                     dense_fusion=fusion).compile(store=store)
        outs[fusion] = app.invoke({"question": QUESTION})
    walk = [e["id"] for e in outs[False]["evidence"] if e["kind"] == "chunk"]
    fused = [e["id"] for e in outs[True]["evidence"] if e["kind"] == "chunk"]
    assert lonely not in walk and len(walk) < 5
    assert lonely in fused and len(fused) == 5
    assert set(walk) <= set(fused)                            # nothing the walk found is dropped
    assert outs[True]["path"] == outs[False]["path"]          # the walk itself is unchanged


FINE_M = 8


def test_autopruned_fusion_ranks_runs_of_the_dense_top_passage(soup_kg):
    lonely = _lonely_chunk(soup_kg)
    chunks = {}
    for fusion in (False, True):
        store = InMemoryStore()
        app = create_autopruned_graph(soup_kg, model="offline", store=store, fine_m=FINE_M, extraction="offline",
                                      phrase_facts="always", memorize=False, dense_fusion=fusion,
                                      show="triples").compile(store=store)   # the runs alone, no sentence_dense
        out = app.invoke({"question": QUESTION})
        chunks[fusion] = list(dict.fromkeys(c for e in out["evidence"] for c in e["chunks"]))  # passages, best first
    assert lonely not in chunks[False]
    assert lonely in chunks[True][:5]


def test_autopruned_runs_take_turns_a_passage_lifts_its_best_run_and_far_runs_follow():
    def run(rid, chunks, channel="F", links=()):
        return 0.0, 0, type("R", (), {"id": rid, "chunks": chunks, "channel": channel, "links": list(links)})()

    # fine order: a stored question (its answer a1 came from c7), r1..r5, another question whose
    # answer came from a passage vector search does not rank (c9); vector search ranks c1, c2, c5, c7
    book = type("Book", (), {"runs": {"a1": run("a1", ["c7"], "A")[2], "a2": run("a2", ["c9"], "A")[2]}})()
    scored = [run("q1", [], "Q", ["a1"]), run("r1", ["c2"]), run("r2", ["c5"]), run("r3", ["c1"]),
              run("r4", ["c1"]), run("r5", ["c9"]), run("q2", [], "Q", ["a2", "a-gone"])]
    assert autopruned_scoring.run_passages(book, scored[6][2]) == ["c9"]   # a question's passages: its answers'
    fused = autopruned_scoring.fuse_dense(scored, ["c1", "c2", "c5", "c7"], lambda r: autopruned_scoring.run_passages(book, r))
    # vector search's best passage c1 opens, through its best run r3; then turns: dense's next c2
    # (its best run r1), fine's r2; dense's c5 is r2's (taken) and c7 brings the question q1 (a
    # question takes no fine turn, so it waits for its answer's passage); r4 shares c1 but only
    # its fine turn lifts it; r5 and q2 come from a passage beyond the dense ranking: no turn
    assert list(fused) == ["r3", "r1", "r2", "q1", "r4"]
    assert [fused[r] for r in fused] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5])
    assert "r5" not in fused and "q2" not in fused


# ------------------------------------------------------------------------------ grounding in the question


def test_named_in_needs_every_content_word_of_the_name():
    words = content_words("Which company owns the Zorblat Corporation soup recipe?")
    assert named_in("Zorblat Corporation", words) and named_in("the Zorblat corporation", words)
    assert not named_in("Zorblat Holdings", words)       # one word of the name is not in the question
    assert not named_in("the", words) and not named_in("", words)   # no content word: names nothing


GROUNDING_DOCS = [
    {"id": "doc-a", "title": "Saffron fields", "text": "Quentin Marlowe grows saffron in Kozani."},
    {"id": "doc-b", "title": "Zorblat kitchen", "text": "Zorblat Corporation buys saffron from Kozani."},
]


def test_catrag_offline_filter_keeps_only_facts_about_what_the_question_names():
    g = KnowledgeGraph.in_memory(name="ground", embeddings="hash")
    try:
        g.add_documents(GROUNDING_DOCS, model="offline")
        store = InMemoryStore()
        app = create_catrag_graph(g, model="offline", store=store, offline_fact_threshold=-1.0).compile(store=store)
        out = app.invoke({"question": "Where does Zorblat Corporation get its spice?"})
        assert out["facts"] and out["fallback"] is None
        for f in out["facts"]:   # every kept fact has an entity the question names
            assert any(named_in(g.node(e).text, content_words("Where does Zorblat Corporation get its spice?"))
                       for e in (f["src"], f["dst"]))
        # a question naming nothing in the KG keeps no fact: vector search ranks the passages
        out = app.invoke({"question": "Which spice grows in fields?"})
        assert out["facts"] == [] and out["fallback"] == "dense"
    finally:
        g.close()


def test_remindrag_seeds_prefer_the_entities_the_question_names():
    g = KnowledgeGraph.in_memory(name="seeds", embeddings="hash")
    try:
        g.add_documents(GROUNDING_DOCS, model="offline")
        # the repeated word pulls both Zorblat entities nearer than Kozani, which alone is named in full
        question = "Which of the Zorblat Zorblat units buys saffron from Kozani?"
        near = [n.text for n, _ in g.nearest(question, 5, kinds=("entity",))]
        named = [t for t in near if named_in(t, content_words(question))]
        assert named and near[:len(named)] != named     # embedding order alone would not seed them first
        store = InMemoryStore()
        app = create_remindrag_graph(g, model="offline", store=store, seeds_k=len(named), max_hops=0)
        out = app.compile(store=store).invoke({"question": question})
        assert [g.node(s).text for s in out["seed_ids"]] == named
    finally:
        g.close()
