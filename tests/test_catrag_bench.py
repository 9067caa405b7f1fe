"""The CatRAG bench adapters (catrag, hipporag2, three ablations) on the tiny pooled fixture."""

from __future__ import annotations

from pathlib import Path

from bench_helpers import FIXTURE, offline_kg  # also puts tools/ on sys.path
from langgraph.store.memory import InMemoryStore

from benchlib.api import BenchContext, BenchQuestion, gold_passage_keys, ranked_passages
from benchlib.datasets import load_questions, pooled_passages
from benchlib.methods.catrag import ADAPTERS

from langgraph_kgmem.testing import ScriptedChatModel


def _questions() -> list[BenchQuestion]:
    return load_questions(str(FIXTURE))


def _pooled_kg(questions: list[BenchQuestion]):
    return offline_kg(pooled_passages(str(FIXTURE), questions))


def test_every_ablation_is_registered_on_the_pooled_corpus():
    names = {a.name: a for a in ADAPTERS}
    assert set(names) == {"catrag", "hipporag2", "catrag-noanchor", "catrag-noweight", "catrag-noboost",
                          "catrag-serial", "catrag-nofusion", "hipporag2-nofusion", "catrag-adaptive",
                          "hipporag2-adaptive"}
    assert all(a.corpus == "pooled" for a in ADAPTERS)
    assert names["hipporag2"].options == {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False,
                                          "experience": False}
    assert names["catrag-serial"].options == {"llm_concurrency": 1} and not names["catrag-serial"].in_default_run
    # the papers' PPR-only ranking, only when named: the default ranking is fused with vector search
    assert names["catrag-nofusion"].options == {"dense_fusion": False} and not names["catrag-nofusion"].in_default_run
    assert names["hipporag2-nofusion"].options == {**names["hipporag2"].options, "dense_fusion": False}
    assert not names["hipporag2-nofusion"].in_default_run
    # adaptive fusion, only when named: PPR's share of the evidence by its confidence
    assert names["catrag-adaptive"].options == {"fusion": "adaptive"} and not names["catrag-adaptive"].in_default_run
    assert names["hipporag2-adaptive"].options == {**names["hipporag2"].options, "fusion": "adaptive"}


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
            assert res.retrieved_ids and res.retrieved_count <= 5
            assert res.usage["llm_calls"] == len(model.calls) >= 2
            assert 0.0 <= res.extra["hub_mass"] <= 1.0 and res.extra["retrieval_ms"] >= 0
            if adapter.name == "hipporag2":
                assert res.extra["anchors"] == 0 and res.extra["scoring_calls"] == 0
            off = adapter.run(ctx, blind, "offline")
            assert off.usage["llm_calls"] == 0 and off.retrieved_ids
            assert off.usage["prompt_tokens"] > 50  # the would-be answer prompt, counted offline
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
    assert set(gold_passage_keys(q)) <= set(ranked_passages(kg, res.retrieved_ids).keys[:5])
    kg.close()
