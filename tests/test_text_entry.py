"""Issue #39, item 1: text enters the package through one function (``storable.storable``), the
same way on both backends. A question from a user holding a NUL or a lone surrogate is refused
with KgmemInputError as it enters the run, and the compiled graph answers the next question (it
once raised a raw TypeError on SQLite, a raw psycopg error on PostgreSQL, and left
AutoPrunedRetriever's cached codebook unsaveable for every later question). Text a model wrote
(replies, decisions, thoughts, tool arguments) is normalised before it is stored or checkpointed."""

from __future__ import annotations

import uuid

import pytest
from conftest import SAMPLE_DOCS
from langchain_core.messages import AIMessage
from method_cases import RECORDS_CSV, method_case

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import METHODS, get_factory
from langgraph_kgmem.storable import storable

# ------------------------------------------------------------------------------ the one function

def test_user_text_is_refused_naming_what_and_where():
    with pytest.raises(KgmemInputError, match="the question contains a NUL character at character 1"):
        storable("a\x00b", "the question")
    with pytest.raises(KgmemInputError, match="a tenant is not valid Unicode .* at character 2"):
        storable("ab\ud800", "a tenant")
    with pytest.raises(KgmemInputError, match=r"metadata: the key 'k\\x00'.*NUL"):
        storable({"ok": ["x"], "k\x00": 1}, "metadata")
    with pytest.raises(KgmemInputError, match="must be text"):
        storable(3, "the question")
    with pytest.raises(KgmemInputError, match="source must be one of user, model"):
        storable("x", "x", source="agent")


def test_plain_user_text_passes_as_it_is():
    for text in ("Zoë in Łódź", "東京 😀", "tab\tand\nnewline", "\ufffd"):
        assert storable(text, "the question") is text


def test_model_text_is_normalised():
    assert storable("a\udc80b\x00c", "a reply", source="model") == "a\ufffdbc"
    assert storable("\ud83d\ude00", "a reply", source="model") == "😀"   # a pair written as two code points
    assert storable("\ude00\ud83d", "a reply", source="model") == "\ufffd\ufffd"   # in the wrong order: two lone ones
    clean = {"a": ["b", ("c",)]}
    assert storable(clean, "args", source="model") is clean   # nothing to fix: the value itself
    dirty = {"k\x00": ["x\udc80", ("y\x00",)], "n": 1}
    assert storable(dirty, "args", source="model") == {"k": ["x\ufffd", ["y"]], "n": 1}
    assert dirty == {"k\x00": ["x\udc80", ("y\x00",)], "n": 1}   # the caller's value is left as it was


def test_deeply_nested_model_arguments_are_normalised_without_recursion():
    value = "dee\x00p"
    for _ in range(5_000):
        value = {"a": [value]}
    out = storable(value, "args", source="model")
    while isinstance(out, dict):
        out = out["a"][0]
    assert out == "deep"


# ------------------------------------------------------------------------------ model output

def test_decisions_replies_and_tool_calls_are_normalised():
    from langgraph_kgmem.graphs.autopruned.schemas import TextTriples
    from langgraph_kgmem.llm import decide, generate, invoke_counted
    from langgraph_kgmem.testing import ScriptedChatModel

    model = ScriptedChatModel(responses=[
        '{"triples": [{"subject": "Cur\\udc80ie", "relation": "born\\u0000 in", "object": "Warsaw"}]}',
        "War\udc80saw\x00",
        AIMessage("thinking \udc80", tool_calls=[{"name": "Finish", "args": {"answer": "War\x00saw \ud800"},
                                                  "id": "c1", "type": "tool_call"}])])
    decision, _ = decide(model, TextTriples, "extract", step="t", offline=lambda: TextTriples(triples=[]))
    t = decision.triples[0]
    assert (t.subject, t.relation, t.object) == ("Cur\ufffdie", "born in", "Warsaw")
    assert generate(model, "answer", step="answer")[0] == "War\ufffdsaw"
    raw, _ = invoke_counted(model, [], step="reason")
    assert raw.content == "thinking \ufffd" and raw.tool_calls[0]["args"] == {"answer": "Warsaw \ufffd"}


def test_a_fallback_records_the_raw_reply_normalised():
    """The raw reply a fallback records goes into the run's usage, so into its checkpoint
    (``parsing.clean_reply``)."""
    from langgraph_kgmem.graphs.autopruned.schemas import TextTriples
    from langgraph_kgmem.llm import decide
    from langgraph_kgmem.testing import ScriptedChatModel

    model = ScriptedChatModel(responses=["no json \udc80\x00 here"] * 2)
    _, usage = decide(model, TextTriples, "extract", step="t", offline=lambda: TextTriples(triples=[]))
    assert usage["fallbacks"][0]["raw"] == "no json \ufffd here"


def test_a_decision_left_empty_by_normalising_is_malformed_output():
    from pydantic import BaseModel, Field

    from langgraph_kgmem.llm import decide
    from langgraph_kgmem.testing import ScriptedChatModel

    class Name(BaseModel):
        name: str = Field(min_length=1)

    model = ScriptedChatModel(responses=['{"name": "\\u0000"}', '{"name": "\\u0000"}'])
    decision, usage = decide(model, Name, "name?", step="name", offline=lambda: Name(name="offline"))
    assert decision.name == "offline" and usage["fallbacks"][0]["kind"] == "malformed"


def test_a_decision_made_by_tool_call_is_normalised_too():
    """Structured output by tool calling: the provider's parser validates the arguments, and a
    pydantic string keeps a NUL; the decision is normalised after it (``decisions._storable_decision``)."""
    from pydantic import BaseModel

    from langgraph_kgmem.llm import decide
    from langgraph_kgmem.testing import ScriptedChatModel

    class Name(BaseModel):
        name: str

    reply = AIMessage("", tool_calls=[{"name": "Name", "args": {"name": "Cu\x00rie"}, "id": "c1", "type": "tool_call"}])
    decision, usage = decide(ScriptedChatModel(responses=[reply]), Name, "name?", step="name",
                             offline=lambda: Name(name="offline"))
    assert decision.name == "Curie" and not usage.get("fallbacks")


# ------------------------------------------------------------------------------ questions, every method


def _refused_then_answered(app, checkpointer, question, thread):
    """The question with a lone surrogate, then with a NUL, refused as each enters; then the
    question itself answered on the same compiled graph and on each thread that saw a refusal."""
    n = len(question)
    bad = {"surrogate": (question + " \udc80", f"the question is not valid Unicode .* at character {n + 1}"),
           "nul": (question[:5] + "\x00" + question[5:], "the question contains a NUL character at character 5")}
    for name, (text, where) in bad.items():
        config = {"configurable": {"thread_id": f"{thread}-{name}"}}
        with pytest.raises(KgmemInputError, match=where):
            app.invoke({"question": text}, config)
        # refused as it entered the state (the question channel's reducer), before the first
        # step's checkpoint: the thread's last checkpoint is LangGraph's record of the input
        assert checkpointer.get_tuple(config).metadata["step"] == -1
    for name in bad:
        config = {"configurable": {"thread_id": f"{thread}-{name}"}}
        out = app.invoke({"question": question}, config)
        assert isinstance(out["answer"], str) and out["answer"], out
        assert app.get_state(config).values["question"] == question


@pytest.mark.parametrize("method", list(METHODS))
def test_a_refused_question_leaves_the_compiled_graph_usable_on_sqlite(method, text_kg, tmp_path):
    from langgraph_kgmem.persistence import open_persistence

    kg, question, _ = method_case(method, text_kg)
    checkpointer, store = open_persistence(tmp_path)
    factory, preset = get_factory(method)
    app = factory(kg, model="offline", store=store, **preset).compile(store=store, checkpointer=checkpointer)
    _refused_then_answered(app, checkpointer, question, method)


@pytest.fixture(scope="module")
def pg_kgs(request):
    """One PostgreSQL database for the module: the sample KG (documents) and its checkpointer and
    store, plus the records KG KG-IRAG reads, in memory (the run's state and memory go to PostgreSQL)."""
    import psycopg

    from langgraph_kgmem import KnowledgeGraph

    base = request.getfixturevalue("postgres_uri")
    name = f"kgmem_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    kg = KnowledgeGraph.open(base.rsplit("/", 1)[0] + "/" + name, name="test", embeddings="hash")
    kg.add_documents(SAMPLE_DOCS, model="offline")
    records = KnowledgeGraph.in_memory(name="records")
    records.add_records(RECORDS_CSV, event_rule="rain_mm > 0", event_name="rain")
    yield kg, records, kg.persistence()
    kg.close()
    records.close()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.integration
@pytest.mark.parametrize("method", list(METHODS))
def test_a_refused_question_leaves_the_compiled_graph_usable_on_postgres(method, pg_kgs):
    from method_cases import QUESTION, RECORD_QUESTIONS

    kg, records, (checkpointer, store) = pg_kgs
    kg, question = (records, RECORD_QUESTIONS[0]) if method == "kgirag" else (kg, QUESTION)
    factory, preset = get_factory(method)
    app = factory(kg, model="offline", store=store, **preset).compile(store=store, checkpointer=checkpointer)
    _refused_then_answered(app, checkpointer, question, f"{method}-{uuid.uuid4().hex[:6]}")


def test_a_refused_question_is_refused_by_ainvoke_too(text_kg):
    import asyncio

    from method_cases import compile_method

    app = compile_method("catrag", text_kg)
    with pytest.raises(KgmemInputError, match="NUL character"):
        asyncio.run(app.ainvoke({"question": "a\x00b"}))


# ------------------------------------------------------------------------------ AutoPrunedRetriever's codebook


def test_a_failed_codebook_save_does_not_poison_the_compiled_graph(text_kg):
    """A store that refuses what a run added to the cached codebook (as PostgreSQL refuses a NUL):
    that run fails, and the next one reloads the stored codebook instead of saving the refused
    rows again, so the compiled graph answers every later question."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph

    class Refusing(InMemoryStore):
        def batch(self, ops):
            if any("Refused" in repr(getattr(op, "value", None)) for op in ops):
                raise RuntimeError("the database refused a value")
            return super().batch(ops)

    store = Refusing()
    app = create_autopruned_graph(text_kg, model="offline").compile(store=store)
    with pytest.raises(RuntimeError, match="refused a value"):
        app.invoke({"question": "Where was Refused Person born?"})
    for question in ("Where was Marie Curie born?", "Which river flows into the Baltic Sea?"):
        out = app.invoke({"question": question})
        assert out["answer_memory"] in ("stored", "not grounded", "unanswered"), out["answer_memory"]


def test_a_verifier_reason_is_normalised_before_the_trajectory_is_stored(text_kg, tmp_path):
    """R3-Cycle stores a verifier's reason with the attempt: a user's verifier writing a lone
    surrogate or a NUL does not break the SQLite store (``records.as_verdict``)."""
    from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph
    from langgraph_kgmem.graphs.r3cycle.records import load_run
    from langgraph_kgmem.persistence import open_persistence

    checkpointer, store = open_persistence(tmp_path)
    app = create_r3cycle_graph(text_kg, model="offline", max_cycles=0,
                               verifier=lambda question, answer, evidence: (False, "no \udc80 no\x00")
                               ).compile(store=store, checkpointer=checkpointer)
    out = app.invoke({"question": "Where was Marie Curie born?"}, {"configurable": {"thread_id": "v"}})
    run = load_run(store, text_kg.name, out["run_id"])
    assert run["trajectories"][0]["verdict"]["reason"] == "no \ufffd no"
