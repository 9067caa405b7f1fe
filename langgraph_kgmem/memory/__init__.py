"""Cross-session memory on a LangGraph ``BaseStore``, namespaced per KG.

Thin typed wrappers; every namespace is ``("kgmem", <kg name>, *scope, <kind>)``, where the optional
``scope`` keeps one user's (tenant's) memory apart from another's: a factory's ``memory_scope=
("{user_id}",)`` is filled from each run's ``config["configurable"]`` (:func:`memory_scope`):

- :class:`EdgeMemory` (``edge_memory``): ReMindRAG's per-edge memory vectors.
- :class:`RecordMemory` (any registered kind): pydantic/JSON records by key.

Which kinds exist is not this package's knowledge: each method declares its own on its spec
(:class:`~langgraph_kgmem.memory.kinds.MemoryKind`, registered when the method is imported);
:data:`KINDS` reads them, :data:`SYSTEM_KINDS` are the package's own bookkeeping.

The store comes from the argument, or from the running graph (``langgraph.config.get_store()``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.errors import ConfigurationError, KgmemInputError
from langgraph_kgmem.kg.types import check_kg_name
from langgraph_kgmem.memory.edge_index import COMPLETE, EDGE_NODES_KIND, EdgeIndex, index_namespace
from langgraph_kgmem.memory.kinds import ShortNames, memory_kind
from langgraph_kgmem.memory.stored import edge_record

ROOT = "kgmem"
EDGE_QUESTIONS_KEPT = 5        # most recent questions an edge memory remembers having helped answer
EDGE_QUESTION_CHARS = 300      # each kept question at most this long: a record stays small


EDGE_MEMORY_KIND = "edge_memory"   # the namespace label of EdgeMemory's vectors (ReMindRAG registers the kind)
INDEX_KIND = "provenance_index"    # which records rest on which document (memory/provenance.py)
SCOPES_KIND = "provenance_scopes"  # the tenants whose records the index lists
KINDS = ShortNames()   # short names (CLI) -> the namespace label of every kind the methods registered
# the package's own bookkeeping beside the methods' memories (the provenance index, run records,
# the question index of run records, feedback, the shared experience layer, the router's statistics, calibration: not choices of `kgmem memory --kind`): valid namespace kinds and reserved tenant labels like the KINDS
SYSTEM_KINDS = frozenset({INDEX_KIND, SCOPES_KIND, EDGE_NODES_KIND, "runs", "run_questions", "feedback", "experience", "routes",
                          "calibration"})
# Every kind of memory is registered in KINDS or SYSTEM_KINDS (a namespace of any other kind is
# refused): what a tenant label may not be is read from there, so a new kind is reserved the day
# it is added.


def reserved_labels() -> frozenset[str]:
    """The labels no tenant may take: every kind's namespace label and short name
    (:data:`KINDS`), and the root ``"kgmem"``. A tenant ``("codebook",)`` would make its
    namespace ``("kgmem", kg, "codebook", "codebook")`` sit below the shared codebook's, so a
    search of one would find the other's items."""
    return frozenset(KINDS) | frozenset(KINDS.values()) | SYSTEM_KINDS | {ROOT}


def namespace(kg_name: str, kind: str, scope: Sequence[str] = ()) -> tuple[str, ...]:
    """The store namespace of memory ``kind`` (a namespace label of :data:`KINDS`) of KG
    ``kg_name`` for tenant ``scope``: ``("kgmem", kg_name, *scope, kind)``, each part checked
    (:func:`check_kg_name`, :func:`check_scope_label`) so no two KGs, tenants or kinds can share
    one, nor one lie below another.

    Raises:
        KgmemInputError: a kind not registered (by a method's spec, :data:`KINDS`) nor in
            :data:`SYSTEM_KINDS`, or a bad KG name or tenant."""
    if memory_kind(kind) is None and kind not in SYSTEM_KINDS:
        raise KgmemInputError(f"unknown memory kind label {kind!r}: memory kinds are declared on a method's spec "
                              f"(MethodSpec.memory, registered when the method is imported; now: "
                              f"{', '.join(sorted(KINDS.values())) or 'none'}) or are SYSTEM_KINDS")
    return (ROOT, check_kg_name(kg_name), *(check_scope_label(x) for x in scope), kind)


def stored_namespace(kg_name: str, label: str, scope: Sequence[str] = ()) -> tuple[str, ...]:
    """The namespace of a kind read back from the store (the provenance index names the kind of
    each record it lists): as :func:`namespace`, except that the kind need not be registered in
    this process (the method that wrote the record may not be imported here).

    Raises:
        KgmemInputError: a label that no kind could have, or a bad KG name or tenant."""
    if not isinstance(label, str) or not label or "." in label or label == ROOT:
        raise KgmemInputError(f"stored memory kind label {label!r} is not a namespace label")
    return (ROOT, check_kg_name(kg_name), *(check_scope_label(x) for x in scope), label)


_CONTROL = frozenset(chr(c) for c in [*range(0x20), 0x7F])


def check_scope_label(text: object, origin: object = None) -> str:
    """A tenant label of a memory namespace: 1-128 characters, no dot (LangGraph's namespace
    separator), no control character or lone surrogate (no store can keep them the same way:
    PostgreSQL refuses NUL, UTF-8 cannot encode a surrogate), and none of the
    :func:`reserved_labels` (a memory kind's name, the root). Refused as
    :class:`KgmemInputError` before any store is touched."""
    bad = not isinstance(text, str) or not text or "." in text or len(text) > 128 or \
        any(c in _CONTROL or "\ud800" <= c <= "\udfff" for c in text)
    where = f" (from {origin!r})" if origin is not None else ""
    if bad:
        raise KgmemInputError(f"memory scope label {text!r}{where} must be 1-128 characters without dots, control "
                              "characters or lone surrogates: give each tenant (user_id ...) a plain id")
    if text in reserved_labels():
        raise KgmemInputError(f"memory scope label {text!r}{where} is the name of a memory kind (or the root), which "
                              f"no tenant may take ({', '.join(sorted(reserved_labels()))}): its memory would sit "
                              "below the shared memory of that kind. Give the tenant another id, e.g. 'user-codebook'")
    return text


def memory_scope(template: Sequence[str] | None, config: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The tenant part of a memory namespace: each label of ``template`` (e.g. ``("{user_id}",)``)
    formatted with the run's ``config["configurable"]`` values (the running graph's config when
    ``config`` is None), and inside a run the tenant ids of its context (``context={"user_id": ...}``,
    which win). A value the run does not give is an error, never a shared namespace."""
    if not template:
        return ()
    context_values: dict[str, Any] = {}
    if config is None:
        from langgraph.config import get_config

        try:
            config = get_config()
        except RuntimeError:
            config = {}
        context_values = _context_scope_values()
    values = {k: v for k, v in dict((config or {}).get("configurable") or {}).items() if isinstance(v, (str, int))}
    values.update(context_values)
    out = []
    for label in template:
        try:
            text = str(label).format(**values)
        except (KeyError, IndexError) as exc:
            raise KgmemInputError(
                f"memory_scope {tuple(template)!r} needs {exc} in the run's config: invoke with "
                f"config={{'configurable': {{{str(exc)}: ...}}}}") from exc
        out.append(check_scope_label(text, label))
    return tuple(out)


def _context_scope_values() -> dict[str, Any]:
    """Tenant labels of the running graph's context (a method's options: ``scope_values()``)."""
    from langgraph.runtime import get_runtime

    try:
        context = getattr(get_runtime(), "context", None)
    except RuntimeError:   # outside a run
        return {}
    scope_values = getattr(context, "scope_values", None)
    return dict(scope_values()) if callable(scope_values) else {}


def resolve_store(store: BaseStore | None) -> BaseStore:
    """``store`` when given, else the running graph's store.

    Raises:
        ConfigurationError: neither is there; says how to give the graph a store."""
    if store is not None:
        return store
    try:
        from langgraph.config import get_store

        found = get_store()
    except RuntimeError:
        found = None
    if found is None:
        raise ConfigurationError(
            "This method keeps cross-session memory in a LangGraph store: compile the graph with "
            "store=... (e.g. `checkpointer, store = kg.persistence()`), or pass store= to the factory.")
    return found


def search_all(store: BaseStore, prefix: tuple[str, ...], page: int = 1000) -> list[Any]:
    """Every item under namespace ``prefix`` (its own and those of every namespace below it), in
    one search whose limit grows until a search comes back short.

    Not pages taken by ``offset``: the SQLite and PostgreSQL stores order a search by update time
    alone, and the items one ``store.batch`` wrote share it, so the order among them may differ
    between two searches and offset pages then skip some items and repeat others (a codebook of
    2,005 items on PostgreSQL lost four of its pages that way)."""
    limit = max(1, page)
    while True:
        found = store.search(tuple(prefix), limit=limit)
        if len(found) < limit:
            return found
        limit *= 4


def list_items(store: BaseStore, ns: tuple[str, ...], page: int = 1000) -> list[Any]:
    """Every item of namespace ``ns`` itself (:func:`search_all`). A store's search takes a
    namespace *prefix*, so it also returns the items of every namespace below ``ns``: they are
    another tenant's or another kind's, and are left out (matched exactly, on every store)."""
    ns = tuple(ns)
    return [it for it in search_all(store, ns, page) if tuple(it.namespace) == ns]


class RecordMemory:
    """JSON records under one namespace (key → dict)."""

    def __init__(self, store: BaseStore, kg_name: str, kind: str, scope: Sequence[str] = ()) -> None:
        self.store = store
        self.ns = namespace(kg_name, kind, scope)

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key`` (a copy, not indexed for semantic search), replacing what was there."""
        self.store.put(self.ns, key, dict(value), index=False)

    def get(self, key: str) -> dict[str, Any] | None:
        """The record under ``key`` as a new dict, None when there is none."""
        item = self.store.get(self.ns, key)
        return dict(item.value) if item else None

    def delete(self, key: str) -> None:
        """Delete the record under ``key`` (no error when there is none)."""
        self.store.delete(self.ns, key)

    def all(self) -> dict[str, dict[str, Any]]:
        """Every record of the namespace by key, in key order."""
        return {it.key: dict(it.value) for it in sorted(list_items(self.store, self.ns), key=lambda i: i.key)}


class EdgeMemory:
    """Per-edge memory vectors (ReMindRAG) under ``("kgmem", kg_name, "edge_memory")`` as
    ``{"v": [...], "n": updates applied, "q": [questions that strengthened it, most recent last],
    "provenance": [{"doc", "hash"}]}`` (``"q"`` and ``"provenance"`` are absent in records written
    before they were kept).
    Missing edges read as the zero vector. Reads and writes are one batched store call for the
    edges asked about, so their cost does not grow with the memory's size.

    ``guard`` (a :class:`~langgraph_kgmem.memory.provenance.Provenance` of the KG): records whose
    provenance no longer holds read as zero vectors, and every record written names the documents
    its edge rests on and is indexed for invalidation. With a guard, the records are also listed
    by the nodes their edges touch (:mod:`~langgraph_kgmem.memory.edge_index`), so a read
    ``around`` a few nodes asks the store only for the edges that have a record."""

    def __init__(self, store: BaseStore, kg_name: str, dim: int, scope: Sequence[str] = (), *,
                 guard: Any = None) -> None:
        self.store = store
        self.ns = namespace(kg_name, EDGE_MEMORY_KIND, scope)
        self.scope = tuple(scope)
        self.dim = dim
        self.guard = guard
        kg = getattr(guard, "kg", None)
        self.index = EdgeIndex(store, self.ns, lambda e: _ends(kg, e)) if kg is not None else None

    def many(self, edge_ids: Iterable[str], *, seen: dict[str, np.ndarray] | None = None,
             around: Iterable[str] | None = None, listed: dict[str, frozenset[str]] | None = None) -> np.ndarray:
        """The memory vectors of ``edge_ids`` as rows, in their order, in one batched read (zero rows for
        edges without memory). ``seen``: vectors already read (edge id → row), used instead of the
        store and filled with what this call reads; a caller keeps it for as long as it may treat
        the memory as unchanged (ReMindRAG: the steps of one walk). ``around``: nodes that every
        edge of ``edge_ids`` touches (the nodes a walk expands); with it, only the edges the node
        index lists are read (the rest have no record). ``listed``: the node index items already
        read (see :meth:`read_around`), kept and filled as ``seen`` is."""
        ids = list(edge_ids)
        out = np.zeros((len(ids), self.dim))
        zero = _zero_row(self.dim)   # shared by every edge read as having no record: never copied
        if seen is None:
            todo = list(range(len(ids)))
        else:
            todo = []
            for i, e in enumerate(ids):
                row = seen.get(e)
                if row is None:
                    todo.append(i)
                elif row is not zero:
                    out[i] = row
        known = self._listed(around, listed) if todo and around is not None else None
        if known is not None:
            if seen is not None:   # no record: a zero row, not asked again this walk
                seen.update((ids[i], zero) for i in todo if ids[i] not in known)
            todo = [i for i in todo if ids[i] in known]
        if todo:
            rows = self._records([ids[i] for i in todo])
            for i in todo:
                if (row := rows.get(ids[i])) is not None:
                    out[i] = row
                if seen is not None:
                    seen[ids[i]] = out[i]
        return out

    def read_around(self, nodes: Iterable[str], seen: dict[str, np.ndarray],
                    listed: dict[str, frozenset[str]], edge_ids: Iterable[str] = ()) -> None:
        """Read ahead, for a walk that keeps ``seen`` and ``listed`` (see :meth:`many`): the node
        index items of ``nodes`` not in ``listed``, then the records of those of ``edge_ids`` (the
        edges the walk will weigh next, each touching a node of ``nodes``) that the index lists
        and ``seen`` lacks: at most two round trips for all of them, where :meth:`many` node by
        node sends up to two each. Without a node index (no KG) it reads nothing."""
        if self.index is None:
            return
        todo = [n for n in dict.fromkeys(nodes) if n not in listed]
        known = self._listed(todo, listed) if todo else None
        if known is None:
            return
        edges = [e for e in dict.fromkeys(edge_ids) if e in known and e not in seen]
        if edges:
            rows = self._records(edges)
            zero = _zero_row(self.dim)
            for e in edges:
                row = rows.get(e)
                seen[e] = zero if row is None else row

    def _records(self, edge_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Edge id → memory vector of those of ``edge_ids`` with a record that holds, in one batch."""
        items = self.store.batch([GetOp(self.ns, e, refresh_ttl=False) for e in edge_ids])
        out: dict[str, np.ndarray] = {}
        for e, item in zip(edge_ids, items):
            if item is not None:
                vec = edge_record(item, self.dim, self.ns)[0]
                if self.guard is None or self.guard.holds(item.value):
                    out[e] = vec
        return out

    def _listed(self, around: Iterable[str], cache: dict[str, frozenset[str]] | None = None) -> set[str] | None:
        """The edges with a record that touch ``around`` (the node index; rebuilt under the lock
        when it is not complete), None without a KG to index by. ``cache``: index items already
        read (node → its edges, :data:`~langgraph_kgmem.memory.edge_index.COMPLETE` → the orphans),
        used instead of the store and filled with what this call reads."""
        if self.index is None:
            return None
        nodes = list(dict.fromkeys(around))
        todo = nodes if cache is None else [n for n in nodes if n not in cache]
        got: dict[str, frozenset[str]] | None = {}
        if todo or cache is None or COMPLETE not in cache:
            got = self.index.present_each(todo)
            if got is None:
                with _edge_lock(self.store, self.ns):
                    got = self.index.present_each(todo)
                    if got is None:
                        self.index.rebuild(list_items(self.store, self.ns))
                        got = self.index.present_each(todo)
            if got is None:
                return None
            if cache is not None:
                cache.update(got)
        have = got if cache is None else cache
        return {e for n in (*nodes, COMPLETE) for e in have.get(n, ())}

    def get(self, edge_id: str) -> np.ndarray:
        """The memory vector of ``edge_id`` (zeros when it has none)."""
        return self.many([edge_id])[0]

    def put_many(self, vectors: Mapping[str, np.ndarray], counts: Mapping[str, int] | None = None,
                 questions: Mapping[str, Sequence[str]] | None = None) -> None:
        """Write the records of these edges in one batch, replacing what was there: each vector (rounded to
        7 decimals), its update count from ``counts`` (0 when absent) and its kept ``questions``. A plain
        overwrite: :meth:`update` is the read-modify-write that concurrent writers need."""
        def record(e: str, v: np.ndarray) -> dict[str, Any]:
            rec: dict[str, Any] = {"v": [round(float(x), 7) for x in np.asarray(v, dtype=np.float64)],
                                   "n": int((counts or {}).get(e, 0))}
            if (questions or {}).get(e):
                rec["q"] = list(questions[e])  # type: ignore[index]
            if provenance is not None:
                rec["provenance"] = provenance[e]
            return rec

        if vectors:
            # what every edge rests on, from one read of their sources (not one per edge)
            provenance = self.guard.of_each_edge(list(vectors)) if self.guard is not None else None
            records = {e: record(e, v) for e, v in sorted(vectors.items())}
            ops = [PutOp(self.ns, e, rec, index=False) for e, rec in records.items()]
            if self.guard is not None:   # the records and their provenance index entries in one batch
                ops += self.guard.index_ops("edge_memory", self.scope, {e: r["provenance"] for e, r in records.items()})
            with _edge_lock(self.store, self.ns):   # the node index entries ahead of the records (edge_index.py)
                if self.index is not None:
                    ops = self.index.write_ops(records) + ops
                else:
                    EdgeIndex(self.store, self.ns, lambda e: None).drop()
                self.store.batch(ops)

    def update(self, edge_ids: Sequence[str], change: Callable[[int, np.ndarray], np.ndarray | None], *,
               question: str | None = None, credited: Iterable[str] = ()) -> int:
        """Apply ``change(position, old vector) -> new vector | None (unchanged)`` to each edge as
        one read-modify-write under :func:`~langgraph_kgmem.memory.locks.memory_lock`, so updates
        from other threads and processes are never lost (each record counts the updates applied
        to it in ``"n"``). ``question`` is added to the kept questions of the ``credited`` edges
        (those it strengthened), so a person can see why an edge is remembered. Returns how many
        edges were written."""
        ids = list(edge_ids)
        if not ids:
            return 0
        with _edge_lock(self.store, self.ns):
            items = self.store.batch([GetOp(self.ns, e, refresh_ttl=False) for e in ids])
            new: dict[str, np.ndarray] = {}
            counts: dict[str, int] = {}
            asked: dict[str, list[str]] = {}
            credit = set(credited) if question else set()
            for k, (eid, item) in enumerate(zip(ids, items)):
                old, n, kept = edge_record(item, self.dim, self.ns) if item is not None else (np.zeros(self.dim), 0, [])
                if item is not None and self.guard is not None and not self.guard.holds(item.value):
                    old, n, kept = np.zeros(self.dim), 0, []   # rests on a version that is gone: learnt again from nothing
                v = change(k, old)
                if v is not None:
                    new[eid] = v
                    counts[eid] = n + 1
                    asked[eid] = kept
                    if eid in credit:
                        asked[eid] = _kept_questions(asked[eid], str(question))
            self.put_many(new, counts, asked)
        return len(new)

    def update_counts(self) -> dict[str, int]:
        """Updates applied per edge (lists the whole namespace)."""
        return {it.key: int(it.value.get("n", 0)) for it in list_items(self.store, self.ns)}

    def keys(self) -> list[str]:
        """Every edge with a memory (lists the whole namespace)."""
        return sorted(it.key for it in list_items(self.store, self.ns))

    def __len__(self) -> int:
        return len(self.keys())


def _edge_lock(store: BaseStore, ns: tuple[str, ...]) -> Any:
    """The lock of one edge-memory namespace: every write of its records or node index, and the
    index's rebuild, hold it (:func:`~langgraph_kgmem.memory.locks.memory_lock`)."""
    from langgraph_kgmem.memory.locks import memory_lock

    return memory_lock(store, "edge_memory:" + "/".join(ns[1:-1]))


_ZERO_ROWS: dict[int, np.ndarray] = {}


def _zero_row(dim: int) -> np.ndarray:
    """A read-only zero vector of ``dim`` values, one per dimension for the process."""
    row = _ZERO_ROWS.get(dim)
    if row is None:
        row = np.zeros(dim)
        row.flags.writeable = False
        row = _ZERO_ROWS.setdefault(dim, row)
    return row


def _ends(kg: Any, edge_id: str) -> tuple[str, str] | None:
    """(source, target) of ``edge_id`` in ``kg``, None when it holds no such edge."""
    edge = kg.edge(edge_id)
    return (edge.src, edge.dst) if edge is not None else None


def _kept_questions(kept: list[str], question: str) -> list[str]:
    """``kept`` with ``question`` last (moved there when already kept), at most the most recent
    :data:`EDGE_QUESTIONS_KEPT`."""
    question = " ".join(question.split())[:EDGE_QUESTION_CHARS]
    return ([q for q in kept if q != question] + [question])[-EDGE_QUESTIONS_KEPT:]


# ------------------------------------------------------------------ what a person can see

def _kind_label(kind: str | None) -> str | None:
    if kind is None:
        return None
    if kind in KINDS:
        return KINDS[kind]
    if kind in KINDS.values():
        return kind
    raise KgmemInputError(f"unknown memory kind {kind!r}; use one of {', '.join(KINDS)}")


def memory_namespaces(store: BaseStore, kg_name: str, kind: str | None = None) -> list[tuple[str, ...]]:
    """Every namespace holding memory of KG ``kg_name`` (all scopes), optionally of one ``kind``."""
    label = _kind_label(kind)
    found = store.list_namespaces(prefix=(ROOT, check_kg_name(kg_name)), limit=100_000)
    return sorted(ns for ns in found if (label is None or ns[-1] == label) and not _bookkeeping(ns))


def _bookkeeping(ns: tuple[str, ...]) -> bool:
    """The provenance index and its list of tenants: how memory is found, not memory itself."""
    return ns[-1] in (SCOPES_KIND, EDGE_NODES_KIND) or (len(ns) >= 2 and ns[-2] == INDEX_KIND)


def list_memory(store: BaseStore, kg_name: str, kind: str | None = None, *, limit: int = 20) -> list[dict[str, Any]]:
    """What a KG remembers, per namespace: ``{"namespace", "kind", "scope", "items", "sample"}``
    where ``sample`` holds up to ``limit`` items (as their kind's ``raw`` shows them, e.g. an edge
    memory as its update count and vector norm; else as stored)."""
    out = []
    for ns in memory_namespaces(store, kg_name, kind):
        items = list_items(store, ns)
        sample = []
        for it in sorted(items, key=lambda i: i.key)[:limit]:
            value = dict(it.value)
            registered = memory_kind(ns[-1])
            if registered is not None and registered.raw is not None:
                value = registered.raw(value)
            sample.append({"key": it.key, "value": value, "updated_at": str(it.updated_at)})
        out.append({"namespace": list(ns), "kind": ns[-1], "scope": list(ns[2:-1]), "items": len(items),
                    "sample": sample})
    return out


def reset_memory(store: BaseStore, kg_name: str, kind: str | None = None, *,
                 scope: Sequence[str] | None = None) -> int:
    """Delete a KG's memory (one ``kind``, one ``scope``, or all of it); returns items deleted.
    The KG itself is untouched."""
    if scope is not None:   # a tenant no namespace can hold: say so rather than delete nothing
        scope = tuple(check_scope_label(x) for x in scope)
    deleted = 0
    for ns in memory_namespaces(store, kg_name, kind):
        if scope is not None and tuple(ns[2:-1]) != tuple(scope):
            continue
        deleted += _delete_namespace(store, ns)
    return deleted


def _delete_namespace(store: BaseStore, ns: tuple[str, ...]) -> int:
    """Delete every item of ``ns``; an edge memory's node index goes with it, under the memory's
    lock and after the records (an entry without its record reads as no record:
    memory/edge_index.py). Returns the memory items deleted."""
    def drop(target: tuple[str, ...]) -> int:
        keys = [it.key for it in list_items(store, target)]
        for i in range(0, len(keys), 500):
            store.batch([PutOp(target, k, None) for k in keys[i:i + 500]])
        return len(keys)

    if ns[-1] != EDGE_MEMORY_KIND:
        return drop(ns)
    with _edge_lock(store, ns):
        deleted = drop(ns)
        drop(index_namespace(ns))
    return deleted


def edge_memory_counts(store: BaseStore, kg_name: str) -> dict[str, int]:
    """Updates ReMindRAG's memory applied per edge of KG ``kg_name``, summed over memory scopes
    (what the HTML view draws as green edges)."""
    counts: dict[str, int] = {}
    for ns in memory_namespaces(store, kg_name):
        if ns[-1] != EDGE_MEMORY_KIND:
            continue
        for it in list_items(store, ns):
            counts[it.key] = counts.get(it.key, 0) + max(int(it.value.get("n", 0)), 1)
    return counts


__all__ = ["EdgeMemory", "RecordMemory", "edge_memory_counts", "list_memory", "list_items", "memory_namespaces",
           "memory_scope", "reserved_labels", "reset_memory", "resolve_store", "search_all"]
