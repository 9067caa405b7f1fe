"""Tracing: run names, metadata and spans, collected by a local tracer (no network, no LangSmith)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from langchain_core.tracers.base import BaseTracer
from method_cases import compile_method, method_case, pick

from langgraph_kgmem.graphs.registry import METHODS
from langgraph_kgmem.testing import ScriptedChatModel
from langgraph_kgmem.tracing import Span, run_name, scrub, traced_config, traced_span, with_tracing

UNCLEAR_NAMES = {"RunnableLambda", "RunnableSequence", "RunnableParallel", "<lambda>", "LangGraph", "func"}
HOT_PATH = re.compile(r"ppr|retriev|replay|nearest|search|seed|recall")
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


class RunCollector(BaseTracer):
    """Keeps every finished run (chains, nodes, LLM calls, spans) in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.finished = []

    def _persist_run(self, run) -> None:  # nothing leaves the process
        pass

    def _end_trace(self, run) -> None:
        super()._end_trace(run)
        self.finished.append(run)


def find_vectors(value, path="$"):
    """Paths of embedding-like payloads: numpy arrays or runs of >= 16 floats."""
    if isinstance(value, np.ndarray):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in find_vectors(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        if len(value) >= 16 and all(isinstance(v, float) for v in value):
            return [path]
        return [p for i, v in enumerate(value) for p in find_vectors(v, f"{path}[{i}]")]
    return []


def traced_run(kg, store, method, model="offline"):
    kg, question, _ = method_case(method, kg)
    app = compile_method(method, kg, model=model, store=store)
    collector = RunCollector()
    config = traced_config(method, kg, model=model, config={"callbacks": [collector]})
    out = app.invoke({"question": question}, config=config)
    return app, out, collector.finished


@pytest.mark.parametrize("method", list(METHODS))
def test_method_runs_have_clear_names_metadata_spans_and_no_vectors(kg, store, method):
    app, out, runs = traced_run(kg, store, method)
    kg = method_case(method, kg)[0]

    roots = [r for r in runs if r.parent_run_id is None]
    assert [r.name for r in roots] == [run_name(method)]
    root = roots[0]
    assert root.tags and f"kgmem:{method}" in root.tags
    assert root.outputs["usage"]["llm_calls"] == 0 and "offline_decisions" in root.outputs["usage"]

    # every run carries the method and KG name (inherited metadata)
    for r in runs:
        assert r.metadata.get("method") == method, r.name
        assert r.metadata.get("kg_name") == kg.name, r.name
        assert r.metadata.get("model") == "offline"

    # every node that ran is a run named after the node; names are snake_case, never generic
    graph_nodes = set(app.get_graph().nodes) - {"__start__", "__end__"}
    node_runs = [r for r in runs if r.metadata.get("langgraph_node") and r.name == r.metadata["langgraph_node"]]
    assert node_runs, "no node runs recorded"
    assert {r.name for r in node_runs} <= graph_nodes
    for r in runs:
        assert r.name not in UNCLEAR_NAMES, f"unclear run name {r.name!r}"
    for name in graph_nodes:
        assert SNAKE.match(name), f"node name {name!r} is not snake_case"

    # non-LLM hot paths (retrieval, PPR, replay) appear as runs of their own: a node run
    # (run_ppr, retrieve_seeds, replay_memory, ...) or a KG span (kg.ppr, kg.nearest, kg.nearest_facts)
    hot = [r for r in runs if r.parent_run_id is not None and HOT_PATH.search(r.name)]
    assert hot, f"{method}: no retrieval/PPR/replay run recorded; runs: {sorted({r.name for r in runs})}"
    if method in {"catrag", "hipporag2"}:
        assert any(r.name in {"run_ppr", "kg.ppr"} for r in hot)
    by_id = {r.id: r for r in runs}
    for span in (r for r in runs if r.name.startswith("kg.")):
        assert span.run_type == "chain" and span.parent_run_id in by_id
        assert by_id[span.parent_run_id].metadata.get("langgraph_node")  # nested under a node
        assert set(span.outputs["result"]) == {"hits", "count"}

    # no embedding vectors anywhere in what was traced
    for r in runs:
        assert not find_vectors(r.inputs, f"{r.name}.inputs"), find_vectors(r.inputs, f"{r.name}.inputs")
        assert not find_vectors(r.outputs or {}, f"{r.name}.outputs")


def test_llm_runs_inherit_method_metadata(kg, store):
    """With a (scripted) chat model the LLM calls are traced too, under the method's metadata."""
    method = pick("remindrag", "catrag", "autopruned", "r3cycle")

    def responder(messages, request):
        return "{}" if request is not None else "Warsaw"  # decisions fall back; free text answers

    model = ScriptedChatModel(responder=responder)
    _, out, runs = traced_run(kg, store, method, model=model)
    llm_runs = [r for r in runs if r.run_type in {"llm", "chat_model"}]
    assert llm_runs and out["usage"]["llm_calls"] >= 1
    for r in llm_runs:
        assert r.metadata["method"] == method and r.metadata["kg_name"] == kg.name
        assert r.metadata["model"] == "scripted"
        assert r.name not in UNCLEAR_NAMES


def test_traced_span_nests_under_the_current_node_and_scrubs_vectors():
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        question: str
        answer: str

    def replay_memory(state):
        with traced_span("replay_memory.load", inputs={"query_vec": np.ones(384), "ids": ["a", "b"]},
                         step="replay") as span:
            span.set_outputs(memory=[0.5] * 64, replayed=2)
        return {"answer": "ok"}

    builder = StateGraph(State)
    builder.add_node(replay_memory)
    builder.add_edge(START, "replay_memory")
    builder.add_edge("replay_memory", END)
    app = with_tracing(builder.compile(), "demo")
    collector = RunCollector()
    app.invoke({"question": "q"}, config={"callbacks": [collector]})
    runs = {r.name: r for r in collector.finished}
    span, node, root = runs["replay_memory.load"], runs["replay_memory"], runs["kgmem.demo"]
    assert span.parent_run_id == node.id and node.parent_run_id == root.id
    assert span.metadata["method"] == "demo" and span.metadata["step"] == "replay"
    assert span.inputs == {"query_vec": "<vector dim=384>", "ids": ["a", "b"]}
    assert span.outputs == {"memory": "<vector dim=64>", "replayed": 2}


def test_traced_span_records_errors_and_is_a_noop_without_listeners():
    collector = RunCollector()
    from langchain_core.runnables import RunnableLambda

    def boom(_):
        with traced_span("kg.ppr"):
            raise ValueError("bad seeds")

    with pytest.raises(ValueError, match="bad seeds"):
        RunnableLambda(boom, name="run_ppr").invoke(1, config={"callbacks": [collector]})
    span = next(r for r in collector.finished if r.name == "kg.ppr")
    assert "bad seeds" in span.error

    with traced_span("outside") as span:  # no run, no tracer: nothing recorded, nothing fails
        assert isinstance(span, Span) and not span.recording


def test_scrub_keeps_small_values_and_cuts_large_ones():
    assert scrub({"a": 1, "b": "x", "c": [1, 2]}) == {"a": 1, "b": "x", "c": [1, 2]}
    assert scrub(np.zeros(8)) == "<vector dim=8>"
    assert scrub(np.zeros((3, 4))).startswith("<array shape=[3, 4]")
    assert scrub(list(range(100)))[-1] == "<50 more>"
    assert scrub("y" * 5000).endswith("<5000 chars>")



def test_langsmith_tracer_client_scrubs_inputs_and_outputs(monkeypatch):
    import langsmith

    from langgraph_kgmem.tracing import langsmith_tracer

    made = {}

    class FakeClient:  # a real Client would contact api.smith.langchain.com in the background
        def __init__(self, **kwargs):
            made.update(kwargs)

    monkeypatch.setattr(langsmith, "Client", FakeClient)
    tracer = langsmith_tracer("kgmem-tests")
    assert tracer.project_name == "kgmem-tests" and isinstance(tracer.client, FakeClient)
    assert made["hide_inputs"]({"query": "q", "vec": [0.25] * 384}) == {"query": "q", "vec": "<vector dim=384>"}
    assert made["hide_outputs"] is scrub
