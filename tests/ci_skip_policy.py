"""The CI skip policy, as pytest hooks (tests/conftest.py imports them; test_ci_skip_policy.py runs
this very file as the conftest of a pytester run).

In CI (``CI=true``) a skip is a failure unless it is declared legitimate: a backend or server
test that silently skipped would otherwise pass the run without testing anything. Skips happen in
two places and both are covered:

- a test skipped while it runs (``pytest.skip``, ``skipif``, an ``importorskip`` in its body)
  fails unless the test is marked ``may_skip``;
- a module skipped while it is collected (a module-level ``pytest.importorskip`` or
  ``pytest.skip(allow_module_level=True)``) is a collection error unless the module is named in
  :data:`MAY_SKIP_MODULES`. Such a skip removes every test of the module before any test hook
  runs, so the per-test rule above never sees them.
"""

from __future__ import annotations

import os

import pytest

# file names (e.g. "test_gpu_only.py") of modules that may skip whole at collection time in CI:
# a module is not marked before its own import succeeded, so the allowance is declared here
MAY_SKIP_MODULES: frozenset[str] = frozenset()


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _reason(longrepr: object) -> str:
    return longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def pytest_configure(config):
    config.addinivalue_line("markers", "may_skip: a test whose skip is legitimate in CI (e.g. it needs a CUDA device)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and item.get_closest_marker("may_skip") is None and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every test here: {_reason(report.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and isinstance(collector, pytest.Module) \
            and collector.path.name not in MAY_SKIP_MODULES:
        report.outcome = "failed"
        report.longrepr = (f"{collector.path.name} skipped whole at collection in CI, which must run every test "
                           f"here: {_reason(report.longrepr)}. Skip inside the tests that need it (a skip "
                           f"the tests report), or name the module in MAY_SKIP_MODULES")
