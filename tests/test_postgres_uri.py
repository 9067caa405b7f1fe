"""A PostgreSQL URI is parsed before any connection and never echoed with its password: a
password holding an unencoded space, ``@`` or ``/`` is refused at once (no pool retrying for 15
seconds), on every path that takes a URI (``KnowledgeGraph.open``, ``KGMEM_POSTGRES_URI`` for the
checkpointer and store, ``kgmem stats``). No server is needed: nothing here gets as far as one."""

from __future__ import annotations

import asyncio
import contextlib
import io
import time

import pytest

pytest.importorskip("psycopg")

from langgraph_kgmem.errors import ConfigurationError, KgmemError  # noqa: E402

BAD = [   # (URI, the parts of the password that must not be shown)
    ("postgresql://admin:hunter 2@127.0.0.1:1/kg", ("hunter", " 2@")),
    ("postgresql://admin:p@ss4word@127.0.0.1:1/kg", ("ss4word", "p@ss")),
    ("postgresql://admin:p/ss4word@127.0.0.1:1/kg", ("ss4word",)),
    ("postgresql://admin:p?ss4word@127.0.0.1:1/kg", ("ss4word",)),
    ("postgresql://admin:p%zzss4word@127.0.0.1:1/kg", ("zzss4word",)),
    ("postgresql://admin:sec'ret4<x@127.0.0.1:abc/kg", ("ret4",)),
    ("host=127.0.0.1 port=1 password=hunter 2 dbname=kg", ("hunter",)),
]


def _refused_fast(call) -> str:
    t0 = time.monotonic()
    with pytest.raises(ConfigurationError) as info:
        call()
    assert time.monotonic() - t0 < 5, "a malformed URI waited for a connection pool's timeout"
    return str(info.value)


@pytest.mark.parametrize("uri, shown", BAD, ids=[f"uri{i}" for i in range(len(BAD))])
def test_a_malformed_uri_is_refused_at_once_without_its_password(uri, shown, monkeypatch):
    from langgraph_kgmem import KnowledgeGraph
    from langgraph_kgmem.persistence import open_async_persistence, open_persistence

    messages = []
    if uri.startswith("postgresql://"):
        messages.append(_refused_fast(lambda: KnowledgeGraph.open(uri)))
    monkeypatch.setenv("KGMEM_POSTGRES_URI", uri)
    messages.append(_refused_fast(lambda: open_persistence(None)))

    async def open_async():
        async with open_async_persistence(None):
            pass

    messages.append(_refused_fast(lambda: asyncio.run(open_async())))
    for message in messages:
        assert "percent-encode the password" in message, message
        for part in shown:
            assert part not in message, f"{part!r} shown in: {message}"
    assert "KGMEM_POSTGRES_URI" in messages[-1]


def test_kgmem_stats_prints_no_password_of_a_malformed_uri():
    from langgraph_kgmem.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["stats", "--kg", "postgresql://admin:p@ss4word@127.0.0.1:1/kg"]) == 2
    assert "error:" in err.getvalue() and "ss4word" not in err.getvalue(), err.getvalue()


def test_a_well_formed_uri_parses_and_a_server_error_never_quotes_the_password():
    from langgraph_kgmem.kg.backends.postgres.pool import check_uri, storage_error

    uri = "postgresql://admin:pa%20ss%40word@db.example:5433/kg"
    assert check_uri(uri) == {"user": "admin", "password": "pa ss@word", "host": "db.example", "port": "5433",
                              "dbname": "kg"}
    error = storage_error(RuntimeError('password authentication failed: got "pa ss@word" for admin'), uri,
                          "connecting")
    assert isinstance(error, KgmemError) and "pa ss@word" not in str(error) and "ss@word" not in str(error)
    assert "db.example:5433/kg" in str(error)
