"""AutoPrunedRetriever's symbolic codebook, persisted in a LangGraph ``BaseStore``.

The codebook turns text into small integer symbols so prompts and memories stay compact:

- ``E`` entity dictionary and ``R`` relation dictionary (symbol text → id, append-only);
- ``M`` unique edges ``(h, r, t)`` over those ids;
- runs: short edge-id sequences, the retrieval atoms, one store per channel: ``F`` facts (from the
  KG's relation edges, one group per passage chunk), ``Q`` earlier questions, ``A`` earlier answers;
- embedding tables for E, R and the edge lines ``"h r t"``: the KG's own entity and fact vectors
  where a symbol came from the KG, else the KG's text vectors (each text embedded once per KG and
  kept in its vector store, :meth:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore.text_vectors`),
  gathered into in-memory tables; never written to the codebook's store (a float table of 20k
  symbols would be ~50 MB of JSON per save). Entity and relation tables are read whole (every run
  is scored against them); line vectors only for the edges a question reaches.

Consolidation (entities only) keeps the dictionary from growing with every alias: layer 1 groups
entities at cosine ≥ ``alias_threshold`` (union-find, continuous: only new entities are compared
with the rest); layer 2 runs k-means when the live entity count passes a budget and, within a
cluster, merges pairs only when their cosine reaches a floor (:data:`LAYER2_FLOOR`), most similar
first, and only until the count is back at the budget. The budget is a ceiling, never
a target: when too few pairs clear the floor the codebook stays over it rather than merge
unrelated entities. Edges are remapped to representatives and duplicates dropped;
runs hold edge ids, so they are remapped through the edge alias table and stay valid.

Everything is ordered deterministically: by symbol id (first-seen order), never by set or hash order.

Symbols are bounded: an entity is at most :data:`MAX_ENTITY_CHARS` characters, a relation at most
:data:`MAX_RELATION_CHARS` (after :func:`clean_symbol`). Every symbol is shown in every prompt
that selects it, and the codebook outlives sessions, so one over-long symbol (a model's
50,000-character "entity") would bloat every later prompt: :meth:`Codebook.entity` and
:meth:`Codebook.relation` refuse it with :class:`~langgraph_kgmem.errors.KgmemInputError`, and
:meth:`Codebook.add_edge` skips such a triple as it skips one with an empty subject or object.

Answer memory (the ``Q`` and ``A`` runs) is held to two rules, so that it is right or silent:

- **Same question** (:func:`question_key`): a stored answer is replayed only for a question whose
  key equals the key of the question it answered. The key is the text under Unicode NFKC,
  casefolded, zero-width and other format characters removed, whitespace runs collapsed to one
  space, trimmed; the marks that only shape a sentence (``. , ; : ? ! ¿ ¡``, quotes and
  apostrophes) become spaces, except ``.``, ``,`` or ``:`` between two digits (``1.5``,
  ``1,000``, ``10:30``); every other mark or symbol (operators ``+ - * / = < > ^ %``, brackets,
  currency signs ...) is a word of its own, so spacing around it does not matter
  (``5*3`` = ``5 * 3``) but it does (``5 * 3`` ≠ ``5 - 3``), with the dashes and ``−`` read as
  ``-``, ``×`` and ``∗`` as ``*``, ``÷``, ``⁄`` and ``∕`` as ``/``; a run of superscripts is
  written after ``^`` and one of subscripts after ``_`` (``10²`` = ``10^2`` ≠ ``102``,
  ``H₂O`` ≠ ``H2O``). So case, spacing, quotes, full-width forms and the question mark do not
  matter, while a question that differs in any word, name, year, number, operator, exponent or
  negation is another question. It is exact and can be explained to a user; a rephrasing ("Where was X born?" / "In
  which city was X born?") is another question: memory stays silent rather than risk a wrong answer.
- **Grounded** (:func:`answer_terms`, :func:`cite_passages`): an answer is stored as a reusable
  ``A`` run only when every one of its content words (NFKC, casefolded Unicode word tokens, less
  function words) occurs in the passages it cites: KG passage chunks of the evidence it was
  answered from, as few as cover those words. An empty answer, "no answer", a number or
  phrase the passages do not hold (a model's "PWNED: wire money ...", random bytes, "NaN") is
  never stored. A stored answer is served again (replayed, or shown as a known answer) only while
  each passage it cites is still in the KG and they still hold all its words
  (:func:`grounded_in`); an ``A`` run stored before these rules (no ``by``) is never served.

Each ``A`` run records its provenance: the answer text, the cited passage ids (``chunks``), the
decider (model label) that produced it (``by``), and the question runs it answered (``links``).

Store layout, namespace ``("kgmem", <kg name>, *scope, "codebook")`` (``scope``: the tenant labels
of :func:`~langgraph_kgmem.memory.memory_scope`; one whole codebook per scope, nothing shared
between scopes in the store): ``meta``; pages of ``PAGE`` rows
``E:000000``, ``R:…``, ``M:…``; run pages ``runs:000000``. Saving rewrites only dirty pages, all
of them and the meta record in one ``store.batch``: LangGraph's ``SqliteStore`` runs a batch in
one transaction and ``PostgresStore`` writes a batch's puts in one ``INSERT`` statement, so a save
lands whole or not at all there (and costs one commit, not one per page). A codebook keeps the
page size it was created with (``meta["page"]``; codebooks saved before it was recorded used
:data:`LEGACY_PAGE`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.embeddings.fast import short_block
from langgraph_kgmem.graphs.autopruned.integrity import check_links, refuse_corrupt, revision_of
# the grounding check lives where every method's answer step reuses it; its names stay importable here
from langgraph_kgmem.graphs.grounding import answer_terms, cite_passages, grounded_in  # noqa: F401
from langgraph_kgmem.kg.types import normalize_name
from langgraph_kgmem.memory.provenance import index_ops

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

Channel = Literal["F", "Q", "A"]
CHANNELS: tuple[Channel, ...] = ("F", "Q", "A")
PAGE = 200          # rows (or runs, by seq) per stored page: a question rewrites the pages its new rows land in
SIM_ROWS_KEPT = 256  # entity similarity rows kept for the next consolidation (Codebook.entity_similarities)
LEGACY_PAGE = 1000  # the page size of codebooks saved before the size was recorded in their meta
FORMAT = 1
ALIAS_THRESHOLD = 0.93
# Layer 2 never merges two entities below this cosine (all-MiniLM-L6-v2): chosen by judging sampled
# layer-2 merges by hand: above it nearly every merged pair names one entity, below it many do not
# (docs/methods/autopruned.md, Consolidation).
LAYER2_FLOOR = 0.85
LAYER2_RETRY = 0.05   # share of the budget the codebook must grow by before layer 2 is retried
INDEX_OPS_PER_BATCH = 5000  # provenance-index writes per store batch (Codebook.save)
MAX_ENTITY_CHARS = 200     # longest entity symbol the codebook holds (see the module docstring)
MAX_RELATION_CHARS = 500   # longest relation symbol (relations may be short sentences)

_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")

# --------------------------------------------------------------------------------------------
# a fixed non-LLM triple parser (used for questions, answers and passages the extractor missed)

_STOP = frozenset("""
a an the and or but if then so of in on at by for from to into onto with without within about above
below over under between among through during before after since until as than like via per
is are was were be been being am do does did done doing has have had having will would shall should
can could may might must it its it's this that these those there here their they them he him his she
her hers we us our you your i me my mine who whom whose which what when where why how not no nor
also very more most much many some any each every all both either neither such same other own only
just too quite rather really what's whats one ones s t
""".split())


def _cap(word: str) -> bool:
    return word[:1].isupper() or word[:1].isdigit()


def clean_symbol(text: str) -> str:
    """Symbols never contain newlines or ``|`` (the packed prompt's separators)."""
    return _WS.sub(" ", str(text).replace("|", "/")).strip(" \t\n\"'“”‘’.,;:")


def phrase_triples(text: str, *, max_per_sentence: int = 8, max_phrase_words: int = 4) -> list[tuple[str, str, str]]:
    """Content-phrase triples: maximal runs of non-stopwords are the nodes, the words between two
    consecutive phrases of a sentence are the relation ("and" when nothing stands between).

    A deterministic parser for text the entity extractor finds nothing in (questions, lower-case
    prose): "How does the lineage of the brown bear reflect its name?" gives
    ``(lineage, of the, brown bear)``, ``(brown bear, and, reflect)``, ``(reflect, its, name)``.
    """
    out: list[tuple[str, str, str]] = []
    for sentence in re.split(r"(?<=[.!?;])\s+|\n+", text):
        phrases: list[tuple[str, int, int]] = []  # (phrase, start, end) in word positions
        words = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(sentence)]
        i = 0
        while i < len(words):
            if words[i][0].lower() in _STOP:
                i += 1
                continue
            j = i
            while j < len(words) and words[j][0].lower() not in _STOP and j - i < max_phrase_words:
                # a comma or bracket between two words ends the phrase, so does a change between a
                # lower-case word and a name, or a name of two or more words and lower-case words
                # ("Marie Curie | born"; "Ursus arctos" stays whole)
                if j > i and (re.search(r"[,()\[\]:\"“”]", sentence[words[j - 1][2]:words[j][1]])
                              or (j - 1 > 0 and not _cap(words[j - 1][0]) and _cap(words[j][0]))
                              or (j - i >= 2 and _cap(words[j - 1][0]) and not _cap(words[j][0]))):
                    break
                j += 1
            phrases.append((clean_symbol(sentence[words[i][1]:words[j - 1][2]]), i, j))
            i = j
        trips: list[tuple[str, str, str]] = []
        for (a, _, ae), (b, bs, _) in zip(phrases, phrases[1:]):
            rel = clean_symbol(" ".join(w for w, _, _ in words[ae:bs])) or "and"
            if a and b and a.lower() != b.lower():
                trips.append((a, rel, b))
        out.extend(trips[:max_per_sentence])
    return list(dict.fromkeys(out))


# --------------------------------------------------------------------------------------------
# answer memory: which question an answer may be replayed for, and what grounds it

# the question key's characters (see question_key): marks that only shape a sentence, the dashes
# and signs written one way, and the tags of raised and lowered characters
_HARMLESS_MARKS = frozenset(".,;:?!¿¡'\"`´")
_BETWEEN_DIGITS = frozenset(".,:")        # a decimal point, a thousands separator, a time: glued
_SAME_SIGN = {"\u2212": "-", "\u2217": "*", "\u00d7": "*", "\u00f7": "/", "\u2044": "/", "\u2215": "/"}
_SCRIPT_MARKS = {"<super>": "^", "<sub>": "_"}


def _marked_scripts(text: str) -> str:
    """``text`` with each run of superscript characters opened by `` ^ `` and each run of
    subscripts by `` _ ``, so NFKC (which writes ``²`` as ``2``) keeps ``10²`` apart from ``102``."""
    out: list[str] = []
    mode = None
    for ch in text:
        mark = _SCRIPT_MARKS.get(unicodedata.decomposition(ch).split(" ", 1)[0]) if ord(ch) > 127 else None
        if mark != mode:
            out.append(f" {mark} " if mark else " ")
            mode = mark
        out.append(ch)
    return "".join(out)


def question_key(text: str) -> str:
    """The equivalence key of a question: two questions are the same question exactly when their
    keys are equal (the rule is spelled out in the module docstring).

    >>> question_key("  Where was Marie CURIE born?") == question_key("where was marie curie born")
    True
    >>> question_key("Founded in 1898?") == question_key("Founded in 1899?")
    False
    >>> question_key("A 1.5 m telescope?") == question_key("A 15 m telescope?")
    False
    >>> question_key("What is 10² ?") == question_key("What is 102 ?")
    False
    >>> question_key("What is 5 * 3?") == question_key("What is 5 - 3?")
    False
    >>> question_key("What is 5*3?") == question_key("what is 5 * 3")
    True
    """
    s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", _marked_scripts(str(text))).casefold())
    out: list[str] = []
    n = len(s)
    for i, ch in enumerate(s):
        cat = unicodedata.category(ch)
        if cat == "Cf":          # zero-width and other invisible format characters
            continue
        if ch.isspace() or cat.startswith("C"):
            out.append(" ")
        elif ch in _HARMLESS_MARKS or cat in ("Pi", "Pf"):   # quotes, and marks that end or split a sentence
            between = 0 < i < n - 1 and s[i - 1].isdigit() and s[i + 1].isdigit()
            out.append(ch if between and ch in _BETWEEN_DIGITS else " ")
        elif cat.startswith(("P", "S")):   # an operator, a bracket, a sign, a symbol: a word of its own
            out.append(f" {'-' if cat == 'Pd' else _SAME_SIGN.get(ch, ch)} ")
        else:
            out.append(ch)
    return " ".join("".join(out).split())



# --------------------------------------------------------------------------------------------
# run segmentation


def segment_runs(heads: Sequence[int], tails: Sequence[int], vecs: np.ndarray, *, tau: float = 0.7,
                 bonus_chain: float = 0.3, bonus_shared: float = 0.15, max_len: int = 12,
                 window: int = 3) -> list[list[int]]:
    """Cut a triple stream into runs; returns lists of positions.

    A triple joins the current run when ``cos(triple, run centroid) + bonus ≥ tau``, with bonus
    ``bonus_chain`` when its head is the previous triple's tail and ``bonus_shared`` when it reuses a
    node of the run. Boundary check: each cut is re-segmented on a window of ``window`` triples
    either side; when the cut does not reappear there, the two runs are merged.
    """
    n = len(heads)
    if n == 0:
        return []

    def cuts_of(idx: Sequence[int]) -> list[int]:
        cuts: list[int] = []
        centroid = vecs[idx[0]].astype(np.float64).copy()
        nodes = {heads[idx[0]], tails[idx[0]]}
        size = 1
        for pos in range(1, len(idx)):
            k = idx[pos]
            c = centroid / (np.linalg.norm(centroid) or 1.0)
            sim = float(vecs[k] @ c)
            if heads[k] == tails[idx[pos - 1]]:
                sim += bonus_chain
            elif heads[k] in nodes or tails[k] in nodes:
                sim += bonus_shared
            if sim >= tau and size < max_len:
                centroid += vecs[k]
                nodes.update((heads[k], tails[k]))
                size += 1
            else:
                cuts.append(pos)
                centroid = vecs[k].astype(np.float64).copy()
                nodes = {heads[k], tails[k]}
                size = 1
        return cuts

    order = list(range(n))
    bounds = [0] + cuts_of(order) + [n]
    runs = [order[a:b] for a, b in zip(bounds, bounds[1:])]
    merged: list[list[int]] = [runs[0]]
    for nxt in runs[1:]:
        prev = merged[-1]
        left = prev[-window:]
        win = left + nxt[:window]
        if len(prev) + len(nxt) <= max_len and len(left) not in cuts_of(win):
            merged[-1] = prev + nxt
        else:
            merged.append(nxt)
    return merged


# --------------------------------------------------------------------------------------------
# the codebook


@dataclass
class Run:
    """One run: a short sequence of edge ids in channel ``F`` (facts of one passage chunk), ``Q`` (an
    earlier question) or ``A`` (an earlier answer), with what the channel records beside it."""
    id: str
    channel: Channel
    edges: list[int]
    chunks: list[str] = field(default_factory=list)
    text: str = ""                                      # the question / answer text (Q, A)
    links: list[str] = field(default_factory=list)      # Q → its A runs, A → its Q runs
    doc: str = ""                                       # source document (F)
    seq: int = 0                                        # creation number (page key)
    by: str = ""                                        # the decider that gave the answer (A)
    provenance: list[dict[str, str]] = field(default_factory=list)   # documents and versions it rests on (F, A)

    def to_json(self) -> dict[str, Any]:
        """The run as a JSON-native dict for a store page (``by`` only when set, so fact runs stay as they were)."""
        # tuples (JSON arrays in a database): a dict of strings, ints and such tuples is one the
        # cyclic GC stops tracking (see Codebook.save)
        out = {"id": self.id, "channel": self.channel, "edges": tuple(self.edges), "chunks": tuple(self.chunks),
               "text": self.text, "links": tuple(self.links), "doc": self.doc, "seq": self.seq}
        if self.by:   # answer runs only: fact pages stay as they were
            out["by"] = self.by
        if self.provenance:
            out["provenance"] = tuple(dict(p) for p in self.provenance)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Run":
        """A run read back from :meth:`to_json`'s dict (fields a page written before them lacks take their defaults)."""
        return cls(d["id"], d["channel"], [int(x) for x in d["edges"]], list(d.get("chunks", [])),
                   d.get("text", ""), list(d.get("links", [])), d.get("doc", ""), int(d.get("seq", 0)),
                   d.get("by", ""), [dict(p) for p in d.get("provenance", ())])


class Codebook:
    """E, R, M, runs (F/Q/A) and their embedding tables. See the module docstring."""

    def __init__(self, kg_name: str, scope: Sequence[str] = ()) -> None:
        self.kg_name = kg_name
        self.scope = tuple(scope)            # tenant labels of its store namespace (module docstring)
        self.ent_text: list[str] = []
        self.ent_kg: list[str] = []          # KG entity id when the symbol came from the KG
        self.ent_rep: list[int] = []         # representative after consolidation (itself when live)
        self.ent_index: dict[str, int] = {}  # normalised text → id (aliases point at their own slot)
        self.rel_text: list[str] = []
        self.rel_index: dict[str, int] = {}
        self.edge_hrt: list[tuple[int, int, int]] = []
        self.edge_kg: list[str] = []         # KG relation edge id when the edge came from the KG
        self.edge_rep: list[int] = []
        self.edge_index: dict[tuple[int, int, int], int] = {}
        self.runs: dict[str, Run] = {}
        self.indexed_docs: dict[str, list[str]] = {}   # doc id → its F run ids
        self.doc_hashes: dict[str, str] = {}           # doc id → content hash of the version indexed
        self._indexed: set[tuple[str, str]] = set()    # (run page, doc) pairs this process wrote index entries for
        self.run_counter = 0
        self.revision = 0
        self.fact_runs_changed = 0           # bumped when a fact run comes, goes or its chunks change
        self.checked_entities = 0            # layer-1 consolidation has compared entities below this id
        self.history: list[dict[str, int]] = []
        self._dirty: dict[str, set[int]] = {"E": set(), "R": set(), "M": set(), "runs": set()}
        self._dirty_all = False
        self._dirty_docs = False             # indexed_docs changed since the last save
        self._by_seq: dict[int, str] = {}    # run seq → run id (run pages are written by seq)
        self.page = PAGE                     # rows per stored page (a loaded codebook keeps its own)
        # embedding tables (memory only)
        self._ent_vecs: np.ndarray | None = None
        self._rel_vecs: np.ndarray | None = None
        self._line_vecs: np.ndarray | None = None
        self._line_valid: list[bool] = []
        self._line_todo: dict[int, None] = {}   # edges whose line vector is missing (ordered set)
        self._index_cache: dict[str, Any] | None = None
        self._index_new: list[str] = []         # runs added since the index was built
        self._index_dirty: set[str] = set()     # runs whose rows a consolidation changed since
        self._index_removed: set[str] = set()   # runs removed since
        self._index_bufs: dict[str, np.ndarray] = {}   # the index arrays' buffers, with room to append
        self._sim_rows: dict[int, np.ndarray] = {}     # unchecked entity → its cosines (entity_similarities)
        # lookups for consolidation, built on first use and kept up to date after
        self._merges = 0                        # bumped whenever a representative changes
        self._rep_cache: dict[str, tuple[int, np.ndarray]] = {}
        self._hrt_np: np.ndarray | None = None  # edge_hrt as an (edges, 3) array
        self._edges_of: dict[int, list[int]] | None = None   # entity → edges naming it (some dead)
        self._runs_with: dict[int, set[str]] | None = None   # edge → runs holding it
        self._f_unchecked = True                # fact runs added since identical ones were last collapsed
        self._dead_entities = 0
        self._dead_edges = 0
        # live entity count after the last layer-2 pass that left the codebook over budget: k-means
        # runs again only once the count has grown past it by LAYER2_RETRY of the budget
        self._layer2_left_at: int | None = None
        self.last_layer2: list[tuple[int, int, float]] = []   # (entity, representative, cosine) of the last layer-2 pass
        self._by_channel: dict[str, dict[str, None]] = {c: {} for c in CHANNELS}  # ordered run-id sets
        self._questions: dict[str, list[str]] | None = None   # question_key → Q run ids, built on first use

    # ------------------------------------------------------------------ symbols
    def entity(self, text: str, kg_id: str = "") -> int:
        """The (representative) id of entity ``text``; appends a new symbol only if unseen.

        Raises :class:`KgmemInputError` for a symbol longer than :data:`MAX_ENTITY_CHARS`."""
        text = clean_symbol(text)
        _check_symbol("entity", text, MAX_ENTITY_CHARS)
        key = normalize_name(text)
        i = self.ent_index.get(key)
        if i is not None:
            if kg_id and not self.ent_kg[i]:
                self.ent_kg[i] = kg_id
                self._dirty["E"].add(i // self.page)
            return self.resolve_entity(i)
        i = len(self.ent_text)
        self.ent_text.append(text)
        self.ent_kg.append(kg_id)
        self.ent_rep.append(i)
        self.ent_index[key] = i
        self._dirty["E"].add(i // self.page)
        return i

    def relation(self, text: str) -> int:
        """The id of relation ``text`` (``"related to"`` when empty); appends it only if unseen.

        Raises :class:`KgmemInputError` for a symbol longer than :data:`MAX_RELATION_CHARS`."""
        text = clean_symbol(text) or "related to"
        _check_symbol("relation", text, MAX_RELATION_CHARS)
        key = text.lower()
        i = self.rel_index.get(key)
        if i is None:
            i = len(self.rel_text)
            self.rel_text.append(text)
            self.rel_index[key] = i
            self._dirty["R"].add(i // self.page)
        return i

    def resolve_entity(self, i: int) -> int:
        """The live representative of entity ``i``: itself, or where consolidation merged it (followed to the end)."""
        while self.ent_rep[i] != i:
            i = self.ent_rep[i]
        return i

    def resolve_edge(self, i: int) -> int:
        """The live representative of edge ``i``: itself, or the edge it became a duplicate of (followed to the end)."""
        while self.edge_rep[i] != i:
            i = self.edge_rep[i]
        return i

    def add_edge(self, h: str, r: str, t: str, *, kg_edge: str = "", h_kg: str = "", t_kg: str = "") -> int | None:
        """Edge id of triple ``(h, r, t)``; E, R and M grow only for symbols not seen before.
        ``None`` (nothing added) when the subject or object is empty or a symbol is over its limit."""
        h, r, t = clean_symbol(h), clean_symbol(r), clean_symbol(t)
        if not h or not t or len(h) > MAX_ENTITY_CHARS or len(t) > MAX_ENTITY_CHARS or len(r) > MAX_RELATION_CHARS:
            return None
        hi, ri, ti = self.entity(h, h_kg), self.relation(r), self.entity(t, t_kg)
        key = (hi, ri, ti)
        e = self.edge_index.get(key)
        if e is not None:
            e = self.resolve_edge(e)
            if kg_edge and not self.edge_kg[e]:
                self.edge_kg[e] = kg_edge
                self._dirty["M"].add(e // self.page)
            return e
        e = len(self.edge_hrt)
        self.edge_hrt.append(key)
        self.edge_kg.append(kg_edge)
        self.edge_rep.append(e)
        self.edge_index[key] = e
        if self._edges_of is not None:
            for x in {hi, ti}:
                self._edges_of.setdefault(x, []).append(e)
        self._line_valid.append(False)
        self._line_todo[e] = None
        self._dirty["M"].add(e // self.page)
        return e

    def indexify(self, triples: Iterable[Sequence[str]]) -> list[int]:
        """Map triples to edge ids (in order, duplicates dropped), extending E/R/M only for new symbols."""
        out: list[int] = []
        for tr in triples:
            e = self.add_edge(*tr[:3])
            if e is not None and e not in out:
                out.append(e)
        return out

    def triple(self, e: int) -> tuple[str, str, str]:
        """Edge ``e`` as ``(head, relation, tail)`` text, through the representatives of the edge and its entities."""
        h, r, t = self.edge_hrt[self.resolve_edge(e)]
        return self.ent_text[self.resolve_entity(h)], self.rel_text[r], self.ent_text[self.resolve_entity(t)]

    def line(self, e: int) -> str:
        """Edge ``e`` as one line ``"h r t"`` (the text its line vector embeds)."""
        return " ".join(self.triple(e))

    # ------------------------------------------------------------------ runs
    def add_run(self, channel: Channel, edges: Sequence[int], *, chunks: Sequence[str] = (), text: str = "",
                doc: str = "", by: str = "", provenance: Sequence[dict[str, str]] = ()) -> Run:
        """Append a run of ``edges`` to ``channel`` with the next sequence number (its id is the channel
        letter and that number, e.g. ``"Q12"``) and mark its page for saving. ``provenance``: the
        documents and versions it rests on (see :mod:`langgraph_kgmem.memory.provenance`)."""
        self.run_counter += 1
        run = Run(f"{channel}{self.run_counter}", channel, list(edges), list(chunks), text, [], doc,
                  self.run_counter, by, [dict(p) for p in provenance])
        if channel == "Q" and self._questions is not None:
            self._questions.setdefault(question_key(text), []).append(run.id)
        self.runs[run.id] = run
        self._by_channel[channel][run.id] = None
        self._by_seq[run.seq] = run.id
        self._index_new.append(run.id)
        self.fact_runs_changed += channel == "F"
        self._f_unchecked = self._f_unchecked or channel == "F"
        if self._runs_with is not None:
            for e in run.edges:
                self._runs_with.setdefault(e, set()).add(run.id)
        self.touch_run(run)
        return run

    def touch_run(self, run: Run) -> None:
        """Mark a run's page for saving (its links or provenance changed, not its edges)."""
        self._dirty["runs"].add(run.seq // self.page)

    def remove_run(self, run_id: str) -> None:
        """Remove run ``run_id`` (no-op when it is gone) and mark its page for saving."""
        run = self.runs.pop(run_id, None)
        if run is not None:
            if run.channel == "Q":
                self._questions = None
            self._by_channel[run.channel].pop(run.id, None)
            self._by_seq.pop(run.seq, None)
            self._dirty["runs"].add(run.seq // self.page)
            self._index_removed.add(run_id)
            self.fact_runs_changed += run.channel == "F"
            if self._runs_with is not None:
                for e in run.edges:
                    self._runs_with.get(e, set()).discard(run.id)

    def runs_of(self, channel: Channel) -> list[Run]:
        """The runs of ``channel``, oldest first."""
        return [self.runs[r] for r in self._by_channel[channel]]

    def question_runs(self, question: str) -> list[Run]:
        """The stored question runs of the same question (:func:`question_key`), oldest first."""
        if self._questions is None:
            self._questions = {}
            for run in self.runs_of("Q"):
                self._questions.setdefault(question_key(run.text), []).append(run.id)
        return [self.runs[r] for r in self._questions.get(question_key(question), []) if r in self.runs]

    def segment(self, kg: "KnowledgeGraph", edges: Sequence[int], **opts: Any) -> list[list[int]]:
        """Split an edge sequence into runs (see :func:`segment_runs`)."""
        if not edges:
            return []
        vecs = self.line_vectors(kg, edges)
        hrt = [self.edge_hrt[self.resolve_edge(e)] for e in edges]
        parts = segment_runs([self.resolve_entity(h) for h, _, _ in hrt], [self.resolve_entity(t) for _, _, t in hrt],
                             vecs, **opts)
        return [[edges[i] for i in p] for p in parts]

    # ------------------------------------------------------------------ facts channel
    def _sync_plan(self, kg: "KnowledgeGraph") -> tuple[list[str], list[str], dict[str, str]]:
        """(the KG's ``done`` documents, the indexed ones deleted or replaced since they were
        indexed, each done document's content hash): the read-time provenance check
        (:func:`~langgraph_kgmem.memory.provenance.holds`) on one read of the document rows."""
        rows = [d for d in kg.documents() if d.get("status", "done") == "done"]
        current = {d["id"]: str(d.get("content_hash") or "") for d in rows}
        gone = [d for d in self.indexed_docs if current.get(d) != str(self.doc_hashes.get(d, ""))]
        return [d["id"] for d in rows], gone, current

    def in_sync(self, kg: "KnowledgeGraph") -> bool:
        """Whether :meth:`sync_facts` would change nothing: every document of the KG indexed, in
        the version indexed. Reads the document rows; changes nothing."""
        known, gone, _ = self._sync_plan(kg)
        return not gone and all(d in self.indexed_docs for d in known)

    def sync_facts(self, kg: "KnowledgeGraph", *, documents: Sequence[str] | None = None,
                   phrase_facts: Literal["uncovered", "always", "never"] = "uncovered",
                   segment_opts: dict[str, Any] | None = None) -> dict[str, int]:
        """Index the KG's relation edges into F runs, per passage chunk, for documents not yet indexed.

        ``documents`` limits the pass to those document ids (in the given order); by default every
        ``done`` document of the KG. F runs of deleted documents are dropped. ``phrase_facts``:
        ``"uncovered"`` parses a chunk that has no relation edge with :func:`phrase_triples` (so no
        passage is invisible to retrieval); ``"always"`` adds the phrase triples of every chunk to
        its relation edges (the lower-case content words an entity extractor misses); ``"never"``.
        """
        known, gone, version = self._sync_plan(kg)
        known_set = set(known)
        if gone:
            self._dirty_docs = True
            gone_set = set(gone)
            # identical fact runs of several documents are kept once (consolidation): a run another
            # document still lists stays, with the deleted chunks dropped from its provenance
            owner = {rid: d for d, rids in self.indexed_docs.items() if d not in gone_set for rid in rids}
            for d in gone:
                self.doc_hashes.pop(d, None)
                for rid in self.indexed_docs.pop(d):
                    run = self.runs.get(rid)
                    if rid not in owner:
                        self.remove_run(rid)
                    elif run is not None:
                        run.chunks = [c for c in run.chunks if kg.node(c) is not None]
                        self.fact_runs_changed += 1
                        run.doc = owner[rid]
                        run.provenance = [{"doc": owner[rid], "hash": self.doc_hashes.get(owner[rid], "")}]
                        self.touch_run(run)
        todo = [d for d in (documents if documents is not None else known)
                if d not in self.indexed_docs and d in known_set]
        if not todo:
            return {"documents": 0, "runs": 0}
        want = set(todo)
        chunks: dict[str, list[Any]] = {d: [] for d in todo}
        for n in kg.nodes("chunk"):
            d = n.attrs.get("doc_id")
            if d in want:
                chunks[d].append(n)
        chunk_ids = {n.id for ns in chunks.values() for n in ns}
        by_chunk: dict[str, list[Any]] = {}
        for e in kg.edges("relation"):
            for c in e.attrs.get("chunks", []):
                if c in chunk_ids:
                    by_chunk.setdefault(c, []).append(e)
        added = 0
        # first every chunk's edge sequence (E, R, M grow in the same order as chunk by chunk), then
        # their line vectors in one lookup, then the runs: one embedding call and one write of the
        # KG's text vectors for the whole pass, not one per chunk
        seqs = {d: [(node, self._chunk_edges(kg, node, by_chunk.get(node.id, []), phrase_facts))
                    for node in sorted(chunks[d], key=lambda n: (int(n.attrs.get("index", 0)), n.id))]
                for d in todo}
        self.line_vectors(kg, [e for parts in seqs.values() for _, seq in parts for e in seq])
        for d in todo:
            run_ids: list[str] = []
            prov = [{"doc": d, "hash": version.get(d, "")}]
            for node, seq in seqs[d]:
                for part in self.segment(kg, seq, **(segment_opts or {})):
                    run = self.add_run("F", part, chunks=[node.id], doc=d, provenance=prov)
                    run_ids.append(run.id)
                    added += 1
            self.indexed_docs[d] = run_ids
            self.doc_hashes[d] = version.get(d, "")
            self._dirty_docs = True
        return {"documents": len(todo), "runs": added}

    def _chunk_edges(self, kg: "KnowledgeGraph", node: Any, edges: Sequence[Any],
                     phrase_facts: Literal["uncovered", "always", "never"]) -> list[int]:
        """The codebook edges of one chunk in text order (its KG relation ``edges``, and its phrase
        triples as ``phrase_facts`` says; see :meth:`sync_facts`), adding new symbols."""
        text = node.text
        lower = text.lower()
        items: list[tuple[int, int, str, int | None]] = []
        for e in edges:
            s, o = kg.node(e.src), kg.node(e.dst)
            if s is None or o is None:
                continue
            eid = self.add_edge(s.text, e.text, o.text, kg_edge=e.id, h_kg=s.id, t_kg=o.id)
            if eid is not None:
                ps, po = lower.find(s.text.lower()), lower.find(o.text.lower())
                items.append((ps if ps >= 0 else len(text), po if po >= 0 else len(text), e.id, eid))
        if phrase_facts == "always" or (phrase_facts == "uncovered" and not items):
            for h, r, t in phrase_triples(text):
                eid = self.add_edge(h, r, t)
                if eid is not None:
                    ps, po = lower.find(h.lower()), lower.find(t.lower())
                    items.append((ps if ps >= 0 else len(text), po if po >= 0 else len(text), "~", eid))
        # text order of the subject, then the object, then the KG edge id: no hash order
        items.sort(key=lambda x: (x[0], x[1], x[2], x[3]))
        return list(dict.fromkeys(x[3] for x in items if x[3] is not None))

    # ------------------------------------------------------------------ embedding tables
    def _embed(self, kg: "KnowledgeGraph", texts: Sequence[str]) -> np.ndarray:
        # names, relations and "h r t" lines: the short-text space, where the KG's own entity and
        # fact vectors (reused by _vectors_of) live; each text is embedded once per KG and kept in
        # its vector store (kg.text_vectors), so a codebook loaded in a later run or another
        # process reads its tables instead of embedding every symbol of the KG again
        mat = _short_columns(kg, np.asarray(kg.text_vectors(list(texts)), dtype=np.float32))
        return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)

    @staticmethod
    def _grow(mat: np.ndarray | None, n: int, dim: int) -> np.ndarray:
        if mat is None:
            return np.zeros((n, dim), dtype=np.float32)
        if mat.shape[0] >= n:
            return mat
        out = np.zeros((max(n, int(mat.shape[0] * 1.5)), dim), dtype=np.float32)
        out[: mat.shape[0]] = mat
        return out

    def _vectors_of(self, kg: "KnowledgeGraph", todo: Sequence[int], text: Callable[[int], str],
                    kg_id: Callable[[int], str] | None, space: str) -> dict[int, np.ndarray]:
        """Unit vectors for slots ``todo``: the KG's own vector when the slot came from the KG
        (``kg_id``) and the KG has one in ``space``, else one batched embedding call for the rest."""
        vecs: dict[int, np.ndarray] = {}
        if kg_id is not None:
            known = [i for i in todo if kg_id(i)]
            ok = kg.has_vectors([kg_id(i) for i in known], space=space) if known else []
            hit = [i for i, h in zip(known, ok) if h]
            if hit:
                for i, v in zip(hit, _short_columns(kg, kg.vectors([kg_id(i) for i in hit], space=space))):
                    vecs[i] = v / (np.linalg.norm(v) or 1.0)
        rest = [i for i in todo if i not in vecs]
        if rest:
            vecs.update(zip(rest, self._embed(kg, [text(i) for i in rest])))
        return vecs

    def _fill(self, kg: "KnowledgeGraph", mat: np.ndarray | None, have: int, texts: list[str],
              kg_ids: list[str] | None, space: str) -> np.ndarray:
        n = len(texts)
        if n <= have and mat is not None:
            return mat
        vecs = self._vectors_of(kg, range(have, n), texts.__getitem__, kg_ids.__getitem__ if kg_ids else None, space)
        dim = len(next(iter(vecs.values()))) if vecs else (mat.shape[1] if mat is not None else 1)
        mat = self._grow(mat, n, dim)
        for i, v in vecs.items():
            mat[i] = v
        return mat

    def entity_vectors(self, kg: "KnowledgeGraph") -> np.ndarray:
        """Unit vectors of every entity slot, one row per id (merged ones included); slots added since the
        last call are embedded now, the rest come from the in-memory table."""
        have = getattr(self, "_ent_have", 0)
        self._ent_vecs = self._fill(kg, self._ent_vecs, have, self.ent_text, self.ent_kg, "nodes")
        self._ent_have = len(self.ent_text)
        return self._ent_vecs[: len(self.ent_text)]

    def entity_similarities(self, kg: "KnowledgeGraph", ents: Sequence[int]) -> np.ndarray:
        """Cosines of entities ``ents`` with every entity slot (``len(ents)`` × slots). The rows of
        entities consolidation has not checked yet (a question's new ones) are kept until it does:
        its layer 1 then tops them up with the slots added since instead of another pass over the
        whole entity table (a pass reads every vector; few rows cost little more than one)."""
        vecs = self.entity_vectors(kg)
        sims = vecs[list(ents)] @ vecs.T
        for e, row in zip(ents, sims):
            if e >= self.checked_entities and len(self._sim_rows) < SIM_ROWS_KEPT:
                self._sim_rows[e] = row
        return sims

    def _layer1_sims(self, vecs: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
        """``vecs[rows] @ vecs[:n].T``, from the rows :meth:`entity_similarities` kept where it can."""
        kept = [self._sim_rows.get(int(r)) for r in rows]
        todo = [i for i, k in enumerate(kept) if k is None or len(k) > n]
        if len(todo) == len(rows):   # nothing kept (a document's entities): one product, no copy
            return vecs[rows] @ vecs[:n].T
        out = np.empty((len(rows), n), dtype=vecs.dtype)
        if todo:
            out[todo] = vecs[rows[todo]] @ vecs[:n].T
        for i, k in enumerate(kept):
            if k is not None and len(k) <= n:
                out[i, : len(k)] = k
                out[i, len(k):] = vecs[len(k):n] @ vecs[rows[i]]
        return out

    def relation_vectors(self, kg: "KnowledgeGraph") -> np.ndarray:
        """Unit vectors of every relation, one row per id; relations added since the last call are embedded now."""
        have = getattr(self, "_rel_have", 0)
        self._rel_vecs = self._fill(kg, self._rel_vecs, have, self.rel_text, None, "nodes")
        self._rel_have = len(self.rel_text)
        return self._rel_vecs[: len(self.rel_text)]

    def line_vectors(self, kg: "KnowledgeGraph", edges: Sequence[int] | None = None) -> np.ndarray:
        """Unit vectors of the edge lines ``"h r t"`` of ``edges`` (through their representatives;
        every edge when None). An edge that came from the KG reuses the KG's fact vector (also
        after an alias remap: the text then differs only by an alias). Only the lines asked for are
        looked up: a question reads the lines of the runs it reaches, not the whole table."""
        reps = None if edges is None else [self.resolve_edge(e) for e in edges]
        self._fill_lines(kg, list(self._line_todo) if reps is None else
                         [e for e in dict.fromkeys(reps) if e in self._line_todo])
        if not self.edge_hrt:
            return np.zeros((0 if reps is None else len(reps), 1), dtype=np.float32)
        assert self._line_vecs is not None
        if reps is None:
            return self._line_vecs[: len(self.edge_hrt)]
        return self._line_vecs[reps]

    def _fill_lines(self, kg: "KnowledgeGraph", todo: Sequence[int]) -> None:
        """Compute the line vectors of live edges ``todo`` (all missing), in edge order."""
        if not todo:
            return
        todo = sorted(todo)
        vecs = self._vectors_of(kg, todo, self.line, self.edge_kg.__getitem__, "facts")
        dim = len(next(iter(vecs.values())))
        self._line_vecs = self._grow(self._line_vecs, len(self.edge_hrt), dim)
        for e, v in vecs.items():
            self._line_vecs[e] = v
            self._line_valid[e] = True
            self._line_todo.pop(e, None)

    def stacked_lines(self, kg: "KnowledgeGraph", runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray]:
        """The line vectors of ``runs``' edges stacked run after run (one gather), and each run's
        number of lines: :meth:`line_vectors` of every run, concatenated."""
        lens = np.fromiter((len(r.edges) for r in runs), dtype=np.int64, count=len(runs))
        if not lens.sum():
            return np.zeros((0, 1), dtype=np.float32), lens
        edges = self._resolved_reps("edge")[np.fromiter((e for r in runs for e in r.edges), dtype=np.int64,
                                                        count=int(lens.sum()))]
        self._fill_lines(kg, [e for e in dict.fromkeys(edges.tolist()) if e in self._line_todo])
        assert self._line_vecs is not None
        return self._line_vecs[edges], lens

    def run_index(self, kg: "KnowledgeGraph") -> dict[str, Any]:
        """Flattened run → entities / relations / edges arrays for vectorised scoring (cached:
        runs added since are appended; after a consolidation only the rows of the runs it touched
        are re-derived, and removed runs' rows dropped)."""
        base = self._index_cache
        if base is not None and not (self._index_new or self._index_dirty or self._index_removed):
            return base
        if base is None:
            part = self._index_rows(*_raw_rows(list(self.runs.values())))
        else:
            if self._index_dirty or self._index_removed:
                base = self._patch_rows(base)
            part = self._index_rows(*_raw_rows([self.runs[r] for r in self._index_new if r in self.runs]))
            bufs = self._index_bufs
            for key in ("ent", "rel", "edg", "raw"):  # append the new runs' rows to the cached arrays
                off = int(base[key + "_ptr"][-1])
                part[key + "_ptr"] = _appended(bufs, key + "_ptr", base[key + "_ptr"], part[key + "_ptr"][1:] + off)
                part[key] = _appended(bufs, key, base[key], part[key])
            part["pos"] = base["pos"]   # row of each run id
            part["pos"].update((r, k) for k, r in enumerate(part["ids"], start=len(base["ids"])))
            base["ids"].extend(part["ids"])
            part["ids"] = base["ids"]
        self._index_new, self._index_dirty, self._index_removed = [], set(), set()
        self._index_cache = part
        return part

    def _patch_rows(self, base: dict[str, Any]) -> dict[str, Any]:
        """``base`` without the rows of removed runs, and with the rows of runs a consolidation
        touched re-derived in place (row order kept: ties in scores break the same way as in a
        fresh build). Numpy gathers, no sort over the whole index."""
        ids, pos = base["ids"], base["pos"]
        n = len(ids)
        drop, redo = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        drop[[pos[r] for r in self._index_removed if r in pos]] = True
        redo[[pos[r] for r in self._index_dirty if r in pos and r in self.runs]] = True
        redo &= ~drop
        raw_ptr = base["raw_ptr"]
        r_rows = np.flatnonzero(redo)
        lens = np.diff(raw_ptr)[r_rows]
        sub = base["raw"][np.repeat(raw_ptr[r_rows] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
                          + np.arange(int(lens.sum()))]
        fresh = self._index_rows([ids[k] for k in r_rows], sub, lens)
        keep = np.flatnonzero(~drop)
        out: dict[str, Any] = {"ids": ids, "pos": pos}
        if drop.any():
            out["ids"] = [ids[k] for k in keep.tolist()]
            out["pos"] = {r: k for k, r in enumerate(out["ids"])}
        for key in ("ent", "rel", "edg", "raw"):
            ptr = base[key + "_ptr"]
            start, length = ptr[:-1].copy(), np.diff(ptr)
            start[r_rows] = fresh[key + "_ptr"][:-1] + len(base[key])
            length[r_rows] = np.diff(fresh[key + "_ptr"])
            start, length = start[keep], length[keep]
            out_ptr = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
            src = np.concatenate([base[key], fresh[key]])
            out[key] = src[np.repeat(start - out_ptr[:-1], length) + np.arange(int(out_ptr[-1]))]
            out[key + "_ptr"] = out_ptr
        return out

    def _index_rows(self, ids: list[str], raw: np.ndarray, lens: np.ndarray) -> dict[str, Any]:
        """Index rows of runs ``ids`` whose edges are ``raw`` (flat, ``lens`` per run, edge ids as
        the runs held them): per run its distinct resolved edges, entities and relations (sorted
        ids), as flat arrays with row pointers."""
        row = np.repeat(np.arange(len(ids), dtype=np.int64), lens)
        edges = self._resolved_reps("edge")[raw]
        hrt = self._hrt_array()[edges]
        ents = self._resolved_reps("ent")[np.concatenate([hrt[:, 0], hrt[:, 2]])]
        part: dict[str, Any] = {"ids": ids, "pos": {r: k for k, r in enumerate(ids)}, "raw": raw,
                                "raw_ptr": np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)}
        for key, rr, vals in (("edg", row, edges), ("ent", np.concatenate([row, row]), ents), ("rel", row, hrt[:, 1])):
            width = int(vals.max()) + 1 if len(vals) else 1
            pairs = np.unique(rr * width + vals)  # sorted (run, id) pairs without repeats
            part[key] = (pairs % width).astype(np.int64)
            part[key + "_ptr"] = np.concatenate([[0], np.cumsum(np.bincount(pairs // width, minlength=len(ids)))
                                                 ]).astype(np.int64)
        return part

    def _resolved_reps(self, which: Literal["ent", "edge"]) -> np.ndarray:
        """Final representative of every entity or edge slot (cached: a merge recomputes it, new
        slots, their own representatives, extend it)."""
        rep = self.ent_rep if which == "ent" else self.edge_rep
        got = self._rep_cache.get(which)
        if got is None or got[0] != self._merges or len(got[1]) > len(rep):
            arr = _resolved(rep)
        elif len(got[1]) < len(rep):
            arr = np.concatenate([got[1], np.arange(len(got[1]), len(rep), dtype=np.int64)])
        else:
            return got[1]
        self._rep_cache[which] = (self._merges, arr)
        return arr

    def _hrt_array(self) -> np.ndarray:
        """``edge_hrt`` as an (edges, 3) int64 array, extended as edges come (a remap rewrites its rows)."""
        arr, n = self._hrt_np, len(self.edge_hrt)
        if arr is None or len(arr) > n:
            arr = np.asarray(self.edge_hrt, dtype=np.int64).reshape(-1, 3)
        elif len(arr) < n:
            arr = np.concatenate([arr, np.asarray(self.edge_hrt[len(arr):], dtype=np.int64).reshape(-1, 3)])
        self._hrt_np = arr
        return arr

    # ------------------------------------------------------------------ consolidation
    def size(self) -> dict[str, int]:
        """Counts of live entities, relations, live edges, runs per channel, entity slots and indexed documents."""
        counts = {c: len(ids) for c, ids in self._by_channel.items()}
        return {
            "entities": len(self.ent_text) - self._dead_entities,
            "relations": len(self.rel_text),
            "edges": len(self.edge_hrt) - self._dead_edges,
            "runs": len(self.runs), "fact_runs": counts["F"], "question_runs": counts["Q"],
            "answer_runs": counts["A"], "entity_symbols": len(self.ent_text), "documents": len(self.indexed_docs),
        }

    def consolidate(self, kg: "KnowledgeGraph", *, alias_threshold: float = ALIAS_THRESHOLD,
                    entity_budget: int | None = None, layer2_min_cos: float = LAYER2_FLOOR, kmeans_iter: int = 8,
                    block: int = 2048) -> dict[str, int]:
        """Merge alias entities, remap edges and runs, and keep one of identical fact runs (several
        documents can yield the same); returns counts of what was merged.

        Layer 1 (always): every live entity not yet checked is compared with all live entities;
        pairs at cosine ≥ ``alias_threshold`` are united (union-find; the oldest id represents).
        Layer 2 (only while the live count exceeds ``entity_budget``): k-means with k = 90 % of the
        budget (deterministic init: evenly spaced live entities) groups candidates; within a
        cluster, pairs at cosine ≥ ``layer2_min_cos`` (the floor) merge, the most similar first,
        each merged entity within the floor of its representative (see :meth:`_layer2_moves`), and
        merging stops as soon as the live count is at the budget. The budget is a ceiling: with too
        few pairs above the floor the codebook stays over it (``over_budget`` in the report; layer 2
        is retried once the codebook has grown by :data:`LAYER2_RETRY` of the budget).
        """
        nothing = {"aliases_layer1": 0, "merged_layer2": 0, "edges_dropped": 0, "runs_dropped": 0, "over_budget": 0}
        if self.checked_entities >= len(self.ent_text) and not self._layer2_due(entity_budget):
            over = self.size()["entities"] - entity_budget if entity_budget is not None else 0
            return {**nothing, "runs_dropped": self._collapse_fact_runs(()) if self._f_unchecked else 0,
                    "over_budget": max(0, over)}
        vecs = self.entity_vectors(kg)
        is_live = self._resolved_reps("ent") == np.arange(len(self.ent_rep))
        live = np.flatnonzero(is_live)
        parent: dict[int, int] = {}  # union-find over the entities that take part in a union

        def find(x: int) -> int:
            root = x
            while parent.get(root, root) != root:
                root = parent[root]
            while parent.get(x, x) != root:  # path compression
                parent[x], x = root, parent[x]
            return root

        def union(a: int, b: int) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                lo, hi = (ra, rb) if ra < rb else (rb, ra)
                parent[hi] = lo

        merged1 = merged2 = 0
        new = live[live >= self.checked_entities]
        if len(new) and len(live) > 1:
            for off in range(0, len(new), block):
                rows = new[off:off + block]
                sims = self._layer1_sims(vecs, rows, len(is_live))   # all slots, dead ones skipped below
                hit_r, hit_c = np.nonzero(sims >= alias_threshold)
                for r, c in zip(hit_r.tolist(), hit_c.tolist()):
                    a = int(rows[r])
                    if a != c and is_live[c] and self._same_numbers(a, c):
                        union(a, c)
        self.checked_entities = len(self.ent_text)
        self._sim_rows.clear()
        moved = {i: r for i in sorted(parent) if (r := find(i)) != i}   # entity → its representative
        merged1 = len(moved)
        left = 0
        if entity_budget is not None:
            reps = live[~np.isin(live, np.fromiter(moved, dtype=np.int64, count=len(moved)))]
            if len(reps) > entity_budget and self._layer2_due(entity_budget, len(reps)):
                move = self._layer2_moves(vecs, reps, entity_budget, layer2_min_cos, kmeans_iter, block,
                                          self._same_numbers)
                merged2 = len(move)
                self.last_layer2 = [(m, r, float(vecs[m] @ vecs[r])) for m, r in move.items()]
                left = max(0, len(reps) - merged2 - entity_budget)
                self._layer2_left_at = len(reps) - merged2 if left else None
                moved = {i: move.get(r, r) for i, r in moved.items()}
                moved.update(move)  # representatives that join a medoid
            else:
                left = max(0, len(reps) - entity_budget)
        if not moved:
            return {**nothing, "runs_dropped": self._collapse_fact_runs(()) if self._f_unchecked else 0,
                    "over_budget": left}
        for i, r in moved.items():
            self.ent_rep[i] = r
            self._dead_entities += 1
            self._dirty["E"].add(i // self.page)
        self._merges += 1
        return {"aliases_layer1": merged1, "merged_layer2": merged2, **self._remap_edges(set(moved)),
                "over_budget": left}

    def _layer2_due(self, budget: int | None, live: int | None = None) -> bool:
        """Whether layer 2 should run: over budget, and (after a pass that could not get under it)
        grown by :data:`LAYER2_RETRY` of the budget since, so k-means is not redone per new symbol."""
        live = self.size()["entities"] if live is None else live
        if budget is None or live <= budget:
            return False
        last = self._layer2_left_at
        return last is None or live >= last + max(1, int(budget * LAYER2_RETRY))

    def _same_numbers(self, a: int, b: int) -> bool:
        """Whether entities ``a`` and ``b`` hold the same numbers: an embedding puts "Apollo 11" and
        "Apollo 12", "1998" and "1999" as close as aliases, but a different number names another
        thing, so consolidation never merges them."""
        return _DIGITS.findall(self.ent_text[a]) == _DIGITS.findall(self.ent_text[b])

    @staticmethod
    def _layer2_moves(vecs: np.ndarray, reps: np.ndarray, budget: int, floor: float, iters: int,
                      block: int, compatible: Callable[[int, int], bool] = lambda a, b: True) -> dict[int, int]:
        """Layer-2 merges (entity → representative), at most ``len(reps) - budget`` of them.

        k-means (k = 90 % of the budget) only narrows the search: pairs are compared within a
        cluster. Pairs at cosine ≥ ``floor`` are taken most similar first (ties: lower ids); a pair
        merges the newer entity into the older when the newer one represents nobody and the older
        one is merged into nobody (else the other way round), so every merged entity is within the
        floor of its representative: groups are stars, never chains that drift into another meaning.
        Pairs ``compatible`` refuses (different numbers) never merge.
        """
        k = max(1, int(budget * 0.9))
        assign, _ = _kmeans_medoids(vecs[reps], k, iters, block)
        cand_s: list[np.ndarray] = []
        cand_a: list[np.ndarray] = []
        cand_b: list[np.ndarray] = []
        order = np.argsort(assign, kind="stable")
        bounds = np.flatnonzero(np.diff(assign[order])) + 1
        for members in np.split(order, bounds):
            if len(members) < 2:
                continue
            ids = reps[members]
            sims = vecs[ids] @ vecs[ids].T
            i, j = np.nonzero(np.triu(sims >= floor, 1))
            if len(i):
                cand_s.append(sims[i, j])
                cand_a.append(ids[i])
                cand_b.append(ids[j])
        if not cand_s:
            return {}
        sim, lo, hi = (np.concatenate(x) for x in (cand_s, cand_a, cand_b))
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        limit = len(reps) - budget
        move: dict[int, int] = {}
        has_members: set[int] = set()
        for p in np.lexsort((hi, lo, -sim)).tolist():
            if len(move) >= limit:
                break
            a, b = int(lo[p]), int(hi[p])
            if a in move or b in move or not compatible(a, b):
                continue
            for member, rep in ((b, a), (a, b)):   # the newer joins the older when it can
                if member not in has_members:
                    move[member] = rep
                    has_members.add(rep)
                    break
        return move

    def _remap_edges(self, moved: set[int]) -> dict[str, int]:
        """Rewrite the edges over ``moved`` entities onto representatives; where two live edges now
        have the same key the smallest id stays and the others merge into it. Runs holding a
        rewritten or merged edge are remapped, identical fact runs collapse into the first. Work is
        proportional to what the moved entities touch (entity → edges and edge → runs lookups)."""
        hrt, hrt_np = self.edge_hrt, self._hrt_np
        edges_of = self._edge_lookup()
        affected = sorted({e for m in moved for e in edges_of.get(m, ())
                           if self.edge_rep[e] == e and (hrt[e][0] in moved or hrt[e][2] in moved)})
        groups: dict[tuple[int, int, int], list[int]] = {}
        for e in affected:
            h, r, t = hrt[e]
            key = (self.resolve_entity(h), r, self.resolve_entity(t))
            hrt[e] = key
            if hrt_np is not None and e < len(hrt_np):
                hrt_np[e] = key
            for x in {key[0], key[2]} - {h, t}:
                edges_of.setdefault(x, []).append(e)
            self._line_valid[e] = False
            self._line_todo[e] = None
            self._dirty["M"].add(e // self.page)
            groups.setdefault(key, []).append(e)
        for m in moved:   # a merged entity is never named by a live edge again
            edges_of.pop(m, None)
        touched = set(affected)
        dropped = 0
        for key, members in groups.items():
            other = self.edge_index.get(key)   # old keys of merged edges resolve through edge_rep
            if other is not None:
                other = self.resolve_edge(other)
                if other not in touched and self.edge_rep[other] == other and hrt[other] == key:
                    members = members + [other]
            keep, *rest = sorted(members)
            for e in rest:
                self.edge_rep[e] = keep
                self._dead_edges += 1
                self._line_todo.pop(e, None)
                self._dirty["M"].add(e // self.page)
                if not self.edge_kg[keep] and self.edge_kg[e]:
                    self.edge_kg[keep] = self.edge_kg[e]
                touched.add(e)
                dropped += 1
            self.edge_index[key] = keep
        if dropped:
            self._merges += 1
        runs_with = self._run_lookup()
        changed: list[Run] = []
        hit = {rid for e in touched for rid in runs_with.get(e, ())}
        self._index_dirty |= hit   # their index rows name moved entities or merged edges
        for rid in sorted(hit, key=lambda r: self.runs[r].seq):
            run = self.runs[rid]
            edges = list(dict.fromkeys(self.resolve_edge(e) for e in run.edges))
            if edges != run.edges:
                for e in set(run.edges) - set(edges):
                    runs_with[e].discard(rid)
                for e in edges:
                    runs_with.setdefault(e, set()).add(rid)
                run.edges = edges
                self.touch_run(run)
                changed.append(run)
        return {"edges_dropped": dropped, "runs_dropped": self._collapse_fact_runs(changed)}

    def _collapse_fact_runs(self, changed: Sequence[Run]) -> int:
        """Keep one of each set of identical fact runs (the first; the provenance of the others
        joins it). Only runs whose edges just ``changed`` can newly equal another, unless fact runs
        were added since the last collapse: then every fact run is compared."""
        if self._f_unchecked:
            first: dict[tuple[int, ...], Run] = {}
            groups: dict[tuple[int, ...], list[Run]] = {}
            for rid in self._by_channel["F"]:
                run = self.runs[rid]
                key = tuple(run.edges)
                had = first.setdefault(key, run)
                if had is not run:
                    groups.setdefault(key, [had]).append(run)
            self._f_unchecked = False
        else:
            runs_with = self._run_lookup()
            groups = {}
            for run in changed:
                if run.channel == "F" and run.id in self.runs and run.edges:
                    key = tuple(run.edges)   # an identical run holds every edge: look under the rarest
                    rarest = min(run.edges, key=lambda e: len(runs_with.get(e, ())))
                    groups[key] = sorted((self.runs[r] for r in runs_with.get(rarest, ())
                                          if self.runs[r].channel == "F" and tuple(self.runs[r].edges) == key),
                                         key=lambda r: r.seq)
        dropped = 0
        for keep, *rest in (g for g in groups.values() if len(g) > 1):
            for run in rest:   # an identical fact run: keep one, union the provenance
                keep.chunks = list(dict.fromkeys(keep.chunks + run.chunks))
                keep.provenance = sorted({p["doc"]: p for p in keep.provenance + run.provenance}.values(),
                                         key=lambda p: p["doc"])
                self.fact_runs_changed += 1
                self.touch_run(keep)
                if run.doc in self.indexed_docs:
                    self.indexed_docs[run.doc] = [keep.id if x == run.id else x for x in self.indexed_docs[run.doc]]
                    self._dirty_docs = True
                self.remove_run(run.id)
                dropped += 1
        return dropped

    def _edge_lookup(self) -> dict[int, list[int]]:
        if self._edges_of is None:
            self._edges_of = {}
            for e, (h, _, t) in enumerate(self.edge_hrt):
                for x in {h, t}:
                    self._edges_of.setdefault(x, []).append(e)
        return self._edges_of

    def _run_lookup(self) -> dict[int, set[str]]:
        if self._runs_with is None:
            self._runs_with = {}
            for run in self.runs.values():
                for e in run.edges:
                    self._runs_with.setdefault(e, set()).add(run.id)
        return self._runs_with

    def validate(self) -> list[str]:
        """Problems found (empty when consistent): every run edge must resolve to a live edge."""
        problems = []
        n = len(self.edge_hrt)
        for run in self.runs.values():
            for e in run.edges:
                if not 0 <= e < n:
                    problems.append(f"run {run.id} points at missing edge {e}")
                elif self.edge_rep[e] != e:
                    problems.append(f"run {run.id} points at merged edge {e}")
        for e, (h, _, t) in enumerate(self.edge_hrt):
            if self.edge_rep[e] == e and (self.ent_rep[h] != h or self.ent_rep[t] != t):
                problems.append(f"edge {e} points at a merged entity")
        return problems

    # ------------------------------------------------------------------ persistence
    def mark_all_dirty(self) -> None:
        """Have the next :meth:`save` rewrite every page, not only the changed ones."""
        self._dirty_all = True

    def save(self, store: "BaseStore") -> int:
        """Write dirty pages and the meta record in one ``store.batch``; returns the number of
        items written."""
        from langgraph.store.base import PutOp

        from langgraph_kgmem.memory import namespace

        ns = namespace(self.kg_name, "codebook", self.scope)
        page = self.page
        # rows are tuples of strings and ints: Python's cyclic GC stops tracking such tuples, so
        # pages rewritten on every question do not make it walk the whole codebook more often
        tables: dict[str, Callable[[int, int], list[Any]]] = {
            "E": lambda a, b: list(zip(self.ent_text[a:b], self.ent_kg[a:b], self.ent_rep[a:b])),
            "R": lambda a, b: self.rel_text[a:b],
            "M": lambda a, b: [(*hrt, kg_id, rep) for hrt, kg_id, rep in
                               zip(self.edge_hrt[a:b], self.edge_kg[a:b], self.edge_rep[a:b])],
        }
        sizes = {"E": len(self.ent_text), "R": len(self.rel_text), "M": len(self.edge_hrt)}
        ops: list[PutOp] = []
        for name, rows_of in tables.items():
            pages = range((sizes[name] + page - 1) // page) if self._dirty_all else sorted(self._dirty[name])
            ops += [PutOp(ns, f"{name}:{p:06d}", {"rows": rows_of(p * page, min(sizes[name], (p + 1) * page))},
                          index=False) for p in pages]
        run_pages = range(self.run_counter // page + 1) if self._dirty_all else sorted(self._dirty["runs"])
        resting: dict[str, list[dict[str, str]]] = {}   # run page → the provenance of its runs
        for p in run_pages:  # a page holds the runs with seq in [p·page, (p+1)·page)
            runs = [self.runs[r] for r in (self._by_seq.get(seq) for seq in range(p * page, (p + 1) * page)) if r]
            ops.append(PutOp(ns, f"runs:{p:06d}", {"runs": [r.to_json() for r in runs]}, index=False))
            resting[f"runs:{p:06d}"] = [x for r in runs for x in r.provenance]
        if self._dirty_docs or self._dirty_all:  # doc → run ids changes only when documents are indexed
            ops.append(PutOp(ns, "docs", {"indexed_docs": self.indexed_docs, "doc_hashes": self.doc_hashes},
                             index=False))
        revision = self.revision + 1
        ops.append(PutOp(ns, "meta", {
            "format": FORMAT, "revision": revision, "run_counter": self.run_counter, "page": page,
            "checked_entities": self.checked_entities, "sizes": sizes, "history": self.history[-200:],
            "fact_runs_unchecked": self._f_unchecked,
        }, index=False))
        # the revision alone, so that checking for a newer codebook does not parse the whole meta
        ops.append(PutOp(ns, "revision", {"revision": revision}, index=False))
        # the documents each page's runs rest on (once per page and document in this process),
        # written before the pages: a first sync writes one entry per document, and PostgreSQL takes
        # at most 65,535 values in the one statement a batch becomes. The entries are idempotent,
        # and one naming a page that does not rest on its document costs an invalidation nothing.
        fresh = {(k, p["doc"]) for k, prov in resting.items() for p in prov} - self._indexed
        entries = index_ops(self.kg_name, self.scope, "codebook",
                            {k: [{"doc": d} for kk, d in sorted(fresh) if kk == k] for k in resting})
        for start in range(0, len(entries), INDEX_OPS_PER_BATCH):
            store.batch(entries[start:start + INDEX_OPS_PER_BATCH])
        store.batch(ops)
        self._indexed |= fresh
        self.revision = revision
        self._dirty = {"E": set(), "R": set(), "M": set(), "runs": set()}
        self._dirty_all = self._dirty_docs = False
        return len(ops) + len(entries) - 1

    @staticmethod
    def stored_revision(store: "BaseStore", kg_name: str, scope: Sequence[str] = ()) -> int | None:
        """The revision of the codebook stored for ``kg_name`` in ``scope`` (None when there is none), read
        without loading it: how a session finds that another one saved a newer codebook."""
        from langgraph_kgmem.memory import namespace

        ns = namespace(kg_name, "codebook", scope)
        item = store.get(ns, "revision") or store.get(ns, "meta")  # "meta" alone: written by an older version
        return revision_of(item, kg_name, scope)

    @classmethod
    @refuse_corrupt
    def load(cls, store: "BaseStore", kg_name: str, scope: Sequence[str] = ()) -> "Codebook":
        """The codebook stored for ``kg_name`` in tenant ``scope`` (an empty one when there is none)."""
        from langgraph_kgmem.memory import list_items, namespace

        book = cls(kg_name, scope)
        ns = namespace(kg_name, "codebook", scope)
        items = {it.key: it.value for it in list_items(store, ns)}
        meta = items.get("meta")
        if meta is None:
            return book
        if meta.get("format") != FORMAT:
            raise ValueError(f"codebook of KG {kg_name!r} has format {meta.get('format')!r}, expected {FORMAT}")
        book.page = int(meta.get("page", LEGACY_PAGE))   # its pages keep the size they were written with

        def rows(prefix: str) -> list[Any]:
            out: list[Any] = []
            for key in sorted(k for k in items if k.startswith(prefix + ":")):
                out.extend(items[key]["rows"])
            return out

        for text, kg_id, rep in rows("E"):
            i = len(book.ent_text)
            book.ent_text.append(text)
            book.ent_kg.append(kg_id)
            book.ent_rep.append(int(rep))
            book.ent_index.setdefault(normalize_name(text), i)
        for text in rows("R"):
            book.rel_index.setdefault(text.lower(), len(book.rel_text))
            book.rel_text.append(text)
        for h, r, t, kg_id, rep in rows("M"):
            e = len(book.edge_hrt)
            book.edge_hrt.append((int(h), int(r), int(t)))
            book.edge_kg.append(kg_id)
            book.edge_rep.append(int(rep))
            book.edge_index.setdefault((int(h), int(r), int(t)), e)
        check_links(book)   # before any representative is followed below
        book._line_valid = [False] * len(book.edge_hrt)
        book._line_todo = dict.fromkeys(e for e in range(len(book.edge_hrt)) if book.edge_rep[e] == e)
        book._dead_entities = sum(1 for i, r in enumerate(book.ent_rep) if r != i)
        book._dead_edges = sum(1 for i, r in enumerate(book.edge_rep) if r != i)
        for e in range(len(book.edge_hrt)):
            if book.edge_rep[e] != e:
                book.edge_index[book.edge_hrt[e]] = book.resolve_edge(e)
        runs = []
        for key in sorted(k for k in items if k.startswith("runs:")):
            runs.extend(Run.from_json(d) for d in items[key]["runs"])
        for run in sorted(runs, key=lambda r: r.seq):
            book.runs[run.id] = run
            book._by_channel[run.channel][run.id] = None
            book._by_seq[run.seq] = run.id
        book.run_counter = int(meta["run_counter"])
        book.checked_entities = int(meta.get("checked_entities", 0))
        book._f_unchecked = bool(meta.get("fact_runs_unchecked", True))
        docs_record = items.get("docs") or meta   # in meta: written by an older version
        book.indexed_docs = {k: list(v) for k, v in docs_record.get("indexed_docs", {}).items()}
        book.doc_hashes = {k: str(v) for k, v in docs_record.get("doc_hashes", {}).items()}
        book.history = list(meta.get("history", []))
        book.revision = int(meta["revision"])
        return book


def _check_symbol(kind: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise KgmemInputError(f"a codebook {kind} is at most {limit} characters, got {len(text)} "
                              f"({text[:60]!r}...): shorten it, or leave the triple out")


def _appended(bufs: dict[str, np.ndarray], key: str, arr: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """``arr`` followed by ``extra``, written in place behind ``arr`` when ``arr`` heads the buffer
    ``bufs[key]`` and it has room (a full or foreign buffer is replaced by one half as large again):
    appending a few rows per question costs those rows, not a copy of the whole index. Earlier
    views stay valid: only slots behind their ends are written."""
    buf, n, m = bufs.get(key), len(arr), len(extra)
    if buf is None or arr.base is not buf or n + m > len(buf):
        buf = np.empty(max(n + m, n + n // 2 + 64), dtype=arr.dtype)
        buf[:n] = arr
        bufs[key] = buf
    buf[n:n + m] = extra
    return buf[:n + m]


def _short_columns(kg: "KnowledgeGraph", mat: np.ndarray) -> np.ndarray:
    """Codebook vectors keep only the columns a short text fills (``fast``: the static block, a
    third of the width; the rest is zero): every codebook score compares short texts with each
    other, so the cosines are the same and the matrix products cheaper."""
    block = short_block(kg.embeddings)
    return np.ascontiguousarray(mat[:, block]) if block is not None else mat


def _raw_rows(runs: Sequence[Run]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(ids, their edges flat, edges per run) of the ``runs`` that hold edges."""
    runs = [r for r in runs if r.edges]
    lens = np.fromiter((len(r.edges) for r in runs), dtype=np.int64, count=len(runs))
    raw = np.fromiter((e for r in runs for e in r.edges), dtype=np.int64, count=int(lens.sum()))
    return [r.id for r in runs], raw, lens


def _resolved(rep: Sequence[int]) -> np.ndarray:
    """Final representative of every slot of a representative-pointer list (pointer jumping)."""
    out = np.asarray(rep, dtype=np.int64)
    while len(out):
        nxt = out[out]
        if np.array_equal(nxt, out):
            break
        out = nxt
    return out


def _kmeans_medoids(x: np.ndarray, k: int, iters: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means with evenly spaced initial centres (deterministic); returns each row's
    cluster and each cluster's medoid row (the member closest to the centre)."""
    n = len(x)
    k = min(k, n)
    centres = x[np.linspace(0, n - 1, k).astype(np.int64)].astype(np.float32).copy()
    assign = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        for off in range(0, n, block):
            assign[off:off + block] = np.argmax(x[off:off + block] @ centres.T, axis=1)
        sums = np.zeros_like(centres)
        np.add.at(sums, assign, x)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        nonempty = norms[:, 0] > 0
        centres[nonempty] = sums[nonempty] / norms[nonempty]
    sim = np.einsum("ij,ij->i", x, centres[assign])
    medoid = np.full(k, -1, dtype=np.int64)
    best = np.full(k, -np.inf)
    for i in range(n):  # first best member wins: deterministic
        c = assign[i]
        if sim[i] > best[c]:
            best[c], medoid[c] = sim[i], i
    return assign, medoid
