"""Candidate spans of the offline answer step beyond names, dates and plain numbers
(:mod:`~langgraph_kgmem.graphs.answering`): a kind asked with a common noun, a rank, and a part of
a place.

Each rule reads what the question asks from its words and forms the matching spans of an
evidence sentence, typed and scored like the step's other candidates:

- **A kind** (:func:`kind_asked`, :func:`kind_phrases`): "What kind (type, sort) of university
  ..." asks for a kind of university, not a named one: the lower-case noun phrases that end in the
  category noun (or its plural) with one to :data:`KIND_MODIFIERS` words before it ("the state's
  sole land-grant university" -> "land-grant university", "ancillary products"). A capitalised
  name weighs :data:`FIT_NAME_FOR_KIND` for such a question.
- **A rank** (:data:`RANK_HEADS`, :func:`rank_head`, :func:`ordinals`): "What is the population
  ranking of ..." asks for an ordinal ("the 12th most populous"), not a count.
- **A part of a place** (:func:`asks_part`, :func:`with_direction`): "What part of the state ..."
  wants the direction the evidence writes before the place ("in western New York"); a place
  without one weighs :data:`FIT_NO_PART`.

Limits: the kinds are read from the question's words only, and a kind's phrase must end in the
question's own category noun, so "bomber" never answers "what kind of plane".
"""

from __future__ import annotations

import re

from langgraph_kgmem.graphs.common import STOPWORDS

FIT_NAME_FOR_KIND = 0.15   # type fit of a capitalised name for a question that asks for a kind
FIT_NO_PART = 0.5          # type fit of a place without a direction word for "what part of ..."
KIND_MODIFIERS = 3         # words before the category noun kept in a kind's phrase

RANK_HEADS = frozenset("ranking rank".split())
DIRECTIONS = frozenset("""north south east west northern southern eastern western central northeast northwest
southeast southwest northeastern northwestern southeastern southwestern upstate downstate""".split())

_KIND = re.compile(r"\b(?:what|which) (?:kind|type|sort|form) of ([a-z]+)")
_PART = re.compile(r"\b(?:what|which) (?:part|portion|section) of\b")
_ORDINAL = re.compile(r"\b\d+(?:st|nd|rd|th)\b")
_LOWER_WORD = re.compile(r"[a-z][a-z-]*")
_SKIP = STOPWORDS | frozenset("""its his her their our my your sole only very most more one two three four five six
seven eight nine ten several many some all""".split())


def kind_asked(question: str) -> str:
    """The category noun of "what kind (type, sort, form) of <noun> ..." ("university"), or ""."""
    m = _KIND.search(question.lower())
    return m.group(1) if m else ""


def _plural_of(word: str, noun: str) -> bool:
    return word in (noun, noun + "s", noun + "es") or noun.endswith("y") and word == noun[:-1] + "ies"


def kind_phrases(noun: str, sentence: str) -> list[tuple[str, int, int]]:
    """``(text, start, end)`` of the lower-case phrases of ``sentence`` that name a kind of
    ``noun``: one to :data:`KIND_MODIFIERS` modifiers (no function word, possessive, count or "sole")
    and ``noun`` or its plural, written together."""
    out: list[tuple[str, int, int]] = []
    if not noun:
        return out
    words = list(_LOWER_WORD.finditer(sentence))
    for i, w in enumerate(words):
        if not _plural_of(w.group(), noun):
            continue
        j = i
        while j > 0 and i - j < KIND_MODIFIERS and words[j - 1].group() not in _SKIP \
                and sentence[words[j - 1].end():words[j].start()] == " ":
            j -= 1
        if j < i:
            out.append((sentence[words[j].start():w.end()], words[j].start(), w.end()))
    return out


def rank_head(words: list[str]) -> str:
    """The rank noun (:data:`RANK_HEADS`) among the five words after the question's "what" or
    "which" ("what is the population ranking ..." -> ranking), or ""."""
    for i, w in enumerate(words):
        if w in ("what", "which"):
            return next((x for x in words[i + 1:i + 6] if x in RANK_HEADS), "")
    return ""


def ordinals(sentence: str) -> list[tuple[str, int, int]]:
    """``(text, start, end)`` of the ordinals of ``sentence`` ("12th"), a rank's answers."""
    return [(m.group(0), m.start(), m.end()) for m in _ORDINAL.finditer(sentence)]


def asks_part(question: str) -> bool:
    """Whether ``question`` asks which part of a place ("What part of the state ... ?")."""
    return bool(_PART.search(question.lower()))


def with_direction(sentence: str, start: int, name: str) -> tuple[int, str]:
    """``(start, name)`` with the lower-case direction word the sentence writes right before the
    place ``name`` ("in western New York" -> "western New York"); unchanged when there is none."""
    m = re.search(r"([a-z]+) $", sentence[max(0, start - 20):start])
    if m and m.group(1) in DIRECTIONS:
        at = start - len(m.group(0))
        return at, sentence[at:start] + name
    return start, name
