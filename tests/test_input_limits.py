"""Limits that hold the same on both backends (#39, item 9): a document id over 512 characters
(a 10 MB id was kept by SQLite and refused by PostgreSQL's index) and metadata nested deeper than
64 levels (2,000 levels was a raw ``RecursionError`` on both) are refused as input errors before
anything is written."""

from __future__ import annotations

import pytest

from langgraph_kgmem.errors import MAX_STORED_DEPTH, KgmemInputError
from langgraph_kgmem.kg.types import MAX_DOCUMENT_ID_CHARS


def _nested(depth: int) -> dict:
    meta: dict = {"leaf": 1}
    for _ in range(depth):
        meta = {"k": meta}
    return meta


@pytest.mark.parametrize("doc_id, ok", [("d" * MAX_DOCUMENT_ID_CHARS, True), ("d" * (MAX_DOCUMENT_ID_CHARS + 1), False),
                                        ("x" * 10_000_000, False)])
def test_a_document_id_over_the_limit_is_refused_alike_on_each_backend(make_kg, doc_id, ok):
    kg = make_kg("limits")
    doc = {"id": doc_id, "title": "Oslo", "text": "Oslo is the capital of Norway."}
    if ok:
        kg.add_documents([doc], model="offline")
        assert [d["id"] for d in kg.documents()] == [doc_id]
        return
    with pytest.raises(KgmemInputError, match=rf"has {len(doc_id):,} characters, over the limit of 512"):
        kg.add_documents([{"id": "fine", "text": "Bergen is a city."}, doc], model="offline")
    with pytest.raises(KgmemInputError, match="over the limit of 512"):
        kg.add_triples([("Oslo", "capital of", "Norway")], source=doc_id)
    with pytest.raises(KgmemInputError, match="over the limit of 512"):
        kg.writer.put_document(doc_id, title="", status="done")
    assert kg.documents() == []


@pytest.mark.parametrize("depth, ok", [(MAX_STORED_DEPTH - 2, True), (MAX_STORED_DEPTH + 1, False), (2_000, False)])
def test_metadata_nested_past_the_limit_is_refused_alike_on_each_backend(make_kg, depth, ok):
    kg = make_kg("limits")
    doc = {"id": "deep", "text": "Oslo is the capital of Norway.", "source": _nested(depth)}
    if ok:
        kg.add_documents([doc], model="offline")
        assert kg.documents()[0]["meta"]["source"] == _nested(depth)
        return
    with pytest.raises(KgmemInputError, match=r"the metadata of document 'deep' nests deeper than 64 levels"):
        kg.add_documents([doc], model="offline")
    with pytest.raises(KgmemInputError, match="nests deeper than 64 levels"):
        kg.add_triples([("Oslo", "capital of", "Norway")], source="t", meta={"m": _nested(depth)})
    assert kg.documents() == []
