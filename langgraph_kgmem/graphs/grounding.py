"""Whether an answer stands on its evidence: every content word of it occurs in the passages.

One check, shared: AutoPrunedRetriever stores and replays an answer only when it is grounded in
the passages it cites, and every method's answer step (:mod:`langgraph_kgmem.graphs.answering`)
accepts a model's short answer only when the evidence it was shown holds it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Sequence

_TERM = re.compile(r"\w+")
# function words an answer may add around what it names ("It was in Warsaw."); words that change
# what an answer says (negations, numbers, quantifiers, "before"/"after") are never among them
_ANSWER_FILLER = frozenset("""
a an the and or of in on at by for from to into with as is are was were be been being am has have had do
does did it its it's this that these those there here their they them he him his she her hers we us our
you your i me my who whom whose which what when where why how s
""".split())


def _terms(text: str) -> set[str]:
    return set(_TERM.findall(unicodedata.normalize("NFKC", str(text)).casefold()))


def answer_terms(answer: str) -> set[str]:
    """The content words of an answer that its evidence must hold: NFKC-casefolded Unicode word
    tokens, less function words. Empty for an empty answer or one of function words only."""
    return {w for w in _terms(answer) if w not in _ANSWER_FILLER}


def polar_answer(answer: str) -> bool:
    """Whether ``answer`` is a plain yes or no: it names nothing a passage must hold, so it stands
    on its evidence without being cited from it."""
    return answer_terms(answer) in ({"yes"}, {"no"})


def cite_passages(answer: str, passages: Sequence[tuple[str, str]]) -> list[str] | None:
    """The passages (``(id, text)``, in evidence order) that ground ``answer``: a smallest-first
    cover of its :func:`answer_terms` (greedily the passage holding the most words not yet held;
    ties: the earlier one), when together they hold every one of them; ``None`` when the answer
    is not grounded (no content word, or a word no passage holds)."""
    want = answer_terms(answer)
    if not want:
        return None
    holds = [(pid, want & _terms(text)) for pid, text in passages]
    cited: list[str] = []
    held: set[str] = set()
    while held != want:
        best = max(holds, key=lambda x: len(x[1] - held), default=None)
        if best is None or not best[1] - held:
            return None
        cited.append(best[0])
        held |= best[1]
    return cited


def grounded_in(answer: str, cited: Sequence[str], text_of: Callable[[str], str | None]) -> bool:
    """Whether a stored answer still stands on the passages it cites: each one still exists
    (``text_of(id)`` is not None) and together they hold every content word of the answer."""
    want = answer_terms(answer)
    if not want or not cited:
        return False
    held: set[str] = set()
    for pid in cited:
        text = text_of(pid)
        if text is None:
            return False
        held |= want & _terms(text)
    return held == want
