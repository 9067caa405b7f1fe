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
               "location": f"{SENTINEL}-location", "time": "2016-01-01 00:00"},
        supporting_passages=[0])


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
        return MethodResult(retrieved_ids=[], answer=None)

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
    assert got.extra == {} and got.answer == "" and got.supporting_titles == [] and got.supporting_passages is None
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
        return MethodResult(retrieved_ids=[], answer="x")

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


# ------------------------------------------------------------------------------------ noisy oracles


def _request(step, context, schema=dict):
    from langgraph_kgmem.llm import DecisionRequest

    return DecisionRequest(step=step, schema=schema, context=context)


def test_mistakes_never_roll_at_zero_always_err_at_one_and_are_seeded():
    from benchlib.api import Mistakes

    zero = Mistakes(0.0, "k")
    state = zero.rng.getstate()
    assert not any(zero.wrong() for _ in range(100)) and zero.rng.getstate() == state  # no die rolled
    assert all(Mistakes(1.0, "k").wrong() for _ in range(100))
    a, b = Mistakes(0.3, 0, "m", "q"), Mistakes(0.3, 0, "m", "q")
    rolls = [a.wrong() for _ in range(200)]
    assert rolls == [b.wrong() for _ in range(200)] and 30 < sum(rolls) < 90
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Mistakes(1.5)


def _ctx(kg, noise, decider="oracle"):
    from langgraph.store.memory import InMemoryStore

    return BenchContext(kg=kg, store=InMemoryStore(), checkpointer=None, decider=decider, dataset="tiny",
                        workdir=Path("."), options={"noise": noise, "seed": 0, "pass": 1})


def _tiny():
    from bench_helpers import offline_kg

    from benchlib.datasets import load_questions, pooled_passages

    qs = load_questions(str(FIXTURE))
    return qs, offline_kg(pooled_passages(str(FIXTURE), qs))


def test_remindrag_noise_zero_is_the_oracle_and_noise_one_moves_at_random_validly():
    qs, kg = _tiny()
    q, adapter = qs[0], REGISTRY.get("remindrag")
    from benchlib.api import gold_chunk_ids

    gold = sorted(i for i in gold_chunk_ids(kg, q) if kg.node(i).kind == "chunk")
    chunks = [n.id for n in kg.nodes("chunk")]
    others = [c for c in chunks if c not in gold]
    suff_all = _request("check_sufficiency", {"evidence_ids": gold})
    suff_none = _request("check_sufficiency", {"evidence_ids": []})
    # a move: forward to a gold passage or to another one, or back
    move = _request("traverse_step", {"evidence_ids": [], "forward": [others[0], gold[0]], "backward": [others[1]],
                                      "frontier": {others[1]: [others[2]]}})
    exact = adapter.oracle(_ctx(kg, 0.0), q)
    assert exact([], suff_all) == {"sufficient": True} and exact([], suff_none) == {"sufficient": False}
    assert exact([], move) == {"direction": "forward", "node_id": gold[0]}
    noisy = adapter.oracle(_ctx(kg, 1.0), q)
    assert noisy([], suff_all) == {"sufficient": False} and noisy([], suff_none) == {"sufficient": True}
    moves = [noisy([], move) for _ in range(40)]
    valid = [{"direction": "forward", "node_id": n} for n in (others[0], gold[0])] + [
        {"direction": "backward", "node_id": others[1]}]
    assert all(m in valid for m in moves) and len({m["node_id"] for m in moves}) == 3
    kg.close()


def test_catrag_noise_one_scores_and_filters_at_random_within_the_valid_range():
    qs, kg = _tiny()
    q, adapter = qs[0], REGISTRY.get("catrag")
    from benchlib.api import gold_chunk_ids

    gold = sorted(i for i in gold_chunk_ids(kg, q) if kg.node(i).kind == "chunk")
    neighbours = [{"neighbour": i, "chunks": gold if i % 2 else []} for i in range(1, 41)]
    weigh = _request("weight_edges", {"neighbours": neighbours})
    cands = [{"chunks": gold if i < 2 else [], "src": "x", "dst": "y"} for i in range(10)]
    filt = _request("filter_facts", {"candidates": cands})
    exact = adapter.oracle(_ctx(kg, 0.0), q)
    assert [s["score"] for s in exact([], weigh)["scores"]] == [9 if i % 2 else 2 for i in range(1, 41)]
    assert exact([], filt) == {"keep": [1, 2]}
    noisy = adapter.oracle(_ctx(kg, 1.0), q)
    scores = [s["score"] for s in noisy([], weigh)["scores"]]
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores) and len(set(scores)) > 4
    keeps = [noisy([], filt)["keep"] for _ in range(20)]
    assert all(len(k) <= 4 and set(k) <= set(range(1, 11)) for k in keeps) and any(k != [1, 2] for k in keeps)
    kg.close()


@pytest.mark.parametrize("method", ["remindrag", "catrag", "hipporag2"])
def test_noisy_oracle_runs_through_the_graphs_without_invalid_decisions(method, monkeypatch, tmp_path, capsys):
    argv = ["--method", method, "--decider", "oracle", "--passes", "1", "--questions", "3"]
    if method == "remindrag":
        argv += ["--corpus", "pooled"]   # one KG of all passages: more moves to get wrong
    rc0, exact = _main_with([REGISTRY.get(method)], argv + ["--noise", "0"], monkeypatch, tmp_path)
    rc1, noisy = _main_with([REGISTRY.get(method)], argv + ["--noise", "1"], monkeypatch, tmp_path)
    assert rc0 == rc1 == 0 and exact[0]["errors"] == noisy[0]["errors"] == 0   # every random decision was valid
    assert exact[0]["noise"] == 0.0 and noisy[0]["noise"] == 1.0
    keys = ("recall@2", "recall@5", "llm_calls_per_query", "prompt_tokens_per_query")
    assert [exact[0][k] for k in keys] != [noisy[0][k] for k in keys]


def test_noise_must_be_a_probability(capsys):
    with pytest.raises(SystemExit):
        runner.parse_args(["--noise", "1.5"])
    assert "--noise must be a probability" in capsys.readouterr().err
