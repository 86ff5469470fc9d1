"""The GPU extras resolve from the package index, each to the stack docs/verl.md ("Install, per CUDA
major") names: pip's own resolver (`pip install --dry-run --ignore-installed --report`), nothing
installed, nothing downloaded but metadata (about a minute each, on the network; the slow stage
runs it beside the learning runs: tests/slow_schedule.py).

- `gpu-cu13` (= `gpu`): verl[vllm] 0.9.1's own pins, vllm 0.24.0 and torch 2.11.0, whose NVIDIA
  libraries are CUDA 13's (no `-cu12` package);
- `gpu-cu12`: vllm 0.19.1 and torch 2.10.0, the CUDA 12.8 build: every versioned NVIDIA library is a
  `-cu12` one (nvidia-cudnn-cu12 among them), none `-cu13`.
Both carry verl 0.9.1 and a transformers inside verl's range (>= 5.5.3, < 5.11)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "gpu-cu13": {"torch": "2.11.0", "vllm": "0.24.0", "verl": "0.9.1"},
    "gpu-cu12": {"torch": "2.10.0", "vllm": "0.19.1", "verl": "0.9.1"},
}
OTHER_CUDA = {"gpu-cu13": "-cu12", "gpu-cu12": "-cu13"}
VERL_TRANSFORMERS = SpecifierSet(">=5.5.3,<5.11")  # verl 0.9.1's requirement

pytestmark = pytest.mark.slow


def resolve(extra: str, tmp_path: Path) -> dict[str, str]:
    """{name: version} of what `pip install '.[extra]'` would install into an empty environment."""
    report = tmp_path / f"{extra}.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), f".[{extra}]"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}


def test_verl_transformers_range_by_hand():
    assert "5.9.0" in VERL_TRANSFORMERS and "5.10.4" in VERL_TRANSFORMERS
    assert "5.11.0" not in VERL_TRANSFORMERS and "5.5.2" not in VERL_TRANSFORMERS


@pytest.mark.parametrize("extra", sorted(EXPECTED))
def test_the_gpu_extra_resolves_to_its_documented_stack(extra, tmp_path):
    got = resolve(extra, tmp_path)
    assert {name: got.get(name) for name in EXPECTED[extra]} == EXPECTED[extra]
    assert got["transformers"] in VERL_TRANSFORMERS, got["transformers"]
    nvidia = sorted(name for name in got if name.startswith("nvidia-"))
    assert nvidia, "no NVIDIA library resolved: not a CUDA build of torch"
    assert not [n for n in nvidia if n.endswith(OTHER_CUDA[extra])], nvidia
    if extra == "gpu-cu12":
        assert "nvidia-cudnn-cu12" in got, nvidia
