"""The server backend: a KG's structure in plain PostgreSQL tables, its vectors in pgvector.

One database holds many KGs (tenants): every structure row carries its KG's id, and each KG has a
vector table of its own (``kgmem_vec_<id>``, its own dimension, HNSW indexes per space, cosine).
Searches run in the server; a worker holds no vectors in RAM.

Concurrency contract (docs/tutorials/postgres.md, "Concurrency contract"):

- Any number of processes read while others write. Writes to one KG serialise on a
  transaction-scoped advisory lock keyed by the KG (other KGs in the database are not blocked);
  one document's ingest is one transaction, vectors included, so a killed writer leaves nothing
  half-written and a re-run completes it.
- Every committed write transaction bumps the KG's ``version`` and logs the node and edge ids it
  touched in ``kgmem_changes``. A process refreshes its in-memory structure cache by reading only
  those rows (:meth:`PostgresGraphStore.changes_since`), and its derived caches (PPR snapshots,
  method indexes) are keyed by that version.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from langgraph_kgmem.errors import ConfigurationError, KgmemInputError, StorageError
from langgraph_kgmem.kg.backends.contract import BackendSpec, OpenedBackend
from langgraph_kgmem.kg.backends.schema import FIRST_VERSION, SCHEMA_VERSION, announce, pending
from langgraph_kgmem.kg.stored import edge_from_row, json_object, node_from_row
from langgraph_kgmem.kg.types import Edge, Node, check_kg_name
from langgraph_kgmem.kg.vectors import HyperplaneIndex, check_vectors, pairs_above, unit_rows

logger = logging.getLogger(__name__)

LOCK_CLASS = 0x6B676D   # advisory-lock namespace ("kgm"); the second key is the KG id
SCHEMA_LOCK = (LOCK_CLASS, 0)
CHANGE_LOG_KEEP = 200_000   # change rows kept per KG; a reader further behind reloads everything
HNSW_EF_SEARCH = 100
HNSW_MIN_ROWS = 20_000    # a space gets its HNSW index once it holds this many vectors
RESOLUTION_CACHE_ROWS = 500_000   # entity vectors a writer keeps in process for resolution (750 MB at 384-d)
HNSW_PAIRS_MAX_NEW = 500   # more new rows than this: synonym pairs by exact block products instead

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
_KG_TABLES = ("kgmem_meta", "kgmem_nodes", "kgmem_edges", "kgmem_node_sources", "kgmem_edge_sources",
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


def _arr(v: Any) -> np.ndarray:
    """A pgvector value as a float32 array (pgvector's loader returns its own Vector type)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


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


def _where(uri: str) -> str:
    try:
        d = check_uri(uri)
    except ConfigurationError:  # a malformed URI; say so without echoing a password
        return "(an unparsable URI)"
    return f"{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')} as {d.get('user', '')!r}"


def database_label(uri: str) -> str:
    """``uri`` for messages: host, port, database and user, never the password."""
    return f"PostgreSQL at {_where(uri)}"


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
        f"PostgreSQL at {_where(uri)} failed while {doing}: {said.strip()[:500]}.{lost} "
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
                       _where(self.uri), doing)
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
            pending(version, _where(conn.info.dsn))   # a newer release's database is refused unchanged
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
            steps = pending(found, _where(conn.info.dsn))
            for step in steps:
                for statement in step.postgres:
                    conn.execute(statement)
            conn.execute("UPDATE kgmem_schema SET version = %s", (SCHEMA_VERSION,))
        announce(steps, found, _where(conn.info.dsn))

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


def _kg_id(db: PgDatabase, name: str, *, create: bool) -> int | None:
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
        kid = _kg_id(db, name, create=False)
        if kid is None:
            return False
        with db.transaction(kid) as conn:
            for table in _KG_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE kg = %s", (kid,))
            conn.execute(f"DROP TABLE IF EXISTS kgmem_vec_{kid}")
            conn.execute("DELETE FROM kgmem_graphs WHERE id = %s", (kid,))
        return True
    finally:
        db.close()


class PostgresGraphStore:
    """:class:`~langgraph_kgmem.kg.backends.contract.GraphBackend` on PostgreSQL, for one KG of the database."""

    kind = "postgres"
    shared = True

    def __init__(self, db: PgDatabase, name: str, *, create: bool = True) -> None:
        self.db = db
        self.name = check_kg_name(name)
        kid = _kg_id(db, name, create=create)
        if kid is None:
            raise KgmemInputError(f"no KG named {name!r} in this database; existing: "
                                  f"{[k['name'] for k in self._names()][:10]}. Create it with create=True")
        self.kg_id = kid
        self.label = f"KG {self.name!r} in PostgreSQL at {_where(db.uri)}"   # names it in errors, no password
        self.on_begin: Any = None       # set by the facade: sync its cache under the write lock
        self._pending = threading.local()

    @property
    def schema_version(self) -> int:
        with self.db.read() as conn:
            return PgDatabase._stored_version(conn)

    def _names(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            return [{"name": r[0]} for r in conn.execute("SELECT name FROM kgmem_graphs ORDER BY name")]

    # ------------------------------------------------------------ transactions & change log
    @property
    def depth(self) -> int:
        return self.db.depth

    def _log(self) -> dict[str, set[str]]:
        log = getattr(self._pending, "log", None)
        if log is None:
            log = self._pending.log = {"n": set(), "e": set()}
        return log

    def _begin(self, conn: Any) -> None:
        self._pending.log = {"n": set(), "e": set()}
        self._pending.wrote = False
        if self.on_begin is not None:
            self.on_begin(conn)

    def _commit(self, conn: Any) -> None:
        log = self._log()
        if not (log["n"] or log["e"] or getattr(self._pending, "wrote", False)):
            return
        version = conn.execute("UPDATE kgmem_graphs SET version = version + 1 WHERE id = %s RETURNING version",
                               (self.kg_id,)).fetchone()[0]
        for kind in ("n", "e"):
            if log[kind]:
                conn.execute("INSERT INTO kgmem_changes(kg, version, kind, id) "
                             "SELECT %s, %s, %s, unnest(%s::text[])", (self.kg_id, version, kind, sorted(log[kind])))
        if version % 1000 == 0:   # keep the change log bounded
            cut = conn.execute("SELECT max(version) FROM (SELECT version FROM kgmem_changes WHERE kg = %s "
                               "ORDER BY version DESC OFFSET %s) t", (self.kg_id, CHANGE_LOG_KEEP)).fetchone()[0]
            if cut is not None:
                conn.execute("DELETE FROM kgmem_changes WHERE kg = %s AND version <= %s", (self.kg_id, cut))
                conn.execute("UPDATE kgmem_graphs SET log_from = %s WHERE id = %s", (cut, self.kg_id))
        self._pending.committed_version = version
        self._pending.log = {"n": set(), "e": set()}

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        with self.db.transaction(self.kg_id, self._begin, self._commit) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """A write: inside the caller's transaction, or one of its own (so it bumps the version)."""
        with self.transaction() as conn:
            self._pending.wrote = True
            yield conn

    def version(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT version FROM kgmem_graphs WHERE id = %s", (self.kg_id,)).fetchone()[0])

    def last_committed_version(self) -> int | None:
        """The version this thread's last write transaction committed (then cleared)."""
        v = getattr(self._pending, "committed_version", None)
        self._pending.committed_version = None
        return v

    def changes_since(self, version: int, conn: Any = None
                      ) -> tuple[int, list[Node], list[str], list[Edge], list[str]] | None:
        if conn is None:
            with self.db.read() as c:
                with c.transaction():
                    c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    return self.changes_since(version, c)
        now, log_from = conn.execute("SELECT version, log_from FROM kgmem_graphs WHERE id = %s",
                                     (self.kg_id,)).fetchone()
        if now == version:
            return now, [], [], [], []
        if version < log_from:
            return None
        rows = conn.execute("SELECT DISTINCT kind, id FROM kgmem_changes WHERE kg = %s AND version > %s",
                            (self.kg_id, version)).fetchall()
        nids = [r[1] for r in rows if r[0] == "n"]
        eids = [r[1] for r in rows if r[0] == "e"]
        nodes = [node_from_row(r, self.label) for r in conn.execute(
            "SELECT id, kind, text, attrs FROM kgmem_nodes WHERE kg = %s AND id = ANY(%s) ORDER BY seq",
            (self.kg_id, nids))] if nids else []
        edges = [edge_from_row(r, self.label) for r in conn.execute(
            "SELECT id, src, dst, kind, text, weight, attrs FROM kgmem_edges WHERE kg = %s AND id = ANY(%s) "
            "ORDER BY seq", (self.kg_id, eids))] if eids else []
        alive_n = {n.id for n in nodes}
        alive_e = {e.id for e in edges}
        return (int(now), nodes, sorted(set(nids) - alive_n), edges, sorted(set(eids) - alive_e))

    def analyze(self) -> None:
        """Refresh the planner's statistics after a bulk load (without them a freshly filled
        table is planned as if it were empty, and every query on a freshly migrated KG pays for it)."""
        with self.db.read() as conn:
            for table in (*_KG_TABLES, f"kgmem_vec_{self.kg_id}"):
                if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
                    conn.execute(f"ANALYZE {table}")

    # ------------------------------------------------------------ meta
    def get_meta(self, key: str) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM kgmem_meta WHERE kg = %s AND key = %s", (self.kg_id, key)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as conn:
            conn.execute("INSERT INTO kgmem_meta(kg, key, value) VALUES(%s, %s, %s) "
                         "ON CONFLICT(kg, key) DO UPDATE SET value = excluded.value", (self.kg_id, key, value))

    # ------------------------------------------------------------ bulk loads
    def load_nodes(self) -> Iterator[Node]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT id, kind, text, attrs FROM kgmem_nodes WHERE kg = %s ORDER BY seq",
                                (self.kg_id,)).fetchall()
        for r in rows:
            yield node_from_row(r, self.label)

    def load_edges(self) -> Iterator[Edge]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT id, src, dst, kind, text, weight, attrs FROM kgmem_edges WHERE kg = %s "
                                "ORDER BY seq", (self.kg_id,)).fetchall()
        for r in rows:
            yield edge_from_row(r, self.label)

    def load_all(self) -> tuple[int, list[Node], list[Edge]]:
        """(version, nodes, edges) read in one consistent snapshot."""
        with self.db.read() as conn:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                version = conn.execute("SELECT version FROM kgmem_graphs WHERE id = %s", (self.kg_id,)).fetchone()[0]
                nodes = [node_from_row(r, self.label) for r in conn.execute(
                    "SELECT id, kind, text, attrs FROM kgmem_nodes WHERE kg = %s ORDER BY seq", (self.kg_id,))]
                edges = [edge_from_row(r, self.label) for r in conn.execute(
                    "SELECT id, src, dst, kind, text, weight, attrs FROM kgmem_edges WHERE kg = %s ORDER BY seq",
                    (self.kg_id,))]
        return int(version), nodes, edges

    # ------------------------------------------------------------ writes
    def _upsert(self, sql: str, columns: list[list[Any]], ids: list[str], kind: str) -> None:
        """One statement for the whole batch: ``sql`` reads the rows from ``unnest`` of one array
        per column (executemany costs a protocol message per row)."""
        if ids:
            with self._write() as conn:
                conn.execute(sql, (self.kg_id, *columns))
                self._log()[kind].update(ids)   # logged before the commit

    def upsert_nodes(self, nodes: Iterable[Node]) -> None:
        last = {n.id: n for n in nodes}   # the same id twice: the last wins (one row per key per statement)
        ns = list(last.values())
        self._upsert("INSERT INTO kgmem_nodes(kg, id, kind, text, attrs) "
                     "SELECT %s, * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]::jsonb[]) "
                     "ON CONFLICT(kg, id) DO UPDATE SET kind = excluded.kind, text = excluded.text, "
                     "attrs = excluded.attrs",
                     [[n.id for n in ns], [n.kind for n in ns], [n.text for n in ns],
                      [json.dumps(n.attrs, sort_keys=True) for n in ns]], list(last), "n")

    def upsert_edges(self, edges: Iterable[Edge]) -> None:
        last = {e.id: e for e in edges}
        es = list(last.values())
        self._upsert("INSERT INTO kgmem_edges(kg, id, src, dst, kind, text, weight, attrs) "
                     "SELECT %s, * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
                     "%s::float8[], %s::text[]::jsonb[]) "
                     "ON CONFLICT(kg, id) DO UPDATE SET weight = excluded.weight, attrs = excluded.attrs",
                     [[e.id for e in es], [e.src for e in es], [e.dst for e in es], [e.kind for e in es],
                      [e.text for e in es], [float(e.weight) for e in es],
                      [json.dumps(e.attrs, sort_keys=True) for e in es]], list(last), "e")

    def add_sources(self, node_ids: Iterable[str], edge_ids: Iterable[str], doc_id: str) -> None:
        nids, eids = sorted(set(node_ids)), sorted(set(edge_ids))
        if not (nids or eids):
            return
        with self._write() as conn:
            if nids:
                conn.execute("INSERT INTO kgmem_node_sources(kg, node_id, doc_id) SELECT %s, unnest(%s::text[]), %s "
                             "ON CONFLICT DO NOTHING", (self.kg_id, nids, doc_id))
            if eids:
                conn.execute("INSERT INTO kgmem_edge_sources(kg, edge_id, doc_id) SELECT %s, unnest(%s::text[]), %s "
                             "ON CONFLICT DO NOTHING", (self.kg_id, eids, doc_id))

    def _ids(self, sql: str, *params: Any) -> list[str]:
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(sql, (self.kg_id, *params))]

    def node_sources(self, node_id: str) -> list[str]:
        return self._ids("SELECT doc_id FROM kgmem_node_sources WHERE kg = %s AND node_id = %s ORDER BY doc_id",
                         node_id)

    def edge_sources(self, edge_id: str) -> list[str]:
        return self._ids("SELECT doc_id FROM kgmem_edge_sources WHERE kg = %s AND edge_id = %s ORDER BY doc_id",
                         edge_id)

    def doc_node_ids(self, doc_id: str) -> list[str]:
        return self._ids("SELECT node_id FROM kgmem_node_sources WHERE kg = %s AND doc_id = %s ORDER BY node_id",
                         doc_id)

    def doc_edge_ids(self, doc_id: str) -> list[str]:
        return self._ids("SELECT edge_id FROM kgmem_edge_sources WHERE kg = %s AND doc_id = %s ORDER BY edge_id",
                         doc_id)

    def remove_document_sources(self, doc_id: str) -> tuple[list[str], list[str]]:
        kid = self.kg_id
        with self._write() as conn:
            nodes = [r[0] for r in conn.execute(
                "DELETE FROM kgmem_node_sources WHERE kg = %s AND doc_id = %s RETURNING node_id", (kid, doc_id))]
            edges = [r[0] for r in conn.execute(
                "DELETE FROM kgmem_edge_sources WHERE kg = %s AND doc_id = %s RETURNING edge_id", (kid, doc_id))]
            kept_n = {r[0] for r in conn.execute(
                "SELECT DISTINCT node_id FROM kgmem_node_sources WHERE kg = %s AND node_id = ANY(%s)", (kid, nodes))}
            kept_e = {r[0] for r in conn.execute(
                "SELECT DISTINCT edge_id FROM kgmem_edge_sources WHERE kg = %s AND edge_id = ANY(%s)", (kid, edges))}
        return sorted(set(nodes) - kept_n), sorted(set(edges) - kept_e)

    def delete_nodes(self, ids: list[str]) -> None:
        if not ids:
            return
        with self._write() as conn:
            for table, col in (("kgmem_nodes", "id"), ("kgmem_node_sources", "node_id"), ("kgmem_aliases", "node_id")):
                conn.execute(f"DELETE FROM {table} WHERE kg = %s AND {col} = ANY(%s)", (self.kg_id, list(ids)))
            self._log()["n"].update(ids)

    def delete_edges(self, ids: list[str]) -> None:
        if not ids:
            return
        with self._write() as conn:
            for table, col in (("kgmem_edges", "id"), ("kgmem_edge_sources", "edge_id")):
                conn.execute(f"DELETE FROM {table} WHERE kg = %s AND {col} = ANY(%s)", (self.kg_id, list(ids)))
            self._log()["e"].update(ids)

    # ------------------------------------------------------------ documents
    _DOC_COLUMNS = "SELECT id, title, status, n_chunks, meta, seq, content_hash FROM kgmem_documents"

    def _document_row(self, row: tuple) -> dict[str, Any]:
        return {"id": row[0], "title": row[1], "status": row[2], "n_chunks": row[3],
                "meta": json_object(row[4], f"{self.label}: the metadata of document {str(row[0])[:80]!r}"),
                "seq": row[5], "content_hash": row[6]}

    def document(self, doc_id: str) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute(f"{self._DOC_COLUMNS} WHERE kg = %s AND id = %s", (self.kg_id, doc_id)).fetchone()
        return self._document_row(row) if row else None

    def documents(self) -> list[dict[str, Any]]:
        with self.db.read() as conn:
            rows = conn.execute(f"{self._DOC_COLUMNS} WHERE kg = %s ORDER BY seq, id", (self.kg_id,)).fetchall()
        return [self._document_row(r) for r in rows]

    def document_count(self) -> int:
        with self.db.read() as conn:
            return conn.execute("SELECT count(*) FROM kgmem_documents WHERE kg = %s", (self.kg_id,)).fetchone()[0]

    def put_document(self, doc_id: str, *, title: str, status: str, n_chunks: int = 0,
                     meta: dict[str, Any] | None = None, content_hash: str = "") -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO kgmem_documents(kg, id, title, status, n_chunks, meta, seq, content_hash) "
                "VALUES(%s, %s, %s, %s, %s, %s, (SELECT COALESCE(max(seq), 0) + 1 FROM kgmem_documents WHERE kg = %s), %s) "
                "ON CONFLICT(kg, id) DO UPDATE SET title = excluded.title, status = excluded.status, "
                "n_chunks = excluded.n_chunks, meta = excluded.meta, content_hash = excluded.content_hash",
                (self.kg_id, doc_id, title, status, n_chunks, json.dumps(meta or {}, sort_keys=True), self.kg_id,
                 content_hash))

    def delete_document_row(self, doc_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM kgmem_documents WHERE kg = %s AND id = %s", (self.kg_id, doc_id))

    # ------------------------------------------------------------ aliases
    def put_alias(self, alias: str, node_id: str, similarity: float) -> None:
        with self._write() as conn:
            conn.execute("INSERT INTO kgmem_aliases(kg, alias, node_id, similarity) VALUES(%s, %s, %s, %s) "
                         "ON CONFLICT(kg, alias) DO UPDATE SET node_id = excluded.node_id, "
                         "similarity = excluded.similarity", (self.kg_id, alias, node_id, similarity))

    def aliases(self, node_id: str | None = None) -> list[tuple[str, str, float]]:
        with self.db.read() as conn:
            if node_id is None:
                rows = conn.execute("SELECT alias, node_id, similarity FROM kgmem_aliases WHERE kg = %s "
                                    "ORDER BY alias", (self.kg_id,))
            else:
                rows = conn.execute("SELECT alias, node_id, similarity FROM kgmem_aliases WHERE kg = %s "
                                    "AND node_id = %s ORDER BY alias", (self.kg_id, node_id))
            return [tuple(r) for r in rows]

    def alias_count(self) -> int:
        with self.db.read() as conn:
            return conn.execute("SELECT count(*) FROM kgmem_aliases WHERE kg = %s", (self.kg_id,)).fetchone()[0]

    def alias_targets(self, aliases: Sequence[str]) -> dict[str, str]:
        """Recorded targets of these aliases (absent ones are left out), in one query."""
        if not aliases:
            return {}
        with self.db.read() as conn:
            return {r[0]: r[1] for r in conn.execute(
                "SELECT alias, node_id FROM kgmem_aliases WHERE kg = %s AND alias = ANY(%s)",
                (self.kg_id, list(dict.fromkeys(aliases))))}

    def alias_target(self, alias: str) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT node_id FROM kgmem_aliases WHERE kg = %s AND alias = %s",
                               (self.kg_id, alias)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        """The database pool is shared with the vectors: :func:`open_postgres` releases it last."""


class PgVectorIndex:
    """:class:`~langgraph_kgmem.kg.backends.contract.VectorBackend` in one pgvector table per KG.

    Writes go through the calling thread's open transaction (so a document's vectors commit with
    its structure); searches use HNSW (cosine) with pgvector's iterative scan for kind filters and
    are re-ranked by exact score, ties to the earlier row. HNSW is approximate: on large KGs a
    result can differ from exhaustive search in its last places.
    """

    kind = "pgvector"
    transactional = True
    remote = True   # every read is a round trip: the KG caches what it read

    def __init__(self, db: PgDatabase, store: PostgresGraphStore) -> None:
        self.db = db
        self.store = store
        self.table = f"kgmem_vec_{store.kg_id}"
        with db.read() as conn:
            row = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s", (store.kg_id,)).fetchone()
        self.dim: int | None = row[0] if row else None
        self._hnsw: set[str] | None = None   # spaces whose HNSW index exists (looked up once)
        self._rows_seen: dict[str, int] = {}  # rows per space at the last count (+ those written since)
        self._resolution: dict[tuple, tuple[list[str], list[int], np.ndarray]] = {}   # see _resolution_rows
        self._resolution_starts: dict[tuple, int] = {}   # times each copy started over (its index goes too)
        # (space, kinds, columns) -> candidate index over a copy's rows: (index, rows in it, copy's start)
        self._resolution_index: dict[tuple, tuple[HyperplaneIndex, int, int]] = {}

    def _ensure_table(self, dim: int) -> None:
        if self.dim is not None:
            if dim != self.dim:
                raise KgmemInputError(
                    f"vector dimension {dim} does not match KG {self.store.name!r}'s {self.dim}: reopen it "
                    "with the embeddings it was built with, or build a new KG under another name")
            return
        with self.store.transaction() as conn:
            row = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s FOR UPDATE", (self.store.kg_id,)).fetchone()
            if row[0] is None:
                t = self.table
                conn.execute(f"CREATE TABLE IF NOT EXISTS {t}(space TEXT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL, "
                             f"seq BIGSERIAL, v vector({int(dim)}) NOT NULL, PRIMARY KEY(space, id))")
                # exact scans of one kind (all passages' scores) read only that kind's rows
                conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_kind ON {t}(space, kind, seq)")
                conn.execute("UPDATE kgmem_graphs SET dim = %s WHERE id = %s", (int(dim), self.store.kg_id))
                self.dim = int(dim)
            else:
                self.dim = int(row[0])
                self._ensure_table(dim)

    def _exists(self) -> bool:
        if self.dim is None:   # another process may have created the table since we looked
            with self.db.read() as conn:
                row = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s", (self.store.kg_id,)).fetchone()
            self.dim = row[0] if row else None
        return self.dim is not None

    def upsert(self, space: str, ids: Sequence[str], vectors: np.ndarray, kinds: Sequence[str], *,
               normalized: bool = False) -> None:
        if not len(ids):
            return
        self._exists()
        mat = check_vectors(vectors, ids, self.dim)
        self._ensure_table(mat.shape[1])
        if not normalized:
            mat = unit_rows(mat)
        last: dict[str, int] = {i: r for r, i in enumerate(ids)}   # the same id twice: the last wins
        rows = list(last.values())
        # one statement for the batch (see PostgresGraphStore._upsert); vectors go binary: far
        # cheaper to send and parse than as text
        with self.store._write() as conn:
            conn.execute(f"INSERT INTO {self.table}(space, id, kind, v) "
                         f"SELECT %s, * FROM unnest(%s::text[], %s::text[], %b::vector[]) "
                         "ON CONFLICT(space, id) DO UPDATE SET kind = excluded.kind, v = excluded.v",
                         (space, list(last), [kinds[r] for r in rows], [mat[r] for r in rows]))
            self._maybe_index(conn, space, len(rows))

    def _indexed(self, conn: Any) -> set[str]:
        if self._hnsw is None:
            names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (self.table,))}
            self._hnsw = {sp for sp in ("nodes", "facts") if f"{self.table}_{sp}_hnsw" in names}
        return self._hnsw

    def _maybe_index(self, conn: Any, space: str, added: int) -> None:
        """Build the space's HNSW index once it holds :data:`HNSW_MIN_ROWS` vectors. Below that an
        exact scan is fast, and every row an HNSW index takes on insert costs more server time than
        the whole rest of that row's ingest, which would dominate a small KG's build; one bulk build
        later costs far less than the incremental inserts would have. Only the searched spaces
        ("nodes", "facts") get one: "texts" is read by id alone."""
        if space not in ("nodes", "facts") or space in self._indexed(conn):
            return
        # counted now and then, not on every write (other writers add rows too, hence the recount)
        seen = self._rows_seen.get(space, 0) + added
        if seen < HNSW_MIN_ROWS and space in self._rows_seen:
            self._rows_seen[space] = seen
            return
        n = self._rows_seen[space] = conn.execute(f"SELECT count(*) FROM {self.table} WHERE space = %s",
                                                  (space,)).fetchone()[0]
        if n >= HNSW_MIN_ROWS:
            conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_{space}_hnsw ON {self.table} "
                         f"USING hnsw (v vector_cosine_ops) WHERE space = '{space}'")
            self._hnsw.add(space)

    def commit(self) -> None:
        """Nothing deferred: writes go through the open transaction."""

    def flush(self) -> None:
        """Nothing deferred: writes go through the open transaction."""

    def close(self) -> None:
        """Nothing held apart from the database pool, which :func:`open_postgres` releases."""

    def discard_pending(self) -> None:
        """Nothing deferred: a rollback undoes the writes."""

    def delete(self, space: str, ids: Iterable[str]) -> None:
        ids = list(ids)
        if ids and self._exists():
            with self.store._write() as conn:
                conn.execute(f"DELETE FROM {self.table} WHERE space = %s AND id = ANY(%s)", (space, ids))

    def get_present(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of those ``ids`` that have one (one query)."""
        if not len(ids) or not self._exists():
            return {}
        with self.db.read() as conn:
            return {r[0]: _arr(r[1]) for r in conn.cursor(binary=True).execute(
                f"SELECT id, v FROM {self.table} WHERE space = %s AND id = ANY(%s)", (space, list(ids)))}

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        if not len(ids):
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        found = self.get_present(space, ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(f"no vector for {missing[:3]} in space {space!r}")
        return np.asarray([found[i] for i in ids], dtype=np.float32)

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        if not len(ids) or not self._exists():
            return [False] * len(ids)
        with self.db.read() as conn:
            have = {r[0] for r in conn.execute(f"SELECT id FROM {self.table} WHERE space = %s AND id = ANY(%s)",
                                               (space, list(ids)))}
        return [i in have for i in ids]

    @staticmethod
    def _unit(q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=np.float32).ravel()
        return q / (np.linalg.norm(q) or 1.0)

    def search(self, space: str, query: np.ndarray, k: int, kinds: Sequence[str] | None = None,
               restrict: Sequence[str] | None = None) -> list[tuple[str, float]]:
        if k <= 0 or not self._exists():
            return []
        q = self._unit(query)
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        if restrict is not None:
            if not len(restrict):
                return []
            where += " AND id = ANY(%s)"
            params.append(list(restrict))
        # a few extra rows so that exact re-ranking (and ties to the earlier row) is stable
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT id, 1 - (v <=> %b), seq FROM {self.table} WHERE {where} "
                                f"ORDER BY v <=> %b LIMIT %s", (q, *params, q, k + 8)).fetchall()
        rows.sort(key=lambda r: (-round(r[1], 6), r[2]))
        return [(r[0], float(r[1])) for r in rows[:k]]

    def best(self, space: str, queries: np.ndarray, kinds: Sequence[str] | None = None,
             columns: slice | None = None) -> list[tuple[str | None, float]]:
        queries = np.asarray(queries, dtype=np.float32)
        if not len(queries) or not self._exists():
            return [(None, -1.0)] * len(queries)
        cached = self._resolution_rows(space, kinds)
        if cached is not None:   # in process, by the embedded index's search: ties go to the earlier row, as below
            ids, mat = cached
            if not ids:
                return [(None, -1.0)] * len(queries)
            cols = columns if columns is not None else slice(None)
            key = (space, tuple(kinds) if kinds is not None else None,
                   None if columns is None else (columns.start, columns.stop, columns.step))
            start = self._resolution_starts.get(key[:2], 0)
            index, seen, made = self._resolution_index.get(key) or (None, 0, -1)
            if index is None or made != start or seen > len(ids):
                index, seen = HyperplaneIndex(mat[:0, cols].shape[1]), 0
            if seen < len(ids):
                index.add(np.arange(seen, len(ids)), mat[seen:, cols])
            self._resolution_index[key] = (index, len(ids), start)
            rows, top = index.best(unit_rows(queries)[:, cols])
            return [(ids[r], float(c)) if r >= 0 else (None, -1.0) for r, c in zip(rows.tolist(), top.tolist())]
        kind_filter = " AND b.kind = ANY(%s)" if kinds is not None else ""
        params: list[Any] = [[self._unit(q) for q in queries], space] + ([list(kinds)] if kinds is not None else [])
        # one statement for all queries; a few candidates each, re-ranked exactly (ties: earlier row)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT q.i, n.id, n.score, n.seq FROM unnest(%b::vector[]) WITH ORDINALITY AS q(v, i) "
                f"CROSS JOIN LATERAL (SELECT b.id, b.seq, 1 - (b.v <=> q.v) AS score FROM {self.table} b "
                f"WHERE b.space = %s{kind_filter} ORDER BY b.v <=> q.v LIMIT 4) n", params).fetchall()
        best: dict[int, tuple] = {}
        for i, nid, score, seq in rows:
            key = (-round(score, 6), seq)
            if i not in best or key < best[i][0]:
                best[i] = (key, nid, float(score))
        return [(best[i][1], best[i][2]) if i in best else (None, -1.0) for i in range(1, len(queries) + 1)]

    def _resolution_rows(self, space: str, kinds: Sequence[str] | None) -> tuple[list[str], np.ndarray] | None:
        """The vectors ``best`` searches (entity resolution during ingest), kept in this process
        and topped up by ``seq``, with a :class:`HyperplaneIndex` over them: a server-side exact
        scan per document would grow with the KG. Rows deleted or
        rolled back since are noticed by a count and the copy (and its index) is rebuilt. Only writers call ``best``; above :data:`RESOLUTION_CACHE_ROWS` rows the server
        (HNSW by then) answers instead (None)."""
        key = (space, tuple(kinds) if kinds is not None else None)
        ids, seqs, buf = self._resolution.get(key) or ([], [], np.zeros((0, self.dim or 0), dtype=np.float32))
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            top = seqs[-1] if seqs else 0
            kept = conn.execute(f"SELECT count(*) FROM {self.table} WHERE {where} AND seq <= %s",
                                (*params, top)).fetchone()[0]
            if kept != len(ids):   # rows went (deleted, rolled back) or came in below our mark: start over
                ids, seqs, top = [], [], 0
                self._resolution_starts[key] = self._resolution_starts.get(key, 0) + 1
            new = conn.cursor(binary=True).execute(f"SELECT id, seq, v FROM {self.table} WHERE {where} AND seq > %s "
                                                   "ORDER BY seq", (*params, top)).fetchall()
        n = len(ids)
        if n + len(new) > RESOLUTION_CACHE_ROWS:
            self._resolution.pop(key, None)
            self._resolution_starts[key] = self._resolution_starts.get(key, 0) + 1
            return None
        if new:
            if n + len(new) > len(buf):   # grown by doubling: topping up costs what was added
                grown = np.zeros((max(2 * len(buf), n + len(new), 1024), self.dim or 0), dtype=np.float32)
                grown[:n] = buf[:n]
                buf = grown
            buf[n:n + len(new)] = np.asarray([_arr(r[2]) for r in new], dtype=np.float32)
            ids = ids + [r[0] for r in new]
            seqs = seqs + [int(r[1]) for r in new]
        self._resolution[key] = (ids, seqs, buf)
        return ids, buf[:len(ids)]

    def scores(self, space: str, query: np.ndarray, kinds: Sequence[str] | None = None
               ) -> tuple[list[str], np.ndarray]:
        if not self._exists():
            return [], np.zeros(0, dtype=np.float32)
        q = self._unit(query)
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT id, 1 - (v <=> %b) FROM {self.table} WHERE {where} ORDER BY seq",
                                (q, *params)).fetchall()
        return [r[0] for r in rows], np.asarray([r[1] for r in rows], dtype=np.float32)

    def similar_pairs(self, space: str, kind: str, threshold: float, max_per_node: int,
                      since: int = 0) -> tuple[list[tuple[str, str, float]], int]:
        """Pairs involving rows added after watermark ``since``: a few new rows ask HNSW for their
        ``max_per_node`` nearest rows each; many (a first build) are compared exactly in blocks
        (:func:`pairs_above`), which copies the kind's vectors into this process for the call.
        Pairs of older rows were returned by earlier calls (the caller keeps them as edges)."""
        if not self._exists():
            return [], since
        t = self.table
        with self.db.read() as conn:
            mark, new = conn.execute(f"SELECT COALESCE(max(seq), 0), count(*) FILTER (WHERE seq > %s) FROM {t} "
                                     "WHERE space = %s AND kind = %s", (since, space, kind)).fetchone()
            if not new:
                return [], int(mark)
            if new > HNSW_PAIRS_MAX_NEW:
                rows = conn.cursor(binary=True).execute(
                    f"SELECT id, seq, v FROM {t} WHERE space = %s AND kind = %s AND seq <= %s ORDER BY seq",
                    (space, kind, mark)).fetchall()
                first_new = next(i for i, r in enumerate(rows) if r[1] > since)
                mat = np.asarray([_arr(r[2]) for r in rows], dtype=np.float32)
                return pairs_above([r[0] for r in rows], mat, threshold, max_per_node, first_new=first_new), int(mark)
            rows = conn.execute(
                f"SELECT a.id, a.seq, n.id, n.seq, 1 - (a.v <=> n.v) FROM {t} a CROSS JOIN LATERAL "
                f"(SELECT b.id, b.seq, b.v FROM {t} b WHERE b.space = a.space AND b.kind = a.kind AND b.id <> a.id "
                f" ORDER BY b.v <=> a.v LIMIT %s) n "
                f"WHERE a.space = %s AND a.kind = %s AND a.seq > %s AND a.seq <= %s AND 1 - (a.v <=> n.v) >= %s",
                (max_per_node, space, kind, since, mark, threshold)).fetchall()
        pairs: dict[tuple[str, str], float] = {}
        for a, aseq, b, bseq, sim in rows:
            key = (a, b) if aseq < bseq else (b, a)
            pairs[key] = max(pairs.get(key, -2.0), float(sim))
        return [(a, b, s) for (a, b), s in sorted(pairs.items())], int(mark)

    def matrix(self, space: str, kinds: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
        """Every vector of the space (for analysis and migration; methods never need it here)."""
        if not self._exists():
            return [], np.zeros((0, 0), dtype=np.float32)
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            rows = conn.cursor(binary=True).execute(f"SELECT id, v FROM {self.table} WHERE {where} ORDER BY seq",
                                                    params).fetchall()
        if not rows:
            return [], np.zeros((0, self.dim or 0), dtype=np.float32)
        return [r[0] for r in rows], np.asarray([_arr(r[1]) for r in rows], dtype=np.float32)

    def kinds(self, space: str, ids: Sequence[str]) -> list[str]:
        """The kind each of ``ids`` was stored with, in the order of ``ids``, in one read (KeyError
        for an id without a row; an addition to the contract)."""
        with self.db.read() as conn:
            found = {r[0]: r[1] for r in conn.execute(
                f"SELECT id, kind FROM {self.table} WHERE space = %s AND id = ANY(%s)", (space, list(ids)))}
        return [found[i] for i in ids]

    def count(self, space: str) -> int:
        if not self._exists():
            return 0
        with self.db.read() as conn:
            return conn.execute(f"SELECT count(*) FROM {self.table} WHERE space = %s", (space,)).fetchone()[0]

    def ids(self, space: str, kinds: Sequence[str] | None = None) -> list[str]:
        if not self._exists():
            return []
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(f"SELECT id FROM {self.table} WHERE {where} ORDER BY seq", params)]

    def version(self, space: str) -> int:
        return self.store.version()

    def dimension(self) -> int | None:
        self._exists()
        return self.dim


def open_postgres(target: str, *, name: str | None = None, create: bool = True,
                  vector_backend: str | None = None) -> OpenedBackend:
    """KG ``name`` (default ``"default"``) in the database ``target`` names; ``vector_backend`` is
    not a choice here (always pgvector) and is ignored, so one call can name either kind of target."""
    name = check_kg_name(name or "default")
    db = PgDatabase(target)
    try:
        store = PostgresGraphStore(db, name, create=create)
        vectors = PgVectorIndex(db, store)
    except BaseException:
        db.close()
        raise
    return OpenedBackend(store, vectors, backend="postgres", uri=target, releases=[db.close])


def _scratch(workdir: Any) -> Any:
    from langgraph_kgmem.testing_postgres import scratch_databases

    return scratch_databases(workdir)


SPEC = BackendSpec("postgres", lambda target, vb: is_postgres_uri(target), open_postgres, _scratch, server=True,
                   drop=drop_kg)
