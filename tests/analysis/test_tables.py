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
from arena.analysis.tables import render_markdown

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
    # Avg = (50 + 6) / 2 = 28; gspo Avg = (65 + 20) / 2 = 42.5
    assert _cell(cells, "gspo", "Avg")["mean"] == pytest.approx(42.5, rel=1e-12)
    # sampo sokoban: the collapsed seed's last eval counts: [80, 80, 90] -> 250/3; not stable
    assert _cell(cells, "sampo", "sokoban")["mean"] == pytest.approx(250 / 3, rel=1e-12)
    by_arm = arms.set_index("arm")
    # IQM by hand: gspo 42.5 (test_stats); grpo [5, 5, 8, 40, 50, 60] -> mean(5, 8, 40, 50) = 25.75
    assert by_arm.loc["gspo", "iqm"] == 42.5 and by_arm.loc["grpo", "iqm"] == 25.75
    assert by_arm.loc["gspo", "iqm_ci_low"] < 42.5 < by_arm.loc["gspo", "iqm_ci_high"]
    assert by_arm.loc["gspo", "p_improve"] == pytest.approx(17 / 18, rel=1e-15)
    assert by_arm.loc["gspo", "p_ci_low"] <= 17 / 18 <= by_arm.loc["gspo", "p_ci_high"] <= 1.0
    assert math.isnan(by_arm.loc["grpo", "p_improve"])
    assert by_arm.loc["gspo", "stable"] == {"sokoban": "no", "household": "yes"}  # one seed "unresolved"
    assert by_arm.loc["sampo", "stable"]["sokoban"] == "no"  # a collapsed seed
    assert by_arm.loc["gspo", "chosen_hp"] == {"sokoban": {"eps_low": 0.003, "eps_high": 0.004}}


def test_paired_comparison_by_hand(table):
    cells, _ = table
    # Paired vs grpo, per seed s = 0, 1, 2 (points), from synthetic.SCORES:
    #   env        gspo            grpo          d_s = gspo - grpo   mean   95% CI (n=3: [min, max])
    #   sokoban    55, 65, 75      40, 50, 60    15, 15, 15          15     [15, 15]   better
    #   household  10, 20, 30       5,  5,  8     5, 15, 22          14     [5, 22]    better
    #   Avg        (15 + 14) / 2 = 14.5; sokoban's d is constant, so CI = (15 + [5, 22]) / 2 = [10, 18.5]
    expected = {"sokoban": (15.0, 15.0, 15.0), "household": (14.0, 5.0, 22.0), "Avg": (14.5, 10.0, 18.5)}
    for env, (mean, low, high) in expected.items():
        row = _cell(cells, "gspo", env)
        assert (row["diff"], row.diff_ci_low, row.diff_ci_high) == pytest.approx((mean, low, high), rel=1e-12)
        assert (row.diff_n, row.diff_verdict) == (3, "better")
    # grpo_4mb: sokoban seed 2 failed, household seed 1 missing -> only the seeds both finished pair:
    #   sokoban  s0: 30 - 40 = -10, s1: 50 - 50 = 0 -> mean -5 over n=2, no CI, no verdict
    #   household s0: 2 - 5 = -3, s2: 8 - 8 = 0 -> mean -1.5;  Avg (-5 - 1.5) / 2 = -3.25
    row = _cell(cells, "grpo_4mb", "sokoban")
    assert (row["diff"], row.diff_n, row.diff_verdict) == (-5.0, 2, "") and math.isnan(row.diff_ci_low)
    assert _cell(cells, "grpo_4mb", "Avg")["diff"] == pytest.approx(-3.25, rel=1e-12)
    assert math.isnan(_cell(cells, "grpo", "Avg")["diff"])  # the baseline is not compared to itself


def test_start_and_gain_by_hand(table):
    cells, _ = table
    # step-0 eval: sokoban 50, household 5 for every run (synthetic.INITIAL); gain_s = final_s - 50:
    #   grpo sokoban  40, 50, 60 -> -10, 0, 10: mean 0, CI [-10, 10] -> no difference (GRPO did not beat its start)
    #   gspo sokoban  55, 65, 75 ->   5, 15, 25: mean 15, CI [5, 25] -> better
    #   grpo household 5, 5, 8 -> 0, 0, 3: mean 1, CI [0, 3] -> 0 is in the CI: no difference
    row = _cell(cells, "grpo", "sokoban")
    assert (row.start, row.gain, row.gain_ci_low, row.gain_ci_high) == pytest.approx((50.0, 0.0, -10.0, 10.0), abs=1e-12)
    assert row.gain_verdict == "no difference"
    row = _cell(cells, "gspo", "sokoban")
    assert (row.gain, row.gain_ci_low, row.gain_ci_high) == pytest.approx((15.0, 5.0, 25.0), rel=1e-12)
    assert row.gain_verdict == "better"
    row = _cell(cells, "grpo", "household")
    assert (row.gain, row.gain_ci_low, row.gain_ci_high) == pytest.approx((1.0, 0.0, 3.0), abs=1e-12)
    assert row.gain_verdict == "no difference"
    # Avg start (50 + 5) / 2 = 27.5; Avg gain (0 + 1) / 2 = 0.5
    assert (_cell(cells, "grpo", "Avg").start, _cell(cells, "grpo", "Avg").gain) == pytest.approx((27.5, 0.5), rel=1e-12)


def test_failed_and_missing_never_zero(table):
    cells, _ = table
    # grpo_4mb sokoban: seeds 30, 50 and a failed one -> mean 40 over n=2 (not 80/3 with a zero), no CI
    failed = _cell(cells, "grpo_4mb", "sokoban")
    assert (failed.n_seeds, failed.n_failed, failed["mean"]) == (2, 1, 40.0)
    assert math.isnan(failed.ci_low) and failed.stable == "?"
    assert _cell(cells, "grpo_4mb", "household").n_missing == 1


def _without(runs, arm, env):
    gone = runs.copy()
    mask = (gone.arm == arm) & (gone.env == env)
    gone.loc[mask, "status"] = "missing"
    gone.loc[mask, ["final_eval_success", "initial_eval_success"]] = float("nan")
    return gone


def test_missing_env_rule_on_every_column(results_dir, runs):

    cells, arms = build_table(_without(runs, "sampo", "household"), load_manifest(results_dir, NAME), {})
    avg, arm = _cell(cells, "sampo", "Avg"), arms.set_index("arm").loc["sampo"]
    # no finished sampo seed on household: no aggregate over envs anywhere, each naming the env
    for value in (avg["mean"], avg.ci_low, avg.start, avg.gain, avg.gain_ci_low, avg["diff"], avg.diff_ci_low,
                  arm.iqm, arm.iqm_ci_low, arm.p_improve, arm.p_ci_low):
        assert math.isnan(value)
    assert (avg.missing, avg.start_missing, avg.gain_missing, avg.diff_missing, arm.missing, arm.p_missing) == ("household",) * 6
    assert _cell(cells, "sampo", "sokoban")["diff"] == pytest.approx(100 / 3, rel=1e-12)  # per env: still there
    text = render_markdown(cells, arms, name=NAME)
    sampo = [line for line in text.splitlines() if line.startswith("| combined | sampo |")]
    # final: Avg (the household cell reads "— (n=0; 3 missing)"); start and gain: household and
    # Avg of each; paired: household and Avg; per method: IQM and P
    assert [line.count("— (missing household)") for line in sampo] == [1, 4, 2, 2]
    # the baseline missing an env: every comparison over envs is marked, per env too
    cells, arms = build_table(_without(runs, "grpo", "household"), load_manifest(results_dir, NAME), {})
    assert _cell(cells, "gspo", "Avg").diff_missing == "household" and _cell(cells, "gspo", "household").diff_missing == "household"
    assert arms.set_index("arm").loc["gspo", "p_missing"] == "household"
    assert arms.set_index("arm").loc["gspo", "iqm"] == 42.5  # gspo's own aggregates stay


def test_baseline_can_be_changed(results_dir, runs):
    cells, arms = build_table(runs, load_manifest(results_dir, NAME), {}, baseline="gspo")
    # grpo vs gspo: the negated d of test_paired_comparison_by_hand: sokoban -15 [-15, -15] worse
    row = _cell(cells, "grpo", "sokoban")
    assert (row["diff"], row.diff_ci_low, row.diff_ci_high) == pytest.approx((-15.0, -15.0, -15.0), rel=1e-12)
    assert (row.diff_verdict, row.baseline) == ("worse", "gspo")
    assert "## Paired change vs gspo" in render_markdown(cells, arms, name=NAME)


def test_markdown_layout_is_pinned_by_golden(report_dir):
    text = (report_dir / "table.md").read_text()
    if os.environ.get("ARENA_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_csv_and_tex(report_dir):
    rows = list(csv.DictReader(io.StringIO((report_dir / "table.csv").read_text())))
    for col in ("arm", "method", "env", "n_seeds", "mean", "std", "ci_low", "ci_high", "stable", "start", "gain",
                "diff", "diff_verdict", "iqm_ci_low", "p_ci_high", "baseline"):
        assert col in rows[0]
    row = next(r for r in rows if r["arm"] == "grpo_4mb" and r["env"] == "sokoban")
    assert (row["n_seeds"], row["n_failed"], row["mean"], row["ci_low"]) == ("2", "1", "40.0000", "")
    assert [r["env"] for r in rows[:3]] == ["sokoban", "household", "Avg"]
    tex = (report_dir / "table.tex").read_text()
    assert r"50.0 $\pm$ 10.0 [40.0, 60.0] (n=3)" in tex and r"$n<3$" in tex and r"grpo\_4mb" in tex


def test_table_rerun_is_byte_identical(results_dir, report_dir):
    before = {p.name: p.read_bytes() for p in report_dir.glob("table.*")}
    write_report(results_dir, NAME, figures=False)
    assert {p.name: p.read_bytes() for p in report_dir.glob("table.*")} == before
    assert print_summary_table(results_dir, NAME) == before["table.md"].decode()


@pytest.mark.slow  # wall-time budget: 20 s on one loaded core (renders the 5 figures twice, PNG + PDF)
def test_arena_report_rerun_is_byte_identical(results_dir, report_dir, capsys):
    # `arena report` again over the same results: every file (tables and figures) byte for byte
    before = {p.relative_to(report_dir): p.read_bytes() for p in sorted(report_dir.rglob("*")) if p.is_file()}
    assert len(before) > 10
    assert main([f"name={NAME}", f"results_dir={results_dir}"]) == 0
    after = {p.relative_to(report_dir): p.read_bytes() for p in sorted(report_dir.rglob("*")) if p.is_file()}
    assert after == before
    assert print_summary_table(results_dir, NAME) == before[Path("table.md")].decode()


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
    assert "valid keys: name, results_dir, baseline, allow_mixed, wandb" in capsys.readouterr().err
    assert main([f"name={NAME}", f"results_dir={results_dir}", "baseline=ppo"]) == 2
    assert "baseline='ppo' is not an arm of sweep 'synthetic'; valid values: grpo, gspo, grpo_4mb, sampo" in capsys.readouterr().err
