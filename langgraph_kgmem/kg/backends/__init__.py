"""Storage backends of a knowledge graph: the contract every backend implements, the registry
that opens a target (directory or URI) with the backend that claims it, and the backends: the
embedded one (SQLite + numpy or Chroma vectors in a directory) and PostgreSQL + pgvector."""

from langgraph_kgmem.kg.backends.contract import (DERIVED_SOURCE, BackendSpec, GraphBackend, OpenedBackend,
                                                  PersistenceHooks, VectorBackend)
from langgraph_kgmem.kg.backends.registry import (backend_for, drop_kg, is_database, open_backend,
                                                  registered_backends)

__all__ = ["DERIVED_SOURCE", "BackendSpec", "GraphBackend", "OpenedBackend", "PersistenceHooks", "VectorBackend", "backend_for",
           "drop_kg", "is_database", "open_backend", "registered_backends"]
