"""ReMindRAG reads the memory of the frontier edges that have one, not of every frontier edge: the
node index of each tenant's edge memory (memory/edge_index.py) says which, and stays true under
another handle's writes, tenants, invalidation, resets, writers without a KG and records older
than the index."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.store.base import GetOp
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
from langgraph_kgmem.memory import EDGE_MEMORY_KIND, EdgeMemory, list_memory, reset_memory
from langgraph_kgmem.memory.edge_index import COMPLETE, EDGE_NODES_KIND
from langgraph_kgmem.memory.provenance import Provenance

HUB_DOCS = [{"id": f"d{i}", "text": f"Acme Corp hired Person{i}. Person{i} lives in City{i}."} for i in range(30)]
QUESTION = "Who did Acme Corp hire?"


class CountingStore(InMemoryStore):
    """An in-memory store that counts the GetOps it is sent, per namespace kind label."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: dict[str, int] = {}

    def batch(self, ops):
        ops = list(ops)
        for op in ops:
            if isinstance(op, GetOp):
                self.gets[op.namespace[-1]] = self.gets.get(op.namespace[-1], 0) + 1
        return super().batch(ops)


@pytest.fixture
def hub_kg():
    g = KnowledgeGraph.in_memory(name="hub", embeddings="hash")
    g.add_documents(HUB_DOCS, model="offline")
    yield g
    g.close()


def memory(kg, store, scope=()):
    return EdgeMemory(store, kg.name, len(kg.embed_query("x")), scope, guard=Provenance(kg, store))


def hub_edges(kg):
    hub = next(n.id for n in kg.nodes("entity") if n.text == "Acme Corp")
    return hub, [e.id for e, _ in kg.neighbors(hub)]


def test_a_question_reads_no_record_for_frontier_edges_without_memory(hub_kg):
    store = CountingStore()
    app = create_remindrag_graph(hub_kg, model="offline", store=store).compile(store=store)
    _, edges = hub_edges(hub_kg)
    assert len(edges) >= 60          # the hub's frontier: one edge to every passage and person
    out = app.invoke({"question": QUESTION})
    written = out["memory_updates"]["enhanced"] + out["memory_updates"]["penalised"]
    # nothing was remembered before: the walk read no record; the memorize step read those it wrote
    assert written > 0 and store.gets.get(EDGE_MEMORY_KIND, 0) == written
    assert store.gets.get(EDGE_NODES_KIND, 0) > 0
    remembered = len(memory(hub_kg, store).keys())
    store.gets.clear()
    out = app.invoke({"question": QUESTION})
    walk_reads = store.gets[EDGE_MEMORY_KIND] - out["memory_updates"]["enhanced"] - out["memory_updates"]["penalised"]
    # each read of the walk asks only for remembered edges: far fewer than the frontier's edges
    assert out["replayed"]["edges"] and 0 < walk_reads <= 4 * remembered < len(edges)


def test_replays_and_memory_are_those_of_reading_every_edge(hub_kg, monkeypatch):
    """The same questions on two stores, one read through the index and one edge by edge: the
    same replays, rankings and records."""
    questions = [QUESTION, "Where does Person3 live?", QUESTION, "Who lives in City7?", QUESTION]

    def run(store):
        app = create_remindrag_graph(hub_kg, model="offline", store=store).compile(store=store)
        outs = [app.invoke({"question": q}) for q in questions]
        records = {it.key: it.value["v"] for it in store.search(("kgmem", "hub", EDGE_MEMORY_KIND), limit=10_000)}
        return [(o["replayed"], o["evidence"], o["answer"], o["memory_updates"]) for o in outs], records

    indexed = run(InMemoryStore())
    monkeypatch.setattr(EdgeMemory, "_listed", lambda self, around, cache=None: None)
    plain = run(InMemoryStore())
    assert indexed == plain and indexed[1]
    assert any(out[0]["edges"] for out in indexed[0])       # memory was replayed, not only written


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def test_a_write_through_another_handle_is_read(backend, tmp_path, request):
    """Two handles of one store (and on PostgreSQL of one KG), as two worker processes hold them: a
    record one writes after the other's index is complete is read by the other."""
    from langgraph_kgmem.persistence import open_persistence

    opened = []
    if backend == "sqlite":   # one writer per KG directory: two handles of its memory file
        first = second = KnowledgeGraph.in_memory(name="hub", embeddings="hash")
        stores = [open_persistence(tmp_path)[1], open_persistence(tmp_path)[1]]
        opened.append(first)
    else:
        uri = request.getfixturevalue("new_database")()
        first = KnowledgeGraph.open(uri, name="hub", embeddings="hash")
        opened.append(first)
        first.add_documents(HUB_DOCS[:8], model="offline")
        second = KnowledgeGraph.open(uri, name="hub", embeddings="hash")
        opened.append(second)
        stores = [first.persistence()[1], second.persistence()[1]]
    try:
        if backend == "sqlite":
            first.add_documents(HUB_DOCS[:8], model="offline")
        reader, writer = memory(first, stores[0]), memory(second, stores[1])
        hub, edges = hub_edges(first)
        assert not reader.many(edges, around=[hub]).any()           # builds the (empty) index
        writer.update(edges[2:4], lambda k, old: old + 0.25)
        got = reader.many(edges, around=[hub])
        assert got[2:4].any(axis=1).all() and not np.delete(got, [2, 3], axis=0).any()
        np.testing.assert_allclose(got, reader.many(edges))
    finally:
        for g in opened:
            g.close()


def test_a_tenant_reads_only_its_own_index(hub_kg):
    store = InMemoryStore()
    alice, bob = memory(hub_kg, store, ("alice",)), memory(hub_kg, store, ("bob",))
    hub, edges = hub_edges(hub_kg)
    assert not bob.many(edges, around=[hub]).any() and not alice.many(edges, around=[hub]).any()
    alice.update(edges[:3], lambda k, old: old + 0.5)
    assert alice.index.present([hub]) == set(edges[:3]) and bob.index.present([hub]) == set()
    assert not bob.many(edges, around=[hub]).any() and alice.many(edges, around=[hub])[:3].any(axis=1).all()
    # the index is bookkeeping: `kgmem memory` lists the memory alone, and a reset takes both
    assert {tuple(ns["namespace"])[-1] for ns in list_memory(store, "hub")} == {EDGE_MEMORY_KIND}
    reset_memory(store, "hub", "edge", scope=("alice",))
    assert store.search(("kgmem", "hub", "alice", EDGE_NODES_KIND)) == []
    assert not alice.many(edges, around=[hub]).any() and alice.index.present([hub]) == set()


def test_invalidated_records_read_as_none(hub_kg):
    checkpointer, store = hub_kg.persistence()
    mem = memory(hub_kg, store)
    hub, edges = hub_edges(hub_kg)
    mine = [e for e in edges if {hub_kg.edge(e).src, hub_kg.edge(e).dst} & {n.id for n in hub_kg.nodes()
                                                                               if n.attrs.get("doc_id") == "d0"}]
    assert not mem.many(edges, around=[hub]).any()
    mem.update(edges[:4] + mine, lambda k, old: old + 0.5)
    hub_kg.delete_document("d0")
    hub, edges = hub_edges(hub_kg)
    np.testing.assert_allclose(mem.many(edges, around=[hub]), mem.many(edges))
    assert mem.many(edges, around=[hub]).any()


def test_a_writer_without_a_kg_makes_the_next_reader_rebuild(hub_kg):
    store = InMemoryStore()
    reader = memory(hub_kg, store)
    hub, edges = hub_edges(hub_kg)
    assert not reader.many(edges, around=[hub]).any()
    blind = EdgeMemory(store, "hub", reader.dim)     # no KG: it cannot say which nodes its edges touch
    blind.update(edges[5:6], lambda k, old: old + 0.5)
    assert store.get(("kgmem", "hub", EDGE_NODES_KIND), COMPLETE) is None
    assert reader.many(edges, around=[hub])[5].any()


def test_records_older_than_the_index_are_indexed_on_first_read(hub_kg):
    store = InMemoryStore()
    hub, edges = hub_edges(hub_kg)
    dim = len(hub_kg.embed_query("x"))
    store.put(("kgmem", "hub", EDGE_MEMORY_KIND), edges[7], {"v": [0.1] * dim, "n": 1})   # an older release's record
    got = memory(hub_kg, store).many(edges, around=[hub])
    assert got[7].any() and np.delete(got, 7, axis=0).sum() == 0


def test_a_remembered_edge_the_kg_lost_and_regained_is_read(hub_kg):
    """An orphan: a record whose edge the KG did not hold when the index was built (its document
    deleted, in a store the KG does not know of) is read again once the document is back."""
    store = InMemoryStore()
    mem = memory(hub_kg, store)
    hub, edges = hub_edges(hub_kg)
    doc_nodes = {n.id for n in hub_kg.nodes() if n.attrs.get("doc_id") == "d3"}
    lost = next(e for e in edges if {hub_kg.edge(e).src, hub_kg.edge(e).dst} & doc_nodes)
    mem.update([lost], lambda k, old: old + 0.5)
    for it in store.search(("kgmem", "hub", EDGE_NODES_KIND)):   # as if written before the index existed
        store.delete(tuple(it.namespace), it.key)
    hub_kg.delete_document("d3")
    assert not mem.many(hub_edges(hub_kg)[1], around=[hub]).any()
    assert lost in mem.index.present([])                            # indexed as an orphan
    hub_kg.add_documents([HUB_DOCS[3]], model="offline")
    hub, edges = hub_edges(hub_kg)
    assert lost in edges and mem.many(edges, around=[hub])[edges.index(lost)].any()


def test_a_damaged_index_item_is_rebuilt(hub_kg):
    store = InMemoryStore()
    mem = memory(hub_kg, store)
    hub, edges = hub_edges(hub_kg)
    assert not mem.many(edges, around=[hub]).any()       # the index is complete
    mem.update(edges[:2], lambda k, old: old + 0.5)
    store.put(("kgmem", "hub", EDGE_NODES_KIND), hub, {"e": "not a list"})
    assert mem.many(edges, around=[hub])[:2].any(axis=1).all()
    assert set(store.get(("kgmem", "hub", EDGE_NODES_KIND), hub).value["e"]) == set(edges[:2])


def test_a_walk_is_its_tenants_alone(hub_kg):
    """Runs of one question without a thread id (a server's threadless calls) by two tenants keep
    two walks: one tenant's walk never starts from what another's read of its own memory."""
    from langgraph_kgmem.graphs.remindrag.deps import RemindragDeps
    from langgraph_kgmem.graphs.remindrag.options import RemindragOptions
    from langgraph_kgmem.graphs.remindrag.view import GraphView

    store = InMemoryStore()
    deps = RemindragDeps(kg=hub_kg, view=GraphView(hub_kg), model="offline", options=RemindragOptions.build(),
                         store=store)
    alice, bob = memory(hub_kg, store, ("alice",)), memory(hub_kg, store, ("bob",))
    hers = deps.walk("", QUESTION, new_walk=True, memory=alice)
    hers.reads["rel-x"] = np.ones(3)
    assert deps.walk("", QUESTION, new_walk=False, memory=bob).reads == {}
    assert deps.walk("", QUESTION, new_walk=False, memory=alice) is hers


def test_a_walk_reads_a_hubs_neighbours_index_only_up_to_its_look_ahead(hub_kg, monkeypatch):
    """A walk's read takes the node index of the expanded nodes' neighbours along, but of a hub's
    thousands only ``LOOK_AHEAD`` (the nearest the question): the read stays bounded by it, not
    by the hub's degree. Answers are the same whatever it is (it only saves reads)."""
    from langgraph_kgmem.graphs.remindrag import nodes

    class Largest(CountingStore):
        most = 0

        def batch(self, ops):
            ops = list(ops)
            self.most = max(self.most, sum(isinstance(op, GetOp) and op.namespace[-1] == EDGE_NODES_KIND
                                           for op in ops))
            return super().batch(ops)

    outs, most = {}, {}
    for ahead in (3, 1000):
        monkeypatch.setattr(nodes, "LOOK_AHEAD", ahead)
        store = Largest()
        app = create_remindrag_graph(hub_kg, model="offline", store=store).compile(store=store)
        outs[ahead] = [app.invoke({"question": q}) for q in (QUESTION, QUESTION)]
        most[ahead] = store.most
    # the completeness item, two seeds of up to two nodes each, and up to three neighbours of each
    # (a chunk with its anchor): all 30 of the hub's neighbours without the bound
    assert most[3] <= 1 + 2 * 2 + 2 * 3 * 2 < most[1000], most
    assert [(o["answer"], o["evidence"], o["replayed"]) for o in outs[3]] == \
        [(o["answer"], o["evidence"], o["replayed"]) for o in outs[1000]]
