"""The package's layers: no import cycles, nothing below the CLI imports it, modules stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ortdist"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Every ortdist module ``path`` imports, at any depth (function-local and TYPE_CHECKING too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = f"{base}.{node.module}" if node.level and node.module else node.module or base
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}  # `from . import run` names a module
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: imports_of(path, set(files)) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path (empty: none), by depth-first search."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return []
        for nxt in sorted(graph[node]):
            # A package's __init__ re-exporting its submodules is not a cycle of layers.
            if nxt.startswith(node + "."):
                continue
            cycle = visit(nxt, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return []

    for start in sorted(graph):
        cycle = visit(start, [])
        if cycle:
            return cycle
    return []


def test_the_package_has_no_import_cycles() -> None:
    assert find_cycle(import_graph()) == []


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def package_of(module: str) -> str:
    """ortdist.checks.elf -> ortdist.checks; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def mutual_packages(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """Each pair of packages that import each other (module by module, at any depth), with the
    imports that make it one: a file-level graph without cycles can still have two packages that
    each reach into the other, which makes "what may I touch" a question about both."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, deps in graph.items():
        for dep in deps:
            edge = (package_of(module), package_of(dep))
            if edge[0] != edge[1] and "ortdist" not in edge:
                edges.setdefault(edge, []).append(f"{module} -> {dep}")
    return {(a, b): sorted(edges[(a, b)] + edges[(b, a)]) for a, b in sorted(edges) if a < b and (b, a) in edges}


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which packages (and top-level modules) each imports, the package itself and ortdist/__init__
    left out."""
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        if package_of(module) != "ortdist":
            out.setdefault(package_of(module), set())
            out[package_of(module)] |= {package_of(d) for d in deps} - {package_of(module), "ortdist"}
    return out


def test_packages_import_only_downward() -> None:
    """No two packages import each other, directly or round a longer loop (checks -> smoke ->
    wheel -> checks was one): each has a floor, and a piece a lower one needs moves down."""
    graph = import_graph()
    assert mutual_packages(graph) == {}
    assert find_cycle(package_graph(graph)) == []


def test_mutual_packages_finds_a_pair_through_different_modules() -> None:
    graph = {"ortdist.a.x": {"ortdist.b.y"}, "ortdist.b.z": {"ortdist.a.w"}, "ortdist.a.w": set(), "ortdist.b.y": set()}
    assert mutual_packages(graph) == {
        ("ortdist.a", "ortdist.b"): ["ortdist.a.x -> ortdist.b.y", "ortdist.b.z -> ortdist.a.w"]
    }
    assert mutual_packages({"ortdist.a.x": {"ortdist.b.y"}, "ortdist.b.y": set()}) == {}


@pytest.mark.parametrize("low", ["ortdist.bench.run", "ortdist.pipeline.driver", "ortdist.checks.c_smoke"])
def test_nothing_below_the_cli_imports_it(low: str) -> None:
    graph = import_graph()
    cli = {name for name in graph if name == "ortdist.cli" or name.startswith("ortdist.cli.")}
    assert not graph[low] & cli
    importers = {name for name, deps in graph.items() if deps & cli and name not in cli}
    assert importers <= {"ortdist.__main__"}


def test_only_the_one_door_starts_subprocesses() -> None:
    """run.py puts every child in a process group of its own and ends the group on an interrupt;
    a subprocess started elsewhere would outlive Ctrl-C (issue #16)."""
    starters = {
        module_name(path)
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            name == "subprocess" or name.startswith("subprocess.")
            for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
        )
    }
    assert starters == {"ortdist.run"}


def test_no_module_outside_toolchains_imports_a_backend() -> None:
    """Callers use the Toolchain protocol; a backend's helpers they need live in modules of their
    own (hosttools, inroot, wheelhouse), as auditwheel's callers see only its ElfPatcher."""
    graph = import_graph()
    backends = {
        name for name in graph if name.startswith(("ortdist.toolchains.debian", "ortdist.toolchains.plan_only"))
    }
    leaks = {
        name: sorted(deps & backends)
        for name, deps in graph.items()
        if not name.startswith("ortdist.toolchains") and deps & backends
    }
    assert backends and leaks == {}


# A module over this usually holds two things (docs/internals.md); the reference-model catalogue says
# in its docstring why it is one list.
MODULE_LINES = 450
CATALOGUES = {"ortdist.smoke.models"}


def test_modules_stay_small() -> None:
    large = {
        module_name(path): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert set(large) <= CATALOGUES, large
    for name in CATALOGUES:
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        assert "catalogue" in (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")
