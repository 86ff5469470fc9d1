"""`arena eval` against a fault-injecting local server: every episode accounted for, retries
counted, a rerun pays only for what is missing, and the API key never reaches any output."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from arena.evaluation.episodes import load_cached
from arena.evaluation.runner import eval_main

from .eval_args import eval_args
from .conftest import ENV_ARGS, FAKE_KEY
from .servers import FaultServer, running_server

ENV = dict(arg.split("=", 1) for arg in ENV_ARGS)
# fast retries for tests: waits of at most 0.01 * 2^k s, Retry-After 0.05 s, 0.3 s timeout
FAST = {"retry.backoff": 0.01, "retry.max": 4, "timeout": 0.3, "max_tokens": 16}


def api_args(url: str, out: Path, **extra) -> dict:
    return {**ENV, **FAST, "policy": "openai", "model": "fake", "base_url": url, "api_key_env": "ARENA_TEST_KEY",
            "model.prompt_template": "minimal", "out": str(out), **extra}


def test_every_episode_accounted_for_under_faults(fake_key, tmp_path):
    # 5 retryable faults (429, 500, hang, 500, 429) and 2 bad-but-200 replies (malformed, truncated)
    plan = {2: "429", 5: "500", 7: "hang", 11: "malformed", 13: "truncated", 17: "500", 19: "429"}
    server = FaultServer(plan, hang_s=0.6)
    lines = []
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, tmp_path / "e", n=6, concurrency=3)), log=lines.append) == 0
    # progress: the plan line, one line per finished episode (n < 10), the result line
    assert lines[0].startswith("[eval] fake / sla on sokoban: 6 episodes (0 cached, 6 to play)")
    assert [line.split(" episodes")[0] for line in lines[1:7]] == [f"[eval] {k}/6" for k in range(1, 7)]
    assert lines[-1].startswith("[eval] success ") and "5 retries" in lines[-1]
    records = load_cached(tmp_path / "e")
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert sorted(records) == list(range(6)) and summary["n_eval"] == 6
    # each retryable fault costs exactly one retry; the 200s are never retried
    assert summary["retries"] == 5 and summary["malformed_replies"] == 1
    # the eval's folder records what made it, as every run folder (arena.runs.run_log)
    assert (tmp_path / "e" / "command.txt").read_text().count("\n") == 1 and (tmp_path / "e" / "run.log").is_file()
    # every attempt the server saw is one request or one retry of some episode
    assert len(server.log) == summary["requests"] + summary["retries"]
    # the good reply is format-valid; only the malformed and the truncated turns are not
    assert sum(r["turns"] - r["format_valid_turns"] for r in records.values()) == 2
    # usage: 3 completion tokens per billed reply (malformed replies carry no usage)
    assert summary["completion_tokens"] == 3 * (summary["requests"] - 1)
    # at most `concurrency` requests were ever in flight
    assert 1 <= server.max_in_flight <= 3


def test_failed_episodes_are_retried_on_rerun_and_done_ones_never_repaid(fake_key, tmp_path):
    # concurrency 1: requests are sequential; request 9 gets a 400 (never retried), so exactly
    # one episode fails, after the earlier episodes were cached
    first = FaultServer({9: "400"})
    out = tmp_path / "e"
    with running_server(first.app()) as url:
        assert eval_main(eval_args(api_args(url, out, n=4, concurrency=1)), log=lambda *a: None) == 1
        done_first = set(load_cached(out))
        failed_tag = first.log[8][0]
        assert len(done_first) == 3 and not (out / "summary.json").exists()
        error = (out / "error.txt").read_text()
        assert "1 of 4 episodes failed" in error and "HTTP 400" in error
        # the rerun (same server, healthy now) plays only the failed episode
        start = len(first.log)
        first.plan = {}
        assert eval_main(eval_args(api_args(url, out, n=4, concurrency=1)), log=lambda *a: None) == 0
        rerun_tags = Counter(tag for tag, _ in first.log[start:])
        assert set(rerun_tags) == {failed_tag}
        assert sorted(load_cached(out)) == [0, 1, 2, 3] and (out / "summary.json").exists()
        # a third run finds summary.json and sends nothing
        start = len(first.log)
        assert eval_main(eval_args(api_args(url, out, n=4, concurrency=1)), log=lambda *a: None) == 0
        assert len(first.log) == start


def test_a_turn_log_left_beside_a_cached_record_is_deleted_on_rerun(fake_key, tmp_path):
    """A kill between writing an episode's record and deleting its turn log leaves the log
    behind; a kill inside a record's atomic write leaves its hidden temp file. Made here by hand:
    three episodes cached (request 9 fails the fourth with a 400, as above), then a turn log
    planted beside one cached record and a temp file of the failed episode's record. The rerun
    must delete both, play only the failed episode, and leave the cached record as it was."""
    from arena.evaluation.episodes import episode_file, turn_log_file

    server = FaultServer({9: "400"})
    out = tmp_path / "e"
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, out, n=4, concurrency=1)), log=lambda *a: None) == 1
        cached = load_cached(out)
        (failed,) = set(range(4)) - set(cached)
        done = min(cached)
        stale = turn_log_file(out, done)
        stale.write_text(json.dumps({"prompt_sha": "0" * 16, "text": "x", "chosen_agent": 0, "replies": []}) + "\n")
        # and the hidden temp file of a record whose write was killed before its rename (atomic_write_with)
        killed_write = out / "episodes" / f".{episode_file(out, failed).name}.k1ll3d.tmp"
        killed_write.write_text("{")
        start, server.plan = len(server.log), {}
        assert eval_main(eval_args(api_args(url, out, n=4, concurrency=1)), log=lambda *a: None) == 0
        rerun_episodes = {tag.rsplit(":", 1)[1] for tag, _ in server.log[start:]}
    assert rerun_episodes == {str(failed)}
    assert not list((out / "episodes").glob("*.partial.jsonl"))
    assert not killed_write.exists()
    assert load_cached(out)[done] == cached[done]


def test_the_key_is_never_written_or_printed(fake_key, tmp_path, capfd):
    server = FaultServer({3: "500", 4: "malformed"})
    lines = []
    with running_server(server.app()) as url:
        for paradigm in ("sla", "debate"):
            assert eval_main(eval_args(api_args(url, tmp_path / paradigm, n=2, paradigm=paradigm, **{"debate.agents": 3})),
                             log=lambda *a: lines.append(" ".join(map(str, a)))) == 0
        # failing runs write error.txt: it must not hold the key either, even when the server
        # echoes the key back in its error bodies (a retried 500, then a final 401)
        server.plan = {len(server.log) + 1: "500echo", **{n: "401echo" for n in range(len(server.log) + 2, len(server.log) + 50)}}
        assert eval_main(eval_args(api_args(url, tmp_path / "failing", n=1)), log=lambda *a: lines.append(" ".join(map(str, a)))) == 1
    assert "[redacted]" in (tmp_path / "failing" / "error.txt").read_text()  # the echo was caught
    assert server.auth == {f"Bearer {FAKE_KEY}"}  # the key was used...
    captured = capfd.readouterr()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "error.txt" for p in files) and any(p.name == "config.yaml" for p in files)
    for path in files:  # ...and appears in no file, log line or captured output
        assert FAKE_KEY not in path.read_text(errors="replace"), path
    assert FAKE_KEY not in "\n".join(lines) + captured.out + captured.err
    assert not any(p.name.startswith("wandb") for p in tmp_path.rglob("*"))  # eval does not log to W&B


def test_an_interrupted_episode_replays_its_paid_turns(tmp_path):
    """Turn-level cache: an episode that failed at turn 3 resumes there; turns 0-2 are not asked
    again and the finished record equals an uninterrupted run's."""
    from arena.envs import eval_seed, make
    from arena.evaluation.client import ApiFailure, Reply
    from arena.evaluation.debate import sla_turn
    from arena.evaluation.episodes import TurnLog, play_chat_episode

    moves = ["left", "up", "right", "down"]

    def scripted(fail_at=None):
        asked = []

        def agent(prompt):
            if len(asked) == fail_at:
                raise ApiFailure("HTTP 500 (gave up after 1 attempts)")
            asked.append(prompt)
            return Reply(f"<think>t</think><action>{moves[len(asked) % 4]}</action>", 5, 2, retries=1)
        return agent, asked

    kw = dict(history_length=1, template="minimal")
    env = make("sokoban", dim=5, max_turns=8)
    agent, asked = scripted()
    reference = play_chat_episode(env, 0, eval_seed(0), lambda p: sla_turn(p, agent), **kw)
    # first attempt: 3 turns answered, then the 4th request fails
    agent, asked_1 = scripted(fail_at=3)
    try:
        play_chat_episode(env, 0, eval_seed(0), lambda p: sla_turn(p, agent), turn_log=TurnLog(tmp_path, 0), **kw)
    except ApiFailure:
        pass
    assert len(asked_1) == 3 and len(TurnLog(tmp_path, 0).pending) == 3
    # the rerun's agent continues the same script from turn 3 (a deterministic API)
    agent, asked_2 = scripted()
    asked_2.extend(asked_1)  # so its replies continue at position 3
    log = TurnLog(tmp_path, 0)
    record = play_chat_episode(env, 0, eval_seed(0), lambda p: sla_turn(p, agent), turn_log=log, **kw)
    assert log.replayed == 3 and len(asked_2) - 3 == reference["turns"] - 3  # only the later turns were asked
    assert record == reference  # same actions, outcome, and the paid turns' usage and retries counted once



def test_reasoning_model_request_options_reach_the_endpoint(fake_key, tmp_path):
    server = FaultServer({})
    with running_server(server.app()) as url:
        args = api_args(url, tmp_path / "e", n=1, sampling_params=False, max_tokens_field="max_completion_tokens")
        assert eval_main(eval_args(args), log=lambda *a: None) == 0
    assert server.bodies and all(b["max_completion_tokens"] == 16 and "temperature" not in b and "top_p" not in b
                                 and "max_tokens" not in b for b in server.bodies)


def test_environment_calls_never_overlap_while_requests_do(fake_key, tmp_path, monkeypatch):
    """Environments need not be thread-safe (TextWorld's parser is not): their calls are
    serialised, while requests of different episodes still run concurrently."""
    import threading
    import time

    import arena.evaluation.runner as runner

    real_make, lock, inside, overlaps = runner.make, threading.Lock(), [0], []

    class Guarded:
        def __init__(self, env):
            self.env, self.name, self.max_turns, self.instruction = env, env.name, env.max_turns, env.instruction

        def _enter(self, fn, *args):
            with lock:
                inside[0] += 1
                overlaps.append(inside[0] > 1)
            time.sleep(0.002)  # widen the window in which an overlap would show
            try:
                return fn(*args)
            finally:
                with lock:
                    inside[0] -= 1

        def reset(self, seed):
            return self._enter(self.env.reset, seed)

        def step(self, action):
            return self._enter(self.env.step, action)

        def is_admissible(self, action):
            return self._enter(self.env.is_admissible, action)

    monkeypatch.setattr(runner, "make", lambda name, **kw: Guarded(real_make(name, **kw)))
    server = FaultServer({}, delay_s=0.02)
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, tmp_path / "e", n=6, concurrency=4)), log=lambda *a: None) == 0
    assert overlaps and not any(overlaps) and server.max_in_flight > 1


def test_a_longer_eval_reuses_a_shorter_one(fake_key, tmp_path):
    server = FaultServer({})
    out = tmp_path / "e"
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, out, n=2)), log=lambda *a: None) == 0
        tags_2 = {tag for tag, _ in server.log}
        start = len(server.log)
        assert eval_main(eval_args(api_args(url, out, n=4)), log=lambda *a: None) == 0  # same folder: n is not in the eval id
        tags_4 = {tag for tag, _ in server.log[start:]}
        start = len(server.log)
        assert eval_main(eval_args(api_args(url, out, n=2)), log=lambda *a: None) == 0  # back to 2: nothing to ask
        assert len(server.log) == start
    # the n=4 run asked only for episodes 2 and 3
    assert {t.rsplit(":", 1)[1] for t in tags_2} == {"0", "1"} and {t.rsplit(":", 1)[1] for t in tags_4} == {"2", "3"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_eval"] == 2 and summary["first_episode"] == 0  # describes the last command's range


def files_and_output_holding(core: str, root: Path, lines: list[str], capfd) -> list[str]:
    """Every file under `root` (the results dir and the eval folders), log line or captured
    output that holds `core`: a part of the key that each of its forms (raw, stripped, repr,
    bytes repr, JSON, URL-encoded) keeps."""
    captured = capfd.readouterr()
    found = [str(p) for p in root.rglob("*") if p.is_file() and core in p.read_text(errors="replace")]
    return found + [name for name, text in (("log", "\n".join(lines)), ("stdout", captured.out),
                                            ("stderr", captured.err)) if core in text]


def test_a_key_with_control_or_non_ascii_characters_is_refused_naming_only_the_variable(monkeypatch, tmp_path, capfd):
    # a CRLF key file, a secret file's trailing newline, a pasted space or a non-ASCII
    # character: exit 2 before any request, naming the variable and never the value
    core = "CRLFc0re7e"
    server = FaultServer({})
    with running_server(server.app()) as url:
        for i, key in enumerate([f"sk-{core}\r", f"sk-{core}\r\n", f"sk-{core}\n", f" sk-{core}", f"sk-{core}\u00e9"]):
            monkeypatch.setenv("ARENA_TEST_KEY", key)
            lines: list[str] = []
            assert eval_main(eval_args(api_args(url, tmp_path / f"e{i}", n=1, results_dir=str(tmp_path))), log=lines.append) == 2
            err = capfd.readouterr().err
            assert "api_key_env=ARENA_TEST_KEY" in err and "printable ASCII without spaces" in err
            assert files_and_output_holding(core, tmp_path, lines, capfd) == [] and core not in err
    assert server.log == []  # refused before any request


def test_every_form_of_an_echoed_key_is_redacted(monkeypatch, tmp_path, capfd):
    # a key with characters that repr, JSON and URL encoding each change; a server that echoes
    # it in every form, in a good reply and then in the final error body
    core = "FAKEc0re9d"
    monkeypatch.setenv("ARENA_TEST_KEY", f"sk-arena/{core}+q=\\z'")
    server = FaultServer({1: "200echo", **{n: "401echoforms" for n in range(2, 60)}})
    lines: list[str] = []
    with running_server(server.app()) as url:
        assert eval_main(eval_args(api_args(url, tmp_path / "failing", n=1, results_dir=str(tmp_path))), log=lines.append) == 1
    assert "[redacted]" in (tmp_path / "failing" / "error.txt").read_text()
    assert server.auth == {f"Bearer sk-arena/{core}+q=\\z'"}  # the key was sent as it is
    assert files_and_output_holding(core, tmp_path, lines, capfd) == []
