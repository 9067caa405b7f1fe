"""Storage backends of a knowledge graph: the contract every backend implements (a required core,
defaults for the rest, declared capabilities), the registry that opens a target (directory or URI)
with the backend that claims it, and the backends, one package each: ``embedded/`` (SQLite + numpy
or Chroma vectors in a directory) and ``postgres/`` (PostgreSQL + pgvector). Nothing outside this
package imports a backend's modules (tests/test_layering.py)."""

from langgraph_kgmem.kg.backends.contract import (DERIVED_SOURCE, BackendSpec, GraphBackend, OpenedBackend,
                                                  PersistenceHooks, VectorBackend)
from langgraph_kgmem.kg.backends.registry import (backend_for, drop_kg, is_database, open_backend, open_in_memory,
                                                  registered_backends)


__all__ = ["BackendSpec", "GraphBackend", "VectorBackend", "PersistenceHooks", "OpenedBackend", "open_backend",
           "registered_backends"]
