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
"""

from __future__ import annotations

import math
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from langgraph_kgmem.errors import KgmemInputError, check_int, check_number
from langgraph_kgmem.graphs.autopruned.options import AutoprunedOptions, ENCODINGS, Encoding, Show
from langgraph_kgmem.graphs.spec import MethodSpec, options_of
from langgraph_kgmem.graphs.common import (DATA_NOTE, BaseState, InputState, check_question, content_words,
                                           dense_passages, emit_progress, extractive_answer, fence, method_model, require,
                                           run_model)
from langgraph_kgmem.ingest.extract import OfflineExtractor
from langgraph_kgmem.llm import count_tokens, decide, fresh_usage, generate, is_offline, model_label
from langgraph_kgmem.memory import memory_scope as scope_of
from langgraph_kgmem.memory import resolve_store
from langgraph_kgmem.memory.locks import memory_lock
from langgraph_kgmem.graphs.autopruned.codebook import (ALIAS_THRESHOLD, CHANNELS, LAYER2_FLOOR, MAX_ENTITY_CHARS,
                                             MAX_RELATION_CHARS, Channel, Codebook, Run, cite_passages,
                                             grounded_in, phrase_triples)
from langgraph_kgmem.ranking import best_first, dense_led, fusion_depth, reciprocal_rank_fusion

METHOD = "autopruned"
# The compact reader setting measured in the README (tokens against the answer): the passages of the 20
# best runs (fused with the dense ranking) and vector search's top 5, their most relevant sentences
# ("relevance" ranking, and the bridges they name) up to 250 tokens. HotpotQA-300 dev pooled (README):
# the answer in the prompt for 0.700 of questions at 342 tokens with `fast` embeddings, 0.683 with
# `local` (dense top-5: 0.717 at 704).
# create_autopruned_graph(kg, **SENTENCES_PRESET)
SENTENCES_PRESET: dict[str, Any] = {"fine_m": 20, "show": "sentences", "sentence_budget": 250}
SelectionMode = Literal["all", "unique", "none"]
SELECTION_MODES: tuple[str, ...] = ("all", "unique", "none")
SelectionPolicy = Callable[[Channel, list[dict[str, Any]], dict[str, Any]], SelectionMode]
CHANNEL_SECTION = {"F": "facts", "A": "known answers", "Q": "earlier questions"}
SECTION_CHANNEL = {v: k for k, v in CHANNEL_SECTION.items()}
PACK_ORDER: tuple[Channel, ...] = ("F", "A", "Q")
_QUESTION_WORDS = frozenset("what which who whom whose when where why how is was are were did does do the a an".split())
NO_ANSWER = re.compile(r"^\s*(no answer|unknown|i don'?t know|n/?a)\W*$", re.I)


@dataclass(frozen=True)
class FineScoring:
    """Weights and thresholds of the fine re-ranking score (cosines of the embedding model)."""

    top_t: int = 3               # mean of the t best line pairs
    tau_cov: float = 0.6         # a query line is covered by a run line at this cosine
    tau_pair: float = 0.5        # centre of the soft many-to-many sigmoid, floor of 1:1 matches
    temperature: float = 0.05    # sigmoid temperature
    tau_whole: float = 0.4       # whole-run similarity counts only above this (and with coverage)
    w_cov: float = 0.3
    w_many: float = 0.2
    w_one: float = 0.2
    w_whole: float = 0.2


# --------------------------------------------------------------------------------------------- state


AutoPrunedContext = AutoprunedOptions  # the graph's context_schema (the name earlier releases exported)


class AutoPrunedState(BaseState, total=False):
    query_triples: list[list[str]]
    query_edges: list[int]
    codebook_revision: int                  # the codebook revision query_edges index into
    coarse: list[dict[str, Any]]            # [{"run", "score"}], best first
    candidates: list[dict[str, Any]]        # [{"run", "channel", "score", "via"?}], best first
    selection: dict[str, str]               # channel → all / unique / none
    selected_runs: dict[str, list[str]]     # channel → run ids, best first
    shown_edges: dict[str, list[int]]       # run id → its edges in the prompt (all, or pruned: edges_per_run)
    reused: list[str]                       # stored Q/A runs put into the prompt (retrieval atoms)
    replayed_answer: dict[str, Any] | None  # the stored answer given as this answer, with its provenance
    answer_by: str                          # the decider that produced ``answer``
    answer_memory: str                      # replayed / stored / not grounded / unanswered / off
    packed_prompt: str
    encoding: str
    encoding_tokens: dict[str, int]
    prompt_tokens_packed: int
    memorized: list[str]
    consolidation: dict[str, int]
    codebook_size: dict[str, int]


# ------------------------------------------------------------------------------------ decisions


class TextTriple(BaseModel):
    """One fact; its symbols within the codebook's limits (a longer one is malformed output)."""

    subject: str = Field(max_length=MAX_ENTITY_CHARS, description="a short entity name as it appears")
    relation: str = Field(max_length=MAX_RELATION_CHARS, description="a short relation phrase, e.g. 'was born in'")
    object: str = Field(max_length=MAX_ENTITY_CHARS, description="a short entity name, a value, or '?'")


class TextTriples(BaseModel):
    """The facts in the text as [subject, relation, object] triples. Use short entity names as they
    appear; for a question, write the unknown it asks for as "?" (e.g. ["Marie Curie", "born in", "?"])."""

    triples: list[TextTriple] = Field(max_length=16, description="one triple per fact, at most 8")


# -------------------------------------------------------------------------------------- prompts

TRIPLES_PROMPT = """Turn this {kind} into a few [subject, relation, object] triples (at most 8).
""" + DATA_NOTE + """

{kind}: {text}"""

ANSWER_PROMPT = """Answer the question from the knowledge below, written as a compact codebook ({legend}).
Be brief: a name, a number, a date or a short phrase. If the knowledge does not hold the answer,
say "no answer".{known_note}
""" + DATA_NOTE + """

{knowledge}

Question: {question}
Answer:"""

LEGENDS = {
    "words": "each line is subject | relation | object",
    "ids": "entities and relations are numbered; each fact line is subject-number relation-number object-number",
    "matrix": "entities and relations are numbered; [edges] numbers each fact as subject relation object; "
              "the other sections list edge numbers",
    "sentences": "[facts]: each line is a passage title in brackets and sentences of that passage; "
                 "other sections: subject | relation | object",
}

KNOWN_NOTE = """
The [known answers] section holds answers to earlier, different questions: facts to use where they
apply, not this question's answer."""

# sentences and nothing else (no stored answers or questions shown): no codebook legend to explain
SENTENCES_PROMPT = """Answer the question from the passage sentences below (each line: [passage title] sentences).
Be brief: a name, a number, a date or a short phrase. If they do not hold the answer, say "no answer".
""" + DATA_NOTE + """

{knowledge}

Question: {question}
Answer:"""
_SENTENCE = re.compile(r"[.!?][\"')\]]*(\s+)(?=[A-Z0-9\"'(\[])")
_INITIAL = re.compile(r"(?:^|[\s(\[\"'])[A-Z]\.$")   # a piece ending in one capital and a period
_MARKER = re.compile(r"(?:\d{1,3}|[ivxIVX]{1,5}|[a-z])\.")   # a piece that is only a list marker: "2.", "iv.", "b."


def answer_prompt(question: str, packed: str, encoding: str) -> str:
    """The answer step's prompt around a packed codebook (also used to count would-be tokens offline)."""
    lines = packed.splitlines()
    if encoding == "sentences" and lines[:1] == [f"[{CHANNEL_SECTION['F']}]"] and not any(
            _HEADER.match(x) for x in lines[1:]):
        return SENTENCES_PROMPT.format(knowledge=fence(lines[1:]), question=question)
    # a stored answer came from another question: the model is told so, never handed it as this one's
    note = KNOWN_NOTE if any(x.startswith(f"[{CHANNEL_SECTION['A']}]") for x in lines) else ""
    return ANSWER_PROMPT.format(legend=LEGENDS.get(encoding, LEGENDS["words"]), known_note=note,
                                knowledge=fence(packed.splitlines(), empty="(nothing known)"), question=question)


# ------------------------------------------------------------------------------- selection policy


def default_selection_policy(channel: Channel, runs: list[dict[str, Any]], features: dict[str, Any]) -> SelectionMode:
    """The fixed default: facts and known answers ``unique`` (one run per cluster of
    near-duplicates), earlier questions ``none`` (a stored question is the key that brings its answers — it
    is reused and reported in ``reused`` — but its own triples add no knowledge to the prompt)."""
    if not runs or channel == "Q":
        return "none"
    return "unique"


# ---------------------------------------------------------------------------------- packing


def _channel_triples(book: Codebook, channels: Mapping[str, Sequence[int]]) -> dict[str, list[tuple[str, str, str]]]:
    return {c: [book.triple(e) for e in dict.fromkeys(book.resolve_edge(x) for x in channels.get(c, []))]
            for c in PACK_ORDER if channels.get(c)}


def encode_knowledge(triples: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[Encoding, str]:
    """The selected triples per channel in the three encodings (see :func:`decode_knowledge`)."""
    words: list[str] = []
    ents: dict[str, int] = {}
    rels: dict[str, int] = {}
    edges: dict[tuple[int, int, int], int] = {}
    id_lines: list[str] = []
    lists: list[str] = []
    for c in PACK_ORDER:
        trips = triples.get(c)
        if not trips:
            continue
        words.append(f"[{CHANNEL_SECTION[c]}]")
        id_lines.append(f"[{CHANNEL_SECTION[c]}]")
        ids = []
        for h, r, t in trips:
            words.append(f"{h} | {r} | {t}")
            key = (ents.setdefault(h, len(ents)), rels.setdefault(r, len(rels)), ents.setdefault(t, len(ents)))
            id_lines.append("%d %d %d" % key)
            ids.append(str(edges.setdefault(key, len(edges))))
        lists.append(f"[{CHANNEL_SECTION[c]}] " + " ".join(ids))
    if not words:
        return {"words": "", "ids": "", "matrix": ""}
    legend = ["[entities]"] + [f"{i} {e}" for e, i in ents.items()] + ["[relations]"] + [f"{i} {r}" for r, i in rels.items()]
    matrix = legend + ["[edges]"] + ["%d %d %d" % k for k in edges] + lists
    return {"words": "\n".join(words), "ids": "\n".join(legend + id_lines), "matrix": "\n".join(matrix)}


_HEADER = re.compile(r"^\[(entities|relations|edges|facts|known answers|earlier questions)\](.*)$")


def decode_knowledge(text: str) -> dict[str, list[tuple[str, str, str]]]:
    """Inverse of :func:`encode_knowledge` for any of the three encodings: channel → triples."""
    ents: dict[int, str] = {}
    rels: dict[int, str] = {}
    edges: list[tuple[int, int, int]] = []
    out: dict[str, list[tuple[str, str, str]]] = {}
    section = None
    symbolic = "[entities]" in text.splitlines()[:1] if text else False
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            section, rest = m.group(1), m.group(2).strip()
            if section in SECTION_CHANNEL and rest:  # matrix: edge-id list on the header line
                out[SECTION_CHANNEL[section]] = [(ents[h], rels[r], ents[t]) for h, r, t in
                                                 (edges[int(x)] for x in rest.split())]
            elif section in SECTION_CHANNEL:
                out.setdefault(SECTION_CHANNEL[section], [])
            continue
        if section == "entities":
            num, _, name = line.partition(" ")
            ents[int(num)] = name
        elif section == "relations":
            num, _, name = line.partition(" ")
            rels[int(num)] = name
        elif section == "edges":
            h, r, t = (int(x) for x in line.split())
            edges.append((h, r, t))
        elif section in SECTION_CHANNEL:
            if symbolic:
                h, r, t = (int(x) for x in line.split())
                out[SECTION_CHANNEL[section]].append((ents[h], rels[r], ents[t]))
            else:
                h, r, t = line.split(" | ")
                out[SECTION_CHANNEL[section]].append((h, r, t))
    return {c: out[c] for c in PACK_ORDER if c in out}


def cheapest_encoding(encoded: Mapping[str, str], allowed: Sequence[str]) -> tuple[str, dict[str, int]]:
    tokens = {name: count_tokens(encoded[name]) for name in ENCODINGS if name in allowed}
    best = min(tokens, key=lambda n: (tokens[n], ENCODINGS.index(n)))  # ties: the more readable one
    return best, tokens


# ------------------------------------------------------------------------------------- scoring


def _segment_max(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    if len(ptr) <= 1:
        return np.zeros(0)
    return np.maximum.reduceat(values, ptr[:-1])


def fine_score(q: np.ndarray, lines: np.ndarray, cfg: FineScoring) -> float:
    """The fine re-ranking score of one run (``q``: query line vectors, ``lines``: run line vectors)."""
    return float(fine_scores(q, [lines], cfg)[0])


def fine_scores(q: np.ndarray, runs: Sequence[np.ndarray], cfg: FineScoring) -> np.ndarray:
    """Fine scores of many runs at once: one similarity product over all their lines, padded to
    (runs × query lines × longest run). Per run, with S = query lines × run lines:

    mean of the ``top_t`` best entries of S + ``w_cov``·coverage (query lines matched ≥ ``tau_cov``)
    + ``w_many``·soft many-to-many overlap (sigmoid((S − ``tau_pair``)/T), per query line capped at 1)
    + ``w_one``·greedy distinct 1:1 matches ≥ ``tau_pair`` (best remaining pair first, ties by
    position) + ``w_whole``·whole-run cosine of the mean vectors, counted only when the run covers
    something and it reaches ``tau_whole``. All parts are shares of the query lines, so a long
    off-topic run earns nothing for its length.
    """
    lens = np.array([len(r) for r in runs], dtype=np.int64)
    flat = np.concatenate([r for r in runs if len(r)]) if lens.sum() else np.zeros((0, q.shape[1]))
    return stacked_fine_scores(q, flat, lens, cfg)


def stacked_fine_scores(q: np.ndarray, flat: np.ndarray, lens: np.ndarray, cfg: FineScoring) -> np.ndarray:
    """:func:`fine_scores` of runs whose line vectors come stacked: ``flat`` holds run after run,
    ``lens[i]`` lines of run ``i`` (:meth:`Codebook.stacked_lines` gathers them in one step)."""
    n, nq = len(lens), q.shape[0]
    if n == 0 or nq == 0:
        return np.zeros(n)
    width = max(1, int(lens.max()))
    valid = np.arange(width)[None, :] < lens[:, None]                        # runs × width
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    cols = np.where(valid, starts[:, None] + np.arange(width)[None, :], 0)
    if not len(flat):
        flat = np.zeros((1, q.shape[1]))
    sims = (q @ flat.T)[:, cols].transpose(1, 0, 2)                            # runs × nq × width
    mask = np.broadcast_to(valid[:, None, :], sims.shape)
    masked = np.where(mask, sims, -np.inf)
    # mean of the t best entries (all of them when the run has fewer)
    flat_masked = masked.reshape(n, -1)
    t = min(max(1, cfg.top_t), flat_masked.shape[1])
    # the t largest per run (order does not matter for their sum): a partition, not a full sort
    best_t = -np.partition(-flat_masked, t - 1, axis=1)[:, :t] if t < flat_masked.shape[1] else flat_masked
    count = np.minimum(max(1, cfg.top_t), np.maximum(1, lens * nq))
    top = np.where(np.isfinite(best_t), best_t, 0.0).sum(axis=1) / count
    coverage = (masked.max(axis=2) >= cfg.tau_cov).mean(axis=1)
    soft = np.where(mask, 1.0 / (1.0 + np.exp(-(sims - cfg.tau_pair) / cfg.temperature)), 0.0)
    many = np.minimum(1.0, soft.sum(axis=2)).mean(axis=1)
    # greedy 1:1: repeatedly take each run's best remaining pair, then retire its row and column
    work = masked.copy()
    ones = np.zeros(n)
    rows = np.arange(n)
    for _ in range(min(nq, width)):
        at = work.reshape(n, -1).argmax(axis=1)
        ok = work.reshape(n, -1)[rows, at] >= cfg.tau_pair
        if not ok.any():
            break
        ones += ok
        qi, li = np.divmod(at[ok], width)
        work[rows[ok], qi, :] = -np.inf
        work[rows[ok], :, li] = -np.inf
    one_to_one = ones / nq
    qm = q.mean(axis=0)
    # mean line vector per run: the runs' j-th lines added in turn (no runs × width × dim copy;
    # numpy's reduceat over rows is several times slower)
    sums = np.where(valid[:, :1], flat[cols[:, 0]], 0.0).astype(np.float64)
    for j in range(1, width):
        more = valid[:, j]
        sums[more] += flat[cols[more, j]]
    lm = sums / np.maximum(1, lens)[:, None]
    norms = np.linalg.norm(qm) * np.linalg.norm(lm, axis=1)
    whole = (lm @ qm) / np.where(norms > 0, norms, 1.0)
    gated = np.where((coverage > 0) & (whole >= cfg.tau_whole), whole, 0.0)
    return top + cfg.w_cov * coverage + cfg.w_many * many + cfg.w_one * one_to_one + cfg.w_whole * gated


# --------------------------------------------------------------------------------------- runtime



class _Runtime:
    """What the nodes share: the KG, options, and the codebook cached per store and tenant scope
    (reloaded when another writer saved a newer revision)."""

    def __init__(self, kg: Any, model: Any, store: Any, opts: dict[str, Any],
                 options: AutoprunedOptions | None = None) -> None:
        self.kg = kg
        self.model = model
        self.store = store
        self.opts = opts
        self.options = options or AutoprunedOptions()   # as given to the factory (the context schema)
        self._books: dict[tuple[int, tuple[str, ...]], tuple[Any, Codebook]] = {}
        self._synced: dict[tuple[int, tuple[str, ...]], int] = {}
        self._servable: dict[tuple[Any, ...], bool] = {}
        self._servable_at: int | None = None
        # concurrent runs of one compiled app (ainvoke, batch) share the cached codebook: every
        # read-modify of it holds this lock; LLM calls are made outside it
        self.lock = threading.RLock()
        self._sentences: dict[str, list[tuple[int, str]]] = {}
        self._sentence_vectors: dict[str, np.ndarray] = {}
        self._sentence_words: dict[str, list[set[str]]] = {}
        self._sentences_at: int | None = None
        self._chunk_runs: tuple[Any, int, dict[str, list[str]]] | None = None
        self._passage_scores: dict[tuple[str, int], tuple[list[str], np.ndarray]] = {}

    def passage_scores(self, question: str) -> tuple[list[str], np.ndarray]:
        """Vector search's cosine of every passage with ``question`` (``kg.similarity_scores``),
        kept for the run's later nodes (the fine stage's fusion and the sentence ranking both read
        them) until the KG changes; the last few questions only (concurrent runs)."""
        key = (question, self.kg.version)
        hit = self._passage_scores.get(key)
        if hit is None:
            if len(self._passage_scores) >= 8:
                self._passage_scores.pop(next(iter(self._passage_scores)))
            hit = self._passage_scores[key] = self.kg.similarity_scores(question, ("chunk",))
        return hit

    def chunk_runs(self, book: Codebook) -> dict[str, list[str]]:
        """Chunk id → the ids of the fact runs indexed from it (rebuilt when a fact run was added,
        removed or re-pointed, or the codebook reloaded; the question and answer runs each
        question memorizes leave it as it is)."""
        hit = self._chunk_runs
        stamp = book.fact_runs_changed
        if hit is None or hit[0] is not book or hit[1] != stamp:
            out: dict[str, list[str]] = {}
            for run in book.runs_of("F"):
                for c in run.chunks:
                    out.setdefault(c, []).append(run.id)
            hit = self._chunk_runs = (book, stamp, out)
        return hit[2]

    def sentence_cache(self) -> dict[str, list[tuple[int, str]]]:
        """Chunk id → its sentences (``show="sentences"``); emptied when the KG changes."""
        if self._sentences_at != self.kg.version:
            self._sentences, self._sentence_vectors, self._sentence_words = {}, {}, {}
            self._sentences_at = self.kg.version
        return self._sentences

    def sentence_vectors(self) -> dict[str, np.ndarray]:
        """Chunk id → unit vectors of its sentences (``sentence_budget``); emptied with :meth:`sentence_cache`."""
        self.sentence_cache()
        return self._sentence_vectors

    def sentence_words(self) -> dict[str, list[set[str]]]:
        """Chunk id → content words of each sentence (the ``"relevance"`` ranking's term overlap);
        emptied with :meth:`sentence_cache`."""
        self.sentence_cache()
        return self._sentence_words

    def resolved_model(self, runtime: Runtime[AutoPrunedContext] | None = None) -> Any:
        return run_model(runtime, self.model)

    def scope(self) -> tuple[str, ...]:
        """The running graph's tenant scope (``memory_scope`` filled from its config; () without)."""
        return scope_of(self.opts["memory_scope"])

    def book(self, scope: tuple[str, ...] = (), *, check: bool = True) -> tuple[Any, Codebook]:
        """The codebook of the store for tenant ``scope``: reloaded when another writer saved a
        newer revision. With ``check=False`` the one this process holds, without asking the store
        (a query per call): for the nodes between ``sync_facts``, which asked at the start of the
        run, and the writing nodes, which ask again under the store's lock."""
        store = resolve_store(self.store)
        key = (id(store), scope)
        hit = self._books.get(key)
        if not check and hit is not None and hit[0] is store:
            return hit
        stored = Codebook.stored_revision(store, self.kg.name, scope)
        if hit is None or hit[0] is not store or hit[1].revision != (stored or 0):
            # under the store's lock: a save by another process is never read half-written
            with memory_lock(store, self.lock_key(scope)):
                hit = (store, Codebook.load(store, self.kg.name, scope))
            self._books[key] = hit
            self._synced.pop(key, None)
        return hit

    def lock_key(self, scope: tuple[str, ...] = ()) -> str:
        return "codebook:" + "/".join((self.kg.name, *scope))

    @contextmanager
    def writing(self, scope: tuple[str, ...] = ()) -> Iterator[tuple[Any, Codebook]]:
        """The codebook to change and save, held across threads and processes: read after the
        lock is taken (so another process's newer save is loaded first), saved before it is
        released, so no writer overwrites runs it never saw."""
        store = resolve_store(self.store)
        with self.lock, memory_lock(store, self.lock_key(scope)):
            yield self.book(scope)

    def servable(self, book: Codebook, run: Run) -> bool:
        """Whether a stored answer run may be served (replayed, or shown as a known answer): it
        was stored under the grounding rule (it names its decider) and each passage it cites is
        still in the KG and together they still hold every content word of it
        (:func:`~langgraph_kgmem.graphs.autopruned.codebook.grounded_in`). Kept until the KG changes."""
        if run.channel != "A" or not run.by:
            return False
        if self._servable_at != self.kg.version:
            self._servable, self._servable_at = {}, self.kg.version
        key = (run.text, tuple(run.chunks))   # the verdict depends on these and the KG alone
        ok = self._servable.get(key)
        if ok is None:
            def text_of(cid: str) -> str | None:
                node = self.kg.node(cid)
                return node.text if node is not None else None

            ok = self._servable[key] = grounded_in(run.text, run.chunks, text_of)
        return ok

    def replay(self, book: Codebook, question: str, decider: str) -> dict[str, Any] | None:
        """The stored answer to replay for ``question``: one given to the same question
        (:func:`~langgraph_kgmem.graphs.autopruned.codebook.question_key`) by the same decider and still
        servable, the newest first; with its provenance. None: memory stays silent."""
        for q in reversed(book.question_runs(question)):
            for aid in reversed(q.links):
                run = book.runs.get(aid)
                if run is not None and run.by == decider and self.servable(book, run):
                    return {"answer": run.text, "answer_run": run.id, "question_run": q.id, "question": q.text,
                            "evidence": list(run.chunks), "decider": run.by}
        return None

    @staticmethod
    def query_edges(book: Codebook, state: Mapping[str, Any]) -> list[int]:
        """The question's codebook edges: as encoded, or encoded again from its triples when the
        codebook was reloaded since (another writer saved; rows this run added but did not save
        are gone, so the old indices would point at other rows)."""
        if state.get("codebook_revision") == book.revision:
            return list(state["query_edges"])
        return book.indexify(state.get("query_triples", [])) or book.indexify([["?", "is", "?"]])

    def extract(self, text: str, kind: str, model: Any) -> tuple[list[list[str]], dict[str, Any]]:
        """Triples of a question / answer: the LLM decision, or the offline parser."""

        def offline() -> TextTriples:
            trips = [(t.subject, t.relation, t.object) for t in OfflineExtractor().extract(text).triples]
            trips += phrase_triples(text)
            # the offline parser's own triples: the codebook skips any over-long symbol itself
            return TextTriples.model_construct(triples=[TextTriple.model_construct(subject=h, relation=r, object=t)
                                                        for h, r, t in dict.fromkeys(trips)])

        use_llm = self.opts["extraction"] == "llm" and not is_offline(model)
        decision, usage = decide(model if use_llm else "offline", TextTriples,
                                 TRIPLES_PROMPT.format(kind=kind, text=fence(text, inline=True)),
                                 step=f"extract_{kind}_triples",
                                 offline=offline, context={"text": text, "kind": kind})
        trips = [[t.subject.strip(), t.relation.strip(), t.object.strip()] for t in decision.triples
                 if t.subject.strip() and t.object.strip()]
        return trips, usage

    @staticmethod
    def phrase_nodes(text: str) -> list[list[str]]:
        """For a text too short for triples (one name, one phrase): ``[phrase, "is", "?"]``."""
        words = [w for w in re.findall(r"[\w'’\-]+", text) if w.lower() not in _QUESTION_WORDS]
        return [[(" ".join(words[:6]) or text.strip()[:60])[:MAX_ENTITY_CHARS] or "?", "is", "?"]]


# ------------------------------------------------------------------------------------ node bodies


def _make_nodes(rt: _Runtime) -> dict[str, Callable[..., dict[str, Any]]]:
    kg, opts = rt.kg, rt.opts
    cfg: FineScoring = opts["fine"]
    seg = {"tau": opts["tau_run"]}

    def sync_facts(state: AutoPrunedState, runtime: Runtime[AutoPrunedContext]) -> dict[str, Any]:
        check_question(state)
        store = require("AutoPrunedRetriever", runtime=runtime, store=rt.store, needs_store=True)
        options_of(runtime, rt.options)   # a knob in the run's context is refused here, before any work
        scope = rt.scope()     # a run without the tenant value it needs fails here, before any work
        with rt.lock:          # the codebook in hand is the stored one (book() reloads a newer save and
            rt.book(scope)     # forgets the sync) and was synced with this KG version: no store lock to take
            synced = rt._synced.get((id(store), scope)) == kg.version
        if not synced:
            with rt.writing(scope) as (store, book):  # concurrent runs (threads, processes) share the codebook
                if rt._synced.get((id(store), scope)) != kg.version:
                    emit_progress({"event": "codebook_sync", "status": "start"})
                    done = book.sync_facts(kg, phrase_facts=opts["phrase_facts"], segment_opts=seg)
                    if done["documents"]:
                        book.save(store)
                    rt._synced[(id(store), scope)] = kg.version
                    emit_progress({"event": "codebook_sync", "status": "done", **done})
        return {"method": METHOD, "model": model_label(rt.resolved_model(runtime)), "usage": fresh_usage()}

    def encode_question(state: AutoPrunedState, runtime: Runtime[AutoPrunedContext]) -> dict[str, Any]:
        question = state["question"].strip()
        triples, usage = rt.extract(question, "question", rt.resolved_model(runtime))  # the LLM: outside the lock
        with rt.lock:
            _, book = rt.book(rt.scope(), check=False)
            # triples whose symbols the codebook refuses are skipped: the phrase node stands in
            edges = (book.indexify(triples) or book.indexify(rt.phrase_nodes(question))
                     or book.indexify([["?", "is", "?"]]))  # nothing readable at all: the bare unknown
            return {"query_triples": [list(book.triple(e)) for e in edges], "query_edges": edges,
                    "codebook_revision": book.revision, "usage": usage}

    def retrieve_coarse(state: AutoPrunedState) -> dict[str, Any]:
        with rt.lock:  # concurrent runs of one app share the codebook
            _, book = rt.book(rt.scope(), check=False)
            idx = book.run_index(kg)
            if not idx["ids"]:
                return {"coarse": []}
            hrt = [book.edge_hrt[book.resolve_edge(e)] for e in rt.query_edges(book, state)]
            q_ents = list(dict.fromkeys(book.resolve_entity(x) for h, _, t in hrt for x in (h, t)))
            q_rels = list(dict.fromkeys(r for _, r, _ in hrt))
            rv = book.relation_vectors(kg)
            ent_sim = book.entity_similarities(kg, q_ents).max(axis=0)
            rel_sim = (rv[q_rels] @ rv.T).max(axis=0)
            score = (opts["w_ent"] * _segment_max(ent_sim[idx["ent"]], idx["ent_ptr"])
                     + opts["w_rel"] * _segment_max(rel_sim[idx["rel"]], idx["rel_ptr"]))
            top = best_first(score, opts["coarse_k"])
            return {"coarse": [{"run": idx["ids"][i], "score": round(float(score[i]), 6)} for i in top.tolist()]}

    def rerank_fine(state: AutoPrunedState) -> dict[str, Any]:
        with rt.lock:  # concurrent runs of one app share the codebook
            _, book = rt.book(rt.scope(), check=False)
            if not state.get("coarse"):
                return {"candidates": []}
            q = book.line_vectors(kg, rt.query_edges(book, state))
            runs = [book.runs[c["run"]] for c in state["coarse"]]
            dense = (dense_passages(kg, state["question"], fusion_depth(opts["fine_m"]),
                                    rt.passage_scores(state["question"])) if opts["dense_fusion"] else [])
            if dense:  # dense seeding: the fact runs of the dense top-fine_m passages compete too
                have = {r.id for r in runs}
                by_chunk = rt.chunk_runs(book)
                for rid in (r for c in dense[:opts["fine_m"]] for r in by_chunk.get(c, [])):
                    if rid not in have and rid in book.runs:
                        have.add(rid)
                        runs.append(book.runs[rid])
            values = stacked_fine_scores(q, *book.stacked_lines(kg, runs), cfg)
            scored = sorted(((float(v), run.seq, run) for v, run in zip(values.tolist(), runs)),
                            key=lambda x: (-x[0], x[1]))
            if opts["cover_weight"] > 0:
                scored = _cover_order(book, kg, scored, rt.query_edges(book, state), opts["cover_weight"],
                                      2 * opts["fine_m"])
            fused = _fuse_dense(scored, dense, partial(_run_passages, book)) if dense else {}
            if fused:
                scored = sorted(scored, key=lambda x: -round(fused.get(x[2].id, 0.0), 12))  # stable: fine order on ties
            # the top fine_m fact and answer runs; a question run ranked among them is the key to its
            # stored answers: it brings them in (they count toward fine_m), itself for free
            out: list[dict[str, Any]] = []
            have: set[str] = set()
            counted = 0
            for s, _, r in scored:
                if counted >= opts["fine_m"]:
                    break
                if r.id in have or (r.channel == "A" and not rt.servable(book, r)):
                    continue   # a stored answer no longer (or never) grounded is not shown
                have.add(r.id)
                rank = {"fused": round(fused.get(r.id, 0.0), 8)} if fused else {}
                out.append({"run": r.id, "channel": r.channel, "score": round(s, 6), **rank})
                if r.channel != "Q":
                    counted += 1
                    continue
                for a in r.links:
                    if (counted < opts["fine_m"] and a in book.runs and a not in have
                            and rt.servable(book, book.runs[a])):
                        have.add(a)
                        out.append({"run": a, "channel": "A", "score": round(s, 6), "via": r.id, **rank})
                        counted += 1
            return {"candidates": out}

    def select_runs(state: AutoPrunedState) -> dict[str, Any]:
        with rt.lock:  # concurrent runs of one app share the codebook
            _, book = rt.book(rt.scope(), check=False)
            cands = state.get("candidates", [])
            by_channel = {c: [x for x in cands if x["channel"] == c] for c in CHANNELS}
            features = {"question_tokens": count_tokens(state["question"]), "query_lines": len(state["query_edges"]),
                        "channel_sizes": {c: len(v) for c, v in by_channel.items()},
                        "top_score": {c: (v[0]["score"] if v else 0.0) for c, v in by_channel.items()},
                        "max_prompt_tokens": opts["max_prompt_tokens"]}
            selection: dict[str, str] = {}
            selected: dict[str, list[str]] = {}
            for c in CHANNELS:
                mode = opts["selection_policy"](c, list(by_channel[c]), features)
                if mode not in SELECTION_MODES:
                    raise KgmemInputError(
                        f"selection_policy returned {mode!r} for channel {c!r}; it must return one of "
                        f"{', '.join(SELECTION_MODES)}")
                selection[c] = mode
                runs = [x["run"] for x in by_channel[c]]
                if mode == "none":
                    runs = []
                elif mode == "unique":
                    runs = _unique_runs(book, kg, runs, opts["unique_threshold"])
                selected[c] = runs
            return {"selection": selection, "selected_runs": selected}  # reused: after packing (runs may drop)

    def pack_prompt(state: AutoPrunedState) -> dict[str, Any]:
        with rt.lock:  # concurrent runs of one app share the codebook
            _, book = rt.book(rt.scope(), check=False)
            selected = {c: list(v) for c, v in state.get("selected_runs", {}).items()}
            # runs are ordered (evidence) and dropped (budget) by their fused rank score when fused
            scores = {x["run"]: x.get("fused", x["score"]) for x in state.get("candidates", [])}
            q_edges = rt.query_edges(book, state) if state.get("query_edges") else []
            shown = _shown_edges(book, kg, selected, q_edges, opts["edges_per_run"])

            sentences = opts["show"] == "sentences"

            made: dict[tuple[str, ...], list[dict[str, Any]]] = {}   # packing and evidence share one ranking

            def fact_groups(runs: Sequence[str]) -> list[dict[str, Any]]:
                key = tuple(runs)
                if key not in made:
                    made[key] = (_fact_sentences(book, kg, runs, shown, rt.sentence_cache())
                                 if opts["sentence_budget"] is None else
                                 _ranked_sentences(book, kg, state["question"], runs, shown, rt.sentence_cache(),
                                                   rt.sentence_vectors(), opts["sentence_budget"],
                                                   opts["sentence_rankings"], opts["sentence_bridges"],
                                                   opts["sentence_dense"], rt.sentence_words(),
                                                   opts["relevance_weights"],
                                                   partial(rt.passage_scores, state["question"])))
                return made[key]

            def pack(drop: set[str]) -> tuple[dict[str, list[str]], dict[str, str], str, dict[str, int]]:
                kept = {c: [r for r in rs if r not in drop] for c, rs in selected.items()}
                if sentences:  # fact runs as their source sentences; stored Q/A runs as word triples
                    groups = fact_groups(kept.get("F", []))
                    rest = {c: [e for r in kept.get(c, []) for e in shown[r]] for c in CHANNELS if c != "F"}
                    parts = ([f"[{CHANNEL_SECTION['F']}]", _sentence_block(groups)] if groups else []) + \
                        [encode_knowledge(_channel_triples(book, rest))["words"]]
                    text = "\n".join(x for x in parts if x)
                    return kept, {"sentences": text}, "sentences", {"sentences": count_tokens(text)}
                channels = {c: [e for r in kept.get(c, []) for e in shown[r]] for c in CHANNELS}
                encoded = encode_knowledge(_channel_triples(book, channels))
                return (kept, encoded, *cheapest_encoding(encoded, opts["encodings"]))

            kept, encoded, best, tokens = pack(set())
            budget = opts["max_prompt_tokens"]
            if budget is not None and tokens[best] > budget:
                # drop the weakest runs (lowest score; on a tie, the one its channel selected later,
                # then the newest) until the codebook fits, keeping at least one; tokens only grow
                # with runs, so the fewest drops are found by bisection
                weakest = [r for *_, r in sorted((scores.get(r, 0.0), -i, -book.runs[r].seq, r)
                                                  for rs in selected.values() for i, r in enumerate(rs))]
                lo, hi = 1, len(weakest) - 1          # runs to drop; hi leaves the strongest alone
                result = pack(set(weakest[:hi]))      # kept even if one run alone is over budget
                while lo < hi:
                    mid = (lo + hi) // 2
                    trial = pack(set(weakest[:mid]))
                    if trial[3][trial[2]] <= budget:
                        hi, result = mid, trial
                    else:
                        lo = mid + 1
                kept, encoded, best, tokens = result
            selected = kept
            evidence = _evidence(book, kg, selected, scores, shown)
            if sentences:  # the facts the reader sees are the sentences, one item per passage chunk
                groups = fact_groups(selected.get("F", []))
                # a passage vector search added (sentence_dense) has no selected run: its own first one
                run_of = {g["chunk"]: (g["runs"] or rt.chunk_runs(book).get(g["chunk"], []) or [None])[0]
                          for g in groups}
                evidence = [e for e in evidence if e["channel"] != "F"] + [
                    {"id": g["chunk"], "kind": "sentences", "text": " ".join(g["sentences"]), "run": run_of[g["chunk"]],
                     "channel": "F", "chunks": [g["chunk"]], "score": round(float(scores.get(run_of[g["chunk"]], 0.0)), 6),
                     **({"title": g["title"]} if g["title"] else {})} for g in groups]
                evidence.sort(key=lambda e: -e["score"])
            reused = _reused(book, selected, state.get("candidates", []))
            return {"packed_prompt": encoded[best], "encoding": best, "encoding_tokens": tokens,
                    "prompt_tokens_packed": tokens[best], "selected_runs": selected, "reused": reused,
                    "shown_edges": {r: shown[r] for rs in selected.values() for r in rs}, "evidence": evidence}

    def answer(state: AutoPrunedState, runtime: Runtime[AutoPrunedContext]) -> dict[str, Any]:
        model = rt.resolved_model(runtime)
        decider = model_label(model)
        evidence = state.get("evidence", [])
        with rt.lock:
            _, book = rt.book(rt.scope(), check=False)
            replayed = rt.replay(book, state["question"], decider) if opts["replay"] else None
        if replayed is not None:   # the same question, answered by this decider, still grounded: no LLM call
            return {"answer": replayed["answer"], "answer_by": decider, "replayed_answer": replayed}
        # the KG's facts only: a stored answer belongs to the question it answered (a line of an
        # answer run that is a KG relation edge is that fact, as a fact run would show it)
        facts = [e for e in evidence if e.get("channel", "F") == "F" or kg.edge(e["id"]) is not None]
        if is_offline(model):
            return {"answer": extractive_answer(kg, state["question"], facts) if facts else "no answer",
                    "answer_by": decider, "replayed_answer": None}
        prompt = answer_prompt(state["question"], state.get("packed_prompt", ""), state.get("encoding", "words"))
        text, usage = generate(model, prompt, step="answer", context={
            "question": state["question"], "evidence_ids": [e["id"] for e in evidence],
            "evidence_texts": [e["text"] for e in evidence], "run_ids": state.get("selected_runs", {}),
            "encoding": state.get("encoding")},
            fallback=lambda: extractive_answer(kg, state["question"], facts) if facts else "no answer")
        # an answer the model did not give is not the model's: it never replays as one
        by = f"extractive fallback ({decider})" if usage.get("fallbacks") else decider
        return {"answer": text, "usage": usage, "answer_by": by, "replayed_answer": None}

    def memorize(state: AutoPrunedState, runtime: Runtime[AutoPrunedContext]) -> dict[str, Any]:
        ans = (state.get("answer") or "").strip()
        if state.get("replayed_answer"):   # nothing new: the answer is the stored one
            with rt.lock:
                _, book = rt.book(rt.scope(), check=False)
                return {"memorized": [], "answer_memory": "replayed", "codebook_size": book.size()}
        answered = bool(ans) and not NO_ANSWER.match(ans)
        # the grounding rule: every content word of the answer in the passages it cites
        cited = cite_passages(ans, _evidence_passages(kg, state.get("evidence", []))) if answered else None
        grounded = cited is not None
        status = ("off" if not opts["memorize"] else "stored" if grounded
                  else "not grounded" if answered else "unanswered")
        # the question is a retrieval atom whatever its answer; only a grounded answer is kept
        wanted = opts["memorize"] and (answered or opts["memorize_unanswered"])
        # the LLM extraction runs outside the lock; the codebook updates below hold it
        trips, usage = rt.extract(ans, "answer", rt.resolved_model(runtime)) if wanted and grounded else ([], {})
        by = state.get("answer_by") or model_label(rt.resolved_model(runtime))
        new: list[str] = []
        linked = False
        a_edges: list[int] = []
        with rt.writing(rt.scope()) as (store, book):
            if wanted:
                # one run per question (question_key) and per answer: they are reused whole, by id
                q_edges = [book.resolve_edge(e) for e in rt.query_edges(book, state)]
                q_runs = book.question_runs(state["question"])[-1:]
                if not q_runs and q_edges:
                    q_runs = [book.add_run("Q", q_edges, text=state["question"])]
                    new.append(q_runs[0].id)
                if grounded:
                    if not trips:  # a short answer ("Warsaw") completes the question's triples
                        trips = [[*book.triple(e)[:2], ans] for e in q_edges[:2]]
                    a_edges = book.indexify(trips)  # empty when the codebook refused every symbol
                if grounded and a_edges:
                    # one answer run per answer, grounds and decider: its provenance is what it says
                    same = [r for r in book.runs_of("A")
                            if r.edges == a_edges and r.text == ans and r.by == by and r.chunks == cited]
                    run = same[0] if same else book.add_run("A", a_edges, chunks=cited, text=ans, by=by)
                    if not same:
                        new.append(run.id)
                    for q in q_runs:
                        if run.id not in q.links:
                            q.links.append(run.id)
                            run.links.append(q.id)
                            book.touch_run(q)
                            book.touch_run(run)
                            linked = True
            if new or linked:  # a question already stored with the same answer changes nothing
                _record_size(book)
                book.save(store)
            return {"memorized": new, "usage": usage, "codebook_size": book.size(), "answer_memory": status}

    def consolidate(state: AutoPrunedState) -> dict[str, Any]:
        with rt.writing(rt.scope()) as (store, book):  # concurrent runs (threads, processes) share the codebook
            report = book.consolidate(kg, alias_threshold=opts["alias_threshold"], entity_budget=opts["entity_budget"],
                                      layer2_min_cos=opts["layer2_min_cos"])
            if any(report[k] for k in ("aliases_layer1", "merged_layer2", "edges_dropped", "runs_dropped")):
                _record_size(book)   # nothing merged or dropped: nothing to save (memorize saved its runs)
                book.save(store)
            return {"consolidation": report, "codebook_size": book.size()}

    return {"sync_facts": sync_facts, "encode_question": encode_question, "retrieve_coarse": retrieve_coarse,
            "rerank_fine": rerank_fine, "select_runs": select_runs, "pack_prompt": pack_prompt,
            "answer": answer, "memorize": memorize, "consolidate": consolidate}


def _record_size(book: Codebook) -> None:
    """Append the codebook's size to its history (saved with it): the growth curve, one point per
    save that changed it."""
    book.history.append({"revision": book.revision + 1, **{k: v for k, v in book.size().items()
                                                           if k in ("entities", "relations", "edges", "runs")}})


def _cover_order(book: Codebook, kg: Any, scored: list[tuple[float, int, Any]], query_edges: Sequence[int],
                 weight: float, picks: int) -> list[tuple[float, int, Any]]:
    """The fine ranking re-ordered for coverage of the question's entities (greedy, ``picks``
    places): the next run maximises its fine score + ``weight`` × how much closer it brings each
    query entity to a match (max entity cosine, summed over query entities, beyond what the runs
    already picked reach). A comparison question's second entity gets its passage before a third
    run about the first one."""
    ents = [book.resolve_entity(x) for e in query_edges for x in book.edge_hrt[book.resolve_edge(e)][::2]]
    q_ents = [x for x in dict.fromkeys(ents) if book.ent_text[x] != "?"]
    if not q_ents or len(scored) < 2:
        return scored
    ev = book.entity_vectors(kg)
    qv = ev[q_ents]
    cover = np.zeros((len(scored), len(q_ents)))
    for i, (_, _, run) in enumerate(scored):
        r_ents = list({book.resolve_entity(x) for e in run.edges for x in book.edge_hrt[book.resolve_edge(e)][::2]})
        if r_ents:
            cover[i] = (ev[r_ents] @ qv.T).max(axis=0)
    base = np.array([s for s, _, _ in scored])
    reached = np.zeros(len(q_ents))
    left = list(range(len(scored)))
    order: list[int] = []
    for _ in range(min(picks, len(scored))):
        gain = np.clip(cover[left] - reached, 0.0, None).sum(axis=1)
        j = left[int(np.argmax(base[left] + weight * gain))]   # ties: the better fine rank (first)
        order.append(j)
        reached = np.maximum(reached, cover[j])
        left.remove(j)
    return [scored[i] for i in order + left]


def _run_passages(book: Codebook, run: Any) -> Sequence[str]:
    """The passages a run stands for: its own chunks; a stored question's (it has none) are those
    its stored answers came from."""
    if run.channel != "Q":
        return run.chunks
    return [c for a in run.links if a in book.runs for c in book.runs[a].chunks]


def _fuse_dense(scored: list[tuple[float, int, Any]], dense: Sequence[str],
                passages_of: Callable[[Any], Sequence[str]] = lambda run: run.chunks) -> dict[str, float]:
    """The fine run ranking and the dense passage ranking taken in turns, opened by vector
    search's best passage (:func:`~langgraph_kgmem.ranking.dense_led`): run id → ``1 / place``.

    A passage enters the dense list through its best run (the first in fine order among the runs
    whose best-placed passage it is), so the dense ranking lifts one run per passage and a
    passage's other runs keep their fine turn alone. The fine stage scores fact lines, blind to
    how near a passage is to the question, so vector search's best passage opens the ranking (its
    best run), then the fine ranking's turn, then vector search's next, and so on: places 1 and 2
    are the runs of vector search's top two passages, as in ReMindRAG's evidence. A run none of
    whose passages (``passages_of(run)``) vector search ranks within ``dense`` (the fusion depth)
    takes no turn and is left out: it follows the fused runs, in fine order. A stored question
    (channel ``Q``) takes no fine turn: its passages are those its stored answers came from, and it
    competes on vector search's turns through them — questions on one topic read alike, so a
    question's likeness to a stored one says little about whether that one's answer serves it."""
    at = {c: i for i, c in enumerate(dense)}.get
    reps: dict[str, tuple[int, str]] = {}       # passage → (its dense position, its best run)
    own: list[str] = []                          # the fine ranking less the far runs and the questions
    for _, _, run in scored:
        placed = [p for p in map(at, passages_of(run)) if p is not None]
        if placed:
            p = min(placed)
            reps.setdefault(dense[p], (p, run.id))
            if run.channel != "Q":
                own.append(run.id)
    by_dense = [rid for _, rid in sorted(reps.values())]
    return dict(dense_led(own, by_dense))


def _unique_runs(book: Codebook, kg: Any, run_ids: list[str], threshold: float) -> list[str]:
    """One representative per cluster of runs (greedy in rank order on whole-run vectors)."""
    reps: list[np.ndarray] = []
    out = []
    for rid in run_ids:
        v = book.line_vectors(kg, book.runs[rid].edges).mean(axis=0)
        v = v / (np.linalg.norm(v) or 1.0)
        if any(float(v @ r) >= threshold for r in reps):
            continue
        reps.append(v)
        out.append(rid)
    return out


def _reused(book: Codebook, selected: Mapping[str, list[str]], candidates: list[dict[str, Any]]) -> list[str]:
    """Stored runs this answer reuses: selected answer runs, the retrieved question runs linked to
    them (the keys that matched), and selected question runs."""
    answers = set(selected.get("A", []))
    keys = [c["run"] for c in candidates if c["channel"] == "Q" and c["run"] in book.runs
            and answers & set(book.runs[c["run"]].links)]
    return list(dict.fromkeys(keys + list(selected.get("Q", [])) + list(selected.get("A", []))))


def _evidence_passages(kg: Any, evidence: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(chunk id, text)`` of the KG passages the evidence came from, in evidence order: what an
    answer may cite (a passage no longer in the KG grounds nothing)."""
    out: list[tuple[str, str]] = []
    for cid in dict.fromkeys(c for e in evidence for c in e.get("chunks", [])):
        node = kg.node(cid)
        if node is not None and node.text:
            out.append((cid, node.text))
    return out


def _shown_edges(book: Codebook, kg: Any, selected: Mapping[str, list[str]], query_edges: Sequence[int],
                 per_run: int | None) -> dict[str, list[int]]:
    """The edges of each selected run that go into the prompt: all of them (``per_run=None``), or
    for fact runs the ``per_run`` edges whose lines are closest to a question line (in run order;
    ties by position). Answer and question runs are stored results, always shown whole."""
    shown = {r: list(book.runs[r].edges) for rs in selected.values() for r in rs}
    if per_run is None or not query_edges:
        return shown
    q = book.line_vectors(kg, query_edges)
    for r in selected.get("F", []):
        edges = shown[r]
        if len(edges) <= per_run:
            continue
        rel = (book.line_vectors(kg, edges) @ q.T).max(axis=1)
        keep = np.lexsort((np.arange(len(edges)), -rel))[:per_run]
        shown[r] = [edges[i] for i in sorted(keep.tolist())]
    return shown


def split_sentences(text: str) -> list[tuple[int, str]]:
    """``(start offset, sentence)`` of a passage: cut after ``.!?`` before a capital, digit or quote,
    except after an initial ("written by K. A. Applegate") or a bare list marker ("2. This species")."""
    out, start = [], 0
    for m in _SENTENCE.finditer(text):
        end = m.start(1)   # not a sentence end after an initial or a marker: the piece runs on
        if (_INITIAL.search(text[max(start, end - 3):end])
                or end - start <= 8 and _MARKER.fullmatch(text[start:end].strip())):
            continue
        out.append((start, text[start:end].strip()))
        start = m.end()
    out.append((start, text[start:].strip()))
    return [(a, t) for a, t in out if t]


def _passage_sentences(kg: Any, cache: dict[str, list[tuple[int, str]]], cid: str) -> list[tuple[int, str]]:
    """A passage's sentences (:func:`split_sentences`), split once and kept in ``cache``."""
    if cid not in cache:
        node = kg.node(cid)
        cache[cid] = split_sentences(node.text) if node is not None else []
    return cache[cid]


def _edge_sentence(sentences: Sequence[tuple[int, str]], head: str, tail: str) -> int | None:
    """Index of the sentence an edge came from: the first holding both its symbols, else the first
    holding its subject, else its object (case-insensitive); None when neither occurs."""
    h, t = head.lower(), tail.lower()
    lows = [x.lower() for _, x in sentences]
    for test in ((lambda x: h in x and t in x), (lambda x: h in x), (lambda x: t in x)):
        for i, x in enumerate(lows):
            if test(x):
                return i
    return None


def _fact_sentences(book: Codebook, kg: Any, selected_f: Sequence[str], shown: Mapping[str, list[int]],
                    cache: dict[str, list[tuple[int, str]]]) -> list[dict[str, Any]]:
    """The source sentences of the shown edges of fact runs, one group per chunk in order of its best
    run (best first), sentences in text order: ``[{"chunk", "title", "sentences": [...], "runs"}]``."""
    groups: dict[str, dict[str, Any]] = {}
    for rid in selected_f:
        run = book.runs[rid]
        for cid in run.chunks[:1]:  # a fact run comes from one chunk (merged duplicates: the first)
            sents = _passage_sentences(kg, cache, cid)
            if not sents:
                continue
            g = groups.setdefault(cid, {"chunk": cid, "title": (kg.node(cid).attrs.get("title") or ""),
                                        "picked": set(), "runs": []})
            g["runs"].append(rid)
            for e in shown.get(rid, run.edges):
                h, _, t = book.triple(e)
                i = _edge_sentence(sents, h, t)
                if i is not None:
                    g["picked"].add(i)
    out = []
    for g in groups.values():
        if g["picked"]:
            sents = cache[g["chunk"]]
            out.append({"chunk": g["chunk"], "title": g["title"], "runs": g["runs"],
                        "sentences": [sents[i][1] for i in sorted(g["picked"])]})
    return out


SENTENCE_RANKINGS: tuple[str, ...] = ("relevance", "question", "edges", "passages")
# The "relevance" ranking's score of a sentence: its question cosine plus these, each weighed —
# "passage": its passage's cosine with the question (vector search's passage score), "terms": the
# share of the question's content words it holds, each weighed by its rarity among the candidate
# sentences (IDF), "lead": 1 for a document's first sentence (in encyclopedic text the one that says
# who or what the subject is). Chosen on development sets only (HotpotQA train-100 and MuSiQue
# train-100, answer in prompt at 210 and 250 tokens: README), never on the sets the figures report.
RELEVANCE_WEIGHTS: dict[str, float] = {"passage": 2.0, "terms": 0.5, "lead": 0.05}
_PARENS = re.compile(r"\s*\([^)]*\)\s*$")


def _title_pattern(title: str) -> re.Pattern[str] | None:
    """The passage title as a whole-word, case-insensitive pattern, its trailing disambiguation
    ("Kiss and Tell (1945 film)" → "Kiss and Tell") dropped; None for a title under 4 characters
    (too short to name the passage's subject reliably)."""
    name = _PARENS.sub("", title or "").strip()
    if len(name) < 4:
        return None
    return re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.I)


def _term_overlap(question: str, words: Sequence[set[str]]) -> np.ndarray:
    """Per sentence (its content words), the share of the question's content words it holds, each
    word weighed by its inverse frequency among these sentences (a word every candidate holds, like
    the shared subject, says little)."""
    q = content_words(question)
    if not q or not words:
        return np.zeros(len(words))
    n = len(words)
    idf = {w: math.log((n + 1) / (sum(w in s for s in words) + 0.5)) for w in q}
    total = sum(idf.values()) or 1.0
    return np.array([sum(idf[w] for w in q & s) / total for s in words])


def _ranked_sentences(book: Codebook, kg: Any, question: str, selected_f: Sequence[str], shown: Mapping[str, list[int]],
                      cache: dict[str, list[tuple[int, str]]], vectors: dict[str, np.ndarray], budget: int,
                      rankings: Sequence[str] = ("relevance",), bridges: bool = True, dense_k: int = 0,
                      words: dict[str, list[set[str]]] | None = None,
                      weights: Mapping[str, float] | None = None,
                      passage_scores: Callable[[], tuple[list[str], np.ndarray]] | None = None
                      ) -> list[dict[str, Any]]:
    """The facts block filled sentence by sentence up to ``budget`` tokens (``sentence_budget``).

    Candidates: every sentence of the passages the selected fact runs come from, then of vector
    search's top ``dense_k`` passages not among them. Each is ranked by reciprocal-rank fusion of
    up to four orders (``rankings``): ``"relevance"`` — the ``"question"`` cosine plus ``weights``
    (default :data:`RELEVANCE_WEIGHTS`) × (its passage's cosine with the question, the IDF-weighted
    share of the question's content words it holds, 1 for a document's first sentence);
    ``"question"`` — cosine of the sentence, read with its passage title in front (so "She was born
    ..." is about the title), with the question; ``"edges"`` — the sentences the runs' shown edges
    came from, in run order (what the codebook matched); ``"passages"`` — passage order (best run first), sentences in text order
    (a passage's defining sentence comes first). With ``bridges``, a sentence taken that names
    another candidate passage's title brings that passage's best sentence right after it. The
    order is taken greedily: a sentence is added when it fits the budget (its tokens plus its passage title's, once), a repeated sentence
    never; the best sentence is kept even alone over the budget. Groups as :func:`_fact_sentences`
    (passages in order of their best run, sentences in text order)."""
    from langgraph_kgmem.fast_embeddings import block_cosines

    chunks: list[str] = []
    edge_order: list[tuple[str, int]] = []
    for rid in selected_f:
        run = book.runs[rid]
        for cid in run.chunks[:1]:
            if not _passage_sentences(kg, cache, cid):
                continue
            if cid not in chunks:
                chunks.append(cid)
            for e in (shown.get(rid, run.edges) if "edges" in rankings else ()):
                h, _, t = book.triple(e)
                i = _edge_sentence(cache[cid], h, t)
                if i is not None:
                    edge_order.append((cid, i))
    if dense_k or "relevance" in rankings:   # vector search's passage scores (the fine stage's, when given)
        ids, passage_cos = (passage_scores or partial(kg.similarity_scores, question, ("chunk",)))()
        for cid in dense_passages(kg, question, dense_k, (ids, passage_cos)) if dense_k else ():
            if _passage_sentences(kg, cache, cid) and cid not in chunks:
                chunks.append(cid)
    if not chunks:
        return []
    titles = {c: ((n := kg.node(c)) is not None and n.attrs.get("title")) or "" for c in chunks}
    todo = [c for c in chunks if c not in vectors]
    if todo:  # one batch for the passages no earlier question read
        texts = [f"{titles[c]}: {x}" if titles[c] else x for c in todo for _, x in cache[c]]
        mat = kg.embed_texts(texts)
        mat = mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
        at = 0
        for c in todo:
            vectors[c] = mat[at:at + len(cache[c])]
            at += len(cache[c])
    cands = [(c, i) for c in chunks for i in range(len(cache[c]))]
    orders: list[list[tuple[str, int]]] = []
    if "question" in rankings or "relevance" in rankings:
        q = kg.embed_query(question)
        raw = np.concatenate([vectors[c] for c in chunks]) @ q
        cos = block_cosines(kg.embeddings, q, raw, [False] * len(raw))
    if "relevance" in rankings:
        words = {} if words is None else words
        for c in chunks:
            if c not in words:
                words[c] = [content_words(x) for _, x in cache[c]]
        want = set(chunks)
        of_passage = {c: float(v) for c, v in zip(ids, passage_cos.tolist()) if c in want}
        lead = {c: (n := kg.node(c)) is not None and not n.attrs.get("index") for c in chunks}
        w = {**RELEVANCE_WEIGHTS, **(weights or {})}
        score = (cos + w["passage"] * np.array([of_passage.get(c, 0.0) for c, _ in cands])
                 + w["terms"] * _term_overlap(question, [words[c][i] for c, i in cands])
                 + w["lead"] * np.array([float(i == 0 and lead[c]) for c, i in cands]))
        orders.append([cands[j] for j in np.argsort(-score, kind="stable").tolist()])
    if "question" in rankings:
        orders.append([cands[j] for j in np.argsort(-cos, kind="stable").tolist()])
    if "edges" in rankings and edge_order:
        orders.append(list(dict.fromkeys(edge_order)))
    if "passages" in rankings or not orders:
        orders.append(cands)
    ranked = [x for x, _ in reciprocal_rank_fusion(orders)]
    # bridges: a sentence naming another candidate passage's subject (its title) brings that
    # passage's best sentence next — the second hop of a bridge question ("... starring Shirley
    # Temple" → the Shirley Temple passage's sentence closest to the question)
    names = {c: _title_pattern(titles[c]) for c in chunks} if bridges else {}
    best: dict[str, tuple[str, int]] = {}
    for c, i in ranked:
        best.setdefault(c, (c, i))
    picked: dict[str, set[int]] = {}
    seen: set[str] = set()
    bridged: set[str] = set()
    pending: list[tuple[str, int]] = []
    used = 0
    queue = iter(ranked)
    while True:
        nxt = pending.pop(0) if pending else next(queue, None)
        if nxt is None:
            break
        c, i = nxt
        text = cache[c][i][1]
        key = " ".join(text.lower().split())
        if key in seen:
            continue
        cost = count_tokens(text) + 1 + (0 if c in picked else count_tokens(f"[{titles[c]}]") + 1)
        if picked and used + cost > budget:
            continue
        seen.add(key)
        picked.setdefault(c, set()).add(i)
        used += cost
        bridged.add(c)
        hops = [b for b in chunks if b not in bridged and names.get(b) is not None and names[b].search(text)]
        bridged.update(hops)
        pending[:0] = [best[b] for b in hops if b in best]
    runs_of: dict[str, list[str]] = {}
    for rid in selected_f:
        for cid in book.runs[rid].chunks[:1]:
            runs_of.setdefault(cid, []).append(rid)
    return [{"chunk": c, "title": titles[c], "runs": runs_of.get(c, []),
             "sentences": [cache[c][i][1] for i in sorted(picked[c])]} for c in chunks if c in picked]


def _sentence_block(groups: Sequence[dict[str, Any]]) -> str:
    return "\n".join(f"[{g['title']}] " + " ".join(g["sentences"]) if g["title"] else " ".join(g["sentences"])
                     for g in groups)


def _evidence(book: Codebook, kg: Any, selected: Mapping[str, list[str]], scores: Mapping[str, float],
              shown: Mapping[str, list[int]]) -> list[dict[str, Any]]:
    """The shown triples of the selected fact and answer runs as evidence items (best run first)."""
    items: dict[str, dict[str, Any]] = {}
    ranked = sorted(((scores.get(r, 0.0), book.runs[r].seq, c, r) for c in ("F", "A") for r in selected.get(c, [])),
                    key=lambda x: (-x[0], x[1]))
    for score, _, c, rid in ranked:
        run = book.runs[rid]
        title = ""
        for cid in run.chunks:
            node = kg.node(cid)
            if node is not None and node.attrs.get("title"):
                title = node.attrs["title"]
                break
        for e in shown.get(rid, run.edges):
            e = book.resolve_edge(e)
            key = book.edge_kg[e] or f"apr-m{e}"
            if key in items:
                continue
            item = {"id": key, "kind": "fact", "text": book.line(e), "run": rid, "channel": c,
                    "chunks": list(run.chunks), "score": round(float(score), 6)}
            if title:
                item["title"] = title
            items[key] = item
    return list(items.values())


def sync_codebook(kg: Any, store: Any, *, tau_run: float = 0.7,
                  phrase_facts: Literal["uncovered", "always", "never"] = "uncovered",
                  alias_threshold: float = ALIAS_THRESHOLD, entity_budget: int | None = None,
                  layer2_min_cos: float = LAYER2_FLOOR, scope: Sequence[str] = ()) -> dict[str, int]:
    """Index every KG document not yet in the codebook (of tenant ``scope``: the labels a graph's
    ``memory_scope`` fills in) and consolidate, outside a graph run (e.g. right after ingestion,
    so the first question does not pay for it). Returns the codebook size."""
    book = Codebook.load(store, kg.name, tuple(scope))
    book.sync_facts(kg, phrase_facts=phrase_facts, segment_opts={"tau": tau_run})
    book.consolidate(kg, alias_threshold=alias_threshold, entity_budget=entity_budget, layer2_min_cos=layer2_min_cos)
    book.save(store)
    return book.size()


# ------------------------------------------------------------------------------------- routers


def _after_memorize(state: AutoPrunedState) -> Literal["consolidate", "__end__"]:
    return "consolidate" if state.get("memorized") else END  # only new runs bring new symbols


# ------------------------------------------------------------------------------------- factory


def create_autopruned_graph(
    kg: Any,
    *,
    model: Any = None,
    store: Any = None,
    retry_policy: RetryPolicy | None = None,
    selection_policy: SelectionPolicy | None = None,
    coarse_k: int = 200,
    fine_m: int = 20,
    tau_run: float = 0.7,
    w_ent: float = 1.0,
    w_rel: float = 0.3,
    fine: FineScoring | None = None,
    unique_threshold: float = 0.9,
    encodings: Sequence[Encoding] = ENCODINGS,
    max_prompt_tokens: int | None = None,
    edges_per_run: int | None = None,
    show: Show = "triples",
    cover_weight: float = 0.0,
    sentence_budget: int | None = None,
    sentence_rankings: Sequence[str] = ("relevance",),
    sentence_bridges: bool = True,
    sentence_dense: int = 5,
    relevance_weights: Mapping[str, float] | None = None,
    extraction: Literal["llm", "offline"] = "llm",
    phrase_facts: Literal["uncovered", "always", "never"] = "uncovered",
    memorize: bool = True,
    memorize_unanswered: bool = False,
    replay: bool = True,
    memory_scope: Sequence[str] | None = None,
    consolidate: bool = True,
    alias_threshold: float = ALIAS_THRESHOLD,
    entity_budget: int | None = None,
    layer2_min_cos: float = LAYER2_FLOOR,
    dense_fusion: bool = True,
) -> StateGraph:
    """Build the AutoPrunedRetriever graph (uncompiled) over ``kg``.

    Args:
        kg: the :class:`~langgraph_kgmem.KnowledgeGraph`; its relation edges become the fact runs.
        model: a LangChain chat model, ``None`` ($KGMEM_MODEL) or ``"offline"`` (no LLM: offline
            triple parser and extractive answers); a run may override it with
            ``app.invoke(..., context={"model": m})``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: the LangGraph ``BaseStore`` for the codebook; default: the store the graph is compiled with.
        selection_policy: ``fn(channel, candidates, features) -> "all" | "unique" | "none"`` per
            channel ("F" facts, "Q" earlier questions, "A" known answers); default
            :func:`default_selection_policy`.
        coarse_k / fine_m: runs kept by the coarse and the fine stage.
        tau_run: run segmentation threshold (cosine to the run centroid + continuity bonus).
        w_ent / w_rel: coarse weights of the entity and relation max-cosines.
        fine: :class:`FineScoring` weights and thresholds.
        unique_threshold: whole-run cosine at which two runs count as one cluster ("unique").
        encodings: the prompt encodings to choose from (cheapest in tokens wins).
        max_prompt_tokens: drop the weakest runs until the packed codebook fits (None: no limit).
        edges_per_run: prune each selected fact run to its ``k`` edges closest to a question line
            before packing (None, the paper: whole runs). ``edges_per_run=1`` with ``fine_m=10``
            is the compact setting measured in the README (about 7× fewer evidence tokens than
            top-5 passages, gold-passage coverage 4–8 points lower, and the answer itself in the
            prompt far less often). Stored answer and question runs are always shown whole.
        show: how fact runs are shown. ``"triples"`` (the paper): their (pruned) edges in the
            cheapest encoding. ``"sentences"``: the passage sentences their shown edges came from,
            one line per passage chunk with its title (stored Q/A runs stay word triples) — a
            triple often drops the words that answer, the sentence keeps them (README: the
            tokens-vs-answer curve).
        cover_weight: 0 (the paper) keeps the fine ranking; above 0 the top runs are re-ordered
            greedily for coverage of the question's entities (fine score + ``cover_weight`` × the
            new entity matches a run adds), so each entity of a comparison or bridge question gets
            its own run before a second run on the same one.
        sentence_budget: with ``show="sentences"``, fill the facts block with the best sentences of
            the selected runs' passages up to this many tokens, instead of the shown edges' own
            sentences: ranked by fusion of ``sentence_rankings`` — ``"relevance"`` (default, the
            best measured: the question cosine plus its passage's cosine with the question, the
            rarity-weighted share of the question's words it holds and a small bonus for a
            document's first sentence, :data:`RELEVANCE_WEIGHTS`), ``"question"`` (cosine of the
            titled sentence with the question alone), ``"edges"`` (the sentences the shown edges
            came from, in run order) and ``"passages"`` (passage rank, then text order) — and
            taken greedily while they fit, duplicates dropped. ``sentence_dense`` (default 5):
            vector search's top passages not among the runs' join the candidates (0: the runs'
            passages only). ``relevance_weights``: any of the ``"passage"``, ``"terms"`` and
            ``"lead"`` weights replaced (None: :data:`RELEVANCE_WEIGHTS`; 0 drops a term).
            :data:`SENTENCES_PRESET` is the measured half-token setting. ``sentence_bridges`` (default True): a sentence taken that
            names another candidate passage's title (its subject) brings that passage's sentence
            closest to the question right after it — the second hop of a bridge question. The passages are the selected runs' (with ``dense_fusion``, the fused
            ranking's), so ``fine_m`` decides how many passages compete. None (default): off.
        dense_fusion: ``True`` (default): the fact runs of the passages closest to the question
            by dense cosine (the top ``fine_m``) join the fine stage's candidates, and the runs are
            ordered by taking turns (:func:`~langgraph_kgmem.ranking.dense_led`) between the fine
            ranking and the dense passage ranking (read to the fusion depth, 120 passages), a
            passage bringing its best run, after vector search's best passage (the fine stage is
            blind to passage similarity); a fact run whose passages vector search ranks beyond
            that depth takes no turn and follows, and a stored question competes only through the
            passages its stored answers came from, on vector search's turns. So the selected runs'
            passages hold vector search's top passages and the fine stage's best near ones, never
            one far from the question ahead of them. Evidence ``score`` is then ``1 / place``. No
            LLM call; one passage similarity per question and the seeded runs' fine scores.
            ``False``: the fine ranking alone (the paper).
        extraction: "llm" extracts question/answer triples with the model; "offline" uses the
            rule parser even with a model (one LLM call per question: the answer).
        phrase_facts: "uncovered" (default) parses chunks without any KG relation edge with the
            phrase parser; "always" adds phrase triples to every chunk's facts (better recall over
            lower-case prose that an entity extractor misses, more tokens); "never".
        memorize / memorize_unanswered: store Q/A runs (not for "no answer" unless asked). An
            answer run is stored only when the answer is grounded (every content word of it in the
            passages it cites); for an ungrounded one the question run alone is stored.
        replay: give a stored answer again, without an LLM call, to the same question
            (:func:`~langgraph_kgmem.graphs.autopruned.codebook.question_key`: equal after NFKC, casefolding
            and punctuation/spacing normalisation) asked of the same decider, while each passage
            it cites is still in the KG and holds its words; ``replayed_answer`` then names the
            answer run, the question run, the cited passages and the decider. False: always answer anew.
        memory_scope: tenant labels of the codebook's store namespace, filled per run from
            ``config["configurable"]`` (``("{user_id}",)``: each user a codebook of their own, so
            no question, answer or run of one user reaches another; the KG's facts are indexed
            into each, once). None (default): every caller of this graph shares one codebook.
        consolidate / alias_threshold / entity_budget / layer2_min_cos: see
            :meth:`~langgraph_kgmem.graphs.autopruned.codebook.Codebook.consolidate`. ``entity_budget`` is a
            ceiling, not a target: layer 2 merges only pairs at cosine ≥ ``layer2_min_cos`` (the
            measured floor :data:`~langgraph_kgmem.graphs.autopruned.codebook.LAYER2_FLOOR`), so a codebook of
            unrelated entities stays over its budget rather than merge them.

    Returns:
        An uncompiled ``StateGraph``; output keys ``answer``, ``evidence``, ``usage``, ``method``,
        ``packed_prompt``, ``encoding``, ``prompt_tokens_packed``, ``selected_runs``, ``reused``,
        ``replayed_answer``, ``answer_by``, ``answer_memory``, ``codebook_size`` and more (see
        :class:`AutoPrunedState`).

    Raises:
        KgmemInputError: an option is out of range (the message names it).

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> from langgraph.store.memory import InMemoryStore
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland."}], model="offline")
        >>> app = create_autopruned_graph(kg, model="offline").compile(store=InMemoryStore())
        >>> out = app.invoke({"question": "What is the capital of Poland?"})
        >>> out["method"], out["encoding"] in ("words", "ids", "matrix")
        ('autopruned', True)
    """
    # the keyword arguments as given, before any is normalised below
    build_options = {k: v for k, v in locals().items() if k in AutoprunedOptions.model_fields}
    check_int("coarse_k", coarse_k, 1)
    check_int("fine_m", fine_m, 1)
    check_number("tau_run", tau_run, 0.0, 2.0, low_open=True)
    check_number("alias_threshold", alias_threshold, 0.0, 1.0, low_open=True)
    check_number("unique_threshold", unique_threshold, -1.0, 1.0)
    check_number("layer2_min_cos", layer2_min_cos, -1.0, 1.0)
    check_number("w_ent", w_ent, 0.0)
    check_number("cover_weight", cover_weight, 0.0)
    check_number("w_rel", w_rel, 0.0)
    check_int("entity_budget", entity_budget, 1, optional=True)
    check_int("max_prompt_tokens", max_prompt_tokens, 1, optional=True)
    check_int("edges_per_run", edges_per_run, 1, optional=True)
    check_int("sentence_budget", sentence_budget, 1, optional=True)
    check_int("sentence_dense", sentence_dense, 0)
    if relevance_weights is not None and not isinstance(relevance_weights, Mapping):
        raise KgmemInputError(f"relevance_weights must be a mapping such as {RELEVANCE_WEIGHTS}, "
                              f"got {type(relevance_weights).__name__}")
    weights = dict(relevance_weights or {})
    if set(weights) - set(RELEVANCE_WEIGHTS):
        raise KgmemInputError(f"relevance_weights keys must be among {sorted(RELEVANCE_WEIGHTS)}, got {sorted(weights)}")
    for key, value in weights.items():
        check_number(f"relevance_weights[{key!r}]", value, 0.0)
    if sentence_budget is not None and show != "sentences":
        raise KgmemInputError("sentence_budget needs show='sentences' (it fills the facts block with sentences)")
    bad_rank = [r for r in sentence_rankings if r not in SENTENCE_RANKINGS]
    if bad_rank or not sentence_rankings:
        raise KgmemInputError(f"sentence_rankings must be a non-empty subset of {SENTENCE_RANKINGS}, "
                              f"got {list(sentence_rankings)!r}")
    bad = [e for e in encodings if e not in ENCODINGS]
    if bad or not encodings:
        raise KgmemInputError(f"encodings must be a non-empty subset of {ENCODINGS}, got {list(encodings)!r}")
    if phrase_facts not in ("uncovered", "always", "never"):
        raise KgmemInputError(f"phrase_facts must be 'uncovered', 'always' or 'never', got {phrase_facts!r}")
    if show not in ("triples", "sentences"):
        raise KgmemInputError(f"show must be 'triples' or 'sentences', got {show!r}")
    if extraction not in ("llm", "offline"):
        raise KgmemInputError(f"extraction must be 'llm' or 'offline', got {extraction!r}")
    if selection_policy is not None and not callable(selection_policy):
        raise KgmemInputError(
            f"selection_policy must be a function (channel, candidates, features) -> 'all'|'unique'|'none', "
            f"got {type(selection_policy).__name__}")
    if memory_scope is not None and (isinstance(memory_scope, str)
                                     or not all(isinstance(x, str) for x in memory_scope)):
        raise KgmemInputError(f"memory_scope must be a tuple of labels such as ('{{user_id}}',), got {memory_scope!r}")
    if fine is not None and not isinstance(fine, FineScoring):
        raise KgmemInputError(f"fine must be a FineScoring, got {type(fine).__name__}")
    opts = {"selection_policy": selection_policy or default_selection_policy, "coarse_k": coarse_k,
            "fine_m": fine_m, "tau_run": tau_run, "w_ent": w_ent, "w_rel": w_rel, "fine": fine or FineScoring(),
            "unique_threshold": unique_threshold, "encodings": tuple(encodings),
            "max_prompt_tokens": max_prompt_tokens, "edges_per_run": edges_per_run, "show": show, "cover_weight": cover_weight,
            "sentence_budget": sentence_budget, "sentence_rankings": tuple(sentence_rankings),
            "sentence_bridges": bool(sentence_bridges), "sentence_dense": sentence_dense,
            "relevance_weights": weights, "extraction": extraction, "phrase_facts": phrase_facts,
            "memorize": memorize, "memorize_unanswered": memorize_unanswered, "replay": bool(replay),
            "memory_scope": tuple(memory_scope) if memory_scope else None, "alias_threshold": alias_threshold,
            "entity_budget": entity_budget, "layer2_min_cos": layer2_min_cos, "dense_fusion": dense_fusion}
    nodes = _make_nodes(_Runtime(kg, method_model(model, retry_policy), store, opts,
                                 AutoprunedOptions.build(**build_options)))
    builder = StateGraph(AutoPrunedState, input_schema=InputState, context_schema=AutoprunedOptions)
    order = ["sync_facts", "encode_question", "retrieve_coarse", "rerank_fine", "select_runs", "pack_prompt",
             "answer", "memorize"]
    for name in order + (["consolidate"] if consolidate else []):
        builder.add_node(name, nodes[name])
    builder.add_edge(START, order[0])
    for a, b in zip(order, order[1:]):
        builder.add_edge(a, b)
    if consolidate:
        builder.add_conditional_edges("memorize", _after_memorize, ["consolidate", END])
        builder.add_edge("consolidate", END)
    else:
        builder.add_edge("memorize", END)
    return builder


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
    output_keys=("answer", "evidence", "usage", "method", "model", "encoding", "packed_prompt", "reused",
                 "codebook_size"),
)


__all__ = ["SPEC", "create_autopruned_graph", "SENTENCES_PRESET", "default_selection_policy", "sync_codebook", "answer_prompt", "encode_knowledge", "decode_knowledge",
           "cheapest_encoding", "fine_score", "fine_scores", "stacked_fine_scores", "FineScoring", "AutoPrunedState", "AutoPrunedContext", "TextTriple", "TextTriples"]
