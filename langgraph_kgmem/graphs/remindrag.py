"""ReMindRAG: LLM-guided KG traversal that remembers which edges helped (METHODS.md §1).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy, interrupt
from pydantic import BaseModel, Field, ValidationError

from langgraph_kgmem.errors import check_int, check_number
from langgraph_kgmem.graphs.common import (DATA_NOTE, MAX_LIST_ITEMS, BaseState, InputState, ModelId, ModelName,
                                           RunContext, answer_question, check_question, content_words, data_text,
                                           emit_progress, evidence_item, fence, fuse_with_dense, id_validator, named_in,
                                           method_model, require, run_model)
from langgraph_kgmem.llm import decide, fresh_usage, is_offline, model_label, render
from langgraph_kgmem.memory import EdgeMemory, resolve_store
from langgraph_kgmem.memory import memory_scope as scope_of

if TYPE_CHECKING:
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph

# ------------------------------------------------------------------------------------ constants

METHOD = "remindrag"
Direction = Literal["forward", "backward"]
# edges a traversal may cross (anchor_chunk is internal to a chunk+anchor evidence unit)
TRAVERSE_KINDS = ("relation", "synonym", "context", "next")
UNIT_KINDS = ("entity", "chunk", "anchor")
MAX_CANDIDATES = 20          # forward candidates shown to the model per step
MAX_BACKWARD = 10            # visited nodes offered for a backward move
SEED_POOL = 5                # seeds are chosen among the SEED_POOL × seeds_k entities nearest the question
OFFLINE_COVERAGE = 0.75      # offline sufficiency: share of question words the evidence must contain
NO_UPDATES: dict[str, Any] = {"enhanced": 0, "penalised": 0, "enhanced_ids": [], "penalised_ids": [],
                              "useful_ids": [], "written": 0}


# ------------------------------------------------------------------------------------ memory maths


def delta(x: float | np.ndarray) -> float | np.ndarray:
    """Step size ``δ(x) = (2/π)·cos(πx/2)`` for x in [0, 1], 0 beyond (and for negative x, δ(|x|))."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    out = np.where(x < 1.0, (2.0 / math.pi) * np.cos(math.pi * np.minimum(x, 1.0) / 2.0), 0.0)
    return float(out) if out.ndim == 0 else out


def enhance(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Effective-edge update ``v + δ(‖v‖)·q̂``: fast wake-up from 0, damped as ‖v‖ → 1.

    For ‖v‖ ≤ 1 the result's norm stays ≤ 1 (x + δ(x) ≤ 1 on [0, 1]).
    """
    q = _unit(q)
    v = np.asarray(v, dtype=np.float64)
    return v + delta(float(np.linalg.norm(v))) * q


def penalize(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Ineffective-edge update: with ``p = v·q̂``, ``v − δ(|p|)·p·q̂``.

    Only the component along the query shrinks; the part of ``v`` orthogonal to ``q̂`` is unchanged.
    """
    q = _unit(q)
    v = np.asarray(v, dtype=np.float64)
    p = float(v @ q)
    return v - delta(abs(p)) * p * q


def replay_weights(cos_ab: np.ndarray, memory: np.ndarray, q: np.ndarray, alpha: float) -> np.ndarray:
    """``w = α·cos(emb(a), emb(b)) + (1−α)·(q̂·v_ab)`` for a batch of edges (rows of ``memory``)."""
    return alpha * np.asarray(cos_ab, dtype=np.float64) + (1.0 - alpha) * (np.asarray(memory) @ _unit(q))


def _unit(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64).ravel()
    n = np.linalg.norm(q)
    return q / n if n > 0 else q


# ------------------------------------------------------------------------------------ state


class ReMindState(BaseState, total=False):
    seed_ids: list[str]
    subgraph_nodes: list[str]          # S: evidence-unit and entity ids, in discovery order
    subgraph_edges: list[str]          # S: edge ids (each joined S together with one node)
    replayed: dict[str, Any]           # what memory supplied: {"nodes", "edges"}
    current: str                       # the node the traversal stands on
    path: list[dict[str, Any]]         # hops: {"step", "direction", "from", "to", "edge", "decided_by"}
    hops: int
    steps: int
    sufficient: bool
    traversed: bool
    stop_reason: str
    memory_updates: dict[str, Any]


class ReMindOutput(BaseState, total=False):
    seed_ids: list[str]
    path: list[dict[str, Any]]
    replayed: dict[str, Any]
    memory_updates: dict[str, Any]
    stop_reason: str


# ------------------------------------------------------------------------------------ decisions


class SubQuestions(BaseModel):
    """Split the question into the simpler questions that must be answered to answer it."""

    sub_questions: list[ModelName] = Field(max_length=8, description="1 to 4 self-contained sub-questions, in the "
                                                                     "order to answer them")


class Sufficiency(BaseModel):
    """Whether the collected evidence already answers the question."""

    sufficient: bool = Field(description="true only if the evidence contains everything the answer needs")


class NextMove(BaseModel):
    """The next move of the graph walk: go forward to a neighbour of the current node, or go back to a
    node visited earlier and continue from there."""

    direction: Direction = Field(description="'forward' (a listed neighbour) or 'backward' (a listed visited node)")
    node_id: ModelId = Field(description="the id of the chosen node, copied exactly from the lists")


class UsefulMarks(BaseModel):
    """The evidence items (passages and facts) that the answer actually relied on."""

    useful_ids: list[ModelId] = Field(max_length=MAX_LIST_ITEMS,
                                      description="ids of the useful items, copied exactly from the list")


# ------------------------------------------------------------------------------------ prompts

DECOMPOSE_PROMPT = """Split this question into the sub-questions one has to answer, in order, to answer it.
A simple question stays one sub-question.

Question: {question}"""

SUFFICIENCY_PROMPT = """You are collecting evidence from a knowledge graph to answer a question.
""" + DATA_NOTE + """

Question: {question}

Evidence collected so far:
{evidence}

Is this evidence enough to answer the question with confidence? Answer false if any needed fact is missing."""

NEXT_MOVE_PROMPT = """You are walking a knowledge graph to find the evidence that answers a question.
The evidence collected so far is not enough yet. Choose one move.
""" + DATA_NOTE + """

Question: {question}

Evidence collected so far:
{evidence}

Path so far: {path}
You are at: {current}

Forward: neighbours of the current node not yet visited (w = learned edge weight):
{forward}

Backward: visited nodes you can return to and continue from:
{backward}

Pick the move most likely to lead to the missing evidence."""

USEFUL_PROMPT = DATA_NOTE + """

Question: {question}
Answer given: {answer}

Evidence items:
{items}

Which items did the answer rely on? List their ids (passages and facts that were needed)."""


# ------------------------------------------------------------------------------------ graph access


@dataclass
class _Expansion:
    """A node's traversable edges: edge ids, neighbour unit ids, cos(emb(a), emb(b)), neighbour vectors."""

    edge_ids: list[str]
    nbr_ids: list[str]
    cos_ab: np.ndarray
    nbr_vecs: np.ndarray


class _GraphView:
    """Chunk+anchor units, neighbour expansions and node vectors, cached per KG version."""

    def __init__(self, kg: "KnowledgeGraph") -> None:
        self.kg = kg
        self._version = -1
        self._exp: dict[str, _Expansion] = {}
        self._anchor: dict[str, str | None] = {}
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.kg.embed_query("dimension probe"))
        return self._dim

    def _check(self) -> None:
        if self.kg.version != self._version:
            self._version = self.kg.version
            self._exp.clear()
            self._anchor.clear()

    def unit(self, nid: str) -> str:
        node = self.kg.node(nid)
        if node is not None and node.kind == "anchor":
            chunk = self.kg.chunk_of_anchor(nid)
            return chunk.id if chunk is not None else nid
        return nid

    def anchor_of(self, chunk_id: str) -> str | None:
        self._check()
        if chunk_id not in self._anchor:
            found = [n.id for _, n in self.kg.neighbors(chunk_id, kinds=("anchor_chunk",)) if n.kind == "anchor"]
            self._anchor[chunk_id] = found[0] if found else None
        return self._anchor[chunk_id]

    def _neighbours(self, nid: str) -> tuple[list[str], list[str]]:
        """(edge ids, neighbour units) of ``nid`` (a chunk expands with its anchor)."""
        kg = self.kg
        members = [nid]
        node = kg.node(nid)
        if node is not None and node.kind == "chunk":
            anc = self.anchor_of(nid)
            if anc:
                members.append(anc)
        edge_ids, nbrs = [], []
        seen_edges: set[str] = set()
        for m in members:
            for e, other in kg.neighbors(m, kinds=TRAVERSE_KINDS, node_kinds=UNIT_KINDS):
                if e.id in seen_edges:
                    continue
                seen_edges.add(e.id)
                u = self.unit(other.id)
                if u == nid:
                    continue
                edge_ids.append(e.id)
                nbrs.append(u)
        return edge_ids, nbrs

    def expand_many(self, nids: Sequence[str]) -> dict[str, _Expansion]:
        """Expansions of ``nids``; the vectors of every node they reach are read in one call (one
        round trip on a database server, instead of one per node)."""
        self._check()
        todo = [n for n in dict.fromkeys(nids) if n not in self._exp]
        if todo:
            lists = {n: self._neighbours(n) for n in todo}
            uniq = list(dict.fromkeys([x for n in todo for x in [n, *lists[n][1]]]))
            have = self.kg.has_vectors(uniq)
            mat = np.zeros((len(uniq), self.dim), dtype=np.float32)
            rows = [i for i, h in enumerate(have) if h]
            if rows:
                mat[rows] = self.kg.vectors([uniq[i] for i in rows])
            pos = {u: i for i, u in enumerate(uniq)}
            for n in todo:
                edge_ids, nbrs = lists[n]
                if nbrs:
                    nbr_vecs = mat[[pos[b] for b in nbrs]]
                    cos_ab = nbr_vecs @ mat[pos[n]]
                else:
                    nbr_vecs, cos_ab = np.zeros((0, self.dim), dtype=np.float32), np.zeros(0)
                self._exp[n] = _Expansion(edge_ids, nbrs, np.asarray(cos_ab, dtype=np.float64), nbr_vecs)
        return {n: self._exp[n] for n in nids}

    def expand(self, nid: str) -> _Expansion:
        return self.expand_many([nid])[nid]


# ------------------------------------------------------------------------------------ helpers



def _condense(text: str, question: str, budget: int) -> str:
    """A long chunk cut to its sentences sharing most words with the question (in text order)."""
    if len(text) <= budget:
        return text
    from langgraph_kgmem.ingest.chunking import split_sentences

    sents = split_sentences(text) or [text]
    qw = content_words(question)
    order = sorted(range(len(sents)), key=lambda i: (-len(qw & content_words(sents[i])), i))
    keep, used = set(), 0
    for i in order:
        if used + len(sents[i]) > budget and keep:
            break
        keep.add(i)
        used += len(sents[i])
    return " ".join(sents[i] for i in sorted(keep))[: budget + 200]


def _label(kg: "KnowledgeGraph", nid: str, limit: int = 90) -> str:
    node = kg.node(nid)
    if node is None:
        return nid
    if node.kind == "chunk":
        title = node.attrs.get("title") or ""
        return f"[passage] {title}: {node.text[:limit]}" if title else f"[passage] {node.text[:limit]}"
    return f"[{node.kind}] {node.text[:limit]}"


def _evidence_ids(kg: "KnowledgeGraph", nodes: Sequence[str], edges: Sequence[str]) -> tuple[list[str], list[str]]:
    """(chunk ids, relation-edge ids) of S, in discovery order."""
    chunks = [n for n in nodes if (node := kg.node(n)) is not None and node.kind == "chunk"]
    facts = [e for e in edges if (edge := kg.edge(e)) is not None and edge.kind == "relation"]
    return chunks, facts


def _render_evidence(kg: "KnowledgeGraph", question: str, chunks: Sequence[str], facts: Sequence[str],
                     budget: int) -> str:
    lines = []
    for cid in chunks:
        node = kg.node(cid)
        title = node.attrs.get("title") or ""
        lines.append(f"- passage {cid}{f' [{title}]' if title else ''}: {_condense(node.text, question, budget)}")
    for eid in facts:
        lines.append(f"- fact {eid}: {kg.fact_text(kg.edge(eid))}")
    return fence(lines, empty="(nothing yet)")


def _s_adjacency(kg: "KnowledgeGraph", view: _GraphView, edges: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    adj: dict[str, list[tuple[str, str]]] = {}
    for eid in edges:
        e = kg.edge(eid)
        if e is None:
            continue
        a, b = view.unit(e.src), view.unit(e.dst)
        adj.setdefault(a, []).append((b, eid))
        adj.setdefault(b, []).append((a, eid))
    return adj


def effective_edges(adj: dict[str, list[tuple[str, str]]], seeds: Sequence[str], targets: Sequence[str]) -> list[str]:
    """Edges of S on the paths from the seeds to each target node (BFS tree of S from the seeds)."""
    parent: dict[str, tuple[str, str] | None] = {s: None for s in seeds}
    queue = list(dict.fromkeys(seeds))
    for u in queue:  # BFS: queue grows while iterating
        for v, eid in adj.get(u, []):
            if v not in parent:
                parent[v] = (u, eid)
                queue.append(v)
    out: dict[str, None] = {}
    for t in targets:
        cur = t
        while parent.get(cur) is not None:
            u, eid = parent[cur]  # type: ignore[misc]
            out[eid] = None
            cur = u
    return list(out)


def hop_distances(kg: "KnowledgeGraph", targets: Sequence[str], max_depth: int = 12) -> dict[str, int]:
    """Hops from each node (evidence units: chunk ids stand for chunk+anchor) to the nearest target,
    over the edges a traversal may cross. For scripted/oracle deciders and diagnostics, not retrieval."""
    view = _GraphView(kg)
    dist = {view.unit(t): 0 for t in targets}
    frontier = list(dist)
    for d in range(1, max_depth + 1):
        nxt = []
        for u in frontier:
            for b in view.expand(u).nbr_ids:
                if b not in dist:
                    dist[b] = d
                    nxt.append(b)
        if not nxt:
            break
        frontier = nxt
    return dist


# ------------------------------------------------------------------------------------ factory


def create_remindrag_graph(
    kg: "KnowledgeGraph",
    *,
    model: Any = None,
    store: BaseStore | None = None,
    retry_policy: RetryPolicy | None = None,
    memory_scope: Sequence[str] | None = None,
    seeds_k: int = 2,
    alpha: float = 0.1,
    lam: float = 0.55,
    max_hops: int = 10,
    max_steps: int | None = None,
    max_replay_nodes: int = 64,
    synonym_threshold: float | None = None,
    decompose: bool = False,
    chunk_chars: int = 800,
    human_in_the_loop: bool = False,
    dense_fusion: bool = True,
    top_passages: int = 5,
) -> StateGraph:
    """Build ReMindRAG's state machine over ``kg`` (uncompiled).

    Args:
        kg: the knowledge graph.
        model: a LangChain chat model, ``None`` (``$KGMEM_MODEL``) or ``"offline"`` (no LLM:
            embedding/word-overlap heuristics for every decision, extractive answer).
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: the BaseStore holding edge memories; default: the store the graph is compiled with.
        memory_scope: tenant labels inserted in the memory namespace, filled per run from
            ``config["configurable"]``: ``("{user_id}",)`` gives each user their own memory of this
            KG (``("kgmem", kg name, user, kind)``); ``None``: one memory per KG.
        seeds_k: seed entities per (sub-)question: of the ``5 × seeds_k`` entities nearest it by
            embedding, those it names (every content word of the name in it) first.
        alpha: weight of the node-embedding similarity in the replay weight ``w``.
        lam: replay threshold λ: memory replay follows an edge only when ``w > lam``.
        max_hops: traversal moves allowed per question, backward moves included.
        max_steps: total loop decisions (sufficiency checks + moves); default ``2*max_hops + 2``.
        max_replay_nodes: nodes memory replay may add (a bound on the DFS).
        synonym_threshold: if set, synonym edges at this cosine are added to ``kg`` once, now
            (``kg.add_synonym_edges``), so the walk can cross near-duplicate entities.
        decompose: split the question into sub-questions and seed each (one extra LLM call).
        chunk_chars: passages longer than this are condensed to their most question-related
            sentences in prompts.
        human_in_the_loop: a person chooses each traversal move instead of the LLM: the step
            calls LangGraph's ``interrupt`` with the candidates (forward neighbours, backward
            nodes, the offline heuristic's suggestion); resume with
            ``Command(resume="<node id>")`` or ``Command(resume={"direction": ..., "node_id": ...})``.
            An id that is not a candidate interrupts again with the reason. Needs a checkpointer.
        dense_fusion: ``True`` (default): the passages handed to the answer step (and returned as
            ``evidence``) are the walk's passages fused with the dense ranking of every passage by
            cosine with the question (:func:`~langgraph_kgmem.graphs.common.fuse_with_dense`), cut
            at ``max(top_passages, passages the walk collected)``: vector search's best passage
            first, then the walk's finds (in discovery order) and vector search's next passages in
            turns, the walk's first. Places 1 and 2 are vector search's top two; the walk's finds
            keep their order; vector search fills the evidence when the walk stopped short; a find
            vector search ranks beyond the fusion depth (120 passages) takes no turn and follows.
            The walk, its decisions and the edge memory are unchanged (memorize still marks the
            walk's evidence). Costs no LLM call; the answer prompt holds up to ``top_passages``
            passages more. ``False``: the walk's passages alone, in discovery order (the paper).
        top_passages: with ``dense_fusion``, the least number of passages in the evidence.

    Returns:
        An uncompiled ``StateGraph``; input ``{"question"}``, output ``answer``, ``evidence``,
        ``usage``, ``method``, ``path``, ``replayed``, ``memory_updates``, ``seed_ids``, ``stop_reason``.

    Raises:
        KgmemInputError: an option is out of range.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph, create_remindrag_graph
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents(["Ada Lovelace worked with Charles Babbage."], model="offline")
        >>> cp, st = kg.persistence()
        >>> app = create_remindrag_graph(kg, model="offline").compile(checkpointer=cp, store=st)
        >>> out = app.invoke({"question": "Who worked with Ada Lovelace?"}, {"configurable": {"thread_id": "1"}})
        >>> out["method"]
        'remindrag'
    """
    check_int("seeds_k", seeds_k, 1)
    check_number("alpha", alpha, 0.0, 1.0)
    check_number("lam (the replay threshold λ)", lam, -1.0, 1.0)
    check_int("max_hops", max_hops, 0)
    if max_steps is None:
        max_steps = 2 * max_hops + 2
    check_int("max_steps", max_steps, 1)
    check_int("max_replay_nodes", max_replay_nodes, 0)
    check_number("synonym_threshold", synonym_threshold, 0.0, 1.0, low_open=True, optional=True)
    check_int("chunk_chars", chunk_chars, 50)
    check_int("top_passages", top_passages, 1)
    default_llm = method_model(model, retry_policy)
    if synonym_threshold is not None:
        kg.add_synonym_edges(threshold=synonym_threshold)
    view = _GraphView(kg)

    def memory_of(q: np.ndarray) -> EdgeMemory:
        return EdgeMemory(resolve_store(store), kg.name, len(q), scope_of(memory_scope))

    def weights(exp: _Expansion, mem: EdgeMemory, q: np.ndarray) -> np.ndarray:
        if not exp.edge_ids:
            return np.zeros(0)
        return replay_weights(exp.cos_ab, mem.many(exp.edge_ids), q, alpha)

    # -------------------------------------------------------------- 1. seeds
    def retrieve_seeds(state: ReMindState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        llm = run_model(runtime, default_llm)
        question = check_question(state)
        require("ReMindRAG", runtime=runtime, store=store, needs_store=True, memory_scope=memory_scope)
        usage: dict[str, Any] = {}
        queries = [question]
        if decompose:
            sub, usage = decide(llm, SubQuestions, render(DECOMPOSE_PROMPT, question=question), step="decompose",
                                offline=lambda: SubQuestions.model_construct(sub_questions=[question]),
                                context={"question": question})
            queries = [s for s in sub.sub_questions[:4] if s.strip()] or [question]
        seeds: list[str] = []
        for text in queries:
            # of the entities nearest the (sub-)question, those it names come first: a seed merely
            # near the question in embedding space starts the walk off its subject
            words = content_words(text)
            near = kg.nearest(text, SEED_POOL * seeds_k, kinds=("entity",))
            hits = sorted(near, key=lambda h: not named_in(h[0].text, words))[:seeds_k] or \
                kg.nearest(text, seeds_k, kinds=("chunk",))
            seeds.extend(view.unit(n.id) for n, _ in hits)
        seeds = list(dict.fromkeys(seeds))
        emit_progress({"event": "seeds", "method": METHOD, "seed_ids": seeds})
        return {"seed_ids": seeds, "subgraph_nodes": list(seeds), "subgraph_edges": [], "current": seeds[0] if seeds else "",
                "path": [], "hops": 0, "steps": 0, "traversed": False, "sufficient": False, "method": METHOD,
                "replayed": {"nodes": [], "edges": []}, "memory_updates": dict(NO_UPDATES),
                "usage": fresh_usage(usage), "model": model_label(llm)}

    # -------------------------------------------------------------- 2. replay (no LLM)
    def replay_memory(state: ReMindState) -> dict[str, Any]:
        q = kg.embed_query(state["question"])
        mem = memory_of(q)
        nodes = list(state.get("subgraph_nodes", []))
        in_s = set(nodes)
        edges: list[str] = []
        followed: list[dict[str, Any]] = []
        stack = list(reversed(state.get("seed_ids", [])))
        while stack and len(followed) < max_replay_nodes:
            u = stack.pop()
            exp = view.expand(u)
            if not exp.edge_ids:
                continue
            w = weights(exp, mem, q)
            pushed = []
            for i in np.argsort(-w, kind="stable"):  # strongest edge first
                if w[i] <= lam:
                    break
                b = exp.nbr_ids[i]
                if b in in_s or len(followed) >= max_replay_nodes:
                    continue
                in_s.add(b)
                nodes.append(b)
                edges.append(exp.edge_ids[i])
                followed.append({"edge": exp.edge_ids[i], "from": u, "to": b, "weight": round(float(w[i]), 4)})
                pushed.append(b)
            stack.extend(reversed(pushed))  # the strongest neighbour is explored next (depth first)
        replayed = {"nodes": [f["to"] for f in followed], "edges": followed}
        emit_progress({"event": "replay", "method": METHOD, "nodes": len(followed)})
        # the walk (if any) starts at the first seed; replayed nodes are reachable by backward moves
        return {"subgraph_nodes": nodes, "subgraph_edges": edges, "replayed": replayed}

    # -------------------------------------------------------------- 3. sufficiency
    def check_sufficiency(state: ReMindState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        llm = run_model(runtime, default_llm)
        question = state["question"]
        chunks, facts = _evidence_ids(kg, state.get("subgraph_nodes", []), state.get("subgraph_edges", []))
        steps = state.get("steps", 0) + 1
        if not chunks and not facts:  # nothing collected: cannot be sufficient, no need to ask
            return {"sufficient": False, "steps": steps}
        evidence_text = _render_evidence(kg, question, chunks, facts, chunk_chars)

        def heuristic() -> Sufficiency:
            # offline: a passage is in S and the evidence mentions most of the question's words
            qw = content_words(question)
            text = " ".join(kg.node(c).text + " " + str(kg.node(c).attrs.get("title") or "") for c in chunks)
            text += " " + " ".join(kg.fact_text(kg.edge(f)) for f in facts)
            cover = len(qw & content_words(text)) / (len(qw) or 1)
            return Sufficiency(sufficient=bool(chunks) and cover >= OFFLINE_COVERAGE)

        decision, usage = decide(
            llm, Sufficiency, render(SUFFICIENCY_PROMPT, question=question, evidence=evidence_text),
            step="check_sufficiency", offline=heuristic, fallback=lambda: Sufficiency(sufficient=False),
            context={"question": question, "evidence_ids": chunks, "fact_ids": facts,
                     "node_ids": list(state.get("subgraph_nodes", [])), "edge_ids": list(state.get("subgraph_edges", []))})
        return {"sufficient": decision.sufficient, "steps": steps, "usage": usage}

    # -------------------------------------------------------------- 4. one traversal move
    def _frontier(state: ReMindState, q: np.ndarray, mem: EdgeMemory) -> dict[str, list[tuple[str, str, float, float]]]:
        """For each node of S with unexplored neighbours: [(neighbour, edge, w, cos(q, neighbour))], best first."""
        in_s = set(state.get("subgraph_nodes", []))
        open_nodes: list[tuple[str, _Expansion, list[int]]] = []
        expansions = view.expand_many(state.get("subgraph_nodes", []))
        for u in state.get("subgraph_nodes", []):
            exp = expansions[u]
            keep = [i for i, b in enumerate(exp.nbr_ids) if b not in in_s]
            if keep:
                open_nodes.append((u, exp, keep))
        # one store read and one matrix product per step, over every open node's edges
        all_edges = [exp.edge_ids[i] for _, exp, keep in open_nodes for i in keep]
        if not all_edges:
            return {}
        cos_ab = np.concatenate([exp.cos_ab[keep] for _, exp, keep in open_nodes])
        w = replay_weights(cos_ab, mem.many(all_edges), q, alpha)
        qs = np.vstack([exp.nbr_vecs[keep] for _, exp, keep in open_nodes]) @ q.astype(np.float32)
        out: dict[str, list[tuple[str, str, float, float]]] = {}
        k = 0
        for u, exp, keep in open_nodes:
            best: dict[str, tuple[str, str, float, float]] = {}
            for i in keep:  # one entry per neighbour: its strongest edge
                b = exp.nbr_ids[i]
                cand = (b, exp.edge_ids[i], float(w[k]), float(qs[k]))
                k += 1
                if b not in best or cand[2] > best[b][2]:
                    best[b] = cand
            out[u] = sorted(best.values(), key=lambda c: (-(c[3] + c[2]), c[0]))
        return out

    def ask_person(question: str, current: str, forward: Sequence[tuple[str, str, float, float]],
                   backward: Sequence[str], suggestion: NextMove, check: Any) -> NextMove:
        """Human-in-the-loop move: ``interrupt`` with the candidates until the resume value is valid."""
        request: dict[str, Any] = {
            "kind": "remindrag_next_move", "question": question, "current": {"id": current, "label": _label(kg, current)},
            "forward": [{"id": b, "label": _label(kg, b), "w": round(w, 4)} for b, _, w, _ in forward],
            "backward": [{"id": u, "label": _label(kg, u)} for u in backward],
            "suggested": suggestion.model_dump(),
            "resume_with": "a node id from 'forward' or 'backward', or {'direction': ..., 'node_id': ...}"}
        while True:
            reply = interrupt(request)
            if isinstance(reply, str):
                direction = "forward" if reply in {b for b, *_ in forward} else "backward"
                reply = {"direction": direction, "node_id": reply}
            try:
                move = NextMove.model_validate(reply)
            except ValidationError as exc:
                request = {**request, "error": f"could not read {reply!r} as a move: {exc.errors()[0]['msg']}"}
                continue
            problem = check(move)
            if problem is None:
                return move
            request = {**request, "error": problem}

    def traverse_step(state: ReMindState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        llm = run_model(runtime, default_llm)
        question = state["question"]
        q = kg.embed_query(question)
        mem = memory_of(q)
        frontier = _frontier(state, q, mem)
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

        chunks, facts = _evidence_ids(kg, state.get("subgraph_nodes", []), state.get("subgraph_edges", []))
        path_text = " → ".join(data_text(_label(kg, h["to"], 40)) + (" (back)" if h["direction"] == "backward" else "")
                                for h in state.get("path", [])[-8:])
        prompt = render(
            NEXT_MOVE_PROMPT, question=question, evidence=_render_evidence(kg, question, chunks, facts, chunk_chars),
            path=fence(path_text, empty="(start)", inline=True), current=fence(f"{current} {_label(kg, current)}", inline=True),
            forward=fence([f"- {b} {_label(kg, b)} (w={w:.2f})" for b, _, w, _ in forward]),
            backward=fence([f"- {u} {_label(kg, u)}" for u in backward]))
        if human_in_the_loop:
            move, usage, decided_by = ask_person(question, current, forward, backward, best_first(), check), {}, "human"
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

    # -------------------------------------------------------------- 5. answer
    def answer(state: ReMindState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        llm = run_model(runtime, default_llm)
        question = state["question"]
        chunks, facts = _evidence_ids(kg, state.get("subgraph_nodes", []), state.get("subgraph_edges", []))
        if dense_fusion:
            fused = fuse_with_dense(kg, question, chunks, max(top_passages, len(chunks)))
            evidence = [evidence_item(kg, c, score=s) for c, s in fused] + [evidence_item(kg, i) for i in facts]
        else:
            evidence = [evidence_item(kg, i) for i in chunks + facts]
        text, usage = answer_question(kg, llm, question, evidence,
                                      context={"evidence_texts": [e["text"] for e in evidence], "method": METHOD})
        reason = "sufficient" if state.get("sufficient") else (
            "max_hops" if state.get("hops", 0) >= max_hops else
            "max_steps" if state.get("steps", 0) >= max_steps else "exhausted")
        return {"answer": text, "evidence": evidence, "usage": usage, "stop_reason": reason}

    # -------------------------------------------------------------- 6. memorize
    def memorize(state: ReMindState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        llm = run_model(runtime, default_llm)
        question = state["question"]
        q = _unit(kg.embed_query(question))
        nodes, edges = state.get("subgraph_nodes", []), state.get("subgraph_edges", [])
        chunks, facts = _evidence_ids(kg, nodes, edges)
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
                llm, UsefulMarks, render(USEFUL_PROMPT, question=question, answer=answer_text, items=items),
                step="mark_useful", offline=heuristic, fallback=heuristic,
                validate=id_validator(candidates, "useful_ids"),
                context={"question": question, "candidates": candidates, "evidence_ids": chunks, "fact_ids": facts})
            useful = list(dict.fromkeys(marks.useful_ids))
        else:
            useful = []
        adj = _s_adjacency(kg, view, edges)
        targets: list[str] = []
        for i in useful:
            e = kg.edge(i)
            targets.extend([view.unit(e.src), view.unit(e.dst)] if e is not None else [i])
        eff = effective_edges(adj, state.get("seed_ids", []), targets)
        eff += [i for i in useful if kg.edge(i) is not None and i not in eff]
        eff_set = set(eff)
        ineff = [e for e in edges if e not in eff_set]
        def change(k: int, old: np.ndarray) -> np.ndarray | None:
            v = enhance(old, q) if k < len(eff) else penalize(old, q)
            # a penalty on a zero vector changes nothing: no write
            return v if k < len(eff) or np.any(v != old) else None

        # read-modify-write under the store's lock: concurrent runs (threads, processes) lose nothing
        written = memory_of(q).update(eff + ineff, change)
        updates = {"enhanced": len(eff), "penalised": len(ineff), "enhanced_ids": eff, "penalised_ids": ineff,
                   "useful_ids": useful, "written": written}
        emit_progress({"event": "memorize", "method": METHOD, "enhanced": len(eff), "penalised": len(ineff)})
        return {"memory_updates": updates, "usage": usage}

    # -------------------------------------------------------------- routers
    def after_check(state: ReMindState) -> Literal["traverse_step", "answer"]:
        if state.get("sufficient"):
            return "answer"
        if state.get("hops", 0) >= max_hops or state.get("steps", 0) >= max_steps:
            return "answer"
        in_s = set(state.get("subgraph_nodes", []))
        for u in state.get("subgraph_nodes", []):
            if any(b not in in_s for b in view.expand(u).nbr_ids):
                return "traverse_step"
        return "answer"  # nothing left to explore

    def after_move(state: ReMindState) -> Literal["check_sufficiency", "traverse_step", "answer"]:
        # a backward move leaves S as it was: asking "is S sufficient?" again would repeat the last
        # (paid) answer, so the walk goes on under the same caps
        path = state.get("path", [])
        if path and path[-1]["direction"] == "backward":
            return after_check(state)
        return "check_sufficiency"

    def after_answer(state: ReMindState) -> Literal["memorize", "__end__"]:
        return "memorize" if state.get("traversed") else END

    builder = StateGraph(ReMindState, input_schema=InputState, output_schema=ReMindOutput, context_schema=RunContext)
    builder.add_node("retrieve_seeds", retrieve_seeds)
    builder.add_node("replay_memory", replay_memory)
    builder.add_node("check_sufficiency", check_sufficiency)
    builder.add_node("traverse_step", traverse_step)
    builder.add_node("answer", answer)
    builder.add_node("memorize", memorize)
    builder.add_edge(START, "retrieve_seeds")
    builder.add_edge("retrieve_seeds", "replay_memory")
    builder.add_edge("replay_memory", "check_sufficiency")
    builder.add_conditional_edges("check_sufficiency", after_check, ["traverse_step", "answer"])
    builder.add_conditional_edges("traverse_step", after_move, ["check_sufficiency", "traverse_step", "answer"])
    builder.add_conditional_edges("answer", after_answer, ["memorize", END])
    builder.add_edge("memorize", END)
    return builder


__all__ = ["create_remindrag_graph", "delta", "enhance", "penalize", "replay_weights", "effective_edges",
           "ReMindState", "Sufficiency", "NextMove", "UsefulMarks", "SubQuestions"]
