"""Token-count chunking on sentence boundaries (o200k_base tokens, counted offline)."""

from __future__ import annotations

import re

from langgraph_kgmem.llm.tokens import TOKEN_ENCODING, token_encoding

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n{2,}")


# the tokenizer refuses very long strings: a "sentence" longer than this is cut at whitespace first
MAX_ENCODE_CHARS = 20_000


def split_sentences(text: str) -> list[str]:
    """``text`` split into sentences: after ``.``, ``!`` or ``?`` and whitespace when a capital, digit,
    quote or bracket follows, and at blank lines; stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _pieces(sentence: str, limit: int = MAX_ENCODE_CHARS) -> list[str]:
    """``sentence`` cut into pieces of at most ``limit`` characters, at the last whitespace before
    the limit where there is one (a 1 MB line with no punctuation is still chunked)."""
    out = []
    while len(sentence) > limit:
        cut = sentence.rfind(" ", limit // 2, limit)
        cut = cut if cut > 0 else limit
        out.append(sentence[:cut])
        sentence = sentence[cut:].lstrip()
    if sentence:
        out.append(sentence)
    return out


def chunk_text(text: str, chunk_tokens: int = 750) -> list[str]:
    """Pack whole sentences into chunks of at most ``chunk_tokens`` tokens; a longer sentence is
    cut on token boundaries. Every character of non-space text ends up in exactly one chunk."""
    if chunk_tokens < 16:
        raise ValueError(f"chunk_tokens must be >= 16, got {chunk_tokens}")
    sentences = [p for s in split_sentences(text) for p in _pieces(s)]
    # a token covers at least one UTF-8 byte: sentences whose bytes (+1 each, as packed below) fit
    # make one chunk whatever the tokenizer says, so short documents never load or run it
    if sum(len(s.encode()) + 1 for s in sentences) <= chunk_tokens:
        return [" ".join(sentences)] if sentences else []
    return pack_sentences(sentences, chunk_tokens)


def pack_sentences(sentences: list[str], chunk_tokens: int) -> list[str]:
    """Sentences packed into chunks of at most ``chunk_tokens`` o200k tokens (see :func:`chunk_text`)."""
    enc = token_encoding(TOKEN_ENCODING)
    chunks: list[str] = []
    cur: list[str] = []
    cur_tokens = 0
    for sent in sentences:
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
