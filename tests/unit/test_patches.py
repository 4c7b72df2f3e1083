from __future__ import annotations

import difflib
import itertools
import re
from pathlib import Path

import pytest

from ortdist.errors import PatchError
from ortdist.patches import apply_series, describe_failure, prepare_tree, read_series

ORIGINAL = "".join(f"line {i}\n" for i in range(1, 31))


def unified(path: str, old: str, new: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), fromfile=f"a/{path}", tofile=f"b/{path}")
    )


@pytest.fixture
def series(tmp_path: Path) -> Path:
    d = tmp_path / "patches"
    d.mkdir()
    step1 = ORIGINAL.replace("line 5\n", "line five\n")
    step2 = step1.replace("line 20\n", "line twenty\n")
    (d / "0001-five.patch").write_text("Subject: five\n\n" + unified("src/f.txt", ORIGINAL, step1))
    (d / "0002-twenty.patch").write_text(unified("src/f.txt", step1, step2))
    (d / "series").write_text("# comment\n0001-five.patch\n\n0002-twenty.patch  # trailing comment\n")
    return d


def fill(tree: Path) -> None:
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "f.txt").write_text(ORIGINAL)


def test_series_applies_in_order_to_a_fresh_copy(series: Path, tmp_path: Path) -> None:
    patches = read_series(series)
    assert [p.name for p in patches] == ["0001-five.patch", "0002-twenty.patch"]
    assert all(len(p.sha256) == 64 for p in patches)
    dest = tmp_path / "cache" / "src-abc"
    prepare_tree(dest, fill, patches)
    text = (dest / "src" / "f.txt").read_text()
    assert "line five\n" in text and "line twenty\n" in text
    assert (dest / ".ortdist-patched").read_text().startswith("0001-five.patch ")
    assert not list(dest.rglob("*.orig")) and not list(dest.rglob("*.rej"))


def test_failing_patch_names_patch_file_and_hunk_and_leaves_nothing(series: Path, tmp_path: Path) -> None:
    def drifted(tree: Path) -> None:
        fill(tree)
        (tree / "src" / "f.txt").write_text(ORIGINAL.replace("line 20\n", "line 20 changed upstream\n"))

    dest = tmp_path / "cache" / "src-abc"
    with pytest.raises(PatchError) as info:
        prepare_tree(dest, drifted, read_series(series))
    text = str(info.value)
    assert "0002-twenty.patch" in text
    assert "src/f.txt: hunk #1 does not apply" in text
    assert "discarded" in text
    assert list((tmp_path / "cache").iterdir()) == []  # no dest, no temp sibling


def test_already_applied_patch_is_reported(series: Path, tmp_path: Path) -> None:
    tree = tmp_path / "t"
    fill(tree)
    patches = read_series(series)
    apply_series(patches[:1], tree)
    with pytest.raises(PatchError, match="already applied"):
        apply_series(patches[:1], tree)


def test_missing_file_in_series_names_the_line(series: Path) -> None:
    (series / "series").write_text("0001-five.patch\n0003-gone.patch\n")
    with pytest.raises(PatchError) as info:
        read_series(series)
    assert f"{series / 'series'}:2" in str(info.value)
    assert "'0003-gone.patch' does not exist" in str(info.value)


def test_missing_series_file(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="no series file"):
        read_series(tmp_path)


def test_describe_failure_parses_gnu_patch_output() -> None:
    out = (
        "checking file cmake/onnxruntime_python.cmake\n"
        "Hunk #1 FAILED at 609.\n"
        "Hunk #3 FAILED at 700.\n"
        "2 out of 3 hunks FAILED\n"
        "checking file other.cc\n"
    )
    assert describe_failure(out) == [
        "cmake/onnxruntime_python.cmake: hunk #1 does not apply (expected near line 609)",
        "cmake/onnxruntime_python.cmake: hunk #3 does not apply (expected near line 700)",
    ]
    assert describe_failure("can't find file to patch at input line 3\n") == [
        "a file the patch changes does not exist in the source"
    ]


def test_project_series_is_well_formed(project: Path) -> None:
    patches = read_series(project / "patches" / "1.21.0")
    assert [p.name[:4] for p in patches] == [f"{n:04d}" for n in range(1, 18)]
    assert [p.eps for p in patches if p.eps] == [
        ("cuda", "tensorrt"),
        ("xnnpack",),
        ("cuda", "tensorrt"),
        ("dnnl",),
        ("cuda", "tensorrt"),
        ("openvino",),
    ]
    assert [p.features for p in patches if p.features] == [
        ("fp16_and_nbit_kernels",),
        ("minimal_build",),
        ("int8_kernels",),
    ]
    assert [p.targets for p in patches if p.targets] == [
        ("aarch64-unknown-linux-gnu",),
        ("wasm32-unknown-emscripten",),
        ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"),
    ]
    # A patch to one EP's code reaches only the builds with that EP.
    assert "0007" not in {p.name[:4] for p in read_series(project / "patches" / "1.21.0", eps=["cpu", "dnnl"])}
    assert "0011" not in {p.name[:4] for p in read_series(project / "patches" / "1.21.0", eps=["cpu", "xnnpack"])}
    assert "0016" in {p.name[:4] for p in read_series(project / "patches" / "1.21.0", eps=["cpu", "openvino"])}
    assert "0016" not in {p.name[:4] for p in read_series(project / "patches" / "1.21.0", eps=["cpu"])}
    for patch in patches:
        text = patch.path.read_text()
        assert text.startswith("Subject: ")
        assert "Written for ortdist." in text


def test_a_patch_for_one_feature_applies_only_to_recipes_that_change_it(project: Path) -> None:
    from ortdist.project import load_patches
    from ortdist.recipe import load_recipe

    names = {
        recipe: {p.name[:4] for p in load_patches(load_recipe(project / "recipes" / f"{recipe}.toml"), project)}
        for recipe in ("cpu-linux", "slim-linux-aarch64", "slim-c-linux-aarch64")
    }
    assert "0008" not in names["cpu-linux"] and "0008" not in names["slim-linux-aarch64"]
    assert names["slim-c-linux-aarch64"] == names["slim-linux-aarch64"] | {"0008", "0014"}
    # 0010 (GCC 11 in a minimal build): every slim recipe, never a full build
    assert "0010" in names["slim-linux-aarch64"] and "0010" not in names["cpu-linux"]


def test_a_patch_for_one_target_applies_only_to_its_builds(project: Path) -> None:
    """0012 (AT_HWCAP2 for a glibc 2.17 arm64 sysroot): every aarch64 recipe; cpu-linux's source, and
    so its tree and compiler cache, stay as they were."""
    from ortdist.project import load_patches
    from ortdist.recipe import load_recipe

    def names(recipe: str) -> set[str]:
        return {p.name[:4] for p in load_patches(load_recipe(project / "recipes" / f"{recipe}.toml"), project)}

    assert names("cpu-linux-aarch64") == names("cpu-linux") | {"0012"}
    assert "0012" in names("slim-linux-aarch64") and "0012" not in names("slim-linux")
    # 0013 (Debian's emscripten): the WebAssembly recipe alone
    assert names("slim-wasm") - names("slim-linux") == {"0013"} and "0013" not in names("cpu-linux")
    # 0017 (the binding links libonnxruntime): Linux wheel targets, not the WebAssembly module
    assert "0017" in names("cpu-linux") and "0017" in names("cpu-linux-aarch64") and "0017" not in names("slim-wasm")


def test_a_patch_for_one_ep_applies_only_to_its_builds(project: Path) -> None:
    series = project / "patches" / "1.21.0"
    cpu = [p.name for p in read_series(series, {"cpu"})]
    cuda = [p.name for p in read_series(series, {"cpu", "cuda"})]
    assert "0006-cuda-driver-wrapper-on-first-use.patch" not in cpu
    assert cuda == sorted(
        [
            *cpu,
            "0006-cuda-driver-wrapper-on-first-use.patch",
            "0009-cuda-13-cccl-3.patch",
            "0015-cuda-whole-program-compilation-keeps-ptx.patch",
        ]
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("a.patch eps=cudaa", "unknown EP cudaa"),
        ("a.patch features=fp16_kernels", "did you mean 'fp16_and_nbit_kernels'"),
        ("a.patch features=", "'features=' is not an option"),
        ("a.patch only=cuda", "'only=cuda' is not an option"),
        ("a.patch eps=", "'eps=' is not an option"),
        ("a.patch targets=aarch64-linux-gnu", "unknown target aarch64-linux-gnu"),
    ],
)
def test_bad_series_options_are_refused(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "a.patch").write_text("Subject: x\n")
    (tmp_path / "series").write_text(line + "\n")
    with pytest.raises(PatchError, match=message) as err:
        read_series(tmp_path)
    assert err.value.where == f"{tmp_path / 'series'}:1"


def _hunks(text: str) -> dict[str, list[tuple[int, int, bool]]]:
    """file -> (first line, last line, has context) of each hunk, in the original's numbering."""
    found: dict[str, list[tuple[int, int, bool]]] = {}
    current, lines = "", text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("+++ b/"):
            current = line[len("+++ b/") :]
        elif m := re.match(r"^@@ -(\d+)(?:,(\d+))? ", line):
            start, count = int(m[1]), int(m[2] if m[2] is not None else 1)
            body = [b for b in lines[i + 1 :] if b[:1] in (" ", "-", "+")][: count + 50]
            found.setdefault(current, []).append((start, start + count - 1, any(b[:1] == " " for b in body[:count])))
    return found


def test_feature_patches_to_one_file_apply_in_either_order(project: Path) -> None:
    """0008 and 0014 change neighbouring lines of MLAS's platform.cpp, and a recipe may set either
    key alone: their hunks there carry no context lines and never overlap, so each applies to the
    source whether the other was applied or not."""
    directory = project / "patches" / "1.21.0"
    fp16, int8 = (
        _hunks((directory / name).read_text())
        for name in (
            "0008-mlas-arm64-without-fp16-and-nbit-kernels.patch",
            "0014-mlas-arm64-without-int8-kernels.patch",
        )
    )
    shared = set(fp16) & set(int8)
    assert shared == {"onnxruntime/core/mlas/lib/platform.cpp"}
    for name in shared:
        ours = fp16[name] + int8[name]
        assert not any(context for _, _, context in ours)
        spans = sorted((a, b) for a, b, _ in ours)
        assert all(prev[1] < nxt[0] for prev, nxt in itertools.pairwise(spans)), spans
