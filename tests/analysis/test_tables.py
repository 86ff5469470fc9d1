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


# df = 2 (3 seeds) has closed forms: two-sided p = 1 - sqrt(t^2 / (2 + t^2)) and
# t_{1-a/2, 2} = c sqrt(2 / (1 - c^2)) with c = 1 - a:  a = 0.05: 4.30265;  a = 0.0125: 8.86017.
def _p_df2(t_squared: float) -> float:
    return 1 - math.sqrt(t_squared / (2 + t_squared))


def test_paired_comparison_by_hand(table):
    cells, _ = table
    # Paired vs grpo, per seed s = 0, 1, 2 (points), from synthetic.SCORES:
    #   env        gspo            grpo          d_s = gspo - grpo
    #   sokoban    55, 65, 75      40, 50, 60    15, 15, 15   all tied: sign-flip p = 2^(1-3) = 0.25, no interval
    #   household  10, 20, 30       5,  5,  8     5, 15, 22   mean 14
    #   Avg        d_s = (15 + 5)/2, (15 + 15)/2, (15 + 22)/2 = 10, 15, 18.5: mean 14.5,
    #              sd^2 = (4.5^2 + 0.5^2 + 4^2) / 2 = 18.25, SE^2 = 18.25 / 3, t^2 = 14.5^2 / SE^2 = 34.562
    #              p = 1 - sqrt(34.562 / 36.562) = 0.02774
    #   sampo Avg  sokoban 40, 30, 30; household 45, 55, 62 -> d_s = 42.5, 42.5, 46: mean 43.667,
    #              sd^2 = 8.1667 / 2 = 4.0833, t^2 = 43.667^2 / (4.0833 / 3) = 1400.9, p = 0.000713
    #   The Avg family is {gspo, sampo} (grpo_4mb has one seed paired in both envs: untested), k = 2.
    #   Holm: sampo 2 * 0.000713 = 0.00143; gspo max(0.00143, 1 * 0.02774) = 0.02774: both better.
    #   gspo was rejected at Holm's second step, level 0.05: 14.5 -/+ 4.30265 * sqrt(18.25 / 3)
    #   = 14.5 -/+ 4.30265 * 2.46644 = 14.5 -/+ 10.6122 = [3.8878, 25.1122]
    t2_gspo = 14.5 ** 2 / (18.25 / 3)
    row = _cell(cells, "gspo", "Avg")
    assert (row["diff"], row.diff_n, row.diff_verdict) == (pytest.approx(14.5, rel=1e-12), 3, "better")
    assert row.diff_p == pytest.approx(_p_df2(t2_gspo), rel=1e-9)
    assert (row.diff_ci_low, row.diff_ci_high) == pytest.approx((3.8878, 25.1122), abs=1e-4)
    sampo = _cell(cells, "sampo", "Avg")
    d = [42.5, 42.5, 46.0]
    t2_sampo = (sum(d) / 3) ** 2 / (((42.5 - 131 / 3) ** 2 * 2 + (46 - 131 / 3) ** 2) / 2 / 3)
    assert (sampo.diff_verdict, sampo.diff_p) == ("better", pytest.approx(2 * _p_df2(t2_sampo), rel=1e-9))
    row = _cell(cells, "gspo", "sokoban")
    assert (row["diff"], row.diff_p, row.diff_verdict, row.diff_ci_high) == (
        pytest.approx(15.0, rel=1e-12), 0.5, "underpowered", math.inf)
    # (the sokoban family: sampo 40, 30, 30 has t^2 = 100, p = 0.00985, first; gspo second: 2 * 0.25 = 0.5)
    # grpo_4mb: sokoban seed 2 failed, household seed 1 missing -> only the seeds both finished pair:
    #   sokoban  s0: 30 - 40 = -10, s1: 50 - 50 = 0 -> mean -5 over n=2
    #   household s0: 2 - 5 = -3, s2: 8 - 8 = 0;  Avg: only s0 is paired in both: (-10 - 3) / 2 = -6.5, n=1
    row = _cell(cells, "grpo_4mb", "sokoban")
    assert (row["diff"], row.diff_n, row.diff_verdict) == (-5.0, 2, "underpowered")
    row = _cell(cells, "grpo_4mb", "Avg")
    assert (row["diff"], row.diff_n, row.diff_verdict, row.diff_p) == (-6.5, 1, "underpowered", 1.0)
    assert math.isnan(row.diff_ci_low) and math.isnan(row.diff_mde) and row.diff_seeds_needed == 0
    assert math.isnan(_cell(cells, "grpo", "Avg")["diff"])  # the baseline is not compared to itself


def test_start_and_gain_by_hand(table):
    cells, _ = table
    # step-0 eval: sokoban 50, household 5 for every run (synthetic.INITIAL); gain_s = final_s - 50.
    # The sokoban gain family is all 4 arms (each has >= 2 pairs):
    #   grpo      40, 50, 60 -> -10, 0, 10: mean 0, p = 1
    #   gspo      55, 65, 75 ->   5, 15, 25: mean 15, SE 10/sqrt(3), t^2 = 6.75, p = 1 - sqrt(6.75 / 8.75) = 0.12169
    #   sampo     80, 80, 90 ->  30, 30, 40: mean 33.33, sd 5.7735, SE 3.3333, t^2 = 100, p = 1 - sqrt(100 / 102) = 0.009852
    #   grpo_4mb  30, 50     -> -20, 0: t = -10 / 10 = -1 at df 1, p = 1 - 2 arctan(1) / pi = 0.5
    # Holm (k = 4): sampo 4 * 0.009852 = 0.0394 < 0.05: better, its interval at level 0.05/4:
    #   33.3333 -/+ 8.86017 * 3.33333 = 33.3333 -/+ 29.5340 = [3.7994, 62.8673]; gspo max(0.0394, 3 * 0.12169) = 0.3651: not rejected,
    #   grpo not rejected: 0 -/+ 8.860166 * 5.773503 = -/+ 51.1544 (Bonferroni 0.05/4), not inside -/+5: underpowered
    sampo = _cell(cells, "sampo", "sokoban")
    assert (sampo.gain_verdict, sampo.gain_p) == ("better", pytest.approx(4 * _p_df2(100.0), rel=1e-9))
    assert (sampo.gain_ci_low, sampo.gain_ci_high) == pytest.approx((3.7994, 62.8673), abs=1e-4)
    gspo = _cell(cells, "gspo", "sokoban")
    assert (gspo.gain, gspo.gain_p, gspo.gain_verdict) == (pytest.approx(15.0), pytest.approx(3 * _p_df2(6.75)), "underpowered")
    grpo = _cell(cells, "grpo", "sokoban")
    assert (grpo.start, grpo.gain, grpo.gain_ci_low, grpo.gain_ci_high) == pytest.approx((50.0, 0.0, -51.1544, 51.1544), abs=1e-4)
    assert grpo.gain_verdict == "underpowered" and grpo.gain_seeds_needed > 3
    # Avg start (50 + 5) / 2 = 27.5; Avg gain: d_s = (-10 + 0)/2, (0 + 0)/2, (10 + 3)/2 = -5, 0, 6.5 -> mean 0.5
    assert (_cell(cells, "grpo", "Avg").start, _cell(cells, "grpo", "Avg").gain) == pytest.approx((27.5, 0.5), rel=1e-12)


def test_min_effect_decides_no_difference(results_dir, runs):
    # grpo's Avg gain: d = -5, 0, 6.5, mean 0.5, sd^2 = (5.5^2 + 0.5^2 + 6^2) / 2 = 33.25; the Avg gain
    # family has k = 3 arms, so its interval is at 0.05/3: t_{1-0.05/6, 2} = 7.6489 (c = 0.98333),
    # 0.5 -/+ 7.6489 sqrt(33.25 / 3) = 0.5 -/+ 25.465 = [-24.965, 25.965]: inside (-26, 26) but not (-25, 25)
    manifest = load_manifest(results_dir, NAME)
    row = _cell(build_table(runs, manifest, {}, min_effect=26.0)[0], "grpo", "Avg")
    assert (row.gain_ci_low, row.gain_ci_high) == pytest.approx((-24.965, 25.965), abs=1e-3)
    assert row.gain_verdict == "no difference"
    assert _cell(build_table(runs, manifest, {}, min_effect=25.0)[0], "grpo", "Avg").gain_verdict == "underpowered"


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
    # grpo vs gspo: the negated d of test_paired_comparison_by_hand: Avg -14.5; the family is
    # {grpo, sampo} again (sampo - gspo Avg: 32.5, 27.5, 27.5, p = 0.0032, Holm 0.0065), so grpo is
    # rejected at Holm's second step with p = 0.02774: worse, [-25.1122, -3.8878]
    row = _cell(cells, "grpo", "Avg")
    assert (row["diff"], row.diff_ci_low, row.diff_ci_high) == pytest.approx((-14.5, -25.1122, -3.8878), abs=1e-4)
    assert (row.diff_verdict, row.baseline) == ("worse", "gspo")
    assert "## Paired change vs gspo" in render_markdown(cells, arms, name=NAME)


def test_markdown_layout_is_pinned_by_golden(report_dir):
    text = (report_dir / "table.md").read_text()
    if os.environ.get("ARENA_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_confirmatory_rows_by_hand(results_dir, runs):
    # The synthetic grid's dimension ("clipping") names no finding in findings.yaml, so its one
    # confirmatory family is every arm against grpo on the final eval, on the seeds paired in every
    # env: gspo d_s = 10, 15, 18.5 and sampo 42.5, 42.5, 46 (test_paired_comparison_by_hand);
    # grpo_4mb has one seed paired in both envs (seed 0: (30 - 40 + 2 - 5) / 2 = -6.5): untested, k = 2.
    # Holm: sampo 2 * 0.000713 -> better; gspo p = 0.02774 -> better, interval [3.8878, 25.1122].
    from arena.analysis.report import confirmatory_section

    section = confirmatory_section(runs, load_manifest(results_dir, NAME), "grpo", min_effect=5.0)
    rows = section.rows.set_index("arm")
    assert list(rows.index) == ["gspo", "grpo_4mb", "sampo"] and set(rows["finding"]) == {"vs grpo"}
    t2_gspo = 14.5 ** 2 / (18.25 / 3)
    # sampo's sokoban seed 2 collapsed (synthetic.STATUS): a collapse regime. gspo's t-test says better,
    # but none of gspo's or grpo's 6 runs on the paired seeds collapsed: not confirmed (collapse_rule);
    # sampo's own runs hold the collapse: its better stands
    assert (rows.loc["gspo", "mean"], rows.loc["gspo", "verdict"]) == (pytest.approx(14.5), "better (no collapse seen)")
    assert (rows.loc["gspo", "collapsed"], bool(rows.loc["gspo", "confirmed"])) == ("0/6 / 0/6", False)
    assert (rows.loc["sampo", "collapsed"], bool(rows.loc["sampo", "confirmed"])) == ("1/6 / 0/6", True)
    assert rows.loc["gspo", "p_adjusted"] == pytest.approx(_p_df2(t2_gspo), rel=1e-9)
    assert (rows.loc["gspo", "low"], rows.loc["gspo", "high"]) == pytest.approx((3.8878, 25.1122), abs=1e-4)
    assert (rows.loc["grpo_4mb", "n"], rows.loc["grpo_4mb", "per_seed"], rows.loc["grpo_4mb", "verdict"]) == (
        1, "-6.5", "underpowered")
    assert rows.loc["sampo", "verdict"] == "better" and rows.loc["sampo", "measure"] == "final"
    assert "exploratory" in section.notes[0] and "fixed in the repository before any run" in section.notes[0]


def test_csv_and_tex(report_dir):
    rows = list(csv.DictReader(io.StringIO((report_dir / "table.csv").read_text())))
    for col in ("arm", "method", "env", "n_seeds", "mean", "std", "ci_low", "ci_high", "stable", "start", "gain",
                "diff", "diff_p", "diff_mde", "gain_mde", "iqm_ci_low", "p_ci_high", "baseline"):
        assert col in rows[0]
    # the exploratory comparisons carry no verdict word (the confirmatory section alone does)
    assert not [col for col in rows[0] if col.endswith(("_verdict", "_seeds_needed"))]
    confirmed = list(csv.DictReader(io.StringIO((report_dir / "confirmatory.csv").read_text())))
    assert [(r["finding"], r["comparison"], r["measure"], r["verdict"]) for r in confirmed] == [
        ("vs grpo", "GSPO - GRPO", "final", "better (no collapse seen)"),
        ("vs grpo", "GRPO_4MB - GRPO", "final", "underpowered"),
        ("vs grpo", "SAMPO - GRPO", "final", "better")]
    row = next(r for r in rows if r["arm"] == "grpo_4mb" and r["env"] == "sokoban")
    assert (row["n_seeds"], row["n_failed"], row["mean"], row["ci_low"]) == ("2", "1", "40.0000", "")
    assert [r["env"] for r in rows[:3]] == ["sokoban", "household", "Avg"]
    tex = (report_dir / "table.tex").read_text()
    assert r"50.0 $\pm$ 10.0 [40.0, 60.0] (n=3)" in tex and r"$n<3$" in tex and r"grpo\_4mb" in tex
    # "<" is another glyph in LaTeX text: it goes to math (grpo_4mb's Avg gain row); the confirmatory rows first
    assert r"$n<2$ (n=1)" in tex and "~" not in tex
    assert tex.index("GSPO - GRPO") < tex.index(r"50.0 $\pm$ 10.0")


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


def test_mixed_code_under_one_sha_refused(results_dir, tmp_path):
    """Every run at the one commit, but two jobs ran other package files (the checkout edited
    mid-sweep): their own code records (code_hash) differ, so the report refuses them."""
    shutil.copytree(results_dir / "sweeps" / NAME, tmp_path / "sweeps" / NAME, ignore=shutil.ignore_patterns("report"))
    cells = sorted((tmp_path / "sweeps" / NAME / "cells").glob("*/summary.json"))
    for i, summary in enumerate(cells):
        code_hash = "e" * 64 if i < 2 else "c" * 64  # two runs on edited files, the rest on the commit's
        summary.write_text(json.dumps({**json.loads(summary.read_text()), "code_hash": code_hash}))
    with pytest.raises(ValueError, match="mixed code: .*cccccccccccc \\(\\d+ runs\\), "
                                         "eeeeeeeeeeee \\(2 runs\\)\\), under git SHA a1b2c3d"):
        write_report(tmp_path, NAME, figures=False)
    assert (write_report(tmp_path, NAME, allow_mixed=True, figures=False) / "table.md").exists()


def test_cli_entry(results_dir, capsys):
    assert main(["name=nope", f"results_dir={results_dir}"]) == 2
    assert main(["nme=x"]) == 2
    assert "valid keys: name, results_dir, baseline, allow_mixed, wandb" in capsys.readouterr().err
    assert main([f"name={NAME}", f"results_dir={results_dir}", "baseline=ppo"]) == 2
    assert "baseline='ppo' is not an arm of sweep 'synthetic'; valid values: grpo, gspo, grpo_4mb, sampo" in capsys.readouterr().err
    for bad in ("0", "-1", "nan", "inf", "five", "101"):
        assert main([f"name={NAME}", f"results_dir={results_dir}", f"min_effect={bad}"]) == 2
        assert f"min_effect={bad!r}: expected a number of points in (0, 100]" in capsys.readouterr().err


def test_a_closed_pipe_ends_arena_report_quietly(results_dir, tmp_path):
    """`arena report ... | true` (the reader gone at once, as `| head -1` after its line): exit 0
    and nothing on stderr, not a BrokenPipeError traceback."""
    from tests.test_cli import _piped_into_true

    copy = tmp_path / "results"
    shutil.copytree(results_dir / "sweeps", copy / "sweeps", ignore=shutil.ignore_patterns("report"))
    status, err = _piped_into_true(["report", f"name={NAME}", f"results_dir={copy}"], tmp_path)
    assert (status, err) == (0, ""), err
    assert (copy / "sweeps" / NAME / "report" / "table.md").exists()  # the report was written whole


def test_under_baseline_x_only_x_is_labelled_the_baseline(results_dir):
    """baseline=gspo: GSPO's rows read "clipping (baseline)"; GRPO's preset group "baseline" reads
    "default baseline", so no row calls GRPO the baseline of a table compared against GSPO."""
    text = print_summary_table(results_dir, NAME, baseline="gspo")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert any(line.startswith("| clipping (baseline) | gspo |") for line in rows)
    assert any(line.startswith("| default baseline | grpo |") for line in rows)
    assert not any(line.startswith("| baseline |") for line in rows)
    # the default baseline (GRPO): its group is "baseline" as before
    assert any(line.startswith("| baseline | grpo |") for line in print_summary_table(results_dir, NAME).splitlines())


def test_with_fewer_than_3_seeds_everywhere_the_note_says_no_cell_has_a_ci(results_dir, tmp_path):
    shutil.copytree(results_dir / "sweeps" / NAME, tmp_path / "sweeps" / NAME, ignore=shutil.ignore_patterns("report"))
    for summary in (tmp_path / "sweeps" / NAME / "cells").glob("*-s2-report/summary.json"):
        summary.unlink()  # seed 2 missing everywhere: 2 seeds or fewer per cell
    text = print_summary_table(tmp_path, NAME, allow_mixed=True)
    assert "No cell has 3 seeds, so none has a CI." in text and "rests on no seeds" not in text
