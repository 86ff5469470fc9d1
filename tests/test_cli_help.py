"""`arena <verb> --help`: every verb exits 0 and lists every key it takes, with the meaning
written beside the key's definition (arena/cli_help.py, arena/config/field_docs.py)."""
import dataclasses

import pytest

from arena.cli import VERBS, main
from arena.config.field_docs import dataclass_docs
from arena.config.schema import RunConfig


def leaf_keys(cls, prefix=""):
    """The schema's dotted leaf keys, computed here independently of field_docs."""
    out = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out += leaf_keys(type(default), f"{prefix}{f.name}.") if dataclasses.is_dataclass(default) else [prefix + f.name]
    return out


def own_keys(verb):
    """The keys each verb's own parser accepts, read from where the parser reads them. A run
    config key is listed once: env.name is the env= group's, arm is set by the sweep, the
    budget is the budget= group's, the sweep's own keys are SweepArgs', and a sweep sets each
    cell's seed and name. The keys of sweep, search and status are their argument dataclasses'
    fields (arena.config.verb_args); eval's and serve's too, their sections as dotted keys."""
    from arena.config.verb_args import (EnvsArgs, EvalArgs, FindingsArgs, MethodsArgs, ReportArgs, SearchArgs,
                                        ServeArgs, StatusArgs, SweepArgs, TrainArgs)

    run = ["env", "budget", "model"] + [k for k in leaf_keys(RunConfig) if k not in ["env.name", "budget", "arm"]]
    sweep_run = [k for k in run if k not in ("env", "seed", "name")]
    return {"train": leaf_keys(TrainArgs) + run, "bc": run, "verl-config": run,
            "sweep": leaf_keys(SweepArgs) + sweep_run, "search": leaf_keys(SearchArgs) + sweep_run,
            "status": leaf_keys(StatusArgs), "report": leaf_keys(ReportArgs),
            "findings": leaf_keys(FindingsArgs), "methods": leaf_keys(MethodsArgs),
            "envs": ["play", "check", *leaf_keys(EnvsArgs), "<kwarg>"],
            "eval": leaf_keys(EvalArgs) + ["n", "seed"] + [k for k in run if k not in ("seed", "model")],
            "serve": leaf_keys(ServeArgs)}[verb]


@pytest.mark.parametrize("verb", list(VERBS))
def test_every_verb_help_lists_its_keys_once_and_exits_0(verb, capsys):
    assert main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: arena {verb}")
    # a key's line starts with two spaces; a long value's meaning continues on a deeper-indented line
    listed = [line.split()[0].split("=")[0] for line in out.splitlines() if line[:2] == "  " and line[2] != " "]
    assert sorted(listed) == sorted(own_keys(verb)), f"arena {verb} --help lists {listed}"


def test_help_never_runs_the_verb_and_help_verb_is_the_same(capsys, tmp_path):
    # steps=-3 would be exit 2 and out= would be created by a run: --help does neither
    assert main(["train", f"out={tmp_path / 'run'}", "steps=-3", "-h"]) == 0
    assert not (tmp_path / "run").exists()
    capsys.readouterr()
    assert main(["train", "-h"]) == 0
    first = capsys.readouterr().out
    assert main(["help", "train"]) == 0
    assert capsys.readouterr().out == first


def test_key_meanings_come_from_the_comments_beside_and_above_the_field():
    docs = {d.key: d for d in dataclass_docs(RunConfig)}
    # schema.py:  steps: int = 600  # SFT steps; with a band, ...  (beside)
    assert docs["bc.steps"].default == 600 and docs["bc.steps"].doc.startswith("SFT steps")
    # schema.py:  two comment lines above `prompt_template: str = "minimal"`, none beside
    assert docs["model.prompt_template"].doc.startswith("arena.agent.prompts template")
    assert docs["model.prompt_template"].default == "minimal"
    assert all(d.doc for d in docs.values()), [k for k, d in docs.items() if not d.doc]


def test_choices_are_listed_in_the_help(capsys):
    main(["train", "--help"])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("backend="))
    assert "valid: embedded | verl" in line


def leaf_defaults(cls, prefix=""):
    """{dotted key: default} of a dataclass's leaf fields, computed here as leaf_keys is."""
    out = {}
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.update(leaf_defaults(type(default), f"{prefix}{f.name}.") if dataclasses.is_dataclass(default)
                   else {prefix + f.name: default})
    return out


@pytest.mark.parametrize("verb, cls", [("sweep", "SweepArgs"), ("search", "SearchArgs"), ("status", "StatusArgs"),
                                       ("report", "ReportArgs"), ("findings", "FindingsArgs"),
                                       ("methods", "MethodsArgs"), ("envs", "EnvsArgs"), ("eval", "EvalArgs"),
                                       ("serve", "ServeArgs"), ("train", "TrainArgs")])
def test_a_verb_s_own_keys_are_its_dataclass_s_fields_with_type_default_and_comment(verb, cls, capsys):
    from arena.config import verb_args

    defaults = leaf_defaults(getattr(verb_args, cls))
    assert main([verb, "--help"]) == 0
    lines = {line.split()[0].split("=")[0]: line for line in capsys.readouterr().out.splitlines()
             if line[:2] == "  " and line[2] != " "}
    for key, default in defaults.items():
        shown = "-" if default is None else str(default).lower() if isinstance(default, bool) else str(default)
        # a long key=default (base_url=https://...) has its (type) meaning on the next line
        words = lines[key].split() + [""]
        assert words[0] == f"{key}={shown}", lines[key]
        assert words[1].startswith("(") or len(words) == 2, lines[key]  # (type)
    # verb_args.py:  fail_fast: bool = False  # stop launching cells after the first failed one
    if verb == "sweep":
        assert lines["fail_fast"].split(None, 1)[1] == "(bool) stop launching cells after the first failed one"
        assert lines["timeout_min"].split()[1:3] == ["(int", "|"]  # Optional[int]: int | null
    # RetryArgs:  max: int = 5  # retries after the first attempt of one request, an integer >= 0
    if verb == "eval":
        assert lines["retry.max"].split(None, 1)[1] == ("(int) retries after the first attempt of one request, an "
                                                        "integer >= 0")
        assert lines["max_tokens"].split()[1:4] == ["(int", "|", "null)"]
    # ServeModelArgs:  path: Optional[str] = None  # required: a local checkpoint folder ...
    if verb == "serve":
        assert lines["model.path"].split()[:4] == ["model.path=-", "(str", "|", "null)"]
        assert lines["port"].split(None, 1)[1] == "(int) the TCP port, an integer in 0..65535"
