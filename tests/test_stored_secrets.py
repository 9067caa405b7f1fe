"""A model reply that echoes a secret is stored redacted: CatRAG's neighbour summaries, R3-Cycle's
reflections, trajectories and answers, every method's answer in the checkpoint. (A reply can quote
a key from a prompt, a document or its own training data; what the package keeps must not.)"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage
from method_cases import compile_method

from langgraph_kgmem.graphs.registry import METHODS
from langgraph_kgmem.testing import HOSTILE_KINDS, HostileChatModel

KEY = "sk-proj-LEAKEDkey0123456789abcdefghijklmnopqrstuvwx"
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYLEAKED01"
LEAKS = (KEY, AWS, "LEAKEDkey0123456789", "bPxRfiCYLEAKED01")
# free-text fields of the decisions: a reply may put a key in any of them; ids stay clean so the
# decisions are accepted and their text is what gets stored
TEXT_ARGS = {"answer", "advice", "root_cause", "reason", "summary", "thought"}


class LeakyModel(HostileChatModel):
    """Plausible replies (well-formed, structured output on) with a key appended to every free text."""

    def __init__(self, **kw):
        super().__init__(weights={k: 0.0 for k in HOSTILE_KINDS if k != "plausible"}, **kw)

    def reply(self, messages, request, tools=None):
        msg = super().reply(messages, request, tools)
        content = f"{msg.content} (key {KEY}, aws {AWS})" if isinstance(msg.content, str) and msg.content else msg.content
        calls = [{**c, "args": {k: f"{v} {KEY} {AWS}" if k in TEXT_ARGS and isinstance(v, str) else v
                                for k, v in c["args"].items()}} for c in msg.tool_calls]
        return AIMessage(content, tool_calls=calls)


@pytest.mark.parametrize("method", [m for m in ("catrag", "r3cycle", "remindrag", "autopruned", "hipporag2")
                                    if m in METHODS])
def test_a_key_a_model_echoes_is_stored_redacted(method, kg):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    store, saver = InMemoryStore(), InMemorySaver()
    model = LeakyModel()
    app = compile_method(method, kg, model=model, store=store, checkpointer=saver)
    answers = []
    for seed in (0, 2, 4):   # even seeds: structured output on; different paths through the method
        model.seed = seed
        for i, question in enumerate(("Where was Marie Curie born?", "Who married Pierre Curie?")):
            out = app.invoke({"question": question}, {"configurable": {"thread_id": f"{method}-{seed}-{i}"}})
            answers.append(out["answer"])
    kept = repr([c.checkpoint for c in saver.list(None)])
    kept += repr([item.value for ns in store.list_namespaces() for item in store.search(ns, limit=1000)])
    assert "<redacted>" in kept, f"{method}: no reply with the key was kept at all (the test reached nothing)"
    for leak in LEAKS:
        assert leak not in kept, f"{method}: {leak!r} was stored"
        assert not any(leak in a for a in answers), f"{method}: {leak!r} in an answer"


def test_catrag_summaries_and_r3cycle_reflections_are_among_what_was_checked(kg):
    """The stores above hold the records the audit named: CatRAG summaries, R3-Cycle reflections."""
    from langgraph.store.memory import InMemoryStore

    for method, kind in (("catrag", "summaries"), ("r3cycle", "reflections")):
        if method not in METHODS:
            continue
        store, model = InMemoryStore(), LeakyModel()
        app = compile_method(method, kg, model=model, store=store)
        for seed in (0, 2, 4):
            model.seed = seed
            app.invoke({"question": "Where was Marie Curie born?"})
        records = [item.value for ns in store.list_namespaces() if kind in ns for item in store.search(ns, limit=1000)]
        assert records, f"{method} stored no {kind}"
        assert "<redacted>" in repr(records) and KEY not in repr(records), records[:2]
