"""The knowledge graph every method shares: one facade over a registered storage backend.

:class:`KnowledgeGraphCore` holds what every KG does whatever stores it: reads, writes (each in
:meth:`~KnowledgeGraphCore.transaction`, the one write path), the in-memory structure cache
(:mod:`~langgraph_kgmem.kg.structure`, refreshed from the database's change log when another
process writes), the embedding cache (:mod:`~langgraph_kgmem.kg.embedding_cache`), vector reads
and the PPR entry points. Which backend stores it is decided once, by
:func:`~langgraph_kgmem.kg.backends.open_backend`: a directory (SQLite + Chroma or numpy vectors,
one writer process) or a ``postgresql://`` URI (PostgreSQL + pgvector, many processes and KGs).

The public :class:`langgraph_kgmem.KnowledgeGraph` adds, above this layer, the ingest verbs
(``add_documents``, ``add_triples``, ``add_records``) and the methods' checkpointer and memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence, TypeVar

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_kgmem.embeddings import embeddings_id, get_embeddings
from langgraph_kgmem.errors import KgmemInputError, check_storable
from langgraph_kgmem.embeddings.fast import block_cosines, short_similarity, short_threshold
from langgraph_kgmem.kg.backends import (DERIVED_SOURCE, GraphBackend, OpenedBackend, VectorBackend, open_backend,
                                         open_in_memory)
from langgraph_kgmem.kg.embedding_cache import EmbeddingCache
from langgraph_kgmem.kg.ppr import PUSH_MIN_ENTRIES, GraphSnapshot, PprMethod, PprResult, choose_method, ppr_scores
from langgraph_kgmem.kg.stored import checked_graph
from langgraph_kgmem.kg.structure import GraphIndex
from langgraph_kgmem.kg.sync import ChangeFeed
from langgraph_kgmem.kg.time_chain import BATCH_SIZE, chain_changes
from langgraph_kgmem.kg.types import (EDGE_KINDS, NODE_KINDS, Edge, Node, check_document_id, check_kg_name,
                                     content_hash, edge_id, entity_id, node_id)
from langgraph_kgmem.kg.vector_cache import VectorReadCache
from langgraph_kgmem.tracing import traced

logger = logging.getLogger(__name__)

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
KG = TypeVar("KG", bound="KnowledgeGraphCore")
TEXT_SPACE = "texts"          # the vector space of KnowledgeGraphCore.text_vectors
TEXT_VECTOR_BATCH = 4096      # ids per lookup in text_vectors
# past this many ids read one by one in a KG version, document_hashes scans every document row
# instead (a point read is a round trip on PostgreSQL)
HASH_READ_ALL = 256
SOURCES_KEPT = 50_000   # node/edge sources remembered per KG version (sources_of_many) before starting afresh
# a remote backend's vectors of the kinds scored, at most this many, are scored in this process,
# from a copy (1 GB of float32 at 256 dimensions); more are scored in the server
SCORE_COPY_MAX_ROWS = 1_000_000
UNIT_TOLERANCE = 1e-6   # a score copy whose rows' norms all lie this close to 1 keeps the server's rows


def text_vector_id(text: str) -> str:
    """The id of ``text``'s vector in the ``"texts"`` space: its content hash (``txt-`` + 32 hex digits)."""
    return "txt-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class KnowledgeGraphCore:
    """A named, persistent knowledge graph: reads, writes, transactions, caches and PPR.

    Open one with :meth:`open` (a directory or a database URI) or :meth:`in_memory` (tests).
    """

    PUSH_MIN_ENTRIES = PUSH_MIN_ENTRIES   # "auto": consider push once the snapshot has this many directed entries

    def __init__(self, backend: OpenedBackend, embeddings: Embeddings, *, name: str,
                 refresh_interval: float = 1.0) -> None:
        self.name = name
        self.path = backend.path
        self.uri = backend.uri
        self._backend = backend
        self._store: GraphBackend = backend.store
        self._vectors: VectorBackend = backend.vectors
        self._graph = GraphIndex()
        self._embedder = EmbeddingCache(embeddings, self._vectors.dimension)
        self._version = 0
        self._vector_cache = VectorReadCache(self._vectors)   # used by remote vector backends only
        # remote backends: (space, kinds) -> (version, ids, unit rows) for similarity_scores
        # (None, None: a space too large to copy, scored in the server)
        self._score_copies: dict[tuple[str, tuple[str, ...] | None],
                                 tuple[int, list[str] | None, np.ndarray | None]] = {}
        # copies whose rows are the server's own (stored unit vectors): (their rows, id → row),
        # so vectors() and has_vectors() answer from them without a round trip
        self._copy_positions: dict[tuple[str, tuple[str, ...] | None], tuple[np.ndarray, dict[str, int]]] = {}
        self._closed = False
        self._doomed_vectors: list[tuple[str, list[str]]] = []   # deleted after the outermost commit
        self._synonyms_done: tuple | None = None                 # add_synonym_edges state with nothing left to do
        # (version, doc id → content hash or None, whether the map holds every document)
        self._doc_hashes: tuple[int, dict[str, str | None], bool] | None = None
        self._corpus_hash: tuple[dict[str, str | None], str] | None = None   # (the map it hashed, corpus_hash())
        self._sources: tuple[int, dict[str, list[str]]] | None = None   # (version, node/edge id → its sources)
        # documents ingested since the planner statistics were last refreshed, and the KG's documents then
        self._unanalyzed, self._analyzed_docs = 0, 0
        self._feed = ChangeFeed(self._store, self._graph, name=name, reload=self._reload, changed=self._changed,
                                refresh_interval=refresh_interval)
        self._load_all()
        self._check_embeddings()

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls: type[KG], path: str | os.PathLike[str], *, name: str | None = None,
             embeddings: Embeddings | str | None = None,
             vector_backend: Literal["chroma", "memory"] | None = None, create: bool = True,
             refresh_interval: float = 1.0) -> KG:
        """Create or reopen a KG: in directory ``path`` (embedded), or in the PostgreSQL database a
        ``postgresql://`` URI names (server backend; pgvector needed; many KGs per database).

        Args:
            name: the KG's name, which keys its memory namespace. ``None`` reopens with the stored
                name (a new KG is called ``"default"``); a name other than the stored one is an error.
                In a database, the name picks the KG.
            embeddings: an Embeddings object or a name (``"local"``, ``"fast"``, ``"hash"``, ...);
                default ``$KGMEM_EMBEDDINGS``. A KG must be reopened with the embeddings it was built with.
            vector_backend: embedded KGs: ``"chroma"`` (default for a new KG) or ``"memory"`` (numpy,
                saved to ``vectors.npz``); an existing directory's own backend by default.
            create: False: refuse a target that holds no KG yet.
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
        if name is not None:
            check_kg_name(name)
        backend = open_backend(path, name=name, create=create, vector_backend=vector_backend)
        try:
            stored = backend.store.get_meta("name")
            kg = cls(backend, get_embeddings(embeddings), name=_identity(name, stored, str(path)),
                     refresh_interval=refresh_interval)
        except BaseException:
            backend.close()
            raise
        logger.info("opened KG %r (%s) with %d nodes, %d edges", kg.name, backend.backend, kg.node_count(),
                    kg.edge_count())
        return kg

    @classmethod
    def in_memory(cls: type[KG], *, name: str = "default", embeddings: Embeddings | str | None = "hash") -> KG:
        """A throw-away KG (SQLite ``:memory:`` + numpy vectors); defaults to the hashing embedding."""
        return cls(open_in_memory(), get_embeddings(embeddings), name=check_kg_name(name))

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
        """Write what is deferred and release the storage (the directory lock too, also when
        writing fails). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._backend.close()

    def __enter__(self: KG) -> KG:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, path={str(self.path) if self.path else None!r}, " \
               f"nodes={len(self._graph.nodes)}, edges={len(self._graph.edges)})"

    # ------------------------------------------------------------------ transactions and caches
    def _touch(self) -> None:
        self._version += 1
        self._doc_hashes = None
        self._sources = None
        self._vector_cache.clear()
        self._score_copies = {}
        self._copy_positions = {}

    @property
    def schema_version(self) -> int:
        """The storage schema version this KG is stored with (opening an older KG migrated it to the
        current one: :mod:`~langgraph_kgmem.kg.backends.schema`)."""
        return self._store.schema_version

    @property
    def version(self) -> int:
        """Increases on every write; caches keyed on it stay valid until the graph changes."""
        return self._version

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all of them land in the store or none.

        On failure the in-memory cache is reloaded from the store and the vectors the failed block
        added are dropped, so structure and vectors agree again. The outermost block makes the
        vectors it added durable (a journal on the embedded backend) just before it commits (a
        crash in between leaves vectors without nodes, dropped at the next open), and deletes
        vectors only after the commit (a rollback never loses the vector of a node it restores)."""
        outer = self._store.depth == 0
        if outer:
            self._feed.lock.acquire()
        try:
            if outer and self._store.shared:
                self._store.on_begin = self._sync_in_transaction
            with self._store.transaction():
                yield
                if outer:
                    self._vectors.commit()   # the block's vectors are durable (journaled) before its structure commits
        except BaseException:
            if outer:
                logger.debug("KG %r: a transaction rolled back; reloading the cache", self.name)
                self._doomed_vectors.clear()
                self._vectors.discard_pending()
                try:
                    self._reload()
                except Exception:  # noqa: BLE001 - the database is gone: reload at the next access
                    logger.warning("KG %r: reloading after a rollback failed; retrying at the next access",
                                   self.name)
                    self._feed.lost()
                finally:
                    self._feed.lock.release()
            raise
        if outer:
            try:
                if self._store.shared:
                    self._feed.committed()
                while self._doomed_vectors:
                    space, ids = self._doomed_vectors.pop()
                    self._vectors.delete(space, ids)
            finally:
                self._feed.lock.release()

    def _has_live_vectors(self, space: str, ids: list[str]) -> list[bool]:
        """Which ids have a vector that survives this transaction (one deleted earlier in it, on a
        backend that deletes at commit, does not: a replaced document re-adds such nodes)."""
        have = self._vectors.has(space, ids)
        doomed = {i for sp, d in self._doomed_vectors if sp == space for i in d}
        return [h and i not in doomed for i, h in zip(ids, have)]

    def _upsert_vectors(self, space: str, ids: list[str], vectors: np.ndarray, kinds: list[str], *,
                        normalized: bool = False) -> None:
        """Write vectors; ids deleted earlier in this transaction are no longer deleted at commit."""
        self._vectors.upsert(space, ids, vectors, kinds, normalized=normalized)
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
        version, nodes, edges = self._store.load_all()
        self._graph.load(*checked_graph(nodes, edges, getattr(self._store, "label", f"KG {self.name!r}")))
        if self._store.shared:
            self._feed.loaded(version)
        if not self._vectors.transactional:
            self._drop_orphan_vectors()  # left by a crash between the vector write and the structure's commit

    def _reload(self) -> None:
        self._load_all()
        self._synonyms_done = None
        self._touch()

    def _drop_orphan_vectors(self) -> None:
        """Remove vectors whose node (space "nodes") or relation edge (space "facts") is gone."""
        for space, alive in (("nodes", self._graph.nodes), ("facts", self._graph.edges)):
            orphans = [i for i in self._vectors.ids(space) if i not in alive]
            if orphans:
                logger.info("KG %r: dropping %d %s vectors a crash left without their graph rows",
                            self.name, len(orphans), space)
                self._vectors.delete(space, orphans)

    def drop_snapshots(self) -> None:
        """Forget the cached PPR snapshots: the next :meth:`snapshot` builds them from scratch, as
        a fresh process would (the cache is otherwise kept up to date by every write)."""
        self._graph.drop_snapshots()

    # ------------------------------------------------------------------ other processes' writes
    def refresh(self) -> bool:
        """Bring the in-memory structure up to date with writes other processes committed (server
        backend; a no-op on the embedded one), reading only the rows those writes touched. Returns
        True when something changed. Runs by itself at most every ``refresh_interval`` seconds on
        reads, at the start of every method run, and under the write lock before every write."""
        return not self._closed and self._feed.refresh()

    @property
    def refresh_interval(self) -> float:
        """Server backend: at most this many seconds pass between reads' checks for other
        processes' writes."""
        return self._feed.refresh_interval

    @refresh_interval.setter
    def refresh_interval(self, seconds: float) -> None:
        self._feed.refresh_interval = seconds

    def _maybe_refresh(self) -> None:
        if self._feed.due():
            self.refresh()

    def _sync_in_transaction(self, conn: Any) -> None:
        """Called by the server backend under the KG's write lock, before the block's writes."""
        self._feed.catch_up(conn)

    def _changed(self) -> None:
        """Other processes' writes were applied to the cache."""
        self._synonyms_done = None
        self._touch()

    # ------------------------------------------------------------------ embeddings
    @property
    def embeddings(self) -> Embeddings:
        """The embedding model every vector of this KG comes from."""
        return self._embedder.embeddings

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self._embedder.embeddings = value

    @property
    def embed_seconds(self) -> float:
        """Seconds spent inside the embedding model by this KG so far (ingestion reports the part it caused)."""
        return self._embedder.seconds

    def embed_texts(self, texts: Sequence[str], batch_size: int = 256, *, short: bool = False) -> np.ndarray:
        """Embed texts in batches; texts prefetched by :meth:`prefetch_embeddings` are not re-sent.

        ``short=True`` for entity names, titles and fact strings: an embedding with a space of its own
        for them (``"fast"``) uses it; any other embedding treats both alike."""
        return self._embedder.embed_texts(texts, batch_size, short=short)

    def prefetch_embeddings(self, texts: Iterable[str], short_texts: Iterable[str] = (), *,
                            vectors: Mapping[str, np.ndarray] | None = None) -> Any:
        """Context manager: embed ``texts`` (passages) and ``short_texts`` (names, titles, facts: see
        :meth:`embed_texts`) in one batched call each and serve them from memory inside the block
        (ingestion embeds a whole document's chunks, titles, names and facts at once, and a bulk
        ingest several documents' at once). ``vectors``: passages the caller already embedded with
        this KG's embeddings, served as they are. Blocks nest: each forgets only what it fetched."""
        return self._embedder.prefetch_embeddings(texts, short_texts, vectors=vectors)

    def embed_query(self, text: str) -> np.ndarray:
        """Unit query vector, LRU-cached (the same question is embedded once per process)."""
        return self._embedder.embed_query(text)

    def text_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of short texts that are no row of the graph (a method's symbols: relation
        phrases, phrase-parser names, ``"h r t"`` lines), each embedded once per KG: kept in the
        KG's vector store, space ``"texts"``, under the text's content id (:func:`text_vector_id`),
        so later questions and other processes read them instead of embedding them again.
        Embedded as :meth:`embed_texts` with ``short=True`` does. A text's vector never goes stale
        (the id is its content and the KG keeps one embedding model), so a changed or deleted
        document leaves nothing to invalidate; texts no longer used stay, as a cache's entries do."""
        texts = list(texts)
        ids = [text_vector_id(t) for t in texts]
        if not ids:
            return np.zeros((0, self._vectors.dimension() or 0), dtype=np.float32)
        first = dict(zip(ids, texts))
        out = []
        for off in range(0, len(ids), TEXT_VECTOR_BATCH):   # bounded reads: the remote read cache holds 20k
            part = ids[off:off + TEXT_VECTOR_BATCH]
            todo = list(dict.fromkeys(i for i, h in zip(part, self.has_vectors(part, space=TEXT_SPACE)) if not h))
            if todo:
                vecs = self.embed_texts([first[i] for i in todo], short=True)
                with self.transaction():   # vectors only: the graph's version stays
                    self._upsert_vectors(TEXT_SPACE, todo, vecs, ["text"] * len(todo))
            out.append(self.vectors(part, space=TEXT_SPACE))
        return np.concatenate(out)

    def passage_embedding_text(self, text: str, title: str | None) -> str:
        """The string a chunk's vector embeds: ``"title\\ntext"`` in a KG whose ``passage_text`` is
        ``"title+text"`` and whose document has a title, else the chunk text."""
        return f"{title}\n{text}" if title and self.passage_text == "title+text" else text

    def embedding_text(self, n: Node) -> str:
        """The string node ``n``'s vector embeds (its text; a chunk's as :meth:`passage_embedding_text`)."""
        if n.kind != "chunk":
            return n.text
        # a title the extractor made up (an untitled document's) is shown, not embedded: offline it
        # is the passage's own first words
        return self.passage_embedding_text(n.text, None if n.attrs.get("generated_title") else n.attrs.get("title"))

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
            old = self._graph.nodes.get(n.id)
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
                self._graph.index_node(n)
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
                                             self.embed_texts([self.embedding_text(n) for n in part], short=short),
                                             [n.kind for n in part])
            self._touch()
        return [n.id for n in nodes]

    def add_node(self, kind: str, text: str, *, id: str | None = None, attrs: dict[str, Any] | None = None,
                 source: str | None = None, embed: bool = True) -> str:
        """Add one node (id derived from ``kind`` and ``text`` unless given) and return its id; see
        :meth:`add_nodes`."""
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
            if e.src not in self._graph.nodes or e.dst not in self._graph.nodes:
                missing = e.src if e.src not in self._graph.nodes else e.dst
                raise KgmemInputError(f"edge {e.id} refers to unknown node {missing!r}: add the node first")
        with self.transaction():
            self._store.upsert_edges(edges)
            if source is not None:
                self._store.add_sources([], [e.id for e in edges], source)
            for e in edges:
                self._graph.index_edge(e)
            if embed_facts:
                self.embed_facts(edges)
            self._touch()
        return [e.id for e in edges]

    def embed_facts(self, edges: Sequence[Edge]) -> int:
        """Give the relation edges among ``edges`` that have no fact vector one, in one batched
        model call (for edges written with ``add_edges(embed_facts=False)``: ingestion writes a
        window's edges so and embeds their facts at its end). Returns how many it embedded."""
        facts = list({e.id: e for e in edges if e.kind == "relation"}.values())
        unknown = [e.id for e in facts if e.id not in self._graph.edges]
        if unknown:
            raise KgmemInputError(f"embed_facts got {len(unknown)} edge(s) the KG does not hold, e.g. {unknown[0]!r}: "
                                  "add them first")
        have = self._has_live_vectors("facts", [e.id for e in facts])
        facts = [e for e, h in zip(facts, have) if not h]
        if facts:
            with self.transaction():
                self._upsert_vectors("facts", [e.id for e in facts], self.embed_texts(
                    [self.fact_text(e) for e in facts], short=True), ["relation"] * len(facts))
        return len(facts)

    def delete_edges(self, ids: Iterable[str]) -> int:
        """Remove edges (and their fact vectors); their end nodes stay. Returns how many existed."""
        ids = sorted({i for i in ids if i in self._graph.edges})
        if ids:
            with self.transaction():
                self._store.delete_edges(ids)
                for eid in ids:
                    self._graph.unindex_edge(eid)
                self._delete_vectors("facts", ids)
                self._touch()
        return len(ids)

    def add_edge(self, src: str, dst: str, kind: str, *, text: str = "", weight: float = 1.0,
                 attrs: dict[str, Any] | None = None, source: str | None = None) -> str:
        """Add one edge from ``src`` to ``dst`` (id derived from them, ``kind`` and ``text``) and
        return its id; see :meth:`add_edges`."""
        check_storable(text, f"the text of edge {src!r} -> {dst!r}")   # before it is hashed into an id
        e = Edge(edge_id(src, dst, kind, text), src, dst, kind, text, weight, attrs or {})
        self.add_edges([e], source=source)
        return e.id

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
            if a not in self._graph.nodes or b not in self._graph.nodes:   # vectors of nodes deleted in this transaction
                continue
            sim = short_similarity(self.embeddings, sim)
            e = Edge(edge_id(a, b, "synonym"), a, b, "synonym", "", weight_scale * sim, {"similarity": round(sim, 6)})
            old = self._graph.edges.get(e.id)
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
        """Remove a document and everything only it contributed (nodes, edges, vectors): see
        :meth:`remove_document` (the public ``KnowledgeGraph`` also invalidates the memory resting on it)."""
        return self.remove_document(doc_id)

    def remove_document(self, doc_id: str) -> dict[str, int]:
        """Remove a document and everything only it contributed (nodes, edges, vectors), and
        nothing else: ingestion calls it when it replaces or repairs a document, inside its own
        transaction, and invalidates memory once the new version is in."""
        check_storable(doc_id, f"document id {doc_id!r}")   # no backend could hold it: refused alike on each
        if self._store.document(doc_id) is None:
            known = [d["id"] for d in self._store.documents()][:5]
            raise KgmemInputError(f"no document {doc_id!r} in KG {self.name!r}; known ids start with {known}")
        self._doc_hashes = None
        self._sources = None
        with self.transaction():
            doc_edges = self._store.doc_edge_ids(doc_id)
            nodes, edges = self._store.remove_document_sources(doc_id)
            doomed_nodes = set(nodes)
            doomed_edges = set(edges)
            for nid in doomed_nodes:
                doomed_edges.update(self._graph.out.get(nid, []))
                doomed_edges.update(self._graph.into.get(nid, []))
            # relation edges other documents keep must stop citing this document's chunks
            pruned = []
            for eid in doc_edges:
                e = self._graph.edges.get(eid)
                if e is None or eid in doomed_edges or not e.attrs.get("chunks"):
                    continue
                chunks = [c for c in e.attrs["chunks"] if c not in doomed_nodes]
                if len(chunks) < len(e.attrs["chunks"]):
                    pruned.append(replace(e, attrs={**e.attrs, "chunks": chunks}))
            # time nodes that lose a time_next neighbour get relinked to the surviving ones
            relink = {x for eid in doomed_edges if (e := self._graph.edges.get(eid)) is not None and e.kind == "time_next"
                      for x in (e.src, e.dst)} - doomed_nodes
            self._store.delete_edges(sorted(doomed_edges))
            self._store.delete_nodes(sorted(doomed_nodes))
            self._store.upsert_edges(pruned)
            self._store.delete_document_row(doc_id)
            for eid in sorted(doomed_edges):
                self._graph.unindex_edge(eid)
            for e in pruned:
                self._graph.index_edge(e)
            for nid in doomed_nodes:
                self._graph.unindex_node(nid)
            self._delete_vectors("nodes", sorted(doomed_nodes))
            self._delete_vectors("facts", sorted(doomed_edges))
            self._touch()
            if relink:
                self.writer.relink_time_chain(sorted(relink))
        return {"nodes_removed": len(doomed_nodes), "edges_removed": len(doomed_edges)}

    @property
    def writer(self) -> KgWriter:
        """The ingest and migration plumbing (:class:`KgWriter`): document rows, sources, aliases,
        vectors copied as stored, the time chain, planner statistics. Ingestion and ``kgmem
        migrate`` write through it; a user adds knowledge with the KG's own verbs
        (``add_documents``, ``add_triples``, ``add_records``, ``add_nodes``/``add_edges``)."""
        return KgWriter(self)

    @contextmanager
    def bulk_load(self, *, only_if_large: bool = False) -> Iterator[None]:
        """Load many documents with the vector indexes built once at the end instead of
        maintained row by row (on PostgreSQL, its HNSW indexes: building costs a fraction of
        inserting, docs/capacity.md). Searches inside and beside the block stay exact, only slower;
        a crash inside it leaves the indexes to be built by the next process that opens the KG.
        ``add_documents`` opens one with ``only_if_large=True`` by itself (an index goes only for
        a space the call writes at least as many vectors to as it held).

            with kg.bulk_load():
                for batch in batches:
                    kg.add_documents(batch, model="offline")
        """
        with self._vectors.bulk_load(only_if_large=only_if_large):
            yield

    # ------------------------------------------------------------------ reads
    def node(self, nid: str) -> Node | None:
        """The node with id ``nid``, or None."""
        self._maybe_refresh()
        return self._graph.nodes.get(nid)

    def edge(self, eid: str) -> Edge | None:
        """The edge with id ``eid``, or None."""
        return self._graph.edges.get(eid)

    def has_node(self, nid: str) -> bool:
        """Whether node ``nid`` is in the graph (no refresh: the cache as it is)."""
        return nid in self._graph.nodes

    def nodes(self, kind: str | None = None) -> list[Node]:
        """Every node (of ``kind``), in insertion order."""
        self._maybe_refresh()
        return [n for n in self._graph.nodes.values() if kind is None or n.kind == kind]

    def edges(self, kind: str | None = None) -> list[Edge]:
        """Every edge (of ``kind``), in insertion order."""
        self._maybe_refresh()
        return [e for e in self._graph.edges.values() if kind is None or e.kind == kind]

    def node_count(self) -> int:
        """Number of nodes."""
        return len(self._graph.nodes)

    def edge_count(self) -> int:
        """Number of edges."""
        return len(self._graph.edges)

    def edges_of(self, nid: str, *, direction: Direction = "both") -> list[Edge]:
        """Edges leaving (``"out"``), entering (``"in"``) or touching (``"both"``) node ``nid``,
        outgoing first, each in insertion order."""
        ids: list[str] = []
        if direction in ("out", "both"):
            ids.extend(self._graph.out.get(nid, []))
        if direction in ("in", "both"):
            ids.extend(self._graph.into.get(nid, []))
        return [self._graph.edges[e] for e in ids]

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
            node = self._graph.nodes.get(other)
            if node is None or (node_kinds is not None and node.kind not in node_kinds):
                continue
            out.append((e, node))
        return out

    def degree(self, nid: str, *, kinds: Sequence[str] | None = None) -> int:
        """Number of edges (of these ``kinds``) touching node ``nid``."""
        return len(self.neighbors(nid, kinds=kinds))

    def sources_of(self, nid: str) -> list[str]:
        """Document ids that contributed node (or edge) ``nid``."""
        if nid in self._graph.edges:
            return self._store.edge_sources(nid)
        return self._store.node_sources(nid)

    def sources_of_many(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """:meth:`sources_of` for each of ``ids`` (nodes and edges), remembered for the KG's
        current version: the ids not known yet are read in one batched read per kind (one round
        trip on a server, where a memory write naming each edge's documents sent one per edge)."""
        ids = list(dict.fromkeys(ids))
        cached = self._sources
        if cached is None or cached[0] != self.version or len(cached[1]) > SOURCES_KEPT:
            cached = self._sources = (self.version, {})
        known = cached[1]
        missing = [i for i in ids if i not in known]
        if missing:
            edges = [i for i in missing if i in self._graph.edges]
            nodes = [i for i in missing if i not in self._graph.edges]
            found = {**(self._store.node_sources_many(nodes) if nodes else {}),
                     **(self._store.edge_sources_many(edges) if edges else {})}
            for i in missing:
                known[i] = list(found.get(i, []))
        return {i: list(known[i]) for i in ids}

    def document_nodes(self, doc_id: str) -> list[str]:
        """Ids of the nodes document ``doc_id`` contributed."""
        return self._store.doc_node_ids(doc_id)

    def document_edges(self, doc_id: str) -> list[str]:
        """Ids of the edges document ``doc_id`` contributed."""
        return self._store.doc_edge_ids(doc_id)

    def documents(self) -> list[dict[str, Any]]:
        """Every document row: ``{"id", "title", "status", "n_chunks", "meta", "content_hash"}``, in
        ingest order (``content_hash``: ``""`` for a document ingested before hashes were kept)."""
        return self._store.documents()

    def document(self, doc_id: str) -> dict[str, Any] | None:
        """Document ``doc_id``'s row (see :meth:`documents`), or None."""
        return self._store.document(doc_id)

    def document_hashes(self, doc_ids: Iterable[str]) -> dict[str, str | None]:
        """The content hash of each document's current version (``""``: ingested before hashes
        were kept; None: no such document), remembered for the KG's current version. The ids not
        known yet are read in one batched read, so a run's provenance costs what its evidence
        touches, not the KG's size (a first question after each write would otherwise read every
        document row), in one round trip on a server; once a version has needed more than
        :data:`HASH_READ_ALL` of them, every row is read in one scan instead."""
        ids = list(dict.fromkeys(doc_ids))
        cached = self._doc_hashes
        if cached is None or cached[0] != self.version:
            cached = self._doc_hashes = (self.version, {}, False)
        version, known, complete = cached
        missing = [] if complete else [d for d in ids if d not in known]
        if missing and len(known) + len(missing) > HASH_READ_ALL:
            known = {d["id"]: d["content_hash"] for d in self.documents()}
            self._doc_hashes = (version, known, True)
        elif missing:
            found = self._store.document_hashes(missing)
            for d in missing:
                known[d] = found.get(d)
        return {d: known.get(d) for d in ids}

    def corpus_hash(self) -> str:
        """One hash of every document id and its current version's content hash: it changes when
        any document is added, replaced or deleted (and not when only memory is written); computed
        once per KG version from every document row."""
        cached = self._doc_hashes
        if cached is None or cached[0] != self.version or not cached[2]:
            known = {d["id"]: d["content_hash"] for d in self.documents()}
            cached = self._doc_hashes = (self.version, known, True)
        known = cached[1]
        if self._corpus_hash is None or self._corpus_hash[0] is not known:   # the map was read anew
            self._corpus_hash = (known, content_hash("corpus", *(f"{d}\x1e{known[d]}" for d in sorted(known))))
        return self._corpus_hash[1]

    def aliases(self, nid: str | None = None) -> list[tuple[str, str, float]]:
        """Recorded aliases ``(alias, node id, similarity)`` (of node ``nid``): names merged into an entity."""
        return self._store.aliases(nid)

    def alias_target(self, alias: str) -> str | None:
        """The node the normalised name ``alias`` was merged into, or None."""
        return self._store.alias_target(alias)

    def alias_targets(self, aliases: Sequence[str]) -> dict[str, str]:
        """:meth:`alias_target` of many names in one read; names without a target are left out."""
        return self._store.alias_targets(aliases)

    def fact_text(self, e: Edge) -> str:
        """A relation edge as the text its fact vector embeds: ``"subject relation object"``."""
        s, o = self._graph.nodes.get(e.src), self._graph.nodes.get(e.dst)
        return f"{s.text if s else e.src} {e.text} {o.text if o else e.dst}".strip()

    def chunk_of_anchor(self, anchor_id: str) -> Node | None:
        """The chunk node an anchor node stands for (None if it has none)."""
        for e, n in self.neighbors(anchor_id, kinds=("anchor_chunk",)):
            if n.kind == "chunk":
                return n
        return None

    # ------------------------------------------------------------------ vectors
    def vectors(self, ids: Sequence[str], space: str = "nodes") -> np.ndarray:
        """Unit vectors of ``ids`` (rows in the given order); see :meth:`has_vectors`. On a remote
        vector backend (a database server) recently read vectors are kept in a bounded cache until
        the next write, and those in this version's copies (:meth:`prefetch_scores`) come from there."""
        try:
            if self._vectors.remote:
                copied = self._from_copies(space, ids)
                if not copied:
                    return self._vector_cache.get(space, ids)
                rest = [i for i in ids if i not in copied]
                if rest:
                    copied.update(zip(rest, self._vector_cache.get(space, rest)))
                return np.asarray([copied[i] for i in ids], dtype=np.float32).reshape(len(ids), -1)
            return self._vectors.get(space, ids)
        except KeyError as exc:
            missing = [i for i, h in zip(ids, self._vectors.has(space, ids)) if not h]
            raise KgmemInputError(
                f"no {space} vector for {missing[:3]}{' ...' if len(missing) > 3 else ''} in KG {self.name!r}: "
                f"only entity/chunk/anchor nodes (space 'nodes') and relation edges (space 'facts') are "
                "embedded; filter ids with kg.has_vectors(ids) first") from exc

    def has_vectors(self, ids: Sequence[str], space: str = "nodes") -> list[bool]:
        """Which of ``ids`` have a vector in ``space`` (only entity/chunk/anchor nodes and relation
        edges are embedded)."""
        if self._vectors.remote:
            copied = self._from_copies(space, ids)
            rest = [i for i in ids if i not in copied]
            have = dict(zip(rest, self._vector_cache.has(space, rest))) if rest else {}
            return [i in copied or have[i] for i in ids]
        return self._vectors.has(space, ids)

    def _from_copies(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The rows of ``ids`` held in this version's score copies of ``space`` whose rows are the
        server's own (a remote backend; see :meth:`_score_copy`): id → row."""
        out: dict[str, np.ndarray] = {}
        version = self._version
        for key, hit in list(self._score_copies.items()):
            if key[0] != space or hit[0] != version or hit[2] is None:
                continue
            entry = self._copy_positions.get(key)
            if entry is None or entry[0] is not hit[2]:
                continue
            rows, positions = entry
            for i in ids:
                if i not in out and (r := positions.get(i)) is not None:
                    out[i] = rows[r]
        return out

    def vector_matrix(self, kinds: Sequence[str] | None = None, space: str = "nodes") -> tuple[list[str], np.ndarray]:
        """Every vector of these kinds (analysis, migration). On the server backend this copies them
        into this process each call: for ranking use :meth:`similarity_scores`, which keeps one copy per version."""
        return self._vectors.matrix(space, kinds)

    def vector_ids(self, kinds: Sequence[str] | None = None, space: str = "nodes") -> list[str]:
        """Ids with a vector, of these kinds, in the order :meth:`similarity_scores` returns them."""
        return self._vectors.ids(space, kinds)

    def similarity_scores(self, query: str | np.ndarray, kinds: Sequence[str] | None = None,
                          space: str = "nodes") -> tuple[list[str], np.ndarray]:
        """Cosine of ``query`` with every vector of these kinds, ids in insertion order (the same
        order at the same :attr:`version`): e.g. dense scores of all passages. On the server backend
        the vectors are read into this process once per version (:meth:`prefetch_scores`; up to
        :data:`SCORE_COPY_MAX_ROWS` in the space, 100 MB at 100,000 passages) and scored here."""
        vec = self.embed_query(query) if isinstance(query, str) else query
        copy = self._score_copy(space, kinds) if self._vectors.remote else None
        if copy is not None:
            ids, scores = copy[0], _copy_scores(copy[1], vec)
        else:
            ids, scores = self._vectors.scores(space, vec, kinds)
        if space == "facts" or kinds is not None and all(k in SHORT_KINDS for k in kinds):
            short: bool | list[bool] = True
        elif kinds is not None and not any(k in SHORT_KINDS for k in kinds):
            short = False   # e.g. every passage: no per-id lookup
        else:
            short = [(n := self._graph.nodes.get(i)) is not None and n.kind in SHORT_KINDS for i in ids]
        return ids, block_cosines(self.embeddings, vec, scores, short).astype(np.asarray(scores).dtype)

    def prefetch_scores(self, kinds: Sequence[str] | None = ("chunk",), space: str = "nodes") -> None:
        """Read now what :meth:`similarity_scores` of these kinds will score against, so a method's
        first question does not pay for it (a remote backend's copy of the vectors; nothing on the
        embedded backend, whose vectors are in this process already)."""
        if self._vectors.remote:
            self._score_copy(space, kinds)

    def _score_copy(self, space: str, kinds: Sequence[str] | None) -> tuple[list[str], np.ndarray] | None:
        """A remote backend's vectors of ``space`` / ``kinds`` as unit rows in this process, read once
        per KG version (every write and every refresh that applied another process's writes moves
        it): scoring every passage is then a product here, not a scan of every row in the server
        per question. None above :data:`SCORE_COPY_MAX_ROWS` rows of ``kinds`` (:meth:`_copy_rows`)."""
        key = (space, None if kinds is None else tuple(kinds))
        version = self._version
        hit = self._score_copies.get(key)
        if hit is not None and hit[0] == version:
            return None if hit[1] is None else (hit[1], hit[2])
        if self._copy_rows(space, kinds) > SCORE_COPY_MAX_ROWS:
            self._score_copies[key] = (version, None, None)
            return None
        ids, rows = self._vectors.matrix(space, kinds)
        rows = np.asarray(rows, dtype=np.float32)
        own = True   # the rows as the server holds them
        if ids:
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            # stored vectors are unit already: dividing would only move their last bits away
            # from the server's, and the copy then could not stand in for its reads
            if np.abs(norms - 1.0).max() > UNIT_TOLERANCE:
                rows, own = rows / np.where(norms > 0, norms, 1.0), False
        if version == self._version:   # no write moved it while this read ran
            self._score_copies[key] = (version, ids, rows)
            if own:
                self._copy_positions[key] = (rows, {i: r for r, i in enumerate(ids)})
        return ids, rows

    def _copy_rows(self, space: str, kinds: Sequence[str] | None) -> int:
        """The rows a copy of ``space`` / ``kinds`` would hold. The cap bounds what the copy holds,
        not the space: the node space holds every kind, so counting it would send the scores of a
        kind well under the cap to a server scan on a KG whose other kinds are large. Node kinds
        are counted in the structure, without a statement; any other space by the server."""
        if space == "nodes" and kinds is not None:
            wanted = set(kinds)
            return sum(1 for n in self._graph.nodes.values() if n.kind in wanted)
        return self._vectors.count(space)

    @traced("kg.nearest")
    def nearest(self, query: str | np.ndarray, k: int = 5, *, kinds: Sequence[str] | None = ("entity",),
                restrict: Sequence[str] | None = None) -> list[tuple[Node, float]]:
        """Nodes most similar to ``query`` (text or vector), best first, deterministic ties."""
        self._maybe_refresh()
        vec = self.embed_query(query) if isinstance(query, str) else query
        found = self._nearest_in_copy(vec, k, kinds) if restrict is None else None
        if found is None:
            found = self._vectors.search("nodes", vec, k, kinds=kinds, restrict=restrict)
        hits = [(self._graph.nodes[i], s) for i, s in found if i in self._graph.nodes]
        scores = block_cosines(self.embeddings, vec, [s for _, s in hits], [n.kind in SHORT_KINDS for n, _ in hits])
        return [(n, float(s)) for (n, _), s in zip(hits, scores)]

    def _nearest_in_copy(self, vec: np.ndarray, k: int, kinds: Sequence[str] | None) -> list[tuple[str, float]] | None:
        """A remote backend's nearest nodes of ``kinds``, searched exactly in this process's copy
        of their vectors (:meth:`_score_copy`), or None where there is no copy (the embedded
        backend, no kinds, a space over :data:`SCORE_COPY_MAX_ROWS`). The server's HNSW index
        covers a whole space, so a search for one kind (entities) among many passages discards
        most of what it reads before ``k`` rows pass the filter, while a product over the copy
        reads only the kind's rows. Ties go to the earlier row, as the
        server's search breaks them."""
        if not self._vectors.remote or kinds is None or k <= 0:
            return None
        copy = self._score_copy("nodes", kinds)
        if copy is None:
            return None
        ids, rows = copy
        if not ids:
            return []
        scores = _copy_scores(rows, vec)
        take = min(len(ids), k + 8)
        top = np.argpartition(-scores, take - 1)[:take] if take < len(ids) else np.arange(len(ids))
        order = sorted(top.tolist(), key=lambda r: (-round(float(scores[r]), 6), r))
        return [(ids[r], float(scores[r])) for r in order[:k]]

    @traced("kg.nearest_facts")
    def nearest_facts(self, query: str | np.ndarray, k: int = 5) -> list[tuple[Edge, float]]:
        """Relation edges whose fact text is most similar to ``query``, best first."""
        self._maybe_refresh()
        vec = self.embed_query(query) if isinstance(query, str) else query
        hits = [(self._graph.edges[i], s) for i, s in self._vectors.search("facts", vec, k) if i in self._graph.edges]
        scores = block_cosines(self.embeddings, vec, [s for _, s in hits], [True] * len(hits))
        return [(e, float(s)) for (e, _), s in zip(hits, scores)]

    # ------------------------------------------------------------------ subgraphs & algorithms
    def subgraph(self, node_ids: Iterable[str], *, hops: int = 0, edge_kinds: Sequence[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Nodes within ``hops`` of ``node_ids`` and the edges among them, as plain dicts."""
        frontier = [n for n in dict.fromkeys(node_ids) if n in self._graph.nodes]
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
        return {"nodes": [self._graph.nodes[n].to_dict() for n in seen], "edges": [e.to_dict() for e in edges.values()]}

    def snapshot(self, edge_kinds: Sequence[str] | None = None, *, symmetric: bool = True) -> GraphSnapshot:
        """CSR snapshot over the given edge kinds (all by default), cached.

        Writes after it was built are not a rebuild: the nodes they add become new rows and the
        edge weights they add, change or remove go into the snapshot's small ``delta`` matrix (see
        :func:`~langgraph_kgmem.kg.ppr.extend_snapshot`), replayed here on the next call — also
        for another process's writes, which :meth:`refresh` brings in as the same changes. Only a
        removed node, or more changes than a quarter of the graph, rebuilds it."""
        self._maybe_refresh()
        return self._graph.snapshot(edge_kinds, symmetric=symmetric)

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
        rows = snap.kind_rows(node_kinds) if node_kinds is not None and used != "push" else None
        res = self.ppr_scores(seeds, snapshot=snap, damping=damping, overrides=overrides, method=used, eps=eps,
                              tol=tol, max_iter=max_iter, strict=strict, top_k=top_k, top_rows=rows)
        if node_kinds is not None:
            if res.method == "push":
                rows = res.rows[np.isin(snap.kinds[res.rows], list(node_kinds))]
            elif rows is None:   # push fell back to the exact method (no seed in the graph)
                rows = snap.kind_rows(node_kinds)
        return [(snap.node_ids[r], s) for r, s in res.ranked(rows, top_k)]


    def to_networkx(self) -> Any:
        """A networkx MultiDiGraph copy (for analysis and drawing; not used on hot paths)."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for n in self._graph.nodes.values():
            g.add_node(n.id, kind=n.kind, text=n.text)
        for e in self._graph.edges.values():
            g.add_edge(e.src, e.dst, key=e.id, kind=e.kind, text=e.text, weight=e.weight)
        return g

    def stats(self) -> dict[str, Any]:
        """What the KG holds and where: name, path, backend labels, embeddings, and counts of
        documents, nodes and edges (per kind), aliases and vectors."""
        self._maybe_refresh()
        nodes: dict[str, int] = {}
        for n in self._graph.nodes.values():
            nodes[n.kind] = nodes.get(n.kind, 0) + 1
        edges: dict[str, int] = {}
        for e in self._graph.edges.values():
            edges[e.kind] = edges.get(e.kind, 0) + 1
        return {
            "name": self.name,
            "path": str(self.path) if self.path else None,
            "backend": self._store.kind,
            "vector_backend": self._vectors.kind,
            "embeddings": embeddings_id(self.embeddings),
            "embedding_layout": getattr(self.embeddings, "layout", None),
            "passage_text": self.passage_text,
            "documents": self._store.document_count(),
            "nodes": len(self._graph.nodes),
            "edges": len(self._graph.edges),
            "nodes_by_kind": dict(sorted(nodes.items())),
            "edges_by_kind": dict(sorted(edges.items())),
            "aliases": self._store.alias_count(),
            "vectors": {"nodes": self._vectors.count("nodes"), "facts": self._vectors.count("facts")},
        }

    @property
    def graph_store(self) -> GraphBackend:
        """The structure store, for inspection (tests, diagnostics). Write through the KG's own
        methods: they keep the caches and the transaction rules."""
        return self._store

    @property
    def vector_index(self) -> VectorBackend:
        """The vector store, for inspection and read-only queries (entity resolution's ``best``).
        Write through the KG's own methods."""
        return self._vectors


class KgWriter:
    """The write plumbing of one KG (``kg.writer``) that ingestion and migration use and a user
    rarely needs: a document's row and status, which document contributed which nodes and edges,
    entity aliases, vectors copied as stored, the passage text another KG embedded with, the time
    chain of records, and the database's planner statistics. Every write goes through the KG's
    transaction rules and keeps its caches right, as the KG's own verbs do; the object holds
    nothing of its own, so ``kg.writer`` may be taken as often as needed."""

    def __init__(self, kg: KnowledgeGraphCore) -> None:
        self._kg = kg

    def relink_time_chain(self, time_ids: Iterable[str], *, batch_size: int = BATCH_SIZE) -> int:
        """Link each time node of ``time_ids`` to its neighbours in time by ``time_next`` edges and
        drop the chain edges around them that skip a time node, so that the chain visits every time
        node of the KG in order, across add_records batches and after deletions. Chain edges are
        derived structure: they live as long as both ends do. Returns the number of edges added."""
        kg = self._kg
        new, skips = chain_changes(kg._graph, time_ids)
        with kg.transaction():
            kg.delete_edges(skips)
            for off in range(0, len(new), batch_size):
                kg.add_edges(new[off:off + batch_size], source=DERIVED_SOURCE, embed_facts=False)
        return len(new)

    def put_document(self, doc_id: str, *, title: str, status: Literal["pending", "done"], n_chunks: int = 0,
                     meta: dict[str, Any] | None = None, content_hash: str | None = None) -> None:
        """Record (or update) document ``doc_id``'s row: its title, whether its ingest is
        ``"pending"`` or ``"done"``, its chunk count, provenance ``meta`` and the ``content_hash``
        of the version ingested (what memory records name to say which version they rest on; the
        documents' ``content_hash`` column, schema version 2). Ingestion marks a document pending before its first write and done in the
        transaction of its last."""
        kg = self._kg
        check_storable(doc_id, f"document id {doc_id!r}")
        check_document_id(doc_id)
        with kg.transaction():
            kg._store.put_document(doc_id, title=title, status=status, n_chunks=n_chunks, meta=meta,
                                   content_hash=str(content_hash or ""))
            kg._doc_hashes = None

    def add_sources(self, node_ids: Iterable[str], edge_ids: Iterable[str], doc_id: str) -> None:
        """Record that document ``doc_id`` contributed these nodes and edges (deleting the document
        removes what no other document contributed); :data:`DERIVED_SOURCE` for derived structure."""
        kg = self._kg
        with kg.transaction():
            kg._store.add_sources(list(node_ids), list(edge_ids), doc_id)
            kg._sources = None

    def put_alias(self, alias: str, node_id: str, similarity: float) -> None:
        """Record that the normalised name ``alias`` denotes node ``node_id`` (an entity merged into
        it at cosine ``similarity``), so later mentions resolve without a vector search."""
        kg = self._kg
        with kg.transaction():
            kg._store.put_alias(alias, node_id, similarity)

    def put_vectors(self, space: Literal["nodes", "facts"], ids: Sequence[str], vectors: np.ndarray,
                    kinds: Sequence[str], *, normalized: bool = False) -> None:
        """Store vectors computed elsewhere (a migration copies them as stored, without embedding
        anything) for nodes (``"nodes"``) or relation edges (``"facts"``) already in the graph.
        ``normalized=True``: the rows are unit already."""
        kg = self._kg
        alive = kg._graph.nodes if space == "nodes" else kg._graph.edges
        missing = [i for i in ids if i not in alive]
        if missing:
            raise KgmemInputError(f"put_vectors: no {space[:-1]} {missing[:3]} in KG {kg.name!r}: add them first")
        with kg.transaction():
            kg._upsert_vectors(space, list(ids), vectors, list(kinds), normalized=normalized)
            kg._touch()

    def adopt_passage_text(self, passage_text: str) -> None:
        """Embed passages as another KG does (``"title+text"`` or ``"text"``, see :data:`PASSAGE_TEXTS`),
        so vectors copied from it stay comparable. Only while this KG holds no node."""
        kg = self._kg
        if passage_text not in PASSAGE_TEXTS:
            raise KgmemInputError(f"passage_text {passage_text!r}: use one of {', '.join(PASSAGE_TEXTS)}")
        if kg._graph.nodes:
            raise KgmemInputError(f"KG {kg.name!r} already holds nodes embedded as {kg.passage_text!r}: "
                                  "adopt another passage text only in an empty KG")
        with kg.transaction():
            kg._store.set_meta("passage_text", passage_text)
        kg.passage_text = passage_text

    def note_ingested(self, documents_added: int) -> None:
        """Tell the KG an ingest added this many documents: once enough have come in since the
        last refresh, the database's planner statistics are refreshed. ANALYZE reads the whole KG,
        so refreshing after every bulk ingest made each document cost more as the KG grew;
        refreshing as it grows by a fixed fraction (a quarter, and at least
        :data:`ANALYZE_AFTER_DOCUMENTS` documents) keeps that cost per document flat, and statistics
        describe proportions, which a quarter more of the same documents hardly moves."""
        kg = self._kg
        kg._unanalyzed += documents_added
        if kg._unanalyzed < max(ANALYZE_AFTER_DOCUMENTS, kg._analyzed_docs // 4):
            return
        kg._analyzed_docs = kg._store.document_count()   # an ANALYZE reads them all anyway
        kg._unanalyzed = 0
        logger.debug("KG %r: refreshing planner statistics at %d documents", kg.name, kg._analyzed_docs)
        self.analyze()

    def analyze(self) -> None:
        """Refresh the database's planner statistics now (after a bulk load; :meth:`note_ingested`
        does it as ingestion grows the KG)."""
        kg = self._kg
        kg._store.analyze()


def _identity(name: str | None, stored: str | None, where: str) -> str:
    """The KG's name: the stored one; a different one asked for is an error, not a second namespace."""
    if stored is None:
        return name or "default"
    if name is not None and name != stored:
        raise KgmemInputError(
            f"{where} holds KG {stored!r}, not {name!r}: its memory lives under {stored!r}. Open it with "
            f"name={stored!r} or without a name, or use another directory for a KG called {name!r}")
    return stored


def _copy_scores(rows: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Cosine of ``vec`` with each unit row of a score copy (:meth:`KnowledgeGraphCore._score_copy`)."""
    if not len(rows):
        return np.zeros(0, dtype=np.float32)
    return rows @ (np.asarray(vec, dtype=np.float32) / (np.linalg.norm(vec) or 1.0))
