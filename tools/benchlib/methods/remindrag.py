"""Adapter ``remindrag``: ReMindRAG on per-question KGs, memory kept across passes.

Each question's KG gets the harness' persisted store (``kg.persistence()`` in the KG copy), so a
pass replays the edge memories the earlier passes wrote — also in a fresh process
(``--fresh-process``). The graph is compiled without a checkpointer: the memory that matters
lives in the store, and per-step checkpoints would only add SQLite writes to the timing.

Oracle decider (a simulated competent LLM; gold labels are read only here, at decision points):
- ``check_sufficiency``: yes iff the evidence holds every gold passage of the KG;
- ``traverse_step``: the move whose target is fewest hops from a gold passage not yet collected
  (forward when a neighbour of the current node is at least as close as any other frontier node,
  else backward to the visited node with the closest unexplored neighbour);
- ``mark_useful``: the gold passages among the listed items;
- ``answer``: :func:`benchlib.api.oracle_answer` on the evidence shown.

With ``--noise p`` (:class:`benchlib.api.Mistakes`) each traversal move is, with probability p, a
move drawn at random from every valid one (forward and backward), and each sufficiency verdict is
wrong: across passes this shows whether the edge memory entrenches wrong paths or its penalty
corrects them.

Extra metrics per question: ``hops`` (moves, backward included), ``replayed_nodes``,
``replay_only`` (1 when replay alone was judged sufficient), ``enhanced``/``penalised`` edge
counts. (The harness reports ``core_ms_median``: wall time minus LLM and embedding time.)

Offline, ``prompt_tokens`` is the would-be answer prompt only (``graphs.common.ANSWER_PROMPT`` over
the evidence, ``api.with_offline_answer_prompt``): the offline heuristics make the sufficiency,
traversal and marking decisions without building their prompts, so those cannot be counted
without an LLM.
"""

from __future__ import annotations

from typing import Any

from benchlib.curves import reuse_options
from benchlib.api import (BenchContext, BenchQuestion, MethodResult, Responder, answer_prompt, fusion_extra,
                          gold_chunk_ids, mistakes, oracle_answer, reuse_extra, with_offline_answer_prompt)

from langgraph_kgmem.graphs.remindrag import create_remindrag_graph, hop_distances

UNREACHABLE = 10_000


class ReMindRAGAdapter:
    corpus = "per-question"
    datasets = None

    def __init__(self, name: str = "remindrag", *, in_default_run: bool = True, **options: Any) -> None:
        self.name = name
        self.in_default_run = in_default_run
        self.options = options          # create_remindrag_graph options

    def setup(self, ctx: BenchContext) -> None:
        """Compile the graph once per KG (~20-50 ms of LangGraph graph building, a one-time cost)."""
        ctx.cache[f"{self.name}_apps"] = {}
        if ctx.decider in ("offline", "oracle"):
            from langgraph_kgmem.testing import ScriptedChatModel

            probe = "offline" if ctx.decider == "offline" else ScriptedChatModel(responder=lambda m, r: "")
            self._app(ctx, probe)

    def _app(self, ctx: BenchContext, model: Any) -> Any:
        """One compiled graph per KG and decider (compiling costs ~20 ms, a one-time cost in real use).
        The oracle's per-question scripted models are served through one delegating model."""
        from langgraph_kgmem.testing import ScriptedChatModel

        apps = ctx.cache.setdefault(f"{self.name}_apps", {})
        if isinstance(model, ScriptedChatModel) and model.responder is not None:
            slot = ctx.cache.setdefault(f"{self.name}_oracle_slot", {})
            slot["responder"] = model.responder
            key, model = "oracle", apps.get("oracle_model") or ScriptedChatModel(
                responder=lambda messages, request: slot["responder"](messages, request), model_name="oracle-remindrag",
                latency=model.latency)
            apps["oracle_model"] = model
        else:
            key = "offline" if model == "offline" else f"model-{id(model)}"
        app = apps.get(key)
        if app is None:
            app = apps[key] = create_remindrag_graph(ctx.kg, model=model, store=ctx.store, **self.options,
                                                     **reuse_options(ctx)).compile(store=ctx.store)
        return app

    def run(self, ctx: BenchContext, q: BenchQuestion, model: Any) -> MethodResult:
        out = self._app(ctx, model).invoke({"question": q.question})
        evidence = out.get("evidence") or []
        # offline: the answer prompt the graph's answer step would send (decision prompts are not built)
        usage = with_offline_answer_prompt(out.get("usage") or {}, model, lambda: answer_prompt(q.question, evidence))
        ids = [e["id"] for e in evidence]
        updates = out.get("memory_updates") or {}
        return MethodResult(
            retrieved_ids=ids, answer=out.get("answer"), usage=usage,
            retrieved_count=len(evidence),
            extra={"hops": len(out.get("path") or []), "replayed_nodes": len((out.get("replayed") or {}).get("nodes", [])),
                   "replay_only": float(not out.get("path")), "enhanced": int(updates.get("enhanced", 0)),
                   "penalised": int(updates.get("penalised", 0)), **fusion_extra(ctx.kg, out.get("fusion")),
                   **reuse_extra(ctx.kg, out.get("reused"), out.get("usage"))})

    def oracle(self, ctx: BenchContext, q: BenchQuestion) -> Responder:
        kg = ctx.kg
        gold = sorted(i for i in gold_chunk_ids(kg, q) if (n := kg.node(i)) is not None and n.kind == "chunk")
        dists: dict[str, dict[str, int]] = {}
        dice = mistakes(ctx, q, self.name)

        def distance(node: str, missing: list[str]) -> int:
            best = UNREACHABLE
            for g in missing:
                if g not in dists:
                    dists[g] = hop_distances(kg, [g])
                best = min(best, dists[g].get(node, UNREACHABLE))
            return best

        def respond(messages: list[Any], request: Any) -> Any:
            ctx_ = getattr(request, "context", None) or {}
            step = getattr(request, "step", "answer")
            if request is None or request.schema is None:  # the answer
                return oracle_answer(q.answer, list(ctx_.get("evidence_texts") or []))
            have = set(ctx_.get("evidence_ids") or [])
            missing = [g for g in gold if g not in have]
            if step == "check_sufficiency":
                return {"sufficient": (bool(gold) and not missing) != dice.wrong()}
            if step == "traverse_step":
                if dice.wrong():
                    moves = ([("forward", b) for b in ctx_["forward"]]
                             + [("backward", u) for u in ctx_["backward"]])
                    direction, node = dice.rng.choice(moves)
                    return {"direction": direction, "node_id": node}
                fwd = [(distance(b, missing), i, b) for i, b in enumerate(ctx_["forward"])]
                back = [(min(distance(b, missing) for b in ctx_["frontier"][u]), i, u)
                        for i, u in enumerate(ctx_["backward"])]
                if fwd and (not back or min(fwd)[0] <= min(back)[0]):
                    return {"direction": "forward", "node_id": min(fwd)[2]}
                return {"direction": "backward", "node_id": min(back)[2]}
            if step == "mark_useful":
                return {"useful_ids": [c for c in ctx_.get("candidates", []) if c in gold]}
            if step == "decompose":
                return {"sub_questions": [ctx_.get("question") or q.question]}
            raise ValueError(f"remindrag oracle: unknown decision step {step!r}")

        return respond


ADAPTERS = [ReMindRAGAdapter(),
            # the walk's passages alone, in discovery order (no dense fusion): the paper's evidence
            ReMindRAGAdapter("remindrag-nofusion", dense_fusion=False, in_default_run=False),
            # the walk's share of the evidence by its agreement with vector search (the options' thresholds)
            ReMindRAGAdapter("remindrag-adaptive", fusion="adaptive", in_default_run=False)]
