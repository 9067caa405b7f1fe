"""Span rules of the offline answer step (:mod:`~langgraph_kgmem.graphs.answering`): which date a
question asks for and how much of a span to return.

F1 against a short gold answer punishes every extra word, so the step returns the part of a span
the question asks for:

- **A year question** ("In what year ...", "... born in which year?") is answered with the year
  alone: "December 10, 1962" answers "1962" (:func:`asks_year`, :func:`year_of`).
- **A life date** (:func:`life_event`, :func:`life_fit`): a question that asks when someone was
  born (or died) wants the date that the evidence gives as a birth (death): the date after
  "born" (after "died"), or the first (second) date of an encyclopaedic "(3 June 1865 – 20
  January 1936)". A date given as the other event is a poor fit, and a date given as no life
  event at all ("published in 1967") a poorer one than the one asked. Only a question whose own verb
  is the life event counts: "the city where X was born" names a hop, not what is asked; for a date
  question that asks no life event, a date the evidence gives as a birth or a death is a poorer fit
  (:func:`unasked_life_fit`).
- **What a number counts** (:func:`count_cues`, :func:`count_fit`): "how many tournaments" wants
  a number with "tournaments" beside it ("won 230 tournaments"), "what amount of TEUs" one with
  "TEUs" beside it (:func:`amount_cues`), "what was the population" a
  number beside "population", "inhabitants" or "residents"; a number with none of them near is a
  poorer fit (:data:`FIT_COUNT_OTHER`).
- **The question's focus** (:func:`question_focus`, :func:`near_focus`): the words right next to
  the question word say what the answer stands beside: "... founded in what year?" wants the year
  beside "founded" ("VCU was founded in 1838"), not one beside another of the question's words
  ("the first season since 1984"); "What year was the brother of ... drafted?" wants the year
  beside "drafted", the question's last words when the last is a participle (not "... the
  observatory's first director?", a hop). A span with no focus word within :data:`FOCUS_NEAR`
  words either side weighs :data:`FOCUS_MISS`.
- **A person's name without its office** (:func:`strip_title`): "New York Governor Nelson
  Rockefeller" answers "Nelson Rockefeller"; the office words (:data:`TITLE_WORDS`) before the
  last two or more capitalised name words are cut.

Limits: the life-date reading knows English encyclopaedic forms only ("born", "died", a
parenthesised range); a title is cut only when a name of at least two words remains.
"""

from __future__ import annotations

import re
from typing import Literal

from langgraph_kgmem.graphs.common import STOPWORDS

LifeEvent = Literal["birth", "death", ""]

FIT_LIFE_OTHER = 0.3    # type fit of a date the evidence gives as another event than the one asked
FIT_LIFE_UNPLACED = 0.4  # type fit of a date the evidence gives as no life event, for a birth/death question
FIT_LIFE_UNASKED = 0.5   # type fit of a birth or death date for a date question that asks no life event
FIT_COUNT_OTHER = 0.5   # type fit of a number with none of the question's counted words beside it
FOCUS_MISS = 0.7       # type fit of a span with none of the question's focus words near it
FOCUS_NEAR = 6         # words either side of a span searched for a focus word
COUNT_NEAR = 3          # words after a number (and before it, one more) searched for a counted word

TITLE_WORDS = frozenset("""President Vice Governor Senator Congressman Congresswoman Representative Mayor King Queen
Prince Princess Emperor Empress Duke Duchess Lord Lady Sir Dame Dr Dr. Mr Mr. Mrs Mrs. Ms Ms. Prof Prof. Professor
General Gen. Major Colonel Col. Captain Capt. Lieutenant Admiral Sergeant Commander Marshal Chancellor Minister Prime
Secretary Ambassador Judge Justice Chief Bishop Archbishop Cardinal Pope Saint Reverend Rev. Republican Democrat
Democratic Independent Coach Chairman CEO Director Sheriff Pastor Rabbi Imam Sultan Sheikh Shah Tsar Czar""".split())

_WORD = re.compile(r"[a-z0-9]+")
_YEAR_IN = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_ASKS_YEAR = re.compile(r"\b(?:what|which) year\b|\byear (?:of|did|was|were|when)\b|\bborn in (?:what|which) year\b")
_BIRTH_END = re.compile(r"\bborn\s*[?.!]*\s*$|\b(?:date|year) of (?:his |her |their )?birth\b|\bbirth ?(?:date|day)\b")
_DEATH_END = re.compile(r"\b(?:die|died)\s*[?.!]*\s*$|\b(?:date|year) of (?:his |her |their )?death\b")
_WH = frozenset("what which when where who whom whose how".split())
_FOCUS_SKIP = STOPWORDS | frozenset("the a an of in on at to for by with from type kind name".split())
_PARTICIPLES = frozenset("born built held made won sold set shot led run begun done found known".split())
_RANGE_DASH = re.compile(r"^\s*(?:[-–—]|to)\s*")


def asks_year(question: str) -> bool:
    """Whether ``question`` asks for a year ("What year ...", "In which year ...", "born in what
    year"), so that a full date answers with its year alone."""
    return bool(_ASKS_YEAR.search(question.lower()))


def year_of(span: str) -> str:
    """The last year in the date ``span`` ("March 14, 2000" -> "2000"), or ``span`` when it holds none."""
    years = _YEAR_IN.findall(span)
    return years[-1] if years else span


def life_event(question: str) -> LifeEvent:
    """``"birth"`` when ``question`` asks when someone was born ("When was X born?", "... born in
    which year?", "X's date of birth"), ``"death"`` when it asks when someone died, else ``""``."""
    low = question.lower().strip()
    if _BIRTH_END.search(low) or re.search(r"\bborn in (?:what|which) year\b", low):
        return "birth"
    if _DEATH_END.search(low) or re.search(r"\bdie[d]? in (?:what|which) year\b", low):
        return "death"
    return ""


def unasked_life_fit(event: LifeEvent, sentence: str, start: int, end: int) -> float:
    """The type-fit factor of a date for a date question that asks no life event (``event`` is
    ""): :data:`FIT_LIFE_UNASKED` for a date the evidence says is a birth or a death ("When did
    the country where X was born refuse ...?" is not answered with "born 9 August 1986"), else 1;
    1 for every date when the question asks a life event (:func:`life_fit` weighs those). Only the
    words "born" / "died" count here: a parenthesised range dates wars and reigns as well as lives
    ("(November 1917 – October 1922)")."""
    if event or not _stated_role(sentence, start):
        return 1.0
    return FIT_LIFE_UNASKED


def _stated_role(sentence: str, start: int) -> LifeEvent:
    """The life event the words right before the date at ``sentence[start:]`` name ("born",
    "b.", "died", "d."), or ``""``."""
    before = _WORD.findall(sentence[max(0, start - 30):start].lower())[-3:]
    if "born" in before or before[-1:] == ["b"]:
        return "birth"
    if {"died", "death", "d"} & set(before[-2:]):
        return "death"
    return ""


def date_role(sentence: str, start: int, end: int) -> LifeEvent:
    """What the date at ``sentence[start:end]`` is: a birth ("born 3 June 1865", the first date of
    "(3 June 1865 – 20 January 1936)"), a death ("died ...", the range's second date), or ``""``."""
    stated = _stated_role(sentence, start)
    if stated:
        return stated
    opened = sentence.rfind("(", 0, start)
    if opened < 0 or sentence.rfind(")", opened, start) >= 0:
        return ""
    inside = sentence[opened + 1:start]
    if _YEAR_IN.search(inside) and re.search(r"[-–—]\s*$|\bto\s*$", inside):
        return "death"     # the second date of a range
    closed = sentence.find(")", end)
    rest = sentence[end:closed if closed >= 0 else len(sentence)]
    if _RANGE_DASH.match(rest) and _YEAR_IN.search(rest):
        return "birth"     # the first date of a range
    return ""


def life_fit(event: LifeEvent, sentence: str, start: int, end: int) -> float:
    """The type-fit factor of a date for a question asking ``event``: 1 for a date the sentence
    gives as that event, :data:`FIT_LIFE_OTHER` for a date it gives as the other event (a death
    date for "When was X born?"), :data:`FIT_LIFE_UNPLACED` for a date it gives as no life event
    ("released in 1967" for "When was the author of the novel born?"); 1 for every date when the
    question asks no life event."""
    if not event:
        return 1.0
    role = date_role(sentence, start, end)
    if not role:
        return FIT_LIFE_UNPLACED
    return FIT_LIFE_OTHER if role != event else 1.0


_AMOUNT = re.compile(r"\b(?:what|which) (?:amount|number|quantity) of ([a-z]+)")
_POPULATION = ("population", "inhabitants", "residents", "people")


def _stem4(word: str) -> str:
    return word[:-1][:5] if word.endswith("s") and len(word) > 3 else word[:5]


def count_cues(question: str) -> frozenset[str]:
    """The (stemmed) words a number answering ``question`` should stand beside: the noun after
    "how many" / "how much", and the population words when the question asks for a population
    or inhabitants. Empty when the question names none."""
    words = _WORD.findall(question.lower())
    cues = set()
    for i, w in enumerate(words[:-2]):
        if w == "how" and words[i + 1] in ("many", "much"):
            cues.add(_stem4(words[i + 2]))
    if set(words) & {"population", "inhabitants", "residents"}:
        cues.update(_stem4(w) for w in _POPULATION)
    return frozenset(cues)


def amount_cues(question: str) -> frozenset[str]:
    """The (stemmed) word a number answering "what amount (number, quantity) of <noun> ..." should
    stand beside ("What amount of TEUs did the port handle?" -> TEUs), like :func:`count_cues`'s
    "how many <noun>"; empty when the question asks no such amount."""
    return frozenset(_stem4(m.group(1)) for m in _AMOUNT.finditer(question.lower()))


def count_fit(cues: frozenset[str], sentence: str, start: int, end: int) -> float:
    """The type-fit factor of the number at ``sentence[start:end]``: 1 when one of ``cues`` (see
    :func:`count_cues`) stands within :data:`COUNT_NEAR` words after it or one more before it
    ("230 tournaments", "a population of 9,984"), else :data:`FIT_COUNT_OTHER`; 1 with no cues."""
    if not cues:
        return 1.0
    after = _WORD.findall(sentence[end:end + 60].lower())[:COUNT_NEAR]
    before = _WORD.findall(sentence[max(0, start - 60):start].lower())[-(COUNT_NEAR + 1):]
    return 1.0 if {_stem4(w) for w in after + before} & cues else FIT_COUNT_OTHER


def question_focus(question: str) -> frozenset[str]:
    """The words of ``question`` next to its question word (its first word when that is one, else
    its last: a relative "which was founded" comes before the asking "in what year"), which the
    answer should stand beside:
    the content words among the four before a question word in the second half of the question
    ("... was founded in what year?" -> founded), else the last two content words among its last
    three when the last is a participle ("What year was the brother of ... drafted?" ->
    drafted; not "On which river is the birthplace of the observatory's first director?",
    whose last words describe a hop). Words of a name the question gives are never focus words
    ("Where was Marie Curie born?" -> born). Empty when it has no question word."""
    words = _WORD.findall(question.lower())
    # a name the question gives is no focus: its words stand beside every span of its own passage
    names = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", question)[1:] if w[:1].isupper()}
    skip = _FOCUS_SKIP | names
    at = 0 if words[:1] and words[0] in _WH else max((i for i, w in enumerate(words) if w in _WH), default=-1)
    if at < 0:
        return frozenset()
    if at > len(words) / 2:
        return frozenset(w for w in words[max(0, at - 4):at] if w not in skip)
    last = [w for w in words[-3:] if w not in skip][-2:]
    if not last or not (last[-1].endswith(("ed", "en")) or last[-1] in _PARTICIPLES):
        return frozenset()   # "... of the observatory's first director?" names a hop, not the event asked
    return frozenset(last)


def near_focus(focus: frozenset[str], sentence: str, start: int, end: int, same=str.__eq__) -> bool:
    """Whether a word of ``focus`` (:func:`question_focus`) stands within :data:`FOCUS_NEAR` words
    of the span ``sentence[start:end]``; ``same(a, b)`` says when two words match (the caller's
    stemming; exact by default)."""
    around = _WORD.findall(sentence[:start].lower())[-FOCUS_NEAR:] + _WORD.findall(sentence[end:].lower())[:FOCUS_NEAR]
    return any(same(w, f) for w in around for f in focus)


def strip_title(name: str) -> str:
    """``name`` without the office words before a person's name ("New York Governor Nelson
    Rockefeller" -> "Nelson Rockefeller"); unchanged unless at least two name words remain."""
    words = name.split()
    cut = max((i for i, w in enumerate(words) if w in TITLE_WORDS), default=-1)
    rest = words[cut + 1:]
    if cut < 0 or len(rest) < 2 or not all(w[:1].isupper() for w in rest):
        return name
    return " ".join(rest)
