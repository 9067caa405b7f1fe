"""The router's run state, its output and the one decision its model makes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from langgraph_kgmem.graphs.common import BaseState, ModelText

MAX_METHOD_CHARS = 40


class RouteDecision(BaseModel):
    """Which method answers the question. Pick exactly one name from the list of methods you were
    shown; give a one-sentence reason."""

    method: str = Field(max_length=MAX_METHOD_CHARS,
                        description="the name of the method to run, exactly as listed (e.g. catrag)")
    reason: ModelText = Field("", description="one sentence: why this method suits the question")


class RouterState(BaseState, total=False):
    """The router's working state: the route (what was chosen, why, the alternatives), the methods
    still to try, the runs made so far and the best result yet."""
    run_id: str
    route: dict[str, Any]                 # see RouterOutput
    plan: list[str]                       # methods still to run, in order (the escalation ladder)
    tried: list[dict[str, Any]]           # {method, confidence, calls, seconds, offline}
    result: dict[str, Any]                # the best run's own output (its method's output keys)
    best: str                             # the method whose result is ``result``
    rankings: dict[str, list[str]]        # each run's passage ids, best first (cover.passage_ids)


class RouterOutput(BaseState, total=False):  # answer, evidence, usage, method ("router"), model + these
    """What a router run returns besides the common keys (the chosen method's answer, evidence and
    usage, ``method`` = ``"router"``): ``route`` — ``method`` (the method whose answer this is),
    ``why``, ``form`` and ``signals``, ``holds`` (what the KG holds), ``alternatives`` (every method
    considered, with its value and expected LLM calls), ``tried`` (each run: confidence, calls,
    seconds), ``escalated``, ``decider`` (``rules`` / ``model`` / ``fallback``), ``memory`` (what the
    router knew of this question), ``unavailable``, ``budget``, ``routing_ms`` (the decision, the
    store read included), ``learning_ms`` (writing the outcome and the router's run record: one store
    batch), ``overhead_ms`` (both: all the router adds to the method's run), ``routing_cpu_ms`` and
    ``overhead_cpu_ms`` (the same, as this thread's CPU time: without the waits of a loaded machine); ``run_id`` (what
    feedback on this run names); ``result`` (the chosen method's other output keys); ``passages``
    (the router's passage ranking, ``[{"id", "by"}]``: the answering method's ranking with the places
    after ``cover_keep`` up to ``cover_top`` completed by question coverage over every run's
    ranking, :mod:`~langgraph_kgmem.graphs.router.cover`; empty when no run ranked a passage)."""
    run_id: str
    passages: list[dict[str, Any]]
    route: dict[str, Any]
    result: dict[str, Any]
