"""Prompt tokens against answer-in-prompt: dense top-k passages versus AutoPrunedRetriever settings.

``PYTHONPATH=tools python -m benchlib.apr_curve --dataset hotpotqa [--questions N] [--embeddings local]``

One process, one pooled KG (the bench's cached corpus), every point side by side. Per question and
setting it records the answer step's prompt tokens (the would-be prompt, counted like the bench
counts a real call's), whether the gold answer is in the prompt (the bench's oracle reader:
``api.oracle_answer`` over the evidence texts shown; yes/no answers count when any evidence was
shown), the share of the question's gold passages the prompt draws on (``coverage``), and
``recall@5`` / ``fcr`` of the point's passage ranking (dense: its top 5 whatever k; an
AutoPrunedRetriever setting: its evidence, as the bench grades it). ``--lodo`` runs nothing: it
picks a setting per held-out dataset from earlier ``--json`` results (:func:`lodo_choice`). Points:

- ``dense-k`` for k = 1, 2, 3, 5: cosine top-k passages in the shared answer prompt
  (``graphs.common.ANSWER_PROMPT``), as the ``dense`` baseline sends them at k = 5;
- ``hipporag2-prompt`` (``--hipporag2``): the top-5 passages in a HippoRAG 2 style reader prompt
  (instruction, one worked example, passages, question) — the paper's comparison point. The
  example is our own text of the same shape, not HippoRAG 2's; only its length matters here;
- AutoPrunedRetriever settings (:data:`SETTINGS`), each a ``create_autopruned_graph`` option set
  over one shared codebook, with ``memorize=False`` so no question sees another's stored answer.

Gold labels are read only here, after each method has answered (never passed to a method).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import corpus as corpora
from benchlib.codebook_cache import synced_copy
from benchlib.api import answer_prompt, gold_passage_keys, oracle_answer, ranked_passages
from benchlib.datasets import load_questions, pooled_passages, use_stem_path
from benchlib.metrics import markdown_table
from benchlib.passage_rag import passage_table, top_indices

from langgraph_kgmem.graphs.autopruned import answer_prompt as apr_prompt
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph, sync_codebook
from langgraph_kgmem.graphs.common import evidence_item, normalize_answer

DENSE_K = (1, 2, 3, 5)
# name → create_autopruned_graph options (besides the shared ones in _apr_apps)
SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},                                               # the shipped defaults
    "apr-m20": {"fine_m": 20, "show": "triples"},                # the paper's M and prompt (the default until issue 44)
    "apr-m5": {"fine_m": 5, "show": "triples"},
    "apr-pruned": {"fine_m": 10, "edges_per_run": 1, "show": "triples"},
    "sent-m5-e1": {"fine_m": 5, "edges_per_run": 1, "show": "sentences"},
    "sent-m10-e1": {"fine_m": 10, "edges_per_run": 1, "show": "sentences"},
    "sent-m10-e2": {"fine_m": 10, "edges_per_run": 2, "show": "sentences"},
    "sent-m20-e1": {"fine_m": 20, "edges_per_run": 1, "show": "sentences"},
    "sent-m5-e1-cov": {"fine_m": 5, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5},
    "sent-m10-e1-cov": {"fine_m": 10, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5},
    "sent-b120-cov": {"fine_m": 20, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5,
                      "max_prompt_tokens": 120},
    "sent-b180-cov": {"fine_m": 20, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5,
                      "max_prompt_tokens": 180},
    "sent-b250-cov": {"fine_m": 20, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5,
                      "max_prompt_tokens": 250},
    "sent-m8-e1-cov": {"fine_m": 8, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5},
    "sent-b330-cov": {"fine_m": 20, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5,
                      "max_prompt_tokens": 330},
    "sent-m20-e1-cov": {"fine_m": 20, "edges_per_run": 1, "show": "sentences", "cover_weight": 0.5},
    # sentence_budget, the sentences ranked by question cosine fused with the shown edges' sentences
    # ("qe") or with passage order ("qp"); the question cosine alone is the sb<budget>-m<M>-q family below
    "sb200-m10-qp": {"fine_m": 10, "edges_per_run": 1, "show": "sentences", "sentence_budget": 200,
                     "sentence_rankings": ("question", "passages"), "sentence_dense": 0},
    "sb200-m10-qe": {"fine_m": 10, "edges_per_run": 1, "show": "sentences", "sentence_budget": 200,
                     "sentence_rankings": ("question", "edges"), "sentence_dense": 0},
}
# the sent-* settings show the shown edges' own sentences (no sentence budget)
for _opts in (o for n, o in SETTINGS.items() if n.startswith("sent-")):
    _opts.setdefault("sentence_budget", None)
BUDGETS = (90, 100, 120, 150, 200, 210, 250, 300, 350, 400, 500, 600)
# sentence_budget with the question cosine alone, over the runs' passages (the default until the
# "relevance" ranking): sb<budget>-m<M>-q
SETTINGS.update({f"sb{b}-m{m}-q": {"fine_m": m, "edges_per_run": 1, "show": "sentences", "sentence_budget": b,
                                   "sentence_rankings": ("question",), "sentence_dense": 0}
                 for b in BUDGETS for m in (5, 10, 20)})
# the default ranking ("relevance", vector search's top 5 passages among the candidates): sr<budget>-m<M>;
# sr250-m20 is the default before issue 44's MiniLM choice; the default now is sr245-c0-dp0 below
SETTINGS.update({f"sr{b}-m{m}": {"fine_m": m, "edges_per_run": 1, "show": "sentences", "sentence_budget": b}
                 for b in BUDGETS for m in (10, 20)})
# the same with the best sentence of each of the first N passages first (sentence_cover): sr<budget>-m20-c<N>
SETTINGS.update({f"sr{b}-m20-c{n}": {**SETTINGS[f"sr{b}-m20"], "sentence_cover": n} for b in BUDGETS for n in (3, 5)})
# what each part of it adds (sr<budget>-m20 less one part): -no<term> drops a relevance_weights term,
# -d0 the dense passages, -q the whole "relevance" ranking (question cosine alone, dense passages kept);
# -rq fuses the two rankings (reciprocal rank)
for b in (210, 250):
    base = SETTINGS[f"sr{b}-m20"]
    SETTINGS.update({f"sr{b}-m20-no{term}": {**base, "relevance_weights": {term: 0.0}}
                     for term in ("passage", "terms", "lead")})
    SETTINGS[f"sr{b}-m20-d0"] = {**base, "sentence_dense": 0}
    SETTINGS[f"sr{b}-m20-q"] = {**base, "sentence_rankings": ("question",)}
    SETTINGS[f"sr{b}-m20-rq"] = {**base, "sentence_rankings": ("relevance", "question")}
# vector search's top N passages in the first N evidence places (sentence_dense_places), the best
# sentence of each of the first C places first (sentence_cover): sr<budget>-c<C>-dp<N>
SETTINGS.update({f"sr{b}-c{c}-dp{n}": {"sentence_budget": b, "sentence_cover": c, "sentence_dense_places": n}
                 for b in (220, 230, 240, 245, 250) for c in (0, 3, 4, 5) for n in (0, 3, 4, 5)})
# the same with the relevance ranking's passage weight P (-p<P>) or M fine runs (-m<M>)
for _name, _opts in [(n, o) for n, o in SETTINGS.items() if n.startswith("sr") and "-dp" in n]:
    SETTINGS.update({f"{_name}-p{p}": {**_opts, "relevance_weights": {"passage": float(p)}} for p in (3, 4)})
    SETTINGS.update({f"{_name}-m{m}": {**_opts, "fine_m": m} for m in (10,)})
# the relevance ranking's "answer" term (answer-typed sentences, graphs/autopruned/answer_typed.py) at
# weight W, budget 245, sentence_cover C: sr245-a<W>[-c<C>] (a0: the term off)
SETTINGS.update({f"sr245-a{w:g}{f'-c{c}' if c else ''}": {"sentence_budget": 245, "sentence_cover": c,
                                                          "relevance_weights": {"answer": w}}
                 for w in (0.0, 0.25, 0.5, 1.0, 2.0) for c in (0, 4)})
# each top passage's answer-typed sentence first (sentence_answer_cover N: -ac<N>) and
# sentences over T tokens skipped (sentence_max_tokens: -mt<T>), on the default: d-ac<N>-mt<T>
# (-mt<T> with sentence_clip None: a cap at or above the default clip, 60, would skip nothing)
SETTINGS.update({f"d{f'-ac{n}' if n else ''}{f'-mt{t}' if t else ''}": {
    **({"sentence_answer_cover": n} if n else {}), **({"sentence_max_tokens": t, "sentence_clip": None} if t else {})}
    for n in (0, 2, 3, 5) for t in (0, 60, 80) if n or t})
SETTINGS.update({f"d-ac{n}-a{w:g}": {"sentence_answer_cover": n, "relevance_weights": {"answer": w}}
                 for n in (3, 5) for w in (1.0,)})
# long sentences shown cut to their first T tokens (sentence_clip, default 60):
# d-clip<T>, and d-clip-off (shown whole: the default before)
SETTINGS.update({f"d-clip{t}": {"sentence_clip": t} for t in (40, 50, 60, 80)})
SETTINGS["d-clip-off"] = {"sentence_clip": None}
# the same without bridges (sb<budget>-m<M>-q-nob)
SETTINGS.update({f"{name}-nob": {**opts, "sentence_bridges": False} for name, opts in list(SETTINGS.items())
                 if name.endswith("-q")})

HIPPORAG2_STYLE = """As a careful reading assistant, you read the passages below and answer the question.
Think step by step about which passages matter, then give the final answer after "Answer:" as a short
phrase: a name, a date, a number, or yes/no.

Example.
Wikipedia Title: Lake Tahoe
Lake Tahoe is a large freshwater lake in the Sierra Nevada of the United States, on the border of
California and Nevada.
Wikipedia Title: Sierra Nevada
The Sierra Nevada is a mountain range in the Western United States, between the Central Valley of
California and the Great Basin.
Question: Between which two regions lies the mountain range that holds Lake Tahoe?
Thought: Lake Tahoe lies in the Sierra Nevada. The Sierra Nevada lies between the Central Valley of
California and the Great Basin.
Answer: the Central Valley of California and the Great Basin

{passages}
Question: {question}
Thought:"""


def _tokens(text: str) -> int:
    from langgraph_kgmem.llm import count_message_tokens
    from langgraph_kgmem.llm.calls import as_messages

    return count_message_tokens(as_messages(text))


def grade_point(gold: str, gold_keys: list[str], texts: list[str], keys: list[str], prompt: str,
                ranking: list[str] | None = None) -> dict[str, float]:
    """One question at one point; coverage counts gold passages (passage keys), not titles.
    ``recall@5`` and ``fcr`` grade the point's passage ranking (``ranking``, else ``keys``: the
    prompt's passages in rank order) as the bench does: the gold passages among its first 5, all
    of them there."""
    inside = normalize_answer(oracle_answer(gold, texts)) == normalize_answer(gold)
    gold_set = set(gold_keys)
    cover = len(gold_set & set(keys)) / len(gold_set) if gold_set else 0.0
    top = set((keys if ranking is None else ranking)[:5])
    return {"tokens": _tokens(prompt), "answer_in_prompt": float(inside), "coverage": cover,
            "recall@5": len(gold_set & top) / len(gold_set) if gold_set else 0.0,
            "fcr": float(bool(gold_set) and gold_set <= top)}


def _apr_apps(kg: Any, store: Any, settings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    base = {"model": "offline", "store": store, "extraction": "offline", "phrase_facts": "always",
            "memorize": False, "consolidate": False}
    return {name: create_autopruned_graph(kg, **{**base, **opts}).compile(store=store) for name, opts in settings.items()}


def measure(kg: Any, store: Any, questions: list[Any], *, settings: dict[str, dict[str, Any]] | None = None,
            hipporag2: bool = False, log: Any = print) -> dict[str, list[dict[str, float]]]:
    """Per point, one row per question: tokens, answer_in_prompt, coverage, ms (wall, no LLM) and
    core_ms (ms without the embedding model's time, as the bench's ``core_ms_median``)."""
    settings = SETTINGS if settings is None else settings
    table = passage_table(kg)
    mat = kg.embed_texts(table.texts)
    mat = mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
    t0 = time.perf_counter()
    sync_codebook(kg, store, phrase_facts="always")
    log(f"codebook synced in {time.perf_counter() - t0:.1f}s")
    apps = _apr_apps(kg, store, settings)
    out: dict[str, list[dict[str, float]]] = {}
    for i, q in enumerate(questions):
        t = time.perf_counter()
        order = top_indices(mat @ kg.embed_query(q.question), max(DENSE_K))
        ms = (time.perf_counter() - t) * 1000
        top5 = ranked_passages(kg, [table.ids[j] for j in order[:5]]).keys   # dense's ranking, graded at 5
        for k in DENSE_K:
            ev = [evidence_item(kg, table.ids[j]) for j in order[:k]]
            texts = [e["text"] for e in ev]
            keys = ranked_passages(kg, [table.ids[j] for j in order[:k]]).keys
            row = grade_point(q.answer, gold_passage_keys(q), texts, keys, answer_prompt(q.question, ev), top5)
            out.setdefault(f"dense-{k}", []).append({**row, "ms": ms})
        if hipporag2:
            ev = [evidence_item(kg, table.ids[j]) for j in order[:5]]
            passages = "\n".join(f"Wikipedia Title: {e.get('title', '')}\n{e['text']}" for e in ev)
            prompt = HIPPORAG2_STYLE.format(passages=passages, question=q.question)
            row = grade_point(q.answer, gold_passage_keys(q), [e["text"] for e in ev],
                         ranked_passages(kg, [table.ids[j] for j in order[:5]]).keys, prompt)
            out.setdefault("hipporag2-prompt", []).append({**row, "ms": ms})
        for name, app in apps.items():
            e0, t = float(getattr(kg, "embed_seconds", 0.0) or 0.0), time.perf_counter()
            res = app.invoke({"question": q.question})
            ms = (time.perf_counter() - t) * 1000
            core = ms - (float(getattr(kg, "embed_seconds", 0.0) or 0.0) - e0) * 1000
            ev = res.get("evidence", [])
            keys = ranked_passages(kg, [c for e in ev for c in e.get("chunks", [])]).keys
            prompt = apr_prompt(q.question, res.get("packed_prompt", ""), res.get("encoding", "words"))
            row = grade_point(q.answer, gold_passage_keys(q), [e["text"] for e in ev], keys, prompt)
            out.setdefault(name, []).append({**row, "ms": ms, "core_ms": core})
        if (i + 1) % 50 == 0:
            log(f"{i + 1}/{len(questions)} questions")
    return out


def summarize(per_point: dict[str, list[dict[str, float]]]) -> list[dict[str, Any]]:
    rows = []
    for name, qs in per_point.items():
        rows.append({"point": name, "questions": len(qs),
                     "prompt_tokens": round(float(np.mean([r["tokens"] for r in qs])), 1),
                     "answer_in_prompt": round(float(np.mean([r["answer_in_prompt"] for r in qs])), 3),
                     "gold_coverage": round(float(np.mean([r["coverage"] for r in qs])), 3),
                     "recall@5": round(float(np.mean([r["recall@5"] for r in qs])), 3),
                     "fcr": round(float(np.mean([r["fcr"] for r in qs])), 3),
                     "ms_median": round(float(np.median([r["ms"] for r in qs])), 1),
                     "core_ms_median": round(float(np.median([r.get("core_ms", r["ms"]) for r in qs])), 1)})
    return rows


def feasible_figures(summary: list[dict[str, Any]], half: float = 0.5) -> dict[str, float | None]:
    """Per AutoPrunedRetriever setting of one dataset's summary: its answer-in-prompt rate where it
    meets the goals against dense top-5 (prompt tokens at most ``half`` of dense top-5's, Recall@5
    and FCR at least dense's), else None (the setting does not qualify on that set)."""
    rows = {r["point"]: r for r in summary}
    dense = rows["dense-5"]
    return {name: (r["answer_in_prompt"] if r["prompt_tokens"] <= half * dense["prompt_tokens"]
                   and r["recall@5"] >= dense["recall@5"] and r["fcr"] >= dense["fcr"] else None)
            for name, r in rows.items() if not name.startswith(("dense-", "hipporag2"))}


def lodo_choice(summaries: dict[str, list[dict[str, Any]]], default: str,
                candidates: list[str] | None = None) -> list[dict[str, Any]]:
    """The validation protocol (:func:`benchlib.validate.lodo`) over settings: each dataset held out
    in turn, the setting best on the others by :func:`feasible_figures` — first the one meeting the
    goals on the most of them, then the best mean answer-in-prompt where it meets them (ties to
    ``default``) — and its figure on the held-out set. Only settings run on every dataset (and among
    ``candidates``, when given) compete."""
    from benchlib.validate import lodo

    figures = {d: feasible_figures(s) for d, s in summaries.items()}
    common = [n for n in next(iter(figures.values())) if all(n in f for f in figures.values())
              and (candidates is None or n in candidates)]
    return lodo({d: {n: f[n] for n in common} for d, f in figures.items()}, default, most_sets_first=True)


def main(argv: list[str] | None = None) -> int:
    from langgraph_kgmem.embeddings import get_embeddings

    ap = argparse.ArgumentParser(prog="python -m benchlib.apr_curve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="hotpotqa")
    ap.add_argument("--questions", type=int, default=None)
    ap.add_argument("--embeddings", default="local")
    ap.add_argument("--stem-path", default=None, help="folder holding STEM's normalized.jsonl and stem_corpus_chunks.jsonl")
    ap.add_argument("--settings", default=None, help="comma-separated AutoPrunedRetriever settings (default: all)")
    ap.add_argument("--hipporag2", action="store_true", help="add the HippoRAG 2 style reader prompt point")
    ap.add_argument("--json", default=None, help="write the per-question rows and the summary here")
    ap.add_argument("--lodo", default=None, help="DATASET=JSON,...: no run; the setting each held-out set gets "
                                                 "from the others' --json results (lodo_choice; --settings: the "
                                                 "candidates)")
    ap.add_argument("--default", default="default", help="--lodo: the shipped setting (ties go to it)")
    args = ap.parse_args(argv)
    if args.lodo:
        parts = dict(x.split("=", 1) for x in args.lodo.split(","))
        rows = lodo_choice({d: json.loads(Path(p).read_text())["summary"] for d, p in parts.items()}, args.default,
                           args.settings.split(",") if args.settings else None)
        print(markdown_table(rows, list(rows[0])))
        return 0
    use_stem_path(args.stem_path)
    emb = get_embeddings(args.embeddings)
    qs = load_questions(args.dataset, args.questions, None)
    built = corpora.build_corpus(pooled_passages(args.dataset, qs), emb, log=print)
    wd = Path(tempfile.mkdtemp(prefix="apr-curve-"))
    kg = synced_copy(built, wd, emb, log=print, phrase_facts="always")   # the codebook synced once per KG
    settings = SETTINGS if not args.settings else {n: SETTINGS[n] for n in args.settings.split(",")}
    try:
        _, store = kg.persistence()
        per_point = measure(kg, store, qs, settings=settings, hipporag2=args.hipporag2)
    finally:
        kg.close()
        shutil.rmtree(wd, ignore_errors=True)
    rows = summarize(per_point)
    print(markdown_table(rows, list(rows[0])))
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": rows, "per_question": per_point}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
