"""Tracing helpers: clear run names, run metadata, spans for non-LLM hot paths, no vectors in traces.

Everything here works through LangChain callbacks, so the same code feeds LangSmith (set
``LANGSMITH_TRACING=true``, ``LANGSMITH_API_KEY``, ``LANGSMITH_PROJECT``), a local
``BaseTracer``/``BaseCallbackHandler`` in tests, or nothing at all (then it costs next to nothing).

- :func:`run_name`, :func:`run_metadata`, :func:`run_tags`: what a method run is called and carries
  (``kgmem.<method>``; metadata ``method``, ``kg_name``, ``kg_version``, ``model``).
- :func:`traced_config` / :func:`with_tracing`: a ``RunnableConfig`` (or a compiled graph bound to one)
  with that name, metadata and tags; node runs keep their own verb_object names and inherit the metadata.
- :func:`traced_span`: a context manager that records a block (PPR, memory replay, retrieval) as a
  child run of whatever node is running, with scrubbed inputs/outputs; :func:`traced` does the same
  for a function (``KnowledgeGraph.ppr``/``nearest``/``nearest_facts`` carry it: spans ``kg.*``).
- :func:`scrub`: replaces embedding vectors and other large payloads by short placeholders and
  redacts secrets; :func:`redact` only redacts; :func:`langsmith_tracer` is a LangSmith tracer whose
  client scrubs every run's inputs and outputs and redacts everything else it uploads (errors,
  metadata, events).
"""

from __future__ import annotations

import functools
import inspect
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, TypeVar

from langchain_core.callbacks.manager import CallbackManager
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config

# the redaction lives below every layer that keeps text (model, storage, tracing); tracing re-exports it
from langgraph_kgmem.redaction import REDACTED, holds_secret, redact, redact_secrets



class KnowledgeGraph(Protocol):
    """What run metadata reads of a KG (a structural type: the KG layer itself uses this module's
    :func:`traced`, so importing the KG class here would make the two modules import each other)."""

    name: str

    @property
    def version(self) -> int:
        """The KG's write version (recorded in a run's metadata)."""

F = TypeVar("F", bound=Callable[..., Any])
RUN_PREFIX = "kgmem"
MAX_LIST_ITEMS = 50
MAX_STRING_CHARS = 4000
VECTOR_MIN_LEN = 16


def run_name(method: str, step: str | None = None) -> str:
    """The run name of a method run (``kgmem.catrag``) or of one of its spans (``kgmem.catrag.run_ppr``)."""
    return f"{RUN_PREFIX}.{method}" + (f".{step}" if step else "")


def run_tags(method: str) -> list[str]:
    """The tags of a method's runs: ``kgmem`` and ``kgmem:<method>``."""
    return [RUN_PREFIX, f"{RUN_PREFIX}:{method}"]


def run_metadata(method: str, kg: "KnowledgeGraph | None" = None, *, model: Any = None,
                 usage: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """Metadata every run of a method carries (inherited by its node, LLM and span runs).

    ``usage`` (optional, e.g. of a finished run) is reduced to its counters; the full usage dict is in
    the run's outputs anyway.
    """
    meta: dict[str, Any] = {"method": method}
    if kg is not None:
        meta["kg_name"] = kg.name
        meta["kg_version"] = kg.version
    if model is not None:
        from langgraph_kgmem.llm import is_offline, model_label

        meta["model"] = "offline" if is_offline(model) else model_label(model)
    if usage:
        meta.update(usage_counters(usage))
    meta.update(extra)
    return meta


def usage_counters(usage: Mapping[str, Any]) -> dict[str, Any]:
    """The flat counters of a usage dict (``llm_calls``, ``prompt_tokens``, ``completion_tokens``)."""
    return {k: usage.get(k, 0) for k in ("llm_calls", "prompt_tokens", "completion_tokens")}


def traced_config(method: str, kg: "KnowledgeGraph | None" = None, *, model: Any = None,
                  config: RunnableConfig | None = None, **extra: Any) -> RunnableConfig:
    """A ``RunnableConfig`` naming and tagging a method run; merges into ``config`` if given.

    Example:
        app.invoke({"question": q}, config=traced_config("catrag", kg, model="offline"))
    """
    from langchain_core.runnables.config import merge_configs

    own: RunnableConfig = {"run_name": run_name(method), "tags": run_tags(method),
                           "metadata": run_metadata(method, kg, model=model, **extra)}
    return merge_configs(config, own) if config else own


def with_tracing(app: Any, method: str, kg: "KnowledgeGraph | None" = None, *, model: Any = None,
                 **extra: Any) -> Any:
    """``app`` (a compiled graph) bound to :func:`traced_config`; still a compiled graph."""
    return app.with_config(traced_config(method, kg, model=model, **extra))


# ------------------------------------------------------------------------------------ scrubbing


def _is_vector(value: Any) -> bool:
    if isinstance(value, (list, tuple)) and len(value) >= VECTOR_MIN_LEN:
        return all(isinstance(v, float) for v in value[:VECTOR_MIN_LEN])
    return False


def scrub(value: Any, _depth: int = 0) -> Any:
    """A trace-safe copy of ``value``: secrets redacted (values under secret-named keys, and keys,
    tokens and passwords inside strings), numpy arrays and float vectors become
    ``"<vector dim=N>"``, long lists and strings are cut, unknown objects become their ``repr``
    (cut and redacted)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None  # type: ignore[assignment]
    if np is not None and isinstance(value, np.ndarray):
        return f"<array shape={list(value.shape)} dtype={value.dtype}>" if value.ndim != 1 else f"<vector dim={value.shape[0]}>"
    if np is not None and isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        n = len(value)
        value = redact_secrets(value[:4 * MAX_STRING_CHARS])   # cut first: bounded regex work
        return value if n <= MAX_STRING_CHARS else value[:MAX_STRING_CHARS] + f"... <{n} chars>"
    if _depth > 8:
        return f"<{type(value).__name__}>"
    if isinstance(value, Mapping):
        items = list(value.items())
        out_map = {str(k): REDACTED if holds_secret(str(k), v) else scrub(v, _depth + 1)
                   for k, v in items[:MAX_LIST_ITEMS]}
        if len(items) > MAX_LIST_ITEMS:
            out_map["<more>"] = f"{len(items) - MAX_LIST_ITEMS} more keys"
        return out_map
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = list(value)
        if _is_vector(seq):
            return f"<vector dim={len(seq)}>"
        out = [scrub(v, _depth + 1) for v in seq[:MAX_LIST_ITEMS]]
        if len(seq) > MAX_LIST_ITEMS:
            out.append(f"<{len(seq) - MAX_LIST_ITEMS} more>")
        return out
    if hasattr(value, "model_dump"):
        try:
            return scrub(value.model_dump(), _depth + 1)
        except Exception:  # pragma: no cover - odd pydantic objects
            pass
    text = redact_secrets(repr(value)[:4000])
    return text if len(text) <= 200 else text[:200] + "..."


# the run fields besides inputs/outputs that a LangSmith client uploads and that can quote a secret:
# the error (a provider's 401 echoes the key), metadata and runtime in ``extra``, streamed events,
# the serialized model, tags and the run's name
_RUN_TEXT_FIELDS = ("error", "extra", "events", "serialized", "tags", "name")


def _redacted_fields(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: redact(v) if k in _RUN_TEXT_FIELDS and v is not None else v for k, v in fields.items()}


def langsmith_tracer(project_name: str | None = None, **client_kwargs: Any) -> Any:
    """A LangSmith tracer whose client redacts secrets from everything it uploads: inputs and
    outputs are scrubbed (:func:`scrub`: secrets, vectors, oversized values), and every other
    field a run carries (its error, metadata, events, serialized model, tags) goes through
    :func:`redact` on the way to ``create_run``/``update_run``.

    Needs ``LANGSMITH_API_KEY``; like any LangSmith client it talks to the LangSmith API in the
    background (server info, run uploads), so do not use it offline. Use it as a callback
    (``config={"callbacks": [langsmith_tracer("kgmem-dev")]}``) instead of ``LANGSMITH_TRACING=true``:
    the tracer that variable switches on uploads errors and metadata as they are.
    """
    from langchain_core.tracers import LangChainTracer
    from langsmith import Client

    class RedactingClient(Client):
        """A client that redacts a run's error and other text fields before they are queued."""

        def create_run(self, name: str, inputs: dict[str, Any], run_type: Any, **kwargs: Any) -> None:
            fields = _redacted_fields({"name": name, **kwargs})
            return super().create_run(fields.pop("name"), inputs, run_type, **fields)

        def update_run(self, run_id: Any, **kwargs: Any) -> None:
            return super().update_run(run_id, **_redacted_fields(kwargs))

    # metadata also through the client's own hook: it reaches the metadata the client adds itself
    # (LANGSMITH_*/LANGCHAIN_* environment values) after create_run has redacted the rest
    client_kwargs.setdefault("hide_metadata", redact)
    client = RedactingClient(hide_inputs=scrub, hide_outputs=scrub, **client_kwargs)
    return LangChainTracer(project_name=project_name, client=client)


# ------------------------------------------------------------------------------------ spans


class Span:
    """A running span: add outputs with :meth:`set_outputs` (scrubbed when the span ends)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self.outputs: dict[str, Any] = {}

    @property
    def recording(self) -> bool:
        """False when nobody listens (no tracer, no callback): callers can skip building outputs."""
        return self._manager is not None

    def set_outputs(self, **outputs: Any) -> None:
        """Add ``outputs`` to the span's outputs (scrubbed when the span ends)."""
        self.outputs.update(outputs)


def _current_config() -> RunnableConfig | None:
    # the config of the running node/tool/runnable (LangGraph's get_config reads the same variable)
    from langchain_core.runnables.config import var_child_runnable_config

    return var_child_runnable_config.get()


def _has_handlers(callbacks: Any) -> bool:
    if not callbacks:
        return False
    if isinstance(callbacks, list):
        return True
    return bool(getattr(callbacks, "handlers", None))


_TRACING_ENV = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING")


def _env_tracing() -> bool:
    # a cheap check of the variables that switch LangSmith on (langsmith's own check costs far more);
    # inside a run, an active LangSmith tracer is already among the config's callbacks
    return any(os.environ.get(k, "").strip().lower() == "true" for k in _TRACING_ENV)


@contextmanager
def traced_span(name: str, *, inputs: Mapping[str, Any] | None = None, tags: Sequence[str] = (),
                **metadata: Any) -> Iterator[Span]:
    """Record the block as a child run named ``name`` of the current run (node, tool, graph).

    Works inside a graph node, a tool, or outside any run (then it only reports to tracers switched
    on by environment, e.g. LangSmith). With nobody listening it is a no-op costing a few
    microseconds. Inputs and outputs go through :func:`scrub`, so vectors never reach a trace.
    Exceptions are recorded on the span and re-raised.

    Example:
        with traced_span("run_ppr", inputs={"seeds": len(seeds)}, method="catrag") as span:
            ranked = kg.ppr(seeds)
            span.set_outputs(top=[i for i, _ in ranked[:5]])
    """
    config = _current_config()
    if not (config is not None and _has_handlers(config.get("callbacks"))) and not _env_tracing():
        yield Span(None)
        return
    config = ensure_config(config)
    manager = CallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"),
        inheritable_tags=config.get("tags"),
        inheritable_metadata=config.get("metadata"),
        local_tags=list(tags),
        local_metadata=metadata,
    )
    if not manager.handlers:
        yield Span(None)
        return
    run = manager.on_chain_start(None, scrub(dict(inputs or {})), name=name)
    span = Span(run)
    try:
        yield span
    except BaseException as exc:
        run.on_chain_error(exc)
        raise
    run.on_chain_end(scrub(span.outputs))


def _summarize(value: Any, limit: int = 10) -> Any:
    """Hits such as ``[(Node, 0.93), ...]`` or ``[("ent-1", 0.2), ...]`` as ``[["ent-1", 0.93], ...]``."""
    if isinstance(value, list):
        out: list[Any] = []
        for item in value[:limit]:
            parts = item if isinstance(item, tuple) else (item,)
            out.append([getattr(p, "id", None) or (round(p, 6) if isinstance(p, float) else scrub(p)) for p in parts])
        return {"hits": out, "count": len(value)}
    return scrub(value)


def traced(name: str, **metadata: Any) -> Callable[[F], F]:
    """Decorator: each call made inside a traced run is a :func:`traced_span` (arguments scrubbed,
    results summarised); calls outside any run cost one context-variable read.

    ``KnowledgeGraph.ppr``, ``nearest`` and ``nearest_facts`` carry it, so PPR and retrieval appear as
    spans under the node that called them.
    """

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            config = _current_config()
            if config is None or not _has_handlers(config.get("callbacks")):
                return fn(*args, **kwargs)  # only inside a traced run: never a root run of its own
            bound = sig.bind_partial(*args, **kwargs)
            inputs = {k: v for k, v in bound.arguments.items() if k != "self"}
            with traced_span(name, inputs=inputs, **metadata) as span:
                result = fn(*args, **kwargs)
                if span.recording:
                    span.set_outputs(result=_summarize(result))
                return result

        return inner  # type: ignore[return-value]

    return wrap


__all__ = ["run_name", "traced_config", "with_tracing", "traced_span", "traced", "Span", "scrub", "langsmith_tracer"]
