"""PostgresSaver + PostgresStore by configuration (KGMEM_POSTGRES_URI).

Runs when KGMEM_TEST_POSTGRES_URI points at a reachable server (e.g. a local
`postgresql://postgres@127.0.0.1:5432/postgres`); otherwise it is skipped, saying why.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.memory import EdgeMemory

URI = os.environ.get("KGMEM_TEST_POSTGRES_URI")
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not URI, reason="set KGMEM_TEST_POSTGRES_URI to a Postgres server to run")]


def test_persistence_uses_postgres_when_configured(tmp_path, monkeypatch):
    pytest.importorskip("langgraph.store.postgres")
    monkeypatch.setenv("KGMEM_POSTGRES_URI", URI)
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory", name="pgtest")
    saver, store = kg.persistence()
    assert type(saver).__name__ == "PostgresSaver" and type(store).__name__ == "PostgresStore"
    EdgeMemory(store, "pgtest", 4).put_many({"rel-x": np.array([1.0, 0, 0, 0])})
    kg.close()
    kg2 = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory", name="pgtest")
    _, store2 = kg2.persistence()
    assert EdgeMemory(store2, "pgtest", 4).get("rel-x").tolist() == [1.0, 0, 0, 0]
    kg2.close()
