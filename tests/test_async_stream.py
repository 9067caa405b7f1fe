"""Async and streaming: ``ainvoke``/``astream`` for every registered method, offline, and the custom
progress events a UI can show (hops, memory replay, PPR, ...)."""

from __future__ import annotations

import asyncio

import pytest
from method_cases import compile_method, method_case

from langgraph_kgmem.graphs.registry import METHODS


def compiled(kg, method):
    return compile_method(method, kg)  # a fresh memory per app: sync and async runs start from the same state


@pytest.mark.parametrize("method", list(METHODS))
def test_ainvoke_matches_invoke_offline(kg, method):
    kg, question, _ = method_case(method, kg)
    sync_out = compiled(kg, method).invoke({"question": question})
    async_out = asyncio.run(compiled(kg, method).ainvoke({"question": question}))
    assert async_out["answer"] == sync_out["answer"] and async_out["answer"].strip()
    assert [e["id"] for e in async_out["evidence"]] == [e["id"] for e in sync_out["evidence"]]
    assert async_out["usage"]["llm_calls"] == 0


@pytest.mark.parametrize("method", list(METHODS))
def test_concurrent_ainvoke_on_one_app(kg, method):
    kg, question, other = method_case(method, kg)
    app = compiled(kg, method)

    async def both():
        return await asyncio.gather(app.ainvoke({"question": question}), app.ainvoke({"question": other}))

    first, second = asyncio.run(both())
    assert first["answer"].strip() and second["answer"].strip()
    assert first["answer"] != second["answer"]  # each run kept its own question


@pytest.mark.parametrize("method", list(METHODS))
def test_astream_custom_progress_events(kg, method):
    kg, question, _ = method_case(method, kg)
    app = compiled(kg, method)

    async def collect():
        return [chunk async for chunk in app.astream({"question": question}, stream_mode=["custom", "updates"])]

    chunks = asyncio.run(collect())
    modes = [mode for mode, _ in chunks]
    assert modes and modes[-1] == "updates"  # the run finishes with a state update
    updates = [data for mode, data in chunks if mode == "updates"]
    assert any("answer" in (upd or {}) for part in updates for upd in part.values())
    events = [data for mode, data in chunks if mode == "custom"]
    assert events, f"{method} emits no custom progress events offline for this question"
    for event in events:  # progress events are small JSON dicts a UI can render
        assert isinstance(event, dict) and isinstance(event.get("event"), str), event
    # events arrive while the run is in progress, before its last update
    assert modes.index("custom") < len(modes) - 1


@pytest.mark.parametrize("method", list(METHODS))
def test_no_blocking_call_on_the_event_loop(kg, method):
    """Under ainvoke, nothing blocks the event loop (sync nodes run in worker threads).

    blockbuster (installed with langgraph-cli[inmem], the same guard `langgraph dev` uses) raises on
    blocking calls made from the loop's thread.
    """
    blockbuster = pytest.importorskip("blockbuster", reason="blockbuster comes with langgraph-cli[inmem]")
    kg, question, other = method_case(method, kg)
    app = compiled(kg, method)

    async def run():
        await app.ainvoke({"question": other})  # warm-up: first-use imports read files
        with blockbuster.blockbuster_ctx():
            return await app.ainvoke({"question": question})

    assert asyncio.run(run())["answer"].strip()


def test_blocking_guard_is_real():
    """Control for the test above: a blocking async node is caught."""
    blockbuster = pytest.importorskip("blockbuster", reason="blockbuster comes with langgraph-cli[inmem]")
    import time
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        question: str

    async def sleepy(state):
        time.sleep(0.01)
        return {}

    builder = StateGraph(State)
    builder.add_node("sleep_blocking", sleepy)
    builder.add_edge(START, "sleep_blocking")
    builder.add_edge("sleep_blocking", END)
    app = builder.compile()

    async def run():
        with blockbuster.blockbuster_ctx():
            await app.ainvoke({"question": "q"})

    with pytest.raises(blockbuster.BlockingError):
        asyncio.run(run())


@pytest.fixture(params=["directory", pytest.param("postgres", marks=pytest.mark.integration)])
def persistent_kg(request, tmp_path):
    from langgraph_kgmem import KnowledgeGraph

    where = str(tmp_path / "kg") if request.param == "directory" else request.getfixturevalue("new_database")()
    kg = KnowledgeGraph.open(where, name="asyncdemo", embeddings="hash")
    yield kg
    kg.close()


def test_the_documented_async_example_runs_on_the_kgs_own_persistence(persistent_kg):
    """The documented async example, verbatim, on AsyncSqliteSaver/Store or the async Postgres pair."""
    from doc_examples import run_doc_example

    namespace = run_doc_example("persistent_kg")
    out, state = asyncio.run(namespace["main"](persistent_kg))
    assert "Lovelace" in out["answer"] or out["evidence"]
    assert state.values["question"] == "Who worked with Ada Lovelace?"   # the thread was checkpointed
    async def memory_items():
        async with persistent_kg.apersistence() as (_, store):
            return await store.asearch(("kgmem",), limit=1000)
    assert isinstance(asyncio.run(memory_items()), list)


def test_aadd_documents_does_not_block_the_loop():
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.in_memory(name="loop", embeddings="hash")

    async def both():
        ticks = []

        async def ticker():
            for _ in range(5):
                ticks.append(1)
                await asyncio.sleep(0)
        report, _ = await asyncio.gather(kg.aadd_documents(["Grace Hopper wrote COBOL."] * 1, model="offline"),
                                         ticker())
        return report, ticks
    report, ticks = asyncio.run(both())
    assert report.documents_added == 1 and len(ticks) == 5
