"""ReMindRAG's edge-memory maths: the replay weight of an edge, and how a question enhances the
edges that led to useful evidence and penalises the rest (pure functions over arrays)."""

from __future__ import annotations

import math

import numpy as np

def delta(x: float | np.ndarray) -> float | np.ndarray:
    """Step size ``δ(x) = (2/π)·cos(πx/2)`` for x in [0, 1], 0 beyond (and for negative x, δ(|x|))."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    out = np.where(x < 1.0, (2.0 / math.pi) * np.cos(math.pi * np.minimum(x, 1.0) / 2.0), 0.0)
    return float(out) if out.ndim == 0 else out


def enhance(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Effective-edge update ``v + δ(‖v‖)·q̂``: fast wake-up from 0, damped as ‖v‖ → 1.

    For ‖v‖ ≤ 1 the result's norm stays ≤ 1 (x + δ(x) ≤ 1 on [0, 1]).
    """
    q = unit_vector(q)
    v = np.asarray(v, dtype=np.float64)
    return v + delta(float(np.linalg.norm(v))) * q


def penalize(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Ineffective-edge update: with ``p = v·q̂``, ``v − δ(|p|)·p·q̂``.

    Only the component along the query shrinks; the part of ``v`` orthogonal to ``q̂`` is unchanged.
    """
    q = unit_vector(q)
    v = np.asarray(v, dtype=np.float64)
    p = float(v @ q)
    return v - delta(abs(p)) * p * q


def replay_weights(cos_ab: np.ndarray, memory: np.ndarray, q: np.ndarray, alpha: float) -> np.ndarray:
    """``w = α·cos(emb(a), emb(b)) + (1−α)·(q̂·v_ab)`` for a batch of edges (rows of ``memory``)."""
    return alpha * np.asarray(cos_ab, dtype=np.float64) + (1.0 - alpha) * (np.asarray(memory) @ unit_vector(q))


def unit_vector(q: np.ndarray) -> np.ndarray:
    """``q`` flattened to float64 and scaled to length 1 (a zero vector stays zero)."""
    q = np.asarray(q, dtype=np.float64).ravel()
    n = np.linalg.norm(q)
    return q / n if n > 0 else q
