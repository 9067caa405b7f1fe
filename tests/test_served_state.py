"""``langgraph dev`` and its pickled state folder (#39, item 9).

The dev server's in-memory runtime (upstream) keeps threads, runs and its store in
``.langgraph_api/*.pckl`` and reads them with ``pickle.load`` at start, before any graph is
imported: a pickle planted there ran code. ``langgraph-cli`` 0.4.40 sets
``LANGGRAPH_DISABLE_FILE_PERSISTENCE=false`` itself (its config validation drops
``disable_persistence``), so nothing the package's served entry does at import or first build can
stop it. What it can do: warn when anyone but the server's user could have written that state
(tested here), and the docs say how to run ``langgraph dev`` safely (docs/reliability.md).
"""

from __future__ import annotations

import logging
import os
import sys

import pytest

from langgraph_kgmem import serve


@pytest.fixture
def state(tmp_path):
    folder = tmp_path / "project" / serve.DEV_STATE_DIR
    folder.mkdir(parents=True, mode=0o700)
    folder.parent.chmod(0o755)
    folder.chmod(0o700)
    pickle_file = folder / ".langgraph_checkpoint.1.pckl"
    pickle_file.write_bytes(b"\x80\x04N.")
    pickle_file.chmod(0o600)
    return folder


def test_a_private_state_folder_is_no_risk(state):
    assert serve.dev_state_risks(state) == []
    assert serve.dev_state_risks(state.parent / "absent") == []


@pytest.mark.parametrize("tamper, said", [
    (lambda f: (f / ".langgraph_checkpoint.1.pckl").chmod(0o666), r"\.pckl is writable by group and others"),
    (lambda f: f.chmod(0o770), r"\.langgraph_api is writable by its group"),
    (lambda f: f.parent.chmod(0o777), r"project is writable by group and others"),
    (lambda f: (f / "store.pckl").symlink_to(f / ".langgraph_checkpoint.1.pckl"), r"store\.pckl is a symbolic link"),
])
def test_state_others_could_have_written_is_named(state, tamper, said):
    import re

    tamper(state)
    risks = serve.dev_state_risks(state)
    assert len(risks) == 1 and re.search(said, risks[0]), risks


def test_a_sticky_shared_parent_is_no_risk(state):
    state.parent.chmod(0o1777)
    assert serve.dev_state_risks(state) == []


@pytest.fixture
def served_kg_env(tmp_path, monkeypatch):
    from langgraph_kgmem import KnowledgeGraph

    with KnowledgeGraph.open(tmp_path / "kg", embeddings="hash", vector_backend="memory") as kg:
        kg.add_triples([("Oslo", "capital of", "Norway")], source="a")
    monkeypatch.setenv(serve.ENV_KG_DIR, str(tmp_path / "kg"))
    monkeypatch.setenv(serve.ENV_EMBEDDINGS, "hash")
    monkeypatch.setenv(serve.STRICT_CHECKPOINTS_ENV, "true")
    for name in (serve.ENV_MODEL, serve.ENV_KG_NAME, serve.ENV_VECTOR_BACKEND):
        monkeypatch.delenv(name, raising=False)
    serve.close_served()
    yield
    serve.close_served()


@pytest.mark.parametrize("mode, inmem, warns", [(0o666, True, True), (0o600, True, False), (0o666, False, False)])
def test_a_served_graph_under_langgraph_dev_warns_about_state_others_could_write(served_kg_env, state, monkeypatch,
                                                                                  caplog, mode, inmem, warns):
    (state / ".langgraph_checkpoint.1.pckl").chmod(mode)
    monkeypatch.chdir(state.parent)
    if inmem:
        monkeypatch.setitem(sys.modules, "langgraph_runtime_inmem", sys.modules.get("langgraph_runtime_inmem")
                            or type(sys)("langgraph_runtime_inmem"))
    else:
        monkeypatch.delitem(sys.modules, "langgraph_runtime_inmem", raising=False)
    with caplog.at_level(logging.WARNING, logger=serve.__name__):
        serve.build_served_graph("catrag")
    said = [r.getMessage() for r in caplog.records if r.name == serve.__name__]
    assert any("loaded its state folder with pickle.load" in m and "writable by group and others" in m
               for m in said) == warns, said
    assert os.getcwd() == str(state.parent)
