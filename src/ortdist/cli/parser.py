"""``ortdist``'s argparse: every command, its options and the function that runs it."""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable

from .. import __version__
from ..bench import PARTS
from ..compiler_cache import CACHES
from . import commands, release


def _count(least: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``least`` (argparse names the option when it is not)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        return value

    return parse


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    port = _count(1)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1 to 65535)")
    return port


def _address(text: str) -> str:
    """An argparse type: an IP address (what distccd listens on), checked before a root is made."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address, e.g. 10.0.0.5 or 0.0.0.0") from None


def _network(text: str) -> str:
    """An argparse type: a network in CIDR form (distccd's --allow)."""
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a network, e.g. 10.0.0.0/24 or 10.0.0.7/32") from None


def _python_version(text: str) -> str:
    """An argparse type: one CPython version as X.Y."""
    if not re.fullmatch(r"3\.\d+", text):
        raise argparse.ArgumentTypeError(f"{text!r}: give the version as X.Y, e.g. 3.12")
    return text


def _python_list(text: str) -> tuple[str, ...]:
    """An argparse type: Python versions as X.Y, comma-separated ("3.11,3.13")."""
    versions = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in versions if not re.fullmatch(r"3\.\d+", v)]
    if bad or not versions:
        raise argparse.ArgumentTypeError(f"{', '.join(bad) or repr(text)}: give versions as X.Y, e.g. 3.11,3.13")
    return tuple(dict.fromkeys(versions))


def _cuda_list(text: str) -> tuple[str, ...]:
    """An argparse type: CMake CUDA architectures, comma-separated ("90", "89-real,90"); their form is
    checked with the recipe's."""
    entries = tuple(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    if not entries:
        raise argparse.ArgumentTypeError(f"{text!r}: give architectures as CMake writes them, e.g. 90 or 89-real,90")
    return entries


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ortdist", description=__doc__)
    p.add_argument("--version", action="version", version=f"ortdist {__version__}")
    noise = p.add_mutually_exclusive_group()
    noise.add_argument(
        "-v", "--verbose", action="store_true", help="print each command in full, wrapper included (replayable)"
    )
    noise.add_argument("-q", "--quiet", action="store_true", help="only warnings, errors and results")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build a recipe into dist/<recipe>/")
    b.add_argument("recipe", help="recipes/<name>.toml or just <name>")
    b.add_argument("--jobs", "-j", type=_count(0), default=0, help="parallel compile jobs (0, the default: all cores)")
    b.add_argument("--dist", help="output root (default: <project>/dist)")
    b.add_argument(
        "--compiler-cache",
        choices=sorted(CACHES),
        help="ccache (default) or sccache, whose remote backend comes from SCCACHE_*/AWS_*/ACTIONS_* "
        "variables (default: $ORTDIST_COMPILER_CACHE or ccache)",
    )
    b.add_argument(
        "--fresh", action="store_true", help="discard the recipe's build tree first (ccache and sysroot stay)"
    )
    b.add_argument(
        "--no-reuse",
        dest="reuse",
        action="store_false",
        help="run every packaging step even when its inputs are unchanged (default: reuse its recorded outputs)",
    )
    b.add_argument(
        "--keep-going",
        action="store_true",
        help="compile every file that can be compiled past a failing one, so one run lists every failure "
        "(a new toolchain or patch); the build still fails",
    )
    b.add_argument(
        "--python",
        type=_python_list,
        metavar="X.Y[,X.Y...]",
        help="build wheels for only these of the recipe's Pythons (a host without some of them); "
        "the manifest and the report name the ones left out (default: every one the recipe lists)",
    )
    b.add_argument(
        "--cuda-architectures",
        type=_cuda_list,
        metavar="ARCH[,ARCH...]",
        help="compile the CUDA kernels for these instead of the recipe's [cuda] architectures, e.g. 90: a "
        "build to iterate on (one architecture compiles several times faster); the manifest says so and "
        "`ortdist publish` refuses it (default: the recipe's list, what a release ships)",
    )
    b.add_argument(
        "--workers",
        metavar="HOST[:PORT][/SLOTS],...",
        help="send the compiler cache's misses to these distcc workers (each running `ortdist worker "
        "TOOLCHAIN`); links and cache hits stay here (default: $ORTDIST_WORKERS, else none)",
    )
    b.set_defaults(func=commands.cmd_build)

    w = sub.add_parser("worker", help="serve compiles for `build --workers`: distccd in a toolchain's root")
    w.add_argument("toolchain", help="toolchains/<name>.toml: the root whose compilers this worker runs")
    w.add_argument(
        "--listen", required=True, type=_address, metavar="ADDRESS", help="the IP address distccd listens on"
    )
    w.add_argument(
        "--allow",
        required=True,
        action="append",
        type=_network,
        metavar="CIDR",
        help="clients allowed to send compiles, e.g. 10.0.0.0/24 (repeatable); distcc has no other authentication",
    )
    w.add_argument("--port", type=_port, default=3632, help="TCP port (default: 3632, distcc's)")
    w.add_argument("--jobs", "-j", type=_count(0), default=0, help="compiles at once (0, the default: all cores)")
    w.add_argument("--state", help="where its overlay and settings live (default: a new temp directory)")
    w.set_defaults(func=commands.cmd_worker)

    pl = sub.add_parser("plan", help="print the build plan (CMake command, steps, artifacts) as JSON")
    pl.add_argument("recipe")
    pl.set_defaults(func=commands.cmd_plan)

    pa = sub.add_parser("patches", help="patch series tools")
    pa_sub = pa.add_subparsers(dest="patches_command", required=True)
    pc = pa_sub.add_parser("check", help="apply every series to a fresh copy of its source")
    pc.add_argument("series", nargs="?", help="one series (e.g. 1.21.0); default: all")
    pc.set_defaults(func=commands.cmd_patches_check)

    v = sub.add_parser("validate", help="load and plan recipes (default: all in recipes/)")
    v.add_argument("recipes", nargs="*")
    v.set_defaults(func=commands.cmd_validate)

    s = sub.add_parser("schema", help="print, write or check the recipe JSON schema")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    s.set_defaults(func=commands.cmd_schema)

    ma = sub.add_parser("matrix", help="generate ci/ (GitHub Actions matrix, cibuildwheel) from recipes/")
    ma.add_argument("--check", action="store_true", help="write nothing; exit 1 when ci/ differs from recipes/")
    ma.set_defaults(func=commands.cmd_matrix)

    sm = sub.add_parser("smoke", help="prove wheels run reference models on every EP they claim")
    sm.add_argument("wheels", nargs="+", help="wheel files (ours or foreign, e.g. PyPI's onnxruntime)")
    sm.add_argument("--toolchain", default="debian-trixie", help="whose clean root runs wheels the host cannot")
    sm.add_argument(
        "--latency", type=_count(1), default=0, metavar="RUNS", help="also time each model case: median of RUNS runs"
    )
    sm.add_argument("--warmup", type=_count(0), default=10, help="discarded runs before timing (with --latency)")
    sm.add_argument("--threads", type=_count(1), default=1, help="intra-op threads while timing (with --latency)")
    sm.add_argument(
        "--require-device",
        action="store_true",
        default=os.environ.get("ORTDIST_REQUIRE_DEVICE") == "1",
        help="an EP whose device (GPU) is missing fails instead of being skipped: for GPU runners "
        "(default: $ORTDIST_REQUIRE_DEVICE=1)",
    )
    sm.set_defaults(func=commands.cmd_smoke)

    dp = sub.add_parser(
        "device-proof",
        help="prove a GPU wheel on a lent machine without network: prepare here, run there, accept here",
    )
    dps = dp.add_subparsers(dest="action", required=True)
    dpp = dps.add_parser(
        "prepare", help=f"write {release.DEVICE_BUNDLE}/<recipe>/: the wheel, the smoke runner, models and node tests"
    )
    dpp.add_argument("recipe", help="recipes/<name>.toml or just <name>; its wheels in <dist>/<name>/")
    dpp.add_argument(
        "--python", type=_python_version, default="3.12", help="the CPython of the GPU machine (default: 3.12)"
    )
    dpp.add_argument("--dist", help="where the recipe was built (default: <project>/dist)")
    dpr = dps.add_parser("run", help="on the GPU machine: install, smoke with --require-device, node tests, latency")
    dpr.add_argument("bundle", help=f"the prepared bundle ({release.DEVICE_BUNDLE}/<recipe>)")
    dpr.add_argument("--out", required=True, help="folder for device-proof.json and device-proof.log")
    dpr.add_argument("--no-latency", dest="latency", action="store_false", help="skip the real-size model timing")
    dpr.add_argument("--runs", type=_count(1), default=50, help="timed runs per real-size model (median)")
    dpr.add_argument(
        "--libraries",
        choices=("auto", "system", "wheels"),
        default="auto",
        help="the CUDA/cuDNN libraries: the system's, this Python's NVIDIA wheels (as the [cuda,cudnn] extras "
        "install them), or the system's else the wheels (default)",
    )
    dpr.add_argument(
        "--force-ptx",
        action="store_true",
        help="run every kernel from the wheel's PTX, JIT-compiled by the driver (CUDA_FORCE_PTX_JIT=1, a cold "
        "JIT cache): the path of a GPU the wheel has no SASS for; the first session's time is recorded",
    )
    dpr.add_argument("--store", help="where `gather` kept the wheel's pieces (default: $TMPDIR/ortdist-pieces/<name>)")
    dpg = dps.add_parser(
        "gather", help="on the GPU machine: keep the wheel's pieces this call carried, until the bundle holds them all"
    )
    dpg.add_argument("bundle", help=f"the prepared bundle ({release.DEVICE_BUNDLE}/<recipe>)")
    dpg.add_argument("--store", help="where to keep them (default: $TMPDIR/ortdist-pieces/<name>)")
    dpa = dps.add_parser("accept", help="file a run's JSON under <dist>/<recipe>/device-proof/ (the report's)")
    dpa.add_argument("recipe")
    dpa.add_argument("folder", help="the folder the run wrote (its --out)")
    dpa.add_argument("--dist", help="where the recipe was built (default: <project>/dist)")
    dp.set_defaults(func=release.cmd_device_proof)

    pu = sub.add_parser("publish", help="upload a recipe's smoke-tested wheels with twine, then install them back")
    pu.add_argument("recipe", help="recipes/<name>.toml or just <name>; its wheels in <dist>/<name>/")
    pu.add_argument("--repository-url", required=True, help="twine's upload URL (credentials: TWINE_* or keyring)")
    pu.add_argument("--index-url", help="the index's simple URL (default: PyPI's, else <repository-url>/simple/)")
    pu.add_argument(
        "--skip-existing", action="store_true", help="upload only files the index lacks, even if it has the version"
    )
    pu.add_argument("--dist", help="where the recipe was built (default: <project>/dist)")
    pu.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="do not install the wheels back from the index into the clean root and smoke-test them",
    )
    pu.set_defaults(func=release.cmd_publish)

    ins = sub.add_parser("inspect", help="print the SBOM a wheel or C library archive carries")
    ins.add_argument("artifact", help="a .whl or .tar.gz built by ortdist")
    ins.add_argument("--json", action="store_true", help="the whole CycloneDX document")
    ins.add_argument("--packages", action="store_true", help="also list every sysroot package")
    ins.set_defaults(func=commands.cmd_inspect)

    rp = sub.add_parser("report", help="write dist/report.html from the builds, smoke reports and SBOMs in dist/")
    rp.add_argument("--dist", help="the dist/ to report on (default: <project>/dist)")
    rp.add_argument("--out", help="output file (default: <dist>/report.html)")
    rp.add_argument("--screenshot", help="also render it in headless Chromium and save a PNG here")
    rp.set_defaults(func=commands.cmd_report)

    be = sub.add_parser("bench", help="benchmark against ORT's build.py and PyPI's wheel (takes about an hour)")
    be.add_argument("--recipe", default="cpu-linux")
    be.add_argument("--jobs", "-j", type=_count(0), default=0)
    be.add_argument(
        "--only",
        action="append",
        default=[],
        choices=PARTS,
        help="re-measure a part",
    )
    be.set_defaults(func=commands.cmd_bench)

    an = sub.add_parser("analyze", help="the operators (and types) models need, as an ORT reduced-build config")
    an.add_argument("models", nargs="+", help=".onnx / .ort models and .config files to merge")
    an.add_argument("-o", "--output", default="-", help="config file to write (default: stdout)")
    an.add_argument("--types", action="store_true", help="also record the element types each operator needs")
    an.add_argument(
        "--optimization-level",
        default="extended",
        choices=["none", "disabled", "basic", "extended", "all"],
        help="the level the runtime will use: ONNX models are converted to ORT format at it first "
        "('none': analyse ONNX models as written)",
    )
    an.add_argument("--target-arch", default="x86_64", help="the CPU the models will run on (for level 'all')")
    an.add_argument("--ort-version", default="1.21.0", help="the ONNX Runtime that converts (and will run) them")
    an.add_argument("--ort-dir", help="keep the ORT-format conversions in this directory")
    an.add_argument("--toolchain", default="debian-trixie", help="whose clean root converts when this Python cannot")
    an.set_defaults(func=commands.cmd_analyze)

    ca = sub.add_parser("cache", help="list the cache's trees and the recipes using each; --prune removes unused ones")
    ca.add_argument("--prune", action="store_true", help="remove the trees no recipe in recipes/ uses")
    ca.set_defaults(func=commands.cmd_cache)

    pr = sub.add_parser("providers", help="list the execution-provider registry")
    pr.set_defaults(func=commands.cmd_providers)
    return p
