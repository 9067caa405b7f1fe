"""A planner/verifier pipeline over kgmem methods, sharing one store so memory crosses roles.

- ``plan`` (planner role): a typed ``Plan`` decision splits the question into sub-questions; a
  later one may name an earlier one's answer as ``#1``, ``#2`` ... On a retry round the prompt
  carries the verifier's reason.
- ``solve`` (planner role): each sub-question is a call of one compiled kgmem method (ReMindRAG by
  default) used as a subgraph; then the planner composes the answer from the sub-answers.
- ``verify`` (verifier role): asks the *same* compiled method the original question, through the
  *same* store, so ReMindRAG replays the edge memory the planner's walks just wrote (non-empty
  ``replayed``, fewer LLM calls), then a typed ``Verdict`` judges the answer against the evidence.
  A rejection goes back to ``plan`` with its reason, at most ``max_rounds`` rounds.

Every decision (plan, verdict, the method's own) goes through ``langgraph_kgmem.llm.decide``: typed,
retried once, with a fallback, counted; composing the answer is a counted free-text call. ``usage``
sums all roles, ``roles`` splits the LLM calls per role, and ``method_runs`` records every method
run (role, round, question, answer, LLM calls, hops walked, replayed nodes and whose memory they
came from).

What the offline run shows (scripted planner, verifier and method models, no LLM): the planner's
first plan forgets the second hop; the verifier's run replays the planner's memory of the first hop,
walks the second, and rejects the answer with a reason; the second plan has both hops, and now every
run, the planner's included, replays what both roles learned (2 LLM calls instead of 4 to 8).
``--llm`` uses $KGMEM_MODEL for all three roles instead.

    python examples/pipeline.py [--llm]
"""

from __future__ import annotations

import os
import re
import sys
from typing import Annotated, Any, Literal, Sequence, TypedDict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402
from langgraph.types import Overwrite  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from langgraph_kgmem import KnowledgeGraph  # noqa: E402
from langgraph_kgmem.errors import KgmemInputError  # noqa: E402
from langgraph_kgmem.graphs.common import InputState, answer_question, entered_question, format_evidence  # noqa: E402
from langgraph_kgmem.graphs.registry import get_factory  # noqa: E402
from langgraph_kgmem.graphs.remindrag import hop_distances  # noqa: E402
from langgraph_kgmem.llm import decide, empty_usage, merge_usage, render, resolve_model  # noqa: E402
from langgraph_kgmem.testing import ScriptedChatModel  # noqa: E402

MAX_SUB_QUESTIONS = 4
Role = Literal["planner", "verifier"]
_REF = re.compile(r"#(\d+)")


class Plan(BaseModel):
    """The sub-questions to ask the knowledge graph, in order."""

    sub_questions: list[str] = Field(description="1 to 4 simple questions, in the order to ask them; refer to the "
                                                 "answer of an earlier one as #1, #2, ...")


class Verdict(BaseModel):
    """Whether the proposed answer is supported by the evidence and answers the question asked."""

    ok: bool = Field(description="true only if the evidence supports the answer and it answers the question")
    reason: str = Field(default="", description="one sentence: what is wrong or missing, or why it holds")


PLAN_PROMPT = """You plan how to answer a question from a knowledge graph. Split it into the simple
questions to ask the graph, in order (at most 4). Refer to the answer of an earlier sub-question as #1,
#2, ... A simple question stays one sub-question.

Question: {question}{feedback}"""

FEEDBACK = """

A verifier rejected the previous attempt.
Previous sub-questions: {previous}
Previous answer: {answer}
Verifier's reason: {reason}
Plan again so that the answer fixes this."""

COMPOSE_PROMPT = """Answer the question from the answers to its sub-questions and the evidence. Be brief:
a name, a number, a date or a short phrase. If they do not contain the answer, say "no answer".

Sub-questions answered:
{steps}

Evidence:
{{evidence}}

Question: {{question}}
Answer:"""

VERIFY_PROMPT = """You check an answer against evidence from a knowledge graph.

Question: {question}
Proposed answer: {answer}
Steps taken (sub-question -> answer):
{steps}
A separate retrieval of the whole question answered: {check}

Evidence:
{evidence}

Is the proposed answer supported by the evidence, and does it answer the question asked? If not, say
in one sentence what is wrong or missing."""


class PipelineState(TypedDict, total=False):
    # the methods' own question channel: checked as it enters (InputState's reducer), and one channel
    # type for the state and the input schema, which LangGraph requires
    question: Annotated[str, entered_question]
    sub_questions: list[str]           # the current round's plan, #k references filled in
    answer: str
    evidence: list[dict[str, Any]]
    usage: Annotated[dict[str, Any], merge_usage]
    rounds: int
    verified: bool
    verdicts: list[dict[str, Any]]     # per round: round, answer, ok, reason, check_answer
    method_runs: list[dict[str, Any]]  # per method run: role, round, question, answer, llm_calls, replayed ...
    roles: dict[str, dict[str, int]]   # per role: llm_calls (its own decisions and its method runs)
    verifier_replayed: list[str]       # nodes the verifier's last method run replayed from memory


class PipelineOutput(TypedDict, total=False):
    question: str
    sub_questions: list[str]
    answer: str
    evidence: list[dict[str, Any]]
    usage: dict[str, Any]
    rounds: int
    verified: bool
    verdicts: list[dict[str, Any]]
    method_runs: list[dict[str, Any]]
    roles: dict[str, dict[str, int]]
    verifier_replayed: list[str]


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _fill_references(text: str, answers: Sequence[str]) -> str:
    return _REF.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(0), text)


def _check_plan(plan: Plan) -> str | None:
    subs = [s for s in plan.sub_questions if s.strip()]
    if not 1 <= len(subs) <= MAX_SUB_QUESTIONS:
        return f"give 1 to {MAX_SUB_QUESTIONS} non-empty sub-questions, not {len(subs)}"
    for i, sub in enumerate(subs, 1):
        late = [int(k) for k in _REF.findall(sub) if int(k) >= i]
        if late:
            return (f"sub-question {i} refers to #{late[0]}, which is not answered before it; "
                    f"refer only to #1..#{i - 1}")
    return None


def build_pipeline(kg: KnowledgeGraph, *, planner_model: Any, verifier_model: Any, method: str = "remindrag",
                   max_rounds: int = 2, store: BaseStore | None = None,
                   method_options: dict[str, Any] | None = None, method_model: Any = None) -> StateGraph:
    """The planner/verifier pipeline over ``kg`` (uncompiled).

    Args:
        kg: the knowledge graph both roles answer from.
        planner_model, verifier_model: chat models (or ``"offline"``) of the two roles.
        method: the kgmem method each role calls (a registry name; default ReMindRAG).
        max_rounds: plan → solve → verify rounds at most; the last round's answer stands, verified or not.
        store: the ONE store the method keeps its memory in, for both roles; default ``kg.persistence()[1]``.
        method_options: options of the method's factory (e.g. ReMindRAG's replay threshold ``lam``).
        method_model: the method's own model; default: the planner's.

    Returns:
        An uncompiled ``StateGraph``; input ``{"question"}``, output :class:`PipelineOutput`.

    Raises:
        KgmemInputError: ``max_rounds`` is not a positive integer, or the method or its options are invalid.
    """
    if not isinstance(max_rounds, int) or max_rounds < 1:
        raise KgmemInputError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    planner, verifier = resolve_model(planner_model), resolve_model(verifier_model)
    store = store if store is not None else kg.persistence()[1]
    factory, preset = get_factory(method)
    preset.update(method_options or {})
    method_app = factory(kg, model=planner_model if method_model is None else method_model, store=store,
                         **preset).compile(store=store, name=method)

    def ask_method(role: Role, round_no: int, question: str,
                   earlier: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
        """One subgraph call of the method; returns (its output, the run's record). ``replayed_from``
        names the roles whose earlier runs wrote the edge memory this run replayed."""
        out = method_app.invoke({"question": question})
        replayed_edges = {e["edge"] for e in out.get("replayed", {}).get("edges", [])}
        record = {"role": role, "round": round_no, "question": question, "answer": out.get("answer", ""),
                  "evidence_ids": [e["id"] for e in out.get("evidence", [])],
                  "llm_calls": out.get("usage", {}).get("llm_calls", 0), "hops": len(out.get("path", [])),
                  "replayed": list(out.get("replayed", {}).get("nodes", [])),
                  "replayed_from": sorted({r["role"] for r in earlier if replayed_edges & set(r["enhanced"])}),
                  "enhanced": list(out.get("memory_updates", {}).get("enhanced_ids", []))}
        return out, record

    def add_calls(state: PipelineState, role: Role, *usages: dict[str, Any]) -> dict[str, dict[str, int]]:
        roles = {r: dict(v) for r, v in state.get("roles", {}).items()}
        roles[role]["llm_calls"] += sum(u.get("llm_calls", 0) for u in usages)
        return roles

    def start_run(state: PipelineState) -> dict[str, Any]:
        if not state.get("question", "").strip():
            raise KgmemInputError("the question is empty: pass {'question': '...'}")
        # a new run on a thread whose checkpoint holds the previous run starts from nothing
        return {"rounds": 0, "verified": False, "verdicts": [], "method_runs": [], "sub_questions": [],
                "answer": "", "evidence": [], "verifier_replayed": [], "usage": Overwrite(empty_usage()),
                "roles": {"planner": {"llm_calls": 0}, "verifier": {"llm_calls": 0}}}

    def plan(state: PipelineState) -> dict[str, Any]:
        question, verdicts = state["question"], state.get("verdicts", [])
        feedback = ""
        if verdicts:
            last = verdicts[-1]
            feedback = render(FEEDBACK, previous="; ".join(state.get("sub_questions", [])), answer=last["answer"],
                              reason=last["reason"])
        decision, usage = decide(
            planner, Plan, render(PLAN_PROMPT, question=question, feedback=feedback), step="plan",
            offline=lambda: Plan(sub_questions=[question]), validate=_check_plan,
            context={"question": question, "round": state.get("rounds", 0) + 1, "feedback": feedback,
                     "previous_reason": verdicts[-1]["reason"] if verdicts else ""})
        subs = [s.strip() for s in decision.sub_questions if s.strip()][:MAX_SUB_QUESTIONS]
        return {"sub_questions": subs, "rounds": state.get("rounds", 0) + 1, "usage": usage,
                "roles": add_calls(state, "planner", usage)}

    def solve(state: PipelineState) -> dict[str, Any]:
        question, round_no = state["question"], state["rounds"]
        answers: list[str] = []
        asked: list[str] = []
        runs: list[dict[str, Any]] = []
        evidence: dict[str, dict[str, Any]] = {}
        usage: dict[str, Any] = {}
        for sub in state["sub_questions"]:
            asked.append(_fill_references(sub, answers))
            out, record = ask_method("planner", round_no, asked[-1], state.get("method_runs", []) + runs)
            answers.append(record["answer"])
            runs.append(record)
            usage = merge_usage(usage, out.get("usage"))
            evidence.update({e["id"]: e for e in out.get("evidence", []) if e["id"] not in evidence})
        if asked == [question]:  # not decomposed: the method's answer is the answer
            answer, compose_usage = answers[0], {}
        else:
            steps = "\n".join(f"- {q} -> {a}" for q, a in zip(asked, answers))
            steps = steps.replace("{", "{{").replace("}", "}}")  # answer_question formats the prompt again
            answer, compose_usage = answer_question(
                kg, planner, question, list(evidence.values()), step="compose_answer",
                prompt=render(COMPOSE_PROMPT, steps=steps),
                context={"sub_answers": [{"question": q, "answer": a} for q, a in zip(asked, answers)]})
        return {"sub_questions": asked, "answer": answer, "evidence": list(evidence.values()),
                "method_runs": state.get("method_runs", []) + runs, "usage": merge_usage(usage, compose_usage),
                "roles": add_calls(state, "planner", usage, compose_usage)}

    def verify(state: PipelineState) -> dict[str, Any]:
        question, answer, round_no = state["question"], state.get("answer", ""), state["rounds"]
        out, record = ask_method("verifier", round_no, question, state.get("method_runs", []))
        check = record["answer"]
        evidence = {e["id"]: e for e in state.get("evidence", []) + out.get("evidence", [])}
        steps = "\n".join(f"- {r['question']} -> {r['answer']}" for r in state.get("method_runs", [])
                          if r["role"] == "planner" and r["round"] == round_no)

        def in_evidence() -> Verdict:
            # offline: the answer is neither empty nor "no answer" and its words occur in the evidence
            text = _norm(" ".join([check] + [e["text"] for e in evidence.values()]))
            ok = bool(_norm(answer)) and _norm(answer) != "no answer" and f" {_norm(answer)} " in f" {text} "
            return Verdict(ok=ok, reason=f"{answer!r} {'occurs' if ok else 'does not occur'} in the evidence")

        verdict, usage = decide(
            verifier, Verdict, render(VERIFY_PROMPT, question=question, answer=answer, steps=steps or "(none)",
                                      check=check, evidence=format_evidence(list(evidence.values())) or "(none)"),
            step="verify_answer", offline=in_evidence,
            context={"question": question, "answer": answer, "check_answer": check,
                     "evidence_ids": list(evidence), "round": round_no})
        verdicts = state.get("verdicts", []) + [{"round": round_no, "answer": answer, "ok": verdict.ok,
                                                 "reason": verdict.reason, "check_answer": check}]
        return {"verified": verdict.ok, "verdicts": verdicts, "verifier_replayed": record["replayed"],
                "method_runs": state.get("method_runs", []) + [record],
                "usage": merge_usage(out.get("usage"), usage),
                "roles": add_calls(state, "verifier", out.get("usage", {}), usage)}

    def after_verify(state: PipelineState) -> Literal["plan", "__end__"]:
        if state.get("verified") or state.get("rounds", 0) >= max_rounds:
            return END
        return "plan"

    builder = StateGraph(PipelineState, input_schema=InputState, output_schema=PipelineOutput)
    builder.add_node("start_run", start_run)
    builder.add_node("plan", plan)
    builder.add_node("solve", solve)
    builder.add_node("verify", verify)
    builder.add_edge(START, "start_run")
    builder.add_edge("start_run", "plan")
    builder.add_edge("plan", "solve")
    builder.add_edge("solve", "verify")
    builder.add_conditional_edges("verify", after_verify, ["plan", END])
    return builder


# ------------------------------------------------------------------ the offline demo

DOCS = [
    {"id": "doc-tower", "title": "Eiffel Tower", "text": "The Eiffel Tower stands in Paris. The Eiffel Tower was "
     "built by the engineer Gustave Eiffel for the 1889 World's Fair."},
    {"id": "doc-eiffel", "title": "Gustave Eiffel", "text": "Gustave Eiffel was a French civil engineer. "
     "Gustave Eiffel was born in Dijon in 1832."},
    {"id": "doc-dijon", "title": "Dijon", "text": "Dijon is a city in Burgundy. Dijon is famous for its mustard."},
    {"id": "doc-paris", "title": "Paris", "text": "Paris is the capital of France. The Seine flows through Paris."},
]
QUESTION = "In which city was the engineer who built the Eiffel Tower born?"
STEP_1, STEP_2 = "Which engineer built the Eiffel Tower?", "In which city was the engineer #1 born?"
# what the scripted method reader knows: the passages (by title) each question needs, and its answer
READER_KEY = {STEP_1: (["Eiffel Tower"], "Gustave Eiffel"),
              "In which city was the engineer Gustave Eiffel born?": (["Gustave Eiffel"], "Dijon"),
              QUESTION: (["Eiffel Tower", "Gustave Eiffel"], "Dijon")}
# the hashing embedding gives related questions a lower cosine than a semantic model: a replay
# threshold λ of 0.45 (default 0.55) lets memory learned on a sub-question serve the whole question
METHOD_OPTIONS = {"lam": 0.45}


def build_kg() -> KnowledgeGraph:
    """An in-memory KG (hashing embedding, rule-based extraction) over :data:`DOCS`."""
    kg = KnowledgeGraph.in_memory(name="eiffel")
    kg.add_documents(DOCS, model="offline")
    return kg


def scripted_method_model(kg: KnowledgeGraph) -> ScriptedChatModel:
    """The method's offline brain: a competent reader that knows which passages answer each question
    (:data:`READER_KEY`) and walks towards them (as ``targeted`` in tests/test_remindrag.py)."""
    chunk = {n.attrs.get("title"): n.id for n in kg.nodes("chunk")}

    def respond(messages, request):
        question = request.context["question"]
        if question not in READER_KEY:
            raise AssertionError(f"the scripted reader knows only {list(READER_KEY)}, not {question!r}")
        targets = [chunk[t] for t in READER_KEY[question][0]]
        ctx = request.context
        if request.schema is None:
            return READER_KEY[question][1]
        if request.step == "check_sufficiency":
            return {"sufficient": set(targets) <= set(ctx["evidence_ids"])}
        if request.step == "mark_useful":
            return {"useful_ids": [c for c in ctx["candidates"] if c in targets]}
        dist = hop_distances(kg, targets)  # traverse_step: the move closest to a missing passage
        best = lambda ids: min(((dist.get(i, 99), i) for i in ids), default=(999, ""))  # noqa: E731
        fwd = best(ctx["forward"])
        back = min(((best(ctx["frontier"][u])[0], u) for u in ctx["backward"]), default=(999, ""))
        return {"direction": "forward", "node_id": fwd[1]} if fwd[0] <= back[0] else \
            {"direction": "backward", "node_id": back[1]}

    return ScriptedChatModel(responder=respond, model_name="scripted-method")


def scripted_planner_model() -> ScriptedChatModel:
    """The planner's offline brain: its first plan forgets the second hop; with feedback it plans both."""

    def respond(messages, request):
        if request.step == "plan":
            return {"sub_questions": [STEP_1, STEP_2] if request.context["feedback"] else [STEP_1]}
        return request.context["sub_answers"][-1]["answer"]  # compose_answer: the last step's answer

    return ScriptedChatModel(responder=respond, model_name="scripted-planner")


def scripted_verifier_model() -> ScriptedChatModel:
    """The verifier's offline brain: accepts the answer only if its own retrieval of the whole question agrees."""

    def respond(messages, request):
        ctx = request.context
        if _norm(ctx["answer"]) == _norm(ctx["check_answer"]):
            return {"ok": True, "reason": f"the evidence gives {ctx['check_answer']!r} for the whole question"}
        return {"ok": False, "reason": f"the evidence answers the whole question with {ctx['check_answer']!r}, "
                                       f"not {ctx['answer']!r}: a step of the question is missing"}

    return ScriptedChatModel(responder=respond, model_name="scripted-verifier")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the pipeline on :data:`QUESTION` and print what each role did; returns the output."""
    argv = sys.argv[1:] if argv is None else list(argv)
    kg = build_kg()
    if "--llm" in argv:
        planner = verifier = method_model = resolve_model(None)
    else:
        planner, verifier, method_model = scripted_planner_model(), scripted_verifier_model(), scripted_method_model(kg)
    checkpointer, store = kg.persistence()  # in-memory KG: InMemorySaver + InMemoryStore, shared by both roles
    app = build_pipeline(kg, planner_model=planner, verifier_model=verifier, method_model=method_model,
                         store=store, method_options=METHOD_OPTIONS).compile(checkpointer=checkpointer, store=store)
    out = app.invoke({"question": QUESTION}, {"configurable": {"thread_id": "pipeline"}})

    print(f"Question: {QUESTION}")
    for verdict in out["verdicts"]:
        print(f"round {verdict['round']}")
        for run in (r for r in out["method_runs"] if r["round"] == verdict["round"]):
            replayed = [kg.node(n).attrs.get("title") or kg.node(n).text for n in run["replayed"]]
            source = f" (learned by the {' and '.join(run['replayed_from'])})" if run["replayed_from"] else ""
            print(f"  {run['role']:<8} asks {run['question']!r} -> {run['answer']!r}: {run['llm_calls']} LLM calls, "
                  f"{run['hops']} hop(s) walked, replayed {replayed or 'nothing'}{source}")
        print(f"  planner  answer: {verdict['answer']!r}")
        print(f"  verifier verdict: {'accepted' if verdict['ok'] else 'rejected'} ({verdict['reason']})")
    print(f"Answer: {out['answer']!r} ({'verified' if out['verified'] else 'NOT verified'} "
          f"after {out['rounds']} round(s))")
    roles = out["roles"]
    print(f"LLM calls: planner {roles['planner']['llm_calls']}, verifier {roles['verifier']['llm_calls']}, "
          f"total {out['usage']['llm_calls']}")
    print(f"Shared memory: {len(store.search(('kgmem', kg.name, 'edge_memory'), limit=1000))} edge memories in "
          f"store namespace ('kgmem', {kg.name!r}, 'edge_memory')")
    kg.close()
    return out


if __name__ == "__main__":
    main()
