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
