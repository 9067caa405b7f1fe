"""Served graphs: langgraph.json, the env-configured factories, and a real `langgraph dev` run.

The integration test starts LangGraph's in-memory dev server on loopback in a subprocess, runs one
method through ``langgraph_sdk`` and stops the server in a ``finally`` block.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from method_cases import QUESTION, compile_method, pick

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.errors import ConfigurationError
from langgraph_kgmem.graphs.registry import METHODS

ROOT = Path(__file__).resolve().parents[1]
# the method the served-graph tests run: the first of these the registry serves
SERVED_METHOD = pick("catrag", "hipporag2", "remindrag", "autopruned", "r3cycle", "graphcot", "kgirag")


def build_kg(path: Path, docs: list[dict]) -> list[str]:
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(path, name="served", embeddings="hash", vector_backend="memory")
    try:
        kg.add_documents(docs, model="offline")
        return [n.id for n in kg.nodes()] + [e.id for e in kg.edges()]
    finally:
        kg.close()


@pytest.fixture
def served_env(tmp_path, monkeypatch, sample_docs):
    from langgraph_kgmem import serve

    ids = build_kg(tmp_path / "kg", sample_docs)
    monkeypatch.setenv("KGMEM_KG_DIR", str(tmp_path / "kg"))
    monkeypatch.setenv("KGMEM_EMBEDDINGS", "hash")
    monkeypatch.delenv("KGMEM_MODEL", raising=False)
    monkeypatch.delenv("KGMEM_KG_NAME", raising=False)
    monkeypatch.delenv("KGMEM_VECTOR_BACKEND", raising=False)
    serve.close_served()
    yield ids
    serve.close_served()


def load_served_module(name: str = "served_entry"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "graphs" / "served.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_langgraph_json_serves_every_registry_method_from_graphs_dir():
    config = json.loads((ROOT / "langgraph.json").read_text())
    assert set(config["graphs"]) == set(METHODS)
    module = load_served_module()
    for name, spec in config["graphs"].items():
        path, _, variable = spec["path"].rpartition(":")
        assert (path, variable) == ("./graphs/served.py", name)
        assert spec["description"]
        # LangGraph Server reads the module's globals, not its attributes: a real variable per name
        assert asyncio.iscoroutinefunction(module.__dict__[name]), name


def test_entry_points_are_factories_that_do_no_work_at_import(monkeypatch):
    monkeypatch.delenv("KGMEM_KG_DIR", raising=False)
    module = load_served_module("served_catrag_entry")  # no KG configured: importing must still work
    assert asyncio.iscoroutinefunction(module.catrag)
    with pytest.raises(ConfigurationError, match="KGMEM_KG_DIR"):
        asyncio.run(module.catrag({}))


def test_unknown_method_is_rejected_by_name():
    from langgraph_kgmem.serve import graph_factory

    with pytest.raises(ConfigurationError, match="unknown method 'nope'"):
        graph_factory("nope")


def test_served_graph_has_no_checkpointer_or_store_and_is_built_once(served_env):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import serve

    method = SERVED_METHOD
    app = asyncio.run(serve.graph_factory(method)({}))
    assert app.checkpointer is None and app.store is None  # the server brings its own
    assert asyncio.run(serve.graph_factory(method)({})) is app  # compiled once per process
    kg = serve.served_kg()
    assert kg.name == "served"  # read from the KG when KGMEM_KG_NAME is unset
    assert app.config["metadata"]["method"] == method
    assert app.config["metadata"]["kg_name"] == "served"
    assert app.config["metadata"]["model"] == "offline"  # KGMEM_MODEL unset means offline
    assert app.config["run_name"] == f"kgmem.{method}"
    # what the server does: run with its own store
    out = app.copy(update={"store": InMemoryStore()}).invoke({"question": QUESTION})
    assert out["answer"] and out["evidence"]
    assert set(e["id"] for e in out["evidence"]) <= set(served_env)
    assert str(out["model"]).startswith("offline")  # every method labels its run's model


def test_run_config_can_choose_the_model(served_env, monkeypatch):
    from langgraph_kgmem import serve

    method = SERVED_METHOD
    default = asyncio.run(serve.graph_factory(method)({}))
    assert asyncio.run(serve.graph_factory(method)({"configurable": {"model": "offline"}})) is default
    with pytest.raises(ConfigurationError, match="Could not create chat model 'nosuchprovider:x'"):
        asyncio.run(serve.graph_factory(method)({"configurable": {"model": "nosuchprovider:x"}}))
    monkeypatch.setenv("KGMEM_MODEL", "nosuchprovider:y")  # the environment is the default
    with pytest.raises(ConfigurationError, match="nosuchprovider:y"):
        asyncio.run(serve.graph_factory(method)({}))


def test_bad_vector_backend_names_the_variable(served_env, monkeypatch):
    from langgraph_kgmem import serve

    monkeypatch.setenv("KGMEM_VECTOR_BACKEND", "faiss")
    with pytest.raises(ConfigurationError, match="KGMEM_VECTOR_BACKEND='faiss'"):
        serve.served_kg()


# ------------------------------------------------------------------------- the real server


def local_progress_events(kg_dir: Path, method: str) -> list[str]:
    """The custom events ``method`` emits in-process for QUESTION (what the server must relay)."""
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.open(kg_dir, name="served", embeddings="hash", vector_backend="memory", create=False)
    try:
        app = compile_method(method, kg)
        return [e.get("event") for e in app.stream({"question": QUESTION}, stream_mode="custom")]
    finally:
        kg.close()



def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(proc: subprocess.Popen, url: str, log: Path, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"langgraph dev exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/ok", timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"langgraph dev did not answer within {timeout:.0f}s:\n{log.read_text()[-3000:]}")


@contextmanager
def langgraph_dev(tmp_path: Path, kg: str, **extra_env: str) -> Iterator[str]:
    """``langgraph dev`` serving the repository's graphs over KG ``kg`` (a directory or a URI);
    yields its URL and stops it afterwards."""
    # find_spec, not import: importing langgraph_runtime_inmem creates ./.langgraph_api
    if importlib.util.find_spec("langgraph_cli") is None or importlib.util.find_spec("langgraph_runtime_inmem") is None:
        pytest.skip("langgraph-cli[inmem] is not installed")
    cli = Path(sys.executable).with_name("langgraph")
    if not cli.exists():
        cli = Path(shutil.which("langgraph") or "")
    assert cli.is_file(), "the langgraph CLI is not on PATH"
    # run from a scratch directory holding the repository's langgraph.json and graphs/ (the dev
    # server resolves graph paths against its working directory and keeps its state in ./.langgraph_api)
    work = tmp_path / "server"
    work.mkdir()
    shutil.copy(ROOT / "langgraph.json", work / "langgraph.json")
    (work / "graphs").symlink_to(ROOT / "graphs", target_is_directory=True)
    env = dict(os.environ)
    env.update({"KGMEM_KG_DIR": kg, "KGMEM_EMBEDDINGS": "hash", "LANGGRAPH_CLI_NO_ANALYTICS": "1",
                "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false", "HF_HUB_OFFLINE": "1",
                "ANONYMIZED_TELEMETRY": "False", "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT), **extra_env})
    for key in ("KGMEM_MODEL", "KGMEM_KG_NAME", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        if key not in extra_env:
            env.pop(key, None)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            [str(cli), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
             "--config", "langgraph.json"],
            cwd=work, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until_up(proc, url, log)
            yield url
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
    assert proc.returncode is not None


@pytest.mark.integration
def test_langgraph_dev_serves_a_method_through_the_sdk(tmp_path, sample_docs):
    from langgraph_sdk import get_sync_client

    method = SERVED_METHOD
    ids = set(build_kg(tmp_path / "kg", sample_docs))
    local_events = local_progress_events(tmp_path / "kg", method)
    with langgraph_dev(tmp_path, str(tmp_path / "kg")) as url:
        client = get_sync_client(url=url)
        served = {a["graph_id"] for a in client.assistants.search(limit=50)}
        assert set(METHODS) <= served

        # streaming through the server (first run: memory is empty, as in the local run): state values
        # and the same progress events arrive
        thread = client.threads.create()
        chunks = list(client.runs.stream(thread["thread_id"], method, input={"question": QUESTION},
                                         stream_mode=["values", "custom"]))
        assert "values" in [c.event for c in chunks]
        served_events = [c.data.get("event") for c in chunks if c.event == "custom"]
        assert served_events == local_events  # progress events reach a client of the server

        out = client.runs.wait(None, method, input={"question": QUESTION})
        assert isinstance(out, dict), out
        assert out.get("method") in {method, METHODS[method].spec.name}
        assert isinstance(out["answer"], str) and out["answer"].strip()
        assert "Warsaw" in out["answer"] or any("Warsaw" in e["text"] for e in out["evidence"])
        assert out["evidence"] and {e["id"] for e in out["evidence"]} <= ids
        assert out["usage"]["llm_calls"] == 0  # KGMEM_MODEL unset: offline


@pytest.mark.integration
def test_a_served_postgres_kg_answers_from_a_document_another_process_just_ingested(tmp_path, sample_docs,
                                                                                    new_database):
    from langgraph_sdk import get_sync_client

    uri = new_database()
    vistula = next(d for d in sample_docs if d["id"] == "doc-vistula")
    with KnowledgeGraph.open(uri, name="served", embeddings="hash") as kg:
        kg.add_documents([d for d in sample_docs if d is not vistula], model="offline")
    question = "Which river flows into the Baltic Sea?"
    with langgraph_dev(tmp_path, uri, KGMEM_KG_NAME="served") as url:
        client = get_sync_client(url=url)
        before = client.runs.wait(None, "catrag", input={"question": question})
        assert not any("Baltic" in e["text"] for e in before["evidence"])
        ingest = subprocess.run(
            [sys.executable, "-c", "import sys; from langgraph_kgmem import KnowledgeGraph\n"
             "with KnowledgeGraph.open(sys.argv[1], name='served', embeddings='hash') as kg:\n"
             "    kg.add_documents([{'id': sys.argv[2], 'title': sys.argv[3], 'text': sys.argv[4]}], model='offline')",
             uri, vistula["id"], vistula["title"], vistula["text"]],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
        assert ingest.returncode == 0, ingest.stderr[-2000:]
        time.sleep(1.5)   # the served KG checks for other writers at most every second
        after = client.runs.wait(None, "catrag", input={"question": question})
        assert any("Baltic" in e["text"] for e in after["evidence"]), after["evidence"]
