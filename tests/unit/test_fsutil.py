"""fsutil.write_if_changed: generated files ninja reads are rewritten only for new text."""

from __future__ import annotations

import os
from pathlib import Path

from ortdist.fsutil import write_if_changed


def test_write_if_changed_keeps_the_same_bytes_untouched(tmp_path: Path) -> None:
    """A file ninja reads keeps its mtime when its text does not change."""
    dest = tmp_path / "unit.cc"
    assert write_if_changed(dest, "a\n") and dest.read_text() == "a\n"
    os.utime(dest, ns=(1, 1))
    assert not write_if_changed(dest, "a\n") and dest.stat().st_mtime_ns == 1
    assert write_if_changed(dest, "b\n") and dest.read_text() == "b\n"
