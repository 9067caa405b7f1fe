"""Every public name of the library has a docstring, read from its source (nothing is imported).

Public: a module-level function or class whose name does not start with ``_``, in a module whose
own name does not start with ``_`` (``__init__`` counts: it is the package), and the public
methods and nested classes of such a class. A method that implements a contract may rely on the
contract's docstring: when a class defines every method of a ``Protocol`` class of the library
(itself or through a base class of the library), a method of the same name documented on that
Protocol counts as documented. That is how the backends lean on
:mod:`langgraph_kgmem.kg.backends.contract` without repeating it.

The checker is plain functions over the AST, reusable from a script (``missing_docstrings``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "langgraph_kgmem"

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class PublicName:
    """One public definition: ``qualname`` (``Class.method`` for a member) at ``path``:``line``."""

    path: str
    line: int
    qualname: str
    documented: bool


@dataclass
class ClassInfo:
    """What the contract rule needs of one class: its bases' names, its methods, and which of
    them carry a docstring."""

    bases: list[str]
    methods: set[str]
    documented: set[str]
    protocol: bool


def is_public_module(path: Path, root: Path) -> bool:
    """False for a module (or a package on its path) whose name starts with ``_``; ``__init__``
    stands for its package, which is public."""
    parts = path.relative_to(root).with_suffix("").parts
    return not any(p.startswith("_") and p != "__init__" for p in parts)


def _base_name(expr: ast.expr) -> str:
    """``Protocol`` for ``Protocol``, ``typing.Protocol`` and ``Protocol[T]``."""
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    return expr.attr if isinstance(expr, ast.Attribute) else ast.unparse(expr)


def _is_overload_or_accessor(fn: ast.AST) -> bool:
    """``@overload`` stubs and ``@x.setter``/``@x.deleter`` carry no docstring of their own: the
    implementation and the property's getter do."""
    for dec in getattr(fn, "decorator_list", []):
        text = ast.unparse(dec)
        if text.endswith("overload") or text.endswith((".setter", ".deleter")):
            return True
    return False


def public_names(path: Path, root: Path) -> list[PublicName]:
    """The public definitions of one module file (see the module docstring), in source order."""
    rel = str(path.relative_to(root))
    out: list[PublicName] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, _DEFS) or node.name.startswith("_") or _is_overload_or_accessor(node):
            continue
        out.append(PublicName(rel, node.lineno, node.name, ast.get_docstring(node) is not None))
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if (isinstance(member, _DEFS) and not member.name.startswith("_")
                        and not _is_overload_or_accessor(member)):
                    out.append(PublicName(rel, member.lineno, f"{node.name}.{member.name}",
                                          ast.get_docstring(member) is not None))
    return out


def class_table(files: list[Path]) -> dict[str, ClassInfo]:
    """Every module-level class of ``files`` by name (a name defined twice keeps both methods'
    union: the contract rule only widens, never hides a class)."""
    table: dict[str, ClassInfo] = {}
    for path in files:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [_base_name(b) for b in node.bases]
            info = table.setdefault(node.name, ClassInfo([], set(), set(), False))
            info.bases += bases
            info.protocol = info.protocol or "Protocol" in bases
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    info.methods.add(member.name)
                    if ast.get_docstring(member) is not None:
                        info.documented.add(member.name)
    return table


def _all_methods(name: str, table: dict[str, ClassInfo], seen: frozenset[str] = frozenset()) -> set[str]:
    """The methods ``name`` defines or inherits from classes of the library."""
    info = table.get(name)
    if info is None or name in seen:
        return set()
    out = set(info.methods)
    for base in info.bases:
        out |= _all_methods(base, table, seen | {name})
    return out


def contracts_of(name: str, table: dict[str, ClassInfo]) -> list[str]:
    """The library's Protocol classes that class ``name`` implements: named as a base, or every
    public method of the Protocol defined on the class (structurally, as a type checker sees it)."""
    methods = _all_methods(name, table)
    out = []
    for proto, info in sorted(table.items()):
        if not info.protocol or proto == name:
            continue
        required = {m for m in info.methods if not m.startswith("_")}
        if proto in table[name].bases or (required and required <= methods):
            out.append(proto)
    return out


def missing_docstrings(root: Path = PACKAGE, skip: frozenset[str] = frozenset()) -> list[PublicName]:
    """The public names under ``root`` without a docstring, after the contract rule; files whose
    path relative to ``root.parent`` is in ``skip`` are not checked (still read for contracts)."""
    files = [p for p in sorted(root.rglob("*.py")) if is_public_module(p, root)]
    table = class_table(sorted(root.rglob("*.py")))
    out = []
    for path in files:
        if str(path.relative_to(root.parent)) in skip:
            continue
        for name in public_names(path, root.parent):
            if name.documented:
                continue
            cls, _, method = name.qualname.partition(".")
            if method and any(method in table[p].documented for p in contracts_of(cls, table)):
                continue
            out.append(name)
    return out


def test_every_public_name_has_a_docstring():
    missing = missing_docstrings()
    assert not missing, (
        f"{len(missing)} public name(s) without a docstring; say what each does or returns (and why,"
        " where it matters):\n" + "\n".join(f"  {m.path}:{m.line} {m.qualname}" for m in missing))


def test_the_backends_rely_on_the_contract():
    """The contract rule finds the backends (else their methods would each need a docstring)."""
    table = class_table(sorted(PACKAGE.rglob("*.py")))
    assert "GraphBackend" in contracts_of("SqliteGraphStore", table)
    assert "GraphBackend" in contracts_of("PostgresGraphStore", table)
    assert "VectorBackend" in contracts_of("NumpyVectorIndex", table)
    assert "VectorBackend" in contracts_of("ChromaVectorIndex", table)
    assert "VectorBackend" in contracts_of("PgVectorIndex", table)


def test_the_checker_names_what_lacks_a_docstring(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "_private").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""pkg."""\ndef exported(): pass\n')
    (pkg / "_private" / "hidden.py").write_text("def hidden(): pass\n")
    (pkg / "mod.py").write_text(
        "from typing import Protocol\n"
        "class Store(Protocol):\n"
        '    """A contract."""\n'
        '    def get(self, key): """Read one key."""\n'
        "    def put(self, key, value): ...\n"
        "class Impl:\n"
        '    """Implements Store."""\n'
        "    def get(self, key): return 1\n"
        "    def put(self, key, value): pass\n"
        "    def extra(self): pass\n"
        "    def _helper(self): pass\n"
        "def _private(): pass\n")
    missing = [m.qualname for m in missing_docstrings(pkg)]
    assert missing == ["exported", "Store.put", "Impl.put", "Impl.extra"]
    assert [m.qualname for m in missing_docstrings(pkg, skip=frozenset({"pkg/mod.py"}))] == ["exported"]
