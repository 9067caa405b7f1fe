"""What the router reads before it picks: what the KG holds (:class:`KgProfile`) and the
question's form (:class:`QuestionForm`). Pure functions over the KG and the text: no LLM, no store.

A question's form is one of four (:data:`FORMS`):

- ``records``: the KG holds time-stamped records and the question gives a time (``2013-07-02
  15:00``, ``15:00``, ``3 pm``) together with a place the records know or a temporal word
  (leave, before, after, earliest, latest, during, trip ...).
- ``graph``: the KG holds a typed graph (GRBench-style entities with a ``type`` and features) and
  the question names one of its nodes (a quoted title, or a node name of two words or more).
- ``relational``: a question over documents that chains facts: two or more named things, or two
  hops — a relation phrase ("the X of the Y", "the Y's X", a nested "who/which/that") whose end the
  question asks a further fact about ("Where did the husband of Marie Curie study?"); "What is the
  capital of Poland?" (a copula asking for the relation itself) is one hop.
- ``lookup``: any other question over documents (one named thing, one fact).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

Form = Literal["records", "graph", "relational", "lookup"]
FORMS: tuple[Form, ...] = ("records", "graph", "relational", "lookup")

# longest node name (in words) looked up among a question's word n-grams
MAX_NAME_WORDS = 8

_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2})?\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(?:am|pm)\b", re.I)
_TEMPORAL = frozenset(
    "leave leaving depart departure departing arrive trip travel before after earliest latest during until since "
    "avoid hours hour minutes o'clock when window".split())
_QUOTED = re.compile(r"[\"“”']([^\"“”']{2,120})[\"“”']")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_CAPITAL_SPAN = re.compile(r"(?:\b[A-Z][\w\-.]*(?:\s+(?:of|the|de|von|van)?\s*[A-Z][\w\-.]*)*)")
# a relation phrase: "the X of (the) Y", "Y's X", or a clause nested inside the question ("... that / who ...")
_HOP = re.compile(r"\b(?:the|a|an)\s+\w+(?:\s+\w+)?\s+of\b|\w+'s\s+\w+|(?<!^)\b(?:who|which|that|whose)\b", re.I)
_COPULA = frozenset({"is", "was", "are", "were"})
_QUESTION_WORDS = frozenset("what which who whom whose when where why how is was are were did does do in on the "
                            "a an of for to and or at by from".split())


@dataclass(frozen=True)
class KgProfile:
    """What one version of a KG holds, as the router sees it."""

    version: int
    documents: int                    # chunks (passages of documents)
    records: int                      # time slots of time-stamped records
    graph: int                        # typed graph nodes (GRBench-style entities with a ``type``)
    locations: tuple[str, ...] = ()   # the records' location names, lower case
    graph_names: frozenset[str] = field(default_factory=frozenset)   # typed nodes' names, lower case

    def holds(self) -> list[str]:
        """What the KG holds, in words (``documents``, ``records``, ``graph``)."""
        return [k for k, n in (("documents", self.documents), ("records", self.records), ("graph", self.graph)) if n]


def kg_profile(kg: "KnowledgeGraph") -> KgProfile:
    """The :class:`KgProfile` of ``kg`` at its current version (one pass over its nodes; callers
    cache it per ``kg.version``)."""
    from langgraph_kgmem.graphs.kgirag.index import temporal_index

    idx = temporal_index(kg)
    typed = [n for n in kg.nodes("entity") if n.attrs.get("type") and isinstance(n.attrs.get("features"), dict)]
    return KgProfile(version=kg.version, documents=len(kg.nodes("chunk")), records=len(idx.slots), graph=len(typed),
                     locations=tuple(sorted(name.lower() for name in idx.locations)),
                     graph_names=frozenset(n.text.lower().strip() for n in typed if n.text.strip()))


@dataclass(frozen=True)
class QuestionForm:
    """The form of one question and the signals behind it."""

    form: Form
    has_time: bool = False
    temporal_words: int = 0
    place: str | None = None
    graph_node: str | None = None
    named: int = 0          # named things (capitalised spans, quoted titles)
    hops: int = 1           # 1 = a single lookup; 2 = a relational hop was seen

    def signals(self) -> dict[str, object]:
        """The signals as a JSON-ready dict (what ``route["signals"]`` shows)."""
        return {"form": self.form, "has_time": self.has_time, "temporal_words": self.temporal_words,
                "place": self.place, "graph_node": self.graph_node, "named": self.named, "hops": self.hops}


def _ngrams(words: list[str], longest: int) -> set[str]:
    return {" ".join(words[i:i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)}


def _named_spans(question: str) -> list[str]:
    """Capitalised spans and quoted titles, the question's first word left out unless quoted."""
    quoted = [m.group(1).strip() for m in _QUOTED.finditer(question)]
    body = _QUOTED.sub(" ", question)
    spans = []
    for m in _CAPITAL_SPAN.finditer(body):
        words = m.group(0).split()
        while words and words[0].lower() in _QUESTION_WORDS:   # "Were Scott Derrickson" -> "Scott Derrickson"
            words = words[1:]
        if words:
            spans.append(" ".join(words))
    return list(dict.fromkeys(quoted + spans))


def question_form(question: str, profile: KgProfile) -> QuestionForm:
    """The form of ``question`` on a KG holding ``profile`` (rules in the module docstring)."""
    low = question.lower()
    words = _WORD.findall(low)
    has_time = bool(_TIME.search(question))
    temporal = sum(w in _TEMPORAL for w in words)
    place = next((p for p in profile.locations if p and p in low), None)
    named = _named_spans(question)
    # "What is the capital of Poland?" asks for the relation itself (one hop); "Where did the husband of
    # Marie Curie study?" asks for a fact about what the relation leads to (two)
    copula = len(words) > 1 and words[1] in _COPULA and not (words[-1] == "born" or words[-1].endswith("ed"))
    hops = len(_HOP.findall(question.strip())) + (0 if copula else 1)
    hops = max(1, 2 if len(named) >= 2 else hops)
    base = {"has_time": has_time, "temporal_words": temporal, "place": place, "named": len(named), "hops": hops}
    if profile.records and has_time and (place or temporal):
        return QuestionForm("records", **base)
    if profile.graph and profile.graph_names:
        quoted = [m.group(1).strip().lower() for m in _QUOTED.finditer(question)]
        grams = _ngrams(words, MAX_NAME_WORDS)
        hit = next((q for q in quoted if q in profile.graph_names), None) or \
            max((g for g in grams if len(g.split()) >= 2 and g in profile.graph_names), key=len, default=None)
        if hit:
            return QuestionForm("graph", graph_node=hit, **base)
    return QuestionForm("relational" if hops >= 2 else "lookup", **base)
