"""Learning curves: what a method's memory saves when questions come back.

Two modes of ``tools/bench.py`` live here; both run on the same KG and store across passes, so
what pass 1 wrote is there for pass 2:

- ``--paraphrases``: pass 1 asks each question as the data set has it, every later pass asks a
  hand-written paraphrase of it (``benchmarks/data/paraphrases/paraphrases.jsonl``: same id, same
  gold passages, same answer). A memory keyed on the exact wording saves nothing there.
- ``--after METHOD``: before a method's passes, ``METHOD`` asks the same questions on the same
  KG and store (its rows are not reported). The method's rows then say what another method's
  runs saved it; compare with the same command without ``--after`` (the method cold).

Every row also carries ``asked`` (``original`` or ``paraphrase``) and ``after`` (the method that
asked first, or None), beside ``decider`` and ``model``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from benchlib.api import BenchContext, BenchQuestion
from benchlib.common import BenchError
from benchlib.datasets import REPO_ROOT, dataset_label

PARAPHRASES = REPO_ROOT / "benchmarks" / "data" / "paraphrases" / "paraphrases.jsonl"


def load_paraphrases(dataset: str, path: Path = PARAPHRASES) -> dict[str, dict[str, Any]]:
    """``{question id: row}`` of the paraphrases written for ``dataset`` (``row["question"]`` is
    the paraphrase, ``row["answer"]`` the original's answer)."""
    rows: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if row["dataset"] == dataset_label(dataset):
                    rows[str(row["id"])] = row
    return rows


def paraphrase_asker(dataset: str, questions: Sequence[BenchQuestion],
                     path: Path = PARAPHRASES) -> Callable[[BenchQuestion, int], BenchQuestion]:
    """``ask(q, pass)``: ``q`` itself in pass 1, its paraphrase (same id, gold and answer) after.

    Raises:
        BenchError: a question has no paraphrase, or a paraphrase's answer is not its original's
            (the file and the data set disagree)."""
    rows = load_paraphrases(dataset, path)
    if not rows:
        raise BenchError(f"--paraphrases: no paraphrases of {dataset!r} in {path} (written for: hotpotqa, "
                         "musique-train100)")
    missing = [q.id for q in questions if q.id not in rows]
    if missing:
        raise BenchError(f"--paraphrases: {len(missing)} of the {len(questions)} questions have no paraphrase "
                         f"(first {missing[0]!r}); {path.name} covers the first {len(rows)} questions of "
                         f"{dataset!r}: use --questions {len(rows)} or fewer, without --seed")
    for q in questions:
        if rows[q.id]["answer"] != q.answer:
            raise BenchError(f"--paraphrases: the paraphrase of {q.id!r} answers {rows[q.id]['answer']!r}, the "
                             f"data set {q.answer!r}")

    def ask(q: BenchQuestion, pass_no: int) -> BenchQuestion:
        return q if pass_no <= 1 else replace(q, question=str(rows[q.id]["question"]))

    return ask


def asked(args: Any, pass_no: int) -> str:
    """What a pass asked: ``original`` or ``paraphrase``."""
    return "paraphrase" if getattr(args, "paraphrases", False) and pass_no > 1 else "original"


def reuse_options(ctx: BenchContext) -> dict[str, Any]:
    """``--reuse`` (and ``--reuse-similarity``) as factory options of the methods that have the switch."""
    if not ctx.options.get("reuse"):
        return {}
    sim = ctx.options.get("reuse_similarity")
    return {"reuse": True, **({"reuse_similarity": float(sim)} if sim is not None else {})}


def warm_up(first: Any, ctx: BenchContext, questions: Sequence[BenchQuestion], decider: str, llm: Any,
            run_question: Callable[..., Any]) -> list[Any]:
    """``--after``: method ``first`` asks ``questions`` on ``ctx``'s KG and store (its own adapter
    cache), before the measured method's passes; returns its outcomes (not reported)."""
    own = BenchContext(kg=ctx.kg, store=ctx.store, checkpointer=ctx.checkpointer, decider=ctx.decider,
                       dataset=ctx.dataset, workdir=ctx.workdir, options={**ctx.options, "pass": 0})
    first.setup(own)
    errors: list[str] = []
    return [run_question(first, own, q, decider, llm, errors) for q in questions]


__all__ = ["PARAPHRASES", "asked", "load_paraphrases", "paraphrase_asker", "reuse_options", "warm_up"]
