"""ReMindRAG's nodes and routers: module-level functions of ``(state, runtime)``.

What a node needs besides the state comes in two parts: ``deps`` (:class:`~.deps.RemindragDeps`:
the KG and its cached view, the store, the build's model and options; bound by the factory) and
the run's context (``runtime.context``: per-run options on top of the build's, see
:meth:`~langgraph_kgmem.graphs.spec.MethodOptions.for_run`).
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np
from langgraph.config import get_config
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from langgraph_kgmem.graphs.answering import answer_with_candidates, path_names
from langgraph_kgmem.graphs.common import (check_question, content_words, data_text, dense_passages, emit_progress,
                                           evidence_item, fence, fuse_with_dense, fuse_with_dense_adaptive,
                                           id_validator, named_in, require, run_model)
from langgraph_kgmem.graphs.remindrag.deps import RemindragDeps, Walk, edge_weights
from langgraph_kgmem.graphs.remindrag.maths import enhance, penalize, replay_weights, unit_vector
from langgraph_kgmem.graphs.remindrag.options import RemindragOptions
from langgraph_kgmem.graphs.remindrag.prompts import node_label, render_evidence
from langgraph_kgmem.graphs.remindrag.schemas import (MAX_BACKWARD, MAX_CANDIDATES, METHOD, NO_UPDATES,
                                                      OFFLINE_COVERAGE, SEED_POOL, NextMove, ReMindState, SubQuestions,
                                                      Sufficiency, UsefulMarks, read_person_move)
from langgraph_kgmem.graphs.remindrag.view import effective_edges, evidence_ids, s_adjacency
from langgraph_kgmem.graphs.reuse import lent, own_finds_first, prior_run, reused_answer
from langgraph_kgmem.graphs.runs import finish_run
from langgraph_kgmem.graphs.spec import options_of
from langgraph_kgmem.llm import decide, fresh_usage, is_offline, model_label, render
from langgraph_kgmem.memory import EdgeMemory
from langgraph_kgmem.ranking import overlap_at

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def retrieve_seeds(state: ReMindState, runtime: Runtime[RemindragOptions],
                   *, deps: RemindragDeps) -> dict[str, Any]:
    """Seed entities of the question (or of each sub-question, with ``decompose``)."""
    llm = run_model(runtime, deps.model)
    question = check_question(state)
    opts = options_of(runtime, deps.options)   # a bad per-run option is refused here, before any work
    require("ReMindRAG", runtime=runtime, store=deps.store, needs_store=True, memory_scope=deps.options.memory_scope)
    kg = deps.kg
    usage: dict[str, Any] = {}
    queries = [question]
    if opts.decompose:
        sub, usage = decide(llm, SubQuestions, render(opts.prompt("decompose"), question=question), step="decompose",
                            offline=lambda: SubQuestions.model_construct(sub_questions=[question]),
                            context={"question": question})
        queries = [s for s in sub.sub_questions[:4] if s.strip()] or [question]
    seeds: list[str] = []
    for text in queries:
        # of the entities nearest the (sub-)question, those it names come first: a seed merely
        # near the question in embedding space starts the walk off its subject
        words = content_words(text)
        near = kg.nearest(text, SEED_POOL * opts.seeds_k, kinds=("entity",))
        hits = sorted(near, key=lambda h: not named_in(h[0].text, words))[:opts.seeds_k] or \
            kg.nearest(text, opts.seeds_k, kinds=("chunk",))
        seeds.extend(deps.view.unit(n.id) for n, _ in hits)
    seeds = list(dict.fromkeys(seeds))
    emit_progress({"event": "seeds", "method": METHOD, "seed_ids": seeds})
    return {"seed_ids": seeds, "subgraph_nodes": list(seeds), "subgraph_edges": [], "current": seeds[0] if seeds else "",
            "path": [], "hops": 0, "steps": 0, "traversed": False, "sufficient": False, "method": METHOD,
            "replayed": {"nodes": [], "edges": []}, "memory_updates": dict(NO_UPDATES), "reused": None,
            "usage": fresh_usage(usage), "model": model_label(llm)}


def replay_memory(state: ReMindState, runtime: Runtime[RemindragOptions],
                  *, deps: RemindragDeps) -> dict[str, Any]:
    """Replay the edge memory, no LLM: a depth-first walk from the seeds along the edges whose
    replay weight exceeds ``lam``, strongest first, adding at most ``max_replay_nodes`` nodes."""
    opts = options_of(runtime, deps.options)
    if not opts.replay:   # turned off: the walk (and a person in the loop) decides every question
        return {"replayed": {"nodes": [], "edges": []}, "reused": None}
    kg = deps.kg
    q = kg.embed_query(state["question"])
    mem = deps.memory_of(q)
    # the run's walk starts here: what replay reads, the walk's first step reads no more
    walk = deps.walk(thread_of_run(), state["question"], new_walk=True, memory=mem)
    nodes = list(state.get("subgraph_nodes", []))
    in_s = set(nodes)
    edges: list[str] = []
    followed: list[dict[str, Any]] = []
    stack = list(reversed(state.get("seed_ids", [])))
    read_ahead(deps, mem, walk, stack, q)   # every seed's memory in one read, not one a seed
    while stack and len(followed) < opts.max_replay_nodes:
        u = stack.pop()
        exp = deps.view.expand(u)
        if not exp.edge_ids:
            continue
        read_ahead(deps, mem, walk, [u], q)
        w = edge_weights(exp, mem, q, opts.alpha, walk)
        if opts.experience:
            w = w + (1.0 - opts.alpha) * experience_credit(deps, exp.edge_ids, exp.nbr_ids, q)
        pushed = []
        for i in np.argsort(-w, kind="stable"):  # strongest edge first
            if w[i] <= opts.lam:
                break
            b = exp.nbr_ids[i]
            if b in in_s or len(followed) >= opts.max_replay_nodes:
                continue
            in_s.add(b)
            nodes.append(b)
            edges.append(exp.edge_ids[i])
            followed.append({"edge": exp.edge_ids[i], "from": u, "to": b, "weight": round(float(w[i]), 4)})
            pushed.append(b)
        stack.extend(reversed(pushed))  # the strongest neighbour is explored next (depth first)
    replayed = {"nodes": [f["to"] for f in followed], "edges": followed}
    emit_progress({"event": "replay", "method": METHOD, "nodes": len(followed)})
    reused = prior_run(kg, deps.store, opts.memory_scope, state["question"], method=METHOD,
                       similarity=opts.reuse_similarity) if opts.reuse else None
    if reused:   # a confirmed earlier run's passages join S (their units), after what replay found
        nodes += [u for u in dict.fromkeys(deps.view.unit(p) for p in reused["passages"]) if u not in set(nodes)]
    # the walk (if any) starts at the first seed; replayed nodes are reachable by backward moves
    return {"subgraph_nodes": nodes, "subgraph_edges": edges, "replayed": replayed, "reused": reused}


LOOK_AHEAD = 2 * MAX_CANDIDATES   # neighbours of a node whose memory index a walk's read takes along (read_ahead)


def read_ahead(deps: RemindragDeps, mem: EdgeMemory, walk: Walk, nodes: Sequence[str], q: np.ndarray) -> None:
    """When ``walk`` has not read the memory around ``nodes`` (each with its chunk's anchor) yet:
    that of ``nodes`` and of their neighbours, in one go
    (:meth:`~langgraph_kgmem.memory.EdgeMemory.read_around`). The next move goes to a neighbour,
    so it finds its memory read, and a walk reads about every other step. Only a node's
    :data:`LOOK_AHEAD` neighbours nearest the question are taken along (the next move is nearly
    always among them, and finding each chunk's anchor costs time on every backend), so the read
    stays bounded at a hub; a move elsewhere reads then, as before."""
    if not nodes:
        return
    expansions = deps.view.expand_many(nodes)
    members = [m for n in nodes for m in expansions[n].members]
    if all(m in walk.listed for m in members):
        return
    ahead: list[str] = []
    for n in nodes:
        exp = expansions[n]
        nbrs = list(dict.fromkeys(exp.nbr_ids))
        if len(nbrs) > LOOK_AHEAD:
            cos = dict(zip(exp.nbr_ids, (exp.nbr_vecs @ q.astype(np.float32)).tolist()))
            nbrs = sorted(nbrs, key=lambda b: -cos[b])[:LOOK_AHEAD]
        ahead += [m for b in nbrs for m in deps.view.members(b)]
    mem.read_around(members + ahead, walk.reads, walk.listed, [e for n in nodes for e in expansions[n].edge_ids])


WALK_CREDIT = 0.5   # a confirmed walk credits as an agent's feedback does: half a person's


def experience_credit(deps: RemindragDeps, edge_ids: Sequence[str], nbr_ids: Sequence[str], q: np.ndarray) -> np.ndarray:
    """Each edge's experience credit for question ``q``: its own plus that of the passage it
    leads to (credited by feedback on any method's run), in [−1, 1]."""
    mem = deps.experience()
    both = mem.credit(list(edge_ids) + list(nbr_ids), q)
    return np.clip(both[:len(edge_ids)] + both[len(edge_ids):], -1.0, 1.0)


def check_sufficiency(state: ReMindState, runtime: Runtime[RemindragOptions],
                      *, deps: RemindragDeps) -> dict[str, Any]:
    """Whether the collected subgraph already answers the question (an LLM decision; offline: a
    passage is in it and the evidence holds most of the question's words)."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    llm = run_model(runtime, deps.model)
    question = state["question"]
    chunks, facts = evidence_ids(kg, state.get("subgraph_nodes", []), state.get("subgraph_edges", []))
    steps = state.get("steps", 0) + 1
    if not chunks and not facts:  # nothing collected: cannot be sufficient, no need to ask
        return {"sufficient": False, "steps": steps}
    if state.get("reused") and steps == 1 and not lent(state["reused"], METHOD):
        # its own earlier run answered from these passages: no need to ask (another method's is checked)
        return {"sufficient": True, "steps": steps}
    evidence_text = render_evidence(kg, question, chunks, facts, opts.chunk_chars)

    def heuristic() -> Sufficiency:
        # offline: a passage is in S and the evidence mentions most of the question's words
        qw = content_words(question)
        text = " ".join(kg.node(c).text + " " + str(kg.node(c).attrs.get("title") or "") for c in chunks)
        text += " " + " ".join(kg.fact_text(kg.edge(f)) for f in facts)
        cover = len(qw & content_words(text)) / (len(qw) or 1)
        return Sufficiency(sufficient=bool(chunks) and cover >= OFFLINE_COVERAGE)

    decision, usage = decide(
        llm, Sufficiency, render(opts.prompt("sufficiency"), question=question, evidence=evidence_text),
        step="check_sufficiency", offline=heuristic, fallback=lambda: Sufficiency(sufficient=False),
        context={"question": question, "evidence_ids": chunks, "fact_ids": facts,
                 "node_ids": list(state.get("subgraph_nodes", [])), "edge_ids": list(state.get("subgraph_edges", []))})
    return {"sufficient": decision.sufficient, "steps": steps, "usage": usage}


def thread_of_run() -> str:
    """The running graph's thread id ("" without one, or outside a run)."""
    try:
        config = get_config()
    except RuntimeError:
        return ""
    return str((config.get("configurable") or {}).get("thread_id") or "")


def frontier_of(deps: RemindragDeps, state: ReMindState, q: np.ndarray, mem: EdgeMemory,
                alpha: float, replayed: bool = True) -> dict[str, list[tuple[str, str, float, float]]]:
    """For each node of S with unexplored neighbours, its best :data:`MAX_CANDIDATES` of them:
    [(neighbour, edge, w, cos(q, neighbour))], best first, one entry per neighbour (its strongest edge).

    A node's neighbours are ranked once a walk (:class:`~langgraph_kgmem.graphs.remindrag.deps.Walk`) and filtered by S at each step:
    S only grows, and the ranking of a neighbour does not depend on S. ``replayed``: the run's
    replay started its walk (else its first move does)."""
    nodes = list(dict.fromkeys(state.get("subgraph_nodes", [])))
    # replay started this run's walk (with replay off, the first move starts it)
    walk = deps.walk(thread_of_run(), state["question"], new_walk=not replayed and not state.get("hops"), memory=mem)
    ranked = walk.ranked_at(deps.kg.version)
    todo = [u for u in nodes if u not in ranked]
    if todo:
        read_ahead(deps, mem, walk, todo, q)
        expansions = deps.view.expand_many(todo)
        # one store read and one matrix product for every node new to the walk
        all_edges = [e for u in todo for e in expansions[u].edge_ids]
        w = qs = np.zeros(0)
        if all_edges:
            cos_ab = np.concatenate([expansions[u].cos_ab for u in todo])
            around = [m for u in todo for m in expansions[u].members]
            w = replay_weights(cos_ab, mem.many(all_edges, seen=walk.reads, around=around, listed=walk.listed), q, alpha)
            qs = np.vstack([expansions[u].nbr_vecs for u in todo]) @ q.astype(np.float32)
        k = 0
        for u in todo:
            exp = expansions[u]
            best: dict[str, tuple[str, str, float, float]] = {}
            for b, e in zip(exp.nbr_ids, exp.edge_ids):
                cand = (b, e, float(w[k]), float(qs[k]))
                k += 1
                if b not in best or cand[2] > best[b][2]:
                    best[b] = cand
            ranked[u] = sorted(best.values(), key=lambda c: (-(c[3] + c[2]), c[0]))
    in_s = set(nodes)
    out: dict[str, list[tuple[str, str, float, float]]] = {}
    for u in nodes:
        head = list(islice((c for c in ranked[u] if c[0] not in in_s), MAX_CANDIDATES))
        if head:
            out[u] = head
    return out


def ask_person(kg: "KnowledgeGraph", question: str, current: str, forward: Sequence[tuple[str, str, float, float]],
               backward: Sequence[str], suggestion: NextMove, check: Any) -> NextMove:
    """Human-in-the-loop move: ``interrupt`` with the candidates until the resume value is valid."""
    request: dict[str, Any] = {
        "kind": "remindrag_next_move", "question": question, "current": {"id": current, "label": node_label(kg, current)},
        "forward": [{"id": b, "label": node_label(kg, b), "w": round(w, 4)} for b, _, w, _ in forward],
        "backward": [{"id": u, "label": node_label(kg, u)} for u in backward],
        "suggested": suggestion.model_dump(),
        "resume_with": "a node id from 'forward' or 'backward', or {'direction': ..., 'node_id': ...}"}
    while True:   # a value that is not an offered move asks again, with the reason: never a silent end
        reply = interrupt(request)
        try:
            move = read_person_move(reply, [b for b, *_ in forward], backward)
        except ValueError as exc:
            request = {**request, "error": str(exc)}
            continue
        problem = check(move)
        if problem is None:
            return move
        request = {**request, "error": problem}


def traverse_step(state: ReMindState, runtime: Runtime[RemindragOptions],
                  *, deps: RemindragDeps) -> dict[str, Any]:
    """One move of the walk, forward to a neighbour of the current node or back to a visited node:
    an LLM decision, a person's (``human_in_the_loop``), or offline the best-first heuristic."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    llm = run_model(runtime, deps.model)
    question = state["question"]
    q = kg.embed_query(question)
    mem = deps.memory_of(q)
    frontier = frontier_of(deps, state, q, mem, opts.alpha, replayed=opts.replay)
    current = state.get("current", "")
    forward = frontier.get(current, [])[:MAX_CANDIDATES]
    backward = sorted((u for u in frontier if u != current), key=lambda u: -(frontier[u][0][3] + frontier[u][0][2]))
    backward = backward[:MAX_BACKWARD]
    fwd_ids = [c[0] for c in forward]

    def best_first() -> NextMove:
        # offline: the unexplored neighbour most similar to the question (plus its learned weight),
        # reached forward if it hangs off the current node, else by a backward move to its parent
        best_u = max(frontier, key=lambda u: (frontier[u][0][3] + frontier[u][0][2], u == current))
        if best_u == current:
            return NextMove(direction="forward", node_id=frontier[current][0][0])
        return NextMove(direction="backward", node_id=best_u)

    def check(move: NextMove) -> str | None:
        allowed = fwd_ids if move.direction == "forward" else backward
        if not allowed:
            return f"no {move.direction} move is possible now; choose the other direction"
        return id_validator(allowed, "node_id")(move)

    chunks, facts = evidence_ids(kg, state.get("subgraph_nodes", []), state.get("subgraph_edges", []))
    path_text = " → ".join(data_text(node_label(kg, h["to"], 40)) + (" (back)" if h["direction"] == "backward" else "")
                            for h in state.get("path", [])[-8:])
    prompt = render(
        opts.prompt("next_move"), question=question, evidence=render_evidence(kg, question, chunks, facts, opts.chunk_chars),
        path=fence(path_text, empty="(start)", inline=True), current=fence(f"{current} {node_label(kg, current)}", inline=True),
        forward=fence([f"- {b} {node_label(kg, b)} (w={w:.2f})" for b, _, w, _ in forward]),
        backward=fence([f"- {u} {node_label(kg, u)}" for u in backward]))
    if deps.options.human_in_the_loop:
        move, usage, decided_by = ask_person(kg, question, current, forward, backward, best_first(), check), {}, "human"
    else:
        move, usage = decide(
            llm, NextMove, prompt, step="traverse_step", offline=best_first, validate=check,
            context={"question": question, "current": current, "forward": fwd_ids, "backward": list(backward),
                     "evidence_ids": chunks, "node_ids": list(state.get("subgraph_nodes", [])),
                     "frontier": {u: [c[0] for c in cands] for u, cands in frontier.items()}})
        decided_by = "offline" if is_offline(llm) else ("fallback" if usage.get("fallbacks") else "llm")
    hop: dict[str, Any] = {"step": state.get("hops", 0) + 1, "direction": move.direction, "from": current,
                           "to": move.node_id, "edge": None, "decided_by": decided_by}
    update: dict[str, Any] = {"hops": state.get("hops", 0) + 1, "steps": state.get("steps", 0) + 1,
                              "traversed": True, "usage": usage, "current": move.node_id}
    if move.direction == "forward":
        b, eid = next((c[0], c[1]) for c in forward if c[0] == move.node_id)
        hop["edge"] = eid
        update["subgraph_nodes"] = list(state.get("subgraph_nodes", [])) + [b]
        update["subgraph_edges"] = list(state.get("subgraph_edges", [])) + [eid]
    update["path"] = list(state.get("path", [])) + [hop]
    emit_progress({"event": "hop", "method": METHOD, **hop})
    return update


def walk_confidence(found: Sequence[str], dense: Sequence[str], k: int = 5) -> tuple[float, dict[str, float]]:
    """ReMindRAG's trust in its walk's passages: the share of its first ``k`` finds that vector
    search also ranks in its top ``k``. The walk's order is where it went, not how near each find
    is to the question, so it earns places only where vector search vouches for where it went."""
    agreement = overlap_at(found, dense, k)
    return agreement, {"agreement": round(agreement, 6), "found": float(len(set(found)))}


def answer(state: ReMindState, runtime: Runtime[RemindragOptions],
           *, deps: RemindragDeps) -> dict[str, Any]:
    """The answer from the collected passages and facts (fused with the dense ranking under
    ``dense_fusion``), and why the walk stopped."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    llm = run_model(runtime, deps.model)
    question = state["question"]
    chunks, facts = evidence_ids(kg, state.get("subgraph_nodes", []), state.get("subgraph_edges", []))
    chunks = own_finds_first(chunks, state.get("reused"), METHOD, deps.view.unit)
    fusion: dict[str, Any] = {}
    if opts.dense_fusion and opts.fusion == "adaptive":
        fused, fusion = fuse_with_dense_adaptive(kg, question, chunks, max(opts.top_passages, len(chunks)),
                                                 confidence=walk_confidence, weak=opts.fusion_weak,
                                                 strong=opts.fusion_strong, top=opts.top_passages)
        evidence = [evidence_item(kg, c, score=s) for c, s in fused] + [evidence_item(kg, i) for i in facts]
    elif opts.dense_fusion:
        fused = fuse_with_dense(kg, question, chunks, max(opts.top_passages, len(chunks)))
        evidence = [evidence_item(kg, c, score=s) for c, s in fused] + [evidence_item(kg, i) for i in facts]
    else:
        evidence = [evidence_item(kg, i) for i in chunks + facts]
    # the walk's entities, in the order it reached them, are its own path to the answer
    text, usage = reused_answer(state.get("reused"), evidence), {}
    if text is None:
        further = _further_passages(kg, question, evidence) if opts.dense_fusion and is_offline(llm) else []
        text, usage = answer_with_candidates(llm, question, evidence, path_names(kg, state.get("subgraph_nodes", [])),
                                             further=further,
                                             context={"evidence_texts": [e["text"] for e in evidence], "method": METHOD})
    reason = "sufficient" if state.get("sufficient") else (
        "max_hops" if state.get("hops", 0) >= opts.max_hops else
        "max_steps" if state.get("steps", 0) >= opts.step_cap else "exhausted")
    run = finish_run(kg, method=METHOD, question=question, evidence=evidence, answer=text, store=deps.store,
                     scope=opts.memory_scope)
    return {"answer": text, "evidence": evidence, "usage": usage, "stop_reason": reason,
            **({"fusion": fusion} if fusion else {}), **run}


def _further_passages(kg: "KnowledgeGraph", question: str, evidence: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The next passages of the fused ranking after ``evidence`` (vector search's next places, as
    many as the evidence holds passages): read by the offline answer step for candidates at their
    lower rank weight, as CatRAG's and dense's next passages are; never shown to a model and no
    part of the evidence (retrieval figures are unchanged)."""
    have = {str(e.get("id")) for e in evidence}
    n = sum(1 for e in evidence if e.get("kind") == "chunk")
    nxt = [c for c in dense_passages(kg, question, 2 * n + len(have)) if c not in have][:n]
    return [evidence_item(kg, c) for c in nxt]


def memorize(state: ReMindState, runtime: Runtime[RemindragOptions],
             *, deps: RemindragDeps) -> dict[str, Any]:
    """Mark the useful evidence (one LLM call), enhance the edges on the paths from the seeds to
    it and penalise the rest of the subgraph's edges."""
    kg = deps.kg
    llm = run_model(runtime, deps.model)
    question = state["question"]
    q = unit_vector(kg.embed_query(question))
    nodes, edges = state.get("subgraph_nodes", []), state.get("subgraph_edges", [])
    chunks, facts = evidence_ids(kg, nodes, edges)
    candidates = chunks + facts
    usage: dict[str, Any] = {}
    if candidates:
        def heuristic() -> UsefulMarks:
            # offline: the passage holding the extractive answer, then greedily the passages that
            # cover the most question words still uncovered (the ones the sufficiency test needed)
            ans = (state.get("answer") or "").strip().lower()
            marked = [c for c in chunks if ans and ans in kg.node(c).text.lower()][:1]
            todo = content_words(question)
            words = {c: content_words(kg.node(c).text + " " + str(kg.node(c).attrs.get("title") or "")) for c in chunks}
            for c in marked:
                todo -= words[c]
            while todo:
                best = max(chunks, key=lambda c: (len(todo & words[c]), -chunks.index(c)), default=None)
                if best is None or not todo & words[best]:
                    break
                marked.append(best)
                todo -= words[best]
            return UsefulMarks.model_construct(useful_ids=list(dict.fromkeys(marked)))

        items = fence([f"- {e['id']} ({e['kind']}) {e['text'][:200]}"
                       for e in (evidence_item(kg, i) for i in candidates)])
        answer_text = fence(state.get("answer", ""), inline=True)
        marks, usage = decide(
            llm, UsefulMarks, render(options_of(runtime, deps.options).prompt("useful"), question=question, answer=answer_text,
                                           items=items),
            step="mark_useful", offline=heuristic, fallback=heuristic,
            validate=id_validator(candidates, "useful_ids"),
            context={"question": question, "candidates": candidates, "evidence_ids": chunks, "fact_ids": facts})
        useful = list(dict.fromkeys(marks.useful_ids))
    else:
        useful = []
    adj = s_adjacency(kg, deps.view, edges)
    targets: list[str] = []
    for i in useful:
        e = kg.edge(i)
        targets.extend([deps.view.unit(e.src), deps.view.unit(e.dst)] if e is not None else [i])
    eff = effective_edges(adj, state.get("seed_ids", []), targets)
    eff += [i for i in useful if kg.edge(i) is not None and i not in eff]
    eff_set = set(eff)
    ineff = [e for e in edges if e not in eff_set]
    def change(k: int, old: np.ndarray) -> np.ndarray | None:
        v = enhance(old, q) if k < len(eff) else penalize(old, q)
        # a penalty on a zero vector changes nothing: no write
        return v if k < len(eff) or np.any(v != old) else None

    # read-modify-write under the store's lock: concurrent runs (threads, processes) lose nothing
    written = deps.memory_of(q).update(eff + ineff, change, question=question, credited=eff)
    if options_of(runtime, deps.options).experience:   # a confirmed walk: its edges and passages earn credit
        deps.experience().add(eff + [i for i in useful if kg.edge(i) is None], (), q, weight=WALK_CREDIT)
    updates = {"enhanced": len(eff), "penalised": len(ineff), "enhanced_ids": eff, "penalised_ids": ineff,
               "useful_ids": useful, "written": written}
    emit_progress({"event": "memorize", "method": METHOD, "enhanced": len(eff), "penalised": len(ineff)})
    return {"memory_updates": updates, "usage": usage}


def after_check(state: ReMindState, runtime: Runtime[RemindragOptions], *,
                deps: RemindragDeps) -> Literal["traverse_step", "answer"]:
    """Answer when the subgraph is sufficient, a cap is reached or nothing is left to explore;
    else move."""
    opts = options_of(runtime, deps.options)
    if state.get("sufficient"):
        return "answer"
    if state.get("hops", 0) >= opts.max_hops or state.get("steps", 0) >= opts.step_cap:
        return "answer"
    in_s = set(state.get("subgraph_nodes", []))
    for u in state.get("subgraph_nodes", []):
        if any(b not in in_s for b in deps.view.expand(u).nbr_ids):
            return "traverse_step"
    return "answer"  # nothing left to explore


def after_move(state: ReMindState, runtime: Runtime[RemindragOptions], *,
               deps: RemindragDeps) -> Literal["check_sufficiency", "traverse_step", "answer"]:
    """Where the walk goes after a move: check sufficiency again after a forward move, move on
    after a backward one, answer once the caps are reached."""
    # a backward move leaves S as it was: asking "is S sufficient?" again would repeat the last
    # (paid) answer, so the walk goes on under the same caps
    path = state.get("path", [])
    if path and path[-1]["direction"] == "backward":
        return after_check(state, runtime, deps=deps)
    return "check_sufficiency"


def after_answer(state: ReMindState) -> Literal["memorize", "__end__"]:
    """Memorise only after a walk: replay alone learned nothing new."""
    return "memorize" if state.get("traversed") else END
