"""The CI skip policy itself (tests/ci_skip_policy.py), run on small test trees by pytester: with
CI=true every kind of skip fails the run unless it is declared legitimate."""

from __future__ import annotations

from pathlib import Path

import pytest

import ci_skip_policy

pytest_plugins = ["pytester"]

MISSING_MODULE = "kgmem_no_such_module_for_the_skip_policy"
PASSING = "def test_runs():\n    assert True\n"


@pytest.fixture
def tree(pytester, monkeypatch):
    """A pytester tree whose conftest is the policy module, and a module that passes."""
    monkeypatch.delenv("CI", raising=False)
    pytester.makeconftest(Path(ci_skip_policy.__file__).read_text(encoding="utf-8"))
    pytester.makepyfile(test_passing=PASSING)
    return pytester


def test_a_module_level_importorskip_fails_the_run_in_ci(tree, monkeypatch):
    tree.makepyfile(test_needs_missing=f"import pytest\npytest.importorskip({MISSING_MODULE!r})\n" + PASSING)
    outside = tree.runpytest("-p", "no:cacheprovider")
    outside.assert_outcomes(passed=1, skipped=1)   # outside CI the skip stays a skip
    assert outside.ret == pytest.ExitCode.OK
    monkeypatch.setenv("CI", "true")
    in_ci = tree.runpytest("-p", "no:cacheprovider")
    in_ci.assert_outcomes(errors=1)
    assert in_ci.ret != pytest.ExitCode.OK
    in_ci.stdout.fnmatch_lines([f"*test_needs_missing.py skipped whole at collection in CI*{MISSING_MODULE}*"])


def test_a_module_level_skip_fails_too_unless_the_module_is_allowed(tree, monkeypatch):
    tree.makepyfile(test_skipped_module="import pytest\npytest.skip('no device', allow_module_level=True)\n"
                                        + PASSING)
    monkeypatch.setenv("CI", "true")
    assert tree.runpytest("-p", "no:cacheprovider").ret != pytest.ExitCode.OK
    conftest = Path(ci_skip_policy.__file__).read_text(encoding="utf-8")
    tree.makeconftest(conftest.replace("MAY_SKIP_MODULES: frozenset[str] = frozenset()",
                                       "MAY_SKIP_MODULES: frozenset[str] = frozenset({'test_skipped_module.py'})"))
    allowed = tree.runpytest("-p", "no:cacheprovider")
    allowed.assert_outcomes(passed=1, skipped=1)
    assert allowed.ret == pytest.ExitCode.OK


def test_a_test_that_skips_while_running_fails_in_ci_unless_marked_may_skip(tree, monkeypatch):
    tree.makepyfile(test_runtime_skips="""
        import pytest

        def test_needs_missing():
            pytest.importorskip("%s")

        @pytest.mark.skipif(True, reason="never here")
        def test_skipif():
            pass

        @pytest.mark.may_skip
        def test_allowed():
            pytest.skip("no CUDA device")
    """ % MISSING_MODULE)
    monkeypatch.setenv("CI", "true")
    result = tree.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1)   # skipif skips in setup: an error
    result.stdout.fnmatch_lines(["*skipped in CI, which must run every test here*"])


def test_the_suites_conftest_registers_the_policy_hooks(request):
    """The policy acts only through hooks that tests/conftest.py registers (by importing them):
    a conftest that stopped doing so would leave every test above green and CI skipping freely."""
    conftest = (Path(__file__).parent / "conftest.py").resolve()
    for hook in ("pytest_configure", "pytest_make_collect_report", "pytest_runtest_makereport"):
        registered = [impl.function for impl in getattr(request.config.pluginmanager.hook, hook).get_hookimpls()
                      if Path(getattr(impl.plugin, "__file__", "") or "/").resolve() == conftest]
        assert [(f.__module__.rsplit(".", 1)[-1], f.__name__) for f in registered] == [("ci_skip_policy", hook)], hook
