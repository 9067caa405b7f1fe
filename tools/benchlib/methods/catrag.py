"""Bench adapters for CatRAG (``langgraph_kgmem.graphs.catrag``) and its baseline and ablations.

Names (all on the pooled corpus: one KG of every question's passages):

- ``catrag``: all three additions; ``hipporag2``: all off (plain HippoRAG 2);
- ``catrag-noanchor`` / ``catrag-noweight`` / ``catrag-noboost``: one addition switched off;
- ``catrag-nofusion`` / ``hipporag2-nofusion`` (only when named): passages ranked by PPR mass
  alone, without the default fusion with the dense ranking (``dense_fusion=False``);
- ``catrag-serial`` (only when named): ``catrag`` with the weighting step's LLM calls made one
  after another instead of concurrently; with ``--llm-latency`` it shows what concurrency saves.

The graph is compiled once per corpus; each question's model (offline, oracle, LLM) is passed per
run through the graph's context (``context={"model": m}``). Extra metrics per question:
``hub_mass`` (PPR mass on top-1% weighted-degree entities among the top-10 nodes),
``retrieval_ms`` (non-LLM time before the answer step), ``dense_fallback``, ``facts``,
``anchors``, ``pruned_edges``, ``strong_edges``, ``boosted_edges``, ``summary_calls``.

Offline, ``prompt_tokens`` is the would-be answer prompt only (``graphs.common.ANSWER_PROMPT`` over
the evidence, ``api.with_offline_answer_prompt``): the offline heuristics make the filter, NER and
weighting decisions without building their prompts, so those cannot be counted without an LLM.

Oracle (gold used only inside the responder): the filter keeps facts extracted from a gold
passage or whose two entities both occur in a gold passage; NER returns the entities the
question mentions; an edge scores 9 when the neighbour is mentioned in a gold passage, else 2;
summaries are the entity's first facts; the answer is ``oracle_answer`` on the evidence shown.
With ``--noise p`` (:class:`benchlib.api.Mistakes`), with probability p the fact selection is a
random one (HippoRAG 2's only gold decision) and each edge score is a random 0-10.
"""

from __future__ import annotations

from typing import Any

from benchlib.curves import reuse_options
from benchlib.api import (BenchContext, BenchQuestion, MethodResult, Responder, answer_prompt, fusion_extra,
                          gold_chunk_ids, mistakes, oracle_answer, reuse_extra, with_offline_answer_prompt)

from langgraph_kgmem.graphs.catrag import create_catrag_graph, kg_index, prepare_catrag_kg
from langgraph_kgmem.graphs.registry import METHODS
from langgraph_kgmem.ingest.extract import offline_entities

GOLD_SCORE, OTHER_SCORE = 9, 2
FILTER_KEEP = 4   # the graph's default filter_keep: facts the filter may keep


class CatragAdapter:
    corpus = "pooled"
    datasets = None

    def __init__(self, name: str, *, in_default_run: bool = True, **options: Any) -> None:
        self.name = name
        self.in_default_run = in_default_run
        self.options = options

    def setup(self, ctx: BenchContext) -> None:
        prepare_catrag_kg(ctx.kg)
        ctx.cache[self.name] = create_catrag_graph(ctx.kg, model="offline", store=ctx.store, **self.options,
                                                   **reuse_options(ctx)).compile(store=ctx.store)
        kg_index(ctx.kg)  # build the per-version arrays now, not inside the first question

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = ctx.cache[self.name].invoke({"question": q.question}, context={"model": model})
        timings = out.get("timings", {})
        tiers = out.get("edge_weights") or {}
        steps = (out.get("usage") or {}).get("by_step", {})
        extra = {
            "hub_mass": float((out.get("ppr") or {}).get("hub_mass", 0.0)),
            "retrieval_ms": round(sum(v for k, v in timings.items() if k != "answer"), 3),
            "dense_fallback": out.get("fallback") == "dense",
            "facts": len(out.get("facts", [])),
            "anchors": len(out.get("anchors", [])),
            "pruned_edges": tiers.get("pruned", 0),
            "strong_edges": tiers.get("strong", 0) + tiers.get("key", 0),
            "boosted_edges": tiers.get("boosted", 0),
            "summary_calls": steps.get("summarize_neighbour", {}).get("llm_calls", 0),
            "scoring_calls": steps.get("weight_edges", {}).get("llm_calls", 0),
            **fusion_extra(ctx.kg, (out.get("ppr") or {}).get("fusion")),
            **reuse_extra(ctx.kg, out.get("reused"), out.get("usage")),
        }
        evidence = out.get("evidence", [])
        # offline: the answer prompt the graph's answer step would send (decision prompts are not built)
        usage = with_offline_answer_prompt(out.get("usage", {}), model, lambda: answer_prompt(q.question, evidence))
        return MethodResult(retrieved_ids=[p["id"] for p in out.get("passages", [])],
                            answer=out.get("answer"), usage=usage, retrieved_count=len(evidence), extra=extra)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return catrag_oracle(ctx, q, self.name)


def catrag_oracle(ctx: BenchContext, q: BenchQuestion, method: str = "catrag") -> Responder:
    """A competent LLM simulated from the gold passages (see the module docstring)."""
    kg = ctx.kg
    cache: dict[str, Any] = {}
    dice = mistakes(ctx, q, method)

    def gold() -> tuple[set[str], list[str]]:
        if "gold" not in cache:
            ids = {i for i in gold_chunk_ids(kg, q) if kg.node(i).kind == "chunk"}
            cache["gold"] = (ids, [kg.node(i).text.lower() for i in ids] + [t.lower() for t in q.supporting_titles])
        return cache["gold"]

    def mentioned(eid: str, texts: list[str]) -> bool:
        node = kg.node(eid)
        return node is not None and any(node.text.lower() in t for t in texts)

    def respond(messages: list[Any], request: Any) -> Any:
        step = getattr(request, "step", None)
        ctx_ = getattr(request, "context", None) or {}
        if step == "filter_facts":
            n = len(ctx_.get("candidates", []))
            if dice.wrong():
                return {"keep": sorted(dice.rng.sample(range(1, n + 1), dice.rng.randint(0, min(FILTER_KEEP, n))))}
            ids, texts = gold()
            keep = [i for i, c in enumerate(ctx_.get("candidates", []), 1)
                    if set(c["chunks"]) & ids or (mentioned(c["src"], texts) and mentioned(c["dst"], texts))]
            return {"keep": keep[:FILTER_KEEP]}
        if step == "anchor_entities":
            return {"names": offline_entities(ctx_.get("question", q.question))}
        if step == "weight_edges":
            ids, _ = gold()
            return {"scores": [{"neighbour": n["neighbour"],
                                "score": dice.rng.randint(0, 10) if dice.wrong()
                                else GOLD_SCORE if set(n["chunks"]) & ids else OTHER_SCORE}
                               for n in ctx_.get("neighbours", [])]}
        if step == "summarize_neighbour":
            return f"{ctx_.get('name', '')}: " + "; ".join(ctx_.get("facts", [])[:3])
        if step == "answer":
            return oracle_answer(q.answer, list(ctx_.get("evidence_texts") or []))
        return "{}"

    return respond


HIPPORAG2 = dict(METHODS["hipporag2"].preset)   # the registry's preset: the baseline is defined once

ADAPTERS = [
    CatragAdapter("catrag"),
    CatragAdapter("hipporag2", **HIPPORAG2),
    CatragAdapter("catrag-noanchor", anchoring=False),
    CatragAdapter("catrag-noweight", dynamic_weighting=False),
    CatragAdapter("catrag-noboost", key_fact_boost=False),
    # the weighting step's LLM calls one after another: what concurrency saves (with --llm-latency)
    CatragAdapter("catrag-serial", llm_concurrency=1, in_default_run=False),
    # passages ranked by PPR mass alone (no dense fusion): the papers' ranking
    CatragAdapter("catrag-nofusion", dense_fusion=False, in_default_run=False),
    CatragAdapter("hipporag2-nofusion", **HIPPORAG2, dense_fusion=False, in_default_run=False),
    # PPR's share of the evidence set per question by its confidence (the options' thresholds)
    CatragAdapter("catrag-adaptive", fusion="adaptive", in_default_run=False),
    CatragAdapter("hipporag2-adaptive", **HIPPORAG2, fusion="adaptive", in_default_run=False),
]
