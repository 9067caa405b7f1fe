"""Typed records of the knowledge graph: node and edge kinds, stable prefixed content-hash ids."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

NodeKind = Literal["entity", "chunk", "anchor", "time", "location", "event"]
EdgeKind = Literal[
    "relation",      # entity → entity, from a triple; text = relation sentence
    "synonym",       # entity — entity, embedding similarity; weight = similarity-derived
    "context",       # entity → chunk / anchor: "mentioned in"
    "anchor_chunk",  # anchor → chunk
    "next",          # anchor_i → anchor_{i+1} in document order
    "temporal",      # time → location (KG-IRAG)
    "spatial",       # location → event
    "causal",        # time → event
    "time_next",     # time_i → time_{i+1}
]
NODE_KINDS: tuple[str, ...] = ("entity", "chunk", "anchor", "time", "location", "event")
EDGE_KINDS: tuple[str, ...] = ("relation", "synonym", "context", "anchor_chunk", "next", "temporal",
                               "spatial", "causal", "time_next")
ID_PREFIX = {"entity": "ent", "chunk": "chk", "anchor": "anc", "time": "tim", "location": "loc",
             "event": "evt", "document": "doc", "edge": "rel"}

_WS = re.compile(r"\s+")
KG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def check_kg_name(name: object) -> str:
    """A KG name keys its memory namespace, its rows in a shared database and its CLI handle:
    1–64 letters, digits, '_' or '-', starting with a letter or digit (no dots, slashes or spaces)."""
    from langgraph_kgmem.errors import KgmemInputError

    if not isinstance(name, str) or not KG_NAME.fullmatch(name):
        raise KgmemInputError(
            f"invalid KG name {name!r}: use 1-64 letters, digits, '_' or '-', starting with a letter or "
            "digit (e.g. 'hotpot-2024'); dots, slashes and spaces are not allowed")
    return name


MAX_DOCUMENT_ID_CHARS = 512   # a document id is a key in both backends' indexes (PostgreSQL's hold 2,704 bytes)


def check_document_id(doc_id: str) -> str:
    """Refuse a document id longer than :data:`MAX_DOCUMENT_ID_CHARS` characters the same way on
    every backend (SQLite would keep a 10 MB id that PostgreSQL's index refuses); returns it.

    Raises:
        KgmemInputError: naming the id's start and length.
    """
    from langgraph_kgmem.errors import KgmemInputError

    if len(doc_id) > MAX_DOCUMENT_ID_CHARS:
        raise KgmemInputError(f"document id {doc_id[:40]!r}... has {len(doc_id):,} characters, over the limit of "
                              f"{MAX_DOCUMENT_ID_CHARS}: use a shorter id (a path, a URL, or a hash of the long one)")
    return doc_id


@lru_cache(maxsize=1 << 16)   # ingest asks for the same names' identities many times over
def normalize_name(name: str) -> str:
    """Case- and whitespace-folded form used for entity identity."""
    return _WS.sub(" ", name.strip().strip(".,;:\"'")).lower()


def content_hash(*parts: str, size: int = 16) -> str:
    """Hex digest (``size`` hex characters) of ``parts`` joined with a separator no text holds, so
    ``("ab", "c")`` and ``("a", "bc")`` differ: the hash part of every id."""
    h = hashlib.blake2b(digest_size=size // 2)
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def node_id(kind: str, key: str) -> str:
    """Stable id: the kind's prefix plus a hash of the identifying key (e.g. the entity name)."""
    return f"{ID_PREFIX[kind]}-{content_hash(kind, key)}"


@lru_cache(maxsize=1 << 16)
def entity_id(name: str) -> str:
    """Id of the entity called ``name``: names that differ only in case, spacing or trailing
    punctuation (:func:`normalize_name`) are the same entity."""
    return node_id("entity", normalize_name(name))


def document_id(text: str, title: str = "") -> str:
    """Id of an ingested text (``title`` and text; the only recipe, shared by every ingest path)."""
    key = f"{title}\x1f{text}" if title else text
    return f"doc-{content_hash('document', key)}"


def edge_id(src: str, dst: str, kind: str, text: str = "") -> str:
    """Id of the edge ``src`` -> ``dst`` of ``kind`` and ``text`` (text case-folded): the same statement
    written twice is one edge."""
    return f"rel-{content_hash(src, dst, kind, text.strip().lower())}"


@dataclass
class Node:
    """A node of the KG: its id (prefixed content hash, see :func:`node_id`), one of :data:`NODE_KINDS`,
    its text (name, passage, timestamp...) and JSON-native attributes."""
    id: str
    kind: str
    text: str
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The node as a JSON-native dict (the attributes copied, so changing the dict leaves the node alone)."""
        return {"id": self.id, "kind": self.kind, "text": self.text, "attrs": dict(self.attrs)}


@dataclass
class Edge:
    """A directed edge of the KG: its id (:func:`edge_id`), its ends, one of :data:`EDGE_KINDS`, its text
    (the relation sentence of a ``relation`` edge), its weight and JSON-native attributes."""
    id: str
    src: str
    dst: str
    kind: str
    text: str = ""
    weight: float = 1.0
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The edge as a JSON-native dict (the attributes copied)."""
        return {"id": self.id, "src": self.src, "dst": self.dst, "kind": self.kind, "text": self.text,
                "weight": self.weight, "attrs": dict(self.attrs)}


@dataclass(frozen=True)
class Triple:
    """One extracted statement: subject, relation, object, as text."""
    subject: str
    relation: str
    object: str

    @classmethod
    def coerce(cls, value: Any) -> "Triple":
        """A :class:`Triple` from a triple, a ``[subject, relation, object]`` list or tuple, or a dict with
        those keys (values made strings).

        Raises:
            ValueError: for anything else, showing the value."""
        if isinstance(value, Triple):
            return value
        if isinstance(value, dict):
            return cls(str(value["subject"]), str(value["relation"]), str(value["object"]))
        if isinstance(value, (list, tuple)) and len(value) == 3:
            return cls(str(value[0]), str(value[1]), str(value[2]))
        raise ValueError(
            f"a triple must be [subject, relation, object] or a dict with those keys, got {value!r}"
        )

    def text(self) -> str:
        """The statement as one line, ``"subject relation object"``."""
        return f"{self.subject} {self.relation} {self.object}"
