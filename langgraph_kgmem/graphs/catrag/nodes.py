"""CatRAG's nodes: module-level functions of ``(state, runtime)``.

What a node needs besides the state comes in two parts: ``deps`` (:class:`CatragDeps`: the KG,
the store, the model and options the graph was built with; bound by the factory) and the run's
context (``runtime.context``: per-run options on top of the build's, see
:meth:`~langgraph_kgmem.graphs.spec.MethodOptions.for_run`).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
from langgraph.runtime import Runtime

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.answering import answer_with_candidates, path_names
from langgraph_kgmem.graphs.catrag.index import (CatragIndex, dense_scores, entity_seeds, entity_text, fuse_adaptive,
                                                 fuse_dense, hub_mass, kg_index, minmax, rank_rows)
from langgraph_kgmem.graphs.catrag.options import CatragOptions
from langgraph_kgmem.graphs.catrag import prompts
from langgraph_kgmem.graphs.catrag.prompts import fact_lines
from langgraph_kgmem.graphs.catrag.schemas import (HUB_TOP, MAX_CONTEXT_FACTS, MAX_SUMMARY_CHARS, MAX_SUMMARY_FACTS,
                                                   SUMMARY_KIND, UNPARSABLE_SCORE, WEAK_MULTIPLIER, CatragState,
                                                   NeighbourScore, NeighbourScores, QueryEntities, RecognizedFacts,
                                                   score_multiplier)
from langgraph_kgmem.graphs.common import (check_question, content_words, emit_progress, evidence_item,
                                           fence, named_in, require, run_model)
from langgraph_kgmem.graphs.reuse import own_run_first, prior_run, reuse_facts, reuse_seeds, reused_answer
from langgraph_kgmem.graphs.runs import finish_run, run_store
from langgraph_kgmem.graphs.spec import options_of
from langgraph_kgmem.ingest.extract import offline_entities
from langgraph_kgmem.kg.types import entity_id
from langgraph_kgmem.llm import (decide, fresh_usage, generate, is_offline, merge_usage, model_label, render,
                                 run_concurrently)
from langgraph_kgmem.memory import RecordMemory, memory_scope, resolve_store
from langgraph_kgmem.memory.experience import ExperienceMemory
from langgraph_kgmem.memory.provenance import index_ops, provenance_of_nodes, record_holds
from langgraph_kgmem.ranking import best_first

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


@dataclass(frozen=True)
class CatragDeps:
    """What the nodes share for the graph's lifetime (bound with ``functools.partial``)."""

    kg: "KnowledgeGraph"
    model: Any                  # the build's model, resolved once (a run's context may replace it)
    options: CatragOptions      # the build's options (a run's context may override the per-run ones)
    store: Any = None           # the factory's store; None: the compiled graph's
    # (deps, options, store) -> the tenant's calibration (graphs/catrag/calibration.py); None: never read
    calibrate: Callable[..., dict[str, Any]] | None = None


def _options(state: Mapping[str, Any], runtime: Runtime[CatragOptions], deps: CatragDeps) -> CatragOptions:
    """The run's options: the build's, then the tenant's calibration (``state["calibration"]``),
    then the run's own context on top (an option the run names is never calibrated away)."""
    params = (state.get("calibration") or {}).get("params")
    return options_of(runtime, deps.options.for_run(params) if params else deps.options)


def retrieve_facts(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """Dense query-to-fact retrieval: the top ``top_facts`` facts (and a fresh usage record)."""
    t0 = time.perf_counter()
    question = check_question(state)
    opts = options_of(runtime, deps.options)   # a bad per-run option fails here, before any work
    calibration = deps.calibrate(deps, opts, run_store(deps.store)) if deps.calibrate and opts.calibration else {}
    if calibration.get("params"):
        opts = _options({"calibration": calibration}, runtime, deps)
    mdl = run_model(runtime, deps.model)
    # dynamic weighting caches the LLM's neighbour summaries in the store (offline runs write none)
    require("CatRAG" if opts.method == "catrag" else "HippoRAG 2", runtime=runtime, store=deps.store,
            needs_store=opts.dynamic_weighting and not is_offline(mdl))
    out = []
    for e, score in deps.kg.nearest_facts(question, opts.top_facts):
        out.append({"id": e.id, "text": deps.kg.fact_text(e), "score": round(float(score), 6), "src": e.src,
                    "dst": e.dst, "chunks": list(e.attrs.get("chunks", []))})
    # its own "no answer" of a rewording too: it only seeds the ranking, and the rewording is answered
    reused = prior_run(deps.kg, deps.store, opts.memory_scope, question, method=opts.method,
                       similarity=opts.reuse_similarity, unanswered_rewordings=True) if opts.reuse else None
    return {"candidates": out, "method": opts.method, "fallback": None, "anchors": [], "overrides": [],
            "edge_weights": {}, "usage": fresh_usage(), "model": model_label(mdl), "reused": reused,
            "calibration": calibration, "timings": {"retrieve_facts": _ms(t0)}}


def filter_facts(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """Recognition memory: the LLM keeps at most ``filter_keep`` relevant facts (the seed facts)."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    mdl = run_model(runtime, deps.model)
    kg = deps.kg
    cands = state.get("candidates", [])
    if not cands:
        return {"facts": [], "timings": _add(state, "filter_facts", t0)}

    def offline() -> RecognizedFacts:
        # recognition without a model: a fact counts when it is close to the question AND one of
        # its two entities is named in the question; a fact only near the question in embedding
        # space, about entities the question never names, would seed the walk elsewhere
        qwords = content_words(state["question"])
        return RecognizedFacts.model_construct(
            keep=[i for i, c in enumerate(cands, 1) if c["score"] >= opts.offline_fact_threshold
                  and any(named_in(entity_text(kg, e), qwords) for e in (c["src"], c["dst"]))][:opts.filter_keep])

    def check(d: RecognizedFacts) -> str | None:
        bad = [k for k in d.keep if not 1 <= k <= len(cands)]
        return f"fact number {bad[0]} does not exist; choose from 1..{len(cands)}" if bad else None

    if state.get("reused"):   # the facts of the earlier run's passages, no model call
        facts = reuse_facts(cands, state["reused"], opts.filter_keep) or [cands[k - 1] for k in offline().keep]
        return {"facts": facts, "timings": _add(state, "filter_facts", t0)}
    prompt = render(opts.prompt("filter"), question=state["question"], keep=opts.filter_keep,
                    facts=fence([f"{i}. {c['text']}" for i, c in enumerate(cands, 1)]))
    decision, usage = decide(mdl, RecognizedFacts, prompt, step="filter_facts", offline=offline,
                             validate=check, context={"question": state["question"], "candidates": cands})
    keep = list(dict.fromkeys(decision.keep))[:opts.filter_keep]
    facts = [cands[k - 1] for k in keep]
    return {"facts": facts, "usage": usage, "timings": _add(state, "filter_facts", t0, usage)}


def anchor_entities(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """Symbolic anchoring: the question's named entities → nearest entity nodes as weak seeds."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    mdl = "offline" if state.get("reused") else run_model(runtime, deps.model)
    kg = deps.kg
    question = state["question"]
    idx = kg_index(kg)

    def offline() -> QueryEntities:
        return QueryEntities.model_construct(names=offline_entities(question))

    decision, usage = decide(mdl, QueryEntities, render(opts.prompt("ner"), question=question), step="anchor_entities",
                             offline=offline, context={"question": question})
    anchors: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(n.strip() for n in decision.names if n and n.strip()):
        node = kg.node(entity_id(name))
        cos = 1.0
        if node is None or node.kind != "entity":
            hits = kg.nearest(name, 1, kinds=("entity",))
            if not hits or hits[0][1] < opts.anchor_threshold:
                continue
            node, cos = hits[0]
        if node.id in anchors:
            continue
        count = idx.passage_count.get(node.id, 0)
        # ε divided by THIS entity's own passage count (the paper's code used another entity's)
        anchors[node.id] = {"name": name, "id": node.id, "text": node.text, "similarity": round(float(cos), 4),
                            "passages": count, "weight": opts.epsilon / max(1, count)}
    return {"anchors": list(anchors.values()), "usage": usage,
            "timings": _add(state, "anchor_entities", t0, usage)}


_Plan = tuple[str, list[str], dict[str, float], dict[str, list[Any]]]   # seed, kept, their similarity, edges


def fact_vectors(kg: "KnowledgeGraph", edges: Sequence[Any]) -> np.ndarray:
    """Unit fact vectors of relation ``edges`` (rows in order): the stored ones in one read, and
    for an edge stored without one (``add_edges(embed_facts=False)``, as ``load_grbench`` loads a
    graph) its fact text (:meth:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore.fact_text`)
    embedded now, the text a stored fact vector embeds."""
    ids = [e.id for e in edges]
    try:
        return kg.vectors(ids, space="facts")
    except KgmemInputError:     # some edge was stored without one
        have = kg.has_vectors(ids, space="facts")
    missing = [i for i, h in enumerate(have) if not h]
    if not missing:     # all there at this look: written between the two reads, or the first failed otherwise
        return kg.vectors(ids, space="facts")
    vecs = np.asarray(kg.embed_texts([kg.fact_text(edges[i]) for i in missing], short=True), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    out = np.zeros((len(ids), vecs.shape[1]), dtype=np.float32)
    out[missing] = vecs / np.where(norms > 0, norms, 1.0)
    stored = [i for i, h in enumerate(have) if h]
    if stored:
        out[stored] = kg.vectors([ids[i] for i in stored], space="facts")
    return out


def _stage_one(kg: "KnowledgeGraph", top: Sequence[str], qvec: np.ndarray, k_edge: int,
               overrides: dict[tuple[str, str], float], tiers: dict[str, int]) -> list[_Plan]:
    """Stage I (coarse, no LLM): per seed, keep the ``k_edge`` neighbours whose linking fact is
    closest to the query; the rest get the weak multiplier (written into ``overrides``). Every
    seed's linking facts are read in one ``kg.vectors`` call (one round trip on a server)."""
    plans: list[_Plan] = []
    seeded: list[tuple[str, dict[str, list[Any]], list[str]]] = []
    for seed in top:
        groups: dict[str, list[Any]] = {}
        for e, nb in kg.neighbors(seed, kinds=("relation",), node_kinds=("entity",)):
            if nb.id != seed:
                groups.setdefault(nb.id, []).append(e)
        if groups:
            seeded.append((seed, groups, sorted(groups)))
    fact_edges = [e for _, groups, nbs in seeded for n in nbs for e in groups[n]]
    all_sims = fact_vectors(kg, fact_edges) @ qvec if fact_edges else np.zeros(0)
    at = 0
    for seed, groups, nbs in seeded:
        sizes = np.array([len(groups[n]) for n in nbs])
        sims = all_sims[at:at + int(sizes.sum())]
        at += int(sizes.sum())
        best = np.maximum.reduceat(sims, np.concatenate([[0], np.cumsum(sizes)[:-1]]))
        order = np.lexsort((np.arange(len(nbs)), -best))
        for j in order[k_edge:]:
            overrides[(seed, nbs[j])] = WEAK_MULTIPLIER
            tiers["stage1_weak"] += 1
        kept = [nbs[j] for j in order[:k_edge]]
        plans.append((seed, kept, {nbs[j]: float(best[j]) for j in order[:k_edge]}, groups))
        emit_progress({"event": "weight_edges", "seed": seed, "neighbours": len(nbs), "kept": len(kept)})
    return plans


def _offline_scores(kept: list[str], kept_sim: dict[str, float]) -> NeighbourScores:
    """Offline Stage II: rank by linking-fact similarity, best → 8 (strong), worst → 4 (weak);
    never prunes."""
    ranked = sorted(kept, key=lambda v: (-kept_sim[v], v))
    n = max(1, len(ranked) - 1)
    pos = {v: i for i, v in enumerate(kept, 1)}
    return NeighbourScores.model_construct(scores=[  # ours, not model output: no bounds to check
        NeighbourScore.model_construct(neighbour=pos[v], score=int(round(8 - 4 * r / n)))
        for r, v in enumerate(ranked)])


def _scoring(kg: "KnowledgeGraph", idx: CatragIndex, mdl: Any, plan: _Plan, question: str,
             facts: Sequence[dict[str, Any]], contexts: Mapping[str, str], offline_run: bool, template: str) -> Any:
    """The Stage II decision for one seed, as a call ``run_concurrently`` can make (``template``:
    the graph's ``score`` prompt)."""
    seed, kept, kept_sim, groups = plan
    lines, listing = [], []
    for num, v in enumerate(kept if not offline_run else [], 1):  # prompt: LLM runs only
        node = kg.node(v)
        links = "; ".join(kg.fact_text(e) for e in groups[v][:3])
        lines.append(f"{num}. {node.text if node else v} | linked by: {links} | context: {contexts[v]}")
        listing.append({"neighbour": num, "id": v, "name": node.text if node else v,
                        "chunks": idx.entity_chunks(kg, v)})
    seed_node = kg.node(seed)
    prompt = render(template, seed=fence(seed_node.text if seed_node else seed, inline=True),
                    question=question, facts=fact_lines(facts), neighbours=fence(lines)) if not offline_run else ""
    return functools.partial(
        decide, mdl, NeighbourScores, prompt, step="weight_edges",
        offline=functools.partial(_offline_scores, kept, kept_sim),
        fallback=lambda: NeighbourScores(scores=[]),
        context={"question": question, "seed": seed, "neighbours": listing})


def weight_edges(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """Query-aware edge weighting on the relation edges leaving the top ``n_seed`` seeds."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    mdl = "offline" if state.get("reused") else run_model(runtime, deps.model)   # reuse: no scoring calls
    kg = deps.kg
    idx = kg_index(kg)
    question = state["question"]
    facts = state.get("facts", [])
    seeds = entity_seeds(idx, facts, state.get("anchors", []))
    top = sorted(seeds, key=lambda s: (-seeds[s], s))[:opts.n_seed]
    offline_run = is_offline(mdl)
    usage: dict[str, Any] = {}
    overrides: dict[tuple[str, str], float] = {}
    tiers = {"pruned": 0, "weak": 0, "strong": 0, "key": 0, "stage1_weak": 0}
    plans = _stage_one(kg, top, kg.embed_query(question), opts.k_edge, overrides, tiers)
    contexts: dict[str, str] = {}
    if not offline_run:  # neighbour contexts C(v) for the prompts (summaries batched via the store)
        contexts, usage = neighbour_contexts(kg, idx, mdl, resolve_store(deps.store),
                                             sorted({v for _, kept, _, _ in plans for v in kept}), opts.tau,
                                             opts.llm_concurrency, template=opts.prompt("summary"))
    # Stage II (fine): one LLM decision per seed, the seeds' calls made concurrently
    scorings = [_scoring(kg, idx, mdl, plan, question, facts, contexts, offline_run, opts.prompt("score"))
                for plan in plans]
    for (seed, kept, _, _), (decision, u) in zip(plans, run_concurrently(scorings, 1 if offline_run
                                                                         else opts.llm_concurrency)):
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


def boost_key_facts(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """Key-fact passage boost: context edge seed u → passage p × (1 + β) when a verified fact with
    endpoint u came from p (no LLM)."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    overrides = {(a, b): m for a, b, m in state.get("overrides", [])}
    boosted = 0
    for f in state.get("facts", []):
        for u in (f["src"], f["dst"]):
            for p in f["chunks"]:
                node = deps.kg.node(p)
                if node is None or node.kind != "chunk" or (u, p) in overrides:
                    continue
                overrides[(u, p)] = 1.0 + opts.beta
                boosted += 1
    weights = dict(state.get("edge_weights") or {})
    weights["boosted"] = boosted
    return {"overrides": [[a, b, m] for (a, b), m in overrides.items()], "edge_weights": weights,
            "timings": _add(state, "boost_key_facts", t0)}


def run_ppr(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """Personalized PageRank from the seeds (and every passage, weakly) on the adjusted graph;
    passages ranked by mass (fused with the dense ranking under ``dense_fusion``)."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    kg = deps.kg
    idx = kg_index(kg)
    snap = idx.snap
    reset = np.zeros(snap.n)
    for eid, w in entity_seeds(idx, state.get("facts", []), state.get("anchors", [])).items():
        i = snap.index.get(eid)
        if i is not None and w > 0:
            reset[i] += w
    n_seeds = int(np.count_nonzero(reset))
    seed_mass = float(reset.sum())
    dense, credited = with_experience(deps, opts, state["question"], dense_scores(kg, idx, state["question"]))
    if opts.passage_weight > 0 and len(dense):
        reset[idx.chunk_rows] += minmax(dense) * opts.passage_weight   # distinct rows: no np.add.at
    ov = {(a, b): float(m) for a, b, m in state.get("overrides", []) if a in snap.index and b in snap.index}
    experience_priors(kg, snap, reset, ov, credited, opts.experience_weight, seed_mass)
    reuse_seeds(snap.index, reset, state.get("reused"), seed_mass)
    # exact runs stop once the evidence (top_passages) is certified; push is local to the seeds
    res = kg.ppr_scores(reset, snapshot=snap, damping=opts.damping, overrides=ov or None, method=opts.ppr_method,
                        eps=opts.ppr_eps, top_k=opts.top_passages, top_rows=idx.chunk_rows)
    scores = res.dense()
    fusion: dict[str, Any] = {}
    if opts.dense_fusion and len(dense) and opts.fusion == "adaptive":
        passages, fusion = fuse_adaptive(idx, scores, dense, opts.rank_depth, seeds=n_seeds, weak=opts.fusion_weak,
                                         strong=opts.fusion_strong, top=opts.top_passages)
    elif opts.dense_fusion and len(dense):
        passages = fuse_dense(idx, scores, dense, opts.rank_depth)
    else:
        passages = rank_rows(snap, scores, idx.chunk_rows, opts.rank_depth)
    passages = own_run_first(passages, state.get("reused"), opts.method, opts.rank_depth)
    top = best_first(scores, HUB_TOP)
    stats = {"hub_mass": round(hub_mass(scores, idx.hub_mask), 6), "seeds": n_seeds, "overrides": len(ov),
             "method": res.method,
             "top_nodes": [[snap.node_ids[i], round(float(scores[i]), 6)] for i in top]}
    if fusion:
        stats["fusion"] = fusion
    if credited:
        stats["experience"] = credited
    if state.get("calibration"):
        stats["calibration"] = state["calibration"]
    ms = _ms(t0)
    stats["ms"] = ms
    emit_progress({"event": "ppr", "method": opts.method, "seeds": n_seeds, "overrides": len(ov), "ms": ms,
                   "hub_mass": stats["hub_mass"]})
    evidence = [evidence_item(kg, p["id"], score=p["score"]) for p in passages[:opts.top_passages]]
    return {"passages": passages, "evidence": evidence, "ppr": stats, "timings": _add(state, "run_ppr", t0),
            **_finish_without_answer(deps, opts, state["question"], evidence)}


def rank_passages(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """The fallback when no fact survived the filter: passages by dense score alone."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    idx = kg_index(deps.kg)
    dense, credited = with_experience(deps, opts, state["question"], dense_scores(deps.kg, idx, state["question"]))
    order = best_first(dense, opts.rank_depth)
    passages = [{"id": idx.chunk_ids[i], "score": round(float(dense[i]), 6)} for i in order]
    evidence = [evidence_item(deps.kg, p["id"], score=p["score"]) for p in passages[:opts.top_passages]]
    emit_progress({"event": "fallback", "to": "dense", "reason": "no fact survived the filter"})
    return {"passages": passages, "evidence": evidence, "fallback": "dense", "anchors": [], "edge_weights": {},
            "ppr": {"experience": credited} if credited else {}, "timings": _add(state, "rank_passages", t0),
            **_finish_without_answer(deps, opts, state["question"], evidence)}


def answer(state: CatragState, runtime: Runtime[CatragOptions], *, deps: CatragDeps) -> dict[str, Any]:
    """The answer from the evidence passages and the PPR ranking (a short span offline,
    :mod:`~langgraph_kgmem.graphs.answering`)."""
    t0 = time.perf_counter()
    opts = _options(state, runtime, deps)
    mdl = run_model(runtime, deps.model)
    evidence = state.get("evidence", [])
    # the PPR ranking's entities are the method's own path to the answer
    path = path_names(deps.kg, [n for n, _ in (state.get("ppr") or {}).get("top_nodes", [])])
    further = [evidence_item(deps.kg, p["id"]) for p in state.get("passages", [])[len(evidence):2 * len(evidence)]]
    text, usage = reused_answer(state.get("reused"), evidence), {}
    if text is None:
        text, usage = answer_with_candidates(mdl, state["question"], evidence, path, further=further,
                                             context={"evidence_texts": [e["text"] for e in evidence],
                                                      "method": opts.method})
    run = finish_run(deps.kg, method=opts.method, question=state["question"], evidence=evidence, answer=text,
                     store=deps.store, scope=opts.memory_scope)
    return {"answer": text, "usage": usage, "timings": _add(state, "answer", t0, usage), **run}


EXPERIENCE_DEPTH = 100   # passages (best by dense score) whose experience credit a run reads


def with_experience(deps: CatragDeps, opts: CatragOptions, question: str,
                    dense: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """The passages' dense scores with the experience layer's prior: each of the
    :data:`EXPERIENCE_DEPTH` best passages moves by ``experience_weight`` × its credit for this
    question (in [−1, 1], see :mod:`~langgraph_kgmem.memory.experience`). Returns the scores (the
    same array when nothing is credited or ``experience`` is off) and the credits applied."""
    store = run_store(deps.store) if opts.experience and len(dense) else None
    if store is None:
        return dense, {}
    idx = kg_index(deps.kg)
    rows = best_first(dense, EXPERIENCE_DEPTH)
    ids = [idx.chunk_ids[i] for i in rows]
    credit = ExperienceMemory(store, deps.kg.name, memory_scope(opts.memory_scope), gate=opts.experience_gate,
                              distractor_after=opts.experience_distractor_after, kg=deps.kg).credit(
        ids, deps.kg.embed_query(question))
    if not np.any(credit):
        return dense, {}
    out = np.asarray(dense, dtype=np.float64).copy()
    out[rows] += opts.experience_weight * credit
    return out, {c: round(float(x), 6) for c, x in zip(ids, credit) if x}


def experience_priors(kg: "KnowledgeGraph", snap: Any, reset: np.ndarray, overrides: dict[tuple[str, str], float],
                      credited: Mapping[str, float], weight: float, seed_mass: float) -> None:
    """The experience layer in PPR (in place): a passage with credit ``c > 0`` becomes a seed of
    reset mass ``weight · c`` × the entity seeds' total mass (1 when there is none); the edges
    into a passage with ``c < 0`` keep ``1 + weight · c`` of their weight (at least 0)."""
    for pid, c in credited.items():
        row = snap.index.get(pid)
        if row is None:
            continue
        if c > 0:
            reset[row] += weight * c * (seed_mass if seed_mass > 0 else 1.0)
            continue
        for e, nb in kg.neighbors(pid):
            if nb.id in snap.index:
                overrides[(nb.id, pid)] = overrides.get((nb.id, pid), 1.0) * max(0.0, 1.0 + weight * c)


def _finish_without_answer(deps: CatragDeps, opts: CatragOptions, question: str,
                           evidence: Sequence[dict[str, Any]]) -> dict[str, str]:
    """The run's id and record when the graph has no answer step (``answer=False``); with one,
    the answer node records the run."""
    if opts.answer:
        return {}
    return finish_run(deps.kg, method=opts.method, question=question, evidence=evidence, answer=None,
                      store=deps.store, scope=opts.memory_scope)


def route_after_filter(state: CatragState, *, after: str) -> str:
    """No verified fact → the dense fallback; else the first step of the PPR chain (``after``)."""
    return "rank_passages" if not state.get("facts") else after


def neighbour_contexts(kg: "KnowledgeGraph", idx: CatragIndex, model: Any, store: Any, ids: Sequence[str],
                       tau: int, concurrency: int = 1, *, template: str | None = None
                       ) -> tuple[dict[str, str], dict[str, Any]]:
    """C(v) for each neighbour: its facts when it has ≤ τ of them, else its LLM summary, generated
    once and cached in the store (namespace ``("kgmem", kg name, "summaries")``, key = entity id;
    regenerated when the entity's fact count changed, or a document it rests on is gone or was
    replaced: its ``provenance`` is the entity's documents, checked by
    :func:`~langgraph_kgmem.memory.provenance.record_holds`). One batched store read, one write; the
    missing summaries are generated ``concurrency`` at a time. ``template``: the graph's ``summary``
    prompt (default: ``PROMPTS["summary"]`` as it is now)."""
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
        if item is not None and item.value.get("facts") == len(facts[v]) and record_holds(kg, item.value):
            out[v] = str(item.value["summary"])
            continue
        node = kg.node(v)
        todo.append((v, node.text if node else v, facts[v][:MAX_SUMMARY_FACTS]))

    summary_prompt = template if template is not None else prompts.PROMPTS["summary"]

    def summarize(v: str, name: str, shown: list[str]) -> Any:
        return lambda: generate(model, render(summary_prompt, entity=fence(name, inline=True),
                                              facts=fact_lines([{"text": t} for t in shown])),
                                step="summarize_neighbour", context={"entity": v, "name": name, "facts": shown},
                                fallback=lambda: "; ".join(shown[:MAX_CONTEXT_FACTS]) or "(no facts)")

    puts = []
    for (v, name, _), (text, u) in zip(todo, run_concurrently([summarize(*x) for x in todo], concurrency)):
        usage = merge_usage(usage, u)
        out[v] = text = text[:MAX_SUMMARY_CHARS]
        if u.get("fallbacks"):  # the model failed twice: this run shows the facts themselves, nothing is cached
            continue
        puts.append(PutOp(ns, v, {"summary": text, "facts": len(facts[v]), "name": name,
                                  "provenance": provenance_of_nodes(kg, [v])}, index=False))
    if puts:   # the summaries and their provenance index entries in one batch
        store.batch(puts + index_ops(kg.name, (), SUMMARY_KIND, {op.key: op.value["provenance"] for op in puts}))
    return out, usage


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


def _add(state: Mapping[str, Any], step: str, t0: float, usage: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The state's timings plus this step's non-LLM milliseconds."""
    llm_ms = float((usage or {}).get("llm_seconds", 0.0)) * 1000.0
    out = dict(state.get("timings") or {})
    out[step] = round(max(0.0, (time.perf_counter() - t0) * 1000.0 - llm_ms), 3)
    return out
