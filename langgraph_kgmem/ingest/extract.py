"""Knowledge extraction: chunk text → entities, triples and a short title.

Two extractors share one output type, :class:`Extraction`:

- :class:`LLMExtractor`: three typed decisions per chunk (entities, then triples over those
  entities, then a title), each with the offline extractor as its recorded fallback.
- :class:`OfflineExtractor`: no LLM. Entities are capitalised spans, years and numbers with
  units; triples link consecutive entities of a sentence by the words between them, and the
  chunk's title entity to the entities of its first sentence. Honest quality note: it finds
  names well and relations poorly (a relation is a verbatim snippet, not a normalised
  predicate; pronoun subjects are lost), so offline graphs are denser in co-mention edges and
  weaker in precise relations than LLM graphs. It is deterministic and fast (~0.2 ms/sentence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Generator

from pydantic import BaseModel, Field

from langgraph_kgmem.ingest.chunking import split_sentences
from langgraph_kgmem.kg.types import Triple
from langgraph_kgmem.llm import adecide, adrive, decide, drive, merge_usage, render
from langgraph_kgmem.llm.prompts import DATA_NOTE, fence


@dataclass
class Extraction:
    entities: list[str]
    triples: list[Triple]
    title: str
    usage: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------- offline

_CONNECT = {"of", "the", "de", "la", "von", "van", "der", "and", "for", "in", "on", "du", "del", "y", "&"}
_STOP_START = {
    "The", "A", "An", "He", "She", "It", "They", "We", "I", "His", "Her", "Its", "Their", "This", "That",
    "These", "Those", "In", "On", "At", "By", "For", "From", "With", "As", "After", "Before", "During",
    "When", "While", "Although", "However", "But", "And", "Or", "If", "There", "Here", "Also", "Both",
    "Since", "Until", "Other", "Some", "Many", "Most", "Such", "Each", "Every", "Then", "Thus", "Today",
    "Who", "What", "Which", "Where", "Why", "How", "Its", "Our", "Your", "My", "One", "Two",
}
_WORD = re.compile(r"[A-Za-z0-9][\w'’.\-]*|[\"“”]")
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")


def _is_cap(tok: str) -> bool:
    return tok[:1].isupper() or bool(_YEAR.match(tok))


def offline_entities(sentence: str) -> list[str]:
    """Capitalised spans (with short connectors like 'of the'), years and quoted titles."""
    toks = _WORD.findall(sentence)
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in {'"', "“", "”"}:
            j = i + 1
            while j < len(toks) and toks[j] not in {'"', "“", "”"}:
                j += 1
            if j < len(toks) and 0 < j - i - 1 <= 8:
                out.append(" ".join(toks[i + 1:j]))
                i = j + 1
                continue
            i += 1
            continue
        if _YEAR.match(t):
            out.append(t)
            i += 1
            continue
        if _is_cap(t) and not (i == 0 and t in _STOP_START and (len(toks) < 2 or not _is_cap(toks[1]))):
            j = i + 1
            while j < len(toks):
                if _is_cap(toks[j]) and not _YEAR.match(toks[j]):
                    j += 1
                elif toks[j].lower() in _CONNECT and j + 1 < len(toks) and toks[j + 1][:1].isupper():
                    j += 2
                else:
                    break
            span = [w.rstrip(".,;:") for w in toks[i:j]]
            if span and span[0] in _STOP_START and len(span) > 1:
                span = span[1:]
            name = " ".join(span).strip(" .,'’")
            if name and (len(name) > 1) and name not in _STOP_START:
                out.append(name)
            i = j
            continue
        i += 1
    # keep order, drop duplicates
    return list(dict.fromkeys(out))


def _between(sentence: str, a: str, b: str) -> str:
    ia = sentence.find(a)
    ib = sentence.find(b, ia + len(a)) if ia >= 0 else -1
    if ia < 0 or ib < 0:
        return ""
    words = sentence[ia + len(a):ib].strip(" ,;:()").split()
    return " ".join(words[:10]).strip(" ,;:()")


class OfflineExtractor:
    """Deterministic rule-based extraction (see module docstring for its quality)."""

    name = "offline"

    def __init__(self, max_triples_per_sentence: int = 6) -> None:
        self.max_triples_per_sentence = max_triples_per_sentence

    def extract(self, text: str, title: str | None = None) -> Extraction:
        sentences = split_sentences(text) or [text]
        entities: list[str] = [title] if title else []
        triples: list[Triple] = []
        for si, sent in enumerate(sentences):
            ents = offline_entities(sent)
            if title:
                ents = [e for e in ents if e.lower() != title.lower()]
            entities.extend(ents)
            pairs = []
            for a, b in zip(ents, ents[1:]):
                rel = _between(sent, a, b) or "is mentioned with"
                pairs.append(Triple(a, rel, b))
            if title and ents and si < 2:
                # the passage title is usually the subject of its opening sentences
                for e in ents[:3]:
                    rel = _between(sent, title, e) if title in sent else ""
                    pairs.append(Triple(title, rel or "is related to", e))
            triples.extend(pairs[: self.max_triples_per_sentence])
        head = title or " ".join(sentences[0].split()[:12])
        return Extraction(list(dict.fromkeys(entities)), list(dict.fromkeys(triples)), head, {})


# ------------------------------------------------------------------------------- LLM

class ExtractedEntities(BaseModel):
    """Named entities in the passage: people, places, organisations, works, dates, quantities and
    other specific things a question could ask about. Use the surface form from the passage."""

    entities: list[str] = Field(description="distinct entity names, as written in the passage")


class ExtractedTriple(BaseModel):
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
