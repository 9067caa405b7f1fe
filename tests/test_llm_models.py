"""The llm package's model handling: resolved once per run, unwrapped and tool-bound in public,
decisions logged, the retired module names gone."""

from __future__ import annotations

import importlib
import logging
import tomllib
from pathlib import Path

import pytest
from langchain_core.tools import tool
from langgraph.types import RetryPolicy
from pydantic import BaseModel

import langgraph_kgmem.llm.models as models
from langgraph_kgmem.llm import (DEFAULT_RETRY_POLICY, RetryingModel, bind_tools, decide, resolve_run_model, unwrap,
                                 with_retry_policy)
from langgraph_kgmem.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parent.parent


class Pick(BaseModel):
    """Pick one node."""

    node_id: str


@tool
def lookup(keyword: str) -> str:
    """Look a keyword up."""
    return keyword


def counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_a_run_contexts_model_is_resolved_and_wrapped_once(monkeypatch):
    resolved = counting(monkeypatch, models, "resolve_model")
    policy = RetryPolicy(max_attempts=2)
    default = with_retry_policy(ScriptedChatModel(responses=[]), policy)
    chosen = ScriptedChatModel(responses=[])
    first = resolve_run_model(default, {"model": chosen})
    again = resolve_run_model(default, type("Ctx", (), {"model": chosen})())   # an object context: the same
    assert first is again and len(resolved) == 1
    assert unwrap(first) == (chosen, policy)            # the factory's retry policy carries over
    other = RetryPolicy(max_attempts=5)
    assert unwrap(resolve_run_model(default, {"model": chosen}, other))[1] is other
    assert resolve_run_model(default, None) is default and resolve_run_model(default, {"model": None}) is default


def test_a_provider_string_in_the_context_is_resolved_once(monkeypatch):
    resolved = counting(monkeypatch, models, "resolve_model")
    default = with_retry_policy(ScriptedChatModel(responses=[]), RetryPolicy(max_attempts=2))
    # equal strings from two runs' contexts are different objects: still one resolution
    assert resolve_run_model(default, {"model": "".join(["off", "line"])}) == "offline"
    assert resolve_run_model(default, {"model": "".join(["offl", "ine"])}) == "offline"
    assert len(resolved) == 1


def test_every_node_of_a_run_gets_the_runs_model_without_resolving_it_again(monkeypatch, text_kg):
    import langgraph_kgmem.graphs.common as common
    from langgraph_kgmem.graphs.catrag import create_catrag_graph

    asked = counting(monkeypatch, common, "resolve_run_model")
    resolved = counting(monkeypatch, models, "resolve_model")
    never_called = ScriptedChatModel(responses=[])
    app = create_catrag_graph(text_kg, model=never_called, retry_policy=RetryPolicy(max_attempts=2)).compile()
    out = app.invoke({"question": "Where was Marie Curie born?"}, context={"model": "offline"})
    assert out["answer"] and never_called.calls == []
    assert len(asked) >= 3 and len(resolved) == 1   # several nodes asked, one resolution


def test_unwrap_and_bind_tools_keep_the_retry_policy():
    model = ScriptedChatModel(responses=[])
    assert unwrap(model) == (model, None)
    wrapped = with_retry_policy(model, None)
    assert unwrap(wrapped) == (model, DEFAULT_RETRY_POLICY)
    bound = bind_tools(wrapped, [lookup])
    assert isinstance(bound, RetryingModel) and bound.policy is DEFAULT_RETRY_POLICY
    assert bound.model.bound is model and bound.model.kwargs["tools"][0]["function"]["name"] == "lookup"
    # beneath LangChain's own retry wrapper, which has no bind_tools of its own
    beneath = bind_tools(model.with_retry(stop_after_attempt=2), [lookup])
    assert beneath.bound.bound is model and "tools" in beneath.bound.kwargs


def test_bind_tools_on_a_model_without_tool_calling_raises():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with pytest.raises(NotImplementedError):
        bind_tools(FakeListChatModel(responses=["x"]), [lookup])


def test_decisions_are_logged_debug_when_made_and_info_when_they_fall_back(caplog):
    caplog.set_level(logging.DEBUG, logger="langgraph_kgmem.llm")
    decide(ScriptedChatModel(responses=['{"node_id": "n1"}']), Pick, "choose", step="pick",
           offline=lambda: Pick(node_id="off"))
    made = [r for r in caplog.records if r.name == "langgraph_kgmem.llm"]
    assert [r.levelno for r in made] == [logging.DEBUG] and "pick" in made[0].getMessage()
    caplog.clear()
    decide(ScriptedChatModel(responses=["no", "still no"]), Pick, "choose", step="pick",
           offline=lambda: Pick(node_id="off"))
    fell = [r for r in caplog.records if r.name == "langgraph_kgmem.llm" and r.levelno == logging.INFO]
    assert len(fell) == 1 and "pick" in fell[0].getMessage() and "malformed" in fell[0].getMessage()


def test_a_refused_structured_output_method_is_logged_at_info(caplog):
    from langgraph_kgmem.llm.endpoints import mark_refused

    caplog.set_level(logging.INFO, logger="langgraph_kgmem.llm")
    mark_refused(ScriptedChatModel(responses=[]), "function_calling", RuntimeError("tools not supported"))
    records = [r for r in caplog.records if r.name == "langgraph_kgmem.llm"]
    assert [r.levelno for r in records] == [logging.INFO] and "function_calling" in records[0].getMessage()


def test_the_package_logger_prints_nothing_unless_the_application_configures_logging():
    import langgraph_kgmem

    top = logging.getLogger(langgraph_kgmem.__name__)
    assert any(isinstance(h, logging.NullHandler) for h in top.handlers)


@pytest.mark.parametrize("old", ["langgraph_kgmem.prompt_fence", "langgraph_kgmem.model_endpoints"])
def test_the_retired_module_paths_no_longer_import(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_chunking_counts_with_the_public_token_encoder():
    from langgraph_kgmem.ingest.chunking import chunk_text
    from langgraph_kgmem.llm.tokens import TOKEN_ENCODING, count_tokens, token_encoding

    text = "Marie Curie was born in Warsaw."
    assert token_encoding() is token_encoding(TOKEN_ENCODING)   # one encoder per name, loaded once
    assert len(token_encoding().encode(text)) == count_tokens(text) > 0
    chunks = chunk_text(text * 400, chunk_tokens=100)
    assert len(chunks) > 1 and all(count_tokens(c) <= 100 for c in chunks)


def test_the_package_ships_its_type_marker():
    assert (ROOT / "langgraph_kgmem" / "py.typed").is_file()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["langgraph_kgmem"]
