"""Every method fails fast, the same way, when it lacks what it cannot run without: a store for its
memory, a model with tool calling, time-stamped records, a tenant for its memory scope. The
package's MissingRequirementError (a ConfigurationError) names the method and what to do, and is
raised before a single model call is paid for."""

from __future__ import annotations

import pytest
from langchain_core.language_models import BaseChatModel
from method_cases import QUESTION, method_case

from langgraph_kgmem.errors import ConfigurationError, KgmemInputError, MissingRequirementError
from langgraph_kgmem.graphs.registry import get_factory
from langgraph_kgmem.testing import ScriptedChatModel

LABELS = {"remindrag": "ReMindRAG", "catrag": "CatRAG", "hipporag2": "HippoRAG 2", "autopruned": "AutoPrunedRetriever",
          "kgirag": "KG-IRAG", "r3cycle": "R3-Cycle", "graphcot": "Graph-CoT"}
# options that make each method's first steps call the model where one could come before its
# store is read (ReMindRAG's decomposition), so "before any model call" is what is tested
FIRST_CALL_EARLY = {"remindrag": {"decompose": True}}


class NoToolsModel(ScriptedChatModel):
    """A recording chat model without tool calling (LangChain's base bind_tools only raises)."""

    bind_tools = BaseChatModel.bind_tools


def recording(cls=ScriptedChatModel):
    return cls(responder=lambda messages, request: "no answer")


def build(method, kg, **options):
    factory, preset = get_factory(method)
    return factory(kg, **{**preset, **FIRST_CALL_EARLY.get(method, {}), **options})


@pytest.mark.parametrize("method", ["remindrag", "catrag", "autopruned", "r3cycle", "graphcot"])
def test_a_method_with_memory_compiled_without_a_store_fails_before_any_model_call(method, text_kg):
    model = recording()
    app = build(method, text_kg, model=model).compile()
    with pytest.raises(MissingRequirementError, match=f"^{LABELS[method]} keeps cross-session memory.*store="):
        app.invoke({"question": QUESTION})
    assert model.calls == []
    assert issubclass(MissingRequirementError, ConfigurationError)


@pytest.mark.parametrize("method", ["remindrag", "catrag", "autopruned", "r3cycle", "graphcot"])
def test_a_run_model_does_not_excuse_a_missing_store(method, text_kg):
    """The store is checked whichever model the run uses (the factory's offline one, or one
    given in the run's context)."""
    model = recording()
    app = build(method, text_kg, model="offline").compile()
    with pytest.raises(MissingRequirementError, match=LABELS[method]):
        app.invoke({"question": QUESTION}, context={"model": model})
    assert model.calls == []


@pytest.mark.parametrize("method", ["catrag", "hipporag2", "kgirag"])
def test_methods_that_remember_nothing_offline_run_without_a_store(method, text_kg):
    kg, question, _ = method_case(method, text_kg)
    out = build(method, kg, model="offline").compile().invoke({"question": question})
    assert isinstance(out["answer"], str)


def test_hipporag2_never_needs_a_store(text_kg):
    model = recording()
    out = build("hipporag2", text_kg, model=model).compile().invoke({"question": QUESTION})
    assert out["answer"] and model.calls


@pytest.mark.parametrize("method", ["r3cycle", "graphcot"])
def test_a_model_without_tool_calling_is_refused_at_build_and_at_the_run(method, text_kg):
    from langgraph.store.memory import InMemoryStore

    with pytest.raises(MissingRequirementError, match=f"^{LABELS[method]} needs a chat model with tool calling"):
        build(method, text_kg, model=NoToolsModel())
    default, run_model = recording(), recording(NoToolsModel)
    store = InMemoryStore()
    app = build(method, text_kg, model=default, store=store).compile(store=store)
    with pytest.raises(MissingRequirementError, match=f"^{LABELS[method]} needs a chat model with tool calling"):
        app.invoke({"question": QUESTION}, context={"model": run_model})
    assert default.calls == [] and run_model.calls == []
    assert store.search(("kgmem",)) == []   # nothing of the refused run was stored


@pytest.mark.parametrize("graph", ["kgirag", "singlepass"])
def test_kgirag_over_a_kg_without_records_is_refused_before_any_model_call(graph, text_kg):
    from langgraph_kgmem.graphs.kgirag import create_kgirag_graph, create_singlepass_graph

    model = recording()
    factory = create_kgirag_graph if graph == "kgirag" else create_singlepass_graph
    app = factory(text_kg, model=model).compile()
    with pytest.raises(MissingRequirementError, match="^KG-IRAG reasons over time-stamped records.*add_records"):
        app.invoke({"question": "Can I avoid rain at Riverside if I leave at 2024-05-01 00:00 and travel for 2 hours?"})
    assert model.calls == []


@pytest.mark.parametrize("method", ["remindrag", "r3cycle"])
def test_a_memory_scope_the_run_does_not_fill_is_refused_before_any_model_call(method, text_kg):
    from langgraph.store.memory import InMemoryStore

    model, store = recording(), InMemoryStore()
    app = build(method, text_kg, model=model, store=store, memory_scope=("{user_id}",)).compile(store=store)
    with pytest.raises(KgmemInputError, match="user_id"):
        app.invoke({"question": QUESTION})
    for bad in ("a\x00b", "a\ud800b"):
        with pytest.raises(KgmemInputError, match="memory scope label"):
            app.invoke({"question": QUESTION}, {"configurable": {"user_id": bad}})
    assert model.calls == []
