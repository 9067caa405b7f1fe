"""Per-tenant calibration from feedback (memory/calibration.py, graphs/catrag/calibration.py): the
fit moves a setting only on evidence (feedback that ranks the useful passages higher under another
setting), keeps the default without feedback, on too little or on a tie, stays within the vetted
grid and the tenant, refits only every REFIT_EVERY feedback records, and CatRAG / HippoRAG 2 read it
behind their ``calibration`` switch, a run's own context winning over it."""

from __future__ import annotations

import pytest
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph, create_catrag_graph, give_feedback
from langgraph_kgmem.graphs.catrag import nodes
from langgraph_kgmem.graphs.catrag.calibration import GRID, calibrated
from langgraph_kgmem.graphs.catrag.options import CatragOptions
from langgraph_kgmem.memory import list_items, namespace
from langgraph_kgmem.memory import feedback as feedback_module
from langgraph_kgmem.memory.calibration import (CALIBRATION_KIND, FEEDBACK_KIND, LEDGER_KEY, MAX_FIT_QUESTIONS,
                                                MAX_GRID, MIN_QUESTIONS, MIN_T, REFIT_EVERY, Calibration,
                                                choose, note_feedback, paired_t, setting_score)
from langgraph_kgmem.memory.provenance import put_records

KG = "cal"
PPR_HEAVY = {"passage_weight": 0.0}
GRID2 = ({}, PPR_HEAVY)


def feed(store, tenant, n, *, useful=("p-gold",), wrong=("p-bad",), start=0):
    """``n`` feedback records of tenant ``tenant`` on distinct questions, counted in its ledger."""
    for i in range(start, start + n):
        key = f"run{i}-0"
        put_records(store, KG, FEEDBACK_KIND, {key: {"question": f"question {i}?", "useful": list(useful),
                                                      "wrong": list(wrong)}}, (tenant,))
        note_feedback(store, KG, (tenant,), key)


def ppr_favoured(question, settings):
    """A ranking where the PPR-heavy setting puts the useful passage first and the wrong one last,
    the default the other way round."""
    return [["p-gold", "p-x", "p-bad"] if s == PPR_HEAVY else ["p-bad", "p-x", "p-gold"] for s in settings]


def fit(store, tenant, rank=ppr_favoured, grid=GRID2):
    cal = Calibration(store, KG, (tenant,))
    record, ledger = cal.read("catrag")
    return cal.fit("catrag", grid, rank, ledger=ledger, previous=record)


def test_feedback_that_favours_ppr_moves_the_setting():
    store = InMemoryStore()
    feed(store, "alice", MIN_QUESTIONS)
    rec = fit(store, "alice")
    assert rec["params"] == PPR_HEAVY and rec["setting"] == 1
    assert rec["questions"] == MIN_QUESTIONS and rec["rankings"] == MIN_QUESTIONS * 2 and rec["fits"] == 1
    assert rec["scores"][1] > rec["scores"][0]
    assert Calibration(store, KG, ("alice",)).read("catrag")[0]["params"] == PPR_HEAVY


def test_no_feedback_too_little_or_a_tie_keeps_the_default():
    store = InMemoryStore()
    assert fit(store, "alice")["params"] == {}                   # no feedback at all
    feed(store, "alice", MIN_QUESTIONS - 1)
    assert fit(store, "alice")["params"] == {}                   # one question short
    tie = InMemoryStore()
    feed(tie, "bob", MIN_QUESTIONS)
    assert fit(tie, "bob", rank=lambda q, s: [["p-gold", "p-bad"]] * len(s))["params"] == {}
    assert choose([[1.0, 1.0, 1.0]] * MIN_QUESTIONS) == 0
    # a gain under MIN_GAIN a question is no evidence
    assert choose([[1.0, 1.001]] * MIN_QUESTIONS) == 0
    # a large total carried by one question, the others losing, is not significant
    assert choose([[0.0, 5.0]] + [[0.5, 0.25]] * (MIN_QUESTIONS - 1)) == 0
    # the same gain spread over every question is
    assert choose([[0.0, 0.5]] * MIN_QUESTIONS) == 1
    assert choose([[0.0, 0.5]] * (MIN_QUESTIONS - 1)) == 0


def test_another_tenant_is_unaffected():
    store = InMemoryStore()
    feed(store, "alice", MIN_QUESTIONS)
    assert fit(store, "alice")["params"] == PPR_HEAVY
    assert Calibration(store, KG, ("bob",)).read("catrag") == (None, {})
    assert fit(store, "bob")["params"] == {}                     # bob's fit reads bob's feedback only
    assert Calibration(store, KG, ("alice",)).read("catrag")[0]["params"] == PPR_HEAVY


def test_bounds_grid_ledger_and_refit_interval():
    store = InMemoryStore()
    feed(store, "alice", MAX_FIT_QUESTIONS + 5)
    ledger = Calibration(store, KG, ("alice",)).read("catrag")[1]
    assert ledger["count"] == MAX_FIT_QUESTIONS + 5 and len(ledger["recent"]) == MAX_FIT_QUESTIONS
    seen = []

    def counting(question, settings):
        seen.append(len(settings))
        return ppr_favoured(question, settings)

    big = [{}] + [{"damping": round(0.05 * i, 2)} for i in range(1, 2 * MAX_GRID)]
    rec = fit(store, "alice", rank=counting, grid=big)
    assert set(seen) == {MAX_GRID} and len(seen) == MAX_FIT_QUESTIONS
    assert rec["rankings"] == MAX_FIT_QUESTIONS * MAX_GRID
    # the next fit is due only after REFIT_EVERY more feedback records
    assert not Calibration.due(rec, ledger)
    feed(store, "alice", REFIT_EVERY - 1, start=1000)
    assert not Calibration.due(rec, Calibration(store, KG, ("alice",)).read("catrag")[1])
    feed(store, "alice", 1, start=2000)
    assert Calibration.due(rec, Calibration(store, KG, ("alice",)).read("catrag")[1])
    # a setting outside the method's grid (an altered record) is never applied
    ns = namespace(KG, CALIBRATION_KIND, ("alice",))
    store.put(ns, "catrag", {**rec, "params": {"damping": 0.99}, "at": 10 ** 6})
    deps = type("Deps", (), {"kg": type("K", (), {"name": KG})()})()
    opts = CatragOptions.build(memory_scope=("alice",), calibration=True)
    assert calibrated(deps, opts, store)["params"] == {}
    store.put(ns, "catrag", {**rec, "params": dict(GRID["catrag"][1]), "at": 10 ** 6})
    assert calibrated(deps, opts, store)["params"] == dict(GRID["catrag"][1])


def test_paired_t():
    assert paired_t([]) == 0.0 and paired_t([0.2] * 5) == float("inf") and paired_t([-0.2] * 5) == 0.0
    assert paired_t([1.0, -1.0, 1.0, -1.0]) == 0.0
    assert 0 < paired_t([1.0, 0.0, 1.0, 0.0]) < MIN_T < paired_t([1.0, 0.9, 1.1, 1.0])


def test_setting_score():
    assert setting_score(["a", "b", "c"], ["a"], ["c"]) == pytest.approx(1 - 0.5 / 3)
    assert setting_score(["c", "b", "a"], ["a"], ["c"]) == pytest.approx(1 / 3 - 0.5)
    assert setting_score([], ["a"], ["c"]) == 0.0
    assert FEEDBACK_KIND == feedback_module.FEEDBACK_KIND


DOCS = [{"id": f"d{i}", "title": f"Town {i}", "text": f"Town {i} lies on river R{i}. Town {i} was founded by "
                                                      f"Person {i}. Person {i} was born in Town {(i + 1) % 6}."}
        for i in range(6)]


@pytest.fixture
def kg():
    g = KnowledgeGraph.in_memory(name=KG, embeddings="hash")
    g.add_documents(DOCS, model="offline")
    yield g
    g.close()


@pytest.mark.parametrize("preset", [{}, {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}])
def test_a_graph_fits_lazily_reads_its_tenants_setting_and_writes_no_run_while_fitting(kg, preset):
    store = InMemoryStore()
    app = create_catrag_graph(kg, model="offline", calibration=True, experience=False, memory_scope=("{user_id}",),
                              top_passages=2, **preset).compile(store=store)
    runs_ns = namespace(KG, "runs", ("alice",))
    for i in range(REFIT_EVERY):
        q = f"Who founded Town {i}?" if i < 6 else f"Which river does Town {i - 6} lie on?"
        out = app.invoke({"question": q}, context={"user_id": "alice"})
        assert "calibration" not in out["ppr"] or not out["ppr"]["calibration"].get("fitted")
        ids = [e["id"] for e in out["evidence"]]
        give_feedback(kg, out["run_id"], useful=ids[:1], wrong=ids[1:], store=store, scope=("alice",))
    before = len(list_items(store, runs_ns))
    out = app.invoke({"question": "Where was Person 2 born?"}, context={"user_id": "alice"})
    cal = (out.get("ppr") or {}).get("calibration")
    assert cal and cal["fitted"] and cal["questions"] == REFIT_EVERY
    assert len(list_items(store, runs_ns)) == before + 1          # the fit's rankings recorded no run
    method = out["method"]
    rec = Calibration(store, KG, ("alice",), kg=kg).read(method)[0]
    assert rec["rankings"] == REFIT_EVERY * len(GRID[method]) and rec["provenance"]
    # the next run reads the record without fitting; bob has none; the switch off reads nothing
    again = app.invoke({"question": "Where was Person 3 born?"}, context={"user_id": "alice"})
    assert again["ppr"]["calibration"]["fitted"] is False
    bob = app.invoke({"question": "Where was Person 3 born?"}, context={"user_id": "bob"})
    assert not bob["ppr"].get("calibration")
    off = app.invoke({"question": "Where was Person 3 born?"}, context={"user_id": "alice", "calibration": False})
    assert not off["ppr"].get("calibration")
    assert LEDGER_KEY in {it.key for it in list_items(store, namespace(KG, CALIBRATION_KIND, ("alice",)))}


def test_a_runs_own_context_wins_over_the_calibration(kg):
    store = InMemoryStore()
    app = create_catrag_graph(kg, model="offline", calibration=True, memory_scope=("{user_id}",)).compile(store=store)
    ns = namespace(KG, CALIBRATION_KIND, ("alice",))
    store.put(ns, "catrag", {"params": {"damping": 0.7}, "setting": 1, "questions": 9, "at": 10 ** 6})
    out = app.invoke({"question": "Who founded Town 1?"}, context={"user_id": "alice"})
    assert out["ppr"]["calibration"]["params"] == {"damping": 0.7}
    opts = nodes._options({"calibration": {"params": {"damping": 0.7}}},
                          type("R", (), {"context": {"damping": 0.3}})(), nodes.CatragDeps(
                              kg=kg, model="offline", options=CatragOptions.build()))
    assert opts.damping == 0.3
    opts = nodes._options({"calibration": {"params": {"damping": 0.7}}}, type("R", (), {"context": None})(),
                          nodes.CatragDeps(kg=kg, model="offline", options=CatragOptions.build()))
    assert opts.damping == 0.7


def test_a_replaced_document_invalidates_the_calibration_resting_on_it(tmp_path):
    g = KnowledgeGraph.open(tmp_path / "kg", name=KG, embeddings="hash")
    g.add_documents(DOCS, model="offline")
    _, store = g.persistence()
    app = create_catrag_graph(g, model="offline", memory_scope=("{user_id}",), top_passages=2).compile(store=store)
    for i in range(REFIT_EVERY):
        q = f"Who founded Town {i}?" if i < 6 else f"Which river does Town {i - 6} lie on?"
        out = app.invoke({"question": q}, context={"user_id": "alice"})
        ids = [e["id"] for e in out["evidence"]]
        give_feedback(g, out["run_id"], useful=ids[:1], wrong=ids[1:], store=store, scope=("alice",))
    assert app.invoke({"question": "Where was Person 2 born?"}, context={"user_id": "alice"})["ppr"]["calibration"]
    rec = Calibration(store, KG, ("alice",), kg=g).read("catrag")[0]
    doc = rec["provenance"][0]["doc"]
    report = g.add_documents([{"id": doc, "title": "Town X", "text": "Town X lies on river Q."}], model="offline")
    assert report.memories_invalidated >= 1
    assert store.get(namespace(KG, CALIBRATION_KIND, ("alice",)), "catrag") is None   # gone in the same call
    g.close()
