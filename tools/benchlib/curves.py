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

if __name__ == "__main__":   # run as a script: make `benchlib` and `langgraph_kgmem` importable
    import sys
    from pathlib import Path as _Path

    sys.path[:0] = [str(_Path(__file__).resolve().parents[1]), str(_Path(__file__).resolve().parents[2])]
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


def paraphrase_similarity(embeddings: str, thresholds: Sequence[float] = (0.5, 0.6, 0.7, 0.8)) -> list[dict[str, Any]]:
    """Per data set: each paraphrase's cosine with its own original and with the nearest other
    original of the file, and per threshold the share matched and the false matches (paraphrases
    whose nearest other original is at or above it). What ``reuse_similarity`` is chosen on.
    ``rule_matched@t`` and ``rule_false@t`` apply the whole lookup rule of
    :func:`~langgraph_kgmem.memory.prior_runs.find_prior_run` (the cosine, the same names and the
    same kind of answer), so they count what reuse would take."""
    import numpy as np

    from benchlib.common import make_embeddings
    from langgraph_kgmem.memory.prior_runs import same_form, same_names

    emb = make_embeddings(embeddings)
    rows = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for ds in sorted({r["dataset"] for r in rows}):
        mine = [r for r in rows if r["dataset"] == ds]
        orig = np.array([emb.embed_query(r["original"]) for r in mine], dtype=np.float64)
        para = np.array([emb.embed_query(r["question"]) for r in mine], dtype=np.float64)
        orig /= np.linalg.norm(orig, axis=1, keepdims=True)
        para /= np.linalg.norm(para, axis=1, keepdims=True)
        sims = para @ orig.T
        own = np.diag(sims).copy()
        np.fill_diagonal(sims, -1.0)
        other = sims.max(axis=1)
        agree = np.array([[same_names(p["question"], o["original"]) and same_form(p["question"], o["original"])
                           for o in mine] for p in mine])
        own_rule = np.where(np.diag(agree), own, -1.0)
        other_rule = np.where(agree, sims, -1.0).max(axis=1)
        out.append({"dataset": ds, "embeddings": embeddings, "own_min": round(float(own.min()), 3),
                    "own_median": round(float(np.median(own)), 3), "other_max": round(float(other.max()), 3),
                    **{f"matched@{t}": round(float((own >= t).mean()), 3) for t in thresholds},
                    **{f"false@{t}": int((other >= t).sum()) for t in thresholds},
                    **{f"rule_matched@{t}": round(float((own_rule >= t).mean()), 3) for t in thresholds},
                    **{f"rule_false@{t}": int((other_rule >= t).sum()) for t in thresholds}})
    return out


NEAR_MISSES = PARAPHRASES.with_name("near_misses.jsonl")


def near_miss_similarity(embeddings: str, thresholds: Sequence[float] = (0.8, 0.9, 0.95),
                         path: Path = NEAR_MISSES) -> dict[str, Any]:
    """The hand-written near misses (``near_misses.jsonl``: a question and another about the same
    things asking something else, "Who is the wife / the father of Kim Jong-chul?") against the
    lookup rule of :func:`~langgraph_kgmem.memory.prior_runs.find_prior_run`: their cosines, how
    many the whole rule (cosine, same names, same kind of answer) takes for a rewording at each
    threshold, and the lowest cosine of a paraphrase with its original, for comparison. What says
    whether a reworded question could be given an earlier answer."""
    import numpy as np

    from benchlib.common import make_embeddings
    from langgraph_kgmem.memory.prior_runs import same_form, same_names

    emb = make_embeddings(embeddings)

    def cos(a: str, b: str) -> float:
        va, vb = (np.asarray(emb.embed_query(t), dtype=np.float64) for t in (a, b))
        return float(va @ vb / max(float(np.linalg.norm(va) * np.linalg.norm(vb)), 1e-12))

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    near = [(cos(r["question"], r["near_miss"]), same_names(r["question"], r["near_miss"])
             and same_form(r["question"], r["near_miss"])) for r in rows]
    para = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    own = [cos(r["original"], r["question"]) for r in para]
    return {"embeddings": embeddings, "near_misses": len(rows), "rule_agrees": sum(ok for _, ok in near),
            "near_max": round(max(c for c, _ in near), 3), "paraphrase_min": round(min(own), 3),
            **{f"rule_matched@{t}": sum(c >= t and ok for c, ok in near) for t in thresholds},
            **{f"paraphrases@{t}": sum(c >= t for c in own) for t in thresholds}}


if __name__ == "__main__":   # python tools/benchlib/curves.py hash local
    for spec in sys.argv[1:] or ["hash"]:
        for row in paraphrase_similarity(spec):
            print(json.dumps(row))
        print(json.dumps(near_miss_similarity(spec)))


__all__ = ["NEAR_MISSES", "PARAPHRASES", "near_miss_similarity", "paraphrase_similarity", "asked", "load_paraphrases", "paraphrase_asker", "reuse_options", "warm_up"]
