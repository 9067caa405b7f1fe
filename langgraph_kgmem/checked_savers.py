"""Checkpointers whose reads refuse a checkpoint that is not one.

The strict serializer (:mod:`langgraph_kgmem.persistence`) decides which types a stored payload
may rebuild; it cannot know that the payload of a checkpoint row must be a checkpoint. Valid
msgpack (PostgreSQL: JSON) that is something else (an int, a list, a dict without the
checkpoint's keys) reached LangGraph's loop, or PostgreSQL's saver itself, and raised a raw
``KeyError: 'v'`` or ``TypeError`` there. Each checkpointer
the package builds reads through :func:`checked_tuple`, which refuses it as
:class:`~langgraph_kgmem.errors.CorruptStoredDataError` naming the database and the thread.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, AsyncIterator, Iterator

from langgraph_kgmem.errors import CorruptStoredDataError, describe_error

# what every checkpoint LangGraph writes holds, and the type each must have
CHECKPOINT_KEYS = {"v": int, "id": str, "ts": str, "channel_values": dict, "channel_versions": dict,
                   "versions_seen": dict}


def checked_tuple(found: Any, where: str) -> Any:
    """``found`` (a ``CheckpointTuple`` or None) when its checkpoint and metadata have the shape
    LangGraph writes.

    Raises:
        CorruptStoredDataError: naming ``where``, the thread and what is wrong; nothing was changed.
    """
    if found is None:
        return None
    cp, meta = found.checkpoint, found.metadata
    thread = str((found.config or {}).get("configurable", {}).get("thread_id", "?"))[:80]
    wrong = None
    if not isinstance(cp, dict):
        wrong = f"a {type(cp).__name__}, not a checkpoint"
    elif bad := [k for k, t in CHECKPOINT_KEYS.items() if not isinstance(cp.get(k), t) or isinstance(cp.get(k), bool)]:
        wrong = f"a mapping without the checkpoint's {', '.join(bad)}"
    elif meta is not None and not isinstance(meta, dict):
        wrong = f"metadata that is a {type(meta).__name__}"
    if wrong:
        raise CorruptStoredDataError(
            f"{where}: the checkpoint of thread {thread!r} holds {wrong}; nothing was changed. Delete that thread "
            "(checkpointer.delete_thread) or restore the database from a backup")
    return found


def _read_failed(exc: Exception, config: Any, where: str) -> Exception:
    """The error for a saver's read that raised ``exc`` on ``config``: a ``KeyError`` or
    ``TypeError`` from a well-formed config comes from the row (PostgreSQL's saver reads
    ``checkpoint["v"]`` as soon as it has fetched it), so it is :class:`CorruptStoredDataError`;
    a config without a thread id keeps its own error."""
    configurable = config.get("configurable") if isinstance(config, dict) else None
    if config is not None and not (isinstance(configurable, dict) and "thread_id" in configurable):
        return exc
    thread = str((configurable or {}).get("thread_id", "?"))[:80]
    return CorruptStoredDataError(
        f"{where}: a checkpoint of thread {thread!r} holds something that is not a checkpoint "
        f"({describe_error(exc, 120)}); nothing was changed. Delete that thread (checkpointer.delete_thread) or "
        "restore the database from a backup")


class _CheckedReads:
    """Reads of a LangGraph checkpointer through :func:`checked_tuple` (``where`` names its database)."""

    where = "the checkpoint database"

    def get_tuple(self, config: Any) -> Any:
        """The saver's ``get_tuple``, checked."""
        try:
            found = super().get_tuple(config)  # type: ignore[misc]
        except (KeyError, TypeError, AttributeError) as exc:
            raise _read_failed(exc, config, self.where) from exc
        return checked_tuple(found, self.where)

    def list(self, config: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """The saver's ``list``, each tuple checked."""
        try:
            for found in super().list(config, *args, **kwargs):  # type: ignore[misc]
                yield checked_tuple(found, self.where)
        except (KeyError, TypeError, AttributeError) as exc:
            raise _read_failed(exc, config, self.where) from exc

    async def aget_tuple(self, config: Any) -> Any:
        """The saver's ``aget_tuple``, checked."""
        try:
            found = await super().aget_tuple(config)  # type: ignore[misc]
        except (KeyError, TypeError, AttributeError) as exc:
            raise _read_failed(exc, config, self.where) from exc
        return checked_tuple(found, self.where)

    async def alist(self, config: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The saver's ``alist``, each tuple checked."""
        try:
            async for found in super().alist(config, *args, **kwargs):  # type: ignore[misc]
                yield checked_tuple(found, self.where)
        except (KeyError, TypeError, AttributeError) as exc:
            raise _read_failed(exc, config, self.where) from exc


@lru_cache(maxsize=None)
def checked(saver_class: type) -> type:
    """A subclass of LangGraph checkpointer ``saver_class`` (``SqliteSaver``, ``PostgresSaver`` and
    their async twins) whose reads go through :func:`checked_tuple`; set ``where`` on an instance
    to name its database. Built on demand: the PostgreSQL savers are an optional extra."""
    return type("Checked" + saver_class.__name__, (_CheckedReads, saver_class),
                {"__doc__": f"``{saver_class.__name__}`` reading through ``checked_tuple``."})
