"""The written environment protocol (arena/envs/spec.py): every registered environment declares
one SPEC, its env.kwargs are one typed dataclass that holds every default, and the hooks read
the parsed kwargs, never raw keywords with defaults of their own."""
import dataclasses
import inspect

import pytest

from arena.cli import main
from arena.envs import ENVS, EnvKwargsError, check_available, eval_size, parse_kwargs, spec, validation_size

HOOKS = ("check_available", "validation_size", "eval_size", "first_use_notice")


@pytest.mark.parametrize("name", sorted(ENVS))
def test_every_environment_declares_a_spec_with_a_frozen_kwargs_dataclass(name):
    env = spec(name)
    assert env.name == name
    assert dataclasses.is_dataclass(env.kwargs) and env.kwargs.__dataclass_params__.frozen
    # every field has a default: `make(name)` with no kwargs is a valid environment
    assert all(f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
               for f in dataclasses.fields(env.kwargs))


@pytest.mark.parametrize("name", sorted(ENVS))
def test_no_hook_or_constructor_restates_a_default(name):
    """One place for defaults: each hook takes the parsed kwargs (one parameter, no default) and
    the constructor takes **kwargs only, which it parses into the dataclass."""
    env = spec(name)
    for hook in HOOKS:
        fn = getattr(env, hook)
        if fn is not None:
            params = list(inspect.signature(fn).parameters.values())
            assert len(params) == 1 and params[0].default is inspect.Parameter.empty, (name, hook, params)
    params = list(inspect.signature(env.factory).parameters.values())
    assert [p.kind for p in params] == [inspect.Parameter.VAR_KEYWORD], (name, params)


def test_the_constructor_reads_its_defaults_from_the_dataclass():
    # one example per kind of field: sokoban's max_turns (15), shop's win_reward (10.0)
    from arena.envs import make

    assert make("sokoban").max_turns == spec("sokoban").kwargs().max_turns == 15
    assert make("shop", n_products=50).win_reward == spec("shop").kwargs().win_reward == 10.0
    assert make("sokoban", max_turns=7).max_turns == 7


def test_parse_types_values_and_names_the_valid_keys():
    # a value from the command line arrives as text; an int field converts "8" to 8
    kw = parse_kwargs("sokoban", max_turns="8")
    assert kw.max_turns == 8 and isinstance(kw.max_turns, int) and kw.num_boxes == 1
    with pytest.raises(EnvKwargsError, match=r"unknown env.kwargs key\(s\) dimm for env sokoban; valid: .*dim"):
        parse_kwargs("sokoban", dimm=7)
    with pytest.raises(EnvKwargsError, match="max_turns"):
        parse_kwargs("sokoban", max_turns="many")
    with pytest.raises(ValueError, match="valid: .*sokoban"):
        spec("sokobn")


def test_the_hooks_see_the_dataclass_defaults():
    # household's committed pool: 10 eval games (its manifest), no validation split; the large
    # pool's defaults (n_eval 256, validation 256) come from HouseholdKwargs, not from the hook
    assert eval_size("household") == 10 and validation_size("household") == 0
    assert eval_size("household", pool="large") == 256 and validation_size("household", pool="large") == 256
    assert eval_size("sokoban") is None and validation_size("shop") is None
    check_available("sokoban", dim=6)  # no hook: always available, but the keys are still checked
    with pytest.raises(EnvKwargsError, match="valid: "):
        check_available("sokoban", pool="large")


def test_a_wrongly_typed_env_kwarg_exits_2_before_anything_runs(capsys, tmp_path):
    assert main(["train", "env.kwargs.max_turns=many", f"results_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "max_turns" in err and "many" in err
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("env, kwargs, message", [
    ("sokoban", {"dim": "abc"}, "env.kwargs.dim='abc' for env sokoban; valid: an integer >= 4 or [rows, cols]"),
    ("sokoban", {"dim": 3}, "env.kwargs.dim=3 for env sokoban; valid: an integer >= 4"),
    ("sokoban", {"dim": [5, 2]}, "env.kwargs.dim=[5, 2] for env sokoban"),
    ("sokoban", {"num_boxes": 0}, "env.kwargs.num_boxes=0 for env sokoban; valid: an integer >= 1"),
    ("sokoban", {"max_turns": -1}, "env.kwargs.max_turns=-1"),
    ("tir_math", {"sandbox_timeout": 0}, "env.kwargs.sandbox_timeout=0.0 for env tir_math; valid: a finite number > 0"),
    ("tir_math", {"sandbox_timeout": -1}, "env.kwargs.sandbox_timeout=-1.0"),
    ("tir_math", {"output_chars": 0}, "env.kwargs.output_chars=0"),
    ("shop", {"n_products": 0}, "env.kwargs.n_products=0 for env shop; valid: an integer >= 1"),
    ("household", {"max_turns": 0}, "env.kwargs.max_turns=0 for env household"),
])
def test_a_value_out_of_range_is_refused_naming_the_range(env, kwargs, message):
    with pytest.raises(EnvKwargsError) as err:
        parse_kwargs(env, **kwargs)
    assert message in str(err.value)
    # the edges that are valid: dim 4 (a 2x2 floor inside the wall), [4, 6], a short positive timeout
    parse_kwargs("sokoban", dim=4), parse_kwargs("sokoban", dim=[4, 6]), parse_kwargs("tir_math", sandbox_timeout=0.01)


@pytest.mark.parametrize("verb, override", [("train", "env.kwargs.dim=abc"), ("sweep", "env.kwargs.dim=abc"),
                                            ("train", "env=tir_math env.kwargs.sandbox_timeout=0")])
def test_an_out_of_range_env_kwarg_exits_2_before_any_job(capsys, tmp_path, verb, override):
    args = [verb, *override.split(), f"results_dir={tmp_path}", "budget=smoke", "wandb.enabled=false"]
    if verb == "sweep":
        args += ["dimension=aggregation", "seeds=1", "launcher=debug"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"arena {verb}: ") and "valid: " in err and ("dim='abc'" in err or "sandbox_timeout=0" in err)
    assert not any(tmp_path.iterdir())  # no job, nothing written
