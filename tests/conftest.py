"""Shared fixtures: offline by construction (sockets limited to loopback/unix), tiny KGs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("KGMEM_MODEL", None)

FIXTURES = Path(__file__).parent / "fixtures"

SAMPLE_DOCS = [
    {"id": "doc-curie", "title": "Marie Curie",
     "text": "Marie Curie was a physicist born in Warsaw. She won the Nobel Prize in Physics in 1903 "
             "together with Pierre Curie. She discovered polonium."},
    {"id": "doc-warsaw", "title": "Warsaw",
     "text": "Warsaw is the capital of Poland. Warsaw lies on the Vistula river."},
    {"id": "doc-pierre", "title": "Pierre Curie",
     "text": "Pierre Curie was a French physicist. Pierre Curie married Marie Curie in 1895 in Paris."},
    {"id": "doc-vistula", "title": "Vistula",
     "text": "The Vistula is the longest river in Poland. The Vistula flows into the Baltic Sea."},
]


@pytest.fixture
def kg():
    """A small in-memory KG (hashing embedding) built offline from SAMPLE_DOCS."""
    from langgraph_kgmem import KnowledgeGraph

    g = KnowledgeGraph.in_memory(name="test")
    g.add_documents(SAMPLE_DOCS, model="offline")
    yield g
    g.close()


@pytest.fixture
def store():
    from langgraph.store.memory import InMemoryStore

    return InMemoryStore()


@pytest.fixture
def sample_docs():
    return [dict(d) for d in SAMPLE_DOCS]
