"""Reuse of a confirmed earlier run (``reuse=True``, docs/memory.md): a question asked again, by the
same method or another, reworded or not, starts from that run's evidence and makes fewer model
calls; per tenant, bounded, never past a replaced document, a wrong verdict or a "no answer";
switched off, every method behaves as before."""

from __future__ import annotations

import numpy as np
import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph, create_catrag_graph, create_remindrag_graph
from langgraph_kgmem.graphs.feedback import give_feedback
from langgraph_kgmem.graphs.reuse import lent, own_finds_first, prior_run, reuse_facts, reuse_seeds, seed_passages
from langgraph_kgmem.memory import namespace
from langgraph_kgmem.memory import prior_runs
from langgraph_kgmem.memory.prior_runs import (MAX_METHODS, MAX_REUSED_EVIDENCE, QUESTIONS_KIND, find_prior_run,
                                               index_question, question_key)
from langgraph_kgmem.memory.runs import evidence_provenance, run_record, save_run
from langgraph_kgmem.testing import ScriptedChatModel

DOCS = [{"id": t.lower(), "title": t, "text": x} for t, x in [
    ("Warsaw", "Warsaw is the capital of Poland. Warsaw lies on the Vistula river."),
    ("Krakow", "Krakow is a city in Poland. Krakow was the capital of Poland until 1596."),
    ("Paris", "Paris is the capital of France. Paris lies on the Seine."),
    ("Berlin", "Berlin is the capital of Germany. Berlin lies on the Spree."),
]]
QUESTION = "Which city is the capital of Poland?"
REWORDED = "Which city is Poland's capital?"


@pytest.fixture
def kg():
    g = KnowledgeGraph.in_memory(name="reuse", embeddings="hash")
    g.add_documents(DOCS, model="offline")
    yield g
    g.close()


def scripted(log, answer="Warsaw"):
    """A model answering every decision of CatRAG, HippoRAG 2 and ReMindRAG, logging each step."""

    def respond(messages, request):
        step = getattr(request, "step", None)
        log.append(step)
        replies = {"filter_facts": {"keep": [1, 2]}, "anchor_entities": {"names": ["Poland"]},
                   "check_sufficiency": {"sufficient": True}, "mark_useful": {"useful_ids": []}}
        if step == "weight_edges":
            return {"scores": [{"neighbour": n["neighbour"], "score": 8} for n in request.context["neighbours"]]}
        if step == "summarize_neighbour":
            return "a short summary"
        if step == "answer":
            return answer
        return replies[step]

    return ScriptedChatModel(responder=respond)


def stored_run(kg, store, question, answer, run_id="r-1"):
    """A catrag run of ``question`` on the KG's first passage, saved and indexed as a graph would."""
    chunk = next(n.id for n in kg.nodes("chunk"))
    save_run(store, kg.name, (), run_id, run_record(question=question, method="catrag", evidence_ids=[chunk],
                                                      answer=answer, thread_id=None, provenance=[]))
    index_question(store, kg.name, (), question, kg.embed_query(question), "catrag", run_id)


def hippo(kg, store, model, **options):
    return create_catrag_graph(kg, model=model, store=store, anchoring=False, dynamic_weighting=False,
                               key_fact_boost=False, top_passages=2, **options).compile(store=store)


def remind(kg, store, model, **options):
    return create_remindrag_graph(kg, model=model, store=store, top_passages=2, **options).compile(store=store)


def ids(out):
    return [e["id"] for e in out["evidence"]]


def test_hipporag2_asked_again_reuses_its_run_and_switched_off_asks_again(kg):
    store, log = InMemoryStore(), []
    first = hippo(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert log == ["filter_facts", "answer"] and first["reused"] is None and first["answer"] == "Warsaw"
    log.clear()
    again = hippo(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert log == []                                          # no filter, no answer call
    assert again["reused"]["run_id"] == first["run_id"] and again["reused"]["exact"]
    assert ids(again) == ids(first) and again["answer"] == "Warsaw"        # its own run replayed, in order
    log.clear()
    off = hippo(kg, store, scripted(log)).invoke({"question": QUESTION})   # the switch off: as before
    assert log == ["filter_facts", "answer"] and off["reused"] is None and ids(off) == ids(first)


def test_catrag_skips_its_scoring_and_anchoring_calls_on_reuse(kg):
    store, log = InMemoryStore(), []
    app = create_catrag_graph(kg, model=scripted(log), store=store, top_passages=2, reuse=True).compile(store=store)
    app.invoke({"question": QUESTION})
    assert "anchor_entities" in log and "filter_facts" in log
    log.clear()
    app.invoke({"question": QUESTION})
    assert not {"anchor_entities", "filter_facts", "weight_edges", "summarize_neighbour"} & set(log)


def test_a_run_of_another_method_is_reused(kg):
    store, log = InMemoryStore(), []
    first = remind(kg, store, scripted(log)).invoke({"question": QUESTION})
    assert first["answer"] == "Warsaw"
    log.clear()
    out = hippo(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert out["reused"]["method"] == "remindrag" and out["reused"]["run_id"] == first["run_id"]
    assert "filter_facts" not in log


def test_remindrag_skips_its_sufficiency_check_for_its_own_run_and_asks_it_for_another_methods(kg):
    store, log = InMemoryStore(), []
    first = hippo(kg, store, scripted(log)).invoke({"question": QUESTION})
    log.clear()
    out = remind(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert out["reused"]["method"] == "hipporag2" and log.count("check_sufficiency") == 1   # lent: checked
    assert set(out["reused"]["passages"]) <= set(ids(out)) | set(ids(first))
    log.clear()
    own = remind(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert own["reused"]["method"] == "remindrag" and "check_sufficiency" not in log       # its own: not
    log.clear()
    remind(kg, store, scripted(log)).invoke({"question": QUESTION})        # off: it checks again
    assert "check_sufficiency" in log


def test_a_walk_ranks_its_own_finds_before_another_methods_passages():
    found = ["c-lent-1", "c-own-1", "c-lent-2", "c-own-2"]
    theirs = {"method": "catrag", "passages": ["p-lent-2", "p-lent-1"]}
    unit = lambda p: p.replace("p-", "c-")   # noqa: E731  (a passage id's unit, as the view maps it)
    assert own_finds_first(found, theirs, "remindrag", unit) == ["c-own-1", "c-own-2", "c-lent-1", "c-lent-2"]
    assert own_finds_first(found, {**theirs, "method": "remindrag"}, "remindrag", unit) == found   # its own run
    assert own_finds_first(found, None, "remindrag", unit) == found
    assert lent(theirs, "remindrag") and not lent(theirs, "catrag") and not lent(None, "catrag")


def test_remindrags_answer_step_ranks_another_methods_passages_after_its_own_finds(kg, monkeypatch):
    from langgraph_kgmem.graphs.remindrag import nodes

    seen = []

    def spy(found, reused, method, unit):
        out = own_finds_first(found, reused, method, unit)
        seen.append((list(found), (reused or {}).get("method"), out))
        return out

    monkeypatch.setattr(nodes, "own_finds_first", spy)
    store, log = InMemoryStore(), []
    hippo(kg, store, scripted(log)).invoke({"question": QUESTION})
    remind(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    (found, lender, ranked), = seen
    assert lender == "hipporag2" and sorted(ranked) == sorted(found)


def test_a_reworded_question_is_reused_only_above_the_similarity(kg):
    store, log = InMemoryStore(), []
    hippo(kg, store, scripted(log)).invoke({"question": QUESTION})
    cos = float(kg.embed_query(QUESTION) @ kg.embed_query(REWORDED))
    assert 0.3 < cos < 1.0
    far = hippo(kg, store, scripted([]), reuse=True, reuse_similarity=cos + 0.01).invoke({"question": REWORDED})
    assert far["reused"] is None
    near = hippo(kg, store, scripted([]), reuse=True, reuse_similarity=cos - 0.01).invoke({"question": "Which city is "
                                                                                           "the capital city of Poland?"})
    assert near["reused"] and not near["reused"]["exact"] and near["reused"]["similarity"] < 1.0


def test_reuse_never_crosses_tenants(kg):
    store, log = InMemoryStore(), []
    scope = ("{user_id}",)
    hippo(kg, store, scripted(log), memory_scope=scope).invoke({"question": QUESTION},
                                                               {"configurable": {"user_id": "alice"}})
    app = hippo(kg, store, scripted(log), reuse=True, memory_scope=scope)
    assert app.invoke({"question": QUESTION}, {"configurable": {"user_id": "bob"}})["reused"] is None
    assert app.invoke({"question": QUESTION}, {"configurable": {"user_id": "alice"}})["reused"] is not None


def test_a_replaced_document_ends_the_reuse_of_what_rested_on_it(kg):
    store = InMemoryStore()          # a store the KG does not know: only the read-time check guards it
    hippo(kg, store, scripted([])).invoke({"question": QUESTION})
    kg.add_documents([{**DOCS[0], "text": "Warsaw is the capital of Poland. Warsaw lies on the Oder."}], model="offline")
    out = hippo(kg, store, scripted([]), reuse=True).invoke({"question": QUESTION})
    assert out["reused"] is None


def test_a_no_answer_run_is_reused_only_while_the_corpus_is_the_one_it_searched(kg):
    store, log = InMemoryStore(), []
    first = hippo(kg, store, scripted(log, "no answer"), reuse=True).invoke({"question": QUESTION})
    assert first["answer"] == "no answer" and log == ["filter_facts", "answer"]
    log.clear()
    again = hippo(kg, store, scripted(log, "no answer"), reuse=True).invoke({"question": QUESTION})
    assert log == [] and again["reused"]["run_id"] == first["run_id"] and again["reused"]["answered"] is False
    assert ids(again) == ids(first) and again["answer"] == "no answer"
    before = kg.corpus_hash()
    kg.add_documents([{"id": "lodz", "title": "Lodz", "text": "Lodz is a city in Poland."}], model="offline")
    assert kg.corpus_hash() != before                       # a document the run never saw may hold the answer
    log.clear()
    third = hippo(kg, store, scripted(log, "no answer"), reuse=True).invoke({"question": QUESTION})
    assert third["reused"] is None and log == ["filter_facts", "answer"]   # searched again, in full
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").run_id == third["run_id"]   # this corpus's
    answered = hippo(kg, store, scripted([]), reuse=False).invoke({"question": QUESTION})
    kg.add_documents([{"id": "gdansk", "title": "Gdansk", "text": "Gdansk is a port in Poland."}], model="offline")
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").run_id == answered["run_id"]   # an answer holds


def test_only_a_no_answer_run_pays_for_the_corpus_hash(kg, monkeypatch):
    """Hashing the corpus reads every document row: an answered run must not (it rests on its
    evidence alone), or every first question after a write would cost the KG's size."""
    store, scans = InMemoryStore(), []
    real = kg._store.documents
    monkeypatch.setattr(kg._store, "documents", lambda: scans.append(1) or real())
    answered = hippo(kg, store, scripted([])).invoke({"question": QUESTION})
    assert answered["answer"] == "Warsaw" and scans == []
    assert store.get(namespace(kg.name, "runs"), answered["run_id"]).value["corpus"] is None
    none = hippo(kg, store, scripted([], "no answer")).invoke({"question": QUESTION})
    assert scans == [1] and store.get(namespace(kg.name, "runs"), none["run_id"]).value["corpus"] == kg.corpus_hash()


def test_a_no_answer_run_with_a_wrong_verdict_or_after_a_replacement_or_deletion_is_not_reused(kg):
    store = InMemoryStore()
    hippo(kg, store, scripted([], "no answer")).invoke({"question": QUESTION})
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").answered is False
    kg.add_documents([{**DOCS[3], "text": "Berlin is the capital of Germany. Berlin lies on the Havel."}],
                     model="offline")                        # replaced, though not in its evidence
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2") is None
    first = hippo(kg, store, scripted([], "no answer")).invoke({"question": QUESTION})
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").run_id == first["run_id"]
    kg.delete_document("berlin")                             # not in its evidence: its provenance still holds
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2") is None
    again = hippo(kg, store, scripted([], "no answer")).invoke({"question": QUESTION})
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").run_id == again["run_id"] != first["run_id"]
    give_feedback(kg, again["run_id"], verdict="wrong", store=store)
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2") is None


def test_a_wrong_verdict_and_a_no_answer_of_another_corpus_are_never_reused(kg):
    store = InMemoryStore()
    first = hippo(kg, store, scripted([])).invoke({"question": QUESTION})
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2") is not None
    give_feedback(kg, first["run_id"], verdict="wrong", store=store)
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2") is None
    stored_run(kg, store, "Who?", "no answer", "r-none")
    assert find_prior_run(store, kg, (), "Who?", method="catrag") is None


def test_what_reuse_reads_and_hands_on_is_bounded(kg, monkeypatch):
    store = CountingStore()
    chunk = next(n.id for n in kg.nodes("chunk"))
    many = [chunk] + [n.id for n in kg.nodes("entity")][:60]
    save_run(store, kg.name, (), "r-1", run_record(question=QUESTION, method="catrag", evidence_ids=many,
                                                     answer="Warsaw", thread_id=None, provenance=[]))
    for k in range(MAX_METHODS + 4):
        index_question(store, kg.name, (), QUESTION, kg.embed_query(QUESTION), f"m{k}", "r-1")
    item = store.get(namespace(kg.name, QUESTIONS_KIND), question_key(QUESTION))
    assert len(item.value["runs"]) == MAX_METHODS and "m0" not in item.value["runs"]   # the oldest went
    assert len(find_prior_run(store, kg, (), QUESTION, method="m5").evidence) == MAX_REUSED_EVIDENCE
    monkeypatch.setattr(prior_runs, "MAX_SCAN", 7)
    find_prior_run(store, kg, (), REWORDED, method="m5", similarity=0.0)
    assert store.limits == [7]                               # a similarity lookup reads one bounded page


class CountingStore(InMemoryStore):
    """An in-memory store that records the ``limit`` of every search."""

    def __init__(self):
        super().__init__()
        self.limits = []

    def search(self, *args, **kwargs):
        self.limits.append(kwargs.get("limit"))
        return super().search(*args, **kwargs)


def test_question_keys_fold_case_and_spacing_only():
    assert question_key("  Which city is the capital of Poland? ") == question_key("which city is the  capital of poland")
    assert question_key("Founded in 1898?") != question_key("Founded in 1899?")
    assert question_key("What is 5*3?") != question_key("What is 5-3?")


def test_r3cycle_answers_a_question_asked_before_without_a_walk():
    from langgraph_kgmem.agent_tools.graphqa import make_domain_graph
    from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph
    from langgraph_kgmem.agent_tools import load_grbench

    data = make_domain_graph(seed=1, books=6, authors=3, publishers=2, genres=2)
    books = KnowledgeGraph.in_memory(name="books", embeddings="hash")
    load_grbench(books, data)
    title = data["book"]["book-0"]["features"]["title"]
    author = data["author"][data["book"]["book-0"]["neighbors"]["author"][0]]["features"]["name"]
    plan = [("RetrieveNode", {"keyword": title}), ("Finish", {"answer": author})]

    def model():
        def respond(messages, request):
            name, args = plan[min(request.context["step_index"], len(plan) - 1)]
            return {"content": "thought", "tool_calls": [{"name": name, "args": args}]}
        return ScriptedChatModel(responder=respond)

    store, question = InMemoryStore(), f"Who wrote {title}?"
    first_model, again_model, off_model = model(), model(), model()
    build = lambda m, **o: create_r3cycle_graph(books, model=m, reflection=False, **o).compile(store=store)  # noqa: E731
    first = build(first_model).invoke({"question": question})
    assert first["answer"] == author and first_model.calls
    again = build(again_model, reuse=True).invoke({"question": question})
    assert again_model.calls == [] and again["answer"] == author and again["reused"]["run_id"] == first["run_id"]
    assert [e["id"] for e in again["evidence"]] == [e["id"] for e in first["evidence"]]
    off = build(off_model).invoke({"question": question})
    assert off_model.calls and off["reused"] is None


def test_a_near_question_about_other_names_is_never_taken_for_a_rewording(kg):
    store = InMemoryStore()
    stored_run(kg, store, "Who wrote The Crimson Compass in 1990?", "Anouk Moreau")
    for other in ("Who wrote The Last Letters in 1990?", "Who wrote The Crimson Compass in 1991?"):
        assert find_prior_run(store, kg, (), other, method="catrag", similarity=0.0) is None
    found = find_prior_run(store, kg, (), "In 1990, who was the author of The Crimson Compass?", method="catrag",
                           similarity=0.0)
    assert found is not None and found.run_id == "r-1" and not found.exact


def test_a_near_question_asking_for_another_kind_of_answer_is_never_taken_for_a_rewording(kg):
    store = InMemoryStore()
    stored_run(kg, store, "When was Albert Einstein born?", "1879")
    for other in ("Where was Albert Einstein born?", "Who was Albert Einstein born to?",
                  "How many siblings was Albert Einstein born with?", "Was Albert Einstein born?"):
        assert find_prior_run(store, kg, (), other, method="catrag", similarity=0.0) is None, other
    for reworded in ("In what year was Albert Einstein born?", "What was Albert Einstein's date of birth?",
                     "Albert Einstein was born when?"):
        found = find_prior_run(store, kg, (), reworded, method="catrag", similarity=0.0)
        assert found is not None and found.run_id == "r-1" and not found.exact, reworded


def test_question_forms():
    forms = {"When was X born?": "time", "In which year did X die?": "time", "X was born in what year?": "time",
             "Where did X die?": "place", "In which city was X born?": "place", "Who wrote X?": "person",
             "Whose son was X?": "person", "How many films did X make?": "amount", "How did X die?": "manner",
             "Why did X resign?": "reason", "Did X and Y share a nationality?": "polar",
             "What is the name of the river where X was born?": "entity",
             "The man who founded X was born in which country?": "place"}
    assert {q: prior_runs.question_form(q) for q in forms} == forms
    assert prior_runs.same_form("Who wrote X?", "Which author wrote X?")
    assert not prior_runs.same_form("What did X write?", "Did X write?")


def test_a_reworded_question_lends_its_evidence_never_its_answer(kg):
    store, log = InMemoryStore(), []
    first = hippo(kg, store, scripted(log, answer="Warsaw")).invoke({"question": QUESTION})
    log.clear()
    again = hippo(kg, store, scripted(log, answer="Warsaw, on the Vistula"), reuse=True,
                  reuse_similarity=0.0).invoke({"question": REWORDED})
    assert again["reused"]["run_id"] == first["run_id"] and not again["reused"]["exact"]
    assert log == ["answer"] and again["answer"] == "Warsaw, on the Vistula"   # the filter skipped, the answer asked
    log.clear()
    same = hippo(kg, store, scripted(log, answer="never asked"), reuse=True).invoke({"question": QUESTION})
    assert log == [] and same["reused"]["exact"] and same["answer"] in {"Warsaw", "Warsaw, on the Vistula"}


def test_a_no_answer_run_is_reused_only_by_its_own_method(kg):
    store, log = InMemoryStore(), []
    first = hippo(kg, store, scripted(log, "no answer"), reuse=True).invoke({"question": QUESTION})
    assert first["answer"] == "no answer"
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").run_id == first["run_id"]
    assert find_prior_run(store, kg, (), QUESTION, method="remindrag") is None          # another method searches
    assert find_prior_run(store, kg, (), REWORDED, method="hipporag2", similarity=0.0) is None   # a rewording too
    reworded = find_prior_run(store, kg, (), REWORDED, method="hipporag2", similarity=0.0, unanswered_rewordings=True)
    assert reworded.run_id == first["run_id"] and not reworded.answered and not reworded.exact   # unless asked
    log.clear()
    other = remind(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert other["reused"] is None and "check_sufficiency" in log and other["answer"] == "Warsaw"
    assert find_prior_run(store, kg, (), QUESTION, method="hipporag2").run_id == first["run_id"]   # its own first
    assert find_prior_run(store, kg, (), REWORDED, method="hipporag2", similarity=0.0).run_id == other["run_id"]


def test_hipporag2_seeds_a_rewording_of_its_no_answer_run_and_answers_it_remindrag_walks_afresh(kg):
    store, log = InMemoryStore(), []
    hippo(kg, store, scripted(log, "no answer"), reuse=True).invoke({"question": QUESTION})
    log.clear()
    again = hippo(kg, store, scripted(log, "Warsaw"), reuse=True).invoke({"question": REWORDED})
    assert again["reused"] and not again["reused"]["answered"] and not again["reused"]["exact"]
    assert log == ["answer"] and again["answer"] == "Warsaw"          # no fact filter; the answer is asked
    store = InMemoryStore()
    remind(kg, store, scripted(log, "no answer"), reuse=True).invoke({"question": QUESTION})
    log.clear()
    walk = remind(kg, store, scripted(log), reuse=True).invoke({"question": REWORDED})
    assert walk["reused"] is None and "check_sufficiency" in log and walk["answer"] == "Warsaw"   # a walk afresh


def lender_run(kg, store, question, answer, *, method="autopruned", scope=(), run_id="r-lent"):
    """Another method's run of ``question`` over Paris, Krakow and Warsaw, in that order."""
    chunk_of = {d["title"]: next(c.id for c in kg.nodes("chunk") if c.text.startswith(d["title"])) for d in DOCS}
    evidence = [chunk_of["Paris"], chunk_of["Krakow"], chunk_of["Warsaw"]]
    save_run(store, kg.name, scope, run_id, run_record(question=question, method=method, evidence_ids=evidence,
                                                         answer=answer, thread_id=None,
                                                         provenance=evidence_provenance(kg, evidence)))
    index_question(store, kg.name, scope, question, kg.embed_query(question), method, run_id)
    return evidence


def test_a_lent_run_hands_on_what_its_answer_stands_on_first_and_seeds_with_it_alone(kg):
    """Another method's run is lent with the passages that ground its answer first (``grounds``), and
    CatRAG and HippoRAG 2 seed only with those: the rest is the lender's ranking (docs/memory.md,
    "A lent run seeds with what its answer stands on")."""
    store = InMemoryStore()
    paris, krakow, warsaw = lender_run(kg, store, QUESTION, "Warsaw")
    lent_run = prior_run(kg, store, None, QUESTION, method="hipporag2", similarity=0.8)
    assert lent_run["passages"] == [warsaw, paris, krakow] and lent_run["grounds"] == [warsaw]
    own = prior_run(kg, store, None, QUESTION, method="autopruned", similarity=0.8)      # its own run: as it was
    assert own["passages"] == [paris, krakow, warsaw] and "grounds" not in own
    assert seed_passages(own) == [paris, krakow, warsaw] and seed_passages(lent_run) == [warsaw]
    cands = [{"id": "f1", "chunks": [paris]}, {"id": "f2", "chunks": [warsaw]}, {"id": "f3", "chunks": [krakow]}]
    assert [c["id"] for c in reuse_facts(cands, lent_run, 5)] == ["f2"]
    assert [c["id"] for c in reuse_facts(cands, own, 5)] == ["f1", "f2", "f3"]
    index = {paris: 0, krakow: 1, warsaw: 2}
    reset = np.zeros(3)
    assert reuse_seeds(index, reset, lent_run, 1.0) == 1 and reset.tolist() == [0.0, 0.0, 1.0]
    walk = remind(kg, store, scripted([]), reuse=True).invoke({"question": QUESTION})
    assert walk["reused"]["grounds"] == [warsaw] and walk["reused"]["passages"][0] == warsaw


def test_a_lent_run_whose_answer_no_passage_holds_keeps_its_order_and_seeds_with_all(kg):
    store = InMemoryStore()
    paris, krakow, warsaw = lender_run(kg, store, "Is Warsaw the capital of Poland?", "yes")
    lent_run = prior_run(kg, store, None, "Is Warsaw the capital of Poland?", method="catrag", similarity=0.8)
    assert lent_run["passages"] == [paris, krakow, warsaw] and lent_run["grounds"] == []
    assert seed_passages(lent_run) == [paris, krakow, warsaw]


def test_a_run_whose_passages_do_not_hold_its_answer_is_lent_to_no_other_method(kg):
    """An answer none of the lender's passages holds (nor a plain yes or no) is one it did not read
    there: its passages say no more than a "no answer" run's, lent to no other method
    (docs/memory.md, "What a question answered first leaves to lend")."""
    store = InMemoryStore()
    lender_run(kg, store, QUESTION, "Gdansk")
    assert prior_run(kg, store, None, QUESTION, method="hipporag2", similarity=0.8) is None
    assert prior_run(kg, store, None, QUESTION, method="remindrag", similarity=0.8) is None
    log = []
    walk = remind(kg, store, scripted(log), reuse=True).invoke({"question": QUESTION})
    assert walk["reused"] is None and "check_sufficiency" in log                         # walked as cold
    assert prior_run(kg, store, None, QUESTION, method="autopruned", similarity=0.8)["answer"] == "Gdansk"  # its own
    other = InMemoryStore()
    lender_run(kg, other, "Is Warsaw the capital of Poland?", "No.")
    assert prior_run(kg, other, None, "Is Warsaw the capital of Poland?", method="catrag", similarity=0.8)["grounds"] == []


def test_a_lent_run_is_never_handed_on_to_another_kind_of_question_tenant_or_corpus_or_after_a_wrong_verdict(kg):
    store = InMemoryStore()
    lender_run(kg, store, QUESTION, "Warsaw")
    assert prior_run(kg, store, None, QUESTION, method="hipporag2", similarity=0.8) is not None
    assert prior_run(kg, store, None, "When did Poland get its capital city?", method="hipporag2",
                     similarity=0.0) is None                          # another kind of answer
    lender_run(kg, store, QUESTION, "Warsaw", scope=("alice",), run_id="r-alice")
    assert prior_run(kg, store, ("bob",), QUESTION, method="hipporag2", similarity=0.8) is None   # another tenant
    assert prior_run(kg, store, ("alice",), QUESTION, method="hipporag2", similarity=0.8)["run_id"] == "r-alice"
    give_feedback(kg, "r-lent", verdict="wrong", store=store)
    assert prior_run(kg, store, None, QUESTION, method="hipporag2", similarity=0.8) is None       # a wrong verdict
    kg.add_documents([{**DOCS[0], "text": "Warsaw is the capital of Poland. Warsaw lies on the Oder."}],
                     model="offline")
    assert prior_run(kg, store, ("alice",), QUESTION, method="hipporag2", similarity=0.8) is None   # a changed doc
