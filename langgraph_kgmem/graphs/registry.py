"""The registered methods: every package under ``langgraph_kgmem/graphs/`` that exports a
:class:`~langgraph_kgmem.graphs.spec.MethodSpec` as ``SPEC``, and their presets.

Everything that lists methods reads this: the package's exports, the agents' tools, the CLI's
choices and help, the served graphs and the benchmark. A new method is a new package with a
``SPEC`` (plus its tests, its docs page and its ``langgraph.json`` entry, which a test demands).
"""

from __future__ import annotations

import logging
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from typing import Any, Callable, Iterator, Mapping

from langgraph_kgmem.graphs.spec import MethodSpec
from langgraph_kgmem.memory.kinds import MemoryKind

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class Registered:
    """One registry name: a method, or a preset of one (``hipporag2`` = CatRAG with presets)."""

    name: str
    spec: MethodSpec
    preset: Mapping[str, Any]
    summary: str
    agent_description: str

    @property
    def factory(self) -> Callable[..., Any]:
        """The method's ``create_<method>_graph`` (from its spec)."""
        return self.spec.factory


@lru_cache(maxsize=1)
def method_specs() -> tuple[MethodSpec, ...]:
    """Every method package's spec, in name order (imported once per process)."""
    import langgraph_kgmem.graphs as graphs_pkg

    specs = []
    for info in sorted(pkgutil.iter_modules(graphs_pkg.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        try:
            module = import_module(f"{graphs_pkg.__name__}.{info.name}")
        except ImportError as exc:   # an optional dependency of one method is missing: the rest still work
            logger.warning("method package %s is not available in this installation: %s", info.name, exc)
            continue
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, MethodSpec):
            specs.append(spec)
    return tuple(specs)


@lru_cache(maxsize=1)
def registered() -> dict[str, Registered]:
    """Registry name → what it runs: each method, then its presets, methods in name order."""
    out: dict[str, Registered] = {}
    for spec in method_specs():
        for name, preset, summary, agent in spec.variants():
            if name in out:
                raise RuntimeError(f"method name {name!r} is registered twice ({out[name].spec.name}, {spec.name})")
            out[name] = Registered(name, spec, preset, summary, agent)
    return out


class _Methods(Mapping[str, Registered]):
    """``METHODS``: a read-only mapping over :func:`registered`, filled on first use (importing the
    registry imports no method)."""

    def __getitem__(self, name: str) -> Registered:
        return registered()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(registered())

    def __len__(self) -> int:
        return len(registered())

    def __repr__(self) -> str:
        return f"METHODS({', '.join(self)})"


METHODS: Mapping[str, Registered] = _Methods()

# other names a user may give for a registry name (``kgmem ask --method auto``)
ALIASES: Mapping[str, str] = {"auto": "router"}


def get_method(name: str) -> Registered:
    """The registry entry ``name``; :class:`~langgraph_kgmem.errors.KgmemInputError` listing the
    choices when there is none."""
    from langgraph_kgmem.errors import KgmemInputError

    found = registered().get(ALIASES.get(name, name))
    if found is None:
        raise KgmemInputError(f"unknown method {name!r}; choose one of: {', '.join(registered())}")
    return found


def summaries() -> dict[str, str]:
    """Registry name → its one-line summary, for people choosing a method (the demo, ``kgmem ask --help``)."""
    return {name: entry.summary for name, entry in registered().items()}


def memory_kinds() -> tuple[MemoryKind, ...]:
    """Every memory kind the methods declare (importing them registers the kinds with the memory
    layer), in short-name order: what ``kgmem memory --kind`` offers."""
    return tuple(sorted({k.label: k for spec in method_specs() for k in spec.memory}.values(), key=lambda k: k.short))


def get_factory(name: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The factory and its preset options for method ``name``."""
    entry = get_method(name)
    return entry.factory, dict(entry.preset)


def method_exports() -> dict[str, str]:
    """Public factory name → the module ``langgraph_kgmem`` re-exports it from."""
    return {spec.export: spec.factory.__module__ for spec in method_specs()}


__all__ = ["METHODS", "get_factory", "get_method", "method_specs"]
