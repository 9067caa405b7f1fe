"""The kgmem command line."""

from __future__ import annotations

import json

import pytest

from langgraph_kgmem.cli import main


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_text("Marie Curie was born in Warsaw. Warsaw is the capital of Poland.")
    (d / "b.md").write_text("Pierre Curie married Marie Curie in Paris.")
    (d / "skip.bin").write_bytes(b"\x00\x01")
    return d


def test_ingest_stats_export(corpus, tmp_path, capsys):
    kg = str(tmp_path / "kg")
    assert main(["ingest", str(corpus), "--kg", kg, "--embeddings", "hash", "--model", "offline"]) == 0
    assert "added 2 document(s)" in capsys.readouterr().out
    assert main(["stats", "--kg", kg, "--embeddings", "hash"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 2 and stats["nodes_by_kind"]["chunk"] == 2
    html = tmp_path / "view.html"
    assert main(["export", "--kg", kg, "--embeddings", "hash", "--html", str(html), "--highlight",
                 "does-not-exist"]) == 0
    page = html.read_text()
    assert "<svg" in page and "Marie Curie" in page and "cdn" not in page.lower()


def test_cli_errors_are_clear(tmp_path, capsys):
    assert main(["stats", "--kg", str(tmp_path / "nothing")]) == 2
    assert "not a langgraph_kgmem KG directory" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("   ")
    assert main(["ingest", str(empty), "--kg", str(tmp_path / "kg"), "--embeddings", "hash", "--model", "offline"]) == 1
    assert "is empty" in capsys.readouterr().err


def test_ask_unknown_method(tmp_path, corpus, capsys):
    kg = str(tmp_path / "kg")
    main(["ingest", str(corpus), "--kg", kg, "--embeddings", "hash", "--model", "offline"])
    assert main(["ask", "Where was Marie Curie born?", "--kg", kg, "--embeddings", "hash", "--method", "magic"]) == 2
    assert "unknown method 'magic'" in capsys.readouterr().err


def test_records_then_ask_kgirag(tmp_path, capsys):
    from pathlib import Path

    csv = Path(__file__).parent / "fixtures" / "kgirag_records.csv"
    kg = str(tmp_path / "rkg")
    assert main(["records", str(csv), "--kg", kg, "--embeddings", "hash", "--event-rule", "rain_mm > 0",
                 "--event-name", "rain"]) == 0
    assert "abnormal" in capsys.readouterr().out
    question = "Can I avoid rain at Riverside if I leave at 2024-05-01 00:00 and travel for 2 hours?"
    assert main(["ask", question, "--kg", kg, "--embeddings", "hash", "--method", "kgirag", "--model", "offline",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "kgirag" and out["answer"] == "yes" and out["retrieved_triples"] > 0  # dry 00:00-01:59
    # a rule is required, and only one kind of rule
    assert main(["records", str(csv), "--kg", kg, "--embeddings", "hash"]) == 2
    assert "exactly one of --event-rule" in capsys.readouterr().err


def test_edited_files_replace_themselves_and_docs_delete_memory(corpus, tmp_path, capsys):
    kg = str(tmp_path / "kg")
    base = ["--kg", kg, "--embeddings", "hash"]
    (corpus / "sub").mkdir()
    (corpus / "sub" / "c.txt").write_text("Irene Joliot-Curie was born in Paris.")
    (corpus / "latin1.txt").write_bytes("Caf\xe9 in Lyon.".encode("latin-1"))
    assert main(["ingest", str(corpus), *base, "--model", "offline"]) == 1   # the bad file fails the run ...
    captured = capsys.readouterr()
    assert "added 3 document(s)" in captured.out and "latin1.txt is not UTF-8" in captured.err  # ... at the end
    assert main(["docs", *base, "--json"]) == 0
    assert sorted(d["id"] for d in json.loads(capsys.readouterr().out)) == ["a.txt", "b.md", "sub/c.txt"]
    (corpus / "a.txt").write_text("Marie Curie was born in Warsaw. She worked in Paris.")
    (corpus / "latin1.txt").unlink()
    assert main(["ingest", str(corpus), *base, "--model", "offline"]) == 0
    out = capsys.readouterr().out
    assert "2 already present, 1 replaced" in out
    assert main(["stats", *base]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 3
    assert main(["delete", "sub/c.txt", *base]) == 0
    assert "deleted sub/c.txt" in capsys.readouterr().out
    assert main(["docs", *base]) == 0
    assert "sub/c.txt" not in capsys.readouterr().out
    assert main(["delete", "nope", *base]) == 2
    assert "no document 'nope'" in capsys.readouterr().err
    # memory: empty, then ReMindRAG's edge memory after a question, then reset
    assert main(["memory", *base]) == 0
    assert "has no memory" in capsys.readouterr().out
    assert main(["ask", "Where was Marie Curie born?", *base, "--model", "offline"]) == 0
    capsys.readouterr()
    assert main(["memory", *base, "--kind", "edge"]) == 0
    listing = capsys.readouterr().out
    assert "ReMindRAG edge memory: edges that helped answer (--kind edge), scope (shared):" in listing
    assert "Marie Curie — " in listing and "used 1 time(s)" in listing
    assert "asked: Where was Marie Curie born?" in listing and "rel-" in listing
    assert main(["memory", *base, "--kind", "edge", "--json"]) == 0
    (edges,) = json.loads(capsys.readouterr().out)
    assert edges["sample"][0]["value"]["updates"] == 1      # the keys kg.memory always had
    record = edges["records"][0]
    assert record["uses"] == 1 and record["questions"] == ["Where was Marie Curie born?"]
    assert 0 < record["strength"] <= 1 and record["fact"].startswith("Marie Curie — ")
    assert main(["memory", *base, "--reset"]) == 0
    assert "deleted" in capsys.readouterr().out
    assert main(["memory", *base]) == 0
    assert "has no memory" in capsys.readouterr().out


def test_a_file_name_is_not_an_entity(tmp_path):
    from langgraph_kgmem import KnowledgeGraph

    f = tmp_path / "quarterly_report.txt"
    f.write_text("Ada Lovelace wrote the first program.")
    kg = KnowledgeGraph.in_memory(embeddings="hash")
    kg.add_documents([f], model="offline")
    assert "quarterly_report" not in {n.text for n in kg.nodes("entity")}
    assert kg.graph_store.documents()[0]["meta"]["path"] == str(f)


def test_version(capsys):
    from langgraph_kgmem import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"kgmem {__version__}"


def _subcommands():
    import argparse

    from langgraph_kgmem.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_says_its_choices_and_default(command):
    sp = _subcommands()[command]
    # the text --help prints for each option: its help string as the command's formatter completes it
    helps = {a.dest: sp._get_formatter()._get_help_string(a) for a in sp._actions if a.option_strings}
    for action in sp._actions:
        if not action.option_strings or action.dest == "help":
            continue
        text = helps[action.dest]
        for choice in action.choices or ():
            assert str(choice) in text, (command, action.dest, choice)
        if not action.required and action.nargs != 0:   # flags are off unless given
            assert "default" in text, (command, action.dest, text)
    if "embeddings" in helps:
        assert all(e in helps["embeddings"] for e in ("local", "fast", "hash", "provider:model"))
    if command == "ask":
        from langgraph_kgmem.graphs.registry import METHODS

        assert all(m in helps["method"] for m in METHODS)


def test_a_closed_pipe_ends_the_command_quietly(corpus, tmp_path):
    import os
    import subprocess
    import sys

    kg = str(tmp_path / "kg")
    assert main(["ingest", str(corpus), "--kg", kg, "--embeddings", "hash", "--model", "offline"]) == 0
    env = {**os.environ, "LANGSMITH_TRACING": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "langgraph_kgmem.cli", "stats", "--kg", kg, "--embeddings",
                             "hash"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()   # the reader goes away before the command writes (as `| head -0` would)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_migrate_to_name_renames_the_kg_and_its_memory(corpus, tmp_path, capsys):
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.memory import memory_namespaces

    src, dst = str(tmp_path / "alone"), str(tmp_path / "shared")
    base = ["--embeddings", "hash"]
    assert main(["ingest", str(corpus), "--kg", src, *base, "--model", "offline"]) == 0
    assert main(["ask", "Where was Marie Curie born?", "--kg", src, *base, "--model", "offline"]) == 0
    capsys.readouterr()
    assert main(["migrate", "--from", src, "--to", dst, "--to-name", "lab", *base]) == 0
    assert "migrated KG 'default' as 'lab'" in capsys.readouterr().out
    with KnowledgeGraph.open(dst, embeddings="hash", create=False) as kg:
        assert kg.name == "lab" and kg.node_count() > 0
        store = kg.persistence()[1]
        assert memory_namespaces(store, "lab", "edge_memory") and not memory_namespaces(store, "default")


def test_postgres_hints_name_where_the_uri_came_from(monkeypatch):
    from langgraph_kgmem.kg.backends.postgres.pool import storage_error

    uri = "postgresql://kg@db.example:5433/graphs"
    monkeypatch.delenv("KGMEM_POSTGRES_URI", raising=False)
    passed = str(storage_error(OSError("refused"), uri, "reading"))
    assert "db.example:5433/graphs" in passed and "the URI you passed" in passed
    assert "KGMEM_POSTGRES_URI" not in passed
    monkeypatch.setenv("KGMEM_POSTGRES_URI", uri)
    assert "the URI in KGMEM_POSTGRES_URI" in str(storage_error(OSError("refused"), uri, "reading"))


def test_ask_help_explains_every_method():
    from langgraph_kgmem.graphs.registry import METHODS, summaries

    assert set(summaries()) == set(METHODS)
    epilog = " ".join(_subcommands()["ask"].epilog.split())
    assert all(f"{m} {summaries()[m]}" in epilog for m in METHODS)
