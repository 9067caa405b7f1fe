"""Embedding calls of one KG: batched, prefetched for a whole ingest window, and an LRU cache of
query vectors (the same question is embedded once per process)."""

from __future__ import annotations

import time
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from langgraph_kgmem.embeddings.fast import embed_short_texts, has_short_space
from langgraph_kgmem.kg.vectors import check_vectors

QUERY_CACHE_SIZE = 2048


class EmbeddingCache:
    """Embeds texts with ``embeddings``, checking every vector against ``dimension()`` (the KG's
    stored dimension, None while it holds no vector)."""

    def __init__(self, embeddings: Embeddings, dimension: Callable[[], int | None]) -> None:
        self.embeddings = embeddings
        self._dimension = dimension
        self.seconds = 0.0   # time spent inside the embedding model (reported by ingestion and the bench)
        self._query_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._prefetched: dict[tuple[bool, str], np.ndarray] = {}   # (short?, text) -> vector

    def embed_texts(self, texts: Sequence[str], batch_size: int = 256, *, short: bool = False) -> np.ndarray:
        """Embed texts in batches; texts prefetched by :meth:`prefetch_embeddings` are not re-sent.

        ``short=True`` for entity names, titles and fact strings: an embedding with a space of its own
        for them (``"fast"``) uses it; any other embedding treats both alike."""
        # shortest first, so that each batch holds texts of about one length: a model pads a batch to
        # its longest text, and names and facts in input order padded to the odd table row made
        # every short text cost several times its own length
        missing = sorted(dict.fromkeys(t for t in texts if (short, t) not in self._prefetched), key=len)
        fresh: dict[str, list[float]] = {}
        if missing:
            t0 = time.perf_counter()
            for off in range(0, len(missing), batch_size):
                batch = missing[off:off + batch_size]
                vecs = embed_short_texts(self.embeddings, batch) if short else self.embeddings.embed_documents(batch)
                fresh.update(zip(batch, check_vectors(vecs, batch, self._dimension())))
            self.seconds += time.perf_counter() - t0
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.asarray([self._prefetched[(short, t)] if (short, t) in self._prefetched else fresh[t] for t in texts],
                          dtype=np.float32)

    @contextmanager
    def prefetch_embeddings(self, texts: Iterable[str], short_texts: Iterable[str] = (), *,
                            vectors: Mapping[str, np.ndarray] | None = None) -> Iterator[None]:
        """Embed ``texts`` (passages) and ``short_texts`` (names, titles, facts: see :meth:`embed_texts`)
        in one batched call each and serve them from memory inside the block (ingestion embeds a
        whole document's chunks, titles, names and facts at once, and a bulk ingest several
        documents' at once). ``vectors``: passages the caller already embedded with this KG's
        embeddings (:meth:`embed_texts`), served as they are. Blocks nest: each forgets only what
        it fetched."""
        added: list[tuple[bool, str]] = []
        try:
            texts = list(texts)
            for t in dict.fromkeys(texts):
                if vectors is not None and t in vectors and (False, t) not in self._prefetched:
                    self._prefetched[(False, t)] = vectors[t]
                    added.append((False, t))
            wanted = [(short, t) for short, group in ((False, texts), (True, short_texts))
                      for t in dict.fromkeys(group) if t and (short, t) not in self._prefetched]
            if has_short_space(self.embeddings):   # two spaces: a call each
                groups = [[k for k in wanted if not k[0]], [k for k in wanted if k[0]]]
            else:   # one model for both: one call (a model call's fixed cost dominates small ingests)
                groups = [wanted]
            for group in groups:
                todo = list(dict.fromkeys(t for _, t in group))
                if todo:
                    vec = dict(zip(todo, self.embed_texts(todo, short=group[0][0])))
                    added += group
                    self._prefetched.update((k, vec[k[1]]) for k in group)
            yield
        finally:
            for key in added:
                self._prefetched.pop(key, None)


    def embed_query(self, text: str) -> np.ndarray:
        """Unit query vector, LRU-cached (the same question is embedded once per process)."""
        vec = self._query_cache.get(text)
        if vec is None:
            t0 = time.perf_counter()
            vec = check_vectors([self.embeddings.embed_query(text)], [text], self._dimension())[0]
            self.seconds += time.perf_counter() - t0
            vec = vec / (np.linalg.norm(vec) or 1.0)
            self._query_cache[text] = vec
            if len(self._query_cache) > QUERY_CACHE_SIZE:
                self._query_cache.popitem(last=False)
        else:
            try:
                self._query_cache.move_to_end(text)
            except KeyError:    # another thread's insert evicted it meanwhile: nothing to refresh
                pass
        return vec

