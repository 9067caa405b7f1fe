"""CatRAG: query-aware Personalized PageRank on a HippoRAG-2 graph (METHODS.md §3).

The graph is HippoRAG 2's: entity and passage (chunk) nodes, ``relation`` edges from triples,
``context`` edges entity → passage and ``synonym`` edges between near-identical entities
(cosine ≥ 0.8, weighted 2.0 × similarity; added once by :func:`prepare_catrag_kg`). PPR walks
only these three edge kinds, in both directions, on the KG's cached CSR snapshot.

Baseline (HippoRAG 2, every switch off): dense query-to-fact retrieval, a recognition-memory
filter (the LLM keeps ≤ 4 relevant facts), PPR seeded with the facts' entities (fact score ÷ the
entity's passage count) plus every passage (min-max normalised dense score × 0.05), passages
ranked by PPR mass — by default then merged with the dense passage ranking, the two taking
turns (``dense_fusion``, issue 17: a passage vector search ranks high is not lost when the walk's
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

The model can be swapped per run without recompiling: ``app.invoke(inputs, context={"model": m})``.
"""

from __future__ import annotations

import functools
import math
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from langgraph_kgmem.errors import KgmemInputError, check_int, check_number
from langgraph_kgmem.graphs.common import (DATA_NOTE, MAX_LIST_ITEMS, BaseState, InputState, ModelName, RunContext,
                                           answer_question, check_question, content_words, emit_progress, evidence_item,
                                           fence, method_model, named_in, require, run_model)
from langgraph_kgmem.ingest.extract import offline_entities
from langgraph_kgmem.kg.ppr import GraphSnapshot, PprMethod
from langgraph_kgmem.kg.types import entity_id
from langgraph_kgmem.llm import (decide, fresh_usage, generate, is_offline, merge_usage, model_label, render,
                                 run_concurrently)
from langgraph_kgmem.memory import RecordMemory, resolve_store
from langgraph_kgmem.ranking import best_first, interleave

if TYPE_CHECKING:
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph

# ------------------------------------------------------------------------------------ constants

PPR_EDGE_KINDS: tuple[str, ...] = ("relation", "synonym", "context")
SUMMARY_KIND = "summaries"            # RecordMemory kind of the cached neighbour summaries
WEAK_MULTIPLIER = 0.2                 # Stage I rest and the "unparsable → 4" score
UNPARSABLE_SCORE = 4
HUB_FRACTION = 0.01                   # hubs = top 1% weighted-degree entity nodes
HUB_TOP = 10                          # hub mass is read on the top-10 PPR nodes
MAX_SUMMARY_FACTS = 40                # facts shown to the summariser
MAX_CONTEXT_FACTS = 8                 # facts shown per neighbour when it has ≤ τ facts
MAX_SUMMARY_CHARS = 600               # a cached summary is cut to this: it is shown in every later prompt
Tier = Literal["pruned", "weak", "strong", "key", "stage1_weak"]


def score_multiplier(score: Any) -> tuple[float, Tier]:
    """Edge multiplier and tier for a 0–10 relevance score (anything unparsable counts as 4)."""
    try:
        value = float(score)
        if not math.isfinite(value) or value < 0 or value > 10:
            raise ValueError
        s = int(round(value))
    except (TypeError, ValueError, OverflowError):
        s = UNPARSABLE_SCORE
    if s <= 3:
        return 0.0, "pruned"
    if s <= 6:
        return 0.2 + 0.05 * (s - 4), "weak"
    if s <= 9:
        return 2.0 + 0.5 * (s - 7), "strong"
    return 5.0, "key"


# ------------------------------------------------------------------------------------ state


CatragContext = RunContext  # per-run knobs: context={"model": m} (graphs.common.RunContext)


class CatragState(BaseState, total=False):
    candidates: list[dict[str, Any]]      # retrieved facts {id, text, score, src, dst, chunks}
    facts: list[dict[str, Any]]           # verified seed facts T_seed
    anchors: list[dict[str, Any]]         # {name, id, text, passages, weight}
    overrides: list[list[Any]]            # [src, dst, multiplier] (per query, never stored)
    edge_weights: dict[str, int]          # edges per tier
    passages: list[dict[str, Any]]        # ranked passages {id, score} (deeper than evidence)
    ppr: dict[str, Any]                   # hub_mass, top_nodes, seeds, overrides, ms
    fallback: str | None                  # "dense" when no fact survived the filter
    timings: dict[str, float]             # non-LLM ms per step


class CatragOutput(BaseState, total=False):  # answer, evidence, usage, method, model + these
    facts: list[dict[str, Any]]
    anchors: list[dict[str, Any]]
    edge_weights: dict[str, int]
    passages: list[dict[str, Any]]
    ppr: dict[str, Any]
    fallback: str | None
    timings: dict[str, float]


# ------------------------------------------------------------------------------------ decisions


class RecognizedFacts(BaseModel):
    """Which of the numbered candidate facts help answer the question. Keep only facts that are
    directly relevant (at most the allowed number); an empty list means none is."""

    keep: list[int] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                            description="numbers of the relevant facts, most useful first")


class QueryEntities(BaseModel):
    """The named entities (people, places, organisations, works, dates) mentioned in the question,
    spelled as in the question."""

    names: list[ModelName] = Field(default_factory=list, max_length=20, description="entity names found in the question")


class NeighbourScore(BaseModel):
    neighbour: int = Field(ge=1, le=10_000, description="the neighbour's number")
    score: Any = Field(description="0-10: how useful following this edge is for answering the question")


class NeighbourScores(BaseModel):
    """Relevance of each numbered neighbour of the seed entity for answering the question:
    0-3 irrelevant, 4-6 weak, 7-9 useful, 10 essential. Score every neighbour."""

    scores: list[NeighbourScore] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


# ------------------------------------------------------------------------------------ prompts

FILTER_PROMPT = """You are checking retrieved facts before they are used to search a knowledge graph.
""" + DATA_NOTE + """

Question: {question}

Candidate facts:
{facts}

Return the numbers of the facts that are relevant to answering the question (at most {keep}),
most useful first. Return an empty list if none is relevant."""

NER_PROMPT = """List the named entities (people, places, organisations, titles of works, dates) that
the question mentions, written exactly as in the question.

Question: {question}"""

SCORE_PROMPT = """We search a knowledge graph for the answer to a question and stand at the entity
{seed}. Decide which of its neighbours are worth following.
""" + DATA_NOTE + """

Question: {question}

Facts already verified as relevant:
{facts}

Neighbours of the entity (number, name, the facts linking them, what else we know about them):
{neighbours}

Score every neighbour from 0 to 10: 0-3 irrelevant, 4-6 weakly related, 7-9 useful, 10 essential."""

SUMMARY_PROMPT = """Summarise in at most three sentences what these facts say about {entity}.
""" + DATA_NOTE + """

Facts:
{facts}"""


# ------------------------------------------------------------------------------------ KG index


@dataclass
class _Index:
    """Per-KG-version arrays for the hot path (rebuilt after any write to the KG)."""

    version: int
    snap: GraphSnapshot
    chunk_ids: list[str]          # chunks with vectors, aligned with chunk_rows
    chunk_rows: np.ndarray        # their snapshot rows
    chunk_keep: np.ndarray        # their positions in kg.similarity_scores(..., ("chunk",))
    chunk_vectors: int            # how many chunk vectors there were (another process may add some)
    passage_count: dict[str, int]  # entity id → number of context edges to chunks
    hub_mask: np.ndarray          # bool per snapshot row: top-1% weighted-degree entity
    facts_of: dict[str, list[str]] = field(default_factory=dict)   # memo: entity → sorted fact texts
    chunks_of: dict[str, list[str]] = field(default_factory=dict)  # memo: entity → its chunk ids

    def entity_facts(self, kg: "KnowledgeGraph", eid: str) -> list[str]:
        out = self.facts_of.get(eid)
        if out is None:
            out = self.facts_of[eid] = sorted(dict.fromkeys(kg.fact_text(e) for e, _ in
                                                            kg.neighbors(eid, kinds=("relation",))))
        return out

    def entity_chunks(self, kg: "KnowledgeGraph", eid: str) -> list[str]:
        out = self.chunks_of.get(eid)
        if out is None:
            out = self.chunks_of[eid] = [n.id for _, n in kg.neighbors(eid, kinds=("context",),
                                                                       node_kinds=("chunk",), direction="out")]
        return out


_INDEXES: "weakref.WeakKeyDictionary[Any, _Index]" = weakref.WeakKeyDictionary()
def prepare_catrag_kg(kg: "KnowledgeGraph", *, threshold: float = 0.8, weight_scale: float = 2.0) -> int:
    """Add HippoRAG-2 synonym edges (cosine ≥ ``threshold``, weight ``weight_scale`` × cosine).

    Idempotent (``KnowledgeGraph.add_synonym_edges`` writes only what is new or changed and keeps
    ``kg.version`` otherwise). Returns synonym edges added or changed."""
    return kg.add_synonym_edges(threshold=threshold, weight_scale=weight_scale)


def hub_mask(snap: GraphSnapshot, fraction: float = HUB_FRACTION) -> np.ndarray:
    """Rows of the top ``fraction`` (at least one) entity nodes by weighted degree."""
    mask = np.zeros(snap.n, dtype=bool)
    ents = np.flatnonzero(snap.kinds == "entity")
    if len(ents) == 0:
        return mask
    k = max(1, int(math.ceil(fraction * len(ents))))
    deg = snap.out_weight[ents]
    top = ents[np.lexsort((ents, -deg))[:k]]
    mask[top] = True
    return mask


def hub_mass(scores: np.ndarray, hubs: np.ndarray, top: int = HUB_TOP) -> float:
    """PPR mass that sits on hub nodes among the ``top`` highest-scoring nodes."""
    if len(scores) == 0:
        return 0.0
    best = best_first(scores, top)
    return float(scores[best][hubs[best]].sum())


def hub_mass_of(kg: "KnowledgeGraph", ranking: Mapping[str, float] | Sequence[tuple[str, float]], *,
                top: int = HUB_TOP, fraction: float = HUB_FRACTION,
                edge_kinds: Sequence[str] = PPR_EDGE_KINDS) -> float:
    """Hub mass of any PPR result given as ``{id: score}`` or ``[(id, score)]`` (for the benchmark)."""
    snap = kg.snapshot(edge_kinds)
    scores = np.zeros(snap.n)
    items = ranking.items() if isinstance(ranking, Mapping) else ranking
    for nid, s in items:
        i = snap.index.get(nid)
        if i is not None:
            scores[i] = s
    return hub_mass(scores, hub_mask(snap, fraction), top)


def _index(kg: "KnowledgeGraph") -> _Index:
    idx = _INDEXES.get(kg)
    if idx is not None and idx.version == kg.version:
        return idx
    snap = kg.snapshot(PPR_EDGE_KINDS)
    # dense passage scores come from the vector store (in the server on Postgres): keep only the ids
    ids = kg.vector_ids(("chunk",))
    keep = [i for i, c in enumerate(ids) if c in snap.index]
    chunk_ids = [ids[i] for i in keep]
    count: dict[str, int] = {}
    for e in kg.edges("context"):
        dst = kg.node(e.dst)
        if dst is not None and dst.kind == "chunk":
            count[e.src] = count.get(e.src, 0) + 1
    idx = _Index(kg.version, snap, chunk_ids, np.asarray([snap.index[c] for c in chunk_ids], dtype=np.int64),
                 np.asarray(keep, dtype=np.int64), len(ids), count, hub_mask(snap))
    _INDEXES[kg] = idx
    return idx


# ------------------------------------------------------------------------------------ helpers



def _entity_text(kg: "KnowledgeGraph", eid: str) -> str:
    node = kg.node(eid)
    return node.text if node is not None else ""


def _passage_count(idx: _Index, eid: str) -> int:
    return max(1, idx.passage_count.get(eid, 0))


def _entity_seeds(idx: _Index, facts: Sequence[dict[str, Any]], anchors: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Entity reset weights: max fact score ÷ passage count, plus anchor weights."""
    seeds: dict[str, float] = {}
    for f in facts:
        w = max(0.0, float(f["score"]))
        for eid in (f["src"], f["dst"]):
            seeds[eid] = max(seeds.get(eid, 0.0), w / _passage_count(idx, eid))
    for a in anchors:
        seeds[a["id"]] = seeds.get(a["id"], 0.0) + float(a["weight"])
    return seeds


def _dense_scores(kg: "KnowledgeGraph", idx: _Index, question: str) -> np.ndarray:
    if len(idx.chunk_ids) == 0:
        return np.zeros(0)
    ids, scores = kg.similarity_scores(question, ("chunk",))
    if len(ids) != idx.chunk_vectors:
        # another process wrote since this run's snapshot (shared KG): score by id, not position
        pos = {c: i for i, c in enumerate(ids)}
        return np.asarray([scores[pos[c]] if c in pos else 0.0 for c in idx.chunk_ids], dtype=np.float32)
    return scores[idx.chunk_keep]


def _minmax(x: np.ndarray) -> np.ndarray:
    if len(x) == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)


def _fact_lines(facts: Sequence[dict[str, Any]]) -> str:
    return fence([f"- {f['text']}" for f in facts])


# ------------------------------------------------------------------------------------ factory


def create_catrag_graph(
    kg: "KnowledgeGraph",
    *,
    model: Any = None,
    store: Any = None,
    retry_policy: RetryPolicy | None = None,
    anchoring: bool = True,
    dynamic_weighting: bool = True,
    key_fact_boost: bool = True,
    top_facts: int = 5,
    filter_keep: int = 4,
    passage_weight: float = 0.05,
    damping: float = 0.5,
    epsilon: float = 0.2,
    n_seed: int = 5,
    k_edge: int = 15,
    tau: int = 3,
    beta: float = 2.5,
    top_passages: int = 5,
    rank_depth: int = 20,
    synonym_threshold: float = 0.8,
    synonym_weight: float = 2.0,
    offline_fact_threshold: float = 0.2,
    anchor_threshold: float = 0.5,
    answer: bool = True,
    llm_concurrency: int = 4,
    ppr_method: PprMethod = "auto",
    ppr_eps: float = 1e-7,
    dense_fusion: bool = True,
) -> StateGraph:
    """Build the CatRAG graph (uncompiled); all three switches off = plain HippoRAG 2.

    Args:
        kg: the knowledge graph (synonym edges are added once here, see :func:`prepare_catrag_kg`).
        model: a LangChain chat model, ``"offline"`` (heuristics, extractive answer) or ``None``
            (``$KGMEM_MODEL``). Overridable per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: BaseStore for the cached neighbour summaries (default: the compiled graph's store).
        anchoring / dynamic_weighting / key_fact_boost: CatRAG's three additions.
        top_facts, filter_keep: facts retrieved / kept by the recognition filter.
        passage_weight: reset weight of every passage (× its min-max normalised dense score).
        damping: PPR probability of following an edge. epsilon: anchor reset mass (÷ its passages).
        n_seed, k_edge, tau: seeds re-weighted, neighbours scored per seed, summary threshold.
        beta: key-fact passage boost (× (1 + β)). top_passages: evidence size; rank_depth: ranked
            passages reported in ``passages``.
        offline_fact_threshold, anchor_threshold: offline fact filter cutoff (a fact must also
            have an entity the question names) and the minimum cosine for mapping a query entity
            to an entity node.
        answer: ``False`` skips the answer step (retrieval only).
        llm_concurrency: how many of the dynamic-weighting step's independent LLM calls (the
            neighbour summaries, then one score per seed) run at once; 1 = one after another.
        ppr_method, ppr_eps: the PPR algorithm (see ``KnowledgeGraph.ppr``): ``"auto"`` (default)
            is forward push once the graph is big enough for push to pay (with the default eps,
            about 2M directed entries), the exact iteration below; ``"exact"`` / ``"push"``
            force one. ``ppr_eps`` is push's residual threshold (each score low by at most
            ``eps`` × the node's degree). The reset covers every passage, so each holds a tiny
            share of it: 1e-7 keeps the top-20 passages as exact's (HotpotQA-300: overlap
            ≥ 0.99; 1e-5 gives 0.7), where ``kg.ppr``'s few seeds are served by 1e-5.
        dense_fusion: ``True`` (default): the final passage ranking takes the PPR ranking and the
            dense ranking of the passages by cosine with the question in turns, PPR first
            (:func:`~langgraph_kgmem.ranking.interleave`): the top ``2n`` holds PPR's top ``n`` and
            vector search's top ``n``, so a passage vector search ranks high is not lost when the
            walk's mass sits elsewhere; it costs no LLM call and one sort of the dense scores the
            PPR reset already computed. ``False``: passages ranked by PPR mass alone (the paper).

    Returns:
        An uncompiled ``StateGraph``; output keys: answer, evidence, usage, method
        (``"catrag"`` or ``"hipporag2"``), facts, anchors, edge_weights, passages, ppr, fallback.
        With ``dense_fusion`` each passage carries its ``score`` (1 / its place), its ``ppr`` mass and its
        ``dense`` cosine.

    Raises:
        KgmemInputError: an option is out of range (the message names it).

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland."}], model="offline")
        >>> app = create_catrag_graph(kg, model="offline").compile(store=kg.persistence()[1])
        >>> app.invoke({"question": "What is the capital of Poland?"})["method"]
        'catrag'
    """
    _validate(top_facts=top_facts, filter_keep=filter_keep, n_seed=n_seed, k_edge=k_edge, tau=tau,
              top_passages=top_passages, rank_depth=rank_depth, passage_weight=passage_weight, epsilon=epsilon,
              beta=beta, damping=damping, synonym_threshold=synonym_threshold, synonym_weight=synonym_weight,
              llm_concurrency=llm_concurrency, ppr_method=ppr_method, ppr_eps=ppr_eps)
    default_model = method_model(model, retry_policy)
    method = "catrag" if (anchoring or dynamic_weighting or key_fact_boost) else "hipporag2"
    prepare_catrag_kg(kg, threshold=synonym_threshold, weight_scale=synonym_weight)

    # ---------------------------------------------------------------- nodes
    def retrieve_facts(state: CatragState, runtime: Runtime[CatragContext]) -> dict[str, Any]:
        t0 = time.perf_counter()
        question = check_question(state)
        # dynamic weighting caches the LLM's neighbour summaries in the store (offline runs write none)
        require("CatRAG" if method == "catrag" else "HippoRAG 2", runtime=runtime, store=store,
                needs_store=dynamic_weighting and not is_offline(run_model(runtime, default_model)))
        out = []
        for e, score in kg.nearest_facts(question, top_facts):
            out.append({"id": e.id, "text": kg.fact_text(e), "score": round(float(score), 6), "src": e.src,
                        "dst": e.dst, "chunks": list(e.attrs.get("chunks", []))})
        return {"candidates": out, "method": method, "fallback": None, "anchors": [], "overrides": [],
                "edge_weights": {}, "usage": fresh_usage(), "model": model_label(run_model(runtime, default_model)),
                "timings": {"retrieve_facts": _ms(t0)}}

    def filter_facts(state: CatragState, runtime: Runtime[CatragContext]) -> dict[str, Any]:
        t0 = time.perf_counter()
        mdl = run_model(runtime, default_model)
        cands = state.get("candidates", [])
        if not cands:
            return {"facts": [], "timings": _add(state, "filter_facts", t0)}

        def offline() -> RecognizedFacts:
            # recognition without a model: a fact counts when it is close to the question AND one of
            # its two entities is named in the question; a fact only near the question in embedding
            # space, about entities the question never names, would seed the walk elsewhere
            qwords = content_words(state["question"])
            return RecognizedFacts.model_construct(
                keep=[i for i, c in enumerate(cands, 1) if c["score"] >= offline_fact_threshold
                      and any(named_in(_entity_text(kg, e), qwords) for e in (c["src"], c["dst"]))][:filter_keep])

        def check(d: RecognizedFacts) -> str | None:
            bad = [k for k in d.keep if not 1 <= k <= len(cands)]
            return f"fact number {bad[0]} does not exist; choose from 1..{len(cands)}" if bad else None

        prompt = render(FILTER_PROMPT, question=state["question"], keep=filter_keep,
                        facts=fence([f"{i}. {c['text']}" for i, c in enumerate(cands, 1)]))
        decision, usage = decide(mdl, RecognizedFacts, prompt, step="filter_facts", offline=offline,
                                 validate=check, context={"question": state["question"], "candidates": cands})
        keep = list(dict.fromkeys(decision.keep))[:filter_keep]
        facts = [cands[k - 1] for k in keep]
        return {"facts": facts, "usage": usage, "timings": _add(state, "filter_facts", t0, usage)}

    def anchor_entities(state: CatragState, runtime: Runtime[CatragContext]) -> dict[str, Any]:
        t0 = time.perf_counter()
        mdl = run_model(runtime, default_model)
        question = state["question"]
        idx = _index(kg)

        def offline() -> QueryEntities:
            return QueryEntities.model_construct(names=offline_entities(question))

        decision, usage = decide(mdl, QueryEntities, render(NER_PROMPT, question=question), step="anchor_entities",
                                 offline=offline, context={"question": question})
        anchors: dict[str, dict[str, Any]] = {}
        for name in dict.fromkeys(n.strip() for n in decision.names if n and n.strip()):
            node = kg.node(entity_id(name))
            cos = 1.0
            if node is None or node.kind != "entity":
                hits = kg.nearest(name, 1, kinds=("entity",))
                if not hits or hits[0][1] < anchor_threshold:
                    continue
                node, cos = hits[0]
            if node.id in anchors:
                continue
            count = idx.passage_count.get(node.id, 0)
            # ε divided by THIS entity's own passage count (the paper's code used another entity's)
            anchors[node.id] = {"name": name, "id": node.id, "text": node.text, "similarity": round(float(cos), 4),
                                "passages": count, "weight": epsilon / max(1, count)}
        return {"anchors": list(anchors.values()), "usage": usage,
                "timings": _add(state, "anchor_entities", t0, usage)}

    def weight_edges(state: CatragState, runtime: Runtime[CatragContext]) -> dict[str, Any]:
        t0 = time.perf_counter()
        mdl = run_model(runtime, default_model)
        idx = _index(kg)
        question = state["question"]
        facts = state.get("facts", [])
        seeds = _entity_seeds(idx, facts, state.get("anchors", []))
        top = sorted(seeds, key=lambda s: (-seeds[s], s))[:n_seed]
        qvec = kg.embed_query(question)
        offline_run = is_offline(mdl)
        usage: dict[str, Any] = {}
        overrides: dict[tuple[str, str], float] = {}
        tiers = {"pruned": 0, "weak": 0, "strong": 0, "key": 0, "stage1_weak": 0}
        # Stage I (coarse, no LLM): per seed, keep the k_edge neighbours whose linking fact is
        # closest to the query; the rest get the weak multiplier
        plans: list[tuple[str, list[str], dict[str, float], dict[str, list[Any]]]] = []
        for seed in top:
            groups: dict[str, list[Any]] = {}
            for e, nb in kg.neighbors(seed, kinds=("relation",), node_kinds=("entity",)):
                if nb.id != seed:
                    groups.setdefault(nb.id, []).append(e)
            if not groups:
                continue
            nbs = sorted(groups)
            sizes = np.array([len(groups[n]) for n in nbs])
            sims = kg.vectors([e.id for n in nbs for e in groups[n]], space="facts") @ qvec
            best = np.maximum.reduceat(sims, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
            order = np.lexsort((np.arange(len(nbs)), -best))
            for j in order[k_edge:]:
                overrides[(seed, nbs[j])] = WEAK_MULTIPLIER
                tiers["stage1_weak"] += 1
            kept = [nbs[j] for j in order[:k_edge]]
            plans.append((seed, kept, {nbs[j]: float(best[j]) for j in order[:k_edge]}, groups))
            emit_progress({"event": "weight_edges", "seed": seed, "neighbours": len(nbs), "kept": len(kept)})
        contexts: dict[str, str] = {}
        if not offline_run:  # neighbour contexts C(v) for the prompts (summaries batched via the store)
            contexts, usage = _neighbour_contexts(kg, idx, mdl, resolve_store(store),
                                                  sorted({v for _, kept, _, _ in plans for v in kept}), tau,
                                                  llm_concurrency)
        # Stage II (fine): one LLM decision per seed, the seeds' calls made concurrently
        scorings = []
        for seed, kept, kept_sim, groups in plans:
            lines, listing = [], []
            for num, v in enumerate(kept if not offline_run else [], 1):  # prompt: LLM runs only
                node = kg.node(v)
                links = "; ".join(kg.fact_text(e) for e in groups[v][:3])
                lines.append(f"{num}. {node.text if node else v} | linked by: {links} | context: {contexts[v]}")
                listing.append({"neighbour": num, "id": v, "name": node.text if node else v,
                                "chunks": idx.entity_chunks(kg, v)})

            def offline(kept: list[str] = kept, kept_sim: dict[str, float] = kept_sim) -> NeighbourScores:
                # rank by linking-fact similarity: best → 8 (strong), worst → 4 (weak); never prunes
                ranked = sorted(kept, key=lambda v: (-kept_sim[v], v))
                n = max(1, len(ranked) - 1)
                pos = {v: i for i, v in enumerate(kept, 1)}
                return NeighbourScores.model_construct(scores=[  # ours, not model output: no bounds to check
                    NeighbourScore.model_construct(neighbour=pos[v], score=int(round(8 - 4 * r / n)))
                    for r, v in enumerate(ranked)])

            prompt = render(SCORE_PROMPT, seed=fence(kg.node(seed).text if kg.node(seed) else seed, inline=True),
                            question=question, facts=_fact_lines(facts), neighbours=fence(lines)) if not offline_run else ""
            scorings.append(functools.partial(
                decide, mdl, NeighbourScores, prompt, step="weight_edges", offline=offline,
                fallback=lambda: NeighbourScores(scores=[]),
                context={"question": question, "seed": seed, "neighbours": listing}))
        for (seed, kept, _, _), (decision, u) in zip(plans, run_concurrently(scorings, 1 if offline_run else llm_concurrency)):
            usage = merge_usage(usage, u)
            given: dict[int, Any] = {}
            for sc in decision.scores:
                if isinstance(sc.neighbour, int) and 1 <= sc.neighbour <= len(kept):
                    given.setdefault(sc.neighbour, sc.score)
            for num, v in enumerate(kept, 1):
                mult, tier = score_multiplier(given.get(num, UNPARSABLE_SCORE))
                overrides[(seed, v)] = mult
                tiers[tier] += 1
        return {"overrides": [[a, b, m] for (a, b), m in overrides.items()], "edge_weights": tiers,
                "usage": usage, "timings": _add(state, "weight_edges", t0, usage)}

    def boost_key_facts(state: CatragState) -> dict[str, Any]:
        t0 = time.perf_counter()
        overrides = {(a, b): m for a, b, m in state.get("overrides", [])}
        boosted = 0
        for f in state.get("facts", []):
            for u in (f["src"], f["dst"]):
                for p in f["chunks"]:
                    node = kg.node(p)
                    if node is None or node.kind != "chunk" or (u, p) in overrides:
                        continue
                    overrides[(u, p)] = 1.0 + beta
                    boosted += 1
        weights = dict(state.get("edge_weights") or {})
        weights["boosted"] = boosted
        return {"overrides": [[a, b, m] for (a, b), m in overrides.items()], "edge_weights": weights,
                "timings": _add(state, "boost_key_facts", t0)}

    def run_ppr(state: CatragState) -> dict[str, Any]:
        t0 = time.perf_counter()
        idx = _index(kg)
        snap = idx.snap
        reset = np.zeros(snap.n)
        for eid, w in _entity_seeds(idx, state.get("facts", []), state.get("anchors", [])).items():
            i = snap.index.get(eid)
            if i is not None and w > 0:
                reset[i] += w
        n_seeds = int(np.count_nonzero(reset))
        dense = _dense_scores(kg, idx, state["question"])
        if passage_weight > 0 and len(dense):
            np.add.at(reset, idx.chunk_rows, _minmax(dense) * passage_weight)
        ov = {(a, b): float(m) for a, b, m in state.get("overrides", []) if a in snap.index and b in snap.index}
        # exact runs stop once the evidence (top_passages) is certified; push is local to the seeds
        res = kg.ppr_scores(reset, snapshot=snap, damping=damping, overrides=ov or None, method=ppr_method,
                            eps=ppr_eps, top_k=top_passages, top_rows=idx.chunk_rows)
        scores = res.dense()
        if dense_fusion and len(dense):
            passages = _fuse_dense(idx, scores, dense, rank_depth)
        else:
            passages = _rank_rows(snap, scores, idx.chunk_rows, rank_depth)
        top = best_first(scores, HUB_TOP)
        stats = {"hub_mass": round(hub_mass(scores, idx.hub_mask), 6), "seeds": n_seeds, "overrides": len(ov),
                 "method": res.method,
                 "top_nodes": [[snap.node_ids[i], round(float(scores[i]), 6)] for i in top]}
        ms = _ms(t0)
        stats["ms"] = ms
        emit_progress({"event": "ppr", "method": method, "seeds": n_seeds, "overrides": len(ov), "ms": ms,
                       "hub_mass": stats["hub_mass"]})
        evidence = [evidence_item(kg, p["id"], score=p["score"]) for p in passages[:top_passages]]
        return {"passages": passages, "evidence": evidence, "ppr": stats, "timings": _add(state, "run_ppr", t0)}

    def rank_passages(state: CatragState) -> dict[str, Any]:
        t0 = time.perf_counter()
        idx = _index(kg)
        dense = _dense_scores(kg, idx, state["question"])
        order = best_first(dense, rank_depth)
        passages = [{"id": idx.chunk_ids[i], "score": round(float(dense[i]), 6)} for i in order]
        evidence = [evidence_item(kg, p["id"], score=p["score"]) for p in passages[:top_passages]]
        emit_progress({"event": "fallback", "to": "dense", "reason": "no fact survived the filter"})
        return {"passages": passages, "evidence": evidence, "fallback": "dense", "anchors": [], "edge_weights": {},
                "ppr": {}, "timings": _add(state, "rank_passages", t0)}

    def answer_node(state: CatragState, runtime: Runtime[CatragContext]) -> dict[str, Any]:
        t0 = time.perf_counter()
        mdl = run_model(runtime, default_model)
        evidence = state.get("evidence", [])
        text, usage = answer_question(kg, mdl, state["question"], evidence,
                                      context={"evidence_texts": [e["text"] for e in evidence], "method": method})
        return {"answer": text, "usage": usage, "timings": _add(state, "answer", t0, usage)}

    def route_after_filter(state: CatragState) -> str:
        return "rank_passages" if not state.get("facts") else after_filter

    # ---------------------------------------------------------------- wiring
    builder = StateGraph(CatragState, input_schema=InputState, output_schema=CatragOutput,
                         context_schema=CatragContext)
    chain: list[tuple[str, Any]] = [("anchor_entities", anchor_entities)] if anchoring else []
    if dynamic_weighting:
        chain.append(("weight_edges", weight_edges))
    if key_fact_boost:
        chain.append(("boost_key_facts", boost_key_facts))
    chain.append(("run_ppr", run_ppr))
    after_filter = chain[0][0]
    builder.add_node("retrieve_facts", retrieve_facts)
    builder.add_node("filter_facts", filter_facts)
    builder.add_node("rank_passages", rank_passages)
    for name, fn in chain:
        builder.add_node(name, fn)
    final = "answer" if answer else END
    if answer:
        builder.add_node("answer", answer_node)
    builder.add_edge(START, "retrieve_facts")
    builder.add_edge("retrieve_facts", "filter_facts")
    builder.add_conditional_edges("filter_facts", route_after_filter, ["rank_passages", after_filter])
    for (a, _), (b, _) in zip(chain, chain[1:]):
        builder.add_edge(a, b)
    builder.add_edge("run_ppr", final)
    builder.add_edge("rank_passages", final)
    if answer:
        builder.add_edge("answer", END)
    return builder


# ------------------------------------------------------------------------------------ private


def _validate(**opts: Any) -> None:
    ints = {"top_facts": 1, "filter_keep": 1, "n_seed": 0, "k_edge": 1, "tau": 0, "top_passages": 1, "rank_depth": 1,
            "llm_concurrency": 1}
    for name, lo in ints.items():
        check_int(name, opts[name], lo)
    for name in ("passage_weight", "epsilon", "beta", "synonym_weight"):
        check_number(name, opts[name], 0.0)
    check_number("damping", opts["damping"], 0.0, 1.0, low_open=True, high_open=True)
    check_number("ppr_eps", opts["ppr_eps"], 0.0, 1.0, low_open=True, high_open=True)
    if opts["ppr_method"] not in ("auto", "exact", "push"):
        raise KgmemInputError(f"create_catrag_graph: ppr_method {opts['ppr_method']!r}: use 'auto', 'exact' or 'push'")
    check_number("synonym_threshold", opts["synonym_threshold"], 0.0, 1.0, low_open=True)
    if opts["rank_depth"] < opts["top_passages"]:
        raise KgmemInputError(f"create_catrag_graph: rank_depth ({opts['rank_depth']}) must be ≥ top_passages "
                              f"({opts['top_passages']})")


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


def _add(state: Mapping[str, Any], step: str, t0: float, usage: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The state's timings plus this step's non-LLM milliseconds."""
    llm_ms = float((usage or {}).get("llm_seconds", 0.0)) * 1000.0
    out = dict(state.get("timings") or {})
    out[step] = round(max(0.0, (time.perf_counter() - t0) * 1000.0 - llm_ms), 3)
    return out


def _rank_rows(snap: GraphSnapshot, scores: np.ndarray, rows: np.ndarray, k: int) -> list[dict[str, Any]]:
    sub = scores[rows]
    order = best_first(sub, k)
    return [{"id": snap.node_ids[rows[i]], "score": round(float(sub[i]), 8)} for i in order]


def _fuse_dense(idx: _Index, scores: np.ndarray, dense: np.ndarray, k: int) -> list[dict[str, Any]]:
    """The top ``k`` passages of the PPR ranking and the dense ranking taken in turns, PPR first
    (:func:`~langgraph_kgmem.ranking.interleave`)."""
    sub = scores[idx.chunk_rows]
    fused = interleave([best_first(sub, k).tolist(), best_first(dense, k).tolist()], k)
    return [{"id": idx.chunk_ids[i], "score": round(float(s), 8), "ppr": round(float(sub[i]), 8),
             "dense": round(float(dense[i]), 6)} for i, s in fused]


def _neighbour_contexts(kg: "KnowledgeGraph", idx: _Index, model: Any, store: Any, ids: Sequence[str],
                        tau: int, concurrency: int = 1) -> tuple[dict[str, str], dict[str, Any]]:
    """C(v) for each neighbour: its facts when it has ≤ τ of them, else its LLM summary, generated
    once and cached in the store (namespace ``("kgmem", kg name, "summaries")``, key = entity id;
    regenerated only when the entity's fact count changed). One batched store read, one write; the
    missing summaries are generated ``concurrency`` at a time."""
    from langgraph.store.base import GetOp, PutOp

    ns = RecordMemory(store, kg.name, SUMMARY_KIND).ns
    facts = {v: idx.entity_facts(kg, v) for v in ids}
    out = {v: "; ".join(f[:MAX_CONTEXT_FACTS]) or "(no facts)" for v, f in facts.items() if len(f) <= tau}
    need = [v for v in ids if v not in out]
    usage: dict[str, Any] = {}
    if not need:
        return out, usage
    todo: list[tuple[str, str, list[str]]] = []
    for v, item in zip(need, store.batch([GetOp(ns, v) for v in need])):
        if item is not None and item.value.get("facts") == len(facts[v]):
            out[v] = str(item.value["summary"])
            continue
        node = kg.node(v)
        todo.append((v, node.text if node else v, facts[v][:MAX_SUMMARY_FACTS]))

    def summarize(v: str, name: str, shown: list[str]) -> Any:
        return lambda: generate(model, render(SUMMARY_PROMPT, entity=fence(name, inline=True),
                                              facts=_fact_lines([{"text": t} for t in shown])),
                                step="summarize_neighbour", context={"entity": v, "name": name, "facts": shown},
                                fallback=lambda: "; ".join(shown[:MAX_CONTEXT_FACTS]) or "(no facts)")

    puts = []
    for (v, name, _), (text, u) in zip(todo, run_concurrently([summarize(*x) for x in todo], concurrency)):
        usage = merge_usage(usage, u)
        out[v] = text = text[:MAX_SUMMARY_CHARS]
        if u.get("fallbacks"):  # the model failed twice: this run shows the facts themselves, nothing is cached
            continue
        puts.append(PutOp(ns, v, {"summary": text, "facts": len(facts[v]), "name": name}, index=False))
    if puts:
        store.batch(puts)
    return out, usage


__all__ = ["CatragContext", "PPR_EDGE_KINDS", "create_catrag_graph", "hub_mask", "hub_mass", "hub_mass_of",
           "prepare_catrag_kg", "score_multiplier"]
