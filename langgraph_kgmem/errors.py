"""One error family for the whole package: every error says what failed and what to do."""

from __future__ import annotations

import math


class KgmemError(Exception):
    """Base class of every error raised on purpose by langgraph_kgmem."""


class ConfigurationError(KgmemError):
    """A model, embedding or store is needed but not configured (the message names the variables)."""


class MissingRequirementError(ConfigurationError):
    """A method was built or started without something it cannot run without (a store for its
    memory, a model with tool calling, time-stamped records): raised before any model call, with
    the method's name, what is missing and what to do."""


class KgmemInputError(KgmemError, ValueError):
    """Bad user input (empty/binary file, non-UTF-8 text, oversize document, unknown id ...)."""


class NotAKnowledgeGraphError(KgmemError):
    """A path given as a KG directory is not one."""


class StorageError(KgmemError):
    """The KG's database could not be reached, refused the connection, or went away mid-operation
    (the message says where and what to check; the failed transaction wrote nothing)."""


class SchemaVersionError(StorageError):
    """A stored KG's schema version is one this release cannot read: written by a newer
    langgraph-kgmem (upgrade the package) or not a version at all. Nothing was read or changed."""


class UnsafeStoredDataError(StorageError):
    """Stored data holds something the package refuses to load because loading it would run or
    follow it: a checkpoint naming a type outside the allow-list, a pickle (the message names the
    database and the offending type; nothing in it was imported or called, nothing was changed)."""


class CorruptStoredDataError(StorageError):
    """Stored data is not in the shape the package writes (a row whose attributes are not a JSON
    object, an edge to a missing node, a weight that is not a number, a memory page of the wrong
    shape, a cycle among the codebook's representatives): the message names the database, the
    table or namespace and the row; nothing was changed. Restore the store from a backup."""


class KgmemRecoveryWarning(UserWarning):
    """Opening a KG recovered from a crash and dropped something on the way (the message says what
    and how much; the KG also records it, e.g. ``kg.vector_index.journal_dropped_bytes``)."""


class KgmemSchemaUpgradeWarning(UserWarning):
    """Opening a KG written by an older release migrated its schema forward (in one transaction);
    the message names the versions and each step (``before`` and ``after`` hold the two versions).
    Older releases cannot open it afterwards."""

    def __init__(self, message: str, before: int = 0, after: int = 0) -> None:
        super().__init__(message)
        self.before, self.after = before, after


class KgmemDecisionError(KgmemError):
    """An LLM decision stayed malformed after its retry and the caller asked for no fallback."""

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw


class KgmemModelError(KgmemError):
    """The chat model's call itself failed twice (a provider error, timeout, refused request) at a
    step that has no fallback; ``__cause__`` is the provider's exception. Decisions never raise
    it: they fall back and record the failure in ``usage["fallbacks"]`` (kind ``model_error``).
    ``usage`` is the failed call's usage record (it was sent, so it is counted)."""

    def __init__(self, message: str, usage: dict | None = None) -> None:
        super().__init__(message)
        self.usage = usage or {}


# ------------------------------------------------------------------------- option checks (factories)


def check_int(name: str, value: object, low: int, high: int | None = None, *, optional: bool = False) -> None:
    """Raise :class:`KgmemInputError` unless ``value`` is an integer in ``[low, high]`` (``None``
    also allowed when ``optional``); booleans are not integers here."""
    if optional and value is None:
        return
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)
    if not ok:
        want = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high}]"
        raise KgmemInputError(f"{name} must be {want}{' or None' if optional else ''}, got {value!r}")


def check_number(name: str, value: object, low: float | None = None, high: float | None = None, *,
                 low_open: bool = False, high_open: bool = False, optional: bool = False) -> None:
    """Raise :class:`KgmemInputError` unless ``value`` is a finite number within the bounds
    (``low_open`` / ``high_open`` exclude the bound itself; ``None`` allowed when ``optional``)."""
    if optional and value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        if low is not None and high is not None:
            want = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        elif low is not None:
            want = f"a finite number {'>' if low_open else '>='} {low:g}"
        else:
            want = "a finite number"
        raise KgmemInputError(f"{name} must be {want}{' or None' if optional else ''}, got {value!r}")


def check_unicode(text: str, what: str) -> None:
    """Raise :class:`KgmemInputError` if ``text`` cannot be stored as UTF-8 (lone surrogates, e.g.
    from bytes decoded with ``errors="surrogateescape"``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise KgmemInputError(
            f"{what} is not valid Unicode (a lone surrogate {text[exc.start]!r} at character {exc.start}): "
            "decode the source with errors='replace', or fix the text") from None


def check_storable(text: str, what: str) -> None:
    """Raise :class:`KgmemInputError` unless ``text`` can be stored the same way by every backend:
    PostgreSQL refuses NUL in text (SQLite would keep it) and neither can encode a lone surrogate.
    The message names ``what`` (the document, id or tenant) and the character's position."""
    if not isinstance(text, str):
        raise KgmemInputError(f"{what} must be text, got {type(text).__name__}")
    check_unicode(text, what)
    at = text.find("\x00")
    if at >= 0:
        raise KgmemInputError(f"{what} contains a NUL character at character {at}: NUL cannot be stored "
                              "(PostgreSQL refuses it); remove it, or check whether the input is binary")


MAX_STORED_DEPTH = 64   # JSON a document's metadata may nest: far past real metadata, far below Python's recursion


def check_storable_values(value: object, what: str) -> None:
    """:func:`check_storable` on every string inside JSON-like ``value`` (dict keys too): metadata
    is stored as JSON, and PostgreSQL's JSON refuses an escaped NUL or lone surrogate. Nesting
    deeper than :data:`MAX_STORED_DEPTH` is refused too (JSON encoders and decoders recurse: 2,000
    levels was a raw ``RecursionError`` on both backends)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_STORED_DEPTH:
            raise KgmemInputError(f"{what} nests deeper than {MAX_STORED_DEPTH} levels: flatten it (metadata is "
                                  "stored as JSON, read back by every process that opens the KG)")
        if isinstance(item, str):
            check_storable(item, f"{what}: the value {item[:40]!r}")
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str):
                    check_storable(k, f"{what}: the key {k[:40]!r}")
                stack.append((v, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)


def describe_error(exc: BaseException, limit: int = 300, *, typed: bool = True) -> str:
    """``"TypeName: message"`` (``typed=False``: the message alone) for any exception, its message
    cut to ``limit`` characters, never raising.

    Exceptions come from providers, tools and callbacks the package does not control; their
    ``__str__`` or ``__repr__`` may raise, return a non-string, or carry lone surrogates. Describing
    one must not replace the package's own error (or its recorded fallback) with a new crash."""
    try:
        name = type(exc).__name__
    except Exception:  # noqa: BLE001 - a hostile metaclass
        name = "Exception"
    text = None
    for describe in (str, repr):
        try:
            text = describe(exc)
        except Exception:  # noqa: BLE001 - see the docstring
            continue
        if isinstance(text, str):
            break
        text = None
    if text is None:
        text = "<the error's text could not be read>"
    # str's own slicing: a str subclass's overridden methods could raise too
    text = str.__getitem__(text, slice(0, limit)).encode("utf-8", "replace").decode("utf-8")
    if not typed:
        return text
    return f"{name}: {text}" if text else name


__all__ = ["KgmemError", "ConfigurationError", "MissingRequirementError", "KgmemInputError", "NotAKnowledgeGraphError",
           "StorageError", "SchemaVersionError", "UnsafeStoredDataError", "CorruptStoredDataError",
           "KgmemRecoveryWarning", "KgmemSchemaUpgradeWarning", "KgmemDecisionError", "KgmemModelError"]
