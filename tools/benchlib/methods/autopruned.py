"""Bench adapters ``autopruned`` (the method's defaults: the best sentences of the 20 best runs'
passages), ``autopruned-triples`` (the paper's prompt: the 20 best runs as triples, the default
until issue 44), ``autopruned-m5`` (the 5 best runs as triples), ``autopruned-pruned`` (the 10 best runs, each pruned to its one edge closest to the
question: ``edges_per_run=1``) and ``autopruned-sentences`` (``SENTENCES_PRESET``: the most relevant
sentences of the 20 best runs' passages and vector search's top 5, 250 tokens at most) for ``langgraph_kgmem.graphs.autopruned``, on the pooled corpus.

Setup indexes the whole KG into the codebook once (with ``phrase_facts="always"``: the offline
extractor's relation edges miss most lower-case content words, so every chunk's phrase triples
join its facts) (``sync_codebook``: F runs per passage chunk,
consolidation) in the corpus' store; every question then runs the graph with the decider's
model passed per run (``context={"model": m}``). Question and answer triples come from the
offline parser under every decider (``extraction="offline"``), so the oracle decides only the
answer: ``oracle_answer`` on the triples shown (gold is read only inside the responder).

Retrieved passages: the selected runs' chunks, best run first (fact runs by
their own chunk, reused answer runs by their recorded provenance). Offline, ``prompt_tokens`` is
the would-be answer prompt (instructions + packed codebook + question), counted like the passage
baselines count theirs. Extra metrics: ``prompt_tokens_packed`` (the codebook block alone),
``titles`` (passages covered by the selected runs), ``reused`` (stored Q/A runs reused),
``enc_words``/``enc_ids``/``enc_matrix`` (share of each chosen encoding), ``cb_entities``,
``cb_relations``, ``cb_edges``, ``cb_runs`` (codebook size after the question).
"""

from __future__ import annotations

from typing import Any, Literal

from benchlib.api import (BenchContext, BenchQuestion, MethodResult, Responder, fusion_extra, titles_of,
                          with_offline_answer_prompt)
from benchlib.curves import reuse_options
from benchlib.passage_rag import passage_oracle

from langgraph_kgmem.graphs.autopruned import SENTENCES_PRESET, answer_prompt, create_autopruned_graph, sync_codebook
from langgraph_kgmem.graphs.autopruned.codebook import ALIAS_THRESHOLD, LAYER2_FLOOR
from langgraph_kgmem.graphs.autopruned.deps import offline_triples


class AutoPrunedAdapter:
    """One AutoPrunedRetriever configuration; every setting is an explicit constructor option
    (``fine_m``: runs kept, ``edges_per_run``: edges kept per run (None: all),
    ``phrase_facts``: see the module docstring, ``max_prompt_tokens``: packed-prompt budget
    (None: no limit)). Decisions other than the answer come from the offline parser
    (``extraction="offline"``) under every decider."""

    corpus = "pooled"
    datasets = None   # any normalized QA dataset (a name or a JSONL path), like the other retrievers

    def __init__(self, name: str, *, fine_m: int = 20, edges_per_run: int | None = None,
                 phrase_facts: Literal["uncovered", "always", "never"] = "always",
                 max_prompt_tokens: int | None = None, dense_fusion: bool = True,
                 in_default_run: bool = True, **graph_options: Any) -> None:
        self.name = name
        self.in_default_run = in_default_run
        self.options: dict[str, Any] = {"extraction": "offline", "fine_m": fine_m, "edges_per_run": edges_per_run,
                                        "phrase_facts": phrase_facts, "max_prompt_tokens": max_prompt_tokens,
                                        "dense_fusion": dense_fusion, **graph_options}

    def setup(self, ctx: BenchContext) -> None:
        ctx.cache["apr_size"] = sync_codebook(ctx.kg, ctx.store, phrase_facts=self.options["phrase_facts"])
        ctx.cache[self.name] = create_autopruned_graph(ctx.kg, model="offline", store=ctx.store,
                                                       **{**self.options, **reuse_options(ctx)}).compile(store=ctx.store)

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = ctx.cache[self.name].invoke({"question": q.question}, context={"model": model})
        return result_of(ctx, out, model)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return passage_oracle(ctx, q)  # a reader answering from the evidence texts it was shown


class ExtractingAdapter(AutoPrunedAdapter):
    """``autopruned-extract``: the method's library default of reading the question's and the
    answer's triples with the model (``extraction="llm"``), so a question makes its three calls
    (question triples, answer, answer triples when the answer is grounded). The oracle reads a text
    as the offline parser does (a stand-in for the model's reading, counted as a call) and answers
    as :func:`passage_oracle`."""

    def __init__(self, name: str, **options: Any) -> None:
        super().__init__(name, **options)
        self.options["extraction"] = "llm"

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        answer = passage_oracle(ctx, q)

        def respond(messages: list[Any], request: Any) -> Any:
            if request is not None and str(request.step).startswith("extract_"):
                read = offline_triples(str((request.context or {}).get("text", "")))
                return {"triples": [{"subject": t.subject, "relation": t.relation, "object": t.object}
                                    for t in read.triples]}
            return answer(messages, request)

        return respond


def result_of(ctx: BenchContext, out: dict[str, Any], model: Any) -> MethodResult:
    # offline: the prompt an LLM answer would need (instructions + packed codebook + question)
    usage = with_offline_answer_prompt(out.get("usage"), model, lambda: answer_prompt(
        out["question"], out.get("packed_prompt", ""), out.get("encoding", "words")))
    evidence = out.get("evidence", [])
    chunks = [cid for item in evidence for cid in item.get("chunks", [])]
    titles = titles_of(ctx.kg, chunks)
    size = out.get("codebook_size", {})
    enc = out.get("encoding", "")
    extra = {"prompt_tokens_packed": out.get("prompt_tokens_packed", 0), "titles": len(titles),
             "reused": len(out.get("reused", [])), "enc_words": enc == "words", "enc_ids": enc == "ids",
             "enc_matrix": enc == "matrix", "cb_entities": size.get("entities", 0),
             "cb_relations": size.get("relations", 0), "cb_edges": size.get("edges", 0),
             "cb_runs": size.get("runs", 0), **fusion_extra(ctx.kg, out.get("fusion"))}
    return MethodResult(retrieved_ids=chunks, answer=out.get("answer"), usage=usage,
                        retrieved_count=len(evidence), extra=extra)


# Benchmark KGs are built with the offline extractor, whose relation edges miss the lower-case
# content words of prose: the adapters add phrase triples to every chunk's facts (phrase_facts="always").
ADAPTERS = [AutoPrunedAdapter("autopruned", fine_m=20),                 # the defaults: sentences, M = 20 runs
            # the paper's prompt (the default until issue 44): the 20 best runs as triples
            AutoPrunedAdapter("autopruned-triples", fine_m=20, show="triples", in_default_run=False),
            AutoPrunedAdapter("autopruned-m5", fine_m=5, show="triples"),               # compact: 5 best runs
            # pruned: the 10 best runs, each cut to its one edge closest to the question
            AutoPrunedAdapter("autopruned-pruned", fine_m=10, edges_per_run=1, show="triples"),
            # the compact reader preset: the most relevant sentences ("relevance" ranking), 250 tokens at most
            AutoPrunedAdapter("autopruned-sentences", in_default_run=False, **SENTENCES_PRESET),
            # the fine ranking alone (no dense seeding or fusion): the paper's run order
            AutoPrunedAdapter("autopruned-nofusion", fine_m=20, dense_fusion=False, in_default_run=False),
            # the fine ranking's share of the runs by its agreement with vector search (the options' thresholds)
            AutoPrunedAdapter("autopruned-adaptive", fine_m=20, fusion="adaptive", in_default_run=False),
            # the library default's three calls: question and answer triples read by the model
            ExtractingAdapter("autopruned-extract", fine_m=20, in_default_run=False)]


# ------------------------------------------------------------------------------ codebook growth


def codebook_growth(kg: Any, *, step: int = 50, entity_budget: int | None = None,
                    alias_threshold: float = ALIAS_THRESHOLD, layer2_min_cos: float = LAYER2_FLOOR,
                    documents: int | None = None, merges: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Index the KG's first ``documents`` documents (default: all) into a fresh codebook ``step`` at
    a time, consolidating after each step; one row per step with the sizes without consolidation
    (``*_raw``: every symbol ever added) and the live sizes after it. ``merges``, when given,
    receives every layer-2 merge (entity, representative, cosine, step) for inspection."""
    import time

    from langgraph_kgmem.graphs.autopruned.codebook import Codebook

    book = Codebook(kg.name)
    docs = [d["id"] for d in kg.documents() if d.get("status", "done") == "done"][:documents]
    rows = []
    for off in range(0, len(docs), step):
        t0 = time.perf_counter()
        book.sync_facts(kg, documents=docs[off:off + step])
        report = book.consolidate(kg, alias_threshold=alias_threshold, entity_budget=entity_budget,
                                  layer2_min_cos=layer2_min_cos)
        if merges is not None and report["merged_layer2"]:
            merges.extend({"entity": book.ent_text[m], "representative": book.ent_text[r], "cosine": round(c, 4),
                           "documents": min(off + step, len(docs))} for m, r, c in book.last_layer2)
        size = book.size()
        rows.append({"documents": min(off + step, len(docs)), "entities_raw": len(book.ent_text),
                     "entities": size["entities"], "relations": size["relations"], "edges_raw": len(book.edge_hrt),
                     "edges": size["edges"], "fact_runs": size["fact_runs"],
                     "aliases_layer1": report["aliases_layer1"], "merged_layer2": report["merged_layer2"],
                     "over_budget": report["over_budget"], "seconds": round(time.perf_counter() - t0, 2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    """``PYTHONPATH=tools python -m benchlib.methods.autopruned --dataset stem [--embeddings local]
    [--step 50] [--entity-budget N] [--floor F] [--documents N] [--merges FILE]``: print the codebook
    growth table (Markdown)."""
    import argparse
    import json
    import shutil
    import tempfile
    from pathlib import Path

    from benchlib import corpus as corpora
    from benchlib.datasets import load_questions, pooled_passages
    from benchlib.metrics import markdown_table

    from langgraph_kgmem.embeddings import get_embeddings

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--dataset", default="stem")
    ap.add_argument("--questions", type=int, default=None, help="questions whose passages are pooled (QA sets)")
    ap.add_argument("--embeddings", default="local")
    ap.add_argument("--step", type=int, default=50)
    ap.add_argument("--entity-budget", type=int, default=None)
    ap.add_argument("--floor", type=float, default=LAYER2_FLOOR, help="layer-2 similarity floor (-1: off)")
    ap.add_argument("--documents", type=int, default=None, help="index only the first N documents")
    ap.add_argument("--merges", default=None, help="write every layer-2 merge (JSON) here")
    ap.add_argument("--every", type=int, default=1, help="print every N-th row")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    emb = get_embeddings(args.embeddings)
    qs = load_questions(args.dataset, args.questions, None)
    built = corpora.build_corpus(pooled_passages(args.dataset, qs), emb, log=print)
    wd = Path(tempfile.mkdtemp(prefix="apr-growth-"))
    kg = corpora.open_working_copy(built, wd, emb)
    try:
        merges: list[dict[str, Any]] = []
        rows = codebook_growth(kg, step=args.step, entity_budget=args.entity_budget, layer2_min_cos=args.floor,
                               documents=args.documents, merges=merges)
    finally:
        kg.close()
        shutil.rmtree(wd, ignore_errors=True)
    shown = [r for i, r in enumerate(rows) if i % args.every == 0 or i == len(rows) - 1]
    print(markdown_table(shown, list(rows[0]) if rows else []))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.merges:
        Path(args.merges).write_text(json.dumps(merges, indent=1))
    return 0


if __name__ == "__main__":  # PYTHONPATH=tools python -m benchlib.methods.autopruned --dataset stem
    raise SystemExit(main())
