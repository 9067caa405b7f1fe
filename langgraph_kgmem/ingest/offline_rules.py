"""The offline extractor's rules: entity spans, their linking, and clause relations (no model).

A small rule-based reading of English prose, written for encyclopaedic passages (a titled
passage about one subject) and robust to any text:

- **Entity spans** (:func:`entity_mentions`): runs of capitalised words joined by short
  connectors ("Society for the Exploration of Psychotherapy Integration"), years and quoted
  titles. Punctuation ends a span ("Nashville, Tennessee" is two places), and so does "and"
  (a list of names is several names). A possessive is cut off ("Hall's" is Hall), a leading
  article too. A capitalised word that opens a sentence is kept only when the passage never uses
  it in lower case and it does not read as an ordinary sentence opener.
- **Linking** (:func:`canonical_name`, :class:`PassageNames`): one surface form per entity, so the
  same entity under variants meets itself across passages by name: abbreviations of a few
  countries are spelled out, a title's disambiguation ("Hello Love (song)") also yields the bare
  name, and within a passage a lone surname or first word ("Snow") is read as the full name it
  shortens ("Hank Snow"), the passage's title first.
- **Clause relations** (:func:`clause_triples`): a sentence's subject is the entity that opens
  it (after an opening adverbial such as "In 1949,"), or the passage's subject when the
  sentence opens with a pronoun ("She ...") or with "The <noun>" ("The film ..."). The subject
  is related to every other entity of the sentence by the words between them (the verb phrase,
  cut to :data:`MAX_RELATION_WORDS`). A sentence without a subject falls back to linking
  neighbouring entities by the words between them.

Honest limits: no parse tree, so a relation is the verbatim words between two entities, not a
normalised predicate; an object far down a long sentence gets a relation that reads the whole
clause; entities are capitalised names, so common-noun answers ("a peer-reviewed journal") are
never entities.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from langgraph_kgmem.ingest.chunking import split_sentences

# words that may join capitalised words inside one name; at most two in a row ("for the", "de la")
CONNECT = frozenset({"of", "the", "de", "la", "le", "les", "von", "van", "der", "den", "for", "du", "del", "della",
                     "da", "di", "dos", "das", "y", "al", "el", "bin", "ibn", "upon", "on", "v.", "vs.", "v"})
# capitalised sentence openers that are not names
STOP_START = frozenset("""
The A An He She It They We I You His Her Its Their This That These Those In On At By For From With As After Before
During When While Although However But And Or If There Here Also Both Since Until Other Some Many Most Such Each
Every Then Thus Today Who What Which Where Why How Our Your My One Two Three Four Five Six Seven Eight Nine Ten
Despite Following According Because Later Under Between Within Over Among Upon Through Throughout Unlike Like
Along Even Yet So Now Once Currently Originally Additionally Furthermore Moreover Meanwhile Several Various Only
All Another Any No Not Neither Either First Second Third Last Next Whether Though To Of Around About Against
Without Toward Towards Into Onto Near Outside Inside Beyond Above Below Behind Beside Besides Instead Rather
Whose Whom Whatever Whenever Wherever Him Them Us Me Let Please Note See Yes
""".split())
PLACE_PREFIXES = frozenset("North South East West Northern Southern Eastern Western Central Upper Lower Middle New "
                           "Greater Old Great Little Saint St. San Santa Los Las Le La".split())
# a company's legal form alone names nothing
LEGAL_FORMS = frozenset({"Inc", "Ltd", "Co", "Corp", "LLC", "PLC", "plc", "GmbH", "AG", "SA", "LLP"})
MONTHS = frozenset("January February March April May June July August September October November December".split())
PRONOUNS = frozenset({"he", "she", "it", "they", "his", "her", "its", "their"})
POSSESSIVES = frozenset({"his", "her", "its", "their"})
# "The <noun> ..." opening a sentence of a titled passage names the passage's subject
HEAD_NOUNS = frozenset("""
film movie series show programme program episode band group duo trio company corporation firm album song single
record book novel story poem play musical opera journal magazine newspaper game city town village municipality
county district region province state country island mountain river lake station club team school college
university church cathedral temple building museum park bridge airport network label brand festival award
tournament league party organization organisation agency species genus family dynasty empire kingdom ship
character singer actor actress player author writer poet director politician artist painter composer
""".split())
# a few abbreviations spelled out, so that they meet the full name of the same entity
ABBREVIATIONS = {
    "u.s.": "United States", "u.s": "United States", "us": "United States", "usa": "United States",
    "u.s.a.": "United States", "u.s.a": "United States", "united states of america": "United States",
    "u.k.": "United Kingdom", "u.k": "United Kingdom", "uk": "United Kingdom",
    "u.s.s.r.": "Soviet Union", "ussr": "Soviet Union", "nyc": "New York City",
}
MAX_RELATION_WORDS = 10
MAX_QUOTED_WORDS = 8

_TOKEN = re.compile(r"[^\W_][\w'’.\-&]*|[,;:()\[\]{}\"“”!?—–]")
_QUOTE = frozenset({'"', "“", "”"})
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_POSSESSIVE = re.compile(r"(?:['’]s|s['’]|['’])$")
_PAREN_TAIL = re.compile(r"\s*\([^()]*\)\s*$")
_ABBREV_END = re.compile(r"(?:\b[A-Z]|\b(?:Inc|Ltd|Co|Corp|St|Dr|Mr|Mrs|Ms|Jr|Sr|Mt|Ft|Gen|Col|Capt|Lt|Gov|Rev|Prof|"
                         r"vs|No|Vol|U\.S|U\.K))\.$")
_ADVERBIAL_OPENERS = frozenset({"in", "on", "at", "by", "after", "before", "during", "since", "until", "from",
                                "following", "despite", "according", "as", "when", "while", "although", "however",
                                "later", "today", "under", "between", "within", "throughout", "upon", "with",
                                "without", "for", "also", "then", "thus", "currently", "originally", "once"})
_PARENS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_LOWER_WORD = re.compile(r"\b[a-z][a-z'’\-]*\b")


@dataclass(frozen=True)
class Mention:
    """An entity name as found in a sentence: its canonical name and where its words are."""

    name: str
    start: int     # character offsets in the sentence
    end: int


def sentences_of(text: str) -> list[str]:
    """The text's sentences, with the splits after an initial or an abbreviation ("G. Stanley",
    "Inc. was") joined back: a name must not be cut in two."""
    out: list[str] = []
    for s in split_sentences(text) or [text]:
        if out and _ABBREV_END.search(out[-1]):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def canonical_name(name: str) -> str:
    """The form of ``name`` that entities are stored under: possessive, surrounding punctuation
    and a leading article cut off, spaces folded, a few abbreviations spelled out."""
    words = name.replace("\u00a0", " ").split()
    while words and words[0] in {"The", "the", "A", "An"} and len(words) > 1:
        words = words[1:]
    if words:
        words[-1] = _POSSESSIVE.sub("", words[-1]) or words[-1]
    out = " ".join(words).strip(" .,;:'’\"“”()[]")
    return ABBREVIATIONS.get(out.lower(), out)


def title_names(title: str) -> list[str]:
    """The entity names of a passage title: the title itself and, when they differ, the name
    the text and questions use, without a disambiguation ("Kiss and Tell (1945 film)": "Kiss
    and Tell") and in canonical form ("The Beatles": "Beatles"). The last one is the passage's
    subject."""
    full = " ".join(title.split())
    bare = canonical_name(_PAREN_TAIL.sub("", full).strip())
    return [full, bare] if bare and bare != full else [full] if full else []


def lowercase_words(text: str) -> frozenset[str]:
    """Words the text writes in lower case (a capitalised opener among them is no name)."""
    return frozenset(_LOWER_WORD.findall(text))


def _is_year(tok: str) -> bool:
    return bool(_YEAR.match(tok.rstrip(".")))


def _is_cap(tok: str) -> bool:
    return tok[:1].isupper() or _is_year(tok)


def _ordinary_opener(tok: str, common: frozenset[str]) -> bool:
    """Whether a capitalised word opening a sentence reads as an ordinary word, not a name."""
    low = tok.lower()
    return (tok in STOP_START or tok in MONTHS or low in common
            or (len(tok) > 4 and low.endswith(("ing", "ed", "ly"))))


def _quoted(toks: list[re.Match[str]], i: int) -> int:
    """Index of the closing quote of a short quotation opening at ``i`` (``-1``: none)."""
    j = i + 1
    while j < len(toks) and toks[j].group() not in _QUOTE and j - i <= MAX_QUOTED_WORDS + 1:
        j += 1
    return j if j < len(toks) and toks[j].group() in _QUOTE and 0 < j - i - 1 <= MAX_QUOTED_WORDS else -1


def _span_end(toks: list[re.Match[str]], i: int) -> int:
    """End (exclusive) of the name starting at token ``i``: capitalised words, joined by at most
    two connectors in a row; a possessive ends it."""
    j = i + 1
    if _POSSESSIVE.search(toks[i].group()):
        return j
    while j < len(toks):
        t = toks[j].group()
        if _is_cap(t) and not _is_year(t) and t[:1].isalnum():
            j += 1
            if _POSSESSIVE.search(t):
                break
            continue
        k = j
        while k < len(toks) and k - j < 2 and toks[k].group() in CONNECT:
            k += 1
        if k > j and k < len(toks) and toks[k].group()[:1].isupper():
            j = k
            continue
        break
    return j


def entity_mentions(sentence: str, common: frozenset[str] = frozenset()) -> list[Mention]:
    """The entity names of one sentence with their places, in order (see the module docstring).
    ``common``: the passage's lower-case words (:func:`lowercase_words`), against which a
    capitalised opener is checked."""
    toks = list(_TOKEN.finditer(sentence))
    out: list[Mention] = []
    i = 0
    while i < len(toks):
        t = toks[i].group()
        if t in _QUOTE:
            j = _quoted(toks, i)
            if j > 0:
                name = canonical_name(sentence[toks[i + 1].start():toks[j - 1].end()])
                if len(name) > 1:
                    out.append(Mention(name, toks[i].start(), toks[j].end()))
                i = j + 1
                continue
            i += 1
            continue
        if _is_year(t):
            year = t.rstrip(".")
            out.append(Mention(year, toks[i].start(), toks[i].start() + len(year)))
            i += 1
            continue
        if not t[:1].isupper():
            i += 1
            continue
        j = _span_end(toks, i)
        words = [m.group() for m in toks[i:j]]
        start = i
        # a sentence opener ("In", "After") is no part of the name that follows it; inside a
        # sentence a capitalised word before a name is part of it ("A Rather Blustery Day")
        while len(words) > 1 and ((i == 0 and words[0] in STOP_START) or words[0].lower() in CONNECT):
            words, start = words[1:], start + 1
        single_opener = i == 0 and len(words) == 1 and start == 0 and _ordinary_opener(words[0], common)
        lone_stop = len(words) == 1 and (words[0] in STOP_START or words[0] in MONTHS
                                         or words[0].rstrip(".") in LEGAL_FORMS)
        if not single_opener and not lone_stop:
            name = canonical_name(sentence[toks[start].start():toks[j - 1].end()])
            if len(name) > 1 and name not in STOP_START:
                out.append(Mention(name, toks[start].start(), toks[j - 1].end()))
        i = j
    return out


class PassageNames:
    """Within one passage, a lone word that ends a longer name ("Snow" for "Hank Snow", "Hall"
    for "G. Stanley Hall") is read as that name: the title's names first, then the longer names
    in the order the passage gives them. Names with connectors ("University of Texas") and
    places named from a direction ("North Carolina") shorten to nothing: "Carolina" alone is not
    North Carolina more than South Carolina."""

    def __init__(self, titles: Sequence[str], mentions: Iterable[Mention]) -> None:
        self.short: dict[str, str] = {}
        for name in list(titles) + [m.name for m in mentions]:
            words = name.split()
            if not 2 <= len(words) <= 4 or words[0] in PLACE_PREFIXES or any(w.lower() in CONNECT for w in words):
                continue
            key = canonical_name(words[-1])
            if len(key) > 2 and key[:1].isupper() and not _YEAR.match(key) and key not in STOP_START:
                self.short.setdefault(key, name)

    def resolve(self, name: str) -> str:
        """The full name a one-word ``name`` shortens in this passage (itself when it shortens
        none, or when it is already more than one word)."""
        return self.short.get(name, name) if " " not in name else name


def _relation(text: str, limit: int = MAX_RELATION_WORDS) -> str:
    """Words between two entities as a relation phrase: parentheses (pronunciations, glosses)
    left out, at most ``limit`` words."""
    text = _PARENS.sub(" ", text.replace("\u00a0", " "))
    return " ".join(text.split()[:limit]).strip(" ,;:()[]\"“”'’—–-")


def _subject_of(sentence: str, mentions: Sequence[Mention], focus: str | None) -> tuple[str | None, int]:
    """The sentence's subject and where its words end: the passage's subject (``focus``) for a
    pronoun or "The <noun>" opener, else the entity opening the sentence, or opening its main
    clause after an opening phrase that ends with a comma ("In 1949, Snow ...", "Founded in
    1930 by George W. Jenkins, Publix ..."); ``(None, 0)`` when none is found."""
    words = sentence.split(None, 2)
    if not words:
        return None, 0
    first = words[0].strip("\"“”'(")
    if focus and first.lower() in PRONOUNS:
        named = _possessed(sentence, mentions) if first.lower() in POSSESSIVES else None
        return (named.name, named.end) if named is not None else (focus, len(words[0]))
    if focus and first == "The" and len(words) > 1 and words[1].strip(",.;:") in HEAD_NOUNS:
        return focus, sentence.find(words[1]) + len(words[1])
    starts = [0]
    comma = sentence.find(",")
    if (first.lower() in _ADVERBIAL_OPENERS or (len(first) > 4 and first.lower().endswith(("ed", "ing")))) \
            and 0 < comma < len(sentence) // 2:
        starts.append(comma + 1)
    for start in starts:
        m = next((m for m in mentions if m.start >= start), None)
        lead = sentence[start:m.start if m else len(sentence)].split()
        if m is not None and all(w.strip("\"“”'(") in {"The", "the", "A", "An", ""} for w in lead[:2]) and len(lead) <= 1:
            name = focus if focus and m.name.startswith(focus + " ") else m.name
            return name, m.end
        if focus and lead and lead[0].strip("\"“”'(").lower() in PRONOUNS:
            return focus, start + sentence[start:].find(lead[0]) + len(lead[0])
    return None, 0


def _possessed(sentence: str, mentions: Sequence[Mention]) -> Mention | None:
    """The name a possessive opener introduces ("Her husband Pierre Curie taught ..."): the
    sentence's subject is he, not the passage's subject; ``None`` when no name follows closely."""
    if not mentions:
        return None
    lead = sentence[:mentions[0].start].split()[1:]
    return mentions[0] if 1 <= len(lead) <= 2 and all(w.islower() for w in lead) else None


def _significant(words: str) -> bool:
    return any(w.lower() not in CONNECT and w.lower() not in {"and", "or", "a", "an", "as", "in"} for w in words.split())


def clause_triples(sentence: str, mentions: Sequence[Mention], focus: str | None,
                   limit: int) -> tuple[str | None, list[tuple[str, str, str]]]:
    """The sentence's subject (``None``: none found) and its ``(subject, relation, object)``
    triples, at most ``limit`` (see the module docstring). An object after the first one gets the
    first one's verb phrase and, when they say something, the few words just before it
    ("moved to ... in" 1949)."""
    subject, subject_end = _subject_of(sentence, mentions, focus)
    out: list[tuple[str, str, str]] = []
    if focus and subject and subject != focus and mentions and sentence.split(None, 1)[0].lower() in POSSESSIVES \
            and mentions[0].name == subject:
        out.append((focus, _relation(sentence[:mentions[0].start]).lower() or "is related to", subject))
    if subject is None:
        seen: set[frozenset[str]] = set()
        for a, b in zip(mentions, mentions[1:]):
            if a.name != b.name and frozenset((a.name, b.name)) not in seen:
                seen.add(frozenset((a.name, b.name)))
                out.append((a.name, _relation(sentence[a.end:b.start]) or "is mentioned with", b.name))
        return None, out[:limit]
    verb = ""
    prev_end = subject_end
    asides = [(p.start(), p.end()) for p in _PARENS.finditer(sentence)]
    for m in mentions:
        if m.name == subject:
            continue
        aside = next((a for a in asides if a[0] < m.start < a[1]), None)
        if aside is not None:   # a name in parentheses: an alias, a gloss, a date
            rel = _relation(sentence[aside[0] + 1:m.start], 4)
        elif m.start >= subject_end:
            local = _relation(sentence[prev_end:m.start], 4)
            if not verb:
                verb = _relation(sentence[subject_end:m.start], MAX_RELATION_WORDS)
                rel = verb
            else:
                rel = f"{verb} ... {local}" if local and _significant(local) and local != verb else verb
            prev_end = max(prev_end, m.end)
        else:   # before the subject: an opening phrase ("In 1949, Snow ...")
            rel = _relation(" ".join(sentence[:m.start].split()[-3:]))
        out.append((subject, rel or "is mentioned with", m.name))
    return subject, list(dict.fromkeys(out))[:limit]
