"""CatRAG's prompts (rendered strictly by ``llm.render``: a missing placeholder is an error).

:data:`PROMPTS` names them; a graph replaces any with ``create_catrag_graph(kg, prompts={name:
template})`` (or a run with ``context={"prompts": {...}}``), checked against the placeholders
below (:mod:`langgraph_kgmem.graphs.prompt_overrides`):

- ``filter`` (the recognition filter): ``{question}``, ``{facts}`` (fenced), ``{keep}``;
- ``ner`` (the question's named entities): ``{question}``;
- ``score`` (Stage II edge scores, one call per seed): ``{seed}`` (fenced), ``{question}``,
  ``{facts}`` (fenced), ``{neighbours}`` (fenced);
- ``summary`` (a neighbour's summary, cached in the store): ``{entity}`` (fenced), ``{facts}`` (fenced).
"""

from __future__ import annotations

from typing import Any, Sequence

from langgraph_kgmem.graphs.common import DATA_NOTE, fence

FILTER_PROMPT = """You are checking retrieved facts before they are used to search a knowledge graph.
""" + DATA_NOTE + """

Question: {question}

Candidate facts:
{facts}

Return the numbers of the facts that are relevant to answering the question (at most {keep}),
most useful first. Return an empty list if none is relevant."""

NER_PROMPT = """List the named entities (people, places, organisations, titles of works, dates) that
the question mentions, written exactly as in the question.

Question: {question}"""

SCORE_PROMPT = """We search a knowledge graph for the answer to a question and stand at the entity
{seed}. Decide which of its neighbours are worth following.
""" + DATA_NOTE + """

Question: {question}

Facts already verified as relevant:
{facts}

Neighbours of the entity (number, name, the facts linking them, what else we know about them):
{neighbours}

Score every neighbour from 0 to 10: 0-3 irrelevant, 4-6 weakly related, 7-9 useful, 10 essential."""

SUMMARY_PROMPT = """Summarise in at most three sentences what these facts say about {entity}.
""" + DATA_NOTE + """

Facts:
{facts}"""



def fact_lines(facts: Sequence[dict[str, Any]]) -> str:
    """Facts as a fenced bullet list (the prompts' ``{facts}``)."""
    return fence([f"- {f['text']}" for f in facts])


#: every prompt by name (see the module docstring): what ``prompts=`` may override
PROMPTS: dict[str, str] = {"filter": FILTER_PROMPT, "ner": NER_PROMPT, "score": SCORE_PROMPT, "summary": SUMMARY_PROMPT}
