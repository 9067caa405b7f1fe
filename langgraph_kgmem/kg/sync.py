"""Keeping a KG's in-memory cache in step with writes other processes commit (shared backends).

A shared backend (PostgreSQL) bumps the KG's version on every committed write and logs the node
and edge ids it touched. :class:`ChangeFeed` remembers the version the cache reflects and, when
asked, reads only what changed since and applies it to the :class:`~langgraph_kgmem.kg.structure.GraphIndex`
(or has the whole cache reloaded when the log no longer reaches back that far). Reads check at
most every ``refresh_interval`` seconds; writes catch up under the KG's write lock, before they
write, so a write never works from a stale view.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from langgraph_kgmem.kg.backends.contract import Changes, GraphBackend
from langgraph_kgmem.kg.structure import GraphIndex

logger = logging.getLogger(__name__)


class ChangeFeed:
    """The cache's committed version and the catching up. ``reload`` rebuilds the whole cache;
    ``changed`` is called after changes were applied (caches keyed on the KG's version go)."""

    def __init__(self, store: GraphBackend, graph: GraphIndex, *, name: str, reload: Callable[[], None],
                 changed: Callable[[], None], refresh_interval: float = 1.0) -> None:
        self._store = store
        self._graph = graph
        self._name = name
        self._reload = reload
        self._changed = changed
        self.refresh_interval = refresh_interval
        #: held by the outermost write transaction; a refresh never waits for it (the writer's cache is newest)
        self.lock = threading.RLock()
        self.version = 0          # the committed version the cache reflects (-1: unknown, reload at the next check)
        self.checked_at = 0.0     # when the store was last asked

    def loaded(self, version: int) -> None:
        """The whole cache was just read, as of ``version``."""
        self.version, self.checked_at = version, time.monotonic()

    def lost(self) -> None:
        """The cache may not match the store any more (a rollback could not reload it)."""
        self.version, self.checked_at = -1, 0.0

    def committed(self) -> None:
        """This thread's write transaction committed: the cache (which it updated) is at its version."""
        version = self._store.last_committed_version()
        if version is not None:
            self.version = version

    def due(self) -> bool:
        """Whether a read should check for other processes' writes first."""
        return self._store.shared and time.monotonic() - self.checked_at >= self.refresh_interval

    def refresh(self) -> bool:
        """Apply what other processes committed since :attr:`version`; True when anything changed.
        Skipped while this process writes (its cache is the newest there is)."""
        if not self._store.shared or not self.lock.acquire(blocking=False):
            return False
        try:
            if self._store.depth:
                return False
            if self.version < 0:   # a failed write lost the connection: reload everything
                self._reload()
                return True
            return self.apply(self._store.changes_since(self.version))
        finally:
            self.lock.release()

    def catch_up(self, conn: Any) -> None:
        """Called by the shared backend under the KG's write lock, before the block's writes."""
        if self.version < 0:
            self._reload()
        else:
            self.apply(self._store.changes_since(self.version, conn))

    def apply(self, changes: Changes | None) -> bool:
        """Apply one change set of :meth:`GraphBackend.changes_since` to the cache; None (the log no
        longer reaches back) reloads everything. True when anything changed."""
        self.checked_at = time.monotonic()
        if changes is None:   # the change log no longer reaches back to our version
            logger.info("KG %r: the change log no longer reaches version %d; reloading", self._name, self.version)
            self._reload()
            return True
        version, nodes, dead_nodes, edges, dead_edges = changes
        if version == self.version and not (nodes or dead_nodes or edges or dead_edges):
            return False
        logger.debug("KG %r: version %d -> %d from other processes (%d nodes, %d edges changed)", self._name,
                     self.version, version, len(nodes) + len(dead_nodes), len(edges) + len(dead_edges))
        self._graph.apply(nodes, dead_nodes, edges, dead_edges)
        self.version = version
        self._changed()
        return True
