"""Forward-push PPR over a PostgreSQL KG without loading its edges.

A :class:`~langgraph_kgmem.knowledge_graph.KnowledgeGraph` on PostgreSQL keeps the whole structure in
each worker's memory and answers PPR from a CSR snapshot of it. :class:`LazyPushPpr` is the
other option of the server backend, for workers that only need PPR: it holds no graph at all and
reads adjacency on demand.

- :class:`NeighbourCache` keeps the symmetric weighted rows (parallel edges summed, self-loops
  dropped, exactly as :func:`~langgraph_kgmem.kg.ppr.build_snapshot` builds them) of the nodes
  push has needed, in one flat buffer with a least-recently-used bound on the entries it holds
  between queries. A push round sends **one** statement for all its candidates (one round trip
  per round, not per node): their incident-edge counts, and the rows of those that pass the
  push threshold.
- Invalidation follows the KG's version and change log (the ones the in-memory worker's
  ``refresh`` reads): at the start of each query, if the version moved, the rows of the endpoints
  of every edge written since are dropped; a deleted edge or node (whose endpoints the log no
  longer names) or a log that no longer reaches back clears the cache.
- :func:`lazy_push_ppr` is :func:`~langgraph_kgmem.kg.ppr.push_ppr`'s algorithm (synchronous
  vectorised rounds, dangling mass back to the seeds, per-query overrides) over the cache, with
  one difference: a node's push threshold is ``eps`` × its *incident edges* (what the database
  counts in its indexes without reading an edge; parallel edges and both ends of a self-loop
  count) rather than × its distinct neighbours. The two agree on a graph without parallel edges,
  pairs linked both ways or self-loops, where it returns the snapshot push's scores up to float
  rounding; elsewhere it pushes a little less (each score still never above the exact one, and
  low by at most ``eps`` × the node's incident edges).

  Learning the distinct degree would mean reading every edge of every hub the residual reaches,
  on a power-law graph most of the graph in a single round; the incident-edge count comes from
  index-only scans without reading an edge row (figures in docs/tutorials/postgres.md).

Rows read during one query may come from versions newer than the one the query started at (a
write committed meanwhile): the result is then that of a graph between the two, as it would be
for an in-memory worker that refreshed halfway; the next query drops those rows again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.ppr import push_rounds, slice_positions
from langgraph_kgmem.kg.types import check_kg_name
from langgraph_kgmem.ranking import best_first

MAX_ENTRIES = 2_000_000    # directed entries a cache keeps between queries (16 bytes each)
KIND_LOOKUP_CHUNK = 256     # node kinds are looked up this many ranked nodes at a time (node_kinds=)


@dataclass
class CacheStats:
    """Counters since the cache was made (the bench reports them)."""

    queries: int = 0
    round_trips: int = 0        # statements sent for rows, kinds, seeds and invalidation
    rows_fetched: int = 0       # node rows read from the database
    edges_fetched: int = 0      # edge rows those reads returned
    rows_hit: int = 0           # node rows push needed and found cached
    rows_invalidated: int = 0   # rows dropped because a write touched them
    clears: int = 0             # whole-cache drops (deletes, a log that no longer reaches back)
    evicted: int = 0            # rows dropped by the entry bound
    fetch_s: float = 0.0        # seconds inside row reads (round trips and decoding)


class NeighbourCache:
    """Symmetric rows of one KG's edges (of ``edge_kinds``, all by default), read on demand.

    Node ids get local integer ids in the order first seen; a row is a slice of a flat buffer
    (``start``/``length`` per local id; ``length`` −1 = not cached). Between queries at most
    ``max_entries`` directed entries stay cached (least recently used rows go first); the table
    of local ids is reset with the cache once it passes ``4 × max_entries`` ids."""

    def __init__(self, store: Any, edge_kinds: Sequence[str] | None = None, *, max_entries: int = MAX_ENTRIES) -> None:
        self.store = store
        self.kg_id = store.kg_id
        self.edge_kinds = sorted(edge_kinds) if edge_kinds is not None else None
        self.max_entries = int(max_entries)
        self.stats = CacheStats()
        self.version = -1
        self.clear()

    # ------------------------------------------------------------------ storage
    def clear(self) -> None:
        """Drop every cached row and the table of local ids (a fresh, empty cache)."""
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.start = np.zeros(1024, dtype=np.int64)
        self.length = np.full(1024, -1, dtype=np.int64)
        self.degree = np.full(1024, -1, dtype=np.int64)   # incident edges, known before the row
        self.out_weight = np.zeros(1024)
        self.last_used = np.zeros(1024, dtype=np.int64)
        self.kinds = np.empty(1024, dtype=object)
        self.cols = np.zeros(1 << 16, dtype=np.int64)
        self.vals = np.zeros(1 << 16)
        self.used = 0          # buffer positions written (live or not)
        self.entries = 0       # entries of cached rows
        self.clock = 0

    @property
    def cached_rows(self) -> int:
        """How many nodes have their row cached now."""
        return int((self.length[:len(self.ids)] >= 0).sum())

    def intern(self, names: Sequence[str]) -> np.ndarray:
        """Local ids of ``names``, new ones appended."""
        index, ids = self.index, self.ids
        for name in names:
            if name not in index:
                index[name] = len(ids)
                ids.append(name)
        n = len(ids)
        if n > len(self.length):
            grow = max(2 * len(self.length), n)
            self.start = np.concatenate([self.start, np.zeros(grow - len(self.start), dtype=np.int64)])
            self.length = np.concatenate([self.length, np.full(grow - len(self.length), -1, dtype=np.int64)])
            self.degree = np.concatenate([self.degree, np.full(grow - len(self.degree), -1, dtype=np.int64)])
            self.out_weight = np.concatenate([self.out_weight, np.zeros(grow - len(self.out_weight))])
            self.last_used = np.concatenate([self.last_used, np.zeros(grow - len(self.last_used), dtype=np.int64)])
            kinds = np.empty(grow, dtype=object)
            kinds[:len(self.kinds)] = self.kinds
            self.kinds = kinds
        return np.fromiter((index[x] for x in names), dtype=np.int64, count=len(names))

    def _reserve(self, extra: int) -> None:
        if self.used + extra <= len(self.cols):
            return
        if self.entries + extra <= len(self.cols) // 2:   # mostly holes: compact in place of growing
            live = np.flatnonzero(self.length[:len(self.ids)] > 0)
            lens = self.length[live]
            pos = slice_positions(self.start[live], lens)
            self.cols[:len(pos)] = self.cols[pos]
            self.vals[:len(pos)] = self.vals[pos]
            self.start[live] = np.cumsum(lens) - lens
            self.used = len(pos)
            return
        size = max(2 * len(self.cols), self.used + extra)
        self.cols = np.concatenate([self.cols[:self.used], np.zeros(size - self.used, dtype=np.int64)])
        self.vals = np.concatenate([self.vals[:self.used], np.zeros(size - self.used)])

    def drop(self, rows: np.ndarray) -> int:
        """Mark ``rows`` (local ids) as not cached, their buffer slices left as holes that a later
        compaction reclaims; returns how many of them were cached."""
        rows = rows[self.length[rows] >= 0]
        self.entries -= int(self.length[rows].sum())
        self.length[rows] = -1
        return len(rows)

    def forget(self, rows: np.ndarray) -> int:
        """Rows and degrees of ``rows`` dropped (a write touched them); returns the rows dropped."""
        self.degree[rows] = -1
        return self.drop(rows)

    # ------------------------------------------------------------------ reads
    def _sql(self) -> str:
        kind = " AND x.kind = ANY(%(kinds)s)" if self.edge_kinds is not None else ""
        # the degree of every candidate, counted in the (kg, src) and (kg, dst) indexes without
        # reading an edge (index-only scans); the rows only of those whose residual passes
        # eps × degree: a hub is not shipped, nor its edges read, just to learn it is not pushed
        count = "(SELECT count(*) FROM kgmem_edges x WHERE x.kg = %(kg)s AND x.{col} = c.id" + kind + ")"
        return ("WITH c(id, r) AS (SELECT * FROM unnest(%(ids)s::text[], %(res)s::float8[])), "
                f"d AS MATERIALIZED (SELECT c.id, c.r, {count.format(col='src')} + {count.format(col='dst')} AS deg "
                "FROM c), "
                "p AS (SELECT id FROM d WHERE r > %(eps)s * GREATEST(deg, 1)) "
                "SELECT d.id, NULL::text, NULL::float8, d.deg, r > %(eps)s * GREATEST(deg, 1) FROM d UNION ALL "
                f"SELECT x.src, x.dst, x.weight, NULL, NULL FROM p JOIN kgmem_edges x ON x.kg = %(kg)s "
                f"AND x.src = p.id{kind} UNION ALL SELECT x.dst, x.src, x.weight, NULL, NULL FROM p "
                f"JOIN kgmem_edges x ON x.kg = %(kg)s AND x.dst = p.id{kind}")

    def fetch(self, need: np.ndarray, residual: np.ndarray | None = None, eps: float = 0.0) -> None:
        """One statement for local ids ``need`` (not cached): the degree of each, and the row of
        those whose ``residual`` passes ``eps`` × degree (every row when ``residual`` is None)."""
        if not len(need):
            return
        t0 = time.perf_counter()
        names = [self.ids[i] for i in need.tolist()]
        res = np.full(len(need), np.inf) if residual is None else np.asarray(residual, dtype=np.float64)
        params = {"ids": names, "res": res.tolist(), "kg": self.kg_id, "eps": float(eps), "kinds": self.edge_kinds}
        with self.store.db.read() as conn:
            rows = conn.execute(self._sql(), params).fetchall()
        self.stats.round_trips += 1
        got = {r[0]: (r[3], r[4]) for r in rows if r[1] is None}   # degree, and whether the row came
        edges = [r for r in rows if r[1] is not None]
        self.degree[need] = np.fromiter((got[x][0] for x in names), dtype=np.int64, count=len(names))
        pushed = need[np.fromiter((got[x][1] for x in names), dtype=bool, count=len(names))]
        self.stats.rows_fetched += len(pushed)
        self.stats.edges_fetched += len(edges)
        if edges:
            a_names, b_names, w, _, _ = zip(*edges)
            a = self.intern(a_names)
            b = self.intern(b_names)
            w = np.asarray(w, dtype=np.float64)
            keep = a != b                      # a self-loop never moves a walk
            a, b, w = a[keep], b[keep], w[keep]
            order = np.lexsort((b, a))
            a, b, w = a[order], b[order], w[order]
            first = np.ones(len(a), dtype=bool)   # parallel edges (and both directions of a pair) add up
            first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
            starts = np.flatnonzero(first)
            a, b, w = a[starts], b[starts], np.add.reduceat(w, starts) if len(starts) else w[:0]
            nz = np.abs(w) >= 1e-12           # weights that cancel out are no entry
            a, b, w = a[nz], b[nz], w[nz]
        else:
            a = b = np.zeros(0, dtype=np.int64)
            w = np.zeros(0)
        self._reserve(len(a))
        base = self.used
        self.cols[base:base + len(a)] = b
        self.vals[base:base + len(a)] = w
        self.used += len(a)
        lo = np.searchsorted(a, pushed, "left")
        hi = np.searchsorted(a, pushed, "right")
        csum = np.concatenate([[0.0], np.cumsum(w)])
        self.start[pushed] = base + lo
        self.length[pushed] = hi - lo
        self.out_weight[pushed] = csum[hi] - csum[lo]
        self.entries += len(a)
        self.stats.fetch_s += time.perf_counter() - t0

    def ensure(self, nodes: np.ndarray) -> None:
        """Rows of ``nodes`` cached (the missing ones in one round trip); marks them used."""
        missing = nodes[self.length[nodes] < 0]
        self.stats.rows_hit += len(nodes) - len(missing)
        self.fetch(np.unique(missing))
        self.last_used[nodes] = self.clock

    def existing(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` are nodes of the KG (a known kind says so without a round trip)."""
        return self.kinds_of(rows) != ""

    def kinds_of(self, rows: np.ndarray) -> np.ndarray:
        """Node kinds of ``rows`` ("" for an id that is no node), each looked up once (a write to
        the node, seen in the change log, forgets it)."""
        unknown = [int(r) for r in rows if self.kinds[r] is None]
        if unknown:
            with self.store.db.read() as conn:
                found = dict(conn.execute("SELECT id, kind FROM kgmem_nodes WHERE kg = %s AND id = ANY(%s)",
                                          (self.kg_id, [self.ids[r] for r in unknown])).fetchall())
            self.stats.round_trips += 1
            for r in unknown:
                self.kinds[r] = found.get(self.ids[r], "")
        return self.kinds[rows]

    # ------------------------------------------------------------------ invalidation
    def sync(self) -> None:
        """Drop what writes committed since the last query changed (see the module docstring)."""
        with self.store.db.read() as conn:
            now, log_from = conn.execute("SELECT version, log_from FROM kgmem_graphs WHERE id = %s",
                                         (self.kg_id,)).fetchone()
            self.stats.round_trips += 1
            if now == self.version:
                return
            if self.version < 0 or self.version < log_from:   # first query, or the log lost our version
                if self.ids:
                    self.stats.clears += 1
                self.clear()
                self.version = int(now)
                return
            changes = conn.execute("SELECT DISTINCT kind, id FROM kgmem_changes WHERE kg = %s AND version > %s "
                                   "AND version <= %s", (self.kg_id, self.version, now)).fetchall()
            eids = [r[1] for r in changes if r[0] == "e"]
            nids = [r[1] for r in changes if r[0] == "n"]
            alive = conn.execute("SELECT id, src, dst FROM kgmem_edges WHERE kg = %s AND id = ANY(%s)",
                                 (self.kg_id, eids)).fetchall() if eids else []
            live_nodes = {r[0] for r in conn.execute("SELECT id FROM kgmem_nodes WHERE kg = %s AND id = ANY(%s)",
                                                     (self.kg_id, nids))} if nids else set()
            self.stats.round_trips += 1 + bool(eids) + bool(nids)
        if len(alive) < len(eids) or len(live_nodes) < len(nids):
            # a deleted edge's endpoints are no longer in the database: start over
            self.stats.clears += 1
            self.clear()
        else:
            touched = [self.index[x] for _, s, d in alive for x in (s, d) if x in self.index]
            self.stats.rows_invalidated += self.forget(np.asarray(touched, dtype=np.int64))
            for nid in nids:                   # a node written again may have a new kind
                i = self.index.get(nid)
                if i is not None:
                    self.kinds[i] = None
        self.version = int(now)

    def trim(self) -> None:
        """Least recently used rows out until at most ``max_entries`` entries stay cached."""
        if len(self.ids) > 4 * self.max_entries:   # the id table itself is bounded too
            self.stats.clears += 1
            version = self.version
            self.clear()
            self.version = version
            return
        if self.entries <= self.max_entries:
            return
        cached = np.flatnonzero(self.length[:len(self.ids)] >= 0)
        order = cached[np.argsort(self.last_used[cached], kind="stable")]
        keep_from = np.searchsorted(np.cumsum(self.length[order][::-1]), self.max_entries, "right")
        gone = order[:len(order) - keep_from]
        self.stats.evicted += self.drop(gone)


def lazy_push_ppr(cache: NeighbourCache, reset: Mapping[str, float], *, damping: float = 0.5, eps: float = 1e-5,
                  overrides: Mapping[tuple[str, str], float] | None = None,
                  max_pushes: int = 5_000_000) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~langgraph_kgmem.kg.ppr.push_ppr` over ``cache`` (node ids, not rows).

    The push threshold is ``eps`` × incident edges (see the module docstring). Returns (local
    ids of the touched nodes, their scores). Seeds that are not nodes of the KG are
    ignored; with none left the result is empty (the uniform walk the exact method falls back to
    needs the whole graph, which this reader never loads)."""
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must be in (0, 1), got {damping}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0))
    r0: dict[str, float] = {}
    for nid, x in reset.items():
        if np.isfinite(x) and x > 0:
            r0[nid] = r0.get(nid, 0.0) + float(x)
    if not r0:
        return empty
    cache.clock += 1
    cache.stats.queries += 1
    by_src: dict[str, dict[str, float]] = {}
    for (a, b), m in (overrides or {}).items():
        by_src.setdefault(a, {})[b] = float(m)
    seeds = cache.intern(list(r0))
    ov_rows = cache.intern(list(by_src))
    cache.ensure(np.concatenate([seeds, ov_rows]))   # one round trip for seeds and overridden rows
    bare = seeds[cache.length[seeds] == 0]
    if len(bare):   # no edge: a node without out-edges (dangling), or no node at all
        absent = {cache.ids[i] for i in bare[~cache.existing(bare)]}
        r0 = {nid: x for nid, x in r0.items() if nid not in absent}
        if not r0:
            return empty
        seeds = cache.intern(list(r0))
    total = sum(r0.values())
    seed_share = np.fromiter((x / total for x in r0.values()), dtype=np.float64, count=len(r0))
    # overridden rows: a patched copy for this query (the cached row is never changed)
    patched: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    for a, row in zip(by_src, ov_rows.tolist()):
        lo, n = int(cache.start[row]), int(cache.length[row])
        cols, vals = cache.cols[lo:lo + n].copy(), cache.vals[lo:lo + n].copy()
        order = np.argsort(cols)
        cols, vals = cols[order], vals[order]
        for b, m in by_src[a].items():
            j = cache.index.get(b)
            k = int(np.searchsorted(cols, j)) if j is not None else len(cols)
            if k < len(cols) and cols[k] == j:
                vals[k] *= m
        patched[row] = (cols, vals, float(vals.sum()))

    res = np.zeros(len(cache.ids))
    est = np.zeros(len(cache.ids))
    res[seeds] = seed_share

    def grown(arr: np.ndarray) -> np.ndarray:
        n = len(cache.ids)
        return arr if len(arr) >= n else np.concatenate([arr, np.zeros(max(n, 2 * len(arr)) - len(arr))])

    def over_threshold(res: np.ndarray, cand: np.ndarray) -> np.ndarray:
        # ask the database about nodes whose residual may pass eps × degree: the degree of an
        # unknown one, and the row where it does (one round trip for the whole round)
        was_cached = cache.length[cand] >= 0
        r = res[cand]
        deg = cache.degree[cand]
        ask = ~was_cached & (r > eps) & ((deg < 0) | (r > eps * np.maximum(1, deg)))
        if ask.any():
            cache.fetch(cand[ask], r[ask], eps)
            deg = cache.degree[cand]
        passed = r > eps * np.maximum(1, deg)
        cache.stats.rows_hit += int((passed & was_cached).sum())
        front = cand[passed]
        cache.ensure(front[cache.length[front] < 0])   # none: the statement above sent their rows
        cache.last_used[front] = cache.clock
        return front

    def rows_of(f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lens = cache.length[f]
        pos = slice_positions(cache.start[f], lens)
        return cache.cols[pos], cache.vals[pos], lens

    return push_rounds(res, est, seeds, seed_share, damping=damping, max_pushes=max_pushes,
                       over_threshold=over_threshold, out_weight=lambda f: cache.out_weight[f], rows_of=rows_of,
                       patched=patched, grow=grown)


class LazyPushPpr:
    """Push PPR on a PostgreSQL KG for a worker that loads no structure (the lazy option of the
    server backend; see the module docstring).

        reader = LazyPushPpr.open("postgresql://...", name="docs")
        reader.ppr({"ent-marie-curie": 1.0}, top_k=10)

    ``max_entries`` bounds each neighbour cache (one per ``edge_kinds`` asked for) between
    queries. Only push runs here: ``kg.ppr(method="exact")`` needs the whole graph.
    """

    def __init__(self, store: Any, *, max_entries: int = MAX_ENTRIES, own_db: bool = False) -> None:
        self.store = store
        self.max_entries = max_entries
        self._own_db = own_db
        self._caches: dict[tuple | None, NeighbourCache] = {}

    @classmethod
    def open(cls, uri: str, *, name: str = "default", max_entries: int = MAX_ENTRIES) -> "LazyPushPpr":
        """A reader over KG ``name`` of the database at ``uri``, with a small connection pool of its own
        (closed by :meth:`close`).

        Raises:
            KgmemInputError: ``uri`` is not a PostgreSQL URI, or the database has no KG ``name``."""
        from langgraph_kgmem.kg.backends.postgres.graph import PostgresGraphStore
        from langgraph_kgmem.kg.backends.postgres.pool import PgDatabase, is_postgres_uri

        if not is_postgres_uri(uri):
            raise KgmemInputError(f"LazyPushPpr reads a PostgreSQL KG: give a postgresql:// URI, not {uri!r}")
        db = PgDatabase(uri, max_size=2)
        try:
            store = PostgresGraphStore(db, check_kg_name(name), create=False)
        except BaseException:
            db.close()
            raise
        return cls(store, max_entries=max_entries, own_db=True)

    def cache(self, edge_kinds: Sequence[str] | None = None) -> NeighbourCache:
        """The neighbour cache of these edge kinds (None: all), made on first use and kept."""
        key = tuple(sorted(edge_kinds)) if edge_kinds is not None else None
        c = self._caches.get(key)
        if c is None:
            c = self._caches[key] = NeighbourCache(self.store, edge_kinds, max_entries=self.max_entries)
        return c

    def ppr(self, seeds: Mapping[str, float], *, damping: float = 0.5, eps: float = 1e-5,
            edge_kinds: Sequence[str] | None = None, overrides: Mapping[tuple[str, str], float] | None = None,
            node_kinds: Sequence[str] | None = None, top_k: int | None = None) -> list[tuple[str, float]]:
        """(node id, score) best first, as ``KnowledgeGraph.ppr(..., method="push")`` returns them
        (equal scores by first sight rather than by snapshot row)."""
        if not (isinstance(eps, (int, float)) and 0.0 < eps < 1.0):
            raise KgmemInputError(f"ppr eps {eps!r}: use a number in (0, 1), e.g. 1e-5 (smaller = closer to exact)")
        cache = self.cache(edge_kinds)
        cache.sync()
        try:
            rows, scores = lazy_push_ppr(cache, seeds, damping=damping, eps=eps, overrides=overrides)
            order = best_first(scores)
            if node_kinds is None:
                order = order[:top_k] if top_k is not None else order
                return [(cache.ids[rows[i]], float(scores[i])) for i in order.tolist()]
            wanted, out = set(node_kinds), []
            for lo in range(0, len(order), KIND_LOOKUP_CHUNK):
                chunk = order[lo:lo + KIND_LOOKUP_CHUNK]
                kinds = cache.kinds_of(rows[chunk])
                out += [(cache.ids[rows[i]], float(scores[i])) for i, k in zip(chunk.tolist(), kinds) if k in wanted]
                if top_k is not None and len(out) >= top_k:
                    break
            return out[:top_k] if top_k is not None else out
        finally:
            cache.trim()

    def stats(self) -> dict[str, Any]:
        """Per neighbour cache (keyed by its edge kinds, ``"all"`` for every kind): the KG version it is
        at, its size, and its counters (queries, round trips, rows fetched and hit, invalidations...)."""
        out: dict[str, Any] = {}
        for key, c in self._caches.items():
            s = c.stats
            out["all" if key is None else ",".join(key)] = {
                "version": c.version, "cached_rows": c.cached_rows, "cached_entries": c.entries,
                "known_ids": len(c.ids), "queries": s.queries, "round_trips": s.round_trips,
                "rows_fetched": s.rows_fetched, "edges_fetched": s.edges_fetched, "rows_hit": s.rows_hit,
                "rows_invalidated": s.rows_invalidated, "clears": s.clears, "evicted": s.evicted,
                "fetch_s": round(s.fetch_s, 3)}
        return out

    def close(self) -> None:
        """Close the connection pool when :meth:`open` made it (a store passed in is its owner's to close)."""
        if self._own_db:
            self.store.db.close()

    def __enter__(self) -> "LazyPushPpr":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
