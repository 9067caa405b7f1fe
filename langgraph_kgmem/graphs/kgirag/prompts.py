"""KG-IRAG's prompts (rendered strictly by ``llm.render``: a missing placeholder is an error).

:data:`PROMPTS` names them; a graph replaces any with ``create_kgirag_graph(kg, prompts={name:
template})`` (or a run with ``context={"prompts": {...}}``), checked against the placeholders
below (:mod:`langgraph_kgmem.graphs.prompt_overrides`):

- ``plan`` (LLM1, the plan): ``{event_name}``, ``{rule}``, ``{locations}`` (fenced), ``{start}``,
  ``{end}``, ``{question}``;
- ``reasoning_detect`` / ``reasoning_latest`` / ``reasoning_earliest``: the judge's instruction
  written when the plan gives none: ``{rule}``, ``{location}`` (fenced), ``{time}``, ``{horizon}``,
  ``{hours}``, ``{last}``, ``{start}``, ``{end}``;
- ``judge`` (LLM2, stop or the next time): ``{reasoning}``, ``{question}``, ``{count}``,
  ``{triples}``, ``{records}`` (fenced), ``{new}``, ``{anchor}``;
- ``answer`` (LLM1, the answer): ``{reasoning}``, ``{records}`` (fenced), ``{question}``.
"""

from __future__ import annotations

from langgraph_kgmem.graphs.common import DATA_NOTE

PLAN_PROMPT = """You plan a search through hourly records ({event_name} data). An abnormal event
means: {rule}. Known locations: {locations}. Records span {start} to {end}.
""" + DATA_NOTE + """

A trip leaving at hour t for Δt hours covers the hours t .. t+Δt-1. Extract from the question
the task (detect / latest / earliest), the location, the departure time, the trip length, the
search horizon in hours, how many hours to read per round, and write a reasoning instruction
stating what counts as an abnormal event and when the search can stop.

Question: {question}"""

REASONING_TEXT = {
    "detect": ("An abnormal event is: {rule}. Read the records of {location} for the hours {start} to {end}. "
               "Stop as soon as one of them is abnormal (answer no) or all are normal (answer yes)."),
    "latest": ("An abnormal event is: {rule}. Find the latest departure t' before {time} (at most {horizon} "
               "hours earlier) such that the hours t' .. t'+{last} at {location} are all normal. Search backwards; "
               "when an abnormal hour h is found, jump to t' = h - {hours}. Stop when a clear window is "
               "confirmed or the horizon is exhausted (answer none)."),
    "earliest": ("An abnormal event is: {rule}. Find the earliest departure t' after {time} (at most {horizon} "
                 "hours later) such that the hours t' .. t'+{last} at {location} are all normal. Search forwards; "
                 "when an abnormal hour h is found, jump to t' = h + 1. Stop when a clear window is confirmed "
                 "or the horizon is exhausted (answer none)."),
}

JUDGE_PROMPT = """{reasoning}
""" + DATA_NOTE + """

Question: {question}

Records read so far ({count} records, {triples} triples):
{records}

Newly read this round: {new} triples around {anchor}.
Decide: stop (enough to answer), or give the next time to read (you may skip past an abnormal event)."""

ANSWER_PROMPT = """{reasoning}
""" + DATA_NOTE + """

Records:
{records}

Question: {question}
Answer with only: "yes" or "no" for whether the event can be avoided; or the departure time as
YYYY-MM-DD HH:MM; or "none" if no departure within the horizon avoids it."""


#: every prompt by name (see the module docstring): what ``prompts=`` may override
PROMPTS: dict[str, str] = {"plan": PLAN_PROMPT, **{f"reasoning_{task}": text for task, text in REASONING_TEXT.items()},
                           "judge": JUDGE_PROMPT, "answer": ANSWER_PROMPT}
