"""CatRAG / HippoRAG 2 (graphs/catrag/): every "Must hold" of issue 5, offline policies, errors."""

from __future__ import annotations

import doctest
import json
import sys

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs import catrag
from langgraph_kgmem.graphs.catrag import (PPR_EDGE_KINDS, create_catrag_graph, hub_mask, hub_mass, hub_mass_of,
                                           prepare_catrag_kg, score_multiplier)
from langgraph_kgmem.testing import ScriptedChatModel

OFF = {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}
Q1 = "Where was Marie Curie born?"
Q2 = "Which river flows into the Baltic Sea?"


def responder(*, keep=(1, 2), score=9, names=("Marie Curie",), summary="a short summary", log=None):
    """A scripted LLM answering each CatRAG decision by its step name."""

    def respond(messages, request):
        step = getattr(request, "step", None)
        if log is not None:
            log.append(step)
        if step == "filter_facts":
            return {"keep": list(keep)}
        if step == "anchor_entities":
            return {"names": list(names)}
        if step == "weight_edges":
            return {"scores": [{"neighbour": n["neighbour"], "score": score(n) if callable(score) else score}
                               for n in request.context["neighbours"]]}
        if step == "summarize_neighbour":
            return summary
        if step == "answer":
            return "Warsaw"
        raise AssertionError(f"unexpected step {step!r}")

    return respond


def run(kg, store, question=Q1, model="offline", **opts):
    app = create_catrag_graph(kg, model=model, store=store, **opts).compile(store=store)
    return app.invoke({"question": question})


def test_offline_catrag_output_contract(kg, store):
    out = run(kg, store, offline_fact_threshold=0.0)
    assert out["method"] == "catrag"
    assert out["answer"] and out["fallback"] is None
    assert 1 <= len(out["facts"]) <= 4
    assert all(e["kind"] == "chunk" for e in out["evidence"]) and len(out["evidence"]) <= 5
    assert out["usage"]["llm_calls"] == 0 and out["usage"]["offline_decisions"] >= 3
    assert set(out["edge_weights"]) >= {"pruned", "weak", "strong", "key", "stage1_weak", "boosted"}
    assert out["edge_weights"]["pruned"] == 0  # offline never prunes
    assert 0.0 <= out["ppr"]["hub_mass"] <= 1.0 and len(out["ppr"]["top_nodes"]) == 10
    scores = [p["score"] for p in out["passages"]]
    assert scores == sorted(scores, reverse=True)
    json.dumps(out)  # JSON-native state only


def test_switches_off_is_hipporag2_and_graph_shape(kg, store):
    builder = create_catrag_graph(kg, model="offline", **OFF)
    assert set(builder.nodes) == {"retrieve_facts", "filter_facts", "rank_passages", "run_ppr", "answer"}
    full = create_catrag_graph(kg, model="offline")
    assert set(full.nodes) == set(builder.nodes) | {"anchor_entities", "weight_edges", "boost_key_facts"}
    noweight = create_catrag_graph(kg, model="offline", dynamic_weighting=False)
    assert "weight_edges" not in noweight.nodes and "anchor_entities" in noweight.nodes
    out = run(kg, store, offline_fact_threshold=0.0, **OFF)
    assert out["method"] == "hipporag2" and out["anchors"] == [] and out["ppr"]["overrides"] == 0


def test_anchor_mass_uses_the_anchors_own_passage_count(kg, store):
    idx = catrag.kg_index(kg)
    out = run(kg, store, model=ScriptedChatModel(responder=responder(names=("Marie Curie", "Paris"))),
              epsilon=0.3, dynamic_weighting=False, key_fact_boost=False)
    anchors = {a["text"]: a for a in out["anchors"]}
    assert set(anchors) == {"Marie Curie", "Paris"}
    for a in anchors.values():
        own = idx.passage_count[a["id"]]
        assert a["passages"] == own and a["weight"] == pytest.approx(0.3 / own)
    # the two entities appear in different numbers of passages: a shared count would be wrong for one
    assert anchors["Marie Curie"]["passages"] != anchors["Paris"]["passages"]


def test_score_tiers():
    assert score_multiplier(0) == (0.0, "pruned") and score_multiplier(3) == (0.0, "pruned")
    assert score_multiplier(4) == (pytest.approx(0.2), "weak")
    assert score_multiplier(6) == (pytest.approx(0.3), "weak")
    assert score_multiplier(7) == (pytest.approx(2.0), "strong")
    assert score_multiplier(9) == (pytest.approx(3.0), "strong")
    assert score_multiplier(10) == (5.0, "key")
    for junk in ("very relevant", None, 11, -1, float("nan"), [7]):
        assert score_multiplier(junk) == (pytest.approx(0.2), "weak"), junk


def test_unparsable_score_counts_as_4(kg, store):
    model = ScriptedChatModel(responder=responder(score="highly relevant!"))
    out = run(kg, store, model=model, anchoring=False, key_fact_boost=False)
    tiers = out["edge_weights"]
    assert tiers["weak"] > 0 and tiers["strong"] == tiers["pruned"] == tiers["key"] == 0
    assert not out["usage"]["fallbacks"]


def test_malformed_scoring_reply_falls_back_to_4_and_is_recorded(kg, store):
    def respond(messages, request):
        if request is not None and request.step == "weight_edges":
            return "I would follow the second one, probably."
        return responder()(messages, request)

    out = run(kg, store, model=ScriptedChatModel(responder=respond), anchoring=False, key_fact_boost=False)
    tiers = out["edge_weights"]
    assert tiers["weak"] > 0 and tiers["strong"] == 0 and tiers["pruned"] == 0
    assert {f["step"] for f in out["usage"]["fallbacks"]} == {"weight_edges"}


def test_weights_never_leak_into_the_graph_or_the_next_query(kg, store, sample_docs):
    snap = kg.snapshot(PPR_EDGE_KINDS)
    data_before = snap.w.data.copy(), snap.wt.data.copy(), snap.out_weight.copy()
    weights_before = {e.id: e.weight for e in kg.edges()}
    # query 1 prunes every scored edge (score 1) and boosts key-fact passages
    run(kg, store, Q1, model=ScriptedChatModel(responder=responder(score=1)))
    second = run(kg, store, Q2, model=ScriptedChatModel(responder=responder(score=8)))
    assert kg.snapshot(PPR_EDGE_KINDS) is snap
    assert np.array_equal(snap.w.data, data_before[0]) and np.array_equal(snap.wt.data, data_before[1])
    assert np.array_equal(snap.out_weight, data_before[2])
    assert {e.id: e.weight for e in kg.edges()} == weights_before
    # the same second query on a fresh KG and a fresh store gives the same ranking and scores
    fresh = KnowledgeGraph.in_memory(name="test")
    fresh.add_documents(sample_docs, model="offline")
    from langgraph.store.memory import InMemoryStore

    alone = run(fresh, InMemoryStore(), Q2, model=ScriptedChatModel(responder=responder(score=8)))
    # (the fresh KG is embedded SQLite; a PostgreSQL KG's sums may differ in the last float digit)
    for got, want in ((second["passages"], alone["passages"]),
                      ([{"id": i, "ppr": v} for i, v in second["ppr"]["top_nodes"]],
                       [{"id": i, "ppr": v} for i, v in alone["ppr"]["top_nodes"]])):
        assert [p["id"] for p in got] == [p["id"] for p in want]
        numbers = [[v for k, v in sorted(p.items()) if k != "id"] for p in want]
        assert [[v for k, v in sorted(p.items()) if k != "id"] for p in got] == \
            [pytest.approx(n, rel=1e-6, abs=1e-7) for n in numbers]


def test_pruning_changes_the_walk(kg, store):
    strong = run(kg, store, model=ScriptedChatModel(responder=responder(score=10)), anchoring=False,
                 key_fact_boost=False)
    pruned = run(kg, store, model=ScriptedChatModel(responder=responder(score=0)), anchoring=False,
                 key_fact_boost=False)
    assert pruned["edge_weights"]["pruned"] > 0 and strong["edge_weights"]["key"] > 0
    assert strong["ppr"]["top_nodes"] != pruned["ppr"]["top_nodes"]


def test_summaries_generated_once_and_cached_in_the_store(kg, store):
    log: list[str] = []
    model = ScriptedChatModel(responder=responder(log=log))
    first = run(kg, store, model=model, tau=0, anchoring=False, key_fact_boost=False)
    n_summaries = log.count("summarize_neighbour")
    assert n_summaries > 0
    assert first["usage"]["by_step"]["summarize_neighbour"]["llm_calls"] == n_summaries
    cached = store.search(("kgmem", kg.name, "summaries"), limit=100)
    assert len(cached) == n_summaries and all(it.value["summary"] == "a short summary" for it in cached)
    # a second query (new app, same store) asks for no summary again; the prompt shows the cached one
    log.clear()
    second = run(kg, store, model=model, tau=0, anchoring=False, key_fact_boost=False)
    assert "summarize_neighbour" not in log and "summarize_neighbour" not in second["usage"]["by_step"]
    scoring_prompts = [c["messages"][-1].content for c in model.calls
                       if c["request"] is not None and c["request"].step == "weight_edges"]
    assert any("a short summary" in p for p in scoring_prompts)


def test_no_summary_when_neighbour_has_few_facts(kg, store):
    log: list[str] = []
    run(kg, store, model=ScriptedChatModel(responder=responder(log=log)), tau=1000, anchoring=False,
        key_fact_boost=False)
    assert "summarize_neighbour" not in log and "weight_edges" in log


def test_no_surviving_fact_falls_back_to_dense(kg, store):
    out = run(kg, store, model=ScriptedChatModel(responder=responder(keep=())))
    assert out["fallback"] == "dense" and out["facts"] == [] and out["ppr"] == {}
    assert out["usage"]["llm_calls"] == 2  # the filter, then straight to the answer
    idx = catrag.kg_index(kg)
    ids, mat = kg.vector_matrix(("chunk",))
    dense = mat @ kg.embed_query(Q1)
    assert out["passages"][0]["id"] == ids[int(np.argmax(dense))] and ids[int(np.argmax(dense))] in idx.chunk_ids
    offline = run(kg, store, offline_fact_threshold=1.01)
    assert offline["fallback"] == "dense" and offline["evidence"]


def test_ppr_runs_on_the_cached_csr_snapshot_without_networkx(kg, store, monkeypatch):
    prepare_catrag_kg(kg)
    snap = kg.snapshot(PPR_EDGE_KINDS)
    builds = []
    from langgraph_kgmem.kg import graph as kg_graph

    real = kg_graph.ppr_scores

    def spy(s, *a, **k):
        builds.append(s)
        return real(s, *a, **k)

    monkeypatch.setattr(kg_graph, "ppr_scores", spy)   # CatRAG's PPR goes through kg.ppr_scores
    monkeypatch.setitem(sys.modules, "networkx", None)  # any `import networkx` now fails
    run(kg, store, Q1, offline_fact_threshold=0.0)
    run(kg, store, Q2, offline_fact_threshold=0.0)
    assert len(builds) == 2 and all(s is snap for s in builds)


def test_the_kg_index_is_built_with_the_graph_not_by_its_first_question(kg, store, monkeypatch):
    """The O(KG) index (snapshot, passage rows, hubs) is the graph's build work: a served graph
    builds it at start-up, so its first question costs what a later one does."""
    from langgraph_kgmem.graphs.catrag import index as catrag_index

    built = []
    real = catrag_index.CatragIndex
    monkeypatch.setattr(catrag_index, "CatragIndex", lambda *a: built.append(a[0]) or real(*a))
    app = create_catrag_graph(kg, model="offline", store=store).compile(store=store)
    assert built == [kg.version]
    app.invoke({"question": Q1})
    app.invoke({"question": Q2})
    assert built == [kg.version]
    kg.add_documents([{"id": "oslo", "text": "Oslo is the capital of Norway."}], model="offline")
    app.invoke({"question": Q1})                       # a write: the next question rebuilds it, once
    assert built[1:] == [kg.version]


def test_key_fact_boost_lifts_the_fact_passage(kg, store):
    model = ScriptedChatModel(responder=responder(keep=(1,)))
    plain = run(kg, store, model=model, **OFF)
    boosted = run(kg, store, model=model, anchoring=False, dynamic_weighting=False)
    assert boosted["edge_weights"]["boosted"] > 0
    chunk = boosted["facts"][0]["chunks"][0]
    # the PPR mass share (with the default dense fusion each passage carries its mass as "ppr")
    share = lambda out: {p["id"]: p["ppr"] for p in out["passages"]}[chunk] / sum(p["ppr"] for p in out["passages"])  # noqa: E731
    assert share(boosted) > share(plain)


def test_llm_calls_are_counted_per_step(kg, store):
    model = ScriptedChatModel(responder=responder())
    out = run(kg, store, model=model, tau=1000)
    steps = out["usage"]["by_step"]
    assert steps["filter_facts"]["llm_calls"] == 1 and steps["anchor_entities"]["llm_calls"] == 1
    assert 1 <= steps["weight_edges"]["llm_calls"] <= 5 and steps["answer"]["llm_calls"] == 1
    assert out["usage"]["llm_calls"] == len(model.calls) and out["answer"] == "Warsaw"


def test_model_can_be_swapped_per_run(kg, store):
    app = create_catrag_graph(kg, model="offline", store=store).compile(store=store)
    model = ScriptedChatModel(responder=responder())
    out = app.invoke({"question": Q1}, context={"model": model})
    assert out["usage"]["llm_calls"] == len(model.calls) > 0


def test_stage_one_keeps_k_edge_neighbours(kg, store):
    seen = []

    def score(n):
        seen.append(n["id"])
        return 8

    out = run(kg, store, model=ScriptedChatModel(responder=responder(score=score)), k_edge=1, anchoring=False,
              key_fact_boost=False)
    assert out["edge_weights"]["stage1_weak"] > 0
    assert out["edge_weights"]["strong"] == out["usage"]["by_step"]["weight_edges"]["llm_calls"]


def test_prepare_is_idempotent_and_adds_synonyms():
    g = KnowledgeGraph.in_memory(name="syn")
    g.add_documents([{"title": "Marie Curie", "text": "Marie Curie met Marie Curie Sklodowska in Paris."}],
                    model="offline")
    prepare_catrag_kg(g, threshold=0.3)
    n_syn = len(g.edges("synonym"))
    version = g.version
    assert prepare_catrag_kg(g, threshold=0.3) == 0 and g.version == version
    assert all(e.weight == pytest.approx(2.0 * e.attrs["similarity"]) for e in g.edges("synonym"))
    assert n_syn > 0  # "Marie Curie" ~ "Marie Curie Sklodowska"


def test_hub_mass_helpers(kg):
    snap = kg.snapshot(PPR_EDGE_KINDS)
    hubs = hub_mask(snap)
    assert hubs.sum() == 1 and snap.kinds[hubs][0] == "entity"
    hub_id = snap.node_ids[int(np.flatnonzero(hubs)[0])]
    scores = np.zeros(snap.n)
    scores[hubs] = 0.4
    assert hub_mass(scores, hubs) == pytest.approx(0.4)
    assert hub_mass_of(kg, {hub_id: 0.25}) == pytest.approx(0.25)
    assert hub_mass_of(kg, [("chk-none", 0.9)]) == 0.0


@pytest.mark.parametrize("opt, value, match", [
    ("damping", 1.0, "damping"), ("top_facts", 0, "top_facts"), ("epsilon", -0.1, "epsilon"),
    ("k_edge", 2.5, "k_edge"), ("beta", float("inf"), "beta"), ("synonym_threshold", 0.0, "synonym_threshold"),
])
def test_bad_options_are_named(kg, opt, value, match):
    with pytest.raises(KgmemInputError, match=match):
        create_catrag_graph(kg, model="offline", **{opt: value})


def test_rank_depth_must_cover_top_passages(kg):
    with pytest.raises(KgmemInputError, match="rank_depth"):
        create_catrag_graph(kg, model="offline", top_passages=10, rank_depth=5)


def test_docstring_example_runs():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for t in finder.find(create_catrag_graph, "create_catrag_graph", globs={"create_catrag_graph": create_catrag_graph}):
        runner.run(t)
    assert runner.failures == 0 and runner.tries > 0


def test_independent_llm_calls_of_the_weighting_step_run_concurrently(kg, store):
    """Summaries and per-seed scores are independent calls: with llm_concurrency > 1 they overlap
    (latency of the slowest, not the sum); the result and the usage are the same as one by one."""
    import threading
    import time

    from langgraph.store.memory import InMemoryStore

    def overlapping():
        state = {"active": 0, "peak": 0}
        lock = threading.Lock()
        inner = responder()

        def respond(messages, request):
            with lock:
                state["active"] += 1
                state["peak"] = max(state["peak"], state["active"])
            time.sleep(0.05)  # the 'network': concurrent calls overlap here
            with lock:
                state["active"] -= 1
            return inner(messages, request)

        return respond, state

    outs, peaks = {}, {}
    for conc in (1, 4):
        respond, state = overlapping()
        outs[conc] = run(kg, InMemoryStore(), model=ScriptedChatModel(responder=respond), tau=0, n_seed=5,
                         llm_concurrency=conc)
        peaks[conc] = state["peak"]
    assert peaks[1] == 1 and peaks[4] >= 2
    assert outs[4]["edge_weights"] == outs[1]["edge_weights"] and outs[4]["passages"] == outs[1]["passages"]
    for key in ("llm_calls", "prompt_tokens", "completion_tokens"):
        assert outs[4]["usage"][key] == outs[1]["usage"][key]
    with pytest.raises(KgmemInputError, match="llm_concurrency"):
        create_catrag_graph(kg, model="offline", llm_concurrency=0)


def test_relation_edges_stored_without_a_fact_vector_are_ranked_by_their_fact_text():
    """A graph loaded with ``add_edges(embed_facts=False)`` (``load_grbench``) beside documents
    has relation edges without fact vectors: Stage I embeds their fact text instead of failing."""
    from langgraph_kgmem.agent_tools.graph_env import load_grbench
    from langgraph_kgmem.graphs.catrag.nodes import fact_vectors
    from langgraph_kgmem.kg.types import entity_id

    kg = KnowledgeGraph.in_memory(name="books", embeddings="hash")
    try:
        kg.add_documents([{"id": "d1", "text": "Ada Quill wrote the novel Night Letters in Dublin."}], model="offline")
        ada = entity_id("Ada Quill")
        assert kg.node(ada) is not None
        load_grbench(kg, {"person": {ada: {"features": {"name": "Ada Quill"}, "neighbors": {
                                           "married to": ["b"], "works at": ["c"]}},
                                     "b": {"features": {"name": "Bram Stoker"}, "neighbors": {}}},
                          "org": {"c": {"features": {"name": "Acme Press"}, "neighbors": {}}}})
        edges = [e for e, n in kg.neighbors(ada, kinds=("relation",)) if n.id in ("b", "c")]
        assert len(edges) == 2 and not any(kg.has_vectors([e.id for e in edges], space="facts"))
        vecs = fact_vectors(kg, edges)
        want = kg.embed_texts([kg.fact_text(e) for e in edges], short=True)
        assert np.allclose(vecs, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-6)
        married = next(i for i, e in enumerate(edges) if e.text == "married to")
        assert int(np.argmax(vecs @ kg.embed_query("Who is Ada Quill married to?"))) == married
        out = create_catrag_graph(kg, model="offline", k_edge=1, anchoring=False).compile().invoke(
            {"question": "Who is Ada Quill married to?"})
        assert out["edge_weights"]["stage1_weak"] >= 1
    finally:
        kg.close()
