"""`ortdist cache` and the disk checks: which trees the recipes' plans use, what `--prune` removes,
what a build refuses before it starts when the disk lacks room, and what a full disk mid-run says."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from ortdist import cacheuse, diskspace
from ortdist.cli import commands, main
from ortdist.paths import Cache
from ortdist.pipeline.layout import root_names, source_tree_name
from ortdist.plan import BuildPlan
from ortdist.project import plan_for
from ortdist.toolchains import load_toolchain
from ortdist.treecheck import MANIFEST_SUFFIX

PROJECT = Path(__file__).resolve().parents[2]


def make_tree(path: Path, size: int = 4096, manifest: bool = True) -> None:
    path.mkdir(parents=True)
    (path / "file").write_bytes(b"x" * size)
    if manifest:
        path.with_name(path.name + MANIFEST_SUFFIX).write_text("{}")


def cold_cache(tmp_path: Path) -> tuple[Cache, dict[str, BuildPlan]]:
    """A cache with cpu-linux's source, build root and tree, and trees nothing uses any more."""
    cache = Cache(tmp_path / "cache")
    plan = plan_for("cpu-linux", PROJECT)[0]
    make_tree(cache.sources / source_tree_name(plan))
    make_tree(cache.sources / "onnxruntime-1.21.0-0123456789abcdef")  # an older patch series'
    make_tree(cache.sysroots / root_names(plan)[0], size=8192)
    make_tree(cache.sysroots / "portable-glibc2.17-000000000000")  # an older toolchain digest's
    make_tree(cache.work("cpu-linux"), manifest=False)
    make_tree(cache.work("renamed-recipe"), manifest=False)
    make_tree(cache.sources / ".tmp-onnxruntime-1", manifest=False)  # a build in progress: not listed
    (cache.root / "ccache").mkdir()
    return cache, {"cpu-linux": plan}


def test_the_survey_names_who_uses_each_tree_and_what_none_uses(tmp_path: Path) -> None:
    cache, plans = cold_cache(tmp_path)
    plan = plans["cpu-linux"]
    entries = {(e.kind, e.name): e for e in cacheuse.survey(cache, plans, cacheuse.disk_bytes)}
    used = {key for key, e in entries.items() if e.used_by == ("cpu-linux",)}
    assert used == {
        ("sources", source_tree_name(plan)),
        ("sysroots", root_names(plan)[0]),
        ("work", "cpu-linux"),
    }
    prunable = {key for key, e in entries.items() if e.prunable}
    assert prunable == {
        ("sources", "onnxruntime-1.21.0-0123456789abcdef"),
        ("sysroots", "portable-glibc2.17-000000000000"),
        ("work", "renamed-recipe"),
    }
    assert entries[("ccache", "")].kept and not entries[("ccache", "")].prunable
    # A tree's content manifest is listed with it, never alone; a temp tree is not listed at all.
    assert not any(name.endswith(MANIFEST_SUFFIX) or name.startswith(".") for _, name in entries)
    root = entries[("sysroots", root_names(plan)[0])]
    assert 8192 + 2 <= root.size < 8192 + 3 * 4096 * 2


def test_prune_removes_the_unused_trees_with_their_manifests_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache, plans = cold_cache(tmp_path)
    monkeypatch.setenv("ORTDIST_CACHE", str(cache.root))
    monkeypatch.setenv("ORTDIST_PROJECT", str(PROJECT))
    before = sorted(p.relative_to(cache.root) for p in cache.root.rglob("*"))
    assert main(["cache"]) == 0  # the listing alone removes nothing
    listing = capsys.readouterr().out
    assert "onnxruntime-1.21.0-0123456789abcdef" in listing and "unused" in listing
    assert "3 tree(s) no recipe uses" in listing and "`ortdist cache --prune` removes them" in listing
    assert sorted(p.relative_to(cache.root) for p in cache.root.rglob("*")) == before
    assert main(["cache", "--prune"]) == 0
    out = capsys.readouterr().out
    assert out.count("removed") >= 3
    left = {p.name for kind in ("sources", "sysroots", "work") for p in (cache.root / kind).iterdir()}
    plan = plans["cpu-linux"]
    kept_source, kept_root = source_tree_name(plan), root_names(plan)[0]
    assert left - {".tmp-onnxruntime-1"} == {
        kept_source,
        kept_source + MANIFEST_SUFFIX,
        kept_root,
        kept_root + MANIFEST_SUFFIX,
        "cpu-linux",
    }


def test_prune_removes_a_link_into_another_cache_not_what_it_points_at(tmp_path: Path) -> None:
    """The tests' scratch cache links the user's trees in: pruning it must not reach through."""
    target = tmp_path / "user" / "sources" / "onnxruntime-1.21.0-old"
    make_tree(target, size=65536, manifest=False)
    cache = Cache(tmp_path / "scratch")
    cache.sources.mkdir(parents=True)
    (cache.sources / target.name).symlink_to(target)
    (entry,) = cacheuse.survey(cache, {}, cacheuse.disk_bytes)
    assert entry.prunable and entry.size < 65536  # the link's own block at most
    cacheuse.remove(cache, entry)
    assert not (cache.sources / target.name).is_symlink() and (target / "file").is_file()


def test_a_host_cpython_overlay_is_kept_a_debian_one_is_not() -> None:
    """A host CPython's overlay name digests this host's installation, which no plan knows."""
    plan = plan_for("cpu-linux", PROJECT)[0]
    host = cacheuse.host_named([plan])
    assert host is not None
    host_versions = [v for v, f in plan.toolchain.extra_python.items() if f.source == "host"]
    debian_versions = [v for v, f in plan.toolchain.extra_python.items() if f.source != "host"]
    assert host_versions and debian_versions
    assert host.match(f"{plan.toolchain.name}-python{host_versions[0]}-0123456789ab")
    assert not host.match(f"{plan.toolchain.name}-python{debian_versions[0]}-0123456789ab")


def test_the_web_smokes_browser_root_is_one_of_the_plans_roots() -> None:
    """slim-wasm runs Chromium in [compat.chromium] (web_smoke, not the compat step): CI caches it
    and `ortdist cache` counts it as used."""
    plan = plan_for("slim-wasm", PROJECT)[0]
    assert "compat" not in plan.steps and "web_smoke" in plan.steps
    assert any(name.startswith("compat-chromium-") for name in root_names(plan))


def test_a_warm_build_needs_the_spare_only_a_cold_one_every_part(tmp_path: Path) -> None:
    disk = diskspace.facts()
    cache, plans = cold_cache(tmp_path)
    plan = plans["cpu-linux"]
    warm = diskspace.need(plan, cache, disk)
    assert warm.parts == (("to spare", disk.spare_gb * diskspace.GB),)
    cold = diskspace.need(plan, Cache(tmp_path / "empty"), disk)
    sizes = disk.of("portable-glibc2.17")
    assert [what for what, _ in cold.parts] == [
        "the portable-glibc2.17 roots",
        "the patched source",
        "the build tree",
        "to spare",
    ]
    assert cold.total == pytest.approx((sizes.root_gb + disk.source_gb + sizes.tree_gb + disk.spare_gb) * 1e9)


def test_every_listed_toolchain_exists_and_cuda_needs_more_than_cpu() -> None:
    disk = diskspace.facts()
    for name in disk.toolchains:
        if name != "default":
            load_toolchain(PROJECT, name)  # a renamed toolchain's entry would go unused: fails here
    assert disk.of("cuda12").root_gb > disk.of("portable-glibc2.17").root_gb
    assert disk.of("no-such-toolchain") == disk.toolchains["default"]


def test_a_full_disk_mid_run_is_said_with_the_fix_and_its_own_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def full(args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x.o"))

    monkeypatch.setattr(commands, "cmd_validate", full)
    assert main(["validate"]) == 12
    err = capsys.readouterr().err
    assert f"{tmp_path / 'x.o'}: ortdist validate: the disk is full" in err
    assert "ortdist cache --prune" in err and "rerun the same command" in err


def test_an_integration_run_on_a_too_full_disk_stops_before_its_first_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conftest's check (the session's start, and each cold rotation build): the recipe's parts not
    cached yet plus what the tests take, on the temp directory's disk and the cache's."""
    from conftest import ROTATION_TESTS_DISK_GB, TESTS_DISK_GB, disk_short

    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    cold = diskspace.need(plan_for("cpu-linux", PROJECT)[0], Cache(tmp_path / "cache"), diskspace.facts()).total
    room = cold + TESTS_DISK_GB * 1e9
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: int(room))
    assert disk_short("cpu-linux", TESTS_DISK_GB) == ""
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: int(room) - 10**9)
    said = disk_short("cpu-linux", TESTS_DISK_GB)
    assert said.startswith(f"cpu-linux's build needs about {cold / 1e9:.1f} GB on the cache's disk (the portable")
    assert f"and the tests {TESTS_DISK_GB:g} GB" in said and "`ortdist cache --prune`" in said
    # A cold rotation build comes last, after the tests that take the most: it weighs its own.
    assert disk_short("cpu-linux", ROTATION_TESTS_DISK_GB) == ""
