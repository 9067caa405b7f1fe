"""A stored codebook read back is checked before it is used.

The codebook lives in the memory store, which anyone who can write the store's database can edit.
Its tables point into each other by position (an edge's head, relation and tail; an entity's or
edge's representative; a run's edges), and representatives are followed to their end: a cycle
among them would make :meth:`~langgraph_kgmem.graphs.autopruned.codebook.Codebook.resolve_edge`
loop forever, an index past a table's end (or a negative one, which Python reads from the end)
would fail later or silently read the wrong row, and a page of the wrong shape would raise
whatever error its first use happened to hit. :func:`check_links` refuses all of them at load
and :func:`refuse_corrupt` turns every other malformed page into the same error.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence, TypeVar

from langgraph_kgmem.errors import CorruptStoredDataError, KgmemError, describe_error

T = TypeVar("T")

_FIX = ("nothing was changed. Delete it with `kgmem memory --reset --kind codebook` (the next questions build it "
        "again), or restore the memory store from a backup")


def _where(kg_name: str, scope: Sequence[str]) -> str:
    return f"the AutoPrunedRetriever codebook of KG {kg_name!r}" + (f" (scope {'/'.join(scope)})" if scope else "")


def _first_cycle(reps: Sequence[int]) -> int | None:
    """An index on a cycle of ``reps`` (each entry pointing at its representative, itself when
    live), or None when every chain ends at an entry pointing at itself. Linear time."""
    done = [False] * len(reps)
    for start in range(len(reps)):
        path: dict[int, None] = {}
        i = start
        while not done[i] and reps[i] != i:
            if i in path:
                return i
            path[i] = None
            i = reps[i]
        for j in path:
            done[j] = True
        done[start] = True
    return None


def check_links(book: Any) -> None:
    """Refuse a loaded codebook whose positions point outside their tables, or whose entity or
    edge representatives form a cycle.

    Raises:
        CorruptStoredDataError: naming the codebook, the table and the row.
    """
    where = _where(book.kg_name, book.scope)
    n_ent, n_rel, n_edge = len(book.ent_text), len(book.rel_text), len(book.edge_hrt)
    for table, reps, size in (("entity", book.ent_rep, n_ent), ("edge", book.edge_rep, n_edge)):
        bad = next((i for i, r in enumerate(reps) if not 0 <= r < size), None)
        if bad is not None:
            raise CorruptStoredDataError(f"{where}: {table} {bad} has the representative {reps[bad]}, outside its "
                                         f"{size} rows; {_FIX}")
        loop = _first_cycle(reps)
        if loop is not None:
            raise CorruptStoredDataError(f"{where}: the {table} representatives form a cycle through {table} {loop} "
                                         f"(followed to their end they would never stop); {_FIX}")
    for e, (h, r, t) in enumerate(book.edge_hrt):
        if not (0 <= h < n_ent and 0 <= r < n_rel and 0 <= t < n_ent):
            raise CorruptStoredDataError(f"{where}: edge {e} is ({h}, {r}, {t}), outside the {n_ent} entities or "
                                         f"{n_rel} relations; {_FIX}")
    for run in book.runs.values():
        bad = next((e for e in run.edges if not 0 <= e < n_edge), None)
        if bad is not None:
            raise CorruptStoredDataError(f"{where}: run {str(run.id)[:60]!r} holds edge {bad}, outside the {n_edge} "
                                         f"edges; {_FIX}")


def refuse_corrupt(load: Callable[..., T]) -> Callable[..., T]:
    """Wrap a codebook loader ``(cls, store, kg_name, scope=())``: a page it cannot read (a row of
    the wrong shape, a value of the wrong type, a missing key, another format) and a loaded
    codebook that :func:`check_links` refuses both end in :class:`CorruptStoredDataError`; the
    package's own errors pass through as they are."""

    @functools.wraps(load)
    def checked(cls: Any, store: Any, kg_name: str, scope: Sequence[str] = ()) -> T:
        try:
            book = load(cls, store, kg_name, scope)
            check_links(book)
        except KgmemError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError) as exc:
            raise CorruptStoredDataError(f"{_where(kg_name, scope)} cannot be read: {describe_error(exc, 200)}; "
                                         f"{_FIX}") from exc
        return book

    return checked


def revision_of(item: Any, kg_name: str, scope: Sequence[str]) -> int | None:
    """The revision a stored codebook's ``revision`` (or ``meta``) item records; None without one.

    Raises:
        CorruptStoredDataError: the item holds no integer revision.
    """
    if item is None:
        return None
    value = getattr(item, "value", None)
    revision = value.get("revision") if isinstance(value, dict) else None
    if isinstance(revision, bool) or not isinstance(revision, int):
        raise CorruptStoredDataError(f"{_where(kg_name, scope)} records the revision {str(revision)[:40]!r}, not an "
                                     f"integer; {_FIX}")
    return revision
