"""The local model server stays on 127.0.0.1 whatever the environment holds, ``kgmem serve-model``
prints lines a shell can paste safely, and no run leaves a temporary folder behind.

No real server is started: the process the server would run in is replaced by a stand-in that
records the command line and the environment it was handed (the real server's smoke is
tests/test_local_model.py).
"""

from __future__ import annotations

import contextlib
import gc
import io
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from langgraph_kgmem import local_model
from langgraph_kgmem.local_model import LocalModelServer, server_env

# what llama-cpp-python's server reads from the environment before its command line (its
# settings are pydantic-settings models; CONFIG_FILE replaces every argument)
HOSTILE_ENV = {"HOST": "0.0.0.0", "PORT": "1", "CONFIG_FILE": "/tmp/kgmem-evil.json", "API_KEY": "k",
               "MODEL": "/tmp/other.gguf", "N_CTX": "99", "SSL_KEYFILE": "/tmp/k", "ROOT_PATH": "/x",
               "VERBOSE": "true", "CHAT_FORMAT": "chatml", "INTERRUPT_REQUESTS": "false",
               "OPENAI_API_KEY": "sk-should-not-travel", "PYTHONSTARTUP": "/tmp/evil.py"}


class _Proc:
    """Stands in for the server's process: records what it was started with, runs forever."""

    started: list[dict] = []

    def __init__(self, cmd, **kwargs):
        self.cmd, self.kwargs, self.returncode = cmd, kwargs, None
        _Proc.started.append({"cmd": cmd, "env": kwargs["env"]})

    def poll(self):
        return self.returncode

    def terminate(self):
        self.returncode = -15

    kill = terminate

    def wait(self, timeout=None):
        return self.returncode


class _Answer:
    status = 200

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def fake_server(monkeypatch, tmp_path):
    """Server starts that record instead of running; a GGUF file to serve."""
    _Proc.started = []
    # the module's own view of subprocess, so the test itself can still run processes
    monkeypatch.setattr(local_model, "subprocess", SimpleNamespace(
        Popen=_Proc, DEVNULL=subprocess.DEVNULL, STDOUT=subprocess.STDOUT, TimeoutExpired=subprocess.TimeoutExpired))
    monkeypatch.setattr(local_model, "server_available", lambda: True)
    monkeypatch.setattr(local_model.urllib.request, "urlopen", lambda *a, **k: _Answer())
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf


def test_the_server_starts_on_loopback_whatever_the_environment_says(fake_server, monkeypatch):
    for key, value in HOSTILE_ENV.items():
        monkeypatch.setenv(key, value)
    with LocalModelServer(fake_server, port=18123):
        pass
    [run] = _Proc.started
    cmd, env = run["cmd"], run["env"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "18123"
    assert env["HOST"] == "127.0.0.1" and env["PORT"] == "18123"
    leaked = {k for k in HOSTILE_ENV if k not in ("HOST", "PORT")} & set(env)
    assert not leaked, f"the server inherited {sorted(leaked)}"
    assert env.get("PATH") and set(env) <= local_model.SERVER_ENV_KEEP | {"PYTHONUNBUFFERED", "HOST", "PORT"} | {
        k for k in env if k.startswith("LC_")}


def test_no_kept_variable_is_a_setting_of_the_server():
    """What the server inherits must not name one of its settings (it reads them case-insensitively)."""
    settings = pytest.importorskip("llama_cpp.server.settings")
    fields = {name.lower() for model in (settings.ServerSettings, settings.ModelSettings)
              for name in model.model_fields} | {"config_file"}
    env = server_env(8000, {k: "x" for k in local_model.SERVER_ENV_KEEP} | {"LC_ALL": "C"})
    assert {k.lower() for k in env} & fields == {"host", "port"}   # the two forced to the command line's values


def test_serve_model_prints_lines_a_shell_can_paste(fake_server, tmp_path, monkeypatch):
    named = tmp_path / "x;touch INJ;#.gguf"
    named.write_bytes(b"GGUF")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(LocalModelServer, "info", lambda self: {"model": self.model_name})
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        # main serves until interrupted: the first wait after the exports are printed is a Ctrl-C
        monkeypatch.setattr(local_model.time, "sleep", _interrupt)
        assert local_model.main(["--gguf", str(named), "--port", "18124"]) == 0
    lines = out.getvalue()
    assert lines.count("export ") == 3
    shown = subprocess.run(["bash", "-c", lines + '\nprintf %s "$KGMEM_MODEL"'], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout
    assert shown == "openai:x;touch INJ;#"
    assert not (tmp_path / "INJ").exists(), "a pasted export line ran a command"


def _interrupt(_seconds):
    raise KeyboardInterrupt


def test_the_log_folder_is_removed_on_stop_when_collected_and_at_exit(fake_server, tmp_path):
    server = LocalModelServer(fake_server, port=18125).start()
    folder = server.log_path.parent
    assert folder.is_dir() and folder.name.startswith("kgmem-llm-")
    server.stop()
    assert not folder.exists()

    never_started = LocalModelServer(fake_server)
    folder = never_started.log_path.parent
    del never_started
    gc.collect()
    assert not folder.exists()

    script = textwrap.dedent(f"""
        from langgraph_kgmem.local_model import LocalModelServer
        server = LocalModelServer({str(fake_server)!r})   # kept until the interpreter exits
        print(server.log_path.parent)
    """)
    left = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert left and not __import__("pathlib").Path(left).exists(), f"{left} was left behind at exit"
