"""The bench's CUDA part without a compile: which kernels are sampled, the commands that compile
each for one architecture, the arithmetic that splits the kernels' compile across architectures,
and the whole part against a faked root."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ortdist import run
from ortdist.bench import cuda
from ortdist.bench.results import markdown
from ortdist.errors import BuildError
from ortdist.paths import Cache
from ortdist.pipeline import Layout
from ortdist.project import plan_for

# What CMake 3.x writes into build.ninja for a CUDA object (shortened), as ninja -t commands prints it.
COMMAND = (
    "/usr/bin/ccache /ortdist/wheels/cuda/bin/nvcc -forward-unknown-to-host-compiler -DUSE_CUDA=1 "
    "-I/ortdist/source/include --expt-relaxed-constexpr --compress-mode=size "
    "--generate-code=arch=compute_75,code=[sm_75] --generate-code=arch=compute_90,code=[compute_90,sm_90] "
    "-Xcompiler=-fPIC -std=c++17 -MD -MT onnxruntime/k.cu.o -MF onnxruntime/k.cu.o.d -x cu "
    "-c /ortdist/source/onnxruntime/k.cu -o onnxruntime/k.cu.o"
)


def test_each_entry_gets_the_flag_cmake_writes_for_it() -> None:
    assert cuda.gencode("75-real") == "--generate-code=arch=compute_75,code=[sm_75]"
    assert cuda.gencode("90") == "--generate-code=arch=compute_90,code=[compute_90,sm_90]"
    assert cuda.gencode("90-virtual") == "--generate-code=arch=compute_90,code=[compute_90]"


def test_one_architectures_command_skips_the_cache_and_writes_to_scratch() -> None:
    argv = shlex.split(cuda.variant(COMMAND, ["90"], "k0-90"))
    assert argv[0] == "/ortdist/wheels/cuda/bin/nvcc" and "ccache" not in " ".join(argv)
    assert [a for a in argv if "generate-code" in a] == ["--generate-code=arch=compute_90,code=[compute_90,sm_90]"]
    assert argv[argv.index("-o") + 1] == f"{cuda.SCRATCH}/k0-90.o"
    assert argv[argv.index("-MF") + 1] == f"{cuda.SCRATCH}/k0-90.d"
    assert "--compress-mode=size" in argv and "/ortdist/source/onnxruntime/k.cu" in argv


def test_the_sample_spans_the_kernels_compile_times() -> None:
    durations = {f"k{i}.cu.o": float(i) for i in range(10)} | {"a.cc.o": 99.0}
    assert cuda.sample(durations, 3) == ["k9.cu.o", "k5.cu.o", "k0.cu.o"]
    assert cuda.sample({"x.cu.o": 1.0, "y.cc.o": 2.0}, 3) == ["x.cu.o"]


def test_the_host_side_is_what_every_single_architecture_compile_repeats() -> None:
    # Host side 10 s; device 20 s for 75-real and 30 s for 90, in both kernels.
    times = {"k0-75-real": 30.0, "k0-90": 40.0, "k0-all": 60.0, "k1-75-real": 30.0, "k1-90": 40.0, "k1-all": 60.0}
    found = cuda.shares(times, 2, ["75-real", "90"])
    assert found == {"host_share": round(10 / 60, 3), "architecture_shares": {"75-real": 0.4, "90": 0.6}}
    assert cuda.whole_tree(600.0, found) == {"host_side": 100.2, "75-real": 199.9, "90": 299.9}


class FakeToolchain:
    def __init__(self) -> None:
        self.scripts: list[str] = []

    def ensure_build_root(self, cache: Cache, out: Any) -> Path:
        return Path("/root-of-cuda13")

    def wrap(self, root: Path, argv: list[str], binds: Any = (), env: Any = None) -> list[str]:
        self.scripts.append(argv[-1])
        return ["in-root", *argv]


def test_the_part_reads_the_tree_times_a_sample_and_rebuilds(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, _ = plan_for("cuda13-linux", project)
    layout = Layout.for_plan(plan, Cache(root=tmp_path / "cache"), tmp_path / "dist")
    toolchain = FakeToolchain()
    with pytest.raises(BuildError, match="no build tree of cuda13-linux") as e:
        cuda.measure(plan, toolchain, Cache(root=tmp_path), layout, lambda *a: (0.0, {}))  # type: ignore[arg-type]
    assert "--keep-going" in (e.value.fix or "")
    layout.build.host.mkdir(parents=True)
    log = "# ninja log v5\n" + "".join(
        f"0\t{ms}\t1\t{out}\th\n"
        for out, ms in (("a.cu.o", 90_000), ("b.cu.o", 60_000), ("c.cu.o", 30_000), ("x.cc.o", 5_000))
    )
    (layout.build.host / ".ninja_log").write_text(log)
    (layout.build.host / ".ortdist-compile-seconds").write_text("4321.0\n")
    entries = plan.recipe.cuda.architectures

    def capture(argv: list[str], **_: Any) -> Any:
        script = argv[-1]
        if "-t commands" in script:
            out = "\n".join(COMMAND.replace("k.cu", name[:-2]) for name in ("a.cu.o", "b.cu.o", "c.cu.o"))
        else:  # each architecture alone 12 s (2 s host), all of them 72 s
            out = "".join(
                f"ORTDIST-TIME k{k}-{e} 100.0 {112.0 if e != 'all' else 172.0}\n"
                for k in range(3)
                for e in (*entries, "all")
            )
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(run, "capture", capture)
    rebuilds: list[tuple[str, ...]] = []

    def rebuild(*extra: str) -> tuple[float, dict[str, float]]:
        rebuilds.append(extra)
        return (10.0 if not extra else 900.0), {"build": 1.0}

    figures = cuda.measure(plan, toolchain, Cache(root=tmp_path), layout, rebuild)  # type: ignore[arg-type]
    assert figures["compile_command_s"] == {"cuda_kernels": 180.0, "onnxruntime": 5.0}
    assert figures["compile_over_every_sitting_s"] == 4321.0 and figures["kernels"] == 3
    assert figures["sample"] == ["a.cu.o", "b.cu.o", "c.cu.o"]
    # 7 entries alone 12 s each, all 72 s: host (84 - 72) / 6 = 2 s, each architecture 10 s.
    assert figures["host_share"] == round(2 / 72, 3)
    assert set(figures["architecture_shares"].values()) == {round(1 / 7, 3)}
    assert rebuilds == [(), ("--fresh",)] and figures["noop_s"] == 10.0 and figures["warm_s"] == 900.0
    timing = toolchain.scripts[-1]
    assert timing.count("ORTDIST-TIME") == 3 * (len(entries) + 1) and "ccache" not in timing
    page = markdown({"cuda": figures})
    assert "## CUDA compile cost: cuda13-linux (3 kernel files)" in page
    assert "| CUDA kernels: architecture 75-real (14% of the device compile) |" in page


def test_a_recipe_without_cuda_has_no_cuda_compile_to_measure(project: Path, tmp_path: Path) -> None:
    plan, _ = plan_for("cpu-linux", project)
    layout = Layout.for_plan(plan, Cache(root=tmp_path), tmp_path / "dist")
    with pytest.raises(BuildError, match="compiles no CUDA code"):
        cuda.measure(plan, FakeToolchain(), Cache(root=tmp_path), layout, lambda *a: (0.0, {}))  # type: ignore[arg-type]
