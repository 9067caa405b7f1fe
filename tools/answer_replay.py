#!/usr/bin/env python
"""The offline answer step on each method's own evidence, replayed: a rule change measured per
question without running retrieval again.

``record`` runs ``tools/bench.py`` (the arguments after ``--``) while writing, for every call of
the answer step, the method, the question, the evidence it was handed (with the items it reads
further down the ranking) and the path (the entity names of its walk or PPR ranking), one JSON
line each. ``replay`` puts each line through ``graphs.answering.offline_answer`` as the code
stands now and prints the answer F1 per method (``--answers``: every question's answer too). On
the code a file was recorded with, the replay gives the bench's own answers, so two replays (before
and after a change) compare a rule on exactly the evidence each method retrieved.

    python tools/answer_replay.py record inputs.jsonl -- --method dense,catrag --dataset musique-train100 \
        --decider offline --corpus pooled --passes 1 --questions 100 --embeddings local
    python tools/answer_replay.py replay inputs.jsonl --dataset musique-train100

The offline decider only: with a model the step's answer is the model's, not a replay's.
AutoPrunedRetriever's retrieval reads the step's ``candidates()`` (its answer-typed sentence
term), so a change to what that term reads needs a new recording.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

TOOLS = Path(__file__).resolve().parent
for p in (str(TOOLS), str(TOOLS.parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from benchlib.datasets import load_questions  # noqa: E402
from benchlib.metrics import f1_score  # noqa: E402

from langgraph_kgmem.graphs import answering  # noqa: E402

_KEYS = ("id", "title", "text")


def _line(method: str, question: str, evidence: Any, path: Any) -> str:
    items = [{k: e[k] for k in _KEYS if e.get(k) is not None} for e in evidence]
    return json.dumps({"method": method, "question": question, "evidence": items, "path": list(path)})


@contextlib.contextmanager
def recording(out: TextIO) -> Iterator[None]:
    """Within the block, every answer step the methods and the passage baselines call writes its
    inputs to ``out`` (one JSON line: method, question, evidence, path); restored afterwards."""
    import benchlib.methods.bm25 as bm25
    import benchlib.methods.dense as dense
    import benchlib.passage_rag as passage_rag
    import langgraph_kgmem.graphs.autopruned.nodes as autopruned
    import langgraph_kgmem.graphs.catrag.nodes as catrag
    import langgraph_kgmem.graphs.remindrag.nodes as remindrag

    def with_candidates(orig: Callable[..., Any]) -> Callable[..., Any]:
        def call(model: Any, question: str, evidence: Any, path: Any = (), *, further: Any = (), **kw: Any) -> Any:
            method = str((kw.get("context") or {}).get("method", "?"))
            out.write(_line(method, question, list(evidence) + list(further), path) + "\n")
            return orig(model, question, evidence, path, further=further, **kw)
        return call

    baseline = {"method": "passages"}   # the passage baseline answering now (dense, bm25)

    def offline(orig: Callable[..., Any], method: str | None) -> Callable[..., Any]:
        def call(question: str, evidence: Any, path: Any = ()) -> Any:
            out.write(_line(method or baseline["method"], question, evidence, path) + "\n")
            return orig(question, evidence, path)
        return call

    def named(orig: Callable[..., Any]) -> Callable[..., Any]:
        def call(ctx: Any, q: Any, model: Any, chunk_ids: Any, method: str) -> Any:
            baseline["method"] = method
            return orig(ctx, q, model, chunk_ids, method)
        return call

    patches = [(catrag, "answer_with_candidates", with_candidates(catrag.answer_with_candidates)),
               (remindrag, "answer_with_candidates", with_candidates(remindrag.answer_with_candidates)),
               (autopruned, "offline_answer", offline(autopruned.offline_answer, "autopruned")),
               (passage_rag, "offline_answer", offline(passage_rag.offline_answer, None)),
               (dense, "answer_from_passages", named(dense.answer_from_passages)),
               (bm25, "answer_from_passages", named(bm25.answer_from_passages))]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches]
    try:
        for module, name, fn in patches:
            setattr(module, name, fn)
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def replay(lines: list[dict[str, Any]], gold: dict[str, str]) -> list[tuple[str, str, str, float]]:
    """``(method, question, answer, F1)`` for each recorded line, answered by the step as it stands."""
    out = []
    for r in lines:
        if r["question"] not in gold:
            raise SystemExit(f"question not in the data set: {r['question'][:80]!r} (recorded on another set?)")
        answer = answering.offline_answer(r["question"], r["evidence"], r["path"]).answer
        out.append((r["method"], r["question"], answer, f1_score(answer, gold[r["question"]])))
    return out


def main(argv: list[str] | None = None) -> int:
    """``record FILE -- <bench arguments>`` or ``replay FILE --dataset D [--answers]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    bench_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("record", "replay"))
    ap.add_argument("file", help="the JSONL file of recorded inputs")
    ap.add_argument("--dataset", help="replay: the data set the file was recorded on (its gold answers)")
    ap.add_argument("--answers", action="store_true", help="replay: print every question's answer and F1")
    args = ap.parse_args(argv)
    if args.action == "record":
        from benchlib.runner import main as bench
        with open(args.file, "w", encoding="utf-8") as out, recording(out):
            return int(bench(bench_args) or 0)
    if not args.dataset:
        ap.error("replay needs --dataset")
    gold: dict[str, str] = {}
    for q in load_questions(args.dataset):
        gold.setdefault(q.question, q.answer)
    with open(args.file, encoding="utf-8") as f:
        rows = replay([json.loads(line) for line in f if line.strip()], gold)
    scores: dict[str, list[float]] = collections.defaultdict(list)
    for method, question, answer, f1 in rows:
        scores[method].append(f1)
        if args.answers:
            print(f"{method}\t{f1:.2f}\t{answer}\t{question}")
    for method, f1s in scores.items():
        print(f"{method:12s} n={len(f1s):3d} F1={sum(f1s) / len(f1s):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
