"""Benchmark corpora as cached KG directories.

A corpus (the passages of one question, or of N questions pooled) is ingested once with the
project's offline extractor (``kg.add_documents(..., model="offline")``) into a *pristine* KG
directory under ``.bench_cache/kg/<key>``. The key hashes the passages, the embedding model, the
vector backend and the extractor's source code, so a second run reuses the directory and a
changed extractor rebuilds it. Each benchmark run works on a private copy of that directory
(methods may add synonym edges, and each run's memory store lives in its copy), so the cache
never picks up state from a run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.embeddings import embeddings_id
from langgraph_kgmem.kg.graph import PASSAGE_TEXTS

from benchlib.datasets import REPO_ROOT

CACHE_DIR = Path(os.environ.get("KGMEM_BENCH_CACHE", REPO_ROOT / ".bench_cache"))
# "memory" (numpy vectors saved as vectors.npz) avoids Chroma's per-collection client and HNSW
# index work when the cache copies and reopens KGs many times; the graph itself is SQLite in both cases.
DEFAULT_BACKEND = "memory"
KG_NAME = "bench"
_EXTRACTOR_SOURCES = ("ingest/extract.py", "ingest/offline_rules.py", "ingest/pipeline.py", "ingest/chunking.py", "kg/types.py")


@dataclass
class BuiltCorpus:
    """A pristine cached KG directory and what building it cost (figures from the first build)."""

    key: str
    path: Path
    passages: int
    build_seconds: float
    embed_seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    cached: bool = False


def extractor_fingerprint() -> str:
    """What decides a built KG besides its passages and embedding: the extraction sources, and
    what a chunk's vector embeds in a new KG."""
    import langgraph_kgmem

    root = Path(langgraph_kgmem.__file__).parent
    h = hashlib.sha256(PASSAGE_TEXTS[0].encode())
    for rel in _EXTRACTOR_SOURCES:
        p = root / rel
        h.update(p.read_bytes() if p.exists() else rel.encode())
    return h.hexdigest()[:12]


def corpus_key(passages: Sequence[dict[str, str]], embeddings: Any, backend: str) -> str:
    h = hashlib.sha256()
    for p in passages:
        h.update(p["title"].encode())
        h.update(b"\x1f")
        h.update(p["text"].encode())
        h.update(b"\x1e")
    h.update(f"|{embeddings_id(embeddings)}|{backend}|{extractor_fingerprint()}".encode())
    return h.hexdigest()[:20]


def as_documents(passages: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """Passages → documents for ``add_documents`` (empty passages are skipped: nothing to extract)."""
    docs = []
    for p in passages:
        if p["text"].strip():
            doc = {"title": p["title"], "text": p["text"]}
            if p.get("id"):
                doc["id"] = p["id"]
            docs.append(doc)
    return docs


def build_corpus(passages: Sequence[dict[str, str]], embeddings: Any, *, backend: str = DEFAULT_BACKEND,
                 cache_dir: Path | None = None, log: Any = None, extractor: Any = "offline",
                 extractor_label: str = "offline") -> BuiltCorpus:
    """The pristine KG for ``passages``, from the cache or built now: extracted offline, or by
    ``extractor`` (a chat model, a zero-argument callable giving one, or "offline").
    ``extractor_label`` names it in the cache key, so KGs from different extractors never mix."""
    docs = as_documents(passages)

    def fill(kg: KnowledgeGraph) -> dict[str, Any]:
        model = extractor() if callable(extractor) and not hasattr(extractor, "invoke") else extractor
        if log and (len(docs) > 50 or model != "offline"):
            log(f"building KG for {len(docs)} passages ({extractor_label} extractor, {embeddings_id(embeddings)}) ...")
        report = kg.add_documents(docs, model=model, progress=False)
        return extraction_figures(report)

    key = corpus_key(passages, embeddings, backend)
    if extractor_label != "offline":
        key = hashlib.sha256(f"{key}|{extractor_label}".encode()).hexdigest()[:20]
    return build_cached(key, fill, embeddings, backend=backend, cache_dir=cache_dir, passages=len(docs))


def extraction_figures(report: Any) -> dict[str, Any]:
    """What building a KG cost the extractor: calls and tokens (per chunk) and its decisions."""
    usage, chunks = report.usage, max(report.chunks, 1)
    return {"chunks": report.chunks, "llm_calls": usage.get("llm_calls", 0),
            "prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
            "calls_per_chunk": round(usage.get("llm_calls", 0) / chunks, 2),
            "tokens_per_chunk": round((usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)) / chunks, 1),
            "decisions": report.decisions, "entities_added": report.entities_added,
            "relations_added": report.relations_added, "seconds": round(report.seconds, 1)}


def build_cached(key: str, fill: Any, embeddings: Any, *, backend: str = DEFAULT_BACKEND,
                 cache_dir: Path | None = None, passages: int = 0) -> BuiltCorpus:
    """The pristine KG directory ``key``: reused when cached, else filled by ``fill(kg)`` now
    (atomically: built in a temporary directory renamed into place, so an interrupted build leaves
    no cache entry)."""
    root = (cache_dir or CACHE_DIR) / "kg"
    final = root / key
    cached = _cached(final)
    if cached is not None:
        return cached
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    # several benchmark processes may want the same corpus: one builds, the others wait for it
    with FileLock(str(root / f"{key}.building")):
        cached = _cached(final)
        if cached is not None:
            return cached
        return _build(root, final, key, fill, embeddings, backend, passages)


def _cached(final: Path) -> BuiltCorpus | None:
    meta_file = final / "bench_meta.json"
    if not meta_file.exists():
        return None
    meta = json.loads(meta_file.read_text())
    return BuiltCorpus(final.name, final, meta["passages"], meta["build_seconds"], meta["embed_seconds"],
                       meta["stats"], cached=True)


def _build(root: Path, final: Path, key: str, fill: Any, embeddings: Any, backend: str,
           passages: int) -> BuiltCorpus:
    tmp = root / f"{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    kg = KnowledgeGraph.open(tmp / "kg", name=KG_NAME, embeddings=embeddings, vector_backend=backend)
    try:
        e0 = kg.embed_seconds
        extraction = fill(kg)
        embed_s = kg.embed_seconds - e0
        stats = kg.stats()
    finally:
        kg.close()
    seconds = time.perf_counter() - t0
    stats = {k: stats[k] for k in ("documents", "nodes", "edges", "nodes_by_kind", "edges_by_kind")}
    if isinstance(extraction, dict):
        stats["extraction"] = extraction
    (tmp / "kg" / ".lock").unlink(missing_ok=True)
    meta = {"passages": passages, "build_seconds": round(seconds, 3), "embed_seconds": round(embed_s, 3),
            "stats": stats, "backend": backend, "embeddings": embeddings_id(embeddings)}
    (tmp / "bench_meta.json").write_text(json.dumps(meta, indent=1))
    try:
        tmp.rename(final)
    except OSError:  # another process built it meanwhile: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return BuiltCorpus(key, final, passages, seconds, embed_s, stats)


def key_of(*parts: Any) -> str:
    h = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    h.update(extractor_fingerprint().encode())
    return h.hexdigest()[:20]


def open_working_copy(built: BuiltCorpus, workdir: Path, embeddings: Any, *,
                      backend: str = DEFAULT_BACKEND) -> KnowledgeGraph:
    """Copy the pristine KG into ``workdir/kg`` (once) and open the copy."""
    dst = workdir / "kg"
    if not (dst / "kg.sqlite").exists():
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(built.path / "kg", dst, ignore=shutil.ignore_patterns(".lock"), dirs_exist_ok=True)
    return KnowledgeGraph.open(dst, name=KG_NAME, embeddings=embeddings, vector_backend=backend, create=False)


def open_existing(workdir: Path, embeddings: Any, *, backend: str = DEFAULT_BACKEND) -> KnowledgeGraph:
    """Reopen a run's KG copy (later passes in a fresh process)."""
    return KnowledgeGraph.open(workdir / "kg", name=KG_NAME, embeddings=embeddings, vector_backend=backend,
                               create=False)
