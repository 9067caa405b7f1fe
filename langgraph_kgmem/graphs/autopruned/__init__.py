"""AutoPrunedRetriever: a persistent symbolic codebook, reusable reasoning runs, compact prompts.

Idea: text becomes integer symbols (entities E, relations R, edges M ⊆ E×R×E) held in a codebook
that lives in the LangGraph store and grows across sessions. Retrieval atoms are *runs* — short
edge sequences — in three channels: facts (F, from the KG's relation edges per passage chunk),
earlier questions (Q) and earlier answers (A). A question is encoded into edges, runs are ranked
coarse → fine, a selection policy decides per channel whether to include all, one per cluster
(unique) or none, and the selected runs are packed into the cheapest of three encodings, measured
in tokens. The answered question and its answer are stored as new runs, so a later related
question reuses them by id; consolidation merges alias entities so the codebook plateaus.

Nodes (in order):
    sync_facts        index KG documents not yet in the codebook into F runs (incremental)
    encode_question   question → triples (LLM decision, or the offline extractor + phrase parser) → edge ids
    retrieve_coarse   w_ent·max cos(entity pairs) + w_rel·max cos(relation pairs), top ``coarse_k`` runs
    rerank_fine       line-level similarity score (top-t, coverage, soft many-to-many, greedy 1:1,
                      gated whole-run), top ``fine_m`` fact/answer runs across channels; question runs
                      ranked among them come along and bring their stored answers
    select_runs       per channel: include all / unique / not include (pluggable policy)
    pack_prompt       optional pruning of each fact run to its edges closest to the question
                      (``edges_per_run``); the cheapest of word triples, id triples, edge matrix +
                      edge-id lists (``count_tokens``)
    answer            the same question asked before (``question_key``) of the same decider, with a
                      stored answer still grounded in the passages it cites: that answer, replayed
                      with its provenance (``replayed_answer``); otherwise the LLM over the packed
                      codebook (offline: extractive over the fact evidence, never a stored answer)
    memorize          store the question's edge sequence as a Q run and, when every content word of
                      the answer is in the passages it cites, the answer's as an A run (its text,
                      cited passages and decider kept with it); an ungrounded answer is not stored
    consolidate       layer-1 alias grouping (cosine ≥ 0.93, union-find), layer-2 k-means medoids
                      over an entity budget, only above a similarity floor (the budget is a
                      ceiling, never forced); edges remapped, duplicates dropped, runs stay valid

Answer memory is right or silent: see :mod:`langgraph_kgmem.graphs.autopruned.codebook` for the equivalence
rule (the same question) and the grounding rule, verbatim. Stored answers are also retrieval atoms
(the "known answers" channel): one is shown only while it is still grounded, labelled as an earlier
question's answer. With ``memory_scope`` each tenant has a codebook of its own in the store (its
questions, answers and its index of the KG's facts); without it every caller of the graph shares one.

Every knob but the few that shape the graph or the stored codebook can be set per run without
recompiling: ``app.invoke(inputs, context={"fine_m": 5, "memorize": False})``
(:class:`~langgraph_kgmem.graphs.autopruned.options.AutoprunedOptions`).

Package layout: ``options`` (the validated options, the graph's context schema), ``schemas``
(constants, state, decisions), ``prompts``, ``codebook`` (the persisted symbolic codebook),
``scoring`` (run ranking and selection), ``packing`` (the prompt encodings), ``sentences`` (facts
shown as sentences), ``deps`` (what the nodes share: caches, locks), ``nodes`` (module-level node
functions), ``graph`` (the factory).
"""

from __future__ import annotations

from langgraph_kgmem.graphs.autopruned.codebook import ALIAS_THRESHOLD, LAYER2_FLOOR
from langgraph_kgmem.graphs.autopruned.graph import create_autopruned_graph, sync_codebook
from langgraph_kgmem.graphs.autopruned.options import RELEVANCE_WEIGHTS, SENTENCE_RANKINGS, AutoprunedOptions
from langgraph_kgmem.graphs.autopruned.packing import cheapest_encoding, decode_knowledge, encode_knowledge
from langgraph_kgmem.graphs.autopruned.prompts import KNOWN_NOTE, answer_prompt
from langgraph_kgmem.graphs.autopruned.schemas import (SENTENCES_PRESET, AutoPrunedState, FineScoring, TextTriple,
                                                       TextTriples)
from langgraph_kgmem.graphs.autopruned.scoring import default_selection_policy, fine_score, fine_scores, stacked_fine_scores
from langgraph_kgmem.graphs.autopruned.sentences import split_sentences
from langgraph_kgmem.graphs.autopruned.memory_view import CODEBOOK
from langgraph_kgmem.graphs.spec import MethodSpec

AutoPrunedContext = AutoprunedOptions  # the graph's context_schema (the name earlier releases exported)

SPEC = MethodSpec(
    name="autopruned",
    factory=create_autopruned_graph,
    options=AutoprunedOptions,
    summary="AutoPrunedRetriever: compact fact retrieval with a pruned codebook kept across sessions.",
    description="Turns the KG's facts into a symbolic codebook (entity, relation and edge ids grouped in small "
                "runs), retrieves runs coarse to fine, and answers from a prompt packed in the cheapest of three "
                "encodings; each question's and answer's runs are stored, so follow-up questions reuse them.",
    agent_description="Answer a question from compact, deduplicated knowledge-graph facts (AutoPrunedRetriever). "
                      "Cheapest in tokens; good for simple lookups and for follow-up questions on the same topic.",
    requirements=frozenset({"store"}),
    output_keys=("answer", "evidence", "usage", "method", "model", "run_id", "encoding", "packed_prompt", "reused",
                 "codebook_size"),
    memory=(CODEBOOK,),
)


__all__ = ["create_autopruned_graph", "AutoprunedOptions", "SPEC", "SENTENCES_PRESET"]
