"""The methods' checkpointer and memory store: (checkpointer, store) pairs on one database, sync
and async, and the strict deserialisation every checkpointer here uses.

:func:`open_persistence` / :func:`open_async_persistence` put both on the KG's own PostgreSQL
database (or ``$KGMEM_POSTGRES_URI``), else on SQLite (``memory.sqlite`` in the KG directory),
else in memory.

Strict deserialisation of checkpoints: what the package's checkpointers load, and nothing else.

LangGraph's default checkpoint serializer rebuilds any ``(module, name, args)`` a msgpack payload
names — an import and a call chosen by whoever can write the checkpoint table. A KG directory's
``memory.sqlite`` is a file anyone with write access to the directory can edit, and a PostgreSQL
checkpoint table is writable by every role the database grants it to, so a planted checkpoint
would run code in the next process that reads the thread. :class:`StrictCheckpointSerializer`
loads only the types the package's method states and LangGraph's own bookkeeping hold (plain
JSON-like values, messages, documents, ``Send``/``Command``/``Interrupt``, dates and UUIDs);
a payload naming anything else — or a pickle, or the legacy JSON constructor format, which the
package never writes — is refused with :class:`~langgraph_kgmem.errors.UnsafeStoredDataError`
before anything in it is imported or called.

The memory store (``SqliteStore`` / ``PostgresStore``) keeps values as plain JSON and rebuilds no
objects, so it needs no serializer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_kgmem.checked_savers import checked
from langgraph_kgmem.errors import KgmemError, UnsafeStoredDataError
from langgraph_kgmem.kg.backends.sqlite import MEMORY_TABLES, check_sqlite_file, sqlite_open_error
from langgraph_kgmem.kg.files import private_file
from langgraph_kgmem.memory.locks import sqlite_setup_lock

logger = logging.getLogger(__name__)

MEMORY_DB_FILE = "memory.sqlite"

# (module, name) pairs a checkpoint of this package may rebuild. Method states hold JSON-native
# values only; the rest is what LangGraph itself writes into checkpoints and pending writes
# (tasks sent with Send, resumes, interrupts, message lists of subgraphs built on the KG's tools).
ALLOWED_TYPES: frozenset[tuple[str, str]] = frozenset({
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "time"), ("datetime", "timedelta"),
    ("datetime", "timezone"), ("uuid", "UUID"), ("decimal", "Decimal"),
    ("builtins", "set"), ("builtins", "frozenset"), ("collections", "deque"),
    *(("langchain_core.messages." + module, name) for module, names in {
        "base": ("BaseMessage", "BaseMessageChunk"),
        "human": ("HumanMessage", "HumanMessageChunk"),
        "ai": ("AIMessage", "AIMessageChunk"),
        "system": ("SystemMessage", "SystemMessageChunk"),
        "chat": ("ChatMessage", "ChatMessageChunk"),
        "tool": ("ToolMessage", "ToolMessageChunk"),
        "function": ("FunctionMessage", "FunctionMessageChunk"),
        "modifier": ("RemoveMessage",),
    }.items() for name in names),
    ("langchain_core.documents.base", "Document"),
    ("langgraph.types", "Send"), ("langgraph.types", "Command"), ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Overwrite"), ("langgraph.store.base", "Item"),
})
# (module, name, method) calls a checkpoint may make: how LangGraph stores a datetime
ALLOWED_METHODS: frozenset[tuple[str, str, str]] = frozenset({("datetime", "datetime", "fromisoformat")})
# payload kinds the package's checkpointers write; "json" (LangChain's constructor format, older
# LangGraph) and "pickle" are never written here, so one found in a table was put there by hand
LOADABLE_KINDS = ("null", "bytes", "bytearray", "msgpack")

_METHOD_CALL = 3        # ormsgpack ext code of (module, name, arg, method)
_CONSTRUCTORS = (0, 1, 2, 4, 5)   # ext codes of (module, name, args...): calls, dataclasses, pydantic


def _names(allowlist: Iterable[tuple[str, ...] | type]) -> set[tuple[str, ...]]:
    return {(item.__module__, item.__name__) if isinstance(item, type) else tuple(item) for item in allowlist}


class StrictCheckpointSerializer(JsonPlusSerializer):
    """LangGraph's msgpack serializer restricted to :data:`ALLOWED_TYPES` (plus ``extra``), with
    pickles off; anything else in a stored payload raises :class:`UnsafeStoredDataError`.

    Args:
        where: the database the payloads come from, for the error message (no password).
        extra: further ``(module, name)`` pairs (or classes) to allow, for graphs whose state
            holds your own types; ``checkpointer.with_allowlist([...])`` adds them later.
    """

    def __init__(self, where: str, extra: Iterable[tuple[str, ...] | type] = ()) -> None:
        self.where = where
        self.allowed = frozenset(ALLOWED_TYPES | _names(extra))
        super().__init__(pickle_fallback=False, allowed_json_modules=None,
                         allowed_msgpack_modules=tuple(self.allowed))

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> "StrictCheckpointSerializer":
        """This serializer with ``extra_allowlist`` allowed too (itself when nothing is new), still strict."""
        # LangGraph calls this (checkpointer.with_allowlist) with the types of a graph's state
        # schema; the copy must stay strict and check the merged list itself
        merged = _names(extra_allowlist) | self.allowed
        return self if merged == self.allowed else StrictCheckpointSerializer(self.where, merged)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Load one stored ``(kind, payload)``, after refusing a kind the package never writes and a
        msgpack payload naming a type outside the allowlist.

        Raises:
            UnsafeStoredDataError: naming what was refused; nothing in the payload was run."""
        kind, payload = data
        if kind not in LOADABLE_KINDS:
            raise UnsafeStoredDataError(
                f"a checkpoint in {self.where} is stored as {kind!r}, which langgraph_kgmem never writes "
                f"and refuses to load (only {', '.join(LOADABLE_KINDS)}); nothing in it was run. Delete the "
                "thread (checkpointer.delete_thread(thread_id)) or restore the database from a backup")
        if kind == "msgpack":
            refused = _refused_types(payload, self.allowed)
            if refused:
                raise UnsafeStoredDataError(
                    f"a checkpoint in {self.where} names {', '.join(sorted(refused))}, which langgraph_kgmem "
                    "does not load from stored state (it would import and call it); nothing in it was run. "
                    "Delete the thread (checkpointer.delete_thread(thread_id)) or restore the database from a "
                    "backup; if your own graph state holds that type, allow it with "
                    "checkpointer.with_allowlist([(module, name)])")
        return super().loads_typed(data)


def _refused_types(payload: bytes, allowed: frozenset[tuple[str, ...]]) -> set[str]:
    """Every type or call in msgpack ``payload`` outside ``allowed``, found without importing or
    calling anything (nested values included). A payload that is not msgpack at all is refused too."""
    refused: set[str] = set()

    def inspect(code: int, data: bytes) -> None:
        # returns None for every extension: the walk only reads names, it never builds a value
        try:
            fields = ormsgpack.unpackb(data, ext_hook=inspect, option=ormsgpack.OPT_NON_STR_KEYS)
        except (ValueError, TypeError):
            refused.add(f"an unreadable value (extension {code})")
            return None
        if code in _CONSTRUCTORS or code == _METHOD_CALL:
            if not (isinstance(fields, (list, tuple)) and len(fields) >= 3
                    and isinstance(fields[0], str) and isinstance(fields[1], str)):
                refused.add(f"a malformed value (extension {code})")
            elif code == _METHOD_CALL:
                call = (fields[0], fields[1], fields[3] if len(fields) > 3 else None)
                if call not in ALLOWED_METHODS:
                    refused.add(".".join(str(x) for x in call))
            elif (fields[0], fields[1]) not in allowed:
                refused.add(f"{fields[0]}.{fields[1]}")
        return None

    try:
        ormsgpack.unpackb(payload, ext_hook=inspect, option=ormsgpack.OPT_NON_STR_KEYS)
    except (ValueError, TypeError) as exc:
        if not refused:
            refused.add(f"unreadable data ({exc})")
    return refused


def strict_serializer(where: str) -> StrictCheckpointSerializer:
    """The serializer every checkpointer the package opens uses (see :class:`StrictCheckpointSerializer`)."""
    return StrictCheckpointSerializer(where)


@asynccontextmanager
async def open_async_persistence(path: Path | None, *, uri: str | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The async twin of :func:`open_persistence` (same database, same tables), closed on exit."""
    uri = uri or os.environ.get("KGMEM_POSTGRES_URI")
    if uri:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore
        from psycopg import AsyncConnection
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        from langgraph_kgmem.kg.backends.postgres import SCHEMA_LOCK, check_uri, database_label, storage_error

        check_uri(uri)   # refused at once: a pool would retry a malformed URI until its timeout
        pool = AsyncConnectionPool(uri, min_size=1, max_size=8, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        try:
            await pool.open(wait=True, timeout=15)
            saver = checked(AsyncPostgresSaver)(pool, serde=strict_serializer(database_label(uri)))
            saver.where = database_label(uri)
            store = AsyncPostgresStore(pool)
            # one migrator at a time, polled (see open_persistence)
            async with await AsyncConnection.connect(uri, autocommit=True) as conn:
                while not (await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                                     (SCHEMA_LOCK[0], 1))).fetchone())[0]:
                    logger.debug("waiting for another process to set up the checkpoint tables")
                    await asyncio.sleep(0.05)
                try:
                    await saver.setup()
                    await store.setup()
                finally:
                    await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SCHEMA_LOCK[0], 1))
        except Exception as exc:
            await pool.close()
            if isinstance(exc, KgmemError):
                raise
            raise storage_error(exc, uri, "setting up the async checkpointer and store") from exc
        try:
            yield saver, store
        finally:
            await pool.close()
        return
    if path is None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        yield InMemorySaver(), InMemoryStore()
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from langgraph_kgmem.memory.checked_store import CheckedAsyncSqliteStore

    import aiosqlite

    db = str(private_file(Path(path) / MEMORY_DB_FILE))
    # checked on a plain connection first: a foreign or corrupt file is refused before setup
    # creates anything in it
    with closing(sqlite3.connect(db)) as probe:
        check_sqlite_file(probe, db, MEMORY_TABLES, "a langgraph_kgmem memory database")
    # the saver built on its own connection: from_conn_string takes no serializer
    async with aiosqlite.connect(db) as conn, CheckedAsyncSqliteStore.from_conn_string(db) as store:
        store.where = db
        saver = checked(AsyncSqliteSaver)(conn, serde=strict_serializer(db))
        saver.where = db
        try:
            with sqlite_setup_lock(db):   # processes opening one new database set it up in turn
                await saver.setup()
                await store.setup()
        except sqlite3.DatabaseError as exc:
            raise sqlite_open_error(exc, db, "a langgraph_kgmem memory database") from exc
        yield saver, store


def open_persistence(path: Path | None, *, uri: str | None = None) -> tuple[Any, Any]:
    """(checkpointer, store) on one database: the KG's own PostgreSQL database (``uri``) or
    ``KGMEM_POSTGRES_URI``, else SQLite in ``path`` (in memory without one)."""
    uri = uri or os.environ.get("KGMEM_POSTGRES_URI")
    if uri:
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.store.postgres import PostgresStore
            from psycopg import Connection
        except ImportError as exc:  # pragma: no cover - optional extra
            from langgraph_kgmem.errors import ConfigurationError

            raise ConfigurationError(
                f"{'KGMEM_POSTGRES_URI is set' if uri == os.environ.get('KGMEM_POSTGRES_URI') else 'a postgresql:// KG'}"
                " needs the Postgres checkpointer and store, which are missing: "
                "pip install 'langgraph-kgmem[postgres]'") from exc
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        from langgraph_kgmem.kg.backends.postgres import SCHEMA_LOCK, check_uri, database_label, storage_error

        check_uri(uri)   # refused at once: a pool would retry a malformed URI until its timeout
        # a pool, so threads (app.batch) and the KG's own connections never share one connection
        pool = ConnectionPool(uri, min_size=1, max_size=8, open=False,
                              kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        try:
            pool.open(wait=True, timeout=15)
            saver = checked(PostgresSaver)(pool, serde=strict_serializer(database_label(uri)))
            saver.where = database_label(uri)
            store = PostgresStore(pool)
            # one migrator at a time; a session lock, not a transaction: the saver's migrations
            # create indexes CONCURRENTLY, which wait for every open transaction
            # waiting is polled: a session blocked in pg_advisory_lock holds a snapshot, which such
            # an index build waits for, while the lock holder waits for the build (a deadlock)
            with Connection.connect(uri, autocommit=True) as conn:
                while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (SCHEMA_LOCK[0], 1)).fetchone()[0]:
                    logger.debug("waiting for another process to set up the checkpoint tables")
                    time.sleep(0.05)
                try:
                    saver.setup()
                    store.setup()
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SCHEMA_LOCK[0], 1))
        except Exception as exc:
            pool.close()
            if isinstance(exc, KgmemError):
                raise
            raise storage_error(exc, uri, "setting up the checkpointer and store") from exc
        return saver, store
    if path is None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        return InMemorySaver(), InMemoryStore()
    from langgraph.checkpoint.sqlite import SqliteSaver

    from langgraph_kgmem.memory.checked_store import CheckedSqliteStore

    db = str(private_file(Path(path) / MEMORY_DB_FILE))
    saver = checked(SqliteSaver)(sqlite3.connect(db, check_same_thread=False), serde=strict_serializer(db))
    saver.where = db
    store = CheckedSqliteStore(sqlite3.connect(db, check_same_thread=False, isolation_level=None))
    store.where = db
    try:
        check_sqlite_file(saver.conn, db, MEMORY_TABLES, "a langgraph_kgmem memory database")
        with sqlite_setup_lock(db):   # processes opening one new database set it up in turn
            saver.setup()
            store.setup()
        # the store's writes (run records, feedback, route statistics) commit one by one: in WAL mode
        # (saver.setup sets it) NORMAL survives a crash of the process, like the KG's own SQLite, and
        # skips the fsync that made each small write cost milliseconds
        store.conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException as exc:
        saver.conn.close()
        store.conn.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise sqlite_open_error(exc, db, "a langgraph_kgmem memory database") from exc
        raise
    return saver, store
