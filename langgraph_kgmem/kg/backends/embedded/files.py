"""Files of an embedded KG directory: private permissions, no links, and the memory backend's vector files.

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

Nothing there is followed out of the directory: the package opens its own files with
``O_NOFOLLOW``, and before SQLite, Chroma or the lock file open theirs, :func:`check_kg_entries`
refuses a symbolic link or special file among them (in ``chroma/``, at any depth). Arrays are read by :func:`read_npy`, which
checks the size a header claims against the bytes really there before allocating.

A journal whose last record a crash cut short (the append is not fsynced) is replayed up to that
record, which is dropped with a :class:`~langgraph_kgmem.errors.KgmemRecoveryWarning`; bytes that
are not a record at all are an error, not the journal's end.

The Chroma backend journals the same way (``chroma.journal``): each transaction's vectors are
appended there before it commits, and go to Chroma in one upsert per space once
:data:`~langgraph_kgmem.kg.backends.embedded.vectors.CHROMA_FLUSH_ROWS` have gathered (and at
close, and before a delete); an open after a crash replays the journal into Chroma.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import stat
import warnings
import zipfile
from pathlib import Path
from typing import IO, Any, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError, KgmemRecoveryWarning, NotAKnowledgeGraphError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
VECTORS_FILE = "vectors.npz"
JOURNAL_FILE = "vectors.journal"
CHROMA_JOURNAL_FILE = "chroma.journal"
# what the package and its libraries open inside a KG directory (SQLite adds -wal/-shm files)
KG_FILES = (".lock", *(db + suffix for db in ("kg.sqlite", "memory.sqlite") for suffix in ("", "-wal", "-shm",
                                                                                           "-journal")),
            "memory.sqlite.lock-setup", VECTORS_FILE, VECTORS_FILE + ".tmp", JOURNAL_FILE, CHROMA_JOURNAL_FILE)
KG_DIRS = ("chroma",)
KG_FILE_PREFIXES = ("kg.sqlite", "memory.sqlite", "vectors.", "chroma")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
JOURNAL_COMPACT_BYTES = 8 << 20
# the vector spaces a KG directory keeps: "nodes" and "facts" (the graph's rows), and "texts"
# (short texts embedded once per KG, keyed by content: KnowledgeGraphCore.text_vectors)
VECTOR_SPACES = ("nodes", "facts", "texts")


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
    e.g. SQLite, keeps that mode); returns ``path``.

    Raises:
        NotAKnowledgeGraphError: ``path`` is a symbolic link or not a regular file (see
            :func:`check_not_link`).
    """
    try:
        # O_EXCL also fails on a symbolic link (even a dangling one): checked below, not followed
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | _NOFOLLOW, PRIVATE_FILE))
    except FileExistsError:
        check_not_link(path)
    return path


def check_not_link(path: Path, *, directory: bool = False) -> None:
    """Refuse ``path`` inside a KG directory when it is a symbolic link, or not a regular file (a
    directory when ``directory``); a missing path is fine.

    Libraries open some of the KG's files themselves (SQLite, Chroma, the lock), following links:
    a link planted in the directory would send the KG's reads and writes to a file elsewhere.

    Raises:
        NotAKnowledgeGraphError: naming the path, where it points, and what to do.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise NotAKnowledgeGraphError(
            f"{path} is a symbolic link (to {os.readlink(path)!r}): langgraph_kgmem does not follow links inside "
            "a KG directory, so no file there can send the KG's reads or writes elsewhere. Replace the link "
            "with the real file or folder (move it into the KG directory), or remove it")
    if not (stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)):
        raise NotAKnowledgeGraphError(
            f"{path} is not a regular {'directory' if directory else 'file'} (mode {stat.filemode(st.st_mode)}): "
            "a KG directory holds plain files only. Remove it, or restore the directory from a backup")


def check_kg_entries(root: Path) -> None:
    """Refuse a KG directory whose own files or folders are symbolic links or special files
    (:func:`check_not_link` on each name the package or its libraries open there)."""
    for name in KG_FILES:
        check_not_link(root / name)
    # and the ones named at run time: memory's lock stripes (memory.sqlite.lock-NN) and the like
    for entry in os.scandir(root):
        if entry.name.startswith(KG_FILE_PREFIXES) and entry.name not in KG_DIRS:
            check_not_link(root / entry.name)
    for name in KG_DIRS:
        check_not_link(root / name, directory=True)
    # Chroma opens and rewrites the files of its segment folders itself (following links): every
    # folder and file in chroma/, at any depth, must be a real one
    for dirpath, dirnames, filenames in os.walk(root / "chroma"):   # links to folders are listed, not entered
        for name in dirnames:
            check_not_link(Path(dirpath, name), directory=True)
        for name in filenames:
            check_not_link(Path(dirpath, name))


_FLAGS = {"rb": os.O_RDONLY, "r+b": os.O_RDWR, "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT}


def open_in_kg(path: Path, mode: str) -> IO[bytes]:
    """Open a file of a KG directory without following a symbolic link (``rb``, ``r+b``, or ``ab``,
    which creates it 0600).

    Raises:
        NotAKnowledgeGraphError: ``path`` is a symbolic link (see :func:`check_not_link`).
    """
    check_not_link(path)
    try:
        # no-follow closes the gap between that check and this open; non-blocking, so a FIFO put
        # there meanwhile is refused below instead of hanging the open (no effect on regular files)
        fd = os.open(path, _FLAGS[mode] | _NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            check_not_link(path)
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            check_not_link(path)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, mode)


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

class _LegacyArray:
    """What the old format's pickled ``ndarray`` becomes here: its state is checked (an object
    array of at most ``limit`` strings, as many as its shape says) before any array is built, so
    a pickle claiming 2**40 rows is refused, not allocated."""

    def __init__(self) -> None:
        self.limit = 0
        self.array: np.ndarray | None = None

    def __setstate__(self, state: Any) -> None:
        try:
            _, shape, dtype, _, items = state
            count = 1
            for dim in shape:
                count *= int(dim)
        except (TypeError, ValueError) as exc:
            raise pickle.UnpicklingError(f"not the state of a pickled array ({exc})") from None
        if not isinstance(items, list) or count != len(items) or count > self.limit:
            raise pickle.UnpicklingError(f"a pickled array of shape {tuple(shape)} ({count} items) holding "
                                         f"{len(items) if isinstance(items, list) else 'no list of'} items")
        self.array = np.asarray(items, dtype=object).reshape(tuple(int(d) for d in shape))


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Builds arrays of plain Python values (through :class:`_LegacyArray`: numpy's own unpickling
    would allocate whatever shape the pickle claims) and refuses every other class or function."""

    RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}
    ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype")}

    def __init__(self, fh: IO[bytes], limit: int) -> None:
        super().__init__(fh)
        self.limit = limit

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.RECONSTRUCT:
            return self._new_array
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")

    def _new_array(self, *_: Any) -> _LegacyArray:
        arr = _LegacyArray()
        arr.limit = self.limit
        return arr


def _read_npz(path: Path) -> tuple[dict[str, np.ndarray], bool]:
    """The arrays of ``vectors.npz`` and whether it is in the old format (ids as pickled object
    arrays of strings, read with :class:`_NumpyOnlyUnpickler`). Every size a member claims is
    checked against the bytes there before anything is allocated.

    Raises:
        ValueError / zipfile.BadZipFile / pickle.UnpicklingError: not such a file.
    """
    out: dict[str, np.ndarray] = {}
    legacy = False
    with open_in_kg(path, "rb") as raw:
        total = os.fstat(raw.fileno()).st_size
        with zipfile.ZipFile(raw) as zf:
            for info in zf.infolist():
                # the package writes members uncompressed: a stored member can claim no more bytes
                # than the file holds, so nothing read below can outgrow the file
                if info.compress_type != zipfile.ZIP_STORED or info.file_size > total:
                    raise ValueError(f"member {info.filename} is compressed or claims {info.file_size} bytes "
                                     f"in a {total}-byte file")
                with zf.open(info) as fh:
                    try:
                        shape, _, dtype, left = _npy_header(fh, info.file_size)
                        if dtype.hasobject:
                            # every pickled string takes at least a byte: no more items than bytes
                            arr = getattr(_NumpyOnlyUnpickler(fh, left).load(), "array", None)
                            if not isinstance(arr, np.ndarray) or not all(isinstance(x, str) for x in arr.ravel()):
                                raise pickle.UnpicklingError(f"{info.filename} is not an array of strings")
                            arr = np.asarray(arr.tolist(), dtype=str).reshape(shape)
                            legacy = True
                        else:
                            fh.seek(0)
                            arr = read_npy(fh, info.file_size)
                    except _CutShort as exc:
                        raise ValueError(f"member {info.filename} is cut short: {exc}") from None
                out[info.filename.removesuffix(".npy")] = arr
    return out, legacy


def kinds_of(index: Any, space: str, ids: Sequence[str]) -> list[str]:
    """The kind stored with each of ``ids`` in ``space`` of an embedded vector index, in their order
    (KeyError for an id without a row)."""
    s = index._space(space)
    return [s.kinds[s.row[i]] for i in ids]


def save_npz_vectors(root: Path, index: Any) -> None:
    """Write every vector to vectors.npz (atomically, 0600, no pickles) and drop the journal."""
    arrays: dict[str, Any] = {}
    for space in VECTOR_SPACES:
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
    for space in VECTOR_SPACES:
        index.take_dirty(space)


def write_journal(path: Path, records: Sequence[tuple[str, Sequence[str], Sequence[str], np.ndarray]]) -> None:
    """Append ``(space, ids, kinds, rows)`` records to the vector journal ``path`` (0600): per record
    four plain .npy arrays. Like the structure's SQLite (WAL, ``synchronous=NORMAL``) it survives a
    crash of the process; it is not fsynced per transaction."""
    with open_in_kg(path, "ab") as fh:
        for space, ids, kinds, rows in records:
            for arr in (np.asarray([space]), np.asarray(ids, dtype=str), np.asarray(kinds, dtype=str),
                        np.asarray(rows, dtype=np.float32)):
                np.save(fh, arr, allow_pickle=False)


class _CutShort(Exception):
    """The bytes end inside an array: what a crash in the middle of an append leaves behind."""


def _read_exactly(fh: IO[bytes], n: int) -> bytes:
    data = fh.read(n)
    if len(data) < n:
        raise _CutShort(f"{n} bytes expected, {len(data)} left")
    return data


def _npy_header(fh: IO[bytes], left: int) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran order, dtype, bytes left after the header) of the ``.npy`` array at ``fh``,
    which has ``left`` bytes up to its end.

    Raises:
        _CutShort: the bytes end inside the header.
        ValueError: not an ``.npy`` header (bad magic, version or header).
    """
    if left <= 0:
        raise _CutShort("nothing left")
    magic = _read_exactly(fh, 8)
    if magic[:6] != b"\x93NUMPY" or (magic[6], magic[7]) not in ((1, 0), (2, 0)):
        raise ValueError(f"not an .npy array (starts {magic!r})")
    size_bytes = _read_exactly(fh, 2 if magic[6] == 1 else 4)
    header_len = int.from_bytes(size_bytes, "little")
    if header_len > left:
        raise _CutShort(f"a header of {header_len} bytes with {left} left")
    if header_len > 1 << 16:
        raise ValueError(f"an .npy header of {header_len} bytes")
    header = io.BytesIO(size_bytes + _read_exactly(fh, header_len))
    read_header = np.lib.format.read_array_header_1_0 if magic[6] == 1 else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(header)
    return tuple(shape), fortran, dtype, left - len(magic) - len(size_bytes) - header_len


def read_npy(fh: IO[bytes], left: int) -> np.ndarray:
    """One ``.npy`` array of plain values from ``fh``, which has ``left`` bytes up to its end.

    Stricter than ``np.load``: the size the header claims is checked against the bytes really
    there before anything is allocated (a header claiming a terabyte is refused, not allocated),
    and object arrays (pickles) are refused.

    Raises:
        _CutShort: the bytes end before the array does (a crash mid-append, or a header lying about
            its shape).
        ValueError: not an array of plain values (bad magic, version, header or dtype).
    """
    shape, fortran, dtype, left = _npy_header(fh, left)
    if dtype.hasobject:
        raise ValueError("an array of Python objects (a pickle)")
    count = 1
    for dim in shape:
        count *= int(dim)
    nbytes = count * dtype.itemsize
    if nbytes > left:
        raise _CutShort(f"an array of shape {shape} ({nbytes} bytes) with {left} bytes left")
    arr = np.frombuffer(bytearray(_read_exactly(fh, nbytes)), dtype=dtype, count=count)
    return arr.reshape(shape, order="F" if fortran else "C")


def read_journal(path: Path) -> tuple[list[tuple[str, list[str], list[str], np.ndarray]], int, int]:
    """The complete records of the vector journal ``path`` in order, the byte offset where they end,
    and the file's size (larger when a record was cut short by a crash). Plain arrays only:
    nothing in it is executed, and no array larger than the file is allocated.

    Raises:
        NotAKnowledgeGraphError: bytes that are not a journal record (not a cut-short one).
    """
    records: list[tuple[str, list[str], list[str], np.ndarray]] = []
    if not path.exists():
        return records, 0, 0
    with open_in_kg(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        good = 0
        while good < size:
            try:
                space, ids, kinds, mat = (read_npy(fh, size - fh.tell()) for _ in range(4))
            except _CutShort:
                break
            except ValueError as exc:
                raise NotAKnowledgeGraphError(
                    f"{path} is not a vector journal: at byte {good} it holds {exc}; nothing in it was executed "
                    "and nothing was changed. Move the file away to open the KG without those vectors (nodes "
                    "without a vector are not found by vector search), or restore the directory from a backup"
                ) from exc
            records.append((str(space.reshape(-1)[0]) if space.size else "", [str(x) for x in ids],
                            [str(k) for k in kinds], mat))
            good = fh.tell()
    return records, good, size


def replay_journal(path: Path, index: Any) -> int:
    """Upsert every complete record of the vector journal ``path`` into ``index``; returns the
    number of bytes dropped from its end (0 normally).

    A record cut short at the end of the journal is what a crash during an append leaves (its
    transaction never committed, or committed without its vectors): the complete records are
    replayed, the cut-short tail is removed from the file (so records appended later stay
    readable), a :class:`~langgraph_kgmem.errors.KgmemRecoveryWarning` says how much was dropped,
    and ``index.journal_dropped_bytes`` records it. Nodes whose vectors were in it stay in the graph
    without a vector (not found by vector search) until re-ingested.

    Raises:
        NotAKnowledgeGraphError: bytes that are not a journal record, or a record that is not vectors
            of the KG's dimension, one per id, finite (a tampered or foreign file); nothing in it was
            executed and nothing was changed.
    """
    records, good, size = read_journal(path)
    for space, ids, kinds, mat in records:
        try:
            if space not in VECTOR_SPACES or len(kinds) != len(ids):
                raise KgmemInputError(f"a record for space {space!r} with {len(ids)} ids and {len(kinds)} kinds")
            index.upsert(space, ids, mat, kinds, normalized=True)
        except KgmemInputError as exc:
            raise NotAKnowledgeGraphError(
                f"{path} holds vectors this KG cannot take ({exc}); nothing in it was executed. Move the file "
                "away to open the KG without them (nodes without a vector are not found by vector search), "
                "or restore the directory from a backup") from exc
    dropped = size - good
    if dropped:
        with open_in_kg(path, "r+b") as fh:
            fh.truncate(good)
        warnings.warn(
            f"{path} ended in a record cut short ({dropped} bytes, what a crash during a write leaves); "
            f"{len(records)} complete records were replayed and the cut-short one dropped. Nodes whose vectors "
            "it held are not found by vector search until their documents are ingested again",
            KgmemRecoveryWarning, stacklevel=2)
    index.journal_dropped_bytes = dropped
    return dropped


def append_vector_journal(root: Path, index: Any) -> None:
    """Append the vectors upserted since the last save (unit rows) to ``vectors.journal``; fold the
    journal into the npz once it outgrows it."""
    todo = [(space, ids) for space in VECTOR_SPACES if (ids := index.take_dirty(space))]
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
    if f.exists() or f.is_symlink():
        try:
            data, legacy = _read_npz(f)
            for space in VECTOR_SPACES:
                if f"{space}_ids" not in data and space == "texts":
                    continue   # written before the texts space existed
                ids = [str(x) for x in data[f"{space}_ids"]]
                if ids:
                    index.upsert(space, ids, data[f"{space}_mat"], [str(x) for x in data[f"{space}_kinds"]],
                                 normalized=True)
        except (pickle.UnpicklingError, zipfile.BadZipFile, KeyError, ValueError, EOFError, KgmemInputError) as exc:
            raise NotAKnowledgeGraphError(
                f"{f} is not a valid vector file ({exc}); nothing in it was executed. Restore it from a "
                f"backup, or delete it and re-ingest the documents into a new KG") from exc
        except OSError as exc:
            raise NotAKnowledgeGraphError(f"{f} cannot be read ({exc}): check its permissions, or restore it "
                                          "from a backup") from exc
    replay_journal(root / JOURNAL_FILE, index)
    return legacy
