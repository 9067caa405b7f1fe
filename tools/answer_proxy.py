#!/usr/bin/env python
"""The offline answer step alone, without a method: answer F1 on a shipped QA set.

Each question's own passages (10 for HotpotQA, 20 for MuSiQue) are ranked by word overlap with
the question and the top 10 handed to ``graphs.answering.offline_answer`` with no path
(``--gold``: only the question's gold passages, what perfect retrieval could give). A quick check
of the answer rules on their own; the methods' figures come from ``tools/bench.py``.

    python tools/answer_proxy.py benchmarks/data/hotpotqa/dev300.jsonl.gz --questions 100
"""

from __future__ import annotations

import argparse
import ast
import collections
import gzip
import json
import re
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
for p in (str(TOOLS), str(TOOLS.parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from benchlib.metrics import f1_score  # noqa: E402

from langgraph_kgmem.graphs.answering import offline_answer  # noqa: E402

_WORD = re.compile(r"[a-z0-9]+")


def _field(value: object) -> list:
    return value if isinstance(value, list) else ast.literal_eval(str(value))


def by_overlap(question: str, passages: list[dict]) -> list[dict]:
    """``passages`` best first by the number of question words they hold (stable on ties)."""
    words = set(_WORD.findall(question.lower()))
    return sorted(passages, key=lambda p: -len(words & set(_WORD.findall(f"{p['title']} {p['text']}".lower()))))


def main(argv: list[str] | None = None) -> int:
    """Print the answer F1 per answer type and overall."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a .jsonl.gz QA file with question, answer, passages, supporting_titles")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--gold", action="store_true", help="read only the gold passages")
    args = ap.parse_args(argv)
    f1s: dict[str, list[float]] = collections.defaultdict(list)
    with gzip.open(args.path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(args.questions), f)]
    for d in rows:
        passages = _field(d["passages"])
        if args.gold:
            gold = set(_field(d["supporting_titles"]))
            passages = [p for p in passages if p["title"] in gold] or passages
        evidence = [{"id": str(i), "title": p["title"], "text": p["text"]}
                    for i, p in enumerate(by_overlap(d["question"], passages)[:10])]
        found = offline_answer(d["question"], evidence)
        score = f1_score(found.answer, d["answer"])
        f1s[found.type.kind].append(score)
        f1s["all"].append(score)
    for kind, scores in sorted(f1s.items()):
        print(f"{kind:8s} n={len(scores):3d} F1={sum(scores) / len(scores):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
