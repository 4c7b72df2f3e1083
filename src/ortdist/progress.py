"""Ninja's ``[n/N]`` lines as a progress bar with ETA, and failure excerpts from a build log."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

_STATUS = re.compile(r"^\[(?P<done>\d+)/(?P<total>\d+)\]\s*(?P<what>.*)$")


def parse_status(line: str) -> tuple[int, int, str] | None:
    m = _STATUS.match(line)
    return (int(m["done"]), int(m["total"]), m["what"]) if m else None


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def eta(done: int, total: int, elapsed: float, first_done: int = 0) -> float | None:
    """Seconds left, from the rate since this run started (a resumed build starts at first_done)."""
    progressed = done - first_done
    if progressed <= 0 or elapsed <= 0:
        return None
    return (total - done) * elapsed / progressed


def render(done: int, total: int, elapsed: float, first_done: int = 0, width: int = 30) -> str:
    frac = done / total if total else 0.0
    filled = int(frac * width)
    left = eta(done, total, elapsed, first_done)
    eta_text = format_duration(left) if left is not None else "--:--"
    bar = "#" * filled + "." * (width - filled)
    return f"[{bar}] {done}/{total} {frac:4.0%} elapsed {format_duration(elapsed)} ETA {eta_text}"


@dataclass
class NinjaProgress:
    """Feeds on output lines; draws one updating line on a TTY, a line per 5% otherwise."""

    out: TextIO = field(default_factory=lambda: sys.stderr)
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=0.0)
    first_done: int | None = None
    last_bucket: int = -1
    last: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        self.start = self.clock()

    def feed(self, line: str) -> None:
        status = parse_status(line)
        if status is None:
            return
        done, total, _ = status
        if done == 0:
            return  # "[0/2] Re-checking globbed directories...": cmake's pre-step, not the build
        if self.first_done is None or total != self.last[1]:
            self.first_done = done - 1  # a new ninja run (or a resumed one): measure its own rate
            self.last_bucket = -1
        self.last = (done, total)
        text = render(done, total, self.clock() - self.start, self.first_done)
        if self.out.isatty():
            self.out.write("\r" + text)
            self.out.flush()
        else:
            bucket = done * 20 // max(total, 1)
            if bucket != self.last_bucket:
                self.last_bucket = bucket
                self.out.write(text + "\n")
                self.out.flush()

    def close(self) -> None:
        if self.out.isatty() and self.last != (0, 0):
            self.out.write("\n")
            self.out.flush()


@dataclass(frozen=True)
class FailureExcerpt:
    target: str
    command: str
    errors: tuple[str, ...]


def failure_excerpt(lines: list[str], max_errors: int = 12) -> FailureExcerpt | None:
    """Find ninja's first ``FAILED:`` edge: its target, the command, and the first error lines."""
    for i, line in enumerate(lines):
        if not line.startswith("FAILED: "):
            continue
        target = line[len("FAILED: ") :].strip()
        command = lines[i + 1].strip() if i + 1 < len(lines) else ""
        errors: list[str] = []
        for follow in lines[i + 2 :]:
            if follow.startswith(("FAILED: ", "ninja: build stopped")) or parse_status(follow):
                break
            if re.search(r"(error|Error|undefined reference|fatal)", follow):
                errors.append(follow.rstrip())
            if len(errors) >= max_errors:
                break
        if not errors:
            errors = [f.rstrip() for f in lines[i + 2 : i + 2 + max_errors] if not parse_status(f)]
        return FailureExcerpt(target=target, command=command, errors=tuple(errors))
    return None
