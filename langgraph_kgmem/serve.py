"""The graphs LangGraph Server (``langgraph dev``, Studio, a deployment) serves, configured from environment.

``langgraph.json`` points at ``graphs/served.py:<method>``; each of those is ``graph_factory(method)``:
a factory LangGraph Server calls with the run's config. The first call in a process opens the KG
(once, lazily: nothing happens at import) and compiles the method **without** checkpointer or
store — the server brings its own, and methods reach the server's store through
``langgraph.config.get_store()``. Later calls reuse the compiled graph.

Environment:

- ``KGMEM_KG_DIR`` (required): the KG directory (``kgmem ingest FILE --kg DIR`` builds one), or a
  ``postgresql://`` URI of a database holding the KG (every worker and replica then shares it; a
  served graph sees other processes' writes without a restart).
- ``KGMEM_KG_NAME``: the KG's name (memory namespaces); default: the name stored in the KG
  (in a database: ``default``).
- ``KGMEM_MODEL``: chat model (``openai:gpt-4o-mini``...); unset means ``offline`` (no LLM), and
  the run's metadata (and the output's ``model``, for methods that report it) say so. A run's
  ``configurable.model`` (an assistant's setting in Studio) overrides it.
- ``KGMEM_EMBEDDINGS``: the embedding the KG was built with (``local`` default, ``hash``...).
- ``KGMEM_VECTOR_BACKEND``: ``chroma`` or ``memory``; default: whichever the directory holds.

Checkpoints: the server's checkpointer deserialises what its database holds; LangGraph's default
rebuilds any type a stored payload names (a planted checkpoint runs code). ``langgraph.json`` sets
``LANGGRAPH_STRICT_MSGPACK=true``, which limits the server to LangGraph's safe types and the
graphs' state types (the methods' states hold JSON values only); a served graph logs a warning
when the server runs without it (set it in the server's environment before it starts).

``langgraph dev`` (the in-memory runtime, upstream) keeps its threads, runs and store in
``./.langgraph_api/*.pckl`` and reads them with ``pickle.load`` when it starts, before any graph is
imported, whatever ``LANGGRAPH_STRICT_MSGPACK`` says: nothing a graph does can stop that, so a
served graph warns (:func:`dev_state_risks`) when anyone but this user could have written them.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import stat
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Awaitable, Callable

from langchain_core.runnables import RunnableConfig

from langgraph_kgmem.errors import ConfigurationError
from langgraph_kgmem.kg.backends import is_database

ENV_KG_DIR = "KGMEM_KG_DIR"
ENV_KG_NAME = "KGMEM_KG_NAME"
ENV_MODEL = "KGMEM_MODEL"
ENV_EMBEDDINGS = "KGMEM_EMBEDDINGS"
ENV_VECTOR_BACKEND = "KGMEM_VECTOR_BACKEND"

STRICT_CHECKPOINTS_ENV = "LANGGRAPH_STRICT_MSGPACK"
DEV_STATE_DIR = ".langgraph_api"   # where `langgraph dev`'s in-memory runtime pickles its state

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_opened: list[Any] = []  # KGs opened by this process, closed by close_served() or at exit


def _vector_backend() -> str | None:
    backend = os.environ.get(ENV_VECTOR_BACKEND) or None
    if backend not in (None, "chroma", "memory"):
        raise ConfigurationError(f"{ENV_VECTOR_BACKEND}={backend!r}: use 'chroma' or 'memory'")
    return backend


@lru_cache(maxsize=None)
def _open_kg(path: str, name: str | None, embeddings: str | None, backend: str | None) -> Any:
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph

    kg = KnowledgeGraph.open(path, name=name, embeddings=embeddings, vector_backend=backend,  # type: ignore[arg-type]
                             create=False)
    atexit.register(kg.close)
    _opened.append(kg)
    return kg


def served_kg() -> Any:
    """The KG named by the environment, opened once per process (and closed at exit)."""
    path = os.environ.get(ENV_KG_DIR)
    if not path:
        raise ConfigurationError(
            f"Set {ENV_KG_DIR} to a KG directory before starting the server (build one with "
            f"`kgmem ingest FILE --kg DIR`); optionally {ENV_KG_NAME}, {ENV_MODEL}, {ENV_EMBEDDINGS}.")
    backend = _vector_backend()
    if not is_database(path):   # a directory: one cache entry however it is spelled
        path = str(Path(path).expanduser().resolve())
    with _lock:
        return _open_kg(path, os.environ.get(ENV_KG_NAME) or None, os.environ.get(ENV_EMBEDDINGS) or None, backend)


def model_spec(config: RunnableConfig | None = None) -> str:
    """The model a served run uses: ``configurable.model`` of the run (e.g. set on an assistant in
    Studio), else ``$KGMEM_MODEL``, else ``"offline"``."""
    configurable = (config or {}).get("configurable") or {}
    spec = configurable.get("model")
    return spec if isinstance(spec, str) and spec else (os.environ.get(ENV_MODEL) or "offline")


def served_model(spec: str | None = None) -> Any:
    """``spec`` (default :func:`model_spec`) as a chat model, or ``"offline"``."""
    from langgraph_kgmem.llm import resolve_model

    return resolve_model(spec or model_spec())


def strict_checkpoints() -> bool:
    """Whether the server's checkpointer loads only allow-listed types (``LANGGRAPH_STRICT_MSGPACK``)."""
    return os.environ.get(STRICT_CHECKPOINTS_ENV, "").lower() in ("1", "true", "yes")


@lru_cache(maxsize=None)
def _compiled(method: str, kg_key: int, spec: str) -> Any:
    from langgraph_kgmem.graphs.registry import get_factory
    from langgraph_kgmem.tracing import with_tracing

    if not strict_checkpoints():
        # the server, not this package, builds the checkpointer: say how to make it strict
        logger.warning(
            "%s is not set: the server's checkpointer will rebuild any type a stored checkpoint names, so "
            "whoever can write its database can run code in this server. Set %s=true in the server's "
            "environment before it starts (langgraph.json's \"env\" does this for `langgraph dev` and "
            "`langgraph build`)", STRICT_CHECKPOINTS_ENV, STRICT_CHECKPOINTS_ENV)

    if "langgraph_runtime_inmem" in sys.modules and (risks := dev_state_risks()):
        logger.warning(
            "`langgraph dev` loaded its state folder with pickle.load when it started, before any graph: whoever "
            "can write it can run code in this server, and here %s. Stop the server, remove %s, and start it from a "
            "folder only you can write (docs/reliability.md, 'Served graphs and langgraph dev')",
            "; ".join(risks[:5]), DEV_STATE_DIR)
    factory, preset = get_factory(method)
    kg = served_kg()
    model = served_model(spec)
    app = factory(kg, model=model, **preset).compile(name=method)
    return with_tracing(app, method, kg, model=model)


def dev_state_risks(folder: str | Path | None = None) -> list[str]:
    """Why someone other than this process's user could have written the state that ``langgraph
    dev``'s in-memory runtime loads with ``pickle.load`` at start (``./.langgraph_api``, or
    ``folder``): the folder, what is in it, or the folder holding it (unless sticky) is a link,
    belongs to another user, or is writable by group or others. Empty when none of that holds
    (or there is no such folder)."""
    state = Path(folder) if folder is not None else Path.cwd() / DEV_STATE_DIR
    if not state.is_dir():
        return []
    risks = []
    for path in (state.parent, state, *sorted(state.iterdir())):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            risks.append(f"{path} is a symbolic link")
        elif st.st_uid != os.getuid():
            risks.append(f"{path} belongs to another user (uid {st.st_uid})")
        elif st.st_mode & 0o022 and not (path == state.parent and st.st_mode & stat.S_ISVTX):
            risks.append(f"{path} is writable by {'group and others' if st.st_mode & 0o002 else 'its group'} "
                         f"(mode {stat.filemode(st.st_mode)})")
    return risks


def build_served_graph(method: str, config: RunnableConfig | None = None) -> Any:
    """The compiled graph of ``method`` for LangGraph Server (no checkpointer, no store); compiled
    once per (method, model) and process."""
    kg = served_kg()
    return _compiled(method, id(kg), model_spec(config))


def close_served() -> None:
    """Close the KGs this process opened for serving and forget the compiled graphs (tests, reloads)."""
    with _lock:
        for kg in list(_opened):
            kg.close()
        _opened.clear()
        _open_kg.cache_clear()
        _compiled.cache_clear()


def graph_factory(method: str) -> Callable[[RunnableConfig], Awaitable[Any]]:
    """A LangGraph Server graph factory for ``method`` (what ``graphs/served.py`` exports under that name).

    The factory is async and opens the KG in a worker thread: the server's event loop never waits
    on disk (``langgraph dev`` rejects blocking calls in it).
    """
    from langgraph_kgmem.graphs.registry import METHODS

    if method not in METHODS:
        raise ConfigurationError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")

    async def graph(config: RunnableConfig) -> Any:
        return await asyncio.to_thread(build_served_graph, method, config)

    graph.__name__ = f"{method}_graph"
    graph.__doc__ = f"The served {method} graph (configured from KGMEM_* environment variables)."
    return graph


def served_graphs() -> dict[str, Callable[[RunnableConfig], Awaitable[Any]]]:
    """A graph factory per registered method and preset, by registry name (``graphs/served.py``)."""
    from langgraph_kgmem.graphs.registry import METHODS

    return {name: graph_factory(name) for name in METHODS}
