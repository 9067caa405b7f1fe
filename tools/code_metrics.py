"""The shape of the code base, read from its source (nothing is imported): import cycles, modules
using another module's private names, overlong functions; ``python tools/code_metrics.py`` prints
the cycles, the backend-specific modules outside ``kg/backends/`` and the largest modules and
functions, and ``tests/test_import_graph.py`` / ``tests/test_layering.py`` assert on the same
functions.

An import counts wherever it is written (module level, inside a function, inside ``try``),
because a function-level import is only a cycle put off until the function runs; imports under
``if TYPE_CHECKING:`` do not count, as they never run. ``from a.b import c`` is an edge to the
module ``a.b.c`` when there is one, else to ``a.b``. Importing ``a.b.c`` also runs ``a/__init__``
and ``a/b/__init__``: those packages count as imported too, unless the importer lives inside them
(a package's own modules importing each other while its ``__init__`` re-exports them is how
packages are written).
"""


from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

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


def _runtime_nodes(tree: ast.AST, *, type_only: bool = False) -> Iterator[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks (with
    ``type_only``, those too)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not type_only and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
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


def module_imports(modules: dict[str, Path], *, type_only: bool = False) -> list[Import]:
    """Every import among ``modules`` (imports of anything outside them are left out); with
    ``type_only``, the imports type checkers follow under ``if TYPE_CHECKING:`` too."""
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _runtime_nodes(tree, type_only=type_only):
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


#: The layers, lowest first: a module may import its own layer and those below it, never one above
#: (``graphs -> memory -> ingest -> kg -> llm``). Modules outside these packages (the public class,
#: the CLI, persistence, tools ...) sit on top and are not ranked.
LAYERS = ("llm", "kg", "ingest", "memory", "graphs")


def upward_imports(imports: Iterable[Import]) -> list[Import]:
    """Imports from a lower layer of :data:`LAYERS` into a higher one (an arrow up a layer)."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [i for i in imports
            if area(i.importer) in rank and area(i.target) in rank and rank[area(i.importer)] < rank[area(i.target)]]


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


def area(module: str) -> str:
    """The subpackage of ``langgraph_kgmem`` a module belongs to (``""`` for a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else ""


#: Where the storage backends live: one package per backend under it (``embedded``, ``postgres``).
BACKENDS = "langgraph_kgmem.kg.backends"
#: Third-party modules that belong to one storage backend (its database driver, its LangGraph
#: checkpointer and store): a module importing one is that backend's code.
BACKEND_DRIVERS = ("psycopg", "psycopg_pool", "pgvector", "chromadb", "sqlite3", "aiosqlite",
                   "langgraph.checkpoint.postgres", "langgraph.store.postgres",
                   "langgraph.checkpoint.sqlite", "langgraph.store.sqlite")


def _all_imports(path: Path) -> Iterator[tuple[str, int]]:
    """(module, line) of every runtime import in ``path`` of any package (relative imports are left
    out: the package writes none)."""
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module, node.lineno
            yield from ((f"{node.module}.{a.name}", node.lineno) for a in node.names)


def backend_modules_outside(modules: dict[str, Path]) -> list[tuple[str, str, int]]:
    """(module, what it imports, line) for every module outside ``kg/backends/`` that is backend
    code: it imports a module inside one backend's package (``kg.backends.<backend>.<module>``;
    the package itself, a backend's public face, may be named) or one backend's driver
    (:data:`BACKEND_DRIVERS`). A new backend then touches its package and the registry only."""
    backend_packages = {m for m in modules if m.startswith(BACKENDS + ".") and m.count(".") == 3
                        and modules[m].name == "__init__.py"}
    found: dict[tuple[str, str], int] = {}
    for name, path in modules.items():
        if name == BACKENDS or name.startswith(BACKENDS + "."):
            continue
        for target, line in _all_imports(path):
            driver = next((d for d in BACKEND_DRIVERS if target == d or target.startswith(d + ".")), None)
            if driver is None and not (target in modules and any(target.startswith(p + ".") for p in backend_packages)):
                continue
            key = (name, driver or target)
            found[key] = min(line, found.get(key, line))   # the first line that imports it
    return sorted((module, target, line) for (module, target), line in found.items())


#: The most names the package's ``__all__`` lists may hold together: what users import, not every
#: name another module of the package uses (those need no ``__all__``).
MAX_PUBLIC_NAMES = 150


def _literal_all(tree: ast.Module) -> list[str] | None:
    """The names a module's top-level ``__all__ = [...]`` (and ``+= [...]``) lists, or None."""
    names: list[str] | None = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            value = ast.literal_eval(node.value)
            names = [*(names or []), *value] if isinstance(node, ast.AugAssign) else list(value)
    return names


def _type_checking_imports(tree: ast.Module) -> list[str]:
    """The names a module imports under a top-level ``if TYPE_CHECKING:``."""
    return [alias.asname or alias.name for node in tree.body
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for imp in node.body if isinstance(imp, ast.ImportFrom) for alias in imp.names]


def public_api(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Module -> the names its ``__all__`` lists, for every module with one. A package root whose
    ``__all__`` is computed (``langgraph_kgmem``'s lazy exports, listed in ``__getattr__``) counts
    the names it spells out under ``if TYPE_CHECKING:`` (``tests/test_docs.py`` holds the two equal)."""
    out: dict[str, list[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names = _literal_all(tree)
        if names is None and "." not in name and "__all__" in path.read_text(encoding="utf-8"):
            names = _type_checking_imports(tree)
        if names is not None:
            out[name] = names
    return out


def module_sizes(modules: dict[str, Path]) -> list[tuple[str, int]]:
    """Modules by falling line count."""
    return sorted(((m, len(p.read_text(encoding="utf-8").splitlines())) for m, p in modules.items()),
                  key=lambda x: -x[1])


def main(argv: list[str] | None = None) -> int:
    """Print the package's import cycles, private-name imports and largest modules and functions."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=str(ROOT), help="repository root (default: this one)")
    ap.add_argument("--top", type=int, default=8, help="how many modules and functions to list (default 8)")
    args = ap.parse_args(argv)
    modules = module_files(Path(args.root) / "langgraph_kgmem", "langgraph_kgmem")
    imports = module_imports(modules)
    print("import cycles (strongly connected components):")
    for c in import_cycles(import_graph(imports, modules)) or [["none"]]:
        print(f"  {len(c)}: {', '.join(c)}" if c != ["none"] else "  none")
    print(f"private names imported across modules: {len(private_imports(imports))}")
    upward = upward_imports(imports)
    print(f"imports up a layer ({' <- '.join(LAYERS)}): {len({(i.importer, i.line, i.target) for i in upward})}")
    for importer, line, target in sorted({(i.importer, i.line, i.target) for i in upward}):
        print(f"  {importer}:{line} -> {target}")
    outside = backend_modules_outside(modules)
    print(f"backend-specific modules outside {BACKENDS.replace('.', '/')}/: {len({m for m, _, _ in outside})}")
    for module, target, line in outside:
        print(f"  {module}:{line} imports {target}")
    api = public_api(modules)
    print(f"public names in __all__: {sum(map(len, api.values()))} in {len(api)} modules (at most {MAX_PUBLIC_NAMES})")
    print("largest modules (lines):")
    for m, n in module_sizes(modules)[:args.top]:
        print(f"  {n:5d} {m}")
    print("largest functions (lines):")
    for f, n in sorted(long_functions(modules, 0), key=lambda x: -x[1])[:args.top]:
        print(f"  {n:5d} {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
