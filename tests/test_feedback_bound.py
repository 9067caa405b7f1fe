"""The feedback-split bound (``tools/benchlib/feedback_bound.py``): what the best calibration
setting and a penalty that knew the answer could give the second half, on the split's own rankings."""

from __future__ import annotations

from collections import Counter

from bench_helpers import SPLIT_PASSAGES, offline_kg, split_question  # noqa: I001  (puts tools/ on sys.path)
from benchlib.feedback_bound import bound_rows, demoted, settings, wrong_marks

from langgraph_kgmem.graphs.catrag.calibration import GRID

PASSAGES = SPLIT_PASSAGES
question = split_question


def test_a_penalty_that_knew_the_answer_removes_only_what_is_not_gold_here():
    marks = Counter({"a": 2, "b": 1, "g": 3})
    assert demoted(["a", "b", "g", "c"], marks, {"g"}, 1) == ["g", "c"]       # gold for this question stays
    assert demoted(["a", "b", "g", "c"], marks, {"g"}, 2) == ["b", "g", "c"]  # marked once: kept at threshold 2


def test_the_grid_union_keeps_the_default_first_and_every_setting_once():
    grid = settings()
    assert grid[0] == {} and len(grid) == len({repr(s) for s in grid})
    assert all(dict(s) in grid for g in GRID.values() for s in g)


def test_the_bounds_are_ordered_and_the_default_is_the_cold_ranking():
    kg = offline_kg(PASSAGES)
    first = [question("q1", "Which sea does the river of Albert Einstein's birthplace flow into?", ["Ulm", "Danube"]),
             question("q2", "Which sea does the river of Marie Curie's birthplace flow into?", ["Warsaw", "Vistula"])]
    second = [question("q3", "Which sea does the river of Pierre Curie's birthplace flow into?", ["Paris", "Seine"]),
              question("q4", "Where did Albert Einstein work?", ["Bern"])]
    rows = bound_rows(kg, "toy", first, second, methods=("hipporag2",))
    row = rows[0]
    assert row["settings"][repr({})] == row["recall@5_cold"]
    assert row["best_recall@5"] == max(row["settings"].values()) >= row["recall@5_cold"]
    assert row["per_question"] >= row["best_recall@5"] and row["first_best"] in row["settings"]
    assert row["first_best_delta"] == round(row["settings"][row["first_best"]] - row["recall@5_cold"], 2)
    assert row["distractors"] >= row["recall@5_cold"] and row["distractors_twice"] >= row["recall@5_cold"]
    chunks = [n.id for n in kg.nodes("chunk")]
    marks = wrong_marks(kg, first, [chunks] * 2)
    gold = {n.id for n in kg.nodes("chunk") if n.attrs["title"] in ("Ulm", "Danube", "Warsaw", "Vistula")}
    # each run marks its own top 5 less its own gold: a first-half gold passage is marked by the other run only
    assert set(marks) == set(chunks[:5]) and all(marks[c] == (1 if c in gold else 2) for c in chunks[:5])
    kg.close()
