"""A link planted between the check and the open is not followed (#39, item 10).

:func:`~langgraph_kgmem.kg.backends.embedded.files.open_in_kg` checks a path with ``lstat`` and then opens it; the
open itself passes ``O_NOFOLLOW``, which is what closes the gap between the two. A link planted
after the check (here: by the check itself, standing in for another process that wins the
race) must be refused at the open, and the file it points to must stay as it was. Without
``O_NOFOLLOW`` these tests fail: the open follows the link.
"""

from __future__ import annotations

import pytest

from langgraph_kgmem.errors import NotAKnowledgeGraphError
from langgraph_kgmem.kg.backends.embedded import files


@pytest.fixture
def racing_link(tmp_path, monkeypatch):
    """(path in a KG directory, the outside file): the first check of ``path`` passes, then a
    link to the outside file appears there, before the open."""
    root = tmp_path / "kg"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.write_bytes(b"not yours")
    path = root / files.JOURNAL_FILE
    real_check = files.check_not_link
    planted = []

    def check_then_lose_the_race(p, **kw):
        real_check(p, **kw)
        if not planted:
            path.symlink_to(outside)
            planted.append(p)

    monkeypatch.setattr(files, "check_not_link", check_then_lose_the_race)
    return path, outside, planted


@pytest.mark.parametrize("mode", ["rb", "ab", "r+b"])
def test_a_link_planted_after_the_check_is_not_followed(racing_link, mode):
    path, outside, planted = racing_link
    with pytest.raises(NotAKnowledgeGraphError, match=r"vectors\.journal is a symbolic link"):
        with files.open_in_kg(path, mode) as fh:
            if mode != "rb":
                fh.write(b"written through the link")
    assert planted and path.is_symlink()
    assert outside.read_bytes() == b"not yours"


def test_the_journal_writer_refuses_the_race_too(racing_link):
    import numpy as np

    path, outside, _ = racing_link
    with pytest.raises(NotAKnowledgeGraphError):
        files.write_journal(path, [("nodes", ["n1"], ["entity"], np.ones((1, 4), dtype=np.float32))])
    assert outside.read_bytes() == b"not yours"
