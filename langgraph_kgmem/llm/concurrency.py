"""Independent model calls of one node run side by side in threads, the run's context carried along."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def run_concurrently(calls: Sequence[Callable[[], T]], max_workers: int) -> list[T]:
    """Run independent LLM calls (``decide``/``generate`` closures) in threads; results in input order.

    LLM calls wait on the network, so a node that needs several independent ones (CatRAG's
    per-seed scores) pays for the slowest instead of the sum. The run's context (callbacks, the
    current decision) carries into the threads. ``max_workers <= 1`` runs them one after another.
    How many calls an endpoint takes at once is bounded separately, per endpoint
    (:func:`~langgraph_kgmem.llm.endpoints.configure_model` with ``max_in_flight``).
    """
    if max_workers <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    from langchain_core.runnables.config import ContextThreadPoolExecutor

    with ContextThreadPoolExecutor(max_workers=min(max_workers, len(calls))) as pool:
        futures = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]
