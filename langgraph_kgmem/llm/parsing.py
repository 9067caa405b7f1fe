"""Reading a model's reply: the first JSON value in it, and replies cut to a bounded length.

Model output is untrusted input. A reply is cut to :data:`MAX_REPLY_CHARS` before it is parsed;
JSON nested deeper than :data:`MAX_JSON_DEPTH` and a parser's ``RecursionError`` count as
malformed output (:class:`MalformedOutput`), never as a crash. Free text is cut to
:data:`MAX_TEXT_CHARS`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langgraph_kgmem.storable import storable

_JSON_BLOCK = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
MAX_REPLY_CHARS = 20_000   # a decision's JSON is small: longer replies are cut before parsing
MAX_TEXT_CHARS = 4_000     # free-text replies (answers, summaries) are cut to this many characters
MAX_JSON_DEPTH = 32        # deeper nesting is malformed output, not something to recurse into
_MAX_JSON_STARTS = 64      # positions tried when the JSON value is embedded in prose


class MalformedOutput(ValueError):
    """Model output that cannot be read as the JSON a decision needs (too deep, none found ...)."""


def _nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting in ``text`` (brackets inside strings count too: an upper bound)."""
    depth = best = 0
    for ch in re.findall(r"[\[\]{}]", text):
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif depth:
            depth -= 1
    return best


def parse_json_object(text: str) -> Any:
    """Parse the first JSON value in ``text`` (bare, fenced, or embedded in prose), its strings
    normalised as model text (:func:`~langgraph_kgmem.storable.storable`: a ``"\\udc80"`` escape
    is a lone surrogate once parsed, which no store and no pydantic string field takes).

    Raises :class:`MalformedOutput` (a ``ValueError``) when there is none, when the text nests
    deeper than :data:`MAX_JSON_DEPTH`, or when the parser gives up (``RecursionError``, an integer
    too long to convert). Only the first :data:`MAX_REPLY_CHARS` characters are read.
    """
    return storable(_first_json_value(text), "a model's JSON", source="model")


def _first_json_value(text: str) -> Any:
    if not isinstance(text, str):
        raise MalformedOutput(f"model output is {type(text).__name__}, not text")
    text = text[:MAX_REPLY_CHARS].strip()
    if _nesting_depth(text) > MAX_JSON_DEPTH:
        raise MalformedOutput(f"model output nests JSON deeper than {MAX_JSON_DEPTH} levels: {text[:80]!r}")
    candidates = [m.group(1) for m in _JSON_BLOCK.finditer(text)] + [text]
    for cand in candidates:
        try:
            return json.loads(cand)
        except (ValueError, TypeError, RecursionError):  # JSONDecodeError is a ValueError
            pass
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch in "{["][:_MAX_JSON_STARTS]
    for i in starts:
        try:
            obj, _ = decoder.raw_decode(text[i:])
            return obj
        except (ValueError, RecursionError):
            continue
    raise MalformedOutput(f"no JSON object found in model output: {text[:200]!r}")


def clean_reply(text: str, limit: int) -> str:
    """A model's text cut to ``limit`` characters and normalised as model text
    (:func:`~langgraph_kgmem.storable.storable`: lone surrogates replaced, NUL dropped), so it can
    be sent back, stored and checkpointed alike on every backend."""
    return storable(text[:limit], "a model's reply", source="model")
