"""Reuse of a confirmed earlier run (``reuse=True``): what the methods share for it.

A method asked a question this tenant already asked (of this method or another, worded the same
or reworded, :mod:`langgraph_kgmem.memory.prior_runs`) starts from that run's evidence instead of
deciding again: ReMindRAG puts the passages in its subgraph and skips the first sufficiency
check; CatRAG and HippoRAG 2 seed PageRank with them and skip the fact filter and the edge
scoring (ReMindRAG takes another method's run as lent, never as its own judgement:
:func:`lent`; of another method's answered run, the passages that ground its answer come first
and alone seed CatRAG and HippoRAG 2: :func:`seed_passages`); R3-Cycle and Graph-CoT give its
answer and evidence again without a walk; AutoPrunedRetriever, whose only call is the answer,
gives its own earlier answer again when it retrieved exactly the same evidence
(:func:`same_evidence_answer`). Where the question is the same (not reworded) and the evidence
handed to the answer step holds nothing the earlier answer did not see, that answer is given
again without a model call (:func:`reused_answer`). A run that found no answer is reused the
same way only while the KG holds exactly the documents it searched (``answered`` False in the
reuse summary; the rule: :mod:`~langgraph_kgmem.memory.prior_runs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypedDict

import numpy as np
from pydantic import Field

from langgraph_kgmem.graphs.grounding import cite_passages, polar_answer
from langgraph_kgmem.graphs.runs import run_store
from langgraph_kgmem.graphs.spec import MethodOptions
from langgraph_kgmem.memory import memory_scope
from langgraph_kgmem.memory.prior_runs import PriorRun, find_prior_run
from langgraph_kgmem.memory.provenance import PASSAGE_KINDS
from langgraph_kgmem.memory.runs import evidence_key

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph



class ReuseOptions(MethodOptions):
    """The two options of every method that reads earlier runs (what each does with one: the reuse
    table of ``docs/memory.md``), declared and checked once."""

    reuse: bool = Field(False, description="start from a confirmed earlier run of the same (or a reworded) question by "
                                           "any method of this tenant")
    reuse_similarity: float = Field(0.8, ge=0.0, le=2.0,
                                    description="reuse: cosine at which a stored question counts as this one "
                                                "reworded (above 1: the same question only)")


class ReuseKwargs(TypedDict, total=False):
    """:class:`ReuseOptions`' keyword arguments, for a factory's ``Unpack[...]``."""

    reuse: bool
    reuse_similarity: float


def prior_run(kg: "KnowledgeGraph", store: Any, scope: Sequence[str] | None, question: str, *, method: str,
              similarity: float, passages_only: bool = True, unanswered_rewordings: bool = False) -> dict[str, Any] | None:
    """The run to reuse for ``question`` in the run's tenant (``scope``: the factory's
    ``memory_scope`` template), as a JSON-native state value: the summary of
    :class:`~langgraph_kgmem.memory.prior_runs.PriorRun` plus its ``passages`` (the evidence ids
    that are passages, best first; every evidence id still in the KG when not ``passages_only``)
    and ``answer``; None without a store or a confirmed run. Another method's answered run is lent
    (``passages_only``) with the passages that ground its answer first (``grounds``), and not at
    all when none of its passages holds the answer and it is no plain yes or no
    (:func:`~langgraph_kgmem.graphs.grounding.polar_answer`). ``unanswered_rewordings``: see
    :func:`~langgraph_kgmem.memory.prior_runs.find_prior_run` (CatRAG and HippoRAG 2 pass it)."""
    found = run_store(store)
    if found is None:
        return None
    prior = find_prior_run(found, kg, memory_scope(scope), question, method=method, similarity=similarity,
                           unanswered_rewordings=unanswered_rewordings)
    if prior is None:
        return None
    passages = passage_ids(kg, prior) if passages_only else [i for i in prior.evidence if kg.node(i) is not None]
    if not passages:
        return None
    out = {**prior.summary(), "passages": passages, "answer": prior.answer}
    if passages_only and prior.method != method and prior.answered:   # lent: its answer's grounds first
        grounds = answer_grounds(kg, passages, prior.answer)
        if not grounds and not polar_answer(prior.answer):
            # its passages do not hold what it answered: they say no more than a "no answer"
            # run's, and those are lent to no other method (memory.prior_runs)
            return None
        out.update(passages=grounds + [p for p in passages if p not in grounds], grounds=grounds)
    return out


def answer_grounds(kg: "KnowledgeGraph", passages: Sequence[str], answer: str) -> list[str]:
    """The passages of a lent run (ids, its order) that ground its answer
    (:func:`~langgraph_kgmem.graphs.grounding.cite_passages`: together they hold every content word
    of it), else none (an answer none of them holds: "yes" or "no", or one the lender did not
    read there, which :func:`prior_run` does not lend)."""
    texts = [(p, str(getattr(kg.node(p), "text", "") or "")) for p in passages]
    return list(cite_passages(answer, texts) or [])


def seed_passages(reused: dict[str, Any] | None) -> list[str]:
    """The passages of a reused run that seed CatRAG's and HippoRAG 2's ranking: for another
    method's run, the ones its answer stands on (``grounds``, when it has any: not for a yes or
    no); else all of them.
    The rest of a lent run is the lender's ranking, not its finding."""
    reused = reused or {}
    return list(reused.get("grounds") or reused.get("passages", []))


def lent(reused: dict[str, Any] | None, method: str) -> bool:
    """Whether ``reused`` is another method's run, lent to ``method``. Its passages were chosen by
    another ranking and found enough by another method's checks, so the asking method takes them
    as candidates, never as its own judgement: ReMindRAG still asks its first sufficiency check
    and ranks its own finds first (:func:`own_finds_first`; docs/memory.md, "Another method's run
    is lent to ReMindRAG, not trusted", measures why)."""
    return bool(reused) and str((reused or {}).get("method", "")) != method


def own_finds_first(found: Sequence[str], reused: dict[str, Any] | None, method: str,
                    unit: Callable[[str], str]) -> list[str]:
    """A walk's passages (discovery order) with those another method's run lent (:func:`lent`;
    compared as ``unit`` of each lent passage id) moved after the walk's own finds, both in
    discovery order. A walk's order is where it went; the lent passages were put in its subgraph
    before it went anywhere, and taken first they would fill the evidence with the other method's
    ranking. Unchanged for the method's own run or none."""
    if not lent(reused, method):
        return list(found)
    theirs = {unit(p) for p in (reused or {}).get("passages", [])}
    return [c for c in found if c not in theirs] + [c for c in found if c in theirs]


def passage_ids(kg: "KnowledgeGraph", prior: PriorRun) -> list[str]:
    """The prior run's evidence ids that are passages (chunks or anchors) still in the KG."""
    out = []
    for i in prior.evidence:
        node = kg.node(i)
        if node is not None and node.kind in PASSAGE_KINDS:
            out.append(i)
    return out


def reuse_facts(candidates: Sequence[dict[str, Any]], reused: dict[str, Any], keep: int) -> list[dict[str, Any]]:
    """CatRAG's and HippoRAG 2's seed facts under reuse: the retrieved facts stated by one of the
    earlier run's passages, at most ``keep``, in retrieval order."""
    passages = set(seed_passages(reused))
    return [c for c in candidates if passages & set(c.get("chunks", []))][:keep]


def reuse_seeds(index: Mapping[str, int], reset: np.ndarray, reused: dict[str, Any] | None, seed_mass: float) -> int:
    """The earlier run's passages as PageRank seeds (in place): together as much reset mass as
    the entity seeds hold (1 when there are none), shared equally. Returns the seeds added."""
    rows = [index[p] for p in seed_passages(reused) if p in index]
    if rows:
        reset[rows] += (seed_mass if seed_mass > 0 else 1.0) / len(rows)
    return len(rows)


def own_run_first(passages: Sequence[dict[str, Any]], reused: dict[str, Any] | None, method: str,
                  depth: int) -> list[dict[str, Any]]:
    """The ranked passages with the method's own earlier run of the very same question replayed:
    its passages first, in its order, then the rest (at most ``depth``). A reworded question or
    another method's run is only a seed, never replayed (its evidence was chosen for another
    wording, or by another ranking)."""
    if not reused or not reused.get("exact") or reused.get("method") != method:
        return list(passages)
    first = list(reused.get("passages", []))
    score = {p["id"]: p.get("score", 0.0) for p in passages}
    head = [{"id": p, "score": score.get(p, 0.0)} for p in first]
    return (head + [p for p in passages if p["id"] not in set(first)])[:depth]


def same_evidence_answer(kg: "KnowledgeGraph", store: Any, scope: Sequence[str] | None, question: str, *,
                         method: str, evidence: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """AutoPrunedRetriever's reuse: the method's own confirmed earlier run of the very same
    question (:func:`~langgraph_kgmem.memory.prior_runs.find_prior_run`, answered or, of the
    unchanged corpus, not) whose whole evidence list, in order, is this run's (equal
    :func:`~langgraph_kgmem.memory.runs.evidence_key`): ``{"run_id", "answer", "answered"}``, so
    its answer is given again without a model call; else None (another method's run, a reworded
    question or any other evidence: the answer step runs)."""
    found = run_store(store)
    if found is None:
        return None
    prior = find_prior_run(found, kg, memory_scope(scope), question, method=method, similarity=2.0)
    ids = [str(e.get("id")) for e in evidence]
    if prior is None or prior.method != method or not ids or prior.evidence_key != evidence_key(ids):
        return None
    return {"run_id": prior.run_id, "answer": prior.answer, "answered": prior.answered}


def reused_answer(reused: dict[str, Any] | None, evidence: Sequence[dict[str, Any]]) -> str | None:
    """The earlier run's answer when it was a run of the very same question (``exact``) and this
    run's evidence passages are all among the passages it was given (nothing new to read), else
    None (the answer step runs). A reworded question's run lends its evidence, never its answer:
    two questions can name the same things, ask for the same kind of answer and lie near
    ("Who is the spouse of Barack Obama?", "Who is the father of Barack Obama?": cosine 0.87 with
    the default embedding) yet have different answers in the same passages."""
    if not reused or not reused.get("answer") or not reused.get("exact"):
        return None
    ids = [str(e.get("id")) for e in evidence if e.get("kind") in PASSAGE_KINDS]
    if not ids or not set(ids) <= set(reused.get("passages", [])):
        return None
    return str(reused["answer"])
