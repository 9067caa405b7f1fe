"""R3-Cycle's nodes and routers: module-level functions of ``(state, runtime)``.

What a node needs besides the state comes in two parts: ``deps`` (:class:`~.deps.R3Deps`: the
graph environment and its tools, the store, the build's model and options; bound by the factory)
and the run's context (``runtime.context``: per-run options on top of the build's, see
:meth:`~langgraph_kgmem.graphs.spec.MethodOptions.for_run`).
"""

from __future__ import annotations

import math
import uuid
from typing import Any, Literal, Mapping

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime
from pydantic import ValidationError

from langgraph_kgmem.errors import KgmemModelError, describe_error
from langgraph_kgmem.graphs.answering import offline_answer, passages_of, path_names
from langgraph_kgmem.graphs.common import check_question, emit_progress, evidence_item, fence, require, run_model
from langgraph_kgmem.graphs.r3cycle.deps import R3Deps
from langgraph_kgmem.graphs.r3cycle.offline import (NODE_IDS, observed_value, offline_action, offline_reflection,
                                                    offline_verdict)
from langgraph_kgmem.graphs.r3cycle.options import R3cycleOptions
from langgraph_kgmem.graphs.r3cycle.prompts import (GUIDANCE_TEMPLATE, REASON_AS_JSON, REASON_ONE_CALL, log_text,
                                                    path_text, transcript_messages)
from langgraph_kgmem.graphs.r3cycle.records import as_verdict, close_attempt
from langgraph_kgmem.graphs.r3cycle.schemas import (FINISH, HALT_GROWTH, MAX_ARG_CHARS, MAX_OBSERVATION_CHARS,
                                                    MAX_THOUGHT_CHARS, MAX_TOOL_ARGS, NO_ANSWER, TOOL_CALLS,
                                                    FailureType, Outcome, R3State, Reflection, ToolStep, Verdict)
from langgraph_kgmem.graphs.reuse import prior_run
from langgraph_kgmem.graphs.runs import finish_run as record_run
from langgraph_kgmem.graphs.spec import options_of
from langgraph_kgmem.llm import (decide, decision_usage, empty_usage, fallback_record, fresh_usage, invoke_counted,
                                 is_offline, merge_usage, message_text, model_label, offline_usage, render)
from langgraph_kgmem.redaction import redact_secrets
from langgraph_kgmem.llm.endpoints import mark_refused, note_tool_reply, record_decision, refused_methods


def start_run(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """A run id, attempt 0 with ``max_steps`` as its budget; the run's model, store and tenant
    labels are checked before any call."""
    check_question(state)
    opts = options_of(runtime, deps.options)   # a bad per-run option is refused here, before any work
    # the run's model and store, before its first call: trajectories are written after each step
    require(deps.label, runtime=runtime, model=run_model(runtime, deps.model), store=deps.store, needs_store=True,
            tool_calling=True, memory_scope=deps.options.memory_scope)
    reused = prior_run(deps.kg, deps.store, deps.options.memory_scope, state["question"], method=deps.method,
                       similarity=opts.reuse_similarity, passages_only=False) if opts.reuse else None
    return {"reused": reused, "run_id": uuid.uuid4().hex[:12], "attempt": 0, "budget": opts.max_steps, "steps": [], "path": [],
            "visited": [], "pending": None, "final": None, "guidance": "", "verdict": None, "retry": False,
            "attempts": [], "reflections": [], "method": deps.method, "model": model_label(run_model(runtime, deps.model)),
            "answer": "", "evidence": [], "usage": fresh_usage()}


def reason(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """The model (tools bound) emits a thought and exactly one tool call; offline, the heuristic
    agent decides (:func:`~.offline.offline_action`)."""
    mdl = run_model(runtime, deps.model)
    steps = state.get("steps", [])
    call_id = f"call-{state['attempt']}-{len(steps)}"
    if is_offline(mdl):
        thought, tool, args = offline_action(deps.env, state["question"], steps, state.get("path", []),
                                             state.get("guidance", ""))
        return {"pending": {"thought": thought, "tool": tool, "args": args, "call_id": call_id},
                "usage": offline_usage()}
    messages = transcript_messages(state, options_of(runtime, deps.options).prompt("reason_system"))
    context = {"question": state["question"], "attempt": state["attempt"], "budget": state["budget"],
               "step_index": len(steps), "guidance": state.get("guidance", ""),
               "steps": [{k: s[k] for k in ("tool", "args", "observation")} for s in steps], "tools": deps.tool_names}
    if TOOL_CALLS in refused_methods(mdl):   # this endpoint answers in prose: ask for JSON at once
        return as_json(deps, mdl, state, messages, context, call_id, empty_usage())
    usage = empty_usage()
    msgs = messages
    raw: AIMessage | None = None
    problem = ""
    for attempt in range(2):
        try:
            raw, call = invoke_counted(deps.bind(mdl), msgs, step="reason", context=context, attempt=attempt)
        except KgmemModelError as exc:  # a provider error: ask again, then end the attempt (below)
            usage, raw, problem = merge_usage(usage, exc.usage), None, describe_error(exc)
            continue
        usage = merge_usage(usage, call)
        problem = tool_call_problem(raw.tool_calls[0]) if raw.tool_calls else "no tool call"
        if not problem:
            break
        hint = render(REASON_ONE_CALL, tools=", ".join(deps.tool_names))
        msgs = messages + [AIMessage(message_text(raw)[:MAX_THOUGHT_CHARS]),
                           HumanMessage(hint if problem == "no tool call" else f"{problem}. {hint}")]
    if raw is not None and not raw.tool_calls:
        # prose twice where a tool call is needed: this step's action is asked as JSON through
        # structured output; an endpoint that never calls tools (llama-cpp-python's default chat
        # handler) is asked that way at once from then on
        if note_tool_reply(mdl, called=False):
            mark_refused(mdl, TOOL_CALLS, KgmemModelError("the model answers in prose where a tool call is needed"))
        return as_json(deps, mdl, state, messages, context, call_id, usage)
    if raw is not None:
        note_tool_reply(mdl, called=True)
    usage = merge_usage(usage, decision_usage())
    if raw is None:   # the model failed twice: the attempt ends without an answer (recorded)
        usage["fallbacks"] = [fallback_record("reason", "model_error", problem)]
        pending = {"thought": "", "tool": FINISH, "args": {"answer": NO_ANSWER}, "call_id": call_id}
    elif not problem:
        text = raw.content if isinstance(raw.content, str) else ""
        call = raw.tool_calls[0]
        if len(raw.tool_calls) > 1:
            usage["fallbacks"] = [fallback_record("reason", "extra_tool_calls",
                                                  f"{len(raw.tool_calls)} tool calls; kept the first",
                                                  message_text(raw))]
        pending = {"thought": text.strip()[:MAX_THOUGHT_CHARS], "tool": call["name"], "args": dict(call["args"]),
                   "call_id": str(call.get("id") or call_id)[:64]}
    else:   # unusable arguments twice: the attempt ends without an answer (recorded)
        usage["fallbacks"] = [fallback_record("reason", "invalid_tool_call", problem, message_text(raw))]
        pending = {"thought": "", "tool": FINISH, "args": {"answer": NO_ANSWER}, "call_id": call_id}
    record_decision(mdl, fell_back=raw is None or bool(problem))
    return {"pending": redacted_call(pending), "usage": usage}


def as_json(deps: R3Deps, mdl: Any, state: R3State, messages: list[BaseMessage], context: dict[str, Any],
            call_id: str, usage: dict[str, Any]) -> dict[str, Any]:
    """The next action asked as a :class:`ToolStep` decision (a model that does not call tools);
    after a retry, the offline agent's action stands in (recorded as a fallback)."""
    def validate(step: ToolStep) -> str | None:
        if step.tool not in deps.tool_names:
            return f"tool must be one of {', '.join(deps.tool_names)}, not {step.tool!r}"
        return tool_call_problem({"name": step.tool, "args": step.args}) or None

    def offline() -> ToolStep:
        thought, tool, args = offline_action(deps.env, state["question"], state.get("steps", []),
                                             state.get("path", []), state.get("guidance", ""))
        return ToolStep(thought=thought[:MAX_THOUGHT_CHARS], tool=tool, args=args)

    step, u = decide(mdl, ToolStep, messages + [HumanMessage(render(REASON_AS_JSON, menu=deps.tool_menu))],
                     step="reason", offline=offline, validate=validate, context=context)
    pending = {"thought": step.thought.strip(), "tool": step.tool, "args": dict(step.args), "call_id": call_id}
    return {"pending": redacted_call(pending), "usage": merge_usage(usage, u)}


def redacted_call(call: dict[str, Any]) -> dict[str, Any]:
    """A model's tool call with the secrets in its thought and text arguments redacted: the call is
    kept (state, checkpoints, trajectories) and its Finish answer becomes the run's answer."""
    args = {k: redact_secrets(v) if isinstance(v, str) else v for k, v in call["args"].items()}
    return {**call, "thought": redact_secrets(str(call.get("thought", ""))), "args": args}


def act(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """Execute the pending tool call; tool errors and unknown tools become observations, and the
    hops taken join the attempt's knowledge path."""
    opts = options_of(runtime, deps.options)
    tools = deps.graph_tools(opts.top_n)
    call = dict(state["pending"] or {})
    tool, args = call["tool"], call["args"]
    path = list(state.get("path", []))
    visited = list(state.get("visited", []))
    error = False
    final = None
    if tool == FINISH:
        final = str(args.get("answer", "")).strip() or NO_ANSWER
        observation = f"Finished with the answer: {final}"
    elif tool not in tools:
        error = True
        observation = f"Error: {tool!r} is not a valid tool; use one of: {', '.join(deps.tool_names)}."
    else:
        try:
            observation = str(tools[tool].invoke(args))
        except (ValidationError, ValueError, TypeError, KeyError) as exc:
            error = True
            if isinstance(exc, ValidationError):
                first = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())[:300]
            else:
                # a tool's error text is foreign (a GraphEnv subclass): read it safely, and an empty one still says something
                first = (describe_error(exc, 300, typed=False).strip().splitlines() or [type(exc).__name__])[0]
            observation = (f"Error: {tool} could not run with arguments {args}: {first}. "
                           "Check the argument names and values and try again.")
        else:
            error = observation.startswith(("Node ", "RetrieveNode needs")) and any(
                m in observation for m in ("does not exist", "has no ", "has 0 neighbours", "needs"))
            ids = [i for i in dict.fromkeys(NODE_IDS.findall(observation)) if deps.kg.node(i) is not None]
            src = args.get("node_id")
            if tool == "RetrieveNode" and not error:
                path.append({"op": "retrieve", "keyword": args.get("keyword", ""), "to": ids})
                visited.extend(ids[:1] if opts.top_n == 1 else ids)
            elif not error and src is not None and deps.kg.node(src) is not None:
                if tool == "NeighbourCheck":
                    to = [i for i in ids if i != src]
                    path.append({"op": "neighbours", "from": src, "relation": args.get("relation"), "to": to})
                    visited.extend([src, *to[:10]])
                elif tool == "NodeDegree":
                    value = observed_value(observation)
                    path.append({"op": "degree", "from": src, "relation": args.get("relation"),
                                 "count": int(value) if value.isdigit() else 0})
                    visited.append(src)
                else:
                    path.append({"op": "feature", "node": src, "feature": args.get("feature"),
                                 "value": observed_value(observation)[:200]})
                    visited.append(src)
    observation = observation[:MAX_OBSERVATION_CHARS]
    step = {"index": len(state.get("steps", [])), "thought": call.get("thought", ""), "tool": tool, "args": args,
            "call_id": call["call_id"], "observation": observation, "error": error}
    emit_progress({"event": "step", "method": deps.method, "attempt": state["attempt"], "index": step["index"],
                   "tool": tool, "args": args, "error": error})
    return {"steps": [*state.get("steps", []), step], "path": path,
            "visited": list(dict.fromkeys(visited)), "final": final, "pending": None}


def write_trajectory(deps: R3Deps, state: R3State, **outcome: Any) -> None:
    """Store the current attempt's trajectory (rewritten as it grows; ``outcome``/``verdict`` at the end)."""
    deps.remember("trajectories", f"{state['run_id']}-{state['attempt']}", {
        "run_id": state["run_id"], "question": state["question"], "method": deps.method,
        "attempt": state["attempt"], "budget": state["budget"], "guidance": state.get("guidance", ""),
        "steps": state.get("steps", []), "path": state.get("path", []), "answer": state.get("final"),
        "outcome": None, **outcome}, state.get("visited", []))


def record(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """Persist the attempt's log and knowledge path after every step."""
    write_trajectory(deps, state)
    return {}


def verify(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """Judge a finished attempt with the verifier (default: an LLM self-check against the
    observations); a halted attempt has failed without asking."""
    opts = options_of(runtime, deps.options)
    steps = state.get("steps", [])
    usage: dict[str, Any] = {}
    if state.get("final") is None:
        verdict = Verdict(ok=False, reason=f"halted: the step budget of {state['budget']} was used up "
                                           "without calling Finish")
        outcome: Outcome = "halted"
    else:
        answer = state["final"] or ""
        evidence = [evidence_item(deps.kg, i) for i in state.get("visited", []) if deps.kg.node(i) is not None]
        evidence += [{"id": f"obs-{s['index']}", "kind": "observation", "text": s["observation"]}
                     for s in steps if s["tool"] != FINISH]
        if opts.verifier is None:
            prompt = render(opts.prompt("verify"), question=state["question"], answer=fence(answer, inline=True),
                            evidence=fence([f"- {e['text']}" for e in evidence if e["kind"] == "observation"]))
            verdict, usage = decide(run_model(runtime, deps.model), Verdict, prompt, step="verify",
                                    offline=lambda: offline_verdict(answer, steps, state["question"]),
                                    context={"question": state["question"], "answer": answer,
                                             "steps": [{k: s[k] for k in ("tool", "args", "observation")}
                                                       for s in steps]})
        elif isinstance(opts.verifier, Runnable):
            verdict, usage = as_verdict(opts.verifier.invoke({"question": state["question"], "answer": answer,
                                                          "evidence": evidence}))
        else:
            verdict, usage = as_verdict(opts.verifier(state["question"], answer, evidence))
        outcome = "correct" if verdict.ok else "incorrect_answer"
    vd = verdict.model_dump()
    write_trajectory(deps, state, outcome=outcome, verdict= vd)
    emit_progress({"event": "verify", "attempt": state["attempt"], "outcome": outcome, "reason": verdict.reason})
    return {"verdict": vd, "attempts": [*state.get("attempts", []), close_attempt(state, outcome, vd)],
            "usage": usage or {}}


def reflect(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """Diagnose the failed attempt (root cause, advice, retry?) and persist the reflection."""
    verdict = state.get("verdict") or {}
    failure: FailureType = "halted" if state.get("final") is None else "incorrect_answer"
    if failure == "halted":
        failure_text = (f"halted: the attempt used all {state['budget']} steps without calling Finish "
                        "(answer: none)")
    else:
        failure_text = (f"the attempt answered {state['final']!r}, which a check rejected: "
                        f"{verdict.get('reason', '')}")
    prompt = render(options_of(runtime, deps.options).prompt("reflect"), question=state["question"], failure=fence(failure_text, inline=True),
                    log=log_text(state.get("steps", [])), path=path_text(state.get("path", [])))
    decision, usage = decide(
        run_model(runtime, deps.model), Reflection, prompt, step="reflect",
        offline=lambda: offline_reflection(dict(state), failure, verdict.get("reason", "")),
        fallback=lambda: Reflection(root_cause="the reflection could not be parsed",
                                    advice="Retrieve the question's entity first and follow the relation the "
                                           "question names, then Finish.", retry=True),
        context={"question": state["question"], "answer": state.get("final"), "failure_type": failure,
                 "attempt": state["attempt"], "budget": state["budget"], "verifier_reason": verdict.get("reason"),
                 "steps": [{k: s[k] for k in ("tool", "args", "observation")} for s in state.get("steps", [])],
                 "path": state.get("path", [])})
    rec = {"run_id": state["run_id"], "question": state["question"], "attempt": state["attempt"],
           "failure_type": failure, "answer": state.get("final"), **decision.model_dump()}
    rec = deps.remember("reflections", f"{state['run_id']}-{state['attempt']}", rec, state.get("visited", []))
    emit_progress({"event": "reflect", "attempt": state["attempt"], "failure_type": failure, "retry": decision.retry})
    return {"reflections": [*state.get("reflections", []), rec], "retry": decision.retry, "usage": usage}


def replan(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """Open the next attempt in a reset context: the question and the reflection's guidance only,
    the same budget after a wrong answer and a larger one after a halt."""
    last = state["reflections"][-1]
    budget = state["budget"]
    if last["failure_type"] == "halted":
        budget = int(math.ceil(budget * HALT_GROWTH))
    guidance = render(GUIDANCE_TEMPLATE, root_cause=last["root_cause"], advice=last["advice"])
    emit_progress({"event": "replan", "attempt": state["attempt"] + 1, "budget": budget})
    return {"attempt": state["attempt"] + 1, "budget": budget, "steps": [], "path": [], "visited": [],
            "pending": None, "final": None, "verdict": None, "guidance": guidance}


def finish_run(state: R3State, runtime: Runtime[R3cycleOptions], *, deps: R3Deps) -> dict[str, Any]:
    """The answer and evidence of the last attempt that answered, every attempt, the reflections."""
    attempts = list(state.get("attempts", []))
    reused = state.get("reused")
    if reused:   # answered before and still holding: that run's answer and evidence, no walk
        evidence = [evidence_item(deps.kg, i) for i in reused["passages"]]
        run = record_run(deps.kg, method=deps.method, question=state["question"], evidence=evidence,
                         answer=reused["answer"], store=deps.store, scope=deps.options.memory_scope,
                         run_id=state["run_id"])
        return {"answer": reused["answer"], "evidence": evidence, "attempts": [], "method": deps.method, **run}
    if not deps.options.reflection:   # Graph-CoT: the single attempt is closed here, unverified
        outcome: Outcome = "finished" if state.get("final") is not None else "halted"
        write_trajectory(deps, state, outcome=outcome, verdict= None)
        attempts.append(close_attempt(state, outcome, None))
    chosen = next((a for a in reversed(attempts) if a["answer"] is not None), attempts[-1])
    evidence = [evidence_item(deps.kg, i) for i in chosen["visited"] if deps.kg.node(i) is not None]
    final = chosen["answer"] if chosen["answer"] is not None else NO_ANSWER
    passages = passages_of(deps.kg, chosen["visited"]) if is_offline(run_model(runtime, deps.model)) else []
    if passages:   # offline on documents: the short answer the walk's passages support, not a node's text
        found = offline_answer(state["question"], passages, path_names(deps.kg, chosen["visited"]))
        final = found.answer if found.answer != NO_ANSWER else final
    run = record_run(deps.kg, method=deps.method, question=state["question"], evidence=evidence, answer=final,
                     store=deps.store, scope=deps.options.memory_scope, run_id=state["run_id"])
    return {"answer": final, "evidence": evidence, "attempts": attempts, "method": deps.method, **run}


def after_start(state: R3State) -> Literal["reason", "finish_run"]:
    """Straight to the end when an earlier run is reused (``reuse``), else the first step."""
    return "finish_run" if state.get("reused") else "reason"


def after_record(state: R3State, *, reflection: bool) -> Literal["reason", "verify", "finish_run"]:
    """The next step while the attempt has budget and no answer; then the check (R3-Cycle) or the end."""
    if state.get("final") is None and len(state.get("steps", [])) < state["budget"]:
        return "reason"
    return "verify" if reflection else "finish_run"


def after_verify(state: R3State, runtime: Runtime[R3cycleOptions], *,
                 deps: R3Deps) -> Literal["reflect", "finish_run"]:
    """A right answer, or the last cycle (``max_cycles`` retries made), ends the run."""
    opts = options_of(runtime, deps.options)
    if (state.get("verdict") or {}).get("ok") or state["attempt"] >= opts.max_cycles:
        return "finish_run"
    return "reflect"


def after_reflect(state: R3State) -> Literal["replan", "finish_run"]:
    """Another attempt when the reflection advises one."""
    return "replan" if state.get("retry") else "finish_run"


def tool_call_problem(call: Mapping[str, Any]) -> str:
    """Why a model's tool call cannot be run or recorded ("" when it can): its arguments must be at
    most :data:`MAX_TOOL_ARGS` named scalars (text up to :data:`MAX_ARG_CHARS` characters, finite
    numbers), its name a short text. An unknown tool name is fine here: it becomes an observation."""
    name, args = call.get("name"), call.get("args")
    if not isinstance(name, str) or not 0 < len(name) <= 64:
        return "the tool name must be one of the listed tools"
    if not isinstance(args, dict) or len(args) > MAX_TOOL_ARGS:
        return f"the arguments of {name} must be an object with at most {MAX_TOOL_ARGS} fields"
    for key, value in args.items():
        if not isinstance(key, str) or len(key) > 64:
            return f"argument names of {name} must be short text"
        if isinstance(value, str):
            if len(value) > MAX_ARG_CHARS:
                return f"argument {key!r} of {name} is longer than {MAX_ARG_CHARS} characters"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"argument {key!r} of {name} must be a finite number"
        elif not (value is None or isinstance(value, (bool, int)) and abs(value) < 10**15):
            return f"argument {key!r} of {name} must be text or a number, not {type(value).__name__}"
    return ""
