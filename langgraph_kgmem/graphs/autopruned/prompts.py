"""AutoPrunedRetriever's prompts and the answer prompt around a packed codebook.

:data:`PROMPTS` names them; a graph replaces any with ``create_autopruned_graph(kg, prompts={name:
template})``, checked against the placeholders below
(:mod:`langgraph_kgmem.graphs.prompt_overrides`):

- ``triples`` (a question's or answer's triples): ``{kind}``, ``{text}`` (fenced);
- ``answer`` (the answer around a packed codebook): ``{legend}``, ``{known_note}`` (the note on
  stored answers, or nothing), ``{knowledge}`` (fenced), ``{question}``;
- ``sentences`` (the answer when the codebook shows passage sentences only): ``{knowledge}``
  (fenced), ``{question}``.
"""

from __future__ import annotations

import re
from typing import Mapping

from langgraph_kgmem.graphs.autopruned.packing import HEADER
from langgraph_kgmem.graphs.autopruned.schemas import CHANNEL_SECTION
from langgraph_kgmem.graphs.common import DATA_NOTE, fence

TRIPLES_PROMPT = """Turn this {kind} into a few [subject, relation, object] triples (at most 8).
""" + DATA_NOTE + """

{kind}: {text}"""

ANSWER_PROMPT = """Answer the question from the knowledge below, written as a compact codebook ({legend}).
Be brief: a name, a number, a date or a short phrase. If the knowledge does not hold the answer,
say "no answer".{known_note}
""" + DATA_NOTE + """

{knowledge}

Question: {question}
Answer:"""

LEGENDS = {
    "words": "each line is subject | relation | object",
    "ids": "entities and relations are numbered; each fact line is subject-number relation-number object-number",
    "matrix": "entities and relations are numbered; [edges] numbers each fact as subject relation object; "
              "the other sections list edge numbers",
    "sentences": "[facts]: each line is a passage title in brackets and sentences of that passage; "
                 "other sections: subject | relation | object",
}

KNOWN_NOTE = """
The [known answers] section holds answers to earlier, different questions: facts to use where they
apply, not this question's answer."""

# sentences and nothing else (no stored answers or questions shown): no codebook legend to explain
SENTENCES_PROMPT = """Answer the question from the passage sentences below (each line: [passage title] sentences).
Be brief: a name, a number, a date or a short phrase. If they do not hold the answer, say "no answer".
""" + DATA_NOTE + """

{knowledge}

Question: {question}
Answer:"""


# a line that opens like a speaker or section label ("SYSTEM:", "Assistant:", "### ...")
_LABEL_START = re.compile(r"^\s*(?:[^\s:]{1,30}:|#)")


def _bulleted(lines: list[str]) -> list[str]:
    # a passage sentence that opens like a label goes behind a bullet (headers stay as they are), so
    # a planted "SYSTEM: ..." never starts a line of the prompt; the other lines cost no extra token
    return [f"- {x}" if _LABEL_START.match(x) and not HEADER.match(x) else x for x in lines]


#: every prompt by name (see the module docstring): what ``prompts=`` may override
PROMPTS: dict[str, str] = {"triples": TRIPLES_PROMPT, "answer": ANSWER_PROMPT, "sentences": SENTENCES_PROMPT}


def answer_prompt(question: str, packed: str, encoding: str, templates: Mapping[str, str] | None = None) -> str:
    """The answer step's prompt around a packed codebook (also used to count would-be tokens offline).
    ``templates``: the graph's ``answer`` and ``sentences`` prompts (default: :data:`PROMPTS` as it is now)."""
    chosen = {**PROMPTS, **(templates or {})}
    lines = packed.splitlines()
    if encoding == "sentences" and lines[:1] == [f"[{CHANNEL_SECTION['F']}]"] and not any(
            HEADER.match(x) for x in lines[1:]):
        return chosen["sentences"].format(knowledge=fence(_bulleted(lines[1:])), question=question)
    # a stored answer came from another question: the model is told so, never handed it as this one's
    note = KNOWN_NOTE if any(x.startswith(f"[{CHANNEL_SECTION['A']}]") for x in lines) else ""
    return chosen["answer"].format(legend=LEGENDS.get(encoding, LEGENDS["words"]), known_note=note,
                                knowledge=fence(_bulleted(lines) if encoding == "sentences" else lines,
                                                empty="(nothing known)"), question=question)
