"""The graph-qa benchmark adapters (graphcot, r3cycle) and the noisy oracle agent."""

from __future__ import annotations

from pathlib import Path

import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
from langgraph.store.memory import InMemoryStore

from benchlib.api import BenchContext, BenchQuestion
from benchlib.methods.r3cycle import ADAPTERS, NoisyOracle, compare

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.testing import ScriptedChatModel


def _ctx(kg, noise):
    return BenchContext(kg=kg, store=InMemoryStore(), checkpointer=None, decider="oracle", dataset="graph-qa",
                        workdir=Path("."), options={"seed": 0, "noise": noise})


def test_adapters_answer_with_a_perfect_oracle_and_offline():
    graphcot, r3 = ADAPTERS
    assert (graphcot.name, r3.name) == ("graphcot", "r3cycle") and graphcot.corpus == "graph-qa"
    qs = graphcot.load_questions("graph-qa", 9, 0)
    kg = KnowledgeGraph.in_memory(name="gqa")
    ctx = _ctx(kg, 0.0)
    graphcot.build_kg(ctx, qs)
    for q in qs:
        blind = BenchQuestion(q.id, q.question, "", [], [], {})
        for adapter in ADAPTERS:
            res = adapter.run(ctx, blind, ScriptedChatModel(responder=adapter.oracle(ctx, q)))
            assert res.answer == q.answer and res.extra["attempts"] == 1
            assert res.usage["llm_calls"] == len(q.extra["gold_path"]) + (adapter.name == "r3cycle")  # + verify
        assert r3.run(ctx, blind, "offline").answer == q.answer
    kg.close()


def test_noisy_oracle_is_seeded_and_the_reflection_fixes_the_named_step():
    q = ADAPTERS[0].load_questions("graph-qa", 6, 0)[1]
    a, b = NoisyOracle(q, 0.9, 0), NoisyOracle(q, 0.9, 0)
    assert a.plan(0, "") == b.plan(0, "") and a.plan(0, "") != q.extra["gold_path"]
    diag = a.diagnose([{"tool": s["tool"], "args": s["args"]} for s in a.plan(0, "")], "incorrect_answer")
    assert diag["advice"].startswith("Step ") and diag["retry"]
    step = int(diag["advice"].split()[1]) - 1
    fixed = NoisyOracle(q, 0.9, 0).plan(1, diag["advice"])
    assert q.extra["gold_path"][step] in fixed


def test_r3cycle_recovers_first_attempt_failures_without_longer_prompts_on_average():
    rows = {(r["noise"], r["method"]): r for r in compare([0.2], 30, seed=0)}
    base, r3 = rows[(0.2, "graphcot")], rows[(0.2, "r3cycle")]
    assert base["first_attempt_failures"] == r3["first_attempt_failures"] > 0
    assert r3["recovery_rate"] >= 0.5 and r3["accuracy"] > base["accuracy"]
    assert r3["mean_longest_prompt_tokens"] <= 1.2 * base["mean_longest_prompt_tokens"]
