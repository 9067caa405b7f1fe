"""The PostgreSQL backend's opener and its registry entry."""

from __future__ import annotations

from typing import Any

from langgraph_kgmem.kg.backends.contract import BackendSpec, OpenedBackend
from langgraph_kgmem.kg.backends.postgres.graph import PostgresGraphStore
from langgraph_kgmem.kg.backends.postgres.persistence import HOOKS
from langgraph_kgmem.kg.backends.postgres.pool import PgDatabase, drop_kg, is_postgres_uri
from langgraph_kgmem.kg.backends.postgres.push import LazyPushPpr
from langgraph_kgmem.kg.backends.postgres.vectors import PgVectorIndex
from langgraph_kgmem.kg.types import check_kg_name


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
    from langgraph_kgmem.kg.backends.postgres.testing import scratch_databases

    return scratch_databases(workdir)


SPEC = BackendSpec("postgres", lambda target, vb: is_postgres_uri(target), open_postgres, _scratch, server=True,
                   drop=drop_kg, persistence=HOOKS, push_ppr=LazyPushPpr.open,
                   capabilities=frozenset({"shared", "bulk_reads", "drop", "persistence", "push_ppr"}))
