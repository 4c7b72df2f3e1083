"""What a build step is, in one place: each step module exports ``STEP``, and the driver's table,
reuse and the fingerprints the later steps see are derived from it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import ninjalog
from . import reuse
from .context import BuildContext
from .layout import StepOutput
from .state import BuildState

Run = Callable[[BuildContext, BuildState], StepOutput]
Fingerprint = Callable[[BuildContext, StepOutput], str]
Inputs = Callable[[BuildContext, BuildState], str]


@dataclass(frozen=True)
class StepDef:
    """One build step: its run function; whether a rerun whose inputs digest is unchanged may take
    its recorded outputs (a packaging step: its outputs are only files made from earlier outputs);
    and what of its work the steps after it see (``fingerprint``; default: its output and files).
    ``inputs``: what a reusable step's result depends on, when that is less than every step before
    it (the compat step: what the artefacts present to an older system, not their every byte)."""

    run: Run
    reusable: bool = False
    fingerprint: Fingerprint | None = None
    inputs: Inputs | None = None

    def fingerprint_of(self, ctx: BuildContext, output: StepOutput) -> str:
        if self.fingerprint is not None:
            return self.fingerprint(ctx, output)
        encoded = reuse.encode(output)
        # A reusable step's files are checked by size and mtime before reuse; a step that always
        # runs may rewrite a file with the same bytes (the operator config): its files count by content.
        files = reuse.files_of(encoded) if self.reusable else reuse.contents_of(encoded)
        return reuse.chain(json.dumps(encoded, sort_keys=True), json.dumps(files, sort_keys=True))


def ninja_state(ninja_log: Path) -> str:
    """What a ninja build made, from its log: a line is added for every output ninja rebuilds."""
    try:
        return ninjalog.built_state(ninja_log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return "missing"
