"""CatRAG's and HippoRAG 2's per-tenant calibration (:mod:`langgraph_kgmem.memory.calibration`):
the grid of vetted ranking settings a tenant's feedback may choose among, how the fed-back
questions are ranked again under each, and how a run reads (or lazily refits) its tenant's choice.

The fit ranks with the offline policies (fact filter, anchoring, edge scores) whatever the
graph's model, so it costs no LLM call; with a model the calibration is therefore learnt on the
offline approximation of the pipeline. Experience and reuse are off while ranking, so the fit sees
the ranking itself, not the credit the same feedback left. Settings that differ only in the PageRank
step share the steps before it (one fact retrieval and filter per question and pre-PPR setting).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from langgraph_kgmem.graphs.catrag import nodes
from langgraph_kgmem.memory import memory_scope
from langgraph_kgmem.memory.calibration import Calibration

if TYPE_CHECKING:
    from langgraph_kgmem.graphs.catrag.options import CatragOptions

# The settings a tenant's feedback may pick, the shipped default first. Chosen on
# hotpotqa-train100 (hashing embedding, offline) with HotpotQA dev and musique-train100 held out
# (docs/memory.md, "Calibration").
_SHARED: tuple[Mapping[str, Any], ...] = (
    {}, {"damping": 0.7}, {"damping": 0.3}, {"passage_weight": 0.0}, {"passage_weight": 0.2}, {"top_facts": 10},
    {"top_facts": 3}, {"dense_fusion": False})
GRID: Mapping[str, tuple[Mapping[str, Any], ...]] = {
    "catrag": _SHARED + ({"epsilon": 0.05}, {"epsilon": 0.8}, {"beta": 0.0}, {"beta": 8.0}, {"n_seed": 2},
                         {"n_seed": 10}),
    "hipporag2": _SHARED,
}
# options read only by the PageRank step and the ranking after it
PPR_STEP = frozenset({"passage_weight", "damping", "dense_fusion", "fusion", "fusion_weak", "fusion_strong",
                      "ppr_method", "ppr_eps"})
# what the fit's rankings turn off: the offline policies, and the memories fed by the same feedback
FIT_CONTEXT: Mapping[str, Any] = {"model": "offline", "experience": False, "reuse": False, "calibration": False}


def rank_under(deps: "nodes.CatragDeps", question: str, settings: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The ranked passage ids (``rank_depth`` deep) of ``question`` under each of ``settings``
    (options on top of the graph's), offline, without experience or reuse, writing nothing."""
    offline = nodes.CatragDeps(kg=deps.kg, model="offline", options=deps.options.model_copy(update={"answer": True}),
                               store=deps.store)
    opts = deps.options
    chain = [nodes.filter_facts]
    chain += [nodes.anchor_entities] if opts.anchoring else []
    chain += [nodes.weight_edges] if opts.dynamic_weighting else []
    chain += [nodes.boost_key_facts] if opts.key_fact_boost else []
    before: dict[str, dict[str, Any]] = {}
    out = []
    for setting in settings:
        runtime = SimpleNamespace(context={**FIT_CONTEXT, **setting})
        pre = {k: v for k, v in setting.items() if k not in PPR_STEP}
        key = repr(sorted(pre.items()))
        if key not in before:
            state: dict[str, Any] = {"question": question}
            state.update(nodes.retrieve_facts(state, runtime, deps=offline))   # type: ignore[arg-type]
            for step in chain if state.get("candidates") else chain[:1]:
                state.update(step(state, runtime, deps=offline))   # type: ignore[arg-type]
            before[key] = state
        state = before[key]
        last = nodes.run_ppr if state.get("facts") else nodes.rank_passages
        ranked = last(dict(state), runtime, deps=offline)   # type: ignore[arg-type]
        out.append([p["id"] for p in ranked["passages"]])
    return out


def calibrated(deps: "nodes.CatragDeps", opts: "CatragOptions", store: Any) -> dict[str, Any]:
    """The run's calibration: ``{"params": the tenant's setting, "setting", "questions",
    "fitted": whether this run fitted it}``, fitting first when due
    (:meth:`~langgraph_kgmem.memory.calibration.Calibration.due`); ``{}`` without a store or a
    grid for the method."""
    grid = GRID.get(opts.method)
    if store is None or not grid:
        return {}
    cal = Calibration(store, deps.kg.name, memory_scope(opts.memory_scope), kg=deps.kg)
    record, ledger = cal.read(opts.method)
    fitted = False
    if Calibration.due(record, ledger):
        record = cal.fit(opts.method, grid, lambda q, s: rank_under(deps, q, s), ledger=ledger, previous=record)
        fitted = True
    if record is None:
        return {}
    params = dict(record.get("params") or {})
    if params not in [dict(g) for g in grid]:   # only a vetted setting is ever applied (a stale or altered record: none)
        params = {}
    return {"params": params, "setting": int(record.get("setting", 0)), "questions": int(record.get("questions", 0)),
            "fitted": fitted}
