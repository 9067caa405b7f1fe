"""ReMindRAG: closed-form memory updates, replay, caps, id validation, memory that persists and pays off."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import ConfigurationError, KgmemInputError
from langgraph_kgmem.graphs.remindrag import (
    create_remindrag_graph,
    delta,
    effective_edges,
    enhance,
    hop_distances,
    penalize,
    replay_weights,
)
from langgraph_kgmem.memory import EdgeMemory
from langgraph_kgmem.testing import ScriptedChatModel

REPO = Path(__file__).resolve().parents[1]
Q_RIVER = "Which river flows through the capital of Poland?"


def run(app, question, thread="t"):
    return app.invoke({"question": question}, {"configurable": {"thread_id": thread}})


def chunk_titled(kg, title):
    return next(n.id for n in kg.nodes("chunk") if n.attrs.get("title") == title)


def targeted(kg, targets, answer="the answer"):
    """A competent scripted reader that knows which passages answer the question."""
    targets = list(targets)
    dist = hop_distances(kg, targets)

    def respond(messages, request):
        if request is None or request.schema is None:
            return answer
        ctx = request.context
        if request.step == "check_sufficiency":
            return {"sufficient": set(targets) <= set(ctx["evidence_ids"])}
        if request.step == "traverse_step":
            def best(ids):
                return min((dist.get(i, 99), i) for i in ids) if ids else (999, "")
            fwd = best(ctx["forward"])
            back = min(((best(ctx["frontier"][u])[0], u) for u in ctx["backward"]), default=(999, ""))
            if fwd[0] <= back[0]:
                return {"direction": "forward", "node_id": fwd[1]}
            return {"direction": "backward", "node_id": back[1]}
        if request.step == "mark_useful":
            return {"useful_ids": [c for c in ctx["candidates"] if c in targets]}
        raise AssertionError(f"unexpected step {request.step}")

    return respond


# ------------------------------------------------------------------------------ closed-form updates


def test_delta_is_cosine_step_and_zero_from_norm_one():
    assert delta(0.0) == pytest.approx(2 / math.pi)
    assert delta(0.5) == pytest.approx((2 / math.pi) * math.cos(math.pi / 4))
    assert delta(1.0) == 0.0
    assert delta(1.7) == 0.0
    assert np.all(np.diff(delta(np.linspace(0, 1, 50))) < 0)  # monotone decreasing on [0, 1]


def test_enhance_moves_toward_query_with_step_delta_of_norm():
    rng = np.random.default_rng(0)
    q = rng.normal(size=32)
    qh = q / np.linalg.norm(q)
    assert np.allclose(enhance(np.zeros(32), q), (2 / math.pi) * qh)  # fast wake-up from zero
    v = 0.3 * rng.normal(size=32) / math.sqrt(32)
    new = enhance(v, q)
    assert np.allclose(new - v, delta(np.linalg.norm(v)) * qh)
    cos = lambda a: a @ qh / np.linalg.norm(a)  # noqa: E731
    assert cos(new) > cos(v)
    big = 1.2 * qh
    assert np.array_equal(enhance(big, q), big)  # δ = 0 at norm ≥ 1


def test_penalize_shrinks_only_the_query_component():
    rng = np.random.default_rng(1)
    q = rng.normal(size=32)
    qh = q / np.linalg.norm(q)
    v = 0.5 * qh + 0.2 * rng.normal(size=32) / math.sqrt(32)
    p = v @ qh
    new = penalize(v, q)
    orth_before, orth_after = v - p * qh, new - (new @ qh) * qh
    assert np.allclose(orth_before, orth_after)  # orthogonal part untouched
    assert 0 < new @ qh < p  # projection shrinks, keeps its sign
    assert new @ qh == pytest.approx(p * (1 - delta(abs(p))))
    assert np.array_equal(penalize(np.zeros(32), q), np.zeros(32))  # nothing to forget
    # the public code's bug (subtracting a scalar from every component) would move orthogonal parts too
    assert not np.allclose(new, v - delta(abs(p)) * p)


def test_repeated_updates_converge_with_norm_at_most_one():
    rng = np.random.default_rng(2)
    base = rng.normal(size=16)
    v = np.zeros(16)
    norms = []
    for i in range(300):
        q = base + 0.5 * rng.normal(size=16)
        v = enhance(v, q) if i % 4 else penalize(v, q)
        norms.append(np.linalg.norm(v))
    assert max(norms) <= 1 + 1e-9
    w = np.zeros(16)
    for _ in range(50):
        w = enhance(w, base)
    assert np.linalg.norm(w) == pytest.approx(1.0, abs=1e-3)
    assert np.allclose(w / np.linalg.norm(w), base / np.linalg.norm(base))


def test_replay_weight_formula_and_zero_memory_stays_below_lambda():
    q = np.array([1.0, 0.0, 0.0])
    cos_ab = np.array([1.0, 0.5, -0.2])
    mem = np.array([[0.0, 0.0, 0.0], [0.8, 0.1, 0.0], [0.3, 0.0, 0.9]])
    w = replay_weights(cos_ab, mem, q, alpha=0.1)
    assert np.allclose(w, 0.1 * cos_ab + 0.9 * mem[:, 0])
    assert w[0] <= 0.1 < 0.55  # zero memory never passes the default λ


def test_effective_edges_are_paths_from_seeds_to_useful_nodes():
    adj = {"s": [("a", "e1"), ("x", "e4")], "a": [("s", "e1"), ("b", "e2")], "b": [("a", "e2"), ("c", "e3")],
           "c": [("b", "e3")], "x": [("s", "e4")]}
    assert effective_edges(adj, ["s"], ["b"]) == ["e2", "e1"]
    assert effective_edges(adj, ["s"], ["zzz"]) == []


# ------------------------------------------------------------------------------ replay


def test_replay_is_a_noop_on_a_fresh_kg(kg, store):
    app = create_remindrag_graph(kg, model="offline", store=store).compile()
    out = run(app, Q_RIVER)
    assert out["replayed"] == {"nodes": [], "edges": []}
    assert out["path"], "a fresh KG must fall through to the traversal loop"
    assert out["memory_updates"]["enhanced"] > 0


def test_replay_follows_only_edges_above_lambda(kg, store):
    q = kg.embed_query(Q_RIVER)
    app = create_remindrag_graph(kg, model="offline", store=store, max_hops=0).compile()
    seeds = run(app, Q_RIVER)["seed_ids"]
    seed = seeds[0]
    edge, nb = next((e, n) for e, n in kg.neighbors(seed, kinds=("context",)))
    cos_ab = float((kg.vectors([seed]) @ kg.vectors([nb.id]).T)[0, 0])
    alpha, lam = 0.1, 0.55
    need = (lam - alpha * cos_ab) / (1 - alpha)  # q̂·v that makes w == λ exactly
    mem = EdgeMemory(store, kg.name, len(q))
    mem.put_many({edge.id: (need - 0.01) * q})
    out = run(app, Q_RIVER, "below")
    assert nb.id not in out["replayed"]["nodes"]
    mem.put_many({edge.id: (need + 0.01) * q})
    out = run(app, Q_RIVER, "above")
    assert nb.id in out["replayed"]["nodes"]
    followed = {e["edge"]: e for e in out["replayed"]["edges"]}
    assert followed[edge.id]["weight"] > lam
    assert out["path"] == []  # max_hops=0: no traversal at all


# ------------------------------------------------------------------------------ caps and validation


def test_caps_stop_the_walk_backward_moves_included(kg, store):
    moves = iter(range(1000))

    def restless(messages, request):
        if request is None:
            return "no answer"
        if request.step == "check_sufficiency":
            return {"sufficient": False}
        if request.step == "traverse_step":
            ctx = request.context
            if ctx["backward"] and next(moves) % 2 == 0:  # bounce back whenever possible
                return {"direction": "backward", "node_id": ctx["backward"][0]}
            if ctx["forward"]:
                return {"direction": "forward", "node_id": ctx["forward"][0]}
            return {"direction": "backward", "node_id": ctx["backward"][0]}
        return {"useful_ids": []}

    model = ScriptedChatModel(responder=restless)
    out = run(create_remindrag_graph(kg, model=model, store=store, max_hops=4).compile(), Q_RIVER)
    assert len(out["path"]) == 4
    assert any(h["direction"] == "backward" for h in out["path"])
    assert out["stop_reason"] == "max_hops"
    steps = [c["request"].step for c in model.calls]
    assert steps.count("traverse_step") == 4
    # S is unchanged after a backward move: the sufficiency question is not asked again
    for call, nxt in zip(model.calls, model.calls[1:]):
        if call["request"].step == "traverse_step" and '"backward"' in str(call["reply"]):
            assert nxt["request"] is None or nxt["request"].step != "check_sufficiency"
    # the total step cap binds first when it is smaller
    model2 = ScriptedChatModel(responder=restless)
    out2 = run(create_remindrag_graph(kg, model=model2, store=store, max_hops=10, max_steps=3).compile(), Q_RIVER, "2")
    assert len(out2["path"]) <= 2 and out2["stop_reason"] == "max_steps"


def test_invented_node_ids_are_rejected_reasked_then_fall_back(kg, store):
    def liar(messages, request):
        if request is None:
            return "no answer"
        if request.step == "check_sufficiency":
            return {"sufficient": False}
        if request.step == "traverse_step":
            return {"direction": "forward", "node_id": "ent-0000invented"}
        if request.step == "answer":   # a reply the evidence holds: the answer step keeps it
            return "no answer"
        return {"useful_ids": ["chk-invented"]}

    model = ScriptedChatModel(responder=liar)
    out = run(create_remindrag_graph(kg, model=model, store=store, max_hops=1).compile(), Q_RIVER)
    trav = [c for c in model.calls if c["request"] and c["request"].step == "traverse_step"]
    assert [c["request"].attempt for c in trav] == [0, 1]  # asked, then re-asked once
    assert "not one of the allowed ids" in trav[1]["messages"][-1].content
    hop = out["path"][0]
    assert hop["decided_by"] == "fallback"
    assert hop["to"] in trav[0]["request"].context["forward"]
    steps = {f["step"] for f in out["usage"]["fallbacks"]}
    assert steps == {"traverse_step", "mark_useful"}


def test_a_corrected_answer_on_the_retry_is_used(kg, store):
    tries = {"n": 0}

    def second_time_right(messages, request):
        if request is None:
            return "no answer"
        if request.step == "check_sufficiency":
            return {"sufficient": False}
        if request.step == "traverse_step":
            tries["n"] += 1
            if tries["n"] == 1:
                return {"direction": "forward", "node_id": "made-up"}
            return {"direction": "forward", "node_id": request.context["forward"][-1]}
        if request.step == "answer":   # a reply the evidence holds: the answer step keeps it
            return "no answer"
        return {"useful_ids": []}

    model = ScriptedChatModel(responder=second_time_right)
    out = run(create_remindrag_graph(kg, model=model, store=store, max_hops=1).compile(), Q_RIVER)
    assert out["path"][0]["decided_by"] == "llm"
    assert not out["usage"]["fallbacks"]


def test_options_are_validated_at_build_time(kg):
    with pytest.raises(KgmemInputError, match="seeds_k"):
        create_remindrag_graph(kg, model="offline", seeds_k=0)
    with pytest.raises(KgmemInputError, match="alpha"):
        create_remindrag_graph(kg, model="offline", alpha=1.5)
    with pytest.raises(KgmemInputError, match="max_hops"):
        create_remindrag_graph(kg, model="offline", max_hops=-1)
    with pytest.raises(KgmemInputError, match="max_steps"):
        create_remindrag_graph(kg, model="offline", max_steps=0)
    with pytest.raises(KgmemInputError, match="synonym_threshold"):
        create_remindrag_graph(kg, model="offline", synonym_threshold=2.0)


def test_without_a_store_the_error_says_how_to_provide_one(kg):
    app = create_remindrag_graph(kg, model="offline").compile()
    with pytest.raises(ConfigurationError, match="store"):
        run(app, Q_RIVER)


def test_second_identical_question_needs_fewer_llm_calls(kg, store):
    targets = [chunk_titled(kg, "Warsaw"), chunk_titled(kg, "Vistula")]
    model = ScriptedChatModel(responder=targeted(kg, targets, answer="Vistula"))
    app = create_remindrag_graph(kg, model=model, store=store).compile()
    first = run(app, Q_RIVER, "1")
    second = run(app, Q_RIVER, "2")
    assert set(targets) <= {e["id"] for e in first["evidence"]}
    assert first["memory_updates"]["enhanced"] >= 2
    assert second["usage"]["llm_calls"] < first["usage"]["llm_calls"]
    assert second["usage"]["prompt_tokens"] < first["usage"]["prompt_tokens"]
    assert second["path"] == [] and set(targets) <= set(second["replayed"]["nodes"])
    assert set(targets) <= {e["id"] for e in second["evidence"]}
    assert second["memory_updates"]["enhanced"] == 0  # no traversal: nothing to memorize
    assert [c["request"].step if c["request"] else "answer" for c in model.calls[-2:]] == ["check_sufficiency", "answer"]


def test_insufficient_replay_falls_back_to_the_loop_and_penalises_misleading_edges(kg, store):
    qa, qb = "Where was Marie Curie born?", "Where was Marie Curie born and raised?"
    curie, warsaw = chunk_titled(kg, "Marie Curie"), chunk_titled(kg, "Warsaw")
    opts = dict(store=store, lam=0.45)
    run(create_remindrag_graph(kg, model=ScriptedChatModel(responder=targeted(kg, [curie])), **opts).compile(), qa)
    model_b = ScriptedChatModel(responder=targeted(kg, [warsaw]))
    out = run(create_remindrag_graph(kg, model=model_b, **opts).compile(), qb, "b")
    assert curie in out["replayed"]["nodes"], "B's replay should supply what A memorised"
    assert out["path"], "judged insufficient: the LLM loop must continue"
    assert warsaw in {e["id"] for e in out["evidence"]}
    misleading = [e["edge"] for e in out["replayed"]["edges"] if e["to"] == curie]
    assert misleading and set(misleading) <= set(out["memory_updates"]["penalised_ids"])
    qb_vec = kg.embed_query(qb)
    before = {e["edge"]: e["weight"] for e in out["replayed"]["edges"]}
    mem = EdgeMemory(store, kg.name, len(qb_vec))
    for eid in misleading:
        edge = kg.edge(eid)
        cos_ab = float((kg.vectors([edge.src]) @ kg.vectors([edge.dst]).T)[0, 0])
        after = float(replay_weights(np.array([cos_ab]), mem.many([eid]), qb_vec, 0.1)[0])
        assert after < before[eid]


# ------------------------------------------------------------------------------ offline and persistence


def test_offline_runs_end_to_end_without_llm(kg, store):
    out = run(create_remindrag_graph(kg, model="offline", store=store).compile(), Q_RIVER)
    assert out["method"] == "remindrag"
    assert out["answer"] and out["answer"] != "no answer"
    assert out["evidence"] and all({"id", "kind", "text"} <= set(e) for e in out["evidence"])
    assert out["usage"]["llm_calls"] == 0 and out["usage"]["offline_decisions"] > 0
    assert not out["usage"]["fallbacks"]
    assert all(h["direction"] in ("forward", "backward") for h in out["path"])
    again = run(create_remindrag_graph(kg, model="offline", store=store).compile(), Q_RIVER, "2")
    assert again["replayed"]["nodes"] and again["usage"]["offline_decisions"] < out["usage"]["offline_decisions"]


def test_a_walk_reads_each_edge_memory_once_and_the_next_walk_reads_it_again(kg):
    """The frontier is every open node's edges at every step: on a hub that is thousands of
    edges, read once a walk rather than once a step; a new walk reads the memory as it is then."""
    from collections import Counter

    from langgraph.store.base import GetOp
    from langgraph.store.memory import InMemoryStore

    reads = Counter()

    class Spy(InMemoryStore):
        def batch(self, ops):
            ops = list(ops)
            reads.update(op.key for op in ops if isinstance(op, GetOp) and op.namespace[-1] == "edge_memory")
            return super().batch(ops)

    store = Spy()
    app = create_remindrag_graph(kg, model="offline", store=store, max_hops=6, replay=False).compile()
    out = run(app, Q_RIVER, "walk-1")
    assert len(out["path"]) >= 3 and reads
    # the first step's frontier, the last update's read-modify-write: at most twice per walk
    assert max(reads.values()) <= 2
    first = dict(reads)
    run(app, Q_RIVER, "walk-2")
    assert all(reads[e] > n for e, n in first.items() if n == 1)   # read again by the new walk


def test_a_walk_ranks_each_nodes_neighbours_once(kg, monkeypatch):
    """A hub's neighbours are scored and sorted when the walk first reaches it, not again at
    every later step (S only grows; a neighbour's rank does not depend on S)."""
    from collections import Counter

    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.remindrag import nodes
    from langgraph_kgmem.graphs.remindrag.view import GraphView

    scored, in_s = Counter(), set()
    real_weights, real_frontier = nodes.replay_weights, nodes.frontier_of

    def weights(cos_ab, memory, q, alpha):
        scored["rows"] += len(cos_ab)
        return real_weights(cos_ab, memory, q, alpha)

    def frontier(deps, state, *args, **kwargs):
        in_s.update(state.get("subgraph_nodes", []))
        return real_frontier(deps, state, *args, **kwargs)

    monkeypatch.setattr(nodes, "replay_weights", weights)
    monkeypatch.setattr(nodes, "frontier_of", frontier)
    app = create_remindrag_graph(kg, model="offline", store=InMemoryStore(), max_hops=6, replay=False).compile()
    out = run(app, Q_RIVER, "rank-once")
    assert len(out["path"]) >= 3
    view = GraphView(kg)
    assert 0 < scored["rows"] <= sum(len(view.expand(u).edge_ids) for u in in_s)


@pytest.mark.parametrize("replay", [True, False])
def test_each_run_walks_afresh(kg, monkeypatch, replay):
    """A question asked again in the same thread walks with a new walk, which reads the memory the
    first run wrote: a walk was started only when ``steps`` was 0, which it never is at the first
    move, so the second run took the first's reads and rankings."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.remindrag.deps import RemindragDeps

    walks, real_walk = [], RemindragDeps.walk

    def walk(self, *args, **kwargs):
        walks[-1].append(real_walk(self, *args, **kwargs))
        return walks[-1][-1]

    monkeypatch.setattr(RemindragDeps, "walk", walk)
    # replay at lam 1.0 follows no edge, and without reuse the second run walks as the first did
    app = create_remindrag_graph(kg, model="offline", store=InMemoryStore(), max_hops=4, replay=replay, lam=1.0,
                                 reuse=False).compile()
    for _ in range(2):
        walks.append([])
        out = run(app, Q_RIVER, "again")
        assert out["path"], "the walk should move for this check to mean anything"
    assert walks[0] and walks[1] and not any(w is v for w in walks[0] for v in walks[1])


def test_memories_persist_into_a_new_process(tmp_path, sample_docs):
    kg = KnowledgeGraph.open(tmp_path, name="persist", embeddings="hash", vector_backend="memory")
    kg.add_documents(sample_docs, model="offline")
    cp, st = kg.persistence()
    app = create_remindrag_graph(kg, model="offline").compile(checkpointer=cp, store=st)
    first = run(app, Q_RIVER)
    enhanced = first["memory_updates"]["enhanced_ids"]
    assert enhanced
    kg.close()
    script = textwrap.dedent(f"""
        import json
        from langgraph_kgmem import KnowledgeGraph, create_remindrag_graph
        kg = KnowledgeGraph.open({str(tmp_path)!r}, name="persist", embeddings="hash", vector_backend="memory")
        cp, st = kg.persistence()
        app = create_remindrag_graph(kg, model="offline").compile(checkpointer=cp, store=st)
        out = app.invoke({{"question": {Q_RIVER!r}}}, {{"configurable": {{"thread_id": "new"}}}})
        print(json.dumps({{"edges": [e["edge"] for e in out["replayed"]["edges"]], "path": out["path"]}}))
        kg.close()
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(enhanced) <= set(got["edges"])
    assert got["path"] == []


def test_empty_kg_answers_no_answer_without_walking(store):
    kg = KnowledgeGraph.in_memory(name="empty")
    out = run(create_remindrag_graph(kg, model="offline", store=store).compile(), "Who is there?")
    assert out["answer"] == "no answer" and out["evidence"] == [] and out["path"] == []
    assert out["stop_reason"] == "exhausted"


def test_progress_events_are_streamed(kg, store):
    app = create_remindrag_graph(kg, model="offline", store=store).compile()
    events = [e for e in app.stream({"question": Q_RIVER}, stream_mode="custom")]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "seeds" and "hop" in kinds and kinds[-1] == "memorize"


def test_docstring_example_runs():
    import doctest

    import langgraph_kgmem.graphs.remindrag.graph as mod

    finder = doctest.DocTestFinder()
    tests = [t for t in finder.find(mod) if t.examples]
    assert tests
    runner = doctest.DocTestRunner()
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


def test_a_person_chooses_each_move_through_interrupt_and_resume(kg, store):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    def reader(messages, request):  # everything but the moves: never sufficient, then an answer
        if request is None or request.schema is None:
            return "Vistula"
        if request.step == "check_sufficiency":
            return {"sufficient": False}
        if request.step == "mark_useful":
            return {"useful_ids": []}
        raise AssertionError(f"the person, not the model, chooses moves (got {request.step})")

    model = ScriptedChatModel(responder=reader)
    app = create_remindrag_graph(kg, model=model, store=store, max_hops=2, human_in_the_loop=True).compile(
        checkpointer=InMemorySaver(), store=store)
    cfg = {"configurable": {"thread_id": "hitl"}}
    out = app.invoke({"question": Q_RIVER}, cfg)
    request = out["__interrupt__"][0].value
    assert request["kind"] == "remindrag_next_move" and request["forward"]
    assert request["suggested"]["node_id"] in [c["id"] for c in request["forward"] + request["backward"]]
    # an id that is not a candidate is refused with the reason, and nothing moves
    out = app.invoke(Command(resume="ent-invented"), cfg)
    retry = out["__interrupt__"][0].value
    assert "ent-invented" in retry["error"] and retry["forward"] == request["forward"]
    chosen = [retry["forward"][-1]["id"]]  # not necessarily what the heuristic suggested
    out = app.invoke(Command(resume=chosen[0]), cfg)
    second = out["__interrupt__"][0].value
    chosen.append(second["forward"][0]["id"] if second["forward"] else second["backward"][0]["id"])
    out = app.invoke(Command(resume={"direction": "forward" if second["forward"] else "backward",
                                     "node_id": chosen[1]}), cfg)
    assert "__interrupt__" not in out and out["answer"] == "Vistula"
    assert [h["to"] for h in out["path"]] == chosen and {h["decided_by"] for h in out["path"]} == {"human"}
    assert out["stop_reason"] == "max_hops"
    assert [c["request"].step for c in model.calls if c["request"]].count("traverse_step") == 0


def _reader_never_sufficient(messages, request):
    if request is None or request.schema is None:
        return "Vistula"
    if request.step == "check_sufficiency":
        return {"sufficient": False}
    return {"useful_ids": []}


def test_a_resume_value_that_was_not_offered_is_refused_and_asked_again(kg, store):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    app = create_remindrag_graph(kg, model=ScriptedChatModel(responder=_reader_never_sufficient), store=store,
                                 max_hops=1, human_in_the_loop=True).compile(checkpointer=InMemorySaver(), store=store)
    cfg = {"configurable": {"thread_id": "refuse"}}
    request = app.invoke({"question": Q_RIVER}, cfg)["__interrupt__"][0].value
    forward = [c["id"] for c in request["forward"]]
    for bad, says in [("ent-unknown", "'ent-unknown' is not one of the offered ids"),
                      ({"direction": "backward", "node_id": forward[0]}, "not one of the offered backward ids"),
                      ({"node": forward[0]}, "could not read")]:
        out = app.invoke(Command(resume=bad), cfg)
        assert "answer" not in out or not out.get("path"), "a refused value must not end the walk"
        again = out["__interrupt__"][0].value
        assert says in again["error"] and forward[0] in again["error"]   # the reason, and what may be chosen
        assert {k: v for k, v in again.items() if k != "error"} == {k: v for k, v in request.items() if k != "error"}
    out = app.invoke(Command(resume=f"  {forward[0]} "), cfg)   # an offered id, as typed by a person
    assert "__interrupt__" not in out and [h["to"] for h in out["path"]] == [forward[0]]


def test_read_person_move_checks_the_offered_ids():
    from langgraph_kgmem.graphs.remindrag import read_person_move

    assert read_person_move("b", ["a"], ["b"]).direction == "backward"
    assert read_person_move({"direction": "forward", "node_id": "a"}, ["a"], []).node_id == "a"
    with pytest.raises(ValueError, match=r"'x' is not one of the offered ids.*forward: a; backward: \(none\)"):
        read_person_move("x", ["a"], [])


def test_replay_answers_before_a_person_is_asked_unless_turned_off(kg, store):
    from langgraph.checkpoint.memory import InMemorySaver

    targets = [chunk_titled(kg, "Warsaw"), chunk_titled(kg, "Vistula")]
    learn = create_remindrag_graph(kg, model=ScriptedChatModel(responder=targeted(kg, targets, answer="Vistula")),
                                   store=store).compile()
    run(learn, Q_RIVER)   # the KG now remembers the edges that answered this question
    model = ScriptedChatModel(responder=targeted(kg, targets, answer="Vistula"))
    for replay, asked in [(True, False), (False, True)]:
        app = create_remindrag_graph(kg, model=model, store=store, human_in_the_loop=True,
                                     replay=replay).compile(checkpointer=InMemorySaver(), store=store)
        out = app.invoke({"question": Q_RIVER}, {"configurable": {"thread_id": f"replay-{replay}"}})
        assert ("__interrupt__" in out) is asked, replay
        assert bool(out.get("replayed", {}).get("nodes")) is replay


def test_the_offline_answer_reads_the_fused_rankings_next_passages_never_the_evidence(kg, store, monkeypatch):
    """Offline, the answer step reads the next passages of the fused ranking after the evidence
    (as CatRAG's and dense's do), so a short walk's few passages do not starve it; they are no
    part of the evidence (retrieval figures unchanged) and a model never sees them."""
    import langgraph_kgmem.graphs.remindrag.nodes as nodes

    seen: list[dict] = []
    real = nodes.answer_with_candidates

    def spy(model, question, evidence, path=(), **kw):
        seen.append({"evidence": [e["id"] for e in evidence], "further": [e["id"] for e in kw.get("further", ())],
                     "kinds": [e["kind"] for e in kw.get("further", ())]})
        return real(model, question, evidence, path, **kw)

    monkeypatch.setattr(nodes, "answer_with_candidates", spy)
    kg.add_documents([{"id": f"doc-extra-{i}", "title": f"Town {i}",
                       "text": f"Town {i} is a small town in Poland on a river near Warsaw."} for i in range(6)],
                     model="offline")
    out = run(create_remindrag_graph(kg, model="offline", store=store).compile(), Q_RIVER)
    chunks = [e for e in out["evidence"] if e["kind"] == "chunk"]
    assert seen and seen[0]["further"], "the offline answer step got no further passages"
    assert not set(seen[0]["further"]) & set(seen[0]["evidence"]) and set(seen[0]["kinds"]) == {"chunk"}
    assert len(seen[0]["further"]) <= len(chunks)
    assert [e["id"] for e in out["evidence"]] == seen[0]["evidence"]
