"""``tools/bench.py --feedback-split``: does feedback on some questions help *other* questions?

Per shipped QA set: the questions are split in two halves over one pooled corpus (every
question's passages in one KG). Each *source* method answers the first half; for each run the
gold supporting passages play the user and mark which of the run's evidence was useful and which
was not (``give_feedback(kg, run_id, useful=gold evidence, wrong=the other evidence passages)``:
the gold reaches the feedback call only, never a ranking). Then each *target* method answers the second half twice, with the experience the
feedback left (``recall@5``, ``fcr``) and cold, on a store without it (``recall@5_cold``,
``fcr_cold``). A source and a target may differ: feedback gathered while using one method,
measured on another.

The hostile tenant (``--feedback-split --hostile``): a second tenant marks every first-half
evidence passage that is gold as *wrong* (and the rest as useful); the rows then carry the
hostile tenant's own second-half recall (``recall@5_hostile_self``) and the honest tenant's
(``recall@5``), which must equal what it had without the hostile tenant.

With ``--feedback-options '{"calibration": true}'`` CatRAG and HippoRAG 2 also read the tenant's
calibration (``langgraph_kgmem/memory/calibration.py``: the ranking setting its feedback ranks
best); each row then names the setting the honest tenant's record holds (``calibration``).

Targets: CatRAG and HippoRAG 2 (PPR seeds, edge damping and a dense prior), ReMindRAG (replay
weights), AutoPrunedRetriever (which does not read the layer: its rows show what the source's
store does to it), and ``dense``, the cosine top-k baseline with the same bounded prior CatRAG
gives dense scores (the layer as any retriever can read it, no run records: a target only).
ReMindRAG and AutoPrunedRetriever also teach their own second half (``feedback_from`` = themselves),
which measures their own memory's transfer too.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from langgraph.store.memory import InMemoryStore

from benchlib.api import BenchQuestion, gold_chunk_ids, gold_passage_keys, ranked_passages
from benchlib.common import log
from benchlib.corpus import build_corpus, open_working_copy
from benchlib.datasets import load_questions, pooled_passages
from benchlib.metrics import full_chain, recall_at_k

from langgraph_kgmem.graphs.catrag import kg_index, prepare_catrag_kg
from langgraph_kgmem.graphs.catrag.index import dense_scores
from langgraph_kgmem.graphs.catrag.nodes import EXPERIENCE_DEPTH
from langgraph_kgmem.graphs.catrag.options import CatragOptions
from langgraph_kgmem.graphs.feedback import give_feedback
from langgraph_kgmem.graphs.registry import METHODS
from langgraph_kgmem.memory.experience import ExperienceMemory
from langgraph_kgmem.ranking import best_first

# methods that read the experience layer (CatRAG and HippoRAG 2 take its options), the targets
# measured by default, and the ones the split runs by default as feedback sources
READERS = ("catrag", "hipporag2")
TARGETS = ("dense", "catrag", "hipporag2", "remindrag", "autopruned")
SOURCES = ("catrag", "hipporag2")
SELF_TAUGHT = ("remindrag", "autopruned")   # also teach their own second half
# the experience options CatRAG and HippoRAG 2 take; the dense target reads the same
EXPERIENCE_OPTIONS = ("experience_weight", "experience_gate", "experience_distractor_after", "calibration")
K = 5


def split_halves(questions: Sequence[BenchQuestion], seed: int | None) -> tuple[list[BenchQuestion], list[BenchQuestion]]:
    """The first and second half (shuffled with ``seed`` first when given)."""
    qs = list(questions)
    if seed is not None:
        random.Random(seed).shuffle(qs)
    half = len(qs) // 2
    return qs[:half], qs[half:]


class DenseReader:
    """The ``dense`` target: cosine top-k over the passages, each of the best
    :data:`~langgraph_kgmem.graphs.catrag.nodes.EXPERIENCE_DEPTH` moved by ``experience_weight``
    × its experience credit for the question (CatRAG's dense prior), read in the tenant's scope."""

    def __init__(self, kg: Any, store: Any, *, experience: bool, options: dict[str, Any]) -> None:
        self.kg, self.store, self.experience = kg, store, experience
        defaults = {k: CatragOptions.model_fields[k].default for k in EXPERIENCE_OPTIONS}
        self.weight = float(options.get("experience_weight", defaults["experience_weight"]))
        self.memory = {k: options.get(k, defaults[k]) for k in ("experience_gate", "experience_distractor_after")}

    def invoke(self, inp: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        """``{"passages": [{"id", "score"}]}`` best first (the top 20)."""
        idx = kg_index(self.kg)
        dense = np.asarray(dense_scores(self.kg, idx, inp["question"]), dtype=np.float64)
        if self.experience and len(dense):
            rows = best_first(dense, EXPERIENCE_DEPTH)
            mem = ExperienceMemory(self.store, self.kg.name, (context["user_id"],), kg=self.kg,
                                   gate=self.memory["experience_gate"],
                                   distractor_after=self.memory["experience_distractor_after"])
            dense[rows] += self.weight * mem.credit([idx.chunk_ids[i] for i in rows], self.kg.embed_query(inp["question"]))
        return {"passages": [{"id": idx.chunk_ids[i], "score": float(dense[i])} for i in best_first(dense, 20)]}


def target_app(kg: Any, method: str, store: Any, *, experience: bool, options: dict[str, Any]) -> Any:
    """``method``'s compiled graph (or the :class:`DenseReader` for ``dense``) over ``store``,
    offline, with the experience layer on or off and ``options`` on top of its preset."""
    if method == "dense":
        return DenseReader(kg, store, experience=experience, options=options)
    entry = METHODS[method]
    own = dict(options) if method in READERS else {k: v for k, v in options.items() if k not in EXPERIENCE_OPTIONS}
    if method == "autopruned":
        own.setdefault("extraction", "offline")
        own.setdefault("phrase_facts", "always")
    given = {**dict(entry.preset), "experience": experience, "memory_scope": ("{user_id}",), **own}
    return entry.factory(kg, model="offline", store=store, **given).compile(store=store)


def _ask(app: Any, q: BenchQuestion, tenant: str) -> dict[str, Any]:
    return app.invoke({"question": q.question}, context={"user_id": tenant})


def ranked_ids(out: dict[str, Any]) -> list[str]:
    """A run's ranked passage ids: its ``passages`` (CatRAG, dense), else its evidence with the
    chunks each evidence item names (AutoPrunedRetriever's items)."""
    if out.get("passages"):
        return [p["id"] for p in out["passages"]]
    ids: list[str] = []
    for e in out.get("evidence", []):
        ids += [e["id"], *e.get("chunks", [])]
    return ids


def _grade(kg: Any, out: dict[str, Any], q: BenchQuestion) -> tuple[float, float]:
    keys = ranked_passages(kg, ranked_ids(out)).keys
    gold = gold_passage_keys(q)
    return recall_at_k(keys, gold, K), full_chain(keys, gold, K)


def marks(kg: Any, evidence: Sequence[dict[str, Any]], gold: set[str]) -> tuple[list[str], list[str]]:
    """The gold-playing user's marks on a run's evidence: (useful, wrong). An item is useful when
    it is a gold passage or names one (``chunks``), wrong when it is a passage (or names
    passages) and none is gold; other items (entities, facts) are left unmarked."""
    useful, wrong = [], []
    for e in evidence:
        parts = [e["id"], *e.get("chunks", [])]
        passages = [p for p in parts if (n := kg.node(p)) is not None and n.kind in ("chunk", "anchor")]
        if any(p in gold for p in parts):
            useful.append(e["id"])
        elif passages:
            wrong.append(e["id"])
    return useful, wrong


def teach(kg: Any, app: Any, store: Any, questions: Sequence[BenchQuestion], tenant: str, *,
          hostile: bool = False) -> dict[str, int]:
    """Run the first half and give feedback as the gold-playing user, useful and wrong
    (``hostile``: inverted)."""
    marked = runs = 0
    for q in questions:
        out = _ask(app, q, tenant)
        good, bad = marks(kg, out.get("evidence", []), gold_chunk_ids(kg, q))
        useful, wrong = (bad, good) if hostile else (good, bad)
        if useful or wrong:
            give_feedback(kg, out["run_id"], useful=useful, wrong=wrong, store=store, scope=(tenant,))
            marked += len(useful) + len(wrong)
        runs += 1
    return {"runs": runs, "marked": marked}


def measure(kg: Any, app: Any, questions: Sequence[BenchQuestion], tenant: str) -> dict[str, float]:
    """Mean R@5 and FCR of ``app`` on ``questions`` as ``tenant``."""
    r = f = 0.0
    for q in questions:
        rec, fcr = _grade(kg, _ask(app, q, tenant), q)
        r += rec
        f += fcr
    n = max(1, len(questions))
    return {"recall@5": round(100 * r / n, 2), "fcr": round(100 * f / n, 2)}


def run_split(dataset: str, *, n: int | None, seed: int | None, emb: Any, workdir: Path,
              sources: Sequence[str] = SOURCES, targets: Sequence[str] = TARGETS,
              options: dict[str, Any] | None = None, hostile: bool = False,
              self_taught: Sequence[str] = SELF_TAUGHT) -> list[dict[str, Any]]:
    """The rows of one data set (see the module docstring); ``self_taught``: targets that also
    teach their own second half."""
    options = dict(options or {})
    qs = load_questions(dataset, n, None)
    first, second = split_halves(qs, seed)
    built = build_corpus(pooled_passages(dataset, qs), emb, log=log)
    kg = open_working_copy(built, workdir / dataset, emb)
    try:
        return _split_rows(kg, dataset, first, second, sources=sources, targets=targets, options=options,
                           hostile=hostile, self_taught=self_taught)
    finally:
        kg.close()


def _split_rows(kg: Any, dataset: str, first: list[BenchQuestion], second: list[BenchQuestion], *,
                sources: Sequence[str], targets: Sequence[str], options: dict[str, Any],
                hostile: bool, self_taught: Sequence[str] = ()) -> list[dict[str, Any]]:
    prepare_catrag_kg(kg)
    kg_index(kg)
    rows: list[dict[str, Any]] = []
    taught_keys = {k for q in first for k in gold_passage_keys(q)}
    wanted = [k for q in second for k in gold_passage_keys(q)]
    # the most passage credit can do: the share of second-half gold passages first-half feedback can mark
    overlap = round(100 * sum(k in taught_keys for k in wanted) / max(1, len(wanted)), 2)
    cold = {t: measure(kg, target_app(kg, t, InMemoryStore(), experience=False, options=options), second, "u")
            for t in targets}
    pairs = [(src, tgt) for src in sources for tgt in targets]
    pairs += [(t, t) for t in self_taught if t in targets and t not in sources]
    for src in dict.fromkeys(s for s, _ in pairs):
        store = InMemoryStore()
        t0 = time.perf_counter()
        taught = teach(kg, target_app(kg, src, store, experience=True, options=options), store, first, "honest")
        if hostile:
            teach(kg, target_app(kg, src, store, experience=True, options=options), store, first, "hostile", hostile=True)
        for tgt in (t for s, t in pairs if s == src):
            app = target_app(kg, tgt, store, experience=True, options=options)
            warm = measure(kg, app, second, "honest")
            row = {"dataset": dataset, "feedback_from": src, "method": tgt, "first_half": len(first),
                   "second_half": len(second), "feedback_marks": taught["marked"], "gold_overlap": overlap,
                   "recall@5": warm["recall@5"], "recall@5_cold": cold[tgt]["recall@5"],
                   "delta": round(warm["recall@5"] - cold[tgt]["recall@5"], 2),
                   "fcr": warm["fcr"], "fcr_cold": cold[tgt]["fcr"], "seconds": round(time.perf_counter() - t0, 1),
                   "options": {k: v for k, v in options.items()}}
            picked = calibration_of(kg, store, tgt, "honest")
            if picked is not None:
                row["calibration"] = picked
            if hostile:
                self_ = measure(kg, app, second, "hostile")
                row["recall@5_hostile_self"] = self_["recall@5"]
                row["fcr_hostile_self"] = self_["fcr"]
            rows.append(row)
            log(f"feedback-split {dataset}: {src} -> {tgt}: R@5 {row['recall@5']} (cold {row['recall@5_cold']})")
    return rows


def calibration_of(kg: Any, store: Any, method: str, tenant: str) -> dict[str, Any] | None:
    """The setting ``tenant``'s calibration record for ``method`` holds after its runs (params,
    its index in the grid, the questions fitted, fits and rankings so far), or None."""
    from langgraph_kgmem.memory.calibration import Calibration

    rec = Calibration(store, kg.name, (tenant,), kg=kg).read(method)[0]
    if rec is None:
        return None
    return {k: rec.get(k) for k in ("params", "setting", "questions", "fits", "rankings")}


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    cols = ["dataset", "options", "feedback_from", "method", "second_half", "gold_overlap", "recall@5", "recall@5_cold", "delta", "fcr",
            "fcr_cold"]
    if any("recall@5_hostile_self" in r for r in rows):
        cols.append("recall@5_hostile_self")
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)





def run_feedback_split(args: Any) -> int:
    """The ``--feedback-split`` entry point: every data set of ``--dataset`` (comma-separated),
    ``--questions`` per set, sources from ``--method`` (default: :data:`SOURCES`, and the
    :data:`SELF_TAUGHT` targets teaching themselves), targets from ``--feedback-targets``; writes the rows
    as JSON (``--json``, default ``bench_output/feedback-split.json``) and prints a table."""
    import json
    import os
    import shutil

    from benchlib.common import OUTPUT_DIR, make_embeddings
    from benchlib.corpus import CACHE_DIR

    emb = make_embeddings(args.embeddings)
    sources = tuple(args.method.split(",")) if args.method else SOURCES
    targets = tuple(args.feedback_targets.split(",")) if getattr(args, "feedback_targets", None) else TARGETS
    given = json.loads(args.feedback_options) if args.feedback_options else {}
    grid = [dict(o) for o in given] if isinstance(given, list) else [dict(given)]   # a list: one run per entry
    run_dir = CACHE_DIR / "runs" / f"feedback-split-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    rows: list[dict[str, Any]] = []
    try:
        for dataset in args.dataset.split(","):
            for options in grid:
                rows += run_split(dataset, n=args.questions, seed=args.seed, emb=emb, workdir=run_dir,
                                  sources=sources, targets=targets, options=options, hostile=args.hostile,
                                  self_taught=() if args.method else SELF_TAUGHT)
    finally:
        if not args.keep_run:
            shutil.rmtree(run_dir, ignore_errors=True)
    meta = {"decider": "offline", "embeddings": args.embeddings, "questions": args.questions, "seed": args.seed,
            "targets": list(targets),
            "options": grid, "hostile": bool(args.hostile)}
    out = Path(args.json) if args.json else OUTPUT_DIR / "feedback-split.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    print(markdown(rows))
    return 0
__all__ = ["DenseReader", "READERS", "calibration_of", "SELF_TAUGHT", "SOURCES", "TARGETS", "markdown", "marks", "measure", "ranked_ids",
           "run_feedback_split", "run_split", "split_halves", "target_app", "teach"]
