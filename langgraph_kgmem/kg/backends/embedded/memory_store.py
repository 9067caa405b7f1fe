"""The SQLite memory store, with values that are not JSON refused as the package's error.

LangGraph's ``SqliteStore`` keeps each value as JSON text and parses it as it reads; a value
edited into something else (``memory.sqlite`` is a file anyone who can write the KG directory can
change) raised ``orjson.JSONDecodeError`` from whichever method read it. These subclasses turn it
into :class:`~langgraph_kgmem.errors.CorruptStoredDataError` naming the database, for every read
(``get``, ``search``, ``batch``: all go through ``batch``/``abatch``). PostgreSQL keeps values as
``jsonb``, which cannot hold anything but JSON.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore

from langgraph_kgmem.errors import CorruptStoredDataError


def _not_json(where: str, exc: json.JSONDecodeError) -> CorruptStoredDataError:
    return CorruptStoredDataError(
        f"{where} holds a memory value that is not JSON ({exc}); nothing was changed. Delete the damaged memory "
        "(`kgmem memory --reset`, by --kind or --scope), or restore the file from a backup")


class CheckedSqliteStore(SqliteStore):
    """``SqliteStore`` whose reads raise :class:`CorruptStoredDataError` for a value that is not JSON."""

    where = "the memory database"

    def batch(self, ops: Iterable[Any]) -> list[Any]:
        """``SqliteStore.batch``; a stored value that is not JSON is :class:`CorruptStoredDataError`."""
        try:
            return super().batch(ops)
        except json.JSONDecodeError as exc:   # orjson's error is a subclass
            raise _not_json(self.where, exc) from exc


class CheckedAsyncSqliteStore(AsyncSqliteStore):
    """``AsyncSqliteStore`` whose reads raise :class:`CorruptStoredDataError` for a value that is not JSON."""

    where = "the memory database"

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        """``AsyncSqliteStore.abatch``; a stored value that is not JSON is :class:`CorruptStoredDataError`."""
        try:
            return await super().abatch(ops)
        except json.JSONDecodeError as exc:
            raise _not_json(self.where, exc) from exc
