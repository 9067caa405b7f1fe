"""Prompts as a seam (issue 41, item 5): a method's prompts are a documented mapping (``PROMPTS``
in its prompts module), a graph overrides any of them with ``prompts=`` (a run with
``context={"prompts": ...}``), checked at build time, read when the node calls the model (not
bound at import), and the outside text inside them still arrives fenced."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.kgirag import create_kgirag_graph, create_singlepass_graph
from langgraph_kgmem.graphs.kgirag import prompts as kgirag_prompts
from langgraph_kgmem.graphs.prompt_overrides import check_prompts, placeholders
from langgraph_kgmem.llm.prompts import DATA_NOTE
from langgraph_kgmem.testing import ScriptedChatModel

QUESTION = ("I would meet rain at Pier on a 2-hour trip leaving at 2025-01-01 01:00. What is the earliest "
            "departure time after then, at most 4 hours later, that avoids rain for the whole trip?")
ANSWER_OVERRIDE = "Records:\n{records}\nQuestion: {question}\nReply with the time only. (custom answer prompt)"


@pytest.fixture
def pier():
    kg = KnowledgeGraph.in_memory(name="pier")
    rows = [{"time": f"2025-01-01 {h:02d}:00", "location": "Pier <b>", "rain": r}
            for h, r in enumerate([0, 0, 1.2, 0.4, 0, 0])]
    kg.add_records(rows, event_rule="rain > 0", event_name="rain")
    return kg


def scripted():
    """A model that plans and judges as the offline rules do and answers with the offline answer."""
    def responder(messages, request):
        if request is not None and request.step == "plan_query":
            p = request.context["offline_plan"]
            return {"task": p["task"], "location": p["location"], "departure_time": p["time"],
                    "trip_hours": p["hours"], "horizon_hours": p["horizon"], "step_hours": 2}
        if request is not None and request.step == "judge_retrieval":
            return request.context["offline"]
        return request.context["offline_answer"]
    return ScriptedChatModel(responder=responder)


def step_calls(model, step):
    return [c["messages"] for c in model.calls if c["request"] is not None and c["request"].step == step]


def step_messages(model, step):
    """The prompt each call of ``step`` sent: its human message (the system message is the fence rule)."""
    return [next(m.content for m in msgs if isinstance(m, HumanMessage)) for msgs in step_calls(model, step)]


def sends_the_data_note_once(model, step) -> bool:
    """Every call of ``step`` opened with the data note as its system message and did not repeat it."""
    calls = step_calls(model, step)
    return bool(calls) and all(isinstance(msgs[0], SystemMessage) and msgs[0].content == DATA_NOTE
                               and not any(DATA_NOTE in str(m.content) for m in msgs[1:]) for msgs in calls)


def test_every_method_prompt_is_in_the_mapping():
    assert set(kgirag_prompts.PROMPTS) == {"plan", "reasoning_detect", "reasoning_latest", "reasoning_earliest",
                                           "judge", "answer"}
    assert kgirag_prompts.PROMPTS["answer"] is kgirag_prompts.ANSWER_PROMPT
    assert placeholders(kgirag_prompts.PROMPTS["answer"]) == {"reasoning", "records", "question"}


def test_an_override_reaches_the_models_messages_and_keeps_the_fence(pier):
    model = scripted()
    app = create_kgirag_graph(pier, model=model, prompts={"answer": ANSWER_OVERRIDE}).compile()
    out = app.invoke({"question": QUESTION})
    assert out["answer"] == "2025-01-01 04:00"
    [sent] = step_messages(model, "synthesize_answer")
    assert sent.startswith("Records:\n<data>") and "(custom answer prompt)" in sent
    assert sends_the_data_note_once(model, "synthesize_answer")   # the data note comes with the records it explains
    assert "- Pier &lt;b&gt; at 2025-01-01 02:00" in sent and "Pier <b>" not in sent   # the records, fenced
    # the other prompts are the defaults
    assert step_messages(model, "judge_retrieval")[0].splitlines()[0] != ANSWER_OVERRIDE.splitlines()[0]
    default = scripted()
    create_kgirag_graph(pier, model=default).compile().invoke({"question": QUESTION})
    assert "(custom answer prompt)" not in step_messages(default, "synthesize_answer")[0]


def test_a_run_may_override_a_prompt_through_its_context(pier):
    model = scripted()
    app = create_singlepass_graph(pier, model=model).compile()
    app.invoke({"question": QUESTION}, context={"prompts": {"answer": ANSWER_OVERRIDE}})
    assert "(custom answer prompt)" in step_messages(model, "synthesize_answer")[0]


def test_prompts_are_read_when_the_node_calls_the_model(pier, monkeypatch):
    """A graph built before the mapping changes sends the changed prompt: nothing was bound at import."""
    model = scripted()
    app = create_kgirag_graph(pier, model=model).compile()
    monkeypatch.setitem(kgirag_prompts.PROMPTS, "judge", kgirag_prompts.JUDGE_PROMPT + "\n(patched judge)")
    app.invoke({"question": QUESTION})
    assert all(m.endswith("(patched judge)") for m in step_messages(model, "judge_retrieval"))


@pytest.mark.parametrize("prompts, match", [
    ({"anser": "x"}, r"create_kgirag_graph: no prompt 'anser'; the prompts are: answer, judge, plan"),
    ({"answer": "{reasoning} {secret}"}, r"prompt 'answer' uses \{secret\}, which its step does not fill"),
    ({"answer": ""}, r"prompt 'answer' must be non-empty text"),
    ({"answer": 3}, r"prompt 'answer' must be non-empty text"),
    ({"answer": "{question"}, r"does not parse as a template"),
    (["answer"], r"prompts must be a dict"),
])
def test_a_bad_override_is_refused_when_the_graph_is_built(pier, prompts, match):
    with pytest.raises(KgmemInputError, match=match):
        create_kgirag_graph(pier, model="offline", prompts=prompts)


def test_a_bad_run_override_is_refused_before_any_work(pier):
    app = create_kgirag_graph(pier, model="offline").compile()
    with pytest.raises(KgmemInputError, match="no prompt 'nope'"):
        app.invoke({"question": QUESTION}, context={"prompts": {"nope": "x"}})


def test_the_data_note_is_added_only_where_the_default_carries_it():
    defaults = {"quotes": "Data:\n{records}\n" + DATA_NOTE, "plain": "List the entities of {question}"}
    out = check_prompts(defaults, {"quotes": "Only {records}", "plain": "Entities in {question}?"})
    assert out == {"quotes": "Only {records}\n" + DATA_NOTE, "plain": "Entities in {question}?"}


def test_catrag_reads_its_overrides_too(text_kg):
    """Every method with a PROMPTS mapping takes ``prompts=`` the same way (CatRAG: the NER prompt)."""
    from langgraph_kgmem.graphs.catrag import create_catrag_graph

    def responder(messages, request):
        if request is None:
            return "Warsaw"
        return {"filter_facts": {"keep": [1]}, "anchor_entities": {"names": ["Marie Curie"]},
                "weight_edges": {"scores": []}}.get(request.step, {})

    model = ScriptedChatModel(responder=responder)
    ner = "Name the people and places in this question, as written: {question} (custom ner prompt)"
    app = create_catrag_graph(text_kg, model=model, dynamic_weighting=False, prompts={"ner": ner}).compile()
    app.invoke({"question": "Where was Marie Curie born?"})
    [sent] = step_messages(model, "anchor_entities")
    assert sent.startswith("Name the people and places in this question, as written: Where was Marie Curie born?")
    with pytest.raises(KgmemInputError, match=r"create_catrag_graph: no prompt 'answer'; the prompts are: filter, ner"):
        create_catrag_graph(text_kg, model="offline", prompts={"answer": "x"})


def test_r3cycle_reads_its_overrides_too(text_kg):
    """R3-Cycle: the agent's system message and the reflection prompt."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph

    def responder(messages, request):
        if request is None:
            return {"tool_calls": [{"name": "Finish", "args": {"answer": "Paris"}}]}
        if request.step == "verify":
            return {"ok": False, "reason": "wrong city"}
        if request.step == "reflect":
            return {"root_cause": "guessed", "advice": "look up the birthplace", "retry": False}
        return {}

    model = ScriptedChatModel(responder=responder)
    system = "You explore a graph with tools; {remaining} of {budget} steps left. (custom system prompt)"
    app = create_r3cycle_graph(text_kg, model=model, max_cycles=1, store=InMemoryStore(),
                               prompts={"reason_system": system,
                                        "reflect": "Why did this fail? {question} {failure} {log} (custom reflect)"})
    app.compile(store=InMemoryStore()).invoke({"question": "Where was Marie Curie born?"})
    first = model.calls[0]["messages"][0].content
    assert first == "You explore a graph with tools; 10 of 10 steps left. (custom system prompt)"
    reflected = step_messages(model, "reflect")
    assert reflected and "(custom reflect)" in reflected[0] and sends_the_data_note_once(model, "reflect")
    with pytest.raises(KgmemInputError, match=r"prompt 'reflect' uses \{advice\}"):
        create_r3cycle_graph(text_kg, model="offline", prompts={"reflect": "{advice}"})


def test_remindrag_reads_its_overrides_too(text_kg):
    """ReMindRAG: the decomposition prompt, asked when ``decompose=True``."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.remindrag import create_remindrag_graph

    def responder(messages, request):
        if request is None:
            return "Warsaw"
        return {"decompose": {"sub_questions": ["Who is Marie Curie?"]}, "check_sufficiency": {"sufficient": True},
                "next_move": {"action": "stop"}, "memorize": {"useful": []}}.get(request.step, {})

    model = ScriptedChatModel(responder=responder)
    decompose = "Break {question} into smaller questions. (custom decompose)"
    app = create_remindrag_graph(text_kg, model=model, decompose=True, prompts={"decompose": decompose})
    app.compile(store=InMemoryStore()).invoke({"question": "Where was Marie Curie born?"})
    assert step_messages(model, "decompose")[0].startswith(
        "Break Where was Marie Curie born? into smaller questions. (custom decompose)")


def test_autopruned_reads_its_overrides_too(text_kg):
    """AutoPrunedRetriever: the answer prompt around the packed codebook."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph

    model = ScriptedChatModel(responder=lambda messages, request: "Warsaw" if request is None or request.step == "answer"
                              else {"triples": []})
    answer = "Facts ({legend}):\n{knowledge}\nQ: {question}{known_note}\n(custom answer prompt)"
    app = create_autopruned_graph(text_kg, model=model, prompts={"answer": answer, "sentences": answer.replace(
        "({legend})", "").replace("{known_note}", "")})
    out = app.compile(store=InMemoryStore()).invoke({"question": "Where was Marie Curie born?"})
    [sent] = step_messages(model, "answer")
    assert sent.startswith("Facts") and "Q: Where was Marie Curie born?" in sent
    assert sends_the_data_note_once(model, "answer")
    assert out["answer"] == "Warsaw"
