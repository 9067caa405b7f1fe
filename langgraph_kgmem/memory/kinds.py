"""The memory kinds: which namespaces the methods keep in the store, and how ``kgmem memory`` shows
them. A method declares its kinds on its :class:`~langgraph_kgmem.graphs.spec.MethodSpec`
(``memory=(MemoryKind(...), ...)``), which registers them here when the method's package is
imported; the memory layer itself names none of them. :data:`~langgraph_kgmem.memory.SYSTEM_KINDS`
are the package's own bookkeeping beside them.

A kind says how to read its items: ``describe`` turns one stored item into a record a person
reads, ``format`` renders such a record as lines, ``rank`` orders the records (default: most
recent first); a kind whose items mean nothing one by one (the codebook's storage pages) gives
``summarise`` (the whole namespace in one summary) and ``format_summary`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from langgraph_kgmem.errors import KgmemInputError

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


@dataclass(frozen=True)
class MemoryKind:
    """One kind of memory a method keeps: its namespace ``label`` (the last part of
    ``("kgmem", kg, *scope, label)``), its ``short`` name (``kgmem memory --kind``), a ``title``
    for listings, and how a person reads it (see the module docstring)."""

    label: str
    short: str
    title: str
    # (kg, key, stored value) -> the item as a person reads it; None: the stored value as it is
    describe: Callable[["KnowledgeGraph", str, dict[str, Any]], dict[str, Any]] | None = None
    # a described record -> its lines in `kgmem memory` (indented two spaces); None: one line
    format: Callable[[dict[str, Any]], list[str]] | None = None
    # a described record -> its sort key (ascending); None: most recently updated first
    rank: Callable[[dict[str, Any]], Any] | None = None
    # (stored value) -> what a raw listing shows of it (e.g. a vector as its norm); None: the value
    raw: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # (kg, store, scope, limit) -> one summary of the whole namespace, shown instead of its items
    summarise: Callable[["KnowledgeGraph", "BaseStore", Sequence[str], int], dict[str, Any]] | None = None
    format_summary: Callable[[dict[str, Any]], list[str]] | None = None

    def __post_init__(self) -> None:
        for name in ("label", "short", "title"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise KgmemInputError(f"MemoryKind.{name} must be a non-empty string, got {getattr(self, name)!r}")
        if (self.summarise is None) != (self.format_summary is None):
            raise KgmemInputError(f"memory kind {self.label!r}: summarise and format_summary come together")


_REGISTERED: dict[str, MemoryKind] = {}   # label -> kind, in registration order
_LOADERS: list[Callable[[], Any]] = []
_loaded = False


def add_kind_loader(load: Callable[[], Any]) -> None:
    """Register a function that registers kinds when first needed. :mod:`langgraph_kgmem.knowledge_graph`
    adds one (importing every method) when it is imported, which any use of a method does: a
    process that has imported one method, or none yet, must still know every kind, or a tenant
    label equal to another method's kind would pass :func:`~langgraph_kgmem.memory.check_scope_label`
    and its memory would sit below that kind's shared memory."""
    global _loaded
    if load not in _LOADERS:
        _LOADERS.append(load)
        _loaded = False


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True   # first: a loader's imports register kinds, which must not load again
    for load in list(_LOADERS):
        load()


def register_kind(kind: MemoryKind) -> MemoryKind:
    """Register ``kind`` (a method's spec does this for each of its kinds). Registering a kind of
    the same label and short name again replaces it (a reloaded module).

    Raises:
        KgmemInputError: another kind already holds the label or the short name."""
    held = _REGISTERED.get(kind.label)
    other = next((k for k in _REGISTERED.values() if kind.short in (k.short, k.label) and k.label != kind.label), None)
    if (held is not None and held.short != kind.short) or other is not None:
        taken = held if held is not None and held.short != kind.short else other
        raise KgmemInputError(f"memory kind {kind.label!r} (--kind {kind.short}) clashes with the registered kind "
                              f"{taken.label!r} (--kind {taken.short}): labels and short names are unique")  # type: ignore[union-attr]
    _REGISTERED[kind.label] = kind
    return kind


def unregister_kind(label: str) -> None:
    """Forget the kind of namespace label ``label`` (no error when it is not registered)."""
    _REGISTERED.pop(label, None)


def memory_kind(label: str) -> MemoryKind | None:
    """The registered kind of namespace label ``label``, or None."""
    if label not in _REGISTERED:
        _ensure_loaded()
    return _REGISTERED.get(label)


def registered_kinds() -> tuple[MemoryKind, ...]:
    """Every registered kind, in short-name order."""
    _ensure_loaded()
    return tuple(sorted(_REGISTERED.values(), key=lambda k: k.short))


class ShortNames(Mapping[str, str]):
    """``KINDS``: short name (``kgmem memory --kind``) -> namespace label of every registered kind,
    read live from the registry (a method imported later adds its kinds)."""

    def __getitem__(self, short: str) -> str:
        _ensure_loaded()
        for k in _REGISTERED.values():
            if k.short == short:
                return k.label
        raise KeyError(short)

    def __iter__(self) -> Iterator[str]:
        _ensure_loaded()
        return iter(sorted(k.short for k in _REGISTERED.values()))

    def __len__(self) -> int:
        _ensure_loaded()
        return len(_REGISTERED)

    def __repr__(self) -> str:
        return f"KINDS({dict(self)!r})"
