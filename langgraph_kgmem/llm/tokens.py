"""Token counting, offline: o200k_base through bpe-openai, on any text and on chat messages.

The encoder is loaded on first use (:func:`token_encoding`, cached per name), never at import time.
``$KGMEM_TOKEN_ENCODING`` picks another encoding for every count.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Sequence

from langchain_core.messages import BaseMessage

TOKEN_ENCODING = os.environ.get("KGMEM_TOKEN_ENCODING", "o200k_base")
TOKEN_SLICE_CHARS = 40_000         # bpe-openai refuses ≥ 1M characters or ≥ 200k tokens in one call
MAX_EXACT_TOKEN_CHARS = 1_000_000  # beyond this many characters the count is an estimate


def token_encoding(name: str | None = None) -> Any:
    """The bpe-openai encoder called ``name`` (default :data:`TOKEN_ENCODING`; ``encode(text) ->
    list[int]``), loaded once per process. Chunking cuts text at token boundaries with it;
    :func:`count_tokens` counts with it."""
    return _load_encoding(name or TOKEN_ENCODING)


@lru_cache(maxsize=4)
def _load_encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)


def count_tokens(text: str, encoding: str | None = None) -> int:
    """Tokens of ``text`` under o200k_base (or ``encoding``), counted offline with bpe-openai.

    Never raises: the text is encoded in slices of :data:`TOKEN_SLICE_CHARS` (a slice boundary
    may split a token, so a long text's count can differ from one-call encoding by a token per
    slice); beyond :data:`MAX_EXACT_TOKEN_CHARS` the count is extrapolated from the counted part
    (tokens per character), and a slice the encoder refuses counts one token per 3 characters.
    """
    if not text:
        return 0
    if not isinstance(text, str):
        text = str(text)
    enc = token_encoding(encoding)
    head = text[:MAX_EXACT_TOKEN_CHARS]
    total = 0
    for i in range(0, len(head), TOKEN_SLICE_CHARS):
        part = head[i:i + TOKEN_SLICE_CHARS]
        try:
            total += len(enc.encode(part))
        except Exception:  # noqa: BLE001 - the encoder's own limits or odd input: estimate, never fail
            total += -(-len(part) // 3)
    if len(text) > len(head):
        total = -(-total * len(text) // len(head))
    return total


def message_text(msg: BaseMessage) -> str:
    """A message's text: its content parts joined, then its tool calls as JSON (what was sent or said)."""
    content = msg.content
    if isinstance(content, str):
        text = content
    else:
        text = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    calls = getattr(msg, "tool_calls", None) or []
    if calls:
        try:
            text += json.dumps([{"name": c["name"], "args": c["args"]} for c in calls], sort_keys=True,
                               default=str)
        except (RecursionError, TypeError, ValueError):  # arguments nested too deep to serialise
            text += "[tool calls that could not be serialised]"
    return text


def count_message_tokens(messages: Sequence[BaseMessage]) -> int:
    """Tokens of a chat prompt: each message's text plus 4 tokens of per-message overhead, as in
    OpenAI's chat format accounting, and 2 for the reply's priming."""
    return sum(count_tokens(message_text(m)) + 4 for m in messages) + 2
