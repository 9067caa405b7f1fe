"""Integrity of the benchmark harness: the gold firewall (for every registered adapter, ``run``
receives no gold; the oracle decider and ``score`` do), failed questions counted in every row."""

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


# ------------------------------------------------------------------------------------ errors counted


class _FailsOnSecond:
    """A pooled adapter whose second question raises."""

    name, corpus, datasets = "fails-on-second", "pooled", None

    def setup(self, ctx):
        ctx.cache["n"] = 0

    def run(self, ctx, q, model):
        ctx.cache["n"] += 1
        if ctx.cache["n"] == 2:
            raise RuntimeError("boom on the second question")
        return MethodResult(retrieved_titles=[], answer="x")

    def oracle(self, ctx, q):
        return lambda messages, request: "x"


def _main_with(adapters, argv, monkeypatch, tmp_path):
    from benchlib import corpus as corpora
    from benchlib.registry import Registry

    monkeypatch.setattr(corpora, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(runner, "discover", lambda: Registry(adapters={a.name: a for a in adapters}))
    out = tmp_path / "r.json"
    rc = runner.main([*argv, "--dataset", str(FIXTURE), "--embeddings", "hash", "--json", str(out)])
    import json

    return rc, json.loads(out.read_text())["results"]


def test_every_row_counts_errors_and_the_last_line_says_so(monkeypatch, tmp_path, capsys):
    rc, rows = _main_with([_FailsOnSecond()], ["--passes", "1", "--questions", "3"], monkeypatch, tmp_path)
    out = capsys.readouterr().out
    assert rc == 1
    assert rows[0]["errors"] == 1 and rows[0]["questions"] == 2
    assert "boom on the second question" in rows[0]["first_error"]
    header, _, row = out.splitlines()[:3]
    assert "| errors |" in header and "| 2 | 1 |" in row  # n, errors
    last = out.strip().splitlines()[-1]
    assert last.startswith("ERRORS: 1 question run(s) failed (fails-on-second pass 1: 1)")
    assert "boom on the second question" in last


def test_a_clean_run_has_zero_errors_in_every_row(monkeypatch, tmp_path, capsys):
    rc, rows = _main_with([REGISTRY.get("dense")], ["--passes", "2", "--questions", "2"], monkeypatch, tmp_path)
    out = capsys.readouterr().out
    assert rc == 0 and [r["errors"] for r in rows] == [0, 0] and "first_error" not in rows[0]
    assert "ERRORS" not in out and "| errors |" in out.splitlines()[0]
