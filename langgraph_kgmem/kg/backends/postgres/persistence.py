"""The PostgreSQL backend's checkpointer and memory store: LangGraph's Postgres saver and store in
the KG's own database (or ``$KGMEM_POSTGRES_URI``), on a connection pool, set up by one process
at a time under the schema's advisory lock; and the cross-process lock of a Postgres memory
store (a session advisory lock per key).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

from langgraph_kgmem.errors import ConfigurationError, KgmemError
from langgraph_kgmem.kg.backends.base import lock_key
from langgraph_kgmem.kg.backends.contract import PersistenceHooks, SaverFactory
from langgraph_kgmem.kg.backends.postgres.pool import SCHEMA_LOCK, check_uri, database_label, storage_error

logger = logging.getLogger(__name__)

#: the environment variable that puts every KG's checkpointer and store in one PostgreSQL database
ENV = "KGMEM_POSTGRES_URI"
POOL_KWARGS = {"autocommit": True, "prepare_threshold": 0}
MEMORY_LOCK_CLASS = 0x6B6D6D   # advisory-lock namespace of memory ("kmm"); the KG itself uses 0x6B676D


def open_pg_persistence(uri: str, saver: SaverFactory) -> tuple[Any, Any]:
    """(checkpointer, store) in the database at ``uri``, on one pool (so threads, ``app.batch``, and
    the KG's own connections never share a connection).

    Raises:
        ConfigurationError: the postgres extra is missing, or ``uri`` is malformed (at once).
        StorageError: the database is unreachable or refuses the setup."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg import Connection
    except ImportError as exc:  # pragma: no cover - optional extra
        raise ConfigurationError(
            f"{'KGMEM_POSTGRES_URI is set' if uri == os.environ.get(ENV) else 'a postgresql:// KG'}"
            " needs the Postgres checkpointer and store, which are missing: "
            "pip install 'langgraph-kgmem[postgres]'") from exc
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    check_uri(uri)   # refused at once: a pool would retry a malformed URI until its timeout
    pool = ConnectionPool(uri, min_size=1, max_size=8, open=False, kwargs={**POOL_KWARGS, "row_factory": dict_row})
    try:
        pool.open(wait=True, timeout=15)
        checkpointer = saver(PostgresSaver, pool, database_label(uri))
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
                checkpointer.setup()
                store.setup()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SCHEMA_LOCK[0], 1))
    except Exception as exc:
        pool.close()
        if isinstance(exc, KgmemError):
            raise
        raise storage_error(exc, uri, "setting up the checkpointer and store") from exc
    return checkpointer, store


@asynccontextmanager
async def open_async_pg_persistence(uri: str, saver: SaverFactory) -> AsyncIterator[tuple[Any, Any]]:
    """The async twin of :func:`open_pg_persistence` (same database, same tables), closed on exit."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    check_uri(uri)   # refused at once: a pool would retry a malformed URI until its timeout
    pool = AsyncConnectionPool(uri, min_size=1, max_size=8, open=False,
                               kwargs={**POOL_KWARGS, "row_factory": dict_row})
    try:
        await pool.open(wait=True, timeout=15)
        checkpointer = saver(AsyncPostgresSaver, pool, database_label(uri))
        store = AsyncPostgresStore(pool)
        # one migrator at a time, polled (see open_pg_persistence)
        async with await AsyncConnection.connect(uri, autocommit=True) as conn:
            while not (await (await conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                                 (SCHEMA_LOCK[0], 1))).fetchone())[0]:
                logger.debug("waiting for another process to set up the checkpoint tables")
                await asyncio.sleep(0.05)
            try:
                await checkpointer.setup()
                await store.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (SCHEMA_LOCK[0], 1))
    except Exception as exc:
        await pool.close()
        if isinstance(exc, KgmemError):
            raise
        raise storage_error(exc, uri, "setting up the async checkpointer and store") from exc
    try:
        yield checkpointer, store
    finally:
        await pool.close()


def holds_pg_memory(uri: str) -> bool:
    """A database may hold memory any process wrote: always worth opening to invalidate."""
    return True


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
        c.execute("SELECT pg_advisory_lock(%s, %s)", (MEMORY_LOCK_CLASS, lock_key(key)))
        try:
            yield
        finally:
            c.execute("SELECT pg_advisory_unlock(%s, %s)", (MEMORY_LOCK_CLASS, lock_key(key)))
    finally:
        if own:
            c.close()
        else:
            pool.putconn(c)


def pg_store_lock(store: Any, key: str) -> AbstractContextManager[None] | None:
    """For a ``PostgresStore`` (subclasses too), a session advisory lock of ``key`` on a connection of
    its own pool (or a new one to the same database); None for any other store."""
    if "PostgresStore" not in {c.__name__ for c in type(store).__mro__}:
        return None
    return _postgres_lock(store, key)


HOOKS = PersistenceHooks(open=open_pg_persistence, open_async=open_async_pg_persistence,
                         holds_memory=holds_pg_memory, env=ENV, store_lock=pg_store_lock)
