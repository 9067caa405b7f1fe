"""Model resolution: a provider string, ``None`` or a runnable turned into the chat model a run calls.

- :func:`resolve_model` turns what a user passes (a chat model or any runnable taking messages, a
  provider string, ``None`` for ``$KGMEM_MODEL``, or ``"offline"``) into a model, once per string.
- :func:`with_retry_policy` puts a model under a :class:`~langgraph.types.RetryPolicy`
  (:class:`~langgraph_kgmem.llm.retry.RetryingModel`); :func:`unwrap` takes it out again.
- :func:`resolve_run_model` is the model of one run: the run context's ``model`` when it names
  one, resolved and wrapped once per model (every node of the run gets the same object), else
  the factory's.
- :func:`through_wrappers` / :func:`bind_tools` reach beneath ``with_retry`` / ``with_fallbacks``
  wrappers, which do not offer ``with_structured_output`` or ``bind_tools`` themselves.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Literal, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy

from langgraph_kgmem.errors import ConfigurationError, describe_error
from langgraph_kgmem.llm.retry import RetryingModel, checked_policy

OFFLINE: Literal["offline"] = "offline"
ModelLike = Runnable | str | None

# one client per provider string, not one per node of every run
_RESOLVED: dict[str, BaseChatModel] = {}
# the wrapped model of each model a run context named lately: (chosen, policy, wrapped) by key
_RUN_MODELS: dict[tuple[Any, int], tuple[Any, Any, Any]] = {}
_RUN_MODELS_KEPT = 16
_lock = threading.Lock()


def is_offline(model: Any) -> bool:
    """Whether ``model`` is the ``"offline"`` marker (heuristic decisions, no LLM call)."""
    return model == OFFLINE


def resolve_model(model: ModelLike, *, required: bool = True) -> Runnable | Literal["offline"] | None:
    """Turn ``model`` into a chat model, the ``"offline"`` marker, or ``None``.

    Any runnable that takes messages counts as a model: a chat model, or one wrapped by
    ``with_retry`` / ``with_fallbacks`` / ``bind``, or a configurable ``init_chat_model(...)``.
    ``None`` reads ``$KGMEM_MODEL`` (a provider string such as ``openai:gpt-4o-mini``; an
    OpenAI-compatible server is reached with ``OPENAI_BASE_URL``). With nothing configured and
    ``required`` set, a :class:`ConfigurationError` names what to set.
    """
    if isinstance(model, (Runnable, RetryingModel)):
        return model
    if model is None:
        model = os.environ.get("KGMEM_MODEL")
        if not model:
            if not required:
                return None
            raise ConfigurationError(
                "No chat model configured. Pass model=... (any LangChain chat model), "
                "set KGMEM_MODEL (e.g. 'openai:gpt-4o-mini', with OPENAI_API_KEY; add OPENAI_BASE_URL "
                "for an OpenAI-compatible server), or use model='offline' to run without an LLM."
            )
    if model == OFFLINE:
        return OFFLINE
    if not isinstance(model, str):
        raise ConfigurationError(
            f"model must be a chat model (any LangChain runnable that takes messages), a provider string "
            f"such as 'openai:gpt-4o-mini', or 'offline'; got {type(model).__name__}")
    cached = _RESOLVED.get(model)
    if cached is not None:
        return cached
    from langchain.chat_models import init_chat_model

    try:
        _RESOLVED[model] = init_chat_model(model)
        return _RESOLVED[model]
    except Exception as exc:
        raise ConfigurationError(
            f"Could not create chat model {model!r}: {describe_error(exc)}. Set KGMEM_MODEL to a provider string "
            "such as 'openai:gpt-4o-mini' and the provider's key (OPENAI_API_KEY), or use 'offline'."
        ) from exc


def with_retry_policy(model: Any, policy: RetryPolicy | None) -> Any:
    """``model`` whose calls follow ``policy`` (``None``: the default policy of
    :mod:`~langgraph_kgmem.llm.retry`); the offline marker and ``None`` stay as they are."""
    if model is None or is_offline(model):
        return model
    if isinstance(model, RetryingModel):
        model = model.model
    return RetryingModel(model, checked_policy(policy))


def unwrap(model: Any) -> tuple[Any, RetryPolicy | None]:
    """``(model, policy)`` of a model put under a retry policy; ``(model, None)`` for any other."""
    return (model.model, model.policy) if isinstance(model, RetryingModel) else (model, None)


def context_model(context: Any) -> Any:
    """The model a run's context names (``context={"model": m}``, a dict or an object with a
    ``model`` attribute), or ``None``."""
    if context is None:
        return None
    return context.get("model") if isinstance(context, dict) else getattr(context, "model", None)


def resolve_run_model(default: Any, context: Any = None, retry_policy: RetryPolicy | None = None) -> Any:
    """The chat model of one run: the run context's ``model`` (see :func:`context_model`) when it
    names one, else ``default`` (the factory's model, resolved when the graph was built).

    The context's model is resolved and put under ``retry_policy`` (else ``default``'s policy)
    once: every node of the run, and every later run naming the same model object, gets the same
    wrapped model back, so endpoint records and tool bindings keyed by it are shared too.
    """
    chosen = context_model(context)
    if chosen is None:
        return default
    policy = retry_policy or unwrap(default)[1]
    key = (chosen if isinstance(chosen, str) else id(chosen), id(policy))
    with _lock:
        hit = _RUN_MODELS.get(key)
    if hit is not None and (hit[0] == chosen if isinstance(chosen, str) else hit[0] is chosen) and hit[1] is policy:
        return hit[2]
    wrapped = with_retry_policy(resolve_model(chosen), policy)
    with _lock:
        if len(_RUN_MODELS) >= _RUN_MODELS_KEPT:   # models swapped per run: keep the latest few
            _RUN_MODELS.pop(next(iter(_RUN_MODELS)))
        _RUN_MODELS[key] = (chosen, policy, wrapped)
    return wrapped


def innermost_model(model: Any) -> Any:
    """The chat model under retry / fallback / binding wrappers (the first one, for fallbacks)."""
    from langchain_core.runnables.fallbacks import RunnableWithFallbacks

    for _ in range(16):
        if isinstance(model, RetryingModel):
            model = model.model
        elif isinstance(model, RunnableWithFallbacks):
            model = model.runnable
        elif hasattr(model, "bound") and isinstance(model.bound, Runnable):
            model = model.bound
        else:
            break
    return model


def model_label(model: Any) -> str:
    """A short name for ``model`` in run state and reports: its model name, else its class."""
    if is_offline(model):
        return "offline (no LLM: heuristic decisions, extractive answers)"
    model = innermost_model(model)
    label = getattr(model, "model_name", None) or getattr(model, "model", None)
    return label if isinstance(label, str) and label else type(model).__name__


def through_wrappers(model: Any, make: Callable[[Any], Any]) -> Any:
    """``make(model)`` (``with_structured_output``, ``bind_tools``) applied beneath the wrappers that
    do not offer those methods (``with_retry``, ``with_fallbacks``), which are put back around
    the result. Raises ``AttributeError`` / ``NotImplementedError`` when the model underneath
    has no such method."""
    from langchain_core.runnables.fallbacks import RunnableWithFallbacks
    from langchain_core.runnables.retry import RunnableRetry

    if isinstance(model, RunnableRetry):
        return model.model_copy(update={"bound": through_wrappers(model.bound, make)})
    if isinstance(model, RunnableWithFallbacks):
        return model.model_copy(update={"runnable": through_wrappers(model.runnable, make),
                                        "fallbacks": [through_wrappers(f, make) for f in model.fallbacks]})
    return make(model)


def bind_tools(model: Any, tools: Sequence[Any], **kwargs: Any) -> Any:
    """``model`` with ``tools`` bound beneath its retry / fallback wrappers, its retry policy kept.
    Raises ``AttributeError`` / ``NotImplementedError`` when the model underneath cannot call tools."""
    inner, policy = unwrap(model)
    bound = through_wrappers(inner, lambda m: m.bind_tools(list(tools), **kwargs))
    return with_retry_policy(bound, policy) if policy is not None else bound
