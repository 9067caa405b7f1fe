"""The embedded backend's checkpointer and memory store: LangGraph's SQLite saver and store on
``memory.sqlite`` in the KG directory, checked before anything is created in it, set up by one
process at a time.
"""

from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

from langgraph_kgmem.kg.backends.contract import PersistenceHooks, SaverFactory
from langgraph_kgmem.kg.backends.embedded.files import private_file
from langgraph_kgmem.kg.backends.embedded.sqlite import MEMORY_TABLES, check_sqlite_file, sqlite_open_error

MEMORY_DB_FILE = "memory.sqlite"
WHAT = "a langgraph_kgmem memory database"


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


HOOKS = PersistenceHooks(open=open_sqlite_persistence, open_async=open_async_sqlite_persistence,
                         holds_memory=holds_sqlite_memory)
