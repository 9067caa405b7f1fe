"""The gold firewall of the benchmark harness: for every registered adapter, ``run`` receives no
gold (answer, supporting titles, ``extra``), while the oracle decider and ``score`` do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from bench_helpers import FIXTURE  # noqa: F401  (puts tools/ on sys.path)

from benchlib import runner
from benchlib.api import BenchContext, BenchQuestion, MethodResult
from benchlib.registry import discover

SENTINEL = "GOLD-SENTINEL"
REGISTRY = discover()


def gold_question() -> BenchQuestion:
    """A question with gold in every field a dataset may keep it in."""
    return BenchQuestion(
        id="q1", question="Which river flows through the capital?", answer=f"{SENTINEL}-answer",
        passages=[{"title": "Capital", "text": "The capital lies on a river."}],
        supporting_titles=[f"{SENTINEL}-title"],
        extra={"required": [f"{SENTINEL}-record"], "gold_path": [{"tool": "Finish", "args": {"answer": SENTINEL}}],
               "location": f"{SENTINEL}-location", "time": "2016-01-01 00:00"})


def test_every_adapter_is_checked():
    assert not REGISTRY.broken, REGISTRY.broken
    # the methods whose ground truth rode in ``extra`` before the firewall are among them
    assert {"kgirag", "singlepass", "graphcot", "r3cycle", "remindrag", "catrag", "dense"} <= set(REGISTRY.names())


@pytest.mark.parametrize("name", REGISTRY.names())
@pytest.mark.parametrize("decider", ["offline", "oracle"])
def test_run_receives_nothing_gold_only_the_oracle_and_score_do(name, decider, monkeypatch):
    adapter = REGISTRY.get(name)
    seen: dict[str, BenchQuestion] = {}

    def run(ctx, q, model):
        seen["run"] = q
        return MethodResult(retrieved_titles=[], answer=None)

    def oracle(ctx, q):
        seen["oracle"] = q
        return lambda messages, request: "no answer"

    def score(ctx, q, result):
        seen["score"] = q
        return {}

    monkeypatch.setattr(adapter, "run", run)
    monkeypatch.setattr(adapter, "oracle", oracle)
    monkeypatch.setattr(adapter, "score", score, raising=False)
    ctx = BenchContext(kg=None, store=None, checkpointer=None, decider=decider, dataset="x", workdir=Path("."))
    q = gold_question()
    errors: list[str] = []
    outcome = runner.run_question(adapter, ctx, q, decider, None, errors)
    assert errors == [] and outcome.error is None
    got = seen["run"]
    assert SENTINEL not in repr(dataclasses.asdict(got)), f"{name}.run saw gold: {got}"
    assert (got.id, got.question, got.passages) == (q.id, q.question, q.passages)  # the inputs are intact
    assert got.extra == {} and got.answer == "" and got.supporting_titles == []
    # gold goes only to the decider (oracle) and to the gold-aware metrics (score)
    assert seen["score"] == q
    assert ("oracle" in seen) == (decider == "oracle") and seen.get("oracle", q) == q


def test_blinded_question_does_not_share_the_original_passages():
    q = gold_question()
    blind = runner.blinded(q)
    blind.passages[0]["text"] = "changed"
    assert q.passages[0]["text"] == "The capital lies on a river."
