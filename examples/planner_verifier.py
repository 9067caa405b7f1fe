"""A planner/verifier pipeline: R3-Cycle plans and answers, a *separate* LangGraph agent verifies.

- The planner is the R3-Cycle graph (``create_r3cycle_graph``) over a GRBench-format book graph.
- The verifier is its own agent, built with ``langchain.agents.create_agent`` over the same KG
  tools: it re-derives the answer from the graph and returns a verdict ``{"ok", "reason"}``. A
  small wrapper graph turns R3-Cycle's ``(question, answer, evidence)`` into the agent's chat and
  its last message into the verdict; R3-Cycle accepts that compiled graph as ``verifier=``.
- When the verifier rejects an answer, R3-Cycle reflects and retries in a clean context.

Runs offline with scripted models (no LLM): the planner slips on its first attempt (it answers
after the first lookup with a guess), the verifier agent catches it, the retry gets it right.
``--llm`` uses $KGMEM_MODEL for both agents instead.

    python examples/planner_verifier.py [--llm]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

from langgraph_kgmem import KnowledgeGraph  # noqa: E402
from langgraph_kgmem.agent_tools.graphqa import make_domain_graph, make_questions  # noqa: E402
from langgraph_kgmem.graphs.r3cycle import VerifierState, create_r3cycle_graph, load_run, offline_action  # noqa: E402
from langgraph_kgmem.llm import resolve_model  # noqa: E402
from langgraph_kgmem.testing import ScriptedChatModel  # noqa: E402
from langgraph_kgmem.agent_tools import GraphEnv, create_kgmem_tools, load_grbench  # noqa: E402

VERIFIER_PROMPT = """You verify answers against a knowledge graph. Use the tools to look the facts up
yourself, then reply with one JSON object {"ok": true|false, "reason": "..."} and nothing else."""


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


# ------------------------------------------------------------------ scripted stand-ins for LLMs


def knowledge_path(env: GraphEnv, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The retrieve/neighbour hops of a list of steps (ids read from the observations)."""
    path = []
    for s in steps:
        words = s["observation"].replace("(", " ").replace(",", " ").replace(".", " ").split()
        ids = [i for i in words if env.kg.node(i) is not None and i != s["args"].get("node_id")]
        if s["tool"] == "RetrieveNode":
            path.append({"op": "retrieve", "keyword": s["args"].get("keyword", ""), "to": ids})
        elif s["tool"] == "NeighbourCheck":
            path.append({"op": "neighbours", "from": s["args"]["node_id"], "relation": s["args"]["relation"],
                         "to": ids})
    return path


def scripted_verifier_model(env: GraphEnv) -> ScriptedChatModel:
    """The verifier agent's offline brain: re-derive the answer with the heuristic graph agent
    (tool call by tool call, reading the tool messages), then compare with the proposed answer."""

    def responder(messages, request):
        human = next(m for m in messages if m.type == "human").content
        question = human.split("Question: ", 1)[1].split("\n", 1)[0]
        proposed = human.split("Proposed answer: ", 1)[1].split("\n", 1)[0]
        steps = []
        for m in messages:      # replay the agent's own tool calls and observations
            if m.type == "ai" and m.tool_calls:
                call = m.tool_calls[0]
                steps.append({"tool": call["name"], "args": call["args"], "observation": ""})
            elif m.type == "tool" and steps:
                # the tools fence the KG's text (<data>...</data>); a model reads it as quoted data,
                # this heuristic stand-in wants the plain sentence back
                steps[-1]["observation"] = m.content.replace("<data>", "").replace("</data>", "")
        thought, tool, args = offline_action(env, question, steps, knowledge_path(env, steps))
        if tool != "Finish":
            return {"content": thought, "tool_calls": [{"name": tool, "args": args}]}
        ok = _norm(args["answer"]) == _norm(proposed)
        return json.dumps({"ok": ok, "reason": f"the graph gives {args['answer']!r}"})

    return ScriptedChatModel(responder=responder, model_name="scripted-verifier")


def scripted_planner_model(env: GraphEnv) -> ScriptedChatModel:
    """The planner's offline brain: the heuristic agent, except that on its first attempt it
    stops after the first lookup and guesses; the reflection names the slip."""

    def responder(messages, request):
        ctx = request.context
        if request.step == "reflect":
            return {"root_cause": "the attempt answered with a guess before reading the graph",
                    "advice": "Retrieve the book, follow its 'author' relation, read the author's 'country' "
                              "feature, then Finish with it.", "retry": True}
        steps = ctx["steps"]
        if ctx["attempt"] == 0 and len(steps) == 1:
            return {"content": "I think I know this one.",
                    "tool_calls": [{"name": "Finish", "args": {"answer": "Norway"}}]}
        thought, tool, args = offline_action(env, ctx["question"], steps, knowledge_path(env, steps),
                                             ctx.get("guidance", ""))
        return {"content": thought, "tool_calls": [{"name": tool, "args": args}]}

    return ScriptedChatModel(responder=responder, model_name="scripted-planner")


# ------------------------------------------------------------------ the verifier agent


def build_verifier(kg: KnowledgeGraph, model: Any):
    """A separate agent (create_agent + KG tools) wrapped as a (question, answer, evidence) -> verdict graph."""
    agent = create_agent(model, create_kgmem_tools(kg), system_prompt=VERIFIER_PROMPT, name="verifier_agent")

    def ask_agent(state: VerifierState) -> dict[str, Any]:
        out = agent.invoke({"messages": [HumanMessage(
            f"Question: {state['question']}\nProposed answer: {state['answer']}\n"
            "Check it against the graph.")]})
        text = out["messages"][-1].content
        try:
            verdict = json.loads(text[text.index("{"): text.rindex("}") + 1])
        except ValueError:
            verdict = {"ok": False, "reason": f"unreadable verdict: {text[:200]}"}
        return {"ok": bool(verdict.get("ok")), "reason": str(verdict.get("reason", ""))}

    builder = StateGraph(VerifierState)
    builder.add_node("ask_agent", ask_agent)
    builder.add_edge(START, "ask_agent")
    builder.add_edge("ask_agent", END)
    return builder.compile()


def main() -> None:
    kg = KnowledgeGraph.in_memory(name="books")
    data = make_domain_graph(seed=0)
    load_grbench(kg, data)
    env = GraphEnv(kg)
    question = next(q for q in make_questions(data, n=30, seed=0) if q.template == "author_country_of_book")
    if "--llm" in sys.argv:
        planner_model = verifier_model = resolve_model(None)
    else:
        planner_model, verifier_model = scripted_planner_model(env), scripted_verifier_model(env)

    verifier = build_verifier(kg, verifier_model)
    checkpointer, store = kg.persistence()
    planner = create_r3cycle_graph(kg, model=planner_model, verifier=verifier, max_steps=8)
    app = planner.compile(checkpointer=checkpointer, store=store)
    out = app.invoke({"question": question.question}, {"configurable": {"thread_id": "planner-verifier"}})

    print(f"Question: {question.question}   (gold: {question.answer})")
    for a in out["attempts"]:
        calls = " -> ".join(f"{s['tool']}({', '.join(map(str, s['args'].values()))})" for s in a["steps"])
        print(f"  attempt {a['attempt']} (budget {a['budget']}): {calls}")
        print(f"    outcome: {a['outcome']}; verifier: {a['verdict']['reason']}")
    for r in out["reflections"]:
        print(f"  reflection: {r['root_cause']} | advice: {r['advice']}")
    print(f"Answer: {out['answer']!r}; evidence: {[e['text'] for e in out['evidence']]}")
    u = out["usage"]
    print(f"Planner usage: {u['llm_calls']} LLM calls, {u['prompt_tokens']} prompt tokens, "
          f"longest prompt {u['max_prompt_tokens']} tokens")
    saved = load_run(store, kg.name, out["run_id"])
    print(f"Persisted: {len(saved['trajectories'])} trajectories, {len(saved['reflections'])} reflections "
          f"(store namespace ('kgmem', {kg.name!r}, ...))")


if __name__ == "__main__":
    main()
