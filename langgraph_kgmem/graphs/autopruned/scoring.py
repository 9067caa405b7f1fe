"""Ranking runs: the fine re-ranking score, coverage re-ordering, fusion with the dense passage
ranking, and run selection (the default policy and one run per cluster of near-duplicates)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from langgraph_kgmem.graphs.autopruned.codebook import Channel, Codebook
from langgraph_kgmem.graphs.autopruned.schemas import FineScoring, SelectionMode
from langgraph_kgmem.ranking import adaptive_fuse, dense_led, overlap_at

def default_selection_policy(channel: Channel, runs: list[dict[str, Any]], features: dict[str, Any]) -> SelectionMode:
    """The fixed default: facts and known answers ``unique`` (one run per cluster of
    near-duplicates), earlier questions ``none`` (a stored question is the key that brings its answers — it
    is reused and reported in ``reused`` — but its own triples add no knowledge to the prompt)."""
    if not runs or channel == "Q":
        return "none"
    return "unique"



def segment_max(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """The maximum of each segment of ``values``; segment i is ``values[ptr[i]:ptr[i + 1]]`` (CSR
    offsets, each segment non-empty)."""
    if len(ptr) <= 1:
        return np.zeros(0)
    return np.maximum.reduceat(values, ptr[:-1])


def fine_score(q: np.ndarray, lines: np.ndarray, cfg: FineScoring) -> float:
    """The fine re-ranking score of one run (``q``: query line vectors, ``lines``: run line vectors)."""
    return float(fine_scores(q, [lines], cfg)[0])


def fine_scores(q: np.ndarray, runs: Sequence[np.ndarray], cfg: FineScoring) -> np.ndarray:
    """Fine scores of many runs at once: one similarity product over all their lines, padded to
    (runs × query lines × longest run). Per run, with S = query lines × run lines:

    mean of the ``top_t`` best entries of S + ``w_cov``·coverage (query lines matched ≥ ``tau_cov``)
    + ``w_many``·soft many-to-many overlap (sigmoid((S − ``tau_pair``)/T), per query line capped at 1)
    + ``w_one``·greedy distinct 1:1 matches ≥ ``tau_pair`` (best remaining pair first, ties by
    position) + ``w_whole``·whole-run cosine of the mean vectors, counted only when the run covers
    something and it reaches ``tau_whole``. All parts are shares of the query lines, so a long
    off-topic run earns nothing for its length.
    """
    lens = np.array([len(r) for r in runs], dtype=np.int64)
    flat = np.concatenate([r for r in runs if len(r)]) if lens.sum() else np.zeros((0, q.shape[1]))
    return stacked_fine_scores(q, flat, lens, cfg)


def stacked_fine_scores(q: np.ndarray, flat: np.ndarray, lens: np.ndarray, cfg: FineScoring) -> np.ndarray:
    """:func:`fine_scores` of runs whose line vectors come stacked: ``flat`` holds run after run,
    ``lens[i]`` lines of run ``i`` (:meth:`Codebook.stacked_lines` gathers them in one step)."""
    n, nq = len(lens), q.shape[0]
    if n == 0 or nq == 0:
        return np.zeros(n)
    width = max(1, int(lens.max()))
    valid = np.arange(width)[None, :] < lens[:, None]                        # runs × width
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    cols = np.where(valid, starts[:, None] + np.arange(width)[None, :], 0)
    if not len(flat):
        flat = np.zeros((1, q.shape[1]))
    sims = (q @ flat.T)[:, cols].transpose(1, 0, 2)                            # runs × nq × width
    mask = np.broadcast_to(valid[:, None, :], sims.shape)
    masked = np.where(mask, sims, -np.inf)
    # mean of the t best entries (all of them when the run has fewer)
    flat_masked = masked.reshape(n, -1)
    t = min(max(1, cfg.top_t), flat_masked.shape[1])
    # the t largest per run (order does not matter for their sum): a partition, not a full sort
    best_t = -np.partition(-flat_masked, t - 1, axis=1)[:, :t] if t < flat_masked.shape[1] else flat_masked
    count = np.minimum(max(1, cfg.top_t), np.maximum(1, lens * nq))
    top = np.where(np.isfinite(best_t), best_t, 0.0).sum(axis=1) / count
    coverage = (masked.max(axis=2) >= cfg.tau_cov).mean(axis=1)
    soft = np.where(mask, 1.0 / (1.0 + np.exp(-(sims - cfg.tau_pair) / cfg.temperature)), 0.0)
    many = np.minimum(1.0, soft.sum(axis=2)).mean(axis=1)
    # greedy 1:1: repeatedly take each run's best remaining pair, then retire its row and column
    work = masked.copy()
    ones = np.zeros(n)
    rows = np.arange(n)
    for _ in range(min(nq, width)):
        at = work.reshape(n, -1).argmax(axis=1)
        ok = work.reshape(n, -1)[rows, at] >= cfg.tau_pair
        if not ok.any():
            break
        ones += ok
        qi, li = np.divmod(at[ok], width)
        work[rows[ok], qi, :] = -np.inf
        work[rows[ok], :, li] = -np.inf
    one_to_one = ones / nq
    qm = q.mean(axis=0)
    # mean line vector per run: the runs' j-th lines added in turn (no runs × width × dim copy;
    # numpy's reduceat over rows is several times slower)
    sums = np.where(valid[:, :1], flat[cols[:, 0]], 0.0).astype(np.float64)
    for j in range(1, width):
        more = valid[:, j]
        sums[more] += flat[cols[more, j]]
    lm = sums / np.maximum(1, lens)[:, None]
    norms = np.linalg.norm(qm) * np.linalg.norm(lm, axis=1)
    whole = (lm @ qm) / np.where(norms > 0, norms, 1.0)
    gated = np.where((coverage > 0) & (whole >= cfg.tau_whole), whole, 0.0)
    return top + cfg.w_cov * coverage + cfg.w_many * many + cfg.w_one * one_to_one + cfg.w_whole * gated



def cover_order(book: Codebook, kg: Any, scored: list[tuple[float, int, Any]], query_edges: Sequence[int],
                weight: float, picks: int) -> list[tuple[float, int, Any]]:
    """The fine ranking re-ordered for coverage of the question's entities (greedy, ``picks``
    places): the next run maximises its fine score + ``weight`` × how much closer it brings each
    query entity to a match (max entity cosine, summed over query entities, beyond what the runs
    already picked reach). A comparison question's second entity gets its passage before a third
    run about the first one."""
    ents = [book.resolve_entity(x) for e in query_edges for x in book.edge_hrt[book.resolve_edge(e)][::2]]
    q_ents = [x for x in dict.fromkeys(ents) if book.ent_text[x] != "?"]
    if not q_ents or len(scored) < 2:
        return scored
    ev = book.entity_vectors(kg)
    qv = ev[q_ents]
    cover = np.zeros((len(scored), len(q_ents)))
    for i, (_, _, run) in enumerate(scored):
        r_ents = list({book.resolve_entity(x) for e in run.edges for x in book.edge_hrt[book.resolve_edge(e)][::2]})
        if r_ents:
            cover[i] = (ev[r_ents] @ qv.T).max(axis=0)
    base = np.array([s for s, _, _ in scored])
    reached = np.zeros(len(q_ents))
    left = list(range(len(scored)))
    order: list[int] = []
    for _ in range(min(picks, len(scored))):
        gain = np.clip(cover[left] - reached, 0.0, None).sum(axis=1)
        j = left[int(np.argmax(base[left] + weight * gain))]   # ties: the better fine rank (first)
        order.append(j)
        reached = np.maximum(reached, cover[j])
        left.remove(j)
    return [scored[i] for i in order + left]


def run_passages(book: Codebook, run: Any) -> Sequence[str]:
    """The passages a run stands for: its own chunks; a stored question's (it has none) are those
    its stored answers came from."""
    if run.channel != "Q":
        return run.chunks
    return [c for a in run.links if a in book.runs for c in book.runs[a].chunks]


def fuse_dense(scored: list[tuple[float, int, Any]], dense: Sequence[str],
               passages_of: Callable[[Any], Sequence[str]] = lambda run: run.chunks, *,
               adaptive: dict[str, float] | None = None) -> dict[str, float]:
    """The fine run ranking and the dense passage ranking taken in turns, opened by vector
    search's best passage (:func:`~langgraph_kgmem.ranking.dense_led`): run id → ``1 / place``.

    A passage enters the dense list through its best run (the first in fine order among the runs
    whose best-placed passage it is), so the dense ranking lifts one run per passage and a
    passage's other runs keep their fine turn alone. The fine stage scores fact lines, blind to
    how near a passage is to the question, so vector search's best passage opens the ranking (its
    best run), then the fine ranking's turn, then vector search's next, and so on: places 1 and 2
    are the runs of vector search's top two passages, as in ReMindRAG's evidence. A run none of
    whose passages (``passages_of(run)``) vector search ranks within ``dense`` (the fusion depth)
    takes no turn and is left out: it follows the fused runs, in fine order. A stored question
    (channel ``Q``) takes no fine turn: its passages are those its stored answers came from, and it
    competes on vector search's turns through them — questions on one topic read alike, so a
    question's likeness to a stored one says little about whether that one's answer serves it.

    ``adaptive`` (``{"confidence", "weak", "strong", "top"}``) instead gives the fine ranking its
    share of the first ``top`` places by confidence (:func:`~langgraph_kgmem.ranking.adaptive_fuse`)."""
    at = {c: i for i, c in enumerate(dense)}.get
    reps: dict[str, tuple[int, str]] = {}       # passage → (its dense position, its best run)
    own: list[str] = []                          # the fine ranking less the far runs and the questions
    for _, _, run in scored:
        placed = [p for p in map(at, passages_of(run)) if p is not None]
        if placed:
            p = min(placed)
            reps.setdefault(dense[p], (p, run.id))
            if run.channel != "Q":
                own.append(run.id)
    by_dense = [rid for _, rid in sorted(reps.values())]
    if adaptive is not None:
        return dict(adaptive_fuse(own, by_dense, int(adaptive["top"]), confidence=adaptive["confidence"],
                                  weak=adaptive["weak"], strong=adaptive["strong"], depth=len(own) + len(by_dense)))
    return dict(dense_led(own, by_dense))


def fine_confidence(scored: list[tuple[float, int, Any]], dense: Sequence[str],
                    passages_of: Callable[[Any], Sequence[str]], k: int) -> tuple[float, dict[str, float]]:
    """AutoPrunedRetriever's trust in its fine ranking, in [0, 1], and the signals behind it:
    ``agreement``, the share of the passages of the fine ranking's first ``k`` fact runs that vector
    search ranks in its top ``k`` (the fine score reads fact lines, blind to the passage around them,
    so it earns places where vector search vouches for where its facts sit); ``coverage``, the best
    run's fine score (how well the codebook's facts cover the question at all)."""
    passages = list(dict.fromkeys(p for _, _, run in scored if run.channel != "Q" for p in passages_of(run)))
    agreement = overlap_at(passages, dense, k)
    coverage = float(scored[0][0]) if scored else 0.0
    return agreement, {"agreement": round(agreement, 6), "coverage": round(coverage, 6)}


def unique_runs(book: Codebook, kg: Any, run_ids: list[str], threshold: float) -> list[str]:
    """One representative per cluster of runs (greedy in rank order on whole-run vectors)."""
    reps: list[np.ndarray] = []
    out = []
    for rid in run_ids:
        v = book.line_vectors(kg, book.runs[rid].edges).mean(axis=0)
        v = v / (np.linalg.norm(v) or 1.0)
        if any(float(v @ r) >= threshold for r in reps):
            continue
        reps.append(v)
        out.append(rid)
    return out
