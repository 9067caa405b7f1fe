"""Answer-typed sentences: the sentence ranking's ``"answer"`` term (``relevance_weights``).

A multi-hop question's answer sentence often shares few words with the question ("the city where
X was born" is asked, "Y is a city in Z" answers) and so ranks below sentences that only restate
the question's own names. The offline answer step already knows what a question asks for (a date
for "when", a place for "where", a person for "who", a number for "how many", the category noun
of "which county ...") and which spans of the evidence fit it
(:func:`~langgraph_kgmem.graphs.answering.candidates`). This module asks it, over the candidate
passages in the ranking's order, for its best candidates, and gives each sentence holding one of
them that candidate's score as a share of the best one's (0 to 1): a sentence holding a
well-supported span of the asked type rises, one holding only the question's own names does not.

Yes-no questions ask for no span, and a comparison's candidates are the options the question
names (every sentence about them already holds the question's words): both get no term.
No LLM call; reads only the question and the candidate passages.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

import numpy as np

from langgraph_kgmem.graphs.answering import answer_type, candidates

UNTYPED = ("yesno", "choice")   # answer kinds that get no "answer" term


def answer_bearing(question: str, passages: Sequence[str], titles: Mapping[str, str],
                   sentences: Mapping[str, Sequence[tuple[int, str]]],
                   cands: Sequence[tuple[str, int]]) -> np.ndarray:
    """Per candidate sentence ``(passage, index)`` of ``cands``: the best score share (0 to 1) of
    the offline answer step's candidates (read over ``passages``, best first) that it holds as a
    whole word sequence, case-insensitive; 0 where it holds none, and everywhere for a yes-no or
    comparison question."""
    out = np.zeros(len(cands))
    kind = answer_type(question)
    if kind.kind in UNTYPED or not cands:
        return out
    evidence = [{"id": c, "title": titles.get(c, ""), "text": " ".join(s for _, s in sentences[c])}
                for c in passages if sentences.get(c)]
    found = candidates(question, evidence, qtype=kind)
    top = found[0].score if found else 0.0
    if top <= 0:
        return out
    patterns = [(re.compile(r"(?<!\w)" + re.escape(f.text) + r"(?!\w)", re.I), f.score / top)
                for f in found if f.text.strip()]
    for j, (c, i) in enumerate(cands):
        text = sentences[c][i][1]
        out[j] = max((share for pat, share in patterns if pat.search(text)), default=0.0)
    return out
