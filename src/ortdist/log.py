"""The one logger: status lines, steps with durations, CI fold groups, -v/-q.

Status goes to stderr so a command's own output (``ortdist plan`` JSON, ``inspect``) stays
clean on stdout. Under GitHub Actions each step is a ``::group::`` so a 30-minute build log
folds into one line per step.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from .progress import format_duration

QUIET, NORMAL, VERBOSE = 0, 1, 2


class Logger:
    """``ortdist:``-prefixed status lines; ``step()`` times a block and folds it on CI."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self.level = NORMAL
        self.ci_groups = os.environ.get("GITHUB_ACTIONS") == "true"

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def configure(self, *, verbosity: int = NORMAL, ci_groups: bool | None = None) -> None:
        self.level = verbosity
        if ci_groups is not None:
            self.ci_groups = ci_groups

    def _write(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def info(self, message: str) -> None:
        if self.level >= NORMAL:
            self._write(f"ortdist: {message}")

    def detail(self, message: str) -> None:
        """Only with -v."""
        if self.level >= VERBOSE:
            self._write(f"ortdist: {message}")

    def warning(self, message: str) -> None:
        self._write(f"ortdist: warning: {message}")

    def error(self, message: str) -> None:
        self._write(f"ortdist: error: {message}")

    def command(self, line: str) -> None:
        """A command about to run (``+ argv``): shown normally, hidden with -q."""
        if self.level >= NORMAL:
            self._write(line)

    def output(self, line: str) -> None:
        """A line of a child's output that the user follows live (the clean-root check)."""
        if self.level >= NORMAL:
            self._write(line)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        """``== name ==`` ... ``name done in 1m02s`` (or a fold group on CI); failures say so too."""
        self._write(f"::group::{name}" if self.ci_groups else f"ortdist: == {name} ==")
        started = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            took = format_duration(time.monotonic() - started)
            if self.ci_groups:
                self._write("::endgroup::")
            if ok:
                self.info(f"{name} done in {took}")
            else:
                self._write(f"ortdist: {name} failed after {took}")


log = Logger()
