"""[openmp]: GCC's OpenMP runtime, built in the build root for a [compiler] wheel that has none.

ppbt's GCC ships no libgomp, and oneDNN's CPU runtime (and ORT's DNNL provider) is OpenMP. libgomp
is GCC's own library, built with its own configure from GCC's source: only libgomp/ and the
top-level files its configure reads are unpacked from the pinned tarball, it is compiled by the
toolchain's compiler against the compiler's sysroot (so it needs nothing newer than that glibc),
and installed into the compiler's library directory as a PIC libgomp.a with a spec file, omp.h
beside GCC's own headers. `-fopenmp` then finds both as with any GCC and links libgomp statically.
A self-check links a small OpenMP library and refuses the root if it would need libgomp.so.
"""

from __future__ import annotations

import shlex
import shutil
import tarfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from ... import run, sources
from ...errors import SourceError, ToolchainError
from ...paths import Cache, in_root
from ...registry import debian_pool_dir
from ..spec import OpenMP, ToolchainSpec

# What libgomp's configure reads of GCC's tree besides libgomp/ (checked with GCC 11.3's).
GCC_TREE = (
    "libgomp/",
    "include/",
    "config/",
    "gcc/BASE-VER",
    "gcc/DATESTAMP",
    "gcc/DEV-PHASE",
    "config-ml.in",
    "config.guess",
    "config.sub",
    "install-sh",
    "ltmain.sh",
    "missing",
    "mkinstalldirs",
    "depcomp",
    "compile",
    "libtool.m4",
    "ltgcc.m4",
    "ltoptions.m4",
    "ltsugar.m4",
    "ltversion.m4",
    "lt~obsolete.m4",
    "move-if-change",
    "multilib.am",
    "libtool-ldflags",
)
# A static libgomp needs libdl and libpthread (glibc 2.17 keeps them apart from libc).
SPEC = "*link_gomp: -lgomp -ldl -lpthread\n"
WORK = Path("/tmp/ortdist-openmp")  # in the root, removed once libgomp is installed

Wrap = Callable[[Path, Sequence[str]], list[str]]


def pinned(spec: ToolchainSpec, openmp: OpenMP) -> sources.Pinned:
    return sources.Pinned(
        url=f"{sources.debian_mirror(spec.mirror)}/{debian_pool_dir(openmp.debian)}/{openmp.file}",
        filename=openmp.file,
        sha256=openmp.sha256,
        origin=f"toolchains/{spec.declared_in.get('openmp', spec.name)}.toml [openmp]",
    )


def install_openmp(spec: ToolchainSpec, cache: Cache, root: Path, log: TextIO, wrap: Wrap) -> None:
    """Build libgomp in ``root`` (a root being made) and install it into the compiler."""
    openmp = spec.openmp
    if openmp is None:
        return
    archive = sources.fetch(pinned(spec, openmp), cache.downloads)
    work = root / WORK.relative_to("/")
    shutil.rmtree(work, ignore_errors=True)
    print(f"ortdist: building libgomp {openmp.version} from {openmp.member} for the compiler", file=log)
    unpack_gcc_tree(archive, openmp.member, work / "src")
    run.call(
        wrap(root, ["bash", "-euo", "pipefail", "-c", build_script(spec)]),
        log=log,
        error=ToolchainError,
        what=f"building libgomp {openmp.version} (toolchains/{spec.name}.toml [openmp])",
    )
    shutil.rmtree(work)


def build_script(spec: ToolchainSpec) -> str:
    """Configure, make and install libgomp, then the self-check: one script run in the root."""
    q = shlex.quote
    cc = in_root(spec.cmake["CMAKE_C_COMPILER"])
    flags = in_root(spec.cmake.get("CMAKE_C_FLAGS", ""))
    return "\n".join(
        [
            f"cc={q(cc)}",
            f"flags={q(flags)}",
            'libdir=$(dirname "$("$cc" -print-libgcc-file-name)")',
            f"cd {WORK}",
            "mkdir build && cd build",
            'CC="$cc" CFLAGS="-O2 -g0 -fPIC $flags" ../src/libgomp/configure --host=x86_64-linux-gnu '
            f"--build=x86_64-linux-gnu --target=x86_64-linux-gnu --prefix={WORK}/install "
            "--disable-multilib --with-pic --enable-static --disable-shared --disable-nls --disable-werror "
            "> configure.log 2>&1 || { tail -40 configure.log; exit 1; }",
            'make -j"$(nproc)" > make.log 2>&1 || { tail -40 make.log; exit 1; }',
            "make install > install.log 2>&1 || { tail -40 install.log; exit 1; }",
            'install -m 644 ../install/lib*/libgomp.a "$libdir/libgomp.a"',
            f'printf %s {q(SPEC)} > "$libdir/libgomp.spec"',
            'install -m 644 ../install/lib/gcc/*/*/include/omp.h "$libdir/include/omp.h"',
            # The self-check: an OpenMP library links libgomp in and needs no libgomp.so.
            "printf '%s\\n' '#include <omp.h>' 'int f(void) { int n = 0;' "
            "'#pragma omp parallel reduction(+:n)' 'n += omp_get_num_threads() > 0; return n; }' > check.c",
            '"$cc" $flags -fopenmp -fPIC -shared -o libcheck.so check.c',
            "if readelf -d libcheck.so | grep -q 'NEEDED.*libgomp'; then",
            "  echo 'the compiler still links libgomp.so: -fopenmp did not find the static libgomp' >&2; exit 1",
            "fi",
        ]
    )


def unpack_gcc_tree(archive: Path, member: str, dest: Path) -> None:
    """``GCC_TREE`` of the source tarball ``member`` inside the orig ``archive``, at ``dest``."""
    dest.mkdir(parents=True)
    found: set[str] = set()
    try:
        with tarfile.open(archive) as outer:
            try:
                inner_info = outer.getmember(member)
            except KeyError:
                raise SourceError(
                    f"{archive.name} has no {member}",
                    where=str(archive),
                    fix="correct [openmp] member (`tar tf` on the orig tarball lists it)",
                ) from None
            inner_file = outer.extractfile(inner_info)
            if inner_file is None:
                raise SourceError(f"{member} in {archive.name} is not a file", where=str(archive))
            with tarfile.open(fileobj=inner_file, mode="r|*") as inner:
                sources.extract_all(inner, dest, member, _wanted(inner, found))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise sources.unpack_error(f"{member} of {archive.name}", archive, exc) from exc
    missing = [p for p in GCC_TREE if p not in found]
    if missing:
        raise SourceError(
            f"{member} of {archive.name} lacks {', '.join(missing)}",
            where=str(archive),
            fix="[openmp] must name a GCC source tarball (its libgomp/ and top-level build files)",
        )


def _wanted(tar: tarfile.TarFile, found: set[str]) -> Iterator[tarfile.TarInfo]:
    """The members of GCC_TREE, their top directory dropped (noting which entries were seen)."""
    for entry in tar:
        rest = entry.name.removeprefix("./").partition("/")[2]
        hit = next((p for p in GCC_TREE if rest == p or (p.endswith("/") and rest.startswith(p))), "")
        if hit:
            found.add(hit)
            entry.name = rest
            yield entry
