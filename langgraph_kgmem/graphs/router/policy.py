"""The router's documented rules, the learned statistics on top of them, and each method's own
confidence in its result.

Rules (:data:`FIT`): per question form, how well each method fits it, a prior value in [0, 1]:

- ``records`` → KG-IRAG (the one method that reads time-stamped records);
- ``graph`` → R3-Cycle (tool calls over typed nodes, reflection on failure), Graph-CoT next;
- ``relational`` and ``lookup`` (questions over documents) → CatRAG, HippoRAG 2 just under it
  (HippoRAG 2 is CatRAG with its additions off: at most as good), ReMindRAG, AutoPrunedRetriever.
  Under every decider: a preset's lower cost never puts it before its family's method; the budget
  does (a method whose expected calls do not fit is not started, the next best that fits is). With
  a model an earlier rule put HippoRAG 2 first for its cost; its one gold decision is the fact
  filter, and when the filter errs nothing in its output shows it (a wrong keep of four facts reads
  as confident as a right one), so the cheap run neither answered right nor escalated.

Escalation (:func:`ladder`): on a question over documents (:data:`ESCALATE_FORMS`) the first
method's result escalates, when its own confidence is low, to the best-ranked method of *another
family* (:data:`FAMILY`: HippoRAG 2 is CatRAG with its additions off, so the two miss the same
passages): ReMindRAG's LLM-guided traversal after CatRAG or HippoRAG 2. The more confident result answers.

A method the KG cannot serve (KG-IRAG without records, a passage method without documents) or the
run lacks (a store) is left out. Learned statistics move the prior value (:func:`rank`): feedback
on the method for this form, ``(useful - wrong) / (useful + wrong + FEEDBACK_PRIOR)`` ×
:data:`FEEDBACK_WEIGHT` (bounded by the weight, whatever a tenant sends; a ``wrong`` counts at the
form's level only once another method answered that question right, see
:mod:`~langgraph_kgmem.graphs.router.stats`); mean confidence once the method ran ``min_runs``
times on the form (else its family's, :func:`mean_confidence`), ``(mean - 0.5)`` × :data:`CONFIDENCE_WEIGHT`; and the question's own record: a
method judged wrong on this very question (the answer it gave, or a run it tried and lost) loses
:data:`WRONG_PENALTY`, and so does its family (a method the form's rules name stays just above
those they do not: on a records question KG-IRAG, the only method that reads records, stays
first); one judged useful gains :data:`USEFUL_BONUS` (a question asked again goes back to what
served it). Ties go to the cheaper method.

Expected cost (:func:`expected_calls`): LLM calls, from the statistics' mean once a method ran
``min_runs`` times on the form, else :data:`PRIOR_CALLS`; zero for an offline run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from langgraph_kgmem.graphs.common import normalize_answer
from langgraph_kgmem.graphs.router.signals import Form, KgProfile
from langgraph_kgmem.graphs.router.stats import means

FIT: dict[str, dict[str, float]] = {
    "records": {"kgirag": 1.0},
    "graph": {"r3cycle": 1.0, "graphcot": 0.9},
    "relational": {"catrag": 1.0, "hipporag2": 0.95, "remindrag": 0.8, "autopruned": 0.7},
    "lookup": {"catrag": 1.0, "hipporag2": 0.95, "remindrag": 0.8, "autopruned": 0.7},
}
OTHER_FIT = 0.05                 # a method the form's rules do not name
ESCALATE_FORMS = frozenset({"relational", "lookup"})   # forms whose first result may escalate to another family
# LLM calls a question, before the statistics know better: CatRAG's 3.8 with a real model (docs/methods/catrag.md),
# HippoRAG 2's filter + answer, KG-IRAG's plan + two judge rounds + answer, a ReAct attempt of a few steps
PRIOR_CALLS: dict[str, float] = {"hipporag2": 2.0, "catrag": 3.8, "kgirag": 4.0, "r3cycle": 5.0, "graphcot": 4.0,
                                 "remindrag": 6.0, "autopruned": 2.0}
DEFAULT_PRIOR_CALLS = 4.0
FEEDBACK_WEIGHT = 0.5
FEEDBACK_PRIOR = 8.0             # pseudo-verdicts: one rescued question moves a form by at most 0.5 / 9
CONFIDENCE_WEIGHT = 0.2
WRONG_PENALTY = 1.0
FAMILY_PENALTY = 0.5             # a method whose family-mate was judged wrong on the question: likely, not surely, wrong
WRONG_FLOOR = 0.01               # a fitting method judged wrong still ranks above the methods the rules do not name
USEFUL_BONUS = 0.5
ASK_MARGIN = 0.1                 # top two methods of different families closer than this: the rules are not sure
FAMILY = {"hipporag2": "catrag", "graphcot": "r3cycle"}   # a preset counts as its method's family

NEEDS = {"kgirag": "records"}    # the KG part a method needs; the others need documents or a graph
DOCUMENT_METHODS = frozenset({"catrag", "hipporag2", "remindrag", "autopruned"})
STORE_METHODS = frozenset({"remindrag", "autopruned"})
MODEL_STORE_METHODS = frozenset({"catrag"})   # with a model: CatRAG caches its neighbour summaries there


@dataclass(frozen=True)
class Candidate:
    """One method the router could run for a question, with what decided its place."""

    method: str
    value: float
    cost: float
    why: str
    ruled_out: bool = False      # judged wrong on this question (itself or its family): never an escalation target

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"method", "value", "cost", "why", "ruled_out"}`` (``cost``: expected LLM calls)."""
        return {"method": self.method, "value": round(self.value, 4), "cost": round(self.cost, 2), "why": self.why,
                "ruled_out": self.ruled_out}


def unservable(method: str, profile: KgProfile, has_store: bool, offline: bool = True) -> str | None:
    """Why ``method`` cannot answer on this KG / run, or None when it can."""
    if NEEDS.get(method) == "records" and not profile.records:
        return "the KG holds no time-stamped records"
    if method in DOCUMENT_METHODS and not profile.documents:
        return "the KG holds no documents"
    if not has_store and (method in STORE_METHODS or (method in MODEL_STORE_METHODS and not offline)):
        return "the run has no store for its memory"
    return None


def expected_calls(method: str, row: Mapping[str, float] | None, min_runs: int, offline: bool) -> float:
    """Expected LLM calls of one run of ``method``: 0 offline; the statistics' mean after ``min_runs``
    runs on the form; else :data:`PRIOR_CALLS`."""
    if offline:
        return 0.0
    m = means(row)
    if m["runs"] >= min_runs:
        return m["calls"]
    return PRIOR_CALLS.get(method, DEFAULT_PRIOR_CALLS)


def rank(form: Form, methods: list[str], stats: Mapping[str, Mapping[str, float]] | None,
         asked: Mapping[str, Any] | None, *, min_runs: int, offline: bool) -> list[Candidate]:
    """``methods`` (those that can serve) ranked for a question of ``form``: the rules' prior value,
    moved by the statistics of the form (``stats``: method → counters) and the question's own record
    (``asked``: what :func:`~langgraph_kgmem.graphs.router.stats.question_record` returned)."""
    fit = FIT.get(form, {})
    seen = (asked or {}).get("methods", {})
    costs = {m: expected_calls(m, (stats or {}).get(m), min_runs, offline) for m in methods}
    out = []
    for m in methods:
        row = (stats or {}).get(m)
        s = means(row)
        value = fit.get(m, OTHER_FIT)
        why = [f"rules: {'fits' if m in fit else 'not named for'} {form} questions ({value:.2f})"]
        if s["useful"] or s["wrong"]:
            fb = FEEDBACK_WEIGHT * (s["useful"] - s["wrong"]) / (s["useful"] + s["wrong"] + FEEDBACK_PRIOR)
            value += fb
            why.append(f"feedback {int(s['useful'])} useful / {int(s['wrong'])} wrong ({fb:+.2f})")
        pooled = mean_confidence(m, stats, min_runs)
        if pooled is not None:
            conf, runs, whose = pooled
            adj = CONFIDENCE_WEIGHT * (conf - 0.5)
            value += adj
            why.append(f"mean confidence {conf:.2f} over {runs} runs{'' if whose == m else f' of {whose} (its family)'} "
                       f"({adj:+.2f})")
        mine = seen.get(m) or {}
        kin = [k for k, v in seen.items() if k != m and family(k) == family(m) and judged_wrong(v)]
        if mine.get("useful", 0) > mine.get("wrong", 0):
            value += USEFUL_BONUS
            why.append(f"judged useful on this question before ({USEFUL_BONUS:+.2f})")
        elif judged_wrong(mine) or kin:
            # behind every other method the rules name for the form, never behind one they do not
            cut = WRONG_PENALTY if judged_wrong(mine) else FAMILY_PENALTY
            value = max(value - cut, OTHER_FIT + WRONG_FLOOR) if m in fit else value - cut
            whom = "it" if judged_wrong(mine) else f"{kin[0]} (its family)"
            why.append(f"{whom} judged wrong on this question before (-{cut:.2f}, floor {OTHER_FIT + WRONG_FLOOR:.2f})")
        elif mine:
            why.append("answered this question before")
        out.append(Candidate(m, value, costs[m], "; ".join(why),
                             ruled_out=bool(judged_wrong(mine) or kin) and not mine.get("useful", 0) > mine.get("wrong", 0)))
    return sorted(out, key=lambda c: (-c.value, c.cost, c.method))


def mean_confidence(method: str, stats: Mapping[str, Mapping[str, float]] | None,
                    min_runs: int) -> tuple[float, int, str] | None:
    """(mean confidence, runs, whose) that moves ``method``'s value on a form: its own once it ran
    ``min_runs`` times there, else its family's (a preset and its method miss the same passages: a
    CatRAG that keeps falling back says the same of HippoRAG 2, which then never ran), else None."""
    rows = {k: means(v) for k, v in (stats or {}).items() if family(k) == family(method)}
    order = [method] + sorted(k for k in rows if k != method)
    for k in order:
        if k in rows and rows[k]["runs"] >= min_runs:
            return rows[k]["confidence"], int(rows[k]["runs"]), k
    return None


def family(method: str) -> str:
    """The method a preset belongs to (``hipporag2`` → ``catrag``); a method is its own family."""
    return FAMILY.get(method, method)


def judged_wrong(entry: Mapping[str, Any] | None) -> bool:
    """Whether a question record's entry for one method holds more wrong verdicts than useful ones."""
    return bool(entry) and entry.get("wrong", 0) > entry.get("useful", 0)


def rules_unsure(ranked: list[Candidate]) -> bool:
    """Whether the best two candidates of different families are within :data:`ASK_MARGIN`."""
    if not ranked:
        return False
    top = ranked[0]
    rival = next((c for c in ranked[1:] if family(c.method) != family(top.method)), None)
    return rival is not None and top.value - rival.value < ASK_MARGIN


def ladder(form: Form, ranked: list[Candidate], escalate: bool, first: str | None = None) -> list[str]:
    """The methods to run, in order: ``first`` (default: the best-ranked), then, on a question over
    documents (:data:`ESCALATE_FORMS`) with escalation on, the best-ranked method of another family
    that the rules name for the form and the question's record has not ruled out (its value above
    the method or its family judged wrong on it); it runs only when the first result's own confidence is low."""
    first = first or ranked[0].method
    if not escalate or form not in ESCALATE_FORMS:
        return [first]
    nxt = next((c.method for c in ranked if family(c.method) != family(first) and not c.ruled_out
                and c.method in FIT.get(form, {})), None)
    return [first, nxt] if nxt else [first]


def confidence(method: str, out: Mapping[str, Any]) -> float:
    """A method's own confidence in its result, in [0, 1], from its output alone (no gold, no LLM):
    0 for an empty or "no answer" answer; CatRAG / HippoRAG 2: 0.25 when no fact survived the filter
    (dense fallback), else 0.4 + 0.2 per verified fact (at most 1); KG-IRAG: 0.9 when its judge
    stopped (the records settled it), else 0.1; R3-Cycle / Graph-CoT: 0.9 when the last attempt was
    verified, 0.1 when it halted, else 0.4; ReMindRAG: 0.8 for a sufficient or replayed subgraph,
    else 0.4; AutoPrunedRetriever: 0.8 when it reused stored runs, else 0.5; any other: 0.5."""
    answer = normalize_answer(str(out.get("answer") or ""))
    if not answer or answer == "no answer":
        return 0.0
    fam = family(method)
    if fam == "catrag":
        return 0.25 if out.get("fallback") else min(1.0, 0.4 + 0.2 * len(out.get("facts") or []))
    if fam == "kgirag":
        return 0.9 if out.get("stopped") else 0.1
    if fam == "r3cycle":
        attempts = out.get("attempts") or [{}]
        outcome = attempts[-1].get("outcome")
        return 0.9 if outcome == "correct" else 0.1 if outcome == "halted" else 0.4
    if fam == "remindrag":
        return 0.8 if out.get("replayed") or out.get("stop_reason") == "sufficient" else 0.4
    if fam == "autopruned":
        return 0.8 if out.get("reused") else 0.5
    return 0.5
