"""``python -m benchlib.feedback_bound``: the most first-half feedback could give the second half.

``tools/bench.py --feedback-split`` measures what feedback on the first half of a shipped set does
for the second half (docs/memory.md). This module measures, on the same split, corpus and
offline rankings, what the two mechanisms that read feedback could give *at best*, with the
second half's own gold labels chosen in hindsight (so these are bounds, never figures a method
can reach):

- ``calibration``: every setting of CatRAG's and HippoRAG 2's calibration grids
  (:data:`~langgraph_kgmem.graphs.catrag.calibration.GRID`, the union of both, so HippoRAG 2 is
  also tried under the settings only CatRAG's grid holds), each applied to the whole second half.
  ``best_setting`` is the one with the highest second-half R@5: a calibration that always picked
  it would gain ``best_delta`` over the default. ``per_question`` is looser still: the best
  setting for each question on its own. ``first_best`` is what a perfect fit on the first half
  would pick (every first-half question's gold known, scored by R@5, ties to the default) and
  ``first_best_delta`` what it gives the second half: the most a calibration learnt from
  first-half feedback, however complete, could move it with this grid.
- ``distractors``: the passages a first-half run of the method put in its top 5 that were not
  that question's gold (what the gold-playing user marks wrong), removed from every second-half
  ranking unless they are gold *for that second-half question* (a penalty that knew the answer).
  ``distractors_twice`` removes only those marked in two or more first-half runs (the experience
  layer's threshold, ``experience_distractor_after`` 2).

Passage credit itself (useful marks) has no bound to measure: no second-half gold passage is a
first-half one on the shipped sets (``gold_overlap`` 0, docs/memory.md).
"""

from __future__ import annotations

if __name__ == "__main__":   # run as a script: make `benchlib` and `langgraph_kgmem` importable
    import sys
    from pathlib import Path as _Path

    sys.path[:0] = [str(_Path(__file__).resolve().parents[1]), str(_Path(__file__).resolve().parents[2])]

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from langgraph.store.memory import InMemoryStore

from benchlib.api import BenchQuestion, gold_chunk_ids, gold_passage_keys, ranked_passages
from benchlib.corpus import build_corpus, open_working_copy
from benchlib.datasets import load_questions, pooled_passages
from benchlib.feedback_split import K, ranked_ids, split_halves, target_app
from benchlib.metrics import recall_at_k

from langgraph_kgmem.graphs.catrag import kg_index, prepare_catrag_kg
from langgraph_kgmem.graphs.catrag.calibration import GRID

METHODS = ("catrag", "hipporag2")


def settings() -> list[dict[str, Any]]:
    """The union of the calibration grids, the default (``{}``) first, each setting once."""
    out: list[dict[str, Any]] = []
    for grid in GRID.values():
        for s in grid:
            if dict(s) not in out:
                out.append(dict(s))
    return out


def rankings(kg: Any, method: str, questions: Sequence[BenchQuestion], setting: Mapping[str, Any]) -> list[list[str]]:
    """Each question's ranked passage ids under ``setting``, offline, on an empty store (no
    feedback, no calibration, no reuse)."""
    app = target_app(kg, method, InMemoryStore(), experience=False, options={**setting, "calibration": False})
    return [ranked_ids(app.invoke({"question": q.question}, context={"user_id": "u"})) for q in questions]


def recall(kg: Any, ids: Sequence[str], q: BenchQuestion) -> float:
    """R@5 of one ranking (passage ids) against ``q``'s gold passages."""
    return recall_at_k(ranked_passages(kg, list(ids)).keys, gold_passage_keys(q), K)


def wrong_marks(kg: Any, first: Sequence[BenchQuestion], ranked: Sequence[Sequence[str]]) -> Counter[str]:
    """How many first-half runs put each non-gold passage in their top 5 (the user's wrong marks)."""
    marks: Counter[str] = Counter()
    for q, ids in zip(first, ranked):
        gold = gold_chunk_ids(kg, q)
        marks.update(i for i in dict.fromkeys(ids[:K]) if i not in gold)
    return marks


def demoted(ids: Sequence[str], marks: Counter[str], gold: set[str], threshold: int) -> list[str]:
    """``ids`` less every passage marked wrong in at least ``threshold`` runs, unless it is gold
    for this question (the penalty that knew the answer: a bound, not a rule)."""
    return [i for i in ids if i in gold or marks[i] < threshold]


def bound_rows(kg: Any, dataset: str, first: Sequence[BenchQuestion], second: Sequence[BenchQuestion],
               methods: Sequence[str] = METHODS) -> list[dict[str, Any]]:
    """One row per method: the second half's cold R@5 and each bound (the module docstring)."""
    prepare_catrag_kg(kg)
    kg_index(kg)
    grid = settings()
    rows = []
    for method in methods:
        per = {repr(s): [recall(kg, ids, q) for ids, q in zip(rankings(kg, method, second, s), second)] for s in grid}
        taught = {repr(s): sum(recall(kg, ids, q) for ids, q in zip(rankings(kg, method, first, s), first)) for s in grid}
        cold = per[repr({})]
        n = max(1, len(second))
        score = {k: 100 * sum(v) / n for k, v in per.items()}
        best = max(score, key=lambda k: (round(score[k], 6), k == repr({})))
        learnt = max(taught, key=lambda k: (round(taught[k], 6), k == repr({})))
        oracle = 100 * sum(max(v[i] for v in per.values()) for i in range(len(second))) / n
        marks = wrong_marks(kg, first, rankings(kg, method, first, {}))
        base = rankings(kg, method, second, {})

        def without(threshold: int) -> float:
            kept = sum(recall(kg, demoted(ids, marks, gold_chunk_ids(kg, q), threshold), q) for q, ids in zip(second, base))
            return round(100 * kept / n, 2)

        rows.append({"dataset": dataset, "method": method, "second_half": len(second),
                     "recall@5_cold": round(100 * sum(cold) / n, 2), "best_setting": best,
                     "best_recall@5": round(score[best], 2), "best_delta": round(score[best] - 100 * sum(cold) / n, 2),
                     "first_best": learnt, "first_best_delta": round(score[learnt] - 100 * sum(cold) / n, 2),
                     "per_question": round(oracle, 2), "distractors": without(1), "distractors_twice": without(2),
                     "settings": {k: round(v, 2) for k, v in score.items()}})
    return rows


def on_split(dataset: str, n: int | None, embeddings: str, workdir: Path,
             rows_of: Callable[[Any, Any, list[BenchQuestion], list[BenchQuestion]], list[dict[str, Any]]]
             ) -> list[dict[str, Any]]:
    """``rows_of(kg, embeddings, first half, second half)`` on the split and pooled corpus
    ``--feedback-split`` uses (the working copy closed after)."""
    from benchlib.common import log, make_embeddings

    emb = make_embeddings(embeddings)
    qs = load_questions(dataset, n, None)
    first, second = split_halves(qs, None)
    built = build_corpus(pooled_passages(dataset, qs), emb, log=log)
    kg = open_working_copy(built, workdir / dataset, emb)
    try:
        return rows_of(kg, emb, first, second)
    finally:
        kg.close()


def run(dataset: str, n: int | None, embeddings: str, workdir: Path, methods: Sequence[str] = METHODS) -> list[dict[str, Any]]:
    """The rows of one data set, on the split and pooled corpus ``--feedback-split`` uses."""
    return on_split(dataset, n, embeddings, workdir,
                    lambda kg, _emb, first, second: bound_rows(kg, dataset, first, second, methods))


def sets_main(argv: Sequence[str] | None, description: str, prefix: str,
              run_set: Callable[[str, int, str, Path, Sequence[str]], list[dict[str, Any]]]) -> int:
    """The command line both split tools share (``--dataset A,B --questions N --embeddings E
    --method M,N``): ``run_set``'s rows printed as JSON lines, in a scratch directory removed after."""
    import shutil
    import tempfile

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--dataset", default="hotpotqa-train100,hotpotqa,musique-train100")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--embeddings", default="hash")
    ap.add_argument("--method", default=",".join(METHODS))
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        for ds in args.dataset.split(","):
            for row in run_set(ds, args.questions, args.embeddings, work, args.method.split(",")):
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Print one JSON row per data set and method."""
    return sets_main(argv, __doc__.split("\n\n")[0], "feedback-bound-", run)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["METHODS", "bound_rows", "demoted", "main", "on_split", "rankings", "recall", "run", "sets_main", "settings",
           "wrong_marks"]
