"""Import cycles and sizes of the package, read from the source (nothing is imported).

``python tools/code_metrics.py [REPO_ROOT] [--edges PREFIX]`` prints the import cycles among
``langgraph_kgmem`` modules (strongly connected components of the module import graph, with
imports inside functions and under ``TYPE_CHECKING`` counted, and a package ``__init__``'s lazy
exports named as module strings), then the largest modules and functions. ``--edges PREFIX``
also lists the imports of every module whose name starts with PREFIX.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = "langgraph_kgmem"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(name: str, path: Path, tree: ast.Module, modules: set[str]) -> set[str]:
    """The package modules ``name`` imports, anywhere in its source."""
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        elif path.name == "__init__.py" and isinstance(node, ast.Constant) and isinstance(node.value, str):
            targets = [node.value]   # lazy exports: {"Name": "langgraph_kgmem.module"}
        found.update(t for t in targets if t in modules and t != name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--edges", metavar="PREFIX", help="list the imports of modules starting with PREFIX")
    ap.add_argument("--top", type=int, default=8, help="largest modules and functions to list")
    args = ap.parse_args()
    root = Path(args.root)
    paths = {module_name(root, p): p for p in sorted((root / PACKAGE).rglob("*.py"))}
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in paths.items()}
    graph = {m: imports_of(m, paths[m], trees[m], set(paths)) for m in paths}
    short = len(PACKAGE) + 1
    print("import cycles (strongly connected components):")
    for component in cycles(graph) or [["none"]]:
        print(f"  {len(component)}: {', '.join(m[short:] for m in component)}")
    print("largest modules (lines):")
    sizes = sorted(((len(p.read_text(encoding='utf-8').splitlines()), m) for m, p in paths.items()), reverse=True)
    for n, m in sizes[:args.top]:
        print(f"  {n:5d} {m[short:]}")
    print("largest functions (lines):")
    funcs = [(node.end_lineno - node.lineno + 1, f"{m[short:]}:{node.name}") for m, tree in trees.items()
             for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for n, f in sorted(funcs, reverse=True)[:args.top]:
        print(f"  {n:5d} {f}")
    if args.edges:
        for m in sorted(graph):
            if m.startswith(args.edges):
                print(f"{m[short:]} -> {', '.join(sorted(x[short:] for x in graph[m]))}")


if __name__ == "__main__":
    main()
