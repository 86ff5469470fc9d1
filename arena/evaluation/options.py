"""`arena eval` / `arena serve` arguments: the eval's id and run folder, the serve keys.

`arena eval key=value ...` takes the keys of EvalArgs (arena/config/verb_args.py, which checks
them: `EvalArgs.checked`); every other key (`env=`, `env.kwargs.*`, `model.path`,
`model.prompt_template`, `eval.temperature`, `out`, `results_dir`, ...) is a run config key and
goes through the same composition and checks as `arena train` (docs/design.md, Config paths and
resolution order). `n=` is `eval.n` and `seed=` is the first held-out episode: episode i of the
eval plays `eval_seed(seed + i)`, exactly the seeds a training run's eval plays when seed=0
(docs/eval.md, What arena eval runs).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from arena.config import to_plain
from arena.config.args import BadArgument
from arena.config.verb_args import EvalArgs, ServeArgs
from arena.config.verb_grammar import leaf_defaults
from arena.runs.layout import Results, STEPS_DIR
from arena.runs.policy import NoPolicy, policy_folder

# serve's keys and their defaults, flat ({"model.path": None, ...}): the fields of ServeArgs
# (arena/config/verb_args.py, where each key's type, default and meaning are written once;
# docs/eval.md, arena serve)
SERVE_DEFAULTS: dict[str, Any] = leaf_defaults(ServeArgs)
SERVE_DEVICES = ("cpu", "cuda")


class BadEvalInput(BadArgument):
    """A user error: exit code 2, with the key and its valid values in the message."""


def checkpoint_dir(model_path: str) -> Path:
    """The HF folder `model.path` names: a run folder means its final policy, `<run>/steps/<step>`
    a saved step (arena.runs.policy.policy_folder); BadEvalInput when the run has no such policy."""
    try:
        return policy_folder(model_path)
    except NoPolicy as exc:
        raise BadEvalInput(f"model.path: {exc}") from None


def checked_args(args: EvalArgs, cfg) -> EvalArgs:
    """`args.checked(cfg)` with a checkpoint's label filled in: its folder, named by the parts
    that say what it is (e.g. <bc hash>/model, <cell_id>/policy, <cell_id>/steps/50: a step
    alone would not name its run)."""
    from dataclasses import replace

    checked = args.checked(cfg)
    if checked.label is not None:
        return checked
    parts = Path(cfg.model.path).resolve().parts
    return replace(checked, label="/".join(parts[-3:] if parts[-2:-1] == (STEPS_DIR,) else parts[-2:]))


def recorded(args: EvalArgs) -> dict:
    """The checked eval keys as config.yaml's `evaluation` block records them and the eval id
    hashes them: flat, under the names they have had since the first `arena eval` (agents,
    max_retries, ...), so an eval keeps its id and its cached episodes. The key's variable
    NAME (api_key_env), never its value."""
    return {"policy": args.policy, "paradigm": args.paradigm, "model": args.model, "base_url": args.base_url,
            "api_key_env": args.api_key_env, "label": args.label, "agents": args.debate.agents,
            "rounds": args.debate.rounds, "concurrency": args.concurrency, "max_retries": args.retry.max,
            "backoff": args.retry.backoff, "max_wait": args.retry.max_wait, "timeout": args.timeout,
            "max_tokens": args.max_tokens, "max_tokens_field": args.max_tokens_field,
            "sampling_params": args.sampling_params, "chunk": args.chunk}


# Options that do not change what an episode computes: left out of the eval id, so a rerun
# with more concurrency or patience reuses the cached episodes.
NOT_IN_EVAL_ID = ("label", "api_key_env", "max_tokens_field", "concurrency", "max_retries", "backoff", "max_wait",
                  "timeout", "chunk")


def eval_id(cfg, options: EvalArgs) -> str:
    """A hash of what decides the episodes' outcomes: environment, prompts, decoding, policy."""
    return _hash(_eval_inputs(cfg, options))


def pool_id(cfg, options: EvalArgs) -> str:
    """eval_id without the first episode (`seed`): evals with the same pool_id play the same
    episode i identically, so the report pools them, counting each episode index once."""
    return _hash({k: v for k, v in _eval_inputs(cfg, options).items() if k != "seed"})


def _hash(what: dict) -> str:
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _eval_inputs(cfg, options: EvalArgs) -> dict:
    return {
        # eval.n is left out: episode i is the same whatever n, so a longer eval reuses a shorter one's
        "env": to_plain(cfg.env), "eval": {k: v for k, v in to_plain(cfg.eval).items() if k != "n"},
        "seed": int(cfg.seed),
        "prompt_template": cfg.model.prompt_template,
        "model_path": str(Path(cfg.model.path).resolve()) if options.policy == "checkpoint" else None,
        "model_files": _file_stamps(cfg.model.path) if options.policy == "checkpoint" else None,
        "options": {k: v for k, v in recorded(options).items() if k not in NOT_IN_EVAL_ID},
    }


def _file_stamps(folder: str) -> list:
    """(name, size, mtime) of the checkpoint's files: a checkpoint rewritten in place gets a new
    eval id, so its cached episodes are never mixed with the old ones."""
    return sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in Path(folder).iterdir() if p.is_file())


def eval_dir(cfg, options: EvalArgs) -> Path:
    """`out`, else `<results_dir>/evals/<eval_id>` (docs/eval.md, Run folder)."""
    if cfg.out:
        return Path(cfg.out).resolve()
    return Results.of(cfg).eval_run(eval_id(cfg, options))
