"""The command runner every step is handed: real subprocesses in a root, or a recording fake.

A step describes a command (argv, which root, which binds, which environment) and the runner
decides how it runs. The real one wraps it with the toolchain and runs it through ``run``, the
one door to subprocesses; ``RecordingRunner`` keeps the commands so unit tests assert what a
step would run, and plays the effects a test scripts for them (files a command would write).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

from .. import run
from ..errors import OrtdistError
from ..toolchains import Bind, Toolchain


@dataclass(frozen=True)
class Command:
    """What to run and where: on the host (``root`` None) or inside ``root`` with ``binds``."""

    argv: tuple[str, ...]
    root: Path | None = None
    binds: tuple[Bind, ...] = ()
    env: Mapping[str, str] | None = None

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str = ""
    stderr: str = ""


class Runner(Protocol):
    def call(self, cmd: Command, *, log: TextIO, error: type[OrtdistError], what: str) -> None:
        """Run to completion, output into ``log``; a non-zero exit raises ``error``."""
        ...

    def capture(
        self, cmd: Command, *, check: bool = True, error: type[OrtdistError] = OrtdistError, what: str = ""
    ) -> Result:
        """Run quietly and return the output; with ``check`` a non-zero exit raises ``error``."""
        ...

    def stream(self, cmd: Command, *, on_line: Callable[[str], None], log: TextIO) -> int:
        """Run, handing each output line to ``on_line`` (and ``log``); return the exit code."""
        ...


@dataclass(frozen=True)
class SubprocessRunner:
    toolchain: Toolchain

    def argv(self, cmd: Command) -> list[str]:
        if cmd.root is None:
            return list(cmd.argv)
        return self.toolchain.wrap(cmd.root, cmd.argv, binds=cmd.binds, env=cmd.env)

    def call(self, cmd: Command, *, log: TextIO, error: type[OrtdistError], what: str) -> None:
        run.call(self.argv(cmd), log=log, error=error, what=what)

    def capture(
        self, cmd: Command, *, check: bool = True, error: type[OrtdistError] = OrtdistError, what: str = ""
    ) -> Result:
        done = run.capture(self.argv(cmd), check=check, error=error, what=what or None)
        return Result(done.returncode, done.stdout, done.stderr)

    def stream(self, cmd: Command, *, on_line: Callable[[str], None], log: TextIO) -> int:
        return run.stream(self.argv(cmd), on_line=on_line, log=log)


Effect = Callable[[Command], Result | None]


@dataclass
class RecordingRunner:
    """Records every command; ``on(text, effect)`` scripts what a matching command does."""

    commands: list[Command] = field(default_factory=list)
    effects: list[tuple[str, Effect]] = field(default_factory=list)

    def on(self, contains: str, effect: Effect | None = None, *, stdout: str = "", returncode: int = 0) -> None:
        """Commands whose text contains ``contains`` run ``effect`` (or just return this output)."""
        self.effects.append((contains, effect or (lambda _cmd: Result(returncode, stdout))))

    def _play(self, cmd: Command) -> Result:
        self.commands.append(cmd)
        result = Result(0)
        for contains, effect in self.effects:
            if contains in cmd.text:
                result = effect(cmd) or result
        return result

    def texts(self) -> list[str]:
        return [c.text for c in self.commands]

    def call(self, cmd: Command, *, log: TextIO, error: type[OrtdistError], what: str) -> None:
        result = self._play(cmd)
        log.write(result.stdout)
        if result.returncode != 0:
            raise error(f"{what} failed with exit code {result.returncode}: {cmd.text}")

    def capture(
        self, cmd: Command, *, check: bool = True, error: type[OrtdistError] = OrtdistError, what: str = ""
    ) -> Result:
        result = self._play(cmd)
        if check and result.returncode != 0:
            raise error(f"{what or 'command'} failed with exit code {result.returncode}: {cmd.text}")
        return result

    def stream(self, cmd: Command, *, on_line: Callable[[str], None], log: TextIO) -> int:
        result = self._play(cmd)
        for line in result.stdout.splitlines():
            log.write(line + "\n")
            on_line(line)
        return result.returncode
