"""The methods' checkpointer and memory store: (checkpointer, store) pairs on one database, sync
and async, and the strict deserialisation every checkpointer here uses.

:func:`open_persistence` / :func:`open_async_persistence` put both where the KG's storage backend
keeps them (its :class:`~langgraph_kgmem.kg.backends.PersistenceHooks`): the KG's own PostgreSQL
database (or ``$KGMEM_POSTGRES_URI``), SQLite (``memory.sqlite`` in the KG directory), or, for an
in-memory KG, memory. This module knows no backend: it resolves the target, hands the backend the
strict checkpointer factory (:func:`checkpointer`) and returns what the backend opened.

Strict deserialisation of checkpoints: what the package's checkpointers load, and nothing else.

LangGraph's default checkpoint serializer rebuilds any ``(module, name, args)`` a msgpack payload
names — an import and a call chosen by whoever can write the checkpoint table. A KG directory's
``memory.sqlite`` is a file anyone with write access to the directory can edit, and a PostgreSQL
checkpoint table is writable by every role the database grants it to, so a planted checkpoint
would run code in the next process that reads the thread. :class:`StrictCheckpointSerializer`
loads only the types the package's method states and LangGraph's own bookkeeping hold (plain
JSON-like values, messages, documents, ``Send``/``Command``/``Interrupt``, dates and UUIDs);
a payload naming anything else — or a pickle, or the legacy JSON constructor format, which the
package never writes — is refused with :class:`~langgraph_kgmem.errors.UnsafeStoredDataError`
before anything in it is imported or called.

The memory store (``SqliteStore`` / ``PostgresStore``) keeps values as plain JSON and rebuilds no
objects, so it needs no serializer.
"""

from __future__ import annotations

import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_kgmem.checked_savers import checked
from langgraph_kgmem.errors import ConfigurationError, UnsafeStoredDataError
from langgraph_kgmem.kg.backends import BackendSpec, PersistenceHooks, backend_for, registered_backends

logger = logging.getLogger(__name__)

# (module, name) pairs a checkpoint of this package may rebuild. Method states hold JSON-native
# values only; the rest is what LangGraph itself writes into checkpoints and pending writes
# (tasks sent with Send, resumes, interrupts, message lists of subgraphs built on the KG's tools).
ALLOWED_TYPES: frozenset[tuple[str, str]] = frozenset({
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "time"), ("datetime", "timedelta"),
    ("datetime", "timezone"), ("uuid", "UUID"), ("decimal", "Decimal"),
    ("builtins", "set"), ("builtins", "frozenset"), ("collections", "deque"),
    *(("langchain_core.messages." + module, name) for module, names in {
        "base": ("BaseMessage", "BaseMessageChunk"),
        "human": ("HumanMessage", "HumanMessageChunk"),
        "ai": ("AIMessage", "AIMessageChunk"),
        "system": ("SystemMessage", "SystemMessageChunk"),
        "chat": ("ChatMessage", "ChatMessageChunk"),
        "tool": ("ToolMessage", "ToolMessageChunk"),
        "function": ("FunctionMessage", "FunctionMessageChunk"),
        "modifier": ("RemoveMessage",),
    }.items() for name in names),
    ("langchain_core.documents.base", "Document"),
    ("langgraph.types", "Send"), ("langgraph.types", "Command"), ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Overwrite"), ("langgraph.store.base", "Item"),
})
# (module, name, method) calls a checkpoint may make: how LangGraph stores a datetime
ALLOWED_METHODS: frozenset[tuple[str, str, str]] = frozenset({("datetime", "datetime", "fromisoformat")})
# payload kinds the package's checkpointers write; "json" (LangChain's constructor format, older
# LangGraph) and "pickle" are never written here, so one found in a table was put there by hand
LOADABLE_KINDS = ("null", "bytes", "bytearray", "msgpack")

_METHOD_CALL = 3        # ormsgpack ext code of (module, name, arg, method)
_CONSTRUCTORS = (0, 1, 2, 4, 5)   # ext codes of (module, name, args...): calls, dataclasses, pydantic


def _names(allowlist: Iterable[tuple[str, ...] | type]) -> set[tuple[str, ...]]:
    return {(item.__module__, item.__name__) if isinstance(item, type) else tuple(item) for item in allowlist}


class StrictCheckpointSerializer(JsonPlusSerializer):
    """LangGraph's msgpack serializer restricted to :data:`ALLOWED_TYPES` (plus ``extra``), with
    pickles off; anything else in a stored payload raises :class:`UnsafeStoredDataError`.

    Args:
        where: the database the payloads come from, for the error message (no password).
        extra: further ``(module, name)`` pairs (or classes) to allow, for graphs whose state
            holds your own types; ``checkpointer.with_allowlist([...])`` adds them later.
    """

    def __init__(self, where: str, extra: Iterable[tuple[str, ...] | type] = ()) -> None:
        self.where = where
        self.allowed = frozenset(ALLOWED_TYPES | _names(extra))
        super().__init__(pickle_fallback=False, allowed_json_modules=None,
                         allowed_msgpack_modules=tuple(self.allowed))

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> "StrictCheckpointSerializer":
        """This serializer with ``extra_allowlist`` allowed too (itself when nothing is new), still strict."""
        # LangGraph calls this (checkpointer.with_allowlist) with the types of a graph's state
        # schema; the copy must stay strict and check the merged list itself
        merged = _names(extra_allowlist) | self.allowed
        return self if merged == self.allowed else StrictCheckpointSerializer(self.where, merged)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Load one stored ``(kind, payload)``, after refusing a kind the package never writes and a
        msgpack payload naming a type outside the allowlist.

        Raises:
            UnsafeStoredDataError: naming what was refused; nothing in the payload was run."""
        kind, payload = data
        if kind not in LOADABLE_KINDS:
            raise UnsafeStoredDataError(
                f"a checkpoint in {self.where} is stored as {kind!r}, which langgraph_kgmem never writes "
                f"and refuses to load (only {', '.join(LOADABLE_KINDS)}); nothing in it was run. Delete the "
                "thread (checkpointer.delete_thread(thread_id)) or restore the database from a backup")
        if kind == "msgpack":
            refused = _refused_types(payload, self.allowed)
            if refused:
                raise UnsafeStoredDataError(
                    f"a checkpoint in {self.where} names {', '.join(sorted(refused))}, which langgraph_kgmem "
                    "does not load from stored state (it would import and call it); nothing in it was run. "
                    "Delete the thread (checkpointer.delete_thread(thread_id)) or restore the database from a "
                    "backup; if your own graph state holds that type, allow it with "
                    "checkpointer.with_allowlist([(module, name)])")
        return super().loads_typed(data)


def _refused_types(payload: bytes, allowed: frozenset[tuple[str, ...]]) -> set[str]:
    """Every type or call in msgpack ``payload`` outside ``allowed``, found without importing or
    calling anything (nested values included). A payload that is not msgpack at all is refused too."""
    refused: set[str] = set()

    def inspect(code: int, data: bytes) -> None:
        # returns None for every extension: the walk only reads names, it never builds a value
        try:
            fields = ormsgpack.unpackb(data, ext_hook=inspect, option=ormsgpack.OPT_NON_STR_KEYS)
        except (ValueError, TypeError):
            refused.add(f"an unreadable value (extension {code})")
            return None
        if code in _CONSTRUCTORS or code == _METHOD_CALL:
            if not (isinstance(fields, (list, tuple)) and len(fields) >= 3
                    and isinstance(fields[0], str) and isinstance(fields[1], str)):
                refused.add(f"a malformed value (extension {code})")
            elif code == _METHOD_CALL:
                call = (fields[0], fields[1], fields[3] if len(fields) > 3 else None)
                if call not in ALLOWED_METHODS:
                    refused.add(".".join(str(x) for x in call))
            elif (fields[0], fields[1]) not in allowed:
                refused.add(f"{fields[0]}.{fields[1]}")
        return None

    try:
        ormsgpack.unpackb(payload, ext_hook=inspect, option=ormsgpack.OPT_NON_STR_KEYS)
    except (ValueError, TypeError) as exc:
        if not refused:
            refused.add(f"unreadable data ({exc})")
    return refused


def strict_serializer(where: str) -> StrictCheckpointSerializer:
    """The serializer every checkpointer the package opens uses (see :class:`StrictCheckpointSerializer`)."""
    return StrictCheckpointSerializer(where)


def checkpointer(saver_class: type, conn: Any, where: str) -> Any:
    """The package's checkpointer: LangGraph's ``saver_class`` on ``conn`` with the strict
    serializer and read errors as the package's (:func:`~langgraph_kgmem.checked_savers.checked`),
    labelled ``where`` in its errors. Backends build theirs with it
    (:data:`~langgraph_kgmem.kg.backends.contract.SaverFactory`)."""
    saver = checked(saver_class)(conn, serde=strict_serializer(where))
    saver.where = where
    return saver


def _backend(path: Path | None, uri: str | None) -> tuple[PersistenceHooks, str] | None:
    """The persistence hooks and target for a KG at ``path`` / ``uri``: the KG's own database
    (``uri``), else a backend's environment variable (``KGMEM_POSTGRES_URI``), else the KG
    directory; None for an in-memory KG."""
    if uri:
        return _hooks(backend_for(uri)), uri
    for spec in registered_backends():
        if spec.persistence is not None and spec.persistence.env and os.environ.get(spec.persistence.env):
            return spec.persistence, os.environ[spec.persistence.env]
    if path is None:
        return None
    target = os.fspath(path)
    return _hooks(backend_for(target)), target


def _hooks(spec: BackendSpec) -> PersistenceHooks:
    if spec.persistence is None:
        raise ConfigurationError(f"the {spec.name} storage backend keeps no checkpointer or memory store: "
                                 "pass your own to the methods' graphs (compile(checkpointer=..., store=...))")
    return spec.persistence


@asynccontextmanager
async def open_async_persistence(path: Path | None, *, uri: str | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The async twin of :func:`open_persistence` (same database, same tables), closed on exit."""
    found = _backend(path, uri)
    if found is None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        yield InMemorySaver(), InMemoryStore()
        return
    hooks, target = found
    async with hooks.open_async(target, checkpointer) as pair:
        yield pair


def open_persistence(path: Path | None, *, uri: str | None = None) -> tuple[Any, Any]:
    """(checkpointer, store) on one database: the KG's own PostgreSQL database (``uri``) or
    ``KGMEM_POSTGRES_URI``, else SQLite in ``path`` (in memory without one)."""
    found = _backend(path, uri)
    if found is None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        return InMemorySaver(), InMemoryStore()
    hooks, target = found
    return hooks.open(target, checkpointer)


def holds_memory(path: Path | None, *, uri: str | None = None) -> bool:
    """Whether the KG at ``path`` / ``uri`` may hold memory written before (a database, or a
    directory with its memory file): deletes and replaces then open the pair to invalidate it.
    An in-memory KG's memory lives only in a pair it opened."""
    if path is None and not uri:
        return False
    found = _backend(path, uri)
    return found is not None and found[0].holds_memory(found[1])


__all__ = ["open_persistence", "open_async_persistence", "StrictCheckpointSerializer"]
