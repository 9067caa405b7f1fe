"""examples/pipeline.py: a planner that decomposes and calls ReMindRAG as a subgraph, a verifier that
re-asks through the same store (replaying the planner's memory) and sends rejections back."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
from langgraph_kgmem.testing import ScriptedChatModel

PATH = Path(__file__).resolve().parents[1] / "examples" / "pipeline.py"
STEP_2_FILLED = "In which city was the engineer Gustave Eiffel born?"


@pytest.fixture(scope="module")
def ex():
    spec = importlib.util.spec_from_file_location("kgmem_pipeline_example", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic and StateGraph resolve the module's annotations through it
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture
def kg(ex):
    g = ex.build_kg()
    yield g
    g.close()


def planner_of(plans, answer="Dijon"):
    """A planner that returns ``plans[round - 1]`` and composes ``answer``."""
    def respond(messages, request):
        if request.step == "plan":
            return {"sub_questions": plans[min(request.context["round"], len(plans)) - 1]}
        return answer
    return ScriptedChatModel(responder=respond, model_name="planner")


def rejecting_verifier():
    def respond(messages, request):
        return {"ok": False, "reason": f"REASON-{request.context['round']}: the second hop is not supported"}
    return ScriptedChatModel(responder=respond, model_name="verifier")


def run(ex, kg, planner, verifier, method_model, *, store=None, max_rounds=2, thread="t"):
    store = store or InMemoryStore()
    app = ex.build_pipeline(kg, planner_model=planner, verifier_model=verifier, method_model=method_model,
                            store=store, max_rounds=max_rounds, method_options=ex.METHOD_OPTIONS)
    return app.compile(checkpointer=InMemorySaver(), store=store).invoke(
        {"question": ex.QUESTION}, {"configurable": {"thread_id": thread}})


def chunk(kg, title):
    return next(n.id for n in kg.nodes("chunk") if n.attrs.get("title") == title)


def test_each_sub_question_is_answered_by_the_method_subgraph(ex, kg):
    method = ex.scripted_method_model(kg)
    out = run(ex, kg, planner_of([[ex.STEP_1, ex.STEP_2]]), ex.scripted_verifier_model(), method)
    planner_runs = [r for r in out["method_runs"] if r["role"] == "planner"]
    assert [(r["question"], r["answer"]) for r in planner_runs] == [
        (ex.STEP_1, "Gustave Eiffel"), (STEP_2_FILLED, "Dijon")]  # "#1" filled with the first answer
    assert out["sub_questions"] == [ex.STEP_1, STEP_2_FILLED]
    asked = [c["request"].context["question"] for c in method.calls]
    assert asked[0] == ex.STEP_1 and STEP_2_FILLED in asked and asked[-1] == ex.QUESTION
    assert out["answer"] == "Dijon" and out["verified"] is True and out["rounds"] == 1
    assert {chunk(kg, "Eiffel Tower"), chunk(kg, "Gustave Eiffel")} <= {e["id"] for e in out["evidence"]}


def test_the_method_runs_as_a_subgraph_of_solve_and_verify(ex, kg):
    store = InMemoryStore()
    app = ex.build_pipeline(kg, planner_model="offline", verifier_model="offline", store=store).compile(store=store)
    inner = [(ns[0].split(":")[0], node) for ns, update in app.stream({"question": ex.QUESTION}, subgraphs=True)
             if ns for node in update]
    assert {owner for owner, _ in inner} == {"solve", "verify"}
    assert ("solve", "retrieve_seeds") in inner and ("verify", "replay_memory") in inner


@pytest.mark.parametrize("plan", [["QUESTION"], ["STEP_1", "STEP_2"]], ids=["same-question", "decomposed"])
def test_the_verifier_replays_memory_the_planner_wrote(ex, kg, plan):
    plan = [getattr(ex, name) for name in plan]
    out = run(ex, kg, planner_of([plan]), ex.scripted_verifier_model(), ex.scripted_method_model(kg))
    planner_first, verifier_run = out["method_runs"][0], out["method_runs"][-1]
    assert planner_first["role"] == "planner" and planner_first["question"] == plan[0]
    assert planner_first["replayed"] == [] and planner_first["hops"] > 0   # a cold start walks
    assert verifier_run["role"] == "verifier" and verifier_run["question"] == ex.QUESTION
    targets = {chunk(kg, "Eiffel Tower"), chunk(kg, "Gustave Eiffel")}
    assert set(out["verifier_replayed"]) == targets == set(verifier_run["replayed"])
    assert verifier_run["replayed_from"] == ["planner"] and verifier_run["hops"] == 0
    # full replay: one sufficiency check and the answer, against the planner's walk(s)
    assert verifier_run["llm_calls"] == 2 < planner_first["llm_calls"]
    cold = create_remindrag_graph(kg, model=ex.scripted_method_model(kg), store=InMemoryStore(), **ex.METHOD_OPTIONS)
    assert cold.compile().invoke({"question": ex.QUESTION})["usage"]["llm_calls"] > verifier_run["llm_calls"]


def test_a_rejection_goes_back_to_the_planner_with_its_reason_until_max_rounds(ex, kg):
    planner = planner_of([[ex.STEP_1], [ex.STEP_1, ex.STEP_2]], answer="Gustave Eiffel")
    out = run(ex, kg, planner, rejecting_verifier(), ex.scripted_method_model(kg), max_rounds=3)
    assert out["rounds"] == 3 and out["verified"] is False
    assert [(v["round"], v["ok"]) for v in out["verdicts"]] == [(1, False), (2, False), (3, False)]
    plan_prompts = [c["messages"][1].content for c in planner.calls if c["request"].step == "plan"]
    assert len(plan_prompts) == 3
    assert "rejected" not in plan_prompts[0]
    assert "Verifier's reason: REASON-1: the second hop is not supported" in plan_prompts[1]
    assert f"Previous sub-questions: {ex.STEP_1}\nPrevious answer: Gustave Eiffel" in plan_prompts[1]
    assert "REASON-2" in plan_prompts[2] and "REASON-1" not in plan_prompts[2]
    assert out["answer"] == "Gustave Eiffel"  # the last round's answer stands, marked unverified
    two = run(ex, kg, planner_of([[ex.STEP_1]]), rejecting_verifier(), ex.scripted_method_model(kg), max_rounds=2)
    assert two["rounds"] == 2 and len(two["verdicts"]) == 2


def test_usage_sums_every_roles_llm_calls(ex, kg):
    planner, verifier, method = ex.scripted_planner_model(), ex.scripted_verifier_model(), ex.scripted_method_model(kg)
    out = run(ex, kg, planner, verifier, method)
    assert out["rounds"] == 2 and out["verified"] is True
    total = planner.call_count + verifier.call_count + method.call_count
    assert out["usage"]["llm_calls"] == total == 22  # the verifier's walk makes one backward move: no sufficiency call after it
    assert out["roles"]["planner"]["llm_calls"] + out["roles"]["verifier"]["llm_calls"] == total
    verifier_method = sum(r["llm_calls"] for r in out["method_runs"] if r["role"] == "verifier")
    assert out["roles"]["verifier"]["llm_calls"] == verifier.call_count + verifier_method == 10
    steps = out["usage"]["by_step"]
    assert steps["plan"]["llm_calls"] == 2 and steps["compose_answer"]["llm_calls"] == 2
    assert steps["verify_answer"]["llm_calls"] == verifier.call_count == 2
    assert out["usage"]["prompt_tokens"] > 0 and not out["usage"]["fallbacks"]


def test_invalid_plans_are_reasked_then_fall_back_to_the_question(ex, kg):
    planner = ScriptedChatModel(responder=lambda m, r: {"sub_questions": ["Where was #2 born?", "Who?"]}
                                if r.step == "plan" else "Dijon")
    out = run(ex, kg, planner, ex.scripted_verifier_model(), ex.scripted_method_model(kg))
    plan_calls = [c for c in planner.calls if c["request"].step == "plan"]
    assert [c["request"].attempt for c in plan_calls] == [0, 1]
    assert "refers to #2" in plan_calls[1]["messages"][-1].content
    assert out["sub_questions"] == [ex.QUESTION] and [f["step"] for f in out["usage"]["fallbacks"]] == ["plan"]
    with pytest.raises(KgmemInputError, match="max_rounds"):
        ex.build_pipeline(kg, planner_model="offline", verifier_model="offline", max_rounds=0)


def test_a_second_run_on_the_same_thread_starts_fresh(ex, kg):
    store, saver = InMemoryStore(), InMemorySaver()
    app = ex.build_pipeline(kg, planner_model="offline", verifier_model="offline", store=store).compile(
        checkpointer=saver, store=store)
    cfg = {"configurable": {"thread_id": "same"}}
    first, second = app.invoke({"question": ex.QUESTION}, cfg), app.invoke({"question": ex.QUESTION}, cfg)
    assert first["rounds"] == second["rounds"] == 1 and len(second["verdicts"]) == 1
    assert len(second["method_runs"]) == 2 and second["usage"]["llm_calls"] == 0
    assert second["usage"]["offline_decisions"] < first["usage"]["offline_decisions"]  # replayed, not summed


def test_example_main_runs_offline(ex, capsys):
    out = ex.main([])
    text = capsys.readouterr().out
    assert out["verified"] is True and out["answer"] == "Dijon"
    assert ("verifier verdict: rejected (the evidence answers the whole question with 'Dijon', "
            "not 'Gustave Eiffel'") in text
    assert "replayed ['Eiffel Tower'] (learned by the planner)" in text
    assert "Answer: 'Dijon' (verified after 2 round(s))" in text
    assert "LLM calls: planner 12, verifier 10, total 22" in text


def test_a_short_document_is_one_chunk_without_the_tokenizer_and_the_same_as_with_it():
    import random

    from langgraph_kgmem.ingest.chunking import _pieces, chunk_text, pack_sentences, split_sentences

    rnd = random.Random(7)
    words = ["Warsaw", "lies", "on", "the", "Vistula.", "Curie", "zł", "naïve", "日本", "1895!", "Is", "it?", "\n\n"]
    for _ in range(300):
        text = " ".join(rnd.choice(words) for _ in range(rnd.randint(0, 60)))
        for n in (16, 40, 120):
            sentences = [p for s in split_sentences(text) for p in _pieces(s)]
            assert chunk_text(text, n) == pack_sentences(sentences, n), (text, n)
