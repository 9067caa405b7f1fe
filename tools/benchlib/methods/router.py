"""Adapter ``router`` on dataset ``mixed`` (benchlib/mixed.py): ``create_router_graph`` over the
registered methods on the one KG holding documents, records and the book graph.

The routed methods get the options their own adapters use (AutoPrunedRetriever: the offline
parser's phrase facts on every chunk, M = 20 runs; its codebook indexed in ``setup``). The run's
retrieved ids are the routed method's ranking: the ranked passages of CatRAG / HippoRAG 2, the
chunks of AutoPrunedRetriever's runs, the evidence ids of the others (a records or graph method
asked a passage question retrieves no passage: a miss).

Oracle decider: one responder per question, by the question's part (gold used only inside it):
passage questions answer CatRAG's steps with CatRAG's oracle, ReMindRAG's with ReMindRAG's, any
other with the competent reader; records questions with KG-IRAG's oracle; book-graph questions
with R3-Cycle's noisy agent. The router's own decision (asked only when its rules are unsure)
is the rules' pick, or with probability ``--noise`` a random candidate.
"""

from __future__ import annotations

from typing import Any

from benchlib.api import BenchContext, BenchQuestion, MethodResult, Responder, mistakes
from benchlib.methods.autopruned import ADAPTERS as APR_ADAPTERS
from benchlib.methods.catrag import catrag_oracle
from benchlib.methods.kgirag import temporal_oracle
from benchlib.methods.r3cycle import NoisyOracle
from benchlib.methods.remindrag import ReMindRAGAdapter
from benchlib.passage_rag import passage_oracle

from langgraph_kgmem.graphs.autopruned import sync_codebook
from langgraph_kgmem.graphs.router import DEFAULT_METHODS, create_router_graph

PASSAGE_PARTS = ("hotpotqa", "musique")
CATRAG_STEPS = frozenset({"filter_facts", "anchor_entities", "weight_edges", "summarize_neighbour", "answer"})
REMINDRAG_STEPS = frozenset({"check_sufficiency", "traverse_step", "mark_useful", "decompose"})
APR_OPTIONS = dict(next(a for a in APR_ADAPTERS if a.name == "autopruned").options)


def retrieved_ids(out: dict[str, Any]) -> list[str]:
    """The routed method's ranking of KG ids (see the module docstring)."""
    result = out.get("result") or {}
    if result.get("passages"):
        return [p["id"] for p in result["passages"]]
    if out["route"]["method"] == "autopruned":
        return [c for item in out.get("evidence", []) for c in item.get("chunks", [])]
    return [e["id"] for e in out.get("evidence", []) if "id" in e]


def router_oracle(ctx: BenchContext, q: BenchQuestion) -> Responder:
    """The responder of one question (see the module docstring)."""
    part = q.extra.get("part")
    dice = mistakes(ctx, q, "router")
    if part in PASSAGE_PARTS:
        cat, rem, reader = catrag_oracle(ctx, q, "catrag"), ReMindRAGAdapter().oracle(ctx, q), passage_oracle(ctx, q)

        def own(messages: list[Any], request: Any) -> Any:
            step = getattr(request, "step", None)
            if step in CATRAG_STEPS:
                return cat(messages, request)
            if step in REMINDRAG_STEPS:
                return rem(messages, request)
            return reader(messages, request)
    elif part == "beijing-rain":
        own = temporal_oracle(q, mistakes(ctx, q, "kgirag"))
    else:
        own = NoisyOracle(q, float(ctx.options.get("noise") or 0.0), int(ctx.options.get("seed") or 0))

    def respond(messages: list[Any], request: Any) -> Any:
        if getattr(request, "step", None) == "route_question":
            names = [c["method"] for c in request.context["candidates"]]
            pick = dice.rng.choice(names) if dice.wrong() else request.context["rules"]
            return {"method": pick, "reason": "the rules' pick" if pick == request.context["rules"] else "a guess"}
        return own(messages, request)

    return respond


class RouterAdapter:
    name = "router"
    corpus = "mixed"
    datasets = ("mixed",)
    mixed_parts = ("hotpotqa", "musique", "beijing-rain", "graph-qa")

    def setup(self, ctx: BenchContext) -> None:
        sync_codebook(ctx.kg, ctx.store, phrase_facts=APR_OPTIONS["phrase_facts"])
        ctx.cache["router"] = create_router_graph(ctx.kg, model="offline", store=ctx.store,
                                                  method_options={"autopruned": APR_OPTIONS}).compile(store=ctx.store)

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = ctx.cache["router"].invoke({"question": q.question}, context={"model": model})
        route = out["route"]
        ctx.cache.setdefault("router_runs", {})[q.id] = {"run_id": out["run_id"], "method": route["method"]}
        extra = {"routing_ms": route["routing_ms"], "overhead_ms": route["overhead_ms"],
                 "learning_ms": route["learning_ms"],
                 "escalated": float(route["escalated"]), "model_routed": float(route["decider"] != "rules"),
                 **{f"to_{m}": float(route["method"] == m) for m in DEFAULT_METHODS}}
        return MethodResult(retrieved_ids=retrieved_ids(out), answer=out.get("answer"), usage=out.get("usage") or {},
                            retrieved_count=len(out.get("evidence") or []), extra=extra)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return router_oracle(ctx, q)


ADAPTERS = [RouterAdapter()]
