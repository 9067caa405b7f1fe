"""One error family for the whole package: every error says what failed and what to do."""

from __future__ import annotations


class KgmemError(Exception):
    """Base class of every error raised on purpose by langgraph_kgmem."""


class ConfigurationError(KgmemError):
    """A model, embedding or store is needed but not configured (the message names the variables)."""


class KgmemInputError(KgmemError, ValueError):
    """Bad user input (empty/binary file, non-UTF-8 text, oversize document, unknown id ...)."""


class NotAKnowledgeGraphError(KgmemError):
    """A path given as a KG directory is not one."""


class KgmemDecisionError(KgmemError):
    """An LLM decision stayed malformed after its retry and the caller asked for no fallback."""

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw
