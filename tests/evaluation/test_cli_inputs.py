"""`arena eval` / `arena serve` user errors: exit 2 with the key and its valid values named,
and nothing written."""
from __future__ import annotations

import pytest

from arena.cli import main


@pytest.mark.parametrize("args, message", [
    (["policy=gpt"], "unknown policy 'gpt'; valid: checkpoint, openai"),
    (["policy=openai", "model=m", "paradigm=vote"], "unknown paradigm 'vote'; valid: sla, debate, aggressive_debate"),
    (["policy=openai"], "policy=openai needs model=NAME"),
    (["policy=openai", "model=m", "base_url=ftp://x"], "base_url='ftp://x'"),
    (["policy=checkpoint"], "policy=checkpoint needs model.path=DIR"),
    (["policy=checkpoint", "model.path=/no/such/dir"], "no such checkpoint folder"),
    (["policy=openai", "model=m", "debate.agents=0", "paradigm=debate"], "debate.agents=0: expected an integer >= 2"),
    # a value of the wrong type is refused by the parser (EvalArgs' concurrency: int), naming the type
    (["policy=openai", "model=m", "concurrency=many"], "concurrency='many': expected an integer (concurrency is int)"),
    (["policy=openai", "model=m", "n=0"], "n=0"),  # checked by the run config (eval.n) or by eval
    (["policy=openai", "model=m", "env=chess"], "unknown env 'chess'; valid:"),
    # the committed household pool has 10 eval games: episodes 5..10 would replay game 0 as the 6th
    (["policy=openai", "model=m", "env=household", "env.kwargs.pool=committed", "seed=5", "n=6"],
     "valid: seed + n <= 10"),
    (["policy=openai", "model=m", "no_such_key=1"], "unknown key"),
    (["policy=openai", "model=m", "max_tokens_field=length"], "unknown max_tokens_field 'length'; valid: max_tokens, max_completion_tokens"),
    # a bool key takes true or false only, the one message of every verb (arena.config.verb_grammar)
    (["policy=openai", "model=m", "sampling_params=maybe"], "sampling_params='maybe': valid: true or false"),
    (["policy=openai", "model=m", "retry.max=many"], "retry.max='many': expected an integer (retry.max is int)"),
    (["policy=openai", "model=m", "max_tokens=x"], "max_tokens='x': expected an integer or null (max_tokens is int | null)"),
    (["policy=openai", "model=m", "debate.agentz=2"], "unknown key 'debate.agentz'; did you mean debate.agents?"),
    (["policy=openai", "model=m", "retry=3"], "retry= is a section, not a key; valid: retry.max=VALUE, retry.backoff=VALUE"),
    (["policy=openai", "model=m", "api_key_env=ARENA_UNSET_KEY_VAR"], "api_key_env=ARENA_UNSET_KEY_VAR: that environment variable is not set"),
])
def test_eval_bad_input_exits_2(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ARENA_UNSET_KEY_VAR", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused")
    out = tmp_path / "run"
    assert main(["eval", *args, f"out={out}"]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing written


def test_checkpoint_policy_refuses_debate(tmp_path, capsys):
    assert main(["eval", "policy=checkpoint", f"model.path={tmp_path}", "paradigm=debate", f"out={tmp_path / 'r'}"]) == 2
    assert "valid for policy=checkpoint: sla" in capsys.readouterr().err


def test_out_holding_another_eval_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("evaluation: {eval_id: abc}\n")
    args = ["eval", "policy=openai", "model=m", "api_key_env=", f"out={out}"]
    assert main(args) == 2
    assert "holds another run (eval_id abc" in capsys.readouterr().err
    assert (out / "config.yaml").read_text() == "evaluation: {eval_id: abc}\n"  # untouched


@pytest.mark.parametrize("args, message", [
    ([], "model.path=None: expected a checkpoint folder"),
    (["model.path=/no/such"], "expected a checkpoint folder"),
    (["prot=1"], "unknown key 'prot'; did you mean port?"),
    (["model.pth=/x"], "unknown key 'model.pth'; did you mean model.path?"),
    (["port=http"], "port='http': expected an integer (port is int)"),
    (["request_timeout=soon"], "request_timeout='soon': expected a number or null (request_timeout is float | null)"),
])
def test_serve_bad_input_exits_2(args, message, capsys):
    assert main(["serve", *args]) == 2
    assert message in capsys.readouterr().err


def test_serve_bad_port(tmp_path, capsys):
    assert main(["serve", f"model.path={tmp_path}", "port=99999"]) == 2
    assert "port=99999: expected an integer in 0..65535" in capsys.readouterr().err


def test_eval_gets_evalargs_and_serve_the_flat_dict_typed_the_last_one_winning(monkeypatch):
    """`arena eval` reaches the pipeline as EvalArgs itself (the keys given set, typed by the
    dataclass: label=007 stays the text 007, timeout=5 is the float 5.0; the others their
    defaults), the keys given, and the run keys (n, model.path) as Hydra types them; `arena
    serve` as the flat {dotted key: value} dict of the keys it gives."""
    import arena.evaluation.entry as entry
    import arena.evaluation.server as server
    from arena.config.verb_args import EvalArgs, RetryArgs

    got = []
    monkeypatch.setattr(entry, "eval_entry", lambda args: got.append(args) or 0)
    monkeypatch.setattr(server, "serve_main", lambda args: got.append(args) or 0)
    assert main(["eval", "n=2", "retry.max=1", "n=3", "label=007", "timeout=5", "model.path=/m", "retry.max=4"]) == 0
    evaluated = got.pop()
    assert evaluated.args == EvalArgs(label="007", timeout=5.0, retry=RetryArgs(max=4))
    assert evaluated.given == {"retry.max", "label", "timeout"} and evaluated.overrides == {"n": 3, "model.path": "/m"}
    assert isinstance(evaluated.args.timeout, float) and isinstance(evaluated.args.retry.max, int)
    assert main(["serve", "model.path=/a", "port=1", "port=2", "request_timeout=9"]) == 0
    served = got.pop()
    assert served == {"model.path": "/a", "port": 2, "request_timeout": 9.0}
    assert isinstance(served["request_timeout"], float) and isinstance(served["port"], int)
