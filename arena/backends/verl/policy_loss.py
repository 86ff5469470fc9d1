"""arena's policy-gradient term, registered in verl's policy-loss registry as "arena".

verl 0.9.1 `workers/utils/losses.py::ppo_loss` calls, per micro-batch,
    policy_loss_fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config,
                   rollout_is_weights)
with `config` the actor's `ActorConfig`, after setting `config.global_batch_info` =
{dp_size, batch_num_tokens, global_batch_size, loss_scale_factor}. It then adds the entropy and
KL terms itself with `agg_loss(..., loss_agg_mode, **config.global_batch_info)`. So this loss
returns the PG term only, aggregated over the same global counts:

    verl agg_loss:  token_mean = sum(L M) / batch_num_tokens * dp_size
                    seq modes  = sum_rows(...) / global_batch_size * dp_size [/ loss_scale_factor]
    arena AGG with  AggNorm(num_tokens = batch_num_tokens / dp_size,
                            num_seqs   = global_batch_size / dp_size,
                            horizon    = loss_scale_factor)
gives the same value (x / (n / d) = x / n * d). DDP/FSDP then averages gradients over the d
ranks, so the step sees sum over the global mini-batch / global count, as arena's
`agg_norm=global` does on one process.

Settings live in `ArenaPolicyLossConfig`, a subclass of verl's `PolicyLossConfig` selected
with `actor.policy_loss._target_` (verl's own class stays untouched, and its structured config
keeps rejecting unknown keys). Its one arena field, `po`, is the run's whole resolved PO as plain
data (`ResolvedPO.to_dict()`: all five members, agg_norm, every explicit hyperparameter, method
and group). This section is the verl backend's ONE channel for the PO (docs/design.md, Floors):
the workers' loss reads it here (`resolved()`), and the trainer on the driver reads the same
section of the same verl config (`resolved_po`), so both use one object-equal ResolvedPO; nothing
is re-resolved from the run folder and no member is filled in. `po.agg_norm=per_microbatch` is
not supported on verl: verl aggregates KL and entropy over the global counts, so a
per-micro-batch PG term would mix two normalisations; it raises a ValueError.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from verl.trainer.ppo import core_algos
from verl.workers.config import PolicyLossConfig

from .agg_modes import VERL_AGG_MODE
from arena.po.aggregation import AggNorm
from arena.po.compose import ResolvedPO, policy_loss

from .registry import register_once

LOSS_NAME = "arena"
TARGET = "arena.backends.verl.policy_loss.ArenaPolicyLossConfig"


@dataclass
class ArenaPolicyLossConfig(PolicyLossConfig):
    """verl's PolicyLossConfig plus the run's resolved PO (module docstring; docs/design.md,
    Config paths and resolution order).

    `po` is `ResolvedPO.to_dict()`: checked here (members, agg_norm, hyperparameters against the
    members' signatures), so a wrong hyperparameter raises instead of being dropped. It has no
    usable default: a section without the run's PO is an error, never a made-up member."""

    loss_mode: str = LOSS_NAME
    po: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if not self.resolved().global_norm:
            raise ValueError(f"po.agg_norm={self.po['agg_norm']!r} is not supported on verl; valid: global")

    @classmethod
    def section(cls, po: ResolvedPO) -> dict[str, Any]:
        """The `actor.policy_loss` config section of a run: the whole resolved PO, nothing left out."""
        return {"_target_": TARGET, "loss_mode": LOSS_NAME, "po": po.to_dict()}

    @classmethod
    def of(cls, po: ResolvedPO) -> "ArenaPolicyLossConfig":
        """The config object verl would instantiate from `section(po)`."""
        return cls(po=po.to_dict())

    def resolved(self) -> ResolvedPO:
        """The run's ResolvedPO, exactly as the section carries it (ValueError if it is not one)."""
        return ResolvedPO.from_dict(self.po)


def resolved_po(verl_config) -> ResolvedPO:
    """The run's ResolvedPO from a verl config (`actor_rollout_ref.actor.policy_loss`), built the
    way verl's workers build their loss config (its `_target_`, `omega_conf_to_dataclass`), so the
    trainer and the loss read one channel."""
    from verl.utils.config import omega_conf_to_dataclass

    section = verl_config.actor_rollout_ref.actor.policy_loss
    settings = omega_conf_to_dataclass(section)
    if not isinstance(settings, ArenaPolicyLossConfig):
        raise ValueError(f"actor_rollout_ref.actor.policy_loss must be _target_={TARGET} (the run's resolved PO); "
                         f"got {type(settings).__name__}")
    return settings.resolved()


def norm_from_global_batch_info(info: dict[str, Any], mask: torch.Tensor) -> AggNorm:
    """AggNorm equal to verl's agg_loss denominators (module docstring). Without
    batch_num_tokens / global_batch_size (and dp_size 1), verl uses the micro-batch's own
    counts, i.e. AggNorm.of(mask)."""
    dp_size = _scalar(info.get("dp_size")) or 1.0
    tokens = _scalar(info.get("batch_num_tokens"))
    seqs = _scalar(info.get("global_batch_size"))
    horizon = _scalar(info.get("loss_scale_factor"))
    local = AggNorm.of(mask, horizon=horizon)
    if dp_size > 1 and (tokens is None or seqs is None):
        raise ValueError(f"global_batch_info: batch_num_tokens and global_batch_size are required when dp_size > 1, got {info}")
    # N_tok = batch_num_tokens / dp, N_seq = global_batch_size / dp, H = loss_scale_factor
    return AggNorm(
        num_tokens=local.num_tokens if tokens is None else tokens / dp_size,
        num_seqs=local.num_seqs if seqs is None else seqs / dp_size,
        horizon=horizon,
    )


def _scalar(v) -> Optional[float]:
    if v is None:
        return None
    return float(v.item()) if isinstance(v, torch.Tensor) else float(v)


def arena_policy_loss(
    old_log_prob: torch.Tensor,  # [B, T]
    log_prob: torch.Tensor,  # [B, T], with grad
    advantages: torch.Tensor,  # [B, T]
    response_mask: torch.Tensor,  # [B, T] bool (verl) or 0/1
    loss_agg_mode: str = "token-mean",
    config=None,  # verl ActorConfig whose .policy_loss is an ArenaPolicyLossConfig
    rollout_is_weights: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's PolicyLossFn signature around `arena.po.compose.policy_loss` (PG term only)."""
    if config is None or not isinstance(config.policy_loss, ArenaPolicyLossConfig):
        got = None if config is None else type(config.policy_loss).__name__
        raise ValueError(f"loss_mode 'arena' needs actor.policy_loss._target_={TARGET}; got {got}")
    if rollout_is_weights is not None:
        raise ValueError("loss_mode 'arena' does not take rollout_is_weights; set algorithm.rollout_correction off")
    po = config.policy_loss.resolved()
    expected_mode = VERL_AGG_MODE[po.aggregation]
    if loss_agg_mode != expected_mode:
        raise ValueError(
            f"actor.loss_agg_mode={loss_agg_mode!r} disagrees with policy_loss.po.aggregation="
            f"{po.aggregation!r}; valid: {expected_mode!r} (KL/entropy use verl's mode)"
        )
    mask = response_mask.to(log_prob.dtype)  # [B, T] 0/1
    norm = norm_from_global_batch_info(dict(config.global_batch_info or {}), mask)
    pg, metrics = policy_loss(po, log_prob, old_log_prob, advantages, mask, norm=norm)
    # verl's own name for the masked mean of old - logp, so its dashboards keep working
    metrics["actor/ppo_kl"] = metrics["actor/off_policy_kl"]
    return pg, metrics


def register() -> None:
    """Put `arena_policy_loss` in verl's registry under "arena" (idempotent).

    verl's `register_policy_loss` silently overwrites, so a name taken by any other function
    (one of verl's own entries, or a different arena copy) raises instead."""
    register_once(core_algos.POLICY_LOSS_REGISTRY, LOSS_NAME, arena_policy_loss, core_algos.register_policy_loss, "policy loss name")


register()
