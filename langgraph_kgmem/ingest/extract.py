"""Knowledge extraction: chunk text → entities, triples and a short title.

Two extractors share one output type, :class:`Extraction`:

- :class:`LLMExtractor`: three typed decisions per chunk (entities, then triples over those
  entities, then a title), each with the offline extractor as its recorded fallback.
- :class:`OfflineExtractor`: no LLM, the rules of :mod:`~langgraph_kgmem.ingest.offline_rules`.
  Entities are capitalised spans, years and quoted titles, in one canonical form so the same
  entity meets itself across passages (a titled passage's title, and its bare name without a
  disambiguation, are entities of every chunk; a lone surname is read as the passage's full
  name). Triples relate each sentence's subject (a pronoun read as the passage's subject) to
  the sentence's other entities by the words between them. Honest quality note: it finds names
  well and relations roughly (a relation is a verbatim snippet, not a normalised predicate, and
  there is no parse tree), so offline graphs are weaker in precise relations than LLM graphs.
  It is deterministic and fast (a fraction of a millisecond per sentence).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Generator, Literal

from pydantic import BaseModel, Field

from langgraph_kgmem.ingest.offline_rules import (Mention, PassageNames, clause_triples, entity_mentions,
                                                  lowercase_words, sentences_of, title_names)
from langgraph_kgmem.kg.types import Triple
from langgraph_kgmem.llm import adecide, adrive, decide, drive, merge_usage, render
from langgraph_kgmem.llm.prompts import DATA_NOTE, fence


@dataclass
class Extraction:
    """What extraction found in one chunk: entities, triples, a title and the calls it cost."""
    entities: list[str]
    triples: list[Triple]
    title: str
    usage: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------- offline

def offline_entities(sentence: str) -> list[str]:
    """Entity names in one sentence (a question, say), in order, each once: capitalised spans
    with short connectors, years and quoted titles, in the canonical form the offline extractor
    stores them under (see :mod:`~langgraph_kgmem.ingest.offline_rules`)."""
    return list(dict.fromkeys(m.name for m in entity_mentions(sentence)))


class OfflineExtractor:
    """Deterministic rule-based extraction (see the module docstring for its quality).

    Args:
        max_triples_per_sentence: relations kept per sentence (the first ones, in reading order).
        relations: ``"clauses"`` (default) relates each sentence's subject (a pronoun read as the
            passage's subject) to the other entities of the sentence; ``"cooccurrence"`` links
            neighbouring entities of a sentence instead, the earlier rule, kept for comparison.
    """

    name = "offline"

    def __init__(self, max_triples_per_sentence: int = 6, *,
                 relations: Literal["clauses", "cooccurrence"] = "clauses") -> None:
        if relations not in ("clauses", "cooccurrence"):
            raise ValueError(f"relations must be 'clauses' or 'cooccurrence', got {relations!r}")
        self.max_triples_per_sentence = max_triples_per_sentence
        self.relations = relations

    def extract(self, text: str, title: str | None = None) -> Extraction:
        """The chunk's entities, clause relations and title, by the offline rules."""
        sentences = sentences_of(text)
        common = lowercase_words(text)
        found = [entity_mentions(s, common) for s in sentences]
        titles = title_names(title) if title else []
        names = PassageNames(titles, (m for ms in found for m in ms))
        found = [[replace(m, name=names.resolve(m.name)) for m in ms] for ms in found]
        entities = list(titles)
        triples: list[Triple] = []
        if len(titles) == 2:   # "Kiss and Tell (1945 film)" is the entity its text calls "Kiss and Tell"
            triples.append(Triple(titles[0], "is also called", titles[1]))
        focus = titles[-1] if titles else None
        for si, (sent, mentions) in enumerate(zip(sentences, found)):
            entities.extend(m.name for m in mentions)
            if self.relations == "clauses":
                subject, trips = clause_triples(sent, mentions, focus, self.max_triples_per_sentence)
                if not titles and subject and not subject.isdigit():
                    focus = subject   # untitled text: a pronoun refers to the last subject named
            else:
                trips = [(a.name, _between(sent, a, b) or "is mentioned with", b.name)
                         for a, b in zip(mentions, mentions[1:]) if a.name != b.name]
            if focus and si == 0 and not any(s == focus for s, _, _ in trips):
                # the passage title is usually the subject of its opening sentence
                trips += [(focus, "is related to", m.name) for m in mentions[:3] if m.name != focus]
            triples.extend(Triple(*t) for t in trips[: self.max_triples_per_sentence])
        head = title or " ".join(sentences[0].split()[:12])
        return Extraction(list(dict.fromkeys(entities)), list(dict.fromkeys(triples)), head, {})


def _between(sentence: str, a: Mention, b: Mention) -> str:
    words = sentence[a.end:b.start].split()
    return " ".join(words[:10]).strip(" ,;:()")


# ------------------------------------------------------------------------------- LLM

class ExtractedEntities(BaseModel):
    """Named entities in the passage: people, places, organisations, works, dates, quantities and
    other specific things a question could ask about. Use the surface form from the passage."""

    entities: list[str] = Field(description="distinct entity names, as written in the passage")


class ExtractedTriple(BaseModel):
    """One fact the text states: subject and object from the entity list, and the relation between them."""
    subject: str = Field(description="an entity from the given list")
    relation: str = Field(description="a short relation phrase or sentence, e.g. 'was born in'")
    object: str = Field(description="an entity from the given list (or a literal value)")


class ExtractedTriples(BaseModel):
    """Facts stated in the passage as [subject, relation, object] triples over the given entities."""

    triples: list[ExtractedTriple] = Field(description="facts stated by the passage")


class ChunkTitle(BaseModel):
    """A short title (at most 12 words) that says what the passage is about."""

    title: str = Field(description="the title")


# The passage and the entity names are the document's own words: they enter the prompts only
# fenced, so an instruction written in a document cannot decide which facts are stored.
ENTITY_PROMPT = """Find the named entities in this passage.
""" + DATA_NOTE + """

Passage:
{text}"""

TRIPLE_PROMPT = """List the facts this passage states as [subject, relation, object] triples.
""" + DATA_NOTE + """
Subjects and objects should be taken from these entities, one per line:
{entities}
Resolve pronouns to the entity they refer to. Keep relations short and specific.

Passage:
{text}"""

TITLE_PROMPT = """Give this passage a short, specific title (at most 12 words).
""" + DATA_NOTE + """

Passage:
{text}"""


class LLMExtractor:
    """Three typed decisions per chunk; each falls back to the offline extractor's answer."""

    name = "llm"

    def __init__(self, model: Any) -> None:
        self.model = model
        self._offline = OfflineExtractor()

    def extract(self, text: str, title: str | None = None) -> Extraction:
        """The chunk's entities, triples and title, each a typed decision of the model (the offline
        extractor answers any that fails)."""
        return drive(self._steps(text, title), lambda kw: decide(self.model, **kw))

    async def aextract(self, text: str, title: str | None = None) -> Extraction:
        """:meth:`extract` with its three calls made with ``ainvoke`` (for ``aadd_documents``)."""

        async def perform(kw: dict[str, Any]) -> Any:
            return await adecide(self.model, **kw)

        return await adrive(self._steps(text, title), perform)

    def _steps(self, text: str, title: str | None) -> Generator[dict[str, Any], Any, Extraction]:
        """The chunk's decisions, one after another: each yields :func:`decide`'s arguments and
        gets back ``(decision, usage)``; sync and async extraction drive the same steps. The
        offline extractor's answer (the fallbacks) is computed only if a fallback is taken: it
        costs more CPU than the rest of the chunk's handling."""
        offline: list[Extraction] = []

        def off() -> Extraction:
            if not offline:
                offline.append(self._offline.extract(text, title))
            return offline[0]

        ents, u1 = yield dict(schema=ExtractedEntities, prompt=render(ENTITY_PROMPT, text=fence(text)), step="extract_entities",
                              offline=lambda: ExtractedEntities(entities=off().entities), context={"text": text})
        names = list(dict.fromkeys(e.strip() for e in ents.entities if e.strip()))
        if title and title not in names:
            names.insert(0, title)
        trip, u2 = yield dict(schema=ExtractedTriples, prompt=render(TRIPLE_PROMPT, entities=fence(names), text=fence(text)),
                              step="extract_triples",
                              offline=lambda: ExtractedTriples(triples=[
                                  ExtractedTriple(subject=t.subject, relation=t.relation, object=t.object)
                                  for t in off().triples]),
                              context={"text": text, "entities": names})
        triples = [Triple(t.subject.strip(), t.relation.strip(), t.object.strip()) for t in trip.triples
                   if t.subject.strip() and t.object.strip() and t.relation.strip()]
        usage = merge_usage(u1, u2)
        if title:
            head = title
        else:
            ttl, u3 = yield dict(schema=ChunkTitle, prompt=render(TITLE_PROMPT, text=fence(text)), step="extract_title",
                                 offline=lambda: ChunkTitle(title=off().title), context={"text": text})
            head = ttl.title.strip() or off().title
            usage = merge_usage(usage, u3)
        for t in triples:
            for side in (t.subject, t.object):
                if side not in names:
                    names.append(side)
        return Extraction(names, list(dict.fromkeys(triples)), head, usage)
