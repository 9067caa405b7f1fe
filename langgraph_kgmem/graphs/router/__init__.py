"""Router: one question, the method that fits it (docs/methods/router.md).

A first node reads what the KG holds (documents, time-stamped records, a typed graph), the
question's form (a time and a place for records, a named graph node, relational hops, a single
lookup), whether the question was asked before, and the per-KG, per-tenant statistics of past
outcomes (confidence, LLM calls, seconds, feedback) kept in the store; it picks a method by
documented rules moved by those statistics (with a chat model, a typed decision when the rules
are not sure, the rules as its fallback) and runs that method's graph as a subgraph, compiled
once when the router is built. Where the form allows, a cheap method runs first and a costlier
one only when the cheap result's own confidence is low; ``budget`` caps the LLM calls a question.

Nodes: ``route_question`` → ``run_<method>`` (→ ``run_<costlier method>``) → ``finish_route``.
The output is the chosen method's answer, evidence and usage, plus ``route`` (the method, why,
the alternatives with their expected cost, what ran), ``passages`` (the answering method's passage
ranking, its places after the first few completed by question coverage over every run's ranking:
``cover``) and ``run_id``: feedback given on that run (``MethodSpec.on_feedback``) counts for the
method the router chose.

Package layout: ``options``, ``schemas`` (state, output, the decision), ``prompts``, ``signals``
(KG profile, question form), ``policy`` (rules, statistics, confidence), ``cover`` (the passage
ranking), ``stats`` (the store
records and the feedback hook), ``nodes``, ``graph`` (the factory).
"""

from __future__ import annotations

from langgraph_kgmem.graphs.router.graph import create_router_graph
from langgraph_kgmem.graphs.router.options import DEFAULT_METHODS, RouterOptions
from langgraph_kgmem.graphs.router.policy import confidence
from langgraph_kgmem.graphs.router.schemas import RouteDecision, RouterOutput, RouterState
from langgraph_kgmem.graphs.router.signals import KgProfile, QuestionForm, kg_profile, question_form
from langgraph_kgmem.graphs.router.stats import ROUTES_KIND, on_feedback
from langgraph_kgmem.graphs.spec import MethodSpec

SPEC = MethodSpec(
    name="router",
    factory=create_router_graph,
    options=RouterOptions,
    summary="Router: picks the method per question (records, graph, multi-hop or single lookup) and learns "
            "from outcomes.",
    description="Reads what the KG holds and the question's form, picks the method that fits (KG-IRAG for "
                "time-stamped records, R3-Cycle for a typed graph, CatRAG for multi-hop questions, HippoRAG 2 "
                "first for a single lookup) and runs it as a subgraph; escalates to a costlier method only when "
                "the cheap result's own confidence is low, within an LLM-call budget; keeps per-KG statistics of "
                "outcomes and feedback that move later choices.",
    agent_description="Answer any question about the knowledge graph (documents, time-stamped records or a typed "
                      "graph): the router picks the retrieval method that fits the question and says which it "
                      "used. Use when unsure which method to call.",
    output_keys=("answer", "evidence", "usage", "method", "model", "route", "run_id", "result", "passages"),
    on_feedback=on_feedback,
)


__all__ = ["create_router_graph", "RouterOptions", "SPEC"]
