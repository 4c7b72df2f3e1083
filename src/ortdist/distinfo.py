"""Where a wheel keeps its metadata: the one top-level ``<name>-<version>.dist-info`` directory.
A leaf, so the wheel writer and the checks that read installed wheels share it without importing
each other."""

from __future__ import annotations

from .errors import PackageError


def dist_info_dir(names: list[str]) -> str:
    records = [n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
    if len(records) != 1:
        raise PackageError(
            f"expected one top-level .dist-info/RECORD, found {records}", fix="the wheel is malformed: rebuild it"
        )
    return records[0].rsplit("/", 1)[0]
