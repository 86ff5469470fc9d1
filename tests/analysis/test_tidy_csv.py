import pandas as pd

from arena.analysis.frames import tidy_frame
from arena.analysis.manifest import load_manifest
from arena.analysis.table_data import build_table
from arena.analysis.tables import render_markdown
from arena.analysis.tidy_csv import export_csv, load_csv, main

from .synthetic import NAME


def test_csv_round_trip_gives_the_same_table_and_curves(results_dir, runs, tmp_path):
    prefix = tmp_path / "demo"
    export_csv(results_dir, NAME, prefix)
    runs_csv, tidy_csv, manifest = load_csv(prefix)
    # the table from the two files is the table from the run folders (without chosen hp, which
    # the files do not carry)
    direct = render_markdown(*build_table(runs, load_manifest(results_dir, NAME), {}), name=NAME)
    assert render_markdown(*build_table(runs_csv, manifest, {}), name=NAME) == direct
    # every plotted value of every run comes back (values to 6 significant digits)
    tidy = tidy_frame(results_dir, NAME, runs=runs)
    key = ["arm", "env", "seed", "step", "metric"]
    merged = tidy.merge(tidy_csv, on=key, suffixes=("", "_csv"), how="inner")
    assert len(merged) == len(tidy_csv) > 0
    assert ((merged["value"] - merged["value_csv"]).abs() <= 1e-5 * merged["value"].abs().clip(lower=1)).all()
    # a failed run: in the runs file with its status and no score
    failed = runs_csv[(runs_csv.arm == "grpo_4mb") & (runs_csv.env == "sokoban") & (runs_csv.seed == 2)].iloc[0]
    assert failed.status == "failed" and pd.isna(failed.final_eval_success)
    assert set(runs_csv["stable"].dropna()) == {True, False, "unresolved"}


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert main([]) == 2
    assert main(["render", "prefix=x"]) == 2
    assert "render needs prefix=..., out=..." in capsys.readouterr().err
    assert main(["render", f"prefix={tmp_path}/none", f"out={tmp_path}"]) == 2
    assert main(["render", f"prefix={tmp_path}/none", f"out={tmp_path}", "min_effect=-2"]) == 2
    assert "min_effect='-2': expected a number of points in (0, 100]" in capsys.readouterr().err
