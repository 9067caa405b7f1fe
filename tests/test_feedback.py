"""Feedback and the experience layer: runs named by run id or thread, foreign ids refused, tenants
apart, the influence bound, the method's hook, and CatRAG / HippoRAG 2 reading the credit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph, create_catrag_graph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.feedback import feedback_tool, give_feedback
from langgraph_kgmem.graphs.registry import METHODS, Registered, registered
from langgraph_kgmem.memory import namespace
from langgraph_kgmem.memory.experience import ExperienceMemory
from langgraph_kgmem.memory.feedback import MAX_FEEDBACK_PER_RUN

DOCS = [{"title": t, "text": x} for t, x in [
    ("Warsaw", "Warsaw is the capital of Poland. Warsaw lies on the Vistula river."),
    ("Krakow", "Krakow is a city in Poland. Krakow was the capital of Poland until 1596."),
    ("Gdansk", "Gdansk is a port city in Poland on the Baltic Sea."),
    ("Paris", "Paris is the capital of France. Paris lies on the Seine."),
    ("Berlin", "Berlin is the capital of Germany. Berlin lies on the Spree."),
    ("Vienna", "Vienna is the capital of Austria. Vienna lies on the Danube."),
]]
QUESTION = "Which city is the capital of Poland?"


@pytest.fixture(scope="module")
def kg():
    graph = KnowledgeGraph.in_memory(name="fb")
    graph.add_documents(DOCS, model="offline")
    return graph


def _app(kg, store, **options):
    options.setdefault("top_passages", 2)
    return create_catrag_graph(kg, model="offline", store=store, **options).compile(store=store)


def _ids(out):
    return [e["id"] for e in out["evidence"]]


def test_feedback_names_the_run_by_run_id_and_by_thread(kg):
    store = InMemoryStore()
    app = create_catrag_graph(kg, model="offline", top_passages=2).compile(store=store, checkpointer=InMemorySaver())
    out = app.invoke({"question": QUESTION}, {"configurable": {"thread_id": "t-1"}})
    assert out["run_id"]
    rec = give_feedback(kg, out["run_id"], useful=_ids(out)[:1], verdict="correct", store=store)
    assert (rec["run_id"], rec["question"], rec["method"]) == (out["run_id"], QUESTION, "catrag")
    assert rec["provenance"] and {"doc", "hash"} <= set(rec["provenance"][0])
    again = app.invoke({"question": "Which river flows through Paris?"}, {"configurable": {"thread_id": "t-1"}})
    by_thread = give_feedback(kg, "t-1", useful=_ids(again)[:1], store=store)
    assert by_thread["run_id"] == again["run_id"] != out["run_id"]   # the thread's latest run
    with pytest.raises(KgmemInputError, match="no run 'nope'"):
        give_feedback(kg, "nope", useful=_ids(out)[:1], store=store)


def test_ids_the_run_did_not_return_are_refused_and_nothing_is_stored(kg):
    store = InMemoryStore()
    out = _app(kg, store).invoke({"question": QUESTION})
    foreign = next(n.id for n in kg.nodes("chunk") if n.id not in _ids(out))
    with pytest.raises(KgmemInputError, match="not in the evidence of run"):
        give_feedback(kg, out["run_id"], useful=[_ids(out)[0], foreign], store=store)
    with pytest.raises(KgmemInputError, match="both useful and wrong"):
        give_feedback(kg, out["run_id"], useful=_ids(out)[:1], wrong=_ids(out)[:1], store=store)
    with pytest.raises(KgmemInputError, match="verdict"):
        give_feedback(kg, out["run_id"], verdict="great", store=store)
    assert store.search(namespace(kg.name, "feedback")) == []
    assert store.search(namespace(kg.name, "experience")) == []


def test_a_tenant_cannot_name_or_move_another_tenants_runs(kg):
    store = InMemoryStore()
    app = _app(kg, store, memory_scope=("{user_id}",), experience=True, experience_weight=1.0)
    alice = app.invoke({"question": QUESTION}, context={"user_id": "alice"})
    bob_before = app.invoke({"question": QUESTION}, context={"user_id": "bob"})
    with pytest.raises(KgmemInputError, match="of tenant 'bob'"):
        give_feedback(kg, alice["run_id"], useful=_ids(alice)[:1], store=store, scope=("bob",))
    give_feedback(kg, alice["run_id"], useful=_ids(alice)[1:], wrong=_ids(alice)[:1], store=store, scope=("alice",))
    bob_after = app.invoke({"question": QUESTION}, context={"user_id": "bob"})
    assert bob_after["passages"] == bob_before["passages"]
    assert "experience" not in bob_after["ppr"]
    alice_after = app.invoke({"question": QUESTION}, context={"user_id": "alice"})
    assert _ids(alice_after)[0] == _ids(alice)[1]   # her own feedback moved her own ranking


def test_the_influence_of_feedback_is_bounded(kg):
    store = InMemoryStore()
    app = _app(kg, store)
    target = None
    for _ in range(12):   # the same passage marked useful on many runs: credit saturates below 1
        out = app.invoke({"question": QUESTION})
        target = target or _ids(out)[0]
        give_feedback(kg, out["run_id"], useful=[target], store=store)
    credit = ExperienceMemory(store, kg.name).credit([target], kg.embed_query(QUESTION))[0]
    assert 0.9 < credit <= 1.0
    # damped steps never take a record's norm past 1, whatever directions the questions have
    mem = ExperienceMemory(InMemoryStore(), kg.name)
    rng = np.random.default_rng(0)
    for _ in range(30):
        mem.add(["p"], (), rng.normal(size=8))
    assert np.linalg.norm(mem.store.get(mem.ns, "p").value["u"]) <= 1.0 + 1e-6
    # one run: each item credited once, whatever the number of records, and at most MAX_FEEDBACK_PER_RUN records
    store2 = InMemoryStore()
    out = _app(kg, store2).invoke({"question": QUESTION})
    first = give_feedback(kg, out["run_id"], useful=_ids(out)[:1], store=store2)
    for _ in range(MAX_FEEDBACK_PER_RUN - 1):
        assert give_feedback(kg, out["run_id"], useful=_ids(out)[:1], store=store2)["credited"] == []
    with pytest.raises(KgmemInputError, match="already has"):
        give_feedback(kg, out["run_id"], useful=_ids(out)[:1], store=store2)
    once = ExperienceMemory(store2, kg.name).credit(_ids(out)[:1], kg.embed_query(QUESTION))[0]
    assert first["credited"] == _ids(out)[:1] and once == pytest.approx(2 / np.pi, abs=1e-6)
    # an unrelated question reads no credit (the gate)
    assert ExperienceMemory(store2, kg.name).credit(_ids(out)[:1], kg.embed_query("zzz qqq xxx"))[0] == 0.0


def test_the_methods_hook_gets_the_feedback(kg, monkeypatch):
    calls = []
    entry = registered()["catrag"]
    spec = dataclasses.replace(entry.spec, on_feedback=lambda *a: calls.append(a))
    monkeypatch.setitem(registered(), "catrag", Registered(entry.name, spec, entry.preset, entry.summary,
                                                           entry.agent_description))
    store = InMemoryStore()
    out = _app(kg, store).invoke({"question": QUESTION})
    give_feedback(kg, out["run_id"], useful=_ids(out)[:1], verdict="correct", store=store)
    (store_seen, name, scope, record), = calls
    assert store_seen is store and name == kg.name and scope == ()
    assert record == {"run_id": out["run_id"], "question": QUESTION, "method": "catrag", "useful": _ids(out)[:1],
                      "wrong": [], "verdict": "correct", "source": "user"}


def test_the_agent_tool_records_feedback_and_reports_bad_ids(kg):
    store = InMemoryStore()
    out = _app(kg, store).invoke({"question": QUESTION})
    tool = feedback_tool(kg, store=store)
    said = tool.invoke({"run_id": out["run_id"], "useful": _ids(out)[:1]})
    assert said.startswith("feedback recorded") and "1 useful" in said
    assert tool.invoke({"run_id": out["run_id"], "useful": ["chk-invented"]}).startswith("feedback not recorded")
    rec = store.search(namespace(kg.name, "feedback"))[0].value
    assert rec["source"] == "agent"
    assert ExperienceMemory(store, kg.name).credit(_ids(out)[:1], kg.embed_query(QUESTION))[0] == pytest.approx(
        0.5 * 2 / np.pi, abs=1e-6)


def test_kg_feedback_uses_the_kgs_own_store(tmp_path):
    kg = KnowledgeGraph.open(tmp_path / "kg", name="own")
    kg.add_documents(DOCS[:3], model="offline")
    store = kg.persistence()[1]
    out = create_catrag_graph(kg, model="offline").compile(store=store).invoke({"question": QUESTION})
    assert kg.feedback(out["run_id"], useful=_ids(out)[:1])["run_id"] == out["run_id"]
    kg.close()


@pytest.mark.parametrize("method", ["catrag", "hipporag2"])
def test_catrag_and_hipporag2_read_the_credit(kg, method):
    preset = dict(METHODS[method].preset)
    store = InMemoryStore()
    plain = _app(kg, store, **{**preset, "experience": False})
    reads = _app(kg, store, **{**preset, "experience": True, "experience_weight": 1.0})
    before = plain.invoke({"question": QUESTION})
    # no credit yet: reading the layer changes nothing
    assert reads.invoke({"question": QUESTION})["passages"] == before["passages"]
    first, second = _ids(before)[:2]
    give_feedback(kg, before["run_id"], useful=[second], wrong=[first], store=store)
    after = reads.invoke({"question": QUESTION})
    assert _ids(after)[0] == second and after["ppr"]["experience"][second] > 0 > after["ppr"]["experience"][first]
    assert plain.invoke({"question": QUESTION})["passages"] == before["passages"]   # the switch off: unchanged


def test_remindrag_replays_what_feedback_on_another_method_credited(kg):
    from langgraph_kgmem import create_remindrag_graph

    def replayed(**options):
        store = InMemoryStore()   # each run on a store of its own: ReMindRAG's own memory stays empty
        out = _app(kg, store).invoke({"question": QUESTION})
        give_feedback(kg, out["run_id"], useful=_ids(out), store=store)   # feedback on a CatRAG run
        app = create_remindrag_graph(kg, model="offline", store=store, **options).compile(store=store)
        return _ids(out), app.invoke({"question": QUESTION})["replayed"]["nodes"]

    assert replayed(experience=False)[1] == []   # no edge memory of its own yet: nothing to replay
    credited, nodes = replayed(experience=True)
    assert set(credited) & set(nodes)   # the shared credit leads replay to those passages


def test_a_hostile_tenant_moves_only_itself_and_only_so_far(kg):
    store = InMemoryStore()
    app = _app(kg, store, memory_scope=("{user_id}",), experience=True, experience_weight=0.5)
    honest_before = app.invoke({"question": QUESTION}, context={"user_id": "honest"})
    for _ in range(MAX_FEEDBACK_PER_RUN + 3):   # every run's whole evidence marked wrong, again and again
        out = app.invoke({"question": QUESTION}, context={"user_id": "mallory"})
        give_feedback(kg, out["run_id"], wrong=_ids(out), store=store, scope=("mallory",))
    credit = ExperienceMemory(store, kg.name, ("mallory",)).credit(_ids(honest_before), kg.embed_query(QUESTION))
    assert np.all(credit >= -1.0) and np.all(credit < 0)
    mallory = app.invoke({"question": QUESTION}, context={"user_id": "mallory"})
    # the credit read is in [-1, 0): the ranking moves by at most experience_weight x that
    assert mallory["ppr"]["experience"] and all(-1.0 <= c < 0 for c in mallory["ppr"]["experience"].values())
    assert app.invoke({"question": QUESTION}, context={"user_id": "honest"})["passages"] == honest_before["passages"]


@pytest.mark.parametrize("experience", [True, False])
def test_a_grounded_autopruned_answer_credits_the_passages_it_cites(kg, experience):
    from langgraph_kgmem import create_autopruned_graph

    store = InMemoryStore()
    app = create_autopruned_graph(kg, model="offline", experience=experience).compile(store=store)
    out = app.invoke({"question": QUESTION})
    credited = {it.key for it in store.search(namespace(kg.name, "experience"), limit=100)}
    if not experience:
        assert credited == set()
        return
    assert out["answer_memory"] == "stored" and credited
    assert all(kg.node(c).kind == "chunk" for c in credited)
    assert np.all(ExperienceMemory(store, kg.name).credit(sorted(credited), kg.embed_query(QUESTION)) > 0)
