"""`arena findings` (arena/analysis/findings.py; docs/testbed.md, "Findings table"): the row logic on small
hand-made run tables with hand-derived expectations, the results-dir path on the synthetic sweep, and the
committed findings table against the command's output on the committed run tables."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from arena.analysis import claims as C
from arena.analysis import findings as F
from arena.analysis import findings_render as T
from arena.analysis import paper_compare as P
from arena.analysis import run_tables as R
from arena.analysis import verdicts
from arena.cli import main

from .synthetic import NAME, SHA, claims_on_final

ROOT = Path(__file__).resolve().parents[2]
RUN_TABLES = ROOT / "docs" / "findings"
TESTBED = ROOT / "docs" / "testbed.md"
BEGIN, END = "<!-- generated: findings -->", "<!-- end generated: findings -->"


def p_two_sided_df2(d):
    """Two-sided paired-t p-value for 3 differences, by the closed form of Student's t with 2 degrees of
    freedom: P(|T| > t) = 1 - t / sqrt(t^2 + 2), t = mean / (sd / sqrt(3))."""
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    t = abs(mean) / (sd / math.sqrt(3))
    return 1 - t / math.sqrt(t * t + 2)


def runs_table(rows, sweep="hand"):
    """rows: (arm, seed, env, start %, final %, stable, status) -> a normalised runs table."""
    frame = pd.DataFrame([{"sweep": sweep, "arm": a, "seed": s, "env": e, "initial_eval_success": p0 / 100,
                           "final_eval_success": p1 / 100, "stable": st, "status": status, "budget": "stress",
                           "git_sha": "", "recorded_in": "abc1234"}
                          for a, s, e, p0, p1, st, status in rows])
    return R.normalise_runs(frame)


def pair(arm, base, diffs, start=30.0, base_final=40.0):
    """Runs of `arm` and `base` on seeds 0.. whose final differences are `diffs` (points)."""
    return ([(base, s, "sokoban", start, base_final, True, "done") for s in range(len(diffs))]
            + [(arm, s, "sokoban", start, base_final + d, True, "done") for s, d in enumerate(diffs)])


def test_paired_differences_average_the_envs_of_a_seed_and_drop_unpaired_seeds():
    # seed 0: sokoban 50-40 = +10, household 20-10 = +10 -> +10; seed 1: 45-40 = +5, 30-10 = +20 -> +12.5;
    # seed 2: only the arm has a run -> not paired, left out
    runs = runs_table([("grpo", 0, "sokoban", 30, 40, True, "done"), ("grpo", 0, "household", 5, 10, True, "done"),
                       ("grpo", 1, "sokoban", 30, 40, True, "done"), ("grpo", 1, "household", 5, 10, True, "done"),
                       ("gspo", 0, "sokoban", 30, 50, True, "done"), ("gspo", 0, "household", 5, 20, True, "done"),
                       ("gspo", 1, "sokoban", 30, 45, True, "done"), ("gspo", 1, "household", 5, 30, True, "done"),
                       ("gspo", 2, "sokoban", 30, 60, True, "done")])
    d = F.paired_differences(runs, "gspo", "grpo")
    assert list(d.index) == [0, 1]
    assert d.tolist() == pytest.approx([10.0, 12.5])
    # gains of gspo: seed 0 (20 + 15) / 2 = 17.5, seed 1 (15 + 25) / 2 = 20, seed 2 (sokoban only) 30
    assert F.gains(runs, "gspo").tolist() == pytest.approx([17.5, 20.0, 30.0])


def test_one_finding_is_one_holm_family_within_a_sweep():
    # F2: CISPO_SM - CISPO = 10, 12, 14 and SAPO_SM - SAPO = 2, 4, 12 (seeds 0-2).
    # p (closed form, df 2): 10/12/14: mean 12, sd 2, t 10.39, p 0.0092; 2/4/12: mean 6, sd 5.29, t 1.96, p 0.189.
    # Holm over the 2: smaller p x 2 = 0.018 < 0.05 -> "better"; the other max(0.189, 0.018) = 0.189 -> not
    # rejected, and its interval (t 4.30 x 3.06 at least) is far wider than +-5 -> "underpowered".
    runs = runs_table(pair("cispo_sm", "cispo", [10, 12, 14]) + pair("sapo_sm", "sapo", [2, 4, 12]))
    rows = F.finding_rows(runs, claims_on_final()).set_index("comparison")
    cispo, sapo = rows.loc["CISPO_SM - CISPO"], rows.loc["SAPO_SM - SAPO"]
    p1, p2 = p_two_sided_df2([10, 12, 14]), p_two_sided_df2([2, 4, 12])
    assert (cispo["p"], sapo["p"]) == (pytest.approx(p1, rel=1e-6), pytest.approx(p2, rel=1e-6))
    assert (cispo["p_adjusted"], sapo["p_adjusted"]) == (pytest.approx(2 * p1, rel=1e-6), pytest.approx(p2, rel=1e-6))
    assert (cispo["verdict"], sapo["verdict"]) == (verdicts.BETTER, verdicts.UNDERPOWERED)
    # the paper's numbers: CISPO_SM - CISPO = 78.88 - 54.12 = +24.76, SAPO_SM - SAPO = 76.92 - 25.16 = +51.76.
    # The intervals are at most mean +- t(0.9875, df 2) = 6.21 x sd / sqrt 3 (Holm's widest level for 2):
    # [12 - 7.2, 12 + 7.2] = [4.8, 19.2] and [6 - 19.0, 6 + 19.0] = [-13.0, 25.0]: both numbers lie outside
    assert (cispo["vs_paper"], sapo["vs_paper"]) == ("agrees; paper's +24.8 outside the interval",
                                                     "unresolved; paper's +51.8 outside the interval")
    assert (cispo["paper_points"], cispo["paper_in_interval"]) == (pytest.approx(24.76), "no")
    assert cispo["per_seed"] == "+10.0 / +12.0 / +14.0" and cispo["seeds"] == "0-2" and cispo["mean"] == pytest.approx(12)
    assert (cispo["sweep"], cispo["budget"], cispo["commit"]) == ("hand", "stress", "recorded in abc1234")


def test_a_comparison_no_sweep_holds_names_the_command_that_makes_it():
    runs = runs_table(pair("gspo", "grpo", [1, 2, 3]))
    rows = F.finding_rows(runs, claims_on_final()).set_index("comparison")
    assert rows.loc["SAMPO - GRPO", "verdict"] == "no sweep"
    assert rows.loc["SAMPO - GRPO", "command"] == "arena sweep dimension=sampo"
    assert rows.loc["GRPO_ST - GRPO", "command"] == "arena sweep dimension=aggregation"
    assert rows.loc["GSPO - GRPO", "sweep"] == "hand"
    # every comparison of findings.yaml has a row: 10 comparisons (F1 2, F2 2, GSPO, F3, F4 2, AGG, SAMPO), one sweep
    assert len(rows) == len(claims_on_final()) == 10


def test_opposite_sign_and_stability_columns():
    # GSPO - GRPO = -10, -11, -12: p = 1 - t/sqrt(t^2+2) with t = 11 / (1/sqrt 3) = 19.05 -> 0.0027 -> "worse";
    # the paper reports GSPO above GRPO (+13.3%), so the testbed's verdict is "opposite".
    rows = pair("gspo", "grpo", [-10, -11, -12])
    rows[-1] = ("gspo", 2, "sokoban", 30.0, 28.0, False, "collapsed")  # seed 2: 40 - 12, collapsed, not stable
    runs = runs_table(rows)
    row = F.finding_rows(runs, claims_on_final()).set_index("comparison").loc["GSPO - GRPO"]
    assert row["verdict"] == verdicts.WORSE and row["vs_paper"] == "opposite"
    assert row["stable"] == "2/3 (1 collapsed) / 3/3"
    # every run starts at 30; GRPO ends at 40 (none below its start), GSPO at 30, 29, 28: seeds 1, 2 fell
    assert row["fell"] == "2/3 / 0/3"


def test_text_helpers():
    assert T.seeds_text([2, 0, 1]) == "0-2" and T.seeds_text([0, 1]) == "0, 1" and T.seeds_text([0, 1, 3]) == "0, 1, 3"
    assert T.display("gigpo_ds") == "GiGPO_DS" and T.display("cispo_sm") == "CISPO_SM"
    base = pd.DataFrame({"git_sha": ["", ""], "recorded_in": ["", ""]})
    assert T.commit_text(base) == "not recorded"
    assert T.commit_text(base.assign(recorded_in=["3afbae0", "3afbae0"])) == "recorded in 3afbae0"
    assert T.commit_text(base.assign(git_sha=["a1b2c3d4e5", "a1b2c3d4e5"], recorded_in="x")) == "a1b2c3d"
    assert P.agreement(verdicts.BETTER, 1) == "agrees" and P.agreement(verdicts.BETTER, -1) == "opposite"
    assert P.agreement(verdicts.NO_DIFFERENCE, 1) == "not found"
    assert P.agreement(verdicts.UNDERPOWERED, 1) == "unresolved" and P.agreement(verdicts.WORSE, None) == "-"


def test_results_dir_path_on_the_synthetic_sweep(results_dir):
    # tests/analysis/synthetic.py: GSPO - GRPO per env: sokoban 55-40, 65-50, 75-60 = +15 each; household 10-5,
    # 20-5, 30-8 = +5, +15, +22 -> d = +10, +15, +18.5 (mean over the 2 envs); SAMPO - GRPO: sokoban +40, +30,
    # +30, household +45, +55, +62 -> +42.5, +42.5, +46.0. Both: p from the df-2 closed form, a family of one.
    runs = R.read_results_dir(results_dir)
    rows = F.finding_rows(runs, claims_on_final()).set_index("comparison")
    gspo, sampo = rows.loc["GSPO - GRPO"], rows.loc["SAMPO - GRPO"]
    assert gspo["per_seed"] == "+10.0 / +15.0 / +18.5" and sampo["per_seed"] == "+42.5 / +42.5 / +46.0"
    assert gspo["p"] == pytest.approx(p_two_sided_df2([10, 15, 18.5]), rel=1e-6)
    assert sampo["p"] == pytest.approx(p_two_sided_df2([42.5, 42.5, 46.0]), rel=1e-6)
    assert (gspo["sweep"], gspo["commit"], sampo["verdict"], sampo["vs_paper"]) == (NAME, SHA, "better", "agrees")
    assert rows.loc["CISPO - GRPO", "command"] == "arena sweep dimension=is_clipping"


def test_bad_input_exits_2(capsys, tmp_path):
    assert main(["findings", "csv=docs/findings", "results_dir=results"]) == 2
    assert main(["findings", "colour=red"]) == 2
    assert main(["findings", "min_effect=-1", f"csv={RUN_TABLES}"]) == 2
    assert main(["findings", f"results_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    # an unknown key: the one message of every verb that takes its own keys only (arena.config.verb_grammar)
    assert "arena findings: give results_dir=" in err and "unknown key 'colour'; valid keys: results_dir, csv, out, " \
        "min_effect" in err


def test_committed_run_tables_hold_exact_counts_and_their_source():
    """Every transcribed success is k / n_eval for a whole k, and names a section of a doc: a heading of
    docs/testbed.md or the title of a run-log file under docs/log/ (where the transcribed tables are)."""
    runs = R.read_run_tables(RUN_TABLES)
    for col in ("final_eval_success", "initial_eval_success"):
        k = runs[col] * runs["n_eval"]
        assert ((k - k.round()).abs() < 1e-9).all(), col
    for source in set(runs["source"]):
        doc, section = re.match(r"(docs/[\w/.-]+\.md), ([^(]+?)(?: \(|$)", source).groups()
        headings = {line.lstrip("#").strip() for line in (ROOT / doc).read_text().splitlines() if line.startswith("#")}
        assert any(h.startswith(section) for h in headings), source


def test_committed_findings_table_is_the_command_output(capsys, tmp_path):
    """docs/findings/findings.md and .csv, and the table in docs/testbed.md, are exactly what
    `arena findings csv=docs/findings out=docs/findings` makes from the committed run tables."""
    assert main(["findings", f"csv={RUN_TABLES}", f"out={tmp_path}"]) == 0
    made_md, made_csv = (tmp_path / "findings.md").read_text(), (tmp_path / "findings.csv").read_text()
    assert capsys.readouterr().out.startswith(made_md)
    assert (RUN_TABLES / "findings.md").read_text() == made_md
    assert (RUN_TABLES / "findings.csv").read_text() == made_csv
    doc = TESTBED.read_text()
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    assert doc.split(BEGIN)[1].split(END)[0].strip("\n") == made_md.strip("\n")


def test_a_one_seed_comparison_stays_out_of_the_holm_family():
    # F1 with CISPO - GRPO on seeds 0-2 (-10, -12, -14) and SAPO - GRPO on seed 0 only: the one-seed
    # comparison has no spread (never tested: p = 1, underpowered), so the family is CISPO's alone and its
    # p_adjusted is its raw p (closed form, df 2: t = 12 / (2 / sqrt 3) = 10.39, p = 0.0092).
    # (every run stable: no collapse regime, so the t-test's verdicts stand; test_collapse_rule.py has one)
    rows = pair("cispo", "grpo", [-10, -12, -14]) + [("sapo", 0, "sokoban", 30.0, 41.0, True, "done")]
    found = F.finding_rows(runs_table(rows), claims_on_final()).set_index("comparison")
    cispo, sapo = found.loc["CISPO - GRPO"], found.loc["SAPO - GRPO"]
    assert cispo["p_adjusted"] == pytest.approx(p_two_sided_df2([-10, -12, -14]), rel=1e-6) == pytest.approx(cispo["p"])
    assert (cispo["verdict"], sapo["verdict"], sapo["n"], sapo["per_seed"]) == ("worse", "underpowered", 1, "+1.0")


def test_readme_findings_are_verdicts_of_the_committed_findings_table():
    """Each claim of the README's "What it found" (a block scripts/docs_numbers.py writes) is a row of
    docs/findings/findings.csv with that comparison, sweep and verdict: "better"/"worse"/"no difference"
    only where the committed table's verdict says so."""
    table = pd.read_csv(RUN_TABLES / "findings.csv", dtype=str)
    rows = {(r.comparison, r.sweep, r.verdict) for r in table.itertuples() if r.kind == "finding"}
    block = (ROOT / "README.md").read_text().split("<!-- generated: found -->")[1].split("<!-- end generated: found -->")[0]
    claims = re.findall(r"^  - (.+?)(?: on `\w+`)? [+-][\d.]+ \[.*?\] points, \*\*(.+?)\*\* \(.*?`(.+?)`", block, re.M)
    assert len(claims) >= 2
    assert [c for c in claims if (c[0], c[2], c[1]) not in rows] == []


def test_vs_paper_says_whether_the_paper_s_number_lies_in_the_interval():
    # F1: CISPO - GRPO = -10, -12, -14 on seeds 0-2, alone in its family (SAPO has no runs): mean -12,
    # sd 2, interval -12 +- t(0.975, df 2) = 4.303 x 2 / sqrt 3 = -12 +- 4.97 = [-16.97, -7.03]. The paper:
    # 34.03 - 46.16 = -12.13, inside. GSPO - GRPO: the paper gives a relative change (no points):
    # the direction only. F4's GRPO_DS - GRPO: no direction stated ("-").
    rows = pair("cispo", "grpo", [-10, -12, -14]) + pair("gspo", "grpo", [3, 5, 7])
    found = F.finding_rows(runs_table(rows), claims_on_final()).set_index("comparison")
    cispo, gspo = found.loc["CISPO - GRPO"], found.loc["GSPO - GRPO"]
    assert (cispo["low"], cispo["high"]) == (pytest.approx(-16.968, abs=1e-3), pytest.approx(-7.032, abs=1e-3))
    assert cispo["vs_paper"] == "agrees; paper's -12.1 inside the interval" and cispo["paper_in_interval"] == "yes"
    assert gspo["vs_paper"] == "agrees" and pd.isna(gspo["paper_points"]) and gspo["paper_in_interval"] == ""
    assert P.paper_points("no direction stated") is None and P.paper_points("49.71 vs 48.08 (average)") == \
        pytest.approx(1.63)


def test_smoke_data_prints_no_infinite_interval():
    # two seeds with equal differences (+1, +1): the sign-flip p = 2^(1-2) = 0.5 never reaches alpha, so the
    # interval is unbounded; the table says so instead of printing [-inf, +inf]
    found = F.finding_rows(runs_table(pair("gspo", "grpo", [1, 1])), claims_on_final())
    row = found.set_index("comparison").loc["GSPO - GRPO"]
    assert math.isinf(row["low"]) and math.isinf(row["high"])
    text = T.render_markdown(runs_table(pair("gspo", "grpo", [1, 1])), found, F.gain_rows(runs_table(pair("gspo", "grpo", [1, 1]))))
    assert "inf" not in text and "+1.0 [no bound at n=2]" in text


def _write_table(path, rows):
    header = "sweep,arm,env,seed,status,stable,final_eval_success,initial_eval_success,budget\n"
    path.write_text(header + "".join(line + "\n" for line in rows))
    return path


GOOD = ["s,grpo,sokoban,0,done,true,0.5,0.3,stress", "s,gspo,sokoban,0,done,true,0.6,0.3,stress"]


@pytest.mark.parametrize("bad_row, message", [
    ("s,gspo,sokoban,1,done,true,1.5,0.3,stress", "line 4: final_eval_success=1.5; valid: empty or a fraction in [0, 1]"),
    ("s,gspo,sokoban,1,done,true,0.5,-0.1,stress", "line 4: initial_eval_success=-0.1"),
    ("s,gspo,sokoban,1.5,done,true,0.5,0.3,stress", "line 4: seed=1.5; valid: an integer"),
    ("s,gspo,sokoban,x,done,true,0.5,0.3,stress", "line 4: seed='x'; valid: an integer"),
    ("s,gspo,sokoban,1,failed,,0.9,0.3,stress", "line 4: status=failed with final_eval_success=0.9"),
    ("s,gspo,sokoban,1,finished,true,0.9,0.3,stress", "line 4: status='finished'; valid: done, collapsed"),
    ("s,gspo,sokoban,0,done,true,0.7,0.3,stress", "lines 3, 4: (sweep, arm, env, seed) = (s, gspo, sokoban, 0) more "
                                                   "than once"),
])
def test_a_bad_csv_row_exits_2_naming_the_file_and_line(tmp_path, capsys, bad_row, message):
    path = _write_table(tmp_path / "s_runs.csv", GOOD + [bad_row])
    assert main(["findings", f"csv={path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arena findings: {path}, ") and message in err, err
    _write_table(path, GOOD + ["s,gspo,sokoban,1,failed,,,0.3,stress"])  # a failed row without a score is fine
    assert main(["findings", f"csv={path}"]) == 0


def test_a_former_default_is_labelled_by_its_settings_hash(tmp_path, capsys):
    """A row whose config_hash is today's budget=stress for sokoban keeps the label; another hash
    (a default that changed since) is written stress@<hash>, with a note."""
    from arena.config import load_config
    from arena.config.load import settings_hash

    today = settings_hash(load_config(["budget=stress", "env=sokoban"]))
    path = tmp_path / "s_runs.csv"
    path.write_text("sweep,arm,env,seed,status,stable,final_eval_success,initial_eval_success,budget,config_hash\n"
                    + "".join(f"{sweep},{arm},sokoban,{seed},done,true,{0.4 + 0.1 * (arm == 'gspo') + 0.01 * seed},0.3,"
                              f"stress,{h}\n" for sweep, h in (("now", today), ("then", "0badc0de"))
                              for arm in ("grpo", "gspo") for seed in range(3)))
    runs = R.read_run_tables(path)
    assert set(zip(runs["sweep"], runs["budget"])) == {("now", "stress"), ("then", "stress@0badc0de")}
    assert main(["findings", f"csv={path}"]) == 0
    out = capsys.readouterr().out
    assert "then (budget stress@0badc0de;" in out and "now (budget stress;" in out and "is not today's budget" in out


def test_a_seeds_auto_sweep_is_judged_under_its_bound():
    # CISPO - GRPO on seeds 0-2: -10, -12, -14, a family of one (the SAPO member has no runs): t = 12 /
    # (2 / sqrt 3) = 10.39, df 2, p = 0.0092 < 0.05 -> "worse" at a fixed 0.05. A seeds=auto sweep with
    # looks at 3-10 seeds stops on its verdicts, so they hold only under its O'Brien-Fleming bound, whose
    # level at the first look (3 seeds) is 8.5e-5 for a family of one at 0.05: p > 8.5e-5 -> not worse.
    from arena.analysis.sequential import SpendingBound

    runs = runs_table(pair("cispo", "grpo", [-10, -12, -14]))
    fixed = F.finding_rows(runs, claims_on_final()).set_index("comparison").loc["CISPO - GRPO"]
    bound = SpendingBound(3, 10)
    assert bound.nominal(3, 0.05) < 1e-4 < fixed["p"] < 0.01
    auto = F.finding_rows(runs, claims_on_final(), levels={"hand": {"bound": bound}}).set_index("comparison").loc["CISPO - GRPO"]
    assert (fixed["verdict"], auto["verdict"]) == ("worse", "underpowered")
    other = F.finding_rows(runs, claims_on_final(), levels={"another sweep": {"bound": bound}})
    assert other.set_index("comparison").loc["CISPO - GRPO", "verdict"] == "worse"


def test_findings_on_a_results_dir_read_each_sweep_s_seeds_auto_record(tmp_path, capsys):
    # two copies of the synthetic sweep, one whose manifest carries a seeds=auto record with a bound, one
    # with an older arena's record (a per-look alpha): each is named with its level; a fixed sweep is not
    import json

    from .synthetic import build_sweep

    records = {"auto": {"bound": "obf", "first_seeds": 3, "max_seeds": 6, "alpha": 0.05, "looks": 4},
               "old": {"alpha": 0.0125, "first_seeds": 3, "max_seeds": 6, "looks": 4}, "fixed": None}
    for name, record in records.items():
        folder = build_sweep(tmp_path, name=name)
        if record:
            manifest = json.loads((folder / "manifest.json").read_text())
            (folder / "manifest.json").write_text(json.dumps({**manifest, "auto_seeds": record}))
    levels = F.sweep_levels(tmp_path)
    assert set(levels) == {"auto", "old"} and levels["old"] == {"alpha": 0.0125}
    assert (levels["auto"]["bound"].first, levels["auto"]["bound"].max_seeds) == (3, 6)
    assert main(["findings", f"results_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "Sweep `auto` ran seeds=auto: its verdicts are judged under group-sequential (Lan-DeMets" in out
    assert "Sweep `old` ran seeds=auto: its verdicts are judged under alpha 0.0125 per look" in out
    assert "Sweep `fixed` ran seeds=auto" not in out


def test_a_malformed_seeds_auto_record_exits_2_naming_what_is_valid(tmp_path, capsys):
    import json

    from .synthetic import build_sweep

    folder = build_sweep(tmp_path, name="auto")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "auto_seeds": {"bound": "obf", "max_seeds": 6}}))
    assert main(["findings", f"results_dir={tmp_path}"]) == 2
    assert "valid: a `bound` with integer first_seeds and max_seeds, or a numeric per-look `alpha`" in capsys.readouterr().err
