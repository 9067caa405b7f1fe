"""Adapter ``router`` on dataset ``mixed`` (benchlib/mixed.py): ``create_router_graph`` over the
registered methods on the one KG holding documents, records and the book graph.

The routed methods get the options their own adapters use (AutoPrunedRetriever: the offline
parser's phrase facts on every chunk, M = 20 runs; its codebook indexed in ``setup``). The run's
retrieved ids are the routed method's ranking: the ranked passages of CatRAG / HippoRAG 2, the
chunks of AutoPrunedRetriever's runs, the evidence ids of the others (a records or graph method
asked a passage question retrieves no passage: a miss).

Oracle decider: each routed method's calls meet the responder that method's own adapter gives the
question (its own dice, gold used only inside it) on the parts it was built for, and an LLM without
the right data elsewhere (as ``MixedAdapter`` does for the single methods): routing a question to a
method reproduces that method's single run, so router and single methods differ by the routing
only. The router's own decision (asked only when its rules are unsure) is the rules' pick, or with
probability ``--noise`` a random candidate.
"""

from __future__ import annotations

from typing import Any

from benchlib.api import BenchContext, BenchQuestion, MethodResult, Responder, mistakes, ranked_passages
from benchlib.methods.autopruned import ADAPTERS as APR_ADAPTERS
from benchlib.methods.catrag import catrag_oracle
from benchlib.methods.kgirag import temporal_oracle
from benchlib.methods.r3cycle import NoisyOracle
from benchlib.methods.remindrag import ReMindRAGAdapter
from benchlib.passage_rag import passage_oracle

from langgraph_kgmem.graphs.autopruned import sync_codebook
from langgraph_kgmem.graphs.router import DEFAULT_METHODS, create_router_graph

PASSAGE_PARTS = ("hotpotqa", "musique")
APR_OPTIONS = dict(next(a for a in APR_ADAPTERS if a.name == "autopruned").options)


def retrieved_ids(out: dict[str, Any]) -> list[str]:
    """The router's passage ranking (``passages``: the routed method's, completed by question coverage)
    when it has one, else the routed method's ranking of KG ids (see the module docstring)."""
    if out.get("passages"):
        return [p["id"] for p in out["passages"]]
    return method_ids(out)


def method_ids(out: dict[str, Any]) -> list[str]:
    """The routed method's own ranking of KG ids, before the router's coverage step."""
    result = out.get("result") or {}
    if result.get("passages"):
        return [p["id"] for p in result["passages"]]
    if out["route"]["method"] == "autopruned":
        return [c for item in out.get("evidence", []) for c in item.get("chunks", [])]
    return [e["id"] for e in out.get("evidence", []) if "id" in e]


# the parts each routed method was built for: there it meets its own adapter's oracle, elsewhere an
# LLM without the right data (benchlib.mixed.MixedAdapter's rule, so a routed run equals the single run)
OWN_PARTS = {"hipporag2": PASSAGE_PARTS, "catrag": PASSAGE_PARTS, "remindrag": PASSAGE_PARTS,
             "autopruned": PASSAGE_PARTS, "kgirag": ("beijing-rain",), "r3cycle": ("graph-qa",),
             "graphcot": ("graph-qa",)}


def _own_oracle(ctx: BenchContext, q: BenchQuestion, method: str) -> Responder:
    """The responder ``method``'s own adapter gives ``q`` (same dice: seeded by that method's name)."""
    if method in ("hipporag2", "catrag"):
        return catrag_oracle(ctx, q, method)
    if method == "remindrag":
        return ReMindRAGAdapter().oracle(ctx, q)
    if method == "autopruned":
        return passage_oracle(ctx, q)
    if method == "kgirag":
        return temporal_oracle(q, mistakes(ctx, q, "kgirag"))
    return NoisyOracle(q, float(ctx.options.get("noise") or 0.0), int(ctx.options.get("seed") or 0))


def _nothing(messages: list[Any], request: Any) -> Any:
    return "no answer" if request is None or request.schema is None else "{}"


def running_method() -> str | None:
    """The routed method whose subgraph makes the current call (its node ``run_<method>`` opens the
    checkpoint namespace), or None outside one (the routing decision)."""
    from langgraph.config import get_config

    try:
        ns = str((get_config().get("configurable") or {}).get("checkpoint_ns") or "")
    except RuntimeError:
        return None
    head = ns.split("|", 1)[0].split(":", 1)[0]
    return head[len("run_"):] if head.startswith("run_") else None


def router_oracle(ctx: BenchContext, q: BenchQuestion) -> Responder:
    """The responder of one question: each routed method meets the responder its own adapter gives
    (the same dice), so routing to a method reproduces that method's single run; the routing decision
    is the rules' pick, or with probability ``--noise`` a random candidate."""
    part = q.extra.get("part")
    dice = mistakes(ctx, q, "router")
    own: dict[str, Responder] = {}

    def respond(messages: list[Any], request: Any) -> Any:
        if getattr(request, "step", None) == "route_question":
            names = [c["method"] for c in request.context["candidates"]]
            pick = dice.rng.choice(names) if dice.wrong() else request.context["rules"]
            return {"method": pick, "reason": "the rules' pick" if pick == request.context["rules"] else "a guess"}
        method = running_method() or ""
        if part not in OWN_PARTS.get(method, ()):
            return _nothing(messages, request)
        if method not in own:
            own[method] = _own_oracle(ctx, q, method)
        return own[method](messages, request)

    return respond


class RouterAdapter:
    """``router``: the router on the KG's own store (SQLite for an embedded KG). Only when named:
    ``router-memstore``, the same on LangGraph's InMemoryStore, to measure its overhead there;
    ``router-eager``, the router with ``escalate_below`` 1.0 (every document question whose first
    result is not fully confident also runs the escalation target), to measure what running
    ReMindRAG on more questions buys and costs."""

    corpus = "mixed"
    datasets = ("mixed",)
    mixed_parts = ("hotpotqa", "musique", "beijing-rain", "graph-qa")

    def __init__(self, name: str = "router", *, memory_store: bool = False,
                 options: dict[str, Any] | None = None) -> None:
        self.name = name
        self.memory_store = memory_store
        self.options = dict(options or {})
        self.in_default_run = name == "router"

    def setup(self, ctx: BenchContext) -> None:
        from langgraph.store.memory import InMemoryStore

        store = InMemoryStore() if self.memory_store else ctx.store
        ctx.cache["router_store"] = store
        sync_codebook(ctx.kg, store, phrase_facts=APR_OPTIONS["phrase_facts"])
        ctx.cache["router"] = create_router_graph(ctx.kg, model="offline", store=store,
                                                  method_options={"autopruned": APR_OPTIONS},
                                                  **self.options).compile(store=store)

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = ctx.cache["router"].invoke({"question": q.question}, context={"model": model})
        route = out["route"]
        ctx.cache.setdefault("router_runs", {})[q.id] = {"run_id": out["run_id"], "method": route["method"]}
        extra = {"routing_ms": route["routing_ms"], "overhead_ms": route["overhead_ms"],
                 "learning_ms": route["learning_ms"], "overhead_cpu_ms": route["overhead_cpu_ms"],
                 "escalated": float(route["escalated"]), "routed_to": route["method"], "form": route["form"],
                 "confidence": max((t["confidence"] for t in route["tried"] if t["method"] == route["method"]),
                                   default=0.0), "model_routed": float(route["decider"] != "rules"),
                 **{f"to_{m}": float(route["method"] == m) for m in DEFAULT_METHODS},
                 "tried": [(t["method"], t["confidence"]) for t in route["tried"]],
                 # the routed method's own passages (document keys, as the metrics read them): the router
                 # without its coverage step, for benchlib.router_report
                 "uncovered": ranked_passages(ctx.kg, method_ids(out)).keys[:10]}
        return MethodResult(retrieved_ids=retrieved_ids(out), answer=out.get("answer"), usage=out.get("usage") or {},
                            retrieved_count=len(out.get("evidence") or []), extra=extra)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return router_oracle(ctx, q)


ADAPTERS = [RouterAdapter(), RouterAdapter("router-memstore", memory_store=True),
            RouterAdapter("router-eager", options={"escalate_below": 1.0})]
