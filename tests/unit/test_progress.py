from __future__ import annotations

import io

from ortdist.progress import NinjaProgress, eta, failure_excerpt, format_duration, parse_status, render


def test_parse_status() -> None:
    assert parse_status("[12/628] Building CXX object a.o") == (12, 628, "Building CXX object a.o")
    assert parse_status("warning: unused variable") is None


def test_eta_uses_the_rate_of_this_run() -> None:
    assert eta(done=100, total=200, elapsed=50.0) == 50.0
    # resumed at 150/200: 10 edges in 20 s -> 40 left take 80 s
    assert eta(done=160, total=200, elapsed=20.0, first_done=150) == 80.0
    assert eta(done=0, total=200, elapsed=5.0) is None


def test_render_and_durations() -> None:
    assert format_duration(3725) == "1:02:05"
    assert format_duration(65) == "01:05"
    line = render(50, 100, 60.0, width=10)
    assert line.startswith("[#####.....] 50/100")
    assert "ETA 01:00" in line


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_non_tty_progress_prints_a_line_per_five_percent() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = NinjaProgress(out=out, clock=clock)
    for i in range(1, 101):
        clock.now = float(i)
        progress.feed(f"[{i}/100] Building x{i}.o")
        progress.feed("  some compiler warning")
    progress.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 21  # buckets 0..20
    assert lines[-1].startswith("[##############################] 100/100 100%")


LOG = """\
[10/628] Building CXX object a.o
FAILED: CMakeFiles/onnxruntime_providers.dir/element_wise_ops.cc.o
ccache /usr/bin/c++ -DFOO -O3 -c element_wise_ops.cc -o element_wise_ops.cc.o
In file included from element_wise_ops.cc:4:
element_wise_ops.cc:816:52: error: 'PropagateNaN' is not a member of 'Eigen'
  816 |     min = min.array().template min<Eigen::PropagateNaN>(x);
element_wise_ops.cc:832:52: error: 'PropagateNaN' is not a member of 'Eigen'
[11/628] Building CXX object b.o
ninja: build stopped: subcommand failed.
"""


def test_failure_excerpt_names_target_command_and_errors() -> None:
    excerpt = failure_excerpt(LOG.splitlines())
    assert excerpt is not None
    assert excerpt.target == "CMakeFiles/onnxruntime_providers.dir/element_wise_ops.cc.o"
    assert excerpt.command.startswith("ccache /usr/bin/c++")
    assert excerpt.errors == (
        "element_wise_ops.cc:816:52: error: 'PropagateNaN' is not a member of 'Eigen'",
        "element_wise_ops.cc:832:52: error: 'PropagateNaN' is not a member of 'Eigen'",
    )


def test_no_failure_no_excerpt() -> None:
    assert failure_excerpt(["[1/2] a", "[2/2] b"]) is None


def test_cmake_recheck_prestep_is_not_the_build() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = NinjaProgress(out=out, clock=clock)
    progress.feed("[0/2] Re-checking globbed directories...")
    clock.now = 10.0
    progress.feed("[101/200] Building a.o")  # resumed run: 1 edge in 10 s -> 99 left take 990 s
    assert out.getvalue().splitlines() == ["[###############...............] 101/200  50% elapsed 00:10 ETA 16:30"]
