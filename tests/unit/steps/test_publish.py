"""The publish step: every artifact copied into dist/, stale files of an older run removed, and
manifest.json written last with the plan's header and every step's section."""

from __future__ import annotations

import json
from pathlib import Path

from ortdist.fsutil import sha256_file
from ortdist.manifest import Artifact
from ortdist.pipeline.state import Checks, CLibrary, Compiled, PerPython, Repaired, Size
from ortdist.pipeline.steps import publish

from .conftest import MakeEnv
from .helpers import SOURCE_RECORD, StepEnv


def ready(env: StepEnv) -> tuple[StepEnv, Path, Path]:
    env.put_roots()
    env.put_source()
    out = env.layout.out.host
    out.mkdir(parents=True)
    archive, wheel = out / "onnxruntime-cpu-linux-1.21.0.tar.gz", out / "onnxruntime-1.21.0-cp313.whl"
    archive.write_bytes(b"archive")
    wheel.write_bytes(b"wheel")
    env.state.put(Compiled(tree_compile_s=1800.5, compiler_cache={"name": "ccache", "cache_miss": 3}))
    env.state.put(CLibrary(archive=archive, artifacts=(Artifact(archive, "c-library", extra={"eps": ["cpu"]}),)))
    times = PerPython("repair_s", {"3.13": 2.0, "3.11": 3.0}, timed=True)
    env.state.put(Repaired(wheels={"3.13": wheel}, times=times, artifacts=(Artifact(wheel, "wheel", tag="cp313-x"),)))
    env.state.put(Checks(main={"ok": True}, others={}, times=PerPython("check_s", {"3.13": 9.0, "3.11": 8.0}, True)))
    env.state.put(Size(report={"recipe": "cpu-linux"}))
    env.state.timings.update({"toolchain": 1.5, "build": 1800.0})
    return env, archive, wheel


def test_the_manifest_has_the_plans_header_and_every_steps_section(make_env: MakeEnv) -> None:
    env, archive, wheel = ready(make_env("cpu-linux"))
    dist = env.layout.dist
    out = publish.run(env.ctx, env.state)
    manifest = json.loads((dist / "manifest.json").read_text())
    assert manifest["recipe"] == "cpu-linux" and manifest["ort_version"] == "1.21.0"
    assert manifest["recipe_sha256"] == sha256_file(env.ctx.recipe_path)
    assert manifest["toolchain"] == {
        "name": "portable-glibc2.17",
        "digest": env.plan.toolchain.digest,
        "root": "build-root",
    }
    assert manifest["cmake_defines"] == env.plan.cmake_defines
    assert manifest["python"] == ["3.13", "3.10", "3.11", "3.12", "3.14"] and "python_not_built" not in manifest
    assert manifest["source"] == SOURCE_RECORD
    assert [p["name"] for p in manifest["patches"]] == [p.name for p in env.plan.patches]
    assert manifest["build_tree_compile_s"] == 1800.5 and manifest["compiler_cache"]["cache_miss"] == 3
    assert manifest["clean_root_check"] == {"ok": True} and manifest["size"] == {"recipe": "cpu-linux"}
    assert manifest["python_versions"] == {
        "3.13": {"repair_s": 2.0, "check_s": 9.0},
        "3.11": {"repair_s": 3.0, "check_s": 8.0},
    }
    times = manifest["build_times_s"]
    # The total runs from this build's own start (the state's), not from an earlier one or the epoch.
    assert times["toolchain"] == 1.5 and times["build"] == 1800.0 and 0 <= times["total"] < 60
    assert manifest["artifacts"] == [
        {"path": archive.name, "kind": "c-library", "sha256": sha256_file(archive), "size": 7, "eps": ["cpu"]},
        {"path": wheel.name, "kind": "wheel", "sha256": sha256_file(wheel), "size": 5, "tag": "cp313-x"},
    ]
    assert list(out.entries) == manifest["artifacts"]
    assert (dist / archive.name).read_bytes() == b"archive"


def test_the_manifest_names_the_recipes_pythons_the_command_line_left_out(make_env: MakeEnv) -> None:
    env, _, _ = ready(make_env("cpu-linux", python=("3.13", "3.11"), python_not_built=("3.10", "3.12", "3.14")))
    publish.run(env.ctx, env.state)
    manifest = json.loads((env.layout.dist / "manifest.json").read_text())
    assert manifest["python"] == ["3.13", "3.11"] and manifest["python_not_built"] == ["3.10", "3.12", "3.14"]


def test_files_of_an_older_run_are_removed_and_logs_kept(make_env: MakeEnv) -> None:
    env, archive, _ = ready(make_env("cpu-linux"))
    dist = env.layout.dist
    (dist / "logs").mkdir(parents=True)
    (dist / "logs" / "build.log").write_text("log")
    (dist / "onnxruntime-1.20.0-cp313.whl").write_text("old wheel")
    (dist / archive.name).write_text("an older archive")
    publish.run(env.ctx, env.state)
    assert sorted(p.name for p in dist.iterdir()) == sorted(
        ["logs", "manifest.json", archive.name, "onnxruntime-1.21.0-cp313.whl"]
    )
    assert (dist / "logs" / "build.log").read_text() == "log"
    assert (dist / archive.name).read_bytes() == b"archive"
