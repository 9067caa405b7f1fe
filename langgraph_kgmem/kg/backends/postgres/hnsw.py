"""The HNSW indexes of one KG's vector table: built once a space is large, not maintained while a
bulk load runs (dropped, then built once when it ends), and rebuilt by the next process when a
crash left a load unfinished.

Why: inserting a vector into pgvector's HNSW graph costs more server CPU than the whole rest of a
one-sentence document's ingest (measured in docs/capacity.md), and
pgvector's own advice for bulk loading is to build indexes after the data is in. A build reads
the rows once and keeps the graph in ``maintenance_work_mem`` (raised for the build's
transaction, :data:`HNSW_BUILD_MEMORY_MB` at most).

**When a space's index is not maintained** (a *deferred* space):

- inside :meth:`HnswIndexes.bulk_load` with ``only_if_large=False`` (``kg.bulk_load()``): every
  searched space, from the start of the block to its end;
- inside an ingest call (``add_documents`` opens the block with ``only_if_large=True``): a space
  whose index exists once the call has written at least :data:`BULK_REBUILD_FRACTION` times as
  many vectors to it as it held when the call first wrote to it (then rebuilding costs less than
  inserting the rest one by one), and a space that crosses
  :data:`~langgraph_kgmem.kg.backends.postgres.vectors.HNSW_MIN_ROWS` during the call (its index
  is built at the end of the call rather than maintained for the rest of it).

A deferred space's index is dropped in the writer's transaction and a marker row
(``kgmem_meta`` key ``hnsw_deferred:<space>``) commits with it; the block's end builds the index
(``CREATE INDEX``) and deletes the marker in one transaction under the KG's write lock.

**Concurrency.** Readers are never wrong: without the index, a search is an exact scan (slower,
the same rows). The ``DROP INDEX`` takes the table's exclusive lock, so readers wait for the
dropping writer's transaction to commit (one write window, once a load). The build takes a
``SHARE`` lock: readers go on, other writers of the KG wait on the KG's advisory lock. Each
process loading in bulk holds a shared session-level advisory lock ``(BULK_LOCK_CLASS, kg id)``
on a connection of its own for as long as its block is open; the indexes are built by the last
loader to finish (the build takes the lock exclusively, for its transaction), and a process that
crosses the row threshold while a marker exists builds nothing while a loader holds the lock.

**A crash** between the drop and the build leaves markers and no loader holding the lock (a
session lock ends with its connection). The next process to open the KG, to open a bulk block,
or to cross the threshold sees the markers, takes the lock and builds the missing indexes.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from langgraph_kgmem.errors import ConfigurationError
from langgraph_kgmem.kg.backends.postgres.graph import PostgresGraphStore
from langgraph_kgmem.kg.backends.postgres.pool import LOCK_CLASS, PgDatabase

logger = logging.getLogger(__name__)

SPACES = ("nodes", "facts")   # the searched spaces; "texts" is read by id alone and gets no index
#: An ingest call defers an indexed space's index once it has written this many times the rows the
#: space held when the call first wrote to it: building ``N + b`` rows then costs less than
#: inserting the rest one by one (a build costs less server CPU a row than an insert:
#: docs/capacity.md), and a smaller call keeps the index and its readers' speed.
BULK_REBUILD_FRACTION = 1.0
#: the most ``maintenance_work_mem`` a build asks for unless ``KGMEM_HNSW_BUILD_MEMORY_MB`` says
#: otherwise (a parallel build reserves it in shared memory, so the default suits a small server)
HNSW_BUILD_MEMORY_MB = 1024
BUILD_MEMORY_ENV = "KGMEM_HNSW_BUILD_MEMORY_MB"
BULK_LOCK_CLASS = LOCK_CLASS + 1   # advisory-lock namespace of bulk loaders; the second key is the KG id
MARKER = "hnsw_deferred:"   # kgmem_meta key prefix of a deferred space


def build_memory_mb(rows: int, dim: int) -> int:
    """The ``maintenance_work_mem`` (MB) a build of ``rows`` vectors of ``dim`` asks for: what
    pgvector's graph needs in memory (about ``4 * dim + 700`` bytes a vector, with a fifth to
    spare), at most :data:`HNSW_BUILD_MEMORY_MB` or ``KGMEM_HNSW_BUILD_MEMORY_MB``. Past that
    pgvector finishes the graph on disk, many times slower (docs/capacity.md), so a server with
    the memory should say so."""
    raw = os.environ.get(BUILD_MEMORY_ENV, "").strip()
    cap = HNSW_BUILD_MEMORY_MB
    if raw:
        try:
            cap = int(raw)
        except ValueError:
            cap = 0
        if cap < 64:
            raise ConfigurationError(f"{BUILD_MEMORY_ENV}={raw!r}: use a whole number of megabytes, at least 64 "
                                     "(what the server may give one HNSW build; default 1024)")
    return min(int(rows * (4 * dim + 700) * 1.2) >> 20, cap)


class HnswIndexes:
    """The HNSW index of each searched space of one KG's vector table (``table``): when to build,
    defer and rebuild it. :class:`~langgraph_kgmem.kg.backends.postgres.vectors.PgVectorIndex`
    calls :meth:`after_write` after every upsert, inside the writer's transaction; ``min_rows()``
    is the row count at which a space gets its index."""

    def __init__(self, db: PgDatabase, store: PostgresGraphStore, table: str, min_rows: Callable[[], int]) -> None:
        self.db, self.store, self.table, self.min_rows = db, store, table, min_rows
        self.kg = store.kg_id
        self._indexed: set[str] | None = None   # spaces whose index exists (looked up once)
        self._rows: dict[str, int] = {}          # rows per space at the last count, plus those written since
        self._lock = threading.Lock()
        self._depth = 0                          # open bulk blocks of this process
        self._explicit = 0                       # of them, those that defer every space at once
        self._base: dict[str, int] = {}          # rows a space held when the block first wrote to it
        self._written: dict[str, int] = {}       # vectors written to a space in the block
        self._deferred: set[str] = set()         # spaces this process deferred in the block
        self._held: tuple[Any, Any] | None = None   # (pool, connection) holding the shared loader lock

    def index_name(self, space: str) -> str:
        """The name of ``space``'s HNSW index."""
        return f"{self.table}_{space}_hnsw"

    def indexed(self, conn: Any) -> set[str]:
        """The spaces whose index exists (read once, then kept up to date by this process)."""
        if self._indexed is None:
            names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (self.table,))}
            self._indexed = {sp for sp in SPACES if self.index_name(sp) in names}
        return self._indexed

    def forget(self) -> None:
        """A transaction rolled back: which indexes exist is read again. (A space deferred in it
        stays deferred here: its index came back and is maintained by the server, and the block's
        end finds no marker for it.)"""
        self._indexed = None

    def _count(self, conn: Any, space: str) -> int:
        n = self._rows[space] = conn.execute(f"SELECT count(*) FROM {self.table} WHERE space = %s",
                                             (space,)).fetchone()[0]
        return n

    def after_write(self, conn: Any, space: str, added: int) -> None:
        """``added`` vectors were just written to ``space`` in the transaction on ``conn``: build,
        defer or leave its index. Rows are counted once per process and space, then tracked by what
        this process writes (other writers' rows are seen at the next count)."""
        if space not in SPACES or space in self._deferred:
            return
        known = space in self._rows
        if known:
            self._rows[space] += added
        in_block = self._depth > 0
        if space in self.indexed(conn):
            if not in_block:
                return
            if space not in self._base:
                self._base[space] = (self._rows[space] if known else self._count(conn, space)) - added
            self._written[space] = self._written.get(space, 0) + added
            if self._written[space] >= BULK_REBUILD_FRACTION * max(self._base[space], 1):
                logger.info("%s: %d vectors written to %r in one load (%d held before): its HNSW index is "
                            "dropped and built again when the load ends", self.store.label, self._written[space],
                            space, self._base[space])
                self.defer(conn, space)
            return
        if known and self._rows[space] < self.min_rows():
            return
        if self._count(conn, space) < self.min_rows():   # counted again: other writers add and delete rows
            return
        if in_block:   # built once at the block's end instead of maintained for the rest of it
            self.defer(conn, space)
        elif space not in self.repair(conn, only=space) and space not in self.indexed(conn):
            self.build(conn, space)

    def _marked(self, conn: Any, spaces: list[str]) -> list[str]:
        keys = [MARKER + sp for sp in spaces]
        rows = conn.execute("SELECT key FROM kgmem_meta WHERE kg = %s AND key = ANY(%s)", (self.kg, keys)).fetchall()
        return sorted(r[0][len(MARKER):] for r in rows)

    def defer(self, conn: Any, space: str) -> None:
        """Stop maintaining ``space``'s index until the bulk block ends: drop it and write its
        marker, in the transaction on ``conn`` (the loader lock is held before they commit)."""
        self._hold()
        conn.execute(f"DROP INDEX IF EXISTS {self.index_name(space)}")
        conn.execute("INSERT INTO kgmem_meta(kg, key, value) VALUES(%s, %s, 'bulk load') ON CONFLICT(kg, key) "
                     "DO NOTHING", (self.kg, MARKER + space))
        self.indexed(conn).discard(space)
        self._deferred.add(space)

    def build(self, conn: Any, space: str) -> None:
        """``space``'s index, built now in the transaction on ``conn``, with ``maintenance_work_mem``
        raised to what the graph needs (about its rows times ``4 * dim + 700`` bytes, at most
        :data:`HNSW_BUILD_MEMORY_MB`; a larger graph is finished on disk, slower)."""
        rows = self._rows.get(space) or self._count(conn, space)
        dim = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s", (self.kg,)).fetchone()[0] or 0
        want = build_memory_mb(rows, dim)
        have = conn.execute("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))").fetchone()[0] >> 20
        if want > have:
            conn.execute(f"SET LOCAL maintenance_work_mem = '{int(want)}MB'")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.index_name(space)} ON {self.table} "
                     f"USING hnsw (v vector_cosine_ops) WHERE space = '{space}'")
        self.indexed(conn).add(space)

    def repair(self, conn: Any, only: str | None = None) -> list[str]:
        """Build the indexes of deferred spaces (those holding enough rows) once no process is
        loading in bulk, and delete their markers, in the write transaction on ``conn``. Returns
        the spaces left deferred because a loader still holds the lock (the last one builds them)."""
        marked = self._marked(conn, [only] if only else list(SPACES))
        if not marked:
            return []
        if not conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", (BULK_LOCK_CLASS, self.kg)).fetchone()[0]:
            return marked
        exists = conn.execute("SELECT to_regclass(%s)", (self.table,)).fetchone()[0] is not None
        for space in marked:
            if exists and self._count(conn, space) >= self.min_rows():
                logger.info("%s: building the HNSW index of %r (%d vectors) after a bulk load",
                            self.store.label, space, self._rows[space])
                self.build(conn, space)
            conn.execute("DELETE FROM kgmem_meta WHERE kg = %s AND key = %s", (self.kg, MARKER + space))
        return []

    def repair_if_abandoned(self) -> None:
        """At open: markers left by a load whose process is gone are repaired (indexes built) now.
        One read when there are none; nothing is waited for while a loader holds the lock."""
        with self.db.read() as conn:
            if not self._marked(conn, list(SPACES)):
                return
            if not conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", (BULK_LOCK_CLASS, self.kg)).fetchone()[0]:
                return   # a load is running (autocommit: the lock taken here went with the statement)
        with self.store.transaction() as conn:
            self.repair(conn)

    # ------------------------------------------------------------------ bulk blocks
    def _hold(self) -> None:
        """Take the shared loader lock on a connection of its own, for the rest of the block."""
        with self._lock:
            if self._held is not None:
                return
            pool = self.db.pool
            conn = pool.getconn(timeout=self.db.timeout)
            try:
                conn.execute("SELECT pg_advisory_lock_shared(%s, %s)", (BULK_LOCK_CLASS, self.kg))
            except BaseException:
                pool.putconn(conn)
                raise
            self._held = (pool, conn)

    def _release(self) -> None:
        with self._lock:
            held, self._held = self._held, None
        if held is None:
            return
        pool, conn = held
        try:
            conn.execute("SELECT pg_advisory_unlock_shared(%s, %s)", (BULK_LOCK_CLASS, self.kg))
        except Exception:  # noqa: BLE001 - a lost connection released the lock with it
            logger.debug("%s: releasing the bulk-load lock failed (the connection went)", self.store.label)
        finally:
            pool.putconn(conn)

    @contextmanager
    def bulk_load(self, *, only_if_large: bool = False) -> Iterator[None]:
        """A block whose writes do not maintain HNSW indexes (see the module's docstring for
        which spaces and why); when the process's outermost block ends, the deferred indexes are
        built (by this process, or by the last loader to finish)."""
        with self._lock:
            self._depth += 1
            self._explicit += 0 if only_if_large else 1
            first_explicit = not only_if_large and self._explicit == 1
        try:
            if first_explicit:   # markers a crashed load left are taken over, not built and dropped again
                with self.store.transaction() as conn:
                    for space in SPACES:
                        if space not in self._deferred:
                            self.defer(conn, space)
            yield
        except BaseException:
            self._close_block(only_if_large, failed=True)
            raise
        self._close_block(only_if_large, failed=False)

    def _close_block(self, only_if_large: bool, *, failed: bool) -> None:
        with self._lock:
            self._depth -= 1
            self._explicit -= 0 if only_if_large else 1
            outer = self._depth == 0
        if not outer:
            return
        try:
            self._finish()
        except Exception:
            if not failed:
                raise
            # the block's own error is the one to report; the markers stay for the next opener
            logger.warning("%s: building the HNSW indexes after a failed bulk load failed too; the next "
                           "process to open the KG builds them", self.store.label, exc_info=True)

    def _finish(self) -> None:
        """The outermost block ended: release the loader lock, then build what is deferred."""
        deferred = bool(self._deferred)
        self._base.clear()
        self._written.clear()
        self._deferred.clear()
        self._release()
        if deferred:
            with self.store.transaction() as conn:
                self.repair(conn)
