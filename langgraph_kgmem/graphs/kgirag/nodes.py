"""KG-IRAG's nodes: module-level functions of ``(state, runtime)`` with the graph's shared parts
bound by ``functools.partial`` (:class:`KgiragDeps`). ``plan_query`` → ``retrieve_triples`` ⇄
``judge_retrieval`` → ``synthesize_answer``; the single-pass baseline reads the whole horizon with
``retrieve_window`` instead of the loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from langgraph.runtime import Runtime

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.common import check_question, emit_progress, evidence_item, fence, require, run_model
from langgraph_kgmem.graphs.kgirag.index import (collect_triples, known_records, neighbourhood_slots, record_lines,
                                                 temporal_index)
from langgraph_kgmem.graphs.kgirag import prompts
from langgraph_kgmem.graphs.kgirag.options import KgiragOptions
from langgraph_kgmem.graphs.kgirag.questions import clean_answer, offline_plan, plan_problem
from langgraph_kgmem.graphs.kgirag.scan import default_step, hop_count, horizon_window, scan_records
from langgraph_kgmem.graphs.kgirag.schemas import NO_ANSWER, JudgeDecision, KgiragState, TemporalPlan
from langgraph_kgmem.graphs.runs import finish_run
from langgraph_kgmem.graphs.spec import options_of
from langgraph_kgmem.ingest.records import format_time, parse_time, slot_of, time_of_slot
from langgraph_kgmem.llm import decide, fresh_usage, generate, is_offline, model_label, render

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def _reasoning(plan: Mapping[str, Any], rule: str, opts: KgiragOptions) -> str:
    t = slot_of(parse_time(plan["time"]))
    hours = int(plan["hours"])
    return render(opts.prompt(f"reasoning_{plan['task']}"),
        rule=rule, location=fence(plan.get("location") or "every location", inline=True), time=plan["time"],
        horizon=plan.get("horizon", 0), hours=hours, last=f"{hours - 1}" if hours > 1 else "0",
        start=plan["time"], end=format_time(time_of_slot(t + hours - 1)))


def _evidence(kg: "KnowledgeGraph", edge_ids: Sequence[str]) -> list[dict[str, Any]]:
    return [evidence_item(kg, eid) for eid in edge_ids if kg.edge(eid) is not None]


@dataclass(frozen=True)
class KgiragDeps:
    """What the nodes share for the graph's lifetime (bound with ``functools.partial``)."""

    kg: "KnowledgeGraph"
    model: Any                  # the build's model, resolved once (a run's context may replace it)
    options: KgiragOptions      # the build's options (a run's context overrides them)
    method: str = "kgirag"      # or "singlepass"


def plan_query(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """LLM1: the task, location, time, trip length, horizon, step, K(0) and the reasoning prompt."""
    question = check_question(state)
    opts = options_of(runtime, deps.options)   # a bad per-run option fails here, before any work
    mdl = run_model(runtime, deps.model)
    kg, step, k0 = deps.kg, opts.step, opts.k0
    require("KG-IRAG", kg=kg, records=True)   # a KG without records would only ever answer "no answer"
    idx = temporal_index(kg)
    rule = "; ".join(idx.event_rules) or "the record is flagged abnormal"
    try:
        guess = offline_plan(question, idx)
        unreadable = None if guess is not None else "the question names no departure time"
    except KgmemInputError as exc:  # a time in the question that is no timestamp: no plan from the question
        guess, unreadable = None, str(exc)
    if guess is not None:
        unreadable = plan_problem(idx, guess["time"], int(guess["hours"]), int(guess["horizon"]))
        if unreadable:
            guess = None  # the question itself asks for what no plan may: only a model's valid plan is usable

    def offline() -> TemporalPlan:
        g = guess or {"task": "detect", "location": next(iter(idx.locations), ""), "time": "1970-01-01 00:00",
                      "hours": 1, "horizon": 0}
        # the question's own values (bounded by plan_problem above): not validated as model output
        return TemporalPlan.model_construct(
            task=g["task"], location=g["location"] or "", departure_time=g["time"], trip_hours=g["hours"],
            horizon_hours=g["horizon"], step_hours=step or default_step(g["task"], g["hours"]), k0=k0 or 1,
            reasoning="")

    def validate(p: TemporalPlan) -> str | None:
        if idx.location_of(p.location) is None and len(idx.locations) > 1:
            # the record locations are the data's own words: fenced in the retry's feedback too
            return (f"location {fence(p.location, inline=True, empty=repr(p.location))} is not one of: "
                    f"{fence(', '.join(sorted(idx.locations)), inline=True)}")
        problem = plan_problem(idx, p.departure_time, p.trip_hours, p.horizon_hours)
        if problem:
            return problem
        if p.task != "detect" and p.horizon_hours < 1:
            return "horizon_hours must be >= 1 for latest/earliest"
        return None

    span = (format_time(time_of_slot(int(idx.slots[0]))), format_time(time_of_slot(int(idx.slots[-1])))) \
        if len(idx.slots) else ("-", "-")
    names = sorted(idx.locations)
    shown = ", ".join(names[:50]) + (f" (and {len(names) - 50} more)" if len(names) > 50 else "")
    prompt = render(opts.prompt("plan"), event_name=idx.event_name, rule=rule, locations=fence(shown, inline=True),
                    start=span[0], end=span[1], question=state["question"])
    decision, usage = decide(mdl, TemporalPlan, prompt, step="plan_query", offline=offline, validate=validate,
                             context={"question": state["question"], "offline_plan": guess,
                                      "locations": sorted(idx.locations)})
    # without a readable time in the question, only a model's own (non-fallback) plan is usable
    ok = guess is not None or (not is_offline(mdl) and not usage.get("fallbacks"))
    loc = idx.location_of(decision.location) or (next(iter(idx.locations)) if len(idx.locations) == 1 else None)
    plan = {"task": decision.task, "location": loc, "time": format_time(parse_time(decision.departure_time)),
            "hours": int(decision.trip_hours), "horizon": int(decision.horizon_hours),
            "step": int(step or decision.step_hours), "k0": int(k0 or decision.k0),
            "event": (guess or {}).get("event") or idx.event_name, "valid": bool(ok and len(idx.slots))}
    # the model's instruction for the judge is its reply, which can quote a record's location (data
    # it was shown fenced): it goes into the later prompts fenced like one
    plan["reasoning"] = fence(decision.reasoning, inline=True, empty="") or _reasoning(plan, rule, opts)
    if not plan["valid"]:   # said in the output: a bare "no answer" leaves the user guessing why
        plan["problem"] = (f"{unreadable or 'the model gave no usable plan'}; ask about a departure time "
                           f"within the records ({span[0]} to {span[1]}), e.g. 'if I leave at {span[0]} and "
                           "travel for 2 hours'")
    start = scan_records(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"], {})
    emit_progress({"event": "plan", "plan": plan})
    return {"plan": plan, "anchor": start.need, "direction": start.direction, "iterations": 0, "triples": [],
            "events": [], "anchors": [], "hops": [], "round_sizes": [], "notes": [], "stopped": False,
            "usage": fresh_usage(usage), "method": deps.method, "model": model_label(mdl)}



def no_answer_reason(state: Mapping[str, Any], kappa: int) -> str:
    """Why the answer step answers "no answer" without asking (see :func:`synthesis_prompt`)."""
    plan = state.get("plan", {})
    if not plan.get("valid"):
        return f"the question could not be planned as a search of the records: {plan.get('problem', '')}"
    if len(state.get("triples", [])) >= kappa:
        return f"the records read reached kappa={kappa} triples before the question was settled"
    return "the retrieval rounds ran out (t_max) before the records read settled the question"


def synthesis_prompt(kg: "KnowledgeGraph", question: str, plan: Mapping[str, Any], events: Sequence[str], *,
                      stopped: bool, n_triples: int, kappa: int, template: str | None = None) -> str | None:
    """The prompt the answer step sends, or None when it answers "no answer" without asking: the
    judge never stopped the loop, the triples reached κ, or the plan is not valid. ``template``:
    the graph's ``answer`` prompt (default: ``PROMPTS["answer"]`` as it is now)."""
    if not stopped or n_triples >= kappa or not plan.get("valid"):
        return None
    return render(template if template is not None else prompts.PROMPTS["answer"], reasoning=plan["reasoning"], records=record_lines(kg, events), question=question)


def synthesize_answer(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """LLM1: the answer from every retrieved record, or "no answer" (unstopped, over κ, invalid plan);
    the run gets its ``run_id`` and record for feedback here."""
    out = _synthesize(state, runtime, deps=deps)
    return {**out, **finish_run(deps.kg, method=deps.method, question=state["question"],
                                evidence=out.get("evidence", []), answer=out.get("answer"))}


def _synthesize(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """The answer step itself (see :func:`synthesize_answer`)."""
    opts = options_of(runtime, deps.options)
    mdl = run_model(runtime, deps.model)
    kg, kappa, method = deps.kg, opts.kappa, deps.method
    plan = state["plan"]
    triples = state.get("triples", [])
    evidence = _evidence(kg, triples)
    base = {"evidence": evidence, "retrieved_triples": len(triples), "method": method}
    prompt = synthesis_prompt(kg, state["question"], plan, state.get("events", []),
                              stopped=bool(state.get("stopped")), n_triples=len(triples), kappa=kappa,
                              template=opts.prompt("answer"))
    if prompt is None:
        return {**base, "answer": NO_ANSWER, "no_answer_reason": no_answer_reason(state, kappa)}
    known = known_records(kg, state.get("events", []))
    res = scan_records(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"], known)
    offline_answer = res.answer if res.done else NO_ANSWER
    if is_offline(mdl):
        return {**base, "answer": offline_answer}
    text, usage = generate(mdl, prompt, step="synthesize_answer",
                           context={"question": state["question"], "evidence_ids": [e["id"] for e in evidence],
                                    "event_ids": list(state.get("events", [])), "plan": plan,
                                    "offline_answer": offline_answer},
                           fallback=lambda: offline_answer)
    return {**base, "answer": clean_answer(text), "usage": usage}



def retrieve_triples(state: KgiragState, *, deps: KgiragDeps) -> dict[str, Any]:
    """The triples of the K(t)-hop neighbourhood of the anchor along the time chain."""
    kg = deps.kg
    idx = temporal_index(kg)
    plan = state["plan"]
    sizes = state.get("round_sizes", [])
    k = int(plan["k0"]) if not sizes else hop_count(sizes[-1], sizes[0])
    anchor = state.get("anchor")
    slots = neighbourhood_slots(idx, anchor, k, int(plan["step"]), state.get("direction", "forward")) \
        if anchor is not None else []
    edges, events = collect_triples(kg, idx, slots, plan.get("location"))
    seen = set(state.get("triples", []))
    new = [e for e in dict.fromkeys(edges) if e not in seen]
    seen_ev = set(state.get("events", []))
    new_ev = [e for e in dict.fromkeys(events) if e not in seen_ev]
    it = state.get("iterations", 0) + 1
    where = format_time(time_of_slot(anchor)) if anchor is not None else "-"
    emit_progress({"event": "retrieve", "round": it, "anchor": where, "k": k, "new_triples": len(new)})
    return {"triples": state.get("triples", []) + new, "events": state.get("events", []) + new_ev,
            "round_sizes": sizes + [len(new)], "hops": state.get("hops", []) + [k], "k": k,
            "anchors": state.get("anchors", []) + [where], "iterations": it,
            "retrieved_triples": len(seen) + len(new)}

def judge_retrieval(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """LLM2: stop (the records read settle the answer) or the next anchor."""
    opts = options_of(runtime, deps.options)
    mdl = run_model(runtime, deps.model)
    kg = deps.kg
    idx = temporal_index(kg)
    plan = state["plan"]
    known = known_records(kg, state.get("events", []))
    res = scan_records(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"], known)

    def offline() -> JudgeDecision:
        if res.done:
            return JudgeDecision(stop=True, reason=f"settled: {res.answer}")
        return JudgeDecision(stop=False, next_time=format_time(time_of_slot(res.need)),
                             reason="records missing for the current candidate window")

    def validate(d: JudgeDecision) -> str | None:
        if d.stop:
            return None
        if not d.next_time:
            return "next_time is required when stop is false"
        try:
            s = slot_of(parse_time(d.next_time))
        except KgmemInputError as exc:
            return str(exc)
        if not len(idx.slots) or not int(idx.slots[0]) <= s <= int(idx.slots[-1]):
            return f"{d.next_time} is outside the records"
        return None

    prompt = render(opts.prompt("judge"), reasoning=plan["reasoning"], question=state["question"], count=len(known),
                    triples=len(state.get("triples", [])), records=record_lines(kg, state.get("events", [])),
                    new=(state.get("round_sizes") or [0])[-1], anchor=(state.get("anchors") or ["-"])[-1])
    decision, usage = decide(mdl, JudgeDecision, prompt, step="judge_retrieval", offline=offline,
                             validate=validate,
                             context={"question": state["question"], "plan": plan, "known": known,
                                      "offline": offline().model_dump()})
    out: dict[str, Any] = {"usage": usage, "notes": state.get("notes", []) + [decision.reason]}
    if decision.stop:
        out["stopped"] = True
    else:
        nxt = slot_of(parse_time(decision.next_time or ""))
        out["anchor"] = nxt
        out["direction"] = res.direction if not res.done else state.get("direction", "forward")
    emit_progress({"event": "judge", "round": state.get("iterations", 0), "stop": decision.stop,
           "next": decision.next_time})
    return out

def route_after_plan(state: KgiragState) -> str:
    """Retrieve when the plan is valid and has an anchor hour, else go straight to the answer."""
    return "retrieve_triples" if state["plan"].get("valid") and state.get("anchor") is not None \
        else "synthesize_answer"

def route_after_judge(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> str:
    """Answer once the judge stopped or a limit is reached (``t_max`` rounds, ``kappa`` triples), else
    retrieve another round."""
    opts = options_of(runtime, deps.options)
    if state.get("stopped") or state.get("iterations", 0) >= opts.t_max or \
            len(state.get("triples", [])) >= opts.kappa:
        return "synthesize_answer"
    return "retrieve_triples"


def retrieve_window(state: KgiragState, *, deps: KgiragDeps) -> dict[str, Any]:
    """Single pass: every record of the whole horizon window at once."""
    kg = deps.kg
    idx = temporal_index(kg)
    plan = state["plan"]
    lo, hi = horizon_window(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"])
    p, q = idx.position(lo, "forward"), idx.position(hi, "backward")
    slots = [int(s) for s in idx.slots[p:q + 1]] if p is not None and q is not None and q >= p else []
    edges, events = collect_triples(kg, idx, slots, plan.get("location"))
    edges, events = list(dict.fromkeys(edges)), list(dict.fromkeys(events))
    emit_progress({"event": "retrieve", "round": 1, "anchor": format_time(time_of_slot(lo)), "new_triples": len(edges)})
    return {"triples": edges, "events": events, "round_sizes": [len(edges)], "hops": [1], "iterations": 1,
            "anchors": [format_time(time_of_slot(lo))], "stopped": True, "retrieved_triples": len(edges),
            "method": "singlepass"}

def route_after_plan_singlepass(state: KgiragState) -> str:
    """Single pass: read the whole window when the plan is valid, else go straight to the answer."""
    return "retrieve_window" if state["plan"].get("valid") else "synthesize_answer"
