"""R3-Cycle without a model (``model="offline"``): a heuristic agent, its self-check and its
reflection, each documented so a run's decisions can be explained."""

from __future__ import annotations

import re
from typing import Any, Sequence

from langgraph_kgmem.graphs.common import MAX_REASON_CHARS, normalize_answer
from langgraph_kgmem.graphs.r3cycle.prompts import action_signature
from langgraph_kgmem.graphs.r3cycle.schemas import FINISH, NO_ANSWER, FailureType, Reflection, Verdict
from langgraph_kgmem.agent_tools.graph_env import GraphEnv

_WORD = re.compile(r"[a-z0-9]+")
_QWORDS = {"what", "which", "who", "whom", "whose", "when", "where", "how", "in", "is", "was", "the", "a", "an",
           "of", "has", "have", "did", "does", "do", "by", "many", "much", "from", "this", "that", "book", "total"}
# question words that name a feature or relation under another word
_SYNONYMS = {"born": "birth", "wrote": "written", "write": "written", "writer": "author", "released": "publisher",
             "long": "pages", "based": "city", "located": "city", "from": "country", "old": "year"}
_SPAN_QUOTED = re.compile(r"[\"“']([^\"”']{2,})[\"”']")
_SPAN_CAPS = re.compile(r"(?:[A-Z][\w'.-]*)(?:\s+(?:of|the|de|van|von)?\s*[A-Z][\w'.-]*)*")
_HOP = re.compile(r"\bthe (\w+) of\b", re.I)
_COUNTED = re.compile(r"\bhow many (\w+)", re.I)
NODE_IDS = re.compile(r"[A-Za-z][\w]*-[\w-]+")


def entity_span(question: str) -> str:
    """The question's entity mention: a quoted title, else the longest capitalised run (not the
    question word), else the question without function words."""
    m = _SPAN_QUOTED.search(question)
    if m:
        return m.group(1).strip()
    runs = []
    for m in _SPAN_CAPS.finditer(question):
        text = m.group(0).strip()
        words = text.split()
        if words and words[0].lower() in _QWORDS and m.start() == 0:
            words = words[1:]
        if words:
            runs.append(" ".join(words))
    if runs:
        return max(runs, key=len)
    return " ".join(w for w in _WORD.findall(question.lower()) if w not in _QWORDS) or question


def _stems(text: str) -> set[str]:
    out = set()
    for w in _WORD.findall(text.lower().replace("_", " ")):
        if w in _QWORDS:
            continue
        w = _SYNONYMS.get(w, w)
        out.add(w[:5])
    return out


def _match(name: str, words: set[str]) -> int:
    return len(_stems(name) & words)


def observed_value(observation: str) -> str:
    """The value an observation reports: a feature's value, a neighbour count, or the whole
    observation when it is neither."""
    m = re.search(r" is: (.*)$", observation, re.S)
    if m:
        return m.group(1).strip().strip('"')
    m = re.search(r" has (\d+) neighbours", observation)
    return m.group(1) if m else observation


def offline_action(env: GraphEnv, question: str, steps: Sequence[dict[str, Any]], path: Sequence[dict[str, Any]],
                   avoid: str = "") -> tuple[str, str, dict[str, Any]]:
    """The heuristic agent used with ``model="offline"``: ``(thought, tool, args)``.

    1. RetrieveNode on the question's entity span (a quoted title or the capitalised name).
    2. For every "the X of" phrase, NeighbourCheck along the relation best matching X.
    3. "How many ..." questions: NodeDegree along the relation best matching the question, then
       Finish with the count.
    4. Otherwise NodeFeature on the feature best matching the question (``name`` when none
       matches; a matching relation not yet followed is followed first), then Finish with it.
    Calls whose signature appears in ``avoid`` (a reflection's advice) are never repeated.
    """
    q = question
    if not steps:
        span = entity_span(q)
        return f"Find the node for {span!r}.", "RetrieveNode", {"keyword": span}
    last = steps[-1]
    if last["tool"] in ("NodeFeature", "NodeDegree") and not last.get("error"):
        value = observed_value(last["observation"])
        return "The last observation answers the question.", FINISH, {"answer": value}
    hops = [h for h in path if h["op"] in ("retrieve", "neighbours") and h.get("to")]
    if not hops:
        return "The entity could not be found.", FINISH, {"answer": NO_ANSWER}
    current = hops[-1]["to"][0]
    node = env.kg.node(current)
    if node is None:
        return "The path leads nowhere.", FINISH, {"answer": NO_ANSWER}
    tried = {action_signature(s["tool"], s["args"]) for s in steps} | set(re.findall(r"\w+\([^)]*\)", avoid))
    words = _stems(q)
    relations = [r for r in env.relations(current)
                 if action_signature("NeighbourCheck", {"node_id": current, "relation": r}) not in tried]
    followed = [h for h in path if h["op"] == "neighbours"]
    hop_words = [w.lower() for w in _HOP.findall(q)]
    if len(followed) < len(hop_words):
        want = _stems(hop_words[len(followed)])
        ranked = sorted(relations, key=lambda r: (-_match(r, want), r))
        if ranked and _match(ranked[0], want):
            return (f"Follow the {ranked[0]!r} relation of {current}.", "NeighbourCheck",
                    {"node_id": current, "relation": ranked[0]})
    counted = _COUNTED.search(q)
    if counted:
        used = {h["relation"] for h in followed}
        cands = [r for r in env.relations(current) if r not in used
                 and action_signature("NodeDegree", {"node_id": current, "relation": r}) not in tried]
        if cands:
            best = max(cands, key=lambda r: (_match(r, words) + 2 * _match(r, _stems(counted.group(1))), r))
            return f"Count the {best!r} neighbours of {current}.", "NodeDegree", {"node_id": current, "relation": best}
    feats = [f for f in env.features(node) if f != "kind"
             and action_signature("NodeFeature", {"node_id": current, "feature": f}) not in tried]
    best_feat = max(feats, key=lambda f: (_match(f, words), f == "name", f), default=None)
    if best_feat is not None and _match(best_feat, words):
        return f"Read the {best_feat!r} of {current}.", "NodeFeature", {"node_id": current, "feature": best_feat}
    rel_ranked = sorted(relations, key=lambda r: (-_match(r, words), r))
    if not followed and rel_ranked and _match(rel_ranked[0], words):
        return (f"Follow the {rel_ranked[0]!r} relation of {current}.", "NeighbourCheck",
                {"node_id": current, "relation": rel_ranked[0]})
    for f in ("name", "title"):
        if f in feats:
            return f"Read the {f} of {current}.", "NodeFeature", {"node_id": current, "feature": f}
    return "Nothing left to try.", FINISH, {"answer": node.text or NO_ANSWER}


def offline_reflection(state: dict[str, Any], failure: FailureType, reason: str) -> Reflection:
    """The heuristic reflection used with ``model="offline"``: after a halt, go directly and avoid the
    calls that failed; after a rejected answer, avoid the last read (no retry when there was none)."""
    steps = state.get("steps", [])
    if failure == "halted":
        tried = [action_signature(s["tool"], s["args"]) for s in steps if s.get("error")]
        return Reflection(root_cause=f"the attempt used all {state['budget']} steps without calling Finish",
                          advice=("Go directly: retrieve the entity, follow one relation, read one feature, then "
                                  "Finish." + (f" Avoid: {'; '.join(tried)}." if tried else ""))[:MAX_REASON_CHARS],
                          retry=True)
    reads = [action_signature(s["tool"], s["args"]) for s in steps
             if s["tool"] in ("NodeFeature", "NodeDegree", "NeighbourCheck")]
    avoid = reads[-1:]
    return Reflection(root_cause=f"the answer {state.get('final')!r} was rejected: {reason}"[:MAX_REASON_CHARS],
                      advice=("Read a different feature or follow a different relation than the rejected one."
                              + (f" Avoid: {'; '.join(avoid)}." if avoid else ""))[:MAX_REASON_CHARS],
                      retry=bool(avoid))


def offline_verdict(answer: str, steps: Sequence[dict[str, Any]], question: str = "") -> Verdict:
    """The heuristic verifier used with ``model="offline"``: an answer passes when it is not empty,
    not "no answer", not words of the question, and appears in an observation."""
    a = normalize_answer(answer)
    if not a or a == normalize_answer(NO_ANSWER):
        return Verdict(ok=False, reason="no answer was given")
    if a in normalize_answer(question):   # "Who married Marie Curie?" -> "Marie Curie" answers nothing
        return Verdict(ok=False, reason="the answer only repeats words of the question")
    seen = any(a in normalize_answer(s["observation"]) for s in steps if s["tool"] != FINISH)
    return Verdict(ok=seen, reason="the answer appears in the observations" if seen
                   else "the answer appears in no observation")
