"""The KG layer imports nothing above it: ``kg/`` is the core every other package builds on, so an
import from ``kg/`` into ingestion, memory, the public class or the methods would be a cycle (and
was one). Every import counts, also inside functions and under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)
from code_metrics import backend_modules_outside, module_files

PACKAGE = Path(__file__).resolve().parents[1] / "langgraph_kgmem"
ABOVE_KG = ("langgraph_kgmem.ingest", "langgraph_kgmem.knowledge_graph", "langgraph_kgmem.memory",
            "langgraph_kgmem.persistence", "langgraph_kgmem.migrate", "langgraph_kgmem.graphs",
            "langgraph_kgmem.agent_tools", "langgraph_kgmem.agents", "langgraph_kgmem.cli", "langgraph_kgmem.serve",
            "langgraph_kgmem.view")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _kg_modules() -> list[Path]:
    return sorted((PACKAGE / "kg").rglob("*.py"))


def test_the_kg_layer_imports_nothing_above_it():
    upward = {str(p.relative_to(PACKAGE)): sorted(i for i in _imports(p) if i.startswith(ABOVE_KG))
              for p in _kg_modules()}
    assert {k: v for k, v in upward.items() if v} == {}


def test_the_check_sees_an_upward_import(tmp_path):
    """The walk above finds imports inside functions too (a test that cannot fail guards nothing)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from langgraph_kgmem.ingest.records import add_records\n")
    assert "langgraph_kgmem.ingest.records" in _imports(probe)


def test_no_backend_specific_module_lives_outside_the_backends_package():
    """A backend is one package under ``kg/backends/``: no module elsewhere imports a backend's
    modules or its driver (``tools/code_metrics.py`` reports the same list), so a new backend
    touches its package and its registry line, and nothing else."""
    assert backend_modules_outside(module_files(PACKAGE, "langgraph_kgmem")) == []


def test_the_backend_check_sees_driver_and_backend_imports(tmp_path):
    """The rule above can fail: a module importing a driver inside a function, or a backend's
    module, is found; a backend's own modules and its package's public face are not."""
    pkg = tmp_path / "langgraph_kgmem"
    for folder in ("kg/backends/pg", "memory"):
        (pkg / folder).mkdir(parents=True)
    for init in ("", "kg", "kg/backends", "kg/backends/pg", "memory"):
        (pkg / init / "__init__.py").write_text("")
    (pkg / "kg/backends/pg/pool.py").write_text("import psycopg\n")
    (pkg / "memory/locks.py").write_text("def lock():\n    import psycopg\n")
    (pkg / "memory/view.py").write_text("from langgraph_kgmem.kg.backends.pg.pool import x\n")
    (pkg / "memory/ok.py").write_text("from langgraph_kgmem.kg.backends.pg import x\n")
    found = backend_modules_outside(module_files(pkg, "langgraph_kgmem"))
    assert found == [("langgraph_kgmem.memory.locks", "psycopg", 2),
                     ("langgraph_kgmem.memory.view", "langgraph_kgmem.kg.backends.pg.pool", 1)]


def test_no_module_reaches_into_a_backend_other_than_through_the_registry():
    """URIs and paths are told apart in one place: the backends' own ``claims``. Only the
    backends package names a backend module's URI test."""
    outside = [p for p in PACKAGE.rglob("*.py") if "backends" not in p.parts]
    users = [str(p.relative_to(PACKAGE)) for p in outside if "is_postgres_uri" in p.read_text(encoding="utf-8")]
    assert users == []
