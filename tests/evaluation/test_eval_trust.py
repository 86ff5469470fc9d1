"""An eval's result is trusted only with proof: an endpoint that answers nothing but malformed
replies fails the eval, the report pools only identical eval configs (each episode once), a
folder without its config.yaml adopts no episodes, a failed longer rerun leaves no old "done"
summary, and two concurrent runs of one eval do not both pay (docs/eval.md, What is checked)."""
from __future__ import annotations

import json
import threading
import time

from arena.evaluation.client import MALFORMED_ABORT
from arena.evaluation.episodes import load_cached
from arena.evaluation.runner import eval_main
from arena.evaluation.table import eval_cells, find_eval_runs

from .eval_args import eval_args
from .servers import FaultServer, running_server
from .test_faults import api_args

QUIET = dict(log=lambda *a: None)


def test_an_endpoint_answering_only_malformed_replies_fails_the_eval(fake_key, tmp_path):
    server = FaultServer({n: "malformed" for n in range(1, 2001)})
    out, lines = tmp_path / "e", []
    with running_server(server.app()) as url:
        # 6 episodes x 8 turns = 48 requests if it played on; it stops after MALFORMED_ABORT
        assert eval_main(eval_args(api_args(url, out, n=6, concurrency=2)), log=lines.append) == 1
    assert not (out / "summary.json").exists()
    error = (out / "error.txt").read_text()
    assert "every reply" in error and "malformed" in error and url.rstrip("/") in error
    assert "malformed" in lines[-1]
    # nothing cached from those replies (a rerun against a fixed endpoint asks again), kept aside
    assert load_cached(out) == {} and not list((out / "episodes").glob("*.partial.jsonl"))
    assert list(out.glob("episodes.malformed-*"))
    # at most MALFORMED_ABORT replies, plus the ones in flight on the other worker, were paid for
    assert MALFORMED_ABORT <= len(server.log) <= MALFORMED_ABORT + 1


def test_a_folder_without_config_yaml_adopts_no_other_evals_episodes(fake_key, tmp_path):
    server = FaultServer({})
    out = tmp_path / "e"
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, out, n=2)), **QUIET) == 0
        (out / "config.yaml").unlink()
        (out / "summary.json").unlink()
        paid = len(server.log)
        # another eval (another temperature) in that folder: refused, nothing asked
        assert eval_main(eval_args(api_args(url, out, n=2, **{"eval.temperature": 0.7})), **QUIET) == 2
        assert len(server.log) == paid
        # the same eval again: its records name it, so they are its own: reused, nothing asked
        assert eval_main(eval_args(api_args(url, out, n=2)), **QUIET) == 0
        assert len(server.log) == paid


def test_a_failed_longer_rerun_leaves_no_done_summary(fake_key, tmp_path):
    server = FaultServer({})
    out = tmp_path / "e"
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, out, n=2, concurrency=1)), **QUIET) == 0
        assert json.loads((out / "summary.json").read_text())["n_eval"] == 2
        server.plan = {len(server.log) + 1: "400"}  # the rerun's first request fails (never retried)
        assert eval_main(eval_args(api_args(url, out, n=4, concurrency=1)), **QUIET) == 1
    assert not (out / "summary.json").exists() and (out / "error.txt").exists()
    assert len(list(out.glob("summary.json.superseded-*"))) == 1  # kept aside, not deleted


def test_two_concurrent_runs_of_one_eval_pay_once(fake_key, tmp_path):
    server = FaultServer({}, delay_s=0.1)  # 3 episodes x up to 8 turns: the first run takes seconds
    out, codes = tmp_path / "e", []
    with running_server(server.app()) as url:
        first = threading.Thread(target=lambda: codes.append(eval_main(eval_args(api_args(url, out, n=3, concurrency=1)), **QUIET)))
        first.start()
        deadline = time.time() + 30
        while not server.log and time.time() < deadline:  # the first run holds the lock and is paying
            time.sleep(0.01)
        lines = []
        second = eval_main(eval_args(api_args(url, out, n=3, concurrency=1)), log=lines.append)
        first.join()
    assert codes == [0] and second == 1 and "another arena eval is running this eval" in lines[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert len(server.log) == summary["requests"] + summary["retries"]  # every request paid once


def test_report_pools_only_identical_eval_configs_counting_each_episode_once(fake_key, tmp_path):
    server = FaultServer({})
    evals = tmp_path / "evals"
    with running_server(server.app()) as url:
        # one config played twice over episodes 0-3 (two folders), once over 4-5; another
        # temperature under the same label over episodes 0-1
        assert eval_main(eval_args(api_args(url, evals / "a", n=4)), **QUIET) == 0
        assert eval_main(eval_args(api_args(url, evals / "a_again", n=4)), **QUIET) == 0
        assert eval_main(eval_args(api_args(url, evals / "a_more", n=2, seed=4)), **QUIET) == 0
        assert eval_main(eval_args(api_args(url, evals / "t07", n=2, **{"eval.temperature": 0.7})), **QUIET) == 0
    for run in ("a", "t07"):
        ident = json.loads((evals / run / "summary.json").read_text())["eval_id"]
        assert {r["eval_id"] for r in load_cached(evals / run).values()} == {ident}
    cells = eval_cells(find_eval_runs(tmp_path))
    counts = sorted(cell["sokoban"]["n"] for cell in cells.values())
    assert counts == [2, 6]  # episodes 0-5 once each, and the other config's 2; not one row of 12
    assert all(label.startswith("fake (") for label, _ in cells)
