"""LangChain tools over a KG: RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree.

``create_kgmem_tools(kg)`` returns them bound to one graph, ready for ``bind_tools``, a
``ToolNode`` or ``create_agent``. Observations are plain sentences an LLM can act on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from langgraph_kgmem.tools.graph_env import GraphEnv, load_grbench

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraph


class RetrieveNodeArgs(BaseModel):
    keyword: str = Field(description="words naming the thing to find, e.g. 'Marie Curie'")


class NodeFeatureArgs(BaseModel):
    node_id: str = Field(description="a node id returned by RetrieveNode or NeighbourCheck")
    feature: str = Field(description="the attribute to read, e.g. 'name', 'description', 'year'")


class NeighbourArgs(BaseModel):
    node_id: str = Field(description="a node id returned by RetrieveNode or NeighbourCheck")
    relation: str = Field(description="the relation to follow, e.g. 'author' or 'was born in'")


def create_kgmem_tools(kg: "KnowledgeGraph", *, top_n: int = 1) -> list[BaseTool]:
    """The four graph-access tools bound to ``kg`` (RetrieveNode returns the top ``top_n`` ids)."""
    env = GraphEnv(kg)
    return [
        StructuredTool.from_function(
            lambda keyword: env.retrieve_node(keyword, top_n), name="RetrieveNode", args_schema=RetrieveNodeArgs,
            description="Find the id of the graph node whose text best matches a keyword. Start here: other "
                        "tools need node ids."),
        StructuredTool.from_function(
            env.node_feature, name="NodeFeature", args_schema=NodeFeatureArgs,
            description="Read one feature (attribute) of a node, e.g. its name or description. An unknown "
                        "feature returns the list of available ones."),
        StructuredTool.from_function(
            env.neighbour_check, name="NeighbourCheck", args_schema=NeighbourArgs,
            description="List the ids of a node's neighbours along a relation. An unknown relation returns "
                        "the node's relations."),
        StructuredTool.from_function(
            env.node_degree, name="NodeDegree", args_schema=NeighbourArgs,
            description="Count a node's neighbours along a relation (use for 'how many' questions)."),
    ]


__all__ = ["create_kgmem_tools", "GraphEnv", "load_grbench"]
