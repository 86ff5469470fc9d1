"""The ledger's bookkeeping of busy cells (settle_waiting), shared by both driver loops."""


def test_settle_waiting_reads_done_failed_and_vanished_holders(tmp_path):
    # three busy cells the driver waited on: one finished (summary.json), one failed (error.txt),
    # one whose holder vanished (no lock, no heartbeat, no result) -> run again, once; a cell
    # already requeued max_requeues=1 times counts as failed instead
    from types import SimpleNamespace

    from arena.sweeps.ledger import DONE, FAILED, settle_waiting

    from .fake_train import write_valid_summary

    cells = {name: SimpleNamespace(out=tmp_path / name) for name in ("done", "failed", "gone", "gone_again")}
    for cell in cells.values():
        cell.out.mkdir()
    write_valid_summary(tmp_path / "done")
    (tmp_path / "failed" / "error.txt").write_text("Traceback")
    waiting, outcome, requeues = dict(cells), {}, {"gone_again": 1}
    rerun = settle_waiting(waiting, outcome, requeues, max_requeues=1)
    assert rerun == [cells["gone"]]
    assert outcome == {"done": DONE, "failed": FAILED, "gone_again": FAILED}
    assert waiting == {} and requeues == {"gone": 1, "gone_again": 2}
