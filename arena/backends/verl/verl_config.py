"""Generate verl's trainer config from an arena run config (docs/design.md, verl backend).

verl's own `ppo_trainer.yaml` is composed once with Hydra (from verl's package), frozen with
OmegaConf struct mode, and our values are written into it, so an unknown key raises. The
result is validated by verl's own dataclasses (`omega_conf_to_dataclass` on the actor, the
rollout and the algorithm sections: `FSDPActorConfig`, `RolloutConfig`, `AlgoConfig`).

Batch sizes are in turn-samples (one actor row per LLM call). verl counts its mini-batch in
prompts and multiplies it by `rollout.n`, so
    verl ppo_mini_batch_size = ceil(turn_samples_per_mini_batch / group_size)
with turn_samples_per_mini_batch = `ppo_mini_batch_size` if set, else
batch_envs * group_size / ppo_num_mini_batches (one turn per trajectory as the floor). This
static value only passes verl's config checks: the per-turn fan-out gives more rows, and the
trainer runs verl's update once per mini-batch of the embedded backend's split, so verl takes
the embedded backend's optimizer steps on the same rows (mini_batches.py).
Micro-batches (`micro_batch_rows`): the largest divisor of a mini-batch's rows
(ppo_mini_batch_size * group_size) that is at most `micro_batch_size`, for the actor's update
and for the old and reference log-probs (verl's validate_config requires all three). verl
asserts that every micro-batch is full (`data size must be divisible by ...
micro_batch_size_per_gpu`); the trainer pads each mini-batch to whole micro-batches
(mini_batches.mini_batch_layout).
LR schedule: constant, no warmup (`validate` refuses others). The embedded backend has no
schedule, and verl steps its scheduler at the end of each update call, which the trainer makes
once per mini-batch, so a warmup or cosine schedule would also run k * ppo_epochs times too fast.

The run's `verl.<dotted.path>=value` keys (cfg.verl, `user_overrides`) go into verl's config
last, after the runtime keys (main.run_verl_config); a path that is not in verl's schema raises a
ValueError listing the valid keys at that level. `validate` then runs verl's own checks: its
dataclasses, its `validate_config`, and the GPU layout's (gpu_layout.check_layout).
"""
from __future__ import annotations

import copy
import functools
import math
import os
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf, open_dict

from arena.bc.key import bc_hash
from arena.config import to_plain
from arena.config.load import resolve_po
from arena.runs.layout import CKPT_DIR, Results, run_dir

from .advantages import estimator_name
from .agg_modes import VERL_AGG_MODE
from .gpu_layout import check_layout

from .policy_export import HF_SAVE_CONTENTS, RESUME_LOAD_CONTENTS
from .policy_loss import ArenaPolicyLossConfig
from .recipe_lint import lint

AGENT_LOOP_NAME = "arena_agent"


@functools.lru_cache(maxsize=1)
def _base() -> DictConfig:
    """verl's composed ppo_trainer.yaml (Hydra, verl's config dir), struct mode on."""
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose("ppo_trainer")
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_struct(cfg, True)
    return cfg


def start_model_path(cfg: DictConfig) -> str:
    """The checkpoint RL starts from, chosen as main.initial_model_path chooses it but without
    touching disk: `model.path` (unless bc.source=rejection, where it only plays the rejection
    rollouts), else the run's BC checkpoint <results_dir>/bc/<bc_hash>/model (the bc floor's key,
    arena.runs.layout.Results.bc_model). run_training sets the path initial_model_path returns
    (a run folder's final policy; the BC checkpoint, trained first when not cached)."""
    if cfg.model.path and cfg.bc.source != "rejection":
        return str(cfg.model.path)
    return str(Results.of(cfg).bc_model(bc_hash(cfg)))


def arena_values(cfg: DictConfig, *, rollout_engine: str = "vllm", ranks: int = 1) -> dict[str, Any]:
    """Our run config -> {verl dotted key: value} (module docstring); `ranks`: the run's GPUs
    (data-parallel ranks), over which verl splits each mini-batch."""
    po = resolve_po(cfg)
    turn_samples = cfg.ppo_mini_batch_size or max(1, cfg.batch_envs * cfg.group_size // cfg.ppo_num_mini_batches)
    # verl ppo_mini_batch_size = ceil(turn samples / group_size): verl multiplies by rollout.n
    mini = max(1, math.ceil(turn_samples / cfg.group_size))
    micro = micro_batch_rows(cfg, mini, ranks)
    run_name = f"{cfg.name or 'train'}/{cfg.arm or po.method or 'custom'}/{cfg.env.name}"
    actor = "actor_rollout_ref.actor."
    rollout = "actor_rollout_ref.rollout."
    return {
        "actor_rollout_ref.model.path": start_model_path(cfg),
        "data.train_batch_size": cfg.batch_envs,
        "data.max_response_length": cfg.env.max_new_tokens,
        "data.seed": cfg.seed,
        rollout + "name": rollout_engine,
        rollout + "mode": "async",
        rollout + "n": cfg.group_size,
        rollout + "temperature": cfg.temperature,
        rollout + "top_p": cfg.top_p,
        rollout + "response_length": cfg.env.max_new_tokens,
        rollout + "agent.default_agent_loop": AGENT_LOOP_NAME,
        rollout + "val_kwargs.temperature": cfg.eval.temperature,
        rollout + "val_kwargs.do_sample": cfg.eval.temperature > 0,
        actor + "ppo_mini_batch_size": mini,
        actor + "ppo_micro_batch_size_per_gpu": micro,
        rollout + "log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        actor + "ppo_epochs": cfg.ppo_epochs,
        actor + "optim.lr": cfg.lr,
        actor + "grad_clip": cfg.grad_clip,
        actor + "use_kl_loss": cfg.kl_coef > 0,
        actor + "kl_loss_coef": cfg.kl_coef,
        actor + "kl_loss_type": "low_var_kl",
        actor + "entropy_coeff": cfg.entropy_coef,
        actor + "calculate_entropy": True,
        # each checkpoint also holds the actor as an HF model folder, exported to <run>/steps/<k>/
        # and <run>/policy/ (policy_export.py); a resume loads the sharded state only
        actor + "checkpoint.save_contents": list(HF_SAVE_CONTENTS),
        actor + "checkpoint.load_contents": list(RESUME_LOAD_CONTENTS),
        actor + "loss_agg_mode": VERL_AGG_MODE[po.aggregation],
        # the run's whole resolved PO, once: the loss and the trainer both read it here (policy_loss.py)
        actor + "policy_loss": ArenaPolicyLossConfig.section(po),
        # no reward-loop workers: arena's agent loop sets each trajectory's reward_score (the
        # episode return), so verl never calls them (agent_loop.py), and verl's default of 8 is
        # 8 Ray processes that import torch and verl for nothing (docs/verl.md, Where a CPU
        # cell's time goes); verl calls them only with a reward model, which arena never enables
        "reward.num_workers": 0,
        "algorithm.adv_estimator": estimator_name(po.advantage),
        "algorithm.use_kl_in_reward": False,
        "trainer.logger": ["console", "wandb"],
        "trainer.project_name": cfg.wandb.project,
        "trainer.experiment_name": run_name,
        "trainer.total_training_steps": cfg.steps,
        "trainer.save_freq": cfg.save_freq,
        "trainer.test_freq": cfg.test_freq,
        "trainer.val_before_train": True,
        "trainer.resume_mode": "auto",
        "trainer.default_local_dir": str(run_dir(cfg) / CKPT_DIR),  # as main.runtime_overrides: RunFolder.ckpt
    }


def micro_batch_rows(cfg: DictConfig, mini_prompts: int, ranks: int = 1) -> int:
    """Rows per forward/backward on one rank: the largest divisor of a rank's share of the
    mini-batch's rows (mini_prompts * group_size / ranks) that is at most `micro_batch_size`
    (module docstring). ValueError when the mini-batch does not split evenly over the ranks
    (verl divides ppo_mini_batch_size * n by the world size)."""
    mini_rows = int(mini_prompts) * int(cfg.group_size)
    if mini_rows % ranks:
        raise ValueError(f"a mini-batch of {mini_rows} turn-samples ({mini_prompts} prompts x group_size "
                         f"{cfg.group_size}) does not split over {ranks} GPUs; valid: ppo_mini_batch_size (or "
                         f"batch_envs x group_size / ppo_num_mini_batches) a multiple of {ranks * int(cfg.group_size)}")
    per_rank = mini_rows // ranks
    cap = max(1, min(int(cfg.micro_batch_size), per_rank))
    return max(d for d in range(1, cap + 1) if per_rank % d == 0)


def _dataclass_fields(node: DictConfig) -> set[str]:
    """The field names of the dataclass a config section instantiates (its `_target_`), else none."""
    import dataclasses
    import importlib

    target = node.get("_target_") if "_target_" in node else None
    if not isinstance(target, str) or "." not in target:
        return set()
    module, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return set()
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


def _set(cfg: DictConfig, key: str, value: Any) -> None:
    """Write `value` at dotted `key`; ValueError listing the valid keys if the path is unknown."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    present = isinstance(node, DictConfig) and leaf in list(node.keys())  # `in` is False for ??? values
    if not present and not (isinstance(node, DictConfig) and leaf in _dataclass_fields(node)):
        where = node if isinstance(node, DictConfig) else cfg
        raise ValueError(f"unknown verl config key {key!r}; valid keys under {parent or '<root>'!r}: "
                         f"{', '.join(sorted(str(k) for k in where.keys()))}")
    if not present:  # a field of the section's dataclass that verl's yaml leaves out (e.g. mixed_precision)
        with open_dict(node):
            node[leaf] = value
    elif key.endswith("actor.policy_loss"):
        with open_dict(node):  # our subclass adds fields to verl's PolicyLossConfig section
            node[leaf] = OmegaConf.merge(node[leaf], value)
    else:
        node[leaf] = value


def user_overrides(cfg: DictConfig) -> dict[str, Any]:
    """The run's `verl.*` keys (cfg.verl, nested as `verl.a.b=v` reads) as {dotted verl key: value}:
    the walk goes down while verl's own config has a section at the path, so a value is set at a
    leaf of verl's config, or whole at a path verl's config lacks (`_set` then names the valid keys)."""
    out: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value and isinstance(OmegaConf.select(_base(), path), DictConfig):
                walk(value, path + ".")
            else:
                out[path] = value

    walk(to_plain(cfg.get("verl")) or {}, "")
    return out


def config_problem(cfg: DictConfig) -> str | None:
    """What is wrong with a run config for verl before any GPU count is known (a sweep's driver
    checks every cell with it): the pretrained-model lint (recipe_lint), and each `verl.*` key
    against verl's schema. None when nothing is."""
    try:
        lint(cfg)
        out = copy.deepcopy(_base())
        for key, value in user_overrides(cfg).items():
            try:
                _set(out, key, value)
            except ValueError as exc:
                raise ValueError(f"verl.{key}: {exc}") from None
    except ValueError as exc:
        return str(exc)
    return None


def build_verl_config(cfg: DictConfig, extra: Mapping[str, Any] = ()) -> DictConfig:
    """The verl config of an arena run config: arena's values, then `extra` (the run's runtime
    and dataset keys, main.run_verl_config), then the run's own `verl.*` keys (cfg.verl), each
    checked against verl's schema; then verl's validation (`validate`)."""
    extra, user = dict(extra), user_overrides(cfg)
    world = {**extra, **user}  # the ranks verl splits a mini-batch over, the user's count included
    ranks = int(world.get("trainer.n_gpus_per_node", 1) or 1) * int(world.get("trainer.nnodes", 1) or 1)
    out = copy.deepcopy(_base())
    for key, value in {**arena_values(cfg, ranks=ranks), **extra}.items():
        _set(out, key, value)
    for key, value in user.items():
        try:
            _set(out, key, value)
        except ValueError as exc:
            raise ValueError(f"verl.{key}: {exc}") from None
    validate(out)
    return out


def validate(verl_cfg: DictConfig) -> dict[str, Any]:
    """Instantiate verl's dataclasses for the sections we write (raises on a bad value)."""
    from verl.utils.config import omega_conf_to_dataclass

    sections = {"actor": verl_cfg.actor_rollout_ref.actor, "rollout": verl_cfg.actor_rollout_ref.rollout,
                "algorithm": verl_cfg.algorithm}
    _check_constant_lr(verl_cfg.actor_rollout_ref.actor.optim)
    _verl_validate_config(verl_cfg)
    out = {}
    for name, node in sections.items():
        try:
            out[name] = omega_conf_to_dataclass(node)
        except ValueError:
            raise
        except Exception as exc:  # omegaconf errors, verl's asserts in __post_init__
            detail = " ".join(line.strip() for line in str(exc).splitlines() if "full_key" not in line)
            raise ValueError(f"verl rejected the {name} config: {detail}") from exc
    return out


def _verl_validate_config(verl_cfg: DictConfig) -> None:
    """verl's own check of a whole trainer config (`verl.utils.config.validate_config`, what its
    TaskRunner runs first), as ValueError; its success line goes to stderr, not to the YAML on stdout."""
    import contextlib
    import sys

    from verl.trainer.ppo.utils import need_reference_policy
    from verl.utils.config import validate_config

    check_layout(verl_cfg)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            validate_config(verl_cfg, use_reference_policy=need_reference_policy(verl_cfg), use_critic=False)
    except ValueError:
        raise
    except Exception as exc:  # verl asserts
        raise ValueError(f"verl rejected the config: {exc}") from exc


def _check_constant_lr(optim: DictConfig) -> None:
    """ValueError unless the actor's LR schedule is constant without warmup (module docstring)."""
    schedule = str(optim.get("lr_scheduler_type", "constant"))
    steps, ratio = optim.get("lr_warmup_steps", -1), float(optim.get("lr_warmup_steps_ratio", 0.0) or 0.0)
    if schedule != "constant" or (steps is not None and int(steps) > 0) or ratio > 0:
        raise ValueError(
            f"actor LR schedule {schedule!r} with lr_warmup_steps={steps}, lr_warmup_steps_ratio={ratio} is not "
            "supported on verl (the embedded backend has none, and the scheduler steps once per mini-batch); valid: "
            "optim.lr_scheduler_type=constant, optim.lr_warmup_steps<=0, optim.lr_warmup_steps_ratio=0")
