"""Text → KG: validation, chunking, extraction, entity merging, and the writes.

Documents are written in input order after their extraction, a window of them (about
:data:`EMBED_WINDOW_CHUNKS` chunks) per transaction, each marked ``done`` in it; one whose
extraction failed is left ``pending``, and a crash leaves nothing of an uncommitted window, so a
re-run always completes the graph. Re-adding a ``done`` document changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError, check_int, check_storable, check_storable_values
from langgraph_kgmem.embeddings.fast import short_block, short_threshold
from langgraph_kgmem.ingest.chunking import chunk_text
from langgraph_kgmem.ingest.extract import Extraction, LLMExtractor, OfflineExtractor
from langgraph_kgmem.kg.types import (Edge, Node, Triple, check_document_id, content_hash, document_id, edge_id,
                                     entity_id, normalize_name)
from langgraph_kgmem.kg.vectors import unit_rows
from langgraph_kgmem.llm import decision_summary, empty_usage, is_offline, merge_usage, resolve_model

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

logger = logging.getLogger(__name__)

MAX_DOCUMENT_CHARS = 5_000_000
# a file holding MAX_DOCUMENT_CHARS characters: at most 4 UTF-8 bytes each, and a byte-order mark
MAX_FILE_BYTES = 4 * MAX_DOCUMENT_CHARS + 3
EMBED_WINDOW_CHUNKS = 64   # chunks a bulk ingest embeds together and writes in one transaction
# cosine (on MiniLM's scale) at which a new entity name merges into an existing entity: the default of
# every ingest entry point's merge_threshold (None there: never merge)
MERGE_THRESHOLD = 0.85
# passages a bulk ingest sends to the model in one call, for the windows to come: sorted by length
# across ~1,000 chunks, batches pad far less than within one window's 64
PASSAGES_AHEAD_CHUNKS = 1024


@dataclass
class IngestReport:
    """What an ingest call did: documents added, skipped (already present), repaired and replaced,
    chunks, entities added and merged, relations added, the time taken (embedding apart), the
    document ids, the model usage, and per replaced document what it lost, gained and kept."""
    documents_added: int = 0
    documents_skipped: int = 0
    documents_repaired: int = 0
    documents_replaced: int = 0
    chunks: int = 0
    entities_added: int = 0
    entities_merged: int = 0
    relations_added: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    document_ids: list[str] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=empty_usage)
    # per replaced document: nodes/edges it lost, gained and kept (kept edges keep their memories)
    changes: dict[str, dict[str, int]] = field(default_factory=dict)
    # memory records (and codebook runs) resting on the old version of a replaced document,
    # deleted in the same call (KnowledgeGraph.add_documents; see docs/provenance.md)
    memories_invalidated: int = 0

    def merge(self, other: "IngestReport") -> None:
        """Add ``other``'s counts, document ids, changes and usage to this report (its times are left as they are)."""
        for k in ("documents_added", "documents_skipped", "documents_repaired", "documents_replaced", "chunks",
                  "entities_added", "entities_merged", "relations_added", "memories_invalidated"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.document_ids.extend(other.document_ids)
        self.changes.update(other.changes)
        self.usage = merge_usage(self.usage, other.usage)

    @property
    def decisions(self) -> dict[str, Any]:
        """How many extraction decisions the model was asked for, made, and left to the offline
        extractor (:func:`~langgraph_kgmem.llm.decision_summary`)."""
        return decision_summary(self.usage)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-native dict, with :attr:`decisions` added."""
        return {**asdict(self), "decisions": self.decisions}

    def change_totals(self) -> dict[str, int]:
        """``changes`` summed over the replaced documents (zeros when none was replaced)."""
        keys = ("nodes_removed", "nodes_added", "edges_removed", "edges_added", "edges_kept")
        return {k: sum(c.get(k, 0) for c in self.changes.values()) for k in keys}

    def __str__(self) -> str:
        d = self.decisions
        model = (f"; the model made {d['made']} of {d['asked']} extraction decisions ({d['fell_back']} fell back)"
                 if d["asked"] else "")
        replaced = ""
        if self.changes:   # the same counts as ``changes``, so the headline never disagrees with it
            t = self.change_totals()
            replaced = (f"; the replaced document(s) gained {t['nodes_added']} and lost {t['nodes_removed']} "
                        f"node(s), gained {t['edges_added']} and lost {t['edges_removed']} edge(s), and kept "
                        f"{t['edges_kept']} edge(s) with their memories")
        if self.memories_invalidated:
            replaced += f"; {self.memories_invalidated} memory record(s) resting on the old version(s) invalidated"
        return (f"added {self.documents_added} document(s) ({self.documents_skipped} already present, "
                f"{self.documents_replaced} replaced by new content, {self.documents_repaired} repaired): "
                f"{self.chunks} chunks, {self.entities_added} new entities "
                f"({self.entities_merged} merged into existing), {self.relations_added} new relations{replaced}; "
                f"{self.usage['llm_calls']} LLM calls{model}; {self.seconds:.2f}s ({self.embed_seconds:.2f}s embedding)")


@dataclass
class SourceDocument:
    """One document to ingest: its id, text, title and the metadata stored with it."""
    id: str
    text: str
    title: str
    meta: dict[str, Any]

    @property
    def content_hash(self) -> str:
        """The hash of this version (title and text) that memory records name (:func:`version_hash`)."""
        return version_hash(self.text, self.title)


def version_hash(text: str, title: str = "") -> str:
    """The content hash of one version of a document (its title and text), stored with its row
    at ingest: a memory record names it to say which version it rests on."""
    return content_hash("document-version", title, text)


# ------------------------------------------------------------------------------- input

def read_text_file(path: str | Path, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """Read a UTF-8 text file, refusing binary, non-UTF-8, empty and oversize files with a clear error.

    The size is checked on the opened file before anything is read (an 800 MB file is refused
    without reading it), and at most ``max_bytes`` + 1 bytes are ever read (a file that grows
    meanwhile, or a device, is refused the same way). NUL anywhere in it is binary: no backend
    could store it as text.
    """
    p = Path(path)
    if not p.is_file():
        raise KgmemInputError(f"{p} is not a file")
    too_big = (f"{p} is over the limit of {max_bytes:,} bytes (a document holds at most {MAX_DOCUMENT_CHARS:,} "
               "characters): split it into several files")
    try:
        with open(p, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > max_bytes:
                raise KgmemInputError(too_big)
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise KgmemInputError(f"{p} cannot be read ({exc.strerror or exc})") from exc
    if len(data) > max_bytes:
        raise KgmemInputError(too_big)
    if b"\x00" in data:
        raise KgmemInputError(f"{p} looks binary (it contains NUL bytes, the first at byte {data.index(0):,}): "
                              "give plain UTF-8 text files")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KgmemInputError(
            f"{p} is not UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            f"convert it first, e.g. `iconv -f latin1 -t utf-8 {p.name}`") from exc
    if not text.strip():
        raise KgmemInputError(f"{p} is empty: nothing to ingest")
    return text


def coerce_document(doc: Any, *, max_chars: int = MAX_DOCUMENT_CHARS) -> SourceDocument:
    """str | Path | langchain Document | dict(text, title?, id?) → SourceDocument (validated)."""
    meta: dict[str, Any] = {}
    title = ""
    did = None
    if isinstance(doc, Path):
        # the file's name is metadata: as a title it would become an entity of every chunk
        text = read_text_file(doc)
        meta = {"path": str(doc)}
    elif isinstance(doc, str):
        text = doc
    elif isinstance(doc, dict):
        if "text" not in doc:
            raise KgmemInputError(f"a document dict needs a 'text' key, got keys {sorted(doc)}")
        text, title, did = str(doc["text"]), str(doc.get("title") or ""), doc.get("id")
        meta = {k: v for k, v in doc.items() if k not in {"text", "title", "id"}}
    elif hasattr(doc, "page_content"):
        text = doc.page_content
        meta = dict(getattr(doc, "metadata", {}) or {})
        title = str(meta.pop("title", "") or "")
        did = getattr(doc, "id", None) or meta.pop("id", None)
    else:
        raise KgmemInputError(f"cannot ingest a {type(doc).__name__}: pass str, Path, Document or dict")
    # text, title and id are stored as given: what one backend would refuse (NUL), none accepts
    check_storable(text, f"document {title or did or text[:30]!r}")
    check_storable(title, f"the title of document {did or text[:30]!r}")
    if did:
        check_storable(str(did), f"the id of document {title or text[:30]!r}")
        check_document_id(str(did))
    if not text.strip():
        raise KgmemInputError(f"document {title or did or '(untitled)'!r} is empty: nothing to ingest")
    if len(text) > max_chars:
        raise KgmemInputError(
            f"document {title or did or text[:30]!r} has {len(text):,} characters, over the limit of "
            f"{max_chars:,}; split it into several documents or raise max_chars")
    did = str(did) if did else document_id(text, title)
    _check_meta(meta, title or did)
    return SourceDocument(did, text, title, meta)


def _check_meta(meta: dict[str, Any], name: str) -> None:
    """Metadata is stored as JSON: refuse what JSON cannot hold before anything is written."""
    check_storable_values(meta, f"the metadata of document {name!r}")
    try:
        json.dumps(meta, sort_keys=True)
    except (TypeError, ValueError) as exc:
        bad = []
        for k, v in meta.items():
            try:
                json.dumps({k: v}, sort_keys=True)
            except (TypeError, ValueError):
                bad.append(f"{k!r} ({type(v).__name__})")
        raise KgmemInputError(
            f"document {name!r} has metadata that is not JSON-serialisable: {', '.join(bad) or exc}; "
            "convert those values to strings or numbers first (e.g. value.isoformat() for dates)") from exc


# ------------------------------------------------------------------------------- writing

class _Merger:
    """Entity resolution shared by the documents written in one transaction: each name's vector
    and closest KG entity (one candidate search for all the names of a window: the vector index's
    ``best``, whose cost per name does not grow with the KG's entities), the aliases recorded, and
    the entities created since it began.

    A new name merges into the most similar entity (cosine >= merge_threshold) among those the KG
    had when the merger began and those created since; ties go to the older entity. The KG's
    entities are searched by locality-sensitive hashing (see ``HyperplaneIndex``), which finds an
    entity above the threshold with a probability set by its cosine alone, short of certainty by
    about 8 in 100,000 at 0.85; those created since the merger began are compared exactly. Documents
    written one after another share a merger only within one transaction that deletes nothing, so
    this is the set each of them would see on its own."""

    def __init__(self, kg: "KnowledgeGraph", merge_threshold: float | None) -> None:
        self.kg = kg
        # stated on MiniLM's cosine scale; the fast embedding compares names in a static space
        self.merge_threshold = None if merge_threshold is None else short_threshold(kg.embeddings, merge_threshold)
        self.columns = short_block(kg.embeddings)             # where a name's vector can be non-zero
        self._vec: dict[str, np.ndarray] = {}                 # name -> its embedding
        self._best: dict[str, tuple[str | None, float]] = {}  # name -> closest KG entity (id, cosine)
        self._aliases: dict[str, str | None] = {}             # alias -> target (None: none), prefetched
        self._created: list[str] = []                         # entities created since the merger began
        self._new: set[str] = set()                           # the same, as a set
        self._unit = np.zeros((0, 0), dtype=np.float32)       # their unit vectors (grown x2)

    def prepare(self, names: Sequence[str]) -> None:
        """Embed the names no entity denotes yet and find each one's closest KG entity with one
        candidate search (once per window or document; names it did not cover are done per chunk)."""
        self.prefetch_aliases(names)
        todo = [n for n in dict.fromkeys(names)
                if n not in self._vec and normalize_name(n) and self.lookup(n) is None]
        if not todo:
            return
        vecs = self.kg.embed_texts(todo, short=True)
        self._vec.update(zip(todo, vecs))
        if self.merge_threshold is not None:
            best = self.kg.vector_index.best("nodes", unit_rows(vecs), kinds=("entity",), columns=self.columns)
            # a document being replaced has deleted its entities, whose vectors go only at commit
            self._best.update((n, b if b[0] is None or self.kg.has_node(b[0]) else (None, -1.0))
                              for n, b in zip(todo, best))

    def vector(self, name: str) -> np.ndarray:
        return self._vec[name]

    def prefetch_aliases(self, names: Sequence[str]) -> None:
        """Recorded aliases of every name in one query (a round trip each on a database server)."""
        ask = list(dict.fromkeys(a for n in names if (a := normalize_name(n)) and a not in self._aliases
                                 and not self.kg.has_node(entity_id(n))))
        if ask:
            found = self.kg.alias_targets(ask)
            self._aliases.update((a, found.get(a)) for a in ask)

    def lookup(self, name: str) -> str | None:
        """The entity ``name`` already denotes: its own id, or the target of a recorded alias."""
        eid = entity_id(name)
        if self.kg.has_node(eid):
            return eid
        alias = normalize_name(name)
        if alias not in self._aliases:
            self._aliases[alias] = self.kg.alias_target(alias)
        target = self._aliases[alias]
        return target if target and self.kg.has_node(target) else None

    def closest(self, name: str, unit: np.ndarray) -> tuple[str, float] | None:
        """The entity ``name`` merges into, with its cosine; ``None``: it becomes an entity of its own."""
        if self.merge_threshold is None:
            return None
        best = self._best[name]
        if self._created:
            # entities created since the merger began (the KG's are in best): strictly better wins
            sims = self._unit[:len(self._created)] @ unit
            j = int(np.argmax(sims))
            if sims[j] > best[1]:
                best = (self._created[j], float(sims[j]))
        return best if best[0] is not None and best[1] >= self.merge_threshold else None  # type: ignore[return-value]

    def merged(self, name: str, target: str) -> None:
        self._aliases[normalize_name(name)] = target

    def created(self, eid: str, unit: np.ndarray) -> None:
        n = len(self._created)
        if n == len(self._unit):
            grown = np.zeros((max(2 * n, 16), len(unit)), dtype=np.float32)
            if n:
                grown[:n] = self._unit
            self._unit = grown
        self._unit[n] = unit
        self._created.append(eid)
        self._new.add(eid)

    def is_new(self, eid: str) -> bool:
        return eid in self._new


class _Writer:
    """Writes one document's chunks; resolves entity names to ids (exact, alias, embedding merge)
    through a :class:`_Merger`, its own or one shared with the other documents of its transaction."""

    def __init__(self, kg: "KnowledgeGraph", doc_id: str, merge_threshold: float | None,
                 merger: _Merger | None = None, facts: dict[str, Edge] | None = None) -> None:
        self.kg = kg
        self.doc_id = doc_id
        self.merger = merger if merger is not None else _Merger(kg, merge_threshold)
        # relation edges written without their fact vector, embedded by the caller in one call at
        # the end of its transaction: a fact whose subject merged into an existing entity differs
        # from the prefetched text, and embedding those per chunk cost a model call each
        self.facts = facts if facts is not None else {}
        self.report = IngestReport()
        self.prev_anchor: str | None = None
        self._resolved: dict[str, str] = {}
        # ids this writer created (entities, relation edges): a replaced document's caller takes
        # out those its old version already had, so the report counts what is new to the KG
        self.created_entities: set[str] = set()
        self.created_relations: set[str] = set()

    def resolve_entities(self, names: Sequence[str]) -> dict[str, str]:
        """Map each name to an entity id, creating entity nodes; merges near-duplicates (see
        :class:`_Merger`)."""
        kg, m = self.kg, self.merger
        todo: list[str] = []
        m.prefetch_aliases([n for n in names if n not in self._resolved])
        for name in dict.fromkeys(names):
            if not normalize_name(name) or name in self._resolved:
                continue
            known = m.lookup(name)
            if known is not None:
                self._resolved[name] = known
            else:
                todo.append(name)
        if not todo:
            return self._resolved
        m.prepare(todo)
        vecs = np.asarray([m.vector(n) for n in todo], dtype=np.float32)
        units = unit_rows(vecs)
        new_nodes: list[Node] = []
        new_rows: list[int] = []
        for i, name in enumerate(todo):
            eid = entity_id(name)
            if m.is_new(eid):   # another spelling of a name created a moment ago
                self._resolved[name] = eid
                continue
            merged = m.closest(name, units[i])
            if merged is not None:
                self._resolved[name] = merged[0]
                kg.writer.put_alias(normalize_name(name), merged[0], round(merged[1], 6))
                m.merged(name, merged[0])
                self.report.entities_merged += 1
                continue
            self._resolved[name] = eid
            m.created(eid, units[i])
            self.created_entities.add(eid)
            new_nodes.append(Node(eid, "entity", name.strip(), {}))
            new_rows.append(i)
        if new_nodes:
            kg.add_nodes(new_nodes, source=self.doc_id, vectors=vecs[new_rows])
            self.report.entities_added += len(new_nodes)
        return self._resolved

    def record_provenance(self, names: Sequence[str]) -> None:
        """Existing or merged entities this document mentions get it as a source too, so deleting
        another document never removes an entity this one still needs."""
        ids = sorted({self._resolved[n] for n in names if n in self._resolved})
        self.kg.writer.add_sources(ids, [], self.doc_id)

    def write_chunk(self, index: int, text: str | None, extraction: Extraction, *, title: str,
                    generated_title: bool = False) -> dict[str, str]:
        """The chunk, its anchor and their edges; ``generated_title``: ``title`` is the extractor's,
        not the document's (shown, never embedded with the passage)."""
        kg = self.kg
        names = _names(extraction)
        ids = self.resolve_entities(names)
        self.record_provenance(names)
        chunk_nodes: list[Node] = []
        edges: list[Edge] = []
        chunk_id = anchor_id = None
        if text is not None:
            chunk_id, anchor_id = chunk_node_ids(self.doc_id, index)
            attrs: dict[str, Any] = {"doc_id": self.doc_id, "index": index, "title": title}
            if generated_title:
                attrs["generated_title"] = True
            chunk_nodes = [Node(chunk_id, "chunk", text, dict(attrs)), Node(anchor_id, "anchor", extraction.title or title, dict(attrs))]
            kg.add_nodes(chunk_nodes, source=self.doc_id)
            edges.append(Edge(edge_id(anchor_id, chunk_id, "anchor_chunk"), anchor_id, chunk_id, "anchor_chunk"))
            if self.prev_anchor:
                edges.append(Edge(edge_id(self.prev_anchor, anchor_id, "next"), self.prev_anchor, anchor_id, "next"))
            self.prev_anchor = anchor_id
            for name in extraction.entities:
                eid = ids.get(name)
                if eid:
                    edges.append(Edge(edge_id(eid, chunk_id, "context"), eid, chunk_id, "context"))
            self.report.chunks += 1
        for t in extraction.triples:
            s, o = ids.get(t.subject), ids.get(t.object)
            if not s or not o or s == o:
                continue
            eid = edge_id(s, o, "relation", t.relation)
            existing = kg.edge(eid)
            chunks = list(existing.attrs.get("chunks", [])) if existing else []
            if chunk_id and chunk_id not in chunks:
                chunks.append(chunk_id)
            if existing is None and eid not in self.created_relations:
                self.report.relations_added += 1
                self.created_relations.add(eid)
            edges.append(Edge(eid, s, o, "relation", t.relation, 1.0, {"chunks": chunks}))
            if chunk_id:
                for x in (s, o):
                    edges.append(Edge(edge_id(x, chunk_id, "context"), x, chunk_id, "context"))
        # one edge per id (context edges repeat when an entity appears in several triples)
        kg.add_edges(list({e.id: e for e in edges}.values()), source=self.doc_id, embed_facts=False)
        self.facts.update((e.id, e) for e in edges if e.kind == "relation")
        return {"chunk": chunk_id or "", "anchor": anchor_id or ""}


def chunk_node_ids(doc_id: str, index: int) -> tuple[str, str]:
    """The ids of a document's ``index``-th chunk node and its anchor."""
    key = content_hash(doc_id, str(index))
    return f"chk-{key}", f"anc-{key}"


def _unchanged(kg: "KnowledgeGraph", src: SourceDocument, chunks: Sequence[str], stored: dict[str, Any]) -> bool:
    """Whether a stored document already holds exactly these chunks under this title."""
    if stored.get("n_chunks") != len(chunks) or (stored.get("title") or "") != src.title:
        return False
    for i, text in enumerate(chunks):
        node = kg.node(chunk_node_ids(src.id, i)[0])
        if node is None or node.text != text:
            return False
    return True


def _names(extraction: Extraction) -> list[str]:
    """Entity names of one chunk's extraction, in the order they are resolved."""
    return extraction.entities + [x for t in extraction.triples for x in (t.subject, t.object)]


def _texts_to_embed(kg: "KnowledgeGraph", docs: Sequence[tuple[str, Sequence[str], Sequence[Extraction]]]
                    ) -> tuple[list[str], list[str]]:
    """Everything the writes of these (title, chunks, extractions) will embed — passages (as the KG
    embeds a chunk: see ``KnowledgeGraph.passage_embedding_text``), and short texts (titles, names,
    facts) — so each goes to the model in one batched call (fact texts use the names as extracted;
    a merged entity's fact is embedded on its own)."""
    passages: list[str] = []
    short: list[str] = []
    for title, chunks, extractions in docs:
        passages.extend(kg.passage_embedding_text(c, title) for c in chunks)
        for ex in extractions:
            short.append(ex.title)
            short.extend(e.strip() for e in ex.entities)
            short.extend(t.text() for t in ex.triples)
    return passages, short


def add_triples(kg: "KnowledgeGraph", triples: Iterable[Any], *, source: str | None = None, text: str | None = None,
                title: str | None = None, merge_threshold: float | None = MERGE_THRESHOLD,
                meta: dict[str, Any] | None = None) -> IngestReport:
    """Add pre-extracted triples, optionally with the passage ``text`` they came from (which becomes
    a chunk + anchor linked to the triples' entities). ``source`` is the document id
    (default: a hash of the text or of the triples). Idempotent per source."""
    t0 = time.perf_counter()
    e0 = kg.embed_seconds
    trips = [Triple.coerce(t) for t in triples]
    if text is not None and not text.strip():
        raise KgmemInputError("add_triples got an empty text: pass text=None for triples without a passage")
    if not trips and text is None:
        raise KgmemInputError("add_triples needs at least one triple or a text")
    for t in trips:
        check_storable(t.text(), f"triple {t.text()[:60]!r}")
    for what, value in (("text", text), ("title", title), ("source", source)):
        if value is not None:
            check_storable(value, f"add_triples {what}")
    if source is not None:
        check_document_id(source)
    meta = dict(meta or {})
    _check_meta(meta, source or "add_triples")
    doc_id = source or document_id(text if text is not None else repr([t.text() for t in trips]), title or "")
    existing = kg.document(doc_id)
    report = IngestReport()
    if existing and existing["status"] == "done":
        report.documents_skipped = 1
        return report
    if existing:
        kg.remove_document(doc_id)
        report.documents_repaired = 1
    entities = list(dict.fromkeys([title] if title else []) )
    entities += [x for t in trips for x in (t.subject, t.object)]
    ex = Extraction(list(dict.fromkeys(entities)), trips, title or "")
    # everything it embeds in one model call (two with a short-text space): a call's fixed cost
    # is most of one chunk's embedding time
    texts = _texts_to_embed(kg, [(title or "", [text] if text is not None else [], [ex])])
    with kg.transaction(), kg.prefetch_embeddings(*texts):
        version = version_hash(text if text is not None else repr([t.text() for t in trips]), title or "")
        kg.writer.put_document(doc_id, title=title or "", status="pending", meta=meta, content_hash=version)
        w = _Writer(kg, doc_id, merge_threshold)
        w.write_chunk(0, text, ex, title=title or "")
        kg.embed_facts(list(w.facts.values()))
        kg.writer.put_document(doc_id, title=title or "", status="done", n_chunks=1 if text else 0, meta=meta,
                        content_hash=version)
    report.merge(w.report)
    report.documents_added = 1
    report.document_ids.append(doc_id)
    report.seconds = time.perf_counter() - t0
    report.embed_seconds = kg.embed_seconds - e0
    return report


def add_documents(kg: "KnowledgeGraph", docs: Iterable[Any], *, model: Any = None, chunk_tokens: int = 750,
                  merge_threshold: float | None = MERGE_THRESHOLD, max_chars: int = MAX_DOCUMENT_CHARS,
                  progress: bool | None = None, extractor: Any = None, max_concurrency: int = 8,
                  on_progress: Callable[[dict[str, Any]], None] | None = None) -> IngestReport:
    """Ingest documents (str, Path, Document or dict with text/title/id).

    Args:
        model: chat model for extraction; ``"offline"`` uses the rule-based extractor; ``None``
            uses ``$KGMEM_MODEL`` (error if unset).
        chunk_tokens: chunk size in o200k tokens (default 750).
        merge_threshold: cosine at which a new entity merges into an existing one (None: never).
        progress: show a progress bar over chunks (default: when stderr is a terminal and there
            are > 3 docs).
        extractor: an object with ``extract(text, title) -> Extraction`` overriding ``model``.
        max_concurrency: chunks extracted at once (LLM calls in flight: up to three per chunk,
            one after another). Extraction runs ahead in threads; documents are still written one
            after another in input order, so the KG is the same as with ``max_concurrency=1``.
        on_progress: called after each chunk's extraction, in input order, with
            ``{"doc_id", "chunk", "chunks", "done", "total"}`` (chunks of this call done / in all).

    A document id already stored with the same chunks is skipped; with different text (or
    title) it is replaced in one transaction: what only its old version contributed goes, the new
    version comes in, and edges both versions share keep their memories (``report.changes``).
    All documents are validated before anything is written: one bad document stops the call
    and nothing already stored is touched.
    """
    run = _IngestRun(kg, docs, model=model, chunk_tokens=chunk_tokens, merge_threshold=merge_threshold,
                     max_chars=max_chars, progress=progress, extractor=extractor,
                     max_concurrency=max_concurrency, on_progress=on_progress)
    # offline extraction is CPU-bound Python: threads would only add overhead
    workers = 1 if isinstance(run.extractor, OfflineExtractor) else min(max_concurrency, max(run.total, 1))
    try:
        with _Extraction(run.extractor, workers) as pool:
            pending = [[pool.submit(c, src.title or None) for c in chunks] for src, chunks, _ in run.work]
            for window in run.windows(pending):
                done = []
                try:
                    for item, futures in window:
                        run.begin(item)
                        done.append((item, [run.extracted(item, i, f.result()) for i, f in enumerate(futures)]))
                finally:   # what was extracted before a failure is written all the same
                    run.write_window(done)
    finally:
        run.close()
    return run.finish()


async def aadd_documents(kg: "KnowledgeGraph", docs: Iterable[Any], *, model: Any = None, chunk_tokens: int = 750,
                         merge_threshold: float | None = MERGE_THRESHOLD, max_chars: int = MAX_DOCUMENT_CHARS,
                         progress: bool | None = None, extractor: Any = None, max_concurrency: int = 8,
                         on_progress: Callable[[dict[str, Any]], None] | None = None) -> IngestReport:
    """:func:`add_documents` for async callers, with the same arguments and the same KG.

    Extraction is async-native: each chunk's typed LLM calls are coroutines (``ainvoke``), at most
    ``max_concurrency`` chunks in flight on the event loop, no thread per call. The database work
    (reading what is stored, writing each document in its transaction) runs in a worker thread,
    one document after another in input order, so the loop is never blocked. An extractor without
    ``aextract`` (a custom one, or the CPU-bound offline extractor) runs in a worker thread.
    """
    run = await asyncio.to_thread(_IngestRun, kg, docs, model=model, chunk_tokens=chunk_tokens,
                                  merge_threshold=merge_threshold, max_chars=max_chars, progress=progress,
                                  extractor=extractor, max_concurrency=max_concurrency, on_progress=on_progress)
    gate = asyncio.Semaphore(max_concurrency)
    native = getattr(run.extractor, "aextract", None)

    async def extract(text: str, title: str | None) -> Extraction:
        async with gate:
            if native is not None:
                return await native(text, title)
            return await asyncio.to_thread(run.extractor.extract, text, title)

    tasks = [[asyncio.ensure_future(extract(c, src.title or None)) for c in chunks] for src, chunks, _ in run.work]
    try:
        for window in run.windows(tasks):
            done = []
            try:
                for item, futures in window:
                    await asyncio.to_thread(run.begin, item)
                    done.append((item, [run.extracted(item, i, await f) for i, f in enumerate(futures)]))
            finally:   # what was extracted before a failure is written all the same
                await asyncio.to_thread(run.write_window, done)
    finally:
        for t in (t for ts in tasks for t in ts):
            t.cancel()
        run.close()
    return run.finish()


class _IngestRun:
    """One ``add_documents`` call: the documents validated and sorted into work (add, replace or
    repair; unchanged ones skipped) before anything is written, then each document's steps, which
    the sync and the async entry points call in the same order."""

    def __init__(self, kg: "KnowledgeGraph", docs: Iterable[Any], *, model: Any, chunk_tokens: int,
                 merge_threshold: float | None, max_chars: int, progress: bool | None, extractor: Any,
                 max_concurrency: int, on_progress: Callable[[dict[str, Any]], None] | None) -> None:
        sources = [coerce_document(d, max_chars=max_chars) for d in docs]
        check_int("max_concurrency", max_concurrency, 1)
        if extractor is None:
            m = resolve_model(model)
            extractor = OfflineExtractor() if is_offline(m) else LLMExtractor(m)
        self.kg, self.extractor, self.merge_threshold, self.on_progress = kg, extractor, merge_threshold, on_progress
        self.t0, self.e0 = time.perf_counter(), kg.embed_seconds
        self.report = IngestReport()
        self.work: list[tuple[SourceDocument, list[str], str]] = []   # (document, chunks, add | replace | repair)
        seen: set[str] = set()
        for src in sources:
            self.report.document_ids.append(src.id)
            if src.id in seen:   # the same id twice in one call: the first one counts
                self.report.documents_skipped += 1
                continue
            seen.add(src.id)
            chunks = chunk_text(src.text, chunk_tokens)
            stored = kg.document(src.id)
            if stored is None:
                self.work.append((src, chunks, "add"))
            elif stored["status"] != "done":
                self.work.append((src, chunks, "repair"))   # left pending by an interrupted run: clean it, then redo it
            elif _unchanged(kg, src, chunks, stored):
                self.report.documents_skipped += 1
            else:
                self.work.append((src, chunks, "replace"))
        self.total = sum(len(chunks) for _, chunks, _ in self.work)
        self.done = 0
        self.begun: list[SourceDocument] = []   # begun, not yet recorded as pending (see begin)
        self.position = {src.id: i for i, (src, _, _) in enumerate(self.work)}
        self.ahead: dict[str, np.ndarray] = {}  # passage text -> vector, embedded for windows to come
        show = progress if progress is not None else (sys.stderr.isatty() and len(sources) > 3)
        self.bar = None
        if show and self.total:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=f"ingest {kg.name}", unit="chunk")

    def begin(self, item: tuple[SourceDocument, list[str], str]) -> None:
        """Before a document's extractions are awaited: a half-written one is cleaned up, a new
        one will be recorded as pending (so a run that fails at its extraction leaves it for the
        next run to repair). The record is written with its window's first transaction, before
        anything of the document: one commit per window, not one per document."""
        src, _, action = item
        if action == "repair":
            self.kg.remove_document(src.id)
            self.report.documents_repaired += 1
        if action != "replace":
            self.begun.append(src)

    def _record_begun(self) -> None:
        """The documents begun since the last commit, recorded as pending (in the caller's transaction)."""
        for src in self.begun:
            self.kg.writer.put_document(src.id, title=src.title, status="pending", meta=src.meta,
                                        content_hash=src.content_hash)

    def _commit_begun(self) -> None:
        with self.kg.transaction():
            self._record_begun()
        self.begun.clear()

    def extracted(self, item: tuple[SourceDocument, list[str], str], i: int, ex: Extraction) -> Extraction:
        """Count one chunk's extraction (usage, progress bar, ``on_progress``), in input order."""
        src, chunks, _ = item
        self.report.usage = merge_usage(self.report.usage, ex.usage)
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        if self.on_progress is not None:
            self.on_progress({"doc_id": src.id, "chunk": i, "chunks": len(chunks), "done": self.done,
                              "total": self.total})
        return ex

    def windows(self, pending: list[Any]) -> Iterator[list[tuple[tuple[SourceDocument, list[str], str], Any]]]:
        """The work with its pending extractions, in input order, in windows of about
        :data:`EMBED_WINDOW_CHUNKS` chunks whose texts go to the embedding model together."""
        window: list[tuple[tuple[SourceDocument, list[str], str], Any]] = []
        size = 0
        for item, futures in zip(self.work, pending):
            window.append((item, futures))
            size += len(item[1])
            if size >= EMBED_WINDOW_CHUNKS:
                yield window
                window, size = [], 0
        if window:
            yield window

    def write_window(self, done: list[tuple[tuple[SourceDocument, list[str], str], list[Extraction]]]) -> None:
        """Several documents' texts embedded in one batched call per kind (the model's cost per
        call dwarfs a single passage's), then the documents written in input order in one
        transaction, their names matched against the KG's entities in one matrix product.

        A window that replaces a document (which deletes) writes each document in a transaction
        of its own. If a write fails, the window is rolled back and the documents before the
        failing one are written again, one transaction each, before the error propagates: what
        was extracted before a failure lands all the same."""
        kg = self.kg
        replaces = any(action == "replace" for (_, _, action), _ in done)
        if not done or replaces:
            self._commit_begun()
        if not done:
            return
        with kg.prefetch_embeddings(*_texts_to_embed(kg, [(src.title, cs, exs) for (src, cs, _), exs in done]),
                                    vectors=self.passages_ahead([item for item, _ in done])):
            if replaces:
                for item, extractions in done:
                    self.report.merge(self.write(item, extractions))
                return
            reports: list[IngestReport] = []
            try:
                with kg.transaction():
                    self._record_begun()
                    merger = _Merger(kg, self.merge_threshold)
                    merger.prepare([x for _, exs in done for ex in exs for x in _names(ex)])
                    facts: dict[str, Edge] = {}
                    for item, extractions in done:
                        reports.append(self.write(item, extractions, merger, facts))
                    kg.embed_facts(list(facts.values()))
            except Exception:
                logger.warning("KG %r: a window of %d documents failed at document %d; writing the %d before it "
                               "one transaction each", kg.name, len(done), len(reports) + 1, len(reports))
                self._commit_begun()
                for item, extractions in done[:len(reports)]:
                    self.report.merge(self.write(item, extractions))
                raise
            self.begun.clear()
            for r in reports:
                self.report.merge(r)
            logger.debug("KG %r: wrote a window of %d documents (%d chunks) in one transaction", kg.name, len(done),
                         sum(len(cs) for (_, cs, _), _ in done))

    def passages_ahead(self, items: list[tuple[SourceDocument, list[str], str]]) -> dict[str, np.ndarray]:
        """Vectors of the window's passages. When some are missing, the passages of the window's
        documents and of those after them, up to :data:`PASSAGES_AHEAD_CHUNKS` chunks, go to the
        model in one call (texts known before any extraction: chunks and titles)."""
        kg = self.kg
        want = [kg.passage_embedding_text(c, src.title) for src, chunks, _ in items for c in chunks]
        if all(t in self.ahead for t in want):
            return self.ahead
        group: list[str] = []
        for src, chunks, _ in self.work[self.position[items[0][0].id]:]:
            if len(group) >= max(PASSAGES_AHEAD_CHUNKS, len(want)):
                break
            group += [kg.passage_embedding_text(c, src.title) for c in chunks]
        todo = [t for t in dict.fromkeys(group) if t not in self.ahead]
        fresh = dict(zip(todo, kg.embed_texts(todo))) if todo else {}
        self.ahead = {t: self.ahead.get(t, fresh.get(t)) for t in group}   # what earlier windows used goes
        return self.ahead

    def write(self, item: tuple[SourceDocument, list[str], str], extractions: list[Extraction],
              merger: _Merger | None = None, facts: dict[str, Edge] | None = None) -> IngestReport:
        """One document into the KG, in one transaction (a replaced one's old version goes in it
        too); what it added, as a report. ``merger`` and ``facts``: what its window shares (see
        :meth:`write_window`: the window then embeds the facts), else its own."""
        kg, (src, chunks, action) = self.kg, item
        report = IngestReport()
        with kg.transaction():   # its texts were embedded for its window (write_window)
            before = None
            if action == "replace":
                before = (set(kg.document_nodes(src.id)), set(kg.document_edges(src.id)))
                kg.remove_document(src.id)
                kg.writer.put_document(src.id, title=src.title, status="pending", meta=src.meta,
                                content_hash=src.content_hash)
            w = _Writer(kg, src.id, self.merge_threshold, merger, facts)
            w.merger.prepare([x for ex in extractions for x in _names(ex)])
            for i, (c, ex) in enumerate(zip(chunks, extractions)):
                w.write_chunk(i, c, ex, title=src.title or ex.title, generated_title=not src.title)
            if facts is None:
                kg.embed_facts(list(w.facts.values()))
            kg.writer.put_document(src.id, title=src.title, status="done", n_chunks=len(chunks), meta=src.meta,
                            content_hash=src.content_hash)
            if before is not None:
                nodes, edges = set(kg.document_nodes(src.id)), set(kg.document_edges(src.id))
                report.changes[src.id] = {
                    "nodes_removed": len(before[0] - nodes), "nodes_added": len(nodes - before[0]),
                    "edges_removed": len(before[1] - edges), "edges_added": len(edges - before[1]),
                    "edges_kept": len(before[1] & edges)}
                # the old version's entities and facts were deleted and written again in this
                # transaction: they are not new to the KG, and counting them would contradict changes
                w.report.entities_added = len(w.created_entities - before[0])
                w.report.relations_added = len(w.created_relations - before[1])
        report.merge(w.report)
        if action == "replace":
            report.documents_replaced += 1
        else:
            report.documents_added += 1
        return report

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def finish(self) -> IngestReport:
        self.report.seconds = time.perf_counter() - self.t0
        self.report.embed_seconds = self.kg.embed_seconds - self.e0
        return self.report


class _Extraction:
    """Chunk extractions submitted ahead, ``workers`` at a time (threads carrying the run's context,
    so tracing callbacks follow); with one worker each runs when its result is asked for. Leaving
    the block cancels what has not started (an error stops the ingest)."""

    def __init__(self, extractor: Any, workers: int) -> None:
        self.extractor, self.workers, self.pool = extractor, workers, None

    def __enter__(self) -> "_Extraction":
        if self.workers > 1:
            from langchain_core.runnables.config import ContextThreadPoolExecutor

            self.pool = ContextThreadPoolExecutor(max_workers=self.workers)
        return self

    def submit(self, text: str, title: str | None) -> Any:
        if self.pool is not None:
            return self.pool.submit(self.extractor.extract, text, title)
        return _Deferred(lambda: self.extractor.extract(text, title))

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


class _Deferred:
    """A future-like result computed when asked for (the one-worker path)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def result(self) -> Any:
        return self.fn()
