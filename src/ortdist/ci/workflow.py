"""The generated texts: one GitHub Actions job per recipe (with its cache steps) and the
cibuildwheel configs, as pure functions of the plans and the runner facts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from ..plan import BuildPlan
from . import cache as ci_cache
from .runners import HEADER, RunnerFacts, Workflow


def _yaml(value: str | bool | int | tuple[str, ...]) -> str:
    """A YAML flow scalar/sequence: JSON is valid YAML, and quoting everything keeps it unambiguous."""
    if isinstance(value, tuple):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


def matrix_entry(plan: BuildPlan, facts: RunnerFacts) -> dict[str, str | bool | tuple[str, ...]]:
    """One matrix row: build only where ortdist can run the toolchain, smoke only native wheels;
    with the cache entries of the job where the runner starts empty (``job_cache_entries``)."""
    runner = facts.runner_for(plan)
    build = not plan.toolchain.plan_only
    # The smoke test runs wheels the host cannot in the build's own toolchain's roots, which the
    # build made (and the job restored): no other toolchain's root is made for it.
    smoke = build and plan.builds_wheel and runner.native
    smoke_args = ["--toolchain", plan.toolchain.name] if smoke else []
    smoke_args += ["--require-device"] if facts.has_device_runner(plan) else []
    entries = job_cache_entries(plan, facts)
    row: dict[str, str | bool | tuple[str, ...]] = {
        "recipe": plan.recipe.name,
        "target": plan.target.triple,
        "runner": runner.runs_on,
        "build": build,
        # A cross-built wheel runs on its build host too: `ortdist smoke` emulates its CPU.
        "smoke": smoke,
        "smoke_args": " ".join(smoke_args),
        "nox": facts.nox_for(plan),
        # setup-python installs the CPythons the toolchain takes from the host, then nox's own (last:
        # the default `python`); ortdist finds them in the runner's tool cache.
        "pythons": "\n".join([*host_pythons(plan), facts.workflow.python]),
        "cache": bool(entries),
    }
    for entry in entries:
        row[f"cache_{entry.name}_key"] = entry.key
        row[f"cache_{entry.name}_restore"] = "\n".join(entry.restore_keys)
        row[f"cache_{entry.name}_paths"] = " ".join(entry.paths)
    if entries and plan.compiler_cache.size_env:
        row["compiler_cache_size"] = f"{plan.compiler_cache.size_env}={facts.workflow.compiler_cache_size}"
    return row


def job_cache_entries(plan: BuildPlan, facts: RunnerFacts) -> tuple[ci_cache.CacheEntry, ...]:
    """The plan's cache entries (ci_cache.py) where its job builds on a runner that starts empty."""
    if plan.toolchain.plan_only or not facts.runner_for(plan).actions_cache:
        return ()
    return ci_cache.cache_entries(plan)


def host_pythons(plan: BuildPlan) -> list[str]:
    """The plan's CPython versions that its toolchain takes from the build host, not from Debian."""
    return [v for v in plan.extra_python if plan.toolchain.extra_python[v].source == "host"]


# Where a job keeps $ORTDIST_CACHE, and the archives actions/cache restores and saves.
CACHE_DIR = "$RUNNER_TEMP/ortdist-cache"
ARCHIVES = "ortdist-cache-archives"  # under the runner's temp directory

# The build runs as root (sudo), so the cache holds root-owned files, some readable by root only,
# and roots whose owners and modes their content manifests record: actions/cache, running as the
# runner's user, could neither read them nor restore their owners. Each entry is therefore one tar
# archive made and unpacked by root (numeric owners: a root's users are not the runner's), which
# actions/cache compresses and stores. An entry is saved only when every path it lists exists.
_PACK = f"""archives="$RUNNER_TEMP/{ARCHIVES}"
sudo rm -rf "$archives" && mkdir -p "$archives"
cd "$ORTDIST_CACHE" 2>/dev/null || exit 0
set -f
for path in $PATHS; do
  if ! sudo test -e "$path"; then echo "$ENTRY: $path was not made: not saved"; exit 0; fi
done
# shellcheck disable=SC2086
sudo tar -c --numeric-owner --one-file-system -f "$archives/$ENTRY.tar" -- $PATHS
sudo chown "$(id -u):$(id -g)" "$archives/$ENTRY.tar"
echo "packed=true" >> "$GITHUB_OUTPUT"
"""

_UNPACK = f"""archive="$RUNNER_TEMP/{ARCHIVES}/$ENTRY.tar"
sudo mkdir -p "$ORTDIST_CACHE"
sudo tar -x --numeric-owner -p -f "$archive" -C "$ORTDIST_CACHE"
rm -f "$archive"
"""


def _run(script: str, indent: int = 10) -> str:
    """A ``run: |`` block scalar."""
    pad = " " * indent
    return "run: |\n" + "\n".join(pad + line for line in script.splitlines())


def _restore_steps(wf: Workflow) -> str:
    """Where the cache lives, then each entry restored and unpacked in turn (one archive on disk at
    a time), then what the cache holds, in the log."""
    location = 'echo "ORTDIST_CACHE=' + CACHE_DIR + '" >> "$GITHUB_ENV"\n'
    location += 'if [ -n "$SIZE" ]; then echo "$SIZE" >> "$GITHUB_ENV"; fi'
    steps = [
        f"""      - name: Cache location
        if: matrix.cache
        env:
          SIZE: ${{{{ matrix.compiler_cache_size }}}}
        {_run(location)}"""
    ]
    for name in ci_cache.ENTRIES:
        steps.append(
            f"""      - name: Restore cache ({name})
        id: restore-{name}
        if: matrix.cache_{name}_key
        uses: {wf.cache_restore}
        with:
          path: ${{{{ runner.temp }}}}/{ARCHIVES}/{name}.tar
          key: ${{{{ matrix.cache_{name}_key }}}}
          restore-keys: ${{{{ matrix.cache_{name}_restore }}}}
      - name: Unpack cache ({name})
        if: steps.restore-{name}.outputs.cache-matched-key
        env:
          ENTRY: {name}
        {_run(_UNPACK)}"""
        )
    steps.append(
        """      - name: Cache contents
        if: matrix.cache
        run: sudo du -sh "$ORTDIST_CACHE"/* || true"""
    )
    return "\n".join(steps)


def _save_steps(wf: Workflow) -> str:
    steps = []
    for name in ci_cache.ENTRIES:
        steps.append(
            f"""      - name: Pack cache ({name})
        id: pack-{name}
        if: ${{{{ !cancelled() && matrix.cache_{name}_key && steps.restore-{name}.outputs.cache-hit != 'true' }}}}
        env:
          ENTRY: {name}
          PATHS: ${{{{ matrix.cache_{name}_paths }}}}
        {_run(_PACK)}
      - name: Save cache ({name})
        if: ${{{{ !cancelled() && steps.pack-{name}.outputs.packed == 'true' }}}}
        uses: {wf.cache_save}
        with:
          path: ${{{{ runner.temp }}}}/{ARCHIVES}/{name}.tar
          key: ${{{{ matrix.cache_{name}_key }}}}"""
        )
    return "\n".join(steps)


def workflow_text(plans: Iterable[BuildPlan], facts: RunnerFacts) -> str:
    wf = facts.workflow
    rows = []
    for plan in sorted(plans, key=lambda p: p.recipe.name):
        entry = matrix_entry(plan, facts)
        note = facts.runner_for(plan).note
        rows.append(f"          # {plan.recipe.name}: {note}" + (" (plan only)" if not entry["build"] else ""))
        first, *rest = entry.items()
        rows.append(f"          - {first[0]}: {_yaml(first[1])}")
        rows += [f"            {k}: {_yaml(v)}" for k, v in rest]
    matrix = "\n".join(rows)
    return f"""{HEADER}
# One job per recipe on the runner that has what it needs (src/ortdist/data/runners.toml), running
# the same nox sessions as a developer. Plan-only recipes print their plan there; the others build,
# smoke-test their wheels where the runner can run them, and upload dist/<recipe>/ (with logs/ and
# smoke/ reports) even when a step failed. On hosted runners the job restores ortdist's cache
# (build root, other roots, sources, compiler cache) under keys derived from the plan's digests
# (src/ortdist/ci_cache.py) and saves what it made under keys that missed (ci/README.md, Caching).
name: ortdist

on:
  push:
    branches: [main]
  pull_request:
  workflow_dispatch:

permissions:
  contents: read

concurrency:
  group: ortdist-${{{{ github.ref }}}}
  cancel-in-progress: true

jobs:
  recipe:
    name: ${{{{ matrix.recipe }}}} (${{{{ matrix.target }}}})
    runs-on: ${{{{ matrix.runner }}}}
    timeout-minutes: {wf.timeout_minutes}
    # Scaling out (docs/scaling.md): a team's shared compiler cache and distcc workers, from the
    # repository's variables and secrets; unset (empty), each job caches on its runner's disk and
    # compiles there. sccache takes its backend from SCCACHE_* (WebDAV here; Redis, S3, GCS alike);
    # workers must be reachable from the runner (self-hosted runners on the team's network), each
    # running `ortdist worker TOOLCHAIN` for the recipe's toolchain.
    env:
      ORTDIST_COMPILER_CACHE: ${{{{ vars.ORTDIST_COMPILER_CACHE }}}}
      SCCACHE_WEBDAV_ENDPOINT: ${{{{ vars.SCCACHE_WEBDAV_ENDPOINT }}}}
      SCCACHE_WEBDAV_USERNAME: ${{{{ vars.SCCACHE_WEBDAV_USERNAME }}}}
      SCCACHE_WEBDAV_PASSWORD: ${{{{ secrets.SCCACHE_WEBDAV_PASSWORD }}}}
      ORTDIST_WORKERS: ${{{{ vars.ORTDIST_WORKERS }}}}
    defaults:
      run:
        shell: bash
    strategy:
      fail-fast: false
      matrix:
        include:
{matrix}
    steps:
      - uses: {wf.checkout}
      - uses: {wf.setup_python}
        with:
          python-version: ${{{{ matrix.pythons }}}}
      - name: Install nox
        run: python -m pip install {_yaml(wf.nox)}
      - name: Plan
        run: python -m nox -s plan -- ${{{{ matrix.recipe }}}}
{_restore_steps(wf)}
      - name: Build
        if: matrix.build
        run: ${{{{ matrix.nox }}}} -s build-${{{{ matrix.recipe }}}}
      - name: Smoke
        if: matrix.smoke
        run: ${{{{ matrix.nox }}}} -s smoke -- ${{{{ matrix.smoke_args }}}} dist/${{{{ matrix.recipe }}}}/*.whl
      - name: Upload dist/${{{{ matrix.recipe }}}}
        if: always() && matrix.build
        uses: {wf.upload_artifact}
        with:
          name: ${{{{ matrix.recipe }}}}
          path: dist/${{{{ matrix.recipe }}}}/
          if-no-files-found: error
{_save_steps(wf)}
"""


# --- cibuildwheel ---------------------------------------------------------------------------------


def _toml_table(name: str, values: Mapping[str, str | list[str]]) -> list[str]:
    return [f"[{name}]", *(f"{k} = {json.dumps(v)}" for k, v in values.items()), ""]


def cibuildwheel_text(plan: BuildPlan, facts: RunnerFacts) -> str | None:
    """cibuildwheel settings for the recipe's Python axis, or None where cibuildwheel does not fit."""
    cibw = facts.targets[plan.target.triple].cibuildwheel
    if cibw is None or not plan.builds_wheel:
        return None
    repair = facts.repair[plan.wheel_repair]
    builds = [f"cp{v.replace('.', '')}-{cibw.identifier}" for v in plan.python]
    platform: dict[str, str | list[str]] = {"archs": [cibw.arch]}
    if repair.before_build:
        platform["before-build"] = repair.before_build
    platform["repair-wheel-command"] = repair.command_for(plan.repair_excludes)
    lines = [
        HEADER,
        f"# The Python-version axis of recipe {plan.recipe.name} ({plan.target.triple}, {plan.distribution},",
        f"# repaired with {plan.wheel_repair}): one wheel per CPython in the recipe's [wheel] python.",
        f"#   cibuildwheel --platform {cibw.platform} --config-file ci/cibuildwheel/{plan.recipe.name}.toml",
        "# ci/README.md says where cibuildwheel fits and where it does not.",
        "",
        *_toml_table("tool.cibuildwheel", {"build": builds}),
        *_toml_table(f"tool.cibuildwheel.{cibw.platform}", platform),
    ]
    if cibw.environment:
        lines += _toml_table(f"tool.cibuildwheel.{cibw.platform}.environment", cibw.environment)
    return "\n".join(lines).rstrip("\n") + "\n"


# --- ci/ on disk ----------------------------------------------------------------------------------
