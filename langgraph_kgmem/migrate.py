"""Copy a KG between backends: a directory to PostgreSQL and back (``kgmem migrate``).

Structure (nodes, edges, provenance, documents, aliases), vectors and memory (everything the
store holds under the KG's namespace: edge memories, reflections, trajectories, the codebook) are
copied; the destination KG must be empty. Checkpoints are not copied: they are per-thread run
state, and a new backend starts new threads. Vectors are copied as stored, never re-embedded, so
the destination answers as the source did.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.backends import DERIVED_SOURCE
from langgraph_kgmem.knowledge_graph import KnowledgeGraph
from langgraph_kgmem.memory import search_all


@dataclass
class MigrationReport:
    """What :func:`migrate` copied: documents, nodes, edges, vectors per space and memory items, and
    the KG's new name when it was renamed."""
    name: str
    nodes: int = 0
    edges: int = 0
    documents: int = 0
    vectors: dict[str, int] = field(default_factory=dict)
    memory_items: int = 0
    renamed_to: str | None = None   # the KG's name in the destination, when it differs

    def __str__(self) -> str:
        renamed = f" as {self.renamed_to!r}" if self.renamed_to else ""
        return (f"migrated KG {self.name!r}{renamed}: {self.documents} documents, {self.nodes} nodes, {self.edges} edges, "
                f"{sum(self.vectors.values())} vectors, {self.memory_items} memory items")


@dataclass
class UpgradeReport:
    """What :func:`upgrade` did: the KG's schema version before and after (equal: nothing to do)."""
    target: str
    name: str
    before: int
    after: int

    def __str__(self) -> str:
        if self.before == self.after:
            return f"KG {self.name!r} at {self.target} is at schema version {self.after}: nothing to do"
        return f"KG {self.name!r} at {self.target}: schema version {self.before} -> {self.after}"


def upgrade(target: str | os.PathLike[str], *, name: str | None = None,
            embeddings: Embeddings | str | None = None) -> UpgradeReport:
    """Bring the KG at ``target`` to this release's schema in place (``kgmem migrate --upgrade``).

    Opening a KG does the same on its own (with a
    :class:`~langgraph_kgmem.errors.KgmemSchemaUpgradeWarning`); this is the explicit step to run
    once, e.g. before rolling a new release out to many workers over one database. Every step runs
    in one transaction: a failure leaves the KG as it was.

    Raises:
        NotAKnowledgeGraphError: no KG at ``target``.
        SchemaVersionError: the KG was written by a newer release.
    """
    import warnings

    from langgraph_kgmem.errors import KgmemSchemaUpgradeWarning
    from langgraph_kgmem.kg.backends.schema import SCHEMA_VERSION

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KgmemSchemaUpgradeWarning)
        kg = KnowledgeGraph.open(target, name=name, embeddings=embeddings, create=False)
    try:
        ran = [w for w in caught if issubclass(w.category, KgmemSchemaUpgradeWarning)]
        before = ran[0].message.before if ran else SCHEMA_VERSION   # type: ignore[union-attr]
        return UpgradeReport(str(target), kg.name, before, kg.schema_version)
    finally:
        kg.close()


def migrate(source: str | os.PathLike[str], destination: str | os.PathLike[str], *, name: str | None = None,
            embeddings: Embeddings | str | None = None, vector_backend: str | None = None,
            to_name: str | None = None) -> MigrationReport:
    """Copy KG ``name`` (default: the source's stored name) from ``source`` to ``destination``
    (each a KG directory or a ``postgresql://`` URI), where it is called ``to_name`` (default: its
    name in the source). Renaming is how a KG built alone (called ``default``) joins a database
    that holds other KGs; its memory moves to the new name's namespace with it.

    Raises:
        KgmemInputError: the source does not exist, or the destination already holds that KG with
            content (migrate into an empty KG; drop the old one first).
    """
    src = KnowledgeGraph.open(source, name=name, embeddings=embeddings, vector_backend=vector_backend,  # type: ignore[arg-type]
                              create=False)
    try:
        dst = KnowledgeGraph.open(destination, name=to_name or src.name, embeddings=src.embeddings,
                                  vector_backend=vector_backend, create=True)  # type: ignore[arg-type]
        try:
            if dst.node_count() or dst.documents():
                raise KgmemInputError(
                    f"{destination} already holds KG {dst.name!r} with {dst.node_count()} nodes: migrate into an "
                    "empty KG (drop it first: `kgmem drop`, or choose another directory)")
            report = _copy(src, dst)
        finally:
            dst.close()
    finally:
        src.close()
    return report


def _copy(src: KnowledgeGraph, dst: KnowledgeGraph) -> MigrationReport:
    report = MigrationReport(src.name, renamed_to=dst.name if dst.name != src.name else None)
    nodes, edges = src.nodes(), src.edges()
    node_kind = {n.id: n.kind for n in nodes}
    with dst.transaction():
        # the vectors are copied as stored, so the new KG embeds its future chunks as they were embedded
        dst.writer.adopt_passage_text(src.passage_text)
        ids, mat = src.vector_matrix(space="nodes")
        dst.add_nodes(nodes, embed=False)
        if ids:
            dst.writer.put_vectors("nodes", ids, mat, [node_kind[i] for i in ids], normalized=True)
        dst.add_edges(edges, embed_facts=False)
        fids, fmat = src.vector_matrix(space="facts")
        if fids:
            dst.writer.put_vectors("facts", fids, fmat, ["relation"] * len(fids), normalized=True)
        docs = src.documents()
        for d in docs:
            dst.writer.put_document(d["id"], title=d["title"], status=d["status"], n_chunks=d["n_chunks"],
                                    meta=d["meta"], content_hash=d.get("content_hash", ""))
        for doc_id in [d["id"] for d in docs] + [DERIVED_SOURCE]:
            dst.writer.add_sources(src.document_nodes(doc_id), src.document_edges(doc_id), doc_id)
        for alias, node_id, sim in src.aliases():
            dst.writer.put_alias(alias, node_id, sim)
    dst.writer.analyze()   # a bulk-filled table without planner statistics is planned as if empty
    report.nodes, report.edges, report.documents = len(nodes), len(edges), len(docs)
    report.vectors = {"nodes": len(ids), "facts": len(fids)}
    _, s_mem = src.persistence()
    _, d_mem = dst.persistence()
    items = search_all(s_mem, ("kgmem", src.name))
    for it in items:   # ("kgmem", name, *scope, kind): the KG's name is the second label
        ns = (it.namespace[0], dst.name, *it.namespace[2:])
        d_mem.put(ns, it.key, dict(it.value), index=False)
    report.memory_items = len(items)
    return report


__all__ = ["migrate", "upgrade", "MigrationReport", "UpgradeReport"]
