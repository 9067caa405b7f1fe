"""The public :class:`KnowledgeGraph`: the KG layer's facade plus the verbs that fill it (text,
triples, records) and the methods' persistence (checkpointer, memory store).

The storage, caches, transactions and PPR live below, in
:class:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore`; ingestion (:mod:`langgraph_kgmem.ingest`)
works on that core, so ``kg/`` never imports ``ingest/``. This subclass sits above both and binds
them together, which keeps ``KnowledgeGraph.open(...)`` / ``kg.add_documents(...)`` one object
without an import cycle.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Iterable, Sequence

from langgraph_kgmem.ingest.pipeline import (MAX_DOCUMENT_CHARS, MERGE_THRESHOLD, IngestReport, aadd_documents,
                                             add_documents, add_triples)
from langgraph_kgmem.ingest.records import RecordsReport, add_records
from langgraph_kgmem.kg.graph import KnowledgeGraphCore
from langgraph_kgmem.memory import reset_memory
from langgraph_kgmem.memory.kinds import add_kind_loader
from langgraph_kgmem.memory.provenance import invalidate_documents
from langgraph_kgmem.memory.view import describe_memory
from langgraph_kgmem.persistence import holds_memory, open_async_persistence, open_persistence

logger = logging.getLogger(__name__)

#: ``on_progress`` callback of :meth:`KnowledgeGraph.add_documents`
ProgressCallback = Callable[[dict[str, Any]], None]


def register_memory_kinds() -> None:
    """Import every method, so the memory kinds their specs declare are registered with the memory
    layer (the methods' layer owns them, like feedback: imported when used). The memory layer calls
    it the first time it needs a kind (:func:`~langgraph_kgmem.memory.kinds.add_kind_loader`)."""
    from langgraph_kgmem.graphs.registry import method_specs

    method_specs()


add_kind_loader(register_memory_kinds)


class KnowledgeGraph(KnowledgeGraphCore):
    """A named, persistent knowledge graph: reads, writes, PPR, ingestion and method memory.

    Open one with :meth:`open` (a directory, or a ``postgresql://`` URI) or :meth:`in_memory`
    (tests)::

        >>> from langgraph_kgmem import KnowledgeGraph
        >>> kg = KnowledgeGraph.in_memory()
        >>> report = kg.add_documents(["Marie Curie was born in Warsaw."], model="offline")
        >>> report.documents_added
        1
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._persistence: tuple[Any, Any] | None = None
        self._memory_stores: list[Any] = []   # stores beside persistence()'s that invalidation reaches
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------ ingestion
    def add_documents(self, docs: Iterable[Any], *, model: Any = None, chunk_tokens: int = 750,
                      merge_threshold: float | None = MERGE_THRESHOLD, max_chars: int = MAX_DOCUMENT_CHARS,
                      progress: bool | None = None, extractor: Any = None, max_concurrency: int = 8,
                      on_progress: ProgressCallback | None = None) -> IngestReport:
        """Chunk, extract and merge documents (str, Path, LangChain Document, or dict with
        text/title/id) into the KG.

        Args:
            model: chat model for extraction; ``"offline"`` uses the rule-based extractor; ``None``
                uses ``$KGMEM_MODEL`` (error if unset).
            chunk_tokens: chunk size in o200k tokens.
            merge_threshold: cosine at which a new entity merges into an existing one (None: never).
            max_chars: longest document accepted, in characters.
            progress: show a progress bar over chunks (default: when stderr is a terminal and there
                are more than 3 documents).
            extractor: an object with ``extract(text, title) -> Extraction`` overriding ``model``.
            max_concurrency: chunks extracted at once; documents are still written in input order,
                so the KG is the same as with ``max_concurrency=1``.
            on_progress: called after each chunk's extraction with
                ``{"doc_id", "chunk", "chunks", "done", "total"}``.

        Returns:
            What was added, skipped, repaired or replaced, with timings and LLM usage.

        Raises:
            KgmemInputError: a document is invalid (all are checked before anything is written).

        A document id already stored with the same chunks is skipped; with different text (or
        title) it is replaced in one transaction, and edges both versions share keep their memories
        (``report.changes``). Memory resting on a replaced document's old version is invalidated
        in this call (``report.memories_invalidated``; see :meth:`invalidate_memory`).
        """
        logger.info("KG %r: ingesting documents (model=%s)", self.name, model)
        with self.bulk_load(only_if_large=True):   # a large call builds vector indexes once, at its end
            report = add_documents(self, docs, model=model, chunk_tokens=chunk_tokens,
                                   merge_threshold=merge_threshold, max_chars=max_chars, progress=progress,
                                   extractor=extractor, max_concurrency=max_concurrency, on_progress=on_progress)
        self.writer.note_ingested(report.documents_added)
        report.memories_invalidated += self.invalidate_memory(report.changes)
        logger.info("KG %r: %s", self.name, report)
        return report

    async def aadd_documents(self, docs: Iterable[Any], *, model: Any = None, chunk_tokens: int = 750,
                             merge_threshold: float | None = MERGE_THRESHOLD, max_chars: int = MAX_DOCUMENT_CHARS,
                             progress: bool | None = None, extractor: Any = None, max_concurrency: int = 8,
                             on_progress: ProgressCallback | None = None) -> IngestReport:
        """:meth:`add_documents` for async code, same arguments and result: LLM extraction as
        coroutines, ``max_concurrency`` chunks in flight on the event loop; database work in a
        worker thread, so the loop is never blocked."""
        logger.info("KG %r: ingesting documents asynchronously (model=%s)", self.name, model)
        scope = self.bulk_load(only_if_large=True)   # entered and left off the loop: its end may build indexes
        await asyncio.to_thread(scope.__enter__)
        try:
            report = await aadd_documents(self, list(docs), model=model, chunk_tokens=chunk_tokens,
                                          merge_threshold=merge_threshold, max_chars=max_chars, progress=progress,
                                          extractor=extractor, max_concurrency=max_concurrency,
                                          on_progress=on_progress)
        finally:
            await asyncio.to_thread(scope.__exit__, None, None, None)
        await asyncio.to_thread(self.writer.note_ingested, report.documents_added)
        report.memories_invalidated += await asyncio.to_thread(self.invalidate_memory, report.changes)
        logger.info("KG %r: %s", self.name, report)
        return report

    def add_triples(self, triples: Iterable[Any], *, source: str | None = None, text: str | None = None,
                    title: str | None = None, merge_threshold: float | None = MERGE_THRESHOLD,
                    meta: dict[str, Any] | None = None) -> IngestReport:
        """Add pre-extracted ``[subject, relation, object]`` triples (lists, tuples or
        :class:`~langgraph_kgmem.kg.types.Triple`), optionally with the passage ``text`` they came
        from (a chunk linked to their entities). ``source`` is the document id (default: a hash of
        the text or triples); ``meta`` is stored with the document row. Idempotent per source."""
        return add_triples(self, triples, source=source, text=text, title=title, merge_threshold=merge_threshold,
                           meta=meta)

    def add_records(self, records: Any, **options: Any) -> RecordsReport:
        """Time-stamped observations (rows, a CSV path or a DataFrame) → time, location and event
        nodes linked in time; see :func:`langgraph_kgmem.ingest.records.add_records` for the options
        (event rule, columns, batch size)."""
        return add_records(self, records, **options)

    def delete_document(self, doc_id: str) -> dict[str, int]:
        """Remove a document and everything only it contributed (nodes, edges, vectors), then the
        memory resting on it (``"memories_invalidated"`` in the counts returned; see
        :meth:`invalidate_memory`)."""
        counts = super().delete_document(doc_id)
        return {**counts, "memories_invalidated": self.invalidate_memory([doc_id])}

    # ------------------------------------------------------------------ persistence for methods
    def add_memory_store(self, store: Any) -> None:
        """Have deletes and replaces invalidate memory in ``store`` too (a store built apart from
        :meth:`persistence`, passed to the methods' factories). A store the KG does not know of
        is never invalidated; its reads are still correct, since no method replays a record whose
        provenance names a version that is gone (:func:`~langgraph_kgmem.memory.provenance.holds`)."""
        if all(s is not store for s in self._memory_stores):
            self._memory_stores.append(store)

    def invalidate_memory(self, doc_ids: Iterable[str]) -> int:
        """Re-check the memory resting on documents ``doc_ids`` (replaced or deleted) in every tenant
        of this KG, in the :meth:`persistence` store (when it is open, or holds memory on disk or
        in PostgreSQL) and every :meth:`add_memory_store` store; delete what no longer holds. Returns
        the number of records invalidated (see :mod:`langgraph_kgmem.memory.provenance`)."""
        ids = sorted(set(doc_ids))
        if not ids:
            return 0
        stores = list(self._memory_stores)
        if self._persistence is not None or holds_memory(self.path, uri=self.uri):
            stores.insert(0, self.persistence()[1])
        total = sum(invalidate_documents(self, store, ids) for store in stores)
        if total:
            logger.info("KG %r: %d memory record(s) rested on changed document(s) %s: invalidated", self.name, total,
                        ids[:5])
        return total

    def persistence(self) -> tuple[Any, Any]:
        """The shared (checkpointer, store) pair of this KG, backed by one database.

        SQLite file ``memory.sqlite`` in the KG directory (SqliteSaver + SqliteStore); for an
        in-memory KG, InMemorySaver + InMemoryStore. ``KGMEM_POSTGRES_URI`` (or a PostgreSQL KG)
        switches to PostgresSaver + PostgresStore. The checkpointers load only the types the
        methods store (:class:`~langgraph_kgmem.persistence.StrictCheckpointSerializer`): a
        checkpoint naming anything else raises
        :class:`~langgraph_kgmem.errors.UnsafeStoredDataError` and runs nothing.
        """
        if self._persistence is None:
            self._persistence = open_persistence(self.path, uri=self.uri)
        return self._persistence

    @asynccontextmanager
    async def apersistence(self) -> AsyncIterator[tuple[Any, Any]]:
        """The async (checkpointer, store) pair on the same database as :meth:`persistence`, for
        ``ainvoke``/``astream``, closed when the block ends::

            async with kg.apersistence() as (checkpointer, store):
                app = create_catrag_graph(kg).compile(checkpointer=checkpointer, store=store)
                out = await app.ainvoke({"question": "..."}, {"configurable": {"thread_id": "t1"}})
        """
        async with open_async_persistence(self.path, uri=self.uri) as pair:
            yield pair

    def memory(self, kind: str | None = None, *, store: Any = None, limit: int = 20) -> list[dict[str, Any]]:
        """What the methods remember about this KG, per namespace (edge memories, trajectories,
        reflections, codebook, summaries; every memory scope), with each item as a person reads it:
        see :func:`memory.view.describe_memory`. ``store``: default the KG's own :meth:`persistence` store."""
        register_memory_kinds()
        return describe_memory(self, store if store is not None else self.persistence()[1], kind, limit=limit)

    def reset_memory(self, kind: str | None = None, *, scope: Sequence[str] | None = None, store: Any = None) -> int:
        """Forget what the methods remember about this KG (one ``kind``, one ``scope``, or all);
        the graph itself is untouched. Returns the number of items deleted."""
        register_memory_kinds()
        return reset_memory(store if store is not None else self.persistence()[1], self.name, kind, scope=scope)

    def feedback(self, run: str, *, useful: Sequence[str] | str = (), wrong: Sequence[str] | str = (),
                 verdict: str | None = None, store: Any = None, scope: Sequence[str] = (),
                 source: str = "user") -> dict[str, Any]:
        """Say which evidence of a method's run helped or misled and whether its answer was right:
        :func:`~langgraph_kgmem.graphs.feedback.give_feedback` on this KG (``store``: default the
        KG's own :meth:`persistence` store; ``run``: the result's ``run_id`` or its thread id)."""
        # the methods' layer owns feedback (it calls the method's hook); imported when used, so
        # loading the KG never loads the methods
        from langgraph_kgmem.graphs.feedback import give_feedback

        return give_feedback(self, run, useful=useful, wrong=wrong, verdict=verdict,  # type: ignore[arg-type]
                             store=store if store is not None else self.persistence()[1], scope=scope,
                             source=source)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the methods' checkpointer and store connections, then the KG (see
        :meth:`KnowledgeGraphCore.close`). Safe to call twice."""
        try:
            pair, self._persistence = self._persistence, None
            for obj in pair or ():
                conn = getattr(obj, "conn", None)
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 - already closed
                        pass
        finally:
            super().close()
