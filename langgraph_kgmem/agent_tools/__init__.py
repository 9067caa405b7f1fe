"""LangChain tools over a KG: RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree, and with
``writable=True`` Remember (an agent writes what it learned into the KG, with provenance).

``create_kgmem_tools(kg)`` returns them bound to one graph, ready for ``bind_tools``, a
``ToolNode`` or ``create_agent``. Observations are plain sentences an LLM can act on; the KG's own
text in them (names, features, relations, remembered facts and sources) comes inside the prompt
fence, ``<data>...</data>``, as every prompt of the package quotes documents, and each tool's
description says what the fence means (:data:`~langgraph_kgmem.llm.prompts.DATA_NOTE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from langgraph_kgmem.llm.prompts import DATA_NOTE, fence
from langgraph_kgmem.agent_tools.graph_env import GraphEnv, load_grbench

if TYPE_CHECKING:
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph


class RetrieveNodeArgs(BaseModel):
    """The arguments of the RetrieveNode tool."""
    keyword: str = Field(description="words naming the thing to find, e.g. 'Marie Curie'")


class NodeFeatureArgs(BaseModel):
    """The arguments of the NodeFeature tool."""
    node_id: str = Field(description="a node id returned by RetrieveNode or NeighbourCheck")
    feature: str = Field(description="the attribute to read, e.g. 'name', 'description', 'year'")


class NeighbourArgs(BaseModel):
    """The arguments of the NeighbourCheck and NodeDegree tools."""
    node_id: str = Field(description="a node id returned by RetrieveNode or NeighbourCheck")
    relation: str = Field(description="the relation to follow, e.g. 'author' or 'was born in'")


class RememberArgs(BaseModel):
    """The arguments of the Remember tool: one fact and where it comes from."""
    subject: str = Field(description="the entity the fact is about, e.g. 'Marie Curie'")
    relation: str = Field(description="a short relation phrase, e.g. 'was born in'")
    object: str = Field(description="the other entity or value, e.g. 'Warsaw'")
    source: str = Field(description="where the fact comes from: a URL, a document title, or 'user said'")


MAX_REMEMBER_CHARS = {"subject": 200, "relation": 200, "object": 200, "source": 500}


def remember(kg: "KnowledgeGraph", subject: str, relation: str, object: str, source: str) -> str:
    """Write one fact into ``kg`` as its own document (id ``remembered-<hash>``, the source kept in
    the document's metadata, so ``kgmem docs`` shows it and ``kgmem delete`` removes it); entities
    merge into existing ones as in any ingest. Returns an observation; bad arguments are
    explained, not raised, so the agent can correct itself."""
    from langgraph_kgmem.errors import KgmemError
    from langgraph_kgmem.kg.types import content_hash

    values = {"subject": subject, "relation": relation, "object": object, "source": source}
    for key, value in values.items():
        if not isinstance(value, str) or not value.strip():
            return f"Not remembered: {key} must be non-empty text."
        if len(value) > MAX_REMEMBER_CHARS[key]:
            return f"Not remembered: {key} is longer than {MAX_REMEMBER_CHARS[key]} characters; shorten it."
    s, r, o, src = (v.strip() for v in (subject, relation, object, source))
    doc_id = "remembered-" + content_hash(s, r, o, src)
    try:
        report = kg.add_triples([(s, r, o)], source=doc_id, meta={"remembered_from": src, "by": "Remember tool"})
    except KgmemError as exc:
        return f"Not remembered: {exc}"
    fact, origin = fence(f"{s} {r} {o}", inline=True), fence(src, inline=True)
    if report.documents_skipped:
        return f"Already remembered: {fact} (from {origin})."
    return f"Remembered: {fact} (from {origin}; document {doc_id})."


def create_kgmem_tools(kg: "KnowledgeGraph", *, top_n: int = 1, writable: bool = False) -> list[BaseTool]:
    """The four graph-access tools bound to ``kg`` (RetrieveNode returns the top ``top_n`` ids);
    ``writable=True`` adds Remember (:func:`remember`)."""
    env = GraphEnv(kg, fenced=True)   # an outer agent reads the KG's text as quoted data
    note = " " + DATA_NOTE
    tools = [
        StructuredTool.from_function(
            lambda keyword: env.retrieve_node(keyword, top_n), name="RetrieveNode", args_schema=RetrieveNodeArgs,
            description="Find the id of the graph node whose text best matches a keyword. Start here: other "
                        "tools need node ids." + note),
        StructuredTool.from_function(
            env.node_feature, name="NodeFeature", args_schema=NodeFeatureArgs,
            description="Read one feature (attribute) of a node, e.g. its name or description. An unknown "
                        "feature returns the list of available ones." + note),
        StructuredTool.from_function(
            env.neighbour_check, name="NeighbourCheck", args_schema=NeighbourArgs,
            description="List the ids of a node's neighbours along a relation. An unknown relation returns "
                        "the node's relations." + note),
        StructuredTool.from_function(
            env.node_degree, name="NodeDegree", args_schema=NeighbourArgs,
            description="Count a node's neighbours along a relation (use for 'how many' questions)." + note),
    ]
    if writable:
        tools.append(StructuredTool.from_function(
            lambda subject, relation, object, source: remember(kg, subject, relation, object, source),
            name="Remember", args_schema=RememberArgs,
            description="Store one fact you learned (subject, relation, object) in the knowledge graph, with "
                        "its source, so later questions can use it. Use it for facts worth keeping, not guesses." + note))
    return tools


__all__ = ["create_kgmem_tools", "GraphEnv", "load_grbench"]
