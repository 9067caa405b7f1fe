"""The documentation: the site builds without a warning, and every Python example in README.md and
docs/ runs (here, page by page, or by the test that owns the fixture it needs)."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from doc_examples import ROOT, DocBlock, all_blocks, doc_pages, execute, page_blocks, run_doc_example

PYTHON_SPELLINGS = {"py", "python3", "pycon", "Python", "ipython"}   # would escape the runner unseen


def _pages_with_examples() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in doc_pages()
            if any(b.language == "python" and b.needs is None for b in page_blocks(p))]


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert "No module named mkdocs" not in log, "mkdocs is missing: install the docs extra (make test does)"
    assert proc.returncode == 0, log[-4000:]
    assert not re.search(r"^WARNING", log, re.M), log[-4000:]
    assert (tmp_path / "site" / "reference" / "knowledge-graph" / "index.html").read_text().count(
        'id="langgraph_kgmem.KnowledgeGraph.add_documents"') == 1, "the API reference lost KnowledgeGraph"


@pytest.mark.parametrize("page", _pages_with_examples())
def test_the_pages_python_examples_run(page, tmp_path, monkeypatch):
    """Every block of the page that needs no fixture, verbatim, in page order, in one namespace, in
    an empty working directory. KGMEM_EMBEDDINGS=hash stands in for the default embedding model
    where an example leaves the choice to it (the model's own tests are elsewhere)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KGMEM_EMBEDDINGS", "hash")
    namespace: dict = {"__name__": "__doc_example__"}
    for block in page_blocks(ROOT / page):
        if block.language == "python" and block.needs is None:
            execute(block, namespace)
    kg = namespace.get("kg")
    if kg is not None and hasattr(kg, "close"):
        kg.close()


def test_every_python_example_is_run_by_some_test():
    """A block that needs a fixture is run by the test owning it: some test calls
    run_doc_example("<fixture>") for each, and no block hides behind another language name."""
    blocks = all_blocks()
    wrongly_named = [b.where for b in blocks if b.language in PYTHON_SPELLINGS]
    assert not wrongly_named, f"write these fences as ```python so that they run: {wrongly_named}"
    owners: dict[str, list[str]] = {}
    for test_file in sorted((ROOT / "tests").glob("test_*.py")):
        for needs in re.findall(r"run_doc_example\(\s*[\"']([\w-]+)[\"']", test_file.read_text(encoding="utf-8")):
            owners.setdefault(needs, []).append(test_file.name)
    needing = [b for b in blocks if b.language == "python" and b.needs]
    unowned = [f"{b.where} (needs {b.needs})" for b in needing if b.needs not in owners]
    assert not unowned, f"no test runs these examples: {unowned}"
    assert len({b.needs for b in needing}) == len(needing), "two examples declare the same '# needs' name"
    assert sum(b.language == "python" for b in blocks) >= 20, "the example finder found too few blocks"


def test_a_broken_example_fails_with_its_page_and_line():
    block = DocBlock(page="docs/x.md", line=40, language="python", code="x = 1\nraise ValueError('boom')\n", needs=None)
    with pytest.raises(ValueError) as info:
        execute(block, {})
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(frame.filename == "docs/x.md" and frame.lineno == 42 for frame in frames)


def test_run_doc_example_refuses_an_unknown_fixture():
    with pytest.raises(AssertionError, match="needs no_such_fixture"):
        run_doc_example("no_such_fixture")


@pytest.mark.integration
def test_the_postgresql_examples_run(new_database):
    """The PostgreSQL page's examples, verbatim, on a new database of the test server."""
    uri = new_database()
    first = run_doc_example("postgres_uri", uri=uri)
    kg = first["kg"]
    try:
        assert first["out"]["answer"] and kg.stats()["backend"] == "postgres"
        seed = kg.nearest("Warsaw", k=1, kinds=("entity",))[0][0].id
    finally:
        kg.close()
    lazy = run_doc_example("postgres_kg", uri=uri, seed=seed)
    assert lazy["scores"], "the lazy reader found no PageRank mass from a seed of the KG"


def test_the_tracing_example_uploads_its_run(fake_langsmith):
    """The tracing page's example, verbatim, against a LangSmith endpoint on 127.0.0.1."""
    namespace = run_doc_example("fake_langsmith")
    namespace["tracer"].client.flush()
    assert namespace["out"]["method"] == "remindrag"
    assert "kgmem.remindrag" in "\n".join(fake_langsmith), "no run of the example reached LangSmith"


def _kgmem_lines() -> list[tuple[str, str]]:
    lines = []
    for block in all_blocks():
        if block.language in {"bash", "sh", "console"}:
            for line in block.code.splitlines():
                command = line.split("  #")[0].strip()
                if command.startswith("kgmem "):
                    lines.append((block.where, command))
    return lines


@pytest.mark.parametrize(("where", "command"), _kgmem_lines())
def test_documented_kgmem_command_lines_parse(where, command):
    """Each documented `kgmem` line parses with the CLI's own parser (optional parts in [..] removed)."""
    from langgraph_kgmem.cli import build_parser

    without_options = re.sub(r"\[[^\]]*\]", "", command)
    argv = shlex.split(without_options)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: `{command}` does not parse (exit {exc.code})")


def test_the_package_roots_type_checking_imports_match_its_lazy_exports():
    """The API reference resolves `langgraph_kgmem.<name>` through the TYPE_CHECKING imports."""
    import langgraph_kgmem

    tree = ast.parse(Path(langgraph_kgmem.__file__).read_text(encoding="utf-8"))
    guarded = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                guarded.update({alias.name: imp.module for alias in imp.names})
    assert set(guarded) == set(langgraph_kgmem.__all__)
    for name, module in guarded.items():
        assert getattr(importlib.import_module(module), name) is getattr(langgraph_kgmem, name), name
