"""One argument grammar (arena/config/verb_grammar.py; the verbs' keys: arena/config/verb_args.py; docs/design.md,
CLI grammar and exit codes):
a verb's keys are its dataclass's fields, read typed with Hydra's override grammar; every
other key is a run override, passed through in order; the last occurrence of a key wins,
for a verb key and a run override alike, on sweep, search and train."""
import pytest

from arena.cli import _config
from arena.config.args import BadArgument
from arena.config.verb_args import SearchArgs, StatusArgs, SweepArgs
from arena.config.verb_grammar import last_value, parse_args, parse_key_values
from arena.sweeps.sweep import build_plan


def test_verb_keys_come_out_typed_and_the_rest_passes_through_in_order():
    parsed = parse_args(SweepArgs, ["dimension=aggregation", "steps=5", "seeds=[0,5]", "fail_fast=true",
                                    "po.hp.eps_high=0.2", "name=123", "timeout_min=null", "--dry-run"])
    a = parsed.args
    assert (a.dimension, a.seeds, a.fail_fast, a.dry_run, a.timeout_min) == ("aggregation", [0, 5], True, True, None)
    assert a.name == "123"  # a str key keeps the text of a number
    assert a.launcher == "local" and a.progress_s == 30.0  # the dataclass's defaults
    assert parsed.given == {"dimension", "seeds", "fail_fast", "name", "timeout_min", "dry_run"}
    assert parsed.overrides == ["steps=5", "po.hp.eps_high=0.2"]  # untouched, in order


def test_the_last_occurrence_of_a_verb_key_wins():
    # seeds=1 then seeds=[2,3] then seeds=4: the last, 4
    assert parse_args(SweepArgs, ["seeds=1", "seeds=[2,3]", "seeds=4"]).args.seeds == 4
    assert parse_args(StatusArgs, ["name=a", "results_dir=x", "name=b"]).args.name == "b"
    assert parse_args(SearchArgs, ["method=grpo", "method=gspo"]).args.method == "gspo"


@pytest.mark.parametrize("args, fragment", [
    (["fail_fast=yes"], "fail_fast='yes': valid: true or false"),  # a bool key takes true or false only
    (["name=a,b"], "a comma list is Hydra's multirun syntax"),  # one key, one value
    (["envs=sokoban,shop"], "env=[sokoban,shop]"),
    (["+seeds=3"], "this command's seeds= takes one value, with no + or ~"),
    (["~launcher"], "this command's launcher= takes one value"),
    (["seeds=[1,"], "is not a valid value"),  # Hydra's grammar does not parse it
    (["dimension"], "expected key=value, got 'dimension'"),
])
def test_bad_verb_arguments_are_bad_arguments(args, fragment):
    with pytest.raises(BadArgument) as info:
        parse_args(SweepArgs, args)
    assert fragment in str(info.value), str(info.value)


def test_last_value_reads_run_overrides_with_the_same_rule():
    run = ["seed=1", "budget=smoke", "lr=0.1", "budget=stress", "~steps"]
    assert last_value(run, "budget") == "stress" and last_value(run, "lr") == 0.1
    assert last_value(run, "steps", "none") == "none"  # a delete gives no value
    assert last_value(["lr=0.1"], "budget", "default") == "default"


# budget=smoke then budget=stress: the last, stress (configs/budget/stress.yaml: steps 40; smoke's: 3)
TWICE = ["budget=smoke", "budget=stress"]


def test_budget_given_twice_on_train_is_the_last(tmp_path):
    cfg = _config(["env=sanity", *TWICE, f"results_dir={tmp_path}"])  # what `arena train` runs
    assert cfg.budget == "stress" and cfg.steps == 40


def test_budget_given_twice_on_sweep_is_the_last_for_its_name_and_cells(tmp_path):
    plan, options = build_plan(["dimension=aggregation", "seeds=1", *TWICE, f"results_dir={tmp_path}", "--dry-run"])
    assert plan.name == "aggregation-stress" and options.dry_run
    assert {c.cfg.budget for c in plan.cells} == {"stress"} and {c.cfg.steps for c in plan.cells} == {40}
    assert not (tmp_path / "sweeps").exists()  # a dry run writes nothing


def test_budget_given_twice_on_search_is_the_last_for_its_name_and_cells(tmp_path):
    from arena.sweeps.cli import search_main

    lines = []
    code = search_main(["method=gspo", "seeds=1", "search.seeds=[100]", *TWICE, f"results_dir={tmp_path}",
                        "--dry-run"], log=lines.append)
    assert code == 0, lines
    assert lines[0].startswith("[dry-run] sweep search-gspo-stress "), lines
    # the plan's table: role arm env seed method steps ...; the report cell runs stress's 40 steps
    report = next(line.split() for line in lines if line.split()[:1] == ["report"])
    assert report[5] == "40", report
    assert not (tmp_path / "sweeps").exists()


def test_the_default_min_effect_is_the_report_s():
    from arena.analysis.verdicts import MIN_EFFECT
    from arena.config.verb_args import FindingsArgs, ReportArgs

    assert ReportArgs().min_effect == FindingsArgs().min_effect == MIN_EFFECT


def test_verbs_that_take_their_own_keys_only_name_the_close_match_and_the_valid_keys(capsys):
    from arena.cli import main

    for argv, fragment in ((["status", "nmae=x"], "did you mean name? valid keys: name, results_dir"),
                           (["methods", "methd=grpo"], "did you mean method? valid keys: method"),
                           (["report", "allow_mixed=maybe", "name=x"], "allow_mixed='maybe': valid: true or false"),
                           (["findings", "csvv=x"], "did you mean csv?")):
        assert main(argv) == 2, argv
        assert fragment in capsys.readouterr().err, argv


def test_a_table_verb_s_keys_are_typed_the_last_winning_and_a_comma_list_is_refused():
    # envs' env kwargs and eval's run keys are a table of keys: the same grammar
    from arena.config.verb_grammar import parse_key_values

    got = parse_key_values(["n=3", "base_url=http://127.0.0.1:8000/v1", "n=5", "label='a b'", "env.kwargs.dim=[7,7]"])
    assert got == {"n": 5, "base_url": "http://127.0.0.1:8000/v1", "label": "a b", "env.kwargs.dim": [7, 7]}
    with pytest.raises(BadArgument, match="a comma list is Hydra's multirun syntax"):
        parse_key_values(["po.method=grpo,gspo"])
    with pytest.raises(BadArgument, match="this command's n= takes one value"):
        parse_key_values(["~n"])


def test_eval_s_nested_keys_are_typed_by_their_dataclass_and_other_keys_pass_through():
    from arena.config.verb_args import EvalArgs
    from arena.config.verb_grammar import parse_nested_args

    parsed = parse_nested_args(EvalArgs, ["retry.max=1", "n=2", "debate.agents=4", "model.path=/m", "retry.max=7",
                                          "n=3", "retry.backoff=1", "label=12"])
    # only the keys given, in the order first given; retry.max's last value 7; backoff 1 -> the float
    # 1.0 (RetryArgs.backoff: float); label=12 -> the text "12"; n and model.path are run keys
    assert parsed.args == {"retry.max": 7, "debate.agents": 4, "retry.backoff": 1.0, "label": "12"}
    assert isinstance(parsed.args["retry.backoff"], float)
    assert parsed.overrides == ["n=2", "model.path=/m", "n=3"]  # untouched, in order: Hydra's last wins
    assert parse_key_values(parsed.overrides) == {"n": 3, "model.path": "/m"}


@pytest.mark.parametrize("cls, args, fragment", [
    ("EvalArgs", ["retry.max=many"], "retry.max='many': expected an integer (retry.max is int)"),
    ("EvalArgs", ["retry.max=2.5"], "retry.max=2.5: expected an integer (retry.max is int)"),
    ("EvalArgs", ["retry.max_wait=[1]"], "retry.max_wait=[1]: expected a number (retry.max_wait is float)"),
    ("EvalArgs", ["debate.agentz=2"], "unknown key 'debate.agentz'; did you mean debate.agents?"),
    ("EvalArgs", ["debate.agents.k=2"], "unknown key 'debate.agents.k'; did you mean debate.agents?"),
    ("EvalArgs", ["debate=2"], "debate= is a section, not a key; valid: debate.agents=VALUE, debate.rounds=VALUE"),
    ("EvalArgs", ["make_pool=1"], "make_pool=1: valid: true or false"),  # OmegaConf would take 1 as true
    ("EvalArgs", ["policy=null"], "policy=None: expected a string (policy is str)"),
    ("EvalArgs", ["concurrency=2,3"], "a comma list is Hydra's multirun syntax"),
    ("ServeArgs", ["prot=1"], "unknown key 'prot'; did you mean port?"),
    ("ServeArgs", ["model.pth=/m"], "unknown key 'model.pth'; did you mean model.path?"),
    ("ServeArgs", ["max_tokens=true"], "max_tokens=True: expected an integer or null (max_tokens is int | null)"),
])
def test_eval_and_serve_keys_exit_2_naming_the_key_and_its_type_or_the_close_key(cls, args, fragment):
    from arena.config import verb_args
    from arena.config.verb_grammar import parse_nested_args

    with pytest.raises(BadArgument) as info:
        parse_nested_args(getattr(verb_args, cls), args, own_only=cls == "ServeArgs")
    assert fragment in str(info.value), str(info.value)


def test_the_serve_defaults_are_the_dataclass_fields():
    from arena.config.verb_args import ServeArgs
    from arena.config.verb_grammar import leaf_defaults
    from arena.evaluation.options import SERVE_DEFAULTS

    # ServeModelArgs: path None; port 8000
    assert SERVE_DEFAULTS == leaf_defaults(ServeArgs) and list(SERVE_DEFAULTS)[:2] == ["model.path", "port"]
    assert SERVE_DEFAULTS["model.path"] is None and SERVE_DEFAULTS["port"] == 8000


def test_help_shows_the_last_budget_given_twice():
    from arena.cli_help import help_text

    lines = help_text("train", TWICE).splitlines()
    assert any(line.startswith("  budget=stress ") for line in lines)
    steps = next(line for line in lines if line.startswith("  steps="))
    assert steps.startswith("  steps=40 ") and "[configs/budget/stress.yaml" in steps, steps
