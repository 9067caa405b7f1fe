"""Critical sections over a LangGraph store, across threads and across processes.

``BaseStore`` has no transactions or compare-and-set, and memory updates are read-modify-write
(an edge memory vector moves; a codebook gains runs). Without a lock, two writers that read the
same state both write, and one update is lost. :func:`memory_lock` serialises such sections:

- every store: a re-entrant thread lock per (store, key), for the threads of one process
  (``app.batch``, ``ainvoke``);
- ``PostgresStore``: a PostgreSQL session advisory lock per key, on a connection of the store's own
  pool (or a new one to the same database), for every process sharing the database;
- ``SqliteStore``: a file lock beside its database file (one of :data:`STRIPES` per database);
- any other store (``InMemoryStore``): the thread lock alone, which is all it needs.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

LOCK_CLASS = 0x6B6D6D   # advisory-lock namespace of memory ("kmm"); the KG backend uses 0x6B676D
STRIPES = 64            # SQLite: lock files per database (keys share a stripe by hash)

_registry_lock = threading.Lock()
_thread_locks: "weakref.WeakKeyDictionary[Any, dict[str, threading.RLock]]" = weakref.WeakKeyDictionary()


def _key_int(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=4).digest(), "big", signed=True)


def _thread_lock(store: Any, key: str) -> threading.RLock:
    with _registry_lock:
        locks = _thread_locks.setdefault(store, {})
        return locks.setdefault(key, threading.RLock())


def _sqlite_path(store: Any) -> Path | None:
    try:
        hit = _sqlite_paths.get(store)
    except TypeError:   # a store that takes no weak reference
        hit = None
    if hit is not None:   # a store's database file never changes
        return hit[0]
    conn = getattr(store, "conn", None)
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
    except Exception:  # noqa: BLE001 - not a sqlite connection
        return None
    path = next((r[2] for r in rows if r[1] == "main"), "")
    found = Path(path) if path else None   # "" for an in-memory database: one process only
    try:
        _sqlite_paths[store] = (found,)
    except TypeError:   # asked again next time
        pass
    return found


_sqlite_paths: "weakref.WeakKeyDictionary[Any, tuple[Path | None]]" = weakref.WeakKeyDictionary()


@contextmanager
def _file_lock(path: str) -> Iterator[None]:
    """An exclusive lock on file ``path`` across processes: ``flock`` on a descriptor opened for
    the block (closing it releases the lock, also when the process dies) where the OS has it —
    far cheaper than ``filelock.FileLock``, and taken a few times per question; the same
    ``flock`` that ``FileLock`` takes on Unix, so both exclude each other — else ``FileLock``.
    The caller's thread lock keeps this process's threads apart."""
    try:
        import fcntl
    except ImportError:   # Windows
        from filelock import FileLock

        with FileLock(path, mode=0o600):
            yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextmanager
def _postgres_lock(store: Any, key: str) -> Iterator[None]:
    conn = store.conn
    pool = conn if hasattr(conn, "getconn") else None
    if pool is not None:
        c = pool.getconn()
        own = False
    else:
        import psycopg

        c = psycopg.connect(conn.info.dsn, password=conn.info.password, autocommit=True)
        own = True
    try:
        c.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, _key_int(key)))
        try:
            yield
        finally:
            c.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, _key_int(key)))
    finally:
        if own:
            c.close()
        else:
            pool.putconn(c)


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
            kinds = {c.__name__ for c in type(store).__mro__}   # subclasses too (kg.backends.embedded.memory_store)
            if "PostgresStore" in kinds:
                with _postgres_lock(store, key):
                    yield
            elif "SqliteStore" in kinds and (path := _sqlite_path(store)) is not None:
                with _file_lock(f"{path}.lock-{_key_int(key) % STRIPES:02d}"):
                    yield
            else:
                yield
        finally:
            held.discard(token)


__all__ = ["memory_lock"]
