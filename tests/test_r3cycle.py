"""R3-Cycle / Graph-CoT: reset-context retries, adaptive budgets, bounded cycles, tool errors as
observations, persisted trajectories, pluggable verifiers (scripted models, in-memory KG)."""

from __future__ import annotations

import doctest

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.agent_tools.graphqa import make_domain_graph, make_questions
from langgraph_kgmem.graphs import r3cycle
from langgraph_kgmem.graphs.r3cycle import (Verdict, VerifierState, create_r3cycle_graph, entity_span,
                                            exact_match_verifier, load_run)
from langgraph_kgmem.testing import ScriptedChatModel
from langgraph_kgmem.agent_tools import GraphEnv, load_grbench

REFLECTION = {"root_cause": "ROOT-CAUSE-X: followed the genre relation", "advice": "ADVICE-Y: follow 'author'",
              "retry": True}


@pytest.fixture(scope="module")
def books():
    data = make_domain_graph(seed=1, books=12, authors=4, publishers=2, genres=3)
    kg = KnowledgeGraph.in_memory(name="books")
    load_grbench(kg, data)
    yield kg, data
    kg.close()


def _book(data, i=0):
    bid = f"book-{i}"
    rec = data["book"][bid]
    author = rec["neighbors"]["author"][0]
    return bid, rec["features"]["title"], author, data["author"][author]["features"]["name"]


def _scripted(plan, *, reflection=REFLECTION, verdict=None):
    """plan: {attempt: [(tool, args), ...]} (the last call repeats when an attempt runs longer)."""

    def responder(messages, request):
        if request.step == "reflect":
            return reflection
        if request.step == "verify":
            return verdict or {"ok": False, "reason": "self-check failed"}
        attempt, i = request.context["attempt"], request.context["step_index"]
        calls = plan[min(attempt, max(plan))]
        name, args = calls[min(i, len(calls) - 1)]
        return {"content": f"THOUGHT-a{attempt}-s{i}", "tool_calls": [{"name": name, "args": args}]}

    return ScriptedChatModel(responder=responder)


def _reason_calls(model, attempt=None):
    return [c for c in model.calls if c["request"] is not None and c["request"].step == "reason"
            and (attempt is None or c["request"].context["attempt"] == attempt)]


def _text(messages):
    return "\n".join(str(m.content) + str(getattr(m, "tool_calls", "")) for m in messages)


def _run(kg, model, question, **opts):
    store = InMemoryStore()
    app = create_r3cycle_graph(kg, model=model, **opts).compile(checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "t1"}}
    return app.invoke({"question": question}, config), store, app, config


def test_retry_starts_from_question_and_guidance_only(books):
    kg, data = books
    bid, title, author, name = _book(data)
    model = _scripted({
        0: [("RetrieveNode", {"keyword": title}), ("NeighbourCheck", {"node_id": bid, "relation": "genre"}),
            ("Finish", {"answer": "Wrong Person"})],
        1: [("RetrieveNode", {"keyword": title}), ("NeighbourCheck", {"node_id": bid, "relation": "author"}),
            ("NodeFeature", {"node_id": author, "feature": "name"}), ("Finish", {"answer": name})],
    })
    out, _, _, _ = _run(kg, model, f'Who is the author of the book "{title}"?', verifier=exact_match_verifier(name))
    assert out["answer"] == name and out["method"] == "r3cycle"
    assert [a["outcome"] for a in out["attempts"]] == ["incorrect_answer", "correct"]
    first_retry_prompt = _text(_reason_calls(model, 1)[0]["messages"])
    assert "ADVICE-Y" in first_retry_prompt and "ROOT-CAUSE-X" in first_retry_prompt
    for s in out["attempts"][0]["steps"]:      # nothing of the first transcript leaks into the retry
        assert s["thought"] not in first_retry_prompt
    assert "Wrong Person" not in first_retry_prompt
    assert "genre" not in first_retry_prompt.replace(REFLECTION["root_cause"], "")
    # the reflection prompt did see the full failed log and the knowledge path
    reflect_call = next(c for c in model.calls if c["request"] and c["request"].step == "reflect")
    reflect_prompt = _text(reflect_call["messages"])
    assert "THOUGHT-a0-s1" in reflect_prompt and f"{bid} -[genre]→" in reflect_prompt
    assert out["attempts"][1]["budget"] == out["attempts"][0]["budget"] == 10   # wrong answer: same budget
    ev_ids = [e["id"] for e in out["evidence"]]
    assert bid in ev_ids and author in ev_ids


def test_halt_grows_budget_by_half_and_wrong_answer_keeps_it(books):
    kg, _ = books
    bad = [("NodeFeature", {"node_id": "book-999", "feature": "year"})]
    model = _scripted({0: bad, 1: bad})
    out, _, _, _ = _run(kg, model, "In which year?", max_steps=4, verifier=lambda q, a, e: False)
    assert [(a["budget"], len(a["steps"]), a["outcome"]) for a in out["attempts"]] == [(4, 4, "halted"),
                                                                                        (6, 6, "halted")]
    assert out["answer"] == "no answer"
    assert len(_reason_calls(model, 0)) == 4 and len(_reason_calls(model, 1)) == 6

    wrong = [("Finish", {"answer": "nope"})]
    model = _scripted({0: wrong, 1: wrong})
    out, _, _, _ = _run(kg, model, "In which year?", max_steps=4, verifier=lambda q, a, e: False)
    assert [(a["budget"], a["outcome"]) for a in out["attempts"]] == [(4, "incorrect_answer"), (4, "incorrect_answer")]


def test_cycles_are_bounded(books):
    kg, _ = books
    bad = [("NeighbourCheck", {"node_id": "book-0", "relation": "no-such-relation"})]
    model = _scripted({0: bad})
    out, _, _, _ = _run(kg, model, "q?", max_steps=4, max_cycles=3, verifier=lambda q, a, e: False)
    assert [a["budget"] for a in out["attempts"]] == [4, 6, 9, 14]
    assert len(out["reflections"]) == 3
    assert out["usage"]["by_step"]["reason"]["llm_calls"] == 4 + 6 + 9 + 14

    model = _scripted({0: [("Finish", {"answer": "x"})]})
    out, _, _, _ = _run(kg, model, "q?", max_cycles=0, verifier=lambda q, a, e: False)
    assert len(out["attempts"]) == 1 and out["reflections"] == []
    assert "reflect" not in out["usage"]["by_step"]

    # a reflection that advises against retrying ends the run
    model = _scripted({0: [("Finish", {"answer": "x"})]}, reflection={**REFLECTION, "retry": False})
    out, _, _, _ = _run(kg, model, "q?", max_cycles=5, verifier=lambda q, a, e: False)
    assert len(out["attempts"]) == 1 and len(out["reflections"]) == 1


def test_tool_errors_become_observations(books):
    kg, data = books
    bid, title, _, _ = _book(data)
    model = _scripted({0: [
        ("NoSuchTool", {"x": 1}),
        ("NodeFeature", {"node_id": bid}),                        # missing argument
        ("NodeFeature", {"node_id": "book-999", "feature": "year"}),
        ("NodeFeature", {"node_id": bid, "feature": "colour"}),
        ("NeighbourCheck", {"node_id": bid, "relation": "editor"}),
        ("NodeFeature", {"node_id": bid, "feature": "year"}),
        ("Finish", {"answer": data["book"][bid]["features"]["year"]}),
    ]})
    out, _, _, _ = _run(kg, model, f'In which year was "{title}" published?', reflection=False)
    steps = out["attempts"][0]["steps"]
    assert [s["error"] for s in steps] == [True, True, True, True, True, False, False]
    assert "is not a valid tool" in steps[0]["observation"] and "RetrieveNode" in steps[0]["observation"]
    assert "could not run" in steps[1]["observation"] and "feature" in steps[1]["observation"]
    assert "does not exist" in steps[2]["observation"]
    assert "available features are" in steps[3]["observation"]
    assert "its relations are" in steps[4]["observation"]
    # the observation went back to the model as a tool message
    next_prompt = _reason_calls(model)[1]["messages"]
    assert next_prompt[-1].type == "tool" and "is not a valid tool" in next_prompt[-1].content
    assert out["answer"] == data["book"][bid]["features"]["year"] and out["method"] == "graphcot"


def test_stored_trajectory_equals_what_happened(books):
    kg, data = books
    bid, title, author, name = _book(data, 3)
    model = _scripted({
        0: [("RetrieveNode", {"keyword": title}), ("NeighbourCheck", {"node_id": bid, "relation": "publisher"})],
        1: [("RetrieveNode", {"keyword": title}), ("NeighbourCheck", {"node_id": bid, "relation": "author"}),
            ("Finish", {"answer": name})],
    })
    out, store, app, config = _run(kg, model, f'Who wrote "{title}"?', max_steps=3,
                                   verifier=exact_match_verifier(name))
    saved = load_run(store, kg.name, out["run_id"])
    assert len(saved["trajectories"]) == 2 and len(saved["reflections"]) == 1
    for rec, att in zip(saved["trajectories"], out["attempts"]):
        assert rec["steps"] == att["steps"] and rec["path"] == att["path"]
        assert rec["outcome"] == att["outcome"] and rec["budget"] == att["budget"]
    assert [s["tool"] for s in saved["trajectories"][0]["steps"]] == ["RetrieveNode", "NeighbourCheck",
                                                                      "NeighbourCheck"]
    assert saved["trajectories"][1]["path"][1] == {"op": "neighbours", "from": bid, "relation": "author",
                                                   "to": [author]}
    assert saved["reflections"][0]["failure_type"] == "halted"
    assert saved["reflections"] == out["reflections"]
    assert out["attempts"][1]["budget"] == 5                      # ceil(3 * 1.5)
    # every call the model was asked for is in the stored log, in order
    logged = [(s["tool"], s["args"]) for t in saved["trajectories"] for s in t["steps"]]
    asked = [(c["reply"].tool_calls[0]["name"], c["reply"].tool_calls[0]["args"]) for c in _reason_calls(model)]
    assert logged == asked
    # per-attempt state is in the thread's checkpoints
    attempts_seen = {s.values.get("attempt") for s in app.get_state_history(config)}
    assert {0, 1} <= attempts_seen


def test_graphcot_baseline_has_no_verify_or_reflect(books):
    kg, _ = books
    model = _scripted({0: [("Finish", {"answer": "anything"})]})
    out, store, _, _ = _run(kg, model, "q?", reflection=False)
    assert out["method"] == "graphcot" and out["answer"] == "anything"
    assert [a["outcome"] for a in out["attempts"]] == ["finished"]
    assert set(out["usage"]["by_step"]) == {"reason"} and out["reflections"] == []
    assert load_run(store, kg.name, out["run_id"])["trajectories"][0]["outcome"] == "finished"


def test_default_verifier_is_an_llm_self_check(books):
    kg, _ = books
    model = _scripted({0: [("Finish", {"answer": "a"})], 1: [("Finish", {"answer": "b"})]},
                      verdict={"ok": False, "reason": "unsupported"})
    out, _, _, _ = _run(kg, model, "q?")
    verify_calls = [c for c in model.calls if c["request"] and c["request"].step == "verify"]
    assert len(verify_calls) == 2 and "Proposed answer: <data>a</data>" in _text(verify_calls[0]["messages"])
    assert out["attempts"][0]["verdict"] == {"ok": False, "reason": "unsupported"}
    assert out["usage"]["by_step"]["verify"]["llm_calls"] == 2
    assert out["answer"] == "b"          # the latest finished answer is returned even if unverified


def test_verifier_forms_callables_and_a_verifier_agent(books):
    kg, _ = books
    seen = {}

    def judge(state):
        seen.setdefault("evidence", []).extend(state["evidence"])
        return {"ok": state["answer"] == "b", "reason": "agent says so"}

    vb = StateGraph(VerifierState)
    vb.add_node("judge_answer", judge)
    vb.add_edge(START, "judge_answer")
    vb.add_edge("judge_answer", END)
    agent = vb.compile()
    for verifier in (agent, lambda q, a, e: a == "b", lambda q, a, e: (a == "b", "tuple"),
                     lambda q, a, e: {"ok": a == "b"}, lambda q, a, e: Verdict(ok=a == "b", reason="v")):
        model = _scripted({0: [("RetrieveNode", {"keyword": "Silent"}), ("Finish", {"answer": "a"})],
                           1: [("Finish", {"answer": "b"})]})
        out, _, _, _ = _run(kg, model, "q?", verifier=verifier)
        assert [a["outcome"] for a in out["attempts"]] == ["incorrect_answer", "correct"], verifier
    assert any(e["kind"] == "observation" for e in seen["evidence"])

    model = _scripted({0: [("Finish", {"answer": "a"})]})
    with pytest.raises(KgmemInputError, match="a verifier must return"):
        _run(kg, model, "q?", verifier=lambda q, a, e: "maybe")


def test_a_model_that_answers_in_prose_is_asked_for_its_actions_as_json(books):
    """Prose twice where a tool call is needed (llama-cpp-python's default chat handler never calls
    tools): the endpoint is remembered as one that does not call tools and every action, this one
    included, is asked as a ToolStep decision through structured output."""
    from langgraph_kgmem.graphs.r3cycle import TOOL_CALLS, ToolStep
    from langgraph_kgmem.llm.endpoints import PROSE_STEPS_BEFORE_JSON, refused_methods

    kg, _ = books

    def responder(messages, request):
        if request.schema is ToolStep:
            return {"thought": "I know it", "tool": "Finish", "args": {"answer": "42"}}
        return "The answer is 42."

    model = ScriptedChatModel(responder=responder)
    for _ in range(PROSE_STEPS_BEFORE_JSON):
        assert TOOL_CALLS not in refused_methods(model)
        out, _, _, _ = _run(kg, model, "q?", reflection=False)
        assert out["answer"] == "42" and not out["usage"]["fallbacks"]
        assert out["usage"]["llm_calls"] == 3 and out["usage"]["structured_output"]
    assert TOOL_CALLS in refused_methods(model)
    out, _, _, _ = _run(kg, model, "q?", reflection=False)      # known now: JSON at once
    assert out["answer"] == "42" and out["usage"]["llm_calls"] == 1


def test_an_endpoint_that_has_called_tools_keeps_being_offered_them(books):
    from langgraph_kgmem.graphs.r3cycle import TOOL_CALLS
    from langgraph_kgmem.llm.endpoints import PROSE_STEPS_BEFORE_JSON, note_tool_reply, refused_methods

    kg, _ = books
    model = ScriptedChatModel(responder=lambda m, r: "The answer is 42.")
    note_tool_reply(model, called=True)
    for _ in range(PROSE_STEPS_BEFORE_JSON + 1):
        _run(kg, model, "q?", reflection=False)
    assert TOOL_CALLS not in refused_methods(model)


def test_a_model_that_gives_no_usable_action_leaves_the_step_to_the_offline_agent(books):
    kg, _ = books
    model = ScriptedChatModel(responder=lambda m, r: "The answer is 42.")
    out, _, _, _ = _run(kg, model, "q?", reflection=False)
    reasons = [f for f in out["usage"]["fallbacks"] if f["step"] == "reason"]
    assert reasons and reasons[0]["kind"] == "malformed"      # recorded, and the offline agent acted
    assert out["usage"]["offline_decisions"] == 0 and isinstance(out["answer"], str)


def test_options_are_validated(books):
    kg, _ = books
    with pytest.raises(KgmemInputError, match="max_steps must be an integer >= 1"):
        create_r3cycle_graph(kg, model="offline", max_steps=0)
    with pytest.raises(KgmemInputError, match="max_cycles must be an integer >= 0"):
        create_r3cycle_graph(kg, model="offline", max_cycles=-1)
    with pytest.raises(KgmemInputError, match="verifier must be a callable"):
        create_r3cycle_graph(kg, model="offline", verifier=42)
    with pytest.raises(KgmemInputError, match="must be a KnowledgeGraph or a GraphEnv"):
        create_r3cycle_graph("books.json", model="offline")
    with pytest.raises(KgmemInputError, match="at least one gold"):
        exact_match_verifier([])


def test_offline_agent_answers_templated_questions_at_every_level(books):
    kg, data = books
    store = InMemoryStore()
    app = create_r3cycle_graph(GraphEnv(kg), model="offline", store=store).compile()
    questions = make_questions(data, n=24, seed=3)
    right = {"easy": 0, "medium": 0, "hard": 0}
    for q in questions:
        out = app.invoke({"question": q.question})
        right[q.level] += out["answer"].lower() == q.answer.lower()
        assert out["usage"]["llm_calls"] == 0 and out["evidence"]
    assert all(right[lv] >= 7 for lv in right), right


def test_offline_agent_on_a_text_kg(kg, store):
    app = create_r3cycle_graph(kg, model="offline", store=store).compile()
    out = app.invoke({"question": "Where was Marie Curie born?"})
    assert out["answer"] == "Warsaw"
    assert [e["text"] for e in out["evidence"]] == ["Marie Curie", "Warsaw"]
    assert entity_span('Who wrote "The Silent River"?') == "The Silent River"
    assert entity_span("How many books has the publisher Northwind Press published?") == "Northwind Press"


def test_offline_reflection_steers_the_retry_away_from_the_rejected_read(books):
    kg, data = books
    bid, title, _, _ = _book(data, 5)
    year = data["book"][bid]["features"]["year"]
    # the heuristic reads "year"; a verifier that rejects it forces a different read on the retry
    out, _, _, _ = _run(kg, "offline", f'In which year was the book "{title}" published?',
                        verifier=lambda q, a, e: a != year)
    assert [a["outcome"] for a in out["attempts"]] == ["incorrect_answer", "correct"]
    assert "Avoid: NodeFeature" in out["attempts"][1]["guidance"]
    assert out["attempts"][1]["steps"][1]["args"] != out["attempts"][0]["steps"][1]["args"]


def test_docstring_example_runs():
    result = doctest.testmod(r3cycle.graph, verbose=False)
    assert result.failed == 0 and result.attempted > 0


def test_planner_verifier_example_runs_offline(capsys):
    import runpy
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "planner_verifier.py"
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "attempt 0" in out and "outcome: incorrect_answer" in out and "outcome: correct" in out
    assert "Answer: 'Japan'" in out and "2 trajectories, 1 reflections" in out


def test_progress_events_are_streamed(books):
    kg, data = books
    bid, title, _, _ = _book(data)
    app = create_r3cycle_graph(kg, model="offline", store=InMemoryStore(),
                               verifier=lambda q, a, e: False).compile()
    events = [e for e in app.stream({"question": f'In which year was the book "{title}" published?'},
                                    stream_mode="custom")]
    kinds = [e["event"] for e in events]
    assert kinds.count("step") >= 4 and "verify" in kinds and "reflect" in kinds and "replan" in kinds
    assert events[0] == {"event": "step", "method": "r3cycle", "attempt": 0, "index": 0, "tool": "RetrieveNode",
                         "args": {"keyword": title}, "error": False}


def test_a_second_run_on_the_same_thread_starts_fresh(books):
    kg, _ = books
    model = _scripted({0: [("Finish", {"answer": "x"})]})
    app = create_r3cycle_graph(kg, model=model, reflection=False).compile(checkpointer=InMemorySaver(),
                                                                          store=InMemoryStore())
    config = {"configurable": {"thread_id": "same"}}
    first, second = app.invoke({"question": "q?"}, config), app.invoke({"question": "q?"}, config)
    assert first["usage"]["llm_calls"] == second["usage"]["llm_calls"] == 1
    assert first["run_id"] != second["run_id"] and len(second["attempts"]) == 1


def test_a_model_without_tool_calling_is_refused(books):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from langgraph_kgmem.errors import ConfigurationError

    kg, _ = books
    with pytest.raises(ConfigurationError, match="needs a chat model with tool calling"):
        create_r3cycle_graph(kg, model=FakeListChatModel(responses=["x"]))


def test_async_invocation(books):
    import asyncio

    kg, data = books
    _, title, _, name = _book(data)
    app = create_r3cycle_graph(kg, model="offline", store=InMemoryStore()).compile()
    out = asyncio.run(app.ainvoke({"question": f'Who is the author of the book "{title}"?'}))
    assert out["answer"] == name


def test_tools_run_on_the_given_environment(books):
    kg, _ = books

    class TracingEnv(GraphEnv):
        seen: list[str] = []

        def node_feature(self, node_id: str, feature: str) -> str:
            self.seen.append(node_id)
            return super().node_feature(node_id, feature)

    model = _scripted({0: [("NodeFeature", {"node_id": "book-1", "feature": "year"}), ("Finish", {"answer": "y"})]})
    _run(TracingEnv(kg), model, "q?", reflection=False)
    assert TracingEnv.seen == ["book-1"]


def test_offline_verifier_rejects_an_answer_that_repeats_the_question():
    from langgraph_kgmem.graphs.r3cycle.offline import offline_verdict as _offline_verdict

    steps = [{"tool": "RetrieveNode", "observation": "Marie Curie (ent-1) married Pierre Curie"}]
    assert not _offline_verdict("Marie Curie", steps, "Who married Marie Curie?").ok
    assert _offline_verdict("Pierre Curie", steps, "Who married Marie Curie?").ok
