"""Child process groups: every command ortdist runs is a process group of its own, ended as a whole.

``subprocess`` kills only its direct child, so apt/dpkg under unshare/chroot went on writing into
a tree the cleanup was deleting. Here each child leads a new session (Ctrl-C at the terminal
reaches ortdist alone, which stays in the foreground), and on an interrupt or error its whole
group gets SIGTERM, a short grace, then SIGKILL; only once it is gone does cleanup run.

A run under the cache lock also records its groups in a ledger beside ``build.lock``, with each
leader's start time, so the next run can end what a ``kill -9``'d ortdist orphaned without ever
signalling a recycled pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

GRACE_SECONDS = 3.0  # after SIGTERM, before SIGKILL: apt and dpkg stop cleanly well within it
GONE_SECONDS = 10.0  # after SIGKILL: a process in uninterruptible sleep (D) may take a moment


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP): raised where Ctrl-C raises KeyboardInterrupt, so the same cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def signals_handled() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C while the block runs (by default they kill us on the
    spot, cleanup skipped, children orphaned); the previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_code(exc: KeyboardInterrupt) -> int:
    """The shell's convention: 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + (exc.signum if isinstance(exc, Terminated) else signal.SIGINT)


def signal_name(exc: KeyboardInterrupt) -> str:
    return signal.Signals(exc.signum).name if isinstance(exc, Terminated) else "SIGINT"


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold off SIGINT/SIGTERM while a group is being ended (a second Ctrl-C must not abandon it
    half-way); one that arrived is raised afterwards. Only the main thread can swap handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, lambda signum, _f: pending.append(signum)) for sig in watched}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending:
        if pending[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(pending[0])


# --- /proc ---------------------------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (which may hold spaces): field 3 (state) first."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot: with the pid, names one process for good."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def alive(pid: int) -> bool:
    """Running: a zombie is dead (it holds nothing, and nobody here may ever reap it)."""
    fields = _stat_fields(pid)
    return fields is not None and bool(fields) and fields[0] not in ("Z", "X")


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def group_members(pgid: int) -> list[int]:
    """Live processes of group ``pgid``. Zombies do not count: nobody may ever reap them (here
    PID 1 does not), and they hold no files open."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and len(fields) > 2 and alive(int(entry.name)) and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return sorted(members)


def _wait_gone(pgid: int, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        left = group_members(pgid)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def end_group(pgid: int, grace: float = GRACE_SECONDS, reap: int | None = None) -> list[int]:
    """SIGTERM the group, SIGKILL what is left after ``grace``; return the pids that survived even
    that. ``reap`` is our own child, the leader: waited for so it does not linger as a zombie."""

    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def reap_leader() -> None:
        if reap is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(reap, os.WNOHANG)

    signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while group_members(pgid) and time.monotonic() < deadline:
        reap_leader()
        time.sleep(0.05)
    reap_leader()
    if group_members(pgid):
        signal_group(signal.SIGKILL)
    left = _wait_gone(pgid, GONE_SECONDS)
    reap_leader()
    return left


# --- the ledger of a run's groups ------------------------------------------------------------------
@dataclass(frozen=True)
class Group:
    pgid: int
    started: int  # the leader's start time (clock ticks since boot)
    command: str

    def alive(self) -> list[int]:
        """Its live members, if it is still the group we started (not a recycled pid's)."""
        now = start_time(self.pgid)
        if now is not None and now != self.started:
            return []  # the leader's pid belongs to another process now
        members = group_members(self.pgid)
        # Without its leader, a group's id cannot be reused while members remain; theirs start later.
        return [pid for pid in members if (start_time(pid) or 0) >= self.started]


class Ledger:
    """The process groups a run has running, in a small JSON file beside ``build.lock``.

    Written on every start and end of a child (a few hundred bytes), so after ``kill -9`` it
    names exactly the groups that may have outlived us."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._groups: dict[int, Group] = {}
        self._lock = threading.Lock()

    def add(self, group: Group) -> None:
        with self._lock:
            self._groups[group.pgid] = group
            self._write()

    def remove(self, pgid: int) -> None:
        with self._lock:
            if self._groups.pop(pgid, None) is not None:
                self._write()

    def _write(self) -> None:
        data = {
            "boot_id": boot_id(),
            "groups": [{"pgid": g.pgid, "started": g.started, "command": g.command} for g in self._groups.values()],
        }
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def recorded(self) -> list[Group]:
        """What an earlier run left in the file (nothing after a reboot: start times restart)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("boot_id") != boot_id():
                return []
            return [Group(int(g["pgid"]), int(g["started"]), str(g["command"])) for g in data["groups"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def clear(self) -> None:
        with self._lock:
            self._groups.clear()
            self.path.unlink(missing_ok=True)


_ledger: Ledger | None = None


@contextlib.contextmanager
def recording(ledger: Ledger) -> Iterator[None]:
    """Record every group started meanwhile in ``ledger`` (the cache lock's holder does)."""
    global _ledger
    previous, _ledger = _ledger, ledger
    try:
        yield
    finally:
        _ledger = previous
        ledger.clear()


def started(pgid: int, command: str) -> None:
    if _ledger is not None:
        _ledger.add(Group(pgid, start_time(pgid) or 0, command[:300]))


def ended(pgid: int) -> None:
    if _ledger is not None:
        _ledger.remove(pgid)


def end_orphans(ledger: Ledger) -> list[Group]:
    """End the groups an earlier run recorded that are still alive (it was killed before it could);
    returns them. Called with the cache lock held, before any stale temp tree is removed."""
    ended_groups = []
    for group in ledger.recorded():
        if group.alive():
            end_group(group.pgid)
            ended_groups.append(group)
    ledger.clear()
    return ended_groups
