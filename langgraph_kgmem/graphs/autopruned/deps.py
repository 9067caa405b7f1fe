"""What AutoPrunedRetriever's nodes share for the graph's lifetime: :class:`AutoprunedDeps`, the
KG, the build's model, store and options, and the caches a run reads — the codebook per store
and tenant scope (reloaded when another writer saved a newer revision), passage scores and
sentence vectors."""

from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import numpy as np

from langgraph_kgmem.graphs.autopruned.codebook import MAX_ENTITY_CHARS, Codebook, Run, grounded_in, phrase_triples
from langgraph_kgmem.graphs.autopruned.options import AutoprunedOptions
from langgraph_kgmem.graphs.autopruned import prompts
from langgraph_kgmem.graphs.autopruned.schemas import QUESTION_WORDS, TextTriple, TextTriples
from langgraph_kgmem.graphs.common import fence
from langgraph_kgmem.ingest.extract import OfflineExtractor
from langgraph_kgmem.llm import decide, is_offline, model_label
from langgraph_kgmem.memory import memory_scope as scope_of
from langgraph_kgmem.memory import resolve_store
from langgraph_kgmem.memory.locks import memory_lock
from langgraph_kgmem.memory.provenance import codebook_lock_key, holds


EXTRACTION_MEMO = 1024   # readings ``AutoprunedDeps.extract(memo=True)`` keeps (oldest dropped first)


def offline_triples(text: str) -> TextTriples:
    """The offline parser's triples of a question or answer (what ``extraction="offline"`` reads,
    and the fallback of the LLM's reading)."""
    trips = [(t.subject, t.relation, t.object) for t in OfflineExtractor().extract(text).triples]
    trips += phrase_triples(text)
    # the offline parser's own triples: the codebook skips any over-long symbol itself
    return TextTriples.model_construct(triples=[TextTriple.model_construct(subject=h, relation=r, object=t)
                                                for h, r, t in dict.fromkeys(trips)])


class AutoprunedDeps:
    """What the nodes share: the KG, the build's model, store and options, and the codebook cached
    per store and tenant scope (reloaded when another writer saved a newer revision). Bound to
    the nodes with ``functools.partial``; a run's context may replace the model and the per-run
    options, never what this holds."""

    def __init__(self, kg: Any, model: Any, store: Any, options: AutoprunedOptions | None = None) -> None:
        self.kg = kg
        self.model = model      # the build's model, resolved once
        self.store = store      # the factory's store; None: the compiled graph's
        self.options = options or AutoprunedOptions()   # the build's options (the run's context on top)
        # fixed at build: the tenant labels of the codebook's namespace
        self.memory_scope = tuple(self.options.memory_scope) if self.options.memory_scope else None
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
        # reuse: the model's triples of a text it read before (``extract(memo=True)``)
        self._extractions: dict[tuple[Any, ...], list[tuple[str, ...]]] = {}

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

    def scope(self) -> tuple[str, ...]:
        """The running graph's tenant scope (``memory_scope`` filled from its config; () without)."""
        return scope_of(self.memory_scope)

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

    def warm(self, scope: tuple[str, ...] = ()) -> None:
        """Load the codebook of ``scope``, check that it indexes the KG as it is now, and build what
        every question reads whole (its run index, entity and relation tables), as the first
        question would."""
        with self.lock:
            store, book = self.book(scope)
            if book.in_sync(self.kg):     # else the first question indexes what is new (a write)
                self.mark_synced(store, scope)
            book.run_index(self.kg)
            book.entity_vectors(self.kg)
            book.relation_vectors(self.kg)
        self.kg.prefetch_scores(("chunk",))   # what its passage ranking scores against

    def synced(self, store: Any, scope: tuple[str, ...]) -> bool:
        """Whether the codebook of ``store`` and ``scope`` this process holds indexes the KG's
        current version (reloading the codebook forgets it)."""
        return self._synced.get((id(store), scope)) == self.kg.version

    def mark_synced(self, store: Any, scope: tuple[str, ...]) -> None:
        """Record that the codebook of ``store`` and ``scope`` this process holds indexes the KG's current version."""
        self._synced[(id(store), scope)] = self.kg.version

    def lock_key(self, scope: tuple[str, ...] = ()) -> str:
        """The memory-lock key of the codebook of tenant ``scope`` of this KG (``"codebook:<kg>/<scope...>"``)."""
        return codebook_lock_key(self.kg.name, scope)

    @contextmanager
    def writing(self, scope: tuple[str, ...] = ()) -> Iterator[tuple[Any, Codebook]]:
        """The codebook to change and save, held across threads and processes: read after the
        lock is taken (so another process's newer save is loaded first), saved before it is
        released, so no writer overwrites runs it never saw."""
        store = resolve_store(self.store)
        with self.lock, memory_lock(store, self.lock_key(scope)):
            try:
                yield self.book(scope)
            except BaseException:
                # the codebook in hand holds what this run changed and the store did not take:
                # kept, it would be saved again (and fail again) by every later run of this
                # compiled graph, so the next run reloads the stored one instead
                self.forget(store, scope)
                raise

    def forget(self, store: Any, scope: tuple[str, ...] = ()) -> None:
        """Drop the codebook of ``store`` and ``scope`` this process holds (the next run reloads it)."""
        self._books.pop((id(store), scope), None)
        self._synced.pop((id(store), scope), None)

    def servable(self, book: Codebook, run: Run) -> bool:
        """Whether a stored answer run may be served (replayed, or shown as a known answer): it
        was stored under the grounding rule (it names its decider) and each passage it cites is
        still in the KG and together they still hold every content word of it
        (:func:`~langgraph_kgmem.graphs.autopruned.codebook.grounded_in`). Kept until the KG changes."""
        if run.channel != "A" or not run.by or not holds(self.kg, run.provenance):
            return False   # the read-time provenance check: it rests on a version that is gone
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

    def extract(self, text: str, kind: str, model: Any, extraction: str = "llm",
                template: str | None = None, *, memo: bool = False) -> tuple[list[list[str]], dict[str, Any]]:
        """Triples of a question / answer: the LLM decision (``extraction="llm"`` and a model), or
        the offline parser. ``template``: the graph's ``triples`` prompt (default: ``PROMPTS["triples"]``
        as it is now). ``memo`` (the graph's ``reuse``): the same text, kind, model and prompt read
        by the model before in this graph's lifetime, for the same tenant, gives the triples it gave
        then, without a call
        (at most :data:`EXTRACTION_MEMO` readings kept; a fallback's triples are never kept)."""
        use_llm = extraction == "llm" and not is_offline(model)
        prompt = (template or prompts.PROMPTS["triples"]).format(kind=kind, text=fence(text, inline=True))
        key = (self.scope(), kind, model_label(model), prompt)   # per tenant: a hit says nothing of others
        if use_llm and memo and key in self._extractions:
            return [list(t) for t in self._extractions[key]], {}
        decision, usage = decide(model if use_llm else "offline", TextTriples, prompt,
                                 step=f"extract_{kind}_triples",
                                 offline=lambda: offline_triples(text), context={"text": text, "kind": kind})
        trips = [[t.subject.strip(), t.relation.strip(), t.object.strip()] for t in decision.triples
                 if t.subject.strip() and t.object.strip()]
        if use_llm and memo and not usage.get("fallbacks"):
            with self.lock:
                if len(self._extractions) >= EXTRACTION_MEMO:
                    self._extractions.pop(next(iter(self._extractions)))
                self._extractions[key] = [tuple(t) for t in trips]
        return trips, usage

    @staticmethod
    def phrase_nodes(text: str) -> list[list[str]]:
        """For a text too short for triples (one name, one phrase): ``[phrase, "is", "?"]``."""
        words = [w for w in re.findall(r"[\w'’\-]+", text) if w.lower() not in QUESTION_WORDS]
        return [[(" ".join(words[:6]) or text.strip()[:60])[:MAX_ENTITY_CHARS] or "?", "is", "?"]]


def record_size(book: Codebook) -> None:
    """Append the codebook's size to its history (saved with it): the growth curve, one point per
    save that changed it."""
    book.history.append({"revision": book.revision + 1, **{k: v for k, v in book.size().items()
                                                           if k in ("entities", "relations", "edges", "runs")}})
