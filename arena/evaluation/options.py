"""`arena eval` / `arena serve` arguments: the eval-only keys, their choices, and the run folder.

`arena eval key=value ...` takes the keys of EvalArgs (arena/config/verb_args.py), which the
command line hands over as the flat dict `{"retry.max": 3, ...}` of the keys it gives; every
other key (`env=`, `env.kwargs.*`, `model.path`, `model.prompt_template`, `eval.temperature`,
`out`, `results_dir`, ...) is a run config key and goes through the same composition and
checks as `arena train` (docs/design.md, Config paths and resolution order). `n=` is `eval.n`
and `seed=` is the first held-out episode: episode i of the eval plays `eval_seed(seed + i)`,
exactly the seeds a training run's eval plays when seed=0 (docs/eval.md, What arena eval runs).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from arena.config.verb_args import EvalArgs, ServeArgs, leaf_defaults

POLICIES = ("checkpoint", "openai")
PARADIGMS = ("sla", "debate", "aggressive_debate")
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")

# eval-only keys and their defaults, flat ({"retry.max": 5, ...}): the fields of EvalArgs and
# ServeArgs (arena/config/verb_args.py, where each key's type, default and meaning are written
# once; docs/eval.md, Keys and arena serve)
DEFAULTS: dict[str, Any] = leaf_defaults(EvalArgs)
SERVE_DEFAULTS: dict[str, Any] = leaf_defaults(ServeArgs)
SERVE_DEVICES = ("cpu", "cuda")
OPENAI_MAX_TOKENS = 1024


class BadEvalInput(ValueError):
    """A user error: exit code 2, with the key and its valid values in the message."""


@dataclass
class EvalOptions:
    policy: str
    paradigm: str
    model: Optional[str]
    base_url: str
    api_key_env: str
    label: str
    agents: int
    rounds: int
    concurrency: int
    max_retries: int
    backoff: float
    max_wait: float
    timeout: float
    max_tokens: int
    max_tokens_field: str
    sampling_params: bool
    chunk: int

    def public(self) -> dict:
        """The options as written to config.yaml: the key's variable NAME, never its value."""
        return asdict(self)


def checkpoint_dir(model_path: str) -> Path:
    """The HF folder `model.path` names: a run folder means its final policy, `<run>/steps/<step>`
    a saved step (arena.runs.policy.policy_folder); BadEvalInput when the run has no such policy."""
    from arena.runs.policy import NoPolicy, policy_folder

    try:
        return policy_folder(model_path)
    except NoPolicy as exc:
        raise BadEvalInput(f"model.path: {exc}") from None


def split_args(args: dict) -> tuple[dict, dict]:
    """(eval-only options, run config overrides). `n` -> eval.n; `seed` stays a config key."""
    opts, overrides = {}, {}
    for key, value in args.items():
        if key in DEFAULTS:
            opts[key] = value
        elif key == "n":
            overrides["eval.n"] = value
        else:
            overrides[key] = value
    return opts, overrides


def _int(key: str, value: Any, low: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadEvalInput(f"{key}={value!r}: expected an integer >= {low}") from None
    if number < low or isinstance(value, bool):
        raise BadEvalInput(f"{key}={value!r}: expected an integer >= {low}")
    return number


def _float(key: str, value: Any, low: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadEvalInput(f"{key}={value!r}: expected a number >= {low}") from None
    if number < low:
        raise BadEvalInput(f"{key}={value!r}: expected a number >= {low}")
    return number


def build_options(opts: dict, cfg) -> EvalOptions:
    """Check the eval-only keys against their choices (BadEvalInput names key and valid values)."""
    o = {**DEFAULTS, **opts}
    if o["policy"] not in POLICIES:
        raise BadEvalInput(f"unknown policy {o['policy']!r}; valid: {', '.join(POLICIES)}")
    if o["paradigm"] not in PARADIGMS:
        raise BadEvalInput(f"unknown paradigm {o['paradigm']!r}; valid: {', '.join(PARADIGMS)}")
    if o["policy"] == "openai":
        if not o["model"] or not isinstance(o["model"], str):
            raise BadEvalInput("policy=openai needs model=NAME (the model id the endpoint serves)")
        if not str(o["base_url"]).startswith(("http://", "https://")):
            raise BadEvalInput(f"base_url={o['base_url']!r}: expected an http:// or https:// URL")
        label = o["label"] or o["model"]
    else:
        if o["model"] is not None:
            raise BadEvalInput("model=NAME is for policy=openai; policy=checkpoint takes model.path=DIR")
        if not cfg.model.path:
            raise BadEvalInput("policy=checkpoint needs model.path=DIR (an arena or local HF checkpoint)")
        if not Path(cfg.model.path).is_dir():
            raise BadEvalInput(f"model.path={cfg.model.path!r}: no such checkpoint folder")
        if o["paradigm"] != "sla":
            raise BadEvalInput(f"paradigm={o['paradigm']} needs a chat endpoint: serve the checkpoint "
                               "(arena serve model.path=...) and use policy=openai; valid for policy=checkpoint: sla")
        from arena.runs.layout import STEPS_DIR

        # e.g. <bc hash>/model, <cell_id>/policy, <cell_id>/steps/50 (a step alone would not name its run)
        parts = Path(cfg.model.path).resolve().parts
        label = o["label"] or "/".join(parts[-3:] if parts[-2:-1] == (STEPS_DIR,) else parts[-2:])
    if o["max_tokens_field"] not in MAX_TOKENS_FIELDS:
        raise BadEvalInput(f"unknown max_tokens_field {o['max_tokens_field']!r}; valid: {', '.join(MAX_TOKENS_FIELDS)}")
    if not isinstance(o["sampling_params"], bool):
        raise BadEvalInput(f"sampling_params={o['sampling_params']!r}; valid: true, false")
    default_tokens = OPENAI_MAX_TOKENS if o["policy"] == "openai" else cfg.env.max_new_tokens
    if o["paradigm"] == "sla":  # one agent, one round: the debate keys do not apply (nor enter the eval id)
        o["debate.agents"], o["debate.rounds"] = 1, 1
    return EvalOptions(
        policy=o["policy"], paradigm=o["paradigm"], model=o["model"], base_url=str(o["base_url"]).rstrip("/"),
        api_key_env=str(o["api_key_env"] or ""), label=str(label),
        agents=_int("debate.agents", o["debate.agents"], 2 if "debate" in o["paradigm"] else 1),
        rounds=_int("debate.rounds", o["debate.rounds"], 1), concurrency=_int("concurrency", o["concurrency"], 1),
        max_retries=_int("retry.max", o["retry.max"], 0), backoff=_float("retry.backoff", o["retry.backoff"], 0.0),
        max_wait=_float("retry.max_wait", o["retry.max_wait"], 0.0), timeout=_float("timeout", o["timeout"], 0.001),
        max_tokens=_int("max_tokens", o["max_tokens"] if o["max_tokens"] is not None else default_tokens, 1),
        max_tokens_field=o["max_tokens_field"], sampling_params=o["sampling_params"], chunk=_int("chunk", o["chunk"], 1),
    )


# Options that do not change what an episode computes: left out of the eval id, so a rerun
# with more concurrency or patience reuses the cached episodes.
NOT_IN_EVAL_ID = ("label", "api_key_env", "max_tokens_field", "concurrency", "max_retries", "backoff", "max_wait",
                  "timeout", "chunk")


def eval_id(cfg, options: EvalOptions) -> str:
    """A hash of what decides the episodes' outcomes: environment, prompts, decoding, policy."""
    return _hash(_eval_inputs(cfg, options))


def pool_id(cfg, options: EvalOptions) -> str:
    """eval_id without the first episode (`seed`): evals with the same pool_id play the same
    episode i identically, so the report pools them, counting each episode index once."""
    return _hash({k: v for k, v in _eval_inputs(cfg, options).items() if k != "seed"})


def _hash(what: dict) -> str:
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _eval_inputs(cfg, options: EvalOptions) -> dict:
    from arena.config import to_plain

    return {
        # eval.n is left out: episode i is the same whatever n, so a longer eval reuses a shorter one's
        "env": to_plain(cfg.env), "eval": {k: v for k, v in to_plain(cfg.eval).items() if k != "n"},
        "seed": int(cfg.seed),
        "prompt_template": cfg.model.prompt_template,
        "model_path": str(Path(cfg.model.path).resolve()) if options.policy == "checkpoint" else None,
        "model_files": _file_stamps(cfg.model.path) if options.policy == "checkpoint" else None,
        "options": {k: v for k, v in options.public().items() if k not in NOT_IN_EVAL_ID},
    }


def _file_stamps(folder: str) -> list:
    """(name, size, mtime) of the checkpoint's files: a checkpoint rewritten in place gets a new
    eval id, so its cached episodes are never mixed with the old ones."""
    return sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in Path(folder).iterdir() if p.is_file())


def eval_dir(cfg, options: EvalOptions) -> Path:
    """`out`, else `<results_dir>/evals/<eval_id>` (docs/eval.md, Run folder)."""
    if cfg.out:
        return Path(cfg.out).resolve()
    from arena.runs.layout import Results

    return Results.of(cfg).eval_run(eval_id(cfg, options))
