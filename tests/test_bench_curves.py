"""The learning-curve bench modes: the shipped paraphrases (60, hand-written, each keeping its
original's id and answer) and ``--paraphrases``, which asks them from pass 2 on."""

from __future__ import annotations

import json

import pytest
from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)

from benchlib.common import BenchError
from benchlib import curves
from benchlib.curves import PARAPHRASES, asked, load_paraphrases, paraphrase_asker
from benchlib.datasets import load_questions


@pytest.mark.parametrize("dataset", ["hotpotqa", "musique-train100"])
def test_each_paraphrase_rewords_its_original_and_keeps_its_answer(dataset):
    rows = load_paraphrases(dataset)
    originals = {q.id: q for q in load_questions(dataset, 30)}
    assert len(rows) == 30 and set(rows) == set(originals)
    for qid, row in rows.items():
        q = originals[qid]
        assert row["original"] == q.question and row["answer"] == q.answer and row["kinds"]
        assert " ".join(row["question"].casefold().split()) != " ".join(q.question.casefold().split())


def test_the_file_holds_sixty_rows_on_the_two_sets():
    rows = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) == 60 and {r["dataset"] for r in rows} == {"hotpotqa", "musique-train100"}


def test_pass_one_asks_the_original_and_later_passes_the_paraphrase():
    qs = load_questions("hotpotqa", 3)
    ask = paraphrase_asker("hotpotqa", qs)
    rows = load_paraphrases("hotpotqa")
    assert ask(qs[0], 1) is qs[0]
    second = ask(qs[0], 2)
    assert second.question == rows[qs[0].id]["question"] != qs[0].question
    assert (second.id, second.answer, second.passages, second.supporting_titles) == \
        (qs[0].id, qs[0].answer, qs[0].passages, qs[0].supporting_titles)


def test_questions_without_a_paraphrase_or_with_another_answer_are_refused(tmp_path):
    qs = load_questions("hotpotqa", 31)
    with pytest.raises(BenchError, match="1 of the 31 questions have no paraphrase"):
        paraphrase_asker("hotpotqa", qs)
    with pytest.raises(BenchError, match="no paraphrases of 'hotpotqa-train100'"):
        paraphrase_asker("hotpotqa-train100", load_questions("hotpotqa-train100", 2))
    bad = tmp_path / "p.jsonl"
    row = {**load_paraphrases("hotpotqa")[qs[0].id], "answer": "Someone else"}
    bad.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(BenchError, match="answers 'Someone else'"):
        paraphrase_asker("hotpotqa", qs[:1], bad)


def test_rows_say_what_was_asked():
    class Args:
        paraphrases = True

    assert [asked(Args, p) for p in (1, 2, 3)] == ["original", "paraphrase", "paraphrase"]
    Args.paraphrases = False
    assert asked(Args, 2) == "original"


def test_the_similarity_report_applies_the_whole_lookup_rule():
    rows = {r["dataset"]: r for r in curves.paraphrase_similarity("hash")}
    hot, mus = rows["hotpotqa"], rows["musique-train100"]
    # "Formula One" reworded as "F1" lies above 0.8 on the cosine but names other things
    assert hot["rule_matched@0.8"] < hot["matched@0.8"]
    # at 0.5 the cosine alone takes other originals for paraphrases; names and kind of answer never
    assert mus["false@0.5"] > 0 and mus["rule_false@0.5"] == 0
    assert all(r[f"rule_matched@{t}"] <= r[f"matched@{t}"] for r in rows.values() for t in (0.5, 0.6, 0.7, 0.8))


def test_near_misses_ask_something_else_about_the_same_things():
    from langgraph_kgmem.memory.prior_runs import question_key, same_form, same_names

    rows = [json.loads(line) for line in curves.NEAR_MISSES.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 20 and all(r["differs"] for r in rows)
    assert all(question_key(r["question"]) != question_key(r["near_miss"]) for r in rows)
    # what the rule cannot tell from a paraphrase: the same names and the same kind of answer
    agree = [same_names(r["question"], r["near_miss"]) and same_form(r["question"], r["near_miss"]) for r in rows]
    assert sum(agree) >= 0.9 * len(rows)


def test_the_near_miss_report_counts_what_the_rule_would_take(monkeypatch, tmp_path):
    import numpy as np

    class Fixed:   # "capital" questions at cosine 1, every other pair orthogonal
        def embed_query(self, text):
            return np.array([1.0, 0.0]) if "capital" in text or "Warsaw" in text else np.array([0.0, 1.0]) \
                if "father" in text else np.array([0.6, 0.8])

    monkeypatch.setattr("benchlib.common.make_embeddings", lambda spec: Fixed())
    path = tmp_path / "near.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"question": "What is the capital of Poland?", "near_miss": "What is the old capital of Poland?", "differs": "a"},
        {"question": "Who is the father of Jan?", "near_miss": "Who is the wife of Jan?", "differs": "b"},
        {"question": "Where is Warsaw?", "near_miss": "When was Warsaw founded?", "differs": "c"}]))
    report = curves.near_miss_similarity("fixed", thresholds=(0.5, 0.99), path=path)
    # the first pair is at 1.0 and agrees; the second at 0.8; the third at 1.0 but asks another kind
    assert report["near_misses"] == 3 and report["rule_agrees"] == 2
    assert report["rule_matched@0.5"] == 2 and report["rule_matched@0.99"] == 1 and report["near_max"] == 1.0
