"""One monolithic static library from the real CMake link graph.

ORT builds ~20 static component libraries and links them, with its dependencies, into
libonnxruntime.so. CMake's file API (codemodel v2) records that link line exactly; the bundler
reads it, swaps each shared dependency for the static archive beside it, and merges every
archive into one ``libonnxruntime.a`` with an ``ar`` MRI script. Nothing is a hard-coded list, so
an EP or option that adds a library adds it to the bundle too. Pure parsing here; the bundle step
runs ``ar``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from .errors import BuildError

LIBRARY_TARGET = "onnxruntime"
_SHARED = re.compile(r"^(?P<stem>lib[^/]+?)\.so(\.\d+)*$")
# Libraries of the C runtime itself: the consumer links these, they are not bundled.
SYSTEM_LIBS = frozenset({"c", "m", "pthread", "dl", "rt", "stdc++", "gcc", "gcc_s", "atomic"})


@dataclass(frozen=True, kw_only=True)
class LinkGraph:
    """What the library links, in link order, as paths inside the build root."""

    archives: tuple[str, ...]  # static archives to merge (build tree and system)
    system_libs: tuple[str, ...]  # -l names left to the consumer (libc, libm, pthread, ...)
    unresolved: tuple[str, ...]  # shared libraries with no static archive beside them


def read_reply(reply_dir: Callable[[str], str], target: str = LIBRARY_TARGET) -> list[dict[str, str]]:
    """The link command fragments of ``target`` from a file-API reply (``reply_dir(name)`` reads a file)."""
    index_names = [n for n in reply_dir("").split("\n") if n.startswith("index-") and n.endswith(".json")]
    if not index_names:
        raise BuildError("CMake wrote no file-API reply", fix="re-run the build; configure creates it")
    index = json.loads(reply_dir(sorted(index_names)[-1]))
    codemodel_file = next((o["jsonFile"] for o in index.get("objects", []) if o.get("kind") == "codemodel"), None)
    if codemodel_file is None:
        raise BuildError("the file-API reply has no codemodel", fix="re-run configure")
    codemodel = json.loads(reply_dir(codemodel_file))
    targets = codemodel["configurations"][0]["targets"]
    entry = next((t for t in targets if t["name"] == target), None)
    if entry is None:
        raise BuildError(
            f"the CMake project has no target {target!r}",
            fix="the bundler needs onnxruntime_BUILD_SHARED_LIB=ON (the plan sets it)",
        )
    data = json.loads(reply_dir(entry["jsonFile"]))
    fragments: list[dict[str, str]] = data.get("link", {}).get("commandFragments", [])
    return fragments


def static_sibling(shared: str) -> str | None:
    """/usr/lib/x/libabsl_base.so.20240722.0.0 -> /usr/lib/x/libabsl_base.a (None: not a shared lib)."""
    path = PurePosixPath(shared)
    match = _SHARED.match(path.name)
    return str(path.with_name(match.group("stem") + ".a")) if match else None


def link_graph(fragments: Sequence[dict[str, str]], build_dir: str, exists: Callable[[str], bool]) -> LinkGraph:
    """Classify the ``libraries`` fragments: archives to merge, system libs, and the unresolvable."""
    archives: list[str] = []
    system: list[str] = []
    unresolved: list[str] = []
    for fragment in fragments:
        if fragment.get("role") != "libraries":
            continue
        for token in fragment["fragment"].split():
            if token.startswith("-l"):
                name = token[2:]
                (system if name in SYSTEM_LIBS else unresolved).append(name if name in SYSTEM_LIBS else token)
                continue
            if token.startswith("-"):
                continue  # linker flags (-Wl,...), not inputs
            path = token if token.startswith("/") else f"{build_dir}/{token}"
            stem = PurePosixPath(path).name.split(".", 1)[0].removeprefix("lib")
            if path.endswith(".a"):
                (system if stem in SYSTEM_LIBS else archives).append(stem if stem in SYSTEM_LIBS else path)
                continue
            sibling = static_sibling(path)
            if sibling is None:
                continue
            if stem in SYSTEM_LIBS:
                system.append(stem)
            elif exists(sibling):
                archives.append(sibling)
            else:
                unresolved.append(path)
    return LinkGraph(
        archives=tuple(dict.fromkeys(archives)),
        system_libs=tuple(dict.fromkeys(system)),
        unresolved=tuple(dict.fromkeys(unresolved)),
    )


def unstripped_link_command(ninja_commands: str, library: str, output: str) -> str:
    """The library's link command (last line of ``ninja -t commands LIB``) without ``-s``, writing
    ``output``; '' when the build does not strip at link time (its own output has symbols)."""
    lines = [line for line in ninja_commands.strip().splitlines() if f"-o {library}" in line]
    if not lines:
        raise BuildError(f"no link command for {library} in the ninja graph", fix="check logs/build.log")
    command = lines[-1]
    tokens = command.split(" ")
    if "-s" not in tokens:
        return ""
    return " ".join(t for t in tokens if t != "-s").replace(f"-o {library}", f"-o {output}", 1)


def mri_script(output: str, archives: Sequence[str], objects: Sequence[str] = ()) -> str:
    """An ``ar -M`` script merging ``objects`` and ``archives`` (names may repeat across archives)."""
    bad = [a for a in (output, *objects, *archives) if any(c in a for c in " \t\n;*,+()")]
    if bad:
        raise BuildError(f"ar MRI scripts cannot name {bad[0]!r}", fix="use paths without spaces or ;,+()*")
    lines = [f"CREATE {output}", *(f"ADDMOD {o}" for o in objects), *(f"ADDLIB {a}" for a in archives)]
    return "\n".join([*lines, "SAVE", "END"]) + "\n"


def split_lto(archives: Sequence[str], build_dir: str) -> tuple[list[str], list[str]]:
    """(ORT's own archives, which hold LTO IR in an LTO build; the dependencies' archives)."""
    own = [a for a in archives if a.startswith(build_dir + "/")]
    return own, [a for a in archives if a not in own]


def pkg_config(prefix_name: str, version: str, system_libs: Sequence[str], description: str) -> str:
    """libonnxruntime.pc for the static archive: `pkg-config --static --libs` gives the full line."""
    private = " ".join(f"-l{lib}" for lib in ("stdc++", *system_libs) if lib != "c")
    return (
        "prefix=${pcfiledir}/../..\n"
        "libdir=${prefix}/lib\n"
        "includedir=${prefix}/include\n\n"
        f"Name: {prefix_name}\n"
        f"Description: {description}\n"
        f"Version: {version}\n"
        "Libs: -L${libdir} -lonnxruntime\n"
        f"Libs.private: {private}\n"
        "Cflags: -I${includedir}\n"
    )


def component_of(archive: str) -> str:
    """A readable component name for size breakdowns: onnxruntime_providers -> ort:providers."""
    stem = PurePosixPath(archive).name.removeprefix("lib").split(".")[0]
    if stem.startswith("onnxruntime_"):
        return "ort:" + stem.removeprefix("onnxruntime_")
    for prefix, name in (("absl_", "abseil"), ("protobuf", "protobuf"), ("onnx", "onnx"), ("re2", "re2")):
        if stem.startswith(prefix):
            return name
    return stem
