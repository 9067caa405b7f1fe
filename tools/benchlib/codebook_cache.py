"""AutoPrunedRetriever's synced codebook cached beside the pristine KG it indexes.

``sync_codebook`` keeps everything it makes in the KG's own directory: the codebook in the KG's
memory store (``memory.sqlite``) and the vectors of its symbols (relation phrases, names, ``"h r t"``
lines) in the KG's vector store (:meth:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore.text_vectors`).
A later process that opens the same directory reads both and embeds nothing. The benchmark tools
work on a throwaway copy of the pristine KG, though, so each of their processes synced the codebook
again: with MiniLM about 8 to 20 minutes a pooled set on this machine.

:func:`synced_copy` keeps, once per pristine KG, a second cached directory: a copy of it with the
codebook synced (built like the pristine one: in a temporary directory renamed into place, under a
file lock, so an interrupted sync leaves nothing and two processes sync once). Its key hashes the
pristine KG's key (passages, embedding model, backend, extractor), the sync options and the source
of what decides a synced codebook (:data:`CODEBOOK_SOURCES`), so a changed codebook, sync or text
vector store syncs again. Each run works on its own copy, so nothing a run memorises reaches the
cache. The copy holds exactly what syncing a fresh copy stores: a sync in the copy finds every
document indexed and adds nothing (``tests/test_bench_codebook_cache.py`` compares the two stores
row by row).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from langgraph_kgmem.graphs.autopruned import sync_codebook

from benchlib import corpus as corpora

# what decides the codebook a sync stores (the pristine KG's own key covers the extractor)
CODEBOOK_SOURCES = ("graphs/autopruned/codebook.py", "graphs/autopruned/graph.py", "kg/graph.py")


def codebook_fingerprint(**sync: Any) -> str:
    """A hash of :data:`CODEBOOK_SOURCES` and the ``sync_codebook`` options ``sync``."""
    import langgraph_kgmem

    root = Path(langgraph_kgmem.__file__).parent
    h = hashlib.sha256(json.dumps(sync, sort_keys=True, default=str).encode())
    for rel in CODEBOOK_SOURCES:
        p = root / rel
        h.update(p.read_bytes() if p.exists() else rel.encode())
    return h.hexdigest()[:12]


def synced_key(built: corpora.BuiltCorpus, **sync: Any) -> str:
    """The cache key of ``built`` with its codebook synced by ``sync_codebook(**sync)``."""
    return hashlib.sha256(f"{built.key}|codebook|{codebook_fingerprint(**sync)}".encode()).hexdigest()[:20]


def synced_corpus(built: corpora.BuiltCorpus, embeddings: Any, *, cache_dir: Path | None = None,
                  log: Any = None, **sync: Any) -> Path:
    """The cached directory of ``built`` with AutoPrunedRetriever's codebook synced
    (``sync_codebook(kg, store, **sync)``): reused when cached, else made now from a copy of the
    pristine KG. Its ``bench_meta.json`` records the sync's seconds and the codebook's size."""
    from filelock import FileLock

    root = (cache_dir or corpora.CACHE_DIR) / "kg"
    final = root / synced_key(built, **sync)
    if (final / "bench_meta.json").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{final.name}.building")):
        if (final / "bench_meta.json").exists():
            return final
        tmp = root / f"{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        kg = corpora.open_working_copy(built, tmp, embeddings)
        try:
            _, store = kg.persistence()
            t0 = time.perf_counter()
            size = sync_codebook(kg, store, **sync)
            seconds = time.perf_counter() - t0
        finally:
            kg.close()
        (tmp / "kg" / ".lock").unlink(missing_ok=True)
        meta = {"pristine": built.key, "sync": sync, "sync_seconds": round(seconds, 3), "codebook": size,
                "fingerprint": codebook_fingerprint(**sync)}
        (tmp / "bench_meta.json").write_text(json.dumps(meta, indent=1))
        if log:
            log(f"codebook synced in {seconds:.1f}s (cached for later runs: {final.name})")
        try:
            tmp.rename(final)
        except OSError:  # another process made it meanwhile: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def synced_copy(built: corpora.BuiltCorpus, workdir: Path, embeddings: Any, *, cache_dir: Path | None = None,
                log: Any = None, **sync: Any) -> Any:
    """A working copy of ``built`` with its codebook synced (:func:`synced_corpus`), opened: the KG.
    Its persistence store holds the codebook; ``sync_codebook`` on it finds nothing to do."""
    src = synced_corpus(built, embeddings, cache_dir=cache_dir, log=log, **sync)
    return corpora.open_working_copy(corpora.BuiltCorpus(src.name, src, built.passages, built.build_seconds,
                                                         built.embed_seconds, built.stats, cached=True),
                                     workdir, embeddings)
