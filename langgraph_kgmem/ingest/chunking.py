"""Token-count chunking on sentence boundaries (o200k_base tokens, counted offline)."""

from __future__ import annotations

import re

from langgraph_kgmem.llm import _encoding, TOKEN_ENCODING

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n{2,}")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def chunk_text(text: str, chunk_tokens: int = 750) -> list[str]:
    """Pack whole sentences into chunks of at most ``chunk_tokens`` tokens; a longer sentence is
    cut on token boundaries. Every character of non-space text ends up in exactly one chunk."""
    if chunk_tokens < 16:
        raise ValueError(f"chunk_tokens must be >= 16, got {chunk_tokens}")
    enc = _encoding(TOKEN_ENCODING)
    chunks: list[str] = []
    cur: list[str] = []
    cur_tokens = 0
    for sent in split_sentences(text):
        toks = enc.encode(sent)
        if len(toks) > chunk_tokens:
            if cur:
                chunks.append(" ".join(cur))
                cur, cur_tokens = [], 0
            for off in range(0, len(toks), chunk_tokens):
                chunks.append(enc.decode(toks[off:off + chunk_tokens]).strip())
            continue
        if cur_tokens + len(toks) > chunk_tokens and cur:
            chunks.append(" ".join(cur))
            cur, cur_tokens = [], 0
        cur.append(sent)
        cur_tokens += len(toks) + 1
    if cur:
        chunks.append(" ".join(cur))
    return [c for c in chunks if c]
