"""Tenants inside one KG: memory namespaces templated from the run's config, isolated per user,
listed and reset per scope."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph, load_run
from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
from langgraph_kgmem.memory import EdgeMemory, list_memory, memory_scope, reset_memory


def user(uid):
    return {"configurable": {"user_id": uid}}


def test_each_user_gets_their_own_edge_memory(kg):
    store = InMemoryStore()
    app = create_remindrag_graph(kg, model="offline", memory_scope=("{user_id}",)).compile(store=store)
    out = app.invoke({"question": "Where was Marie Curie born?"}, user("alice"))
    dim = len(kg.embed_query("x"))
    alice = EdgeMemory(store, kg.name, dim, ("alice",))
    assert len(alice) > 0
    assert len(EdgeMemory(store, kg.name, dim, ("bob",))) == 0 and len(EdgeMemory(store, kg.name, dim)) == 0
    # bob's run replays nothing of alice's
    bob = app.invoke({"question": "Where was Marie Curie born?"}, user("bob"))
    assert not bob["replayed"]["edges"]
    again = app.invoke({"question": "Where was Marie Curie born?"}, user("alice"))
    assert again["replayed"]["edges"]
    scopes = {tuple(ns["scope"]) for ns in list_memory(store, kg.name, "edge")}
    assert scopes == {("alice",), ("bob",)}
    n_bob = len(EdgeMemory(store, kg.name, dim, ("bob",)))
    assert reset_memory(store, kg.name, "edge", scope=("bob",)) == n_bob
    assert len(EdgeMemory(store, kg.name, dim, ("bob",))) == 0 and len(alice) > 0


def test_a_run_without_the_scope_value_is_refused(kg):
    app = create_remindrag_graph(kg, model="offline", memory_scope=("{user_id}",)).compile(store=InMemoryStore())
    with pytest.raises(KgmemInputError, match="user_id"):
        app.invoke({"question": "Where was Marie Curie born?"})
    with pytest.raises(KgmemInputError, match="without dots"):
        memory_scope(("{user_id}",), user("a.b"))
    assert memory_scope(("org-{org}", "{user_id}"), {"configurable": {"org": 7, "user_id": "u1"}}) == ("org-7", "u1")


def test_r3cycle_trajectories_are_scoped(kg):
    store = InMemoryStore()
    app = create_r3cycle_graph(kg, model="offline", memory_scope=("{user_id}",)).compile(store=store)
    out = app.invoke({"question": "Where was Marie Curie born?"}, user("carol"))
    assert load_run(store, kg.name, out["run_id"], ("carol",))["trajectories"]
    assert not load_run(store, kg.name, out["run_id"])["trajectories"]


def test_autopruned_questions_and_answers_stay_with_their_tenant(kg):
    """Each tenant has a codebook of its own: no question, answer or run of one reaches another."""
    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
    from langgraph_kgmem.graphs.autopruned.codebook import Codebook

    store = InMemoryStore()
    app = create_autopruned_graph(kg, model="offline", memory_scope=("{user_id}",)).compile(store=store)
    q = "Where was Marie Curie born?"
    alice = app.invoke({"question": q}, user("alice"))
    assert alice["answer_memory"] == "stored"
    # unscoped, a related question of another user would retrieve alice's question and answer runs
    bob = app.invoke({"question": "Who married Marie Curie?"}, user("bob"))
    assert bob["reused"] == [] and bob["selected_runs"]["A"] == []
    bob_same = app.invoke({"question": q}, user("bob"))
    assert bob_same["replayed_answer"] is None and bob_same["answer_memory"] == "stored"
    again = app.invoke({"question": q}, user("alice"))
    assert again["replayed_answer"]["question_run"] in alice["memorized"]
    books = {u: Codebook.load(store, kg.name, (u,)) for u in ("alice", "bob")}
    assert {r.text for r in books["alice"].runs_of("Q")} == {q}
    assert {r.text for r in books["bob"].runs_of("Q")} == {q, "Who married Marie Curie?"}
    # nothing outside a tenant's namespace (listed first: InMemoryStore lists a namespace once read)
    assert {tuple(ns["scope"]) for ns in list_memory(store, kg.name, "codebook")} == {("alice",), ("bob",)}
    assert Codebook.stored_revision(store, kg.name) is None
    assert reset_memory(store, kg.name, "codebook", scope=("bob",)) > 0
    assert Codebook.stored_revision(store, kg.name, ("bob",)) is None
    assert Codebook.stored_revision(store, kg.name, ("alice",)) is not None
    with pytest.raises(KgmemInputError, match="user_id"):
        app.invoke({"question": q})


def test_one_autopruned_app_never_hands_one_tenant_anothers_codebook(kg):
    """Two tenants whose codebooks reach the same revision: the app's in-process copy is per tenant."""
    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
    from langgraph_kgmem.testing import ScriptedChatModel

    def says(text):
        return {"model": ScriptedChatModel(responder=lambda messages, request: text)}

    app = create_autopruned_graph(kg, model="offline", extraction="offline",
                                  memory_scope=("{user_id}",)).compile(store=InMemoryStore())
    q = "Where was Marie Curie born?"
    assert app.invoke({"question": q}, user("alice"), context=says("Warsaw"))["answer_memory"] == "stored"
    assert app.invoke({"question": q}, user("bob"), context=says("physicist"))["answer_memory"] == "stored"
    assert app.invoke({"question": q}, user("alice"), context=says("Paris"))["answer"] == "Warsaw"
    assert app.invoke({"question": q}, user("bob"), context=says("Paris"))["answer"] == "physicist"
