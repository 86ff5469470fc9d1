"""The §5.3-style table from eval run folders, checked against Wilson intervals computed by hand."""
from __future__ import annotations

import json

from arena.evaluation.table import eval_table, find_eval_runs, write_eval_table


def fake_run(root, name, **summary):
    path = root / "evals" / name
    path.mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def test_table_pools_runs_and_shows_wilson_intervals(tmp_path):
    # one eval config (one pool_id) split over two first-episode ranges: pooled
    eval_summary = dict(kind="eval", label="A", paradigm="sla", env="sokoban", pool_id="p1")
    fake_run(tmp_path, "a1", **eval_summary, eval_id="e1", first_episode=0, final_eval_success=0.5, n_eval=4,
             tokens_per_episode=100.0)
    fake_run(tmp_path, "a2", **eval_summary, eval_id="e2", first_episode=4, final_eval_success=0.25, n_eval=4,
             tokens_per_episode=200.0)
    fake_run(tmp_path, "b", kind="eval", label="B", paradigm="debate", env="household", final_eval_success=1.0,
             n_eval=2, tokens_per_episode=50.0)
    fake_run(tmp_path, "train", status="done", final_eval_success=0.9, n_eval=256)  # a training run: skipped
    runs = find_eval_runs(tmp_path)
    assert len(runs) == 4
    table = eval_table(runs).splitlines()
    assert table[0] == "| policy | paradigm | household success % [95% CI] (n) | sokoban success % [95% CI] (n) | tokens / episode |"
    # A pooled: 2 + 1 = 3 wins of 8. Wilson, z = 1.96, z^2 = 3.8416:
    #   centre = (3/8 + z^2/16) / (1 + z^2/8) = 0.61510 / 1.48020 = 0.41555
    #   half   = z sqrt(0.375*0.625/8 + z^2/256) / 1.48020 = 1.96 * 0.21048 / 1.48020 = 0.27871
    #   -> [13.7, 69.4]; tokens (4*100 + 4*200) / 8 = 150
    assert table[2] == "| A | sla | — | 37.5 [13.7, 69.4] (8) | 150 |"
    # B: 2 of 2: centre = (1 + z^2/4) / (1 + z^2/2) = 1.9604 / 2.9208 = 0.67119,
    #   half = z sqrt(z^2/16) / 2.9208 = 0.9604 / 2.9208 = 0.32881 -> [34.2, 100.0]
    assert table[3] == "| B | debate | 100.0 [34.2, 100.0] (2) | — | 50 |"
    out = write_eval_table(tmp_path, tmp_path / "report" / "eval_table.md")
    assert out.read_text().splitlines() == table


def test_arena_report_evals_writes_the_table(tmp_path, capsys):
    from arena.cli import main

    fake_run(tmp_path, "a", kind="eval", label="A", paradigm="sla", env="sokoban", final_eval_success=0.5,
             n_eval=4, tokens_per_episode=10.0)
    assert main(["report", "evals=true", f"results_dir={tmp_path}"]) == 0
    written = (tmp_path / "evals" / "report.md").read_text()
    assert "| A | sla | 50.0 [" in written and written in capsys.readouterr().out
    # a sweep key beside evals=true is refused, naming what evals=true takes
    assert main(["report", "evals=true", "name=x", f"results_dir={tmp_path}"]) == 2
    assert "takes only results_dir" in capsys.readouterr().err
