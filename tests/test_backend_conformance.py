"""One conformance suite for every registered storage backend.

Each test runs once per :class:`~langgraph_kgmem.kg.backends.BackendSpec` in the registry, on a
fresh target from the spec's own ``scratch`` hook: registering a backend is all it takes for this
suite to run against it. Backends whose targets need a database server are ``integration`` tests.
"""

from __future__ import annotations

import ast
import inspect
from contextlib import ExitStack

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg import graph as graph_module
from langgraph_kgmem.kg.backends import (DERIVED_SOURCE, GraphBackend, VectorBackend, backend_for, open_backend,
                                         registered_backends)
from langgraph_kgmem.kg.types import Edge, Node, edge_id, entity_id

from conftest import SAMPLE_DOCS

SPECS = {spec.name: spec for spec in registered_backends()}


def _param(spec):
    return pytest.param(spec.name, id=spec.name, marks=[pytest.mark.integration] if spec.server else [])


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


@pytest.fixture
def opened(spec_and_target):
    spec, target = spec_and_target
    backend = open_backend(target, name="conformance", vector_backend=spec.open_options.get("vector_backend"))
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


@pytest.mark.parametrize("name", [_param(s) for s in registered_backends()])
def test_each_backend_implements_every_contract_member(name, scratch):
    spec = SPECS[name]
    backend = open_backend(scratch(name)(), name="members", vector_backend=spec.open_options.get("vector_backend"))
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
                kg.put_document("b", title="Bergen", status="done")
                raise RuntimeError("boom")
        assert (kg.stats(), sorted(n.id for n in kg.nodes())) == before
        assert kg.document("b") is None and kg.has_vectors([entity_id("Bergen")]) == [False]


def test_writes_through_the_facade_check_their_references(spec_and_target):
    spec, target = spec_and_target
    with KnowledgeGraph.open(target, name="refs", embeddings="hash", **spec.open_options) as kg:
        with pytest.raises(KgmemInputError, match="put_vectors: no node"):
            kg.put_vectors("nodes", ["ent-nowhere"], np.ones((1, 256), dtype=np.float32), ["entity"])
