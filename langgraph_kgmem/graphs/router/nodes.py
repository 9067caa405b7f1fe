"""The router's nodes: ``route_question`` picks, ``run_<method>`` runs that method's compiled graph
as a subgraph (and escalates when its result's own confidence is low), ``finish_route`` answers
with the best result and counts the outcome in the route statistics."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from langgraph.runtime import Runtime
from langgraph.types import Command

from langgraph_kgmem.errors import MissingRequirementError
from langgraph_kgmem.graphs.common import check_question, emit_progress, run_model
from langgraph_kgmem.graphs.router.cover import cover_ranking, passage_ids
from langgraph_kgmem.graphs.router.options import RouterOptions
from langgraph_kgmem.graphs.router.policy import (Candidate, confidence, ladder, rank, rules_unsure, unservable)
from langgraph_kgmem.graphs.router.prompts import ROUTE_PROMPT, method_lines
from langgraph_kgmem.graphs.router.schemas import RouteDecision, RouterState
from langgraph_kgmem.graphs.router.signals import KgProfile, kg_profile, question_form
from langgraph_kgmem.graphs.router.stats import load_route_memory, routes, save_outcome
from langgraph_kgmem.graphs.runs import run_ops, run_store
from langgraph_kgmem.graphs.spec import options_of
from langgraph_kgmem.llm import decide, fence, fresh_usage, is_offline, model_label, render
from langgraph_kgmem.memory import RecordMemory, memory_scope

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

FINISH = "finish_route"
OWN_KEYS = ("question", "answer", "evidence", "usage")   # what the router's own output carries already


def node_name(method: str) -> str:
    """The node that runs ``method``'s subgraph."""
    return f"run_{method}"


@dataclass
class RouterDeps:
    """What the nodes share: the KG, the factory's model, options and store, the compiled subgraph of
    each method (built once), the methods left out at build time and why, their summaries."""

    kg: "KnowledgeGraph"
    model: Any
    options: RouterOptions
    store: Any
    apps: dict[str, Any]
    unavailable: dict[str, str]
    summaries: dict[str, str]
    _profile: KgProfile | None = field(default=None, repr=False)
    _run_options: tuple[Any, RouterOptions] | None = field(default=None, repr=False)

    def run_options(self, runtime: Any) -> RouterOptions:
        """This run's options (the build's with ``runtime.context`` on top). Merging validates a new
        options model, about a third of a millisecond; the three nodes of one run share the result
        when the context is an options model (frozen: LangGraph makes one per run from a context
        dict), matched by identity, so another run's context never reads these."""
        ctx = getattr(runtime, "context", None)
        memo = self._run_options
        if memo is not None and memo[0] is ctx and isinstance(ctx, RouterOptions):
            return memo[1]
        opts = options_of(runtime, self.options)
        self._run_options = (ctx, opts)
        return opts

    def profile(self) -> KgProfile:
        """What the KG holds, re-read only when its version changed."""
        if self._profile is None or self._profile.version != self.kg.version:
            self._profile = kg_profile(self.kg)
        return self._profile

    def memory(self, runtime: Any, opts: RouterOptions) -> RecordMemory | None:
        """The tenant's route records, or None without a store (or with ``learn`` off)."""
        store = self.store if self.store is not None else getattr(runtime, "store", None)
        if store is None or not opts.learn:
            return None
        return routes(store, self.kg.name, memory_scope(opts.memory_scope))

    def has_store(self, runtime: Any) -> bool:
        """Whether this run has a store (the methods with memory need one)."""
        return self.store is not None or getattr(runtime, "store", None) is not None


def _calls(usage: Mapping[str, Any] | None) -> int:
    return int((usage or {}).get("llm_calls", 0) or 0)


def _fits(cost: float, budget: int | None, spent: int) -> bool:
    return budget is None or cost <= budget - spent


def _ask_model(deps: RouterDeps, mdl: Any, question: str, profile: KgProfile, form: str,
               ranked: list[Candidate]) -> tuple[str, str, str, dict[str, Any]]:
    """The model's typed pick among ``ranked`` (the rules' pick is its fallback):
    (method, reason, decider, usage)."""
    shown = [c.as_dict() for c in ranked]
    names = [c.method for c in ranked]
    prompt = render(ROUTE_PROMPT, holds=", ".join(profile.holds()) or "nothing yet", form=form,
                    question=fence(question, inline=True), methods=method_lines(shown, deps.summaries))

    def rules() -> RouteDecision:
        return RouteDecision(method=ranked[0].method, reason=f"rules: {ranked[0].why}")

    def validate(d: RouteDecision) -> str | None:
        return None if d.method in names else f"method must be one of: {', '.join(names)}"

    decision, usage = decide(mdl, RouteDecision, prompt, step="route_question", offline=rules, validate=validate,
                             context={"question": question, "form": form, "candidates": shown,
                                      "rules": ranked[0].method})
    decider = "fallback" if usage.get("fallbacks") else "model"
    return decision.method, decision.reason, decider, usage


def route_question(state: RouterState, runtime: Runtime[RouterOptions], *, deps: RouterDeps) -> Command:
    """Pick the method (rules + learned statistics, the model when the rules are not sure), fit it to
    the budget and send the question to its subgraph."""
    t0, c0 = time.perf_counter(), time.thread_time()
    question = check_question(state)
    opts = deps.run_options(runtime)
    mdl = run_model(runtime, deps.model)
    offline = is_offline(mdl)
    profile = deps.profile()
    form = question_form(question, profile)
    mem = deps.memory(runtime, opts)
    stats, asked = load_route_memory(mem, question) if mem is not None else ({}, None)
    stats = stats.get(form.form, {})
    has_store = deps.has_store(runtime)
    unavailable = dict(deps.unavailable)
    servable = []
    for m in deps.apps:
        why_not = unservable(m, profile, has_store, offline)
        if why_not:
            unavailable[m] = why_not
        else:
            servable.append(m)
    if not servable:
        raise MissingRequirementError(
            f"router: no method can answer on KG {deps.kg.name!r} ({'; '.join(f'{k}: {v}' for k, v in unavailable.items())}): "
            "add documents (kg.add_documents), records (kg.add_records) or a graph, or name methods that fit")
    ranked = rank(form.form, servable, stats, asked, min_runs=opts.min_runs, offline=offline)
    usage: dict[str, Any] = fresh_usage()
    choice, why, decider = ranked[0].method, ranked[0].why, "rules"
    if not offline and opts.ask_model and rules_unsure(ranked) and _fits(1, opts.budget, 0):
        choice, why, decider, asked_usage = _ask_model(deps, mdl, question, profile, form.form, ranked)
        usage = {**asked_usage, "reset": True}
    spent = _calls(usage)
    by_name = {c.method: c for c in ranked}
    run_offline = False
    if not _fits(by_name[choice].cost, opts.budget, spent):
        fitting = [c for c in ranked if _fits(c.cost, opts.budget, spent)]
        if fitting:
            why = f"{choice} (~{by_name[choice].cost:.1f} calls) does not fit the budget; next best that does"
            choice = fitting[0].method
        else:
            run_offline = True
            why = f"no method fits the remaining budget of {opts.budget} calls: {choice} runs offline"
    plan = ladder(form.form, ranked, opts.escalate and not run_offline, first=choice)
    memory = "new question" if not asked else f"asked before, answered by {', '.join(sorted(asked['methods']))}"
    route = {"method": choice, "first": plan[0], "why": why, "form": form.form, "signals": form.signals(),
             "holds": profile.holds(), "alternatives": [c.as_dict() for c in ranked], "decider": decider,
             "memory": memory, "unavailable": unavailable, "budget": opts.budget, "offline_run": run_offline,
             "useful_before": sorted(m for m, e in ((asked or {}).get("methods") or {}).items()
                                     if e.get("useful", 0) > e.get("wrong", 0)),
             "routing_ms": round((time.perf_counter() - t0) * 1000, 3),
             "routing_cpu_ms": round((time.thread_time() - c0) * 1000, 3)}
    update = {"run_id": uuid.uuid4().hex[:12], "route": route, "plan": plan[1:], "tried": [], "usage": usage,
              "result": {}, "best": "", "rankings": {}}
    emit_progress({"event": "route", "method": plan[0], "form": form.form, "decider": decider})
    return Command(update=update, goto=node_name(plan[0]))


def run_method(state: RouterState, runtime: Runtime[RouterOptions], *, name: str, deps: RouterDeps) -> Command:
    """Run ``name``'s compiled graph on the question; escalate to the next method of the plan when this
    result's own confidence is under ``escalate_below`` and the budget allows, else finish."""
    opts = deps.run_options(runtime)
    mdl = "offline" if state["route"].get("offline_run") else run_model(runtime, deps.model)
    context: dict[str, Any] = {"model": mdl, **({"user_id": opts.user_id} if opts.user_id is not None else {}),
                               **({"tenant": dict(opts.tenant)} if opts.tenant else {})}
    t0 = time.perf_counter()
    out = deps.apps[name].invoke({"question": state["question"]}, context=context)
    seconds = time.perf_counter() - t0
    conf = confidence(name, out)
    calls = _calls(out.get("usage"))
    tried = list(state.get("tried", [])) + [{"method": name, "confidence": round(conf, 4), "calls": calls,
                                             "seconds": round(seconds, 4), "offline": is_offline(mdl)}]
    update: dict[str, Any] = {"tried": tried, "usage": out.get("usage") or {},
                              "rankings": {**state.get("rankings", {}), name: passage_ids(out)}}
    best_conf = max((t["confidence"] for t in state.get("tried", []) if t["method"] == state.get("best")), default=-1.0)
    # on a tie the escalated result wins, unless the first was judged useful on this very question
    useful = state["route"].get("useful_before", [])
    if conf > best_conf or (conf == best_conf and (name in useful or state.get("best") not in useful)):
        update["result"], update["best"] = {k: v for k, v in out.items()}, name
    plan = list(state.get("plan", []))
    spent = _calls(state.get("usage")) + calls
    alternatives = {a["method"]: a for a in state["route"].get("alternatives", [])}
    if plan and opts.escalate and conf < opts.escalate_below and \
            _fits(alternatives.get(plan[0], {}).get("cost", 0.0), opts.budget, spent):
        emit_progress({"event": "escalate", "from": name, "to": plan[0], "confidence": round(conf, 4)})
        return Command(update={**update, "plan": plan[1:]}, goto=node_name(plan[0]))
    return Command(update={**update, "plan": []}, goto=FINISH)


def _passage_text(kg: Any, pid: str) -> str:
    node = kg.node(pid)
    if node is None:
        return ""
    title = node.attrs.get("title") or ""
    return f"{title}. {node.text}" if title else node.text


def router_passages(state: RouterState, opts: RouterOptions, kg: Any) -> list[dict[str, Any]]:
    """The router's passage ranking (:mod:`~langgraph_kgmem.graphs.router.cover`): the answering
    run's ranking, places ``cover_keep + 1`` to ``cover_top`` completed by question coverage over
    every run's ranking; ``[]`` when the answering run ranked no passage."""
    rankings = state.get("rankings") or {}
    own = rankings.get(state.get("best", "")) or []
    if not own:
        return []
    others = [r for m, r in rankings.items() if m != state.get("best")]
    return cover_ranking(state["question"], own, others, lambda pid: _passage_text(kg, pid),
                         keep=opts.cover_keep, top=opts.cover_top)


def finish_route(state: RouterState, runtime: Runtime[RouterOptions], *, deps: RouterDeps) -> dict[str, Any]:
    """The best result as the router's answer, the route completed, the outcome counted."""
    t0, c0 = time.perf_counter(), time.thread_time()
    opts = deps.run_options(runtime)
    result, best = state.get("result") or {}, state.get("best", "")
    tried = state.get("tried", [])
    route = {**state["route"], "method": best, "tried": tried, "escalated": len(tried) > 1}
    passages = router_passages(state, opts, deps.kg)
    # the router's own run record, so feedback naming this run reaches its on_feedback hook: written in
    # the same batch as the route's statistics (one store write a question, counted in the overhead)
    _, run_writes = run_ops(deps.kg, method="router", question=state["question"], evidence=result.get("evidence", []),
                            answer=result.get("answer", ""), scope=opts.memory_scope, run_id=state["run_id"])
    mem = deps.memory(runtime, opts)
    if mem is not None:
        # a run the budget forced offline says nothing about the method's calls with a model
        counted = [t for t in tried if not t["offline"] or is_offline(run_model(runtime, deps.model))]
        save_outcome(mem, run_id=state["run_id"], question=state["question"], form=route["form"], method=best,
                     tried=counted or tried, also=run_writes)
    elif (store := run_store(deps.store)) is not None:
        store.batch(run_writes)
    learning_ms, learning_cpu_ms = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
    route["learning_ms"] = round(learning_ms, 3)
    route["overhead_ms"] = round(route["routing_ms"] + learning_ms, 3)
    # the router's own work, without the waits a loaded machine adds to the wall-clock figures
    route["overhead_cpu_ms"] = round(route["routing_cpu_ms"] + learning_cpu_ms, 3)
    return {"answer": result.get("answer", ""), "evidence": result.get("evidence", []), "method": "router",
            "passages": passages,
            "model": model_label(run_model(runtime, deps.model)), "route": route, "run_id": state["run_id"],
            "result": {k: v for k, v in result.items() if k not in OWN_KEYS}}
