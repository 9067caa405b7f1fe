"""The shape of the code base (``tools/code_metrics.py`` reads it from the source): no import
cycles, no module using another module's private names, no overlong functions."""

from __future__ import annotations

from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)
from code_metrics import (BENCHLIB, MAX_PUBLIC_NAMES, PACKAGE, ROOT, area, import_cycles, import_graph, long_functions,
                          module_files, module_imports, private_imports, public_api, upward_imports)

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


def test_type_only_imports_point_down_too():
    """Type checkers and documentation tools follow ``TYPE_CHECKING`` imports: they form no cycle either."""
    cycles = import_cycles(import_graph(module_imports(PKG_MODULES, type_only=True), PKG_MODULES))
    assert cycles == [], f"import cycles through type-only imports: {cycles}"


def test_no_module_imports_another_modules_private_names():
    assert private_imports(PKG_IMPORTS) == []


def test_llm_package_imports_nothing_above_it():
    """The model layer sits at the bottom: besides itself it uses only errors, redaction and the
    text-entry check (``storable``, which uses only errors)."""
    allowed = {"langgraph_kgmem.errors", "langgraph_kgmem.redaction", "langgraph_kgmem.storable"}
    upward = [i for i in PKG_IMPORTS if area(i.importer) == "llm" and area(i.target) != "llm"
              and i.target not in allowed]
    assert upward == []


def test_no_import_points_up_a_layer():
    """graphs -> memory -> ingest -> kg -> llm: the memory layer reads how to show a method's memory
    from the method's spec, never from the method's modules (``tools/code_metrics.py`` prints these)."""
    assert [(i.importer, i.target) for i in upward_imports(PKG_IMPORTS)] == []


def test_the_layer_check_sees_an_arrow_up(tmp_path):
    pkg = tmp_path / "langgraph_kgmem"
    for sub in ("memory", "graphs", "kg"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "memory" / "view.py").write_text("def f():\n    from langgraph_kgmem.graphs.thing import x\n")
    (pkg / "graphs" / "thing.py").write_text("from langgraph_kgmem.kg import y\nx = 1\n")
    found = upward_imports(module_imports(module_files(pkg, "langgraph_kgmem")))
    assert [(i.importer, i.target) for i in found] == [("langgraph_kgmem.memory.view", "langgraph_kgmem.graphs.thing")]


def test_the_public_surface_stays_small():
    """``__all__`` lists what users import (the root, errors, llm, kg, memory, the methods' packages
    ...), not every name another module uses: together at most ``MAX_PUBLIC_NAMES``;
    ``tests/test_public_api.py`` pins the names and their signatures."""
    api = public_api(PKG_MODULES)
    assert sum(map(len, api.values())) <= MAX_PUBLIC_NAMES, {m: len(n) for m, n in api.items()}
    assert "langgraph_kgmem" in api and "KnowledgeGraph" in api["langgraph_kgmem"]


def test_the_public_surface_count_reads_literal_and_lazy_exports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import a, b\n"
                                     "def __getattr__(name):\n    if name == '__all__':\n        return ['a', 'b']\n")
    (pkg / "sub" / "__init__.py").write_text("__all__ = ['a']\n__all__ += ['b']\na = b = 1\n")
    (pkg / "sub" / "inner.py").write_text("x = 1\n")
    assert public_api(module_files(pkg, "pkg")) == {"pkg": ["a", "b"], "pkg.sub": ["a", "b"]}


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
