"""Adapters ``graphcot`` and ``r3cycle`` on dataset ``graph-qa`` (corpus mode "graph-qa").

The dataset is the synthetic GRBench-format book graph of :mod:`langgraph_kgmem.agent_tools.graphqa`
(seeded by ``--seed``, default 0), loaded into the KG with ``load_grbench``; questions are the
templated easy / medium / hard questions with exact answers.

The oracle decider is a *noisy oracle agent* (``--noise P``, default 0): it follows each
question's gold tool path, but at every non-final step, with probability P, it errs:

- half of the errors are a *wrong tool call* (a relation, feature or argument that does not
  exist); the agent then recovers on the next step with probability 1/2, otherwise it loses track
  and repeats wrong calls until the step budget runs out (a *halt*);
- the other half *stop early*: Finish with a guess (the entity's name) — a wrong answer.

The dice are seeded by (seed, question, attempt), so Graph-CoT and R3-Cycle's first attempts are
identical and the comparison is paired. The oracle's verifier judges the answer against the gold
answer, and its reflection names the first step that went wrong and the correct call for it
("Step k should be: ..."); a retry whose guidance names a step makes that step correctly (the
agent follows the advice) while every other step keeps the noise.

Run ``python tools/bench.py --method graphcot,r3cycle --decider oracle --dataset graph-qa
--questions 90 --noise 0.2``, or this module's own comparison (noise 0.1/0.2/0.3, one table)::

    python tools/benchlib/methods/r3cycle.py --questions 90 --noise 0.1,0.2,0.3
"""

from __future__ import annotations

import random
import re
from typing import Any

if __name__ == "__main__":   # run as a script: make `benchlib` and `langgraph_kgmem` importable
    import sys
    from pathlib import Path as _Path

    sys.path[:0] = [str(_Path(__file__).resolve().parents[2]), str(_Path(__file__).resolve().parents[3])]

from benchlib.curves import reuse_options
from benchlib.api import BenchContext, BenchQuestion, MethodResult, Responder, normalize_answer
from langgraph_kgmem.graphs.registry import METHODS

DATASET = "graph-qa"
WRONG_ARGS = {"RetrieveNode": ("query", None), "NeighbourCheck": ("relation", "writer"),
              "NodeFeature": ("feature", "colour"), "NodeDegree": ("relation", "novels")}
_FIX = re.compile(r"Step (\d+) should be")


def _wrong_call(step: dict[str, Any], variant: int = 0) -> dict[str, Any]:
    """A corrupted version of a gold call: an argument that does not exist in the graph."""
    tool, args = step["tool"], dict(step["args"])
    key, value = WRONG_ARGS[tool]
    if tool == "RetrieveNode":        # wrong argument name: a schema error
        return {"tool": tool, "args": {"query": args["keyword"]}}
    args[key] = f"{value}{'_' * variant}" if variant else value
    return {"tool": tool, "args": args}


def _signature(step: dict[str, Any]) -> str:
    return f"{step['tool']}({', '.join(f'{k}={v!r}' for k, v in sorted(step['args'].items()))})"


class NoisyOracle:
    """The responder of one question: a simulated agent that follows the gold path with noise."""

    def __init__(self, q: BenchQuestion, noise: float, seed: int) -> None:
        self.q, self.noise, self.seed = q, noise, seed
        self.gold: list[dict[str, Any]] = q.extra["gold_path"]
        self.plans: dict[int, list[dict[str, Any]]] = {}

    def plan(self, attempt: int, guidance: str) -> list[dict[str, Any]]:
        if attempt in self.plans:
            return self.plans[attempt]
        rng = random.Random(f"{self.seed}|{self.q.id}|{attempt}")
        fixed = {int(k) - 1 for k in _FIX.findall(guidance or "")}
        plan: list[dict[str, Any]] = []
        for k, step in enumerate(self.gold[:-1]):
            roll, kind, recover = rng.random(), rng.random(), rng.random()
            if k not in fixed and roll < self.noise:
                if kind < 0.5:                                   # wrong tool call
                    plan.append(_wrong_call(step))
                    if recover >= 0.5:                           # loses track: repeats wrong calls -> halt
                        plan.append(_wrong_call(step, 1))
                        break
                else:                                            # stops early with a guess
                    plan.append({"tool": "Finish", "args": {"answer": self.gold[0]["args"]["keyword"]}})
                    break
            plan.append(step)
        else:
            plan.append(self.gold[-1])
        self.plans[attempt] = plan
        return plan

    def diagnose(self, steps: list[dict[str, Any]], failure: str) -> dict[str, Any]:
        """The gold step at which the attempt finally went astray, and the call it should have made."""
        g, last_bad, bad_call = 0, None, None
        for done in steps:
            if g < len(self.gold) and done["tool"] == self.gold[g]["tool"] and done["args"] == self.gold[g]["args"]:
                g += 1
            else:
                last_bad, bad_call = g, done
        k = min(last_bad if last_bad is not None else g, len(self.gold) - 1)
        what = (f"instead of path step {k + 1} it called {_signature(bad_call)}" if bad_call else
                f"the attempt ended before path step {k + 1}")
        cause = f"{'halted' if failure == 'halted' else 'answered wrongly'}: {what}"
        advice = (f"Step {k + 1} should be: {_signature(self.gold[k])}. Follow the path from the start and call "
                  "Finish with the value it reaches.")
        return {"root_cause": cause, "advice": advice, "retry": True}

    def __call__(self, messages: list[Any], request: Any) -> Any:
        if request is None:
            return "no answer"
        ctx = request.context
        if request.step == "reason":
            plan = self.plan(ctx["attempt"], ctx.get("guidance", ""))
            step = plan[min(ctx["step_index"], len(plan) - 1)]
            return {"content": f"Next: {step['tool']}.", "tool_calls": [{"name": step["tool"], "args": step["args"]}]}
        if request.step == "verify":
            ok = normalize_answer(str(ctx.get("answer", ""))) == normalize_answer(self.q.answer)
            return {"ok": ok, "reason": "the evidence supports it" if ok else "the evidence does not support it"}
        if request.step == "reflect":
            return self.diagnose(ctx.get("steps", []), ctx.get("failure_type", ""))
        return "no answer"


class GraphQAAdapter:
    corpus = "graph-qa"
    datasets = (DATASET,)

    def __init__(self, name: str, reflection: bool) -> None:
        self.name = name
        self.reflection = reflection

    def load_questions(self, dataset: str, n: int, seed: int) -> list[BenchQuestion]:
        from langgraph_kgmem.agent_tools.graphqa import make_domain_graph, make_questions

        if dataset != DATASET:
            raise ValueError(f"{self.name} runs on dataset {DATASET!r}, not {dataset!r}")
        data = make_domain_graph(seed=seed)
        return [BenchQuestion(id=q.id, question=q.question, answer=q.answer, passages=[], supporting_titles=[],
                              extra={"level": q.level, "template": q.template, "gold_path": q.gold_path,
                                     "graph_seed": seed})
                for q in make_questions(data, n=n, seed=seed)]

    def build_kg(self, ctx: BenchContext, questions: list[BenchQuestion]) -> None:
        from langgraph_kgmem.agent_tools.graphqa import make_domain_graph
        from langgraph_kgmem.agent_tools import load_grbench

        seed = questions[0].extra["graph_seed"] if questions else int(ctx.options.get("seed") or 0)
        load_grbench(ctx.kg, make_domain_graph(seed=seed))

    def setup(self, ctx: BenchContext) -> None:
        pass

    def invoke(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> dict[str, Any]:
        """The graph's full output for one question (the graph's defaults: max_steps 10, max_cycles 1)."""
        from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph

        builder = create_r3cycle_graph(ctx.kg, model=model, reflection=self.reflection, **reuse_options(ctx))
        return builder.compile(store=ctx.store).invoke({"question": q.question})

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = self.invoke(ctx, q, model)
        attempts = out["attempts"] or [{"outcome": "reused", "steps": []}]   # reuse: answered without a walk
        extra = {"attempts": len(out["attempts"]), "first_attempt_halted": float(attempts[0]["outcome"] == "halted"),
                 "max_prompt_tokens": out["usage"].get("max_prompt_tokens", 0),
                 "steps": sum(len(a["steps"]) for a in attempts)}
        if self.reflection:
            extra["first_attempt_verified"] = float(attempts[0]["outcome"] == "correct")
        return MethodResult(retrieved_ids=None, answer=out["answer"], usage=out["usage"],
                            retrieved_count=len(out["evidence"]), extra=extra)

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        return NoisyOracle(q, float(ctx.options.get("noise") or 0.0), int(ctx.options.get("seed") or 0))


# the registry's presets: Graph-CoT is R3-Cycle with its preset's reflection switch
ADAPTERS = [GraphQAAdapter(name, reflection=bool(METHODS[name].preset.get("reflection", True)))
            for name in ("graphcot", "r3cycle")]


# ------------------------------------------------------------------------------------ own comparison


def compare(noises: list[float], n: int, seed: int = 0, embeddings: str = "hash") -> list[dict[str, Any]]:
    """Graph-CoT vs R3-Cycle with the noisy oracle: one row per (noise, method)."""
    import tempfile
    from pathlib import Path

    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.testing import ScriptedChatModel

    rows = []
    questions = ADAPTERS[0].load_questions(DATASET, n, seed)
    kg = KnowledgeGraph.in_memory(name="graphqa", embeddings=embeddings)
    build_ctx = BenchContext(kg=kg, store=None, checkpointer=None, decider="oracle", dataset=DATASET,
                             workdir=Path(tempfile.gettempdir()), options={"seed": seed})
    ADAPTERS[0].build_kg(build_ctx, questions)
    for noise in noises:
        firsts: dict[str, list[bool]] = {}
        for adapter in ADAPTERS:
            ctx = BenchContext(kg=kg, store=InMemoryStore(), checkpointer=None, decider="oracle", dataset=DATASET,
                               workdir=Path(tempfile.gettempdir()), options={"seed": seed, "noise": noise})
            right, first_right, calls, prompt, maxp, halts = [], [], [], [], [], []
            for q in questions:
                model = ScriptedChatModel(responder=adapter.oracle(ctx, q))
                blind = BenchQuestion(q.id, q.question, "", [], [], {})
                out = adapter.invoke(ctx, blind, model)
                right.append(normalize_answer(out["answer"]) == normalize_answer(q.answer))
                first = out["attempts"][0]["answer"] or ""
                first_right.append(normalize_answer(first) == normalize_answer(q.answer))
                calls.append(out["usage"]["llm_calls"])
                prompt.append(out["usage"]["prompt_tokens"])
                maxp.append(out["usage"]["max_prompt_tokens"])
                halts.append(out["attempts"][0]["outcome"] == "halted")
            firsts[adapter.name] = first_right
            failures = [i for i, ok in enumerate(first_right) if not ok]
            recovered = sum(right[i] for i in failures)
            rows.append({"noise": noise, "method": adapter.name, "questions": len(questions),
                         "accuracy": sum(right) / len(right), "first_attempt_accuracy": sum(first_right) / len(right),
                         "first_attempt_failures": len(failures), "recovered": recovered,
                         "recovery_rate": recovered / len(failures) if failures else None,
                         "first_attempt_halts": int(sum(halts)),
                         "llm_calls_per_query": sum(calls) / len(calls),
                         "prompt_tokens_per_query": sum(prompt) / len(prompt),
                         "longest_prompt_tokens": max(maxp), "mean_longest_prompt_tokens": sum(maxp) / len(maxp)})
        assert firsts["graphcot"] == firsts["r3cycle"], "paired first attempts diverged"
        base, r3 = rows[-2], rows[-1]
        for row in (base, r3):
            row["longest_vs_graphcot"] = row["longest_prompt_tokens"] / base["longest_prompt_tokens"]
            row["mean_longest_vs_graphcot"] = row["mean_longest_prompt_tokens"] / base["mean_longest_prompt_tokens"]
    kg.close()
    return rows


def _main() -> None:
    import argparse
    import json

    from benchlib.metrics import markdown_table

    ap = argparse.ArgumentParser(description="Graph-CoT vs R3-Cycle under a noisy oracle agent (graph-qa)")
    ap.add_argument("--questions", type=int, default=90)
    ap.add_argument("--noise", default="0.1,0.2,0.3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embeddings", default="hash")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = compare([float(x) for x in args.noise.split(",")], args.questions, args.seed, args.embeddings)
    cols = ["noise", "method", "accuracy", "first_attempt_accuracy", "first_attempt_failures", "recovered",
            "recovery_rate", "first_attempt_halts", "llm_calls_per_query", "prompt_tokens_per_query",
            "longest_prompt_tokens", "longest_vs_graphcot", "mean_longest_prompt_tokens", "mean_longest_vs_graphcot"]
    print(markdown_table(rows, cols))
    if args.json:
        from pathlib import Path

        Path(args.json).write_text(json.dumps({"results": rows}, indent=1))


if __name__ == "__main__":
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LANGSMITH_TRACING", "false")
    _main()
