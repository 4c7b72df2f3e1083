"""The CI jobs' cache entries (ci/cache.py): keys derived from the plan's own digests, which change
exactly when what the entry holds changes; and the workflow steps that restore and save them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ortdist import ci
from ortdist.ci import cache as ci_cache
from ortdist.ci.cache import CacheEntry, cache_entries
from ortdist.cli import main
from ortdist.paths import Cache
from ortdist.pipeline.layout import Layout
from ortdist.plan import BuildPlan
from ortdist.project import plan_for
from ortdist.toolchains.debian import DebianSysroot
from ortdist.treecheck import manifest_path

RECIPES = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "recipes").glob("*.toml"))
HOST = "x86_64-unknown-linux-gnu"


def plan(name: str, project: Path) -> BuildPlan:
    return plan_for(name, project)[0]


def entries(name: str, project: Path) -> dict[str, CacheEntry]:
    return {e.name: e for e in cache_entries(plan(name, project))}


def keys(name: str, project: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Entry -> (key, restore keys)."""
    return {n: (e.key, e.restore_keys) for n, e in entries(name, project).items()}


@pytest.fixture
def copy(project: Path, tmp_path: Path) -> Path:
    """A copy of the project's recipes, toolchains and patches, for a test to edit."""
    for folder in ("recipes", "toolchains", "patches"):
        shutil.copytree(project / folder, tmp_path / "project" / folder)
    return tmp_path / "project"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def changed(before: dict[str, tuple[str, tuple[str, ...]]], after: dict[str, tuple[str, tuple[str, ...]]]) -> set[str]:
    """Entries whose key changed; every restore-key prefix must have stayed (fallbacks are shared)."""
    assert before.keys() == after.keys()
    assert {n: r for n, (_, r) in before.items()} == {n: r for n, (_, r) in after.items()}
    return {name for name in before if before[name][0] != after[name][0]}


# --- what the entries hold ---------------------------------------------------------------------------


def test_cpu_linux_entries_name_the_trees_its_build_reuses(project: Path, tmp_path: Path) -> None:
    """Each path is one the build itself uses (the toolchain's and the layout's own functions),
    with its content manifest; nothing else, and no CPython copied from the host."""
    p = plan("cpu-linux", project)
    found = entries("cpu-linux", project)
    assert list(found) == list(ci_cache.ENTRIES)
    cache = Cache(tmp_path / "cache")
    toolchain = DebianSysroot(p.toolchain)
    layout = Layout.for_plan(p, cache, tmp_path / "dist")

    def trees(*paths: Path) -> tuple[str, ...]:
        return tuple(q.relative_to(cache.root).as_posix() for path in paths for q in (path, manifest_path(path)))

    assert found["root"].paths == trees(toolchain.build_root_path(cache))
    assert found["roots"].paths == trees(
        toolchain.clean_root_path(cache),
        toolchain.python_overlay_path(cache, "3.11"),  # from Debian bookworm
        toolchain.python_overlay_path(cache, "3.14"),  # from Debian sid
        *(toolchain.compat_root_path(cache, compat) for compat in p.toolchain.compat.values()),
    )
    assert not any("python3.10" in path or "python3.12" in path for path in found["roots"].paths)  # the host's
    assert found["sources"].paths == trees(layout.source.host, *(place.host for place in layout.deps.values()))
    assert found["compiler"].paths == ("ccache",) == (layout.compiler_cache.host.relative_to(cache.root).as_posix(),)


def test_cpu_linux_keys(project: Path) -> None:
    p = plan("cpu-linux", project)
    found = keys("cpu-linux", project)
    assert found["root"] == (f"ortdist/v1/root/{HOST}/portable-glibc2.17/{p.toolchain.root_digest[:16]}", ())
    roots = f"ortdist/v1/roots/{HOST}/portable-glibc2.17/"
    assert found["roots"][0].startswith(roots) and found["roots"][1] == (roots,)
    assert found["sources"][0].startswith(f"ortdist/v1/sources/1.21.0/{p.source_key}/")
    assert found["sources"][1] == ("ortdist/v1/sources/1.21.0/",)
    toolchain_prefix = f"ortdist/v1/ccache/{HOST}/portable-glibc2.17/"
    assert found["compiler"] == (
        f"{toolchain_prefix}cpu-linux/{p.digest()[:16]}",
        (f"{toolchain_prefix}cpu-linux/", toolchain_prefix),
    )


def test_keys_and_paths_are_safe_for_actions_cache_and_the_shell(project: Path) -> None:
    """actions/cache refuses commas and keys over 512 characters; the pack step splits the paths
    on whitespace with globbing off."""
    for name in RECIPES:
        for entry in cache_entries(plan(name, project)):
            for key in (entry.key, *entry.restore_keys):
                assert "," not in key and len(key) <= 512 and not re.search(r"\s", key), key
                assert entry.key.startswith(key), (entry.key, key)  # fallbacks are prefixes of the key
            for path in entry.paths:
                assert re.fullmatch(r"[A-Za-z0-9._+~-]+(/[A-Za-z0-9._+~-]+)*", path), path
                assert not path.startswith(("/", "..")), path


def test_plan_only_and_rootless_plans_have_no_entries(project: Path) -> None:
    for name in ("coreml-macos-arm64", "dml-windows-x64", "android-arm64", "ios-arm64", "tensorrt-linux"):
        assert cache_entries(plan(name, project)) == (), name


def test_a_cross_plan_caches_its_target_roots_under_its_build_hosts_keys(project: Path) -> None:
    found = entries("slim-linux-aarch64", project)
    assert found["root"].key.startswith(f"ortdist/v1/root/{HOST}/debian-trixie/")  # built on x86_64
    names = [Path(p).name for p in found["roots"].paths if not p.endswith(".content.json")]
    assert [re.sub(r"-[0-9a-f]{12}$", "", n) for n in names] == [
        "debian-trixie-clean",  # the models step converts the reference model there
        "debian-trixie-arm64-target",
        "debian-trixie-arm64-clean",  # the check and the smoke test run the wheel under qemu there
    ]


# --- keys change exactly when their inputs change ----------------------------------------------------


def test_recipes_of_one_toolchain_share_its_root_and_their_sources(project: Path) -> None:
    dnnl, both, cpu = keys("dnnl-linux", project), keys("xnnpack-dnnl-linux", project), keys("cpu-linux", project)
    xnnpack = keys("xnnpack-linux", project)
    assert dnnl["root"] == both["root"] != cpu["root"] == xnnpack["root"]
    assert dnnl["roots"] == both["roots"]  # the clean root only
    assert dnnl["sources"][0] != both["sources"][0]  # patch 0007 is xnnpack's (eps=xnnpack)
    assert dnnl["compiler"][0] != both["compiler"][0]
    assert dnnl["compiler"][1][1] == both["compiler"][1][1]  # the toolchain's last compiler cache
    # xnnpack-linux falls back on cpu-linux's compiler cache: same toolchain, same flags
    assert xnnpack["compiler"][1][1] == cpu["compiler"][1][1] != dnnl["compiler"][1][1]


def test_toolchain_packages_change_the_root_key_not_the_sources_key(copy: Path) -> None:
    before = keys("cpu-linux", copy)
    edit(copy / "toolchains" / "portable-glibc2.17.toml", '"python3-flatbuffers",', '"python3-flatbuffers", "less",')
    after = keys("cpu-linux", copy)
    # The build root is another; the compiler cache follows the plan (its toolchain digest), under
    # the same fallbacks; the other roots (suite, clean-root packages, compat tables) and the sources
    # are what they were.
    assert changed(before, after) == {"root", "compiler"}


def test_a_patch_change_changes_the_sources_key_of_the_recipes_it_applies_to(copy: Path) -> None:
    before = {name: keys(name, copy) for name in ("cpu-linux", "dnnl-linux", "cuda-linux")}
    with (copy / "patches" / "1.21.0" / "0002-python-datasets-without-sample-models.patch").open("a") as f:
        f.write("-- \nedited\n")
    after = {name: keys(name, copy) for name in before}
    for name in before:
        assert changed(before[name], after[name]) == {"sources", "compiler"}, name
    # A patch for one EP's code (eps=cuda,tensorrt) changes only the keys of recipes with that EP.
    with (copy / "patches" / "1.21.0" / "0006-cuda-driver-wrapper-on-first-use.patch").open("a") as f:
        f.write("-- \nedited\n")
    cuda_only = {name: keys(name, copy) for name in before}
    assert changed(after["cuda-linux"], cuda_only["cuda-linux"]) == {"sources", "compiler"}
    assert cuda_only["cpu-linux"] == after["cpu-linux"] and cuda_only["dnnl-linux"] == after["dnnl-linux"]


def test_an_ep_change_changes_the_compiler_key_under_the_same_fallbacks(copy: Path) -> None:
    before = keys("xnnpack-dnnl-linux", copy)
    recipe = copy / "recipes" / "xnnpack-dnnl-linux.toml"
    edit(recipe, 'execution_providers = ["cpu", "xnnpack", "dnnl"]', 'execution_providers = ["cpu", "xnnpack"]')
    after = keys("xnnpack-dnnl-linux", copy)
    # Same toolchain and roots; oneDNN's pinned source and patch 0011 leave with the EP (0007 stays).
    assert changed(before, after) == {"compiler", "sources"}
    prefix = after["compiler"][1][0]
    assert prefix == f"ortdist/v1/ccache/{HOST}/portable-glibc2.17-openmp/xnnpack-dnnl-linux/"
    assert before["compiler"][0].startswith(prefix) and after["compiler"][0].startswith(prefix)


def test_a_python_version_change_changes_the_roots_key(copy: Path) -> None:
    before = keys("cpu-linux", copy)
    edit(copy / "recipes" / "cpu-linux.toml", '"3.12", "3.14"]', '"3.12"]')  # 3.14's overlay is not made
    assert changed(before, keys("cpu-linux", copy)) == {"roots", "compiler"}
    before = keys("cpu-linux", copy)
    edit(copy / "recipes" / "cpu-linux.toml", '"3.13", "3.10", ', '"3.13", ')  # 3.10 is copied from the host
    assert changed(before, keys("cpu-linux", copy)) == {"compiler"}


def test_changing_one_recipe_leaves_every_other_recipes_keys(copy: Path) -> None:
    before = {name: cache_entries(plan(name, copy)) for name in RECIPES}
    edit(copy / "recipes" / "slim-linux.toml", 'build_type = "MinSizeRel"', 'build_type = "Release"')
    after = {name: cache_entries(plan(name, copy)) for name in RECIPES}
    assert [name for name in RECIPES if before[name] != after[name]] == ["slim-linux"]
    slim = ({e.name: e.key for e in before["slim-linux"]}, {e.name: e.key for e in after["slim-linux"]})
    assert {n for n in slim[0] if slim[0][n] != slim[1][n]} == {"compiler"}


def test_the_plan_digest_is_stable_and_follows_the_plan(copy: Path) -> None:
    first, again = plan("cpu-linux", copy), plan("cpu-linux", copy)
    assert first.digest() == again.digest() and re.fullmatch(r"[0-9a-f]{64}", first.digest())
    edit(copy / "recipes" / "cpu-linux.toml", 'description = "', 'description = "edited: ')
    assert plan("cpu-linux", copy).digest() == first.digest()  # the description decides nothing
    edit(copy / "recipes" / "cpu-linux.toml", 'build_type = "Release"', 'build_type = "RelWithDebInfo"')
    assert plan("cpu-linux", copy).digest() != first.digest()


# --- the workflow ------------------------------------------------------------------------------------


def matrix_rows(workflow: str) -> dict[str, dict[str, object]]:
    """The generated matrix rows, by recipe (each value is JSON, as ci._yaml writes it)."""
    matrix = workflow[workflow.index("        include:\n") : workflow.index("\n    steps:\n")]
    rows: dict[str, dict[str, object]] = {}
    for line in matrix.splitlines():
        found = re.fullmatch(r" {10}(- | {2})(\w+): (.*)", line)
        if found is None:
            assert line.lstrip().startswith("#") or line.strip() == "include:", line
            continue
        start, key, value = found.groups()
        if start == "- ":
            row: dict[str, object] = {}
            rows[json.loads(value)] = row
        row[key] = json.loads(value)
    return rows


def test_the_workflow_restores_and_saves_each_entry_of_each_job(project: Path) -> None:
    plans = [plan(name, project) for name in RECIPES]
    workflow = ci.generate(plans)[ci.WORKFLOW]
    wf = ci.runner_facts().workflow
    rows = matrix_rows(workflow)
    assert sorted(rows) == RECIPES
    for p in plans:
        row = rows[p.recipe.name]
        expected = ci.job_cache_entries(p, ci.runner_facts())
        assert row["cache"] is bool(expected), p.recipe.name
        cached = {k: v for k, v in row.items() if k.startswith("cache_")}
        assert cached == {
            field: value
            for e in expected
            for field, value in (
                (f"cache_{e.name}_key", e.key),
                (f"cache_{e.name}_restore", "\n".join(e.restore_keys)),
                (f"cache_{e.name}_paths", " ".join(e.paths)),
            )
        }
    # hosted runners cache; self-hosted GPU runners keep their own disk; plan-only jobs build nothing
    assert [name for name in RECIPES if rows[name]["cache"]] == [
        "cpu-linux",
        "cpu-linux-aarch64",
        "cpu-linux-gcc14-lto",
        "dnnl-linux",
        "openvino-linux",
        "slim-c-linux-aarch64",
        "slim-linux",
        "slim-linux-aarch64",
        "slim-wasm",
        "xnnpack-dnnl-linux",
        "xnnpack-linux",
    ]
    assert rows["cpu-linux"]["compiler_cache_size"] == f"CCACHE_MAXSIZE={wf.compiler_cache_size}"
    assert "compiler_cache_size" not in rows["cuda-linux"]
    # the smoke test runs in the roots of the build's toolchain (the ones the job restored)
    assert rows["cpu-linux"]["smoke_args"] == "--toolchain portable-glibc2.17"
    assert rows["cuda-linux"]["smoke_args"] == "--toolchain cuda12 --require-device"

    for name in ci_cache.ENTRIES:
        archive = f"path: ${{{{ runner.temp }}}}/ortdist-cache-archives/{name}.tar"
        restore = workflow.index(f"- name: Restore cache ({name})")
        save = workflow.index(f"- name: Save cache ({name})")
        # the same path in both (actions/cache's version of an entry includes its paths)
        assert workflow.count(archive) == 2
        assert workflow.index(f"uses: {wf.cache_restore}", restore) < workflow.index(archive, restore)
        assert workflow.index(f"uses: {wf.cache_save}", save) < workflow.index(archive, save)
        # restored before the build; packed and saved after the upload, even when a step failed
        # (not when cancelled), and only under a key that missed
        assert restore < workflow.index("- name: Unpack cache (" + name) < workflow.index("- name: Build")
        assert workflow.index("- name: Upload") < workflow.index(f"- name: Pack cache ({name})") < save
        assert (
            f"if: ${{{{ !cancelled() && matrix.cache_{name}_key && "
            f"steps.restore-{name}.outputs.cache-hit != 'true' }}}}" in workflow
        )
        assert f"if: ${{{{ !cancelled() && steps.pack-{name}.outputs.packed == 'true' }}}}" in workflow
    assert 'echo "ORTDIST_CACHE=$RUNNER_TEMP/ortdist-cache" >> "$GITHUB_ENV"' in workflow
    # root's archives, with numeric owners: a root's users are not the runner's
    assert "sudo tar -c --numeric-owner --one-file-system" in workflow
    assert "sudo tar -x --numeric-owner -p" in workflow


def test_a_runner_that_keeps_its_disk_gets_no_cache_steps(project: Path) -> None:
    facts = ci.runner_facts()
    cuda = plan("cuda-linux", project)
    assert cache_entries(cuda) != ()  # the plan has entries, but its runner needs none
    assert not facts.runner_for(cuda).actions_cache and ci.job_cache_entries(cuda, facts) == ()
    assert all(r.actions_cache for r in facts.targets.values())


def test_matrix_ignores_the_shells_compiler_cache(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs build with ccache; `ortdist matrix` in a shell with ORTDIST_COMPILER_CACHE=sccache
    must neither drift nor write other keys."""
    monkeypatch.setenv("ORTDIST_COMPILER_CACHE", "sccache")
    monkeypatch.chdir(project)
    assert main(["matrix", "--check"]) == 0
