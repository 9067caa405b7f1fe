"""The KG layer imports nothing above it: ``kg/`` is the core every other package builds on, so an
import from ``kg/`` into ingestion, memory, the public class or the methods would be a cycle (and
was one). Every import counts, also inside functions and under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "langgraph_kgmem"
ABOVE_KG = ("langgraph_kgmem.ingest", "langgraph_kgmem.knowledge_graph", "langgraph_kgmem.memory",
            "langgraph_kgmem.persistence", "langgraph_kgmem.migrate", "langgraph_kgmem.graphs",
            "langgraph_kgmem.tools", "langgraph_kgmem.agents", "langgraph_kgmem.cli", "langgraph_kgmem.serve")


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


def test_no_module_reaches_into_a_backend_other_than_through_the_registry():
    """URIs and paths are told apart in one place: the backends' own ``claims``. Only the
    backends package names a backend module's URI test."""
    outside = [p for p in PACKAGE.rglob("*.py") if "backends" not in p.parts]
    users = [str(p.relative_to(PACKAGE)) for p in outside if "is_postgres_uri" in p.read_text(encoding="utf-8")]
    assert users == []
