"""The knowledge graph every method shares: one facade over two storage backends.

Embedded (default): structure in SQLite (``kg.sqlite``), vectors in a Chroma PersistentClient
(``chroma/``) or a numpy index (``vector_backend="memory"``), in one private KG directory, one
writer process at a time. Server: ``KnowledgeGraph.open("postgresql://...", name=...)`` keeps the
structure in PostgreSQL tables and the vectors in pgvector, shared by any number of processes and
KGs (see :mod:`langgraph_kgmem.kg.postgres` for the concurrency contract).

Either way the whole structure is also kept in memory as adjacency dicts (a cache of the stored
graph, refreshed from the database's change log when another process writes); graph algorithms
run on a cached CSR snapshot that is rebuilt lazily after writes.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from contextlib import asynccontextmanager, closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_kgmem.config import embeddings_id, get_embeddings
from langgraph_kgmem.errors import KgmemError, KgmemInputError, NotAKnowledgeGraphError, check_storable
from langgraph_kgmem.fast_embeddings import (block_cosines, embed_short_texts, has_short_space, short_similarity,
                                             short_threshold)
from langgraph_kgmem.kg.files import (CHROMA_JOURNAL_FILE, JOURNAL_FILE, check_kg_entries, detect_vector_backend,
                                     load_npz_vectors, private_dir, private_file, restrict_tree, save_npz_vectors)
from langgraph_kgmem.kg.ppr import (PUSH_MIN_ENTRIES, GraphSnapshot, NodeTable, PprMethod, PprResult, build_snapshot,
                                   choose_method, degree_order, extend_snapshot, ppr_scores)
from langgraph_kgmem.kg.backend import GraphBackend, VectorBackend
from langgraph_kgmem.kg.postgres import is_postgres_uri
from langgraph_kgmem.kg.serde import strict_serializer
from langgraph_kgmem.kg.sqlite_store import (DERIVED_SOURCE, MEMORY_TABLES, SqliteGraphStore, check_sqlite_file,
                                             sqlite_open_error)
from langgraph_kgmem.kg.types import EDGE_KINDS, NODE_KINDS, Edge, Node, check_kg_name, edge_id, entity_id, node_id
from langgraph_kgmem.kg.vectors import ChromaVectorIndex, NumpyVectorIndex, check_vectors
from langgraph_kgmem.memory.locks import sqlite_setup_lock
from langgraph_kgmem.tracing import traced

DB_FILE = "kg.sqlite"
MEMORY_DB_FILE = "memory.sqlite"
FORMAT_VERSION = "1"
ANALYZE_AFTER_DOCUMENTS = 100   # an ingest of this many documents refreshes the planner's statistics
# node kinds whose text is embedded (time/location/event nodes are found by structure, not text)
EMBEDDED_KINDS = ("entity", "chunk", "anchor")
# node kinds whose text is short (names, titles): embedded with embed_texts(..., short=True), like fact texts
SHORT_KINDS = ("entity", "anchor")
# What a chunk's vector embeds (meta key "passage_text"): "title+text" — the document's title, a
# newline, the chunk — in every KG created since; "text" alone in KGs created before (they keep it,
# so one KG never holds passages embedded both ways). The title often names what the passage never
# repeats ("He was born in ..."), and dense retrieval over HotpotQA/MuSiQue-style corpora embeds it too.
PASSAGE_TEXTS = ("title+text", "text")
Direction = Literal["out", "in", "both"]


class KnowledgeGraph:
    """A named, persistent knowledge graph.

    Open one with :meth:`open` (a directory, created if needed) or :meth:`in_memory` (tests).
    """

    def __init__(self, store: GraphBackend, vectors: VectorBackend, embeddings: Embeddings, *,
                 name: str, path: Path | None, lock: Any = None, uri: str | None = None,
                 refresh_interval: float = 1.0) -> None:
        self.name = name
        self.path = path
        self.uri = uri
        self.refresh_interval = refresh_interval
        self.embeddings = embeddings
        self._store = store
        self._vectors = vectors
        self._lock = lock
        self._nodes: dict[str, Node] = {}
        self._edges: dict[str, Edge] = {}
        self._out: dict[str, list[str]] = {}
        self._in: dict[str, list[str]] = {}
        self._version = 0
        self._snapshots: dict[tuple, GraphSnapshot] = {}
        self._node_table: NodeTable | None = None      # rows of the cached snapshots
        self._graph_log: list[tuple] = []              # structure changes the snapshots have not seen yet
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._prefetched: dict[tuple[bool, str], np.ndarray] = {}   # (short?, text) -> vector
        self._vector_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._persistence: tuple[Any, Any] | None = None
        self._closed = False
        self._doomed_vectors: list[tuple[str, list[str]]] = []   # deleted after the outermost commit
        self._synonyms_done: tuple | None = None                 # add_synonym_edges state with nothing left to do
        # documents ingested since the planner statistics were last refreshed, and the KG's documents then
        self._unanalyzed, self._analyzed_docs = 0, 0
        # memory backend on disk: vectors.npz + a journal of the vectors each transaction adds
        self._npz_root = path if path is not None and isinstance(vectors, NumpyVectorIndex) \
            and not isinstance(vectors, ChromaVectorIndex) else None
        if isinstance(vectors, NumpyVectorIndex) and self._npz_root is not None:
            vectors.journal_to(self._npz_root)
        # shared (server) backend: the database version this cache reflects, and when it was checked
        self._db_version = 0
        self._checked_at = 0.0
        self._sync_lock = threading.RLock()
        self._load_all()
        self._saved_state = self._vector_state()
        self._check_embeddings()

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path: str | os.PathLike[str], *, name: str | None = None,
             embeddings: Embeddings | str | None = None,
             vector_backend: Literal["chroma", "memory"] | None = None, create: bool = True,
             refresh_interval: float = 1.0) -> "KnowledgeGraph":
        """Create or reopen a KG: in directory ``path`` (embedded), or in the PostgreSQL database a
        ``postgresql://`` URI names (server backend; pgvector needed; many KGs per database).

        Args:
            name: the KG's name, which keys its memory namespace. ``None`` reopens with the stored
                name (a new KG is called ``"default"``); a name other than the stored one is an error.
                In a database, the name picks the KG.
            vector_backend: embedded KGs: ``"chroma"`` (default for a new KG) or ``"memory"`` (numpy,
                saved to ``vectors.npz``); an existing directory's own backend by default.
            refresh_interval: server backend only: at most this many seconds pass between checks for
                other processes' writes (every method run also checks at its start).

        Raises:
            NotAKnowledgeGraphError: ``path`` is a file, a non-empty directory that is not a KG, or
                missing with ``create=False``; or another process holds the directory; or one of its
                files is unreadable, foreign, a symbolic link or a special file (nothing stored is
                changed, no link is followed).
            KgmemInputError: a bad name, or a name that differs from the stored one.
            StorageError / ConfigurationError: the database is unreachable or lacks pgvector.

        Warns:
            KgmemRecoveryWarning: the vector journal ended in a record a crash cut short; it was
                dropped (``kg.vector_index.journal_dropped_bytes`` says how many bytes).
        """
        if is_postgres_uri(path):
            return cls._open_postgres(str(path), name=name, embeddings=embeddings, create=create,
                                      refresh_interval=refresh_interval)
        if name is not None:
            check_kg_name(name)
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise NotAKnowledgeGraphError(f"{root} is a file, not a KG directory: pass a directory path")
        if root.is_dir():
            check_kg_entries(root)   # before the lock file, SQLite or Chroma open (and follow) anything there
        db = root / DB_FILE
        if not db.exists():
            if not create:
                raise NotAKnowledgeGraphError(
                    f"{root} is not a langgraph_kgmem KG directory (no {DB_FILE}); "
                    "create one with KnowledgeGraph.open(path) or `kgmem ingest FILE --kg DIR`")
            if root.exists() and any(p.name not in {".lock"} for p in root.iterdir()):
                raise NotAKnowledgeGraphError(
                    f"{root} is a non-empty directory without {DB_FILE}: refusing to turn it into a KG. "
                    "Choose an empty or new directory.")
        private_dir(root)
        from filelock import FileLock, Timeout

        lock = FileLock(str(root / ".lock"), mode=0o600)
        try:
            lock.acquire(timeout=float(os.environ.get("KGMEM_LOCK_TIMEOUT", "5")))
        except Timeout as exc:
            raise NotAKnowledgeGraphError(
                f"{root} is open by another writer (one writer per KG directory: Chroma's persistent "
                "client is not safe for several). Close the other KnowledgeGraph (kg.close()) or use "
                "a Chroma server.") from exc
        try:
            store = SqliteGraphStore(private_file(db))
            emb = get_embeddings(embeddings)
            legacy = False
            vector_backend = detect_vector_backend(root, vector_backend)  # type: ignore[assignment]
            if vector_backend == "chroma":
                vectors: NumpyVectorIndex = ChromaVectorIndex(root / "chroma", journal=root / CHROMA_JOURNAL_FILE)
                restrict_tree(root / "chroma")
            else:
                vectors = NumpyVectorIndex()
                legacy = load_npz_vectors(root, vectors)
            kg = cls(store, vectors, emb, name=_identity(name, store.get_meta("name"), str(root)), path=root,
                     lock=lock)
            if legacy:  # old pickled format: rewrite it once without pickles
                save_npz_vectors(root, vectors)
        except BaseException:
            lock.release()
            raise
        kg._vector_backend = vector_backend
        return kg

    @classmethod
    def _open_postgres(cls, uri: str, *, name: str | None, embeddings: Embeddings | str | None, create: bool,
                       refresh_interval: float) -> "KnowledgeGraph":
        from langgraph_kgmem.kg.postgres import PgDatabase, PgVectorIndex, PostgresGraphStore

        name = check_kg_name(name or "default")
        db = PgDatabase(uri)
        try:
            store = PostgresGraphStore(db, name, create=create)
            kg = cls(store, PgVectorIndex(db, store), get_embeddings(embeddings), name=name, path=None, uri=uri,
                     refresh_interval=refresh_interval)
        except BaseException:
            db.close()
            raise
        kg._vector_backend = "pgvector"
        return kg

    @classmethod
    def in_memory(cls, *, name: str = "default", embeddings: Embeddings | str | None = "hash") -> "KnowledgeGraph":
        """A throw-away KG (SQLite ``:memory:`` + numpy vectors); defaults to the hashing embedding."""
        kg = cls(SqliteGraphStore(":memory:"), NumpyVectorIndex(), get_embeddings(embeddings), name=check_kg_name(name),
                 path=None)
        kg._vector_backend = "memory"
        return kg

    _vector_backend: str = "memory"

    def _check_embeddings(self) -> None:
        eid = embeddings_id(self.embeddings)
        stored = self._store.get_meta("embeddings")
        dim = self._vectors.dimension()
        if stored is None and dim is not None:
            probe = len(self.embeddings.embed_query("dimension probe"))
            if probe != dim:
                raise KgmemInputError(
                    f"KG {self.name!r} holds vectors of dimension {dim}, but embeddings {eid!r} give {probe}: "
                    "reopen with the embeddings it was built with, or build a new KG (another name or path)")
        if stored is None:
            with self._store.transaction():
                self._store.set_meta("embeddings", eid)
                self._store.set_meta("format", FORMAT_VERSION)
                self._store.set_meta("name", self.name)
                if self._store.get_meta("passage_text") is None:
                    self._store.set_meta("passage_text", PASSAGE_TEXTS[0])
        elif stored != eid:
            raise KgmemInputError(
                f"KG {self.name!r} was built with embeddings {stored!r}, not {eid!r}: vectors would not be "
                f"comparable. Reopen with the same embeddings (KGMEM_EMBEDDINGS={stored}) or build a new KG.")
        self.passage_text = self._store.get_meta("passage_text") or "text"
        if self.passage_text not in PASSAGE_TEXTS:
            raise KgmemInputError(
                f"KG {self.name!r} records passage_text {self.passage_text!r}, not one of {', '.join(PASSAGE_TEXTS)}: "
                "it was written by a newer langgraph-kgmem (upgrade) or edited by hand")

    def close(self) -> None:
        """Flush and release the directory lock (also when flushing fails). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._vectors.flush()
            if self._npz_root is not None and (self._vector_state() != self._saved_state
                                               or (self._npz_root / JOURNAL_FILE).exists()):
                save_npz_vectors(self._npz_root, self._vectors)
        finally:
            try:
                if self._persistence is not None:
                    for obj in self._persistence:
                        conn = getattr(obj, "conn", None)
                        if conn is not None:
                            try:
                                conn.close()
                            except Exception:  # pragma: no cover - already closed
                                pass
                    self._persistence = None
                self._store.close()
                db = getattr(self._store, "db", None)
                if db is not None:
                    db.close()
                if self.path is not None and (self.path / "chroma").exists():
                    restrict_tree(self.path / "chroma")
            finally:
                if self._lock is not None:
                    self._lock.release()

    def __enter__(self) -> "KnowledgeGraph":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeGraph(name={self.name!r}, path={str(self.path) if self.path else None!r}, " \
               f"nodes={len(self._nodes)}, edges={len(self._edges)})"

    # ------------------------------------------------------------------ persistence for methods
    def persistence(self) -> tuple[Any, Any]:
        """The shared (checkpointer, store) pair of this KG, backed by one database.

        SQLite file ``memory.sqlite`` in the KG directory (SqliteSaver + SqliteStore); for an
        in-memory KG, InMemorySaver + InMemoryStore. ``KGMEM_POSTGRES_URI`` switches to
        PostgresSaver + PostgresStore (needs ``langgraph-checkpoint-postgres``). The checkpointers
        load only the types the methods store (:mod:`langgraph_kgmem.kg.serde`): a checkpoint naming
        anything else raises :class:`~langgraph_kgmem.errors.UnsafeStoredDataError` and runs nothing.
        """
        if self._persistence is None:
            self._persistence = open_persistence(self.path, uri=self.uri)
        return self._persistence

    def memory(self, kind: str | None = None, *, store: Any = None, limit: int = 20) -> list[dict[str, Any]]:
        """What the methods remember about this KG, per namespace (edge memories, trajectories,
        reflections, codebook, summaries; every memory scope), with each item as a person reads it:
        see :func:`memory.view.describe_memory`. ``store``: default the KG's own :meth:`persistence` store."""
        from langgraph_kgmem.memory.view import describe_memory

        return describe_memory(self, store if store is not None else self.persistence()[1], kind, limit=limit)

    def reset_memory(self, kind: str | None = None, *, scope: Sequence[str] | None = None, store: Any = None) -> int:
        """Forget what the methods remember about this KG (one ``kind``, one ``scope``, or all);
        the graph itself is untouched. Returns the number of items deleted."""
        from langgraph_kgmem.memory import reset_memory

        return reset_memory(store if store is not None else self.persistence()[1], self.name, kind, scope=scope)

    @asynccontextmanager
    async def apersistence(self) -> AsyncIterator[tuple[Any, Any]]:
        """The async (checkpointer, store) pair on the same database as :meth:`persistence`, for
        ``ainvoke``/``astream``: AsyncSqliteSaver + AsyncSqliteStore in the KG directory, the async
        Postgres pair on a PostgreSQL KG (or ``KGMEM_POSTGRES_URI``), in-memory ones for an
        in-memory KG. Closed when the block ends::

            async with kg.apersistence() as (checkpointer, store):
                app = create_catrag_graph(kg).compile(checkpointer=checkpointer, store=store)
                out = await app.ainvoke({"question": "..."}, {"configurable": {"thread_id": "t1"}})
        """
        async with open_async_persistence(self.path, uri=self.uri) as pair:
            yield pair

    async def aadd_documents(self, docs: Iterable[Any], *, model: Any = None, **options: Any) -> "Any":
        """:meth:`add_documents` for async code (see ingest.pipeline.aadd_documents): LLM extraction
        as coroutines, ``max_concurrency`` chunks in flight on the event loop; database work in a
        worker thread, so the loop is never blocked."""
        from langgraph_kgmem.ingest.pipeline import aadd_documents

        report = await aadd_documents(self, list(docs), model=model, **options)
        if self._analyze_due(report):
            await asyncio.to_thread(self._store.analyze)
        return report

    def _analyze_due(self, report: Any) -> bool:
        """Whether an ingest leaves the planner statistics stale enough to refresh them: at least
        :data:`ANALYZE_AFTER_DOCUMENTS` documents since the last refresh, and a quarter of the
        documents the KG had then. ANALYZE reads the whole KG, so refreshing after every bulk
        ingest made each document cost more as the KG grew; refreshing as it grows by a fixed
        fraction keeps that cost per document flat, and statistics describe proportions, which a
        quarter more of the same documents hardly moves."""
        self._unanalyzed += getattr(report, "documents_added", 0)
        if self._unanalyzed < max(ANALYZE_AFTER_DOCUMENTS, self._analyzed_docs // 4):
            return False
        self._analyzed_docs = self._store.document_count()   # an ANALYZE reads them all anyway
        self._unanalyzed = 0
        return True

    # ------------------------------------------------------------------ in-memory index
    def _index_node(self, n: Node) -> None:
        if self._snapshots and n.id not in self._nodes:
            self._log_graph(("node", n.id, n.kind))
        self._nodes[n.id] = n
        self._out.setdefault(n.id, [])
        self._in.setdefault(n.id, [])

    def _index_edge(self, e: Edge) -> None:
        if e.id in self._edges:
            old = self._edges[e.id]
            if self._snapshots and (old.src, old.dst, old.kind, old.weight) != (e.src, e.dst, e.kind, e.weight):
                self._log_graph(("edge", old.src, old.dst, old.kind, -old.weight))
                self._log_graph(("edge", e.src, e.dst, e.kind, e.weight))
            self._edges[e.id] = e
            return
        if self._snapshots:
            self._log_graph(("edge", e.src, e.dst, e.kind, e.weight))
        self._edges[e.id] = e
        self._out.setdefault(e.src, []).append(e.id)
        self._in.setdefault(e.dst, []).append(e.id)

    def _unindex_edge(self, eid: str) -> None:
        e = self._edges.pop(eid, None)
        if e is None:
            return
        if self._snapshots:
            self._log_graph(("edge", e.src, e.dst, e.kind, -e.weight))
        self._out[e.src].remove(eid)
        self._in[e.dst].remove(eid)

    def _unindex_node(self, nid: str) -> None:
        """Forget a node (its edges are unindexed first by the caller)."""
        if self._nodes.pop(nid, None) is not None and self._snapshots:
            self._log_graph(("drop",))   # rows cannot be taken out of a snapshot: rebuild it
        self._out.pop(nid, None)
        self._in.pop(nid, None)

    def _log_graph(self, change: tuple) -> None:
        """Record a structure change for the cached snapshots (see :meth:`snapshot`); past a
        quarter of the graph replaying it costs more than a rebuild, so the snapshots go."""
        self._graph_log.append(change)
        if change[0] == "drop" or len(self._graph_log) > max(50_000, len(self._edges) // 4):
            self._drop_snapshots()

    def _drop_snapshots(self) -> None:
        self._snapshots.clear()
        self._graph_log.clear()
        self._node_table = None

    def _touch(self) -> None:
        self._version += 1
        self._vector_cache.clear()

    @property
    def version(self) -> int:
        """Increases on every write; caches keyed on it stay valid until the graph changes."""
        return self._version

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all of them land in SQLite or none.

        On failure the in-memory cache is reloaded from SQLite and the vectors the failed block
        added are dropped, so structure and vectors agree again. The outermost block appends the
        vectors it added to the backend's journal (memory: ``vectors.journal``, Chroma:
        ``chroma.journal``) just before it commits (a crash in between leaves vectors without
        nodes, dropped at the next open), and deletes vectors only after the commit (a rollback
        never loses the vector of a node it restores)."""
        outer = self._store.depth == 0
        if outer:
            self._sync_lock.acquire()
        try:
            if outer and self._store.shared:
                self._store.on_begin = self._sync_in_transaction
            with self._store.transaction():
                yield
                if outer:
                    self._vectors.commit()   # the block's vectors are durable (journaled) before its structure commits
        except BaseException:
            if outer:
                self._doomed_vectors.clear()
                self._vectors.discard_pending()
                try:
                    self._reload()
                except Exception:  # noqa: BLE001 - the database is gone: reload at the next access
                    self._checked_at, self._db_version = 0.0, -1
                finally:
                    self._sync_lock.release()
            raise
        if outer:
            try:
                if self._store.shared:
                    committed = self._store.last_committed_version()
                    if committed is not None:
                        self._db_version = committed
                while self._doomed_vectors:
                    space, ids = self._doomed_vectors.pop()
                    self._vectors.delete(space, ids)
            finally:
                self._sync_lock.release()

    def _has_live_vectors(self, space: str, ids: list[str]) -> list[bool]:
        """Which ids have a vector that survives this transaction (one deleted earlier in it, on a
        backend that deletes at commit, does not: a replaced document re-adds such nodes)."""
        have = self._vectors.has(space, ids)
        doomed = {i for sp, d in self._doomed_vectors if sp == space for i in d}
        return [h and i not in doomed for i, h in zip(ids, have)]

    def _upsert_vectors(self, space: str, ids: list[str], vectors: np.ndarray, kinds: list[str]) -> None:
        """Write vectors; ids deleted earlier in this transaction are no longer deleted at commit."""
        self._vectors.upsert(space, ids, vectors, kinds)
        if not self._store.depth:
            self._vectors.commit()
        if self._doomed_vectors:
            written = set(ids)
            self._doomed_vectors = [(sp, [i for i in d if sp != space or i not in written])
                                    for sp, d in self._doomed_vectors]

    def _delete_vectors(self, space: str, ids: list[str]) -> None:
        """Delete vectors once the enclosing transaction has committed (now if there is none); a
        transactional vector backend deletes inside the transaction, rolled back with it."""
        if self._store.depth and not self._vectors.transactional:
            self._doomed_vectors.append((space, ids))
        else:
            self._vectors.delete(space, ids)

    def _load_all(self) -> None:
        """(Re)build the in-memory cache from the store, in one consistent read."""
        self._drop_snapshots()
        self._nodes, self._edges, self._out, self._in = {}, {}, {}, {}
        if self._store.shared:
            self._db_version, nodes, edges = self._store.load_all()
            self._checked_at = time.monotonic()
        else:
            nodes, edges = self._store.load_nodes(), self._store.load_edges()
        for n in nodes:
            self._index_node(n)
        for e in edges:
            self._index_edge(e)
        if not self._vectors.transactional:
            self._drop_orphan_vectors()  # left by a crash between the vector write and the SQLite commit

    def _reload(self) -> None:
        self._load_all()
        self._synonyms_done = None
        self._touch()

    # ------------------------------------------------------------------ other processes' writes
    def refresh(self) -> bool:
        """Bring the in-memory structure up to date with writes other processes committed (server
        backend; a no-op on the embedded one), reading only the rows those writes touched. Returns
        True when something changed. Runs by itself at most every ``refresh_interval`` seconds on
        reads, at the start of every method run, and under the write lock before every write."""
        if not self._store.shared or self._closed:
            return False
        if not self._sync_lock.acquire(blocking=False):
            return False   # this process is writing: its cache is the newest there is
        try:
            if self._store.depth:
                return False
            if self._db_version < 0:   # a failed write lost the connection: reload everything
                self._reload()
                return True
            return self._apply_changes(self._store.changes_since(self._db_version))
        finally:
            self._sync_lock.release()

    def _maybe_refresh(self) -> None:
        if self._store.shared and time.monotonic() - self._checked_at >= self.refresh_interval:
            self.refresh()

    def _sync_in_transaction(self, conn: Any) -> None:
        """Called by the server backend under the KG's write lock, before the block's writes."""
        if self._db_version < 0:
            self._reload()
        else:
            self._apply_changes(self._store.changes_since(self._db_version, conn))

    def _apply_changes(self, changes: tuple | None) -> bool:
        self._checked_at = time.monotonic()
        if changes is None:   # the change log no longer reaches back to our version
            self._reload()
            return True
        version, nodes, dead_nodes, edges, dead_edges = changes
        if version == self._db_version and not (nodes or dead_nodes or edges or dead_edges):
            return False
        for n in nodes:
            self._index_node(n)
        for eid in dead_edges:
            self._unindex_edge(eid)
        for e in edges:
            old = self._edges.get(e.id)
            if old is not None and (old.src, old.dst) != (e.src, e.dst):
                self._unindex_edge(e.id)
            self._index_edge(e)
        for nid in dead_nodes:
            for eid in list(self._out.get(nid, [])) + list(self._in.get(nid, [])):
                self._unindex_edge(eid)
            self._unindex_node(nid)
        self._db_version = version
        self._synonyms_done = None
        self._touch()
        return True

    def _drop_orphan_vectors(self) -> None:
        """Remove vectors whose node (space "nodes") or relation edge (space "facts") is gone."""
        for space, alive in (("nodes", self._nodes), ("facts", self._edges)):
            orphans = [i for i in self._vectors.ids(space) if i not in alive]
            if orphans:
                self._vectors.delete(space, orphans)

    def _vector_state(self) -> tuple[int, int]:
        return self._vectors.version("nodes"), self._vectors.version("facts")

    # ------------------------------------------------------------------ embeddings
    embed_seconds: float = 0.0  # time spent inside the embedding model (reported by ingestion)

    def embed_texts(self, texts: Sequence[str], batch_size: int = 256, *, short: bool = False) -> np.ndarray:
        """Embed texts in batches; texts prefetched by :meth:`prefetch_embeddings` are not re-sent.

        ``short=True`` for entity names, titles and fact strings: an embedding with a space of its own
        for them (``"fast"``) uses it; any other embedding treats both alike."""
        missing = list(dict.fromkeys(t for t in texts if (short, t) not in self._prefetched))
        fresh: dict[str, list[float]] = {}
        if missing:
            t0 = time.perf_counter()
            for off in range(0, len(missing), batch_size):
                batch = missing[off:off + batch_size]
                vecs = embed_short_texts(self.embeddings, batch) if short else self.embeddings.embed_documents(batch)
                fresh.update(zip(batch, check_vectors(vecs, batch, self._vectors.dimension())))
            self.embed_seconds += time.perf_counter() - t0
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.asarray([self._prefetched[(short, t)] if (short, t) in self._prefetched else fresh[t] for t in texts],
                          dtype=np.float32)

    @contextmanager
    def prefetch_embeddings(self, texts: Iterable[str], short_texts: Iterable[str] = (), *,
                            vectors: Mapping[str, np.ndarray] | None = None) -> Iterator[None]:
        """Embed ``texts`` (passages) and ``short_texts`` (names, titles, facts: see :meth:`embed_texts`)
        in one batched call each and serve them from memory inside the block (ingestion embeds a
        whole document's chunks, titles, names and facts at once, and a bulk ingest several
        documents' at once). ``vectors``: passages the caller already embedded with this KG's
        embeddings (:meth:`embed_texts`), served as they are. Blocks nest: each forgets only what
        it fetched."""
        added: list[tuple[bool, str]] = []
        try:
            texts = list(texts)
            for t in dict.fromkeys(texts):
                if vectors is not None and t in vectors and (False, t) not in self._prefetched:
                    self._prefetched[(False, t)] = vectors[t]
                    added.append((False, t))
            wanted = [(short, t) for short, group in ((False, texts), (True, short_texts))
                      for t in dict.fromkeys(group) if t and (short, t) not in self._prefetched]
            if has_short_space(self.embeddings):   # two spaces: a call each
                groups = [[k for k in wanted if not k[0]], [k for k in wanted if k[0]]]
            else:   # one model for both: one call (a model call's fixed cost dominates small ingests)
                groups = [wanted]
            for group in groups:
                todo = list(dict.fromkeys(t for _, t in group))
                if todo:
                    vec = dict(zip(todo, self.embed_texts(todo, short=group[0][0])))
                    added += group
                    self._prefetched.update((k, vec[k[1]]) for k in group)
            yield
        finally:
            for key in added:
                self._prefetched.pop(key, None)

    def passage_embedding_text(self, text: str, title: str | None) -> str:
        """The string a chunk's vector embeds: ``"title\ntext"`` in a KG whose ``passage_text`` is
        ``"title+text"`` and whose document has a title, else the chunk text."""
        return f"{title}\n{text}" if title and self.passage_text == "title+text" else text

    def _embedding_text(self, n: Node) -> str:
        if n.kind != "chunk":
            return n.text
        # a title the extractor made up (an untitled document's) is shown, not embedded: offline it
        # is the passage's own first words
        return self.passage_embedding_text(n.text, None if n.attrs.get("generated_title") else n.attrs.get("title"))

    def embed_query(self, text: str) -> np.ndarray:
        """Unit query vector, LRU-cached (the same question is embedded once per process)."""
        vec = self._query_cache.get(text)
        if vec is None:
            t0 = time.perf_counter()
            vec = check_vectors([self.embeddings.embed_query(text)], [text], self._vectors.dimension())[0]
            self.embed_seconds += time.perf_counter() - t0
            vec = vec / (np.linalg.norm(vec) or 1.0)
            self._query_cache[text] = vec
            if len(self._query_cache) > 2048:
                self._query_cache.popitem(last=False)
        else:
            self._query_cache.move_to_end(text)
        return vec

    # ------------------------------------------------------------------ writes
    def add_nodes(self, nodes: Sequence[Node], *, source: str | None = None, embed: bool = True,
                  vectors: np.ndarray | None = None) -> list[str]:
        """Insert or update nodes; embeds the text of entity/chunk/anchor nodes not yet embedded.

        A node keeps its kind: updating an id with another kind raises :class:`KgmemInputError`
        (ids are derived per kind, and the kind decides embedding and every traversal filter)."""
        kinds: dict[str, str] = {}
        for n in nodes:
            if n.kind not in NODE_KINDS:
                raise KgmemInputError(f"unknown node kind {n.kind!r}; allowed: {', '.join(NODE_KINDS)}")
            check_storable(n.id, f"node id {n.id!r}")
            check_storable(n.text, f"the text of node {n.id!r}")
            old = self._nodes.get(n.id)
            kind = kinds.setdefault(n.id, old.kind if old is not None else n.kind)
            if kind != n.kind:
                raise KgmemInputError(
                    f"node {n.id!r} is a {kind!r} node and cannot become {n.kind!r}: give the {n.kind} node "
                    f"its own id (e.g. node_id({n.kind!r}, text)), or delete the old node's document first")
        with self.transaction():
            self._store.upsert_nodes(nodes)
            if source is not None:
                self._store.add_sources([n.id for n in nodes], [], source)
            for n in nodes:
                self._index_node(n)
            if vectors is not None:
                self._upsert_vectors("nodes", [n.id for n in nodes], vectors, [n.kind for n in nodes])
            elif embed:
                todo = [n for n in nodes if n.kind in EMBEDDED_KINDS]
                have = self._has_live_vectors("nodes", [n.id for n in todo])
                todo = [n for n, h in zip(todo, have) if not h]
                for short in (False, True):
                    part = [n for n in todo if (n.kind in SHORT_KINDS) == short]
                    if part:
                        self._upsert_vectors("nodes", [n.id for n in part],
                                             self.embed_texts([self._embedding_text(n) for n in part], short=short),
                                             [n.kind for n in part])
            self._touch()
        return [n.id for n in nodes]

    def add_node(self, kind: str, text: str, *, id: str | None = None, attrs: dict[str, Any] | None = None,
                 source: str | None = None, embed: bool = True) -> str:
        check_storable(text, f"the text of node {id or text[:40]!r}")   # before it is hashed into an id
        nid = id or (entity_id(text) if kind == "entity" else node_id(kind, text))
        self.add_nodes([Node(nid, kind, text, attrs or {})], source=source, embed=embed)
        return nid

    def add_edges(self, edges: Sequence[Edge], *, source: str | None = None, embed_facts: bool = True) -> list[str]:
        """Insert or update edges; relation edges are also embedded as fact text ("s r o")."""
        for e in edges:
            if e.kind not in EDGE_KINDS:
                raise KgmemInputError(f"unknown edge kind {e.kind!r}; allowed: {', '.join(EDGE_KINDS)}")
            check_storable(e.id, f"edge id {e.id!r}")
            check_storable(e.text, f"the text of edge {e.id!r}")
            if e.src not in self._nodes or e.dst not in self._nodes:
                missing = e.src if e.src not in self._nodes else e.dst
                raise KgmemInputError(f"edge {e.id} refers to unknown node {missing!r}: add the node first")
        with self.transaction():
            self._store.upsert_edges(edges)
            if source is not None:
                self._store.add_sources([], [e.id for e in edges], source)
            for e in edges:
                self._index_edge(e)
            if embed_facts:
                facts = [e for e in edges if e.kind == "relation"]
                have = self._has_live_vectors("facts", [e.id for e in facts])
                facts = [e for e, h in zip(facts, have) if not h]
                if facts:
                    self._upsert_vectors("facts", [e.id for e in facts], self.embed_texts(
                        [self.fact_text(e) for e in facts], short=True), ["relation"] * len(facts))
            self._touch()
        return [e.id for e in edges]

    def delete_edges(self, ids: Iterable[str]) -> int:
        """Remove edges (and their fact vectors); their end nodes stay. Returns how many existed."""
        ids = sorted({i for i in ids if i in self._edges})
        if ids:
            with self.transaction():
                self._store.delete_edges(ids)
                for eid in ids:
                    self._unindex_edge(eid)
                self._delete_vectors("facts", ids)
                self._touch()
        return len(ids)

    def add_edge(self, src: str, dst: str, kind: str, *, text: str = "", weight: float = 1.0,
                 attrs: dict[str, Any] | None = None, source: str | None = None) -> str:
        check_storable(text, f"the text of edge {src!r} -> {dst!r}")   # before it is hashed into an id
        e = Edge(edge_id(src, dst, kind, text), src, dst, kind, text, weight, attrs or {})
        self.add_edges([e], source=source)
        return e.id

    def add_triples(self, triples: Iterable[Any], *, source: str | None = None, text: str | None = None,
                    title: str | None = None, merge_threshold: float | None = 0.85,
                    meta: dict[str, Any] | None = None) -> "Any":
        """Add pre-extracted ``[subject, relation, object]`` triples (see ingest.pipeline); ``meta``
        is stored with the document row (provenance)."""
        from langgraph_kgmem.ingest.pipeline import add_triples

        return add_triples(self, triples, source=source, text=text, title=title, merge_threshold=merge_threshold,
                           meta=meta)

    def add_documents(self, docs: Iterable[Any], *, model: Any = None, **options: Any) -> "Any":
        """Chunk, extract and merge documents into the KG (see ingest.pipeline.add_documents)."""
        from langgraph_kgmem.ingest.pipeline import add_documents

        report = add_documents(self, docs, model=model, **options)
        if self._analyze_due(report):
            self._store.analyze()   # planner statistics for the bulk just loaded
        return report

    def add_records(self, records: Any, **options: Any) -> "Any":
        """Time-stamped observations → time/location/event nodes (see ingest.records)."""
        from langgraph_kgmem.ingest.records import add_records

        return add_records(self, records, **options)

    def add_synonym_edges(self, *, threshold: float = 0.8, weight_scale: float = 2.0, max_per_node: int = 50,
                          block: int = 2048) -> int:
        """Link entity pairs with cosine ≥ ``threshold`` by ``synonym`` edges weighted
        ``weight_scale × similarity`` (HippoRAG 2 / CatRAG). Vectorised in blocks.

        Idempotent: returns the number of edges added or changed, and when that is 0 nothing is
        written (``version`` stays, so snapshots and caches stay valid). A repeated call with the
        same options and no entity vector added or removed since returns 0 without comparing."""
        self._maybe_refresh()
        state = (threshold, weight_scale, max_per_node, self._vectors.version("nodes"))
        if self._synonyms_done == state:
            return 0
        # a shared backend compares only entities added since the last call (watermark in meta)
        mark_key = f"synonyms:{threshold:g}:{weight_scale:g}:{max_per_node}"
        since = int(self._store.get_meta(mark_key) or 0) if self._store.shared else 0
        # threshold and similarity are on MiniLM's scale; the fast embedding's names live in a static space
        pairs, mark = self._vectors.similar_pairs("nodes", "entity", short_threshold(self.embeddings, threshold),
                                                  max_per_node, since)
        new: list[Edge] = []
        for a, b, sim in pairs:
            if a not in self._nodes or b not in self._nodes:   # vectors of nodes deleted in this transaction
                continue
            sim = short_similarity(self.embeddings, sim)
            e = Edge(edge_id(a, b, "synonym"), a, b, "synonym", "", weight_scale * sim, {"similarity": round(sim, 6)})
            old = self._edges.get(e.id)
            if old is None or abs(old.weight - e.weight) > 1e-5 or \
                    abs(old.attrs.get("similarity", -2.0) - e.attrs["similarity"]) > 1e-5:
                new.append(e)
        if new or (self._store.shared and mark != since):
            with self.transaction():
                if new:
                    self.add_edges(new, source=DERIVED_SOURCE)
                if self._store.shared:
                    self._store.set_meta(mark_key, str(mark))
        self._synonyms_done = (threshold, weight_scale, max_per_node, self._vectors.version("nodes"))
        return len(new)

    def delete_document(self, doc_id: str) -> dict[str, int]:
        """Remove a document and everything only it contributed (nodes, edges, vectors)."""
        check_storable(doc_id, f"document id {doc_id!r}")   # no backend could hold it: refused alike on each
        if self._store.document(doc_id) is None:
            known = [d["id"] for d in self._store.documents()][:5]
            raise KgmemInputError(f"no document {doc_id!r} in KG {self.name!r}; known ids start with {known}")
        with self.transaction():
            doc_edges = self._store.doc_edge_ids(doc_id)
            nodes, edges = self._store.remove_document_sources(doc_id)
            doomed_nodes = set(nodes)
            doomed_edges = set(edges)
            for nid in doomed_nodes:
                doomed_edges.update(self._out.get(nid, []))
                doomed_edges.update(self._in.get(nid, []))
            # relation edges other documents keep must stop citing this document's chunks
            pruned = []
            for eid in doc_edges:
                e = self._edges.get(eid)
                if e is None or eid in doomed_edges or not e.attrs.get("chunks"):
                    continue
                chunks = [c for c in e.attrs["chunks"] if c not in doomed_nodes]
                if len(chunks) < len(e.attrs["chunks"]):
                    pruned.append(replace(e, attrs={**e.attrs, "chunks": chunks}))
            # time nodes that lose a time_next neighbour get relinked to the surviving ones
            relink = {x for eid in doomed_edges if (e := self._edges.get(eid)) is not None and e.kind == "time_next"
                      for x in (e.src, e.dst)} - doomed_nodes
            self._store.delete_edges(sorted(doomed_edges))
            self._store.delete_nodes(sorted(doomed_nodes))
            self._store.upsert_edges(pruned)
            self._store.delete_document_row(doc_id)
            for eid in sorted(doomed_edges):
                self._unindex_edge(eid)
            for e in pruned:
                self._index_edge(e)
            for nid in doomed_nodes:
                self._unindex_node(nid)
            self._delete_vectors("nodes", sorted(doomed_nodes))
            self._delete_vectors("facts", sorted(doomed_edges))
            self._touch()
            if relink:
                from langgraph_kgmem.ingest.records import relink_time_chain

                relink_time_chain(self, sorted(relink))
        return {"nodes_removed": len(doomed_nodes), "edges_removed": len(doomed_edges)}

    # ------------------------------------------------------------------ reads
    def node(self, nid: str) -> Node | None:
        self._maybe_refresh()
        return self._nodes.get(nid)

    def edge(self, eid: str) -> Edge | None:
        return self._edges.get(eid)

    def has_node(self, nid: str) -> bool:
        return nid in self._nodes

    def nodes(self, kind: str | None = None) -> list[Node]:
        self._maybe_refresh()
        return [n for n in self._nodes.values() if kind is None or n.kind == kind]

    def edges(self, kind: str | None = None) -> list[Edge]:
        self._maybe_refresh()
        return [e for e in self._edges.values() if kind is None or e.kind == kind]

    def node_count(self) -> int:
        return len(self._nodes)

    def edge_count(self) -> int:
        return len(self._edges)

    def edges_of(self, nid: str, *, direction: Direction = "both") -> list[Edge]:
        ids: list[str] = []
        if direction in ("out", "both"):
            ids.extend(self._out.get(nid, []))
        if direction in ("in", "both"):
            ids.extend(self._in.get(nid, []))
        return [self._edges[e] for e in ids]

    def neighbors(self, nid: str, *, kinds: Sequence[str] | None = None, relation: str | None = None,
                  node_kinds: Sequence[str] | None = None, direction: Direction = "both") -> list[tuple[Edge, Node]]:
        """(edge, neighbour) pairs in insertion order, filtered by edge kind, relation text
        (case-insensitive substring) and neighbour kind."""
        self._maybe_refresh()
        out = []
        rel = relation.lower() if relation else None
        for e in self.edges_of(nid, direction=direction):
            if kinds is not None and e.kind not in kinds:
                continue
            if rel is not None and rel not in e.text.lower() and rel != e.kind:
                continue
            other = e.dst if e.src == nid else e.src
            node = self._nodes.get(other)
            if node is None or (node_kinds is not None and node.kind not in node_kinds):
                continue
            out.append((e, node))
        return out

    def degree(self, nid: str, *, kinds: Sequence[str] | None = None) -> int:
        return len(self.neighbors(nid, kinds=kinds))

    def sources_of(self, nid: str) -> list[str]:
        """Document ids that contributed node (or edge) ``nid``."""
        if nid in self._edges:
            return self._store.edge_sources(nid)
        return self._store.node_sources(nid)

    def document_nodes(self, doc_id: str) -> list[str]:
        return self._store.doc_node_ids(doc_id)

    def documents(self) -> list[dict[str, Any]]:
        return self._store.documents()

    def document(self, doc_id: str) -> dict[str, Any] | None:
        return self._store.document(doc_id)

    def aliases(self, nid: str | None = None) -> list[tuple[str, str, float]]:
        return self._store.aliases(nid)

    def fact_text(self, e: Edge) -> str:
        s, o = self._nodes.get(e.src), self._nodes.get(e.dst)
        return f"{s.text if s else e.src} {e.text} {o.text if o else e.dst}".strip()

    def chunk_of_anchor(self, anchor_id: str) -> Node | None:
        for e, n in self.neighbors(anchor_id, kinds=("anchor_chunk",)):
            if n.kind == "chunk":
                return n
        return None

    # ------------------------------------------------------------------ vectors
    def vectors(self, ids: Sequence[str], space: str = "nodes") -> np.ndarray:
        """Unit vectors of ``ids`` (rows in the given order); see :meth:`has_vectors`. On the server
        backend recently read vectors are kept in a bounded cache until the next write."""
        try:
            if self._store.shared:
                return self._cached_vectors(space, ids)
            return self._vectors.get(space, ids)
        except KeyError as exc:
            missing = [i for i, h in zip(ids, self._vectors.has(space, ids)) if not h]
            raise KgmemInputError(
                f"no {space} vector for {missing[:3]}{' ...' if len(missing) > 3 else ''} in KG {self.name!r}: "
                f"only entity/chunk/anchor nodes (space 'nodes') and relation edges (space 'facts') are "
                "embedded; filter ids with kg.has_vectors(ids) first") from exc

    def has_vectors(self, ids: Sequence[str], space: str = "nodes") -> list[bool]:
        if self._store.shared:
            # read the missing vectors themselves (not just whether they exist): the caller nearly
            # always asks for them next, and then they come from the cache
            cache = self._vector_cache
            todo = list(dict.fromkeys(i for i in ids if (space, i) not in cache))
            if todo:
                found = self._vectors.get_present(space, todo)
                for i, v in found.items():
                    cache[(space, i)] = v
                while len(cache) > self.VECTOR_CACHE_SIZE:
                    cache.popitem(last=False)
            return [(space, i) in cache for i in ids]
        return self._vectors.has(space, ids)

    VECTOR_CACHE_SIZE = 20_000   # server backend: vectors kept per process (bounded; cleared by writes)

    def _cached_vectors(self, space: str, ids: Sequence[str]) -> np.ndarray:
        cache = self._vector_cache
        todo = list(dict.fromkeys(i for i in ids if (space, i) not in cache))
        if todo:
            for i, v in zip(todo, self._vectors.get(space, todo)):
                cache[(space, i)] = v
            while len(cache) > self.VECTOR_CACHE_SIZE:
                cache.popitem(last=False)
        if not ids:
            return np.zeros((0, self._vectors.dimension() or 0), dtype=np.float32)
        return np.asarray([cache[(space, i)] for i in ids], dtype=np.float32)

    def vector_matrix(self, kinds: Sequence[str] | None = None, space: str = "nodes") -> tuple[list[str], np.ndarray]:
        """Every vector of these kinds (analysis, migration). On the server backend this copies them
        into this process: for ranking use :meth:`similarity_scores`, computed in the server."""
        return self._vectors.matrix(space, kinds)

    def vector_ids(self, kinds: Sequence[str] | None = None, space: str = "nodes") -> list[str]:
        """Ids with a vector, of these kinds, in the order :meth:`similarity_scores` returns them."""
        return self._vectors.ids(space, kinds)

    def similarity_scores(self, query: str | np.ndarray, kinds: Sequence[str] | None = None,
                          space: str = "nodes") -> tuple[list[str], np.ndarray]:
        """Cosine of ``query`` with every vector of these kinds, ids in insertion order (the same
        order at the same :attr:`version`): e.g. dense scores of all passages."""
        vec = self.embed_query(query) if isinstance(query, str) else query
        ids, scores = self._vectors.scores(space, vec, kinds)
        if space == "facts" or kinds is not None and all(k in SHORT_KINDS for k in kinds):
            short: bool | list[bool] = True
        elif kinds is not None and not any(k in SHORT_KINDS for k in kinds):
            short = False   # e.g. every passage: no per-id lookup
        else:
            short = [(n := self._nodes.get(i)) is not None and n.kind in SHORT_KINDS for i in ids]
        return ids, block_cosines(self.embeddings, vec, scores, short).astype(np.asarray(scores).dtype)

    @traced("kg.nearest")
    def nearest(self, query: str | np.ndarray, k: int = 5, *, kinds: Sequence[str] | None = ("entity",),
                restrict: Sequence[str] | None = None) -> list[tuple[Node, float]]:
        """Nodes most similar to ``query`` (text or vector), best first, deterministic ties."""
        self._maybe_refresh()
        vec = self.embed_query(query) if isinstance(query, str) else query
        hits = [(self._nodes[i], s) for i, s in self._vectors.search("nodes", vec, k, kinds=kinds, restrict=restrict)
                if i in self._nodes]
        scores = block_cosines(self.embeddings, vec, [s for _, s in hits], [n.kind in SHORT_KINDS for n, _ in hits])
        return [(n, float(s)) for (n, _), s in zip(hits, scores)]

    @traced("kg.nearest_facts")
    def nearest_facts(self, query: str | np.ndarray, k: int = 5) -> list[tuple[Edge, float]]:
        self._maybe_refresh()
        vec = self.embed_query(query) if isinstance(query, str) else query
        hits = [(self._edges[i], s) for i, s in self._vectors.search("facts", vec, k) if i in self._edges]
        scores = block_cosines(self.embeddings, vec, [s for _, s in hits], [True] * len(hits))
        return [(e, float(s)) for (e, _), s in zip(hits, scores)]

    # ------------------------------------------------------------------ subgraphs & algorithms
    def subgraph(self, node_ids: Iterable[str], *, hops: int = 0, edge_kinds: Sequence[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Nodes within ``hops`` of ``node_ids`` and the edges among them, as plain dicts."""
        frontier = [n for n in dict.fromkeys(node_ids) if n in self._nodes]
        seen = dict.fromkeys(frontier)
        for _ in range(hops):
            nxt = []
            for nid in frontier:
                for e, nb in self.neighbors(nid, kinds=edge_kinds):
                    if nb.id not in seen:
                        seen[nb.id] = None
                        nxt.append(nb.id)
            frontier = nxt
        edges = {}
        for nid in seen:
            for e in self.edges_of(nid, direction="out"):
                if e.dst in seen and (edge_kinds is None or e.kind in edge_kinds):
                    edges[e.id] = e
        return {"nodes": [self._nodes[n].to_dict() for n in seen], "edges": [e.to_dict() for e in edges.values()]}

    def snapshot(self, edge_kinds: Sequence[str] | None = None, *, symmetric: bool = True) -> GraphSnapshot:
        """CSR snapshot over the given edge kinds (all by default), cached.

        Writes after it was built are not a rebuild: the nodes they add become new rows and the
        edge weights they add, change or remove go into the snapshot's small ``delta`` matrix (see
        :func:`~langgraph_kgmem.kg.ppr.extend_snapshot`), replayed here on the next call — also
        for another process's writes, which :meth:`refresh` brings in as the same changes. Only a
        removed node, or more changes than a quarter of the graph, rebuilds it."""
        self._maybe_refresh()
        if self._graph_log:
            self._replay_graph_log()
        key = (tuple(sorted(edge_kinds)) if edge_kinds is not None else None, symmetric)
        snap = self._snapshots.get(key)
        if snap is None:
            table = self._node_table
            fresh = table is None or len(table) != len(self._nodes)
            ids = list(self._nodes)
            index = {nid: i for i, nid in enumerate(ids)} if fresh else table.index
            es = [e for e in self._edges.values() if edge_kinds is None or e.kind in edge_kinds]
            src = np.fromiter((index[e.src] for e in es), dtype=np.int64, count=len(es))
            dst = np.fromiter((index[e.dst] for e in es), dtype=np.int64, count=len(es))
            w = np.fromiter((e.weight for e in es), dtype=np.float64, count=len(es))
            if fresh:
                # rows by falling degree: the hubs' scores, read by most of the power iteration's
                # gathers, sit together in cache (1.5x faster on power-law graphs)
                order = degree_order(len(ids), src, dst)
                rank = np.empty(len(ids), dtype=np.int64)
                rank[order] = np.arange(len(ids))
                src, dst = rank[src], rank[dst]
                ids = [ids[i] for i in order.tolist()]
                table = self._node_table = NodeTable(ids, [self._nodes[i].kind for i in ids])
            snap = build_snapshot(table.ids, (), src, dst, w, symmetric=symmetric, table=table)
            self._snapshots[key] = snap
        return snap

    def _replay_graph_log(self) -> None:
        log, self._graph_log = self._graph_log, []
        table = self._node_table
        if not self._snapshots or table is None:
            self._drop_snapshots()
            return
        added = [c for c in log if c[0] == "node"]
        if added:
            table.append([c[1] for c in added], [c[2] for c in added])
        edges = [c for c in log if c[0] == "edge"]
        if len(table) != len(self._nodes) or any(c[1] not in table.index or c[2] not in table.index for c in edges):
            self._drop_snapshots()   # the cache changed in a way the log did not see: start over
            return
        for (kinds, symmetric), snap in list(self._snapshots.items()):
            mine = [c for c in edges if kinds is None or c[3] in kinds]
            src = np.fromiter((table.index[c[1]] for c in mine), dtype=np.int64, count=len(mine))
            dst = np.fromiter((table.index[c[2]] for c in mine), dtype=np.int64, count=len(mine))
            dw = np.fromiter((c[4] for c in mine), dtype=np.float64, count=len(mine))
            if symmetric:
                src, dst, dw = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([dw, dw])
            self._snapshots[(kinds, symmetric)] = extend_snapshot(snap, len(table), src, dst, dw)

    PUSH_MIN_ENTRIES = PUSH_MIN_ENTRIES   # "auto": consider push once the snapshot has this many directed entries

    def ppr_scores(self, seeds: Mapping[str, float] | np.ndarray, *, snapshot: GraphSnapshot | None = None,
                   edge_kinds: Sequence[str] | None = None, damping: float = 0.5,
                   overrides: Mapping[tuple[str, str], float] | None = None, method: PprMethod = "auto",
                   eps: float = 1e-5, tol: float = 1e-8, max_iter: int = 200, strict: bool = False,
                   top_k: int | None = None, top_rows: np.ndarray | None = None) -> PprResult:
        """PPR scores over a snapshot's rows, for callers that rank rows themselves (CatRAG).

        ``seeds`` is ``{node id: reset weight}`` or a reset vector over the rows of ``snapshot``
        (default: :meth:`snapshot` of ``edge_kinds``). Other arguments as :meth:`ppr`; with
        ``top_k`` (and ``top_rows``, the rows ranked) a non-strict exact run stops once that
        top-k is certified."""
        if method not in ("auto", "exact", "push"):
            raise KgmemInputError(f"ppr method {method!r}: use 'auto', 'exact' or 'push'")
        if not (isinstance(eps, (int, float)) and 0.0 < eps < 1.0):
            raise KgmemInputError(f"ppr eps {eps!r}: use a number in (0, 1), e.g. 1e-5 (smaller = closer to exact)")
        snap = snapshot if snapshot is not None else self.snapshot(edge_kinds)
        if isinstance(seeds, Mapping):
            reset: dict[int, float] = {}
            for nid, w in seeds.items():
                i = snap.index.get(nid)
                if i is not None and np.isfinite(w) and w > 0:
                    reset[i] = reset.get(i, 0.0) + float(w)
        else:
            reset = seeds
        ov = None
        if overrides:
            ov = {(snap.index[a], snap.index[b]): float(m) for (a, b), m in overrides.items()
                  if a in snap.index and b in snap.index}
        return ppr_scores(snap, reset, method=method, damping=damping, eps=eps, overrides=ov, tol=tol,
                          max_iter=max_iter, strict=strict, top_k=top_k, top_rows=top_rows,
                          push_min_entries=self.PUSH_MIN_ENTRIES)

    @traced("kg.ppr")
    def ppr(self, seeds: Mapping[str, float], *, damping: float = 0.5, edge_kinds: Sequence[str] | None = None,
            overrides: Mapping[tuple[str, str], float] | None = None, tol: float = 1e-8, max_iter: int = 200,
            node_kinds: Sequence[str] | None = None, top_k: int | None = None,
            method: PprMethod = "auto", eps: float = 1e-5, strict: bool = False) -> list[tuple[str, float]]:
        """Personalized PageRank from ``seeds`` (node id → reset weight).

        ``overrides`` maps directed pairs ``(src_id, dst_id)`` to weight multipliers for this call
        only; the stored graph and the cached snapshot are never changed. Returns (node id, score)
        best first, filtered by ``node_kinds`` and cut to ``top_k``.

        ``method``: ``"exact"`` is the power iteration over the whole graph: with ``strict`` in
        float64 to ``tol``; otherwise in float32 to ``max(tol, 1e-6)``, stopping earlier once the
        ``top_k`` is certified (see :func:`~langgraph_kgmem.kg.ppr.personalized_pagerank`).
        ``"push"`` is forward push (:func:`~langgraph_kgmem.kg.ppr.push_ppr`), which touches only
        what the seeds' residual mass reaches (each score low by at most ``eps`` × the node's
        degree; untouched nodes score 0). ``"auto"`` (default) never answers less accurately than
        the exact method would: it runs exact below :attr:`PUSH_MIN_ENTRIES` (400,000) directed
        entries (an edge walkable both ways counts twice) or when ``strict``; above, it pushes from
        ``eps`` down (tenfold steps) until the answer is as good as exact's — with ``top_k`` the
        top-k set certified (among ``node_kinds``), without it an L1 error within what ``tol``
        gives the exact iteration — and runs exact instead once push would read more entries than
        a few exact iterations (:func:`~langgraph_kgmem.kg.ppr.auto_ppr`). Seeds of which none is
        in the graph reset the walk uniformly (as the exact method does), whatever the method.
        """
        if method not in ("auto", "exact", "push"):
            raise KgmemInputError(f"ppr method {method!r}: use 'auto', 'exact' or 'push'")
        snap = self.snapshot(edge_kinds)
        used = choose_method(snap, method, self.PUSH_MIN_ENTRIES, strict=strict)
        # rows of the wanted kinds: a whole-graph pass, cached per snapshot, that a forced push never needs
        rows = self._kind_rows(snap, node_kinds) if node_kinds is not None and used != "push" else None
        res = self.ppr_scores(seeds, snapshot=snap, damping=damping, overrides=overrides, method=used, eps=eps,
                              tol=tol, max_iter=max_iter, strict=strict, top_k=top_k, top_rows=rows)
        if node_kinds is not None:
            if res.method == "push":
                rows = res.rows[np.isin(snap.kinds[res.rows], list(node_kinds))]
            elif rows is None:   # push fell back to the exact method (no seed in the graph)
                rows = self._kind_rows(snap, node_kinds)
        return [(snap.node_ids[r], s) for r, s in res.ranked(rows, top_k)]

    def _kind_rows(self, snap: GraphSnapshot, node_kinds: Sequence[str]) -> np.ndarray:
        kinds = sorted(node_kinds)
        return snap._cached(f"rows:{kinds}", lambda: np.flatnonzero(np.isin(snap.kinds, kinds)))

    def to_networkx(self) -> Any:
        """A networkx MultiDiGraph copy (for analysis and drawing; not used on hot paths)."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for n in self._nodes.values():
            g.add_node(n.id, kind=n.kind, text=n.text)
        for e in self._edges.values():
            g.add_edge(e.src, e.dst, key=e.id, kind=e.kind, text=e.text, weight=e.weight)
        return g

    def stats(self) -> dict[str, Any]:
        self._maybe_refresh()
        nodes: dict[str, int] = {}
        for n in self._nodes.values():
            nodes[n.kind] = nodes.get(n.kind, 0) + 1
        edges: dict[str, int] = {}
        for e in self._edges.values():
            edges[e.kind] = edges.get(e.kind, 0) + 1
        return {
            "name": self.name,
            "path": str(self.path) if self.path else None,
            "backend": "postgres" if self._store.shared else "sqlite",
            "vector_backend": self._vector_backend,
            "embeddings": embeddings_id(self.embeddings),
            "embedding_layout": getattr(self.embeddings, "layout", None),
            "passage_text": self.passage_text,
            "documents": self._store.document_count(),
            "nodes": len(self._nodes),
            "edges": len(self._edges),
            "nodes_by_kind": dict(sorted(nodes.items())),
            "edges_by_kind": dict(sorted(edges.items())),
            "aliases": self._store.alias_count(),
            "vectors": {"nodes": self._vectors.count("nodes"), "facts": self._vectors.count("facts")},
        }

    # internal access for ingestion
    @property
    def graph_store(self) -> GraphBackend:
        return self._store

    @property
    def vector_index(self) -> VectorBackend:
        return self._vectors


def _identity(name: str | None, stored: str | None, where: str) -> str:
    """The KG's name: the stored one; a different one asked for is an error, not a second namespace."""
    if stored is None:
        return name or "default"
    if name is not None and name != stored:
        raise KgmemInputError(
            f"{where} holds KG {stored!r}, not {name!r}: its memory lives under {stored!r}. Open it with "
            f"name={stored!r} or without a name, or use another directory for a KG called {name!r}")
    return stored


@asynccontextmanager
async def open_async_persistence(path: Path | None, *, uri: str | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The async twin of :func:`open_persistence` (same database, same tables), closed on exit."""
    uri = uri or os.environ.get("KGMEM_POSTGRES_URI")
    if uri:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore
        from psycopg import AsyncConnection
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        from langgraph_kgmem.kg.postgres import SCHEMA_LOCK, database_label, storage_error

        pool = AsyncConnectionPool(uri, min_size=1, max_size=8, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        try:
            await pool.open(wait=True, timeout=15)
            saver = AsyncPostgresSaver(pool, serde=strict_serializer(database_label(uri)))
            store = AsyncPostgresStore(pool)
            # one migrator at a time, polled (see open_persistence)
            async with await AsyncConnection.connect(uri, autocommit=True) as conn:
                while not (await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                                     (SCHEMA_LOCK[0], 1))).fetchone())[0]:
                    await asyncio.sleep(0.05)
                try:
                    await saver.setup()
                    await store.setup()
                finally:
                    await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SCHEMA_LOCK[0], 1))
        except Exception as exc:
            await pool.close()
            if isinstance(exc, KgmemError):
                raise
            raise storage_error(exc, uri, "setting up the async checkpointer and store") from exc
        try:
            yield saver, store
        finally:
            await pool.close()
        return
    if path is None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        yield InMemorySaver(), InMemoryStore()
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    import aiosqlite

    db = str(private_file(Path(path) / MEMORY_DB_FILE))
    # checked on a plain connection first: a foreign or corrupt file is refused before setup
    # creates anything in it
    with closing(sqlite3.connect(db)) as probe:
        check_sqlite_file(probe, db, MEMORY_TABLES, "a langgraph_kgmem memory database")
    # the saver built on its own connection: from_conn_string takes no serializer
    async with aiosqlite.connect(db) as conn, AsyncSqliteStore.from_conn_string(db) as store:
        saver = AsyncSqliteSaver(conn, serde=strict_serializer(db))
        try:
            with sqlite_setup_lock(db):   # processes opening one new database set it up in turn
                await saver.setup()
                await store.setup()
        except sqlite3.DatabaseError as exc:
            raise sqlite_open_error(exc, db, "a langgraph_kgmem memory database") from exc
        yield saver, store


def open_persistence(path: Path | None, *, uri: str | None = None) -> tuple[Any, Any]:
    """(checkpointer, store) on one database: the KG's own PostgreSQL database (``uri``) or
    ``KGMEM_POSTGRES_URI``, else SQLite in ``path`` (in memory without one)."""
    uri = uri or os.environ.get("KGMEM_POSTGRES_URI")
    if uri:
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.store.postgres import PostgresStore
            from psycopg import Connection
        except ImportError as exc:  # pragma: no cover - optional extra
            from langgraph_kgmem.errors import ConfigurationError

            raise ConfigurationError(
                f"{'KGMEM_POSTGRES_URI is set' if uri == os.environ.get('KGMEM_POSTGRES_URI') else 'a postgresql:// KG'}"
                " needs the Postgres checkpointer and store, which are missing: "
                "pip install 'langgraph-kgmem[postgres]'") from exc
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from langgraph_kgmem.kg.postgres import SCHEMA_LOCK, database_label, storage_error

        # a pool, so threads (app.batch) and the KG's own connections never share one connection
        pool = ConnectionPool(uri, min_size=1, max_size=8, open=False,
                              kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        try:
            pool.open(wait=True, timeout=15)
            saver = PostgresSaver(pool, serde=strict_serializer(database_label(uri)))
            store = PostgresStore(pool)
            # one migrator at a time; a session lock, not a transaction: the saver's migrations
            # create indexes CONCURRENTLY, which wait for every open transaction
            # waiting is polled: a session blocked in pg_advisory_lock holds a snapshot, which such
            # an index build waits for, while the lock holder waits for the build (a deadlock)
            with Connection.connect(uri, autocommit=True) as conn:
                while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (SCHEMA_LOCK[0], 1)).fetchone()[0]:
                    time.sleep(0.05)
                try:
                    saver.setup()
                    store.setup()
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SCHEMA_LOCK[0], 1))
        except Exception as exc:
            pool.close()
            if isinstance(exc, KgmemError):
                raise
            raise storage_error(exc, uri, "setting up the checkpointer and store") from exc
        return saver, store
    if path is None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        return InMemorySaver(), InMemoryStore()
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    db = str(private_file(Path(path) / MEMORY_DB_FILE))
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=strict_serializer(db))
    store = SqliteStore(sqlite3.connect(db, check_same_thread=False, isolation_level=None))
    try:
        check_sqlite_file(saver.conn, db, MEMORY_TABLES, "a langgraph_kgmem memory database")
        with sqlite_setup_lock(db):   # processes opening one new database set it up in turn
            saver.setup()
            store.setup()
    except BaseException as exc:
        saver.conn.close()
        store.conn.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise sqlite_open_error(exc, db, "a langgraph_kgmem memory database") from exc
        raise
    return saver, store
