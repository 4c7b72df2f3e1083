"""The rules tests/conftest.py sets for the whole suite, run on a throwaway suite with pytester."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
SUITE = """
import os
import pytest

@pytest.mark.integration
def test_a_build():
    pytest.skip("the debian-sysroot toolchain needs root (see README)")

@pytest.mark.integration
def test_another_build():
    pass

def test_a_unit():
    assert not [n for n in os.environ if n.startswith("ORTDIST_")]
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n  integration: real builds\n  cuda_tree: cuda\n")
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("ORTDIST_COMPILER_CACHE", "sccache")  # as the README advises for runners
    return pytester


def test_plain_pytest_runs_the_unit_tests_only(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess()
    result.assert_outcomes(passed=1, deselected=2)


def test_integration_tests_run_when_asked_and_may_skip_on_a_developer_machine(suite: pytest.Pytester) -> None:
    suite.runpytest_inprocess("--integration").assert_outcomes(passed=2, skipped=1)
    suite.runpytest_inprocess("-m", "integration").assert_outcomes(passed=1, skipped=1, deselected=1)


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_skipped_integration_test_fails_and_says_why(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    result = suite.runpytest_inprocess("--integration")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_a_build would have skipped under CI: *needs root*"])


def test_ci_set_to_false_allows_skips(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    suite.runpytest_inprocess("--integration").assert_outcomes(passed=2, skipped=1)
