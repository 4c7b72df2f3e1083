"""The rules tests/conftest.py sets for the whole suite, run on a throwaway suite with pytester."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import ci_policy

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
    markers = ["integration: real builds", "recipe_tree(name): a recipe's tree"]
    pytester.makeini("[pytest]\nmarkers =\n" + "".join(f"  {m}\n" for m in markers))
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("ORTDIST_COMPILER_CACHE", "sccache")  # as the README advises for runners
    monkeypatch.setenv("ORTDIST_CI_PACE", "1")  # as fast as the measuring machine: no slow day, no probe
    monkeypatch.setenv("ORTDIST_TEST_RESULTS", str(pytester.path / "results"))  # the claims record
    monkeypatch.setenv("ORTDIST_PROJECT", str(CONFTEST.parents[1]))  # the recipes (pytester runs elsewhere)
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


# A deliberately broken EP test: it must never read as a plain green pass.
BROKEN_EP = """
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.recipe_tree("xnnpack-linux")]

def test_the_ep_takes_the_conv():
    assert False, "broken on purpose"
"""


COSTS = ci_policy.load_costs()


def turn_starting_at(recipe: str) -> str:
    """The landing number (ORTDIST_CI_TURN) whose rotation starts at ``recipe``."""
    return str(sorted(COSTS.rotation).index(recipe))


XNNPACK_FIRST = turn_starting_at("xnnpack-linux")
SLIM_FIRST = turn_starting_at("slim-linux")


def cache_tree(cache: Path, recipe: str) -> None:
    """A cached build tree of ``recipe``, as ``recipe_tree_is_cached`` sees one."""
    build = cache / "work" / recipe / "build"
    build.mkdir(parents=True)
    (build / "libonnxruntime.so.1.21.0").write_bytes(b"")


@pytest.fixture
def broken_ep(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    suite.makepyfile(test_ep=BROKEN_EP)
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))  # nothing cached
    monkeypatch.setenv("CI", "1")
    return suite


def test_an_uncached_recipes_tests_are_reported_as_not_proven(broken_ep: pytest.Pytester) -> None:
    broken_ep.makepyfile(test_ep=BROKEN_EP.replace("xnnpack-linux", "xnnpack-dnnl-linux"))  # not in the rotation
    result = broken_ep.runpytest_inprocess("--integration")
    result.assert_outcomes(passed=2, failed=1, deselected=1)  # the main recipe's skip fails under CI
    result.stdout.fnmatch_lines(
        [
            "ortdist: what this run proved*",
            "  cpu-linux * FAILED: 1 test(s) failed",
            "  xnnpack-dnnl-linux * NOT PROVEN: 1 test(s) deselected (no cached build tree)",
            "  GPU (CUDA on a device)  NOT PROVEN here: no GPU*",
            "*ORTDIST_TEST_RECIPES=xnnpack-dnnl-linux*",
        ]
    )


def test_ci_builds_the_rotations_pick_from_cold_last_and_reports_it(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under CI the commit orders the rotation: its uncached recipe's tests run (last) though its tree
    is not cached, and a broken one fails the run."""
    monkeypatch.setenv("ORTDIST_CI_TURN", XNNPACK_FIRST)
    result = broken_ep.runpytest_inprocess("--integration", "-v", "-k", "not a_build")
    result.assert_outcomes(passed=2, failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            f"ortdist: the rotation for landing {XNNPACK_FIRST}: "
            f"{', '.join(ci_policy.rotation_order(COSTS, int(XNNPACK_FIRST)))}; "
            "uncached, built from cold last, the first CI's time left holds: xnnpack-linux",
            "*test_suite.py::test_another_build PASSED*",
            "*test_ep.py::test_the_ep_takes_the_conv FAILED*",
            "  xnnpack-linux * FAILED: 1 test(s) failed",
        ]
    )


# A passing EP test that says which Pythons its build was given (the ci_python fixture).
EP_WITH_PYTHONS = """
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.recipe_tree("{recipe}")]

def test_the_ep_takes_the_conv(ci_python):
    print("pythons:", ci_python("{recipe}"))
"""


def test_the_rotation_builds_fewer_wheels_where_ci_time_holds_only_those(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """62 minutes gone: 23 left would not hold xnnpack-linux's 20 with every Python at this run's
    pace (x1.02 x 1.25 = 25.5), but holds it with the core's Python and 3.11 (10 x 1.02 x 1.25 = 12.7)."""
    import time

    broken_ep.makepyfile(test_ep=EP_WITH_PYTHONS.format(recipe="xnnpack-linux"))
    monkeypatch.setenv("ORTDIST_CI_TURN", XNNPACK_FIRST)
    cache_tree(Path(os.environ["ORTDIST_CACHE"]), "cpu-linux")  # built earlier in this run
    monkeypatch.setenv("ORTDIST_CI_STARTED", str(time.time() - 62 * 60))
    result = broken_ep.runpytest_inprocess("--integration", "-s", "-k", "not a_build")
    result.assert_outcomes(passed=3, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*pythons: ('3.13', '3.11')",
            f"  xnnpack-linux * proven from cold (built in this run), the rotation's pick for landing {XNNPACK_FIRST}, "
            "without the wheels for Python 3.10, 3.12, 3.14 (CI's time)",
        ]
    )
    monkeypatch.setenv("ORTDIST_CI_STARTED", str(time.time() - 40 * 60))  # 45 left hold every Python
    result = broken_ep.runpytest_inprocess("--integration", "-s", "-k", "not a_build")
    result.stdout.fnmatch_lines(
        [
            "*pythons: None",
            f"  xnnpack-linux * proven from cold (built in this run), the rotation's pick for landing {XNNPACK_FIRST}",
        ]
    )
    assert "without the wheels" not in result.stdout.str()


@pytest.mark.parametrize(
    ("minutes_gone", "why"),
    [
        (
            85,
            "0 min left of CI's 90, its build and tests need ~17 with Python 3.13, 3.11 alone (10 measured, "
            "x1.4 for this run's pace, x1.25)",
        ),
        # 13 minutes would hold the measured 10 x 1.25 on the measuring machine; this run is 18% slower
        (
            72,
            "13 min left of CI's 90, its build and tests need ~15 with Python 3.13, 3.11 alone (10 measured, "
            "x1.2 for this run's pace, x1.25)",
        ),
    ],
)
def test_the_rotations_pick_left_out_for_time_is_not_proven_not_failed(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, minutes_gone: int, why: str
) -> None:
    """Late in CI's 90 minutes the pick is not built: the claims table says why, and the run passes."""
    import time

    monkeypatch.setenv("ORTDIST_CI_TURN", XNNPACK_FIRST)
    cache_tree(Path(os.environ["ORTDIST_CACHE"]), "cpu-linux")  # built earlier in this run
    monkeypatch.setenv("ORTDIST_CI_STARTED", str(time.time() - minutes_gone * 60))
    result = broken_ep.runpytest_inprocess("--integration", "-k", "not a_build")
    result.assert_outcomes(passed=2, skipped=1, deselected=1)
    result.stdout.fnmatch_lines(
        [f"  xnnpack-linux * NOT PROVEN: the rotation for landing {XNNPACK_FIRST} left it out: {why}"]
    )


def test_the_rotation_builds_the_next_recipe_that_fits_when_the_first_does_not(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit puts slim-linux first; 28 minutes left hold neither of its builds (30 with fewer
    Pythons), so xnnpack-linux, next in the order, is built, with every Python (25)."""
    import time

    broken_ep.makepyfile(
        test_ep=EP_WITH_PYTHONS.format(recipe="xnnpack-linux"),
        test_slim=EP_WITH_PYTHONS.format(recipe="slim-linux"),
    )
    monkeypatch.setenv("ORTDIST_CI_TURN", SLIM_FIRST)
    cache_tree(Path(os.environ["ORTDIST_CACHE"]), "cpu-linux")  # built earlier in this run
    monkeypatch.setenv("ORTDIST_CI_STARTED", str(time.time() - 57 * 60))
    result = broken_ep.runpytest_inprocess("--integration", "-v", "-k", "not a_build")
    result.assert_outcomes(passed=3, skipped=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*test_suite.py::test_another_build PASSED*",
            "*test_slim.py::test_the_ep_takes_the_conv SKIPPED*",
            "*test_ep.py::test_the_ep_takes_the_conv PASSED*",
            f"  slim-linux * NOT PROVEN: the rotation for landing {SLIM_FIRST} left it out: 28 min left of CI's 90, "
            "its build and tests need ~30 with Python 3.13, 3.11 alone (24 measured, x1.0 for this run's pace, x1.25)",
            f"  xnnpack-linux * proven from cold (built in this run), the rotation's pick for landing {SLIM_FIRST}",
        ]
    )


def test_the_rotation_builds_one_recipe_from_cold_per_run(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken_ep.makepyfile(
        test_ep=EP_WITH_PYTHONS.format(recipe="xnnpack-linux"),
        test_slim=EP_WITH_PYTHONS.format(recipe="slim-linux"),
    )
    monkeypatch.setenv("ORTDIST_CI_TURN", SLIM_FIRST)
    result = broken_ep.runpytest_inprocess("--integration", "-k", "not a_build")
    result.assert_outcomes(passed=3, skipped=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            f"  slim-linux * proven from cold (built in this run), the rotation's pick for landing {SLIM_FIRST}",
            f"  xnnpack-linux * NOT PROVEN: the rotation for landing {SLIM_FIRST} left it out: one cold build per run, "
            "and slim-linux came first in this landing's order",
        ]
    )


SLOW_MAIN = """
import pytest

pytestmark = [pytest.mark.integration]

def test_the_main_wheel(ci_python):
    print("main pythons:", ci_python("cpu-linux"))
"""


def test_a_slow_machine_builds_the_main_recipe_with_fewer_wheels_and_no_rotation(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x1.25 the measuring machine: every wheel would need ~87 of the 85 minutes left, the core's
    Python and 3.11 ~80, so cpu-linux is built with those (its tests all run) and the rotation waits."""
    broken_ep.makepyfile(test_main=SLOW_MAIN)
    monkeypatch.setenv("ORTDIST_CI_TURN", XNNPACK_FIRST)
    monkeypatch.setenv("ORTDIST_CI_PACE", "1.25")
    result = broken_ep.runpytest_inprocess("--integration", "-s", "-k", "not a_build")
    result.assert_outcomes(passed=3, deselected=2)  # a_build (-k), xnnpack-linux's (no tree, no rotation)
    result.stdout.fnmatch_lines(
        [
            "ortdist: cpu-linux on a slow machine (pace probe x1.25): every wheel needs ~87 min*; no rotation*",
            "*main pythons: ('3.13', '3.11')*",
            "  cpu-linux * PARTLY PROVEN from cold (built in this run), without the wheels for Python 3.10, 3.12, "
            "3.14 (a slow machine (pace probe x1.25): every wheel needs ~87 min (61 measured, x1.25, x1.15), 85 min "
            "are left of CI's 90; built with Python 3.13, 3.11 alone (~80 min)): 2 passed, 1 not selected*",
            "  xnnpack-linux * NOT PROVEN: 1 test(s) deselected (no cached build tree)",
        ]
    )
    assert "the rotation for landing" not in result.stdout.str()


def test_a_machine_too_slow_for_the_main_recipe_fails_ci_before_any_test(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x2: even the core's Python and 3.11 need ~128 of the 85 minutes: the run fails at once, saying
    why and how to fix it, instead of passing without cpu-linux (or timing out an hour later)."""
    broken_ep.makepyfile(test_main=SLOW_MAIN)
    monkeypatch.setenv("ORTDIST_CI_PACE", "2")
    result = broken_ep.runpytest_inprocess("--integration")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes()  # nothing ran
    output = result.stdout.str() + result.stderr.str()
    assert "cpu-linux's cold build and tests need ~128 min even with Python 3.13, 3.11 alone" in output
    assert "this run cannot prove cpu-linux, so CI fails rather than pass without it" in output
    # With cpu-linux's tree cached the same machine proves it from the tree.
    cache_tree(Path(os.environ["ORTDIST_CACHE"]), "cpu-linux")
    result = broken_ep.runpytest_inprocess("--integration", "-k", "not a_build")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # only because test_ep.py's xnnpack test is broken
    result.stdout.fnmatch_lines(["  cpu-linux * PARTLY PROVEN from a cached build tree*"])


def test_every_run_writes_its_claims_for_the_record(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("ORTDIST_TEST_RECIPES", "xnnpack-linux")
    broken_ep.runpytest_inprocess("--integration", "-k", "not a_build")
    results = broken_ep.path / "results"
    record = json.loads((results / "claims.json").read_text())
    assert record["test_recipes"] == "xnnpack-linux" and record["ci"] is True and record["date"]
    claims = record["claims"]
    assert claims["xnnpack-linux"]["status"] == "failed" and claims["xnnpack-linux"]["failed"] == 1
    assert claims["cpu-linux"]["status"] == "partly-proven" and len(claims["cpu-linux"]["plan_digest"]) == 64
    assert claims["GPU (CUDA on a device)"]["status"] == "not-proven"
    text = (results / "claims.txt").read_text()
    assert text.startswith("ortdist: what this run proved") and "xnnpack-linux" in text and "FAILED" in text


def test_a_recipe_asked_for_is_built_and_its_failure_reported(
    broken_ep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTDIST_TEST_RECIPES", "xnnpack-linux")
    result = broken_ep.runpytest_inprocess("--integration", "-k", "not a_build")
    result.assert_outcomes(passed=2, failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            # -k left one of its tests out: a partial run never reads as the whole claim proven.
            "  cpu-linux * PARTLY PROVEN from cold (built in this run): 1 passed, 1 not selected in this run",
            "  xnnpack-linux * FAILED*",
        ]
    )


def test_a_cached_recipe_is_proven_from_its_tree(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    suite.makepyfile(test_ep=BROKEN_EP.replace("assert False", "assert True"))
    cache_tree(tmp_path / "cache", "xnnpack-linux")
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    result = suite.runpytest_inprocess("--integration", "-k", "not a_build")
    result.assert_outcomes(passed=3, deselected=1)
    result.stdout.fnmatch_lines(["  xnnpack-linux * proven from a cached build tree"])


def test_a_run_of_some_modules_does_not_claim_the_main_recipe(suite: pytest.Pytester) -> None:
    """The main recipe's tests are every module without a recipe_tree mark: a run that named one of
    them proves it partly, and says which did not run (a claims record folds only full proofs)."""
    import json

    suite.makepyfile(test_tooling="import pytest\n\n@pytest.mark.integration\ndef test_tool():\n    pass\n")
    result = suite.runpytest_inprocess("--integration", "test_tooling.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  cpu-linux * PARTLY PROVEN *: 1 passed; not run here: test_suite.py"])
    record = json.loads((suite.path / "results" / "claims.json").read_text())
    assert record["claims"]["cpu-linux"]["status"] == "partly-proven"
    whole = suite.runpytest_inprocess("--integration")  # every module collected: nothing said missing
    assert "not run here" not in whole.stdout.str()


def test_a_pytest_raises_block_holds_only_the_statement_that_raises() -> None:
    """Lines after the raising call never run: an assertion there cannot fail."""
    import ast

    offenders = []
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.With) and len(node.body) > 1:
                for item in node.items:
                    call = item.context_expr
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "raises"
                    ):
                        offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders
