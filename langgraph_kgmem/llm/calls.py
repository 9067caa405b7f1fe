"""Making a model call: under its retry policy, in an endpoint's in-flight slot, counted, sync or async.

- :class:`DecisionRequest` / :data:`current_decision`: the decision being asked while a call runs
  (scripted and oracle models in tests and benchmarks read it; real models ignore it).
- :func:`invoke_with_policy` / :func:`ainvoke_with_policy`: one call repeated per the model's
  :class:`~langgraph.types.RetryPolicy` on the errors it retries; every attempt is counted in the
  enclosing :func:`counting_attempts` box.
- :func:`drive` / :func:`adrive`: run a decision written once as a generator of :class:`ModelCall`
  steps, with blocking calls or with ``ainvoke``; only the driver knows which.
"""

from __future__ import annotations

import asyncio
import random
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generator, Iterator, NoReturn, Sequence, TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.types import RetryPolicy
from pydantic import BaseModel

from langgraph_kgmem.errors import describe_error
from langgraph_kgmem.llm.endpoints import ain_flight_slot, feature_refusal, in_flight_slot
from langgraph_kgmem.llm.prompts import DATA_NOTE
from langgraph_kgmem.llm.retry import policy_retries

R = TypeVar("R")


@dataclass
class DecisionRequest:
    """What is being asked while a model call runs: the step, the decision's schema (``None`` for
    free text), the caller's structured context and which attempt this is."""

    step: str
    schema: type[BaseModel] | None
    context: dict[str, Any]
    attempt: int = 0


current_decision: ContextVar[DecisionRequest | None] = ContextVar("kgmem_current_decision", default=None)
_attempts: ContextVar[list[int] | None] = ContextVar("kgmem_call_attempts", default=None)


def as_messages(prompt: str | Sequence[BaseMessage]) -> list[BaseMessage]:
    """A prompt as chat messages, opened by a system message holding the fence rule
    (:data:`~langgraph_kgmem.llm.prompts.DATA_NOTE`): a string becomes that system message and one
    human message, with the note's own line taken out of the human text; a message list that opens
    with no system message gets it in front, one that has its own is sent as it is.

    The fence rule holds for every call, so it is sent where models weigh standing rules above the
    user's turn, once; and a call that sends a system message of its own gets no default one from
    the model's chat template (some templates add a persona to every call that sends none). The
    system message is this constant only: no document or user text ever reaches it."""
    if isinstance(prompt, str):
        return [SystemMessage(DATA_NOTE), HumanMessage(without_data_note(prompt))]
    msgs = list(prompt)
    if msgs and isinstance(msgs[0], SystemMessage):
        return msgs
    return [SystemMessage(DATA_NOTE), *(m.model_copy(update={"content": without_data_note(m.content)})
                                        if isinstance(m, HumanMessage) and isinstance(m.content, str)
                                        else m for m in msgs)]


def without_data_note(text: str) -> str:
    """``text`` less the lines that are the data note alone (the system message carries it; fenced
    text cannot hold the note, whose ``<data>`` a fence writes as ``&lt;data&gt;``)."""
    if DATA_NOTE not in text:
        return text
    return "\n".join(line for line in text.split("\n") if line.strip() != DATA_NOTE).strip("\n")


def is_model_failure(exc: BaseException) -> bool:
    """Whether an exception raised by a model call is the model's failure (provider error, timeout,
    bad request), to be retried and then fallen back from. LangGraph's control flow (interrupts)
    and assertion failures (a test script run dry, a broken invariant) are not: they propagate."""
    from langgraph.errors import GraphBubbleUp

    return isinstance(exc, Exception) and not isinstance(exc, (GraphBubbleUp, AssertionError))


@contextmanager
def counting_attempts() -> Iterator[list[int]]:
    """A box counting the calls :func:`invoke_with_policy` makes inside (retries included)."""
    box = [0]
    token = _attempts.set(box)
    try:
        yield box
    finally:
        _attempts.reset(token)


def _retry_wait(policy: RetryPolicy | None, exc: Exception, attempt: int, interval: float) -> float:
    """Seconds to wait before attempt ``attempt + 1`` after ``exc``; re-raises ``exc`` when the
    policy does not retry it (or its attempts are spent)."""
    attempts = policy.max_attempts if policy is not None else 1
    if (attempt >= attempts or not is_model_failure(exc) or feature_refusal(exc)
            or not policy_retries(policy, exc)):  # type: ignore[arg-type]
        raise exc
    return min(interval, policy.max_interval) + (random.uniform(0, 1) if policy.jitter else 0.0)  # type: ignore[union-attr]


def invoke_with_policy(runnable: Any, messages: list[BaseMessage], policy: RetryPolicy | None) -> Any:
    """``runnable.invoke(messages)``, repeated per ``policy`` on the errors it retries (every
    attempt is counted in the enclosing :func:`counting_attempts` box)."""
    box = _attempts.get()
    interval = policy.initial_interval if policy is not None else 0.0
    for attempt in range(1, (policy.max_attempts if policy is not None else 1) + 1):
        if box is not None:
            box[0] += 1
        try:
            with in_flight_slot(runnable):
                return runnable.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - re-raised unless the policy retries it
            wait = _retry_wait(policy, exc, attempt, interval)
        if interval > 0:
            time.sleep(wait)
        interval *= policy.backoff_factor  # type: ignore[union-attr]
    raise AssertionError("unreachable")  # pragma: no cover


async def ainvoke_with_policy(runnable: Any, messages: list[BaseMessage], policy: RetryPolicy | None) -> Any:
    """:func:`invoke_with_policy` with ``ainvoke`` and ``asyncio.sleep``: the event loop is never blocked."""
    box = _attempts.get()
    interval = policy.initial_interval if policy is not None else 0.0
    for attempt in range(1, (policy.max_attempts if policy is not None else 1) + 1):
        if box is not None:
            box[0] += 1
        try:
            async with ain_flight_slot(runnable):
                return await runnable.ainvoke(messages)
        except Exception as exc:  # noqa: BLE001 - re-raised unless the policy retries it
            wait = _retry_wait(policy, exc, attempt, interval)
        if interval > 0:
            await asyncio.sleep(wait)
        interval *= policy.backoff_factor  # type: ignore[union-attr]
    raise AssertionError("unreachable")  # pragma: no cover


class ModelCallFailed(Exception):
    """The model's own call raised (its cause): retried, then the decision falls back."""


def as_call_failure(exc: Exception) -> NoReturn:
    """Re-raise a failed model call: the model's own failures as :class:`ModelCallFailed` (retried,
    then fallen back from), anything else (interrupts, this package's bugs) as it is."""
    if not is_model_failure(exc):
        raise exc
    raise ModelCallFailed(f"model call failed: {describe_error(exc)}") from exc


@dataclass
class ModelCall:
    """A model call that a decision's steps (a generator, see :func:`drive`) ask their driver to make."""

    runnable: Any
    messages: list[BaseMessage]
    policy: RetryPolicy | None = None


def drive(steps: Generator[Any, Any, R], perform: Callable[[Any], Any] | None = None) -> R:
    """Run a generator of steps to its return value: each request it yields is performed (default:
    a :class:`ModelCall` made with its retry policy) and the result sent back, or the exception
    thrown in at the ``yield``. One description of a decision serves both
    :func:`~langgraph_kgmem.llm.decisions.decide` and :func:`~langgraph_kgmem.llm.decisions.adecide`;
    only the driver knows whether calls block."""
    perform = perform or _perform_call
    try:
        request = next(steps)
        while True:
            try:
                result = perform(request)
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which re-raise what they do not handle
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as stop:
        return stop.value
    finally:
        steps.close()   # cancelled or interrupted mid-call: its context blocks unwind here, in this context


async def adrive(steps: Generator[Any, Any, R], perform: Callable[[Any], Awaitable[Any]] | None = None) -> R:
    """:func:`drive` with an async ``perform`` (default: the :class:`ModelCall` made with ``ainvoke``)."""
    perform = perform or _aperform_call
    try:
        request = next(steps)
        while True:
            try:
                result = await perform(request)
            except Exception as exc:  # noqa: BLE001 - handed to the steps, which re-raise what they do not handle
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as stop:
        return stop.value
    finally:
        steps.close()   # cancelled or interrupted mid-call: its context blocks unwind here, in this context


def _perform_call(call: ModelCall) -> Any:
    try:
        return invoke_with_policy(call.runnable, call.messages, call.policy)
    except Exception as exc:  # noqa: BLE001 - sorted by as_call_failure
        as_call_failure(exc)


async def _aperform_call(call: ModelCall) -> Any:
    try:
        return await ainvoke_with_policy(call.runnable, call.messages, call.policy)
    except Exception as exc:  # noqa: BLE001 - sorted by as_call_failure
        as_call_failure(exc)
