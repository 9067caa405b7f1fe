"""Files and the terminal (#39, item 8): ``kgmem ingest`` stays in the folder it is given, skips
bad files one at a time as documented, checks a file's size before reading it; ``export --run``
reads a bounded amount; every command prints outside text with its control sequences made
visible; links inside Chroma's segment folders are refused at open."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.cli import main
from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError
from langgraph_kgmem.terminal import printable

HASH = ["--embeddings", "hash"]
# OSC 52 (write the clipboard), a screen clear, a C1 CSI, a bell, a carriage return, a bidi override
HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x9b31m\r\u202e"


def _docs(kg: str, capsys) -> list[str]:
    capsys.readouterr()   # what came before
    assert main(["docs", "--kg", kg, *HASH, "--json"]) == 0
    return [d["id"] for d in json.loads(capsys.readouterr().out)]


def test_ingest_does_not_follow_links_out_of_the_folder(tmp_path, capsys):
    """The audit: `kgmem ingest docs/` followed docs/link.txt to ../outside/secret.txt, and
    `kgmem ask` answered from it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("The vault code is 4471. Nobody knows it.")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Oslo is the capital of Norway.")
    (docs / "link.txt").symlink_to(outside / "secret.txt")
    (docs / "sub").symlink_to(outside, target_is_directory=True)
    (docs / "alias.txt").symlink_to(docs / "a.txt")        # a link inside the folder is fine
    kg = str(tmp_path / "kg")
    assert main(["ingest", str(docs), "--kg", kg, *HASH, "--model", "offline"]) == 1
    err = capsys.readouterr().err
    assert "link.txt is a symbolic link" in err and "sub is a symbolic link" in err and "--follow-links" in err
    assert sorted(_docs(kg, capsys)) == ["a.txt", "alias.txt"]
    assert main(["ingest", str(docs), "--kg", kg, *HASH, "--model", "offline", "--follow-links"]) == 0
    assert sorted(_docs(kg, capsys)) == ["a.txt", "alias.txt", "link.txt", "sub/secret.txt"]


def test_a_link_loop_is_walked_once(tmp_path, capsys):
    docs = tmp_path / "docs"
    (docs / "inner").mkdir(parents=True)
    (docs / "inner" / "a.txt").write_text("Oslo is the capital of Norway.")
    (docs / "inner" / "up").symlink_to(docs, target_is_directory=True)
    kg = str(tmp_path / "kg")
    assert main(["ingest", str(docs), "--kg", kg, *HASH, "--model", "offline", "--follow-links"]) == 0
    assert _docs(kg, capsys) == ["inner/a.txt"]


def test_one_bad_file_is_skipped_alone(tmp_path, capsys):
    """The audit: one file name with byte \\xff, or one file with NUL past its first 8 KB, failed
    the whole folder despite the documented per-file skip."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("Oslo is the capital of Norway.")
    with open(os.path.join(os.fsencode(docs), b"bad\xff.txt"), "wb") as fh:
        fh.write(b"Bergen is a city in Norway.")
    (docs / "nul.txt").write_bytes(b"Text. " * 2000 + b"\x00 and more")
    kg = str(tmp_path / "kg")
    assert main(["ingest", str(docs), "--kg", kg, *HASH, "--model", "offline"]) == 1
    err = capsys.readouterr().err
    assert "the file name is not UTF-8" in err and "NUL bytes, the first at byte 12,000" in err
    assert "2 of 3 file(s) not ingested" in err
    assert _docs(kg, capsys) == ["good.txt"]


def test_a_file_over_the_limit_is_refused_before_anything_is_read(tmp_path, monkeypatch):
    """The audit: an 800 MB file was read whole before it was refused."""
    from langgraph_kgmem.ingest import pipeline

    big = tmp_path / "big.txt"
    with open(big, "wb") as fh:   # sparse: no disk is used
        fh.truncate(800 << 20)
    reads: list[int] = []
    real_open = open

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def fileno(self):
            return self.fh.fileno()

        def read(self, n=-1):
            reads.append(n)
            return self.fh.read(n)

    monkeypatch.setattr(pipeline, "open", lambda *a, **kw: Spy(real_open(*a, **kw)), raising=False)
    with pytest.raises(KgmemInputError, match=r"big\.txt is over the limit of 20,000,003 bytes"):
        pipeline.read_text_file(big)
    assert reads == []
    small = tmp_path / "small.txt"
    small.write_text("Oslo is the capital of Norway.")
    assert pipeline.read_text_file(small).startswith("Oslo") and reads == [pipeline.MAX_FILE_BYTES + 1]


@pytest.mark.parametrize("source, match", [("/dev/zero", "is over 16,777,216 bytes"),
                                           ("deep", "is not JSON .*recursion")])
def test_export_run_reads_a_bounded_amount(tmp_path, capsys, source, match):
    """The audit: `kgmem export --run /dev/zero` ended in a raw MemoryError."""
    if source == "deep":
        source = str(tmp_path / "deep.json")
        Path(source).write_text("[" * 100_000 + "]" * 100_000)
    kg = str(tmp_path / "kg")
    KnowledgeGraph.open(kg, embeddings="hash").close()
    assert main(["export", "--kg", kg, *HASH, "--html", str(tmp_path / "v.html"), "--run", source]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_printable_makes_every_control_sequence_visible():
    shown = printable("title " + HOSTILE + "\tend\n")
    assert not any(c in shown for c in "\x1b\x07\x9b\r\u202e")
    assert shown == ("title \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x9b31m\\x0d\\u202e\tend\n")
    assert printable("ok \udcff") == "ok \\udcff"


def test_docs_ask_and_memory_print_no_control_sequences(tmp_path, capsys):
    """The audit: titles and texts reached the terminal raw (OSC 52 clipboard writes, screen clears)."""
    kg = str(tmp_path / "kg")
    with KnowledgeGraph.open(kg, embeddings="hash") as g:
        g.add_documents([{"id": "doc-" + HOSTILE, "title": "Oslo" + HOSTILE,
                          "text": "Oslo is the capital of Norway." + HOSTILE + " Oslo lies on a fjord."}],
                        model="offline")
    capsys.readouterr()
    outputs = []
    for argv in (["docs"], ["ask", "What is the capital of Norway?" + HOSTILE, "--method", "remindrag",
                            "--model", "offline"], ["memory"], ["stats"], ["delete", "no-such" + HOSTILE]):
        main([*argv, "--kg", kg, *HASH])
        captured = capsys.readouterr()
        outputs.append(captured.out + captured.err)
    assert "\\x1b]52" in outputs[0] and "\\x1b]52" in outputs[1]
    for out in outputs:
        assert not any(c in out for c in "\x1b\x07\x9b\r\u202e"), out


def test_every_cli_print_goes_through_echo():
    """One function prints for every command: a new ``print`` would bypass it."""
    import langgraph_kgmem.cli as cli

    tree = ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))
    bare = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("print", "input")]
    assert bare == []
    writes = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "write"]
    assert writes == []


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_link_inside_a_chroma_segment_folder_is_refused_and_its_target_untouched(tmp_path, kind):
    """The audit: a link planted in one of Chroma's segment folders was followed, and its target overwritten."""
    root = tmp_path / "kg"
    with KnowledgeGraph.open(root, embeddings="hash", vector_backend="chroma") as g:
        g.add_triples([("Oslo", "capital of", "Norway")], source="a")
    segments = [p for p in (root / "chroma").iterdir() if p.is_dir()]
    assert segments, "no Chroma segment folder to plant a link in"
    target = tmp_path / "precious"
    if kind == "file":
        victim = next(p for p in sorted(segments[0].iterdir()) if p.is_file())
        target.write_bytes(b"keep me")
        victim.unlink()
    else:
        victim = segments[0]
        target.mkdir()
        (target / "keep.txt").write_bytes(b"keep me")
        import shutil
        shutil.rmtree(victim)
    victim.symlink_to(target, target_is_directory=kind == "folder")
    with pytest.raises(NotAKnowledgeGraphError, match=f"{victim.name} is a symbolic link"):
        KnowledgeGraph.open(root, embeddings="hash")
    assert (target.read_bytes() if kind == "file" else (target / "keep.txt").read_bytes()) == b"keep me"
