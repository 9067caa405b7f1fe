"""The local embedding model (all-MiniLM-L6-v2 from its wheel, offline): length-bucketed batching."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.integration
def test_length_bucketed_batches_keep_order_and_vectors():
    from langgraph_kgmem.embeddings import LocalSentenceTransformerEmbeddings

    emb = LocalSentenceTransformerEmbeddings()
    passage = ("Marie Curie was a Polish and naturalised-French physicist and chemist who conducted pioneering "
               "research on radioactivity. She was the first woman to win a Nobel Prize. ") * 3
    texts = [f"entity {i}" for i in range(150)] + [passage, "Warsaw", passage[:120], ""] + [f"fact {i} lies" for i in range(40)]
    batched = np.array(emb.embed_documents(texts))
    assert batched.shape == (len(texts), 384)
    for i in (0, 149, 150, 151, 152, 153, len(texts) - 1):  # a few, one at a time, in input order
        alone = np.array(emb.embed_documents([texts[i]]))[0]
        assert np.allclose(batched[i], alone, atol=1e-5), i
    assert np.allclose(np.linalg.norm(batched[:150], axis=1), 1.0, atol=1e-5)
    assert emb.embed_documents([]) == []
