"""The ``autopruned-extract`` bench adapter: AutoPrunedRetriever with the model reading the
question's and the answer's triples, the oracle reading them as the offline parser does."""

from __future__ import annotations

from types import SimpleNamespace

from bench_helpers import offline_kg  # noqa: I001  (puts tools/ on sys.path)
from benchlib.api import BenchContext, BenchQuestion
from benchlib.methods.autopruned import ADAPTERS, ExtractingAdapter

from langgraph.store.memory import InMemoryStore
from langgraph_kgmem.graphs.autopruned.deps import offline_triples
from langgraph_kgmem.testing import ScriptedChatModel

PASSAGES = [{"title": "Warsaw", "text": "Marie Curie was born in Warsaw. Warsaw is the capital of Poland."},
            {"title": "Paris", "text": "Pierre Curie was born in Paris."}]


def test_the_oracle_reads_a_text_as_the_offline_parser_and_answers_from_the_evidence():
    adapter = next(a for a in ADAPTERS if a.name == "autopruned-extract")
    assert isinstance(adapter, ExtractingAdapter) and adapter.options["extraction"] == "llm"
    q = BenchQuestion(id="q", question="Where was Marie Curie born?", answer="Warsaw", passages=PASSAGES,
                      supporting_titles=["Warsaw"])
    respond = adapter.oracle(None, q)
    text = "Where was Marie Curie born?"
    read = respond([], SimpleNamespace(step="extract_question_triples", context={"text": text, "kind": "question"}))
    assert read == {"triples": [{"subject": t.subject, "relation": t.relation, "object": t.object}
                                for t in offline_triples(text).triples]} and read["triples"]
    answer = SimpleNamespace(step="answer", context={"evidence_texts": ["Marie Curie was born in Warsaw."]})
    assert respond([], answer) == "Warsaw"


def test_a_grounded_answer_costs_three_calls_and_a_rewording_with_reuse_two(tmp_path):
    kg = offline_kg(PASSAGES)
    store = InMemoryStore()
    ctx = BenchContext(kg=kg, store=store, checkpointer=None, decider="oracle", dataset="toy", workdir=tmp_path,
                       options={"reuse": True})
    adapter = ExtractingAdapter("autopruned-extract", fine_m=20)
    adapter.setup(ctx)
    q = BenchQuestion(id="q", question="Where was Marie Curie born?", answer="Warsaw", passages=PASSAGES,
                      supporting_titles=["Warsaw"])
    model = ScriptedChatModel(responder=adapter.oracle(ctx, q))
    first = adapter.run(ctx, q, model)
    assert first.answer == "Warsaw" and first.usage["llm_calls"] == 3
    again = adapter.run(ctx, BenchQuestion(id="q", question="Marie Curie was born where?", answer="Warsaw",
                                           passages=PASSAGES, supporting_titles=["Warsaw"]), model)
    assert again.answer == "Warsaw" and again.usage["llm_calls"] == 2
    kg.close()
