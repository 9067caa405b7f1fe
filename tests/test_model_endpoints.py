"""How decisions talk to an OpenAI-compatible server: the structured-output method a server refuses
is recognised once and never retried, calls in flight are bounded, the server's token counts are
used and labelled, and a model whose decisions mostly fall back is reported.

The server here is a small fake on 127.0.0.1 that answers as llama-cpp-python's server does (it
refuses ``response_format`` ``json_schema`` with HTTP 500); the real server runs in
tests/test_local_model.py.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import BaseModel, Field

from langgraph_kgmem.llm import endpoints as ep
from langgraph_kgmem.llm import decide, decision_summary, generate, merge_usage, run_concurrently


class Pick(BaseModel):
    """Pick one city."""

    city: str = Field(description="the city")


class FakeOpenAI:
    """Answers /v1/chat/completions like a llama.cpp-style server; records what it was asked."""

    def __init__(self, *, refuse_json_schema: bool = True, reply_args: dict | None = None,
                 text: str = "Warsaw", delay: float = 0.0, report_usage: bool = True) -> None:
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    fake.requests.append(body)
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    time.sleep(delay)
                    fmt = body.get("response_format") or {}
                    if refuse_json_schema and fmt.get("type") == "json_schema":
                        return self._send(500, {"error": {"message": "1 validation error: response_format.type "
                                                                      "Input should be 'text' or 'json_object'"}})
                    msg: dict = {"role": "assistant", "content": text}
                    if body.get("tools"):
                        name = body["tools"][0]["function"]["name"]
                        msg = {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function",
                             "function": {"name": name, "arguments": json.dumps(reply_args or {"city": "Warsaw"})}}]}
                    elif fmt.get("type") == "json_object":
                        msg["content"] = json.dumps(reply_args or {"city": "Warsaw"})
                    out = {"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                           "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]}
                    if report_usage:
                        out["usage"] = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
                    self._send(200, out)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def model(self, **kw):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model="fake", base_url=self.base_url, api_key="sk-test", max_retries=0, timeout=10, **kw)

    def close(self):
        self.server.shutdown()


@pytest.fixture(autouse=True)
def _fresh_endpoints():
    ep.reset_endpoints()
    yield
    ep.reset_endpoints()


@pytest.fixture
def server():
    s = FakeOpenAI()
    yield s
    s.close()


def _decide(model):
    return decide(model, Pick, "Which city?", step="pick", offline=lambda: Pick(city="offline"))


def test_a_refused_response_format_moves_on_at_once_and_is_remembered(server):
    model = server.model()
    d, usage = _decide(model)
    assert d.city == "Warsaw" and not usage["fallbacks"]
    kinds = [("json_schema" if (r.get("response_format") or {}).get("type") == "json_schema" else
              "tools" if r.get("tools") else "text") for r in server.requests]
    assert kinds == ["json_schema", "tools"]          # refused once, not retried, then a tool call
    assert usage["structured_output"] == {"function_calling": 1}
    assert ep.refused_methods(model) == {"default"}
    d2, _ = _decide(server.model())                   # a new client for the same server and model
    assert d2.city == "Warsaw" and len(server.requests) == 3   # the refused method is not asked again


def test_a_refusal_is_not_retried_by_the_retry_policy(server):
    from langgraph_kgmem.llm import DEFAULT_RETRY_POLICY, with_retry_policy

    d, usage = _decide(with_retry_policy(server.model(), DEFAULT_RETRY_POLICY))
    assert d.city == "Warsaw"
    assert sum(1 for r in server.requests if (r.get("response_format") or {}).get("type") == "json_schema") == 1


def test_a_fixed_method_is_the_only_one_used(server):
    model = server.model()
    ep.configure_model(model, structured_output="json_object_schema")
    d, usage = _decide(model)
    assert d.city == "Warsaw" and usage["structured_output"] == {"json_object_schema": 1}
    assert server.requests[0]["response_format"]["type"] == "json_object"
    assert server.requests[0]["response_format"]["schema"]["properties"]["city"]
    with pytest.raises(Exception, match="structured_output must be one of"):
        ep.configure_model(model, structured_output="xml")


def test_calls_in_flight_to_an_endpoint_are_bounded():
    slow = FakeOpenAI(delay=0.3)
    try:
        model = slow.model()
        calls = [lambda: generate(model, "hi", step="answer") for _ in range(4)]
        run_concurrently(calls, 4)
        assert slow.max_in_flight > 1                 # unbounded, the threads overlap
        slow.max_in_flight = 0
        ep.configure_model(slow.base_url, max_in_flight=1)
        run_concurrently(calls, 4)
        assert slow.max_in_flight == 1
    finally:
        slow.close()


def test_server_token_counts_are_used_and_labelled():
    with_usage, without = FakeOpenAI(), FakeOpenAI(report_usage=False)
    try:
        _, u1 = generate(with_usage.model(), "hi", step="answer")
        _, u2 = generate(without.model(), "hi", step="answer")
    finally:
        with_usage.close()
        without.close()
    assert (u1["prompt_tokens"], u1["completion_tokens"], u1["tokens_reported"], u1["tokens_counted"]) == (11, 3, 1, 0)
    assert u2["tokens_reported"] == 0 and u2["tokens_counted"] == 1 and u2["prompt_tokens"] > 0


def test_a_model_whose_decisions_mostly_fall_back_is_reported():
    bad = FakeOpenAI(refuse_json_schema=True, reply_args={"town": "nowhere"}, text="not json at all")
    try:
        model = bad.model()
        usage = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(ep.FALLBACK_WARN_MIN):
                _, u = _decide(model)
                usage = merge_usage(usage, u)
        summary = decision_summary(usage)
        assert summary["asked"] == ep.FALLBACK_WARN_MIN and summary["fell_back"] == ep.FALLBACK_WARN_MIN
        assert summary["made"] == 0 and summary["fallback_share"] == 1.0
        assert [w for w in caught if issubclass(w.category, ep.MostlyFallbackWarning)]
        assert ep.decision_tally(model) == (ep.FALLBACK_WARN_MIN, ep.FALLBACK_WARN_MIN)
    finally:
        bad.close()


def test_a_model_that_decides_is_not_reported(server):
    model = server.model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ep.MostlyFallbackWarning)
        for _ in range(ep.FALLBACK_WARN_MIN + 2):
            _decide(model)
    assert ep.decision_tally(model) == (ep.FALLBACK_WARN_MIN + 2, 0)


def test_feature_refusal_reads_status_and_message_and_survives_a_broken_exception():
    class Refused(Exception):
        status_code = 500

    class Broken(Exception):
        status_code = 400

        def __str__(self):
            raise RuntimeError("no message")

    class Timeout(Exception):
        status_code = 504

    assert ep.feature_refusal(Refused("Input should be 'text' or 'json_object'"))
    assert ep.feature_refusal(Refused("tools are not supported by this model"))
    assert not ep.feature_refusal(Refused("CUDA out of memory"))
    assert not ep.feature_refusal(Timeout("response_format timed out"))
    assert not ep.feature_refusal(Broken())
    assert ep.describe_error(Broken()) == "Broken: Broken()"   # its repr, since its str raises


def test_the_schema_sent_has_no_grammar_heavy_bounds_but_the_reply_is_still_held_to_them():
    """A grammar-constrained server expands a long maxLength into nested rules (llama.cpp refuses
    the grammar and its Python server dies mid-request): bounds stay on our side of the wire."""

    class Short(BaseModel):
        """A short city name."""

        city: str = Field(max_length=5, description="the city")

    long_reply = FakeOpenAI(reply_args={"city": "Warszawa-Praga"})
    try:
        model = long_reply.model()
        d, usage = decide(model, Short, "Which city?", step="pick", offline=lambda: Short(city="off"))
        tool = next(r for r in long_reply.requests if r.get("tools"))["tools"][0]["function"]
        assert "maxLength" not in json.dumps(tool["parameters"])
        assert d.city == "off" and usage["fallbacks"][0]["kind"] == "malformed"   # the bound still holds
    finally:
        long_reply.close()
