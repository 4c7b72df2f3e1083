"""Several CPython versions from one core build: the toolchain's other Pythons, the plan, the
binding's retargeted build file, and re-tagging the wheel (all pure, no build)."""

from __future__ import annotations

import base64
import hashlib
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortdist import binding
from ortdist.errors import BuildError, PackageError, RecipeError
from ortdist.inroot import overlay_venv_commands, python_layout
from ortdist.paths import Cache
from ortdist.plan import make_plan
from ortdist.project import load_patches, plan_for
from ortdist.recipe import Recipe
from ortdist.toolchains import load_toolchain
from ortdist.toolchains.debian import DebianSysroot
from ortdist.wheel.record import retag


# --- toolchain -------------------------------------------------------------------------------------
def test_debian_trixie_offers_bookworms_python_too(project: Path) -> None:
    spec = load_toolchain(project, "debian-trixie")
    assert spec.python == ("3.13",) and spec.python_versions == ("3.13", "3.11", "3.14", "3.10", "3.12")
    facts = spec.extra_python["3.11"]
    assert facts.source == "debian" and facts.suite == "bookworm" and "libpython3.11-dev" in facts.packages
    assert spec.extra_python["3.14"].suite == "sid"
    assert {spec.extra_python[v].source for v in ("3.10", "3.12")} == {"host"}
    # cuda12 inherits them along the extends chain
    assert load_toolchain(project, "cuda12").python_versions == spec.python_versions


def test_other_pythons_key_neither_the_root_nor_the_build_trees(project: Path, tmp_path: Path) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    before = load_toolchain(tmp_path, "debian-trixie")
    pythons = tmp_path / "toolchains" / "debian-trixie" / "pythons.toml"
    pythons.write_text(pythons.read_text().replace('numpy = "2.2.6"', 'numpy = "2.2.5"'))
    after = load_toolchain(tmp_path, "debian-trixie")
    assert (before.digest, before.root_digest) == (after.digest, after.root_digest)
    cache = Cache(tmp_path / "cache")
    # ...but the directory of that Python is made afresh.
    assert DebianSysroot(before).python_overlay_path(cache, "3.11") != DebianSysroot(after).python_overlay_path(
        cache, "3.11"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('["3.11"]\nsuite = "bookworm"\npackages = []\n', "\"3.11\"': missing required key\\(s\\) \\['numpy'\\]"),
        ('["3.11"]\nsuite = "bookworm"\npackages = []\nnumpy = "2"\nnumpi = "2"\n', "did you mean 'numpy'"),
        ('["3.13"]\nsuite = "bookworm"\npackages = []\nnumpy = "2"\n', "the root's own Python"),
        ('["three"]\nsuite = "bookworm"\npackages = []\nnumpy = "2"\n', "'three' is not a CPython version"),
        ('["3.11"\n', "not valid TOML"),
    ],
)
def test_bad_python_tables_are_refused(project: Path, tmp_path: Path, text: str, message: str) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    (tmp_path / "toolchains" / "debian-trixie" / "pythons.toml").write_text(text)
    with pytest.raises(RecipeError, match=message):
        load_toolchain(tmp_path, "debian-trixie")


# --- plan ------------------------------------------------------------------------------------------
def test_an_extra_python_adds_the_binding_step(project: Path, recipe_from: Callable[..., Recipe]) -> None:
    recipe = recipe_from('[wheel]\npython = ["3.11", "3.13"]\n')
    plan = make_plan(recipe, load_toolchain(project, "debian-trixie"), load_patches(recipe, project))
    assert plan.python == ("3.13", "3.11")  # the root's own first: the main build's binding
    assert plan.extra_python == ("3.11",)
    assert plan.steps[plan.steps.index("build") + 1] == "binding"
    single, _ = plan_for("cpu-linux-gcc14-lto", project)
    assert "binding" not in single.steps and single.extra_python == ()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[wheel]\npython = ["3.11"]\n', "needs the root's own CPython in the list too"),
        (
            '[wheel]\npython = ["3.9", "3.13"]\n',
            "(?s)Python 3.9 is not available.*use one of \\['3.13', '3.11', '3.14', '3.10', '3.12'\\].*pythons.toml",
        ),
        (
            'target = "aarch64-unknown-linux-gnu"\n[wheel]\npython = ["3.13", "3.11"]\n',
            "unpacked for the build machine only",
        ),
    ],
)
def test_impossible_python_lists_are_refused(
    project: Path, recipe_from: Callable[..., Recipe], body: str, message: str
) -> None:
    recipe = recipe_from(body)
    with pytest.raises(RecipeError, match=message):
        make_plan(recipe, load_toolchain(project, "debian-trixie"), load_patches(recipe, project))


# --- the binding's build file ----------------------------------------------------------------------
MAIN = binding.Headers(python="/usr/include/python3.13", numpy="/usr/lib/np/_core/include")
OTHER = binding.Headers(
    python="/ortdist/python/3.11/usr/include/python3.11", numpy="/ortdist/python/3.11/np", extra=("/o/usr/include",)
)
OBJ = "CMakeFiles/onnxruntime_pybind11_state.dir/ortdist/source/onnxruntime/python"
PY_FLAGS = "-isystem /usr/include/python3.13 -isystem /usr/lib/np/_core/include"
COMMANDS = "\n".join(
    [
        f"ccache /usr/bin/c++ -DX -I/ortdist/source/include {PY_FLAGS} -O3 -MD -MT {OBJ}/a.cc.o "
        f"-MF {OBJ}/a.cc.o.d -o {OBJ}/a.cc.o -c /ortdist/source/onnxruntime/python/a.cc",
        "ccache /usr/bin/c++ -DX -O3 -o CMakeFiles/onnxruntime_common.dir/x.cc.o -c /ortdist/source/x.cc",
        f"ccache /usr/bin/c++ -DX {PY_FLAGS} -o {OBJ}/b.cc.o -c /ortdist/source/onnxruntime/python/b.cc",
        f': && /usr/bin/c++ -fPIC "-Wl,-rpath=\\$ORIGIN" -shared -o onnxruntime_pybind11_state.so {OBJ}/a.cc.o '
        f"{OBJ}/b.cc.o libonnxruntime_session.a _deps/onnx-build/libonnx.a "
        "/usr/lib/x86_64-linux-gnu/libflatbuffers.a /usr/lib/libre2.so && cd /ortdist/build && "
        "/usr/bin/cmake -E copy /ortdist/build/onnxruntime_pybind11_state.so /ortdist/build/onnxruntime/capi/",
    ]
)


def test_the_binding_is_rebuilt_from_the_main_builds_own_commands() -> None:
    """Read inside CMake's graph: compiles wait for what the main binding's compiles wait for
    (generated headers), the link for the main binding (every archive both link is made first);
    a compile writing its dependencies (-MF) is rebuilt when a header it read changes."""
    graph = binding.binding_ninja(COMMANDS, MAIN, OTHER, "/ortdist/work/binding-3.11")
    text = graph.ninja
    assert graph.unity is None  # a.cc and b.cc have different flags: each compiles on its own
    builds = [line for line in text.splitlines() if line.startswith("build ")]
    out = "/ortdist/work/binding-3.11"
    order = "|| cmake_object_order_depends_target_onnxruntime_pybind11_state"
    assert builds == [
        f"build {out}/{OBJ}/a.cc.o: compile /ortdist/source/onnxruntime/python/a.cc {order}",
        f"build {out}/{OBJ}/b.cc.o: run /ortdist/source/onnxruntime/python/b.cc {order}",
        f"build {out}/onnxruntime_pybind11_state.so: run {out}/{OBJ}/a.cc.o {out}/{OBJ}/b.cc.o | "
        "onnxruntime_pybind11_state.so",
    ]
    assert f"-MF {out}/{OBJ}/a.cc.o.d " in text and "  depfile = $out.d\n  deps = gcc" in text
    assert "python3.13" not in text and "/usr/lib/np/" not in text
    assert text.count("-isystem /ortdist/python/3.11/usr/include/python3.11 -isystem /o/usr/include ") == 2
    assert "onnxruntime_common" not in text  # the core is not rebuilt
    assert "cmake -E copy" not in text  # nor are CMake's post-build copies repeated
    assert "$$ORIGIN" in text  # ninja's escape for the link's literal $ORIGIN
    assert "  command = $cmd" in text  # run where ninja runs CMake's, in the build tree


def _same_flags(*names: str) -> str:
    compiles = [
        f"ccache /usr/bin/c++ -DX {PY_FLAGS} -O3 -MD -MT {OBJ}/{n}.o -MF {OBJ}/{n}.o.d -o {OBJ}/{n}.o "
        f"-c /ortdist/source/onnxruntime/python/{n}"
        for n in names
    ]
    objects = " ".join(f"{OBJ}/{n}.o" for n in names)
    return "\n".join([*compiles, f": && /usr/bin/c++ -shared -o onnxruntime_pybind11_state.so {objects} libx.a"])


def test_sources_with_one_set_of_flags_compile_as_one_unit_the_numpy_table_owner_first() -> None:
    """pybind11's templates are then instantiated once, not per source; the unit that defines
    numpy's API table must include numpy's headers before the units that only declare it."""
    names = ("onnxruntime_pybind_iobinding.cc", "onnxruntime_pybind_state.cc", "onnxruntime_pybind_lora.cc")
    out = "/ortdist/work/binding-3.11"
    graph = binding.binding_ninja(_same_flags(*names), MAIN, OTHER, out)
    src = "/ortdist/source/onnxruntime/python"
    assert graph.unity is not None
    assert [line for line in graph.unity.splitlines() if line.startswith("#include")] == [
        f'#include "{src}/onnxruntime_pybind_state.cc"',
        f'#include "{src}/onnxruntime_pybind_iobinding.cc"',
        f'#include "{src}/onnxruntime_pybind_lora.cc"',
    ]
    unit = f"{out}/{OBJ.split('/')[0]}/onnxruntime_pybind11_state.dir/onnxruntime_pybind11_state_unity.cc.o"
    builds = [line for line in graph.ninja.splitlines() if line.startswith("build ")]
    assert builds == [
        f"build {unit}: compile {out}/onnxruntime_pybind11_state_unity.cc | "
        + " ".join(f"{src}/{n}" for n in names)  # a changed source recompiles the unit
        + " || cmake_object_order_depends_target_onnxruntime_pybind11_state",
        f"build {out}/onnxruntime_pybind11_state.so: run {unit} | onnxruntime_pybind11_state.so",
    ]
    assert f"-MF {unit}.d -o {unit} -c {out}/onnxruntime_pybind11_state_unity.cc" in graph.ninja
    link = graph.ninja.split("  cmd = ")[-1]
    assert f"-o {out}/onnxruntime_pybind11_state.so {unit} libx.a\n" in link  # the unit's object only
    # Without the table's owner, or with flags that differ, each source compiles on its own.
    assert binding.binding_ninja(_same_flags(names[0], names[2]), MAIN, OTHER, out).unity is None


def test_the_top_file_reads_cmakes_graph_and_every_versions() -> None:
    top = binding.top_ninja(["/w/binding-3.10/build.ninja", "/w/binding-3.11/build.ninja"], ["/w/a.so", "/w/b.so"])
    assert top.splitlines()[1:] == [
        "include build.ninja",  # CMake's graph, its `default all` included
        "subninja /w/binding-3.10/build.ninja",
        "subninja /w/binding-3.11/build.ninja",
        "default /w/a.so /w/b.so",
    ]


def test_a_binding_compile_without_the_python_headers_cannot_be_retargeted() -> None:
    odd = COMMANDS.replace("-isystem /usr/include/python3.13 ", "", 1)
    with pytest.raises(BuildError, match=r"does not name /usr/include/python3\.13"):
        binding.binding_ninja(odd, MAIN, OTHER, "/o")
    with pytest.raises(BuildError, match="no compile or link command"):
        binding.binding_ninja("ninja: no work to do.\n", MAIN, OTHER, "/o")


def test_main_build_headers_come_from_cmakes_cache() -> None:
    cache = (
        "X:STRING=1\n_Python_INCLUDE_DIR:INTERNAL=/usr/include/python3.13\n"
        "_Python_NumPy_INCLUDE_DIR:INTERNAL=/usr/lib/np/_core/include\n"
    )
    assert binding.main_build_headers(cache) == MAIN
    with pytest.raises(BuildError, match="_Python_NumPy_INCLUDE_DIR"):
        binding.main_build_headers(cache.split("_Python_NumPy")[0])


def test_paths_of_an_unpacked_python() -> None:
    assert python_layout("3.11") == {
        "executable": "/ortdist/python/3.11/usr/bin/python3.11",
        "include": "/ortdist/python/3.11/usr/include/python3.11",
        "multiarch_include": "/ortdist/python/3.11/usr/include",
        "numpy_include": "/ortdist/python/3.11/site-packages/numpy/_core/include",
    }
    cmds = overlay_venv_commands("/ortdist/python/3.11/usr/bin/python3.11", "/v")
    assert cmds.create == "/ortdist/python/3.11/usr/bin/python3.11 -m venv --without-pip /v"
    assert cmds.pip.startswith("/v/bin/python $(ls /usr/share/python-wheels/pip-*.whl")


# --- re-tagging --------------------------------------------------------------------------------------
def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _fake_wheel(tmp_path: Path) -> Path:
    wheel = tmp_path / "onnxruntime-1.21.0-cp313-cp313-linux_x86_64.whl"
    meta = b"Wheel-Version: 1.0\nGenerator: scikit-build-core\nRoot-Is-Purelib: false\n"
    meta += b"Tag: cp313-cp313-linux_x86_64\n"
    module = b"\x7fELF binding"
    record = (
        f"onnxruntime/capi/onnxruntime_pybind11_state.so,{_record_hash(module)},{len(module)}\n"
        f"onnxruntime-1.21.0.dist-info/WHEEL,{_record_hash(meta)},{len(meta)}\n"
        "onnxruntime-1.21.0.dist-info/RECORD,,\n"
    )
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("onnxruntime/capi/onnxruntime_pybind11_state.so", module)
        zf.writestr("onnxruntime-1.21.0.dist-info/WHEEL", meta)
        zf.writestr("onnxruntime-1.21.0.dist-info/RECORD", record)
    return wheel


def test_retag_moves_a_wheel_to_another_cpython(tmp_path: Path) -> None:
    wheel = _fake_wheel(tmp_path)
    tagged = retag(wheel, "3.11")
    assert tagged.name == "onnxruntime-1.21.0-cp311-cp311-linux_x86_64.whl"
    assert not wheel.exists()
    with zipfile.ZipFile(tagged) as zf:
        meta = zf.read("onnxruntime-1.21.0.dist-info/WHEEL")
        record = zf.read("onnxruntime-1.21.0.dist-info/RECORD").decode()
        assert zf.namelist()[0] == "onnxruntime/capi/onnxruntime_pybind11_state.so"  # order kept
    assert b"Tag: cp311-cp311-linux_x86_64\n" in meta and b"cp313" not in meta
    assert f"onnxruntime-1.21.0.dist-info/WHEEL,{_record_hash(meta)},{len(meta)}" in record
    assert record.count("\n") == 3


def test_retag_refuses_wheels_that_are_not_for_one_cpython(tmp_path: Path) -> None:
    abi3 = tmp_path / "x-1.0-cp39-abi3-linux_x86_64.whl"
    shutil.copyfile(_fake_wheel(tmp_path), abi3)
    with pytest.raises(PackageError, match="not a CPython-specific wheel"):
        retag(abi3, "3.11")


def _fake_prefix(root: Path, full: str, *, headers: bool = True, name: str = "") -> Path:
    version = ".".join(full.split(".")[:2])
    prefix = root / (name or full)
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / f"python{version}").write_text("#!/bin/false\n")
    lib = prefix / "lib" / f"python{version}"
    for sub in ("site-packages/pip", "test", "__pycache__", "json"):
        (lib / sub).mkdir(parents=True)
        (lib / sub / "x.py").write_text("")
    if headers:
        include = prefix / "include" / f"python{version}"
        include.mkdir(parents=True)
        (include / "Python.h").write_text("")
        (include / "patchlevel.h").write_text(f'#define PY_VERSION              "{full}"\n')
    return prefix


def test_a_host_python_is_the_newest_final_release_with_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortdist.toolchains.host_python import find_host_python

    versions = tmp_path / "pyenv" / "versions"
    for full in ("3.10.9", "3.10.13", "3.10.14rc1", "3.12.1"):
        _fake_prefix(versions, full)
    _fake_prefix(versions, "3.10.20", headers=False)  # no headers: cannot compile a binding against it
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("RUNNER_TOOL_CACHE", str(tmp_path / "toolcache"))
    found = find_host_python("3.10")
    assert (found.full_version, found.prefix) == ("3.10.13", (versions / "3.10.13").resolve())
    _fake_prefix(tmp_path / "uv", "3.10.15", name="cpython-3.10.15-linux-x86_64-gnu")
    assert find_host_python("3.10").full_version == "3.10.15"  # uv's is newer


def test_a_missing_host_python_names_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ortdist.errors import ToolchainError
    from ortdist.toolchains.host_python import find_host_python

    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("RUNNER_TOOL_CACHE", str(tmp_path / "toolcache"))
    with pytest.raises(ToolchainError, match=r"no CPython 3\.12 installed") as caught:
        find_host_python("3.12")
    text = str(caught.value)
    assert str(tmp_path / "pyenv" / "versions" / "3.12.*") in text and "uv python install 3.12" in text


def test_a_host_prefix_is_copied_without_site_packages_tests_or_bytecode(tmp_path: Path) -> None:
    from ortdist.toolchains.host_python import HostPython, copy_prefix

    prefix = _fake_prefix(tmp_path / "v", "3.12.1")
    copy_prefix(HostPython("3.12", "3.12.1", prefix), tmp_path / "overlay")
    lib = tmp_path / "overlay" / "usr" / "lib" / "python3.12"
    assert (lib / "json" / "x.py").is_file() and (tmp_path / "overlay/usr/include/python3.12/Python.h").is_file()
    assert (lib / "site-packages").is_dir() and not any((lib / "site-packages").iterdir())
    assert not (lib / "test").exists() and not (lib / "__pycache__").exists()


@pytest.mark.parametrize(
    "table",
    ['source = "host"\nsuite = "sid"\nnumpy = "2.2.6"\n', 'source = "debian"\nnumpy = "2.2.6"\n'],
    ids=["host-with-suite", "debian-without-suite"],
)
def test_a_python_source_with_the_wrong_keys_is_refused(project: Path, tmp_path: Path, table: str) -> None:
    shutil.copytree(project / "toolchains", tmp_path / "toolchains")
    pythons = tmp_path / "toolchains" / "debian-trixie" / "pythons.toml"
    pythons.write_text(pythons.read_text() + f'\n["3.9"]\n{table}')
    with pytest.raises(RecipeError, match=r"(?s)pythons\.toml.*CPython"):
        load_toolchain(tmp_path, "debian-trixie")


def test_a_runners_tool_cache_is_searched_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub's setup-python installs into $RUNNER_TOOL_CACHE/Python/<full>/x64: the CI matrix relies on it."""
    from ortdist.toolchains.host_python import find_host_python

    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("RUNNER_TOOL_CACHE", str(tmp_path / "toolcache"))
    prefix = _fake_prefix(tmp_path / "toolcache" / "Python" / "3.12.9", "3.12.9", name="x64")
    assert find_host_python("3.12").prefix == prefix.resolve()


# --- choosing some of the recipe's Pythons (--python) and the preflight ------------------------------
def test_python_chooses_some_of_the_recipes_versions_and_the_plan_records_the_rest(project: Path) -> None:
    full, _ = plan_for("cpu-linux", project)
    chosen, _ = plan_for("cpu-linux", project, python=("3.14", "3.11", "3.13"))
    assert chosen.python == ("3.13", "3.11", "3.14") and chosen.python_not_built == ("3.10", "3.12")
    assert chosen.summary()["python_not_built"] == ["3.10", "3.12"]
    assert "python_not_built" not in full.summary()  # an unchanged plan keeps its digest
    assert chosen.digest() != full.digest() and chosen.tree_identity() == full.tree_identity()
    assert chosen.configure_argv() == full.configure_argv()  # the core build tree is the same one


@pytest.mark.parametrize(
    ("python", "message"),
    [
        (("3.9",), r"Python 3\.9 is not one the recipe cpu-linux builds.*choose from its \[wheel\] python"),
        (("3.10", "3.12"), r"needs the root's own CPython.*add '3\.13' to --python"),
        ((), r"\(none\) is not one the recipe"),
    ],
)
def test_a_python_choice_outside_the_recipe_is_refused(project: Path, python: tuple[str, ...], message: str) -> None:
    with pytest.raises(RecipeError, match=f"(?s){message}") as caught:
        plan_for("cpu-linux", project, python=python)
    assert "--python" in str(caught.value)


def _no_host_pythons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *present: str) -> None:
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("RUNNER_TOOL_CACHE", str(tmp_path / "toolcache"))
    for full in present:
        _fake_prefix(tmp_path / "pyenv" / "versions", full)


def test_the_preflight_names_every_missing_host_python_and_the_choice_that_builds_the_rest(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortdist.errors import ToolchainError
    from ortdist.toolchains import require_host_pythons

    plan, _ = plan_for("cpu-linux", project)
    _no_host_pythons(tmp_path, monkeypatch, "3.12.1")
    with pytest.raises(ToolchainError) as caught:
        require_host_pythons("cpu-linux", plan.python, plan.toolchain)
    text = str(caught.value)
    assert "no CPython 3.10 with headers on this host;" in text  # 3.12 is there: not named
    assert str(tmp_path / "pyenv" / "versions" / "3.10.*") in text
    assert "./nox -s build-cpu-linux -- --python 3.11,3.12,3.13,3.14" in text
    _no_host_pythons(tmp_path, monkeypatch, "3.10.13")
    require_host_pythons("cpu-linux", plan.python, plan.toolchain)  # all there: nothing to refuse
    chosen, _ = plan_for("cpu-linux", project, python=("3.13", "3.11"))
    _no_host_pythons(tmp_path / "none", monkeypatch)
    require_host_pythons("cpu-linux", chosen.python, chosen.toolchain)  # no host Python asked for


@pytest.mark.usefixtures("no_subprocess")
def test_build_without_a_host_python_is_refused_before_the_lock_or_any_download(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from ortdist.cli import main
    from ortdist.errors import ToolchainError

    monkeypatch.chdir(project)
    monkeypatch.setenv("ORTDIST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr("ortdist.toolchains.debian.sysroot.require_host_tools", lambda *tools: None)
    _no_host_pythons(tmp_path, monkeypatch, "3.12.1")
    assert main(["build", "cpu-linux", "--dist", str(tmp_path / "dist")]) == ToolchainError.exit_code
    assert "--python 3.11,3.12,3.13,3.14" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "dist").exists()
