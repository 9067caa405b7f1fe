"""A method declares its own memory (issue 41, item 2): the kinds of memory each method keeps, and
how ``kgmem memory`` shows them, come from its ``MethodSpec``; the memory layer names none of them
and imports nothing from the methods' layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.registry import memory_kinds, method_specs
from langgraph_kgmem.graphs.spec import MethodSpec
from langgraph_kgmem.memory import KINDS, SYSTEM_KINDS
from langgraph_kgmem.memory.kinds import MemoryKind, memory_kind, register_kind, unregister_kind

MEMORY = Path(__file__).resolve().parents[1] / "langgraph_kgmem" / "memory"


def test_every_kind_comes_from_a_methods_spec():
    declared = {k.short: k.label for spec in method_specs() for k in spec.memory}
    assert declared == dict(KINDS)
    assert declared == {"codebook": "codebook", "edge": "edge_memory", "reflection": "reflections",
                        "summary": "summaries", "trajectory": "trajectories"}
    owner = {k.label: spec.name for spec in method_specs() for k in spec.memory}
    assert owner == {"codebook": "autopruned", "edge_memory": "remindrag", "reflections": "r3cycle",
                     "summaries": "catrag", "trajectories": "r3cycle"}
    assert [k.short for k in memory_kinds()] == sorted(declared)
    assert not set(declared.values()) & SYSTEM_KINDS


def test_the_memory_layer_imports_nothing_from_the_methods():
    """Every import counts, also inside functions and under ``TYPE_CHECKING``."""
    found = []
    for path in sorted(MEMORY.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.name}: {n}" for n in names if n.startswith("langgraph_kgmem.graphs")]
    assert found == []


def _string_literals(path: Path) -> set[str]:
    """The string constants of a module's code (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs}


def test_no_methods_kind_label_is_written_in_the_memory_layer():
    """The labels live in the methods' packages: a new method touches nothing in memory/
    (provenance.py still knows how a codebook page and an edge memory are re-checked)."""
    labels = {k.label for spec in method_specs() for k in spec.memory}
    labels -= {"edge_memory"}   # EdgeMemory, the store type of per-edge vectors, is the memory layer's own
    hits = {p.name: sorted(_string_literals(p) & labels) for p in sorted(MEMORY.rglob("*.py"))
            if p.name != "provenance.py"}
    assert {k: v for k, v in hits.items() if v} == {}


def test_a_spec_registers_its_kinds_and_a_clash_is_refused():
    spec = method_specs()[0]
    probe = MemoryKind(label="probe_notes", short="probe", title="Probe notes")
    try:
        MethodSpec(name="probe", factory=spec.factory, options=spec.options, summary="s", description="d",
                   agent_description="a", memory=(probe,))
        assert memory_kind("probe_notes") is probe and KINDS["probe"] == "probe_notes"
        with pytest.raises(KgmemInputError, match="clashes with the registered kind 'probe_notes'"):
            register_kind(MemoryKind(label="other", short="probe", title="t"))
        with pytest.raises(KgmemInputError, match="clashes"):
            register_kind(MemoryKind(label="probe_notes", short="other", title="t"))
    finally:
        unregister_kind("probe_notes")
    with pytest.raises(ValueError, match="system kind"):
        MethodSpec(name="probe", factory=spec.factory, options=spec.options, summary="s", description="d",
                   agent_description="a", memory=(MemoryKind(label="runs", short="run", title="t"),))
    assert memory_kind("runs") is None
    with pytest.raises(KgmemInputError, match="summarise and format_summary come together"):
        MemoryKind(label="x", short="x", title="x", summarise=lambda kg, store, scope, limit: {})


def test_the_view_reads_a_kind_from_its_spec(text_kg):
    """A kind's describer, ranking and formatter decide what ``kgmem memory`` shows of it."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.memory import RecordMemory
    from langgraph_kgmem.memory.view import describe_memory, format_memory

    kind = MemoryKind(label="probe_notes", short="probe", title="Probe notes: what the probe kept",
                      describe=lambda kg, key, value: {"key": key, "n": value["n"]},
                      format=lambda r: [f"  note {r['key']} = {r['n']}"], rank=lambda r: -r["n"])
    register_kind(kind)
    try:
        store = InMemoryStore()
        notes = RecordMemory(store, text_kg.name, "probe_notes")
        for key, n in (("a", 1), ("b", 3), ("c", 2)):
            notes.put(key, {"n": n})
        listing = describe_memory(text_kg, store, "probe")
        assert [r["key"] for r in listing[0]["records"]] == ["b", "c", "a"]
        text = format_memory(listing, text_kg.name)
        assert text.splitlines() == ["Probe notes: what the probe kept (--kind probe), scope (shared): 3 item(s)",
                                     "  note b = 3", "  note c = 2", "  note a = 1"]
    finally:
        unregister_kind("probe_notes")


def test_a_fresh_process_lists_and_resets_memory_without_importing_a_method_first(tmp_path):
    """``kg.memory()`` and ``kg.reset_memory(kind)`` load the methods' kinds themselves."""
    code = f"""
import sys
from langgraph_kgmem import KnowledgeGraph
kg = KnowledgeGraph.open({str(tmp_path / "kg")!r}, name="fresh", embeddings="hash")
assert not any(m.startswith("langgraph_kgmem.graphs.") for m in sys.modules), sorted(sys.modules)
print(kg.memory(), kg.reset_memory("codebook"))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] 0"


def test_a_process_that_imported_no_method_still_knows_every_kind():
    # a tenant label equal to a method's kind must be refused whatever has been imported, or its
    # memory sits below that kind's shared memory; and EdgeMemory works before ReMindRAG is imported
    code = (
        "import sys\n"
        "from langgraph.store.memory import InMemoryStore\n"
        "from langgraph_kgmem import KnowledgeGraph\n"
        "from langgraph_kgmem.errors import KgmemInputError\n"
        "from langgraph_kgmem.memory import EdgeMemory, check_scope_label\n"
        "assert not any(m.startswith('langgraph_kgmem.graphs.autopruned') for m in sys.modules)\n"
        "try:\n"
        "    check_scope_label('codebook')\n"
        "except KgmemInputError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('codebook accepted as a tenant label')\n"
        "EdgeMemory(InMemoryStore(), 'kg', 8)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
