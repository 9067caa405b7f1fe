"""The storage contract of a knowledge graph: everything the KG facade asks of a backend.

A backend is a pair: a :class:`GraphBackend` (nodes, edges, provenance, documents, aliases,
metadata, transactions) and a :class:`VectorBackend` (unit vectors of nodes and facts), bundled
by its opener into an :class:`OpenedBackend`. The facade
(:class:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore`) is the only code that calls these
methods; ingest, memory, tools and the CLI write through the facade, so transactions and cache
rules live in one place. Nothing outside this module's declarations is used: a new backend
implements what is here, registers a :class:`BackendSpec` in
:mod:`~langgraph_kgmem.kg.backends.registry`, and the conformance suite runs against it.

The contract has a required core (:data:`GRAPH_CORE`, :data:`VECTOR_CORE`); every other member has
a default built on the core in :mod:`~langgraph_kgmem.kg.backends.base`. What a backend does
beyond the core it declares as capabilities (:data:`CAPABILITIES`) on its :class:`BackendSpec`,
and the conformance suite checks each declared one (and only those).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np

from langgraph_kgmem.kg.types import Edge, Node

#: Provenance of structure no document contributed (synonym and time-chain edges): it lives as
#: long as both end nodes do.
DERIVED_SOURCE = "__derived__"

#: (new version, nodes upserted, node ids deleted, edges upserted, edge ids deleted)
Changes = tuple[int, list[Node], list[str], list[Edge], list[str]]

#: What every structure store implements itself; the rest of :class:`GraphBackend` has defaults
#: (:class:`~langgraph_kgmem.kg.backends.base.GraphStoreBase`).
GRAPH_CORE = frozenset({
    "kind", "depth", "transaction", "schema_version", "get_meta", "set_meta", "load_nodes", "load_edges",
    "upsert_nodes", "upsert_edges", "add_sources", "node_sources", "edge_sources", "doc_node_ids",
    "doc_edge_ids", "remove_document_sources", "delete_nodes", "delete_edges", "document", "documents",
    "put_document", "delete_document_row", "put_alias", "aliases", "alias_target", "close"})
#: What every vector index implements itself; the rest of :class:`VectorBackend` has defaults
#: (:class:`~langgraph_kgmem.kg.backends.base.VectorIndexBase`).
VECTOR_CORE = frozenset({"kind", "upsert", "delete", "get_present", "matrix", "count", "version", "dimension"})

#: The optional capabilities a :class:`BackendSpec` may declare, and what declaring one promises
#: (the conformance suite checks each declared capability, and fails a backend that lacks it).
CAPABILITIES: dict[str, str] = {
    "shared": "several processes open one KG at once: the store's ``shared`` is True and it implements "
              "``version``, ``last_committed_version``, ``changes_since`` and a consistent ``load_all`` "
              "(one process sees another's writes through the change log)",
    "bulk_reads": "the derived reads (``alias_targets``, ``alias_count``, ``document_count``, ``document_hashes``, "
                  "``node_sources_many``, ``edge_sources_many``, ``get``, ``has``, "
                  "``ids``, ``scores``, ``search``, ``best``) are the backend's own, in one read or an index, "
                  "and agree with the defaults built on the core",
    "drop": "a target holds many KGs picked by name, and ``BackendSpec.drop`` removes one (``server``)",
    "persistence": "the methods' checkpointer and memory store live in the backend's storage "
                   "(``BackendSpec.persistence``)",
    "push_ppr": "forward-push PPR straight from storage, without loading the graph (``BackendSpec.push_ppr``)",
}
#: The members a backend declaring ``bulk_reads`` implements itself.
BULK_READS = (("store", "alias_targets"), ("store", "alias_count"), ("store", "document_count"),
              ("store", "document_hashes"), ("store", "node_sources_many"), ("store", "edge_sources_many"),
              ("vectors", "get"), ("vectors", "has"), ("vectors", "ids"), ("vectors", "scores"),
              ("vectors", "search"), ("vectors", "best"))
#: The members a backend declaring ``shared`` implements itself.
SHARED_MEMBERS = ("version", "last_committed_version", "changes_since", "load_all")


class GraphBackend(Protocol):
    """Nodes, edges, provenance, documents, aliases and metadata of one KG."""

    #: short label of the structure store, reported by ``kg.stats()["backend"]`` (e.g. ``"sqlite"``)
    kind: str
    #: True when several processes may open the KG at once (the facade then refreshes its cache
    #: from :meth:`changes_since` and serialises writes per KG)
    shared: bool
    #: set by the facade on a shared backend: called with the connection right after the outermost
    #: transaction took the KG's write lock, before the block's writes (to catch up on others' writes)
    on_begin: Callable[[Any], None] | None

    @property
    def depth(self) -> int:
        """Nesting depth of the calling thread's open transaction (0 outside one)."""

    def transaction(self) -> AbstractContextManager[Any]:
        """Nested-safe: only the outermost block commits; an exception rolls everything back.
        On a shared backend the outermost block also takes the KG's write lock."""

    @property
    def schema_version(self) -> int:
        """The schema version the storage holds (:mod:`~langgraph_kgmem.kg.backends.schema`): the
        current one once opened, since opening migrates an older one forward."""

    def get_meta(self, key: str) -> str | None:
        """The KG's metadata value under ``key`` (name, embedding model...), None when unset."""

    def set_meta(self, key: str, value: str) -> None:
        """Set metadata ``key`` to ``value``, replacing an earlier value."""

    def load_nodes(self) -> Iterator[Node]:
        """Every node, in insertion order (the facade's cache and PPR rows keep that order)."""

    def load_edges(self) -> Iterator[Edge]:
        """Every edge, in insertion order."""

    def load_all(self) -> tuple[int, Iterable[Node], Iterable[Edge]]:
        """(version, nodes, edges) read consistently: the whole graph as of one committed version."""

    def upsert_nodes(self, nodes: Iterable[Node]) -> None:
        """Insert nodes, or replace the kind, text and attributes of those already there (the facade
        refuses a kind change before calling this); of one id given twice, the last wins."""

    def upsert_edges(self, edges: Iterable[Edge]) -> None:
        """Insert edges; an edge already there keeps its ends, kind and text and takes the new
        weight and attributes (its id is a hash of those, so they cannot differ)."""

    def add_sources(self, node_ids: Iterable[str], edge_ids: Iterable[str], doc_id: str) -> None:
        """Record that document ``doc_id`` cites these nodes and edges (recording one twice is a no-op)."""

    def node_sources(self, node_id: str) -> list[str]:
        """Ids of the documents citing node ``node_id``, sorted."""

    def edge_sources(self, edge_id: str) -> list[str]:
        """Ids of the documents citing edge ``edge_id``, sorted."""

    def node_sources_many(self, node_ids: Sequence[str]) -> dict[str, list[str]]:
        """Node id -> :meth:`node_sources` for each of ``node_ids``, in one read where the backend can."""

    def edge_sources_many(self, edge_ids: Sequence[str]) -> dict[str, list[str]]:
        """Edge id -> :meth:`edge_sources` for each of ``edge_ids``, in one read where the backend can."""

    def doc_node_ids(self, doc_id: str) -> list[str]:
        """Ids of the nodes document ``doc_id`` cites, sorted."""

    def doc_edge_ids(self, doc_id: str) -> list[str]:
        """Ids of the edges document ``doc_id`` cites, sorted."""

    def remove_document_sources(self, doc_id: str) -> tuple[list[str], list[str]]:
        """Drop ``doc_id``'s provenance rows; returns (node ids, edge ids) no source cites any more."""

    def delete_nodes(self, ids: list[str]) -> None:
        """Delete these nodes with their provenance rows and the aliases pointing at them; edges
        are left alone (the facade deletes a node's edges itself)."""

    def delete_edges(self, ids: list[str]) -> None:
        """Delete these edges with their provenance rows."""

    def document(self, doc_id: str) -> dict[str, Any] | None:
        """Document ``doc_id``'s row as a dict (``id``, ``title``, ``status``, ``n_chunks``,
        ``meta``, ``seq``, ``content_hash``: ``""`` for documents put before hashes were kept),
        None when there is none."""

    def documents(self) -> list[dict[str, Any]]:
        """Every document row (as :meth:`document` returns them), in the order they were first put."""

    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Document id -> ``content_hash`` for those of ``doc_ids`` that have a row (the others are
        left out), in one read where the backend can."""

    def document_count(self) -> int:
        """How many document rows there are."""

    def put_document(self, doc_id: str, *, title: str, status: str, n_chunks: int = 0,
                     meta: dict[str, Any] | None = None, content_hash: str = "") -> None:
        """Insert or update document ``doc_id``'s row; a new row gets the next ``seq``, an updated
        one keeps its own (so :meth:`documents` keeps the order documents were first added).
        ``content_hash`` names the version ingested (memory records cite it as provenance)."""

    def delete_document_row(self, doc_id: str) -> None:
        """Delete only the document's row; its provenance goes with :meth:`remove_document_sources`."""

    def put_alias(self, alias: str, node_id: str, similarity: float) -> None:
        """Record that the name ``alias`` was merged into node ``node_id`` at cosine ``similarity``
        (an alias recorded before points at the new node)."""

    def aliases(self, node_id: str | None = None) -> list[tuple[str, str, float]]:
        """(alias, node id, similarity) rows sorted by alias: all of them, or those of ``node_id``."""

    def alias_count(self) -> int:
        """How many aliases are recorded."""

    def alias_target(self, alias: str) -> str | None:
        """The node ``alias`` was merged into, None when it is not an alias."""

    def alias_targets(self, aliases: Sequence[str]) -> dict[str, str]:
        """Alias -> node id for those of ``aliases`` that are recorded (the others are left out), in
        one read where the backend can."""

    def version(self) -> int:
        """The KG's committed write version (0 on a backend that is not shared)."""

    def last_committed_version(self) -> int | None:
        """The version the calling thread's last outermost transaction committed, then forgotten
        (None on a backend that is not shared, or when that transaction wrote nothing)."""

    def changes_since(self, version: int, conn: Any = None) -> Changes | None:
        """What changed since ``version`` (see :data:`Changes`); None when the change log no longer
        reaches back that far (reload all). ``conn``: read on this connection (the write lock's)."""

    def analyze(self) -> None:
        """Refresh the database's planner statistics (after a bulk load)."""

    def close(self) -> None:
        """Release the structure's connection (the facade calls it once; a pool shared with the
        vectors is released by the opener's ``releases``, after both stores closed)."""


class VectorBackend(Protocol):
    """Unit vectors in spaces ("nodes": entities, chunks, anchors; "facts": relation edges), each
    row tagged with its node/edge kind. Ties in every ranking go to the earlier-inserted row."""

    #: short label, reported by ``kg.stats()["vector_backend"]`` (e.g. ``"chroma"``)
    kind: str
    #: True when writes land in the structure's transaction (nothing to reconcile after a crash)
    transactional: bool
    #: True when reads cost a round trip (a database server): the facade then keeps recently read
    #: vectors in a bounded cache of its own
    remote: bool

    def upsert(self, space: str, ids: Sequence[str], vectors: np.ndarray, kinds: Sequence[str], *,
               normalized: bool = False) -> None:
        """Store ``vectors`` as unit rows; ``normalized=True``: they are unit already (copied from
        another index), so they are stored as they are."""

    def delete(self, space: str, ids: Iterable[str]) -> None:
        """Remove the rows of these ids from ``space`` (ids without a row are skipped)."""

    def commit(self) -> None:
        """Make the transaction's upserts durable (a journal may stand in for the store); the KG
        calls it just before each outermost commit. Reads must see upserts before it."""

    def flush(self) -> None:
        """Write every deferred upsert to the store; the KG calls it at close, and a backend before
        its own deletes."""

    def discard_pending(self) -> None:
        """Forget the transaction's upserts not yet committed (the KG's transaction rolled back)."""

    def bulk_load(self, *, only_if_large: bool = False) -> AbstractContextManager[None]:
        """A block of many writes: an index that is cheaper to build once than to maintain row by
        row may go unmaintained until the block ends, and be built then (``only_if_large``: only
        where the block writes much relative to what is stored). Reads inside and beside it stay
        correct. Nothing to do for a backend without such indexes."""

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        """Rows in the order of ``ids``; KeyError naming the ids without a vector."""

    def get_present(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of those ``ids`` that have one, in one read."""

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        """Whether each of ``ids`` has a vector in ``space``, in the order of ``ids``."""

    def search(self, space: str, query: np.ndarray, k: int, kinds: Sequence[str] | None = None,
               restrict: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` rows closest to ``query`` as (id, cosine), best first, ties to the earlier row;
        only rows of these ``kinds`` (None: all), or, with ``restrict``, only those ids."""

    def best(self, space: str, queries: np.ndarray, kinds: Sequence[str] | None = None,
             columns: slice | None = None) -> list[tuple[str | None, float]]:
        """Top-1 (id, cosine) per query row; ``(None, -1.0)`` when nothing matches. ``columns``: a
        hint that queries and rows are zero outside these columns (a backend may compare only them)."""

    def scores(self, space: str, query: np.ndarray, kinds: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
        """Cosine of ``query`` with every row of these kinds, rows in insertion order."""

    def similar_pairs(self, space: str, kind: str, threshold: float, max_per_node: int,
                      since: int = 0) -> tuple[list[tuple[str, str, float]], int]:
        """Unordered pairs of ``kind`` rows with cosine ≥ ``threshold`` (each row keeps at most
        ``max_per_node`` best partners), and a watermark to pass as ``since`` next time so only
        pairs involving rows added after it are computed again (0: all)."""

    def matrix(self, space: str, kinds: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
        """(ids, unit rows) of every row of these kinds (None: all), in insertion order."""

    def count(self, space: str) -> int:
        """How many rows ``space`` holds."""

    def ids(self, space: str, kinds: Sequence[str] | None = None) -> list[str]:
        """Ids of the rows of these kinds (None: all), in insertion order."""

    def version(self, space: str) -> int:
        """Increases whenever the space's rows change (caches keyed on it stay valid until then)."""

    def dimension(self) -> int | None:
        """The vectors' dimension, None while nothing is stored."""

    def close(self) -> None:
        """Write what is deferred and release the vectors' storage (the KG calls it once, at close)."""


@dataclass
class OpenedBackend:
    """What :func:`~langgraph_kgmem.kg.backends.registry.open_backend` hands the facade: the two
    stores of one KG, where they live, and what to release when the KG closes."""

    store: GraphBackend
    vectors: VectorBackend
    #: the registered backend's name (``BackendSpec.name``)
    backend: str
    #: KG directory of an embedded backend (None for a database or an in-memory KG)
    path: Path | None = None
    #: database URI of a server backend; the KG's checkpointer and memory store live there too
    uri: str | None = None
    #: released after the stores, in order, each even when one before it failed (locks, pools)
    releases: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """Close the vectors, then the structure, then each release; every step runs even when an
        earlier one raised, and the first error is raised at the end."""
        first: BaseException | None = None
        for step in [self.vectors.close, self.store.close, *self.releases]:
            try:
                step()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the other steps
                first = first or exc
        if first is not None:
            raise first


#: ``saver(saver_class, connection, where)``: the package's checkpointer of LangGraph class
#: ``saver_class`` on ``connection``, loading only what the methods store and labelled ``where`` in
#: errors (the shared layer, :mod:`langgraph_kgmem.persistence`, hands it to the hooks below, so a
#: backend cannot build a checkpointer that skips those checks).
SaverFactory = Callable[[type, Any, str], Any]


@dataclass(frozen=True)
class PersistenceHooks:
    """How a backend keeps the methods' LangGraph checkpointer and memory store beside its KG, in
    its own storage (:func:`~langgraph_kgmem.persistence.open_persistence` calls these and knows
    no backend). What a backend needs for it (the tables it checks, its setup lock, the mapping of
    its driver's errors to the package's) stays inside the hooks.

    Attributes:
        open: ``open(target, saver)`` → ``(checkpointer, store)``, set up (tables created or
            migrated) and checked; ``target`` is what the backend's ``claims`` accepted.
        open_async: ``open_async(target, saver)`` → an async context manager yielding the async
            pair on the same tables, closed on exit.
        holds_memory: ``holds_memory(target)``: whether ``target`` may already hold memory written
            by an earlier process (deletes and replaces then open the pair to invalidate it).
        env: an environment variable whose value, when set, is a target of this backend that every
            KG's checkpointer and store use instead of the KG's own storage (None: no such variable).
        store_lock: ``store_lock(store, key)``: for a memory store of this backend (one it opened or
            the user's own of the same LangGraph class), a context manager holding ``key``
            exclusively across processes; None for any other store
            (:func:`~langgraph_kgmem.memory.locks.memory_lock` adds the thread lock around it).
    """

    open: Callable[[str, SaverFactory], tuple[Any, Any]]
    open_async: Callable[[str, SaverFactory], AbstractAsyncContextManager[tuple[Any, Any]]]
    holds_memory: Callable[[str], bool]
    env: str | None = None
    store_lock: Callable[[Any, str], AbstractContextManager[None] | None] = lambda store, key: None


@dataclass(frozen=True)
class BackendSpec:
    """One registered backend: which targets it opens, how, and how the conformance suite gets a
    fresh one.

    Attributes:
        name: unique, e.g. ``"sqlite+chroma"``.
        claims: ``claims(target, vector_backend)``: whether this backend opens ``target`` (a path
            or URI string) when ``vector_backend`` is asked for (None: no preference).
        open: ``open(target, *, name, create, vector_backend)`` → :class:`OpenedBackend`. ``name``
            is the KG's name or None (an embedded KG then keeps its stored name).
        scratch: conformance hook: a context manager, given a work directory, yielding a function
            that returns a fresh, empty target on each call (a new directory, a new database).
        open_options: keyword arguments the conformance suite passes to ``KnowledgeGraph.open``
            with a scratch target (e.g. the vector backend).
        server: True when a target holds many KGs, picked by name (a database server); the suite
            marks its tests ``integration``.
        drop: ``drop(target, name)`` removes KG ``name`` from a server target, True if it existed
            (None: a KG is its directory, deleted as one).
        persistence: where the methods' checkpointer and memory store live for a KG of this backend
            (:class:`PersistenceHooks`; None: in memory only).
        push_ppr: ``push_ppr(target, name=...)`` → a reader answering ``ppr(seeds, ...)`` by forward
            push straight from storage (None: PPR runs on the KG's in-memory snapshot only).
        capabilities: what the backend does beyond the required core, from :data:`CAPABILITIES`;
            each hook above is present exactly when its capability is declared.

    Raises:
        ValueError: an unknown capability, or a declaration and its hook that disagree.
    """

    name: str
    claims: Callable[[str, str | None], bool]
    open: Callable[..., OpenedBackend]
    scratch: Callable[[Path], AbstractContextManager[Callable[[], str]]]
    open_options: dict[str, Any] = field(default_factory=dict)
    server: bool = False
    drop: Callable[[str, str], bool] | None = None
    persistence: PersistenceHooks | None = None
    push_ppr: Callable[..., Any] | None = None
    capabilities: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.capabilities) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"backend {self.name!r} declares unknown capabilities {unknown}: "
                             f"choose from {sorted(CAPABILITIES)}")
        for capability, hook in (("drop", self.drop), ("persistence", self.persistence), ("push_ppr", self.push_ppr)):
            if (capability in self.capabilities) != (hook is not None):
                raise ValueError(f"backend {self.name!r} {'declares' if hook is None else 'does not declare'} "
                                 f"the {capability!r} capability but {'has no' if hook is None else 'has a'} "
                                 f"{capability} hook: declare it exactly when the hook is given")
