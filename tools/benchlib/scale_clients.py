"""Concurrent question clients for ``tools/method_scale.py``: methods' latency on one KG.

A :class:`QueryWorker` is what a LangGraph server's query worker is: a new process (``spawn``)
that opens the KG (``KnowledgeGraph.open``: embedded directory or ``postgresql://`` URI) and
answers. Each job it is given names a method and one list of questions per caller: the worker
forgets the KG's PPR snapshots, compiles the method's graph anew over the KG's own store, and the
callers (threads sharing the KG and the compiled graph, as a server serves concurrent requests;
one process holds an embedded KG directory, so threads are the way both backends compare) start
at the same moment (a barrier) and ask their lists in turn.

Each caller's first question is its ``first`` (on a method's first job in the worker its caches
are cold, as after a worker starts; later jobs of the same method reuse what the method keeps per
KG version), the rest are steady; steady latencies of all callers are pooled for p50 and p95.
On PostgreSQL the worker also counts the statements each steady question sends from its caller's
thread (``psycopg.Cursor.execute``, as ``tests/test_read_round_trips.py`` counts them): each one
waits for the server's turn on a loaded machine, so their count explains a latency the load blurs.
The KG's opening is timed apart (``open_s``): a per-process cost, not a question's. ``dense`` is
the backend's own vector search (``kg.nearest`` over the passages, top 5) and the methods'
offline answer over them; every other method is its registered graph with the offline decider,
so every figure is the methods' and backends' own work.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import statistics
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

RESULT_TIMEOUT_S = 3600.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear between ranks) of ``values``."""
    if not values:
        raise ValueError("no values")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def asker(kg: Any, store: Any, method: str) -> Callable[[str], Any]:
    """A function answering one question with ``method`` over ``kg`` (offline decider)."""
    if method == "dense":
        from langgraph_kgmem.graphs.answering import offline_answer
        from langgraph_kgmem.graphs.common import evidence_item

        def dense(q: str) -> Any:
            hits = kg.nearest(q, k=5, kinds=("chunk",))
            return offline_answer(q, [evidence_item(kg, n.id) for n, _ in hits])

        return dense
    from langgraph_kgmem.graphs.registry import registered

    reg = registered()[method]
    app = reg.factory(kg, model="offline", store=store, **dict(reg.preset)).compile(store=store)
    return lambda q: app.invoke({"question": q})


_SENT = threading.local()   # statements this thread has sent to PostgreSQL (count_statements)


def count_statements() -> None:
    """Count every statement psycopg sends, per sending thread (:func:`sent`); once a process."""
    import psycopg

    original = psycopg.Cursor.execute
    if getattr(original, "counted", False):
        return

    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        _SENT.n = getattr(_SENT, "n", 0) + 1
        return original(self, *args, **kwargs)

    execute.counted = True   # type: ignore[attr-defined]
    psycopg.Cursor.execute = execute   # type: ignore[method-assign]


def sent() -> int:
    """Statements this thread has sent since :func:`count_statements` (0 without it)."""
    return getattr(_SENT, "n", 0)


def _caller(ask: Callable[[str], Any], questions: Sequence[str], barrier: threading.Barrier, out: list,
            errors: list, statements: list) -> None:
    try:
        barrier.wait()
        times, counts = [], []
        for q in questions:
            t, n = time.perf_counter(), sent()
            ask(q)
            times.append((time.perf_counter() - t) * 1000)
            counts.append(sent() - n)
        out.append(times)
        statements.append(counts)
    except BaseException as exc:   # the job reports it
        errors.append(f"{type(exc).__name__}: {exc}")
        barrier.abort()


def summary(times: list[list[float]], statements: list[list[int]] | None = None) -> dict[str, Any]:
    """Callers' latencies (ms, first question first) -> ``first_ms`` (median of the firsts),
    ``steady_p50_ms``, ``steady_p95_ms`` (all callers' later questions pooled), ``n_steady``,
    ``first_over_steady``; with ``statements`` (each question's, in the same shape) also
    ``steady_statements`` (their median over the steady questions)."""
    firsts = [t[0] for t in times]
    steady = [x for t in times for x in t[1:]]
    p50 = percentile(steady, 50)
    out = {"first_ms": round(statistics.median(firsts), 1), "steady_p50_ms": round(p50, 1),
           "steady_p95_ms": round(percentile(steady, 95), 1), "n_steady": len(steady),
           "first_over_steady": round(statistics.median(firsts) / p50, 2) if p50 else None}
    if statements is not None:
        out["steady_statements"] = statistics.median([n for c in statements for n in c[1:]])
    return out


def _job(kg: Any, store: Any, method: str, questions: list[list[str]]) -> dict[str, Any]:
    kg.drop_snapshots()
    t0 = time.perf_counter()
    ask = asker(kg, store, method)     # building the graph: a served graph's start-up work
    build_ms = round((time.perf_counter() - t0) * 1000, 1)
    gate = threading.Barrier(len(questions))
    out: list[list[float]] = []
    errors: list[str] = []
    statements: list[list[int]] = []
    threads = [threading.Thread(target=_caller, args=(ask, qs, gate, out, errors, statements)) for qs in questions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(questions)} callers failed, the first: {errors[0]}")
    return {"build_ms": build_ms, **summary(out, statements)}


def serve(target: str, name: str, embeddings: str, jobs: Any, results: Any) -> None:
    """The worker process: open the KG, put ``{"open_s"}``, then for each ``(method, questions)``
    taken from ``jobs`` put its :func:`summary` (or ``{"error"}``) until ``None`` comes."""
    try:
        from langgraph_kgmem import KnowledgeGraph
        from langgraph_kgmem.llm import count_tokens

        count_tokens("load the token encoder before any timing")
        if target.startswith("postgres"):
            count_statements()
        t0 = time.perf_counter()
        kg = KnowledgeGraph.open(target, name=name, embeddings=embeddings, create=False)
        results.put({"open_s": round(time.perf_counter() - t0, 2)})
    except BaseException as exc:   # reported to the parent, which raises it
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        return
    try:
        _, store = kg.persistence()
        while (job := jobs.get()) is not None:
            try:
                results.put(_job(kg, store, *job))
            except Exception as exc:   # reported to the parent, which raises it
                results.put({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        kg.close()


class QueryWorker:
    """A query worker process on the KG at ``target`` (see the module docstring)::

        with QueryWorker(uri, "scale", "hash") as w:
            row = w.ask("catrag", [["q1", "q2", "q3"], ["q4", "q5", "q6"]])   # two callers
    """

    def __init__(self, target: str, name: str, embeddings: str) -> None:
        ctx = mp.get_context("spawn")
        self.target = target
        self._jobs, self._results = ctx.Queue(), ctx.Queue()
        self._proc = ctx.Process(target=serve, args=(target, name, embeddings, self._jobs, self._results))
        self._proc.start()
        self.open_s = float(self._get("opening the KG")["open_s"])

    def _get(self, what: str) -> dict[str, Any]:
        try:
            got = self._results.get(timeout=RESULT_TIMEOUT_S)
        except queue_mod.Empty as exc:
            raise RuntimeError(f"{self.target}: no answer in {RESULT_TIMEOUT_S:.0f} s while {what}") from exc
        if "error" in got:
            raise RuntimeError(f"{self.target}: {what}: {got['error']}")
        return got

    def ask(self, method: str, questions: list[list[str]]) -> dict[str, Any]:
        """``len(questions)`` concurrent callers of ``method``, each asking its list (the first its
        cold question); returns :func:`summary`.

        Raises:
            ValueError: a caller with fewer than two questions.
            RuntimeError: the worker failed (its error in the message)."""
        if not questions or any(len(qs) < 2 for qs in questions):
            raise ValueError("every caller needs a first question and at least one steady question")
        self._jobs.put((method, questions))
        return self._get(f"running {method}")

    def close(self) -> None:
        """Stop the worker (it closes its KG)."""
        if self._proc.is_alive():
            self._jobs.put(None)
            self._proc.join(timeout=120)
        if self._proc.is_alive():
            self._proc.kill()

    def __enter__(self) -> "QueryWorker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
