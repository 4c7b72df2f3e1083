"""Children die with the build (issue #16): a child's whole process group is ended, and gone,
before cleanup runs; a rerun after ``kill -9`` ends the orphans and removes the temps; an
interrupted download removes its ``.part``. Real tiny processes (sh, sleep), no fakes of them."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ortdist import children, cli, run, sources
from ortdist.errors import OrtdistError
from ortdist.fsutil import mounts_under
from ortdist.paths import Cache
from ortdist.pipeline import driver

SRC = Path(__file__).resolve().parents[2] / "src"

# Run by a separate interpreter: run.call a shell that starts two sleeps (a grandchild in the
# background, one in the foreground), then report what is left of the group when the exception
# reaches the handler, i.e. when cleanup would run.
CHILD = textwrap.dedent(
    """
    import signal, sys
    from pathlib import Path
    from ortdist import children, run

    # Ctrl-C's handler as in a terminal, even where this test runs with SIGINT ignored (a shell's
    # background job: Python keeps an inherited ignore).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    pidfile, shell = Path(sys.argv[1]), sys.argv[2]
    with children.signals_handled():
        try:
            with open(pidfile.with_suffix(".log"), "w") as log:
                run.call(["sh", "-c", shell + "; echo $$ > " + str(pidfile) + "; sleep 60 & sleep 60; wait"],
                         log=log, echo=False)
        except KeyboardInterrupt as exc:
            pgid = int(pidfile.read_text())
            print("left at cleanup:", children.group_members(pgid), flush=True)
            sys.exit(children.exit_code(exc))
    """
)


def wait_for(predicate: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(
    ("sig", "code", "shell"),
    [
        (signal.SIGINT, 130, "true"),
        (signal.SIGTERM, 143, "true"),
        # Ignored dispositions survive exec: the sleeps ignore SIGTERM too, so SIGKILL must follow.
        (signal.SIGINT, 130, "trap '' TERM"),
    ],
    ids=["sigint", "sigterm", "sigterm-ignored"],
)
def test_an_interrupt_ends_the_childs_whole_group_before_cleanup(
    tmp_path: Path, sig: signal.Signals, code: int, shell: str
) -> None:
    pidfile = tmp_path / "pgid"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(pidfile), shell],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the test's own group is not the one signalled
    )
    try:
        assert wait_for(lambda: pidfile.is_file() and pidfile.read_text().strip() != ""), proc.stderr
        pgid = int(pidfile.read_text())
        assert wait_for(lambda: len(children.group_members(pgid)) == 3)  # sh and both sleeps
        members = children.group_members(pgid)
        assert pgid != proc.pid and os.getpgid(proc.pid) != pgid, "ortdist left its own group"
        started = time.monotonic()
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, err
    assert "left at cleanup: []" in out, "cleanup would have run while the group was still alive"
    assert not [pid for pid in members if children.alive(pid)]
    assert "Traceback" not in err
    assert took < children.GRACE_SECONDS + 5


def test_an_error_while_a_child_runs_ends_its_group(tmp_path: Path) -> None:
    """Not only signals: an exception from the output callback ends the command as well."""
    pids: list[int] = []

    def explode(line: str) -> None:
        pids.extend(int(p) for p in line.split())
        raise ValueError("a bug in the progress parser")

    with (tmp_path / "log").open("w") as log, pytest.raises(ValueError):
        run.stream(["sh", "-c", "sleep 60 & echo $$ $!; sleep 60"], on_line=explode, log=log)
    assert len(pids) == 2
    assert not [pid for pid in pids if children.alive(pid)]
    assert children.group_members(pids[0]) == []


def test_children_run_without_the_terminal_and_in_groups_of_their_own() -> None:
    done = run.capture(["sh", "-c", "ps -o pgid= -o sid= -p $$; cat"], check=True)
    pgid, sid = (int(x) for x in done.stdout.split())
    assert pgid == sid != os.getpgid(0)
    assert done.stderr == ""  # `cat` read /dev/null, not our stdin


def test_the_ledger_names_a_command_while_it_runs_and_forgets_it_after(tmp_path: Path) -> None:
    ledger = children.Ledger(tmp_path / "children.json")
    with children.recording(ledger):
        # (Recorded right after the fork: a kill -9 within those microseconds is the one gap.)
        seen = run.capture(["sh", "-c", f"echo $$; sleep 0.3; cat {ledger.path}"]).stdout
        pid = int(seen.split()[0])
        assert [g.pgid for g in ledger.recorded()] == []
    assert f'"pgid": {pid}' in seen and '"started": ' in seen
    assert not ledger.path.exists()


# --- a rerun after kill -9 ---------------------------------------------------------------------------
def orphan() -> subprocess.Popen[bytes]:
    """A group of its own, as a killed ortdist's child would be."""
    return subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60; wait"], start_new_session=True)


def stale_cache(tmp_path: Path) -> tuple[Cache, list[Path], list[Path]]:
    cache = Cache(tmp_path / "cache")
    out = cache.work("cpu-linux") / "work" / "out"
    for directory in (cache.downloads, cache.sources, cache.sysroots, out, cache.wheelhouse("3.13")):
        directory.mkdir(parents=True)
    tmp_root = cache.sysroots / ".debian-trixie-33f82cf2de84.tmp-k2j4"
    (tmp_root / "var" / "cache").mkdir(parents=True)
    (tmp_root / "var" / "cache" / "x.deb").write_bytes(b"deb")
    stale = [
        tmp_root,
        cache.downloads / ".onnxruntime_1.21.0+dfsg.orig.tar.xz.abc.part",
        cache.sources / ".onnxruntime-1.21.0-x.old-123",
        cache.sysroots / ".debian-trixie-arm64-target-abc.apt-state",
        out / ".onnxruntime-1.21.0-cp313.whl.k3.part",
        cache.wheelhouse("3.13") / ".numpy.whl.x.part",
    ]
    for path in stale[1:]:
        path.mkdir() if "old" in path.name or "apt" in path.name else path.write_bytes(b"half")
    kept = [cache.downloads / "onnxruntime_1.21.0+dfsg.orig.tar.xz", cache.sysroots / "debian-trixie-33f82cf2de84"]
    kept[0].write_bytes(b"whole")
    kept[1].mkdir()
    return cache, stale, kept


def test_the_next_lock_holder_ends_orphans_then_removes_stale_temps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache, stale, kept = stale_cache(tmp_path)
    group = orphan()
    try:
        assert wait_for(lambda: len(children.group_members(group.pid)) == 3)
        members = children.group_members(group.pid)
        started = children.start_time(group.pid)
        assert started is not None
        # What the killed run had written before it died.
        children.Ledger(cache.root / driver.CHILDREN).add(children.Group(group.pid, started, "debootstrap trixie"))
        with driver.build_lock(cache, "building cpu-linux"):
            assert not [pid for pid in members if children.alive(pid)]
            assert not [p for p in stale if p.exists()]
            assert all(p.exists() for p in kept)
            assert not (cache.root / driver.CHILDREN).exists()
    finally:
        if group.poll() is None:
            os.killpg(group.pid, signal.SIGKILL)
        group.wait()
    err = capsys.readouterr().err
    assert f"ended pid {group.pid}, left running by an earlier ortdist that was killed: debootstrap trixie" in err


def test_a_recorded_pid_now_used_by_another_process_is_left_alone(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    cache.root.mkdir()
    group = orphan()
    try:
        assert wait_for(lambda: len(children.group_members(group.pid)) == 3)
        started = children.start_time(group.pid)
        assert started is not None
        # Same pid, other start time: the recorded process ended and the pid was handed out again.
        children.Ledger(cache.root / driver.CHILDREN).add(children.Group(group.pid, started - 1, "apt-get"))
        with driver.build_lock(cache, "building cpu-linux"):
            pass
        assert len(children.group_members(group.pid)) == 3
    finally:
        os.killpg(group.pid, signal.SIGKILL)
        group.wait()


def test_records_of_another_boot_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "children.json"
    path.write_text(f'{{"boot_id": "another", "groups": [{{"pgid": {os.getpid()}, "started": 1, "command": "x"}}]}}')
    assert children.Ledger(path).recorded() == []


def test_stale_entries_of_any_kind_are_removed(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".a.part")
    (tmp_path / ".b.tmp-1").write_bytes(b"a file where a dir is usual")
    (tmp_path / ".c.part").mkdir()
    (tmp_path / ".d.tmp-2").symlink_to(tmp_path / "keep")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "f").write_text("x")
    driver.remove_stale_temps(tmp_path)
    driver.remove_stale_temps(tmp_path / "missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]
    assert (tmp_path / "keep" / "f").is_file()  # the symlink went, not what it points at


def test_a_stale_tree_that_cannot_be_removed_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / ".r.tmp-1"
    stale.mkdir()

    def denied(path: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("shutil.rmtree", denied)
    with pytest.raises(OrtdistError) as info:
        driver.remove_stale_temps(tmp_path)
    assert str(stale) in str(info.value) and "Permission denied" in str(info.value)
    assert f"rm -rf {stale}" in str(info.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")
def test_what_is_mounted_below_a_stale_root_is_unmounted_first(tmp_path: Path) -> None:
    """debootstrap mounts proc and sys in its target: rm -rf through them would reach the host's."""
    stale = tmp_path / ".debian-trixie-x.tmp-1"
    proc_dir = stale / "proc"
    proc_dir.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "none", str(proc_dir)], check=True)
    try:
        (proc_dir / "inside").write_text("x")
        assert mounts_under(stale)
        driver.remove_stale_temps(tmp_path)
        assert not stale.exists()
        assert not mounts_under(tmp_path)
    finally:
        if mounts_under(stale):
            subprocess.run(["umount", "-l", str(proc_dir)], check=False)


# --- downloads ---------------------------------------------------------------------------------------
class Trickle(io.BytesIO):
    """A response that hands out one chunk, then is interrupted (Ctrl-C mid-download)."""

    def __init__(self, interrupt: BaseException) -> None:
        super().__init__(b"x" * (1 << 22))
        self.interrupt = interrupt
        self.reads = 0

    def read(self, size: int | None = -1) -> bytes:
        self.reads += 1
        if self.reads > 1:
            raise self.interrupt
        return super().read(size)

    def __enter__(self) -> Trickle:
        return self


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), children.Terminated(signal.SIGTERM)])
def test_an_interrupted_download_removes_its_part_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interrupt: BaseException
) -> None:
    response = Trickle(interrupt)
    monkeypatch.setattr(urllib.request, "urlopen", lambda *_a, **_k: response)
    pin = sources.Pinned("http://mirror/x.tar.xz", "x.tar.xz", "0" * 64, "test")
    with pytest.raises(KeyboardInterrupt):
        sources.fetch(pin, tmp_path)
    assert response.reads == 2, "the download was not under way when interrupted"
    assert list(tmp_path.iterdir()) == []


# --- the CLI -----------------------------------------------------------------------------------------
def test_sigterm_exits_143_with_one_line_and_the_handler_is_restored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def terminated(_args: object) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        return 0

    monkeypatch.setattr(cli.commands, "cmd_providers", terminated)
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["providers"]) == 143
    assert capsys.readouterr().err == "ortdist: error: interrupted (SIGTERM); rerun the same command to resume\n"
    assert signal.getsignal(signal.SIGTERM) == before


def test_ctrl_c_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(_args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.commands, "cmd_providers", interrupted)
    assert cli.main(["providers"]) == 130
    assert capsys.readouterr().err == "ortdist: error: interrupted (SIGINT); rerun the same command to resume\n"
