"""PostgresSaver + PostgresStore by configuration (KGMEM_POSTGRES_URI), on a real server."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.memory import EdgeMemory

pytestmark = [pytest.mark.integration]


def test_persistence_uses_postgres_when_configured(tmp_path, monkeypatch, postgres_uri):
    monkeypatch.setenv("KGMEM_POSTGRES_URI", postgres_uri)
    kg = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory", name="pgtest")
    saver, store = kg.persistence()
    assert type(saver).__name__ == "PostgresSaver" and type(store).__name__ == "PostgresStore"
    EdgeMemory(store, "pgtest", 4).put_many({"rel-x": np.array([1.0, 0, 0, 0])})
    kg.close()
    kg2 = KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory", name="pgtest")
    _, store2 = kg2.persistence()
    assert EdgeMemory(store2, "pgtest", 4).get("rel-x").tolist() == [1.0, 0, 0, 0]
    kg2.close()
