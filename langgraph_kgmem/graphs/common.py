"""Machinery every method graph shares: base state, evidence items, answering, tool wrapping.

A method module imports from here rather than re-writing: ``BaseState`` (question, answer,
evidence, usage with the usage reducer), ``evidence_item``, ``answer_question`` (LLM answer from
evidence, or an extractive answer offline), ``emit_progress`` and ``method_as_tool``.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Sequence, TypedDict

import numpy as np
from pydantic import AfterValidator, Field

from langgraph_kgmem.ingest.chunking import split_sentences
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.storable import storable
from langgraph_kgmem.llm import (generate, innermost_model, is_offline, merge_usage, model_label, resolve_model,
                                 resolve_run_model, with_retry_policy)
# document text enters prompts only through fence(): the model layer below ingest/ holds it, so
# extraction and the methods quote text with the same code (re-exported here, where the methods import it)
from langgraph_kgmem.redaction import redact_secrets
from langgraph_kgmem.llm.prompts import DATA_CLOSE, DATA_NOTE, DATA_OPEN, data_text, fence  # noqa: F401

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


# Bounds on what a model may say in a decision (pydantic constraints: a longer value is malformed
# output, so the decision retries and then takes its fallback). KG ids are short content hashes.
MAX_ID_CHARS = 200
MAX_NAME_CHARS = 200          # an entity name, a sub-question
MAX_REASON_CHARS = 2000       # free text inside a decision (a reason, advice)
MAX_LIST_ITEMS = 100          # ids or numbers in one decision
ModelId = Annotated[str, Field(max_length=MAX_ID_CHARS)]
ModelName = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
# free text a decision carries is stored (reflections, verdicts): a key the model echoes is redacted
ModelText = Annotated[str, Field(max_length=MAX_REASON_CHARS), AfterValidator(redact_secrets)]


def emit_progress(event: dict[str, Any]) -> None:
    """Send a small JSON progress event on LangGraph's ``custom`` stream (hop taken, PPR done ...).

    Outside a graph run there is no stream writer: progress is optional, so nothing happens.
    """
    from langgraph.config import get_stream_writer

    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a runnable context
        return
    writer(event)


def entered_question(_old: Any, new: Any) -> str:
    """The ``question`` channel's reducer: the question as it enters a run, checked by
    :func:`check_question` (text, not blank, storable alike on every backend).

    LangGraph applies it when the input is written into the run's state: before the first node,
    before any store, codebook or cache sees the question and before a state holding it is
    checkpointed (only LangGraph's record of the raw input, msgpack bytes that both backends
    keep, precedes it). A refused question (:class:`~langgraph_kgmem.errors.KgmemInputError`)
    changes nothing else, and the compiled graph answers the next one as if it had never come."""
    return check_question({"question": new})


class InputState(TypedDict):
    """What every method takes: the question."""
    question: Annotated[str, entered_question]


class BaseState(TypedDict, total=False):
    """The keys every method's state and output share (answer, evidence, usage, method, model, and
    the ``run_id`` feedback names the run by)."""
    question: Annotated[str, entered_question]
    answer: str
    run_id: str
    evidence: list[dict[str, Any]]
    usage: Annotated[dict[str, Any], merge_usage]
    method: str
    model: str


@dataclass
class RunContext:
    """Per-run knobs of every method (``app.invoke(..., context={"model": m})``): the chat model
    of this run, overriding the one the graph was built with."""

    model: Any = None


def method_model(model: Any, retry_policy: Any) -> Any:
    """A factory's model: resolved once (``None`` reads ``$KGMEM_MODEL``), its calls under
    ``retry_policy`` (``None``: :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`)."""
    return with_retry_policy(resolve_model(model), retry_policy)


def run_model(runtime: Any, default: Any, retry_policy: Any = None) -> Any:
    """The chat model of this run: the run context's ``model`` (a :class:`RunContext` or a dict)
    when given, else ``default`` (resolved once, when the graph was built). Every method's LLM
    nodes ask this, so ``context={"model": m}`` works the same way in all five; the run's model
    keeps the factory's retry policy and is resolved and wrapped once, not in every node
    (:func:`~langgraph_kgmem.llm.resolve_run_model`)."""
    return resolve_run_model(default, getattr(runtime, "context", None), retry_policy)


# ------------------------------------------------------------------------- requirements (fail fast)
# A method that lacks its store, a tool-calling model or records must say so before it pays for a
# single model call, not in its last node. Each method calls require() in its first node, before
# any model call (the store may come with compile(), the model with the run's context, the records
# after the build), and in its factory for what the build already knows (the factory's model).


def require(method: str, *, runtime: Any = None, model: Any = None, store: Any = None, kg: Any = None,
            needs_store: bool = False, tool_calling: bool = False, records: bool = False,
            memory_scope: Sequence[str] | None = None) -> Any:
    """Raise :class:`~langgraph_kgmem.errors.MissingRequirementError` naming ``method``, what is
    missing and what to do, unless ``method`` has what it needs:

    - ``needs_store``: a LangGraph store (``store``, else the running graph's: ``runtime.store`` or
      ``get_store()``). Only checked with ``runtime`` or inside a run (at build time the store may
      still come with ``compile(store=...)``); returns the store found (``None`` when unchecked).
    - ``tool_calling``: ``model`` (unless offline or ``None``) binds tools (``bind_tools``).
    - ``records``: ``kg`` holds time-stamped records (``kg.add_records(...)``).
    - ``memory_scope``: the run's config fills the factory's memory scope with valid tenant labels
      (a :class:`~langgraph_kgmem.errors.KgmemInputError` otherwise, see ``memory.memory_scope``).
    """
    from langgraph_kgmem.errors import MissingRequirementError

    found = store
    if needs_store and found is None:
        found, in_run = getattr(runtime, "store", None), runtime is not None
        if found is None:
            from langgraph.config import get_store

            try:
                found, in_run = get_store(), True
            except RuntimeError:   # outside a run: the store may still come with compile()
                pass
        if found is None and in_run:
            raise MissingRequirementError(
                f"{method} keeps cross-session memory in a LangGraph store, and this run has none: "
                "compile the graph with store=... (e.g. `checkpointer, store = kg.persistence()`) "
                "or pass store= to the factory.")
    if memory_scope:
        from langgraph_kgmem.memory import memory_scope as fill_scope

        fill_scope(memory_scope)
    if tool_calling and model is not None and not is_offline(model) and not supports_tool_calling(model):
        raise MissingRequirementError(
            f"{method} needs a chat model with tool calling (bind_tools); {model_label(model)} has none. "
            "Use a model that calls tools, or model='offline'.")
    if records:
        # the time nodes add_records writes (what KG-IRAG's temporal index is built from)
        if kg is None or not any("slot" in n.attrs for n in kg.nodes("time")):
            raise MissingRequirementError(
                f"{method} reasons over time-stamped records, and KG {getattr(kg, 'name', None)!r} holds none: "
                "add them first with kg.add_records(csv_or_rows, event_rule=..., event_name=...), "
                "or pick a method for documents (e.g. catrag).")
    return found


def supports_tool_calling(model: Any) -> bool:
    """Whether ``model`` (under retry/fallback/binding wrappers) offers its own ``bind_tools``:
    LangChain's base chat model only raises ``NotImplementedError`` there."""
    from langchain_core.language_models import BaseChatModel

    inner = innermost_model(model)
    bind = getattr(type(inner), "bind_tools", None)
    return callable(bind) and bind is not BaseChatModel.bind_tools


def check_question(state: Any) -> str:
    """The run's question; a clear error when it is missing, not text, blank, or holds what no
    backend stores alike (a NUL, a lone surrogate: :func:`~langgraph_kgmem.storable.storable`).
    The ``question`` channel checks it as it enters (:func:`entered_question`); every method's
    first node calls this too, together with ``llm.fresh_usage`` so a reused thread counts anew."""
    question = state.get("question") if isinstance(state, dict) else None
    if not isinstance(question, str):
        raise KgmemInputError(f"the question must be text: invoke with {{'question': '...'}}, "
                              f"got {type(question).__name__}")
    if not question.strip():
        raise KgmemInputError("the question is empty: invoke with {'question': '...'} and some text")
    return storable(question, "the question")


def evidence_item(kg: "KnowledgeGraph", item_id: str, *, score: float | None = None) -> dict[str, Any]:
    """``{"id", "kind", "text"}`` (+ ``score``, ``title``) for a node or an edge (a fact)."""
    node = kg.node(item_id)
    if node is not None:
        item: dict[str, Any] = {"id": node.id, "kind": node.kind, "text": node.text}
        if node.attrs.get("title"):
            item["title"] = node.attrs["title"]
    else:
        edge = kg.edge(item_id)
        if edge is None:
            raise KeyError(f"no node or edge {item_id!r} in KG {kg.name!r}")
        item = {"id": edge.id, "kind": "fact" if edge.kind == "relation" else edge.kind, "text": kg.fact_text(edge)}
    if score is not None:
        item["score"] = round(float(score), 6)
    return item


ANSWER_PROMPT = """Answer the question using only the evidence below. Be brief: a name, a number, a
date or a short phrase. If the evidence does not contain the answer, say "no answer".
""" + DATA_NOTE + """

Evidence:
{evidence}

Question: {question}
Answer:"""


def dense_passages(kg: "KnowledgeGraph", question: str, k: int,
                   scored: tuple[list[str], Any] | None = None) -> list[str]:
    """The ``k`` passages (chunk ids) whose vectors are closest to ``question``, best first
    (``scored``: ``kg.similarity_scores(question, ("chunk",))`` when the caller has it already)."""
    from langgraph_kgmem.ranking import best_first

    ids, scores = scored if scored is not None else kg.similarity_scores(question, ("chunk",))
    return [ids[i] for i in best_first(scores, k).tolist()] if len(ids) else []


def fuse_with_dense(kg: "KnowledgeGraph", question: str, found: Sequence[str], k: int) -> list[tuple[str, float]]:
    """A walk's passages (chunk ids in discovery order) fused with the dense ranking of every
    passage; the top ``k`` as ``(chunk id, 1 / place)``.

    A walk's order is where it went, not how relevant each passage is, so vector search's best
    passage opens the evidence, as it would for a walk that had started there; then the walk's
    finds and vector search's next passages take turns (:func:`~langgraph_kgmem.ranking.dense_led`).
    Only the finds that vector search itself ranks within
    :func:`~langgraph_kgmem.ranking.fusion_depth` (the depth fusion reads a ranking to) take
    turns; the others, passages vector search places far from the question, and any find the top
    ``k`` has no room for follow it in the walk's order: every find stays in the evidence, and
    none far from the question displaces a passage vector search ranks near the top."""
    from langgraph_kgmem.ranking import dense_led, fusion_depth

    dense = dense_passages(kg, question, fusion_depth(k))
    near = set(dense)
    fused = dense_led([c for c in found if c in near], dense, k)
    taken = {c for c, _ in fused}
    far = [c for c in dict.fromkeys(found) if c not in taken]
    return fused + [(c, 1.0 / (len(fused) + i + 1)) for i, c in enumerate(far)]


def fuse_with_dense_adaptive(kg: "KnowledgeGraph", question: str, found: Sequence[str], k: int, *,
                             confidence: Callable[[Sequence[str], Sequence[str]], tuple[float, dict[str, float]]],
                             weak: float, strong: float, top: int) -> tuple[list[tuple[str, float]], dict[str, Any]]:
    """A walk's passages (chunk ids in discovery order) fused with the dense ranking as far as the
    method trusts its walk this time: ``confidence(found, dense)`` is the method's own reading,
    ``(confidence in [0, 1], the signals behind it)``; :func:`~langgraph_kgmem.ranking.adaptive_fuse`
    turns it into the walk's share of the ``top`` evidence places. Returns the top ``k`` (every
    find included, as :func:`fuse_with_dense` does) and the record of what decided it: signals,
    confidence, share, and both rankings' first ``2 · top`` passages."""
    from langgraph_kgmem.ranking import adaptive_fuse, fusion_depth, trust_share

    dense = dense_passages(kg, question, fusion_depth(k))
    conf, signals = confidence(found, dense)
    fused = adaptive_fuse(list(dict.fromkeys(found)), dense, top, confidence=conf, weak=weak, strong=strong,
                          depth=fusion_depth(k))
    cut = max(k, len(set(found)))
    kept = fused[:cut] + [x for x in fused[cut:] if x[0] in set(found)]
    info = {"confidence": round(conf, 6), "share": trust_share(conf, weak=weak, strong=strong, k=top), **signals,
            "own": list(dict.fromkeys(found))[:2 * top], "dense": list(dense[:2 * top])}
    return kept, info


def format_evidence(evidence: Sequence[dict[str, Any]], max_chars: int = 1200) -> str:
    """Evidence items as one fenced block, one numbered line each (title in brackets)."""
    lines = []
    for i, ev in enumerate(evidence, 1):
        title = f"[{ev['title']}] " if ev.get("title") else ""
        lines.append(f"({i}) {title}{ev['text'][:max_chars]}")
    return fence(lines, empty="")


_WORDS = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "what which who whom whose when where why how is was are were the a an of in on for to and or did does do "
    "that this by with as at from be it its has have had many much there their they he she his her than then "
    "also both same first".split())


_PUNCT = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """Answer normalisation for exact match (SQuAD/HotpotQA): lower case, no punctuation, no
    articles, single spaces."""
    s = "".join(ch for ch in str(s).lower() if ch not in _PUNCT)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def content_words(text: str) -> set[str]:
    """The lower-cased words of ``text`` without question and function words (offline heuristics)."""
    return set(_WORDS.findall(text.lower())) - STOPWORDS


def named_in(name: str, question_words: set[str]) -> bool:
    """Whether the question names ``name``: every content word of it occurs among
    ``question_words`` (:func:`content_words` of the question). The offline heuristics' test that
    a KG entity is what the question is about, not merely near it in embedding space."""
    words = content_words(name)
    return bool(words) and words <= question_words


def extractive_answer(kg: "KnowledgeGraph", question: str, evidence: Sequence[dict[str, Any]]) -> str:
    """Offline answer: the evidence sentence closest to the question (embedding + word overlap)."""
    sentences: list[str] = []
    for ev in evidence:
        sentences.extend(split_sentences(ev.get("text", "")) or [ev.get("text", "")])
    sentences = [s for s in dict.fromkeys(sentences) if s.strip()][:200]
    if not sentences:
        return "no answer"
    q = kg.embed_query(question)
    mat = kg.embed_texts(sentences)
    mat = mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
    qwords = content_words(question)
    overlap = np.array([len(qwords & set(_WORDS.findall(s.lower()))) / (len(qwords) or 1) for s in sentences])
    score = mat @ q + 0.5 * overlap
    return sentences[int(np.argmax(score))]


def answer_prompt_text(question: str, evidence: Sequence[dict[str, Any]], prompt: str = ANSWER_PROMPT) -> str:
    """The answer step's prompt over ``evidence`` (what :func:`answer_question` sends)."""
    return prompt.format(evidence=format_evidence(evidence) or "(none)", question=question)


def answer_question(kg: "KnowledgeGraph", model: Any, question: str, evidence: Sequence[dict[str, Any]], *,
                    step: str = "answer", prompt: str = ANSWER_PROMPT,
                    context: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The final answer from evidence: an LLM call, or extractive when ``model`` is offline."""
    if is_offline(model):
        return extractive_answer(kg, question, evidence), {}
    text = answer_prompt_text(question, evidence, prompt)
    ctx = {"question": question, "evidence_ids": [e["id"] for e in evidence]}
    ctx.update(context or {})
    # a model that fails twice: the extractive answer, recorded as a fallback
    return generate(model, text, step=step, context=ctx, fallback=lambda: extractive_answer(kg, question, evidence))


def method_as_tool(app: Any, *, name: str, description: str) -> Any:
    """Wrap a compiled method graph as a LangChain tool returning ``{answer, evidence_ids, evidence,
    llm_calls}``. The answer and the evidence lines are document text (an answer quotes what it was
    given) and reach the calling agent's model: each comes inside the prompt fence
    (``<data>...</data>``, :func:`fence`), and the description ends with :data:`DATA_NOTE`."""
    from langchain_core.tools import StructuredTool
    from pydantic import BaseModel, Field

    class Args(BaseModel):
        question: str = Field(description="a self-contained question to answer from the knowledge graph")

    def result(out: dict[str, Any]) -> dict[str, Any]:
        evidence = out.get("evidence", [])
        return {"answer": fence(out.get("answer", ""), inline=True, empty=""),
                "evidence_ids": [e["id"] for e in evidence],
                "evidence": [fence(e["text"][:300], inline=True, empty="") for e in evidence[:5]],
                "llm_calls": out.get("usage", {}).get("llm_calls", 0)}

    def run(question: str) -> dict[str, Any]:
        return result(app.invoke({"question": question}))

    async def arun(question: str) -> dict[str, Any]:
        return result(await app.ainvoke({"question": question}))

    if DATA_NOTE not in description:
        description = f"{description} {DATA_NOTE}"
    return StructuredTool.from_function(run, coroutine=arun, name=name, description=description, args_schema=Args)


Validator = Callable[[Any], "str | None"]


def id_validator(allowed: Sequence[str], field: str) -> Validator:
    """A ``decide(validate=...)`` check that rejects ids the model invented."""
    allowed_set = set(allowed)

    def check(decision: Any) -> str | None:
        value = getattr(decision, field)
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if v is not None and v not in allowed_set]
        if bad:
            shown = ", ".join(list(allowed)[:20])
            # the rejected value is the model's reply, which may quote a document: fenced like one
            return f"{fence(str(bad[0]), inline=True, empty=repr(bad[0]))} is not one of the allowed ids; choose from: {shown}"
        return None

    return check
