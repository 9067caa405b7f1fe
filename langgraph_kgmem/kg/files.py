"""Files of an embedded KG directory: private permissions and the memory backend's vector files.

A KG directory holds documents and memories a user may not want other local accounts to read, so
it is created 0700 and every file the package writes there 0600 (SQLite's -wal/-shm files take
the mode of their database). Nothing read from the directory is ever unpickled: ``vectors.npz``
and ``vectors.journal`` hold plain arrays only. Files written by older versions stored ids as
pickled object arrays; those are read once through an allow-list unpickler that can build numpy
string arrays and nothing else, then rewritten without pickles.

Vector persistence of the memory backend: ``vectors.npz`` holds every vector as of the last save;
``vectors.journal`` holds the vectors added since, appended by each outermost write transaction
just before it commits (cost proportional to what the transaction added). Deletions are not
journaled: vectors whose node or edge is gone are dropped at open. The journal is folded into the
npz at close and when it outgrows both the npz and :data:`JOURNAL_COMPACT_BYTES`.

The Chroma backend journals the same way (``chroma.journal``): each transaction's vectors are
appended there before it commits, and go to Chroma in one upsert per space once
:data:`~langgraph_kgmem.kg.vectors.CHROMA_FLUSH_ROWS` have gathered (and at close, and before a
delete); an open after a crash replays the journal into Chroma.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
VECTORS_FILE = "vectors.npz"
JOURNAL_FILE = "vectors.journal"
CHROMA_JOURNAL_FILE = "chroma.journal"
JOURNAL_COMPACT_BYTES = 8 << 20


def detect_vector_backend(root: Path, asked: str | None) -> str:
    """The vector backend of KG directory ``root``: the one its files show, else ``asked``, else
    Chroma. Asking for the other one than the files show is an error (its vectors would be
    missing, and every search empty)."""
    from langgraph_kgmem.errors import KgmemInputError

    has_npz = (root / VECTORS_FILE).exists() or (root / JOURNAL_FILE).exists()
    has_chroma = (root / "chroma").exists()
    found = "memory" if has_npz and not has_chroma else "chroma" if has_chroma else None
    if asked is not None and asked not in ("chroma", "memory"):
        raise KgmemInputError(f"vector_backend={asked!r}: use 'chroma' or 'memory'")
    if found is not None and asked is not None and asked != found:
        raise KgmemInputError(
            f"{root} keeps its vectors in the {found!r} backend, not {asked!r}: open it with "
            f"vector_backend={found!r} (or leave it out), or migrate it with `kgmem migrate`")
    return found or asked or "chroma"


def private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with the new directory itself 0700."""
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    if created:
        path.chmod(PRIVATE_DIR)


def private_file(path: Path) -> Path:
    """Create ``path`` empty with mode 0600 unless it exists (so a library that opens it later,
    e.g. SQLite, keeps that mode); returns ``path``."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE))
    except FileExistsError:
        pass
    return path


def restrict_tree(root: Path) -> None:
    """Make everything under ``root`` private (0700 folders, 0600 files): for stores that create
    files with the process umask (Chroma's segment files)."""
    if root.is_dir():
        _chmod(root, PRIVATE_DIR)
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            _chmod(Path(dirpath, d), PRIVATE_DIR)
        for f in filenames:
            _chmod(Path(dirpath, f), PRIVATE_FILE)


def _chmod(path: Path, mode: int) -> None:
    try:
        if not path.is_symlink() and (path.stat().st_mode & 0o777) != mode:
            path.chmod(mode)
    except OSError:  # pragma: no cover - a file removed meanwhile
        pass


# ------------------------------------------------------------------------------- vectors on disk

class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Builds numpy arrays of plain Python values and refuses every other class or function."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_legacy_npz(path: Path) -> dict[str, np.ndarray]:
    """Arrays of an npz that may hold pickled object arrays of strings (old format), safely."""
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as zf:
        for member in zf.namelist():
            raw = zf.read(member)
            fh = io.BytesIO(raw)
            version = np.lib.format.read_magic(fh)
            shape, _, dtype = (np.lib.format.read_array_header_1_0(fh) if version == (1, 0)
                               else np.lib.format.read_array_header_2_0(fh))
            if dtype.hasobject:
                arr = _NumpyOnlyUnpickler(fh).load()
                if not isinstance(arr, np.ndarray) or not all(isinstance(x, str) for x in arr.ravel()):
                    raise pickle.UnpicklingError(f"{member} is not an array of strings")
                arr = np.asarray(arr.tolist(), dtype=str).reshape(shape)
            else:
                arr = np.load(io.BytesIO(raw), allow_pickle=False)
            out[member.removesuffix(".npy")] = arr
    return out


def kinds_of(index: Any, space: str, ids: Sequence[str]) -> list[str]:
    s = index._space(space)
    return [s.kinds[s.row[i]] for i in ids]


def save_npz_vectors(root: Path, index: Any) -> None:
    """Write every vector to vectors.npz (atomically, 0600, no pickles) and drop the journal."""
    arrays: dict[str, Any] = {}
    for space in ("nodes", "facts"):
        ids, mat = index.matrix(space)
        arrays[f"{space}_ids"] = np.asarray(ids, dtype=str)
        arrays[f"{space}_kinds"] = np.asarray(kinds_of(index, space, ids), dtype=str)
        arrays[f"{space}_mat"] = mat
    tmp = root / (VECTORS_FILE + ".tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE), "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, root / VECTORS_FILE)
    (root / JOURNAL_FILE).unlink(missing_ok=True)
    for space in ("nodes", "facts"):
        index.take_dirty(space)


def write_journal(path: Path, records: Sequence[tuple[str, Sequence[str], Sequence[str], np.ndarray]]) -> None:
    """Append ``(space, ids, kinds, rows)`` records to the vector journal ``path`` (0600): per record
    four plain .npy arrays. Like the structure's SQLite (WAL, ``synchronous=NORMAL``) it survives a
    crash of the process; it is not fsynced per transaction."""
    journal = private_file(path)
    with open(journal, "ab") as fh:
        for space, ids, kinds, rows in records:
            for arr in (np.asarray([space]), np.asarray(ids, dtype=str), np.asarray(kinds, dtype=str),
                        np.asarray(rows, dtype=np.float32)):
                np.save(fh, arr, allow_pickle=False)


def read_journal(path: Path) -> Iterator[tuple[str, list[str], list[str], np.ndarray]]:
    """The records of the vector journal ``path`` in order; a record cut short by a crash ends it.
    Plain arrays only (``allow_pickle=False``): nothing in it is executed."""
    if not path.exists():
        return
    with open(path, "rb") as fh:
        while True:
            try:
                space, ids, kinds, mat = (np.load(fh, allow_pickle=False) for _ in range(4))
            except (EOFError, ValueError, OSError):  # the end, or a record cut short by a crash
                return
            yield str(space[0]), [str(x) for x in ids], [str(k) for k in kinds], mat


def replay_journal(path: Path, index: Any) -> None:
    """Upsert every record of the vector journal ``path`` into ``index``.

    Raises:
        NotAKnowledgeGraphError: a record that is not vectors of the KG's dimension, one per id,
            finite (a tampered or foreign file); nothing in it was executed.
    """
    for space, ids, kinds, mat in read_journal(path):
        try:
            if space not in ("nodes", "facts") or len(kinds) != len(ids):
                raise KgmemInputError(f"a record for space {space!r} with {len(ids)} ids and {len(kinds)} kinds")
            index.upsert(space, ids, mat, kinds, normalized=True)
        except KgmemInputError as exc:
            raise NotAKnowledgeGraphError(
                f"{path} holds vectors this KG cannot take ({exc}); nothing in it was executed. Move the file "
                "away to open the KG without them (nodes without a vector are not found by vector search), "
                "or restore the directory from a backup") from exc


def append_vector_journal(root: Path, index: Any) -> None:
    """Append the vectors upserted since the last save (unit rows) to ``vectors.journal``; fold the
    journal into the npz once it outgrows it."""
    todo = [(space, ids) for space in ("nodes", "facts") if (ids := index.take_dirty(space))]
    if not todo:
        return
    journal = root / JOURNAL_FILE
    write_journal(journal, [(space, ids, kinds_of(index, space, ids), index.get(space, ids)) for space, ids in todo])
    base = root / VECTORS_FILE
    if journal.stat().st_size > max(base.stat().st_size if base.exists() else 0, JOURNAL_COMPACT_BYTES):
        save_npz_vectors(root, index)


def load_npz_vectors(root: Path, index: Any) -> bool:
    """Load vectors.npz and the journal into ``index``; returns True when the npz was in the old
    pickled format (the caller rewrites it).

    Raises:
        NotAKnowledgeGraphError: the npz is unreadable or holds anything but arrays of strings
            and numbers (e.g. a planted pickle); nothing in it is executed.
    """
    f = root / VECTORS_FILE
    legacy = False
    if f.exists():
        try:
            try:
                with np.load(f, allow_pickle=False) as npz:
                    data = {k: npz[k] for k in npz.files}
            except ValueError:  # object arrays: written by an older version
                data = _read_legacy_npz(f)
                legacy = True
            for space in ("nodes", "facts"):
                ids = [str(x) for x in data[f"{space}_ids"]]
                if ids:
                    index.upsert(space, ids, data[f"{space}_mat"], [str(x) for x in data[f"{space}_kinds"]],
                                 normalized=True)
        except (pickle.UnpicklingError, zipfile.BadZipFile, KeyError, ValueError, EOFError, OSError) as exc:
            raise NotAKnowledgeGraphError(
                f"{f} is not a valid vector file ({exc}); nothing in it was executed. Restore it from a "
                f"backup, or delete it and re-ingest the documents into a new KG") from exc
    replay_journal(root / JOURNAL_FILE, index)
    return legacy
