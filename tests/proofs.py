"""The proof record (docs/proofs.json): which recipes a test run proved, at which plan digest, and
what the README may therefore claim.

Every integration run writes its claims (test-results/claims.json, tests/conftest.py). A run that
proved something worth keeping (the release gate, ORTDIST_TEST_RECIPES=all; a CI run) is folded into
the committed record with ``python3 tests/proofs.py record test-results/claims.json``: each recipe it
proved replaces that recipe's entry. tests/unit/test_proofs.py holds the README's claim words
("proven", "parity") to the entries whose plan digest is the recipe's current one: a changed recipe,
toolchain, patch or pin voids its proof until a run proves it again.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
RECORD = PROJECT / "docs" / "proofs.json"
# Words in a README recipe row that claim a proof the record must hold.
CLAIM_WORDS = re.compile(r"\b(proven|parity)\b")
PROVEN = ("proven-cold", "proven-cached")


def load(path: Path = RECORD) -> dict[str, Any]:
    if not path.is_file():
        return {"recipes": {}}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def fold(record: Mapping[str, Any], claims: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with every claim group ``claims`` (one run's claims.json) proved in full replacing
    that recipe's entry; groups not proven (failed, partly, not run) leave the record as it was."""
    recipes = dict(record.get("recipes", {}))
    for group, claim in claims["claims"].items():
        if claim.get("status") not in PROVEN or not claim.get("plan_digest"):
            continue
        recipes[group] = {
            "status": claim["status"],
            "plan_digest": claim["plan_digest"],
            "python_left_out": claim.get("python_left_out", []),
            "artifacts": claim.get("artifacts", {}),
            "root": claim.get("root", ""),
            "root_packages": claim.get("root_packages", {}),
            "commit": claims["commit"],
            "date": claims["date"],
            "machine": claims["machine"],
            "test_recipes": claims.get("test_recipes", ""),
        }
    return {**record, "recipes": dict(sorted(recipes.items()))}


def readme_claims(readme: str) -> dict[str, str]:
    """Each recipe a README table row names in its first cell, with the claim word its row uses
    (rows without one are left out)."""
    found = {}
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.lstrip().startswith("|"):
            continue
        word = CLAIM_WORDS.search(" ".join(cells[1:]))
        if word:
            for recipe in re.findall(r"`([a-z0-9-]+)`", cells[0]):
                found[recipe] = word[1]
    return found


def unbacked(readme: str, record: Mapping[str, Any], digests: Mapping[str, str]) -> list[str]:
    """The README's claims the record does not hold at the current ``digests`` (one line each)."""
    problems = []
    for recipe, word in sorted(readme_claims(readme).items()):
        entry = record.get("recipes", {}).get(recipe)
        if entry is None or entry.get("status") not in PROVEN:
            problems.append(f"{recipe}: the README says {word!r}, and no run in docs/proofs.json proved it")
        elif entry["plan_digest"] != digests[recipe]:
            problems.append(
                f"{recipe}: the README says {word!r}, but docs/proofs.json's proof ({entry['date']}, "
                f"{entry['commit'][:12]}) is of another plan (digest {entry['plan_digest'][:12]}, "
                f"now {digests[recipe][:12]})"
            )
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "record":
        print("usage: python3 tests/proofs.py record test-results/claims.json", file=sys.stderr)
        return 2
    claims = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    folded = fold(load(), claims)
    RECORD.write_text(json.dumps(folded, indent=2) + "\n", encoding="utf-8")
    kept = [g for g, c in claims["claims"].items() if c.get("status") in PROVEN]
    print(f"docs/proofs.json: {', '.join(kept) or 'nothing'} from {claims['commit'][:12]} ({claims['date']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
