"""The PostgreSQL backend's structure store: one KG's nodes, edges, provenance, documents, aliases
and metadata in plain tables, with the change log other processes refresh from.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.backends.base import GraphStoreBase
from langgraph_kgmem.kg.backends.postgres.pool import KG_TABLES, PgDatabase, find_kg_id, server_label
from langgraph_kgmem.kg.stored import edge_from_row, json_object, node_from_row
from langgraph_kgmem.kg.types import Edge, Node, check_kg_name

CHANGE_LOG_KEEP = 200_000   # change rows kept per KG; a reader further behind reloads everything


class PostgresGraphStore(GraphStoreBase):
    """:class:`~langgraph_kgmem.kg.backends.contract.GraphBackend` on PostgreSQL, for one KG of the database."""

    kind = "postgres"
    shared = True

    def __init__(self, db: PgDatabase, name: str, *, create: bool = True) -> None:
        self.db = db
        self.name = check_kg_name(name)
        kid = find_kg_id(db, name, create=create)
        if kid is None:
            raise KgmemInputError(f"no KG named {name!r} in this database; existing: "
                                  f"{[k['name'] for k in self._names()][:10]}. Create it with create=True")
        self.kg_id = kid
        self.label = f"KG {self.name!r} in PostgreSQL at {server_label(db.uri)}"   # names it in errors, no password
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
                # the common case, nothing new: one statement, not a transaction's four round trips
                row = c.execute("SELECT version FROM kgmem_graphs WHERE id = %s", (self.kg_id,)).fetchone()
                if row is not None and row[0] == version:
                    return version, [], [], [], []
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
            for table in (*KG_TABLES, f"kgmem_vec_{self.kg_id}"):
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

    def node_sources_many(self, node_ids: Sequence[str]) -> dict[str, list[str]]:
        return self._sources_many("SELECT node_id, doc_id FROM kgmem_node_sources "
                                  "WHERE kg = %s AND node_id = ANY(%s) ORDER BY doc_id", node_ids)

    def edge_sources_many(self, edge_ids: Sequence[str]) -> dict[str, list[str]]:
        return self._sources_many("SELECT edge_id, doc_id FROM kgmem_edge_sources "
                                  "WHERE kg = %s AND edge_id = ANY(%s) ORDER BY doc_id", edge_ids)

    def _sources_many(self, sql: str, keys: Sequence[str]) -> dict[str, list[str]]:
        """Key -> its documents (sorted) of every key, in one query."""
        uniq = list(dict.fromkeys(keys))
        out: dict[str, list[str]] = {k: [] for k in uniq}
        if uniq:
            with self.db.read() as conn:
                for key, doc in conn.execute(sql, (self.kg_id, uniq)):
                    out[key].append(doc)
        return out

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

    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Content hashes of the documents among ``doc_ids`` that have a row, in one query."""
        return self._pairs("SELECT id, content_hash FROM kgmem_documents WHERE kg = %s AND id = ANY(%s)", doc_ids)

    def _pairs(self, sql: str, keys: Sequence[str]) -> dict[str, Any]:
        """``{key: value}`` of the rows ``sql`` (two columns; parameters: this KG, the keys) finds
        for ``keys``, in one query."""
        if not keys:
            return {}
        with self.db.read() as conn:
            return {r[0]: r[1] for r in conn.execute(sql, (self.kg_id, list(dict.fromkeys(keys))))}

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
        return self._pairs("SELECT alias, node_id FROM kgmem_aliases WHERE kg = %s AND alias = ANY(%s)", aliases)

    def alias_target(self, alias: str) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT node_id FROM kgmem_aliases WHERE kg = %s AND alias = %s",
                               (self.kg_id, alias)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        """The database pool is shared with the vectors: :func:`open_postgres` releases it last."""
