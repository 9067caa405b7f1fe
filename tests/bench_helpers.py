"""Shared by the benchmark-harness tests: puts ``tools/`` on ``sys.path`` (so ``benchlib`` imports)
and builds the small offline KGs they run on. Import it before any ``benchlib`` import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

FIXTURE = Path(__file__).parent / "fixtures" / "bench_tiny.jsonl"   # three questions, normalized QA form


@pytest.fixture
def bench_cache(tmp_path, monkeypatch):
    """KG cache and run directories under tmp_path (also for fresh worker processes); a test
    module takes it with ``from bench_helpers import bench_cache``."""
    from benchlib import corpus as corpora

    cache = tmp_path / "cache"
    monkeypatch.setattr(corpora, "CACHE_DIR", cache)
    monkeypatch.setenv("KGMEM_BENCH_CACHE", str(cache))
    return cache


def offline_kg(passages: Sequence[dict[str, str]]) -> Any:
    """An in-memory KG (hashing embedding) of ``passages``, extracted offline as the harness does."""
    from benchlib import corpus as corpora

    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.in_memory(name="bench", embeddings="hash")
    kg.add_documents(corpora.as_documents(passages), model="offline")
    return kg


# the feedback-split tools' tests: three people, their cities and the cities' rivers
SPLIT_PASSAGES = [{"title": t, "text": x} for t, x in [
    ("Ulm", "Albert Einstein was born in Ulm. Ulm is a city on the Danube."),
    ("Warsaw", "Marie Curie was born in Warsaw. Warsaw is a city on the Vistula."),
    ("Paris", "Pierre Curie was born in Paris. Paris is a city on the Seine."),
    ("Danube", "The Danube flows into the Black Sea."),
    ("Vistula", "The Vistula flows into the Baltic Sea."),
    ("Seine", "The Seine flows into the English Channel."),
    ("Bern", "Albert Einstein worked in Bern at the patent office."),
]]


def split_question(qid: str, text: str, gold: Sequence[str]) -> Any:
    """A question over :data:`SPLIT_PASSAGES` whose gold passages are the titles ``gold``."""
    from benchlib.api import BenchQuestion

    return BenchQuestion(id=qid, question=text, answer="", passages=SPLIT_PASSAGES, supporting_titles=gold)
