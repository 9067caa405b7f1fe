"""Memory that loses nothing (#14, #11): concurrent runs in threads and in processes, on every
store kind, apply every memory update and store every question run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from method_cases import compile_method

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.kg.backends.embedded.persistence import MEMORY_DB_FILE
from langgraph_kgmem.memory import EdgeMemory, RecordMemory
from langgraph_kgmem.graphs.autopruned.codebook import Codebook
from tests.conftest import SAMPLE_DOCS

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["Where was Marie Curie born?", "Which river flows into the Baltic Sea?", "Who married Marie Curie?",
             "What is the capital of Poland?", "What did Marie Curie discover?", "Where is Warsaw?",
             "Which prize did Marie Curie win?", "Where did Pierre Curie marry?", "What is the longest river in Poland?",
             "Who was a French physicist?"]
READ_PAUSE = 0.05   # seconds each memory read waits before it returns (inside the lock, where there is one)


def _questions(n: int) -> list[str]:
    """``n`` distinct questions over SAMPLE_DOCS."""
    return [QUESTIONS[i % len(QUESTIONS)] + ("" if i < len(QUESTIONS) else f" (variant {i})") for i in range(n)]


def _pause_after_reads(store, seconds: float, setattr=setattr) -> None:
    """Make every read through ``store``'s class wait ``seconds`` before it returns (a store may
    refuse instance attributes): a memory update reads, then writes, so the pause holds each
    writer's read open while the others read too, unless the memory lock keeps them apart."""
    from langgraph.store.base import GetOp

    batch = type(store).batch

    def batch_then_wait(self, ops):
        ops = list(ops)
        out = batch(self, ops)
        if any(isinstance(op, GetOp) for op in ops):
            time.sleep(seconds)
        return out

    setattr(type(store), "batch", batch_then_wait)


def test_app_batch_applies_every_remindrag_edge_update(kg, monkeypatch):
    _, store = kg.persistence()
    _pause_after_reads(store, READ_PAUSE, monkeypatch.setattr)
    app = compile_method("remindrag", kg, store=store)
    qs = _questions(8) * 6
    outs = app.batch([{"question": q} for q in qs], {"max_concurrency": 8})
    written = sum(o["memory_updates"]["written"] for o in outs)
    counts = EdgeMemory(store, kg.name, 1).update_counts()
    assert written > 0 and sum(counts.values()) == written   # every update applied, none lost


WORKER = """
    import json, os, sys, time
    from pathlib import Path
    from langgraph_kgmem import KnowledgeGraph
    sys.path.insert(0, sys.argv[5])
    from method_cases import compile_method
    from test_memory_concurrency import _pause_after_reads
    from tests.conftest import SAMPLE_DOCS
    target, method, questions, store_file = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    meet, processes, read_pause = Path(sys.argv[6]), int(sys.argv[7]), float(sys.argv[8])
    if target.startswith("postgresql://"):
        kg = KnowledgeGraph.open(target, name="shared", embeddings="hash")
        _, store = kg.persistence()
    else:   # an embedded KG per process, built the same way, over one shared SQLite memory file
        from pathlib import Path
        from langgraph_kgmem.persistence import open_persistence
        kg = KnowledgeGraph.in_memory(name="shared")
        kg.add_documents(SAMPLE_DOCS, model="offline")
        _, store = open_persistence(Path(store_file))
    app = compile_method(method, kg, store=store)
    _pause_after_reads(store, read_pause)
    (meet / f"ready-{os.getpid()}").touch()   # a barrier: every process starts at once
    deadline = time.monotonic() + 120
    while len(list(meet.glob("ready-*"))) < processes and time.monotonic() < deadline:
        time.sleep(0.01)
    written = 0
    for q in questions:
        out = app.invoke({"question": q})
        written += out.get("memory_updates", {}).get("written", 0)
    print(json.dumps({"written": written}))
"""


def _run_workers(target: str, method: str, per_process: list[list[str]], store_file: str = "",
                 read_pause: float = READ_PAUSE) -> list[dict]:
    import tempfile

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="kgmem-meet-") as meet:
        procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER), target, method, json.dumps(qs),
                                   store_file, str(ROOT / "tests"), meet, str(len(per_process)), str(read_pause)],
                                  env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for qs in per_process]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-3000:]   # no crash in any process
            outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def _stored_question_runs(store, name: str) -> set[tuple]:
    """Each stored question run as its triples (a question whose triples an earlier run already
    has reuses that run instead of storing a copy)."""
    book = Codebook.load(store, name)
    return {tuple(tuple(book.triple(e)) for e in r.edges) for r in book.runs_of("Q")}


def _serial_question_runs(qs: list[str]) -> set[tuple]:
    from langgraph.store.memory import InMemoryStore

    kg = KnowledgeGraph.in_memory(name="shared")
    kg.add_documents(SAMPLE_DOCS, model="offline")
    store = InMemoryStore()
    app = compile_method("autopruned", kg, store=store)
    for q in qs:
        app.invoke({"question": q})
    return _stored_question_runs(store, "shared")


@pytest.mark.integration
def test_three_processes_store_every_autopruned_question_run_on_postgres(new_database):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="shared", embeddings="hash") as kg:
        kg.add_documents(SAMPLE_DOCS, model="offline")
    qs = _questions(30)
    # a codebook save follows its read by a whole run's work, so writers drift apart: a longer pause
    # keeps three of them overlapping on every server-side lock path
    _run_workers(uri, "autopruned", [qs[0::3], qs[1::3], qs[2::3]], read_pause=0.3)
    with KnowledgeGraph.open(uri, name="shared", embeddings="hash") as kg:
        _, store = kg.persistence()
        book = Codebook.load(store, "shared")
        assert _stored_question_runs(store, "shared") == _serial_question_runs(qs) and not book.validate()


@pytest.mark.integration
def test_three_processes_store_every_autopruned_question_run_on_one_sqlite_store(tmp_path):
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    qs = _questions(30)
    _run_workers("embedded", "autopruned", [qs[0::3], qs[1::3], qs[2::3]], store_file=str(tmp_path))
    store = SqliteStore(sqlite3.connect(str(tmp_path / MEMORY_DB_FILE), check_same_thread=False, isolation_level=None))
    assert _stored_question_runs(store, "shared") == _serial_question_runs(qs)
    assert not Codebook.load(store, "shared").validate()


OPENER = """
    import sys, time
    from pathlib import Path
    from langgraph_kgmem.persistence import open_persistence
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))   # every process starts at one instant
    saver, store = open_persistence(Path(sys.argv[1]))
    store.put(("opened",), sys.argv[3], {"ok": True})
"""


@pytest.mark.integration
def test_processes_opening_one_new_sqlite_memory_at_once_all_set_it_up(tmp_path):
    """LangGraph's SQLite setup inserts its migration rows unguarded: processes setting up one new
    database at once collide (UNIQUE constraint failed: store_migrations.v) unless serialised."""
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = str(time.time() + 4.0)
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(OPENER), str(tmp_path), start, str(i)],
                              env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
    from langgraph_kgmem.persistence import open_persistence

    _, store = open_persistence(tmp_path)
    assert {item.key for item in store.search(("opened",), limit=20)} == {str(i) for i in range(8)}


@pytest.mark.integration
def test_eight_processes_memorising_into_one_postgres_kg_lose_no_update(new_database):
    uri = new_database()
    with KnowledgeGraph.open(uri, name="shared", embeddings="hash") as kg:
        kg.add_documents(SAMPLE_DOCS, model="offline")
    per = int(os.environ.get("KGMEM_TEST_REMINDRAG_PER_PROCESS", "6"))
    outs = _run_workers(uri, "remindrag", [_questions(per) for _ in range(8)])
    written = sum(o["written"] for o in outs)
    with KnowledgeGraph.open(uri, name="shared", embeddings="hash") as kg:
        _, store = kg.persistence()
        counts = EdgeMemory(store, "shared", 1).update_counts()
    assert written > 0 and sum(counts.values()) == written


def test_memory_lock_is_reentrant_and_serialises_threads():
    import threading

    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.memory.locks import memory_lock

    store, inside, peak = InMemoryStore(), [0], [0]
    together = threading.Barrier(6)

    def work():
        together.wait()   # all six ask for the lock at once
        with memory_lock(store, "k"):
            with memory_lock(store, "k"):   # re-entry by the holder does not deadlock
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
                time.sleep(0.05)
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1
    RecordMemory(store, "x", "trajectories")  # the store is still usable
