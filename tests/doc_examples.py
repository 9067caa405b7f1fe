"""The Python examples of README.md and docs/**/*.md, found and run the same way everywhere.

A ```python block runs as it is written. Blocks of one page share one namespace and run in page
order, so a page can set up a KG in its first block and use it in the next ones (tests/test_docs.py
runs them, in a fresh working directory).

A block that needs something only a particular test can give (a model server, a PostgreSQL
database, a fake LangSmith endpoint) says so on its first line::

    # needs local_llm: a GGUF served over the OpenAI API on 127.0.0.1, used through ChatOpenAI

The page run leaves it out, and the test that owns that fixture runs it with
``run_doc_example("local_llm")``; tests/test_docs.py checks that every such block has an owner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a fenced block: its info string (language) and body; fences nested in lists are indented
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
NEEDS = re.compile(r"#\s*needs\s+(?P<needs>[\w-]+)\s*:")


@dataclass(frozen=True)
class DocBlock:
    """One fenced code block of a documentation page."""

    page: str          # path relative to the repository root, e.g. "docs/methods/catrag.md"
    line: int          # line of the opening fence (1-based)
    language: str      # the fence's info string, e.g. "python", "bash"
    code: str
    needs: str | None  # the fixture a "# needs <fixture>:" first line names, else None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages() -> list[Path]:
    """README.md and every Markdown page of the documentation site, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_blocks(page: Path) -> list[DocBlock]:
    """The fenced code blocks of ``page`` in order, their bodies dedented to the fence's indent."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        indent = match.group("indent")
        body = "".join(line[len(indent):] if line.startswith(indent) else line
                       for line in match.group("body").splitlines(keepends=True))
        first = body.split("\n", 1)[0]
        needs = NEEDS.match(first)
        blocks.append(DocBlock(page=str(page.relative_to(ROOT)), line=text.count("\n", 0, match.start()) + 1,
                               language=match.group("info").strip(), code=body,
                               needs=needs.group("needs") if needs else None))
    return blocks


def all_blocks() -> list[DocBlock]:
    return [block for page in doc_pages() for block in page_blocks(page)]


def execute(block: DocBlock, namespace: dict) -> dict:
    """Run one block in ``namespace``; tracebacks name the page and line of the block."""
    padded = "\n" * block.line + block.code   # so that traceback line numbers are the page's
    exec(compile(padded, block.page, "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def run_doc_example(needs: str, **names: object) -> dict:
    """Run the one block whose first line is ``# needs <needs>: ...``, verbatim, with ``names``
    defined beforehand (what the fixture provides, e.g. ``uri``); returns its namespace."""
    found = [block for block in all_blocks() if block.needs == needs]
    assert len(found) == 1, f"expected one '# needs {needs}:' example in README/docs, found {len(found)}"
    return execute(found[0], dict(names))
