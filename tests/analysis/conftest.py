"""Fixtures: one synthetic sweep (tests/analysis/synthetic.py) and its report, built once."""
from __future__ import annotations

import pytest

from arena.analysis.frames import runs_frame, tidy_frame

from .synthetic import NAME, build_sweep


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    build_sweep(root)
    return root


@pytest.fixture(scope="session")
def runs(results_dir):
    return runs_frame(results_dir, NAME)


@pytest.fixture(scope="session")
def tidy(results_dir, runs):
    return tidy_frame(results_dir, NAME, runs=runs)


@pytest.fixture(scope="session")
def report_dir(results_dir):
    from arena.analysis.report import write_report

    return write_report(results_dir, NAME)
