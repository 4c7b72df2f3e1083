"""The one way Python runs in a fresh venv (check, compat, smoke, the converter): its shell lines."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from ortdist.inroot import Venv, overlay_venv_commands, venv_commands


def test_a_venv_installs_offline_without_compiling_and_runs_in_its_directory() -> None:
    venv = Venv(venv_commands("python3.11", "/ortdist/venv"), "/ortdist/wheelhouse")
    line = venv.create_and_install("/ortdist/wheel/onnxruntime_gpu-1.21.0-cp311-cp311-x.whl[cuda,cudnn]")
    create, install = line.split(" && ")
    assert create == "python3.11 -m venv /ortdist/venv"
    assert shlex.split(install) == [
        "/ortdist/venv/bin/python", "-m", "pip", "install", "--quiet", "--no-compile", "--no-index",
        "--find-links", "/ortdist/wheelhouse", "/ortdist/wheel/onnxruntime_gpu-1.21.0-cp311-cp311-x.whl[cuda,cudnn]",
    ]  # fmt: skip
    assert "'/ortdist/wheel/onnxruntime_gpu-1.21.0-cp311-cp311-x.whl[cuda,cudnn]'" in install  # no shell glob
    assert venv.run("runner.py plan.json result.json", "/ortdist/compat") == (
        "cd /ortdist/compat && /ortdist/venv/bin/python runner.py plan.json result.json"
    )


def test_an_overlay_venv_gets_pip_from_the_roots_pip_wheel() -> None:
    venv = Venv(overlay_venv_commands("/ortdist/python/3.12/usr/bin/python3.12", "/v"), "/h")
    assert venv.commands.create == "/ortdist/python/3.12/usr/bin/python3.12 -m venv --without-pip /v"
    assert venv.install("numpy==2.2.6").startswith("/v/bin/python $(ls /usr/share/python-wheels/pip-*.whl")


def test_the_lines_work_in_a_shell(tmp_path: Path) -> None:
    """Made, filled from an empty wheelhouse (nothing to install is still a valid pip call) and run."""
    (tmp_path / "house").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "hello.py").write_text("import sys; print('ran', sys.prefix)")
    venv = Venv(venv_commands(sys.executable, str(tmp_path / "venv")), str(tmp_path / "house"))
    script = f"{venv.commands.create} --without-pip && {venv.run('hello.py', str(tmp_path / 'work'))}"
    done = subprocess.run(["/bin/sh", "-c", script], text=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ran {tmp_path / 'venv'}"
