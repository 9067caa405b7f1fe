"""The PostgreSQL backend's database: its schema, URI checks and error mapping, the connection
pool with the calling thread's write transaction (:class:`PgDatabase`), and listing and dropping
the KGs a database holds.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator

import numpy as np

from langgraph_kgmem.errors import ConfigurationError, StorageError
from langgraph_kgmem.kg.backends.schema import FIRST_VERSION, SCHEMA_VERSION, announce, pending
from langgraph_kgmem.kg.types import check_kg_name

logger = logging.getLogger(__name__)

LOCK_CLASS = 0x6B676D   # advisory-lock namespace ("kgm"); the second key is the KG id
SCHEMA_LOCK = (LOCK_CLASS, 0)
HNSW_EF_SEARCH = 100

SCHEMA = """
CREATE TABLE IF NOT EXISTS kgmem_graphs(id BIGSERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, dim INTEGER,
    version BIGINT NOT NULL DEFAULT 0, log_from BIGINT NOT NULL DEFAULT 0,
    created TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS kgmem_meta(kg BIGINT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY(kg, key));
CREATE TABLE IF NOT EXISTS kgmem_nodes(kg BIGINT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL,
    text TEXT NOT NULL, attrs TEXT NOT NULL DEFAULT '{}', seq BIGSERIAL, PRIMARY KEY(kg, id));
CREATE TABLE IF NOT EXISTS kgmem_edges(kg BIGINT NOT NULL, id TEXT NOT NULL, src TEXT NOT NULL,
    dst TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL DEFAULT '',
    weight DOUBLE PRECISION NOT NULL DEFAULT 1.0, attrs TEXT NOT NULL DEFAULT '{}', seq BIGSERIAL,
    PRIMARY KEY(kg, id));
CREATE INDEX IF NOT EXISTS kgmem_edges_src ON kgmem_edges(kg, src);
CREATE INDEX IF NOT EXISTS kgmem_edges_dst ON kgmem_edges(kg, dst);
CREATE TABLE IF NOT EXISTS kgmem_node_sources(kg BIGINT NOT NULL, node_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    PRIMARY KEY(kg, node_id, doc_id));
CREATE INDEX IF NOT EXISTS kgmem_node_sources_doc ON kgmem_node_sources(kg, doc_id);
CREATE TABLE IF NOT EXISTS kgmem_edge_sources(kg BIGINT NOT NULL, edge_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    PRIMARY KEY(kg, edge_id, doc_id));
CREATE INDEX IF NOT EXISTS kgmem_edge_sources_doc ON kgmem_edge_sources(kg, doc_id);
CREATE TABLE IF NOT EXISTS kgmem_documents(kg BIGINT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL, n_chunks INTEGER NOT NULL DEFAULT 0, meta TEXT NOT NULL DEFAULT '{}',
    seq BIGINT NOT NULL DEFAULT 0, content_hash TEXT NOT NULL DEFAULT '', PRIMARY KEY(kg, id));
CREATE INDEX IF NOT EXISTS kgmem_documents_seq ON kgmem_documents(kg, seq);
CREATE TABLE IF NOT EXISTS kgmem_aliases(kg BIGINT NOT NULL, alias TEXT NOT NULL, node_id TEXT NOT NULL,
    similarity DOUBLE PRECISION NOT NULL, PRIMARY KEY(kg, alias));
CREATE INDEX IF NOT EXISTS kgmem_aliases_node ON kgmem_aliases(kg, node_id);
CREATE TABLE IF NOT EXISTS kgmem_changes(kg BIGINT NOT NULL, version BIGINT NOT NULL, kind "char" NOT NULL,
    id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS kgmem_changes_kg_version ON kgmem_changes(kg, version);
"""
# the last object SCHEMA creates: the schema is created in one transaction, so once this exists all
# of it does, and opening runs no DDL (CREATE INDEX IF NOT EXISTS takes a table lock even when the
# index exists, and deadlocks with another process writing to two of the tables meanwhile)
SCHEMA_LAST = re.findall(r"CREATE (?:TABLE|INDEX) IF NOT EXISTS (\w+)", SCHEMA)[-1]
# every per-KG table, for drop_kg
KG_TABLES = ("kgmem_meta", "kgmem_nodes", "kgmem_edges", "kgmem_node_sources", "kgmem_edge_sources",
              "kgmem_documents", "kgmem_aliases", "kgmem_changes")


@lru_cache(maxsize=1)
def _vector_loader() -> type:
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    class VectorLoader(Loader):
        """pgvector's binary format (int16 dimension, int16 unused, big-endian float32s) as numpy."""

        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)

    return VectorLoader


def is_postgres_uri(path: object) -> bool:
    """Whether ``path`` is a PostgreSQL URI (what this backend opens)."""
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


class PoolTimeout(Exception):
    """Stand-in until psycopg_pool is imported (its PoolTimeout replaces this name)."""


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
        from pgvector.psycopg import register_vector  # noqa: F401
        from psycopg_pool import PoolTimeout as _PoolTimeout
    except ImportError as exc:
        raise ConfigurationError(
            "A PostgreSQL KG needs the postgres extra: pip install 'langgraph-kgmem[postgres]'") from exc
    globals()["PoolTimeout"] = _PoolTimeout
    return psycopg


_ENCODE_HINT = ("percent-encode the password (and user): a space or any of @ : / ? # % in it is written %XX, e.g. "
                "python -c \"import urllib.parse; print(urllib.parse.quote(input(), safe=''))\"")


def check_uri(uri: str) -> dict[str, str]:
    """``uri`` (a ``postgresql://`` URI or a ``key=value`` connection string) parsed into its
    connection parameters, refused before any connection is tried when it cannot mean what it
    says. libpq reads a password holding an unencoded ``@`` or ``/`` as part of the host, port
    or database, so the server's error would quote the password; a space makes psycopg's own
    parse error quote it, and a pool started on such a URI retries until its timeout.

    Raises:
        ConfigurationError: what is wrong and how to encode the password; never the password itself.
    """
    from psycopg.conninfo import conninfo_to_dict

    def refuse(reason: str) -> ConfigurationError:
        return ConfigurationError(f"{uri_source(uri)} is not a usable PostgreSQL connection string: {reason}; "
                                  f"{_ENCODE_HINT}")

    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in uri) and is_postgres_uri(uri):
        raise refuse("it holds a space or a control character")
    if is_postgres_uri(uri):
        rest = uri.split("://", 1)[1]
        authority = re.split(r"[/?]", rest, maxsplit=1)[0]
        if authority.count("@") > 1:
            raise refuse("the part before the host holds more than one '@'")
        if "@" not in authority and "@" in rest:
            raise refuse("an '@' follows a '/' or '?', so the password or user name holds one of them")
    try:
        params = conninfo_to_dict(uri)
    except Exception:  # noqa: BLE001 - psycopg's message quotes the offending part, which may be the password
        raise refuse("libpq cannot parse it") from None
    port = str(params.get("port", "5432"))
    if not all(p.isdigit() and 0 < int(p) < 65536 for p in port.split(",")):
        raise refuse("its port is not a number between 1 and 65535")
    if "@" in str(params.get("host", "")):
        raise refuse("its host holds an '@'")
    return {str(k): str(v) for k, v in params.items()}


def server_label(uri: str) -> str:
    """``uri`` as host:port/database and user, never the password (for messages)."""
    try:
        d = check_uri(uri)
    except ConfigurationError:  # a malformed URI; say so without echoing a password
        return "(an unparsable URI)"
    return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')} as {d.get('user', '')!r}"


def database_label(uri: str) -> str:
    """``uri`` for messages: host, port, database and user, never the password."""
    return f"PostgreSQL at {server_label(uri)}"


def storage_error(exc: BaseException, uri: str, doing: str) -> StorageError:
    """A clear error for a database that is unreachable, refuses us, or went away."""
    from langgraph_kgmem.redaction import REDACTED, redact_secrets

    lost = " Nothing of the failed transaction was written." if doing == "writing" else ""
    said = redact_secrets(str(exc))
    try:
        password = check_uri(uri).get("password", "")
    except ConfigurationError:
        password = ""
    if len(password) >= 3:   # the server or libpq may quote it in a shape no pattern knows
        said = said.replace(password, REDACTED)
    return StorageError(
        f"PostgreSQL at {server_label(uri)} failed while {doing}: {said.strip()[:500]}.{lost} "
        f"Check the server is up and {uri_source(uri)} (host, port, database, user, password), then retry.")


def uri_source(uri: str) -> str:
    """Where ``uri`` came from, for a hint the user can act on: the environment variable only when
    it holds this URI, else the URI the caller passed (``--kg``, ``KnowledgeGraph.open``)."""
    if os.environ.get("KGMEM_POSTGRES_URI") == uri:
        return "the URI in KGMEM_POSTGRES_URI"
    return "the URI you passed (--kg or the KG's path)"


class PgDatabase:
    """A connection pool for one database, plus the calling thread's open write transaction."""

    def __init__(self, uri: str, *, max_size: int = 8, timeout: float | None = None) -> None:
        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        check_uri(uri)   # a malformed URI is refused here, before a connection (or a pool's retries)
        self.uri = uri
        # seconds to wait for a connection before saying the server is gone (KGMEM_POSTGRES_TIMEOUT)
        self.timeout = timeout if timeout is not None else float(os.environ.get("KGMEM_POSTGRES_TIMEOUT", "10"))
        self._local = threading.local()
        try:
            with psycopg.connect(uri, autocommit=True, connect_timeout=10) as conn:
                self._setup(conn)
        except psycopg.OperationalError as exc:
            raise storage_error(exc, uri, "connecting") from exc
        self._max_size = max_size
        self.pool = self._new_pool()
        try:
            self.pool.open(wait=True, timeout=15)
        except Exception as exc:  # noqa: BLE001 - pool start failure: unreachable server
            self.pool.close()
            raise storage_error(exc, uri, "opening a connection pool") from exc

    def _new_pool(self) -> Any:
        from psycopg_pool import ConnectionPool

        return ConnectionPool(self.uri, min_size=1, max_size=self._max_size, open=False, configure=self._configure,
                              kwargs={"autocommit": True})

    def _lost(self, exc: BaseException, doing: str) -> StorageError:
        """The server went away: a fresh pool reconnects at the next use (the old one would back
        off for minutes before trying again)."""
        logger.warning("PostgreSQL at %s failed while %s; a new connection pool reconnects at the next use",
                       server_label(self.uri), doing)
        old, self.pool = self.pool, self._new_pool()
        self.pool.open(wait=False)
        old.close(timeout=0)
        return storage_error(exc, self.uri, doing)

    @staticmethod
    def _setup(conn: Any) -> None:
        """pgvector and the schema, created once, or migrated forward once (under a lock: processes
        may start together). Opening a current database runs no DDL: one read of its version."""
        psycopg = _psycopg()
        if conn.execute("SELECT to_regclass('kgmem_schema')").fetchone()[0] is not None:
            version = PgDatabase._stored_version(conn)
            if version == SCHEMA_VERSION:
                return
            pending(version, server_label(conn.info.dsn))   # a newer release's database is refused unchanged
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", SCHEMA_LOCK)
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
                try:
                    with conn.transaction():
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                except psycopg.Error as exc:   # not installed on the server, or no privilege
                    raise ConfigurationError(
                        f"this PostgreSQL server has no pgvector extension ({str(exc).strip()[:200]}): install "
                        "pgvector on the server and run `CREATE EXTENSION vector` as a superuser in this "
                        "database (managed services offer it; see their docs), then retry") from exc
            if conn.execute("SELECT to_regclass('kgmem_schema')").fetchone()[0] is not None:
                found = PgDatabase._stored_version(conn)       # another process got here first
            elif conn.execute("SELECT to_regclass(%s)", (SCHEMA_LAST,)).fetchone()[0] is not None:
                found = FIRST_VERSION                            # written before versions were recorded
                conn.execute("CREATE TABLE kgmem_schema(version INTEGER NOT NULL)")
                conn.execute("INSERT INTO kgmem_schema(version) VALUES (%s)", (FIRST_VERSION,))
            else:
                conn.execute(SCHEMA)
                conn.execute("CREATE TABLE kgmem_schema(version INTEGER NOT NULL)")
                conn.execute("INSERT INTO kgmem_schema(version) VALUES (%s)", (SCHEMA_VERSION,))
                return
            steps = pending(found, server_label(conn.info.dsn))
            for step in steps:
                for statement in step.postgres:
                    conn.execute(statement)
            conn.execute("UPDATE kgmem_schema SET version = %s", (SCHEMA_VERSION,))
        announce(steps, found, server_label(conn.info.dsn))

    @staticmethod
    def _stored_version(conn: Any) -> int:
        row = conn.execute("SELECT max(version), count(*) FROM kgmem_schema").fetchone()
        return row[0] if row and row[1] == 1 else -1   # not exactly one row: not a version the package wrote

    @staticmethod
    def _configure(conn: Any) -> None:
        from psycopg.types import TypeInfo
        from pgvector.psycopg import register_vector

        register_vector(conn)
        # binary vectors straight into numpy: pgvector's own loader builds a Python object per
        # row, a third of a ReMindRAG step's database time
        conn.adapters.register_loader(TypeInfo.fetch(conn, "vector").oid, _vector_loader())
        # filtered HNSW scans keep going until LIMIT rows pass the filter (pgvector >= 0.8)
        conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")

    # -------------------------------------------------------------- connections
    @property
    def depth(self) -> int:
        """Nesting depth of the calling thread's open write transaction (0 outside one)."""
        return getattr(self._local, "depth", 0)

    @contextmanager
    def read(self) -> Iterator[Any]:
        """The thread's transaction connection if it has one, else a pooled autocommit one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        psycopg = _psycopg()
        try:
            with self.pool.connection(timeout=self.timeout) as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            raise self._lost(exc, "reading") from exc

    @contextmanager
    def transaction(self, lock_key: int | None, on_begin: Any = None, on_commit: Any = None) -> Iterator[Any]:
        """Nested-safe write transaction (no savepoints: an inner failure fails the whole block,
        as in SQLite). The outermost block takes the advisory lock ``(LOCK_CLASS, lock_key)``,
        calls ``on_begin(conn)`` and, just before COMMIT, ``on_commit(conn)``."""
        loc = self._local
        if getattr(loc, "conn", None) is not None:
            loc.depth += 1
            try:
                yield loc.conn
            finally:
                loc.depth -= 1
            return
        psycopg = _psycopg()
        try:
            with self.pool.connection(timeout=self.timeout) as conn:
                loc.conn, loc.depth = conn, 1
                try:
                    # pipeline mode: a write does not wait for its reply (only reads and COMMIT do),
                    # so a document's dozens of writes cost a few round trips, not one each
                    with conn.transaction(), conn.pipeline():
                        if lock_key is not None:
                            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, lock_key))
                        if on_begin is not None:
                            on_begin(conn)
                        yield conn
                        if on_commit is not None:
                            on_commit(conn)
                finally:
                    loc.conn, loc.depth = None, 0
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            raise self._lost(exc, "writing") from exc

    def close(self) -> None:
        """Close the connection pool; the opener calls it after the stores using it closed."""
        self.pool.close()


def find_kg_id(db: PgDatabase, name: str, *, create: bool) -> int | None:
    """The id of KG ``name`` in ``db`` (made when missing and ``create``; else None), under the schema lock."""
    with db.transaction(None) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", SCHEMA_LOCK)
        row = conn.execute("SELECT id FROM kgmem_graphs WHERE name = %s", (name,)).fetchone()
        if row is None and create:
            row = conn.execute("INSERT INTO kgmem_graphs(name) VALUES(%s) RETURNING id", (name,)).fetchone()
    return int(row[0]) if row else None


def list_kgs(uri: str) -> list[dict[str, Any]]:
    """The KGs stored in the database at ``uri`` (name, id, dimension, version)."""
    db = PgDatabase(uri, max_size=1)
    try:
        with db.read() as conn:
            rows = conn.execute("SELECT id, name, dim, version FROM kgmem_graphs ORDER BY name").fetchall()
        return [{"id": r[0], "name": r[1], "dim": r[2], "version": r[3]} for r in rows]
    finally:
        db.close()


def drop_kg(uri: str, name: str) -> bool:
    """Remove KG ``name`` (its rows and its vector table) from the database; other KGs and the
    memory store are untouched. Returns False when there was no such KG."""
    check_kg_name(name)
    db = PgDatabase(uri, max_size=1)
    try:
        kid = find_kg_id(db, name, create=False)
        if kid is None:
            return False
        with db.transaction(kid) as conn:
            for table in KG_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE kg = %s", (kid,))
            conn.execute(f"DROP TABLE IF EXISTS kgmem_vec_{kid}")
            conn.execute("DELETE FROM kgmem_graphs WHERE id = %s", (kid,))
        return True
    finally:
        db.close()
