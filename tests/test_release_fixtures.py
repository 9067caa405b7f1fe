"""KGs written by earlier releases open, migrate forward and answer as they did.

Each folder under ``tests/fixtures/releases/`` was written once by the release it is named after
(``tools/release_fixture.py``): an embedded KG directory with its memory and checkpoints, a
``pg_dump`` of the same on PostgreSQL, and what every method answered then. This test opens copies
of them with today's code, so a schema change that strands a user's KG, memory or checkpoints fails
here, not in their deployment.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
from pathlib import Path

import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import KgmemSchemaUpgradeWarning, SchemaVersionError
from langgraph_kgmem.graphs.registry import get_factory
from langgraph_kgmem.kg.backends.schema import SCHEMA_VERSION
from langgraph_kgmem.kg.backends.postgres.testing import restore_dump

RELEASES = sorted(p for p in (Path(__file__).parent / "fixtures" / "releases").iterdir() if p.is_dir())
KG_NAME = "release"


def _expected(release: Path, backend: str) -> dict:
    return json.loads((release / "expected.json").read_text(encoding="utf-8"))[backend]


def _rows(path: Path) -> dict[str, list[tuple]]:
    """Every row of the KG tables a release wrote (columns in the order that release had them)."""
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as conn:   # creates or changes no file
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                             "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}


def _ask_again(kg: KnowledgeGraph, expected: dict) -> None:
    """Every method answers its question as the release did (the second asking reads the memory the
    release stored) and the release's checkpoints are still readable."""
    checkpointer, store = kg.persistence()
    for method, case in sorted(expected.items()):
        if method.startswith("_"):
            continue
        factory, preset = get_factory(method)
        app = factory(kg, model="offline", store=store, **preset).compile(checkpointer=checkpointer, store=store)
        first, second = case["runs"]
        state = app.get_state({"configurable": {"thread_id": first["thread_id"]}})
        assert state.values.get("answer") == first["answer"], f"{method}: the release's checkpoint reads back"
        out = app.invoke({"question": case["question"]}, {"configurable": {"thread_id": f"{method}-again"}})
        now = case.get("now", second)   # re-taken after a deliberate change to what the method answers
        assert out["answer"] == now["answer"], method
        assert [e["id"] for e in out["evidence"]] == now["evidence"], method


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
def test_embedded_release_opens_migrates_and_answers(release, tmp_path):
    copy = tmp_path / "kg"
    shutil.copytree(release / "kg", copy, ignore=shutil.ignore_patterns("*.lock*"))
    before = _rows(copy / "kg.sqlite")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kg = KnowledgeGraph.open(copy, name=KG_NAME, embeddings="hash", create=False)
    try:
        upgraded = [w for w in caught if issubclass(w.category, KgmemSchemaUpgradeWarning)]
        if _expected(release, "embedded").get("_schema_version") != SCHEMA_VERSION:
            assert upgraded, "an older KG is migrated with a warning, never silently"
        assert kg.schema_version == SCHEMA_VERSION
        after = _rows(copy / "kg.sqlite")
        for table, rows in before.items():   # every row the release wrote is still there, unchanged
            width = len(rows[0]) if rows else 0
            kept = {r[:width] for r in after[table]}
            assert [r for r in rows if r not in kept] == [], table
        _ask_again(kg, _expected(release, "embedded"))
    finally:
        kg.close()
    with warnings.catch_warnings():   # reopening a migrated KG runs nothing and says nothing
        warnings.simplefilter("error", KgmemSchemaUpgradeWarning)
        KnowledgeGraph.open(copy, name=KG_NAME, embeddings="hash", create=False).close()


@pytest.mark.integration
@pytest.mark.parametrize("release", [r for r in RELEASES if (r / "postgres.sql").exists()], ids=lambda p: p.name)
def test_postgres_release_opens_migrates_and_answers(release, new_database):
    uri = new_database()
    restore_dump(release / "postgres.sql", uri)
    with pytest.warns(KgmemSchemaUpgradeWarning) if _expected(release, "postgres").get("_schema_version") \
            != SCHEMA_VERSION else warnings.catch_warnings():
        kg = KnowledgeGraph.open(uri, name=KG_NAME, embeddings="hash", create=False)
    try:
        assert kg.schema_version == SCHEMA_VERSION
        embedded = {r[0] for r in _rows(release / "kg" / "kg.sqlite")["documents"]}
        assert {d["id"] for d in kg.documents()} == embedded   # the same KG, written to the other backend
        _ask_again(kg, _expected(release, "postgres"))
    finally:
        kg.close()


def test_a_newer_schema_is_refused_unchanged(tmp_path):
    """A KG written by a later release (a higher version than this one knows) is refused before
    anything is written: an older package must never half-read or 'repair' it."""
    path = tmp_path / "kg"
    KnowledgeGraph.open(path, name="k", embeddings="hash").close()
    with sqlite3.connect(path / "kg.sqlite") as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = (path / "kg.sqlite").read_bytes()
    with pytest.raises(SchemaVersionError, match="newer release"):
        KnowledgeGraph.open(path, name="k", embeddings="hash", create=False)
    assert (path / "kg.sqlite").read_bytes() == before


def test_a_failed_migration_leaves_the_old_schema(tmp_path, monkeypatch):
    """The migration runs in one transaction: a step that fails leaves the file at its old version
    with its old tables, so the release that wrote it still opens it."""
    from langgraph_kgmem.kg.backends import schema

    release = RELEASES[0]
    copy = tmp_path / "kg"
    shutil.copytree(release / "kg", copy, ignore=shutil.ignore_patterns("*.lock*"))
    before = _rows(copy / "kg.sqlite")
    broken = schema.Migration(schema.SCHEMA_VERSION, "broken", sqlite=(*schema.MIGRATIONS[-1].sqlite, "SELECT nope"),
                              postgres=(), added_columns=schema.MIGRATIONS[-1].added_columns)
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS[:-1], broken))
    with pytest.raises(Exception):
        KnowledgeGraph.open(copy, name=KG_NAME, embeddings="hash", create=False)
    with sqlite3.connect(copy / "kg.sqlite") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert _rows(copy / "kg.sqlite") == before


def test_new_kgs_are_created_at_the_current_version(tmp_path):
    with KnowledgeGraph.open(tmp_path / "kg", name="k", embeddings="hash") as kg:
        assert kg.schema_version == SCHEMA_VERSION
        kg.writer.put_document("d", title="t", status="done", content_hash="abc")
        assert kg.document("d")["content_hash"] == "abc"


def test_kgmem_migrate_upgrade_says_what_it_did(tmp_path, capsys):
    from langgraph_kgmem.cli import main

    copy = tmp_path / "kg"
    shutil.copytree(RELEASES[0] / "kg", copy, ignore=shutil.ignore_patterns("*.lock*"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KgmemSchemaUpgradeWarning)
        assert main(["migrate", "--upgrade", str(copy), "--embeddings", "hash"]) == 0
        assert f"schema version 1 -> {SCHEMA_VERSION}" in capsys.readouterr().out
        assert main(["migrate", "--upgrade", str(copy), "--embeddings", "hash"]) == 0
        assert "nothing to do" in capsys.readouterr().out
