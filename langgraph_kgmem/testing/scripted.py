"""Scripted chat models: replies from a list or a function of the messages.

- :class:`ScriptedChatModel`: a LangChain chat model whose replies come from a list or from a
  function of the messages; supports ``bind_tools`` and ``with_structured_output``, records every
  call, and reports token usage counted on the real prompt.
- :func:`scripted_extraction_model`: one that answers LLM extraction from the chunk itself.
- :func:`failing_then`: a responder that raises provider errors before it recovers.
- :data:`DeterministicEmbeddings`: the hashing embedding (same text, same vector, any process).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any, Callable, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from langgraph_kgmem.embeddings import HashingEmbeddings
from langgraph_kgmem.llm import DecisionRequest, count_message_tokens, count_tokens, current_decision, message_text, parse_json_object

DeterministicEmbeddings = HashingEmbeddings

Reply = str | dict | BaseModel | AIMessage
Responder = Callable[[list[BaseMessage], DecisionRequest | None], Reply]


class ScriptExhausted(AssertionError):
    """The scripted model was called more times than it has replies."""


def _to_message(reply: Reply) -> AIMessage:
    if isinstance(reply, AIMessage):
        return reply
    if isinstance(reply, BaseModel):
        return AIMessage(reply.model_dump_json())
    if isinstance(reply, dict):
        if "tool_calls" in reply:
            calls = [
                {"name": c["name"], "args": c.get("args", {}), "id": c.get("id") or f"call_{uuid.uuid4().hex[:8]}",
                 "type": "tool_call"}
                for c in reply["tool_calls"]
            ]
            return AIMessage(reply.get("content", ""), tool_calls=calls)
        return AIMessage(json.dumps(reply))
    return AIMessage(str(reply))


class ScriptedChatModel(BaseChatModel):
    """A chat model that replies from a script.

    Args:
        responses: replies in order (str, dict, pydantic model, or AIMessage; a dict with a
            ``tool_calls`` list becomes a tool-calling message).
        responder: alternatively, ``fn(messages, request) -> reply``; ``request`` is the
            :class:`~langgraph_kgmem.llm.DecisionRequest` of the decision being made (its step name,
            schema and structured context) or ``None`` for free calls.

        latency: seconds each call waits before replying, to simulate a hosted model's latency
            (e.g. when measuring what concurrent calls save).

    Every call is appended to ``calls`` as ``{"messages", "request", "tools", "reply"}``.
    Calls may come from several threads (methods make independent LLM calls concurrently).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    responses: list[Any] = Field(default_factory=list)
    responder: Any = None
    calls: list[dict[str, Any]] = Field(default_factory=list)
    model_name: str = "scripted"
    latency: float = 0.0
    _index: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "kgmem-scripted"

    def _next_reply(self, messages: list[BaseMessage]) -> Reply:
        request = current_decision.get()
        if self.responder is not None:
            return self.responder(messages, request)
        with self._lock:  # replies go out in call order, also when calls come from several threads
            if self._index >= len(self.responses):
                raise ScriptExhausted(
                    f"ScriptedChatModel has {len(self.responses)} replies but was called again "
                    f"(call #{self._index + 1}, step {getattr(request, 'step', None)!r})"
                )
            reply = self.responses[self._index]
            self._index += 1
        return reply

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.latency > 0:
            time.sleep(self.latency)
        return self._reply(messages, **kwargs)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if self.latency > 0:   # waits like a network call: other coroutines run meanwhile
            await asyncio.sleep(self.latency)
        return self._reply(messages, **kwargs)

    def _reply(self, messages: list[BaseMessage], **kwargs: Any) -> ChatResult:
        reply = self._next_reply(messages)
        msg = _to_message(reply)
        prompt = count_message_tokens(messages)
        completion = count_tokens(message_text(msg))
        msg = msg.model_copy(update={"usage_metadata": {
            "input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}})
        self.calls.append({"messages": list(messages), "request": current_decision.get(),
                           "tools": kwargs.get("tools"), "reply": msg})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Runnable:
        """The model with ``tools`` bound in OpenAI format (recorded with each call; replies stay scripted)."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Runnable:
        """A runnable that invokes the model and parses its reply into ``schema``: the first tool call's
        arguments, else a JSON object in the text. With ``include_raw`` the result is
        ``{"raw", "parsed", "parsing_error"}`` instead of raising on a malformed reply."""
        def as_messages(messages: Any) -> Any:
            if hasattr(messages, "to_messages"):
                return messages.to_messages()
            if isinstance(messages, str):
                from langchain_core.messages import HumanMessage

                return [HumanMessage(messages)]
            return messages

        def parse(raw: Any) -> Any:
            parsed, err = None, None
            try:
                if raw.tool_calls:
                    data = raw.tool_calls[0]["args"]
                else:
                    data = parse_json_object(message_text(raw))
                parsed = schema.model_validate(data) if isinstance(schema, type) and issubclass(schema, BaseModel) else data
            except (ValueError, ValidationError) as exc:
                err = exc
                if not include_raw:
                    raise
            if include_raw:
                return {"raw": raw, "parsed": parsed, "parsing_error": err}
            return parsed

        def run(messages: Any) -> Any:
            return parse(self.invoke(as_messages(messages)))

        async def arun(messages: Any) -> Any:
            return parse(await self.ainvoke(as_messages(messages)))

        return RunnableLambda(run, afunc=arun, name="ScriptedStructuredOutput")

    @property
    def call_count(self) -> int:
        """How many times the model was called."""
        return len(self.calls)



def scripted_extraction_model(latency: float = 0.0) -> ScriptedChatModel:
    """A scripted model for LLM extraction that answers each step from the chunk itself
    (capitalised words are the entities, consecutive pairs the triples, the first words the title),
    so the KG it builds does not depend on the order its calls arrive in; ``latency`` simulates a
    hosted model (benchmarks of concurrent extraction)."""
    import json
    import re

    def responder(messages: Any, request: Any) -> str:
        ctx = request.context
        if request.step == "extract_entities":
            return json.dumps({"entities": list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b", ctx["text"])))})
        if request.step == "extract_triples":
            ents = ctx["entities"]
            return json.dumps({"triples": [{"subject": a, "relation": "appears with", "object": b}
                                           for a, b in zip(ents, ents[1:])]})
        return json.dumps({"title": " ".join(ctx["text"].split()[:4])})

    return ScriptedChatModel(responder=responder, latency=latency, model_name="scripted-extraction")


def failing_then(errors: Sequence[BaseException], reply: Reply) -> Callable[[Any, Any], Reply]:
    """A ``ScriptedChatModel`` responder that raises each of ``errors`` in turn (one per call), then
    answers ``reply`` every time: a provider that times out or rate-limits before it recovers, for
    testing retry policies and fallbacks."""
    pending = iter(list(errors))

    def responder(messages: Any, request: Any) -> Reply:
        exc = next(pending, None)
        if exc is not None:
            raise exc
        return reply

    return responder
