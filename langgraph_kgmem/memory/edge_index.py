"""Which edges of one tenant's edge memory have a record, listed by the nodes they touch.

ReMindRAG weighs every edge on its walk's frontier by the edge's memory, and a hub's frontier
holds thousands of edges of which a handful have a memory. Reading one record per frontier edge
made a question's cost grow with the hub's degree (docs/capacity.md). The index answers "which of these edges have a memory?" with one read per
node the walk expands instead:

- namespace ``("kgmem", <kg>, *scope, "edge_memory_nodes")`` beside the memory's own;
- one item per node (key: the node id) listing the ids of the remembered edges that touch it
  (``{"e": [...]}``): an edge id is a hash of its two ends (:func:`~langgraph_kgmem.kg.types.edge_id`),
  so an edge never moves to other nodes;
- the item :data:`COMPLETE` says the index lists every record of the namespace, and holds the
  *orphans*: remembered edges the KG did not hold when they were indexed (their ends are not
  known), which every read includes.

The invariant readers rely on: while :data:`COMPLETE` exists, every record of the namespace is
listed under both its edge's ends or among the orphans. What keeps it:

- every write through :class:`~langgraph_kgmem.memory.EdgeMemory` holds the namespace's
  :func:`~langgraph_kgmem.memory.locks.memory_lock` and puts the index entries ahead of the
  records in the records' own batch (:meth:`EdgeIndex.write_ops`): the PostgreSQL store writes
  one batch's items in one statement and the SQLite store in one transaction, so a reader sees
  both or neither; a store that applies a batch's writes one by one (``InMemoryStore``) applies
  the entries first, and a reader between them reads a record that is not there yet: a zero
  vector, as before the write;
- a writer that cannot name the ends (an ``EdgeMemory`` without a KG) deletes :data:`COMPLETE`
  before it writes, so the next reader rebuilds the index from the namespace (under the lock);
- ``reset_memory`` deletes the records first and the index after them, under the lock;
- an invalidation (:mod:`~langgraph_kgmem.memory.provenance`) only deletes or rewrites records:
  an entry whose record is gone reads as no record, as it did without the index.

An entry may outlive its record (reset, invalidation): that costs one read of a record that is
not there, never a lost one. A record put into the store by hand (``store.put``, not through
``EdgeMemory``) while :data:`COMPLETE` exists is not listed, so ReMindRAG does not replay it until
the index is rebuilt (:meth:`EdgeIndex.rebuild`, or delete the ``COMPLETE`` item).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from langgraph.store.base import BaseStore, GetOp, PutOp

EDGE_NODES_KIND = "edge_memory_nodes"   # the index's namespace label, beside "edge_memory"
COMPLETE = "*complete"                  # no node id starts with "*" (they are "<prefix>-<hash>")


def index_namespace(memory_ns: Sequence[str]) -> tuple[str, ...]:
    """The index namespace of the edge-memory namespace ``memory_ns`` (its kind label replaced)."""
    return (*tuple(memory_ns)[:-1], EDGE_NODES_KIND)


class EdgeIndex:
    """The node index of one edge-memory namespace (see the module docstring). ``ends(edge_id)``
    gives an edge's (source, target), None when the KG does not hold it. The caller holds the
    namespace's lock around :meth:`write` and :meth:`rebuild`."""

    def __init__(self, store: BaseStore, memory_ns: Sequence[str],
                 ends: Callable[[str], tuple[str, str] | None]) -> None:
        self.store = store
        self.memory_ns = tuple(memory_ns)
        self.ns = index_namespace(memory_ns)
        self.ends = ends

    def present(self, around: Iterable[str]) -> set[str] | None:
        """The remembered edges that touch a node of ``around`` (plus the orphans), in one batched
        read; None when the index is not complete (rebuild it, or read every edge)."""
        each = self.present_each(around)
        return None if each is None else {e for ids in each.values() for e in ids}

    def present_each(self, around: Iterable[str]) -> dict[str, frozenset[str]] | None:
        """:meth:`present` node by node: node → the remembered edges that touch it, and
        :data:`COMPLETE` → the orphans; None when the index is not complete."""
        nodes = [n for n in dict.fromkeys(around) if n != COMPLETE]
        items = self.store.batch([GetOp(self.ns, COMPLETE, refresh_ttl=False),
                                  *(GetOp(self.ns, n, refresh_ttl=False) for n in nodes)])
        if items[0] is None:
            return None
        lists = {COMPLETE: _ids(items[0].value, "orphans"),
                 **{n: _ids(it.value, "e") if it is not None else [] for n, it in zip(nodes, items[1:])}}
        if any(ids is None for ids in lists.values()):   # a damaged item: read as incomplete, rebuilt over
            return None
        return {n: frozenset(ids or ()) for n, ids in lists.items()}

    def write(self, edge_ids: Iterable[str]) -> None:
        """List ``edge_ids`` (about to be written) in the index, before their records are written.
        An incomplete index is left as it is (its rebuild will list them)."""
        ops = self.write_ops(edge_ids)
        if ops:
            self.store.batch(ops)

    def write_ops(self, edge_ids: Iterable[str]) -> list[PutOp]:
        """The writes that list ``edge_ids`` in the index (reading its items now), for the caller
        to put ahead of the records in the records' own batch; none for an incomplete index (its
        rebuild will list them). A damaged item drops the index here (the next reader rebuilds it)."""
        ids = list(dict.fromkeys(edge_ids))
        if not ids:
            return []
        ends = {e: self.ends(e) for e in ids}
        nodes = sorted({n for pair in ends.values() if pair is not None for n in pair})
        items = self.store.batch([GetOp(self.ns, COMPLETE, refresh_ttl=False),
                                  *(GetOp(self.ns, n, refresh_ttl=False) for n in nodes)])
        if items[0] is None:
            return []
        got = {n: _ids(it.value, "e") if it is not None else [] for n, it in zip(nodes, items[1:])}
        old_orphans = _ids(items[0].value, "orphans")
        if old_orphans is None or any(v is None for v in got.values()):
            self.drop()   # a damaged item: the next reader rebuilds the whole index
            return []
        lists = {n: set(v or ()) for n, v in got.items()}
        orphans = set(old_orphans)
        before = {n: set(v) for n, v in lists.items()}, set(orphans)
        for e, pair in ends.items():
            if pair is None:
                orphans.add(e)
            else:
                for n in pair:
                    lists[n].add(e)
        ops = [PutOp(self.ns, n, {"e": sorted(v)}, index=False) for n, v in lists.items() if v != before[0][n]]
        if orphans != before[1]:
            ops.append(PutOp(self.ns, COMPLETE, {"orphans": sorted(orphans)}, index=False))
        return ops

    def rebuild(self, records: Iterable[Any]) -> None:
        """Index ``records`` (every item of the memory namespace, read under the lock) afresh: the
        node items first, :data:`COMPLETE` last, so no reader sees it before the entries."""
        lists: dict[str, set[str]] = {}
        orphans: set[str] = set()
        for key in sorted({str(it.key) for it in records}):
            pair = self.ends(key)
            if pair is None:
                orphans.add(key)
                continue
            for n in pair:
                lists.setdefault(n, set()).add(key)
        ops = [PutOp(self.ns, n, {"e": sorted(v)}, index=False) for n, v in sorted(lists.items())]
        for i in range(0, len(ops), 500):
            self.store.batch(ops[i:i + 500])
        self.store.batch([PutOp(self.ns, COMPLETE, {"orphans": sorted(orphans)}, index=False)])

    def drop(self) -> None:
        """Mark the index incomplete (delete :data:`COMPLETE`): the next reader rebuilds it."""
        self.store.batch([PutOp(self.ns, COMPLETE, None)])


def _ids(value: Any, field: str) -> list[str] | None:
    """The id list ``field`` of an index item; None for an item of another shape (damaged)."""
    got = value.get(field) if isinstance(value, dict) else None
    if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
        return None
    return got
