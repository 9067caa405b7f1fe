"""ReMindRAG's prompts (rendered strictly by ``llm.render``) and the evidence text they quote.

:data:`PROMPTS` names them; a graph replaces any with ``create_remindrag_graph(kg, prompts={name:
template})`` (or a run with ``context={"prompts": {...}}``), checked against the placeholders
below (:mod:`langgraph_kgmem.graphs.prompt_overrides`):

- ``decompose`` (sub-questions): ``{question}``;
- ``sufficiency`` (enough evidence?): ``{question}``, ``{evidence}`` (fenced);
- ``next_move`` (the walk's next edge): ``{question}``, ``{evidence}``, ``{path}``, ``{current}``,
  ``{forward}``, ``{backward}`` (all but the question fenced);
- ``useful`` (which evidence helped, for memorisation): ``{question}``, ``{answer}``, ``{items}`` (fenced).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from langgraph_kgmem.graphs.common import DATA_NOTE, content_words, fence

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

DECOMPOSE_PROMPT = """Split this question into the sub-questions one has to answer, in order, to answer it.
A simple question stays one sub-question.

Question: {question}"""

SUFFICIENCY_PROMPT = """You are collecting evidence from a knowledge graph to answer a question.
""" + DATA_NOTE + """

Question: {question}

Evidence collected so far:
{evidence}

Is this evidence enough to answer the question with confidence? Answer false if any needed fact is missing."""

NEXT_MOVE_PROMPT = """You are walking a knowledge graph to find the evidence that answers a question.
The evidence collected so far is not enough yet. Choose one move.
""" + DATA_NOTE + """

Question: {question}

Evidence collected so far:
{evidence}

Path so far: {path}
You are at: {current}

Forward: neighbours of the current node not yet visited (w = learned edge weight):
{forward}

Backward: visited nodes you can return to and continue from:
{backward}

Pick the move most likely to lead to the missing evidence."""

USEFUL_PROMPT = DATA_NOTE + """

Question: {question}
Answer given: {answer}

Evidence items:
{items}

Which items did the answer rely on? List their ids (passages and facts that were needed)."""



def condense(text: str, question: str, budget: int) -> str:
    """A long chunk cut to its sentences sharing most words with the question (in text order)."""
    if len(text) <= budget:
        return text
    from langgraph_kgmem.ingest.chunking import split_sentences

    sents = split_sentences(text) or [text]
    qw = content_words(question)
    order = sorted(range(len(sents)), key=lambda i: (-len(qw & content_words(sents[i])), i))
    keep, used = set(), 0
    for i in order:
        if used + len(sents[i]) > budget and keep:
            break
        keep.add(i)
        used += len(sents[i])
    return " ".join(sents[i] for i in sorted(keep))[: budget + 200]


def node_label(kg: "KnowledgeGraph", nid: str, limit: int = 90) -> str:
    """How a node is shown in a prompt: ``[kind] text`` cut to ``limit`` characters (a passage with its
    title); the id itself when the node is gone."""
    node = kg.node(nid)
    if node is None:
        return nid
    if node.kind == "chunk":
        title = node.attrs.get("title") or ""
        return f"[passage] {title}: {node.text[:limit]}" if title else f"[passage] {node.text[:limit]}"
    return f"[{node.kind}] {node.text[:limit]}"


def render_evidence(kg: "KnowledgeGraph", question: str, chunks: Sequence[str], facts: Sequence[str],
                    budget: int) -> str:
    """The evidence so far as a fenced data block: each passage condensed towards the question
    (:func:`condense`, ``budget`` characters), then each fact's text."""
    lines = []
    for cid in chunks:
        node = kg.node(cid)
        title = node.attrs.get("title") or ""
        lines.append(f"- passage {cid}{f' [{title}]' if title else ''}: {condense(node.text, question, budget)}")
    for eid in facts:
        lines.append(f"- fact {eid}: {kg.fact_text(kg.edge(eid))}")
    return fence(lines, empty="(nothing yet)")



#: every prompt by name (see the module docstring): what ``prompts=`` may override
PROMPTS: dict[str, str] = {"decompose": DECOMPOSE_PROMPT, "sufficiency": SUFFICIENCY_PROMPT,
                           "next_move": NEXT_MOVE_PROMPT, "useful": USEFUL_PROMPT}
