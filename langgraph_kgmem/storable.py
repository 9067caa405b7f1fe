"""Text entering the package, made fit for every store the same way: :func:`storable`.

Two characters no backend keeps alike: NUL (PostgreSQL refuses it in text and JSON, SQLite keeps
it) and a lone surrogate (UTF-8 cannot encode it: SQLite's store and the checkpoint serializer
raise a raw ``TypeError``, PostgreSQL's JSON a raw psycopg error). Where text comes from decides
what happens to it:

- ``source="user"``: a question, an id, a title, a tenant label — the person who sent it can fix
  it, so it is refused with :class:`~langgraph_kgmem.errors.KgmemInputError` naming what and where,
  before anything is stored, checkpointed or cached;
- ``source="model"``: a model's reply, thought, tool arguments, a verifier's reason, a provider's
  error text — nobody can resend it, so it is normalised: a surrogate pair written as two code
  points is joined into its character, every other surrogate becomes U+FFFD, NUL is dropped.

Every entry point of the package calls this one function (questions: ``graphs.common``; model
output: the model layer's replies, decisions and tool calls; documents, ids and metadata: the
ingest checks), so both backends accept and refuse the same text.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph_kgmem.errors import KgmemInputError, check_storable, check_storable_values

Source = Literal["user", "model"]
SOURCES: tuple[Source, ...] = ("user", "model")


def _needs_fixing(text: str) -> bool:
    return "\x00" in text or any("\ud800" <= c <= "\udfff" for c in text)


def _normalised(text: str) -> str:
    if not _needs_fixing(text):
        return text
    # UTF-16 with surrogatepass joins a valid high/low pair into one character and leaves the
    # lone ones for the decoder's "replace" (U+FFFD)
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", "")


def _normalised_values(value: Any) -> Any:
    """``value`` (JSON-like) with every string normalised; containers rebuilt only when a string
    in them changes (tuples come back as lists, as JSON has them). Iterative: a model's tool
    arguments may nest thousands of levels deep."""
    stack, dirty = [value], False
    while stack and not dirty:
        item = stack.pop()
        if isinstance(item, str):
            dirty = _needs_fixing(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    if not dirty:
        return value
    root: list[Any] = [value]
    todo: list[tuple[Any, Any]] = [(root, 0)]
    while todo:
        parent, key = todo.pop()
        item = parent[key]
        if isinstance(item, str):
            parent[key] = _normalised(item)
        elif isinstance(item, dict):
            new = {(_normalised(k) if isinstance(k, str) else k): v for k, v in item.items()}
            parent[key] = new
            todo.extend((new, k) for k in new)
        elif isinstance(item, (list, tuple)):
            parent[key] = new_list = list(item)
            todo.extend((new_list, i) for i in range(len(new_list)))
    return root[0]


def storable(value: Any, what: str, *, source: Source = "user") -> Any:
    """``value`` (text, or JSON-like: dicts, lists and tuples of text, keys included) as every
    backend can store it alike, or refused.

    Args:
        value: the text or JSON-like value entering the package.
        what: what it is, for the error message (``"the question"``, ``"document 'x'"`` ...).
        source: ``"user"``: refused when it holds a NUL or a lone surrogate (or, for text, is no
            text); ``"model"``: returned normalised (see the module docstring), never refused.

    Returns:
        ``value`` itself when nothing needed fixing, else its normalised copy.

    Raises:
        KgmemInputError: user input that no backend can store; the message names ``what``, the
            character and its position.

    Example:
        >>> storable("Where was Curie born? \\udc80\\x00", "a reply", source="model")
        'Where was Curie born? \\ufffd'
        >>> storable("Where was Curie born?", "the question")
        'Where was Curie born?'
    """
    if source not in SOURCES:
        raise KgmemInputError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if source == "model":
        return _normalised(value) if isinstance(value, str) else _normalised_values(value)
    if isinstance(value, (dict, list, tuple)):
        check_storable_values(value, what)
    else:
        check_storable(value, what)
    return value
