"""A planted checkpoint runs nothing: every checkpointer the package opens (SQLite ``memory.sqlite``
and PostgreSQL, sync and async) loads only the types its graphs store, and refuses the rest with a
package error before anything named in the payload is imported or called."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import sqlite3
import uuid
from typing import TypedDict

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import StorageError, UnsafeStoredDataError
from langgraph_kgmem.kg.backends.embedded.persistence import MEMORY_DB_FILE
from langgraph_kgmem.persistence import StrictCheckpointSerializer

CFG = {"configurable": {"thread_id": "t1"}}


class _State(TypedDict, total=False):
    question: str
    answer: str
    evidence: list[str]   # not a primitive: PostgresSaver keeps it in checkpoint_blobs


def _app(checkpointer):
    graph = StateGraph(_State)
    graph.add_node("answer", lambda state: {"answer": state["question"].upper(), "evidence": ["e"]})
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=checkpointer)


def _exploit(marker) -> bytes:
    """msgpack that LangGraph's default serializer turns into ``os.system("touch marker")``."""
    return ormsgpack.packb(ormsgpack.Ext(1, ormsgpack.packb(["os", "system", [f"touch {marker}"]])))


@pytest.fixture
def open_kg(backend, tmp_path, request):
    """Factory: (re)open one KG with on-disk persistence on the test's backend (a KG directory with
    ``memory.sqlite``, or a PostgreSQL database)."""
    target = str(tmp_path / "kg") if backend == "sqlite" else request.getfixturevalue("new_database")()
    opened: list[KnowledgeGraph] = []

    def make() -> KnowledgeGraph:
        kg = KnowledgeGraph.open(target, embeddings="hash", **({"vector_backend": "memory"}
                                                                 if backend == "sqlite" else {}))
        opened.append(kg)
        return kg

    yield make
    for kg in opened:
        kg.close()


def _plant(kg: KnowledgeGraph, payload: bytes) -> None:
    """Overwrite every stored checkpoint value of the KG's checkpointer with ``payload``."""
    if kg.uri is None:
        with sqlite3.connect(kg.path / MEMORY_DB_FILE) as conn:
            assert conn.execute("UPDATE checkpoints SET type='msgpack', checkpoint=?", (payload,)).rowcount
    else:
        import psycopg

        with psycopg.connect(kg.uri, autocommit=True) as conn:
            assert conn.execute("UPDATE checkpoint_blobs SET type='msgpack', blob=%s", (payload,)).rowcount


def test_a_planted_checkpoint_runs_nothing(open_kg, tmp_path):
    kg = open_kg()
    assert _app(kg.persistence()[0]).invoke({"question": "q"}, CFG)["answer"] == "Q"
    marker = tmp_path / "pwned"
    _plant(kg, _exploit(marker))
    kg.close()
    kg = open_kg()
    with pytest.raises(UnsafeStoredDataError, match=r"names os\.system.*nothing in it was run.*delete_thread"):
        _app(kg.persistence()[0]).get_state(CFG)
    assert not marker.exists()
    assert issubclass(UnsafeStoredDataError, StorageError)


def test_a_planted_checkpoint_runs_nothing_async(open_kg, tmp_path):
    kg = open_kg()

    async def run(plant: bool):
        async with kg.apersistence() as (checkpointer, _):
            app = _app(checkpointer)
            if not plant:
                return await app.ainvoke({"question": "q"}, CFG)
            return await app.aget_state(CFG)

    assert asyncio.run(run(False))["answer"] == "Q"
    marker = tmp_path / "pwned"
    _plant(kg, _exploit(marker))
    with pytest.raises(UnsafeStoredDataError, match=r"names os\.system.*nothing in it was run"):
        asyncio.run(run(True))
    assert not marker.exists()


def test_a_pickled_checkpoint_is_refused(open_kg, tmp_path):
    import pickle

    kg = open_kg()
    _app(kg.persistence()[0]).invoke({"question": "q"}, CFG)
    if kg.uri is None:
        with sqlite3.connect(kg.path / MEMORY_DB_FILE) as conn:
            conn.execute("UPDATE checkpoints SET type='pickle', checkpoint=?", (pickle.dumps({"v": 1}),))
    else:
        import psycopg

        with psycopg.connect(kg.uri, autocommit=True) as conn:
            conn.execute("UPDATE checkpoint_blobs SET type='pickle', blob=%s", (pickle.dumps("x"),))
    with pytest.raises(UnsafeStoredDataError, match=r"stored as 'pickle'.*refuses to load"):
        _app(kg.persistence()[0]).get_state(CFG)


# ---------------------------------------------------------------------------- the serializer alone


def test_the_serializer_loads_what_langgraph_and_the_methods_store():
    serde = StrictCheckpointSerializer("test")
    value = {"messages": [HumanMessage("hi"), AIMessage("ho")], "sends": [Send("node", {"x": 1})],
             "when": datetime.datetime(2024, 5, 1, 2, 3), "day": datetime.date(2024, 5, 1), "id": uuid.UUID(int=7),
             "ids": {"a", "b"}, "plain": {"answer": "x", "evidence": [{"id": "ent-1", "score": 0.5}]}}
    assert serde.loads_typed(serde.dumps_typed(value)) == value
    assert serde.pickle_fallback is False


@pytest.mark.parametrize("payload, named", [
    (ormsgpack.Ext(0, ormsgpack.packb(["subprocess", "getoutput", "id"])), "subprocess.getoutput"),
    (ormsgpack.Ext(2, ormsgpack.packb(["os", "system", {"command": "id"}])), "os.system"),
    (ormsgpack.Ext(3, ormsgpack.packb(["os", "popen", "id", "read"])), "os.popen.read"),
    # ext code 4: a pydantic v1 model rebuilt from its fields (a constructor like the others)
    (ormsgpack.Ext(4, ormsgpack.packb(["os", "system", {"command": "id"}])), "os.system"),
    (ormsgpack.Ext(5, ormsgpack.packb(["builtins", "eval", {"x": 1}, None])), "builtins.eval"),
    # re.compile is on LangGraph's own safe list (a pattern from the table is a denial of service)
    (ormsgpack.Ext(0, ormsgpack.packb(["re", "compile", "(a+)+$"])), "re.compile"),
    # nested inside an allowed type: found before the outer value is built
    ({"ok": ormsgpack.Ext(0, ormsgpack.packb(["builtins", "set", [ormsgpack.Ext(
        1, ormsgpack.packb(["os", "system", ["id"]]))]]))}, "os.system"),
])
def test_the_serializer_refuses_types_outside_its_allow_list(payload, named):
    with pytest.raises(UnsafeStoredDataError, match=named.replace(".", r"\.")):
        StrictCheckpointSerializer("test").loads_typed(("msgpack", ormsgpack.packb(payload)))


@pytest.mark.parametrize("kind, payload", [
    # LangChain's JSON constructor format: it names a class to import and call
    ("json", b'{"lc": 1, "type": "constructor", "id": ["os", "system"], "kwargs": {"command": "id"}}'),
    ("pickle", b"cos\nsystem\n(S'id'\ntR."),
    ("future-kind", b"x"),
])
def test_the_serializer_refuses_every_kind_it_never_writes(kind, payload):
    with pytest.raises(UnsafeStoredDataError, match=f"stored as '{kind}'.*refuses to load"):
        StrictCheckpointSerializer("test").loads_typed((kind, payload))


@dataclasses.dataclass
class _Point:
    x: int


def test_with_allowlist_adds_a_type_and_stays_strict():
    with pytest.raises(UnsafeStoredDataError, match="_Point"):   # not allowed by default
        StrictCheckpointSerializer("test").loads_typed(StrictCheckpointSerializer("test").dumps_typed(_Point(1)))
    serde = StrictCheckpointSerializer("test").with_msgpack_allowlist([_Point])
    assert isinstance(serde, StrictCheckpointSerializer)
    assert serde.loads_typed(serde.dumps_typed(_Point(1))) == _Point(1)
    with pytest.raises(UnsafeStoredDataError, match=r"os\.system"):
        serde.loads_typed(("msgpack", _exploit("/nonexistent/x")))
