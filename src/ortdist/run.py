"""The one door to subprocesses.

Every command is echoed as ``+ cmd`` (with the environment variables it changes), so a log
reads like a shell transcript that can be replayed by hand. Output can be captured, streamed
line by line to a callback (used for ninja progress), and teed into a log file.

Every child leads a process group of its own (see ``children``): an interrupt or an error while
it runs ends the whole group, grandchildren under unshare/chroot included, and waits for it
before the exception travels on to the cleanup that deletes what the child was writing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import children
from .errors import OrtdistError
from .log import VERBOSE
from .log import log as status

Command = Sequence[str | os.PathLike[str]]


class Shown(list[str]):
    """An argv that echoes as ``shown``: a command run inside a root echoes as that command, not
    as the unshare/chroot wrapper around it. Logs still get the full, replayable argv."""

    def __init__(self, argv: Sequence[str], shown: str) -> None:
        super().__init__(argv)
        self.shown = shown


def format_command(cmd: Command, env: Mapping[str, str] | None = None, *, full: bool = False) -> str:
    changed = ""
    if env:
        diff = {k: v for k, v in env.items() if os.environ.get(k) != v}
        changed = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(diff.items()))
    shown = getattr(cmd, "shown", None)
    text = shown if shown and not full else shlex.join(os.fspath(c) for c in cmd)
    return f"+ {changed} {text}" if changed else f"+ {text}"


def _merged_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    if env is None:
        return None
    merged = dict(os.environ)
    merged.update(env)
    return merged


@contextlib.contextmanager
def running(cmd: Command, **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """Start ``cmd`` as the leader of a new session (so of a new process group), stdin closed.

    If the block raises anything (KeyboardInterrupt, Terminated, an error reading its output),
    the whole group is ended and gone before the exception goes on. ortdist itself stays in the
    terminal's foreground group: Ctrl-C reaches it, not the child, and this decides what follows.
    """
    argv = [os.fspath(c) for c in cmd]
    proc: subprocess.Popen[Any] | None = None
    try:
        with children.signals_deferred():  # started and recorded, or not started at all
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, **popen)
            children.started(proc.pid, format_command(cmd)[2:])  # a command in a root as run there
        yield proc
        proc.wait()
    except BaseException:
        if proc is not None:
            with children.signals_deferred():
                _end(proc, argv)
        raise
    finally:
        if proc is not None:
            children.ended(proc.pid)
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


def _end(proc: subprocess.Popen[Any], argv: list[str]) -> None:
    """End ``proc``'s group and wait for it; a reaped leader with no group left is not signalled
    (its pid may already be another process's)."""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    if proc.returncode is not None and not children.group_members(proc.pid):
        return
    left = children.end_group(proc.pid, reap=proc.pid if proc.returncode is None else None)
    if proc.returncode is None:
        proc.returncode = -9  # reaped by end_group
    if left:
        status.warning(f"processes {left} of `{shlex.join(argv)[:120]}` outlived SIGKILL")


def call(
    cmd: Command,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    log: TextIO | None = None,
    echo: bool = True,
    error: type[OrtdistError] = OrtdistError,
    what: str | None = None,
) -> None:
    """Run ``cmd`` to completion with its output going to ``log`` (or our stdout)."""
    line = format_command(cmd, env)
    if echo:
        status.command(format_command(cmd, env, full=status.level >= VERBOSE))
    out: TextIO = log if log is not None else sys.stdout
    if log is not None:
        log.write(format_command(cmd, env, full=True) + "\n")
        log.flush()
    with running(cmd, cwd=cwd, env=_merged_env(env), stdout=out, stderr=subprocess.STDOUT) as proc:
        code = proc.wait()
    if code != 0:
        raise error(
            f"{what or 'command'} failed with exit code {code}: {line[2:]}",
            fix=f"see the full output in {log.name}" if log is not None else None,
        )


def capture(
    cmd: Command,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    error: type[OrtdistError] = OrtdistError,
    what: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` quietly and return its stdout/stderr as text."""
    popen = {"cwd": cwd, "env": _merged_env(env), "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with running(cmd, text=True, errors="replace", **popen) as proc:
        stdout, stderr = proc.communicate()
    result = subprocess.CompletedProcess([os.fspath(c) for c in cmd], proc.returncode, stdout, stderr)
    if check and result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-15:]
        raise error(
            f"{what or 'command'} failed with exit code {result.returncode}: {format_command(cmd)[2:]}\n"
            + "\n".join(f"    {t}" for t in tail)
        )
    return result


def stream(
    cmd: Command,
    *,
    on_line: Callable[[str], None],
    log: TextIO,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run ``cmd``, writing every output line to ``log`` and handing it to ``on_line``.

    Returns the exit code; the caller decides what a failure means (it has the context to
    explain it, e.g. the failing ninja edge).
    """
    status.command(format_command(cmd, env, full=status.level >= VERBOSE))
    log.write(format_command(cmd, env, full=True) + "\n")
    log.flush()
    with running(
        cmd,
        cwd=cwd,
        env=_merged_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
    ) as proc:
        assert proc.stdout is not None
        for text in proc.stdout:
            log.write(text)
            on_line(text.rstrip("\n"))
        log.flush()
        return proc.wait()


def returncode(cmd: Command, *, log: TextIO, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run ``cmd`` silently with its output into ``log``; for callers to whom the exit code is the
    result (a smoke case that failed), not an error."""
    with running(cmd, cwd=cwd, env=_merged_env(env), stdout=log, stderr=subprocess.STDOUT) as proc:
        return proc.wait()
