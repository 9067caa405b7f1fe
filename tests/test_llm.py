"""Typed decisions: structured output, retry, fallback, validation, offline, usage accounting."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from langgraph_kgmem.errors import ConfigurationError
from langgraph_kgmem.ingest.extract import LLMExtractor
from langgraph_kgmem.llm import count_tokens, decide, merge_usage, parse_json_object, resolve_model
from langgraph_kgmem.testing import ScriptedChatModel


class Pick(BaseModel):
    """Pick one node."""

    node_id: str = Field(description="the chosen id")


def test_structured_decision_is_parsed_and_counted():
    model = ScriptedChatModel(responses=['{"node_id": "n1"}'])
    d, usage = decide(model, Pick, "choose", step="pick", offline=lambda: Pick(node_id="off"))
    assert d.node_id == "n1"
    assert usage["llm_calls"] == 1 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["by_step"]["pick"]["llm_calls"] == 1 and not usage["fallbacks"]


def test_malformed_output_retries_once_then_falls_back_and_records():
    model = ScriptedChatModel(responses=["I think n1", "still not json"])
    d, usage = decide(model, Pick, "choose", step="pick", offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "safe"
    assert usage["llm_calls"] == 2
    assert usage["fallbacks"][0]["step"] == "pick" and "still not json" in usage["fallbacks"][0]["raw"]
    # the retry told the model what was wrong
    retry_prompt = model.calls[1]["messages"][-1].content
    assert "not usable" in retry_prompt and "JSON schema" in retry_prompt


def test_malformed_then_valid_answer_is_accepted():
    model = ScriptedChatModel(responses=["nonsense", '```json\n{"node_id": "n2"}\n```'])
    d, usage = decide(model, Pick, "choose", step="pick", offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "n2" and usage["llm_calls"] == 2 and not usage["fallbacks"]


def test_invented_ids_are_rejected_and_reasked():
    model = ScriptedChatModel(responses=['{"node_id": "ghost"}', '{"node_id": "n1"}'])
    allowed = {"n1", "n2"}
    d, usage = decide(model, Pick, "choose", step="pick", offline=lambda: Pick(node_id="n2"),
                      validate=lambda p: None if p.node_id in allowed else f"{p.node_id} is not allowed")
    assert d.node_id == "n1"
    assert "ghost is not allowed" in model.calls[1]["messages"][-1].content


def test_offline_decision_makes_no_call():
    d, usage = decide("offline", Pick, "choose", step="pick", offline=lambda: Pick(node_id="heur"))
    assert d.node_id == "heur" and usage["llm_calls"] == 0 and usage["offline_decisions"] == 1


def test_decision_context_reaches_scripted_responder():
    seen = {}

    def responder(messages, request):
        seen["step"], seen["ctx"] = request.step, request.context
        return Pick(node_id=request.context["candidates"][0])

    d, _ = decide(ScriptedChatModel(responder=responder), Pick, "choose", step="pick",
                  offline=lambda: Pick(node_id="x"), context={"candidates": ["c7"]})
    assert d.node_id == "c7" and seen["step"] == "pick"


def test_merge_usage_sums_and_keeps_max_prompt():
    a = {"llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "max_prompt_tokens": 10,
         "by_step": {"x": {"llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2}}}
    b = {"llm_calls": 2, "prompt_tokens": 30, "completion_tokens": 4, "max_prompt_tokens": 20,
         "by_step": {"x": {"llm_calls": 2, "prompt_tokens": 30, "completion_tokens": 4}}}
    m = merge_usage(a, b)
    assert (m["llm_calls"], m["prompt_tokens"], m["max_prompt_tokens"]) == (3, 40, 20)
    assert m["by_step"]["x"]["llm_calls"] == 3


def test_unconfigured_model_error_names_variables(monkeypatch):
    monkeypatch.delenv("KGMEM_MODEL", raising=False)
    with pytest.raises(ConfigurationError, match="KGMEM_MODEL"):
        resolve_model(None)
    assert resolve_model("offline") == "offline"


def test_parse_json_object_variants():
    assert parse_json_object('prefix {"a": 1} suffix') == {"a": 1}
    assert parse_json_object("```json\n[1, 2]\n```") == [1, 2]
    with pytest.raises(ValueError):
        parse_json_object("no json here")


def test_token_counting_is_offline_and_stable():
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_llm_extractor_uses_three_typed_decisions():
    model = ScriptedChatModel(responses=[
        {"entities": ["Ada Lovelace", "Charles Babbage"]},
        {"triples": [{"subject": "Ada Lovelace", "relation": "worked with", "object": "Charles Babbage"}]},
        {"title": "Ada and the engine"},
    ])
    ex = LLMExtractor(model).extract("Ada Lovelace worked with Charles Babbage on the engine.")
    assert ex.entities == ["Ada Lovelace", "Charles Babbage"]
    assert [(t.subject, t.relation, t.object) for t in ex.triples] == [("Ada Lovelace", "worked with", "Charles Babbage")]
    assert ex.title == "Ada and the engine" and ex.usage["llm_calls"] == 3
    steps = [c["request"].step for c in model.calls]
    assert steps == ["extract_entities", "extract_triples", "extract_title"]


def test_llm_extractor_falls_back_to_offline_on_garbage():
    model = ScriptedChatModel(responses=["x"] * 6)
    ex = LLMExtractor(model).extract("Ada Lovelace worked with Charles Babbage.")
    assert "Ada Lovelace" in ex.entities and ex.usage["llm_calls"] == 6
    assert {f["step"] for f in ex.usage["fallbacks"]} == {"extract_entities", "extract_triples", "extract_title"}


def test_add_documents_with_scripted_model_counts_usage(kg):
    model = ScriptedChatModel(responses=[
        {"entities": ["Nikola Tesla", "Smiljan"]},
        {"triples": [{"subject": "Nikola Tesla", "relation": "was born in", "object": "Smiljan"}]},
    ])
    report = kg.add_documents([{"title": "Tesla", "text": "Nikola Tesla was born in Smiljan."}], model=model)
    assert report.usage["llm_calls"] == 2  # the title is given, so no title call
    assert any(e.text == "was born in" for e in kg.edges("relation"))


# ------------------------------------------------------------------ hostile output


def test_deeply_nested_output_is_malformed_not_a_crash():
    from langgraph_kgmem.llm import MalformedOutput

    for text in ("[" * 100_000, '{"a":' * 50_000, "x " + "{[" * 20_000, "[" * 5_000 + "]" * 5_000):
        with pytest.raises(MalformedOutput):   # refused, not a RecursionError (no wall-clock bound: testing contract)
            parse_json_object(text)
    model = ScriptedChatModel(responses=["[" * 100_000, '{"node_id": "n1"}'])
    d, usage = decide(model, Pick, "choose", step="pick", offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "n1" and usage["llm_calls"] == 2


def test_huge_reply_is_cut_before_parsing_and_in_the_retry():
    model = ScriptedChatModel(responses=['{"node_id": "' + "x" * 60_000 + '"}', "x" * 60_000])
    d, usage = decide(model, Pick, "choose", step="pick", offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "safe" and usage["fallbacks"][0]["kind"] == "malformed"
    assert len(model.calls[1]["messages"][-2].content) <= 2_000  # the echoed reply is cut
    assert len(usage["fallbacks"][0]["raw"]) <= 500


def test_token_counting_never_raises():
    assert count_tokens("x" * 1_000_000) > 0                  # the encoder alone refuses this
    assert count_tokens("ab " * 300_000) >= 200_000            # ... and this (over 200k tokens)
    assert count_tokens("a\ud800b") > 0                        # lone surrogate
    long = "word " * 500_000                                   # beyond the exact bound: estimated
    assert abs(count_tokens(long) - 500_000) < 5_000


def test_a_raising_model_is_retried_then_the_decision_falls_back():
    calls = []

    def responder(messages, request):
        calls.append(request.attempt)
        raise TimeoutError("read timed out")

    d, usage = decide(ScriptedChatModel(responder=responder), Pick, "choose", step="pick",
                      offline=lambda: Pick(node_id="safe"))
    assert d.node_id == "safe" and calls == [0, 1] and usage["llm_calls"] == 2
    assert usage["fallbacks"][0]["kind"] == "model_error" and "TimeoutError" in usage["fallbacks"][0]["error"]


def test_generate_falls_back_or_raises_a_typed_error():
    from langgraph_kgmem.errors import KgmemModelError
    from langgraph_kgmem.llm import MAX_TEXT_CHARS, generate

    def boom(messages, request):
        raise ConnectionError("reset by peer")

    text, usage = generate(ScriptedChatModel(responder=boom), "q", step="answer", fallback=lambda: "extractive")
    assert text == "extractive" and usage["fallbacks"][0]["kind"] == "model_error" and usage["llm_calls"] == 2
    with pytest.raises(KgmemModelError, match="ConnectionError"):
        generate(ScriptedChatModel(responder=boom), "q", step="answer")
    text, _ = generate(ScriptedChatModel(responses=["y" * 50_000]), "q", step="answer")
    assert len(text) == MAX_TEXT_CHARS


def test_a_failed_script_is_not_mistaken_for_a_provider_error():
    from langgraph_kgmem.testing import ScriptExhausted

    with pytest.raises(ScriptExhausted):
        decide(ScriptedChatModel(responses=[]), Pick, "choose", step="pick", offline=lambda: Pick(node_id="x"))


def test_out_of_range_values_are_malformed():
    class Plan(BaseModel):
        hours: int = Field(ge=1, le=168)

    model = ScriptedChatModel(responses=['{"hours": 6e7}', '{"hours": NaN}'])
    d, usage = decide(model, Plan, "plan", step="plan", offline=lambda: Plan(hours=2))
    assert d.hours == 2 and usage["fallbacks"][0]["kind"] == "malformed"


def test_fallback_records_never_keep_secrets():
    def leaky(messages, request):
        raise PermissionError("401 for Authorization: Bearer sk-proj-abcdefghijklmnopqrstuvwx "
                              "at postgresql://app:hunter2@db/x")

    d, usage = decide(ScriptedChatModel(responder=leaky), Pick, "choose", step="pick",
                      offline=lambda: Pick(node_id="safe"))
    record = repr(usage["fallbacks"])
    assert "PermissionError" in record and "<redacted>" in record
    assert "sk-proj-abcdefghijklmnopqrstuvwx" not in record and "hunter2" not in record
