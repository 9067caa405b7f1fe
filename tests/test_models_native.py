"""Models as LangGraph users pass them: any runnable (with_retry, with_fallbacks, bind), a
RetryPolicy for transient provider errors, and ``context={"model": m}`` in every method."""

from __future__ import annotations

import pytest
from langgraph.types import RetryPolicy
from method_cases import compile_method, method_case
from pydantic import BaseModel

from langgraph_kgmem.errors import ConfigurationError
from langgraph_kgmem.graphs.registry import METHODS
from langgraph_kgmem.llm import (DEFAULT_RETRY_POLICY, decide, generate, model_label, resolve_model,
                                 transient_model_error, with_retry_policy)
from langgraph_kgmem.testing import HOSTILE_KINDS, HostileChatModel, ProviderError, ScriptedChatModel, failing_then

NO_WAIT = RetryPolicy(initial_interval=0.0, jitter=False, max_attempts=3, retry_on=transient_model_error)


class Pick(BaseModel):
    node_id: str


def plausible(seed: int = 0) -> HostileChatModel:
    """A model that always answers with a schema-shaped reply (no hostile kinds)."""
    return HostileChatModel(seed=seed, weights={k: 0.0 for k in HOSTILE_KINDS if k != "plausible"}, model_name="plausible")


class RateLimitError(Exception):
    status_code = 429


@pytest.mark.parametrize("exc, transient", [
    (TimeoutError("read timed out"), True), (ConnectionError("reset"), True), (RateLimitError("slow down"), True),
    (ProviderError("503 overloaded"), False), (ValueError("context length exceeded"), False), (KeyError("x"), False)])
def test_transient_errors_are_told_apart(exc, transient):
    assert transient_model_error(exc) is transient


def test_a_retry_policy_repeats_transient_errors_and_counts_every_attempt():
    responder = failing_then([TimeoutError("t1"), RateLimitError("429")], '{"node_id": "n1"}')
    d, usage = decide(with_retry_policy(ScriptedChatModel(responder=responder), NO_WAIT), Pick, "choose", step="pick",
                      offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "n1" and usage["llm_calls"] == 3 and not usage["fallbacks"]


def test_a_policy_that_runs_out_falls_back_once_and_does_not_retry_bad_requests():
    calls = []

    def always(exc):
        def responder(messages, request):
            calls.append(1)
            raise exc
        return responder

    d, usage = decide(with_retry_policy(ScriptedChatModel(responder=always(TimeoutError("t"))), NO_WAIT), Pick, "choose",
                      step="pick", offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "safe" and len(calls) == 3 and usage["llm_calls"] == 3
    assert usage["fallbacks"][0]["kind"] == "model_error"
    calls.clear()
    text, usage = generate(with_retry_policy(ScriptedChatModel(responder=always(ValueError("bad request"))), NO_WAIT),
                           "q", step="answer", fallback=lambda: "extractive")
    assert text == "extractive" and len(calls) == 1 and usage["llm_calls"] == 1


def test_retry_policy_is_checked():
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        with_retry_policy(ScriptedChatModel(responses=[]), {"max_attempts": 3})
    with pytest.raises(ConfigurationError, match="max_attempts"):
        with_retry_policy(ScriptedChatModel(responses=[]), RetryPolicy(max_attempts=0))
    assert with_retry_policy("offline", None) == "offline"
    assert with_retry_policy(ScriptedChatModel(responses=[]), None).policy is DEFAULT_RETRY_POLICY


def test_wrapped_models_are_models():
    chat = ScriptedChatModel(responses=['{"node_id": "a"}'], model_name="inner")
    retrying = chat.with_retry(stop_after_attempt=2)
    assert resolve_model(retrying) is retrying and model_label(retrying) == "inner"
    d, _ = decide(retrying, Pick, "choose", step="pick", offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "a"
    broken = ScriptedChatModel(responder=lambda m, r: (_ for _ in ()).throw(ProviderError("503")))
    backup = ScriptedChatModel(responses=['{"node_id": "b"}'])
    d, usage = decide(broken.with_fallbacks([backup]), Pick, "choose", step="pick", offline=lambda: Pick(node_id="x"))
    assert d.node_id == "b" and not usage["fallbacks"] and backup.call_count == 1
    with pytest.raises(ConfigurationError, match="provider string"):
        resolve_model(42)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_takes_a_wrapped_model_and_a_retry_policy(method, kg):
    kg, question, _ = method_case(method, kg)
    model = plausible().with_retry(stop_after_attempt=2)
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.registry import get_factory

    factory, preset = get_factory(method)
    store = InMemoryStore()
    app = factory(kg, model=model, store=store, retry_policy=NO_WAIT, **preset).compile(store=store)
    out = app.invoke({"question": question})
    assert isinstance(out["answer"], str) and out["usage"]["llm_calls"] > 0


@pytest.mark.parametrize("method", METHODS)
def test_every_method_honours_the_run_context_model(method, kg):
    kg, question, _ = method_case(method, kg)
    app = compile_method(method, kg, model="offline")
    off = app.invoke({"question": question})
    assert off["usage"]["llm_calls"] == 0
    swapped = plausible(seed=3)
    out = app.invoke({"question": question}, context={"model": swapped})
    assert out["usage"]["llm_calls"] > 0 and sum(swapped.kinds.values()) == out["usage"]["llm_calls"]
    assert out["model"] == "plausible"
    again = app.invoke({"question": question})   # the next run without a context: offline again
    assert again["usage"]["llm_calls"] == 0
