"""Facts shown as sentences (``show="sentences"``): passages split into sentences, the sentences
the shown edges came from, and the facts block filled with the best-ranked sentences up to a
token budget (``sentence_budget``)."""

from __future__ import annotations

import math
import re
from functools import lru_cache, partial
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from langgraph_kgmem.graphs.autopruned.answer_typed import answer_bearing
from langgraph_kgmem.graphs.autopruned.codebook import Codebook
from langgraph_kgmem.graphs.autopruned.options import RELEVANCE_WEIGHTS
from langgraph_kgmem.graphs.common import content_words, dense_passages
from langgraph_kgmem.llm import count_tokens
from langgraph_kgmem.ranking import reciprocal_rank_fusion

_SENTENCE = re.compile(r"[.!?][\"')\]]*(\s+)(?=[A-Z0-9\"'(\[])")
_INITIAL = re.compile(r"(?:^|[\s(\[\"'])[A-Z]\.$")   # a piece ending in one capital and a period
_MARKER = re.compile(r"(?:\d{1,3}|[ivxIVX]{1,5}|[a-z])\.")   # a piece that is only a list marker: "2.", "iv.", "b."
# a piece ending in a title or abbreviation that stands before a name or number ("is Hon. Winnie
# Kiiza", "Mt. Everest", "No. 5"); not "Jr." / "Sr.", which often end a sentence
_ABBREVIATION = re.compile(r"(?:^|[\s(\[\"'])(?:Mr|Mrs|Ms|Dr|Hon|St|Mt|Ft|Gen|Col|Lt|Sgt|Capt|Maj|Adm|Rev|Prof|Gov|Sen|Rep|"
                           r"Fr|No|Nos|Vol|vs)\.$")


def split_sentences(text: str) -> list[tuple[int, str]]:
    """``(start offset, sentence)`` of a passage: cut after ``.!?`` before a capital, digit or quote,
    except after an initial ("written by K. A. Applegate"), a title or abbreviation before a name
    or number ("Hon. Winnie Kiiza", "Mt. Everest", "No. 5") or a bare list marker ("2. This species")."""
    out, start = [], 0
    for m in _SENTENCE.finditer(text):
        end = m.start(1)   # not a sentence end after an initial or a marker: the piece runs on
        if (_INITIAL.search(text[max(start, end - 3):end]) or _ABBREVIATION.search(text[start:end])
                or end - start <= 8 and _MARKER.fullmatch(text[start:end].strip())):
            continue
        out.append((start, text[start:end].strip()))
        start = m.end()
    out.append((start, text[start:].strip()))
    return [(a, t) for a, t in out if t]


def passage_sentences(kg: Any, cache: dict[str, list[tuple[int, str]]], cid: str) -> list[tuple[int, str]]:
    """A passage's sentences (:func:`split_sentences`), split once and kept in ``cache``."""
    if cid not in cache:
        node = kg.node(cid)
        cache[cid] = split_sentences(node.text) if node is not None else []
    return cache[cid]


def edge_sentence(sentences: Sequence[tuple[int, str]], head: str, tail: str) -> int | None:
    """Index of the sentence an edge came from: the first holding both its symbols, else the first
    holding its subject, else its object (case-insensitive); None when neither occurs."""
    h, t = head.lower(), tail.lower()
    lows = [x.lower() for _, x in sentences]
    for test in ((lambda x: h in x and t in x), (lambda x: h in x), (lambda x: t in x)):
        for i, x in enumerate(lows):
            if test(x):
                return i
    return None


def fact_sentences(book: Codebook, kg: Any, selected_f: Sequence[str], shown: Mapping[str, list[int]],
                   cache: dict[str, list[tuple[int, str]]]) -> list[dict[str, Any]]:
    """The source sentences of the shown edges of fact runs, one group per chunk in order of its best
    run (best first), sentences in text order: ``[{"chunk", "title", "sentences": [...], "runs"}]``."""
    groups: dict[str, dict[str, Any]] = {}
    for rid in selected_f:
        run = book.runs[rid]
        for cid in run.chunks[:1]:  # a fact run comes from one chunk (merged duplicates: the first)
            sents = passage_sentences(kg, cache, cid)
            if not sents:
                continue
            g = groups.setdefault(cid, {"chunk": cid, "title": (kg.node(cid).attrs.get("title") or ""),
                                        "picked": set(), "runs": []})
            g["runs"].append(rid)
            for e in shown.get(rid, run.edges):
                h, _, t = book.triple(e)
                i = edge_sentence(sents, h, t)
                if i is not None:
                    g["picked"].add(i)
    out = []
    for g in groups.values():
        if g["picked"]:
            sents = cache[g["chunk"]]
            out.append({"chunk": g["chunk"], "title": g["title"], "runs": g["runs"],
                        "sentences": [sents[i][1] for i in sorted(g["picked"])]})
    return out


_PARENS = re.compile(r"\s*\([^)]*\)\s*$")


def title_pattern(title: str) -> re.Pattern[str] | None:
    """The passage title as a whole-word, case-insensitive pattern, its trailing disambiguation
    ("Kiss and Tell (1945 film)" → "Kiss and Tell") dropped; None for a title under 4 characters
    (too short to name the passage's subject reliably)."""
    name = _PARENS.sub("", title or "").strip()
    if len(name) < 4:
        return None
    return re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.I)


def term_overlap(question: str, words: Sequence[set[str]]) -> np.ndarray:
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


def ranked_sentences(book: Codebook, kg: Any, question: str, selected_f: Sequence[str], shown: Mapping[str, list[int]],
                     cache: dict[str, list[tuple[int, str]]], vectors: dict[str, np.ndarray], budget: int,
                     rankings: Sequence[str] = ("relevance",), bridges: bool = True, dense_k: int = 0,
                     words: dict[str, list[set[str]]] | None = None,
                     weights: Mapping[str, float] | None = None,
                     passage_scores: Callable[[], tuple[list[str], np.ndarray]] | None = None,
                     cover: int = 0, dense_places: int = 0, answer_cover: int = 0,
                     max_sentence_tokens: int | None = None, clip: int | None = None) -> list[dict[str, Any]]:
    """The facts block filled sentence by sentence up to ``budget`` tokens (``sentence_budget``).

    Candidates: every sentence of the passages the selected fact runs come from, then of vector
    search's top ``dense_k`` passages not among them. Each is ranked by reciprocal-rank fusion of
    up to four orders (``rankings``): ``"relevance"`` — the ``"question"`` cosine plus ``weights``
    (default :data:`RELEVANCE_WEIGHTS`) × (its passage's cosine with the question, the IDF-weighted
    share of the question's content words it holds, 1 for a document's first sentence), and
    ``weights["answer"]`` × its answer-typed share (:func:`~langgraph_kgmem.graphs.autopruned.answer_typed.answer_bearing`)
    in the order that fills the budget only, never in the passage places;
    ``"question"`` — cosine of the sentence, read with its passage title in front (so "She was born
    ..." is about the title), with the question; ``"edges"`` — the sentences the runs' shown edges
    came from, in run order (what the codebook matched); ``"passages"`` — passage order (best run first), sentences in text order
    (a passage's defining sentence comes first). With ``bridges``, a sentence taken that names
    another candidate passage's title brings that passage's best sentence right after it. The
    order is taken greedily: a sentence is added when it fits the budget (its tokens plus its passage title's, once), a repeated sentence
    never; the best sentence is kept even alone over the budget. With ``cover``, the best sentence
    of each of the first ``cover`` passages goes in first (then the ranked order): the passages the
    ranking puts on top are all in the prompt. With ``dense_places`` N, vector search's top N
    passages (those among the candidates) hold the first N places, in its order, and the others
    follow by their best sentence: the fine ranking's passages then add to vector search's top N
    and never push one of them out. With ``answer_cover`` N, the best answer-typed sentence (one
    holding a candidate of the asked type, ``weights["answer"]`` above 0) of each of the first N
    passages goes in first, where it has one: a shown passage's answer sentence is not crowded out
    by sentences that restate the question. With ``max_sentence_tokens``, a sentence longer than
    that (a flattened table, a list) is skipped (:func:`fill_budget`); with ``clip``, ranked whole but
    shown and counted as its first ``clip`` tokens (:func:`clip_sentence`). Groups as
    :func:`fact_sentences`, sentences in text order, but passages in the order of their best sentence in
    the ranking (the passage ranking the prompt shows, best first), each with its 0-based ``place``."""
    from langgraph_kgmem.embeddings.fast import block_cosines

    chunks: list[str] = []
    edge_order: list[tuple[str, int]] = []
    for rid in selected_f:
        run = book.runs[rid]
        for cid in run.chunks[:1]:
            if not passage_sentences(kg, cache, cid):
                continue
            if cid not in chunks:
                chunks.append(cid)
            for e in (shown.get(rid, run.edges) if "edges" in rankings else ()):
                h, _, t = book.triple(e)
                i = edge_sentence(cache[cid], h, t)
                if i is not None:
                    edge_order.append((cid, i))
    if dense_k or "relevance" in rankings:   # vector search's passage scores (the fine stage's, when given)
        ids, passage_cos = (passage_scores or partial(kg.similarity_scores, question, ("chunk",)))()
        for cid in dense_passages(kg, question, dense_k, (ids, passage_cos)) if dense_k else ():
            if passage_sentences(kg, cache, cid) and cid not in chunks:
                chunks.append(cid)
    if not chunks:
        return []
    titles = {c: ((n := kg.node(c)) is not None and n.attrs.get("title")) or "" for c in chunks}
    todo = [c for c in chunks if c not in vectors]
    if todo:  # one batch for the passages no earlier question read
        texts = [f"{titles[c]}: {x}" if titles[c] else x for c in todo for _, x in cache[c]]
        mat = kg.embed_texts(texts)
        mat = mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
        cuts = np.cumsum([0] + [len(cache[c]) for c in todo]).tolist()
        vectors.update({c: mat[cuts[j]:cuts[j + 1]] for j, c in enumerate(todo)})
    cands = [(c, i) for c in chunks for i in range(len(cache[c]))]
    orders: list[list[tuple[str, int]]] = []
    # the relevance order with the "answer" term (the fill order), each sentence's answer-typed share (> 0)
    typed, bearing = [], {}
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
                 + w["terms"] * term_overlap(question, [words[c][i] for c, i in cands])
                 + w["lead"] * np.array([float(i == 0 and lead[c]) for c, i in cands]))
        orders.append([cands[j] for j in np.argsort(-score, kind="stable").tolist()])
        if w["answer"]:   # the answer step's candidates, read over the passages in this order: the fill order only
            share = answer_bearing(question, list(dict.fromkeys(c for c, _ in orders[0])), titles, cache, cands)
            bearing = {x: float(v) for x, v in zip(cands, share.tolist()) if v > 0}
            score = score + w["answer"] * share
            typed = [cands[j] for j in np.argsort(-score, kind="stable").tolist()]
    if "question" in rankings:
        orders.append([cands[j] for j in np.argsort(-cos, kind="stable").tolist()])
    if "edges" in rankings and edge_order:
        orders.append(list(dict.fromkeys(edge_order)))
    if "passages" in rankings or not orders:
        orders.append(cands)
    ranked = [x for x, _ in reciprocal_rank_fusion(orders)]
    filling = [x for x, _ in reciprocal_rank_fusion([typed, *orders[1:]])] if typed else ranked
    best: dict[str, tuple[str, int]] = {}
    for x in ranked:       # each passage's best sentence; passages placed in the order of theirs
        best.setdefault(x[0], x)
    order = list(best)
    if dense_places:   # vector search's top passages first, in its order
        ids, passage_cos = (passage_scores or partial(kg.similarity_scores, question, ("chunk",)))()
        top = [c for c in dense_passages(kg, question, dense_places, (ids, passage_cos)) if c in best]
        order = top + [c for c in order if c not in top]
    place = {c: n for n, c in enumerate(order)}
    lead = answer_lead(filling, bearing, order[:answer_cover]) + [best[c] for c in order[:cover]]
    shown = cache if clip is None else {c: [(a, clip_sentence(x, clip)) for a, x in cache[c]] for c in chunks}
    picked = fill_budget([*lead, *filling], chunks, titles, shown, budget, bridges, max_sentence_tokens)
    runs_of: dict[str, list[str]] = {}
    for rid, cid in ((r, c) for r in selected_f for c in book.runs[r].chunks[:1]):
        runs_of.setdefault(cid, []).append(rid)
    return [{"chunk": c, "title": titles[c], "runs": runs_of.get(c, []), "place": place[c],
             "sentences": [shown[c][i][1] for i in sorted(picked[c])]}
            for c in sorted((c for c in chunks if c in picked), key=place.get)]


CLIP_MARK = " …"


@lru_cache(maxsize=16384)   # every question clips the sentences of every passage it shows again
def clip_sentence(text: str, limit: int) -> str:
    """``text`` itself when it has at most ``limit`` tokens, else its longest run of leading words
    that with :data:`CLIP_MARK` (" …", marking the cut) fits ``limit`` tokens (at least one word)."""
    if count_tokens(text) <= limit:
        return text
    words = text.split()
    lo, hi = 1, len(words)
    while lo < hi:   # tokens only grow with words: the most words that fit, by bisection
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid]) + CLIP_MARK) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]) + CLIP_MARK



def answer_lead(filling: Sequence[tuple[str, int]], bearing: Mapping[tuple[str, int], float],
                passages: Sequence[str]) -> list[tuple[str, int]]:
    """``sentence_answer_cover``: the first answer-typed sentence (in ``bearing``) in the fill order
    of each of ``passages``, where it has one, in their order."""
    first: dict[str, tuple[str, int]] = {}
    for x in filling:
        if x in bearing:
            first.setdefault(x[0], x)
    return [first[c] for c in passages if c in first]


def fill_budget(ranked: Sequence[tuple[str, int]], chunks: Sequence[str], titles: Mapping[str, str],
                cache: Mapping[str, list[tuple[int, str]]], budget: int, bridges: bool,
                max_tokens: int | None = None) -> dict[str, set[int]]:
    """Sentences taken greedily in ``ranked`` order while they fit ``budget`` tokens (each costs
    its tokens, plus its passage title's once); a repeated sentence never, the first one even alone
    over the budget. With ``max_tokens``, a sentence of more tokens is skipped (unless no other is
    taken: then the first of them). Chunk id → the indices of its sentences taken.

    With ``bridges``, a sentence naming another candidate passage's subject (its title) brings that
    passage's best sentence next — the second hop of a bridge question ("... starring Shirley
    Temple" → the Shirley Temple passage's sentence closest to the question)."""
    names = {c: title_pattern(titles[c]) for c in chunks} if bridges else {}
    best: dict[str, tuple[str, int]] = {}
    for c, i in ranked:
        best.setdefault(c, (c, i))
    picked: dict[str, set[int]] = {}
    seen: set[str] = set()
    bridged: set[str] = set()
    pending: list[tuple[str, int]] = []
    used = 0
    too_long: tuple[str, int] | None = None
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
        own = count_tokens(text)
        if max_tokens is not None and own > max_tokens:
            too_long = too_long or nxt
            continue
        cost = own + 1 + (0 if c in picked else count_tokens(f"[{titles[c]}]") + 1)
        if picked and used + cost > budget:
            continue
        seen.add(key)
        picked.setdefault(c, set()).add(i)
        used += cost
        bridged.add(c)
        hops = [b for b in chunks if b not in bridged and names.get(b) is not None and names[b].search(text)]
        bridged.update(hops)
        pending[:0] = [best[b] for b in hops if b in best]
    if not picked and too_long is not None:   # nothing short enough: the best one, as without the cap
        picked[too_long[0]] = {too_long[1]}
    return picked
