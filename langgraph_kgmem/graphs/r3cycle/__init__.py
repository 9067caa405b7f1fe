"""R3-Cycle: a graph agent that reasons, retrospects and replans (Graph-CoT with reflection).

The agent answers a question by exploring a GRBench-style graph environment with four tools
(RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree) and ends with Finish. An *attempt* is the
Graph-CoT loop Thought → Action → Observation, bounded by a step budget. When an attempt fails
(a verifier rejects its answer, or it halts at the budget), a reflection diagnoses the failure
(root cause, corrective advice, retry?) and the agent replans: a new attempt in a *reset*
context — only the question plus the reflection's guidance, never the old transcript — with the
same budget after a wrong answer and 1.5× the budget after a halt. ``reflection=False`` is plain
Graph-CoT, the baseline.

Nodes (in order):

- ``start_run``: a run id, attempt 0 with ``max_steps`` as its budget.
- ``reason``: the model (``bind_tools`` with the KG tools + Finish) emits a thought and exactly
  one tool call; offline, a documented heuristic agent decides (see :func:`offline_action`).
- ``act``: executes the call; tool errors and unknown tools become observations.
- ``record``: the memory module: full log (thought, action, observation) and the structured
  knowledge path (node/relation hops), persisted after every step in the BaseStore
  (``RecordMemory`` kind ``trajectories``, key ``"<run_id>-<attempt>"``, namespace per KG).
- ``verify``: the pluggable verifier judges a finished attempt (default: an LLM self-check
  against the collected observations); a halted attempt has failed without asking.
- ``reflect``: typed :class:`Reflection` (root cause, advice, retry), persisted under kind
  ``reflections``.
- ``replan``: opens the next attempt (reset context, adaptive budget). ``max_cycles`` bounds
  the number of retries.
- ``finish_run``: answer, evidence (nodes visited by the answering attempt), attempts, reflections.

Each attempt's state is in the thread's checkpoints (``app.get_state_history(config)``).

Per-run knobs (``app.invoke(inputs, context={"max_steps": 4, "max_cycles": 0})``): the model,
``max_steps``, ``max_cycles``, ``top_n`` and ``verifier``; ``reflection`` and ``memory_scope`` are
fixed at build (:class:`~langgraph_kgmem.graphs.r3cycle.options.R3cycleOptions`).

Package layout: ``options`` (the validated options, the graph's context schema), ``schemas``
(constants, state, decisions), ``prompts`` (and the transcript they quote), ``offline`` (the
heuristic agent), ``records`` (verifiers, memory records, :func:`load_run`), ``deps`` (the
environment, its tools and the bound models the nodes share), ``nodes`` (module-level node
functions and routers), ``graph`` (the factory).
"""

from __future__ import annotations

from langgraph_kgmem.graphs.r3cycle.graph import create_r3cycle_graph
from langgraph_kgmem.graphs.r3cycle.offline import entity_span, offline_action
from langgraph_kgmem.graphs.r3cycle.options import R3cycleOptions
from langgraph_kgmem.graphs.r3cycle.records import exact_match_verifier, load_run
from langgraph_kgmem.graphs.r3cycle.schemas import TOOL_CALLS, Reflection, ToolStep, Verdict, Verifier, VerifierState
from langgraph_kgmem.graphs.r3cycle.memory_view import REFLECTIONS, TRAJECTORIES
from langgraph_kgmem.graphs.spec import MethodSpec, Preset

SPEC = MethodSpec(
    name="r3cycle",
    factory=create_r3cycle_graph,
    options=R3cycleOptions,
    summary="R3-Cycle: reason, retrieve with graph tools, reflect; reflections kept in memory.",
    description="A ReAct-style loop over graph tools (RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree, "
                "Finish); a failed attempt is diagnosed by a reflection call and retried in a clean context with "
                "the advice and an adapted step budget. Trajectories and reflections persist in the store.",
    agent_description="Answer a hard question by reasoning over the knowledge graph with graph lookups and "
                      "reflecting on failed attempts (R3-Cycle). Slowest; use when the fast tools gave no answer.",
    requirements=frozenset({"store", "tool_calling", "graph_env"}),
    output_keys=("answer", "evidence", "usage", "method", "model", "attempts", "reflections", "run_id"),
    presets=(Preset(
        name="graphcot",
        options={"reflection": False},
        summary="Graph-CoT baseline: R3-Cycle without reflection.",
        agent_description="Answer a question by step-by-step reasoning with knowledge-graph lookups (Graph-CoT, no "
                          "reflection)."),),
    memory=(TRAJECTORIES, REFLECTIONS),
)


__all__ = ["create_r3cycle_graph", "R3cycleOptions", "SPEC", "Verdict", "VerifierState", "exact_match_verifier",
           "load_run"]
