"""The one logger: steps with durations, CI fold groups, -q and -v."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ortdist import run
from ortdist.log import QUIET, VERBOSE, Logger, log


def test_a_step_prints_its_start_and_duration() -> None:
    out = io.StringIO()
    logger = Logger(out)
    logger.ci_groups = False
    with logger.step("configure"):
        logger.info("configure is up to date")
    assert out.getvalue().splitlines() == [
        "ortdist: == configure ==",
        "ortdist: configure is up to date",
        "ortdist: configure done in 00:00",
    ]


def test_on_github_actions_a_step_is_a_fold_group_and_a_failure_says_so() -> None:
    out = io.StringIO()
    logger = Logger(out)
    logger.configure(ci_groups=True)
    with pytest.raises(RuntimeError), logger.step("build"):
        raise RuntimeError("boom")
    assert out.getvalue().splitlines() == ["::group::build", "::endgroup::", "ortdist: build failed after 00:00"]


def test_quiet_keeps_warnings_and_errors_only() -> None:
    out = io.StringIO()
    logger = Logger(out)
    logger.configure(verbosity=QUIET, ci_groups=False)
    logger.info("fetching")
    logger.command("+ cmake ...")
    logger.warning("analysing as written")
    logger.error("the build failed")
    assert out.getvalue().splitlines() == ["ortdist: warning: analysing as written", "ortdist: error: the build failed"]


def test_verbose_echoes_commands_in_full(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # `true` ignores its arguments: the full argv stands for a wrapper around the shown command.
    shown = run.Shown(["true", "--wrapper", "chroot", "/root", "cmake"], "[root] cmake")
    try:
        with (tmp_path / "a.log").open("w") as out:
            log.configure(verbosity=VERBOSE)
            run.call(shown, what="cmake", log=out)
            verbose = capsys.readouterr().err
            log.configure()
            run.call(shown, what="cmake", log=out)
            normal = capsys.readouterr().err
    finally:
        log.configure()
    assert verbose == "+ true --wrapper chroot /root cmake\n"
    assert normal == "+ [root] cmake\n"
