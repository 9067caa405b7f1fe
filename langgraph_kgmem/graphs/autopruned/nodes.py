"""AutoPrunedRetriever's nodes: module-level functions of ``(state, runtime)``.

What a node needs besides the state comes in two parts: ``deps`` (:class:`~.deps.AutoprunedDeps`:
the KG, the store, the build's model and options, and the shared codebook cache; bound by the
factory) and the run's context (``runtime.context``: per-run options on top of the build's, see
:meth:`~langgraph_kgmem.graphs.spec.MethodOptions.for_run`).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal, Sequence

from langgraph.graph import END
from langgraph.runtime import Runtime

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.answering import offline_answer, path_names
from langgraph_kgmem.graphs.autopruned.codebook import CHANNELS, cite_passages
from langgraph_kgmem.graphs.autopruned.deps import AutoprunedDeps, record_size
from langgraph_kgmem.graphs.autopruned.options import AutoprunedOptions
from langgraph_kgmem.graphs.autopruned.packing import (channel_triples, cheapest_encoding, encode_knowledge,
                                                       evidence_passages, packed_evidence, reused_runs, sentence_block,
                                                       shown_edges)
from langgraph_kgmem.graphs.autopruned.prompts import answer_prompt
from langgraph_kgmem.graphs.autopruned.schemas import (CHANNEL_SECTION, METHOD, NO_ANSWER, SELECTION_MODES,
                                                       AutoPrunedState)
from langgraph_kgmem.graphs.autopruned.scoring import (cover_order, default_selection_policy, fine_confidence,
                                                       fuse_dense, run_passages, segment_max, stacked_fine_scores,
                                                       unique_runs)
from langgraph_kgmem.graphs.autopruned.sentences import fact_sentences, ranked_sentences
from langgraph_kgmem.graphs.common import (check_question, dense_passages, emit_progress, require,
                                           run_model)
from langgraph_kgmem.graphs.reuse import same_evidence_answer
from langgraph_kgmem.graphs.runs import finish_run
from langgraph_kgmem.graphs.spec import options_of
from langgraph_kgmem.llm import count_tokens, fresh_usage, generate, is_offline, model_label
from langgraph_kgmem.memory.provenance import provenance_for
from langgraph_kgmem.memory import resolve_store
from langgraph_kgmem.memory.experience import ExperienceMemory
from langgraph_kgmem.ranking import best_first, fusion_depth, trust_share

GROUNDED_CREDIT = 0.5   # a grounded answer credits its cited passages as an agent's feedback does
def sync_facts(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
               *, deps: AutoprunedDeps) -> dict[str, Any]:
    """Index the KG documents not yet in the codebook into fact runs (incremental; once per KG
    version and tenant scope), and start the run's usage record."""
    check_question(state)
    opts = options_of(runtime, deps.options)   # a bad per-run option is refused here, before any work
    kg = deps.kg
    store = require("AutoPrunedRetriever", runtime=runtime, store=deps.store, needs_store=True)
    scope = deps.scope()     # a run without the tenant value it needs fails here, before any work
    with deps.lock:          # the codebook in hand is the stored one (book() reloads a newer save and
        deps.book(scope)     # forgets the sync) and was synced with this KG version: no store lock to take
        synced = deps.synced(store, scope)
    if not synced:
        with deps.writing(scope) as (store, book):  # concurrent runs (threads, processes) share the codebook
            if not deps.synced(store, scope):
                emit_progress({"event": "codebook_sync", "status": "start"})
                done = book.sync_facts(kg, phrase_facts=opts.phrase_facts, segment_opts={"tau": opts.tau_run})
                if done["documents"]:
                    book.save(store)
                deps.mark_synced(store, scope)
                emit_progress({"event": "codebook_sync", "status": "done", **done})
    return {"method": METHOD, "model": model_label(run_model(runtime, deps.model)), "usage": fresh_usage()}


def encode_question(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
                    *, deps: AutoprunedDeps) -> dict[str, Any]:
    """The question as triples (an LLM decision, or the offline extractor and phrase parser) and
    their codebook edge ids."""
    opts = options_of(runtime, deps.options)
    question = state["question"].strip()
    # the LLM: outside the lock
    triples, usage = deps.extract(question, "question", run_model(runtime, deps.model), opts.extraction,
                                  opts.prompt("triples"), memo=opts.reuse)
    with deps.lock:
        _, book = deps.book(deps.scope(), check=False)
        # triples whose symbols the codebook refuses are skipped: the phrase node stands in
        edges = (book.indexify(triples) or book.indexify(deps.phrase_nodes(question))
                 or book.indexify([["?", "is", "?"]]))  # nothing readable at all: the bare unknown
        return {"query_triples": [list(book.triple(e)) for e in edges], "query_edges": edges,
                "codebook_revision": book.revision, "usage": usage}


def retrieve_coarse(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
                    *, deps: AutoprunedDeps) -> dict[str, Any]:
    """Coarse ranking of every run: ``w_ent`` × the best entity cosine + ``w_rel`` × the best
    relation cosine with the question's; the top ``coarse_k``."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    with deps.lock:  # concurrent runs of one app share the codebook
        _, book = deps.book(deps.scope(), check=False)
        idx = book.run_index(kg)
        if not idx["ids"]:
            return {"coarse": []}
        hrt = [book.edge_hrt[book.resolve_edge(e)] for e in deps.query_edges(book, state)]
        q_ents = list(dict.fromkeys(book.resolve_entity(x) for h, _, t in hrt for x in (h, t)))
        q_rels = list(dict.fromkeys(r for _, r, _ in hrt))
        rv = book.relation_vectors(kg)
        ent_sim = book.entity_similarities(kg, q_ents).max(axis=0)
        rel_sim = (rv[q_rels] @ rv.T).max(axis=0)
        score = (opts.w_ent * segment_max(ent_sim[idx["ent"]], idx["ent_ptr"])
                 + opts.w_rel * segment_max(rel_sim[idx["rel"]], idx["rel_ptr"]))
        top = best_first(score, opts.coarse_k)
        return {"coarse": [{"run": idx["ids"][i], "score": round(float(score[i]), 6)} for i in top.tolist()]}


# adaptive fusion reads agreement on the passages an answer prompt of five passages holds, as the
# benchmark's Recall@5 does; deeper, the fine ranking and vector search share most passages anyway
AGREEMENT_DEPTH = 5


def signals_passages(scored: list[tuple[float, int, Any]], book: Any, k: int) -> list[str]:
    """The fine ranking's first ``k`` passages (its fact runs' passages, in run order): what adaptive
    fusion records as the method's own ranking."""
    order = dict.fromkeys(p for _, _, run in scored if run.channel != "Q" for p in run_passages(book, run))
    return list(order)[:k]


def rerank_fine(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
                *, deps: AutoprunedDeps) -> dict[str, Any]:
    """Fine ranking (line-level similarity, :func:`~.scoring.stacked_fine_scores`) of the coarse runs
    and, with ``dense_fusion``, the fact runs of vector search's top passages; the top ``fine_m``
    fact and answer runs across channels (a question run brings its stored answers)."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    with deps.lock:  # concurrent runs of one app share the codebook
        _, book = deps.book(deps.scope(), check=False)
        if not state.get("coarse"):
            return {"candidates": []}
        q = book.line_vectors(kg, deps.query_edges(book, state))
        runs = [book.runs[c["run"]] for c in state["coarse"]]
        dense = (dense_passages(kg, state["question"], fusion_depth(opts.fine_m),
                                deps.passage_scores(state["question"])) if opts.dense_fusion else [])
        if dense:  # dense seeding: the fact runs of the dense top-fine_m passages compete too
            have = {r.id for r in runs}
            by_chunk = deps.chunk_runs(book)
            for rid in (r for c in dense[:opts.fine_m] for r in by_chunk.get(c, [])):
                if rid not in have and rid in book.runs:
                    have.add(rid)
                    runs.append(book.runs[rid])
        values = stacked_fine_scores(q, *book.stacked_lines(kg, runs), opts.scoring)
        scored = sorted(((float(v), run.seq, run) for v, run in zip(values.tolist(), runs)),
                        key=lambda x: (-x[0], x[1]))
        if opts.cover_weight > 0:
            scored = cover_order(book, kg, scored, deps.query_edges(book, state), opts.cover_weight,
                                  2 * opts.fine_m)
        adaptive, fusion = None, {}
        if dense and opts.fusion == "adaptive":
            conf, signals = fine_confidence(scored, dense, partial(run_passages, book), AGREEMENT_DEPTH)
            adaptive = {"confidence": conf, "weak": opts.fusion_weak, "strong": opts.fusion_strong, "top": opts.fine_m}
            fusion = {"confidence": round(conf, 6), "share": trust_share(conf, weak=opts.fusion_weak,
                                                                         strong=opts.fusion_strong, k=opts.fine_m),
                      **signals, "own": signals_passages(scored, book, 2 * opts.fine_m),
                      "dense": list(dense[:2 * opts.fine_m])}
        fused = fuse_dense(scored, dense, partial(run_passages, book), adaptive=adaptive) if dense else {}
        if fused:
            scored = sorted(scored, key=lambda x: -round(fused.get(x[2].id, 0.0), 12))  # stable: fine order on ties
        # the top fine_m fact and answer runs; a question run ranked among them is the key to its
        # stored answers: it brings them in (they count toward fine_m), itself for free
        out: list[dict[str, Any]] = []
        have: set[str] = set()
        counted = 0
        for s, _, r in scored:
            if counted >= opts.fine_m:
                break
            if r.id in have or (r.channel == "A" and not deps.servable(book, r)):
                continue   # a stored answer no longer (or never) grounded is not shown
            have.add(r.id)
            rank = {"fused": round(fused.get(r.id, 0.0), 8)} if fused else {}
            out.append({"run": r.id, "channel": r.channel, "score": round(s, 6), **rank})
            if r.channel != "Q":
                counted += 1
                continue
            for a in r.links:
                if (counted < opts.fine_m and a in book.runs and a not in have
                        and deps.servable(book, book.runs[a])):
                    have.add(a)
                    out.append({"run": a, "channel": "A", "score": round(s, 6), "via": r.id, **rank})
                    counted += 1
        return {"candidates": out, **({"fusion": fusion} if fusion else {})}


def select_runs(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
                *, deps: AutoprunedDeps) -> dict[str, Any]:
    """Per channel, the selection policy's choice: all runs, one per cluster (``unique``) or none."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    with deps.lock:  # concurrent runs of one app share the codebook
        _, book = deps.book(deps.scope(), check=False)
        cands = state.get("candidates", [])
        by_channel = {c: [x for x in cands if x["channel"] == c] for c in CHANNELS}
        features = {"question_tokens": count_tokens(state["question"]), "query_lines": len(state["query_edges"]),
                    "channel_sizes": {c: len(v) for c, v in by_channel.items()},
                    "top_score": {c: (v[0]["score"] if v else 0.0) for c, v in by_channel.items()},
                    "max_prompt_tokens": opts.max_prompt_tokens}
        selection: dict[str, str] = {}
        selected: dict[str, list[str]] = {}
        for c in CHANNELS:
            mode = (opts.selection_policy or default_selection_policy)(c, list(by_channel[c]), features)
            if mode not in SELECTION_MODES:
                raise KgmemInputError(
                    f"selection_policy returned {mode!r} for channel {c!r}; it must return one of "
                    f"{', '.join(SELECTION_MODES)}")
            selection[c] = mode
            runs = [x["run"] for x in by_channel[c]]
            if mode == "none":
                runs = []
            elif mode == "unique":
                runs = unique_runs(book, kg, runs, opts.unique_threshold)
            selected[c] = runs
        return {"selection": selection, "selected_runs": selected}  # reused: after packing (runs may drop)


def pack_prompt(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
                *, deps: AutoprunedDeps) -> dict[str, Any]:
    """The selected runs packed in the cheapest encoding (or as sentences, ``show="sentences"``),
    the weakest dropped until ``max_prompt_tokens`` fits; the evidence items."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    with deps.lock:  # concurrent runs of one app share the codebook
        _, book = deps.book(deps.scope(), check=False)
        selected = {c: list(v) for c, v in state.get("selected_runs", {}).items()}
        # runs are ordered (evidence) and dropped (budget) by their fused rank score when fused
        scores = {x["run"]: x.get("fused", x["score"]) for x in state.get("candidates", [])}
        q_edges = deps.query_edges(book, state) if state.get("query_edges") else []
        shown = shown_edges(book, kg, selected, q_edges, opts.edges_per_run)

        sentences = opts.show == "sentences"

        made: dict[tuple[str, ...], list[dict[str, Any]]] = {}   # packing and evidence share one ranking

        def fact_groups(runs: Sequence[str]) -> list[dict[str, Any]]:
            key = tuple(runs)
            if key not in made:
                made[key] = (fact_sentences(book, kg, runs, shown, deps.sentence_cache())
                             if opts.sentence_budget is None else
                             ranked_sentences(book, kg, state["question"], runs, shown, deps.sentence_cache(),
                                               deps.sentence_vectors(), opts.sentence_budget,
                                               opts.sentence_rankings, opts.sentence_bridges,
                                               opts.sentence_dense, deps.sentence_words(),
                                               opts.relevance_weights,
                                               partial(deps.passage_scores, state["question"]),
                                               opts.sentence_cover, opts.sentence_dense_places,
                                               opts.sentence_answer_cover, opts.sentence_max_tokens,
                                               opts.sentence_clip))
            return made[key]

        def pack(drop: set[str]) -> tuple[dict[str, list[str]], dict[str, str], str, dict[str, int]]:
            kept = {c: [r for r in rs if r not in drop] for c, rs in selected.items()}
            if sentences:  # fact runs as their source sentences; stored Q/A runs as word triples
                groups = fact_groups(kept.get("F", []))
                rest = {c: [e for r in kept.get(c, []) for e in shown[r]] for c in CHANNELS if c != "F"}
                parts = ([f"[{CHANNEL_SECTION['F']}]", sentence_block(groups)] if groups else []) + \
                    [encode_knowledge(channel_triples(book, rest))["words"]]
                text = "\n".join(x for x in parts if x)
                return kept, {"sentences": text}, "sentences", {"sentences": count_tokens(text)}
            channels = {c: [e for r in kept.get(c, []) for e in shown[r]] for c in CHANNELS}
            encoded = encode_knowledge(channel_triples(book, channels))
            return (kept, encoded, *cheapest_encoding(encoded, opts.encodings))

        kept, encoded, best, tokens = pack(set())
        budget = opts.max_prompt_tokens
        if budget is not None and tokens[best] > budget:
            # drop the weakest runs (lowest score; on a tie, the one its channel selected later,
            # then the newest) until the codebook fits, keeping at least one; tokens only grow
            # with runs, so the fewest drops are found by bisection
            weakest = [r for *_, r in sorted((scores.get(r, 0.0), -i, -book.runs[r].seq, r)
                                              for rs in selected.values() for i, r in enumerate(rs))]
            lo, hi = 1, len(weakest) - 1          # runs to drop; hi leaves the strongest alone
            result = pack(set(weakest[:hi]))      # kept even if one run alone is over budget
            while lo < hi:
                mid = (lo + hi) // 2
                trial = pack(set(weakest[:mid]))
                if trial[3][trial[2]] <= budget:
                    hi, result = mid, trial
                else:
                    lo = mid + 1
            kept, encoded, best, tokens = result
        selected = kept
        evidence = packed_evidence(book, kg, selected, scores, shown)
        if sentences:  # the facts the reader sees are the sentences, one item per passage chunk
            groups = fact_groups(selected.get("F", []))
            # a passage vector search added (sentence_dense) has no selected run: its own first one
            run_of = {g["chunk"]: (g["runs"] or deps.chunk_runs(book).get(g["chunk"], []) or [None])[0]
                      for g in groups}
            # ranked sentences place their passages by their best sentence (score 1 / place); the
            # shown edges' sentences keep their runs' scores
            evidence = [e for e in evidence if e["channel"] != "F"] + [
                {"id": g["chunk"], "kind": "sentences", "text": " ".join(g["sentences"]), "run": run_of[g["chunk"]],
                 "channel": "F", "chunks": [g["chunk"]],
                 "score": round(1.0 / (g["place"] + 1) if "place" in g
                                else float(scores.get(run_of[g["chunk"]], 0.0)), 6),
                 **({"title": g["title"]} if g["title"] else {})} for g in groups]
            evidence.sort(key=lambda e: -e["score"])
        reused = reused_runs(book, selected, state.get("candidates", []))
        return {"packed_prompt": encoded[best], "encoding": best, "encoding_tokens": tokens,
                "prompt_tokens_packed": tokens[best], "selected_runs": selected, "reused": reused,
                "shown_edges": {r: shown[r] for rs in selected.values() for r in rs}, "evidence": evidence}


def offline_span(kg: Any, question: str, facts: Sequence[dict[str, Any]]) -> str:
    """The offline answer (:func:`~langgraph_kgmem.graphs.answering.offline_answer`) over the
    passages the selected facts came from and, after them, the facts; the facts' entities, in
    fact order, are the method's path."""
    if not facts:
        return "no answer"
    edges = [kg.edge(f["id"]) for f in facts]
    ends = [n for e in edges if e is not None for n in (e.src, e.dst)]
    # the passages read first: a fact line is a clause cut out of them, its answer span often cut off
    evidence = [{"id": cid, "text": text} for cid, text in evidence_passages(kg, facts)] + list(facts)
    return offline_answer(question, evidence, path_names(kg, ends)).answer


def answer(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
           *, deps: AutoprunedDeps) -> dict[str, Any]:
    """A stored answer to the same question by the same decider, still grounded, replayed;
    otherwise the LLM over the packed codebook (offline: :func:`offline_span`).
    The run gets its ``run_id`` and record for feedback here."""
    out = _answer(state, runtime, deps=deps)
    opts = options_of(runtime, deps.options)
    try:
        run = finish_run(deps.kg, method=METHOD, question=state["question"], evidence=state.get("evidence", []),
                         answer=out.get("answer"), store=deps.store, scope=opts.memory_scope)
    except BaseException:
        # the store refused this run's record: the codebook in hand holds symbols this run added
        # and never saved, which every later run would try (and fail) to save again
        deps.forget(resolve_store(deps.store), deps.scope())
        raise
    return {**out, **run}


def _answer(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions], *, deps: AutoprunedDeps) -> dict[str, Any]:
    """The answer step itself (see :func:`answer`)."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    model = run_model(runtime, deps.model)
    decider = model_label(model)
    evidence = state.get("evidence", [])
    with deps.lock:
        _, book = deps.book(deps.scope(), check=False)
        replayed = deps.replay(book, state["question"], decider) if opts.replay else None
    if replayed is not None:   # the same question, answered by this decider, still grounded: no LLM call
        return {"answer": replayed["answer"], "answer_by": decider, "replayed_answer": replayed}
    # the KG's facts only: a stored answer belongs to the question it answered (a line of an
    # answer run that is a KG relation edge is that fact, as a fact run would show it; shown as
    # sentences, the facts are the passages' own words, and such a line is not one of them)
    sentences = opts.show == "sentences"
    facts = [e for e in evidence if e.get("channel", "F") == "F" or (not sentences and kg.edge(e["id"]) is not None)]
    offline = partial(offline_span, kg, state["question"], facts)
    if is_offline(model):
        return {"answer": offline(), "answer_by": decider, "replayed_answer": None}
    again = same_evidence_answer(kg, deps.store, opts.memory_scope, state["question"], method=METHOD,
                                 evidence=evidence) if opts.reuse else None
    if again is not None:   # its own earlier run read exactly this evidence: no LLM call
        return {"answer": again["answer"], "answer_by": f"reused run ({decider})",
                "replayed_answer": {**again, "source": "reuse"}}
    prompt = answer_prompt(state["question"], state.get("packed_prompt", ""), state.get("encoding", "words"),
                           {"answer": opts.prompt("answer"), "sentences": opts.prompt("sentences")})
    text, usage = generate(model, prompt, step="answer", context={
        "question": state["question"], "evidence_ids": [e["id"] for e in evidence],
        "evidence_texts": [e["text"] for e in evidence], "run_ids": state.get("selected_runs", {}),
        "encoding": state.get("encoding")},
        fallback=offline)
    # an answer the model did not give is not the model's: it never replays as one
    by = f"extractive fallback ({decider})" if usage.get("fallbacks") else decider
    return {"answer": text, "usage": usage, "answer_by": by, "replayed_answer": None}


def memorize(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
             *, deps: AutoprunedDeps) -> dict[str, Any]:
    """Store the question's run and, when grounded in the passages it cites, the answer's run."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    ans = (state.get("answer") or "").strip()
    if state.get("replayed_answer"):   # nothing new: the answer is the stored one
        with deps.lock:
            _, book = deps.book(deps.scope(), check=False)
            return {"memorized": [], "answer_memory": "replayed", "codebook_size": book.size()}
    answered = bool(ans) and not NO_ANSWER.match(ans)
    # the grounding rule: every content word of the answer in the passages it cites
    cited = cite_passages(ans, evidence_passages(kg, state.get("evidence", []))) if answered else None
    grounded = cited is not None
    status = ("off" if not opts.memorize else "stored" if grounded
              else "not grounded" if answered else "unanswered")
    # the question is a retrieval atom whatever its answer; only a grounded answer is kept
    wanted = opts.memorize and (answered or opts.memorize_unanswered)
    # the LLM extraction runs outside the lock; the codebook updates below hold it
    trips, usage = (deps.extract(ans, "answer", run_model(runtime, deps.model), opts.extraction,
                                   opts.prompt("triples"), memo=opts.reuse)
                    if wanted and grounded else ([], {}))
    by = state.get("answer_by") or model_label(run_model(runtime, deps.model))
    if grounded and opts.experience and cited:   # the passages a grounded answer cites earn shared credit
        ExperienceMemory(resolve_store(deps.store), kg.name, deps.scope(), kg=kg).add(cited, (), kg.embed_query(state["question"]),
                                                                      weight=GROUNDED_CREDIT)
    new: list[str] = []
    linked = False
    a_edges: list[int] = []
    with deps.writing(deps.scope()) as (store, book):
        if wanted:
            # one run per question (question_key) and per answer: they are reused whole, by id
            q_edges = [book.resolve_edge(e) for e in deps.query_edges(book, state)]
            q_runs = book.question_runs(state["question"])[-1:]
            if not q_runs and q_edges:
                q_runs = [book.add_run("Q", q_edges, text=state["question"])]
                new.append(q_runs[0].id)
            if grounded:
                if not trips:  # a short answer ("Warsaw") completes the question's triples
                    trips = [[*book.triple(e)[:2], ans] for e in q_edges[:2]]
                a_edges = book.indexify(trips)  # empty when the codebook refused every symbol
            if grounded and a_edges:
                # one answer run per answer, grounds and decider: its provenance is what it says
                prov = provenance_for(deps.kg, cited)
                same = [r for r in book.runs_of("A") if r.edges == a_edges and r.text == ans and r.by == by
                        and r.chunks == cited and r.provenance == prov]
                run = same[0] if same else book.add_run("A", a_edges, chunks=cited, text=ans, by=by, provenance=prov)
                if not same:
                    new.append(run.id)
                for q in q_runs:
                    if run.id not in q.links:
                        q.links.append(run.id)
                        run.links.append(q.id)
                        book.touch_run(q)
                        book.touch_run(run)
                        linked = True
        if new or linked:  # a question already stored with the same answer changes nothing
            record_size(book)
            book.save(store)
        return {"memorized": new, "usage": usage, "codebook_size": book.size(), "answer_memory": status}


def consolidate(state: AutoPrunedState, runtime: Runtime[AutoprunedOptions],
                *, deps: AutoprunedDeps) -> dict[str, Any]:
    """Merge alias entities (layer 1) and, over ``entity_budget``, k-means medoids (layer 2)."""
    opts = options_of(runtime, deps.options)
    kg = deps.kg
    with deps.writing(deps.scope()) as (store, book):  # concurrent runs (threads, processes) share the codebook
        report = book.consolidate(kg, alias_threshold=opts.alias_threshold, entity_budget=opts.entity_budget,
                                  layer2_min_cos=opts.layer2_min_cos)
        if any(report[k] for k in ("aliases_layer1", "merged_layer2", "edges_dropped", "runs_dropped")):
            record_size(book)   # nothing merged or dropped: nothing to save (memorize saved its runs)
            book.save(store)
        return {"consolidation": report, "codebook_size": book.size()}


def route_after_memorize(state: AutoPrunedState) -> Literal["consolidate", "__end__"]:
    """Consolidate only after new runs: only they bring new symbols."""
    return "consolidate" if state.get("memorized") else END
