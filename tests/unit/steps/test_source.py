"""The source step: the pinned orig tarball and dependency sdists, fetched through ``sources``
(stubbed here: no network), unpacked once, the patch series applied once per source key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortdist import patches, sources, treecheck
from ortdist.errors import PatchError
from ortdist.patches import Patch
from ortdist.pipeline.steps import source

from .conftest import MakeEnv


class FakeSources:
    """Stands in for the network and tar: records what was asked for and lays out the trees."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, downloads: Path) -> None:
        self.fetched: list[sources.Pinned] = []
        self.unpacked: list[tuple[str, Path]] = []
        self.patched: list[tuple[tuple[str, ...], Path]] = []
        self.downloads = downloads
        monkeypatch.setattr(sources, "fetch", self.fetch)
        monkeypatch.setattr(sources, "unpack", self.unpack)
        monkeypatch.setattr(sources, "unpack_dependency", lambda archive, dest, subdir="": self.unpack(archive, dest))
        monkeypatch.setattr(sources, "pypi_sdist_url", lambda project, name: f"https://pypi.test/{project}/{name}")
        monkeypatch.setattr(patches, "apply_series", self.apply_series)
        monkeypatch.setattr(source, "require_host_tools", lambda *tools: None)

    def fetch(self, pin: sources.Pinned, downloads: Path) -> Path:
        assert downloads == self.downloads
        self.fetched.append(pin)
        return downloads / pin.filename

    def unpack(self, archive: Path, dest: Path) -> None:
        self.unpacked.append((archive.name, dest))
        dest.mkdir(parents=True)
        (dest / "CMakeLists.txt").write_text(archive.name)

    def apply_series(self, series: tuple[Patch, ...], tree: Path) -> None:
        self.patched.append((tuple(p.name for p in series), tree))


def test_the_debian_source_is_fetched_unpacked_and_patched(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env("cpu-linux")
    fake = FakeSources(monkeypatch, env.ctx.cache.downloads)
    out = source.run(env.ctx, env.state)
    pin = env.plan.version.source
    orig, onnx, *others = fake.fetched
    assert (orig.filename, orig.sha256) == (pin.orig_tarball, pin.sha256)
    assert orig.url.endswith(pin.pool_path)
    dep = env.plan.deps[0]
    assert (onnx.filename, onnx.sha256, onnx.url) == (
        dep.filename,
        dep.sha256,
        f"https://pypi.test/onnx/{dep.filename}",
    )
    # The portable toolchain compiles every dependency from source: Debian's pool or PyPI, each pinned.
    abseil = next(d for d in env.plan.deps if d.name == "abseil_cpp")
    assert (others[0].filename, others[0].sha256) == (abseil.filename, abseil.sha256)
    # Debian's pool on the toolchain's declared mirror (the tests' host has no apt sources).
    assert others[0].url == f"{env.plan.toolchain.mirror}/pool/main/a/abseil/{abseil.filename}"
    assert [p.filename for p in fake.fetched[1:]] == [d.filename for d in env.plan.deps]
    tree = env.layout.source.host
    assert [name for name, _ in fake.unpacked] == [pin.orig_tarball, *(d.filename for d in env.plan.deps)]
    assert fake.unpacked[1][1] == env.layout.deps["onnx"].host
    # The series applies to the pristine copy before it becomes the tree; CUDA's patch is not in a CPU plan.
    names = tuple(p.name for p in env.plan.patches)
    assert [s for s, _ in fake.patched] == [names] and "0006-cuda-driver-wrapper-on-first-use.patch" not in names
    assert fake.patched[0][1] != tree
    assert (tree / "CMakeLists.txt").read_text() == pin.orig_tarball
    assert (tree / ".ortdist-patched").read_text() == "".join(f"{p.name} {p.sha256}\n" for p in env.plan.patches)
    # The manifest says which mirror the source came from, and where that was read.
    mirror = {"url": env.plan.toolchain.mirror, "origin": "the toolchain's mirror"}
    assert out.record == {
        "kind": "debian",
        "file": orig.filename,
        "url": orig.url,
        "sha256": pin.sha256,
        "mirror": mirror,
    }
    assert out.patches == tuple({"name": p.name, "sha256": p.sha256} for p in env.plan.patches)
    assert out.manifest()["source"]["sha256"] == pin.sha256


def test_a_prepared_tree_is_reused(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env("cpu-linux")
    fake = FakeSources(monkeypatch, env.ctx.cache.downloads)
    source.run(env.ctx, env.state)
    fake.unpacked.clear()
    fake.patched.clear()
    source.run(env.ctx, env.state)
    assert fake.unpacked == [] and fake.patched == []


def test_a_patch_that_does_not_apply_leaves_no_tree(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_env("cpu-linux")
    fake = FakeSources(monkeypatch, env.ctx.cache.downloads)

    def refuse(series: tuple[Patch, ...], tree: Path) -> None:
        raise PatchError("does not apply")

    monkeypatch.setattr(patches, "apply_series", refuse)
    with pytest.raises(PatchError):
        source.run(env.ctx, env.state)
    assert not env.layout.source.host.exists()
    assert len(fake.unpacked) == 1  # the pristine copy, discarded


def test_a_local_tree_is_copied_afresh_every_run(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project: Path
) -> None:
    """A path source can change under us: unlike a pinned tarball, it is never trusted from the cache."""
    local = tmp_path / "ort-checkout"
    (local / "cmake").mkdir(parents=True)
    (local / "cmake" / "CMakeLists.txt").write_text("v1")
    recipe = tmp_path / "recipes" / "local.toml"
    recipe.parent.mkdir()
    text = (project / "recipes" / "cpu-linux.toml").read_text().replace('name = "cpu-linux"', 'name = "local"')
    recipe.write_text(text + '\n[source]\nkind = "path"\npath = "../ort-checkout"\n')
    env = make_env(str(recipe))
    fake = FakeSources(monkeypatch, env.ctx.cache.downloads)
    for place in env.layout.deps.values():  # already unpacked and recorded: nothing to fetch
        place.host.mkdir(parents=True)
        treecheck.record(place.host)
    out = source.run(env.ctx, env.state)
    assert fake.fetched == []
    assert out.record == {"kind": "path", "url": "", "tag": "", "path": "../ort-checkout", "sha256": ""}
    assert (env.layout.source.host / "cmake" / "CMakeLists.txt").read_text() == "v1"
    (local / "cmake" / "CMakeLists.txt").write_text("v2")
    source.run(env.ctx, env.state)
    assert (env.layout.source.host / "cmake" / "CMakeLists.txt").read_text() == "v2"
    assert len(fake.patched) == 2


def test_a_tampered_tree_is_made_again_by_the_step(make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step verifies both cached trees it would reuse: the patched source and the dependency's."""
    env = make_env("cpu-linux")
    fake = FakeSources(monkeypatch, env.ctx.cache.downloads)
    source.run(env.ctx, env.state)
    (env.layout.source.host / "CMakeLists.txt").write_text("")
    (env.layout.deps["onnx"].host / "CMakeLists.txt").write_text("tampered")
    fake.unpacked.clear()
    source.run(env.ctx, env.state)
    assert [name for name, _ in fake.unpacked] == [
        env.plan.version.source.orig_tarball,
        env.plan.deps[0].filename,
    ]
    assert (env.layout.source.host / "CMakeLists.txt").read_text() == env.plan.version.source.orig_tarball
    fake.unpacked.clear()
    source.run(env.ctx, env.state)
    assert fake.unpacked == []
