"""Which documents, in which version, each memory record rests on; and what a delete or a
replace of a document does to the records resting on it.

A record's ``"provenance"`` is a list ``[{"doc": <document id>, "hash": <content hash of the
version it rested on>}, ...]`` (sorted by document id): :func:`provenance_for` (passages),
:func:`provenance_of_edges` and :func:`provenance_of_nodes` build it from the KG. Two guards use
it, so that no method replays memory resting on content that is gone:

- **Invalidation in the call that changes the KG** (:func:`invalidate_documents`, which
  ``KnowledgeGraph.add_documents`` and ``KnowledgeGraph.delete_document`` call): an index per
  tenant and document, namespace ``("kgmem", <kg>, *scope, "provenance_index", <document label>)``,
  holds one item per record naming that document (:func:`index_ops`, written in the record's own
  batch), and ``("kgmem", <kg>, "provenance_scopes")`` lists the KG's tenants. Only those index
  items and records are read and re-checked, so the cost follows the documents changed, not the
  memory's size. A record whose provenance no longer holds is deleted; an edge memory whose edge the new
  version still holds (between two entities, or into a passage of an unchanged document) is
  kept with its provenance brought up to date; a codebook run page loses the runs resting on the
  old version (and the codebook's revision moves on, so every process reloads it).
- **The check at read time** (:func:`holds`), which every method's replay path calls: a record
  whose provenance names a document that is gone, or a hash that is not its current version's, is
  never replayed. It makes reads correct in a store the KG does not know of (one a user built and
  passed to a factory), where no invalidation ran.

Records written before provenance was kept carry none and are read as before.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.kg.backends import DERIVED_SOURCE
from langgraph_kgmem.kg.types import content_hash
from langgraph_kgmem.memory import INDEX_KIND, SCOPES_KIND, list_items, namespace, stored_namespace
from langgraph_kgmem.memory.locks import memory_lock

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

PASSAGE_KINDS = ("chunk", "anchor")


# ------------------------------------------------------------------ what a record rests on

def _entries(kg: "KnowledgeGraph", docs: Iterable[str],
             hashes: Mapping[str, str | None] | None = None) -> list[dict[str, str]]:
    """``[{"doc", "hash"}]`` of the documents among ``docs`` the KG holds, sorted by id; from
    ``hashes`` (document → hash, read beforehand for many calls) when given."""
    wanted = sorted({d for d in docs if d and d != DERIVED_SOURCE})
    if hashes is None:
        hashes = kg.document_hashes(wanted)
    return [{"doc": d, "hash": h} for d in wanted if (h := hashes.get(d)) is not None]


def provenance_for(kg: "KnowledgeGraph", passage_ids: Iterable[str]) -> list[dict[str, str]]:
    """The documents the passages (chunk or anchor node ids) ``passage_ids`` belong to, each with
    the content hash of its current version: ``[{"doc": ..., "hash": ...}]``, sorted by document
    id. Ids the KG does not hold add nothing."""
    docs = []
    for pid in passage_ids:
        node = kg.node(pid)
        if node is not None and node.attrs.get("doc_id"):
            docs.append(str(node.attrs["doc_id"]))
    return _entries(kg, docs)


def provenance_of_nodes(kg: "KnowledgeGraph", node_ids: Iterable[str]) -> list[dict[str, str]]:
    """What nodes rest on: a passage's own document, an entity's contributing documents."""
    docs: list[str] = []
    others: list[str] = []
    for nid in dict.fromkeys(node_ids):
        node = kg.node(nid)
        if node is None:
            continue
        if node.kind in PASSAGE_KINDS and node.attrs.get("doc_id"):
            docs.append(str(node.attrs["doc_id"]))
        else:
            others.append(nid)
    for found in kg.sources_of_many(others).values():
        docs.extend(found)
    return _entries(kg, docs)


def provenance_of_edges(kg: "KnowledgeGraph", edge_ids: Iterable[str]) -> list[dict[str, str]]:
    """What edges rest on: the documents that contributed each (its sources)."""
    return _entries(kg, [d for found in _edge_sources(kg, edge_ids).values() for d in found])


def provenance_of_each_edge(kg: "KnowledgeGraph", edge_ids: Iterable[str]) -> dict[str, list[dict[str, str]]]:
    """:func:`provenance_of_edges` of each edge by itself, from one read of all their sources and
    one of their documents' hashes (a write of many edge records names each one's documents)."""
    sources = _edge_sources(kg, edge_ids)
    hashes = kg.document_hashes(d for found in sources.values() for d in found if d and d != DERIVED_SOURCE)
    return {eid: _entries(kg, sources.get(eid, ()), hashes) for eid in dict.fromkeys(edge_ids)}


def _edge_sources(kg: "KnowledgeGraph", edge_ids: Iterable[str]) -> dict[str, list[str]]:
    """The sources of the edges among ``edge_ids`` the KG holds, in one read."""
    return kg.sources_of_many([e for e in dict.fromkeys(edge_ids) if kg.edge(e) is not None])


def holds(kg: "KnowledgeGraph", provenance: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether every document ``provenance`` names is still in the KG in the version it names:
    the read-time check every replay path calls (None or empty: a record that rests on no
    document, or was written before provenance was kept, holds)."""
    if not provenance:
        return True
    current = kg.document_hashes(str(p.get("doc", "")) for p in provenance)
    return all(current.get(str(p.get("doc", ""))) == str(p.get("hash", "")) for p in provenance)


def record_holds(kg: "KnowledgeGraph", value: Mapping[str, Any] | None) -> bool:
    """:func:`holds` for a stored record's ``"provenance"`` field."""
    return holds(kg, (value or {}).get("provenance"))


def documents_of(provenance: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The document ids a provenance list names."""
    return sorted({str(p.get("doc")) for p in provenance or () if p.get("doc")})


# ------------------------------------------------------------------ the index

def _doc_label(doc_id: str) -> str:
    """The namespace label of a document's index entries (document ids may hold dots, which a
    LangGraph namespace label may not)."""
    return "doc-" + content_hash("provenance", doc_id)


def index_ops(kg_name: str, scope: Sequence[str], kind: str,
              records: Mapping[str, Sequence[Mapping[str, Any]] | None]) -> list[PutOp]:
    """The writes that index records of ``kind`` (``records``: key → provenance) under each
    document they name: one item per (document, record) in namespace ``("kgmem", kg, *scope,
    "provenance_index", <document label>)``, and the tenant in the KG's list of tenants. Blind,
    idempotent puts: a caller adds them to the batch that writes the records, so a record and its
    index entries land together (in one transaction on SqliteStore, one statement on PostgresStore)."""
    ops: list[PutOp] = []
    for key, prov in sorted(records.items()):
        for d in documents_of(prov):
            ops.append(PutOp((*namespace(kg_name, INDEX_KIND, scope), _doc_label(d)), f"{kind}/{key}",
                             {"doc": d, "kind": kind, "key": str(key)}, index=False))
    if ops:
        ops.append(PutOp(namespace(kg_name, SCOPES_KIND), json.dumps(list(scope)), {"scope": list(scope)},
                         index=False))
    return ops


def index_records(store: BaseStore, kg_name: str, scope: Sequence[str], kind: str,
                  records: Mapping[str, Sequence[Mapping[str, Any]] | None]) -> int:
    """Write :func:`index_ops` in one batch; returns the number of index entries written."""
    ops = index_ops(kg_name, scope, kind, records)
    if ops:
        store.batch(ops)
    return max(len(ops) - 1, 0)


def put_records(store: BaseStore, kg_name: str, kind: str, records: Mapping[str, Mapping[str, Any]],
                scope: Sequence[str] = (), *, indexed: dict[str, dict[str, str]] | None = None) -> None:
    """Write records of ``kind`` (key → value, each with its ``"provenance"``) and their index
    entries in one batch: the write path for any memory kind that rests on documents.

    ``indexed`` is for a record rewritten as it grows (R3-Cycle's trajectory, after every step):
    per key, the document → hash whose index entry an earlier write of that key put. Those entries
    are not put again (a hub entity rests on thousands of documents), and the map is updated once
    the batch lands. Only an invalidation deletes entries, and only with a change to the KG: the
    caller starts a new map when the KG's version moves. A record another process's invalidation
    left unindexed is still never replayed: every read path checks :func:`holds`."""
    if not records:
        return
    ns = namespace(kg_name, kind, scope)
    done = indexed if indexed is not None else {}
    fresh = {k: [p for p in v.get("provenance") or () if done.get(k, {}).get(str(p.get("doc"))) != str(p.get("hash"))]
             for k, v in records.items()}
    store.batch([PutOp(ns, k, dict(v), index=False) for k, v in sorted(records.items())]
                + index_ops(kg_name, scope, kind, fresh))
    if indexed is not None:
        for k, prov in fresh.items():
            indexed.setdefault(k, {}).update((str(p.get("doc")), str(p.get("hash"))) for p in prov)


def codebook_lock_key(kg_name: str, scope: Sequence[str] = ()) -> str:
    """The memory-lock key under which AutoPrunedRetriever's codebook of tenant ``scope`` is read
    and saved (invalidation takes it too before it rewrites a run page)."""
    return "codebook:" + "/".join((kg_name, *scope))


class Provenance:
    """The provenance helpers bound to one KG and store, for memory classes that cannot import
    this module (``memory/__init__`` sits below it): what :class:`~langgraph_kgmem.memory.EdgeMemory`
    takes as ``guard``."""

    def __init__(self, kg: "KnowledgeGraph", store: BaseStore) -> None:
        self.kg, self.store = kg, store

    def holds(self, value: Mapping[str, Any] | None) -> bool:
        """:func:`record_holds` against this KG."""
        return record_holds(self.kg, value)

    def of_edges(self, edge_ids: Iterable[str]) -> list[dict[str, str]]:
        """:func:`provenance_of_edges` of this KG."""
        return provenance_of_edges(self.kg, edge_ids)

    def of_each_edge(self, edge_ids: Iterable[str]) -> dict[str, list[dict[str, str]]]:
        """:func:`provenance_of_each_edge` of this KG."""
        return provenance_of_each_edge(self.kg, edge_ids)

    def index_ops(self, kind: str, scope: Sequence[str],
                  records: Mapping[str, Sequence[Mapping[str, Any]] | None]) -> list[PutOp]:
        """:func:`index_ops` for this KG: to add to the batch that writes the records."""
        return index_ops(self.kg.name, scope, kind, records)


# ------------------------------------------------------------------ invalidation

def invalidate_documents(kg: "KnowledgeGraph", store: BaseStore, doc_ids: Iterable[str]) -> int:
    """Re-check every record that rests on the documents ``doc_ids`` (just replaced or deleted),
    in every tenant of KG ``kg``: delete what no longer holds, keep what does (see the module
    docstring). Reads the KG's list of tenants, the index entries of these documents and the
    records they list, nothing else. Returns the number of records (and codebook runs) invalidated."""
    changed = sorted({d for d in doc_ids if d})
    if not changed:
        return 0
    total = 0
    scopes_ns = namespace(kg.name, SCOPES_KIND)
    scopes = sorted({tuple(it.value.get("scope", ())) for it in list_items(store, scopes_ns)
                     if tuple(it.namespace) == scopes_ns})
    for scope in scopes:
        entries = []
        for d in changed:
            ns = (*namespace(kg.name, INDEX_KIND, scope), _doc_label(d))
            entries += [it for it in list_items(store, ns) if tuple(it.namespace) == ns]
        refs = sorted({(str(it.value["kind"]), str(it.value["key"])) for it in entries})
        found = store.batch([GetOp(stored_namespace(kg.name, kind, scope), key, refresh_ttl=False) for kind, key in refs])
        still: dict[tuple[str, str], set[str]] = {}
        writes: list[PutOp] = []     # every delete and update of the scope, in one batch
        book_changed = False
        for (kind, key), item in zip(refs, found):
            gone, still[(kind, key)] = _recheck(kg, store, stored_namespace(kg.name, kind, scope), key, item,
                                                set(changed), writes)
            total += gone
            book_changed = book_changed or (kind == "codebook" and gone > 0)
        if book_changed:
            _bump_codebook(store, kg.name, scope)
        # an entry goes when its record no longer names its document (a new version's records
        # write entries of their own)
        writes += [PutOp(tuple(it.namespace), it.key, None) for it in entries
                   if it.value["doc"] not in still.get((str(it.value["kind"]), str(it.value["key"])), set())]
        if writes:
            store.batch(writes)
    return total


def _recheck(kg: "KnowledgeGraph", store: BaseStore, ns: tuple[str, ...], key: str, item: Any,
             changed: set[str], writes: list[PutOp]) -> tuple[int, set[str]]:
    """Re-check one indexed record (``item``, as read): (records or runs invalidated, documents it
    still names); its delete or update goes to ``writes`` (a codebook page is rewritten at once,
    under the codebook's lock)."""
    if item is None:
        return 0, set()
    value = dict(item.value)
    if ns[-1] == "codebook" and isinstance(value.get("runs"), list):
        with memory_lock(store, codebook_lock_key(kg.name, ns[2:-1])):
            item = store.get(ns, key, refresh_ttl=False)   # read again under the codebook's lock
            runs = list((item.value if item is not None else {}).get("runs", []))
            kept = [r for r in (_still(kg, r) for r in runs) if r is not None]
            if kept != runs:
                store.put(ns, key, {**dict(item.value), "runs": kept}, index=False)   # type: ignore[union-attr]
        return len(runs) - len(kept), {d for r in kept for d in documents_of(r.get("provenance"))}
    if ns[-1] == "edge_memory" and "provenance" in value:
        edge = kg.edge(key)
        ends = [kg.node(x) for x in (edge.src, edge.dst)] if edge is not None else []
        stale_end = any(n is None or (n.kind in PASSAGE_KINDS and n.attrs.get("doc_id") in changed) for n in ends)
        if edge is not None and not stale_end:   # the new version states the same edge: its memory holds
            prov = provenance_of_edges(kg, [key])
            if prov != value["provenance"]:
                writes.append(PutOp(ns, key, {**value, "provenance": prov}, index=False))
            return 0, set(documents_of(prov))
        writes.append(PutOp(ns, key, None))
        return 1, set()
    if record_holds(kg, value):
        return 0, set(documents_of(value.get("provenance")))
    writes.append(PutOp(ns, key, None))
    return 1, set()


def _still(kg: "KnowledgeGraph", run: dict[str, Any]) -> dict[str, Any] | None:
    """A codebook run after a change: an answer run holds only while every passage it cites is
    in the version it cited; a fact run (the same fact stated by several documents is kept once)
    while one of its documents still is, resting on those alone. None: it goes."""
    prov = list(run.get("provenance") or ())
    if holds(kg, prov):
        return run
    good = [p for p in prov if holds(kg, [p])]
    if run.get("channel") == "F" and good:
        return {**run, "provenance": good, "doc": good[0]["doc"]}
    return None


def _bump_codebook(store: BaseStore, kg_name: str, scope: Sequence[str]) -> None:
    """Move the codebook's stored revision on, so every process holding it reloads it (its run
    pages changed under it)."""
    ns = stored_namespace(kg_name, "codebook", scope)
    with memory_lock(store, codebook_lock_key(kg_name, scope)):
        meta = store.get(ns, "meta", refresh_ttl=False)
        if meta is None:
            return
        revision = int(meta.value.get("revision", 0)) + 1
        store.batch([PutOp(ns, "meta", {**dict(meta.value), "revision": revision}, index=False),
                     PutOp(ns, "revision", {"revision": revision}, index=False)])
