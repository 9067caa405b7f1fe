"""The mixed benchmark's bookkeeping: per-part quality, the oracle router (best single method per
question in hindsight) and the summary the router's goals are read from."""

from __future__ import annotations

import argparse

import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
from benchlib.api import BenchQuestion
from benchlib.metrics import QuestionOutcome
from benchlib.mixed import ORACLE_ROUTER, PARTS, oracle_rows, quality, rows_of, summarize

ARGS = argparse.Namespace(decider="oracle")


def _q(part: str, i: int) -> BenchQuestion:
    return BenchQuestion(f"{part}:{i}", f"q{i}", "yes", [], [], extra={"part": part})


def _o(qid: str, *, retrieved=None, gold=(), answer="no", calls=0) -> QuestionOutcome:
    return QuestionOutcome(qid, list(retrieved) if retrieved is not None else None, list(gold), answer, "yes",
                           {"llm_calls": calls}, None, 0.01)


def test_quality_is_recall_at_5_for_passages_and_em_for_records_and_graphs():
    assert quality(_o("a", retrieved=["g1", "x"], gold=["g1", "g2"]), "musique") == 0.5
    assert quality(_o("a", retrieved=None, gold=["g1"]), "hotpotqa") == 0.0     # a records method: a miss
    assert quality(_o("a", answer="Yes"), "beijing-rain") == 1.0
    assert quality(_o("a", answer="no"), "graph-qa") == 0.0


def test_the_oracle_router_takes_each_questions_best_method_and_the_summary_compares():
    qs = [_q("hotpotqa", 0), _q("beijing-rain", 1)]
    runs = {
        "catrag": [_o("h", retrieved=["g"], gold=["g"], calls=4), _o("r", answer="no", calls=4)],
        "kgirag": [_o("h", retrieved=[], gold=["g"], calls=2), _o("r", answer="yes", calls=2)],
        "router": [_o("h", retrieved=["g"], gold=["g"], calls=4), _o("r", answer="yes", calls=3)],
    }
    results = {m: {1: {"outcomes": o}} for m, o in runs.items()}
    rows = [row for m in runs for row in rows_of(m, results[m], qs, ARGS, {})]
    rows += oracle_rows(results, qs, ARGS)
    oracle = {r["part"]: r for r in rows if r["method"] == ORACLE_ROUTER}
    assert oracle["all"]["quality"] == 1.0 and oracle["all"]["llm_calls_per_query"] == 3.0
    assert all(r["parts"] == list(PARTS) for r in rows)
    summary = summarize(rows)["pass 1"]
    assert summary["hotpotqa"]["best_single"] == "catrag" and summary["beijing-rain"]["best_single"] == "kgirag"
    assert summary["all"]["router_quality"] == 1.0 and summary["all"]["best_single_quality"] == 0.5
    assert summary["all"]["costliest"] == "catrag" and summary["all"]["router_calls_vs_costliest"] == 0.875
    assert summary["all"]["router_minus_oracle"] == 0.0
