"""Critical sections over a LangGraph store, across threads and across processes.

``BaseStore`` has no transactions or compare-and-set, and memory updates are read-modify-write
(an edge memory vector moves; a codebook gains runs). Without a lock, two writers that read the
same state both write, and one update is lost. :func:`memory_lock` serialises such sections:

- every store: a re-entrant thread lock per (store, key), for the threads of one process
  (``app.batch``, ``ainvoke``);
- a store of a registered backend: that backend's cross-process lock (its persistence hooks'
  ``store_lock``): for ``PostgresStore`` a PostgreSQL session advisory lock per key
  (:mod:`~langgraph_kgmem.kg.backends.postgres.persistence`), for ``SqliteStore`` a file lock
  beside its database file (:mod:`~langgraph_kgmem.kg.backends.embedded.persistence`);
- any other store (``InMemoryStore``): the thread lock alone, which is all it needs.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Iterator

from langgraph_kgmem.kg.backends import registered_backends

_registry_lock = threading.Lock()
_thread_locks: "weakref.WeakKeyDictionary[Any, dict[str, threading.RLock]]" = weakref.WeakKeyDictionary()


def _thread_lock(store: Any, key: str) -> threading.RLock:
    with _registry_lock:
        locks = _thread_locks.setdefault(store, {})
        return locks.setdefault(key, threading.RLock())


def _process_lock(store: Any, key: str) -> AbstractContextManager[None]:
    """The cross-process lock of the backend whose store ``store`` is (its persistence hooks'
    ``store_lock``), else none: the thread lock is all an in-process store needs."""
    for hooks in dict.fromkeys(s.persistence for s in registered_backends() if s.persistence is not None):
        lock = hooks.store_lock(store, key)
        if lock is not None:
            return lock
    return nullcontext()


_held = threading.local()   # (id(store), key) this thread holds: re-entry takes nothing again


@contextmanager
def memory_lock(store: Any, key: str) -> Iterator[None]:
    """Hold ``key`` on ``store`` exclusively (re-entrant within a thread) for the block."""
    held: set = getattr(_held, "keys", None) or set()
    _held.keys = held
    token = (id(store), key)
    if token in held:
        yield
        return
    with _thread_lock(store, key):
        held.add(token)
        try:
            with _process_lock(store, key):
                yield
        finally:
            held.discard(token)
