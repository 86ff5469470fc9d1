"""The verl backend's run-folder writer follows the same rerun rule as the embedded trainer
(docs/design.md, Run folder): killed before its first checkpoint, its rerun starts at step 0
with no rows of the killed run left (they used to stay: steps 0,1,0,1,2,...)."""
from arena.backends.verl.run_folder import VerlRunWriter
from arena.runs import RunFolder


def test_rerun_without_checkpoint_drops_the_killed_runs_rows(tmp_path):
    folder = RunFolder(tmp_path / "cell")
    first = VerlRunWriter(folder, total_steps=3, theta=0.0025, min_points=1, n_eval=8)
    first.start("seed: 0\n")
    for step in (0, 1):
        first.log({"eval/success_rate": 0.1 * step}, step)
    rerun = VerlRunWriter(folder, total_steps=3, theta=0.0025, min_points=1, n_eval=8)
    rerun.start("seed: 0\n", resume_step=None)  # no checkpoint was written
    assert folder.read_metrics() == []
    for step in (0, 1, 2, 3):
        rerun.log({"eval/success_rate": 0.5}, step)
    assert [r["step"] for r in folder.read_metrics()] == [0, 1, 2, 3]
