"""The model layer: resolving models, typed decisions, free generation, usage accounting, prompts.

Every decision point of every method goes through :func:`decide`: it asks the model for a typed
(pydantic) answer, retries once on malformed or invalid output, then takes the caller's documented
fallback and records that it did. With ``model="offline"`` the decision point's own offline policy
answers instead (no LLM call at all). Every call is counted: calls, prompt/completion tokens and
seconds, per step, in a *usage* dict that graph states merge with :func:`merge_usage`.

Model output is untrusted input: replies are cut and parsed with bounds, and any value the
decision's schema refuses counts as malformed output (retry, then the fallback). A model call
that raises is retried once (or per the model's retry policy), then the decision falls back too;
each fallback is recorded in ``usage["fallbacks"]`` with its ``kind``.

Modules, from the bottom up (each imports only those above it in this list):

- :mod:`~langgraph_kgmem.llm.prompts`: strict :func:`render`, schema instructions, the :func:`fence`
  every prompt quotes untrusted text through;
- :mod:`~langgraph_kgmem.llm.parsing`: the first JSON value of a reply, bounded;
- :mod:`~langgraph_kgmem.llm.tokens`: offline token counting;
- :mod:`~langgraph_kgmem.llm.usage`: usage records, :func:`decision_summary`, fallback records;
- :mod:`~langgraph_kgmem.llm.retry`: transient errors and the retry policy's model wrapper;
- :mod:`~langgraph_kgmem.llm.models`: :func:`resolve_model`, :func:`resolve_run_model` (once per
  run), :func:`unwrap`, :func:`bind_tools`;
- :mod:`~langgraph_kgmem.llm.endpoints`: what each server accepts (:func:`configure_model`);
- :mod:`~langgraph_kgmem.llm.calls`: one call under its policy, sync or async;
- :mod:`~langgraph_kgmem.llm.decisions`, :mod:`~langgraph_kgmem.llm.generation`,
  :mod:`~langgraph_kgmem.llm.concurrency`: decisions, free text, calls side by side.

Decisions and refusals are logged on the ``langgraph_kgmem.llm`` logger (DEBUG per decision, INFO
per fallback or refused structured-output method).
"""

from __future__ import annotations

from langgraph_kgmem.llm.calls import (DecisionRequest, ModelCall, adrive, counting_attempts, current_decision,
                                       drive)
from langgraph_kgmem.llm.concurrency import run_concurrently
from langgraph_kgmem.llm.decisions import adecide, decide, wire_schema
from langgraph_kgmem.llm.endpoints import (STRUCTURED_METHODS, MostlyFallbackWarning, configure_model,
                                           decision_tally, refused_methods, reset_endpoints)
from langgraph_kgmem.llm.generation import generate, invoke_counted
from langgraph_kgmem.llm.models import (OFFLINE, ModelLike, bind_tools, context_model, innermost_model, is_offline,
                                        model_label, resolve_model, resolve_run_model, through_wrappers, unwrap,
                                        with_retry_policy)
from langgraph_kgmem.llm.parsing import (MAX_JSON_DEPTH, MAX_REPLY_CHARS, MAX_TEXT_CHARS, MalformedOutput,
                                         parse_json_object)
from langgraph_kgmem.llm.prompts import DATA_CLOSE, DATA_NOTE, DATA_OPEN, data_text, fence, render, schema_instructions
from langgraph_kgmem.llm.retry import DEFAULT_RETRY_POLICY, RetryingModel, transient_model_error
from langgraph_kgmem.llm.tokens import (MAX_EXACT_TOKEN_CHARS, TOKEN_ENCODING, TOKEN_SLICE_CHARS,
                                        count_message_tokens, count_tokens, message_text, token_encoding)
from langgraph_kgmem.llm.usage import (DECISION_FALLBACK_KINDS, call_usage, decision_summary, decision_usage,
                                       empty_usage, fallback_record, fresh_usage, merge_usage, offline_usage)


__all__ = ["ModelLike", "resolve_model", "resolve_run_model", "configure_model", "model_label", "unwrap", "bind_tools",
           "with_retry_policy", "DEFAULT_RETRY_POLICY", "RetryingModel", "MostlyFallbackWarning", "STRUCTURED_METHODS",
           "decide", "adecide", "decision_summary", "empty_usage", "merge_usage", "count_tokens", "render", "fence",
           "DATA_NOTE"]
