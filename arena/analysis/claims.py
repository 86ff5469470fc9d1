"""The paper's findings as comparisons (arena/analysis/findings.yaml): one Claim per `arm - baseline`
of each finding, with what the paper reports for it and the measure it is compared on."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from . import measures

FINDINGS_FILE = Path(__file__).with_name("findings.yaml")


@dataclass(frozen=True)
class Claim:
    """One comparison of one finding: `arm - baseline`, and what the paper reports for it."""
    finding: str
    claim: str
    cite: str
    dimension: str
    arm: str
    baseline: str
    paper: str
    sign: Optional[int]
    measure: str = measures.DEFAULT  # what is compared per run (arena/analysis/measures.py)


def load_claims(path: str | Path = FINDINGS_FILE) -> list[Claim]:
    """findings.yaml -> one Claim per comparison, in file order; a finding's `measure` (default
    `final`) must be one of measures.MEASURES."""
    data = yaml.safe_load(Path(path).read_text())
    return [Claim(f["id"], f["claim"], f["cite"], f["dimension"], c["arm"], c["baseline"], c["paper"], c["sign"],
                  measures.check(f.get("measure", measures.DEFAULT), f"finding {f['id']}: measure"))
            for f in data["findings"] for c in f["comparisons"]]

