"""One conformance suite for every registered storage backend.

Each test runs once per :class:`~langgraph_kgmem.kg.backends.BackendSpec` in the registry, on a
fresh target from the spec's own ``scratch`` hook: registering a backend is all it takes for this
suite to run against it. Backends whose targets need a database server are ``integration`` tests.

The contract's required core is checked for every backend, and the store and vector tests also
run on a backend that implements the core alone (``core-only``: the embedded stores behind a
proxy that forwards only the core, everything else from the defaults in
:mod:`~langgraph_kgmem.kg.backends.base`), so the defaults are held to the same tests. Each
optional capability is checked only where a backend declares it, and a backend that declares
one it lacks fails (the capability section at the end).
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
from contextlib import ExitStack
from typing import TypedDict

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg import graph as graph_module
from langgraph_kgmem.kg.backends import (DERIVED_SOURCE, BackendSpec, GraphBackend, OpenedBackend, VectorBackend,
                                         backend_for, registered_backends)
from langgraph_kgmem.kg.backends.base import GraphStoreBase, VectorIndexBase
from langgraph_kgmem.kg.backends.contract import (BULK_READS, CAPABILITIES, GRAPH_CORE, SHARED_MEMBERS,
                                                  VECTOR_CORE)
from langgraph_kgmem.kg.backends.embedded.opener import open_in_memory, scratch_directories
from langgraph_kgmem.kg.types import Edge, Node, edge_id, entity_id

from conftest import SAMPLE_DOCS

def _core_only(inner, base: type, core: frozenset[str]):
    """``inner`` behind a proxy with only the ``core`` members forwarded, the rest from ``base``."""
    members: dict[str, object] = {}
    for name in core:
        if isinstance(getattr(type(inner), name, None), property):
            members[name] = property(lambda self, n=name: getattr(self.inner, n))
        elif callable(getattr(inner, name)):
            members[name] = lambda self, *a, n=name, **k: getattr(self.inner, n)(*a, **k)
        else:
            members[name] = getattr(inner, name)
    proxy = type(f"CoreOnly{type(inner).__name__}", (base,), members)()
    proxy.inner = inner
    return proxy


def _open_core_only(target: str, **_: object) -> OpenedBackend:
    inner = open_in_memory()
    return OpenedBackend(_core_only(inner.store, GraphStoreBase, GRAPH_CORE),
                         _core_only(inner.vectors, VectorIndexBase, VECTOR_CORE), backend="core-only")


#: a backend implementing the required core and nothing else (not registered: it claims no target)
CORE_ONLY = BackendSpec("core-only", lambda target, vb: False, _open_core_only, scratch_directories)
SPECS = {spec.name: spec for spec in (*registered_backends(), CORE_ONLY)}


def _param(spec):
    return pytest.param(spec.name, id=spec.name, marks=[pytest.mark.integration] if spec.server else [])


WITH_CORE_ONLY = [_param(s) for s in (*registered_backends(), CORE_ONLY)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """backend name → a function returning a fresh target, each backend's scratch hook entered
    once per module (a database server starts once), lazily."""
    with ExitStack() as stack:
        made: dict[str, object] = {}

        def get(name: str):
            if name not in made:
                made[name] = stack.enter_context(SPECS[name].scratch(tmp_path_factory.mktemp(name.replace("+", "_"))))
            return made[name]

        yield get


@pytest.fixture(params=[_param(s) for s in registered_backends()])
def spec_and_target(request, scratch):
    spec = SPECS[request.param]
    return spec, scratch(spec.name)()


@pytest.fixture(params=WITH_CORE_ONLY)
def opened(request, scratch):
    spec = SPECS[request.param]
    backend = spec.open(scratch(spec.name)(), name="conformance", create=True,
                        vector_backend=spec.open_options.get("vector_backend"))
    yield backend
    backend.close()


def _contract_members(protocol: type) -> set[str]:
    names = {n for n in vars(protocol) if not n.startswith("_")}
    return names | set(getattr(protocol, "__annotations__", {}))


# ------------------------------------------------------------------ the contract is the whole contract


def test_the_facade_uses_nothing_the_contract_does_not_declare():
    """Every ``self._store.X`` / ``self._vectors.X`` the KG facade touches is declared in the
    contract, so a backend implementing the contract is enough."""
    tree = ast.parse(inspect.getsource(graph_module))
    used: dict[str, set[str]] = {"_store": set(), "_vectors": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self" \
                and node.value.attr in used:
            used[node.value.attr].add(node.attr)
    assert used["_store"] and used["_vectors"]
    assert used["_store"] - _contract_members(GraphBackend) == set()
    assert used["_vectors"] - _contract_members(VectorBackend) == set()


def test_the_core_is_small_and_everything_else_has_a_default():
    """The contract is a required core plus members the base classes build on it: a backend that
    implements the core is complete."""
    for protocol, base, core in ((GraphBackend, GraphStoreBase, GRAPH_CORE), (VectorBackend, VectorIndexBase, VECTOR_CORE)):
        members = _contract_members(protocol)
        assert core <= members, f"{protocol.__name__}: core names outside the contract: {sorted(core - members)}"
        defaults = {n for n in vars(base) if not n.startswith("_")}
        assert members - core == defaults, f"{protocol.__name__}: members without a default or defaults beyond it"
    assert len(GRAPH_CORE) + len(VECTOR_CORE) < len(_contract_members(GraphBackend) | _contract_members(VectorBackend))


@pytest.mark.parametrize("name", WITH_CORE_ONLY)
def test_each_backend_implements_every_contract_member(name, scratch):
    spec = SPECS[name]
    backend = spec.open(scratch(name)(), name="members", create=True,
                        vector_backend=spec.open_options.get("vector_backend"))
    try:
        for obj, protocol in ((backend.store, GraphBackend), (backend.vectors, VectorBackend)):
            missing = sorted(m for m in _contract_members(protocol) if not hasattr(obj, m))
            assert missing == [], f"{spec.name}: {type(obj).__name__} lacks {missing}"
        assert isinstance(backend.store.kind, str) and isinstance(backend.vectors.kind, str)
    finally:
        backend.close()


def test_the_registry_routes_targets_and_refuses_unknown_schemes(tmp_path):
    assert backend_for(tmp_path / "kg", "memory").name == "sqlite+memory"
    assert backend_for(str(tmp_path / "kg")).name == "sqlite+chroma"
    assert backend_for("postgresql://u@127.0.0.1/db").name == "postgres"
    with pytest.raises(KgmemInputError, match="no storage backend opens 'neo4j://"):
        backend_for("neo4j://localhost")


# ------------------------------------------------------------------ GraphBackend behaviour


def _graph(store) -> tuple[list[Node], list[Edge]]:
    a, b = Node(entity_id("Oslo"), "entity", "Oslo", {}), Node(entity_id("Norway"), "entity", "Norway", {"x": 1})
    e = Edge(edge_id(a.id, b.id, "relation", "capital of"), a.id, b.id, "relation", "capital of", 1.0, {})
    with store.transaction():
        store.upsert_nodes([a, b])
        store.upsert_edges([e])
        store.add_sources([a.id, b.id], [e.id], "doc-1")
        store.put_document("doc-1", title="Oslo", status="done", n_chunks=1, meta={"path": "oslo.txt"})
    return [a, b], [e]


def test_structure_round_trips_and_provenance_removes_only_what_no_one_else_cites(opened):
    store = opened.store
    nodes, edges = _graph(store)
    _, loaded_nodes, loaded_edges = store.load_all()
    assert sorted(n.id for n in loaded_nodes) == sorted(n.id for n in nodes)
    assert [e.to_dict() for e in loaded_edges] == [e.to_dict() for e in edges]
    assert {n.id: n.attrs for n in store.load_nodes()}[nodes[1].id] == {"x": 1}
    assert store.document("doc-1")["meta"] == {"path": "oslo.txt"} and store.document_count() == 1
    store.add_sources([nodes[1].id], [], "doc-2")
    assert sorted(store.node_sources(nodes[1].id)) == ["doc-1", "doc-2"]
    assert store.doc_edge_ids("doc-1") == [edges[0].id] and store.edge_sources(edges[0].id) == ["doc-1"]
    with store.transaction():
        orphan_nodes, orphan_edges = store.remove_document_sources("doc-1")
        store.delete_document_row("doc-1")
    assert orphan_nodes == [nodes[0].id] and orphan_edges == [edges[0].id]   # Norway is still doc-2's
    assert store.document("doc-1") is None and store.doc_node_ids("doc-2") == [nodes[1].id]


def test_transactions_nest_and_roll_back_as_a_whole(opened):
    store = opened.store
    assert store.depth == 0
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction():
            store.set_meta("k", "outer")
            with store.transaction():
                assert store.depth == 2
                store.upsert_nodes([Node("ent-x", "entity", "X", {})])
            raise RuntimeError("boom")
    assert store.depth == 0 and store.get_meta("k") is None and list(store.load_nodes()) == []
    with store.transaction():
        store.set_meta("k", "kept")
    assert store.get_meta("k") == "kept"


def test_aliases_and_derived_sources(opened):
    store = opened.store
    nodes, _ = _graph(store)
    with store.transaction():
        store.put_alias("osloby", nodes[0].id, 0.91)
        store.add_sources([], [], DERIVED_SOURCE)
    assert store.alias_target("osloby") == nodes[0].id and store.alias_target("bergen") is None
    assert store.alias_targets(["osloby", "bergen"]) == {"osloby": nodes[0].id}
    assert store.aliases(nodes[0].id) == [("osloby", nodes[0].id, pytest.approx(0.91))]
    assert store.alias_count() == 1


# ------------------------------------------------------------------ VectorBackend behaviour


def _unit(rows: list[list[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_vectors_store_read_rank_and_delete(opened):
    store, vec = opened.store, opened.vectors
    _graph(store)   # a server backend keeps vectors per KG: the KG's rows exist first
    ids = ["ent-a", "ent-b", "chk-c"]
    mat = _unit([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0]])
    with store.transaction():
        vec.upsert("nodes", ids, mat * 3.0, ["entity", "entity", "chunk"])   # scaled: stored as unit rows
        vec.commit()
    v0 = vec.version("nodes")
    assert vec.count("nodes") == 3 and vec.dimension() == 4 and vec.ids("nodes") == ids
    assert vec.ids("nodes", ["chunk"]) == ["chk-c"]
    np.testing.assert_allclose(vec.get("nodes", ["chk-c", "ent-a"]), mat[[2, 0]], atol=1e-6)
    assert sorted(vec.get_present("nodes", ["ent-b", "nope"])) == ["ent-b"]
    assert vec.has("nodes", ["ent-a", "nope"]) == [True, False]
    with pytest.raises(KeyError):
        vec.get("nodes", ["nope"])
    assert [i for i, _ in vec.search("nodes", mat[0], 2)] == ["ent-a", "ent-b"]
    assert [i for i, _ in vec.search("nodes", mat[0], 3, kinds=["chunk"])] == ["chk-c"]
    assert [i for i, _ in vec.search("nodes", mat[0], 3, restrict=["ent-b", "chk-c"])][0] == "ent-b"
    got_ids, scores = vec.scores("nodes", mat[0], ["entity"])
    assert got_ids == ["ent-a", "ent-b"] and scores[0] == pytest.approx(1.0, abs=1e-5)
    assert [i for i, _ in vec.best("nodes", mat[[1]], kinds=["entity"])] == ["ent-b"]
    assert vec.best("nodes", mat[[0]], kinds=["anchor"]) == [(None, -1.0)]
    pairs, _ = vec.similar_pairs("nodes", "entity", 0.7, 5)
    assert sorted(tuple(sorted(p[:2])) for p in pairs) == [("ent-a", "ent-b")]
    with store.transaction():
        vec.delete("nodes", ["ent-b"])
    assert vec.ids("nodes") == ["ent-a", "chk-c"] and vec.version("nodes") != v0


# ------------------------------------------------------------------ the KG facade on each backend


def test_a_kg_reopens_with_the_same_graph_vectors_and_labels(spec_and_target):
    spec, target = spec_and_target
    opts = dict(spec.open_options)
    with KnowledgeGraph.open(target, name="conf", embeddings="hash", **opts) as kg:
        kg.add_documents(SAMPLE_DOCS, model="offline")
        stats = kg.stats()
        ids = sorted(n.id for n in kg.nodes())
        vectors = kg.vectors([i for i, h in zip(ids, kg.has_vectors(ids)) if h])
    assert stats["backend"] and stats["vector_backend"] and stats["documents"] == len(SAMPLE_DOCS)
    with KnowledgeGraph.open(target, name="conf", embeddings="hash", create=False, **opts) as kg:
        assert kg.stats() == stats
        assert sorted(n.id for n in kg.nodes()) == ids
        # Chroma hands float32 rows back re-normalised: equal to the last bit or two
        np.testing.assert_allclose(kg.vectors([i for i, h in zip(ids, kg.has_vectors(ids)) if h]), vectors, atol=1e-6)
        removed = kg.delete_document("doc-warsaw")
        assert removed["nodes_removed"] > 0 and kg.document("doc-warsaw") is None


def test_a_failed_transaction_leaves_the_kg_as_it_was(spec_and_target):
    spec, target = spec_and_target
    with KnowledgeGraph.open(target, name="rollback", embeddings="hash", **spec.open_options) as kg:
        kg.add_triples([("Oslo", "capital of", "Norway")], source="a")
        before = (kg.stats(), sorted(n.id for n in kg.nodes()))
        with pytest.raises(RuntimeError, match="boom"):
            with kg.transaction():
                kg.add_node("entity", "Bergen", source="b")
                kg.writer.put_document("b", title="Bergen", status="done")
                raise RuntimeError("boom")
        assert (kg.stats(), sorted(n.id for n in kg.nodes())) == before
        assert kg.document("b") is None and kg.has_vectors([entity_id("Bergen")]) == [False]


def test_writes_through_the_facade_check_their_references(spec_and_target):
    spec, target = spec_and_target
    with KnowledgeGraph.open(target, name="refs", embeddings="hash", **spec.open_options) as kg:
        with pytest.raises(KgmemInputError, match="put_vectors: no node"):
            kg.writer.put_vectors("nodes", ["ent-nowhere"], np.ones((1, 256), dtype=np.float32), ["entity"])


# ------------------------------------------------------------------ declared capabilities


def _open(spec, target, name: str, **kw) -> OpenedBackend:
    return spec.open(target, name=name, create=kw.pop("create", True),
                     vector_backend=spec.open_options.get("vector_backend"), **kw)


def _check_shared(spec, target) -> None:
    """A second handle on the same KG sees the first one's write through the change log."""
    a = _open(spec, target, "shared")
    try:
        assert a.store.shared, f"{spec.name} declares 'shared' but its store's shared is False"
        own = [m for m in SHARED_MEMBERS if getattr(type(a.store), m) is getattr(GraphStoreBase, m)]
        assert own == [], f"{spec.name} declares 'shared' but leaves {own} to the single-process defaults"
        b = _open(spec, target, "shared", create=False)
        try:
            v0 = b.store.version()
            node = Node(entity_id("Bergen"), "entity", "Bergen", {})
            with a.store.transaction():
                a.store.upsert_nodes([node])
            assert a.store.last_committed_version() > v0 and b.store.version() > v0
            changes = b.store.changes_since(v0)
            assert changes is not None and node.id in [n.id for n in changes[1]]
            version, nodes, _ = b.store.load_all()
            assert version == b.store.version() and node.id in [n.id for n in nodes]
        finally:
            b.close()
    finally:
        a.close()


def _check_bulk_reads(spec, target) -> None:
    """The backend's own derived reads, answering as the defaults built on its core do."""
    backend = _open(spec, target, "bulk")
    try:
        store, vec = backend.store, backend.vectors
        nodes, edges = _graph(store)
        ids, mat = ["ent-a", "ent-b", "chk-c"], _unit([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0]])
        with store.transaction():
            store.add_sources([nodes[1].id], [edges[0].id], "doc-0")   # a second source, sorted before the first
            store.put_alias("osloby", nodes[0].id, 0.91)
            store.put_document("doc-1", title="One", status="ok", content_hash="txt-1")
            vec.upsert("nodes", ids, mat, ["entity", "entity", "chunk"])
            vec.commit()
        parts = {"store": (store, GraphStoreBase), "vectors": (vec, VectorIndexBase)}
        inherited = [m for part, m in BULK_READS if getattr(type(parts[part][0]), m) is getattr(parts[part][1], m)]
        assert inherited == [], f"{spec.name} declares 'bulk_reads' but inherits {inherited} from the defaults"
        calls = {"alias_targets": (["osloby", "bergen", "osloby"],), "alias_count": (), "document_count": (),
                 "document_hashes": (["doc-1", "nope", "doc-1"],),
                 "node_sources_many": ([nodes[1].id, "nope", nodes[0].id, nodes[1].id],),
                 "edge_sources_many": ([edges[0].id, "nope"],),
                 "get": ("nodes", ["chk-c", "ent-a"]), "has": ("nodes", ["ent-a", "nope"]), "ids": ("nodes", ["entity"]),
                 "scores": ("nodes", mat[1], ["entity"]), "search": ("nodes", mat[1], 2),
                 "best": ("nodes", mat[[0, 2]], ["entity"])}
        for part, member in BULK_READS:
            obj, base = parts[part]
            own, default = getattr(obj, member)(*calls[member]), getattr(base, member)(obj, *calls[member])
            if member in ("scores",):
                assert own[0] == default[0]
                np.testing.assert_allclose(own[1], default[1], atol=1e-5)
            elif member == "get":
                np.testing.assert_allclose(own, default, atol=1e-6)
            elif member in ("search", "best"):
                assert [i for i, _ in own] == [i for i, _ in default], member
                np.testing.assert_allclose([s for _, s in own], [s for _, s in default], atol=1e-5)
            else:
                assert own == default, f"{spec.name}: {member} answers {own!r}, the default {default!r}"
    finally:
        backend.close()


def _check_drop(spec, target) -> None:
    """One target holds several KGs by name; dropping one leaves the others."""
    for name in ("keep", "gone"):
        backend = _open(spec, target, name)
        with backend.store.transaction():
            backend.store.upsert_nodes([Node(entity_id(name), "entity", name, {})])
        backend.close()
    assert spec.drop(target, "gone") is True and spec.drop(target, "gone") is False
    with pytest.raises(KgmemInputError):
        _open(spec, target, "gone", create=False)
    kept = _open(spec, target, "keep", create=False)
    try:
        assert [n.id for n in kept.store.load_nodes()] == [entity_id("keep")]
    finally:
        kept.close()


class _Counter(TypedDict):
    n: int


def _check_persistence(spec, target) -> None:
    """The methods' checkpointer and store open on the KG's storage, sync and async, and keep state."""
    from langgraph.graph import END, START, StateGraph

    from langgraph_kgmem.persistence import checkpointer

    _open(spec, target, "persisted").close()   # the KG exists first, as for KnowledgeGraph.persistence()
    hooks = spec.persistence
    saver, store = hooks.open(target, checkpointer)
    try:
        store.put(("conformance",), "k", {"v": 1})
        assert store.get(("conformance",), "k").value == {"v": 1}
        graph = StateGraph(_Counter)
        graph.add_node("bump", lambda s: {"n": s["n"] + 1})
        graph.add_edge(START, "bump")
        graph.add_edge("bump", END)
        app = graph.compile(checkpointer=saver)
        app.invoke({"n": 1}, {"configurable": {"thread_id": "t"}})
        assert app.get_state({"configurable": {"thread_id": "t"}}).values == {"n": 2}
        assert hooks.holds_memory(target)
    finally:
        for conn in {id(c): c for c in (saver.conn, store.conn)}.values():
            conn.close()

    async def read_async():
        async with hooks.open_async(target, checkpointer) as (_, astore):
            return (await astore.aget(("conformance",), "k")).value

    assert asyncio.run(read_async()) == {"v": 1}


def _check_push_ppr(spec, target) -> None:
    """PPR by forward push from storage equals the push over the KG's in-memory snapshot (on a
    graph without parallel edges, where the two agree to float rounding)."""
    with KnowledgeGraph.open(target, name="push", embeddings="hash", **spec.open_options) as kg:
        kg.add_nodes([Node(f"n{i}", "entity", f"n{i}", {}) for i in range(8)], embed=False)
        kg.add_edges([Edge(f"e{i}", f"n{a}", f"n{b}", "relation", "r", 1.0 + i / 10, {})
                      for i, (a, b) in enumerate([(0, 1), (1, 2), (2, 3), (0, 4), (4, 5), (5, 6), (3, 7)])],
                     embed_facts=False)
        seeds = {"n0": 1.0, "n5": 0.5}
        expected = dict(kg.ppr(seeds, method="push", eps=1e-6))
    reader = spec.push_ppr(target, name="push")
    try:
        got = dict(reader.ppr(seeds, eps=1e-6))
    finally:
        reader.close()
    assert set(got) == set(expected) and np.allclose([got[k] for k in got], [expected[k] for k in got], atol=1e-12)


CHECKS = {"shared": _check_shared, "bulk_reads": _check_bulk_reads, "drop": _check_drop,
          "persistence": _check_persistence, "push_ppr": _check_push_ppr}


def test_every_capability_has_a_check():
    assert set(CHECKS) == set(CAPABILITIES)


@pytest.mark.parametrize("name, capability", [
    pytest.param(s.name, c, id=f"{s.name}-{c}", marks=[pytest.mark.integration] if s.server else [])
    for s in registered_backends() for c in sorted(s.capabilities)])
def test_each_declared_capability_holds(name, capability, scratch):
    CHECKS[capability](SPECS[name], scratch(name)())


def test_a_backend_declaring_a_capability_it_lacks_fails(scratch):
    """The checks fail a backend that claims more than it does, and a spec whose declarations and
    hooks disagree is refused when it is built."""
    embedded = SPECS["sqlite+memory"]
    with pytest.raises(AssertionError, match="declares 'shared'"):
        _check_shared(dataclasses.replace(embedded, capabilities=embedded.capabilities | {"shared"}),
                      scratch(embedded.name)())
    with pytest.raises(AssertionError, match="declares 'bulk_reads' but inherits"):
        _check_bulk_reads(dataclasses.replace(CORE_ONLY, capabilities=frozenset({"bulk_reads"})), scratch("core-only")())
    with pytest.raises(ValueError, match="declares the 'push_ppr' capability but has no push_ppr hook"):
        dataclasses.replace(embedded, capabilities=embedded.capabilities | {"push_ppr"})
    with pytest.raises(ValueError, match="does not declare the 'persistence' capability but has a"):
        dataclasses.replace(embedded, capabilities=frozenset())
    with pytest.raises(ValueError, match="unknown capabilities"):
        dataclasses.replace(embedded, capabilities=frozenset({"teleport"}))


def test_a_backend_without_persistence_hooks_gets_a_clear_error(monkeypatch):
    """persistence.py asks the backend's spec; a backend that keeps no checkpointer says so."""
    from langgraph_kgmem.errors import ConfigurationError
    from langgraph_kgmem.kg.backends import registry
    from langgraph_kgmem.persistence import holds_memory, open_persistence

    spec = dataclasses.replace(CORE_ONLY, claims=lambda target, vb: target.startswith("core://"))
    monkeypatch.setattr(registry, "BACKENDS", (spec, *registry.BACKENDS))
    monkeypatch.delenv("KGMEM_POSTGRES_URI", raising=False)
    with pytest.raises(ConfigurationError, match="the core-only storage backend keeps no checkpointer"):
        open_persistence(None, uri="core://kg")
    with pytest.raises(ConfigurationError, match="keeps no checkpointer"):
        holds_memory(None, uri="core://kg")
