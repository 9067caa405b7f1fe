"""What ReMindRAG's nodes share for the graph's lifetime: :class:`RemindragDeps`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from langgraph_kgmem.graphs.remindrag.maths import replay_weights
from langgraph_kgmem.graphs.remindrag.options import RemindragOptions
from langgraph_kgmem.graphs.remindrag.view import Expansion, GraphView
from langgraph_kgmem.memory import EdgeMemory, resolve_store
from langgraph_kgmem.memory import memory_scope as scope_of
from langgraph_kgmem.memory.provenance import Provenance
from langgraph_kgmem.memory.experience import ExperienceMemory

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

WALKS_KEPT = 16   # walks whose reads and rankings are kept at once (RemindragDeps.walk)


@dataclass(frozen=True)
class RemindragDeps:
    """The KG and its cached view, the build's model, store and options (bound to the nodes with
    ``functools.partial``; a run's context may replace the model and the per-run options)."""

    kg: "KnowledgeGraph"
    view: GraphView
    model: Any                    # the build's model, resolved once
    options: RemindragOptions     # the build's options (the run's context on top)
    store: Any = None             # the factory's store; None: the compiled graph's
    # what the walk in progress has read and ranked, per (thread, question): a hub's thousands of
    # edges are read and ranked once a walk, not at every step (the walk writes memory only after it ends)
    _walks: dict[tuple[str, str, tuple[str, ...]], "Walk"] = field(default_factory=dict, compare=False, repr=False)
    _walk_lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def memory_of(self, q: np.ndarray) -> EdgeMemory:
        """The edge memory of this KG in the run's tenant scope (``memory_scope`` is fixed at build)."""
        store = resolve_store(self.store)
        return EdgeMemory(store, self.kg.name, len(q), scope_of(self.options.memory_scope),
                          guard=Provenance(self.kg, store))


    def walk(self, thread: str, question: str, *, new_walk: bool, memory: EdgeMemory | None = None) -> "Walk":
        """The :class:`Walk` in progress for (``thread``, ``question``) in ``memory``'s namespace
        (a tenant's walk never sees another's reads); a new walk (a run's replay starts one)
        starts empty, so each run sees the memory as it is when it starts. The last
        :data:`WALKS_KEPT` walks are kept (concurrent runs of one compiled graph)."""
        key = (thread, question, tuple(memory.ns) if memory is not None else ())
        with self._walk_lock:
            walk = None if new_walk else self._walks.get(key)
            if walk is None:
                self._walks.pop(key, None)
                while len(self._walks) >= WALKS_KEPT:
                    self._walks.pop(next(iter(self._walks)))
                walk = self._walks[key] = Walk()
            return walk

    def experience(self) -> ExperienceMemory:
        """The shared experience layer of this KG in the run's tenant scope."""
        return ExperienceMemory(resolve_store(self.store), self.kg.name, scope_of(self.options.memory_scope), kg=self.kg)


@dataclass
class Walk:
    """What one walk has read and ranked, valid while the question, the memory and the KG stay as
    they were when it started (one run: the question and ``alpha`` are fixed, the walk writes
    memory only after it ends, and :meth:`ranked_at` forgets its rankings when the KG changes)."""

    reads: dict[str, np.ndarray] = field(default_factory=dict)   # edge id -> memory row (EdgeMemory.many(seen=))
    listed: dict[str, frozenset[str]] = field(default_factory=dict)   # node -> its remembered edges (many(listed=))
    ranked: dict[str, list[tuple[str, str, float, float]]] = field(default_factory=dict)
    version: int | None = None

    def ranked_at(self, version: int) -> dict[str, list[tuple[str, str, float, float]]]:
        """Node -> its neighbours ranked best first (see ``frontier_of``), for KG ``version``."""
        if version != self.version:
            self.version = version
            self.ranked.clear()
        return self.ranked


def edge_weights(exp: Expansion, mem: EdgeMemory, q: np.ndarray, alpha: float, walk: "Walk | None" = None) -> np.ndarray:
    """The replay weight of each of a node's traversable edges for question vector ``q`` (with
    ``walk``: from and into what it has read)."""
    if not exp.edge_ids:
        return np.zeros(0)
    if walk is None:
        return replay_weights(exp.cos_ab, mem.many(exp.edge_ids, around=exp.members), q, alpha)
    return replay_weights(exp.cos_ab, mem.many(exp.edge_ids, seen=walk.reads, around=exp.members, listed=walk.listed),
                          q, alpha)
