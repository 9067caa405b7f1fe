"""Adapter discovery: every module in ``tools/benchlib/methods/`` that defines ``ADAPTERS``.

A module that fails to import is recorded with its error (and shown in the report) instead of
stopping the other methods.
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback
from dataclasses import dataclass, field
from typing import Any

REQUIRED = ("name", "corpus", "setup", "run", "oracle")


class UnknownMethodError(Exception):
    """A ``--method`` name no adapter registered; the message lists the registered names."""


@dataclass
class Registry:
    adapters: dict[str, Any] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)   # module name → error summary

    def names(self) -> list[str]:
        return sorted(self.adapters)

    def get(self, name: str) -> Any:
        if name not in self.adapters:
            hint = ""
            for mod, err in self.broken.items():
                if name in mod or mod in name:
                    hint = f" (module methods/{mod}.py failed to import: {err})"
            raise UnknownMethodError(
                f"unknown method {name!r}{hint}; registered: {', '.join(self.names()) or '(none)'}"
                + (f"; modules that failed to import: {', '.join(sorted(self.broken))}" if self.broken and not hint else ""))
        return self.adapters[name]


def discover(package: str = "benchlib.methods") -> Registry:
    reg = Registry()
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        try:
            mod = importlib.import_module(f"{package}.{info.name}")
        except Exception as exc:  # a broken adapter must not take the others down
            last = traceback.extract_tb(exc.__traceback__)[-1]
            reg.broken[info.name] = f"{type(exc).__name__}: {exc} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
            continue
        adapters = getattr(mod, "ADAPTERS", None)
        if not isinstance(adapters, (list, tuple)):
            reg.broken[info.name] = "defines no ADAPTERS list"
            continue
        for a in adapters:
            missing = [attr for attr in REQUIRED if not hasattr(a, attr)]
            if missing:
                reg.broken[info.name] = f"adapter {getattr(a, 'name', a)!r} lacks {missing}"
                continue
            if a.name in reg.adapters:
                reg.broken[info.name] = f"adapter name {a.name!r} registered twice"
                continue
            reg.adapters[a.name] = a
    return reg


def supports(adapter: Any, dataset: str) -> bool:
    """Whether ``adapter`` runs on ``dataset`` (a name or a normalized-JSONL path)."""
    from benchlib.datasets import is_qa_dataset

    ds = getattr(adapter, "datasets", None)
    if ds is not None:
        return dataset in ds
    return adapter.corpus in ("per-question", "pooled") and is_qa_dataset(dataset)
