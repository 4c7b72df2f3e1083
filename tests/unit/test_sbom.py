from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ortdist import deflate, sbom
from ortdist.errors import CheckError, PackageError
from ortdist.patches import read_series
from ortdist.plan import BuildPlan, make_plan
from ortdist.recipe import load_recipe
from ortdist.toolchains import load_toolchain
from ortdist.wheel import record
from ortdist.wheel.record import add_to_dist_info


def recipe_plan(project: Path, name: str = "dnnl-linux") -> BuildPlan:
    """The recipe's plan; dnnl-linux on debian-trixie (Debian's oneDNN, grafted by the repair), the
    kind of build whose SBOM names root packages and bundled libraries."""
    recipe = load_recipe(project / "recipes" / f"{name}.toml")
    if name == "dnnl-linux":
        recipe = dataclasses.replace(recipe, toolchain="debian-trixie")
    return make_plan(
        recipe,
        load_toolchain(project, recipe.toolchain),
        read_series(project / "patches" / "1.21.0", {"cpu", *recipe.execution_providers}, target=recipe.target),
    )


def inputs(project: Path, **kw: object) -> sbom.SbomInputs:
    base: dict[str, object] = {
        "plan": recipe_plan(project),
        "recipe_path": "recipes/dnnl-linux.toml",
        "recipe_text": (project / "recipes" / "dnnl-linux.toml").read_text(),
        "recipe_sha256": "ab" * 32,
        "source": {
            "kind": "debian",
            "file": "onnxruntime_1.21.0+dfsg.orig.tar.xz",
            "url": "http://x/o.tar.xz",
            "sha256": "32df" * 16,
        },
        "root_packages": {"libdnnl3.7": "3.7.2+ds-1", "gcc-14": "14.2.0-19"},
        "source_date_epoch": 1741221472,
        "bundled": (
            sbom.BundledFile(
                path="onnxruntime_dnnl.libs/libdnnl-565aea08.so.3.7",
                sha256="cd" * 32,
                package="libdnnl3.7",
                package_version="3.7.2+ds-1",
            ),
        ),
    }
    base.update(kw)
    return sbom.SbomInputs(**base)  # type: ignore[arg-type]


SUBJECT = {"name": "onnxruntime-dnnl", "version": "1.21.0", "purl": "pkg:pypi/onnxruntime-dnnl@1.21.0"}


def test_sbom_names_source_patches_packages_recipe_and_bundled_libraries(project: Path) -> None:
    doc = sbom.make_sbom(inputs(project), SUBJECT)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    assert doc["metadata"]["timestamp"] == "2025-03-06T00:37:52Z"  # SOURCE_DATE_EPOCH, not now
    refs = {c["bom-ref"]: c for c in doc["components"]}
    source = refs["source:onnxruntime"]
    assert source["hashes"] == [{"alg": "SHA-256", "content": "32df" * 16}]
    patch_urls = [p["diff"]["url"] for p in source["pedigree"]["patches"]]
    assert "patches/1.21.0/0011-dnnl-onednn-from-source-static-openmp.patch" in patch_urls  # eps=dnnl
    series = read_series(project / "patches" / "1.21.0", {"cpu"})
    for p in series:
        assert refs[f"patch:{p.name}"]["hashes"][0]["content"] == p.sha256
    assert refs["source:onnx"]["purl"] == "pkg:pypi/onnx@1.17.0"
    assert "[wheel]" in refs["recipe"]["properties"][0]["value"]  # the recipe text itself
    platform = refs["toolchain:debian-trixie"]
    purls = [c["purl"] for c in platform["components"]]
    assert purls == [
        "pkg:deb/debian/gcc-14@14.2.0-19?arch=amd64&distro=trixie",
        "pkg:deb/debian/libdnnl3.7@3.7.2%2Bds-1?arch=amd64&distro=trixie",
    ]
    bundled = refs["bundled:onnxruntime_dnnl.libs/libdnnl-565aea08.so.3.7"]
    assert bundled["pedigree"]["ancestors"][0] == {"type": "library", "name": "libdnnl3.7", "version": "3.7.2+ds-1"}
    props = {p["name"]: p["value"] for p in doc["metadata"]["properties"]}
    assert props["ortdist:execution-providers"] == "cpu,dnnl"
    assert props["ortdist:cmake:onnxruntime_USE_DNNL"] == "ON"


def test_sbom_is_reproducible_and_its_serial_follows_content(project: Path) -> None:
    one = sbom.dumps(sbom.make_sbom(inputs(project), SUBJECT))
    assert one == sbom.dumps(sbom.make_sbom(inputs(project), SUBJECT))
    other = sbom.make_sbom(inputs(project, root_packages={"gcc-14": "14.2.0-20"}), SUBJECT)
    assert json.loads(one)["serialNumber"] != other["serialNumber"]


def test_summary_reads_back_what_inspect_prints(project: Path) -> None:
    facts = sbom.summary(sbom.make_sbom(inputs(project), SUBJECT))
    assert facts["subject"] == "onnxruntime-dnnl 1.21.0"
    assert facts["recipe"] == "dnnl-linux"
    assert facts["execution_providers"] == ["cpu", "dnnl"]
    assert facts["source"]["sha256"] == "32df" * 16
    assert len(facts["source"]["patches"]) == 7
    assert facts["bundled"] == [
        {"file": "onnxruntime_dnnl.libs/libdnnl-565aea08.so.3.7", "from": "libdnnl3.7 3.7.2+ds-1"}
    ]
    assert facts["toolchain"].endswith("(2 packages)")


def test_original_soname_undoes_auditwheels_rename() -> None:
    assert sbom.original_soname("libdnnl-565aea08.so.3.7") == "libdnnl.so.3.7"
    assert sbom.original_soname("libprotobuf-lite-47f74ff9.so.32.0.12") == "libprotobuf-lite.so.32.0.12"
    assert sbom.original_soname("libonnxruntime.so.1.21.0") == "libonnxruntime.so.1.21.0"


def _wheel(path: Path) -> Path:
    files = {"pkg/__init__.py": b"x = 1\n", "pkg-1.0.dist-info/METADATA": b"Name: pkg\nVersion: 1.0\n"}
    fixed = (2024, 1, 1, 0, 0, 0)  # not "now": two wheels made a second apart must be equal
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, fixed), data)
        record = "".join(f"{n},sha256=x,{len(d)}\n" for n, d in files.items()) + "pkg-1.0.dist-info/RECORD,,\n"
        zf.writestr(zipfile.ZipInfo("pkg-1.0.dist-info/RECORD", fixed), record)
    return path


def test_sbom_goes_into_the_wheel_with_a_correct_record_line(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    payload = b'{"bomFormat": "CycloneDX"}\n'
    add_to_dist_info(wheel, {"sboms/ortdist.cdx.json": payload}, 1741221472)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        record = zf.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
        info = zf.getinfo("pkg-1.0.dist-info/sboms/ortdist.cdx.json")
    assert names[-2:] == ["pkg-1.0.dist-info/sboms/ortdist.cdx.json", "pkg-1.0.dist-info/RECORD"]
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    assert f"pkg-1.0.dist-info/sboms/ortdist.cdx.json,sha256={digest},{len(payload)}" in record
    assert record[-1] == "pkg-1.0.dist-info/RECORD,,"
    assert info.date_time == (2025, 3, 6, 0, 37, 52)
    # Same inputs, same bytes.
    (tmp_path / "again").mkdir()
    again = _wheel(tmp_path / "again" / "pkg-1.0-py3-none-any.whl")
    add_to_dist_info(again, {"sboms/ortdist.cdx.json": payload}, 1741221472)
    assert hashlib.sha256(again.read_bytes()).digest() == hashlib.sha256(wheel.read_bytes()).digest()
    with pytest.raises(PackageError, match="already has"):
        add_to_dist_info(wheel, {"sboms/ortdist.cdx.json": payload}, 1741221472)


@pytest.mark.parametrize("level", [0, 6])
def test_the_last_write_gives_the_same_bytes_whatever_compressed_the_wheel_before(tmp_path: Path, level: int) -> None:
    """The repair writes its wheel uncompressed (add_to_dist_info compresses it last): that must
    not change the released bytes."""
    payload = b"\x7fELF" + bytes(range(256)) * 400  # compressible, so the levels really differ
    wheels = []
    for name, compression in (("deflated", zipfile.ZIP_DEFLATED), (f"level{level}", zipfile.ZIP_DEFLATED)):
        (tmp_path / name).mkdir()
        wheel = _wheel(tmp_path / name / "pkg-1.0-py3-none-any.whl")
        with zipfile.ZipFile(wheel) as zin:
            members = [(info, zin.read(info)) for info in zin.infolist()]
        with zipfile.ZipFile(wheel, "w") as zout:
            for info, data in members:
                info.compress_type = compression
                zout.writestr(info, data, compresslevel=level if name != "deflated" else 9)
            big = zipfile.ZipInfo("pkg/_native.so", (2024, 1, 1, 0, 0, 0))
            big.compress_type = compression
            zout.writestr(big, payload, compresslevel=level if name != "deflated" else 9)
        wheels.append(wheel)
    sizes = [w.stat().st_size for w in wheels]
    if level == 0:
        assert sizes[1] > sizes[0]  # the intermediate really was stored, not compressed
    for wheel in wheels:
        add_to_dist_info(wheel, {"sboms/ortdist.cdx.json": b"{}\n"}, 1741221472)
    assert wheels[0].read_bytes() == wheels[1].read_bytes()


def test_inspect_reports_artifacts_without_an_sbom_clearly(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl")
    with pytest.raises(CheckError, match="carries no ortdist SBOM"):
        sbom.read_artifact_sbom(wheel)
    with pytest.raises(CheckError, match="no such file"):
        sbom.read_artifact_sbom(tmp_path / "missing.whl")


def test_a_cross_build_lists_its_target_sysroot(project: Path) -> None:
    doc = sbom.make_sbom(inputs(project, target_packages={"libabsl-dev": "20240722.0-4"}, target_arch="arm64"), SUBJECT)
    platforms = [c for c in doc["components"] if c["type"] == "platform"]
    target = platforms[-1]
    assert target["name"].endswith("-arm64-target")
    (lib,) = target["components"]
    assert lib["purl"] == "pkg:deb/debian/libabsl-dev@20240722.0-4?arch=arm64&distro=trixie"


def test_a_portable_build_lists_every_dependency_source_it_compiled(project: Path) -> None:
    """cpu-linux compiles every dependency from its pinned file: one component each, with the purl
    of where it came from (a Debian orig: arch=source; a Debian .deb: arch=all; PyPI: pkg:pypi),
    its hash, and ORT's own pin where it differs; the subject depends on each."""
    plan = recipe_plan(project, "cpu-linux")
    doc = sbom.make_sbom(inputs(project, plan=plan), SUBJECT)
    refs = {c["bom-ref"]: c for c in doc["components"]}
    deps = [ref for ref in refs if ref.startswith("source:") and ref != "source:onnxruntime"]
    assert deps == [f"source:{d.name}" for d in plan.deps] and len(deps) == 15
    for dep in plan.deps:
        component = refs[f"source:{dep.name}"]
        assert component["hashes"] == [{"alg": "SHA-256", "content": dep.sha256}]
        assert component["version"] == dep.version and dep.filename in component["description"]
    assert refs["source:onnx"]["purl"] == "pkg:pypi/onnx@1.17.0"
    assert refs["source:pybind11"]["purl"] == "pkg:pypi/pybind11@2.13.6"
    assert refs["source:abseil_cpp"]["purl"] == "pkg:deb/debian/abseil@20240722.0?arch=source&distro=trixie"
    assert refs["source:abseil_cpp"]["name"] == "abseil"
    # A Debian version's '+' is percent-encoded ('~' is unreserved); cpuinfo's orig is forky's.
    assert refs["source:pytorch_cpuinfo"]["purl"] == (
        "pkg:deb/debian/cpuinfo@0.0~git20250905.877328f?arch=source&distro=forky"
    )
    assert refs["source:flatbuffers"]["purl"] == ("pkg:deb/debian/flatbuffers@23.5.26%2Bdfsg?arch=source&distro=trixie")
    # utf8_range is protobuf's own tarball: the same file, named for what ORT fetches instead.
    assert refs["source:utf8_range"]["purl"] == refs["source:protobuf"]["purl"]
    assert "ORT pins utf8_range 72c943d" in refs["source:utf8_range"]["description"]
    assert "ORT pins" not in refs["source:protobuf"]["description"]
    # The header-only .deb is a binary package: its purl names that package, arch=all.
    assert refs["source:safeint"]["purl"] == ("pkg:deb/debian/libsafeint-dev@3.0.28a%2Bdfsg-4?arch=all&distro=trixie")
    (subject,) = doc["dependencies"]
    assert [r for r in subject["dependsOn"] if r.startswith("source:")] == ["source:onnxruntime", *deps]
    assert sbom.summary(doc)["deps"][:2] == ["onnx 1.17.0", "abseil 20240722.0"]


def test_a_portable_build_names_its_compiler(project: Path) -> None:
    """The compiler and its glibc 2.17 sysroot are what the binaries link against: the SBOM names
    the pinned wheel (purl and hash), and `ortdist inspect` shows it."""
    plan = recipe_plan(project, "cpu-linux")
    assert plan.toolchain.compiler is not None
    doc = sbom.make_sbom(inputs(project, plan=plan), SUBJECT)
    (compiler,) = [c for c in doc["components"] if c["bom-ref"].startswith("compiler:")]
    assert compiler["bom-ref"] == "compiler:ppbt" and compiler["type"] == "application"
    assert (compiler["name"], compiler["version"], compiler["purl"]) == ("ppbt", "0.1.8", "pkg:pypi/ppbt@0.1.8")
    assert compiler["hashes"] == [{"alg": "SHA-256", "content": plan.toolchain.compiler.sha256}]
    assert "GCC 11.2.0" in compiler["description"] and "glibc 2.17 sysroot" in compiler["description"]
    shown = sbom.summary(doc)["compiler"]
    assert shown.startswith("ppbt 0.1.8: GCC 11.2.0") and "glibc 2.17" in shown


def test_a_portable_onednn_build_lists_onednn_and_the_openmp_runtime_it_links_in(project: Path) -> None:
    """dnnl-linux on portable-glibc2.17-openmp compiles oneDNN from its pinned orig and links the
    libgomp built from GCC's source into its EP library: both are components, with their hashes."""
    recipe = load_recipe(project / "recipes" / "dnnl-linux.toml")
    toolchain = load_toolchain(project, recipe.toolchain)
    assert toolchain.openmp is not None
    plan = make_plan(recipe, toolchain, read_series(project / "patches" / "1.21.0", {"cpu", "dnnl"}))
    refs = {c["bom-ref"]: c for c in sbom.make_sbom(inputs(project, plan=plan), SUBJECT)["components"]}
    assert refs["source:onednn"]["purl"] == "pkg:deb/debian/onednn@3.7.2%2Bds?arch=source&distro=trixie"
    gomp = refs["source:libgomp"]
    assert gomp["purl"] == "pkg:deb/debian/gcc-11@11.3.0?arch=source&distro=bookworm"
    assert gomp["hashes"] == [{"alg": "SHA-256", "content": toolchain.openmp.sha256}]
    cpu = make_plan(
        load_recipe(project / "recipes" / "xnnpack-linux.toml"), toolchain, read_series(project / "patches" / "1.21.0")
    )  # the same toolchain, no EP that needs OpenMP: nothing of libgomp is linked, none is listed
    assert "source:libgomp" not in {
        c["bom-ref"] for c in sbom.make_sbom(inputs(project, plan=cpu), SUBJECT)["components"]
    }


def test_a_debian_trixie_build_lists_only_what_it_compiled(project: Path) -> None:
    """dnnl-linux links the root's -dev packages: onnx is the only dependency source, and no
    compiler component (the root's gcc is one of the platform's packages)."""
    doc = sbom.make_sbom(inputs(project), SUBJECT)
    refs = [c["bom-ref"] for c in doc["components"]]
    assert [r for r in refs if r.startswith("source:")] == ["source:onnxruntime", "source:onnx"]
    assert not [r for r in refs if r.startswith("compiler:")]
    assert sbom.summary(doc)["compiler"] == ""


def test_the_last_write_of_a_wheel_compresses_every_member_at_its_level(tmp_path: Path) -> None:
    """auditwheel writes zlib level 6; the wheel leaves ortdist at level 8, contents unchanged."""
    import random
    import zlib

    rng = random.Random(7)
    body = "".join(rng.choice(["add ", "mov ", "rax ", "rbx ", "\n"]) for _ in range(200_000)).encode()
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("pkg/lib.so", body)
        zf.writestr("pkg-1.0.dist-info/METADATA", b"Name: pkg\nVersion: 1.0\n")
        zf.writestr("pkg-1.0.dist-info/RECORD", b"pkg-1.0.dist-info/RECORD,,\n")
    before = zipfile.ZipFile(wheel).getinfo("pkg/lib.so").compress_size
    add_to_dist_info(wheel, {"sboms/ortdist.cdx.json": b"{}\n"}, 1741221472)
    with zipfile.ZipFile(wheel) as zf:
        after = zf.getinfo("pkg/lib.so").compress_size
        assert zf.read("pkg/lib.so") == body
    best = zlib.compressobj(8, zlib.DEFLATED, -15)
    assert after == len(best.compress(body) + best.flush()) < before


def test_a_large_member_every_wheel_carries_is_compressed_once_in_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every version's wheel carries the same core library: its stream is made once (the second
    wheel waits for the first), piece by piece, and the member reads back as the library."""
    core = bytes(range(256)) * (deflate.SHARED_AT // 256 + 1)
    made: list[int] = []
    real = zlib.compressobj

    class Counting:
        def __init__(self, level: int, *args: int, **kwargs: bytes) -> None:
            self.inner = real(level, *args, **kwargs)

        def compress(self, data: bytes) -> bytes:
            made.append(len(data))
            return self.inner.compress(data)

        def flush(self, mode: int = zlib.Z_FINISH) -> bytes:
            return self.inner.flush(mode)

    def counting(level: int, *args: int, **kwargs: bytes) -> Any:
        return Counting(level, *args, **kwargs)

    wheels = []
    for python in ("cp310", "cp311"):
        (tmp_path / python).mkdir()
        wheel = _wheel(tmp_path / python / f"pkg-1.0-{python}-{python}-linux_x86_64.whl")
        with zipfile.ZipFile(wheel, "a") as zf:
            zf.writestr("pkg/libcore.so", core, compress_type=zipfile.ZIP_DEFLATED)
        wheels.append(wheel)
    monkeypatch.setattr(deflate.zlib, "compressobj", counting)
    monkeypatch.setattr(deflate, "SHARED", deflate.Shared())
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda w: add_to_dist_info(w, {"sboms/ortdist.cdx.json": b"{}\n"}, 1741221472), wheels))
    assert sorted(n for n in made if n >= 256) == sorted([deflate.PIECE, len(core) - deflate.PIECE])  # once
    monkeypatch.undo()
    expected = deflate.open_stream(core, record.COMPRESSLEVEL).result() + deflate.END
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            assert zf.read("pkg/libcore.so") == core
            info = zf.getinfo("pkg/libcore.so")
        raw = wheel.read_bytes()
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        assert raw[start : start + info.compress_size] == expected
