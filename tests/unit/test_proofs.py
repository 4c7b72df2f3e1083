"""The README claims no more than docs/proofs.json holds at the recipes' current plan digests."""

from __future__ import annotations

from pathlib import Path

import proofs

CLAIMS = {
    "commit": "c" * 40,
    "date": "2026-11-28T18:00:00Z",
    "machine": {"host": "h", "cpus": 2, "processor": ""},
    "test_recipes": "",
    "claims": {
        "cpu-linux": {"status": "proven-cold", "plan_digest": "a" * 64, "artifacts": {"w.whl": "1" * 64}},
        "xnnpack-linux": {"status": "failed", "plan_digest": "b" * 64},
        "slim-linux": {"status": "partly-proven", "plan_digest": "d" * 64},
        "GPU (CUDA on a device)": {"status": "not-proven"},
    },
}
README = """
| recipe | what |
|---|---|
| `cpu-linux` | the wheel, proven in a clean root |
| `xnnpack-linux` | XNNPACK compiled in |
| `slim-linux-aarch64`, `slim-c-linux-aarch64` | at parity under qemu |
"""


def test_a_run_folds_into_the_record_only_what_it_proved_in_full() -> None:
    old = {"recipes": {"xnnpack-linux": {"status": "proven-cached", "plan_digest": "e" * 64, "date": "before"}}}
    folded = proofs.fold(old, CLAIMS)
    assert sorted(folded["recipes"]) == ["cpu-linux", "xnnpack-linux"]
    assert folded["recipes"]["xnnpack-linux"]["date"] == "before"  # a failed run voids nothing it did not prove
    cpu = folded["recipes"]["cpu-linux"]
    assert (cpu["plan_digest"], cpu["commit"], cpu["artifacts"]) == ("a" * 64, "c" * 40, {"w.whl": "1" * 64})


def test_a_readme_claim_needs_a_proof_of_the_current_plan() -> None:
    assert proofs.readme_claims(README) == {
        "cpu-linux": "proven",
        "slim-linux-aarch64": "parity",
        "slim-c-linux-aarch64": "parity",
    }
    record = proofs.fold({}, CLAIMS)
    digests = {"cpu-linux": "a" * 64, "slim-linux-aarch64": "f" * 64, "slim-c-linux-aarch64": "f" * 64}
    assert proofs.unbacked(README, record, digests) == [
        "slim-c-linux-aarch64: the README says 'parity', and no run in docs/proofs.json proved it",
        "slim-linux-aarch64: the README says 'parity', and no run in docs/proofs.json proved it",
    ]
    changed = proofs.unbacked(README, record, {**digests, "cpu-linux": "9" * 64})[0]
    assert changed.startswith("cpu-linux: the README says 'proven', but docs/proofs.json's proof (2026-11-28")


def test_the_readme_claims_no_more_than_the_record_holds(project: Path) -> None:
    from ortdist.project import plan_for

    readme = (project / "README.md").read_text(encoding="utf-8")
    claimed = proofs.readme_claims(readme)
    digests = {recipe: plan_for(recipe, project)[0].digest() for recipe in claimed}
    assert proofs.unbacked(readme, proofs.load(), digests) == []
