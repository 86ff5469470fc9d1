"""A finished `arena eval` is found done on rerun (arena/evaluation/runner.py play_eval, the
"already done" branch; docs/eval.md): the same command, into the default folder
<results_dir>/evals/<eval_id> (arena.runs.layout.Results.eval_run), asks the endpoint nothing
and rewrites neither summary.json nor the episode records, and adds nothing to command.txt or
run.log (nothing worked on the eval). The cheapest setup: the local fake
endpoint of test_faults.py (no model), budget=smoke, two episodes."""
from __future__ import annotations

from arena.evaluation.runner import eval_main
from arena.runs.layout import Results

from .eval_args import eval_args
from .servers import FaultServer, running_server
from .test_faults import api_args


def _stamps(folder):
    """{file: (mtime_ns, bytes)} of every file under `folder`."""
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_finished_eval_is_done_on_rerun_and_rewrites_nothing(fake_key, tmp_path):
    server = FaultServer({})
    with running_server(server.app()) as url:
        # no out=: the eval goes to its default folder under results_dir
        args = {k: v for k, v in api_args(url, tmp_path, n=2, budget="smoke", results_dir=str(tmp_path)).items()
                if k != "out"}
        assert eval_main(eval_args(args), log=lambda *a: None) == 0
        summaries = Results(tmp_path).eval_summaries()
        assert len(summaries) == 1  # the one eval, in <results_dir>/evals/<eval_id>/summary.json
        run = summaries[0].parent
        before, paid = _stamps(run / "episodes"), len(server.log)
        summary_file = summaries[0]
        summary = summary_file.stat().st_mtime_ns, summary_file.read_bytes()
        config = (run / "config.yaml").read_bytes()
        records = {name: (run / name).read_bytes() for name in ("command.txt", "run.log")}
        assert records["command.txt"].count(b"\n") == 1  # the one start that played
        assert len(before) >= 1 and paid >= 2  # two episodes played, at least one request each
        lines = []
        assert eval_main(eval_args(args), log=lines.append) == 0
    assert lines == [f"[eval] already done: {summary_file}"]
    assert len(server.log) == paid  # nothing asked of the endpoint again
    assert (summary_file.stat().st_mtime_ns, summary_file.read_bytes()) == summary  # summary.json untouched
    assert _stamps(run / "episodes") == before  # nor any episode record
    assert (run / "config.yaml").read_bytes() == config  # the same eval's config, byte for byte
    assert {name: (run / name).read_bytes() for name in records} == records  # no second start recorded
    assert Results(tmp_path).eval_summaries() == summaries  # no second eval folder
