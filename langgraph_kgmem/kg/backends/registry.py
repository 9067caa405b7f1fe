"""The registered storage backends, and the one place that turns a target (a directory path or a
database URI) into an opened backend.

A new backend is a package under ``kg/backends/`` that implements the contract's core
(:mod:`~langgraph_kgmem.kg.backends.contract`, defaults for the rest in
:mod:`~langgraph_kgmem.kg.backends.base`) and exports a :class:`BackendSpec`; adding it to
:data:`BACKENDS` (one line here) registers it for :func:`open_backend` (so for ``KnowledgeGraph.open``, the CLI,
the server and migration) and for the conformance suite. The first spec that claims a target
opens it: URI schemes first, directory paths last.
"""

from __future__ import annotations

import os

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.backends.contract import BackendSpec, OpenedBackend
from langgraph_kgmem.kg.backends.embedded.opener import SPECS as EMBEDDED_SPECS
from langgraph_kgmem.kg.backends.embedded.opener import open_in_memory as open_embedded_in_memory
from langgraph_kgmem.kg.backends.postgres.opener import SPEC as POSTGRES_SPEC

BACKENDS: tuple[BackendSpec, ...] = (POSTGRES_SPEC, *EMBEDDED_SPECS)


def open_in_memory() -> OpenedBackend:
    """A throw-away KG storage, nothing on disk (``KnowledgeGraph.in_memory``): the embedded
    backend's SQLite ``:memory:`` and numpy vectors."""
    return open_embedded_in_memory()


def registered_backends() -> tuple[BackendSpec, ...]:
    """Every registered backend, in the order targets are offered to them."""
    return BACKENDS


def backend_for(target: str | os.PathLike[str], vector_backend: str | None = None) -> BackendSpec:
    """The backend that opens ``target``.

    Raises:
        KgmemInputError: no registered backend claims it (e.g. an unknown URI scheme).
    """
    text = os.fspath(target)
    for spec in BACKENDS:
        if spec.claims(text, vector_backend):
            return spec
    raise KgmemInputError(
        f"no storage backend opens {text!r}: give a KG directory path or a postgresql:// URI "
        f"(registered backends: {', '.join(s.name for s in BACKENDS)})")


def is_database(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a KG in a database server rather than a directory (servers hold
    many KGs per target, picked by name; a directory holds one)."""
    return backend_for(target).server


def open_backend(target: str | os.PathLike[str], *, name: str | None = None, create: bool = True,
                 vector_backend: str | None = None) -> OpenedBackend:
    """Open (or create) the KG storage ``target`` names, with the backend that claims it.

    Args:
        name: the KG's name in a database (default ``"default"``); a directory keeps its stored one
            (the facade compares them).
        create: False: refuse a target that holds no KG yet.
        vector_backend: embedded directories: ``"chroma"`` or ``"memory"`` (default: the
            directory's own, Chroma for a new one); a database server ignores it.
    """
    spec = backend_for(target, vector_backend)
    return spec.open(os.fspath(target), name=name, create=create, vector_backend=vector_backend)


def drop_kg(target: str | os.PathLike[str], name: str) -> bool:
    """Remove KG ``name`` from the database ``target`` names; True if it existed.

    Raises:
        KgmemInputError: ``target`` is a KG directory (delete the directory instead).
    """
    spec = backend_for(target)
    if spec.drop is None:
        raise KgmemInputError(f"{os.fspath(target)!r} is a KG directory ({spec.name}), not a database of KGs: "
                              "an embedded KG is its directory, delete the directory")
    return spec.drop(os.fspath(target), name)
