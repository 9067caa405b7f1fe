"""What every method does at the start of a run: check the question, count usage from zero."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from method_cases import compile_method, method_case

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import METHODS, get_factory

COUNTERS = ("llm_calls", "prompt_tokens", "completion_tokens", "offline_decisions")


def _app(method, kg):
    return compile_method(method, kg, checkpointer=InMemorySaver())


@pytest.mark.parametrize("method", list(METHODS))
def test_a_second_run_on_a_thread_counts_only_its_own_usage(method, kg):
    """Twin apps see the same history (one earlier run of the question); the second run is on the
    same thread in one and on a new thread in the other, and must report the same usage."""
    kg, question, _ = method_case(method, kg)
    same, fresh = _app(method, kg), _app(method, kg)
    for app in (same, fresh):
        app.invoke({"question": question}, {"configurable": {"thread_id": "t1"}})
    again = same.invoke({"question": question}, {"configurable": {"thread_id": "t1"}})["usage"]
    other = fresh.invoke({"question": question}, {"configurable": {"thread_id": "t2"}})["usage"]
    assert {k: again[k] for k in COUNTERS} == {k: other[k] for k in COUNTERS}
    assert len(again["fallbacks"]) == len(other["fallbacks"])
    assert sum(again[k] for k in COUNTERS) > 0, "offline runs count their decisions, so the test can fail"


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("question, message", [("   ", "question is empty"), (42, "question must be text")])
def test_a_bad_question_is_a_clear_input_error(method, question, message, kg):
    kg, _, _ = method_case(method, kg)
    with pytest.raises(KgmemInputError, match=message):
        _app(method, kg).invoke({"question": question}, {"configurable": {"thread_id": "t"}})


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_labels_an_offline_run(method, kg):
    kg, question, _ = method_case(method, kg)
    out = _app(method, kg).invoke({"question": question}, {"configurable": {"thread_id": "t"}})
    assert out["model"].startswith("offline")
    assert out["method"] and isinstance(out["answer"], str)


NODES = {  # every registered method's nodes, exactly (verb_object names: what traces and streams show)
    "remindrag": {"retrieve_seeds", "replay_memory", "check_sufficiency", "traverse_step", "answer", "memorize"},
    "catrag": {"retrieve_facts", "filter_facts", "anchor_entities", "weight_edges", "boost_key_facts", "run_ppr",
               "rank_passages", "answer"},
    "hipporag2": {"retrieve_facts", "filter_facts", "run_ppr", "rank_passages", "answer"},
    "autopruned": {"sync_facts", "encode_question", "retrieve_coarse", "rerank_fine", "select_runs", "pack_prompt",
                   "answer", "memorize", "consolidate"},
    "kgirag": {"plan_query", "retrieve_triples", "judge_retrieval", "synthesize_answer"},
    "r3cycle": {"start_run", "reason", "act", "record", "verify", "reflect", "replan", "finish_run"},
    "graphcot": {"start_run", "reason", "act", "record", "verify", "reflect", "replan", "finish_run"},
    "router": {"route_question", "run_hipporag2", "run_catrag", "run_kgirag", "run_r3cycle", "run_remindrag",
               "run_autopruned", "finish_route"},
}


def test_the_node_table_covers_every_method():
    assert set(NODES) == set(METHODS)


@pytest.mark.parametrize("method", list(METHODS))
def test_graph_shape(method, kg):
    kg, _, _ = method_case(method, kg)
    factory, preset = get_factory(method)
    assert set(factory(kg, model="offline", **preset).nodes) == NODES[method]
