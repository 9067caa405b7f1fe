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

The package's modules, in reading order: :mod:`.pool` (schema, URI checks, error mapping, the
connection pool and its write transaction), :mod:`.graph` (the structure store), :mod:`.vectors`
(the pgvector index), :mod:`.push` (forward-push PPR that loads no graph), :mod:`.persistence`
(the methods' checkpointer and memory store in the same database) and :mod:`.opener` (the opener
and the registry's :data:`SPEC`). ``LazyPushPpr`` (public as ``langgraph_kgmem.kg.LazyPushPpr``), ``check_uri`` (named in
docs/reliability.md), ``list_kgs`` and ``drop_kg`` are re-exported here.
"""

from langgraph_kgmem.kg.backends.postgres.pool import check_uri, drop_kg, list_kgs
from langgraph_kgmem.kg.backends.postgres.push import LazyPushPpr
