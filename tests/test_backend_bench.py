"""``bench.py --backends``: the embedded and the PostgreSQL backend measured side by side (a tiny run)."""

from __future__ import annotations

import json

import pytest
import bench_helpers  # noqa: F401  (puts tools/ on sys.path)
from conftest import SAMPLE_DOCS

pytestmark = [pytest.mark.integration]


def test_backends_suite_reports_both_backends(tmp_path, new_database, capsys):
    from benchlib.runner import main

    data = tmp_path / "qa.jsonl"
    passages = [{"title": d["title"], "text": d["text"]} for d in SAMPLE_DOCS]
    data.write_text("\n".join(json.dumps({"id": f"q{i}", "question": q, "answer": a, "passages": passages,
                                          "supporting_titles": [t]})
                              for i, (q, a, t) in enumerate([("Where was Marie Curie born?", "Warsaw", "Marie Curie"),
                                                             ("Which river flows into the Baltic Sea?", "Vistula", "Vistula")])))
    out = tmp_path / "backends.json"
    assert main(["--backends", "--dataset", str(data), "--embeddings", "hash", "--postgres-uri", new_database(),
                 "--backend-chunks", "4", "--json", str(out)]) == 0
    report = json.loads(out.read_text())["backends"]
    assert [q["method"] for q in report["queries"]] == ["catrag", "hipporag2", "remindrag"]
    assert all(q["local_ms"] > 0 and q["postgres_ms"] > 0 for q in report["queries"])
    assert report["ingest"]["local"]["nodes"] == report["ingest"]["postgres"]["nodes"] > 0
    assert report["worker_memory"]["postgres_rss_mb"] > 0
    assert "| catrag |" in capsys.readouterr().out


def test_build_only_times_each_embedding_from_nothing(tmp_path, capsys):
    from benchlib.runner import main

    data = tmp_path / "qa.jsonl"
    passages = [{"title": d["title"], "text": d["text"]} for d in SAMPLE_DOCS]
    data.write_text("\n".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "answer": "x",
                                          "passages": passages[i:] + passages[:1], "supporting_titles": []})
                              for i in range(3)))
    out = tmp_path / "build.json"
    assert main(["--build-only", "--dataset", str(data), "--embeddings", "hash,hash:64,local",
                 "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = report["build_only"]
    assert [r["embeddings"] for r in rows] == ["hash", "hash:64", "local"]
    assert all(r["passages"] == len(SAMPLE_DOCS) for r in rows)      # pooled: each passage once
    assert rows[0]["nodes"] == rows[1]["nodes"] > 0 and rows[0]["vs_first"] == 1.0
    assert all(r["total_s"] >= r["embedding_s"] >= 0 for r in rows)
    # the floor: the local build's passages (one chunk per short document) through the model alone
    assert report["floor"]["passages"] == len(SAMPLE_DOCS) and report["floor"]["seconds"] > 0
    printed = capsys.readouterr().out
    assert "| hash:64 |" in printed and "floor: the" in printed


def test_extraction_suite_times_threads_and_coroutines_and_checks_the_kg(capsys):
    from benchlib.runner import main

    assert main(["--extraction", "--extraction-docs", "1", "--extraction-latency", "0.01"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(r["mode"], r["max_concurrency"]) for r in report["rows"]] == [
        ("sync", 1), ("sync", 8), ("sync", 16), ("async", 8), ("async", 16)]
    assert report["same_kg"] is True
    assert len({r["llm_calls"] for r in report["rows"]}) == 1 and report["rows"][0]["llm_calls"] > 0
