"""The answer step every document method shares: a short answer taken from the method's own path.

A KG method's walk or PPR ranking usually reaches the answer entity; this step keeps it rather
than copying a whole sentence. Without a model (``model="offline"``):

1. **Answer type** (:func:`answer_type`) from the question's words: *person* (who), *place*
   (where, "which city/river/country ..."), *date* (when, what year), *number* (how many/much/
   long/old), *yes-no* (is/was/did ... without "or"), *choice* (a comparison naming its options,
   "X or Y"), else *entity*, with the category noun of "which/what <noun>" kept as the head.
2. **Candidates** (:func:`candidates`) from the evidence the method ranked (passages and facts,
   best first): the names in each sentence (the offline extractor's entity spans), dates and
   numbers; and, where the question asks for one (:mod:`~langgraph_kgmem.graphs.answer_phrases`),
   a kind written in lower case ("what kind of university" -> "land-grant university"), a rank's
   ordinal ("12th") and a place with the direction before it ("what part of the state" ->
   "western North Dakota"). A name the question already names is a bridge, not an answer, and is
   left out (except the options of a comparison).
3. **Score**: each mention adds the sentence's support, the share of the question's content
   words that the sentence and its passage's title hold, weighted by the evidence rank and by how
   well the mention fits the type (a head noun in lower case beside it, so not "County" in "DuPage
   County, Illinois", or opening the name before its "of"/"on", "Treaty on the Functioning of ...";
   "by" after the question's verb, a place after "in", a river after "on the");
   a passage that a well-supported sentence elsewhere names (its title) is a hop of the chain and
   counts more, and so, in evidence without titles (a KG's chunks), does a sentence that shares a name with a well-supported one; a mention in the
   passage of a name the question gives (its title is named in the question: the chain's start,
   where the bridge entity is found, not the answer) weighs :data:`SEED_PASSAGE` of its support;
   a name the evidence calls a category the question names for a hop ("Ulm is a city" for "which
   river flows through the city where ...") is demoted.
   The method's own path (``path``: the entities its walk visited or its PPR ranked high) only
   breaks ties between equal scores: a bonus for its names picked the question's seeds'
   neighbours and hub entities ("United States") over the answer, which is rarely on the path
   (docs/benchmarks.md, offline answers). The path a method reaches still shapes the answer
   through the evidence it ranks.
   The span rules of :mod:`~langgraph_kgmem.graphs.answer_spans` cut each span to what is asked
   (a year question's year, a birth or death date by its role, a number beside what is counted,
   a person's name without its office); a surname folds into the full name it shortens, a name
   holding the category noun the question gives a hop ("the association which ...") is demoted,
   and for "who" the agent of the question's verb ("built by") outranks a name that only looks
   like a person (:data:`FIT_LOOKS`).
4. The best candidate is returned as a short span with the sentence that supports it
   (:class:`OfflineAnswer`); "no answer" with the reason when nothing fits the type.

With a model, the same candidates are offered in a short prompt (:data:`CANDIDATE_PROMPT`), and
the reply is checked against the evidence with the grounding check AutoPrunedRetriever's memory
uses (:func:`~langgraph_kgmem.graphs.grounding.cite_passages`): a reply the evidence does not hold
is replaced by the offline answer, and the run records that it was.

Limits (honest ones): the types come from question words, not a parser, so "What is the name of
the director ..." reads as an *entity* question; names are capitalised spans, so common-noun
answers ("a peer-reviewed journal") are candidates only for a "what kind of <noun>" question;
yes-no answers compare the two subjects' sentences for the question's property words and are
often guesses; comparisons compare the first date or number next to each option.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Sequence

from langgraph_kgmem.graphs.answer_phrases import (DIRECTIONS, FIT_NAME_FOR_KIND, FIT_NO_PART, RANK_HEADS, asks_part,
                                                   kind_asked, kind_phrases, ordinals, rank_head, with_direction)
from langgraph_kgmem.graphs.answer_spans import (FOCUS_MISS, TITLE_WORDS, amount_cues, asks_year, count_cues, count_fit,
                                                 date_role, life_event, life_fit, near_focus, question_focus, strip_title,
                                                 unasked_life_fit, year_of)
from langgraph_kgmem.graphs.common import STOPWORDS, content_words, fence, named_in
from langgraph_kgmem.graphs.grounding import cite_passages
from langgraph_kgmem.ingest.offline_rules import HEAD_NOUNS, MONTHS, entity_mentions, lowercase_words, sentences_of
from langgraph_kgmem.llm import generate, is_offline
from langgraph_kgmem.llm.prompts import DATA_NOTE

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

NO_ANSWER = "no answer"
AnswerKind = Literal["person", "place", "date", "number", "yesno", "choice", "entity"]

MAX_SENTENCES = 300          # sentences read from the evidence (bounds the work on long evidence)
MAX_CANDIDATES = 8           # candidates kept (and offered to a model)
RANK_DECAY = 0.15            # an evidence item at rank r weighs 1 / (1 + RANK_DECAY * r)
HOP_WEIGHT = 0.5             # share of a naming sentence's support a passage inherits as a chain hop
SEED_PASSAGE = 0.6           # factor of a mention in a passage the question names (the chain's start, not its end)
FIT_GOOD, FIT_PLACE, FIT_WEAK = 1.0, 0.6, 0.35   # type fit: matches / reads as a place / only may match
FIT_LOOKS = 0.85             # type fit of a person-looking name that the question's verb does not mark ("built by")
FIT_OTHER = 0.15             # type fit of a name with no trace of the question's category noun
NEAR_WORDS = 5               # words either side of a span searched for a word of the question
FAR_FIT = 0.6                # fit factor of a span with none of the question's words near it
RECUR_WEIGHT = 0.25          # share of a candidate's further mentions added to its best one
BRIDGE_TYPE = 0.3            # factor of a name the evidence calls another category the question names

_WORD = re.compile(r"[a-z0-9]+")
_AUX = frozenset("is was are were do does did can could has have had will would should may might".split())
_PERSON_HEADS = frozenset("""person man woman people actor actress singer musician director producer writer author poet
player footballer politician president king queen emperor artist painter composer rapper comedian scientist
founder manager coach member leader wife husband son daughter father mother brother sister child children
""".split())
_PLACE_HEADS = frozenset("""city town village country state province county region district island river lake
mountain sea ocean place area capital municipality borough suburb neighborhood neighbourhood continent valley
""".split())
_NATURAL_HEADS = frozenset("river lake mountain sea ocean island valley bay".split())
_DATE_HEADS = frozenset("year years date day month decade century timeframe period".split())
_NUMBER_HEADS = frozenset("number population amount".split())
_KNOWN_HEADS = _PERSON_HEADS | _PLACE_HEADS | _DATE_HEADS | _NUMBER_HEADS | HEAD_NOUNS
_FUNCTION = frozenset("the a an of in on at to for by with from type kind name".split())
# capitalised words that make a name an organisation, a work or a place, not a person
_NOT_PERSON = frozenset(w.capitalize() for w in HEAD_NOUNS | _PLACE_HEADS) | frozenset("""Works Academy Institute
Observatory Society Association Hall House Center Centre Foundation Museum Library Hospital Press Records Studios
Theatre Theater Stadium Academy Council Committee Ministry Department Office Bank Group Inc Ltd Company War Cup
Nation Brigade Conference Series Army Navy Force Party Awards Prize Championship Games Olympics Act Treaty Battle
Airport Road Street Position Church Parliament""".split())
_EARLY = frozenset("first earlier earliest older oldest before prior".split())
_LATE = frozenset("later last latest younger youngest newer newest recent recently after".split())
_MORE = frozenset("more most larger largest bigger biggest higher highest longer longest taller tallest greater "
                  "greatest many heavier".split())
_LESS = frozenset("less least fewer fewest smaller smallest lower lowest shorter shortest".split())
_AGE_WORDS = frozenset("older oldest younger youngest born age".split())   # a comparison of birth dates
_PLACE_PREPS = frozenset("in at near from of to".split())
_WATER_PREPS = frozenset("on along across upon".split())   # "a city on the Danube": a river beside its city
_OPENING = frozenset("of on for".split())   # "Treaty on ...", "University of ...": a name its head opens
_COPULA = frozenset("is was are were".split())
_ENDINGS = ("ing", "ed", "es", "s")
_BRIDGE_PHRASE = re.compile(r"\b(?:the|a|an) (?:[a-z-]+ ){0,3}?([a-z]+) (?:where|that|which|who|whose|in which|of which|when)\b")
_PLACE_WORDS = frozenset("""City County River Lake Island Islands Mountain Mountains Province State Republic Kingdom
Valley Bay Sea Ocean Street Park District Region Town Village""".split())
# question words that name the same thing under another word (born in / birthplace ...)
_RELATED = {"birthplace": ("born", "birth"), "born": ("birth", "birthplace"), "died": ("death", "dead"),
            "death": ("died", "dead"), "founded": ("founder", "established"), "founder": ("founded",),
            "established": ("founded",), "wrote": ("written", "writer", "author"), "written": ("wrote", "author"),
            "directed": ("director",), "director": ("directed",), "starred": ("starring", "star"),
            "starring": ("starred", "star"), "located": ("location", "situated"), "married": ("wife", "husband", "spouse"),
            "built": ("constructed", "builder"), "succeeded": ("successor",), "successor": ("succeeded",)}
_MONTH = "|".join(sorted(MONTHS))
_DATE = re.compile(rf"\b(?:\d{{1,2}}\s+(?:{_MONTH})\s+\d{{4}}|(?:{_MONTH})\s+\d{{1,2}},?\s+\d{{4}}|(?:{_MONTH})\s+\d{{4}}"
                   rf"|(?:1[0-9]{{3}}|20[0-9]{{2}})s?)\b")
_NUMBER_WORDS = ("two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
                 "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred").split()
_NUMBER = re.compile(r"\b(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s+(?:million|billion|thousand|hundred))?\b|\b(?:"
                     + "|".join(_NUMBER_WORDS) + r")\b", re.I)
_YEAR = re.compile(r"^(?:1[0-9]{3}|20[0-9]{2})s?$")
_INITIAL = re.compile(r"^[A-Z]\.$")
_DEMONYM_ENDINGS = ("an", "ish", "ese", "ic", "ch", "i")


@dataclass(frozen=True)
class AnswerType:
    """What kind of answer a question asks for, read from its words (:func:`answer_type`)."""

    kind: AnswerKind
    head: str = ""                      # "river" in "which river ...", "" when none
    options: tuple[str, ...] = ()       # a comparison's options, in the question's order
    order: Literal["early", "late", "more", "less", ""] = ""   # which option a comparison wants


@dataclass(frozen=True)
class Candidate:
    """One possible answer: its text, its score and the sentence that supports it best."""

    text: str
    score: float
    sentence: str
    evidence_id: str


@dataclass(frozen=True)
class OfflineAnswer:
    """The answer step's result: ``answer`` (a short span, or :data:`NO_ANSWER`), the sentence
    that supports it and the evidence item it came from, the type read from the question, the
    candidates weighed (best first) and ``reason`` (how it was chosen, or why there is none)."""

    answer: str
    sentence: str
    evidence_id: str
    type: AnswerType
    candidates: tuple[Candidate, ...] = field(default_factory=tuple)
    reason: str = ""


# --------------------------------------------------------------------------------------------
# the question


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _comparison_options(question: str) -> tuple[str, ...]:
    """The two options of "..., X or Y?" (names around the last " or ")."""
    q = question.rstrip(" ?.!")
    at = q.rfind(" or ")
    if at < 0:
        return ()
    left, right = q[:at], q[at + 4:]
    mentions_left = entity_mentions(left)
    mentions_right = entity_mentions(right)
    if "," in left:   # "Who was born first, Ann Lee or Bo Chan?": the clause after the comma
        tail = left[left.rfind(",") + 1:].strip()
        a = tail if tail and tail[:1].isupper() else (mentions_left[-1].name if mentions_left else tail)
    else:
        a = mentions_left[-1].name if mentions_left else ""
    b = mentions_right[0].name if mentions_right else right.strip()
    return (a, b) if a and b and a != b else ()


def answer_type(question: str) -> AnswerType:
    """The answer type ``question`` asks for (see the module docstring for the rules)."""
    words = _words(question)
    if not words:
        return AnswerType("entity")
    wset = set(words)
    order = ("early" if wset & _EARLY else "late" if wset & _LATE else "more" if wset & _MORE
             else "less" if wset & _LESS else "")
    options = _comparison_options(question) if " or " in question else ()
    if options and (order or words[0] in _AUX or words[0] in ("which", "who", "what")):
        return AnswerType("choice", options=options, order=order)
    if words[0] in _AUX:
        return AnswerType("yesno")
    text = " ".join(words)
    if words[0] == "when" or words[-1] == "when" or \
            re.search(r"\b(what|which|in what|in which) (year|years|date|decade|century|month)\b", text):
        return AnswerType("date")
    if re.search(r"\bhow (many|much|long|old|tall|far|big|large|high)\b", text):
        return AnswerType("number")
    if words[0] == "where":
        return AnswerType("place")
    if words[0] in ("who", "whom", "whose") or "who" in words[:3]:
        return AnswerType("person")
    head = _head_noun(words)
    if head in _DATE_HEADS:
        return AnswerType("date", head=head)
    if head in _NUMBER_HEADS:
        return AnswerType("number", head=head)
    if head in _PERSON_HEADS:
        return AnswerType("person", head=head)
    if head in _PLACE_HEADS:
        return AnswerType("place", head=head)
    return AnswerType("entity", head=head)


def _head_noun(words: Sequence[str]) -> str:
    """The category noun of "which/what [adjectives] <noun> ..." (also "what is the name of the
    <noun>"): the first known category among the next few content words, else the word right
    after the question word when it is no function word."""
    for i, w in enumerate(words[:-1]):
        if w in ("which", "what"):
            after = [x for x in words[i + 1:i + 7] if x not in _AUX and x not in _FUNCTION]
            known = [x for x in after[:4] if x in _KNOWN_HEADS]
            return known[0] if known else (after[0] if after and words[i + 1] == after[0] else "")
    return ""


def _stem(word: str) -> str:
    """``word``'s first five letters after an inflection ending ("seated" and "seat" meet)."""
    for end in _ENDINGS:
        if word.endswith(end) and len(word) - len(end) >= 3:
            return word[:-len(end)][:5]
    return word[:5]


def _same_stem(word: str, asked: str) -> bool:
    """Whether ``word`` of the evidence says ``asked`` of the question: the same stem, or a
    related word's (:data:`_RELATED`: "born" for "birthplace")."""
    return _stem(word) in _stems({asked})


def _stems(words: set[str]) -> set[str]:
    out = set()
    for w in words:
        out.add(_stem(w))
        out.update(_stem(r) for r in _RELATED.get(w, ()))
    return out


# --------------------------------------------------------------------------------------------
# the evidence


@dataclass
class _Sentence:
    text: str
    evidence_id: str
    title: str
    weight: float            # evidence rank weight
    support: float           # share of the question's stems the sentence (and its title) hold


def _sentences(question: str, evidence: Sequence[dict[str, Any]]) -> list[_Sentence]:
    qstems = _stems(content_words(question))
    out: list[_Sentence] = []
    for rank, ev in enumerate(evidence):
        text, title = str(ev.get("text") or ""), str(ev.get("title") or "")
        tstems = _stems(content_words(title))
        for s in sentences_of(text) if text.strip() else []:
            held = (_stems(content_words(s)) | tstems) & qstems
            out.append(_Sentence(s, str(ev.get("id", "")), title, 1.0 / (1.0 + RANK_DECAY * rank),
                                 len(held) / (len(qstems) or 1)))
            if len(out) >= MAX_SENTENCES:
                return out
    return out


def _hop_support(sents: Sequence[_Sentence], qwords: set[str], rounds: int = 3) -> dict[str, float]:
    """Per passage title: how well the chain reaches it, the best strength of a sentence in
    another passage that names it (that sentence's support plus its own passage's hop support),
    for the passages whose title the question does not name; ``rounds`` hops deep."""
    titles = {s.title for s in sents if s.title and not named_in(s.title, qwords)}
    naming = [(s, [t for t in titles if t != s.title and t.lower() in s.text.lower()]) for s in sents]
    hop: dict[str, float] = {}
    for _ in range(rounds):
        nxt: dict[str, float] = {}
        for s, named in naming:
            strength = s.weight * (s.support + HOP_WEIGHT * hop.get(s.title, 0.0))
            for t in named:
                nxt[t] = max(nxt.get(t, 0.0), strength)
        if nxt == hop:
            break
        hop = nxt
    return hop


def _name_hops(sents: Sequence[_Sentence], names: Sequence[set[str]]) -> list[float]:
    """Per sentence: the best strength (rank weight times support) of *another* sentence that
    shares a name with it, a name the question does not give (``names``: each sentence's). The
    chain's next hop is a sentence about the entity a well-supported sentence reached ("Albert
    Einstein was born in Ulm" -> "Ulm is a city on the Danube"), titles or no titles."""
    by_name: dict[str, list[tuple[float, int]]] = {}
    for i, (s, ns) in enumerate(zip(sents, names)):
        for n in ns:
            by_name.setdefault(n, []).append((s.weight * s.support, i))
    out = [0.0] * len(sents)
    for i, ns in enumerate(names):
        for n in ns:
            out[i] = max([out[i]] + [strength for strength, j in by_name[n] if j != i and sents[j].text != sents[i].text])
    return out


def _described(name: str, texts: Sequence[str]) -> str:
    """The category noun the evidence gives ``name`` ("Ulm is a city on ...", "Ulm, a city in
    ..."), the first known category (:data:`_KNOWN_HEADS`) in the five words after the article,
    or "" when no sentence describes it so."""
    low = name.lower()
    for text in texts:
        at = text.lower().find(low)
        while at >= 0:
            rest = text[at + len(low):at + len(low) + 80]
            words = _words(rest)[:8]
            lead = 2 if words[:1] and words[0] in _COPULA else 1 if rest.lstrip()[:1] == "," else 0
            if lead and words[lead - 1:lead] and words[lead - 1] in ("a", "an", "the"):
                known = [w for w in words[lead:lead + 5] if w in _KNOWN_HEADS]
                if known:
                    return known[0]
            at = text.lower().find(low, at + 1)
    return ""


def _mentions(kind: AnswerKind, sentence: str, common: frozenset[str]) -> list[tuple[str, int, int]]:
    """``(text, start, end)`` of the spans of ``sentence`` an answer of ``kind`` could be."""
    if kind == "date":
        return [(m.group(0), m.start(), m.end()) for m in _DATE.finditer(sentence)]
    if kind == "number":
        return [(m.group(0), m.start(), m.end()) for m in _NUMBER.finditer(sentence)
                if not _YEAR.match(m.group(0))]
    return [(m.name, m.start, m.end) for m in entity_mentions(sentence, common) if not _YEAR.match(m.name)]


def _spans(t: AnswerType, kind: AnswerKind, asked: str, sentence: str, names: Sequence[Any],
           common: frozenset[str]) -> list[tuple[str, int, int, bool]]:
    """``(text, start, end, is_name)`` of the spans of ``sentence`` that can answer: the
    sentence's names (``names``, its entity mentions) and, for a question asking a kind of
    ``asked``, the lower-case phrases naming one (:mod:`~langgraph_kgmem.graphs.answer_phrases`);
    for a rank, its ordinals; else its dates or numbers."""
    if kind == "entity":
        spans = [(m.name, m.start, m.end, True) for m in names if not _YEAR.match(m.name)]
        return spans + [(*x, False) for x in kind_phrases(asked, sentence)]
    if kind == "number" and t.head in RANK_HEADS:
        return [(*x, False) for x in ordinals(sentence)]
    return [(*x, False) for x in _mentions(kind, sentence, common)]


def _fit(t: AnswerType, name: str, sentence: str, start: int, end: int, qverbs: set[str],
         lower_head: bool = True) -> float:
    """How well the span ``name`` at ``sentence[start:end]`` fits the answer type (``lower_head``:
    a head noun beside the name counts only in lower case or as an office)."""
    if t.kind in ("date", "number"):
        return FIT_GOOD
    before = _words(sentence[max(0, start - 40):start])[-3:]
    after = _words(sentence[end:end + 30])[:3]
    words = name.split()
    if t.head:
        named = _words(name)
        # the head right before the name ("the river Tisza") or joined to it ("the county of Kent"),
        # not a head that ends another name ("in Fairfax County in Northern Virginia"); with
        # ``lower_head``, not one that ends the name before ("in DuPage County, Illinois"): the head
        # is written in lower case, or is an office that titles the name ("Vice President Nelson Rockefeller")
        raw = [w if w.islower() or w not in TITLE_WORDS else w.lower()
               for w in re.findall(r"[A-Za-z0-9]+", sentence[max(0, start - 40):start])[-2:]] if lower_head \
            else before[-2:]
        beside = raw[-1:] == [t.head] or raw[-2:-1] == [t.head] and before[-1] in ("of", "called", "named")
        # the head opens the name, before its own "of"/"on": "Treaty on the Functioning of ..." is a
        # treaty (not a place's head: "City of New York" is not how the city is named)
        opens = lower_head and len(named) > 2 and named[0] == t.head and named[1] in _OPENING and t.kind == "entity"
        if (named and named[-1] == t.head) or opens or beside or (after and after[0] == t.head) \
                or t.head in after[1:3] and after[0] in ("is", "was", "a", "an"):
            return FIT_GOOD
        # "Copper Medal of the Lindmere Academy" names a medal, not an academy; a river, a lake or
        # a mountain is named with its category beside it, a city or a country seldom is
        if t.head in named:
            return FIT_PLACE
        if t.head in _NATURAL_HEADS and [w for w in before if w != "the"][-1:] and \
                [w for w in before if w != "the"][-1] in _WATER_PREPS:
            return FIT_PLACE
        placed = bool(before) and before[-1] in _PLACE_PREPS
        return FIT_WEAK if placed and t.kind == "place" and t.head not in _NATURAL_HEADS else FIT_OTHER
    if t.kind == "person":
        agentive = [w for w in before if w not in ("the", "a", "an")]
        agent = len(agentive) >= 2 and agentive[-1] == "by" and bool(_stems({agentive[-2]}) & qverbs)
        looks = _personal(name)
        return FIT_GOOD if agent else FIT_LOOKS if looks else FIT_WEAK
    if t.kind == "place":
        placed = bool(before) and before[-1] in _PLACE_PREPS or any(w in _PLACE_WORDS for w in words)
        return FIT_PLACE if placed else FIT_WEAK
    return FIT_GOOD


def _adjective(name: str, sentence: str, end: int) -> bool:
    """A one-word nationality or language used as an adjective ("American film director",
    "Danish goalkeeper"): no answer to a question that asks for a name."""
    if " " in name or not name.endswith(_DEMONYM_ENDINGS):
        return False
    nxt = _words(sentence[end:end + 20])[:1]
    return bool(nxt) and nxt[0] not in _AUX and sentence[end:end + 2].strip()[:1].islower()


def _nearness(sentence: str, start: int, end: int, qstems: set[str]) -> float:
    """1 when a word of the question stands within :data:`NEAR_WORDS` words of the span, else
    :data:`FAR_FIT`: the answer sits next to what the question asks about ("born 30 December
    1865", "seats 3,677")."""
    around = _words(sentence[:start])[-NEAR_WORDS:] + _words(sentence[end:])[:NEAR_WORDS]
    return 1.0 if _stems(set(around) - STOPWORDS) & qstems else FAR_FIT


def _demote_bridges(scores: dict[str, float], t: AnswerType, question: str, shown: dict[str, str],
                    sents: Sequence[_Sentence]) -> None:
    """Scale down, in place, the names that are a hop of the chain rather than its end: one the
    evidence calls a category the question names for something else ("Ulm is a city" for "which
    river flows through the city where ..."). Only the leading candidates are checked. (Demoting
    a name that titles an evidence passage holding other candidates was tried: it lost F1 on
    HotpotQA dev with distractors.)"""
    nouns = _bridge_categories(question, known=False) - {t.head}
    bridges = nouns & _KNOWN_HEADS
    if t.kind in ("date", "number") or not nouns:
        return
    texts = [s.text for s in sents]
    for key in sorted(scores, key=lambda k: -scores[k])[:2 * MAX_CANDIDATES]:
        # "American Psychological Association" for "the association which published ...": its
        # own name says it is the hop's category
        if set(key.split()) & nouns or bridges and _described(shown[key], texts) in bridges:
            scores[key] *= BRIDGE_TYPE


def _bridge_categories(question: str, known: bool = True) -> set[str]:
    """The category nouns the question gives a hop of its chain: "the city where ...", "a South
    Korean boy group that ...", "the company which ..." (not the answer's own description, "...
    is an American animated series"); only known categories (:data:`_KNOWN_HEADS`) unless
    ``known`` is false (then any noun but a function word)."""
    found = {m.group(1) for m in _BRIDGE_PHRASE.finditer(question.lower())}
    return {w for w in found if w in _KNOWN_HEADS} if known else found - STOPWORDS - _FUNCTION


def _personal(name: str) -> bool:
    """Whether ``name`` reads as a person's full name: two to four capitalised words, none of
    them an organisation's or a place's word unless an initial marks a person ("G. Stanley Hall")."""
    words = name.split()
    return 2 <= len(words) <= 4 and not any(w.islower() for w in words) \
        and (not any(w in _NOT_PERSON for w in words) or any(_INITIAL.match(w) for w in words[:-1]))


def _merge_short_names(gains: dict[str, list[float]], where: dict[str, set[str]], shown: dict[str, str]) -> None:
    """Fold, in place, a one-word name into the person's full name it shortens in the same
    passage ("Hall" after "G. Stanley Hall"): its last word, the best-scored such reading. The
    full name is the answer a reader expects; the short reading's best support counts for it.
    (A place's first word is no shortening: "Lisbon" is not "Lisbon Metropolitan Area".)"""
    longer = sorted((k for k in gains if " " in k), key=lambda k: -max(gains[k]))
    for key in [k for k in gains if " " not in k]:
        full = next((k for k in longer if k.endswith(" " + key) and where[k] & where[key]
                     and _personal(shown[k])), None)
        if full is not None:
            short = max(gains.pop(key))
            if short > max(gains[full]):
                gains[full].append(short)


def candidates(question: str, evidence: Sequence[dict[str, Any]], path: Sequence[str] = (), *,
               qtype: AnswerType | None = None, focus: bool = False) -> list[Candidate]:
    """The evidence's possible answers to ``question``, best first (at most :data:`MAX_CANDIDATES`).

    ``evidence``: the method's items, best first (``{"id", "text"}`` and an optional ``title``);
    ``path``: the names of the entities on the method's own path or PPR ranking, best first,
    which only breaks ties between equal scores (see the module docstring); ``focus``: the answer
    step's own rules (:func:`offline_answer` sets it): a span with none of the question's focus
    words near it weighs :data:`~langgraph_kgmem.graphs.answer_spans.FOCUS_MISS`, a head noun marks
    a name only in lower case or as an office (or opening it, "Treaty on ..."), "what amount of X"
    counts X, a birth or death date is a poor fit for a date question that asks neither, and the wider candidates of
    :mod:`~langgraph_kgmem.graphs.answer_phrases` (a kind, a rank's ordinal, a part of a place) are
    formed. Off by default so that a sentence ranking built on these scores, AutoPrunedRetriever's
    answer term, keeps its retrieval.
    """
    t = qtype or answer_type(question)
    qwords = content_words(question)
    qverbs = _stems(qwords)
    sents = _sentences(question, evidence)
    hops = _hop_support(sents, qwords)
    kind = "entity" if t.kind in ("person", "place", "choice", "yesno") else t.kind
    year_only, event = kind == "date" and asks_year(question), life_event(question) if kind == "date" else ""
    cues = count_cues(question) | (amount_cues(question) if focus else frozenset()) if kind == "number" else frozenset()
    focus_words = question_focus(question) if focus else frozenset()
    asked = kind_asked(question) if focus and kind == "entity" else ""
    part = focus and kind == "entity" and asks_part(question)
    gains: dict[str, list[float]] = {}
    best: dict[str, tuple[float, _Sentence]] = {}
    shown: dict[str, str] = {}
    where: dict[str, set[str]] = {}
    commons = {s.evidence_id: lowercase_words(s.text) for s in sents}
    entities = [entity_mentions(s.text, commons[s.evidence_id]) for s in sents]
    names = [{" ".join(_words(m.name)) for m in ms if not named_in(m.name, qwords) and not _YEAR.match(m.name)}
             for ms in entities]
    name_hops = _name_hops(sents, names)
    for s, ms, name_hop in zip(sents, entities, name_hops):
        base = s.weight * (s.support + HOP_WEIGHT * (hops.get(s.title, 0.0) if s.title else name_hop))
        if s.title and named_in(s.title, qwords):   # the passage of a name the question gives
            base *= SEED_PASSAGE
        if base <= 0:
            continue
        for name, start, end, a_name in _spans(t, kind, asked, s.text, ms, commons[s.evidence_id]):
            if a_name:   # "Governor Nelson Rockefeller": the name without its office
                short = strip_title(name)
                start, name = start + len(name) - len(short), short
                if part:   # "what part of the state": "western New York", not "New York"
                    start, name = with_direction(s.text, start, name)
            if t.kind != "choice" and (named_in(name, qwords) or not content_words(name)):
                continue
            if a_name and _adjective(name, s.text, end):
                continue
            key = year_of(name) if year_only else " ".join(_words(name))
            if not key:
                continue
            own = content_words(name) - {t.head}   # "Lindmere Academy" may repeat "which academy"
            novelty = 1.0 - len(own & qwords) / (len(own) or 1) if t.kind != "choice" else 1.0
            fit = _fit(t, name, s.text, start, end, qverbs, focus) * _nearness(s.text, start, end, qverbs)
            if asked and a_name:   # "what kind of university": a kind, not a named one
                fit *= FIT_NAME_FOR_KIND
            if part and a_name and name.split()[0] not in DIRECTIONS:
                fit *= FIT_NO_PART
            if focus_words and not near_focus(focus_words, s.text, start, end, _same_stem):
                fit *= FOCUS_MISS
            if kind == "date":
                fit *= life_fit(event, s.text, start, end) * (unasked_life_fit(event, s.text, start, end) if focus else 1.0)
            elif kind == "number":
                fit *= count_fit(cues, s.text, start, end)
            gain = base * novelty * fit
            gains.setdefault(key, []).append(gain)
            where.setdefault(key, set()).add(s.evidence_id)
            if gain > best.get(key, (-1.0, s))[0]:
                best[key], shown[key] = (gain, s), key if year_only else name
    _merge_short_names(gains, where, shown)
    scores = {k: max(g) + RECUR_WEIGHT * (sum(g) - max(g)) for k, g in gains.items()}
    _demote_bridges(scores, t, question, shown, sents)
    place = {name.lower(): i for i, name in reversed(list(enumerate(path)))}
    # equal scores: the name the method's path reaches first, then alphabetical
    ranked = sorted(scores, key=lambda k: (-round(scores[k], 9), place.get(k, len(place)), k))[:MAX_CANDIDATES]
    return [Candidate(shown[k], round(scores[k], 6), best[k][1].text, best[k][1].evidence_id) for k in ranked]


# --------------------------------------------------------------------------------------------
# comparisons and yes-no


def _value_near(option: str, sents: Sequence[_Sentence], kind: str,
                born: bool = False) -> tuple[float | None, _Sentence | None]:
    """The first date (as a year) or number in the best-supported sentence about ``option``;
    with ``born`` (an older / younger comparison), a date the evidence gives as the option's
    birth (:func:`~langgraph_kgmem.graphs.answer_spans.date_role`) before any other."""
    low = option.lower()
    about = sorted((s for s in sents if low in s.text.lower() or low in s.title.lower()),
                   key=lambda s: -(s.support * s.weight))
    pattern = _DATE if kind == "date" else _NUMBER
    births = [(s, m) for s in about for m in pattern.finditer(s.text)
              if born and date_role(s.text, m.start(), m.end()) == "birth"]
    for s in [b[0] for b in births[:1]] + list(about):
        for m in ([births[0][1]] if births and s is births[0][0] else []) + list(pattern.finditer(s.text)):
            years = re.findall(r"\d{4}", m.group(0))
            digits = years[-1] if kind == "date" and years else re.sub(r"[^\d.]", "", m.group(0))
            try:
                return float(digits), s
            except ValueError:
                continue
    return None, (about[0] if about else None)


def _choose(question: str, t: AnswerType, sents: Sequence[_Sentence]) -> OfflineAnswer:
    """A comparison: the option whose date (first/older/later) or number (more/less) wins."""
    kind = "date" if t.order in ("early", "late") else "number"
    born = bool(set(_words(question)) & _AGE_WORDS)
    values = [(opt, *_value_near(opt, sents, kind, born)) for opt in t.options]
    known = [(opt, v, s) for opt, v, s in values if v is not None]
    if len(known) == len(t.options) and t.order:
        pick = (min if t.order in ("early", "less") else max)(known, key=lambda x: x[1])
        opt, _, s = pick
        return OfflineAnswer(opt, s.text if s else "", s.evidence_id if s else "", t,
                             reason=f"the option with the {'earliest' if t.order == 'early' else t.order} "
                                    f"{'date' if kind == 'date' else 'number'} in its evidence")
    supported = [(opt, s) for opt, _, s in values if s is not None]
    if not supported:
        return OfflineAnswer(NO_ANSWER, "", "", t, reason="the evidence says nothing about either option")
    opt, s = max(supported, key=lambda x: x[1].support * x[1].weight)
    return OfflineAnswer(opt, s.text, s.evidence_id, t,
                         reason="no comparable value for every option: the option the evidence supports best")


def _about(name: str, sents: Sequence[_Sentence]) -> list[_Sentence]:
    low = name.lower()
    return [s for s in sents if low in s.text.lower() or (s.title and low in s.title.lower())]


def _yes_no(question: str, t: AnswerType, sents: Sequence[_Sentence]) -> OfflineAnswer:
    """A claim about two subjects ("Are X and Y both Z?", "... the same Z?"): yes when each
    subject's sentences hold the property's words (both), or when their sentences share a name the
    question does not give (same); otherwise yes when the best-supported sentence does not deny it."""
    if not sents:
        return OfflineAnswer(NO_ANSWER, "", "", t, reason="no evidence to check the claim against")
    qwords = content_words(question)
    # the opening auxiliary ("Are", "Were") is no part of the first name
    subjects = [m.name for m in entity_mentions(question[:1].lower() + question[1:]) if not _YEAR.match(m.name)][:2]
    about = [_about(x, sents) for x in subjects]
    if len(subjects) == 2 and all(about):
        named = set().union(*(content_words(x) for x in subjects))
        props = _stems(qwords - named - {"both", "same"})
        if "same" in qwords:
            names = [{" ".join(_words(m.name)) for s in ss for m in entity_mentions(s.text)
                      if not named_in(m.name, qwords)} for ss in about]
            shared = names[0] & names[1]
            answer = "yes" if shared else "no"
            why = f"both subjects' evidence names {sorted(shared)[0]}" if shared else "their evidence shares no name"
        else:
            holds = [any(props and len(_stems(content_words(s.text)) & props) >= max(1, len(props) // 2 + 1)
                         or not props for s in ss) for ss in about]
            answer = "yes" if all(holds) else "no"
            why = "each subject's evidence holds the property" if all(holds) else \
                f"the evidence of {subjects[holds.index(False)]} does not hold the property"
        best = max(about[0] + about[1], key=lambda x: x.support * x.weight)
        return OfflineAnswer(answer, best.text, best.evidence_id, t, reason=why)
    s = max(sents, key=lambda x: (x.support * x.weight, -len(x.text)))
    negated = bool(set(_words(s.text)) & {"not", "never", "no", "neither", "nor"})
    answer = "no" if negated and s.support >= 0.5 else "yes"
    return OfflineAnswer(answer, s.text, s.evidence_id, t,
                         reason="the best-supported sentence " + ("denies" if answer == "no" else "does not deny")
                                + " the claim")


# --------------------------------------------------------------------------------------------
# the answer


def offline_answer(question: str, evidence: Sequence[dict[str, Any]], path: Sequence[str] = ()) -> OfflineAnswer:
    """The answer to ``question`` from the method's ``evidence`` (best first), with no model: see
    the module docstring (``path``, the names on its walk or PPR ranking, breaks ties only).
    Uses only the question and the method's own retrieval."""
    t = answer_type(question)
    rank = rank_head(_words(question))
    if rank:   # "what is the population ranking of ...": an ordinal (the answer step's own type)
        t = AnswerType("number", head=rank)
    if not any(str(e.get("text") or "").strip() for e in evidence):
        return OfflineAnswer(NO_ANSWER, "", "", t, reason="the method found no evidence")
    if t.kind in ("choice", "yesno"):
        sents = _sentences(question, evidence)
        return _choose(question, t, sents) if t.kind == "choice" else _yes_no(question, t, sents)
    found = candidates(question, evidence, path, qtype=t, focus=True)
    if not found:
        what = {"date": "date", "number": "number"}.get(t.kind, "name the question does not already name")
        return OfflineAnswer(NO_ANSWER, "", "", t, reason=f"no {what} in the evidence fits a {t.kind} question")
    top = found[0]
    return OfflineAnswer(top.text, top.sentence, top.evidence_id, t, tuple(found),
                         reason=f"the {t.kind}{' (' + t.head + ')' if t.head else ''} the evidence supports best")


def passages_of(kg: "KnowledgeGraph", node_ids: Sequence[str], limit: int = 10) -> list[dict[str, Any]]:
    """Evidence items (``{"id", "kind", "text", "title"}``) for the passages of ``node_ids`` in
    their order: a chunk itself, an entity's passages (the chunks it is mentioned in). What a walk
    over entities read, for :func:`offline_answer`."""
    out: dict[str, dict[str, Any]] = {}
    for nid in node_ids:
        node = kg.node(nid)
        if node is None:
            continue
        chunks = [node] if node.kind == "chunk" else [n for _, n in kg.neighbors(nid, kinds=("context",),
                                                                                   node_kinds=("chunk",))]
        for c in chunks:
            out.setdefault(c.id, {"id": c.id, "kind": "chunk", "text": c.text, "title": c.attrs.get("title", "")})
        if len(out) >= limit:
            break
    return list(out.values())[:limit]


def path_names(kg: "KnowledgeGraph", node_ids: Sequence[str]) -> list[str]:
    """The names of the entity nodes among ``node_ids`` (a walk's nodes or a PPR ranking, best
    first), in that order: the ``path`` the methods hand :func:`offline_answer`."""
    out: list[str] = []
    for nid in node_ids:
        node = kg.node(nid)
        if node is not None and node.kind == "entity" and node.text:
            out.append(node.text)
    return list(dict.fromkeys(out))


CANDIDATE_PROMPT = """Answer the question from the evidence only. Reply with the answer alone — a
name, a date, a number, or yes/no — not a sentence. The likely answers below were found in the
evidence; pick one when it is right. If the evidence does not hold the answer, reply "no answer".
""" + DATA_NOTE + """

Evidence:
{evidence}

Likely answers:
{candidates}

Question: {question}
Answer:"""


def candidate_prompt(question: str, evidence: Sequence[dict[str, Any]], found: OfflineAnswer,
                     prompt: str = CANDIDATE_PROMPT, max_chars: int = 1200) -> str:
    """The model's answer prompt: the evidence and the offline step's candidates, both fenced."""
    from langgraph_kgmem.graphs.common import format_evidence

    names = [c.text for c in found.candidates] or ([found.answer] if found.answer != NO_ANSWER else [])
    return prompt.format(evidence=format_evidence(evidence, max_chars) or "(none)",
                         candidates=fence(names, empty="(none found)"), question=question)


def _grounded(answer: str, evidence: Sequence[dict[str, Any]]) -> bool:
    """A model's answer stands when it is "no answer", yes/no, or the evidence holds every content
    word of it (AutoPrunedRetriever's grounding check)."""
    low = " ".join(_words(answer))
    if low in ("no answer", "yes", "no"):
        return True
    return cite_passages(answer, [(str(e.get("id", "")), str(e.get("text", ""))) for e in evidence]) is not None


def answer_with_candidates(model: Any, question: str, evidence: Sequence[dict[str, Any]], path: Sequence[str] = (),
                           *, further: Sequence[dict[str, Any]] = (), step: str = "answer",
                           context: dict[str, Any] | None = None,
                           prompt: str = CANDIDATE_PROMPT) -> tuple[str, dict[str, Any]]:
    """The answer step of every document method: ``(answer, usage)``.

    Offline, :func:`offline_answer`'s span over ``evidence`` and then ``further`` (the next items
    of the method's own ranking, read for candidates at their lower rank weight; never shown to a
    model). With a model, one call over :data:`CANDIDATE_PROMPT` (the offline candidates
    offered); a reply the evidence does not hold (see :func:`_grounded`), or a model that fails
    twice, gives the offline answer, recorded in ``usage["fallbacks"]`` (kind ``ungrounded`` /
    ``model_error``)."""
    from langgraph_kgmem.llm import fallback_record

    found = offline_answer(question, list(evidence) + list(further), path)
    if is_offline(model):
        return found.answer, {}
    ctx = {"question": question, "evidence_ids": [e.get("id") for e in evidence],
           "candidates": [c.text for c in found.candidates], **(context or {})}
    text, usage = generate(model, candidate_prompt(question, evidence, found, prompt), step=step, context=ctx,
                           fallback=lambda: found.answer)
    if usage.get("fallbacks") or _grounded(text, evidence):
        return text, usage
    usage = dict(usage)
    usage["fallbacks"] = list(usage.get("fallbacks", [])) + [
        fallback_record(step, "ungrounded", "the evidence does not hold the model's answer; the offline answer "
                        "was given instead", text)]
    return found.answer, usage
