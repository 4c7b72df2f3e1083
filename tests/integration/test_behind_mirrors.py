"""Behind a team's mirrors (issue #56): cpu-linux's root and sources through real local mirrors,
configured only the way a team configures its host, then again with no network at all.

The mirrors, started by the test on 127.0.0.1 with their caches in its directory: Debian's
apt-cacher-ng (the Debian archive), devpi-server (PyPI) and verdaccio (npm). The host's
configuration: apt sources in the test's own /etc/apt (a private mount namespace), pip.conf and
.npmrc in a temporary HOME; nothing of ortdist's own (no ORTDIST_* mirror variable). ortdist runs
until its build step (a wrapper stops it there: the compile is not what is proven), so the root,
the CPython overlays, the compiler wheel and every source come through the mirrors; onnxruntime-web's
npm tarball is fetched through verdaccio the way the slim-wasm recipe does. Each server's own log
must show its downloads. Then everything runs again in a fresh cache inside ``unshare --net`` (the
mirrors and ortdist alone on loopback, no route out, the mirrors in their offline modes): the same
root, sources and tarball from the mirrors' caches alone.

Needs root, the network (the first pass), apt-cacher-ng (installed from Debian's archive when
missing), npm; about 11 minutes (a fresh clone: 622 s). Named to run before the recipe builds: CI's
rotation decides from the time already spent whether its cold build still fits (tests/ci_policy.py),
and it reserves nothing for tests after it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ortdist import mirrors
from ortdist.hosttools import require_host_tools
from ortdist.toolchains import load_toolchain

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the debian-sysroot toolchain and mount namespaces need root"),
]
PROJECT = Path(__file__).resolve().parents[2]
STOPPED = 99  # the wrapper's exit code at the build step
VERDACCIO = "verdaccio@4.13.2"  # 5.x and 6.x need node-fetch@cjs, a dist-tag npm's registry here lacks

# Run inside the namespaces: the test's /etc/apt over the host's, the mirrors started, ortdist run
# to its build step, onnxruntime-web fetched, the mirrors stopped; what happened as JSON on stdout.
# devpi's upstream timeout is raised from its 5 s: a project page that took longer came back
# empty ("from versions: none").
DRIVER = r"""
import json, os, signal, socket, subprocess, sys, time
from pathlib import Path

work, phase = Path(sys.argv[1]), sys.argv[2]
ports = json.loads((work / "ports.json").read_text())
offline = phase == "offline"
subprocess.run(["mount", "--bind", str(work / "etc-apt"), "/etc/apt"], check=True)
if offline:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
logs = work / "logs" / phase
logs.mkdir(parents=True, exist_ok=True)
env = {**os.environ}
servers = [
    subprocess.Popen(
        ["apt-cacher-ng", "-c", "/etc/apt-cacher-ng", "ForeGround=1", "Port=%d" % ports["apt"],
         "BindAddress=127.0.0.1", "CacheDir=%s" % (work / "acng-cache"), "LogDir=%s" % logs,
         "PidFile=%s" % (work / "acng.pid"), "SocketPath=%s" % (work / "acng.socket"),
         "Offlinemode=%d" % offline, "Remap-debrep=file:deb_mirror*.gz /debian ; " + ports["apt_upstream"]],
        stdout=open(logs / "acng.out", "w"), stderr=subprocess.STDOUT),
    subprocess.Popen(
        [str(Path(sys.executable).parent / "devpi-server"), "--serverdir", str(work / "devpi"),
         "--host", "127.0.0.1", "--port", str(ports["pypi"]), "--request-timeout", "120",
         *(["--offline-mode"] if offline else [])],
        stdout=open(logs / "devpi.log", "w"), stderr=subprocess.STDOUT),
    subprocess.Popen(
        [str(work / "npm" / "node_modules" / ".bin" / "verdaccio"), "--listen", "127.0.0.1:%d" % ports["npm"],
         "--config", str(work / "verdaccio.yaml")],
        stdout=open(logs / "verdaccio.log", "w"), stderr=subprocess.STDOUT, env=env),
]
for port in (ports["apt"], ports["pypi"], ports["npm"]):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        sys.exit("a mirror did not listen on %d" % port)
result = {}
try:
    build = subprocess.run([sys.executable, "-c", sys.argv[3], "build", sys.argv[4], "-j", "2",
                            "--dist", str(work / ("dist-" + phase))], capture_output=True, text=True)
    result["build"] = {"code": build.returncode, "output": (build.stdout + build.stderr)[-6000:]}
    from ortdist import sources, web
    fetched = sources.fetch(web.STOCK["1.21.0"].pin, work / ("npm-downloads-" + phase))
    result["npm"] = {"file": str(fetched), "url": web.STOCK["1.21.0"].pin.url}
finally:
    for server in servers:
        server.send_signal(signal.SIGTERM)
    for server in servers:
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
print(json.dumps(result))
"""

WRAPPER = f"""
import dataclasses, sys
from ortdist.pipeline import driver

def stop(ctx, state):
    print("ortdist-test: reached the build step", file=sys.stderr, flush=True)
    raise SystemExit({STOPPED})

driver.STEPS["build"] = dataclasses.replace(driver.STEPS["build"], run=stop)
from ortdist.cli import main
sys.exit(main())
"""


def free_port() -> int:
    """A free port below 32768 (apt-cacher-ng refuses higher ones: "Error resolving address")."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The mirrors' configuration and caches, the host's apt sources and HOME (pip.conf, .npmrc)."""
    require_host_tools("apt-cacher-ng")
    if shutil.which("npm") is None:
        pytest.skip("no npm on this host (verdaccio is installed with it)")
    ports: dict[str, int | str] = {"apt": free_port(), "pypi": free_port(), "npm": free_port()}
    # apt-cacher-ng's /debian is the archive this host's own apt sources name (read before the test's
    # sources replace them): the package's default backend may not be one this network reaches.
    ports["apt_upstream"] = mirrors.debian_archive(load_toolchain(PROJECT, "portable-glibc2.17").mirror).url
    (tmp_path / "ports.json").write_text(json.dumps(ports))
    # Debian's archive as a team's apt sources name their mirror.
    (tmp_path / "etc-apt" / "sources.list.d").mkdir(parents=True)
    (tmp_path / "etc-apt" / "sources.list").write_text(f"deb http://127.0.0.1:{ports['apt']}/debian bookworm main\n")
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        f"[global]\nindex-url = http://127.0.0.1:{ports['pypi']}/root/pypi/+simple/\n"
    )
    (home / ".npmrc").write_text(f"registry=http://127.0.0.1:{ports['npm']}/\n")
    subprocess.run(
        [str(Path(sys.executable).parent / "devpi-init"), "--serverdir", str(tmp_path / "devpi")],
        check=True,
        capture_output=True,
    )
    (tmp_path / "npm").mkdir()
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", VERDACCIO],
        cwd=tmp_path / "npm",
        check=True,
        capture_output=True,
    )
    # verdaccio's own default configuration (its uplink is npm's registry), storage in the test's tree.
    default = next((tmp_path / "npm" / "node_modules" / "verdaccio").rglob("default.yaml"))
    config = default.read_text().replace("storage: ./storage", f"storage: {tmp_path / 'verdaccio-storage'}")
    (tmp_path / "verdaccio.yaml").write_text(config)
    return tmp_path


def run_phase(work: Path, phase: str, recipe: Path) -> dict[str, object]:
    """One pass in a fresh ortdist cache: namespaces, mirrors, ortdist to its build step, npm fetch."""
    namespaces = ["unshare", "--mount", "--propagation", "private", *(["--net"] if phase == "offline" else []), "--"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ORTDIST_", "npm_config_", "NPM_"))}
    env.update(
        HOME=str(work / "home"),
        ORTDIST_CACHE=str(work / f"cache-{phase}"),
        PYTHONPATH=str(PROJECT / "src"),
    )
    proc = subprocess.run(
        [*namespaces, sys.executable, "-c", DRIVER, str(work), phase, WRAPPER, str(recipe)],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def served(work: Path, phase: str) -> dict[str, str]:
    logs = work / "logs" / phase
    return {
        "apt": "\n".join(p.read_text(errors="replace") for p in logs.glob("apt-cacher*.log")),
        "pypi": (logs / "devpi.log").read_text(errors="replace"),
        "npm": (logs / "verdaccio.log").read_text(errors="replace"),
    }


def test_a_root_and_sources_through_the_hosts_mirrors_then_from_their_caches_alone(work: Path) -> None:
    from ortdist.registry import ort_versions

    recipe = PROJECT / "recipes" / "cpu-linux.toml"
    orig = ort_versions()["1.21.0"].source.orig_tarball
    for phase in ("online", "offline"):
        result = run_phase(work, phase, recipe)
        build = result["build"]
        assert isinstance(build, dict)
        assert build["code"] == STOPPED and "reached the build step" in build["output"], build["output"]
        # ortdist asked the host's clients: every fetch went to 127.0.0.1.
        assert (
            f"fetching http://127.0.0.1:{json.loads((work / 'ports.json').read_text())['apt']}/debian/"
            in (build["output"])
        ), build["output"]
        npm = result["npm"]
        assert isinstance(npm, dict) and str(npm["url"]).startswith("http://127.0.0.1:")
        logs = served(work, phase)
        assert orig in logs["apt"] and ".deb" in logs["apt"], logs["apt"][-2000:]
        assert "ppbt" in logs["pypi"] and "pybind11" in logs["pypi"], logs["pypi"][-2000:]
        assert "onnxruntime-web-1.21.0.tgz" in logs["npm"], logs["npm"][-2000:]
        root = list((work / f"cache-{phase}" / "sysroots").glob("portable-glibc2.17-*"))
        assert root, f"no root made in the {phase} pass"
