"""Patch 0017's tools/ci_build/gen_pybind_exports.py, read from the patch: which of the binding's
undefined symbols libonnxruntime exports to it, and the linker script it writes."""

from __future__ import annotations

import importlib.util
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ortdist.checks import one_runtime

PATCH = Path(__file__).parents[2] / "patches" / "1.21.0" / "0017-python-binding-links-the-shared-library.patch"
SCRIPT = "tools/ci_build/gen_pybind_exports.py"


def added_file(patch: str, path: str) -> str:
    """The text of a file the patch creates (a hunk against /dev/null)."""
    lines = patch.splitlines()
    start = lines.index(f"+++ b/{path}")
    body = []
    for line in lines[start + 2 :]:  # past the +++ line and the @@ header
        if not line.startswith("+"):
            break
        body.append(line[1:])
    return "\n".join(body) + "\n"


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = added_file(PATCH.read_text(encoding="utf-8"), SCRIPT)
    path = tmp_path_factory.mktemp("tools") / "gen_pybind_exports.py"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gen(script: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_pybind_exports", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = [
    ("OrtGetApiBase", True),
    (
        "_ZN11onnxruntime11Environment6CreateESt10unique_ptrINS_7logging14LoggingManagerESt14default_deleteIS3_EE",
        True,
    ),
    ("_ZTIN11onnxruntime21OnnxRuntimeExceptionE", True),  # typeinfo, to catch it
    ("_ZTVN4onnx10ModelProtoE", True),
    ("_ZN4absl12lts_2024072213hash_internal15MixingHashState5kSeedE", True),
    ("_Z21MlasQuantizeBlockwiseIfLi4EEvPhPT_S0_PKS1_ibiiiPN11onnxruntime11concurrency10ThreadPoolE", True),
    ("_ZNK11OrtTypeInfo20ElementTypeFromProtoEi", True),
    # the C and C++ runtimes', Python's and numpy's: the binding links or imports those itself
    ("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE7reserveEm", False),
    ("_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4findEPKcmm", False),
    ("_ZSt20__throw_length_errorPKc", False),
    ("_ZTISt13runtime_error", False),
    ("_ZTVN10__cxxabiv117__class_type_infoE", False),
    ("_ZTTNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEE", False),
    ("_ZNSo5flushEv", False),
    ("_ZN9__gnu_cxx27__verbose_terminate_handlerEv", False),
    ("_Znwm", False),
    ("_ZdlPvm", False),
    ("PyErr_Occurred", False),
    ("memcpy", False),
    ("onnxruntime_python_ARRAY_API", False),
]


@pytest.mark.parametrize(("symbol", "exported"), CASES)
def test_what_the_library_exports_to_the_binding(gen: ModuleType, symbol: str, exported: bool) -> None:
    assert gen.from_onnxruntime(symbol) is exported


@pytest.mark.parametrize(("symbol", "exported"), CASES)
def test_the_wheel_check_reads_the_binding_s_imports_as_the_export_list_does(symbol: str, exported: bool) -> None:
    assert one_runtime.from_onnxruntime(symbol) is exported


def fake_nm(tmp_path: Path, undefined: str, defined: str) -> Path:
    """An nm answering -P -u and -P --defined-only as GNU nm does for two objects."""
    nm = tmp_path / "nm"
    nm.write_text(
        f"#!/bin/sh\nif [ \"$2\" = -u ]; then printf '{undefined}'; else printf '{defined}'; fi\n",
        encoding="utf-8",
    )
    nm.chmod(nm.stat().st_mode | stat.S_IEXEC)
    return nm


def test_the_linker_script_links_and_exports_what_the_binding_needs(script: Path, tmp_path: Path) -> None:
    undefined = (
        "a.o:\\n_ZN11onnxruntime11Environment6CreateEv U\\nPyErr_Occurred U\\n_Znwm U\\n\\n"
        "b.o:\\n_ZN11onnxruntime6python4InitEv U\\nOrtGetApiBase U\\n"
    )
    defined = "a.o:\\n_ZN11onnxruntime6python4InitEv T 0 10\\n\\nb.o:\\nPyInit_x T 0 4\\n"
    (tmp_path / "VERSION_NUMBER").write_text("1.21.0\n")
    out = tmp_path / "exports.ld"
    argv = [sys.executable, str(script), "--nm", str(fake_nm(tmp_path, undefined, defined))]
    argv += ["--version-file", str(tmp_path / "VERSION_NUMBER"), "--output", str(out), "a.o", "b.o"]
    subprocess.run(argv, check=True)
    text = out.read_text()
    # what one binding object defines for another is the binding's own: neither linked nor exported
    assert "EXTERN(\n  OrtGetApiBase\n  _ZN11onnxruntime11Environment6CreateEv\n)" in text
    assert "VERS_1.21.0_PYBIND {\n    global:\n      OrtGetApiBase;\n" in text
    assert "_ZN11onnxruntime6python4InitEv" not in text and "_Znwm" not in text and "PyErr" not in text


def test_objects_that_need_nothing_from_the_runtime_fail_the_build(script: Path, tmp_path: Path) -> None:
    """A binding that needs nothing is not one: the script stops rather than write an empty list."""
    (tmp_path / "VERSION_NUMBER").write_text("1.21.0\n")
    argv = [sys.executable, str(script), "--nm", str(fake_nm(tmp_path, "a.o:\\nmemcpy U\\n", "a.o:\\n"))]
    argv += ["--version-file", str(tmp_path / "VERSION_NUMBER"), "--output", str(tmp_path / "x.ld"), "a.o"]
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert run.returncode == 1 and "need nothing from ONNX Runtime" in run.stdout
    assert not (tmp_path / "x.ld").exists()
