"""ReMindRAG: LLM-guided KG traversal that remembers which edges helped (docs/methods/remindrag.md).

Every edge of the KG owns a memory vector ``v`` (zero until first used) kept in the LangGraph
store, namespace ``("kgmem", <kg name>, "edge_memory")``. A question first *replays* memory: a DFS
from the seed entities follows the edges whose weight
``w = α·cos(emb(a), emb(b)) + (1−α)·(q̂·v_ab)`` exceeds ``λ``, with no LLM at all. If what replay
found is not sufficient, an LLM walks the graph one hop per decision (forward to a neighbour of the
current node, or backward to a node already visited) until it is, or until the caps stop it.
After answering, one LLM call marks the useful evidence; the edges on the paths from the seeds to
it are *enhanced* (``v ← v + δ(‖v‖)·q̂``), the rest of the subgraph is *penalised*
(``p = v·q̂; v ← v − δ(|p|)·p·q̂``), with ``δ(x) = (2/π)·cos(πx/2)`` on [0, 1] and 0 beyond.
The same question asked again is then answered from replay: fewer LLM calls and tokens.

Evidence units: a chunk and its anchor count as one unit named by the chunk id (the KG links
entities to chunks with ``context`` edges and the chunk to its anchor with ``anchor_chunk``);
``next`` edges between anchors link consecutive chunks of a document.

Nodes (in order): ``retrieve_seeds`` → ``replay_memory`` → ``check_sufficiency`` ⇄
``traverse_step`` → ``answer`` → ``memorize`` (only when the traversal ran).
With ``human_in_the_loop=True`` a person makes each traversal move (``interrupt`` / ``Command(resume=...)``).

Every option but ``memory_scope``, ``synonym_threshold`` and ``human_in_the_loop`` can be set per
run: ``app.invoke(inputs, context={"max_hops": 3, "lam": 0.7})``
(:class:`~langgraph_kgmem.graphs.remindrag.options.RemindragOptions`).

Package layout: ``options`` (the validated options, the graph's context schema), ``schemas``
(constants, state, decisions), ``prompts`` (and the evidence text they quote), ``maths`` (the edge
memory's weights and updates), ``view`` (evidence units, cached expansions, paths), ``deps`` (what
the nodes share), ``nodes`` (module-level node functions and routers), ``graph`` (the factory).
"""

from __future__ import annotations

from langgraph_kgmem.graphs.remindrag.graph import create_remindrag_graph
from langgraph_kgmem.graphs.remindrag.maths import delta, enhance, penalize, replay_weights
from langgraph_kgmem.graphs.remindrag.options import RemindragOptions
from langgraph_kgmem.graphs.remindrag.schemas import (NextMove, ReMindOutput, ReMindState, SubQuestions, Sufficiency,
                                                      UsefulMarks, read_person_move)
from langgraph_kgmem.graphs.remindrag.view import effective_edges, hop_distances
from langgraph_kgmem.graphs.remindrag.memory_view import EDGE_MEMORY
from langgraph_kgmem.graphs.spec import MethodSpec

SPEC = MethodSpec(
    name="remindrag",
    factory=create_remindrag_graph,
    options=RemindragOptions,
    summary="ReMindRAG: LLM-guided node/edge traversal whose edge memory makes repeated questions cheaper.",
    description="Walks the KG from the question's entities, one LLM decision per hop, until the collected "
                "facts and passages suffice; the edges that led to a useful answer are remembered (a vector per "
                "edge in the store), so the same or a similar question later replays the path without LLM hops.",
    agent_description="Answer a factual question from the knowledge graph by walking it entity by entity "
                      "(ReMindRAG). Good for multi-hop questions ('the wife of the man who ...'); it remembers "
                      "useful paths, so asking a similar question again is cheaper.",
    requirements=frozenset({"store"}),
    output_keys=("answer", "evidence", "usage", "method", "model", "run_id", "seed_ids", "path", "replayed", "memory_updates",
                 "stop_reason", "fusion"),
    memory=(EDGE_MEMORY,),
)


__all__ = ["create_remindrag_graph", "RemindragOptions", "SPEC", "hop_distances"]
