"""``--dataset mixed``: every method, and the router, on one KG that holds documents, records and a graph.

Questions, interleaved one part after another (``--questions N``: N/4 of each, default 80):

- ``hotpotqa``: HotpotQA dev questions (benchmarks/data/hotpotqa/dev300), their passages pooled;
- ``musique``: MuSiQue questions (benchmarks/data/musique_train100: the shipped MuSiQue sample is
  from its train split), their passages pooled with HotpotQA's;
- ``beijing-rain``: the KG-IRAG question generator over the Beijing rain records (their records
  within ±(L + 12) h of each question join the KG);
- ``graph-qa``: the templated questions over the synthetic book graph (loaded with ``load_grbench``).

One KG holds all of them (cached like any benchmark KG); each method runs on its own copy with its
own store. Each row is one (method, pass, part) and carries ``part``, ``quality`` (``recall@5`` for
passage questions, ``em`` for records and book-graph questions: ``quality_metric`` names it) and
``parts`` (the run's parts); the ``all`` part averages every question's quality.

A single method runs every question, including those of parts it was not built for (there it
scores what it scores); under the oracle decider a method's responder knows the gold only for its
own parts (elsewhere it answers nothing useful, as an LLM without the right data would). The
``router`` adapter (benchlib/methods/router.py) runs ``create_router_graph`` over the registered
methods. ``oracle-router`` rows are the ceiling: per question, the best single method in hindsight
(highest quality, then fewest LLM calls), with that method's cost. A ``summary`` (in the JSON's meta
and printed) gives per part the best single method, the router's quality and its gap to the
oracle router, the router's LLM calls against always running the costliest method, its routing
overhead, and with ``--passes 2`` or more the feedback experiment: after each pass every router
answer gets a verdict (quality ≥ 0.5) through ``give_feedback``, as a user would give it (the gold
reaches the verdict only), and the next pass reports (:func:`feedback_learning`) how the questions
judged wrong were routed: how many moved from the method judged wrong to one that answers them right
in that pass (hindsight: the single methods' runs), and the quality before and after. The learning
goal reads ``routed_better`` of ``better_route_existed``: only questions where a method the router had
not tried on them answers right count in the denominator.

Under the oracle decider a routed method meets the responder its own adapter gives the question
(benchlib/methods/router.py), so router and single methods differ by the routing only.
``router-memstore`` (only when named) is the router on LangGraph's InMemoryStore instead of the KG's
SQLite store: its ``overhead_ms`` is the router's cost without store I/O on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

from benchlib import corpus as corpora
from benchlib.api import BenchContext, BenchQuestion
from benchlib.common import OUTPUT_DIR, BenchError, log, make_embeddings
from benchlib.datasets import load_questions
from benchlib.metrics import QuestionOutcome, aggregate, exact_match, markdown_table, recall_at_k

MIXED = "mixed"
PASSAGE_PARTS = ("hotpotqa", "musique")
PARTS: dict[str, str] = {"hotpotqa": "recall@5", "musique": "recall@5", "beijing-rain": "em", "graph-qa": "em"}
SOURCES = {"hotpotqa": "hotpotqa", "musique": "musique-train100"}
DEFAULT_QUESTIONS = 80
GOOD = 0.5          # quality at or above which the feedback experiment's verdict is positive
ORACLE_ROUTER = "oracle-router"
TIMED = ("routing_ms", "overhead_ms", "learning_ms", "overhead_cpu_ms")


def parts_of(adapter: Any) -> tuple[str, ...]:
    """The parts an adapter was built for (its own gold under the oracle decider)."""
    own = getattr(adapter, "mixed_parts", None)
    if own is not None:
        return tuple(own)
    if adapter.corpus in ("per-question", "pooled"):
        return PASSAGE_PARTS
    return {"records": ("beijing-rain",), "graph-qa": ("graph-qa",)}.get(adapter.corpus, ())


def load_mixed(reg: Any, n: int, seed: int | None) -> list[BenchQuestion]:
    """``n`` questions, a quarter from each part, interleaved; each tagged ``extra["part"]``."""
    per = max(1, n // len(PARTS))
    s = seed if seed is not None else 0
    groups = {p: load_questions(SOURCES[p], per, seed) for p in PASSAGE_PARTS}
    groups["beijing-rain"] = reg.get("kgirag").load_questions("beijing-rain", per, s)
    groups["graph-qa"] = reg.get("r3cycle").load_questions("graph-qa", per, s)
    for part, qs in groups.items():
        for q in qs:
            q.extra = {**q.extra, "part": part}
            q.id = f"{part}:{q.id}"
    return [g[i] for i in range(per) for g in groups.values() if i < len(g)]


def build_mixed(reg: Any, questions: list[BenchQuestion], emb: Any, args: argparse.Namespace) -> corpora.BuiltCorpus:
    """The one KG of the run: the passage parts' pooled passages, the records, the book graph."""
    from langgraph_kgmem.agent_tools.graphqa import make_domain_graph
    from langgraph_kgmem.agent_tools import load_grbench

    passages: dict[tuple[str, str], dict[str, str]] = {}
    for q in questions:
        if q.extra["part"] in PASSAGE_PARTS:
            for p in q.passages:
                passages.setdefault((p["title"], p["text"]), p)
    rain = [BenchQuestion(q.id.split(":", 1)[1], q.question, q.answer, [], [], q.extra)
            for q in questions if q.extra["part"] == "beijing-rain"]
    graph_seed = next((q.extra.get("graph_seed", 0) for q in questions if q.extra["part"] == "graph-qa"), 0)

    def fill(kg: Any) -> dict[str, Any]:
        log(f"building the mixed KG: {len(passages)} passages, {len(rain)} records questions' records, the book graph")
        kg.add_documents(corpora.as_documents(list(passages.values())), model="offline", progress=False)
        if rain:
            ctx = BenchContext(kg=kg, store=None, checkpointer=None, decider=args.decider, dataset=MIXED,
                               workdir=Path(kg.path).parent, options={})
            reg.get("kgirag").build_kg(ctx, rain)
        load_grbench(kg, make_domain_graph(seed=graph_seed))
        return {}

    key = corpora.key_of(MIXED, [q.id for q in questions], args.embeddings, args.backend)
    return corpora.build_cached(key, fill, emb, backend=args.backend, passages=len(passages))


class MixedAdapter:
    """A single method's adapter on the mixed KG: its own ``run``; its oracle only for its own parts."""

    corpus = MIXED
    datasets = (MIXED,)

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.parts = parts_of(inner)

    def setup(self, ctx: BenchContext) -> None:
        self.inner.setup(ctx)

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> Any:
        return self.inner.run(ctx, q, model)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Any:
        if q.extra.get("part") in self.parts:
            return self.inner.oracle(ctx, q)
        return lambda messages, request: "no answer" if request is None or request.schema is None else "{}"

    def score(self, ctx: BenchContext, q: BenchQuestion, result: Any) -> dict[str, float]:
        score = getattr(self.inner, "score", None)
        return score(ctx, q, result) if score is not None and q.extra.get("part") in self.parts else {}


def quality(o: QuestionOutcome, part: str) -> float:
    """One question's quality figure for its part (0 for a failed run)."""
    if o.error is not None:
        return 0.0
    if PARTS[part] == "recall@5":
        return recall_at_k(o.retrieved or [], o.gold, 5) if o.gold else 0.0
    return exact_match(o.answer or "", o.gold_answer)


def select(reg: Any, names: str | None) -> list[Any]:
    """The adapters of the run: those named, else every registered method's (and the router)."""
    from langgraph_kgmem.graphs.registry import METHODS

    wanted = [n.strip() for n in names.split(",") if n.strip()] if names else \
        [n for n in reg.names() if n in METHODS]
    out = []
    for n in wanted:
        a = reg.get(n)
        out.append(a if getattr(a, "corpus", None) == MIXED else MixedAdapter(a))
    return out


def is_router(name: str) -> bool:
    """Whether an adapter's rows are a router's (``router``, ``router-memstore``), not a single method's."""
    return name == "router" or name.startswith("router-")


def _feedback(ctx: BenchContext, questions: list[BenchQuestion], outcomes: list[QuestionOutcome]) -> None:
    """After a pass: a verdict on every router answer (quality ≥ GOOD) through ``give_feedback``, as a
    user would give it (the gold reaches this call only)."""
    from langgraph_kgmem.graphs.feedback import give_feedback

    runs = ctx.cache.get("router_runs", {})
    for q, o in zip(questions, outcomes):
        run = runs.get(q.id)
        if run is None or o.error is not None:
            continue
        good = quality(o, q.extra["part"]) >= GOOD
        give_feedback(ctx.kg, run["run_id"], verdict="correct" if good else "wrong",
                      store=ctx.cache.get("router_store", ctx.store))


def run_adapter(runner: Any, adapter: Any, built: corpora.BuiltCorpus, questions: list[BenchQuestion], emb: Any,
                args: argparse.Namespace, llm: Any, run_dir: Path) -> dict[int, dict[str, Any]]:
    """Every pass of one adapter on its own copy of the mixed KG: {pass: {"outcomes"}}; a router's
    answers get their verdicts between passes."""
    wd = run_dir / adapter.name
    kg = corpora.open_working_copy(built, wd, emb, backend=args.backend)
    cp, store = kg.persistence()
    ctx = BenchContext(kg=kg, store=store, checkpointer=cp, decider=args.decider, dataset=MIXED, workdir=wd,
                       options=runner.run_options(args))
    out: dict[int, dict[str, Any]] = {}
    errors: list[str] = []
    try:
        adapter.setup(ctx)
        for p in range(1, args.passes + 1):
            ctx.options["pass"] = p
            out[p] = {"outcomes": [runner.run_question(adapter, ctx, q, args.decider, llm, errors) for q in questions]}
            if is_router(adapter.name) and p < args.passes:
                _feedback(ctx, questions, out[p]["outcomes"])
    finally:
        kg.close()
    if errors:
        log(f"{adapter.name}: {len(errors)} question(s) failed (first: {errors[0]})")
    return out


def feedback_learning(results: dict[str, dict[int, dict[str, Any]]], questions: list[BenchQuestion],
                      router: str = "router") -> dict[int, dict[str, Any]]:
    """Per pass after the first: how the router's questions judged wrong in the pass before were
    routed and answered. ``judged_wrong`` (M), ``improvable`` (some single method answers it right
    in this pass: hindsight, gold), ``rerouted``, ``improved`` (routed from the method judged
    wrong to one that answers it right in this pass), ``now_good`` (answered right), the quality of
    those questions before and after, and the router's quality on every question before and after.

    The learning goal's figure is ``routed_better`` of ``better_route_existed`` (N of K): K counts
    the questions judged wrong where a better route existed, i.e. some single method the router did
    not try on the question in the pass before (every method it tried was judged wrong with it)
    answers it right in this pass; N counts those of them the router now answers right with such a
    method. ``judged_wrong`` − K are questions no untried method answers (no route could improve)."""
    runs = results.get(router, {})
    singles = {n: r for n, r in results.items() if not is_router(n)}
    out: dict[int, dict[str, Any]] = {}
    for p in sorted(runs):
        if p - 1 not in runs:
            continue
        before, after = runs[p - 1]["outcomes"], runs[p]["outcomes"]
        wrong = [i for i, q in enumerate(questions) if before[i].error is None and quality(before[i], q.extra["part"]) < GOOD]
        right = {i: {n for n, r in singles.items() if p in r and quality(r[p]["outcomes"][i], questions[i].extra["part"]) >= GOOD}
                 for i in wrong}
        was = {i: before[i].extra.get("routed_to") for i in wrong}
        now = {i: after[i].extra.get("routed_to") for i in wrong}
        tried = {i: {t[0] for t in before[i].extra.get("tried") or []} | {was[i]} for i in wrong}
        better = {i: right[i] - tried[i] for i in wrong}
        fixed = [i for i in wrong if better[i] and now[i] not in tried[i]
                 and quality(after[i], questions[i].extra["part"]) >= GOOD]
        q_of = {i: (quality(before[i], questions[i].extra["part"]), quality(after[i], questions[i].extra["part"])) for i in wrong}
        every = [(quality(before[i], q.extra["part"]), quality(after[i], q.extra["part"])) for i, q in enumerate(questions)]
        out[p] = {"judged_wrong": len(wrong), "improvable": sum(bool(right[i]) for i in wrong),
                  "rerouted": sum(now[i] != was[i] for i in wrong),
                  "improved": sum(now[i] != was[i] and now[i] in right[i] for i in wrong),
                  "now_good": sum(q_of[i][1] >= GOOD for i in wrong),
                  "better_route_existed": sum(bool(better[i]) for i in wrong), "routed_better": len(fixed),
                  "quality_before": round(sum(b for b, _ in q_of.values()) / len(wrong), 4) if wrong else None,
                  "quality_after": round(sum(a for _, a in q_of.values()) / len(wrong), 4) if wrong else None,
                  "all_quality_before": round(sum(b for b, _ in every) / len(every), 4),
                  "all_quality_after": round(sum(a for _, a in every) / len(every), 4),
                  "routes": [{"qid": questions[i].id, "was": was[i], "tried": sorted(tried[i]), "now": now[i],
                              "right": sorted(right[i]), "better": sorted(better[i]), "routed_better": i in fixed}
                             for i in wrong]}
    return out


def rows_of(name: str, passes: dict[int, dict[str, Any]], questions: list[BenchQuestion], args: argparse.Namespace,
            more: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (pass, part) and an ``all`` row per pass."""
    rows = []
    for p, res in sorted(passes.items()):
        outcomes = res["outcomes"]
        groups: dict[str, list[tuple[BenchQuestion, QuestionOutcome]]] = {}
        for q, o in zip(questions, outcomes):
            groups.setdefault(q.extra["part"], []).append((q, o))
        for part in [*PARTS, "all"]:
            pairs = [x for q_o in groups.values() for x in q_o] if part == "all" else groups.get(part, [])
            if not pairs:
                continue
            row = aggregate([o for _, o in pairs], method=name, decider=args.decider, dataset=MIXED, pass_no=p,
                            more={**more, "part": part, "parts": list(PARTS)})
            for key in TIMED:   # the router's own timings: medians too (a loaded machine's outliers skew means)
                vals = [float(o.extra[key]) for _, o in pairs if o.error is None and key in o.extra]
                if vals:
                    row[f"{key}_median"] = round(statistics.median(vals), 3)
            row["quality_metric"] = PARTS.get(part, "mean of the parts' figures")
            row["quality"] = sum(quality(o, q.extra["part"]) for q, o in pairs) / len(pairs)
            rows.append(row)
    return rows


def oracle_rows(results: dict[str, dict[int, dict[str, Any]]], questions: list[BenchQuestion],
                args: argparse.Namespace) -> list[dict[str, Any]]:
    """The ceiling: per question the best single method in hindsight (quality, then fewer calls)."""
    singles = {n: r for n, r in results.items() if not is_router(n)}
    if not singles:
        return []
    out: dict[int, dict[str, Any]] = {}
    for p in sorted(next(iter(singles.values()))):
        chosen = []
        for i, q in enumerate(questions):
            part = q.extra["part"]
            best = min(singles, key=lambda n: (-quality(singles[n][p]["outcomes"][i], part),
                                               float(singles[n][p]["outcomes"][i].usage.get("llm_calls", 0) or 0), n))
            chosen.append(singles[best][p]["outcomes"][i])
        out[p] = {"outcomes": chosen}
    return rows_of(ORACLE_ROUTER, out, questions, args, {"note": "best single method per question in hindsight "
                                                                  "(gold): a ceiling, not a method"})


def per_question(results: dict[str, dict[int, dict[str, Any]]], questions: list[BenchQuestion]) -> list[dict[str, Any]]:
    """One entry per (method, pass, question): its part, quality, LLM calls and, for the router, the
    method it routed to (what reading why the router picked otherwise needs)."""
    out = []
    for name, passes in results.items():
        for p, res in sorted(passes.items()):
            for q, o in zip(questions, res["outcomes"]):
                entry = {"method": name, "pass": p, "qid": q.id, "part": q.extra["part"],
                         "quality": round(quality(o, q.extra["part"]), 4),
                         "llm_calls": int(o.usage.get("llm_calls", 0) or 0)}
                for key in ("routed_to", "form", "escalated", "confidence", "tried", "facts", "dense_fallback",
                            "uncovered"):
                    if key in o.extra:
                        entry[key] = o.extra[key]
                entry["retrieved"] = list(o.retrieved or [])[:10]   # what a rule that merges rankings would read
                entry["gold"] = list(o.gold)
                out.append(entry)
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per pass and part: best single method, router, oracle router; calls against the costliest method."""
    summary: dict[str, Any] = {}
    for p in sorted({r["pass"] for r in rows}):
        per: dict[str, Any] = {}
        at = [r for r in rows if r["pass"] == p]
        for part in [*PARTS, "all"]:
            cell = {r["method"]: r for r in at if r["part"] == part}
            singles = {m: r for m, r in cell.items() if not is_router(m) and m != ORACLE_ROUTER}
            if not singles:
                continue
            best = max(singles, key=lambda m: (singles[m]["quality"], -(singles[m]["llm_calls_per_query"] or 0)))
            entry = {"best_single": best, "best_single_quality": round(singles[best]["quality"], 4)}
            if "router" in cell:
                entry["router_quality"] = round(cell["router"]["quality"], 4)
                entry["router_minus_best"] = round(cell["router"]["quality"] - singles[best]["quality"], 4)
            if ORACLE_ROUTER in cell and "router" in cell:
                entry["oracle_router_quality"] = round(cell[ORACLE_ROUTER]["quality"], 4)
                entry["router_minus_oracle"] = round(cell["router"]["quality"] - cell[ORACLE_ROUTER]["quality"], 4)
            if part == "all":
                costliest = max(singles, key=lambda m: singles[m]["llm_calls_per_query"] or 0)
                entry["costliest"] = costliest
                entry["costliest_calls"] = singles[costliest]["llm_calls_per_query"]
                if "router" in cell:
                    r = cell["router"]
                    entry["router_calls"] = r["llm_calls_per_query"]
                    entry["router_calls_vs_costliest"] = (round(r["llm_calls_per_query"] / entry["costliest_calls"], 4)
                                                          if entry["costliest_calls"] else None)
                    for key in TIMED:
                        entry[f"{key}_mean"] = r.get(key)
                        entry[f"{key}_median"] = r.get(f"{key}_median")
                    entry["escalated_share"] = r.get("escalated")
            per[part] = entry
        summary[f"pass {p}"] = per
    return summary


SUMMARY_COLUMNS = (("method", "method"), ("pass", "pass"), ("part", "part"), ("questions", "n"),
                   ("quality_metric", "metric"), ("quality", "quality"), ("llm_calls_per_query", "LLM calls/q"),
                   ("wall_ms_median", "wall ms (med)"), ("errors", "errors"))


def run_mixed(args: argparse.Namespace, argv: Sequence[str], reg: Any, runner: Any) -> int:
    """``tools/bench.py --dataset mixed`` (``runner``: benchlib.runner, for its question runner)."""
    emb = make_embeddings(args.embeddings)
    adapters = select(reg, args.method)
    n = args.questions or DEFAULT_QUESTIONS
    questions = load_mixed(reg, n, args.seed)
    server = runner.start_local_llm(args) if args.decider == "local-llm" else None
    t0 = time.perf_counter()
    try:
        llm = runner.resolve_llm(args.decider, server)
        who = runner.model_info(args.decider, llm, server)
        built = build_mixed(reg, questions, emb, args)
        run_dir = corpora.CACHE_DIR / "runs" / f"mixed-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        results: dict[str, dict[int, dict[str, Any]]] = {}
        rows: list[dict[str, Any]] = []
        more = {**who, "corpus": MIXED, "embeddings": args.embeddings,
                "noise": args.noise if args.decider == "oracle" else None}
        for a in adapters:
            log(f"{a.name}: {len(questions)} question(s) on the mixed KG, decider {args.decider}, {args.passes} pass(es)")
            results[a.name] = run_adapter(runner, a, built, questions, emb, args, llm, run_dir)
            rows += rows_of(a.name, results[a.name], questions, args, more)
        rows += oracle_rows(results, questions, args)
    finally:
        if server is not None:
            server.stop()
    summary = summarize(rows)
    for p, learned in feedback_learning(results, questions).items():
        summary.setdefault(f"pass {p}", {}).setdefault("all", {})["feedback"] = learned
    for name in (n for n in results if is_router(n) and n != "router"):   # the same router on another store
        for part, entry in summary.items():
            cell = {r["part"]: r for r in rows if r["method"] == name and f"pass {r['pass']}" == part}
            if "all" in cell:
                entry.setdefault("all", {})[f"{name}_overhead_ms_median"] = cell["all"].get("overhead_ms_median")
    meta = {"command": "python tools/bench.py " + " ".join(argv), "seconds": round(time.perf_counter() - t0, 1),
            "embeddings": args.embeddings, "backend": args.backend, "parts": PARTS, "summary": summary,
            "kg": {"passages": built.passages, **{k: built.stats.get(k) for k in ("nodes", "edges", "nodes_by_kind")}},
            **who}
    noisy = f"-noise{args.noise:g}" if args.decider == "oracle" and args.noise else ""
    out = Path(args.json) if args.json else OUTPUT_DIR / f"bench-mixed-{args.decider}{noisy}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"results": rows, "meta": meta, "questions": per_question(results, questions)}, indent=1))
    print(markdown_table(rows, SUMMARY_COLUMNS))
    print(json.dumps(summary, indent=1))
    print(f"\n{len(rows)} result row(s) written to {out} (decider: {args.decider})")
    if any(r.get("errors") for r in rows):
        raise BenchError(f"some questions failed: {runner.error_summary(rows)}")
    return 0


__all__ = ["MIXED", "MixedAdapter", "PARTS", "build_mixed", "feedback_learning", "is_router", "load_mixed", "oracle_rows", "parts_of", "quality",
           "per_question", "rows_of", "run_mixed", "summarize"]
