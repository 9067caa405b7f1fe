"""``tools/method_scale.py``: per-method latency per size, per backend and with concurrent callers
(tiny runs; the figures themselves are in docs/capacity.md)."""

from __future__ import annotations

import json

import pytest
import bench_helpers  # noqa: F401  (puts tools/ on sys.path)

pytestmark = [pytest.mark.integration]


def _row(backend, method, passages, clients, p50, p95):
    return {"backend": backend, "method": method, "passages": passages, "clients": clients,
            "steady_p50_ms": p50, "steady_p95_ms": p95}


def test_summaries_divide_the_largest_size_by_the_smallest_and_postgres_by_embedded():
    from method_scale import summarise

    rows = [_row("embedded", "catrag", 2000, 1, 10.0, 20.0), _row("embedded", "catrag", 100000, 1, 25.0, 30.0),
            _row("postgres", "catrag", 2000, 1, 12.0, 40.0), _row("postgres", "catrag", 100000, 1, 30.0, 45.0),
            _row("postgres", "catrag", 2000, 4, 50.0, 80.0)]
    growth, pg = summarise(rows)
    assert growth["embedded"]["catrag"][1] == {"sizes": [2000, 100000], "p50": 2.5, "p95": 1.5}
    assert growth["postgres"]["catrag"][1] == {"sizes": [2000, 100000], "p50": 2.5, "p95": 1.12}
    assert 4 not in growth["postgres"]["catrag"]          # one size only: no growth figure
    assert pg["catrag"][2000][1] == {"p50": 1.2, "p95": 2.0}
    assert pg["catrag"][100000][1] == {"p50": 1.2, "p95": 1.5}
    assert 4 not in pg["catrag"][2000]                     # no embedded row to divide by


def test_questions_are_spread_over_the_kg_and_differ_per_caller():
    from method_scale import question, question_lists

    lists = question_lists(20000, "catrag", 4, 6)
    flat = [q for qs in lists for q in qs]
    assert [len(qs) for qs in lists] == [6] * 4 and len(set(flat)) == 24
    assert all(q.startswith("In which year did ") for q in flat) and question(0) != question(1)
    assert question_lists(20000, "catrag", 1, 6) != question_lists(20000, "dense", 1, 6)


def test_percentiles_and_summary_pool_the_callers_steady_questions():
    from benchlib.scale_clients import percentile, summary

    out = summary([[100.0, 1.0, 2.0, 3.0], [300.0, 4.0, 5.0, 6.0]])
    assert out["first_ms"] == 200.0 and out["n_steady"] == 6
    assert out["steady_p50_ms"] == 3.5 and out["steady_p95_ms"] == pytest.approx(5.8, abs=0.05)
    assert out["first_over_steady"] == pytest.approx(57.14, abs=0.01)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_a_tiny_embedded_run_reports_every_method_size_and_caller_count(tmp_path, capsys):
    from method_scale import main

    out = tmp_path / "scale.json"
    assert main(["--sizes", "20,40", "--methods", "dense,hipporag2", "--clients", "1,2", "--questions", "1",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    got = {(r["backend"], r["method"], r["passages"], r["clients"]) for r in report["rows"]}
    assert got == {("embedded", m, p, c) for m in ("dense", "hipporag2") for p in (20, 40) for c in (1, 2)}
    assert all(r["steady_p95_ms"] >= r["steady_p50_ms"] > 0 and r["open_s"] > 0 for r in report["rows"])
    assert {r["n_steady"] for r in report["rows"] if r["clients"] == 2} == {2}
    assert set(report["growth"]["embedded"]) == {"dense", "hipporag2"} and report["pg_over_embedded"] == {}


def test_an_existing_postgres_kg_is_opened_beside_an_embedded_one(tmp_path, new_database, capsys):
    from ingest_scale import main as ingest
    from method_scale import main

    uri, directory = new_database(), str(tmp_path / "kg")
    for target in (uri, directory):
        assert ingest(["--kg", target, "--docs", "30", "--batch", "30", "--pairs", "0"]) == 0
    out = tmp_path / "scale.json"
    assert main(["--sizes", "", "--methods", "dense,remindrag", "--clients", "1", "--questions", "1",
                 "--open", f"postgres={uri}", "--open", f"embedded={directory}", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert {(r["backend"], r["passages"]) for r in report["rows"]} == {("postgres", 30), ("embedded", 30)}
    assert set(report["pg_over_embedded"]["dense"]["30"]["1"]) == {"p50", "p95"}
    # the statements a steady question sends to PostgreSQL are counted (ReMindRAG writes its memory)
    sent = {(r["backend"], r["method"]): r["steady_statements"] for r in report["rows"]}
    assert sent[("postgres", "remindrag")] > 0 and sent[("embedded", "remindrag")] == 0


def test_two_kgs_of_one_backend_are_measured_one_after_the_other(tmp_path, capsys):
    """``--open`` naming a backend twice: the second KG is a step of its own, and ``growth`` takes
    the larger over the smaller (how p95 at a million is set against p95 at 100,000)."""
    from ingest_scale import main as ingest
    from method_scale import main

    small, large = str(tmp_path / "small"), str(tmp_path / "large")
    for target, docs in ((small, "20"), (large, "40")):
        assert ingest(["--kg", target, "--docs", docs, "--batch", docs, "--pairs", "0"]) == 0
    out = tmp_path / "scale.json"
    assert main(["--sizes", "", "--methods", "dense", "--clients", "1", "--questions", "1",
                 "--open", f"embedded={small}", "--open", f"embedded={large}", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [(r["backend"], r["passages"]) for r in report["rows"]] == [("embedded", 20), ("embedded", 40)]
    assert report["growth"]["embedded"]["dense"]["1"]["sizes"] == [20, 40]


def test_a_kg_not_of_the_scale_documents_is_refused(tmp_path):
    from langgraph_kgmem import KnowledgeGraph
    from method_scale import main

    kg = KnowledgeGraph.open(str(tmp_path / "kg"), name="scale", embeddings="hash", vector_backend="memory")
    kg.add_documents([{"id": "other", "text": "Ada Lovelace wrote about the Analytical Engine."}], model="offline")
    kg.close()
    with pytest.raises(SystemExit, match="not a KG of ingest_scale.py's documents"):
        main(["--sizes", "", "--methods", "dense", "--open", f"embedded={tmp_path / 'kg'}"])


def test_a_shipped_sets_kg_is_asked_its_own_questions_a_slice_per_method(tmp_path, monkeypatch):
    from benchlib.datasets import load_questions, pooled_passages
    from benchlib.scale_dataset import slices
    from method_scale import main

    texts = [f"q{i}" for i in range(10)]
    assert slices(texts, 0, 2, 2) == [["q0", "q2"], ["q1", "q3"]] and slices(texts, 1, 1, 3) == [["q3", "q4", "q5"]]
    with pytest.raises(SystemExit, match="cannot give each method"):
        slices(texts, 2, 2, 3)
    monkeypatch.setenv("KGMEM_BENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "set.json"
    assert main(["--dataset", "hotpotqa", "--pool", "4", "--methods", "dense,hipporag2", "--questions", "1",
                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["dataset"], r["method"], r["n_steady"]) for r in rows] == [("hotpotqa", "dense", 1),
                                                                          ("hotpotqa", "hipporag2", 1)]
    passages = pooled_passages("hotpotqa", load_questions("hotpotqa", 4))
    assert all(r["passages"] == len(passages) and r["first_ms"] > 0 for r in rows)


def test_ingest_scale_goes_on_where_the_last_sitting_stopped(tmp_path, capsys):
    """A run over several sittings: the second starts after the KG's last document and its ratios
    are against the first sitting's first batch, read from the log."""
    from ingest_scale import held, main as ingest

    from langgraph_kgmem import KnowledgeGraph

    kg_dir, log = tmp_path / "kg", tmp_path / "run.jsonl"
    assert ingest(["--docs", "30", "--batch", "10", "--kg", str(kg_dir), "--pairs", "0", "--log", str(log)]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ingest(["--docs", "50", "--batch", "10", "--kg", str(kg_dir), "--pairs", "0", "--log", str(log),
                   "--resume"]) == 0
    out = capsys.readouterr().out
    second = json.loads(out.strip().splitlines()[-1])
    assert "going on after document 29 (3 batches" in out
    assert second["docs_per_cpu_s"][:3] == first["docs_per_cpu_s"] and len(second["docs_per_cpu_s"]) == 5
    assert [json.loads(line)["start"] for line in log.read_text().splitlines()] == [0, 10, 20, 30, 40]
    kg = KnowledgeGraph.open(kg_dir, name="scale", embeddings="hash")
    try:
        assert held(kg) == 50 and kg.document("doc-50") is None
    finally:
        kg.close()
    with pytest.raises(SystemExit):        # a log that names more than the KG holds
        ingest(["--docs", "60", "--batch", "10", "--kg", str(tmp_path / "other"), "--pairs", "0", "--log", str(log),
                "--resume"])


def test_blocked_documents_keep_every_nodes_degree_whatever_the_kg_size():
    """``--block N``: an organisation and a year per N documents, named alike by the document and its
    question, so a question touches as much at 100,000 passages as at 2,000."""
    from collections import Counter

    from ingest_scale import document
    from method_scale import question

    def names(n, block):
        return Counter(document(i, block)["text"].split(" the ", 1)[1].rsplit(" in ", 1)[0] for i in range(n))

    assert max(names(4000, 0).values()) == 500 and max(names(400, 0).values()) == 50      # hubs grow
    small, large = names(1000, 250), names(4000, 250)
    assert set(small.values()) == set(large.values()) == {250} and len(large) == 16
    years = Counter(document(i, 250)["text"].rsplit(" ", 1)[1] for i in range(4000))
    assert set(years.values()) == {250}
    for i in (0, 249, 250, 3999):
        org = document(i, 250)["text"].split(" the ", 1)[1].rsplit(" in ", 1)[0]
        assert question(i, 250).endswith(f" the {org}?") and question(i, 250) != question(i)
