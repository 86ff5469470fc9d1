import csv
import io
import json
import math
import os
import shutil
from pathlib import Path

import pytest

from arena.analysis.manifest import load_manifest
from arena.analysis.report import main, print_summary_table, write_report
from arena.analysis.table_data import build_table

from .synthetic import NAME

GOLDEN = Path(__file__).parent / "golden" / "table.md"


@pytest.fixture(scope="module")
def table(results_dir, runs):
    chosen = {("gspo", "sokoban"): {"eps_low": 0.003, "eps_high": 0.004}}
    return build_table(runs, load_manifest(results_dir, NAME), chosen)


def _cell(cells, arm, env):
    return cells[(cells.arm == arm) & (cells.env == env)].iloc[0]


def test_cell_numbers_by_hand(table):
    cells, arms = table
    # grpo sokoban [40, 50, 60]: mean 50, std 10 (see test_stats); household [5, 5, 8]: mean 6,
    # deviations -1, -1, 2 -> 6 / 2 = 3 -> std sqrt(3)
    assert (_cell(cells, "grpo", "sokoban")["mean"], _cell(cells, "grpo", "sokoban")["std"]) == pytest.approx((50.0, 10.0), rel=1e-12)
    assert _cell(cells, "grpo", "household")["std"] == pytest.approx(math.sqrt(3), rel=1e-12)
    # Avg = (50 + 6) / 2 = 28; gspo Avg = (65 + 20) / 2 = 42.5; delta 14.5, relative 14.5 / 28
    gspo_avg = _cell(cells, "gspo", "Avg")
    assert (gspo_avg["mean"], gspo_avg.delta_vs_grpo, gspo_avg.rel_vs_grpo) == pytest.approx((42.5, 14.5, 14.5 / 28), rel=1e-12)
    # household GRPO mean 6 < 10 points: the change is in points only
    gspo_house = _cell(cells, "gspo", "household")
    assert gspo_house.delta_vs_grpo == pytest.approx(14.0, rel=1e-12) and math.isnan(gspo_house.rel_vs_grpo)
    # sampo sokoban: the collapsed seed's last eval counts: [80, 80, 90] -> 250/3; not stable
    assert _cell(cells, "sampo", "sokoban")["mean"] == pytest.approx(250 / 3, rel=1e-12)
    by_arm = arms.set_index("arm")
    # IQM by hand: gspo 42.5 (test_stats); grpo [5, 5, 8, 40, 50, 60] -> mean(5, 8, 40, 50) = 25.75
    assert by_arm.loc["gspo", "iqm"] == 42.5 and by_arm.loc["grpo", "iqm"] == 25.75
    assert by_arm.loc["gspo", "p_improve_vs_grpo"] == pytest.approx(17 / 18, rel=1e-15)
    assert math.isnan(by_arm.loc["grpo", "p_improve_vs_grpo"])
    assert by_arm.loc["gspo", "stable"] == {"sokoban": "no", "household": "yes"}  # one seed "unresolved"
    assert by_arm.loc["sampo", "stable"]["sokoban"] == "no"  # a collapsed seed
    assert by_arm.loc["gspo", "chosen_hp"] == {"sokoban": {"eps_low": 0.003, "eps_high": 0.004}}


def test_failed_and_missing_never_zero(table):
    cells, _ = table
    # grpo_4mb sokoban: seeds 30, 50 and a failed one -> mean 40 over n=2 (not 80/3 with a zero), no CI
    failed = _cell(cells, "grpo_4mb", "sokoban")
    assert (failed.n_seeds, failed.n_failed, failed["mean"]) == (2, 1, 40.0)
    assert math.isnan(failed.ci_low) and failed.stable == "?"
    assert _cell(cells, "grpo_4mb", "household").n_missing == 1


def test_an_arm_with_no_finished_seed_is_missing(results_dir, runs):
    gone = runs.copy()
    mask = (gone.arm == "sampo") & (gone.env == "household")
    gone.loc[mask, "status"] = "missing"
    gone.loc[mask, "final_eval_success"] = float("nan")
    cells, arms = build_table(gone, load_manifest(results_dir, NAME), {})
    assert math.isnan(_cell(cells, "sampo", "household")["mean"]) and math.isnan(_cell(cells, "sampo", "Avg")["mean"])
    from arena.analysis.tables import render_markdown

    text = render_markdown(cells, arms, name=NAME)
    assert "| combined | sampo | 83.3 ± 5.8 [80.0, 90.0] (n=3) | — (n=0; 3 missing) | — (n=3; 3 missing) |" in text


def test_markdown_layout_is_pinned_by_golden(report_dir):
    text = (report_dir / "table.md").read_text()
    if os.environ.get("ARENA_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_csv_and_tex(report_dir):
    rows = list(csv.DictReader(io.StringIO((report_dir / "table.csv").read_text())))
    for col in ("arm", "method", "env", "n_seeds", "mean", "std", "ci_low", "ci_high", "stable"):
        assert col in rows[0]
    row = next(r for r in rows if r["arm"] == "grpo_4mb" and r["env"] == "sokoban")
    assert (row["n_seeds"], row["n_failed"], row["mean"], row["ci_low"]) == ("2", "1", "40.0000", "")
    assert [r["env"] for r in rows[:3]] == ["sokoban", "household", "Avg"]
    tex = (report_dir / "table.tex").read_text()
    assert r"50.0 $\pm$ 10.0 [40.0, 60.0] (n=3)" in tex and r"$n<3$" in tex and r"grpo\_4mb" in tex


def test_rerun_is_byte_identical(results_dir, report_dir):
    before = {p.name: p.read_bytes() for p in report_dir.glob("table.*")}
    write_report(results_dir, NAME, figures=False)
    assert {p.name: p.read_bytes() for p in report_dir.glob("table.*")} == before
    assert print_summary_table(results_dir, NAME) == before["table.md"].decode()


def test_mixed_shas_refused(results_dir, tmp_path):
    shutil.copytree(results_dir / "sweeps" / NAME, tmp_path / "sweeps" / NAME, ignore=shutil.ignore_patterns("report"))
    summary = tmp_path / "sweeps" / NAME / "cells" / "gspo-household-s2-report" / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "git_sha": "deadbee"}))
    with pytest.raises(ValueError, match="a1b2c3d, deadbee"):
        write_report(tmp_path, NAME, figures=False)
    assert (write_report(tmp_path, NAME, allow_mixed=True, figures=False) / "table.md").exists()


def test_cli_entry(results_dir, capsys):
    assert main(["name=nope", f"results_dir={results_dir}"]) == 2
    assert main(["nme=x"]) == 2
    assert "valid keys: name, results_dir, allow_mixed, wandb" in capsys.readouterr().err
