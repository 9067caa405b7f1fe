"""The shape of the code base, read from its source (nothing is imported): no import cycles, no
module using another module's private names, no overlong functions.

The checker is plain functions over the AST, reusable from a script (``module_imports``,
``import_graph``, ``import_cycles``, ``private_imports``, ``long_functions``). An import counts
wherever it is written (module level, inside a function, inside ``try``), because a function-level
import is only a cycle put off until the function runs; imports under ``if TYPE_CHECKING:`` do not
count, as they never run. ``from a.b import c`` is an edge to the module ``a.b.c`` when there is
one, else to ``a.b``. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``: those
packages count as imported too, unless the importer lives inside them (a package's own modules
importing each other while its ``__init__`` re-exports them is how packages are written).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "langgraph_kgmem"
BENCHLIB = ROOT / "tools" / "benchlib"

#: Functions longer than this many lines (decorators and docstring included) are too long to read.
MAX_FUNCTION_LINES = 120


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``importer`` imports ``target`` (a module of the same tree),
    taking ``names`` from it (empty for ``import target``), at ``line``."""

    importer: str
    target: str
    names: tuple[str, ...]
    line: int


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``root`` (named ``package``)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if not level:
        return module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def module_imports(modules: dict[str, Path]) -> list[Import]:
    """Every import among ``modules`` (imports of anything outside them are left out)."""
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        found.append(Import(name, alias.name, (), node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node.module, node.level, name, is_package)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:          # `from pkg import module`
                        found.append(Import(name, sub, (), node.lineno))
                    elif base in modules:
                        found.append(Import(name, base, (alias.name,), node.lineno))
    return [i for i in found if i.target != i.importer]


def _packages_entered(importer: str, target: str) -> list[str]:
    """``target`` and the packages above it whose ``__init__`` importing it runs for ``importer``."""
    parts = target.split(".")
    above = [".".join(parts[:n]) for n in range(1, len(parts))]
    return [target, *(p for p in above if not (importer + ".").startswith(p + "."))]


def import_graph(imports: Iterable[Import], modules: Iterable[str] = ()) -> dict[str, set[str]]:
    """Module -> the modules importing it runs (see the module docstring); ``modules`` adds the
    packages entered on the way, when they are among them."""
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for imp in imports:
        for target in _packages_entered(imp.importer, imp.target):
            if target == imp.target or target in known:
                graph.setdefault(imp.importer, set()).add(target)
                graph.setdefault(target, set())
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative),
    each sorted, in a deterministic order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def private_imports(imports: Iterable[Import]) -> list[Import]:
    """Imports that take a private (``_x``, not dunder) name from another module."""
    return [i for i in imports
            if any(n.startswith("_") and not n.startswith("__") for n in i.names)]


def long_functions(modules: dict[str, Path], limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """``module:function`` and its length in lines, for every function (nested ones too) over ``limit``."""
    out = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > limit:
                    out.append((f"{name}:{node.name}", length))
    return sorted(out)


def _area(module: str) -> str:
    """The subpackage of ``langgraph_kgmem`` a module belongs to (``""`` for a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else ""


# --------------------------------------------------------------------------------------------
# the checker itself


def test_the_checker_finds_cycles_private_names_and_long_functions(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.d import x\n")
    (pkg / "sub" / "d.py").write_text("from pkg.sub import e\nx = 1\n")   # a package importing its own: no cycle
    (pkg / "sub" / "e.py").write_text("y = 1\n")
    (pkg / "a.py").write_text("from pkg.b import thing\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\nthing = 1\n")
    (pkg / "sub" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
                                      "from ..b import _hidden\n")
    (pkg / "f.py").write_text("def long():\n" + "    x = 1\n" * 130)
    modules = module_files(pkg, "pkg")
    imports = module_imports(modules)
    assert import_cycles(import_graph(imports, modules)) == [["pkg.a", "pkg.b"]]
    assert [(i.importer, i.target, i.names) for i in private_imports(imports)] == [("pkg.sub.c", "pkg.b", ("_hidden",))]
    assert long_functions(modules) == [("pkg.f:long", 131)]
    # importing a module of a package runs the package's __init__: an edge to the package too
    (pkg / "b.py").write_text("thing = 1\nfrom pkg.sub.e import y\n")
    (pkg / "sub" / "e.py").write_text("from pkg.b import thing\n")
    assert import_cycles(import_graph(module_imports(modules), modules)) == [
        ["pkg.b", "pkg.sub", "pkg.sub.d", "pkg.sub.e"]]
    (pkg / "b.py").write_text("thing = 1\n")
    assert import_cycles(import_graph(module_imports(modules), modules)) == []


# --------------------------------------------------------------------------------------------
# the package

PKG_MODULES = module_files(PACKAGE, "langgraph_kgmem")
PKG_IMPORTS = module_imports(PKG_MODULES)
PKG_CYCLES = import_cycles(import_graph(PKG_IMPORTS, PKG_MODULES))


def test_no_import_cycles():
    assert PKG_CYCLES == [], f"import cycles: {PKG_CYCLES}"


def test_no_module_imports_another_modules_private_names():
    assert private_imports(PKG_IMPORTS) == []


def test_llm_package_imports_nothing_above_it():
    """The model layer sits at the bottom: besides itself it uses only errors and redaction."""
    allowed = {"langgraph_kgmem.errors", "langgraph_kgmem.redaction"}
    upward = [i for i in PKG_IMPORTS if _area(i.importer) == "llm" and _area(i.target) != "llm"
              and i.target not in allowed]
    assert upward == []


def test_no_function_is_longer_than_the_limit():
    assert long_functions(PKG_MODULES) == []


# --------------------------------------------------------------------------------------------
# the repository's tools: the benchmark harness is its own import root (tools/ on sys.path, its
# modules are benchlib.*); every tool may use the package's public names only

BENCH_MODULES = module_files(BENCHLIB, "benchlib")
BENCH_IMPORTS = module_imports(BENCH_MODULES)
TOOL_IMPORTS = [i for i in module_imports({**PKG_MODULES, **module_files(ROOT / "tools", "tools")})
                if i.importer.startswith("tools.")]


def test_benchlib_has_no_import_cycles():
    assert import_cycles(import_graph(BENCH_IMPORTS, BENCH_MODULES)) == []


def test_benchlib_imports_no_private_names_of_its_own_modules():
    assert private_imports(BENCH_IMPORTS) == []


def test_tools_import_no_private_names_of_the_package():
    assert private_imports(TOOL_IMPORTS) == []
