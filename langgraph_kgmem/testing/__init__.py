"""Test doubles for users of langgraph_kgmem (and for our own tests).

- :class:`ScriptedChatModel`: a LangChain chat model whose replies come from a list or from a
  function of the messages; supports ``bind_tools`` and ``with_structured_output``, records every
  call, and reports token usage counted on the real prompt (``testing/scripted.py``).
- :class:`HostileChatModel`: a seeded adversary for fuzzing: random text, truncated, wrongly
  typed or deeply nested JSON, invented ids, empty and 50k-character replies, NaN/huge numbers,
  injected instructions, bad tool calls and raised provider errors, mixed with plausible answers
  so that runs reach every step (``testing/hostile.py``).
- :class:`DeterministicEmbeddings`: the hashing embedding (same text, same vector, any process).
"""

from __future__ import annotations

from langgraph_kgmem.embeddings import HashingEmbeddings
from langgraph_kgmem.testing.hostile import (HOSTILE_KINDS, INJECTION, HostileChatModel, ProviderError,
                                             UnprintableError)
from langgraph_kgmem.testing.scripted import (DeterministicEmbeddings, Reply, Responder, ScriptedChatModel,
                                              ScriptExhausted, failing_then, scripted_extraction_model)


__all__ = ["ScriptedChatModel", "scripted_extraction_model", "failing_then", "ScriptExhausted", "HostileChatModel",
           "HOSTILE_KINDS", "ProviderError", "UnprintableError", "DeterministicEmbeddings"]
