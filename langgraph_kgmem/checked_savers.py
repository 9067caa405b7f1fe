"""Checkpointers whose reads refuse a checkpoint that is not one.

The strict serializer (:mod:`langgraph_kgmem.persistence`) decides which types a stored payload
may rebuild; it cannot know that the payload of a checkpoint row must be a checkpoint. Valid
msgpack that is something else (an int, a list, a dict without the checkpoint's keys) reached
LangGraph's loop and raised a raw ``KeyError: 'v'`` or ``TypeError`` there. Each checkpointer
the package builds reads through :func:`checked_tuple`, which refuses it as
:class:`~langgraph_kgmem.errors.CorruptStoredDataError` naming the database and the thread.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, AsyncIterator, Iterator

from langgraph_kgmem.errors import CorruptStoredDataError

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


class _CheckedReads:
    """Reads of a LangGraph checkpointer through :func:`checked_tuple` (``where`` names its database)."""

    where = "the checkpoint database"

    def get_tuple(self, config: Any) -> Any:
        """The saver's ``get_tuple``, checked."""
        return checked_tuple(super().get_tuple(config), self.where)  # type: ignore[misc]

    def list(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """The saver's ``list``, each tuple checked."""
        for found in super().list(*args, **kwargs):  # type: ignore[misc]
            yield checked_tuple(found, self.where)

    async def aget_tuple(self, config: Any) -> Any:
        """The saver's ``aget_tuple``, checked."""
        return checked_tuple(await super().aget_tuple(config), self.where)  # type: ignore[misc]

    async def alist(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The saver's ``alist``, each tuple checked."""
        async for found in super().alist(*args, **kwargs):  # type: ignore[misc]
            yield checked_tuple(found, self.where)


@lru_cache(maxsize=None)
def checked(saver_class: type) -> type:
    """A subclass of LangGraph checkpointer ``saver_class`` (``SqliteSaver``, ``PostgresSaver`` and
    their async twins) whose reads go through :func:`checked_tuple`; set ``where`` on an instance
    to name its database. Built on demand: the PostgreSQL savers are an optional extra."""
    return type("Checked" + saver_class.__name__, (_CheckedReads, saver_class),
                {"__doc__": f"``{saver_class.__name__}`` reading through ``checked_tuple``."})
