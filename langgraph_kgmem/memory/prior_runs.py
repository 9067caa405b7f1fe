"""Prior runs: has this tenant asked this question before, of any method, and does that run's
evidence still hold?

Every recorded run (:mod:`langgraph_kgmem.memory.runs`) also writes one small *question index*
item under ``("kgmem", kg, *scope, "run_questions")``, key = the question's key
(:func:`question_key`): the question, its embedding and the latest run id per method that asked
it. A method with ``reuse=True`` looks its question up here before it decides anything:

1. the same question (equal keys), else the stored question nearest by cosine at or above
   ``similarity`` that also names the same things (:func:`same_names`: the same numbers, and at
   least half of the capitalised words in common) and asks for the same kind of answer
   (:func:`same_form`), reading at most :data:`MAX_SCAN` stored questions: "Who wrote The
   Crimson Compass?" is not "Who wrote The Last Letters?", nor "When was Albert Einstein born?"
   "Where was Albert Einstein born?", however near;
2. of that question's runs, the method's own first, then the others newest first, the first
   that is *confirmed*: its run record is still there (a replaced or deleted document takes it
   along, :mod:`~langgraph_kgmem.memory.provenance`), every document it names is still in the
   version it names (``holds``), no feedback gave it the verdict ``wrong``, and it has an answer,
   or it found none ("no answer") in the very corpus the KG holds now (its record's ``corpus``
   hash is the KG's :meth:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore.corpus_hash`: no document
   added, replaced or deleted since, anywhere; any new document may hold the answer) and it is
   the asking method's own run of the very same wording, or, for a method that asks with
   ``unanswered_rewordings`` (CatRAG and HippoRAG 2, which only seed their ranking with it and
   still answer a rewording), of a rewording the rule above matches. Such a run is handed on with
   ``answered`` False: the same method, asked the same question of the same corpus, would search
   and read the same way, so the calls it paid for are not paid again; another method may find
   what it did not, and a walk (ReMindRAG) started from where it failed found less than a new
   walk (docs/memory.md measures both);
3. its evidence, less any id feedback marked wrong and any node no longer in the KG, at most
   :data:`MAX_REUSED_EVIDENCE` ids, best first.

Everything is read in the tenant's own scope: another tenant's runs are never found.
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.kg.types import content_hash
from langgraph_kgmem.memory import namespace
from langgraph_kgmem.memory.feedback import FEEDBACK_KIND, MAX_FEEDBACK_PER_RUN
from langgraph_kgmem.memory.provenance import holds
from langgraph_kgmem.memory.runs import RUNS_KIND

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore

QUESTIONS_KIND = "run_questions"
MAX_SCAN = 1000               # stored questions a similarity lookup reads at most
MAX_REUSED_EVIDENCE = 10      # evidence ids a reused run hands on
MAX_METHODS = 16              # run ids one question item keeps (one per method)
QUESTION_CHARS = 300
DEFAULT_SIMILARITY = 0.8      # cosine at which a stored question counts as the same one reworded
NO_ANSWER = frozenset({"", "no answer", "noanswer", "none", "unknown"})


_NOT_NAMES = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "in", "on", "at", "the",
                        "a", "an", "from", "for", "of", "since", "before", "after", "apart", "besides", "aside",
                        "this", "that", "is", "was", "are", "were", "did", "does", "do", "and", "or"})
NAMES_OVERLAP = 0.5   # share of the two questions' capitalised words they must have in common


def names_of(question: str) -> set[str]:
    """The words of ``question`` that name something: capitalised words (a possessive 's dropped)
    other than question and function words, and every word holding a digit; casefolded."""
    out = set()
    for word in re.findall(r"[^\W_][\w'’.\-]*", str(question)):
        word = re.sub(r"['’]s$", "", word).strip(".'’-")
        if word and (word[0].isupper() or any(c.isdigit() for c in word)) and word.casefold() not in _NOT_NAMES:
            out.add(word.casefold())
    return out


def same_names(a: str, b: str) -> bool:
    """Whether two questions name the same things: the same numbers, and at least
    :data:`NAMES_OVERLAP` of their names in common (a reworded question keeps its names)."""
    na, nb = names_of(a), names_of(b)
    if {w for w in na if any(c.isdigit() for c in w)} != {w for w in nb if any(c.isdigit() for c in w)}:
        return False
    return not (na or nb) or len(na & nb) / len(na | nb) >= NAMES_OVERLAP


_WH = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
_LEADING = frozenset({"in", "on", "at", "for", "from", "by", "to", "during", "since", "of", "with", "and", "but",
                      "so", "then", "after", "before", "until"})
_TIME_NOUNS = frozenset({"year", "years", "date", "decade", "century", "month", "day", "time", "era", "period"})
_PLACE_NOUNS = frozenset({"city", "country", "town", "state", "place", "location", "county", "region", "continent",
                          "nation", "province", "village", "island"})
_AMOUNT_WORDS = frozenset({"many", "much", "old", "long", "far", "tall", "big", "large", "high", "often", "fast",
                           "deep", "wide", "heavy"})
GENERIC_FORM = "entity"   # "what ..." / "which ...": compatible with every other form but "polar"


def question_form(question: str) -> str:
    """What kind of answer ``question`` asks for: ``time`` (when, what year), ``place`` (where,
    which city), ``person`` (who, whom, whose), ``amount`` (how many, how old), ``reason`` (why),
    ``manner`` (how), ``polar`` (no question word: yes or no), else ``entity`` (what, which). Read
    from the question word that opens it (after a leading preposition), else from its last one
    (a question worded as a statement: "... was born in what year?")."""
    words = re.findall(r"[^\W_]+", str(question).casefold())
    at = [i for i, w in enumerate(words) if w in _WH]
    if not at:
        return "polar"
    lead = 0
    while lead < len(words) and words[lead] in _LEADING:
        lead += 1
    i = lead if lead in at else at[-1]
    word, after = words[i], words[i + 1:i + 3]
    fixed = {"when": "time", "where": "place", "who": "person", "whom": "person", "whose": "person", "why": "reason"}
    if word in fixed:
        return fixed[word]
    if word == "how":
        return "amount" if after[:1] and after[0] in _AMOUNT_WORDS else "manner"
    if _TIME_NOUNS & set(after):
        return "time"
    return "place" if _PLACE_NOUNS & set(after) else GENERIC_FORM


def same_form(a: str, b: str) -> bool:
    """Whether two questions ask for the same kind of answer (:func:`question_form`): equal forms,
    or one a generic "what/which" and the other anything but a yes/no question. "When was Albert
    Einstein born?" is not "Where was Albert Einstein born?", though the default embedding puts the
    two at cosine 0.95 and they name the same things."""
    fa, fb = question_form(a), question_form(b)
    return fa == fb or (GENERIC_FORM in (fa, fb) and "polar" not in (fa, fb))


def question_key(question: str) -> str:
    """``q-<hash>`` of the question with case, Unicode forms, runs of spaces and the closing
    punctuation folded; every other character (digits, signs, words) is kept, so two questions
    share a key only when they read the same."""
    text = " ".join(unicodedata.normalize("NFKC", str(question)).casefold().split())
    return "q-" + content_hash("question", text.rstrip(" ?.!"))


@dataclass(frozen=True)
class PriorRun:
    """A confirmed earlier run of the same (or a reworded) question (see the module docstring)."""

    run_id: str
    method: str
    question: str
    evidence: list[str]
    answer: str
    similarity: float            # 1.0 for the same question
    exact: bool
    provenance: list[dict[str, str]] = field(default_factory=list)
    answered: bool = True        # False: a "no answer" run of the unchanged corpus
    evidence_key: str = ""       # the hash of its whole evidence list (memory.runs.evidence_key)

    def summary(self) -> dict[str, Any]:
        """What a method's output says about the reuse: run id, method, similarity, exact, answered."""
        return {"run_id": self.run_id, "method": self.method, "similarity": round(self.similarity, 4),
                "exact": self.exact, "answered": self.answered}


def index_question(store: BaseStore, kg_name: str, scope: Sequence[str], question: str, vector: np.ndarray,
                   method: str, run_id: str) -> None:
    """Point the question's index item at ``run_id`` as ``method``'s latest run of it."""
    store.batch([index_question_op(store, kg_name, scope, question, vector, method, run_id)])


def index_question_op(store: BaseStore, kg_name: str, scope: Sequence[str], question: str, vector: np.ndarray,
                      method: str, run_id: str) -> PutOp:
    """The write of :func:`index_question` (its item read now), for a caller that adds it to a
    batch of its own after the run's record (one round trip for both)."""
    ns = namespace(kg_name, QUESTIONS_KIND, scope)
    key = question_key(question)
    old = store.get(ns, key)
    runs = dict((old.value if old is not None else {}).get("runs", {}))
    runs.pop(method, None)
    runs[method] = {"run_id": str(run_id), "ts": time.time()}
    runs = dict(sorted(runs.items(), key=lambda kv: -float(kv[1]["ts"]))[:MAX_METHODS])
    v = np.asarray(vector, dtype=np.float64)
    v = v / max(float(np.linalg.norm(v)), 1e-12)
    return PutOp(ns, key, {"question": " ".join(str(question).split())[:QUESTION_CHARS],
                           "v": [round(float(x), 5) for x in v], "runs": runs, "ts": time.time()}, index=False)


def _matches(store: BaseStore, ns: tuple[str, ...], key: str, question: str, query: np.ndarray,
             similarity: float) -> Iterator[tuple[float, bool, dict[str, Any]]]:
    """The index items to try, best first: the same key, then (read only when that one did not
    serve) the nearest stored question at or above ``similarity``, of at most :data:`MAX_SCAN`."""
    same = store.get(ns, key)
    if same is not None:
        yield 1.0, True, dict(same.value)
    if similarity > 1.0:
        return
    q = np.asarray(query, dtype=np.float64)
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    best: tuple[float, dict[str, Any]] | None = None
    for item in store.search(ns, limit=MAX_SCAN):
        if item.key == key or tuple(item.namespace) != ns or len(item.value.get("v", ())) != len(q):
            continue
        cos = float(np.asarray(item.value["v"], dtype=np.float64) @ q)
        other = item.value.get("question", "")
        if cos >= similarity and (best is None or cos > best[0]) and same_names(question, other) \
                and same_form(question, other):
            best = (cos, dict(item.value))
    if best is not None:
        yield best[0], False, best[1]


def _wrong(store: BaseStore, kg_name: str, scope: Sequence[str], run_id: str) -> tuple[bool, set[str]]:
    """Whether feedback gave run ``run_id`` the verdict wrong, and the evidence it marked wrong."""
    ns = namespace(kg_name, FEEDBACK_KIND, scope)
    verdict_wrong, ids = False, set()
    for item in store.batch([GetOp(ns, f"{run_id}-{i}", refresh_ttl=False) for i in range(MAX_FEEDBACK_PER_RUN)]):
        if item is not None:
            verdict_wrong = verdict_wrong or item.value.get("verdict") == "wrong"
            ids.update(str(i) for i in item.value.get("wrong", []))
    return verdict_wrong, ids


def no_answer(answer: Any) -> bool:
    """Whether a run's answer says it found none (empty, "no answer", "unknown", ...)."""
    return str(answer or "").strip().casefold().rstrip(".") in NO_ANSWER


def usable(kg: "KnowledgeGraphCore", record: dict[str, Any]) -> bool:
    """Whether a run record may be reused as far as the KG goes: its provenance holds and, for a
    run that found no answer, the corpus is the one it searched (the module docstring, step 2)."""
    if not holds(kg, record.get("provenance")):
        return False
    return not no_answer(record.get("answer")) or record.get("corpus") == kg.corpus_hash()


def find_prior_run(store: BaseStore, kg: "KnowledgeGraphCore", scope: Sequence[str], question: str, *,
                   method: str, similarity: float = DEFAULT_SIMILARITY,
                   query: np.ndarray | None = None, unanswered_rewordings: bool = False) -> PriorRun | None:
    """The confirmed earlier run of ``question`` for tenant ``scope`` (see the module docstring),
    or None. ``similarity`` > 1 looks up the same question only; ``unanswered_rewordings``: the
    method's own "no answer" run of a rewording may be handed on too (step 2)."""
    ns = namespace(kg.name, QUESTIONS_KIND, scope)
    query = kg.embed_query(question) if query is None else query
    runs_ns = namespace(kg.name, RUNS_KIND, scope)
    for sim, exact, value in _matches(store, ns, question_key(question), question, query, similarity):
        entries = value.get("runs", {})
        order = sorted(entries, key=lambda m: (m != method, -float(entries[m].get("ts", 0.0))))
        for m in order:
            rid = str(entries[m].get("run_id", ""))
            rec = store.get(runs_ns, rid) if rid else None
            if rec is None or not usable(kg, rec.value):
                continue
            if no_answer(rec.value.get("answer")) and (str(rec.value.get("method", m)) != method
                                                       or not (exact or unanswered_rewordings)):
                continue   # "no answer" says what this method found for this wording, nothing more
            answer = str(rec.value.get("answer") or "").strip()
            verdict_wrong, wrong_ids = _wrong(store, kg.name, scope, rid)
            if verdict_wrong:
                continue
            evidence = [e for e in rec.value.get("evidence", []) if e not in wrong_ids
                        and (kg.node(e) is not None or kg.edge(e) is not None)][:MAX_REUSED_EVIDENCE]
            if evidence:
                return PriorRun(run_id=rid, method=str(rec.value.get("method", m)),
                                question=str(rec.value.get("question", "")), evidence=evidence, answer=answer,
                                similarity=sim, exact=exact, provenance=list(rec.value.get("provenance", [])),
                                answered=not no_answer(answer), evidence_key=str(rec.value.get("evidence_key", "")))
    return None
