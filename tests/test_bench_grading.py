"""Retrieval is graded by passage, not by title: repeated titles (a distractor sharing a gold title, two
gold paragraphs under one title), the top-k cut on retrieved units before repeats merge, and empty
rankings scoring 0 while methods without passage retrieval report n/a."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_helpers import offline_kg  # also puts tools/ on sys.path

from benchlib import datasets, metrics, runner
from benchlib.api import BenchContext, BenchQuestion, MethodResult, gold_passage_keys, passage_key, ranked_passages

GOLD = {"title": "Antarctica", "text": "Emilio Palma was born south of the 60th parallel south, the continental limit."}
GOLD_2 = {"title": "Antarctica", "text": "Antarctica has the lowest average temperature of all continents."}
DISTRACTOR = {"title": "Antarctica", "text": "Antarctica receives relatively little solar radiation at the pole."}
OTHER = {"title": "Penguins", "text": "Emperor penguins breed during the winter on the sea ice."}


class RankedAdapter:
    """Returns a fixed ranking of unit ids, chosen per question by ``pick(kg, q)``."""

    name, corpus, datasets = "ranked", "per-question", None

    def __init__(self, pick):
        self.pick = pick

    def setup(self, ctx):
        pass

    def run(self, ctx, q, model):
        return MethodResult(retrieved_ids=self.pick(ctx.kg, q), answer=None)

    def oracle(self, ctx, q):
        return lambda messages, request: "x"


def units(kg, passage, kind="chunk"):
    """The ``kind`` nodes (chunk or anchor) made from ``passage``, in document order."""
    key = passage_key(passage)
    return [n.id for n in sorted((n for n in kg.nodes(kind) if n.attrs.get("doc_id") == key),
                                 key=lambda n: n.attrs["index"])]


def grade(passages, ranking, **question):
    """The result row of one question whose run returns ``ranking(kg)`` (unit ids)."""
    q = BenchQuestion("q", "Where is the continental limit of the coldest continent?", "60th parallel south",
                      passages, **question)
    kg = offline_kg(passages)
    ctx = BenchContext(kg=kg, store=None, checkpointer=None, decider="offline", dataset="d", workdir=Path("."))
    outcome = runner.run_question(RankedAdapter(lambda kg_, _q: ranking(kg_)), ctx, q, "offline", None, [])
    kg.close()
    return metrics.aggregate([outcome], method="ranked", decider="offline", dataset="d", pass_no=1)


def test_a_distractor_sharing_the_gold_title_is_not_the_gold_passage():
    passages = [GOLD, DISTRACTOR, OTHER]
    question = {"supporting_titles": ["Antarctica"], "supporting_passages": [0]}
    wrong = grade(passages, lambda kg: units(kg, DISTRACTOR) + units(kg, OTHER), **question)
    assert wrong["recall@5"] == 0.0 and wrong["fcr"] == 0.0   # by title it would have scored 1
    right = grade(passages, lambda kg: units(kg, OTHER) + units(kg, GOLD), **question)
    assert right["recall@2"] == 1.0 and right["fcr"] == 1.0


def test_two_gold_paragraphs_under_one_title_both_count():
    passages = [GOLD, DISTRACTOR, GOLD_2]
    question = {"supporting_titles": ["Antarctica"], "supporting_passages": [0, 2]}
    half = grade(passages, lambda kg: units(kg, GOLD) + units(kg, DISTRACTOR), **question)
    assert half["recall@5"] == 0.5 and half["fcr"] == 0.0     # by title: 1 and 1
    full = grade(passages, lambda kg: units(kg, GOLD_2) + units(kg, GOLD), **question)
    assert full["recall@2"] == 1.0 and full["fcr"] == 1.0


def test_top_k_counts_retrieved_units_not_distinct_titles():
    fillers = [{"title": t, "text": f"Filler paragraph number {i} about {t} and nothing else."}
               for i, t in enumerate(["Ice", "Ice", "Sea", "Sea", "Wind"])]
    passages = [*fillers, GOLD]
    question = {"supporting_titles": ["Antarctica"]}
    # the gold passage is the 6th unit: among the first 5 *distinct titles*, but not in a 5-passage prompt
    row = grade(passages, lambda kg: [u for p in passages for u in units(kg, p)], **question)
    assert row["recall@5"] == 0.0 and row["fcr"] == 0.0 and row["recall_all"] == 1.0
    assert row["passages_per_query"] == 6.0


def test_a_chunk_and_its_anchor_are_one_retrieved_unit():
    fillers = [{"title": f"T{i}", "text": f"Filler paragraph number {i} with its own words."} for i in range(4)]
    passages = [*fillers, GOLD]

    def ranking(kg):
        first = fillers[0]
        return units(kg, first, "anchor") + [u for p in passages for u in units(kg, p)]

    row = grade(passages, ranking, supporting_titles=["Antarctica"])
    assert row["recall@5"] == 1.0    # the anchor and chunk of the first filler take one place, not two


def test_an_empty_ranking_scores_zero_and_a_method_without_retrieval_reports_n_a():
    passages = [GOLD, OTHER]
    empty = grade(passages, lambda kg: [], supporting_titles=["Antarctica"])
    assert (empty["recall@2"], empty["recall@5"], empty["fcr"], empty["retrieval"]) == (0.0, 0.0, 0.0, "graded")
    assert "| 0.000 | 0.000 | 0.000 |" in metrics.markdown_table([empty])
    none = grade(passages, lambda kg: None, supporting_titles=["Antarctica"])
    assert none["recall@5"] is None and none["retrieval"] == "n/a"
    assert "| n/a | n/a | n/a |" in metrics.markdown_table([none])


def test_gold_passages_come_from_indices_when_given_else_from_titles():
    q = BenchQuestion("q", "?", "", [GOLD, DISTRACTOR, OTHER], ["Antarctica"])
    assert gold_passage_keys(q) == [passage_key(GOLD), passage_key(DISTRACTOR)]
    q.supporting_passages = [0]
    assert gold_passage_keys(q) == [passage_key(GOLD)]


def test_ranked_passages_skip_nodes_that_are_no_text_unit():
    kg = offline_kg([GOLD])
    entity = next(iter(kg.nodes("entity"))).id
    ranked = ranked_passages(kg, [entity, *units(kg, GOLD), "missing-id"])
    assert ranked.keys == [passage_key(GOLD)] and ranked.titles == ["Antarctica"]
    kg.close()


def _row(**extra):
    return {"id": "q", "question": "?", "answer": "a", "passages": [GOLD, DISTRACTOR, OTHER],
            "supporting_titles": ["Antarctica"], **extra}


def test_supporting_passages_are_read_and_checked(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(_row(supporting_passages=[1])) + "\n")
    q = datasets.load_questions(str(path))[0]
    assert q.supporting_passages == [1] and "supporting_passages" not in q.extra
    for bad, match in (([3], "distinct indices"), ([0, 0], "distinct indices"), (["0"], "distinct indices"),
                       ([2], r"titles of supporting_passages \['Penguins'\] are not the supporting_titles")):
        path.write_text(json.dumps(_row(supporting_passages=bad)) + "\n")
        with pytest.raises(datasets.DatasetError, match=match):
            datasets.load_questions(str(path))


def test_the_shipped_musique_set_names_its_gold_paragraphs():
    qs = {q.id: q for q in datasets.load_questions("musique-train100")}
    assert all(q.supporting_passages for q in qs.values())
    q = qs["2hop__161500_15014"]   # gold ['Antarctica'], four passages with that title, two of them distractors
    antarctica = [i for i, p in enumerate(q.passages) if p["title"] == "Antarctica"]
    assert len(antarctica) == 4 and q.supporting_titles == ["Antarctica"]
    assert len(q.supporting_passages) == 2 and set(q.supporting_passages) < set(antarctica)
    assert len(gold_passage_keys(q)) == 2
