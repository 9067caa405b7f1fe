"""The CatRAG bench adapters (catrag, hipporag2, three ablations) on the tiny pooled fixture."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langgraph.store.memory import InMemoryStore

TOOLS = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from benchlib.api import BenchContext, BenchQuestion  # noqa: E402
from benchlib.methods.catrag import ADAPTERS  # noqa: E402

from langgraph_kgmem import KnowledgeGraph  # noqa: E402
from langgraph_kgmem.testing import ScriptedChatModel  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "bench_tiny.jsonl"


def _questions() -> list[BenchQuestion]:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    return [BenchQuestion(r["id"], r["question"], r["answer"], r["passages"], r["supporting_titles"]) for r in rows]


def _pooled_kg(questions: list[BenchQuestion]) -> KnowledgeGraph:
    kg = KnowledgeGraph.in_memory(name="bench")
    seen, docs = set(), []
    for q in questions:
        for p in q.passages:
            if (p["title"], p["text"]) not in seen:
                seen.add((p["title"], p["text"]))
                docs.append({"title": p["title"], "text": p["text"]})
    kg.add_documents(docs, model="offline")
    return kg


def test_every_ablation_is_registered_on_the_pooled_corpus():
    names = {a.name: a for a in ADAPTERS}
    assert set(names) == {"catrag", "hipporag2", "catrag-noanchor", "catrag-noweight", "catrag-noboost",
                          "catrag-serial"}
    assert all(a.corpus == "pooled" for a in ADAPTERS)
    assert names["hipporag2"].options == {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}
    assert names["catrag-serial"].options == {"llm_concurrency": 1} and not names["catrag-serial"].in_default_run


def test_adapters_run_under_oracle_and_offline():
    qs = _questions()
    kg = _pooled_kg(qs)
    for adapter in ADAPTERS:
        ctx = BenchContext(kg=kg, store=InMemoryStore(), checkpointer=None, decider="oracle", dataset="tiny",
                           workdir=Path("."))
        adapter.setup(ctx)
        for q in qs:
            blind = BenchQuestion(q.id, q.question, "", q.passages, [])
            model = ScriptedChatModel(responder=adapter.oracle(ctx, q))
            res = adapter.run(ctx, blind, model)
            assert res.retrieved_titles and res.retrieved_count <= 5
            assert res.usage["llm_calls"] == len(model.calls) >= 2
            assert 0.0 <= res.extra["hub_mass"] <= 1.0 and res.extra["retrieval_ms"] >= 0
            if adapter.name == "hipporag2":
                assert res.extra["anchors"] == 0 and res.extra["scoring_calls"] == 0
            off = adapter.run(ctx, blind, "offline")
            assert off.usage["llm_calls"] == 0 and off.retrieved_titles
    kg.close()


def test_oracle_finds_the_gold_chain_of_the_first_question():
    qs = _questions()
    kg = _pooled_kg(qs)
    adapter = {a.name: a for a in ADAPTERS}["catrag"]
    ctx = BenchContext(kg=kg, store=InMemoryStore(), checkpointer=None, decider="oracle", dataset="tiny",
                       workdir=Path("."))
    adapter.setup(ctx)
    q = qs[0]
    res = adapter.run(ctx, BenchQuestion(q.id, q.question, "", q.passages, []),
                      ScriptedChatModel(responder=adapter.oracle(ctx, q)))
    assert set(q.supporting_titles) <= set(res.retrieved_titles[:5])
    kg.close()
