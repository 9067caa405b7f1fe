"""Issue #39, item 2: a tenant named like a memory kind. ``memory_scope=("{user_id}",)`` with
user_id "codebook" put the tenant's codebook at ``("kgmem", kg, "codebook", "codebook")``, below
the shared codebook's namespace; a store search takes a namespace *prefix*, so the shared
codebook loaded the tenant's pages, an unscoped graph replayed the tenant's answer and its next
question crashed with IndexError. Now namespaces are matched exactly (``memory.list_items``) on
every store the package uses, and no tenant label may equal a kind (``memory.reserved_labels``,
read from ``memory.KINDS``, which the methods' specs fill)."""

from __future__ import annotations

import uuid

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import method_specs
from langgraph_kgmem.memory import EdgeMemory, RecordMemory, list_items, memory_scope, namespace, reserved_labels
from langgraph_kgmem.memory.kinds import MemoryKind, register_kind, unregister_kind

method_specs()   # every method imported: the kinds their specs declare are registered


def user(uid):
    return {"configurable": {"user_id": uid}}


# ------------------------------------------------------------------------------ tenant labels


@pytest.mark.parametrize("label", sorted(reserved_labels()))
def test_a_tenant_named_like_a_memory_kind_is_refused(label):
    with pytest.raises(KgmemInputError, match=f"{label!r} .*is the name of a memory kind"):
        memory_scope(("{user_id}",), user(label))
    with pytest.raises(KgmemInputError, match="name of a memory kind"):
        RecordMemory(InMemoryStore(), "kg", "trajectories", ("alice", label))


def test_every_kind_and_the_root_are_reserved():
    assert {"codebook", "edge_memory", "trajectories", "reflections", "summaries", "kgmem", "edge"} <= reserved_labels()
    for label in ("alice", "bob", "Codebook", "user-codebook", "codebooks"):   # near names stay usable
        assert memory_scope(("{user_id}",), user(label)) == (label,)


def test_a_new_kind_is_reserved_once_registered():
    """The reserved labels are read from the registered kinds: a kind a new method declares is
    covered at once, and a namespace of a kind nobody registered is refused (so none escapes the check)."""
    assert memory_scope(("{user_id}",), user("notes")) == ("notes",)
    with pytest.raises(KgmemInputError, match="unknown memory kind label 'notes'"):
        namespace("kg", "notes")
    register_kind(MemoryKind(label="notes", short="note", title="notes"))
    try:
        assert namespace("kg", "notes", ("alice",)) == ("kgmem", "kg", "alice", "notes")
        for name in ("notes", "note"):
            with pytest.raises(KgmemInputError, match="name of a memory kind"):
                memory_scope(("{user_id}",), user(name))
    finally:
        unregister_kind("notes")
    with pytest.raises(KgmemInputError, match="unknown memory kind label 'notes'"):
        namespace("kg", "notes")


def test_a_run_for_a_tenant_named_codebook_is_refused_and_the_graph_stays_usable(text_kg):
    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph

    store = InMemoryStore()
    scoped = create_autopruned_graph(text_kg, model="offline", memory_scope=("{user_id}",)).compile(store=store)
    with pytest.raises(KgmemInputError, match="'codebook' .*name of a memory kind"):
        scoped.invoke({"question": "Where was Marie Curie born?"}, user("codebook"))
    assert scoped.invoke({"question": "Where was Marie Curie born?"}, user("alice"))["answer"]
    assert store.list_namespaces(prefix=("kgmem", text_kg.name, "codebook")) == []


# ------------------------------------------------------------------------------ exact namespaces, every store


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def any_store(request, tmp_path):
    """The stores the package uses: LangGraph's InMemoryStore, SqliteStore and PostgresStore."""
    from langgraph_kgmem.persistence import open_persistence

    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "sqlite":
        yield open_persistence(tmp_path)[1]
        return
    import psycopg

    base = request.getfixturevalue("postgres_uri")
    name = f"kgmem_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    checkpointer, store = open_persistence(None, uri=base.rsplit("/", 1)[0] + "/" + name)
    yield store
    store.conn.close()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_namespaces_are_matched_exactly_on_every_store(any_store):
    """Items of namespaces below a kind's (a store written before tenant labels were checked)
    are never read as that kind's, across pages too."""
    shared = ("kgmem", "kg", "codebook")
    for i in range(5):
        any_store.put(shared, f"k{i}", {"who": "shared"})
    for ns in (("kgmem", "kg", "codebook", "codebook"), ("kgmem", "kg", "codebook", "x", "codebook"),
               ("kgmem", "kg", "edge_memory", "edge_memory")):
        for i in range(3):
            any_store.put(ns, f"k{i}", {"who": "tenant", "v": [1.0, 2.0]})
    any_store.put(("kgmem", "kg", "edge_memory"), "e1", {"v": [0.5, 0.5], "n": 1})
    got = list_items(any_store, shared, page=2)   # pages of two: filtering keeps the paging right
    assert sorted(it.key for it in got) == [f"k{i}" for i in range(5)]
    assert {it.value["who"] for it in got} == {"shared"}
    assert set(RecordMemory(any_store, "kg", "codebook").all()) == {f"k{i}" for i in range(5)}
    assert EdgeMemory(any_store, "kg", 2).keys() == ["e1"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_shared_codebook_never_loads_a_tenant_below_it(text_kg, tmp_path, kind):
    """The issue's case, with the tenant's codebook planted where a tenant named "codebook" put it:
    the unscoped graph loads only its own codebook, replays nothing of the tenant's and answers
    its next questions (it raised IndexError in resolve_edge)."""
    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
    from langgraph_kgmem.persistence import open_persistence

    store = InMemoryStore() if kind == "memory" else open_persistence(tmp_path)[1]
    question = "Where was Marie Curie born?"
    scoped = create_autopruned_graph(text_kg, model="offline", memory_scope=("{user_id}",)).compile(store=store)
    assert scoped.invoke({"question": question}, user("alice"))["answer_memory"] == "stored"
    tenant = ("kgmem", text_kg.name, "alice", "codebook")
    for it in list_items(store, tenant):   # the tenant's codebook, as a tenant "codebook" would have it
        store.put(("kgmem", text_kg.name, "codebook", "codebook"), it.key, it.value, index=False)
    shared = create_autopruned_graph(text_kg, model="offline").compile(store=store)
    first = shared.invoke({"question": question})
    assert first["replayed_answer"] is None and first["answer_memory"] == "stored"
    for q in ("Which river flows into the Baltic Sea?", question):
        assert shared.invoke({"question": q})["answer"]


class _TiesReordered(InMemoryStore):
    """A store whose search orders the items of equal update time differently at every call, as
    the SQLite and PostgreSQL stores may (they order by ``updated_at`` alone, and one batch's
    items share it)."""

    calls = 0

    def search(self, namespace_prefix, /, *, limit=10, offset=0, **kw):
        everything = super().search(namespace_prefix, limit=10**9, offset=0, **kw)
        self.calls += 1
        everything.sort(key=lambda it: hash((it.key, self.calls)))
        return everything[offset:offset + limit]


def test_every_item_is_read_once_whatever_the_order_among_items_of_one_batch():
    """Pages taken by offset over an order with ties skipped some items and repeated others: a
    2,005-item codebook on PostgreSQL loaded four pages short and was refused as corrupt."""
    from langgraph.store.base import PutOp

    from langgraph_kgmem.memory import search_all

    store = _TiesReordered()
    ns = ("kgmem", "kg", "codebook")
    store.batch([PutOp(ns, f"E:{i:06d}", {"i": i}, index=False) for i in range(2005)]
                + [PutOp((*ns, "tenant"), "meta", {}, index=False)])
    got = list_items(store, ns, page=100)
    assert sorted(it.key for it in got) == [f"E:{i:06d}" for i in range(2005)]
    assert len(search_all(store, ns[:2], page=100)) == 2006
