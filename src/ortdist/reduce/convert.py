"""The models a reduced build is cut for: gathered, then converted to ORT format by ONNX Runtime
itself (the same version, from PyPI, in the toolchain's clean root) at the optimization level the
runtime will use, so the operators ORT's graph optimizers insert are part of the analysis."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from .. import run, wheelhouse
from ..errors import ModelError, OrtdistError
from ..fsutil import atomic_copy, remove_tree
from ..inroot import Venv, venv_commands
from ..log import log
from ..paths import IN_ROOT, IN_ROOT_WHEELHOUSE, Cache, project_root
from ..recipe.model import REFERENCE_PREFIX
from ..toolchains import Bind, Toolchain, load_toolchain, make_toolchain
from . import analyze

# ORT 1.21 serialises ORT-format models in an order that depends on heap addresses: with address
# randomisation each conversion of the same model gives other bytes. Without it they are identical.
FIXED_ADDRESSES = ("setarch", "-R")
CONVERTER_PYTHON = "3.13"  # the clean root's CPython
IN_ROOT_MODELS = IN_ROOT / "models"

# Runs inside the clean root with the onnxruntime wheel installed (to_ort.py, copied in as convert.py).
CONVERT_SCRIPT = Path(__file__).with_name("to_ort.py")


def gather_models(entries: Sequence[str], base: Path, dest: Path, reference: Callable[[str], bytes]) -> list[Path]:
    """Reference models are generated (``reference``: a name's model bytes, from the smoke suite's
    catalogue, which sits above this package), recipe models copied: ``dest/<name>.onnx`` each."""
    remove_tree(dest)
    dest.mkdir(parents=True)
    out: list[Path] = []
    for entry in entries:
        if entry.startswith(REFERENCE_PREFIX):
            name = entry.removeprefix(REFERENCE_PREFIX)
            target = dest / f"{name}.onnx"
            target.write_bytes(reference(name))
        else:
            source = (base / entry).resolve()
            if not source.is_file():
                raise ModelError("model file not found", where=str(source), fix="fix the path in [reduce] models")
            target = dest / f"{source.stem}.onnx"  # the converter and the C smoke find it by stem
            if target.exists():
                raise ModelError(f"two models are named {source.stem}", where=str(source), fix="rename one of them")
            shutil.copyfile(source, target)
        out.append(target)
    return out


def convert_to_ort_format(
    onnx_models: Sequence[Path],
    dest: Path,
    *,
    level: str,
    target_arch: str,
    ort_version: str,
    cache: Cache,
    toolchain: Toolchain,
    log: TextIO,
) -> list[Path]:
    """``dest/<name>.ort`` per model, written by onnxruntime==ort_version from PyPI."""
    toolchain.preflight()  # the conversion runs in the clean root: refuse non-root before downloading
    house = cache.wheelhouse(CONVERTER_PYTHON)
    wheelhouse.fill(
        house,
        CONVERTER_PYTHON,
        [f"onnxruntime=={ort_version}"],
        error=ModelError,
        what=f"downloading onnxruntime=={ort_version} to convert the models",
    )
    remove_tree(dest)
    dest.mkdir(parents=True)
    work = dest.parent / "convert"
    remove_tree(work)
    work.mkdir(parents=True)
    shutil.copyfile(CONVERT_SCRIPT, work / "convert.py")
    src_dir = onnx_models[0].parent
    if any(m.parent != src_dir for m in onnx_models):
        raise ModelError("models to convert must share one directory", where=str(src_dir))
    pairs: list[str] = []
    for model in onnx_models:
        pairs += [f"{IN_ROOT_MODELS}/onnx/{model.name}", f"{IN_ROOT_MODELS}/ort/{model.stem}.ort"]
    root = toolchain.ensure_clean_root(cache, log)
    binds = [
        Bind(house, IN_ROOT_WHEELHOUSE, read_only=True),
        Bind(src_dir, IN_ROOT_MODELS / "onnx", read_only=True),
        Bind(dest, IN_ROOT_MODELS / "ort"),
        Bind(work, IN_ROOT_MODELS / "convert"),
    ]
    venv = Venv(venv_commands(f"python{CONVERTER_PYTHON}", f"{IN_ROOT_MODELS}/convert/venv"), str(IN_ROOT_WHEELHOUSE))
    script = (
        f"{venv.create_and_install(f'onnxruntime=={ort_version}')} && "
        f"{' '.join(FIXED_ADDRESSES)} {venv.commands.python} {IN_ROOT_MODELS}/convert/convert.py "
        f"{level} {target_arch} " + " ".join(pairs) + f" > {IN_ROOT_MODELS}/convert/result.json"
    )
    code = run.stream(toolchain.wrap(root, ["/bin/sh", "-c", script], binds=binds), on_line=lambda _l: None, log=log)
    result_file = work / "result.json"
    result = json.loads(result_file.read_text() or "{}") if result_file.is_file() else {}
    remove_tree(work)
    if code != 0 or result.get("failures"):
        failures = result.get("failures") or {"(converter)": f"exit status {code}; see the models log"}
        raise ModelError(
            "ONNX Runtime could not load (and so convert) the model(s):\n"
            + "\n".join(
                f"    {Path(k).name}: {v.strip().splitlines()[-1] if v.strip() else v}" for k, v in failures.items()
            ),
            where=str(src_dir),
            fix=f"check that onnxruntime {ort_version} runs the model on the CPU",
        )
    out = [dest / f"{m.stem}.ort" for m in onnx_models]
    missing = [p.name for p in out if not p.is_file()]
    if missing:
        raise ModelError(f"the converter wrote no {', '.join(missing)}", where=str(dest), fix="see the models log")
    return out


def host_onnxruntime_version() -> str | None:
    """The onnxruntime importable by this interpreter, if any."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return str(onnxruntime.__version__)


def convert_on_host(onnx_models: Sequence[Path], dest: Path, *, level: str, target_arch: str) -> list[Path]:
    """The same conversion with the onnxruntime installed beside ortdist (the caller checks its version)."""
    import sys
    import tempfile

    dest.mkdir(parents=True, exist_ok=True)
    pairs: list[str] = []
    for model in onnx_models:
        pairs += [str(model), str(dest / f"{model.stem}.ort")]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "convert.py"
        shutil.copyfile(CONVERT_SCRIPT, script)
        proc = run.capture([*FIXED_ADDRESSES, sys.executable, str(script), level, target_arch, *pairs], check=False)
    try:
        failures = json.loads(proc.stdout.strip().splitlines()[-1])["failures"] if proc.stdout.strip() else {}
    except (ValueError, KeyError, IndexError):
        failures = {}
    if proc.returncode != 0 or failures:
        detail = failures or {"(converter)": proc.stderr.strip() or f"exit status {proc.returncode}"}
        raise ModelError(
            "ONNX Runtime could not load (and so convert) the model(s):\n"
            + "\n".join(f"    {Path(k).name}: {str(v).strip().splitlines()[-1]}" for k, v in detail.items()),
            where=str(onnx_models[0].parent),
            fix="check that the model runs with onnxruntime on the CPU",
        )
    return [dest / f"{m.stem}.ort" for m in onnx_models]


INPUT_SUFFIXES = (".onnx", ".ort", ".config", ".txt")


def check_inputs(paths: Sequence[Path]) -> None:
    """Every input exists, has a known type and (ONNX) parses: refused before a converter starts."""
    from ..recipe.onnxfile import onnx_problem

    for path in paths:
        if not path.is_file():
            raise ModelError(
                "is a directory" if path.is_dir() else "no such file",
                where=str(path),
                fix="pass ONNX (.onnx), ORT-format (.ort) or .config files",
            )
        if path.suffix.lower() not in INPUT_SUFFIXES:
            raise ModelError(
                f"unknown file type {path.suffix!r}", where=str(path), fix="pass .onnx, .ort or .config files"
            )
        problem = onnx_problem(path) if path.suffix.lower() == ".onnx" else None
        if problem:
            raise ModelError(problem, where=str(path), fix="pass the model file itself; re-export or re-download it")


def analyze_models(
    paths: list[Path],
    *,
    level: str,
    target_arch: str,
    ort_version: str,
    toolchain_name: str,
    typed: bool,
    keep_ort_dir: Path | None = None,
) -> analyze.OpConfig:
    """Models/configs -> one reduced-build config. ONNX models are first converted to ORT format at
    the runtime's optimization level, so operators ORT's optimizers insert are included: by this
    interpreter's onnxruntime when it is ``ort_version``, else in the toolchain's clean root."""
    onnx_models = [p for p in paths if p.suffix.lower() == ".onnx"]
    inputs = [p for p in paths if p.suffix.lower() != ".onnx"]
    with tempfile.TemporaryDirectory(prefix="ortdist-analyze-") as tmp:
        if onnx_models and level == "none":
            log.warning(
                "analysing ONNX models as written; operators ORT's graph optimizers insert "
                "at run time are NOT included (use --optimization-level)"
            )
            inputs += onnx_models
        elif onnx_models:
            for model in onnx_models:
                if not model.is_file():
                    raise OrtdistError("no such file", where=str(model), fix="pass existing model files")
            staged = Path(tmp) / "onnx"
            staged.mkdir()
            for model in onnx_models:
                target = staged / model.name
                if target.exists():
                    raise OrtdistError(f"two models are named {model.name}", where=str(model), fix="rename one")
                target.write_bytes(model.read_bytes())
            ort_dir = Path(tmp) / "ort"  # converted here; copied to keep_ort_dir afterwards
            host = host_onnxruntime_version()
            if host == ort_version:
                converted = convert_on_host(sorted(staged.iterdir()), ort_dir, level=level, target_arch=target_arch)
            else:
                log.info(
                    f"converting with onnxruntime=={ort_version} in the toolchain's clean root "
                    f"(this interpreter has {host or 'no onnxruntime'})"
                )
                converted = convert_to_ort_format(
                    sorted(staged.iterdir()),
                    ort_dir,
                    level=level,
                    target_arch=target_arch,
                    ort_version=ort_version,
                    cache=Cache.default(),
                    toolchain=make_toolchain(load_toolchain(project_root(), toolchain_name)),
                    log=sys.stderr,
                )
            inputs += converted
            if keep_ort_dir is not None:
                keep_ort_dir.mkdir(parents=True, exist_ok=True)
                for path in converted:
                    atomic_copy(path, keep_ort_dir / path.name)
        return analyze.analyze(inputs, typed=typed)
