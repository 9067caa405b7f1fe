"""CatRAG's per-KG-version index (snapshot rows of the passages, passage counts, hub mask) and the
array helpers its nodes rank with; the hub-mass measures the benchmark reads."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from langgraph_kgmem.graphs.catrag.schemas import HUB_FRACTION, HUB_TOP, PPR_EDGE_KINDS
from langgraph_kgmem.kg.ppr import GraphSnapshot
from langgraph_kgmem.ranking import adaptive_fuse, best_first, interleave, overlap_at, trust_share

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


@dataclass
class CatragIndex:
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
        """The fact texts of an entity's relation edges, sorted (computed once per index)."""
        out = self.facts_of.get(eid)
        if out is None:
            out = self.facts_of[eid] = sorted(dict.fromkeys(kg.fact_text(e) for e, _ in
                                                            kg.neighbors(eid, kinds=("relation",))))
        return out

    def entity_chunks(self, kg: "KnowledgeGraph", eid: str) -> list[str]:
        """The passages an entity is mentioned in (computed once per index)."""
        out = self.chunks_of.get(eid)
        if out is None:
            out = self.chunks_of[eid] = [n.id for _, n in kg.neighbors(eid, kinds=("context",),
                                                                       node_kinds=("chunk",), direction="out")]
        return out


_INDEXES: "weakref.WeakKeyDictionary[Any, CatragIndex]" = weakref.WeakKeyDictionary()


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


def kg_index(kg: "KnowledgeGraph") -> CatragIndex:
    """The index of ``kg``'s current version (built on first use after each write, then shared)."""
    idx = _INDEXES.get(kg)
    if idx is not None and idx.version == kg.version:
        return idx
    snap = kg.snapshot(PPR_EDGE_KINDS)
    # dense passage scores come from the vector store: keep only the ids (and on a server, read
    # the passage vectors they are scored against now, not at the first question)
    ids = kg.vector_ids(("chunk",))
    kg.prefetch_scores(("chunk",))
    kg.prefetch_scores(("entity",))   # and the entity vectors its anchoring searches
    keep = [i for i, c in enumerate(ids) if c in snap.index]
    chunk_ids = [ids[i] for i in keep]
    count: dict[str, int] = {}
    for e in kg.edges("context"):
        dst = kg.node(e.dst)
        if dst is not None and dst.kind == "chunk":
            count[e.src] = count.get(e.src, 0) + 1
    idx = CatragIndex(kg.version, snap, chunk_ids, np.asarray([snap.index[c] for c in chunk_ids], dtype=np.int64),
                 np.asarray(keep, dtype=np.int64), len(ids), count, hub_mask(snap))
    _INDEXES[kg] = idx
    return idx



def entity_text(kg: "KnowledgeGraph", eid: str) -> str:
    """An entity's name (empty when the KG no longer holds it)."""
    node = kg.node(eid)
    return node.text if node is not None else ""


def passage_count(idx: CatragIndex, eid: str) -> int:
    """How many passages mention the entity, at least 1 (the divisor of its reset weight)."""
    return max(1, idx.passage_count.get(eid, 0))


def entity_seeds(idx: CatragIndex, facts: Sequence[dict[str, Any]], anchors: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Entity reset weights: max fact score ÷ passage count, plus anchor weights."""
    seeds: dict[str, float] = {}
    for f in facts:
        w = max(0.0, float(f["score"]))
        for eid in (f["src"], f["dst"]):
            seeds[eid] = max(seeds.get(eid, 0.0), w / passage_count(idx, eid))
    for a in anchors:
        seeds[a["id"]] = seeds.get(a["id"], 0.0) + float(a["weight"])
    return seeds


def dense_scores(kg: "KnowledgeGraph", idx: CatragIndex, question: str) -> np.ndarray:
    """Every passage's cosine with the question, in the index's chunk order (zeros for passages
    another process added since the snapshot)."""
    if len(idx.chunk_ids) == 0:
        return np.zeros(0)
    ids, scores = kg.similarity_scores(question, ("chunk",))
    if len(ids) != idx.chunk_vectors:
        # another process wrote since this run's snapshot (shared KG): score by id, not position
        pos = {c: i for i, c in enumerate(ids)}
        return np.asarray([scores[pos[c]] if c in pos else 0.0 for c in idx.chunk_ids], dtype=np.float32)
    return scores[idx.chunk_keep]


def minmax(x: np.ndarray) -> np.ndarray:
    """``x`` scaled to [0, 1] (all ones when it is constant)."""
    if len(x) == 0:
        return x
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)



def rank_rows(snap: GraphSnapshot, scores: np.ndarray, rows: np.ndarray, k: int) -> list[dict[str, Any]]:
    """The ``k`` best of ``rows`` by ``scores``, as ``{"id", "score"}``."""
    sub = scores[rows]
    order = best_first(sub, k)
    return [{"id": snap.node_ids[rows[i]], "score": round(float(sub[i]), 8)} for i in order]


def fuse_dense(idx: CatragIndex, scores: np.ndarray, dense: np.ndarray, k: int) -> list[dict[str, Any]]:
    """The top ``k`` passages of the PPR ranking and the dense ranking taken in turns, PPR first
    (:func:`~langgraph_kgmem.ranking.interleave`)."""
    sub = scores[idx.chunk_rows]
    fused = interleave([best_first(sub, k).tolist(), best_first(dense, k).tolist()], k)
    return [{"id": idx.chunk_ids[i], "score": round(float(s), 8), "ppr": round(float(sub[i]), 8),
             "dense": round(float(dense[i]), 6)} for i, s in fused]


def ppr_signals(sub: np.ndarray, dense: np.ndarray, seeds: int, k: int) -> dict[str, float]:
    """What the walk itself says about how far to trust its passage ranking (``sub``: PPR mass per
    passage): ``concentration``, the top two passages' share of the top ``2k``'s mass (a walk that
    found its evidence piles mass on a few passages; one that wandered spreads it); ``seeds``, the
    question's linked entities; ``agreement``, the share of PPR's top ``k`` that vector search also
    ranks in its top ``k``."""
    top = best_first(sub, 2 * k)
    mass = float(sub[top].sum()) if len(top) else 0.0
    return {"concentration": round(float(sub[top[:2]].sum()) / mass, 6) if mass > 0 else 0.0,
            "seeds": float(seeds),
            "agreement": round(overlap_at(top[:k].tolist(), best_first(dense, k).tolist(), k), 6)}


def ppr_confidence(signals: dict[str, float]) -> float:
    """CatRAG's trust in its own ranking, in [0, 1], from :func:`ppr_signals`: the mass
    concentration, zero when no question entity linked (the walk then only spreads the passages'
    own dense reset)."""
    return float(signals["concentration"]) if signals["seeds"] > 0 else 0.0


def fuse_adaptive(idx: CatragIndex, scores: np.ndarray, dense: np.ndarray, k: int, *, seeds: int, weak: float,
                  strong: float, top: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The top ``k`` passages of the PPR ranking fused with the dense ranking as far as this run's
    :func:`ppr_confidence` trusts PPR (:func:`~langgraph_kgmem.ranking.adaptive_fuse`, its
    guarantee reckoned on the evidence's ``top`` passages), and what decided it: the signals, the
    confidence, the share of places PPR got, and both rankings' first ``2 · top`` passages."""
    sub = scores[idx.chunk_rows]
    signals = ppr_signals(sub, dense, seeds, top)
    conf = ppr_confidence(signals)
    fused = adaptive_fuse(best_first(sub, k).tolist(), best_first(dense, k).tolist(), top, confidence=conf,
                          weak=weak, strong=strong, depth=k)[:k]
    shown = best_first(sub, 2 * top).tolist(), best_first(dense, 2 * top).tolist()
    info = {"confidence": round(conf, 6), "share": trust_share(conf, weak=weak, strong=strong, k=top), **signals,
            "own": [idx.chunk_ids[i] for i in shown[0]], "dense": [idx.chunk_ids[i] for i in shown[1]]}
    return ([{"id": idx.chunk_ids[i], "score": round(float(s), 8), "ppr": round(float(sub[i]), 8),
              "dense": round(float(dense[i]), 6)} for i, s in fused], info)
