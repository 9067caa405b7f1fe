"""The public API is pinned: every name an ``__all__`` lists, with its signature, matches the
committed snapshot ``tests/fixtures/public_api.txt`` (``tools/public_api.py`` writes both sides).

A change to the public API is then a deliberate one: change the code, run
``python tools/public_api.py --write`` and commit the snapshot with it; the diff shows reviewers
exactly which names and parameters changed."""

from __future__ import annotations

from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)
from public_api import SNAPSHOT, describe, difference


def test_the_public_api_matches_its_snapshot():
    diff = difference()
    assert not diff, ("the public API differs from tests/fixtures/public_api.txt; if the change is deliberate, run "
                      "`python tools/public_api.py --write` and commit the snapshot:\n" + "\n".join(diff[:80]))


def test_the_snapshot_sees_a_renamed_parameter_a_new_default_and_a_class_member(tmp_path):
    """What the snapshot compares can fail: a parameter renamed, a default changed, a method of a
    public class renamed each give another line (a check that cannot fail guards nothing)."""
    def before(kg, *, top_k: int = 5): """f."""
    def renamed(kg, *, k: int = 5): """f."""
    def redefaulted(kg, *, top_k: int = 6): """f."""
    lines = {tuple(describe("m", "f", f)) for f in (before, renamed, redefaulted)}
    assert len(lines) == 3

    class Public:
        """A public class."""
        def search(self, query: str) -> list: """s."""
    Public.__module__ = "langgraph_kgmem.fake"
    first = describe("m", "Public", Public)
    Public.find = Public.search
    del Public.search
    assert first != describe("m", "Public", Public) and "m.Public.search: method (self, query: 'str') -> 'list'" in first


def test_a_stale_snapshot_is_reported_line_by_line(tmp_path):
    stale = tmp_path / "public_api.txt"
    lines = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    changed = next(i for i, line in enumerate(lines) if line.startswith("langgraph_kgmem.get_embeddings:"))
    lines[changed] = lines[changed].replace("cache:", "use_cache:")
    stale.write_text("\n".join(lines) + "\n", encoding="utf-8")
    diff = difference(stale)
    assert [d[0] for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---"))] == ["-", "+"]
