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
    node_runs = [r for r in runs if r.metadata.get("langgraph_node") and r.name == r.metadata["langgraph_node"]
                 # a subgraph's nodes (the methods a router runs) are checked by that method's own case
                 and "|" not in str(r.metadata.get("langgraph_checkpoint_ns", ""))]
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


# ------------------------------------------------------------------------------------ secrets never uploaded

FAKE_KEY = "sk-proj-FAKEkey0123456789abcdefghijklmnopqrstuvwxyzABCD"
GOOGLE_KEY = "AIzaSyFAKE0123456789abcdefghijklmnopqr"
DB_PASSWORD = "p@ssWORD"   # "@" inside: a redaction that stops at the first "@" leaks "ssWORD"
SECRETS = (FAKE_KEY, GOOGLE_KEY, "FAKEkey0123456789", "ssWORD", "ghp_FAKE0123456789abcdefghij", "xoxb-1111-FAKEslack")


class AuthenticationError(Exception):
    """What a provider client raises on a 401: the message echoes the key it was given."""

    status_code = 401


def leaky_provider(messages, request):
    raise AuthenticationError(
        f"Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: {FAKE_KEY}. "
        f"Retried https://generativelanguage.googleapis.com/v1/models?key={GOOGLE_KEY} and "
        f"postgresql://admin:{DB_PASSWORD}@db:5432/kg with Authorization: Bearer ghp_FAKE0123456789abcdefghij "
        f"(slack xoxb-1111-FAKEslack)', 'code': 'invalid_api_key'}}}}")


def test_langsmith_tracer_uploads_no_secret_from_errors_metadata_inputs_or_outputs(kg, store, fake_langsmith):
    from langchain_core.runnables import RunnableLambda

    from langgraph_kgmem.tracing import langsmith_tracer

    method = pick("catrag", "remindrag", "autopruned", "r3cycle")
    tracer = langsmith_tracer("kgmem-tests")
    kg, question, _ = method_case(method, kg)
    app = compile_method(method, kg, model=ScriptedChatModel(responder=leaky_provider), store=store)
    config = traced_config(method, kg, model="offline", config={
        "callbacks": [tracer], "metadata": {"database": f"postgresql://admin:{DB_PASSWORD}@db/kg"}})
    out = app.invoke({"question": f"{question} (api_key={FAKE_KEY})"}, config=config)
    assert out["usage"]["fallbacks"], "the provider error never reached the run"
    with pytest.raises(AuthenticationError):   # a run that ends in the provider's error
        RunnableLambda(lambda _: leaky_provider(None, None), name="call_provider").invoke(1, {"callbacks": [tracer]})
    tracer.wait_for_futures()
    tracer.client.flush()

    sent = "\n".join(fake_langsmith)
    assert "kgmem." in sent and '"error"' in sent, "the fake LangSmith endpoint received no runs"
    for secret in SECRETS:
        assert secret not in sent, f"{secret!r} was uploaded to LangSmith"
    assert "<redacted>" in sent and "Incorrect API key provided: <redacted>" in sent


REDACTION_CASES = [
    ("Incorrect API key provided: sk-proj-abcDEF1234567890abcdefghijklmnop.", "abcDEF1234567890"),
    ("Incorrect API key provided: sk-proj-****************************************abcd.", "****abcd"),
    ("GET https://maps.googleapis.com/api?key=AIzaSyA1234567890abcdefghijklmnopqrstuv&q=1", "SyA1234567890"),
    ("GET https://example.com/api?key=plainvalue123&q=1", "plainvalue123"),
    ("https://x.example/y?api_key=abc123def&token=zzz999&sig=qq11", "abc123def"),
    ("https://x.example/y?api_key=abc123def&token=zzz999&sig=qq11", "zzz999"),
    ("https://x.example/y?api_key=abc123def&token=zzz999&sig=qq11", "qq11"),
    ("postgresql://admin:p@ssWORD@db:5432/x", "ssWORD"),
    ("postgresql://admin:p@ss@WORD@db/x?sslmode=require", "WORD"),
    ("redis://:s3cr@t@cache:6379", "t@cache"),
    ("google AIzaSyA1234567890abcdefghijklmnopqrstuv in a log line", "SyA1234567890"),
    ("Authorization: Bearer abcdefghijk.lmnop", "abcdefghijk"),
    ('{"openai_api_key": "hunter22", "x-api-key": "abcd1234"}', "hunter22"),
    ('{"openai_api_key": "hunter22", "x-api-key": "abcd1234"}', "abcd1234"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG and AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG and AKIAIOSFODNN7EXAMPLE", "IOSFODNN7"),
    ("slack xoxb-1234567890-abcdefghij", "abcdefghij"),
    ("github ghp_abcdefghijklmnopqrstuvwxyz123456", "abcdefghijklmnop"),
    ("stripe sk_live_abcdefghijklmnop1234", "abcdefghijklmnop1234"),
    ("google oauth ya29.a0AfH6SMBabcdefghijklmnop", "a0AfH6SMB"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N", "dozjgNryP4J3"),
]


@pytest.mark.parametrize("text, secret", REDACTION_CASES)
def test_redact_secrets_covers_query_keys_at_passwords_bearer_and_key_prefixes(text, secret):
    from langgraph_kgmem.tracing import REDACTED, redact_secrets

    out = redact_secrets(text)
    assert secret not in out and REDACTED in out, out


def test_redact_secrets_leaves_ordinary_text_alone():
    from langgraph_kgmem.tracing import redact_secrets

    for text in ("The key: open the door. monkey=banana. The token count is 12.",
                 "mailto:bob@example.com and http://user@host/path and https://example.com:8080/a",
                 "Marie Curie (1867-1934) was born in Warsaw; x <= 5 and y = 2"):
        assert redact_secrets(text) == text


def test_stored_state_and_memory_keep_no_secret_from_a_provider_error(kg):
    """What a failing provider said is kept in the run's state (fallback records, checkpointed) and
    in the memory store: redacted there too, '@' passwords included."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    store, saver = InMemoryStore(), InMemorySaver()
    for method in [m for m in ("catrag", "r3cycle", "autopruned", "remindrag") if m in METHODS]:
        app = compile_method(method, kg, model=ScriptedChatModel(responder=leaky_provider), store=store,
                             checkpointer=saver)
        out = app.invoke({"question": "Where was Marie Curie born?"}, {"configurable": {"thread_id": method}})
        assert out["usage"]["fallbacks"], method
    kept = repr([c.checkpoint for c in saver.list(None)])
    kept += repr([item.value for ns in store.list_namespaces() for item in store.search(ns, limit=1000)])
    assert "<redacted>" in kept
    for secret in SECRETS:
        assert secret not in kept, f"{secret!r} was stored"


# ------------------------------------------------------------------------------------ round two's shapes

PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAfake0123\nQmFzZTY0Ym9keQ==\n"
       "-----END RSA PRIVATE KEY-----")
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEKEY01"
SHAPES = [   # (text, the secret part that must go): each shape the second audit saw pass
    ("postgresql://admin:pa'ss0rd@db/kg", "pa'ss0rd"),
    ("postgresql://admin:pa<ss0rd@db/kg", "pa<ss0rd"),
    ("postgresql://admin:" + "Lq9" * 120 + "@db/kg", "Lq9Lq9Lq9"),
    ("postgresql://admin:hunter 2@db/kg", "hunter 2"),
    ("Invalid API key: 3f9c2b7e8d1a4c6b5e0f", "3f9c2b7e8d1a4c6b5e0f"),
    ("Ocp-Apim-Subscription-Key: 0a1b2c3d4e5f6a7b8c9d", "0a1b2c3d4e5f6a7b8c9d"),
    (f"aws secret {AWS_SECRET} leaked", AWS_SECRET),
    ("post to https://hooks.slack.com/services/T0FAKE000/B0FAKE000/abcdEFGHijklMNOPqrstUVWX now", "abcdEFGH"),
    ("the api key is abcd1234efgh5678", "abcd1234efgh5678"),
    (f"key file: {PEM}", "QmFzZTY0Ym9keQ"),
    ("truncated -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA", "b3BlbnNzaC1rZXkt"),
    ("Authorization: Bearer abc123", "abc123"),
    ("password=hunter 2", "hunter 2"),
    ("host=db password=hunter 2 dbname=kg", "hunter"),
    ("password\uff1ahunter2", "hunter2"),
    ("api_key\uff1aabcdef123", "abcdef123"),
    ("https://x.example/y?auth=zz99yy88", "zz99yy88"),
    ("a random string kT7qW2xZ9pL4mN8vB3cR6yH1 in text", "kT7qW2xZ9pL4mN8vB3cR6yH1"),
]


@pytest.mark.parametrize("text, secret", SHAPES, ids=[f"shape{i}" for i in range(len(SHAPES))])
def test_redact_secrets_covers_the_shapes_the_second_audit_found(text, secret):
    from langgraph_kgmem.tracing import REDACTED, redact_secrets

    out = redact_secrets(text)
    assert secret not in out and REDACTED in out, out
    assert "Bearer <redacted>" in redact_secrets("Authorization: Bearer abc123")   # the scheme stays readable


def test_the_token_rule_leaves_words_ids_and_hashes_alone():
    from langgraph_kgmem.redaction import redact_secrets, token_looks_random

    for text in ("completed his basic training at Fort Knox", "23 Basic Interest Scales", "The api key is missing",
                 "commit 3f9c2b7e8d1a4c6b5e0f9a8b7c6d5e4f3a2b1c0d", "ent-3f9c2b7e8d1a4c6b5e0f",
                 "id 123e4567-e89b-12d3-a456-426614174000", "Pneumonoultramicroscopicsilicovolcanoconiosis",
                 "see http://host:8080 for docs, mail bob@example.com", "Hewlett-Packard-Compaq-2002-Merger",
                 "ThisIsALongCamelCaseIdentifier2"):
        assert redact_secrets(text) == text, text
    assert token_looks_random("kT7qW2xZ9pL4mN8vB3cR6yH1") and not token_looks_random("aaaaaaaaaaBBBBBBBBBB1111")


@pytest.mark.parametrize("field", ["error", "name", "tags", "events", "serialized", "extra"])
def test_the_langsmith_client_redacts_every_text_field_of_a_run(field, fake_langsmith, monkeypatch):
    """Each field a run hands the LangSmith client besides inputs/outputs, one at a time, with the
    audit's shapes: what reaches the client's own create_run/update_run is redacted."""
    import uuid

    import langsmith

    from langgraph_kgmem.tracing import langsmith_tracer

    handed: list[str] = []
    monkeypatch.setattr(langsmith.Client, "create_run", lambda self, name, inputs, run_type, **kw: handed.append(
        repr((name, kw))))
    monkeypatch.setattr(langsmith.Client, "update_run", lambda self, run_id, **kw: handed.append(repr(kw)))
    client = langsmith_tracer("kgmem-tests").client
    secrets = [s for _, s in SHAPES[:9]]
    text = " | ".join(t for t, _ in SHAPES[:9])
    value = {"error": text, "name": f"kgmem.run {text}", "tags": [text], "events": [{"name": "x", "message": text}],
             "serialized": {"kwargs": {"note": text}}, "extra": {"metadata": {"note": text}}}[field]
    run_id = uuid.uuid4()
    if field == "name":
        client.create_run(value, {"q": "x"}, "chain", id=run_id)
    else:
        client.create_run("kgmem.run", {"q": "x"}, "chain", id=run_id, **{field: value})
        client.update_run(run_id, **{field: value})
    sent = "\n".join(handed)
    assert "<redacted>" in sent and "hooks.slack.com/services/" in sent, f"the {field} field was not handed on"
    for secret in secrets:
        assert secret not in sent, f"{secret!r} was handed to the LangSmith client in the run's {field}"
