"""Fakes and builders for the step tests: a toolchain that only makes directories, a context over
a RecordingRunner, and the files earlier steps or real commands would have left behind."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TextIO

from ortdist.paths import Cache
from ortdist.pipeline.context import BuildContext
from ortdist.pipeline.layout import Layout, Roots
from ortdist.pipeline.runner import Command, RecordingRunner
from ortdist.pipeline.state import BuildState, Source
from ortdist.plan import BuildPlan
from ortdist.toolchains import Bind, ToolTree
from ortdist.toolchains.spec import CompatRoot, ToolchainSpec
from ortdist.wheel.record import record_line

# The source release's timestamp: what every archive of a build is stamped with.
SOURCE_EPOCH = 1_700_000_000
SOURCE_RECORD = {
    "kind": "debian",
    "file": "onnxruntime_1.21.0+dfsg.orig.tar.xz",
    "url": "http://mirror.test/onnxruntime.orig.tar.xz",
    "sha256": "ab" * 32,
}


@dataclass
class FakeToolchain:
    """The Toolchain protocol with directories under ``base`` for roots; it records every call."""

    spec: ToolchainSpec
    base: Path
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def _root(self, name: str) -> Path:
        path = self.base / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def ensure_build_root(self, cache: Cache, log: TextIO) -> Path:
        self.calls.append(("build",))
        return self._root("build-root")

    def ensure_clean_root(self, cache: Cache, log: TextIO) -> Path:
        self.calls.append(("clean",))
        return self._root("clean-root")

    def ensure_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        self.calls.append(("target", build_root.name, triple))
        return self._root(f"target-{triple}")

    def ensure_clean_target_root(self, cache: Cache, build_root: Path, triple: str, log: TextIO) -> Path:
        self.calls.append(("clean-target", build_root.name, triple))
        return self._root(f"clean-target-{triple}")

    def ensure_python_overlay(self, cache: Cache, build_root: Path, version: str, log: TextIO) -> Path:
        self.calls.append(("python", build_root.name, version))
        return self._root(f"python-{version}")

    def ensure_compat_root(self, cache: Cache, compat: CompatRoot, log: TextIO) -> Path:
        self.calls.append(("compat", compat.name, compat.suite))
        return self._root(f"compat-{compat.name}")

    def ensure_tool_tree(self, cache: Cache, build_root: Path, tree: ToolTree, log: TextIO) -> Path:
        self.calls.append(("tool", build_root.name, tree.name, *tree.packages))
        made = self._root(f"tool-{tree.name}")
        tree.finish(made)
        return made

    def root_names(self, triple: str, steps: Collection[str], extra_python: Sequence[str]) -> tuple[str, ...]:
        return ("build-root",)

    def installed_packages(self, root: Path) -> dict[str, str]:
        return {"libgomp1": "14.2.0-19", f"pkg-of-{root.name}": "1.0"}

    def library_packages(self, root: Path) -> dict[str, str]:
        return {"libgomp.so.1": "libgomp1"}

    def wrap(
        self,
        root: Path,
        cmd: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        writable: Path | None = None,
    ) -> list[str]:
        return ["fake-wrap", str(root), "--", *cmd]


@dataclass
class StepEnv:
    """One step's world: the context, the state earlier steps left, and the recorded commands."""

    ctx: BuildContext
    state: BuildState
    runner: RecordingRunner
    toolchain: FakeToolchain

    @property
    def plan(self) -> BuildPlan:
        return self.ctx.plan

    @property
    def layout(self) -> Layout:
        return self.ctx.layout

    def put_roots(self) -> Roots:
        """What the toolchain step would have returned for this plan."""
        plan, tc, log = self.plan, self.toolchain, open(os.devnull, "w")  # noqa: SIM115
        with log:
            build = tc.ensure_build_root(self.ctx.cache, log)
            cross = plan.toolchain.is_cross(plan.target.triple)
            target = tc.ensure_target_root(self.ctx.cache, build, plan.target.triple, log) if cross else None
            pythons = {v: tc.ensure_python_overlay(self.ctx.cache, build, v, log) for v in plan.extra_python}
        tc.calls.clear()
        roots = Roots(
            build=build,
            target=target,
            pythons=pythons,
            packages=tc.installed_packages(build),
            target_packages=tc.installed_packages(target) if target else {},
        )
        self.state.put(roots)
        return roots

    def put_source(self) -> Source:
        """The unpacked source tree (the files later steps read from it) and the source step's output."""
        tree = self.layout.source.host
        tree.mkdir(parents=True, exist_ok=True)
        for name in ("LICENSE", "ThirdPartyNotices.txt"):
            (tree / name).write_text(f"{name} text\n", encoding="utf-8")
        (tree / "VERSION_NUMBER").write_text("1.21.0\n", encoding="utf-8")
        os.utime(tree / "VERSION_NUMBER", (SOURCE_EPOCH, SOURCE_EPOCH))
        source = Source(
            record=SOURCE_RECORD, patches=tuple({"name": p.name, "sha256": p.sha256} for p in self.plan.patches)
        )
        self.state.put(source)
        return source

    def matching(self, contains: str) -> list[Command]:
        return [c for c in self.runner.commands if contains in c.text]

    def only(self, contains: str) -> Command:
        found = self.matching(contains)
        assert len(found) == 1, f"{len(found)} commands contain {contains!r}: {self.runner.texts()}"
        return found[0]


def host_of(cmd: Command, inside: str | PurePosixPath | Path) -> Path:
    """Where ``inside`` (a path a command names) is on the host, through the command's own binds;
    a fake effect writes there, so a step that binds the wrong directory sees nothing."""
    path = PurePosixPath(inside)
    binds = [b for b in cmd.binds if path.is_relative_to(PurePosixPath(b.inside))]
    if not binds:
        raise AssertionError(f"{inside} is not under any bind of `{cmd.text}`")
    bind = max(binds, key=lambda b: len(PurePosixPath(b.inside).parts))
    return bind.host / path.relative_to(PurePosixPath(bind.inside))


def arg_after(cmd: Command, flag: str) -> str:
    return cmd.argv[cmd.argv.index(flag) + 1]


WHEEL_TIME = (2026, 1, 1, 0, 0, 0)


def make_wheel(directory: Path, filename: str, members: Mapping[str, bytes]) -> Path:
    """A minimal valid wheel: the members, METADATA, WHEEL with the file name's tag, and RECORD."""
    dist, version, py, abi, plat = filename.removesuffix(".whl").split("-")
    info = f"{dist}-{version}.dist-info"
    files = {
        **members,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {py}-{abi}-{plat}\n".encode()
        ),
    }
    record = "".join(record_line(n, d) + "\n" for n, d in files.items()) + f"{info}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / filename
    with zipfile.ZipFile(wheel, "w") as zf:  # fixed times: the same members give the same wheel
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, WHEEL_TIME), data)
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", WHEEL_TIME), record)
    return wheel


def write_reply(build: Path, fragments: Sequence[Mapping[str, str]]) -> None:
    """CMake's file-API reply for the onnxruntime target, linking ``fragments``."""
    reply = build / ".cmake" / "api" / "v1" / "reply"
    reply.mkdir(parents=True, exist_ok=True)
    (reply / "index-2025.json").write_text(json.dumps({"objects": [{"kind": "codemodel", "jsonFile": "cm.json"}]}))
    (reply / "cm.json").write_text(
        json.dumps({"configurations": [{"targets": [{"name": "onnxruntime", "jsonFile": "ort.json"}]}]})
    )
    (reply / "ort.json").write_text(json.dumps({"link": {"commandFragments": list(fragments)}}))


def libraries(*tokens: str) -> list[dict[str, str]]:
    return [{"fragment": t, "role": "libraries"} for t in tokens]
