"""Graph structure in one SQLite file: nodes, edges, provenance, documents, aliases, metadata."""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from langgraph_kgmem.errors import NotAKnowledgeGraphError, StorageError
from langgraph_kgmem.kg.backends.base import GraphStoreBase
from langgraph_kgmem.kg.backends.schema import FIRST_VERSION, SCHEMA_VERSION, announce, columns_at, pending
from langgraph_kgmem.kg.stored import edge_from_row, json_object, node_from_row
from langgraph_kgmem.kg.types import Edge, Node

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes(id TEXT PRIMARY KEY, kind TEXT NOT NULL, text TEXT NOT NULL,
    attrs TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS edges(id TEXT PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL,
    kind TEXT NOT NULL, text TEXT NOT NULL DEFAULT '', weight REAL NOT NULL DEFAULT 1.0,
    attrs TEXT NOT NULL DEFAULT '{}');
CREATE INDEX IF NOT EXISTS edges_src ON edges(src);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst);
CREATE TABLE IF NOT EXISTS node_sources(node_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    PRIMARY KEY(node_id, doc_id));
CREATE INDEX IF NOT EXISTS node_sources_doc ON node_sources(doc_id);
CREATE TABLE IF NOT EXISTS edge_sources(edge_id TEXT NOT NULL, doc_id TEXT NOT NULL,
    PRIMARY KEY(edge_id, doc_id));
CREATE INDEX IF NOT EXISTS edge_sources_doc ON edge_sources(doc_id);
CREATE TABLE IF NOT EXISTS documents(id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL, n_chunks INTEGER NOT NULL DEFAULT 0, meta TEXT NOT NULL DEFAULT '{}',
    seq INTEGER NOT NULL DEFAULT 0, content_hash TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS documents_seq ON documents(seq);
CREATE TABLE IF NOT EXISTS aliases(alias TEXT PRIMARY KEY, node_id TEXT NOT NULL, similarity REAL NOT NULL);
"""

# what LangGraph's SqliteSaver and SqliteStore keep in a KG's memory.sqlite: the columns the
# package reads, per table (other tables of theirs are allowed, anything else makes it foreign)
MEMORY_TABLES = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint",
                    "metadata"},
    "writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx", "channel", "type", "value"},
    "store": {"prefix", "key", "value"},
    "store_migrations": set(), "store_vectors": set(), "vector_migrations": set(),
}
_SQLITE_NOTADB, _SQLITE_CORRUPT = 26, 11


def _kg_tables() -> dict[str, set[str]]:
    with sqlite3.connect(":memory:") as conn:
        conn.executescript(SCHEMA)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: {r[1] for r in conn.execute(f"PRAGMA table_info({n})")} for n in names}


def check_sqlite_file(conn: sqlite3.Connection, path: str, tables: dict[str, set[str]], what: str) -> None:
    """Refuse a database that is not one the package wrote, before anything is created in it: a
    file SQLite cannot read, a table that is not one of ``tables``, or one of them without the
    columns listed. An empty database is fine (it is new).

    Raises:
        NotAKnowledgeGraphError: naming the file, what is wrong, and what to do; nothing was written.
        StorageError: SQLite could not read it for another reason (locked, out of disk...).
    """
    try:
        found = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                 if not r[0].startswith("sqlite_")]
        for name in found:
            if name not in tables:
                raise _Foreign(f"it has a table {name!r}, which {what} never holds")
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')}
            if missing := tables[name] - have:
                raise _Foreign(f"its table {name!r} lacks the columns {', '.join(sorted(missing))}")
    except _Foreign as exc:
        raise NotAKnowledgeGraphError(
            f"{path} is not {what} ({exc}); nothing was written to it. Move it away and restore the KG "
            "directory from a backup, or open another directory") from None
    except sqlite3.DatabaseError as exc:
        raise sqlite_open_error(exc, path, what) from exc


def sqlite_open_error(exc: sqlite3.DatabaseError, path: str, what: str) -> Exception:
    """The package error for SQLite failing to open or read ``path``."""
    if getattr(exc, "sqlite_errorcode", None) in (_SQLITE_NOTADB, _SQLITE_CORRUPT) \
            or "not a database" in str(exc) or "malformed" in str(exc):
        return NotAKnowledgeGraphError(
            f"{path} is not {what}: SQLite cannot read it ({exc}); nothing was written to it. Restore the KG "
            "directory from a backup, or move the file away and rebuild the KG")
    return StorageError(f"SQLite could not open {path} ({exc}): check the disk, its permissions and that no "
                        "other program holds it, then retry")


class _Foreign(Exception):
    pass


def check_kg_tables(conn: sqlite3.Connection, path: str, *, create: bool) -> None:
    """Refuse a KG database that is partial or, with ``create=False``, not yet a KG.

    A KG records its format in ``meta`` at its first open, and every table of :data:`SCHEMA` has
    existed since the first version: one that records a format but lacks a table lost it (a
    dropped table would otherwise be created again, empty, and the KG open without its nodes).
    Without a recorded format the file holds no KG (an empty file, or a creation cut short), which
    ``create=False`` refuses instead of turning it into a new, empty KG.

    Raises:
        NotAKnowledgeGraphError: naming the file, what is missing and what to do; nothing was written.
    """
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    made = "meta" in have and conn.execute("SELECT 1 FROM meta WHERE key='format'").fetchone() is not None
    if made:
        if missing := sorted(set(_kg_tables()) - have):
            raise NotAKnowledgeGraphError(
                f"{path} is a KG database without its table(s) {', '.join(missing)} (dropped or cut short); nothing "
                "was written to it. Restore the KG directory from a backup, or build the KG again from its documents")
    elif not create:
        raise NotAKnowledgeGraphError(
            f"{path} holds no knowledge graph (the file is empty, or the KG's creation never finished); nothing was "
            "written to it. Restore the KG directory from a backup, or open it with create=True to start a new KG")



class SqliteGraphStore(GraphStoreBase):
    """Persistent structure of one KG (the embedded :class:`~langgraph_kgmem.kg.backends.contract.GraphBackend`).
    Writes are grouped with :meth:`transaction`; one process writes a KG directory at a time."""

    kind = "sqlite"
    shared = False
    on_begin = None   # the shared backend's hook; one writer here, nothing to catch up on

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = str(path)
        self.label = self.path   # names the database in errors
        self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            found = self._stored_version()
            # a foreign or corrupt file is refused before the schema below creates anything in it
            check_sqlite_file(self.conn, self.path, columns_at(found or SCHEMA_VERSION, _kg_tables()),
                              "a langgraph_kgmem KG database")
            check_kg_tables(self.conn, self.path, create=create)
            self.conn.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            if found is None:
                self.conn.executescript(SCHEMA + f"PRAGMA user_version = {SCHEMA_VERSION};")
            else:
                self._upgrade(found)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise sqlite_open_error(exc, self.path, "a langgraph_kgmem KG database") from exc
        except BaseException:
            self.conn.close()
            raise
        self._depth = 0

    def _stored_version(self) -> int | None:
        """The file's schema version; None for a new (empty) file. Version 1 files predate the
        recorded version (``user_version`` 0 with tables in place)."""
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version:
            return int(version)
        has_tables = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' LIMIT 1").fetchone()
        return FIRST_VERSION if has_tables else None

    @property
    def schema_version(self) -> int:
        """The schema version this file holds (the current one once opened)."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0]) or FIRST_VERSION

    def _upgrade(self, found: int) -> None:
        """Run the missing migrations and record the new version, all in one transaction (SQLite's
        DDL and ``user_version`` roll back together)."""
        steps = pending(found, self.path)
        if not steps:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for step in steps:
                for statement in step.sqlite:
                    self.conn.execute(statement)
            self.conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        announce(steps, found, self.path)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Nested-safe: only the outermost block commits; an exception rolls everything back."""
        if self._depth == 0:
            self.conn.execute("BEGIN")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self.conn.execute("ROLLBACK")
            raise
        else:
            self._depth -= 1
            if self._depth == 0:
                self.conn.execute("COMMIT")

    @property
    def depth(self) -> int:
        return self._depth

    def version(self) -> int:
        return 0

    def changes_since(self, version: int, conn: Any = None) -> None:
        return None   # never consulted: shared is False

    def last_committed_version(self) -> None:
        return None

    def load_all(self) -> tuple[int, Iterator[Node], Iterator[Edge]]:
        """One writer: nothing can change between the two reads."""
        return 0, self.load_nodes(), self.load_edges()

    # meta
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    # bulk loads
    def load_nodes(self) -> Iterator[Node]:
        for nid, kind, text, attrs in self.conn.execute("SELECT id, kind, text, attrs FROM nodes ORDER BY rowid"):
            yield node_from_row((nid, kind, text, attrs), self.path)

    def load_edges(self) -> Iterator[Edge]:
        for row in self.conn.execute("SELECT id, src, dst, kind, text, weight, attrs FROM edges ORDER BY rowid"):
            yield edge_from_row(row, self.path)

    # writes
    def upsert_nodes(self, nodes: Iterable[Node]) -> None:
        """Insert or replace nodes as given (the KG refuses kind changes before calling this)."""
        self.conn.executemany(
            "INSERT INTO nodes(id, kind, text, attrs) VALUES(?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET kind=excluded.kind, text=excluded.text, attrs=excluded.attrs",
            [(n.id, n.kind, n.text, json.dumps(n.attrs, sort_keys=True)) for n in nodes],
        )

    def upsert_edges(self, edges: Iterable[Edge]) -> None:
        self.conn.executemany(
            "INSERT INTO edges(id, src, dst, kind, text, weight, attrs) VALUES(?,?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET weight=excluded.weight, attrs=excluded.attrs",
            [(e.id, e.src, e.dst, e.kind, e.text, e.weight, json.dumps(e.attrs, sort_keys=True)) for e in edges],
        )

    def add_sources(self, node_ids: Iterable[str], edge_ids: Iterable[str], doc_id: str) -> None:
        self.conn.executemany("INSERT OR IGNORE INTO node_sources VALUES(?,?)", [(n, doc_id) for n in node_ids])
        self.conn.executemany("INSERT OR IGNORE INTO edge_sources VALUES(?,?)", [(e, doc_id) for e in edge_ids])

    def node_sources(self, node_id: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT doc_id FROM node_sources WHERE node_id=? ORDER BY doc_id", (node_id,))]

    def edge_sources(self, edge_id: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT doc_id FROM edge_sources WHERE edge_id=? ORDER BY doc_id", (edge_id,))]

    def node_sources_many(self, node_ids: Sequence[str]) -> dict[str, list[str]]:
        return self._sources_many("SELECT node_id, doc_id FROM node_sources WHERE node_id IN ({}) ORDER BY doc_id",
                                  node_ids)

    def edge_sources_many(self, edge_ids: Sequence[str]) -> dict[str, list[str]]:
        return self._sources_many("SELECT edge_id, doc_id FROM edge_sources WHERE edge_id IN ({}) ORDER BY doc_id",
                                  edge_ids)

    def _sources_many(self, sql: str, keys: Sequence[str]) -> dict[str, list[str]]:
        """Key -> its documents (sorted) of every key, 500 keys a query (SQLite's bound on variables)."""
        uniq = list(dict.fromkeys(keys))
        out: dict[str, list[str]] = {k: [] for k in uniq}
        for off in range(0, len(uniq), 500):
            part = uniq[off:off + 500]
            for key, doc in self.conn.execute(sql.format(",".join("?" * len(part))), part):
                out[key].append(doc)
        return out

    def doc_node_ids(self, doc_id: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT node_id FROM node_sources WHERE doc_id=? ORDER BY node_id", (doc_id,))]

    def doc_edge_ids(self, doc_id: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT edge_id FROM edge_sources WHERE doc_id=? ORDER BY edge_id", (doc_id,))]

    def remove_document_sources(self, doc_id: str) -> tuple[list[str], list[str]]:
        """Drop a document's provenance; return (node ids, edge ids) left with no source at all."""
        c = self.conn
        nodes = [r[0] for r in c.execute("SELECT node_id FROM node_sources WHERE doc_id=?", (doc_id,))]
        edges = [r[0] for r in c.execute("SELECT edge_id FROM edge_sources WHERE doc_id=?", (doc_id,))]
        c.execute("DELETE FROM node_sources WHERE doc_id=?", (doc_id,))
        c.execute("DELETE FROM edge_sources WHERE doc_id=?", (doc_id,))
        orphan_nodes = [n for n in nodes if not c.execute(
            "SELECT 1 FROM node_sources WHERE node_id=? LIMIT 1", (n,)).fetchone()]
        orphan_edges = [e for e in edges if not c.execute(
            "SELECT 1 FROM edge_sources WHERE edge_id=? LIMIT 1", (e,)).fetchone()]
        return sorted(orphan_nodes), sorted(orphan_edges)

    def delete_nodes(self, ids: list[str]) -> None:
        self.conn.executemany("DELETE FROM nodes WHERE id=?", [(i,) for i in ids])
        self.conn.executemany("DELETE FROM node_sources WHERE node_id=?", [(i,) for i in ids])
        self.conn.executemany("DELETE FROM aliases WHERE node_id=?", [(i,) for i in ids])

    def delete_edges(self, ids: list[str]) -> None:
        self.conn.executemany("DELETE FROM edges WHERE id=?", [(i,) for i in ids])
        self.conn.executemany("DELETE FROM edge_sources WHERE edge_id=?", [(i,) for i in ids])

    # documents
    _DOC_COLUMNS = "SELECT id, title, status, n_chunks, meta, seq, content_hash FROM documents"

    def _document_row(self, row: tuple) -> dict[str, Any]:
        return {"id": row[0], "title": row[1], "status": row[2], "n_chunks": row[3],
                "meta": json_object(row[4], f"{self.path}: the metadata of document {str(row[0])[:80]!r}"),
                "seq": row[5], "content_hash": row[6]}

    def document(self, doc_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(f"{self._DOC_COLUMNS} WHERE id=?", (doc_id,)).fetchone()
        return self._document_row(row) if row else None

    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Content hashes of the documents among ``doc_ids`` that have a row (500 ids a query)."""
        return self._pairs("SELECT id, content_hash FROM documents WHERE id IN ({})", doc_ids)

    def _pairs(self, sql: str, keys: Sequence[str]) -> dict[str, Any]:
        """``{key: value}`` of the rows ``sql`` (two columns; ``{}`` takes the keys' placeholders)
        finds for ``keys``, 500 keys a query (SQLite's bound on variables)."""
        out: dict[str, Any] = {}
        uniq = list(dict.fromkeys(keys))
        for off in range(0, len(uniq), 500):
            part = uniq[off:off + 500]
            out.update(self.conn.execute(sql.format(",".join("?" * len(part))), part).fetchall())
        return out

    def documents(self) -> list[dict[str, Any]]:
        return [self._document_row(r) for r in self.conn.execute(f"{self._DOC_COLUMNS} ORDER BY seq, id")]

    def document_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]

    def put_document(self, doc_id: str, *, title: str, status: str, n_chunks: int = 0,
                     meta: dict[str, Any] | None = None, content_hash: str = "") -> None:
        seq = self.conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM documents").fetchone()[0]
        self.conn.execute(
            "INSERT INTO documents(id, title, status, n_chunks, meta, seq, content_hash) VALUES(?,?,?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET title=excluded.title, status=excluded.status, "
            "n_chunks=excluded.n_chunks, meta=excluded.meta, content_hash=excluded.content_hash",
            (doc_id, title, status, n_chunks, json.dumps(meta or {}, sort_keys=True), seq, content_hash),
        )

    def delete_document_row(self, doc_id: str) -> None:
        self.conn.execute("DELETE FROM documents WHERE id=?", (doc_id,))

    # aliases
    def put_alias(self, alias: str, node_id: str, similarity: float) -> None:
        self.conn.execute("INSERT OR REPLACE INTO aliases VALUES(?,?,?)", (alias, node_id, similarity))

    def aliases(self, node_id: str | None = None) -> list[tuple[str, str, float]]:
        if node_id is None:
            return list(self.conn.execute("SELECT alias, node_id, similarity FROM aliases ORDER BY alias"))
        return list(self.conn.execute(
            "SELECT alias, node_id, similarity FROM aliases WHERE node_id=? ORDER BY alias", (node_id,)))

    def alias_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM aliases").fetchone()[0]

    def alias_targets(self, aliases: Sequence[str]) -> dict[str, str]:
        """Recorded targets of these aliases (absent ones are left out)."""
        return self._pairs("SELECT alias, node_id FROM aliases WHERE alias IN ({})", aliases)

    def alias_target(self, alias: str) -> str | None:
        row = self.conn.execute("SELECT node_id FROM aliases WHERE alias=?", (alias,)).fetchone()
        return row[0] if row else None

    def analyze(self) -> None:
        """Refresh SQLite's query-planner statistics (after a bulk load)."""
        self.conn.execute("ANALYZE")

    def close(self) -> None:
        self.conn.close()
