"""Async-native ingest: ``aadd_documents`` extracts with coroutines (``ainvoke``), at most
``max_concurrency`` chunks in flight on the event loop, and builds the same KG as ``add_documents``;
``adecide`` is the same typed decision as ``decide`` (retries, fallbacks, counting)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from langgraph.types import RetryPolicy
from pydantic import BaseModel

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.llm import adecide, decide, transient_model_error, with_retry_policy
from langgraph_kgmem.testing import (HOSTILE_KINDS, HostileChatModel, ScriptedChatModel, failing_then,
                                     scripted_extraction_model)

DOCS = [{"id": f"d{i}", "title": f"Doc {i}",
         "text": f"Ada Lovelace met Charles Babbage in London {i}. Grace Hopper visited Boston and Harvard."}
        for i in range(16)]


class Pick(BaseModel):
    node_id: str


def _structure(kg: KnowledgeGraph) -> tuple[set, set]:
    return ({(n.id, n.kind, n.text) for n in kg.nodes()},
            {(e.src, e.dst, e.kind, e.text) for e in kg.edges()})


def test_async_ingest_builds_the_same_kg_as_sync_and_counts_the_same_calls():
    sync_kg = KnowledgeGraph.in_memory(name="s", embeddings="hash")
    async_kg = KnowledgeGraph.in_memory(name="a", embeddings="hash")
    sync_report = sync_kg.add_documents(DOCS, model=scripted_extraction_model(), max_concurrency=1)
    async_report = asyncio.run(async_kg.aadd_documents(DOCS, model=scripted_extraction_model(), max_concurrency=5))
    assert _structure(sync_kg) == _structure(async_kg)
    assert len(_structure(async_kg)[1]) > len(DOCS)
    assert async_report.documents_added == sync_report.documents_added == len(DOCS)
    assert async_report.usage["llm_calls"] == sync_report.usage["llm_calls"] == 2 * len(DOCS)   # titles given
    # an unchanged re-run skips everything, a changed document is replaced, as with add_documents
    again = asyncio.run(async_kg.aadd_documents(DOCS[:2] + [{**DOCS[2], "text": "Alan Turing worked in Manchester."}],
                                                model=scripted_extraction_model()))
    assert again.documents_skipped == 2 and again.documents_replaced == 1


def test_async_extraction_runs_on_the_loop_bounded_and_concurrent():
    in_flight, peak, threads = [0], [0], set()
    latency = 0.05

    class Counting(ScriptedChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            threads.add(threading.get_ident())
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            try:
                return await super()._agenerate(messages, stop, run_manager, **kwargs)
            finally:
                in_flight[0] -= 1

    model = Counting(responder=scripted_extraction_model().responder, latency=latency)
    kg = KnowledgeGraph.in_memory(name="c", embeddings="hash")
    progress = []

    async def run():
        loop_thread = threading.get_ident()
        report = await kg.aadd_documents(DOCS, model=model, max_concurrency=4, on_progress=progress.append)
        return report, loop_thread

    report, loop_thread = asyncio.run(run())
    assert threads == {loop_thread}            # every call a coroutine on the loop: no thread per call
    assert peak[0] == 4                        # bounded by max_concurrency, and reaching it
    assert [p["done"] for p in progress] == list(range(1, len(DOCS) + 1))   # in input order
    assert [p["doc_id"] for p in progress] == [d["id"] for d in DOCS]
    assert report.documents_added == len(DOCS)


def test_a_failed_async_extraction_leaves_nothing_half_written():
    def responder(messages, request):
        if "Doc 3" in request.context.get("text", "") or "London 3." in request.context.get("text", ""):
            raise AssertionError("a bug, not a model failure: must propagate")
        return scripted_extraction_model().responder(messages, request)

    kg = KnowledgeGraph.in_memory(name="f", embeddings="hash")
    with pytest.raises(AssertionError):
        asyncio.run(kg.aadd_documents(DOCS, model=ScriptedChatModel(responder=responder), max_concurrency=4))
    done = {d["id"] for d in kg.documents() if d["status"] == "done"}
    assert done == {"d0", "d1", "d2"}          # written in input order, up to the failure
    assert {d["id"] for d in kg.documents() if d["status"] == "pending"} == {"d3"}
    report = kg.add_documents(DOCS, model=scripted_extraction_model())   # a re-run completes it
    assert report.documents_repaired == 1 and report.documents_added == len(DOCS) - 3
    assert {d["status"] for d in kg.documents()} == {"done"}


def test_adecide_waits_its_backoff_on_the_loop_not_in_a_blocking_sleep(monkeypatch):
    from langgraph_kgmem.llm import calls

    responder = failing_then([TimeoutError("t1"), TimeoutError("t2")], '{"node_id": "n1"}')
    waits = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds, *args):
        waits.append(seconds)
        await real_sleep(0)

    def blocking_sleep(seconds):
        raise AssertionError("time.sleep on the event loop")

    monkeypatch.setattr(calls.asyncio, "sleep", recording_sleep)
    monkeypatch.setattr(calls.time, "sleep", blocking_sleep)
    policy = RetryPolicy(initial_interval=0.05, backoff_factor=2.0, jitter=False, max_attempts=3,
                         retry_on=transient_model_error)
    d, usage = asyncio.run(adecide(with_retry_policy(ScriptedChatModel(responder=responder), policy), Pick, "choose",
                                   step="pick", offline=lambda: Pick(node_id="safe")))
    assert d.node_id == "n1" and usage["llm_calls"] == 3 and not usage["fallbacks"]
    assert waits == [0.05, 0.1]      # the policy's backoff, awaited


@pytest.mark.parametrize("seed", range(12))
def test_adecide_answers_exactly_as_decide_whatever_the_model_says(seed):
    kwargs = dict(step="pick", offline=lambda: Pick(node_id="safe"), context={"candidates": ["n1", "n2"]},
                  validate=lambda p: None if p.node_id in {"n1", "n2", "safe"} else "unknown id")
    weights = {k: 1.0 for k in HOSTILE_KINDS}
    d1, u1 = decide(HostileChatModel(seed=seed, weights=weights), Pick, "choose n1 or n2", **kwargs)
    d2, u2 = asyncio.run(adecide(HostileChatModel(seed=seed, weights=weights), Pick, "choose n1 or n2", **kwargs))
    assert d1 == d2
    assert u1["llm_calls"] == u2["llm_calls"]
    assert [f["kind"] for f in u1["fallbacks"]] == [f["kind"] for f in u2["fallbacks"]]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_bulk_ingest_embeds_many_documents_per_model_call(mode):
    from langgraph_kgmem.embeddings import HashingEmbeddings
    from langgraph_kgmem.ingest.pipeline import EMBED_WINDOW_CHUNKS

    class Counting(HashingEmbeddings):
        calls: list[int] = []

        def embed_documents(self, texts):
            Counting.calls.append(len(texts))
            return super().embed_documents(texts)

    docs = [{"id": f"w{i}", "title": f"T{i}", "text": f"Person{i} founded Company{i} in City{i}."} for i in range(100)]
    kg = KnowledgeGraph.in_memory(name="w", embeddings=Counting(64))
    if mode == "sync":   # (no entity merging: a merged name's facts are embedded on their own)
        kg.add_documents(docs, model="offline", merge_threshold=None)
    else:
        asyncio.run(kg.aadd_documents(docs, model="offline", merge_threshold=None))
    assert EMBED_WINDOW_CHUNKS >= 32
    assert len(Counting.calls) <= 8, Counting.calls        # a few windows, passages and short texts each
    assert max(Counting.calls) >= 32                       # not one document per call
    assert Counting.calls[0] == len(docs)                  # every passage in one call, ahead of the windows
    ref = KnowledgeGraph.in_memory(name="w", embeddings=HashingEmbeddings(64))
    for d in docs:                                                    # one call per document: the same KG
        ref.add_documents([d], model="offline", merge_threshold=None)
    assert _structure(kg) == _structure(ref)


def _merging_docs(n: int) -> list[dict]:
    """Documents whose names recur in variants (merged at a 0.6 cosine under hashing embeddings),
    within a window and across windows; titles share nothing, so no merge is a near-tie."""
    import hashlib

    def word(i: int) -> str:
        return "Q" + hashlib.blake2b(str(i).encode(), digest_size=6).hexdigest()

    return [{"id": f"m{i}", "title": word(i),
             "text": f"Northwind Trading{' Group' if i % 3 else ''} hired Ada Lovelace{' Jr' if i % 4 == 1 else ''} "
                     f"in Harbor City{' Council' if i % 5 == 2 else ''}. {word(i)} hosts Northwind Trading."}
            for i in range(n)]


def _with_aliases(kg: KnowledgeGraph) -> tuple:
    return _structure(kg), sorted((a, t) for a, t, _ in kg.graph_store.aliases())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_bulk_ingest_writes_each_window_in_one_transaction_and_merges_as_one_document_at_a_time(mode, make_kg,
                                                                                                backend):
    docs = _merging_docs(150)
    kg = make_kg("w")
    commits: list[str] = []
    if backend == "sqlite":
        kg.graph_store.conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    if mode == "sync":
        report = kg.add_documents(docs, model="offline", merge_threshold=0.6)
    else:
        report = asyncio.run(kg.aadd_documents(docs, model="offline", merge_threshold=0.6))
    if backend == "sqlite":
        kg.graph_store.conn.set_trace_callback(None)
        assert len(commits) <= 6, len(commits)   # 3 windows of 64 chunks, not a commit or two per document
    assert report.documents_added == 150 and report.entities_merged > 0
    ref = KnowledgeGraph.in_memory(name="w", embeddings="hash")
    ref_merged = sum(ref.add_documents([d], model="offline", merge_threshold=0.6).entities_merged for d in docs)
    assert report.entities_merged == ref_merged
    assert _with_aliases(kg) == _with_aliases(ref)
    assert {d["status"] for d in kg.documents()} == {"done"}


def test_a_write_failing_inside_a_window_keeps_the_documents_before_it(monkeypatch, make_kg):
    from langgraph_kgmem.ingest import pipeline

    real = pipeline._Writer.write_chunk

    def write_chunk(self, *args, **kwargs):
        if self.doc_id == "m70":     # in the second window
            raise OSError("disk full")
        return real(self, *args, **kwargs)

    docs = _merging_docs(100)
    kg = make_kg("f")
    monkeypatch.setattr(pipeline._Writer, "write_chunk", write_chunk)
    with pytest.raises(OSError, match="disk full"):
        kg.add_documents(docs, model="offline", merge_threshold=0.6)
    status = {d["id"]: d["status"] for d in kg.documents()}
    assert [i for i in range(100) if status.get(f"m{i}") == "done"] == list(range(70))
    assert status["m70"] == "pending"                  # begun, its write rolled back: repaired by a re-run
    monkeypatch.setattr(pipeline._Writer, "write_chunk", real)
    report = kg.add_documents(docs, model="offline", merge_threshold=0.6)
    assert report.documents_repaired >= 1 and report.documents_skipped == 70
    ref = KnowledgeGraph.in_memory(name="f", embeddings="hash")
    for d in docs:
        ref.add_documents([d], model="offline", merge_threshold=0.6)
    assert _with_aliases(kg) == _with_aliases(ref)


def test_add_triples_embeds_its_passage_and_names_in_one_model_call():
    from langgraph_kgmem.embeddings import HashingEmbeddings

    class Counting(HashingEmbeddings):
        calls: list[int] = []

        def embed_documents(self, texts):
            Counting.calls.append(len(texts))
            return super().embed_documents(texts)

    kg = KnowledgeGraph.in_memory(name="t", embeddings=Counting(64))
    kg.add_triples([("Marie Curie", "born in", "Warsaw")], text="Marie Curie was born in Warsaw.", title="Marie Curie")
    assert len(Counting.calls) == 1, Counting.calls     # one model: the passage, names and fact together
