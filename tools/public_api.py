"""The package's public API as text: every name an ``__all__`` lists, with its signature.

``python tools/public_api.py`` prints it; ``--check`` compares it with the committed snapshot
(``tests/fixtures/public_api.txt``) and prints the difference; ``--write`` rewrites the snapshot.
``tests/test_public_api.py`` runs the check, so a change to the public API (a name added, removed
or renamed, a parameter renamed, reordered or given another default) is made on purpose: change
the code, run ``python tools/public_api.py --write`` and commit the snapshot with it.

One line per name: ``module.name: kind signature``. Functions and classes show
``inspect.signature`` (a pydantic model shows its fields, types, defaults and bounds); a class's public methods and properties
that the package defines (itself or on a base class of the package) follow it as
``module.Class.member``; any other value shows its type. Which modules have an ``__all__`` is read
from the source (``tools/code_metrics.py``), then each is imported.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "fixtures" / "public_api.txt"
PACKAGE_NAME = "langgraph_kgmem"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

from code_metrics import module_files, public_api  # noqa: E402

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return _ADDRESS.sub("", text)   # a default shown by its repr must not carry a memory address


_OPTIONAL = re.compile(r"Optional\[(.*)\]$")


def _type_text(annotation: Any) -> str:
    """An annotation as text that does not depend on the Python or pydantic version's repr."""
    text = annotation.__name__ if isinstance(annotation, type) else repr(annotation)
    text = text.replace("typing.", "").replace("collections.abc.", "")
    match = _OPTIONAL.fullmatch(text)
    return f"{match.group(1)} | None" if match else text


def _model_fields(cls: type) -> str | None:
    """A pydantic model's fields as ``(name: type = default [bounds], ...)``, from its declarations
    rather than from the signature pydantic builds (whose text changes between its releases)."""
    fields = getattr(cls, "model_fields", None)
    if not isinstance(fields, dict):
        return None
    parts = []
    for name, field in fields.items():
        default = "<factory>" if field.default_factory is not None else _ADDRESS.sub("", repr(field.default))
        bounds = [f"{key}={value!r}" for meta in field.metadata for key in ("gt", "ge", "lt", "le")
                  if (value := getattr(meta, key, None)) is not None]
        parts.append(f"{name}: {_type_text(field.annotation)} = {default}" + (f" [{', '.join(bounds)}]" if bounds else ""))
    return "(" + ", ".join(parts) + ")"


def _own(cls: type) -> bool:
    return getattr(cls, "__module__", "").split(".")[0] == PACKAGE_NAME


def _members(cls: type) -> Iterator[tuple[str, str]]:
    """(name, ``kind signature``) of the public methods and properties ``cls`` has from classes of
    the package, by name."""
    seen: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if not _own(base):
            continue
        for name, value in vars(base).items():
            if name.startswith("_"):
                continue
            if isinstance(value, property):
                seen[name] = "property"
            elif isinstance(value, (staticmethod, classmethod)):
                seen[name] = f"{type(value).__name__} {_signature(getattr(cls, name))}"
            elif inspect.isfunction(value):
                seen[name] = f"method {_signature(value)}"
    yield from sorted(seen.items())


def describe(module: str, name: str, obj: Any) -> list[str]:
    """The snapshot lines of one public name."""
    head = f"{module}.{name}"
    if inspect.isclass(obj):
        lines = [f"{head}: class {_model_fields(obj) or _signature(obj)}"]
        return lines + [f"{head}.{member}: {text}" for member, text in _members(obj)]
    if callable(obj) and (inspect.isfunction(obj) or inspect.isbuiltin(obj) or hasattr(obj, "__wrapped__")):
        return [f"{head}: function {_signature(obj)}"]
    return [f"{head}: {type(obj).__name__}"]


def current() -> list[str]:
    """Every line of the public API, module by module, names sorted."""
    modules = public_api(module_files(ROOT / PACKAGE_NAME, PACKAGE_NAME))
    lines: list[str] = []
    for module in sorted(modules):
        imported = importlib.import_module(module)
        for name in sorted(set(getattr(imported, "__all__"))):
            lines += describe(module, name, getattr(imported, name))
    return lines


def difference(snapshot: Path = SNAPSHOT) -> list[str]:
    """The unified diff from the committed snapshot to the current API (empty when they agree)."""
    old = snapshot.read_text(encoding="utf-8").splitlines() if snapshot.exists() else []
    return list(difflib.unified_diff(old, current(), "committed snapshot", "current API", lineterm="", n=0))


def main(argv: list[str] | None = None) -> int:
    """Print the public API, check it against the snapshot (``--check``) or rewrite it (``--write``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="exit 1 and print the difference if the snapshot is stale")
    group.add_argument("--write", action="store_true", help=f"rewrite {SNAPSHOT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    if args.write:
        lines = current()
        SNAPSHOT.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {len(lines)} lines to {SNAPSHOT.relative_to(ROOT)}")
        return 0
    if args.check:
        diff = difference()
        print("\n".join(diff) if diff else "the public API matches the snapshot")
        return 1 if diff else 0
    print("\n".join(current()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
