"""Served graphs: LangGraph Server builds the checkpointer, so ``langgraph.json`` makes it strict
(``LANGGRAPH_STRICT_MSGPACK``) and a served graph warns when the server runs without that."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _server_env() -> dict[str, str]:
    env = json.loads((ROOT / "langgraph.json").read_text()).get("env", {})
    assert isinstance(env, dict), "langgraph.json's env must be a mapping (a .env file path is not checked here)"
    return env


def test_the_servers_checkpoint_serializer_runs_nothing_under_langgraph_json_env(tmp_path):
    """LangGraph's default checkpoint serializer — which LangGraph Server's serializer extends without
    an allow-list of its own — in a process started with langgraph.json's environment (as
    `langgraph dev` / `langgraph build` start the server) turns a planted payload into data, not a call."""
    marker = tmp_path / "pwned"
    script = textwrap.dedent(f"""
        import ormsgpack
        from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer as Serializer
        payload = ormsgpack.packb(ormsgpack.Ext(1, ormsgpack.packb(["os", "system", ["touch {marker}"]])))
        print(repr(Serializer().loads_typed(("msgpack", payload))))
    """)
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_STRICT_MSGPACK"} | _server_env()
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not marker.exists(), "the server's serializer ran a planted checkpoint"
    assert "touch" in out.stdout   # the payload came back as plain data


@pytest.fixture
def served_kg_env(tmp_path, monkeypatch):
    from langgraph_kgmem import KnowledgeGraph, serve

    with KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory") as kg:
        kg.add_triples([("Oslo", "capital of", "Norway")], source="a")
    monkeypatch.setenv(serve.ENV_KG_DIR, str(tmp_path / "kg"))
    monkeypatch.setenv(serve.ENV_EMBEDDINGS, "hash")
    for name in (serve.ENV_MODEL, serve.ENV_KG_NAME, serve.ENV_VECTOR_BACKEND):
        monkeypatch.delenv(name, raising=False)
    serve.close_served()
    yield serve
    serve.close_served()


@pytest.mark.parametrize("value, warns", [(None, True), ("false", True), ("true", False)])
def test_a_served_graph_warns_when_the_servers_checkpoints_are_not_strict(served_kg_env, monkeypatch, caplog,
                                                                          value, warns):
    serve = served_kg_env
    if value is None:
        monkeypatch.delenv(serve.STRICT_CHECKPOINTS_ENV, raising=False)
    else:
        monkeypatch.setenv(serve.STRICT_CHECKPOINTS_ENV, value)
    with caplog.at_level(logging.WARNING, logger=serve.__name__):
        serve.build_served_graph("catrag")
    said = [r.getMessage() for r in caplog.records if r.name == serve.__name__]
    assert any("LANGGRAPH_STRICT_MSGPACK is not set" in m and "can run code" in m for m in said) == warns
