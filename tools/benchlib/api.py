"""The contract between the benchmark harness and each method's adapter.

A method registers itself by adding ``tools/benchlib/methods/<name>.py`` that defines
``ADAPTERS: list[MethodAdapter]`` (one module may register several names, e.g. ``catrag`` and
``hipporag2``). The harness discovers these modules, builds the corpus the adapter asks for,
runs every question, and computes the metrics; adapters only answer questions.

Deciders (``--decider``):
- ``offline``: ``model="offline"`` — the methods' own embedding/rule heuristics, no LLM.
- ``oracle``: a :class:`~langgraph_kgmem.testing.ScriptedChatModel` whose responder is the
  adapter's :meth:`MethodAdapter.oracle` — decisions made from the gold supporting passages,
  simulating a competent LLM. Prompts are still built and counted in tokens. Gold labels may be
  used ONLY inside the responder (at decision points), never in retrieval code.
- ``llm``: the configured chat model (``KGMEM_MODEL``).

How the harness (tools/benchlib/runner.py) calls an adapter:
- The gold firewall: ``run(ctx, q, model)`` gets ``q`` with only ``id``, ``question`` and
  ``passages``; ``answer``, ``supporting_titles``, ``supporting_passages`` and ``extra`` (where
  datasets keep their ground truth: KG-IRAG's required records, graph-qa's gold tool path) are
  blanked, so gold never reaches retrieval code. Gold reaches a method only through the decider: ``oracle(ctx, q)`` gets the full
  question and is called before ``run``; its responder is the scripted model's. Per-question
  metrics that need gold (KG-IRAG's record precision/recall) come from the optional
  ``score(ctx, q, result)``, called after ``run`` with the full question and ``result.trace``.
- ``setup(ctx)`` runs once per corpus *per process*: again in each ``--fresh-process`` pass, on
  the persisted KG copy (so it must be idempotent, e.g. ``add_synonym_edges`` is).
- Each (method, corpus) works on a private copy of the cached KG directory with its own
  ``kg.persistence()`` pair as ``ctx.checkpointer`` / ``ctx.store``; all passes share them.
- An adapter may set ``in_default_run = False`` (e.g. an ablation variant): it then runs only
  when named in ``--method``, not in the default "every registered method" selection.
- ``--noise p`` (``ctx.options["noise"]``): the oracle makes mistakes. With probability ``p`` each
  of its retrieval decisions is replaced by a random valid one (ReMindRAG: a random next move, a
  wrong sufficiency verdict; CatRAG / HippoRAG 2: a random fact selection, a random 0-10 edge
  score; KG-IRAG: a random judge verdict; R3-Cycle / Graph-CoT: its noisy agent). The dice are
  :class:`Mistakes`, seeded by (seed, method, question, pass); ``p = 0`` is the oracle itself.
  The answer reader stays competent: noise measures the retrieval mechanism, not the reader.
- ``ctx.options``: ``seed``, ``noise``, ``quick``, ``corpus``, ``embeddings``, ``passes``,
  ``llm_latency`` (seconds the oracle's scripted model waits per call) and the current ``pass``
  (1-based).

Offline token counts: under ``offline`` no LLM is called (``llm_calls`` stays 0), but every
adapter whose method ends in an answer prompt reports that prompt's would-be size as
``prompt_tokens`` via :func:`with_offline_answer_prompt`, so offline token costs compare across
methods. Only the *answer* prompt is counted: the offline heuristics replace the decision prompts
(filter, traversal, judge ...) without building them, so they cannot be counted without an LLM.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, Sequence

from langgraph_kgmem.graphs.common import normalize_answer  # the package's EM normalisation (re-exported)
from langgraph_kgmem.kg.types import document_id

CorpusMode = Literal["per-question", "pooled", "records", "graph-qa"]


@dataclass
class BenchQuestion:
    id: str
    question: str
    answer: str
    passages: list[dict[str, str]]            # [{"title", "text"}]
    supporting_titles: list[str]
    # dataset-specific data, ground truth included (e.g. KG-IRAG's required records): never handed to ``run``
    extra: dict[str, Any] = field(default_factory=dict)
    # gold supporting paragraphs as indices into ``passages`` (a dataset gives them where titles repeat:
    # MuSiQue); None: the passages whose title is a supporting title
    supporting_passages: list[int] | None = None


@dataclass
class MethodResult:
    # the evidence node ids (chunk/anchor) the method retrieved, best first, in the order its answer step
    # sees them (Recall@k / FCR grade the passages of the first k); [] retrieved nothing; None: passage
    # retrieval does not apply to the method (records, tool paths)
    retrieved_ids: list[str] | None
    answer: str | None = None                 # None when the method produces no answer
    usage: dict[str, Any] = field(default_factory=dict)   # the graph output's usage dict
    retrieved_count: int | None = None        # items handed to the answer step (passages/triples/...)
    extra: dict[str, Any] = field(default_factory=dict)   # method-specific metrics (numbers only)
    trace: dict[str, Any] = field(default_factory=dict)   # what the run did, for ``score`` only (not reported)


@dataclass
class BenchContext:
    """What the harness hands to an adapter for one corpus (one KG)."""

    kg: Any                                   # langgraph_kgmem.KnowledgeGraph
    store: Any                                # a LangGraph BaseStore shared by all passes on this KG
    checkpointer: Any                         # a LangGraph checkpointer (or None)
    decider: Literal["offline", "oracle", "llm"]
    dataset: str
    workdir: Path                             # scratch dir for this corpus (persists across passes)
    options: dict[str, Any] = field(default_factory=dict)  # CLI options (e.g. noise for graph-qa)
    cache: dict[str, Any] = field(default_factory=dict)    # adapter's per-corpus cache (compiled apps ...)


Responder = Callable[[list[Any], Any], Any]   # (messages, DecisionRequest | None) -> reply


class MethodAdapter(Protocol):
    name: str
    corpus: CorpusMode
    datasets: tuple[str, ...] | None          # datasets it supports (None: any QA dataset)

    def setup(self, ctx: BenchContext) -> None:
        """Once per corpus, before the first question (e.g. add synonym edges)."""

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        """Answer one question with ``model`` ("offline", a scripted oracle, or a real model)."""

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        """The oracle decider's responder for question ``q`` (may read q.supporting_titles)."""

    # Optional: metrics that need gold, from the full question and what ``run`` returned (its ``trace``).
    def score(self, ctx: BenchContext, q: BenchQuestion, result: MethodResult) -> dict[str, float]:
        """Gold-aware per-question metrics, merged into the result's ``extra``."""

    # Only adapters whose corpus is "records" or "graph-qa" (datasets the QA loaders do not know)
    # implement these two; the harness calls them instead of its own loaders/KG builders.
    def load_questions(self, dataset: str, n: int, seed: int) -> list[BenchQuestion]:
        """Questions (with exact ground truth in ``answer``/``extra``) for ``dataset``."""

    def build_kg(self, ctx: BenchContext, questions: list[BenchQuestion]) -> None:
        """Fill ``ctx.kg`` (empty, already opened by the harness) with the corpus of ``questions``."""


# ------------------------------------------------------------------------------------ helpers


class Mistakes:
    """The seeded dice of a noisy oracle (``--noise p``): :meth:`wrong` is True with probability
    ``p``, and :attr:`rng` draws the random decision that replaces the oracle's. With ``p = 0``
    no die is rolled, so the oracle's decisions are exactly the noiseless ones."""

    def __init__(self, noise: float, *key: Any) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be a probability in [0, 1], got {noise}")
        self.noise = noise
        self.rng = random.Random("|".join(map(str, key)))

    def wrong(self) -> bool:
        return self.noise > 0.0 and self.rng.random() < self.noise


def mistakes(ctx: BenchContext, q: BenchQuestion, method: str) -> Mistakes:
    """The dice for one question's oracle: independent per method, question and pass (a memory
    written in pass 1 meets fresh mistakes in pass 2)."""
    opts = ctx.options
    return Mistakes(float(opts.get("noise") or 0.0), opts.get("seed", 0), method, q.id, opts.get("pass", 1))



def titles_of(kg: Any, ids: list[str]) -> list[str]:
    """Passage titles of evidence ids (chunk/anchor nodes carry ``attrs['title']``), ranked, unique."""
    out: list[str] = []
    for i in ids:
        node = kg.node(i)
        title = node.attrs.get("title") if node is not None else None
        if title and title not in out:
            out.append(title)
    return out


def passage_key(passage: dict[str, str]) -> str:
    """The identity of a benchmark passage: the id of the document it is ingested as (its own ``id``, else
    title + text), which every chunk and anchor made from it carries as ``attrs['doc_id']``. Titles are not
    identities: MuSiQue repeats them, with distractors sharing a gold paragraph's title."""
    return passage.get("id") or document_id(passage["text"], passage["title"])


def gold_passages(q: BenchQuestion) -> list[dict[str, str]]:
    """The gold supporting passages of ``q``: those its dataset names by index, else those with a
    supporting title (enough where titles are unique within a question, as in HotpotQA)."""
    if q.supporting_passages is not None:
        return [q.passages[i] for i in q.supporting_passages]
    gold = set(q.supporting_titles)
    return [p for p in q.passages if p["title"] in gold]


def gold_passage_keys(q: BenchQuestion) -> list[str]:
    """:func:`passage_key` of each gold passage, once each, in passage order."""
    return list(dict.fromkeys(passage_key(p) for p in gold_passages(q)))


@dataclass(frozen=True)
class RankedPassages:
    """A retrieval ranking read as passages: one entry per retrieved text unit (a chunk and its anchor
    are one unit; a passage longer than the chunk size has several), best first."""

    keys: list[str]      # the unit's passage key (repeats where several units come from one passage)
    titles: list[str]    # the unit's passage title


def ranked_passages(kg: Any, ids: Sequence[str]) -> RankedPassages:
    """The passages of evidence ids in rank order; ids of other nodes (entities) are skipped."""
    seen: set[tuple[str, Any]] = set()
    keys: list[str] = []
    titles: list[str] = []
    for i in ids:
        node = kg.node(i)
        doc = node.attrs.get("doc_id") if node is not None else None
        if not doc or (doc, node.attrs.get("index")) in seen:
            continue
        seen.add((doc, node.attrs.get("index")))
        keys.append(str(doc))
        titles.append(str(node.attrs.get("title") or ""))
    return RankedPassages(keys, titles)


def fusion_extra(kg: Any, fusion: dict[str, Any] | None) -> dict[str, Any]:
    """A method's adaptive-fusion record (signals, confidence, share, both rankings' top chunk ids)
    as a result's ``extra`` entry, the rankings as passage keys so that candidate rules can be
    graded offline on the same keys the metrics use; empty when the run did not fuse adaptively."""
    if not fusion:
        return {}
    out = {k: v for k, v in fusion.items() if k not in ("own", "dense")}
    out["own_keys"] = ranked_passages(kg, fusion.get("own", [])).keys
    out["dense_keys"] = ranked_passages(kg, fusion.get("dense", [])).keys
    return {"fusion": out}


def reuse_extra(kg: Any, reused: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any]:
    """What a run took from an earlier run (``reuse=True``, graphs/reuse.py) as a result's ``extra``
    entry ``reused``: the lender (``method``, ``exact``, ``answered``), the passages lent and the
    ones its answer stands on (``grounds``), both as passage keys, and whether the earlier answer
    was given again (``answer_given``: no answer call was made); empty without a reused run. What
    per-question reads of ``--after`` runs count (docs/memory.md)."""
    if not reused:
        return {}
    steps = (usage or {}).get("by_step", {})
    return {"reused": {"method": reused.get("method"), "exact": bool(reused.get("exact")),
                       "answered": bool(reused.get("answered", True)),
                       "passages": ranked_passages(kg, reused.get("passages", [])).keys,
                       "grounds": ranked_passages(kg, reused.get("grounds", [])).keys,
                       "answer_given": not steps.get("answer", {}).get("llm_calls", 0)}}


def oracle_answer(gold: str, evidence_texts: list[str]) -> str:
    """What a competent reader answers: the gold answer if the evidence contains it, else "no answer".
    (yes/no questions count as answerable when any evidence was retrieved.)"""
    g = normalize_answer(gold)
    if g in {"yes", "no"}:
        return gold if evidence_texts else "no answer"
    if any(g and g in normalize_answer(t) for t in evidence_texts):
        return gold
    return "no answer"


def gold_chunk_ids(kg: Any, q: BenchQuestion) -> set[str]:
    """Chunk and anchor ids of the gold supporting passages (for oracle responders only)."""
    gold = set(gold_passage_keys(q))
    return {n.id for kind in ("chunk", "anchor") for n in kg.nodes(kind) if n.attrs.get("doc_id") in gold}


def answer_prompt(question: str, evidence: Sequence[dict[str, Any]]) -> str:
    """The prompt the methods' shared answer step (``graphs.common.answer_question``) sends:
    ``ANSWER_PROMPT`` over ``format_evidence(evidence)``."""
    from langgraph_kgmem.graphs.common import answer_prompt_text

    return answer_prompt_text(question, evidence)


def with_offline_answer_prompt(usage: dict[str, Any] | None, model: Any,
                               prompt: str | Callable[[], str | None] | None) -> dict[str, Any]:
    """``usage`` with the would-be answer prompt counted, for offline runs only.

    Offline (``model == "offline"``) the tokens of ``prompt`` (a string, or a callable building it;
    ``None``: the method would send no answer prompt) are added to ``prompt_tokens``, counted like a
    real call's prompt (the messages ``as_messages`` makes of it); ``llm_calls`` stays what was
    really called (0). Under any other model ``usage`` is returned unchanged: the real calls are
    already counted."""
    from langgraph_kgmem.llm import is_offline

    out = dict(usage or {})
    if not is_offline(model):
        return out
    text = prompt() if callable(prompt) else prompt
    if text is not None:
        from langgraph_kgmem.llm import count_message_tokens
        from langgraph_kgmem.llm.calls import as_messages

        # the messages the call would send (the fence rule's system message included)
        out["prompt_tokens"] = int(out.get("prompt_tokens", 0) or 0) + count_message_tokens(as_messages(text))
    return out
