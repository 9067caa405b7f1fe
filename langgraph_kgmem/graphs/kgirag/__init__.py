"""KG-IRAG: iterative retrieval over a temporal knowledge graph (docs/methods/kgirag.md).

The KG holds time-stamped records as ``time``/``location``/``event`` nodes with
(t —temporal→ l), (l —spatial→ e), (t —causal→ e) and (t —time_next→ t+1) edges
(see :func:`langgraph_kgmem.ingest.records.add_records`). Questions ask whether a trip of Δt
hours leaving at t meets an abnormal event (rain, heavy traffic), and if so the latest departure
before t or the earliest after t that avoids it within a horizon L.

Nodes:

- ``plan_query`` (LLM1): the task (detect / latest / earliest), location, departure time, trip
  length, horizon, the step (hours of time chain per hop), K(0), and a reasoning prompt stating
  the event rule and the stop criterion. The initial anchor (τ0, ℓ0) follows from them.
  Offline: the question generator's templates parsed exactly, else a regex reading of the time,
  duration and "before/after".
- ``retrieve_triples``: the triples of the K(t)-hop neighbourhood of the anchor along the time
  chain — K(t)·step time nodes from τ(t) in the search direction, with, for each, its
  temporal/causal edges to location ℓ and its event, the event's spatial edge and the time_next
  links — where K(t) = ⌈2 − log2(1 + |R(t−1)| / |R(0)|)⌉ (K ≥ 1; :func:`hop_count`).
- ``judge_retrieval`` (LLM2): stop (the records read so far settle the answer) or the next anchor,
  which may jump past an abnormal event instead of stepping by one. Offline: a rule-based scan
  (:func:`scan_records`) over the records read, using each event's ``abnormal`` flag (the ingest
  event rule); it is exact on the generator's questions.
- ``synthesize_answer`` (LLM1): the answer from all retrieved triples when the judge stopped and
  fewer than κ triples were read; otherwise "no answer". Offline: the same scan.

The loop runs at most ``t_max`` retrieval rounds. :func:`create_singlepass_graph` is the
baseline: the same plan, one retrieval of the whole horizon window, the same answer step.
Every option can be set per run without recompiling: ``app.invoke(inputs, context={"model": m, "t_max": 6})``
(:class:`~langgraph_kgmem.graphs.kgirag.options.KgiragOptions`).

Package layout: ``options`` (the validated options, the graph's context schema), ``schemas``
(state, decisions, bounds), ``prompts``, ``index`` (the per-KG-version temporal index and the reads
along the time chain), ``questions`` (the offline question parser and plan, answer cleaning),
``scan`` (the hop count and the rule-based judge), ``nodes``, ``graph`` (the factories).
"""

from __future__ import annotations

from langgraph_kgmem.graphs.kgirag.graph import create_kgirag_graph, create_singlepass_graph
from langgraph_kgmem.graphs.kgirag.index import TemporalIndex, collect_triples, neighbourhood_slots, temporal_index
from langgraph_kgmem.graphs.kgirag.nodes import synthesis_prompt
from langgraph_kgmem.graphs.kgirag.options import KgiragOptions
from langgraph_kgmem.graphs.kgirag.questions import clean_answer, offline_plan, parse_question
from langgraph_kgmem.graphs.kgirag.scan import default_step, hop_count, horizon_window, scan_records
from langgraph_kgmem.graphs.kgirag.schemas import NO_ANSWER, JudgeDecision, TemporalPlan
from langgraph_kgmem.graphs.spec import MethodSpec

KgiragContext = KgiragOptions  # the graph's context_schema (the name earlier releases exported)

SPEC = MethodSpec(
    name="kgirag",
    factory=create_kgirag_graph,
    options=KgiragOptions,
    summary="KG-IRAG: iterative retrieval over time-stamped records (temporal KG).",
    description="Plans a search over a temporal KG built from time-stamped records, then reads the records "
                "around a moving time anchor round by round, a judge deciding after each round whether they "
                "settle the question or where to look next (it may jump past an abnormal event). For 'when', "
                "'before/after' and 'during' questions about events and measurements.",
    agent_description="Answer a question about time-stamped records (events, measurements, schedules) by searching "
                      "the temporal knowledge graph step by step (KG-IRAG). Use for 'when', 'before/after', "
                      "'during' and trend questions.",
    requirements=frozenset({"records"}),
    output_keys=("answer", "evidence", "usage", "method", "model", "run_id", "plan", "iterations", "retrieved_triples",
                 "anchors", "hops", "stopped", "events"),
)


__all__ = ["create_kgirag_graph", "create_singlepass_graph", "KgiragOptions", "SPEC"]
