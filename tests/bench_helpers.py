"""Shared by the benchmark-harness tests: puts ``tools/`` on ``sys.path`` (so ``benchlib`` imports)
and builds the small offline KGs they run on. Import it before any ``benchlib`` import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

TOOLS = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

FIXTURE = Path(__file__).parent / "fixtures" / "bench_tiny.jsonl"   # three questions, normalized QA form


def offline_kg(passages: Sequence[dict[str, str]]) -> Any:
    """An in-memory KG (hashing embedding) of ``passages``, extracted offline as the harness does."""
    from benchlib import corpus as corpora

    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.in_memory(name="bench", embeddings="hash")
    kg.add_documents(corpora.as_documents(passages), model="offline")
    return kg
