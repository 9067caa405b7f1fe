"""Methods and graph-access tools driven by a ReAct agent (``langchain.agents.create_agent``).

The agent's model is a ScriptedChatModel that issues tool calls and then answers from what the
tools returned; the methods themselves run offline.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from method_cases import QUESTION, RECORDS_CSV, method_case, pick

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import METHODS
from langgraph_kgmem.testing import ScriptedChatModel


def answer_from_tool(messages, request):
    """Agent script: first call the tool named in the user message, then answer from its result."""
    tool_results = [m for m in messages if isinstance(m, ToolMessage)]
    if not tool_results:
        tool = re.search(r"use (\w+)", messages[-1].content).group(1)
        return {"tool_calls": [{"name": tool, "args": {"question": QUESTION}}], "content": ""}
    result = json.loads(tool_results[-1].content)
    return AIMessage(f"{result['answer']} [evidence: {', '.join(result['evidence_ids'])}]")


def test_method_tool_has_actionable_description_and_schema(kg, store):
    from langgraph_kgmem.agents import create_method_tool

    method = pick("catrag", "hipporag2", "remindrag")
    tool = create_method_tool(kg, method, model="offline", store=store)
    assert tool.name == f"ask_{method}"
    assert "question" in tool.description and "evidence_ids" in tool.description
    assert set(tool.args) == {"question"}
    out = tool.invoke({"question": QUESTION})
    assert set(out) >= {"answer", "evidence_ids", "evidence", "llm_calls"}
    assert out["answer"] and out["evidence_ids"]
    assert all(kg.node(i) is not None or kg.edge(i) is not None for i in out["evidence_ids"])
    assert out["llm_calls"] == 0
    # async path gives the same structured result
    assert asyncio.run(tool.ainvoke({"question": QUESTION}))["evidence_ids"] == out["evidence_ids"]


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_becomes_a_tool(kg, store, method):
    from langgraph_kgmem.agents import METHOD_DESCRIPTIONS, create_method_tool

    kg, question, _ = method_case(method, kg)
    tool = create_method_tool(kg, method, model="offline", store=store)
    assert tool.name == f"ask_{method}" and METHOD_DESCRIPTIONS[method] in tool.description
    out = tool.invoke({"question": question})
    assert out["answer"].strip() and out["evidence_ids"]
    assert all(kg.node(i) is not None or kg.edge(i) is not None for i in out["evidence_ids"])


def test_agent_calls_a_method_tool_and_its_result_reaches_the_answer(kg, store):
    from langchain.agents import create_agent

    from langgraph_kgmem.agents import create_method_tool

    method = pick("catrag", "hipporag2", "remindrag")
    tool = create_method_tool(kg, method, model="offline", store=store)
    agent_model = ScriptedChatModel(responder=answer_from_tool)
    agent = create_agent(agent_model, [tool], system_prompt="Answer from the knowledge graph tools.")
    out = agent.invoke({"messages": [("user", f"{QUESTION} (use {tool.name})")]})

    calls = [c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["name"] for c in calls] == [tool.name]
    tool_msgs = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 1 and tool_msgs[0].name == tool.name
    result = json.loads(tool_msgs[0].content)  # structured: JSON with answer and evidence ids
    assert result["answer"] and result["evidence_ids"]
    final = out["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert result["answer"] in final.content
    assert all(i in final.content for i in result["evidence_ids"])
    # the agent model saw the tool's schema
    assert tool.name in json.dumps(agent_model.calls[0]["tools"])


def test_agent_uses_graph_access_tools_step_by_step(kg, store):
    from langchain.agents import create_agent

    from langgraph_kgmem.agents import create_all_tools

    tools = create_all_tools(kg, methods=[], store=store)  # graph tools only
    assert [t.name for t in tools] == ["RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree"]

    def script(messages, request):
        seen = [m for m in messages if isinstance(m, ToolMessage)]
        if not seen:
            return {"tool_calls": [{"name": "RetrieveNode", "args": {"keyword": "Marie Curie"}}]}
        if len(seen) == 1:
            node_id = re.search(r"is (ent-[0-9a-f]+)", seen[0].content).group(1)
            return {"tool_calls": [{"name": "NeighbourCheck", "args": {"node_id": node_id, "relation": "born in"}}]}
        return AIMessage("Found: " + seen[-1].content)

    agent = create_agent(ScriptedChatModel(responder=script), tools)
    out = agent.invoke({"messages": [("user", QUESTION)]})
    names = [m.name for m in out["messages"] if isinstance(m, ToolMessage)]
    assert names == ["RetrieveNode", "NeighbourCheck"]
    assert out["messages"][-2].content in out["messages"][-1].content


def test_create_all_tools_lists_every_method_and_the_graph_tools(kg, store):
    from langgraph_kgmem.agents import create_all_tools

    tools = create_all_tools(kg, model="offline", store=store)
    names = [t.name for t in tools]
    assert names[-4:] == ["RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree"]
    assert names[:-4] == [f"ask_{m}" for m in METHODS if m != "kgirag"]   # kg has no records
    assert len(set(names)) == len(names)
    records = KnowledgeGraph.in_memory(name="records")
    records.add_records(RECORDS_CSV, event_rule="rain_mm > 0", event_name="rain")
    assert "ask_kgirag" in [t.name for t in create_all_tools(records, model="offline", store=store)]


def test_unknown_method_is_named_in_the_error(kg, store):
    from langgraph_kgmem.agents import create_all_tools, create_method_tool

    with pytest.raises(KgmemInputError, match="unknown method 'graphrag'"):
        create_method_tool(kg, "graphrag", store=store)
    with pytest.raises(KgmemInputError, match="unknown method 'graphrag'"):
        create_all_tools(kg, methods=["catrag", "graphrag"], store=store)


def test_tool_memory_persists_between_calls_through_the_shared_store(kg, store):
    from langgraph_kgmem.agents import create_method_tool

    method = pick("remindrag", "autopruned", "r3cycle")
    tool = create_method_tool(kg, method, model="offline", store=store)
    tool.invoke({"question": QUESTION})
    tool.invoke({"question": QUESTION})
    namespaces = store.list_namespaces(prefix=("kgmem", kg.name))
    assert namespaces, f"{method} kept no memory for this question offline"
    assert all(ns[:2] == ("kgmem", kg.name) for ns in namespaces)
