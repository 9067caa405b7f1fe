"""What could feedback on some questions teach about others? Measured on a shipped set, cold.

``python tools/feedback_transfer.py --dataset hotpotqa-train100 --questions 100`` builds the pooled
corpus (as ``tools/bench.py --feedback-split`` does), runs CatRAG and HippoRAG 2 without memory
on every question, and splits the questions in two halves (the first half plays the questions
feedback was given on). Per method it prints:

- ``gold_overlap``: the share of second-half gold passages that are first-half gold passages (the
  most that question-conditional passage credit could ever transfer);
- ``wrong_slots``: second-half top-5 slots held by passages a first-half run retrieved that were
  not gold there (what a user marks ``wrong``), and how many of those are gold for the
  second-half question; the same for passages wrong in two or more first-half runs (``wrong2``);
- ``entity_share``: the share of second-half gold passages (and of retrieved non-gold ones) that
  share an entity with a first-half useful passage (whether entity credit would favour the right
  passages).

Nothing here uses gold for a ranking: the rankings are the methods' own, cold. Offline decider;
``--embeddings`` as in ``tools/bench.py`` (default ``hash``).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph.store.memory import InMemoryStore  # noqa: E402

from benchlib.api import gold_chunk_ids  # noqa: E402
from benchlib.common import make_embeddings  # noqa: E402
from benchlib.corpus import CACHE_DIR, build_corpus, open_working_copy  # noqa: E402
from benchlib.datasets import load_questions, pooled_passages  # noqa: E402
from benchlib.feedback_split import _app  # noqa: E402
from langgraph_kgmem.graphs.catrag import kg_index, prepare_catrag_kg  # noqa: E402

METHODS = ("catrag", "hipporag2")
K = 5


def cold_runs(dataset: str, n: int, embeddings: str) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Per question: its gold passage ids and each method's cold top 10; and each passage's entities."""
    emb = make_embeddings(embeddings)
    qs = load_questions(dataset, n, None)
    built = build_corpus(pooled_passages(dataset, qs), emb, log=lambda m: None)
    kg = open_working_copy(built, CACHE_DIR / "runs" / f"feedback-transfer-{dataset}", emb)
    try:
        prepare_catrag_kg(kg)
        kg_index(kg)
        apps = {m: _app(kg, m, InMemoryStore(), experience=False, options={"top_passages": 10}) for m in METHODS}
        rows, entities = [], {}
        for q in qs:
            row = {"gold": gold_chunk_ids(kg, q), "top": {}}
            for m, app in apps.items():
                row["top"][m] = [e["id"] for e in app.invoke({"question": q.question}, context={"user_id": "u"})["evidence"]]
            for c in row["gold"] | {c for t in row["top"].values() for c in t}:
                if c not in entities:
                    entities[c] = sorted({nb.id for _, nb in kg.neighbors(c) if nb.kind == "entity"})
            rows.append(row)
        return rows, entities
    finally:
        kg.close()


def transfer_stats(rows: Sequence[dict[str, Any]], entities: dict[str, list[str]], method: str) -> dict[str, Any]:
    """The figures of the module docstring for one method (first half = the first ``len // 2``)."""
    half = len(rows) // 2
    first, second = rows[:half], rows[half:]
    top = [(r["top"][method][:K], r["gold"]) for r in first]
    first_gold = {c for r in first for c in r["gold"]}
    wrong = Counter(c for t, g in top for c in t if c not in g)
    useful = {c for t, g in top for c in t if c in g}
    wanted = [c for r in second for c in r["gold"] if c.startswith("chk-")]
    slots = [(c, c in r["gold"]) for r in second for c in r["top"][method][:K]]
    useful_entities = {e for c in useful for e in entities.get(c, [])}
    non_gold = [c for r in second for c in r["top"][method] if c not in r["gold"]]

    def share(ids: Sequence[str]) -> float:
        return round(sum(any(e in useful_entities for e in entities.get(c, [])) for c in ids) / max(1, len(ids)), 2)

    return {"method": method, "questions": f"{len(first)}+{len(second)}",
            "gold_overlap": round(sum(c in first_gold for c in wanted) / max(1, len(wanted)), 3),
            "top5_slots": len(slots),
            "wrong_slots": sum(c in wrong for c, _ in slots), "wrong_slots_gold": sum(g for c, g in slots if c in wrong),
            "wrong2_slots": sum(wrong[c] >= 2 for c, _ in slots),
            "wrong2_slots_gold": sum(g for c, g in slots if wrong[c] >= 2),
            "entity_share_gold": share(wanted), "entity_share_non_gold": share(non_gold)}


def main(argv: list[str] | None = None) -> int:
    """Print the figures per method as Markdown rows."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--embeddings", default="hash")
    args = ap.parse_args(argv)
    rows, entities = cold_runs(args.dataset, args.questions, args.embeddings)
    stats = [transfer_stats(rows, entities, m) for m in METHODS]
    cols = list(stats[0])
    print("| dataset | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for s in stats:
        print(f"| {args.dataset} | " + " | ".join(str(s[c]) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
