"""A corrupt summary.json is no proof of completion (docs/design.md, Run folder): `arena status`
shows the cell as not done and says why, and the next run of the cell moves the file aside
(kept) and runs the cell again. It used to count as done: never rerun, then a raw JSONDecodeError."""
from arena.sweeps import job
from arena.sweeps.ledger import DONE, MISSING, cell_state
from arena.sweeps.status import status_lines
from arena.sweeps.sweep import build_plan

from . import fake_train


def test_corrupt_summary_shows_not_done_and_the_cell_reruns(sweep_env, tmp_path):
    plan, _ = build_plan(["dimension=aggregation", "seeds=1", "launcher=debug", *sweep_env])
    plan.sweep_dir.mkdir(parents=True)
    plan.write_manifest()
    cell = plan.cells[0]
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE
    text = (cell.out / "summary.json").read_text()
    (cell.out / "summary.json").write_text(text[: len(text) // 2])  # cut in half
    assert cell_state(cell.out) == MISSING
    line = next(li for li in status_lines(tmp_path, plan.name) if cell.cell_id in li)
    assert "missing" in line and "is not valid JSON" in line and str(cell.out / "summary.json") in line
    assert job.run_cell(cell.cfg, env={}, train_fn=fake_train.train) == DONE  # ran again
    assert len((cell.out / "calls.log").read_text().split()) == 2
    kept = list(cell.out.glob("summary.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == text[: len(text) // 2]
    assert cell_state(cell.out) == DONE
