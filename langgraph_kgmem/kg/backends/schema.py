"""Schema versions of a stored KG, and the steps that bring an older one forward.

A KG records the version of the schema it was written with (SQLite: the file's ``user_version``;
PostgreSQL: the one-row table ``kgmem_schema``, shared by every KG in the database since the tables
are). Opening a KG written with an older version runs the missing :data:`MIGRATIONS` in one
transaction (nothing is half-migrated: a failure rolls all of it back) and warns with
:class:`~langgraph_kgmem.errors.KgmemSchemaUpgradeWarning`; a KG written by a newer release is
refused with :class:`~langgraph_kgmem.errors.SchemaVersionError` before anything is read or written.

Version 1 is every KG written before versions were recorded (``user_version`` 0, no ``kgmem_schema``
table). A schema change is a new :class:`Migration` appended here, with the tables' new columns in
the backends' ``SCHEMA`` (which new KGs are created from) and a release fixture that proves the
previous release's KGs still open (``tests/test_release_fixtures.py``).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import Mapping

from langgraph_kgmem.errors import KgmemSchemaUpgradeWarning, SchemaVersionError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migration:
    """One step forward: the statements that turn a KG of version ``version - 1`` into ``version``.

    ``added_columns`` names, per table (without the PostgreSQL ``kgmem_`` prefix), the columns the step
    adds, so an older file is checked against the columns it should have (not the current ones)."""

    version: int
    summary: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]
    added_columns: Mapping[str, frozenset[str]] = field(default_factory=dict)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2, "documents record the content hash of the version ingested (what memory records name as "
           "their provenance; empty for documents ingested before)",
        sqlite=("ALTER TABLE documents ADD COLUMN content_hash TEXT NOT NULL DEFAULT ''",),
        postgres=("ALTER TABLE kgmem_documents ADD COLUMN IF NOT EXISTS content_hash TEXT NOT NULL DEFAULT ''",),
        added_columns={"documents": frozenset({"content_hash"})}),
)
SCHEMA_VERSION = MIGRATIONS[-1].version if MIGRATIONS else 1
FIRST_VERSION = 1   # KGs written before versions were recorded


def pending(found: int, where: str) -> tuple[Migration, ...]:
    """The steps a KG of schema ``found`` needs, in order (none when it is current).

    Raises:
        SchemaVersionError: ``found`` is newer than this release knows (written by a later
            langgraph-kgmem) or not a version at all; nothing was changed.
    """
    if not isinstance(found, int) or found < FIRST_VERSION or found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has schema version {found!r}, but this langgraph-kgmem reads versions {FIRST_VERSION} to "
            f"{SCHEMA_VERSION}: it was written by a newer release (upgrade langgraph-kgmem: pip install -U "
            "langgraph-kgmem) or edited by hand. Nothing was changed.")
    return tuple(m for m in MIGRATIONS if m.version > found)


def columns_at(found: int, tables: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """``tables`` (the current columns per table) as a KG of schema ``found`` has them: the columns
    later steps add are left out, so an older file is not taken for a foreign one."""
    out = {name: set(cols) for name, cols in tables.items()}
    for step in MIGRATIONS:
        if step.version > found:
            for table, cols in step.added_columns.items():
                if table in out:
                    out[table] -= cols
    return out


def announce(steps: tuple[Migration, ...], found: int, where: str) -> None:
    """Say (warning + log) that ``where`` was brought from ``found`` to the current version: an
    upgrade is never silent."""
    if not steps:
        return
    what = "; ".join(f"{s.version}: {s.summary}" for s in steps)
    message = f"{where}: schema upgraded from version {found} to {SCHEMA_VERSION} in one transaction ({what})"
    logger.warning(message)
    warnings.warn(KgmemSchemaUpgradeWarning(message, before=found, after=SCHEMA_VERSION), stacklevel=4)
