"""The parsed `arena eval` command line the tests hand to the eval pipeline, as the CLI makes it
(arena/cli.py, `_eval`): EvalArgs with the eval's own keys set, the keys given, and every other
key a run config key."""
from arena.config.verb_args import EvalArgs
from arena.config.verb_grammar import Parsed, leaf_fields, nested_dataclass


def eval_args(keys: dict) -> Parsed:
    leaves = dict(leaf_fields(EvalArgs))
    own = {k: v for k, v in keys.items() if k in leaves}
    return Parsed(nested_dataclass(EvalArgs, own), frozenset(own), {k: v for k, v in keys.items() if k not in leaves})
