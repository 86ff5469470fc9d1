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
