"""CatRAG: query-aware Personalized PageRank on a HippoRAG-2 graph (docs/methods/catrag.md).

The graph is HippoRAG 2's: entity and passage (chunk) nodes, ``relation`` edges from triples,
``context`` edges entity → passage and ``synonym`` edges between near-identical entities
(cosine ≥ 0.8, weighted 2.0 × similarity; added once by :func:`prepare_catrag_kg`). PPR walks
only these three edge kinds, in both directions, on the KG's cached CSR snapshot.

Baseline (HippoRAG 2, every switch off): dense query-to-fact retrieval, a recognition-memory
filter (the LLM keeps ≤ 4 relevant facts), PPR seeded with the facts' entities (fact score ÷ the
entity's passage count) plus every passage (min-max normalised dense score × 0.05), passages
ranked by PPR mass — by default then merged with the dense passage ranking, the two taking
turns (``dense_fusion``: a passage vector search ranks high is not lost when the walk's
mass sits elsewhere). No fact survives → dense passage ranking (``fallback: "dense"``).

CatRAG's three query-time additions, each behind a switch; none touches the stored graph (edge
changes are per-call ``overrides`` of the PPR, so nothing leaks into the next query):

1. ``anchoring``: named entities of the question → nearest entity nodes, added as weak seeds with
   reset mass ε ÷ *that entity's own* passage count.
2. ``dynamic_weighting``: for the top ``n_seed`` seed entities, Stage I keeps the ``k_edge``
   relation neighbours whose linking fact is closest to the query (the rest get the weak
   multiplier), Stage II asks the LLM once per seed to score each kept neighbour 0–10, given a
   neighbour context C(v) (an LLM summary of v's facts, cached in the store, when v has more than
   ``tau`` facts; else the facts). Scores map to multipliers on the edges *leaving* the seed:
   0–3 → 0 (pruned), 4–6 → 0.2–0.3, 7–9 → 2.0–3.0, 10 → 5.0; an unparsable score counts as 4.
3. ``key_fact_boost``: the context edge seed u → passage p is multiplied by (1 + β) when a
   verified fact with endpoint u was extracted from p (no LLM).

Nodes: ``retrieve_facts`` → ``filter_facts`` → (no fact: ``rank_passages``) → ``anchor_entities``
→ ``weight_edges`` → ``boost_key_facts`` → ``run_ppr`` → ``answer``. Disabled additions are left
out of the graph. Offline (``model="offline"``) policies: filter = facts with cosine ≥
``offline_fact_threshold`` one of whose two entities the question names (every content word of
the entity's name is in the question; best ``filter_keep``); NER = the offline entity extractor; edge scores
= 4–8 from the linking fact's similarity rank (offline never prunes); no summaries; extractive answer.

Every option but the graph-shaping ones can be set per run without recompiling:
``app.invoke(inputs, context={"model": m, "top_passages": 3})`` (:class:`CatragOptions`).

Package layout: ``options`` (the validated options, the graph's context schema), ``schemas``
(state and decisions), ``prompts``, ``index`` (per-KG-version arrays and hub measures),
``nodes`` (module-level node functions), ``graph`` (the factory).
"""

from __future__ import annotations


from langgraph_kgmem.graphs.catrag.graph import create_catrag_graph
from langgraph_kgmem.graphs.catrag.index import (CatragIndex, fuse_dense, hub_mask, hub_mass, hub_mass_of, kg_index,
                                                 prepare_catrag_kg)
from langgraph_kgmem.graphs.catrag.options import CatragOptions
from langgraph_kgmem.graphs.catrag.schemas import (PPR_EDGE_KINDS, CatragOutput, CatragState, NeighbourScores,
                                                   QueryEntities, RecognizedFacts, score_multiplier)
from langgraph_kgmem.graphs.catrag.memory_view import SUMMARIES
from langgraph_kgmem.graphs.spec import MethodSpec, Preset

CatragContext = CatragOptions   # the graph's context_schema (the name earlier releases exported)

SPEC = MethodSpec(
    name="catrag",
    factory=create_catrag_graph,
    options=CatragOptions,
    summary="CatRAG: personalised PageRank over the KG with anchors, query-dependent edge weights and "
            "key-fact boosts.",
    description="Ranks passages with Personalized PageRank seeded by the question's verified facts, after three "
                "query-time changes to the walk: the question's named entities as extra seeds, LLM-scored "
                "weights on the edges leaving the seeds, and a boost for the passages the facts came from. "
                "One shot, a handful of LLM calls; good for questions that combine facts from different "
                "documents.",
    agent_description="Answer a factual question by ranking knowledge-graph passages with personalised PageRank "
                      "from the question's entities (CatRAG). Fast, one shot; good for questions that combine "
                      "two or three facts from different documents.",
    output_keys=("answer", "evidence", "usage", "method", "model", "run_id", "facts", "anchors", "edge_weights", "passages",
                 "ppr", "fallback", "timings"),
    presets=(Preset(
        name="hipporag2",
        # experience off: on held-out sets the layer cost HippoRAG 2 up to a point (docs/memory.md)
        options={"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False, "experience": False},
        summary="HippoRAG 2 baseline: CatRAG with anchoring, dynamic weighting, key-fact boosts and the shared "
                "experience layer off.",
        agent_description="Answer a factual question with plain personalised-PageRank retrieval over the knowledge "
                          "graph (HippoRAG 2 baseline). Fast, one shot; use as a second opinion."),),
    memory=(SUMMARIES,),
)


__all__ = ["create_catrag_graph", "CatragOptions", "SPEC"]
