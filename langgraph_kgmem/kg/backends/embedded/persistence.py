"""The embedded backend's checkpointer and memory store: LangGraph's SQLite saver and store on
``memory.sqlite`` in the KG directory, checked before anything is created in it, set up by one
process at a time; and the cross-process lock of a SQLite memory store (a file lock beside its
database, one of :data:`STRIPES` per database).
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from contextlib import AbstractContextManager, asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

from langgraph_kgmem.kg.backends.base import lock_key
from langgraph_kgmem.kg.backends.contract import PersistenceHooks, SaverFactory
from langgraph_kgmem.kg.backends.embedded.files import private_file
from langgraph_kgmem.kg.backends.embedded.sqlite import MEMORY_TABLES, check_sqlite_file, sqlite_open_error

MEMORY_DB_FILE = "memory.sqlite"
WHAT = "a langgraph_kgmem memory database"
STRIPES = 64            # lock files per memory database (keys share a stripe by hash)


@contextmanager
def sqlite_setup_lock(db: str | Path) -> Iterator[None]:
    """Hold the setup of the SQLite database ``db`` exclusively across processes.

    LangGraph's ``SqliteSaver.setup`` / ``SqliteStore.setup`` read the applied migrations and then
    insert the missing ones, unguarded: two processes opening one new database at once both insert
    version 0 and one fails (``UNIQUE constraint failed: store_migrations.v``). Setting up under
    this file lock makes the second process find the migrations applied.
    """
    from filelock import FileLock

    with FileLock(f"{db}.lock-setup", mode=0o600):
        yield


def open_sqlite_persistence(target: str, saver: SaverFactory) -> tuple[Any, Any]:
    """(checkpointer, store) on ``memory.sqlite`` in KG directory ``target``.

    Raises:
        NotAKnowledgeGraphError / CorruptStoredDataError: the file is foreign or damaged; nothing
            was created in it."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from langgraph_kgmem.kg.backends.embedded.memory_store import CheckedSqliteStore

    db = str(private_file(Path(target) / MEMORY_DB_FILE))
    checkpointer = saver(SqliteSaver, sqlite3.connect(db, check_same_thread=False), db)
    store = CheckedSqliteStore(sqlite3.connect(db, check_same_thread=False, isolation_level=None))
    store.where = db
    try:
        check_sqlite_file(checkpointer.conn, db, MEMORY_TABLES, WHAT)
        with sqlite_setup_lock(db):   # processes opening one new database set it up in turn
            checkpointer.setup()
            store.setup()
        # the store's writes (run records, feedback, route statistics) commit one by one: in WAL mode
        # (the checkpointer's setup sets it) NORMAL survives a crash of the process, like the KG's own
        # SQLite, and skips the fsync that made each small write cost milliseconds
        store.conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException as exc:
        checkpointer.conn.close()
        store.conn.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise sqlite_open_error(exc, db, WHAT) from exc
        raise
    return checkpointer, store


@asynccontextmanager
async def open_async_sqlite_persistence(target: str, saver: SaverFactory) -> AsyncIterator[tuple[Any, Any]]:
    """The async twin of :func:`open_sqlite_persistence` (same file, same tables), closed on exit."""
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from langgraph_kgmem.kg.backends.embedded.memory_store import CheckedAsyncSqliteStore

    db = str(private_file(Path(target) / MEMORY_DB_FILE))
    # checked on a plain connection first: a foreign or corrupt file is refused before setup
    # creates anything in it
    with closing(sqlite3.connect(db)) as probe:
        check_sqlite_file(probe, db, MEMORY_TABLES, WHAT)
    # the saver built on its own connection: from_conn_string takes no serializer
    async with aiosqlite.connect(db) as conn, CheckedAsyncSqliteStore.from_conn_string(db) as store:
        store.where = db
        checkpointer = saver(AsyncSqliteSaver, conn, db)
        try:
            with sqlite_setup_lock(db):   # processes opening one new database set it up in turn
                await checkpointer.setup()
                await store.setup()
        except sqlite3.DatabaseError as exc:
            raise sqlite_open_error(exc, db, WHAT) from exc
        yield checkpointer, store


def holds_sqlite_memory(target: str) -> bool:
    """Whether KG directory ``target`` has a ``memory.sqlite`` already."""
    return (Path(target) / MEMORY_DB_FILE).exists()


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


def sqlite_store_lock(store: Any, key: str) -> AbstractContextManager[None] | None:
    """For a ``SqliteStore`` (subclasses too: :mod:`.memory_store`) on a database file, the file
    lock of ``key``'s stripe beside it; None for any other store, or one in memory (one process)."""
    if "SqliteStore" not in {c.__name__ for c in type(store).__mro__}:
        return None
    path = _sqlite_path(store)
    return None if path is None else _file_lock(f"{path}.lock-{lock_key(key) % STRIPES:02d}")


HOOKS = PersistenceHooks(open=open_sqlite_persistence, open_async=open_async_sqlite_persistence,
                         holds_memory=holds_sqlite_memory, store_lock=sqlite_store_lock)
