"""The embedded backend: one private KG directory holding the structure in SQLite (``kg.sqlite``)
and the vectors in Chroma (``chroma/``) or numpy (``vectors.npz`` + ``vectors.journal``).

One writer process per directory, enforced by a file lock (``.lock``) held while the KG is open:
Chroma's persistent client is not safe for several. Everything in the directory is checked before
anything opens it (no symbolic links, no special files, nothing foreign), see
:mod:`~langgraph_kgmem.kg.backends.embedded.files`.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError
from langgraph_kgmem.kg.backends.contract import BackendSpec, OpenedBackend
from langgraph_kgmem.kg.backends.embedded.files import (CHROMA_JOURNAL_FILE, JOURNAL_FILE, VECTORS_FILE,
                                                       check_kg_entries, detect_vector_backend, load_npz_vectors,
                                                       private_dir, private_file, restrict_tree, save_npz_vectors)
from langgraph_kgmem.kg.backends.embedded.persistence import HOOKS
from langgraph_kgmem.kg.backends.embedded.sqlite import SqliteGraphStore
from langgraph_kgmem.kg.backends.embedded.vectors import ChromaVectorIndex, NumpyVectorIndex

logger = logging.getLogger(__name__)

DB_FILE = "kg.sqlite"
LOCK_FILE = ".lock"
VECTOR_BACKENDS = ("chroma", "memory")
# nodes whose text is embedded (the facade's EMBEDDED_KINDS): a KG holding one has vectors somewhere
EMBEDDED_NODES_SQL = "SELECT 1 FROM nodes WHERE kind IN ('entity', 'chunk', 'anchor') LIMIT 1"


def is_directory_target(target: str) -> bool:
    """Anything that is not a URI (``scheme://``) names a KG directory."""
    return "://" not in target


def check_directory(root: Path, *, create: bool) -> None:
    """Refuse a file, a foreign non-empty directory, or a missing KG with ``create=False``, before
    the lock file, SQLite or Chroma open (and follow) anything there."""
    if root.exists() and not root.is_dir():
        raise NotAKnowledgeGraphError(f"{root} is a file, not a KG directory: pass a directory path")
    if root.is_dir():
        check_kg_entries(root)
    if (root / DB_FILE).exists():
        return
    if not create:
        raise NotAKnowledgeGraphError(
            f"{root} is not a langgraph_kgmem KG directory (no {DB_FILE}); "
            "create one with KnowledgeGraph.open(path) or `kgmem ingest FILE --kg DIR`")
    if root.exists() and any(p.name != LOCK_FILE for p in root.iterdir()):
        raise NotAKnowledgeGraphError(
            f"{root} is a non-empty directory without {DB_FILE}: refusing to turn it into a KG. "
            "Choose an empty or new directory.")


def lock_directory(root: Path) -> Callable[[], None]:
    """Take the directory's writer lock (waiting ``$KGMEM_LOCK_TIMEOUT`` seconds, default 5);
    returns its release."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(root / LOCK_FILE), mode=0o600)
    timeout = float(os.environ.get("KGMEM_LOCK_TIMEOUT", "5"))
    logger.debug("waiting up to %.1fs for the writer lock of %s", timeout, root)
    try:
        lock.acquire(timeout=timeout)
    except Timeout as exc:
        raise NotAKnowledgeGraphError(
            f"{root} is open by another writer (one writer per KG directory: Chroma's persistent "
            "client is not safe for several). Close the other KnowledgeGraph (kg.close()) or use "
            "a Chroma server.") from exc
    return lock.release


def choose_vector_backend(root: Path, store: SqliteGraphStore, asked: str | None) -> str:
    """The vector backend of KG directory ``root``: the one its ``kg.sqlite`` records (written at
    the KG's first open, so a KG cut short before its first save reopens with what it was created
    with); for a KG from before that record, the one its files show (``open_directory`` records it).

    Raises:
        KgmemInputError: ``asked`` differs from the KG's own backend.
        NotAKnowledgeGraphError: the KG holds embedded nodes but its vector index (``chroma/``, or
            ``vectors.npz`` and ``vectors.journal``) is gone: opening it would answer every search
            with nothing. Nothing was created or changed.
    """
    recorded = store.get_meta("vector_backend")
    if recorded is None:
        chosen = detect_vector_backend(root, asked)
    elif recorded not in VECTOR_BACKENDS:
        raise NotAKnowledgeGraphError(f"{root / DB_FILE} records the vector backend {recorded[:40]!r}, not one of "
                                      f"{', '.join(VECTOR_BACKENDS)}: it was edited by hand or written by a newer "
                                      "langgraph-kgmem (upgrade)")
    elif asked is not None and asked != recorded:
        detect_vector_backend(root, asked)   # the error for a backend that does not exist
        raise KgmemInputError(f"{root} keeps its vectors in the {recorded!r} backend, not {asked!r}: open it with "
                              f"vector_backend={recorded!r} (or leave it out), or migrate it with `kgmem migrate`")
    else:
        chosen = recorded
    index_files = (root / "chroma",) if chosen == "chroma" else (root / VECTORS_FILE, root / JOURNAL_FILE)
    if store.get_meta("format") is not None and not any(f.exists() for f in index_files) \
            and store.conn.execute(EMBEDDED_NODES_SQL).fetchone() is not None:
        raise NotAKnowledgeGraphError(
            f"{root} is a KG whose vector index is missing ({' and '.join(f.name for f in index_files)} not found, "
            "while the KG holds nodes found by vector search): opened like this every search would return nothing. "
            "Nothing was created or changed. Restore the missing files from a backup, or build the KG again "
            "from its documents")
    return chosen


def check_structure_present(store: SqliteGraphStore, vectors: NumpyVectorIndex) -> None:
    """Refuse vectors without the structure they belong to: a ``kg.sqlite`` holding no KG yet (an
    empty or replaced file) beside a vector index that holds vectors. Opening it as a new KG would
    drop those vectors as orphans and rewrite the index without them.

    Raises:
        NotAKnowledgeGraphError: naming the database and how many vectors are there; nothing changed.
    """
    if store.get_meta("format") is not None:
        return
    held = sum(vectors.count(space) for space in ("nodes", "facts"))
    if held:
        raise NotAKnowledgeGraphError(
            f"{store.path} holds no knowledge graph, but the directory's vector index holds {held} vector(s): the "
            "KG's structure is missing (an emptied or replaced kg.sqlite). Nothing was changed. Restore kg.sqlite "
            "from a backup, or move the directory away and build the KG again")


def open_directory(target: str, *, name: str | None = None, create: bool = True,
                   vector_backend: str | None = None) -> OpenedBackend:
    """Open (or create) the KG directory ``target``; ``vector_backend`` None: the directory's own
    (Chroma for a new one). ``name`` is checked by the facade against the stored one."""
    root = Path(target)
    check_directory(root, create=create)
    private_dir(root)
    release = lock_directory(root)
    store = None
    try:
        store = SqliteGraphStore(private_file(root / DB_FILE), create=create)
        chosen = choose_vector_backend(root, store, vector_backend)
        if chosen == "chroma":
            vectors: NumpyVectorIndex = ChromaVectorIndex(root / "chroma", journal=root / CHROMA_JOURNAL_FILE)
            restrict_tree(root / "chroma")
            releases = [lambda: restrict_tree(root / "chroma") if (root / "chroma").exists() else None, release]
        else:
            vectors = NumpyVectorIndex()
            if load_npz_vectors(root, vectors):   # old pickled format: rewritten once without pickles
                save_npz_vectors(root, vectors)
            vectors.journal_to(root)
            releases = [release]
        check_structure_present(store, vectors)
        # the passages' own copy for every search that scores passages, made while opening (a
        # query worker's start-up) rather than at its first question
        vectors.prepare_scan("nodes", ("chunk",))
        if store.get_meta("vector_backend") is None:
            with store.transaction():
                store.set_meta("vector_backend", chosen)
    except BaseException:
        try:
            if store is not None:
                store.close()
        finally:
            release()
        raise
    logger.debug("opened KG directory %s (vectors: %s)", root, chosen)
    return OpenedBackend(store, vectors, backend=f"sqlite+{chosen}", path=root, releases=releases)


def open_in_memory() -> OpenedBackend:
    """A throw-away backend: SQLite ``:memory:`` and numpy vectors, nothing on disk."""
    return OpenedBackend(SqliteGraphStore(":memory:"), NumpyVectorIndex(), backend="sqlite+memory")


@contextmanager
def scratch_directories(workdir: Path) -> Iterator[Callable[[], str]]:
    """Conformance hook: a new, not yet existing KG directory under ``workdir`` per call."""
    count = iter(range(1_000_000))
    yield lambda: str(workdir / f"kg{next(count)}")


#: what the embedded backend does beyond the contract's core (one writer per directory: not ``shared``)
CAPABILITIES = frozenset({"bulk_reads", "persistence"})

SPECS = (
    BackendSpec("sqlite+memory", lambda target, vb: is_directory_target(target) and vb == "memory",
                open_directory, scratch_directories, open_options={"vector_backend": "memory"}, persistence=HOOKS,
                capabilities=CAPABILITIES),
    # a directory without a vector backend asked for: its own (open_directory detects it), Chroma if new
    BackendSpec("sqlite+chroma", lambda target, vb: is_directory_target(target) and vb != "memory",
                open_directory, scratch_directories, open_options={"vector_backend": "chroma"}, persistence=HOOKS,
                capabilities=CAPABILITIES),
)
