"""arena's advantages in verl's estimator registry: `arena_grpo`, `arena_gigpo`, `arena_empg`.

verl's `ray_trainer.compute_advantage` hands a registered estimator only
`token_level_rewards`, `response_mask`, `config` and `index` (uid). GiGPO and EMPG need the
per-turn fields (docs/design.md, Per-turn batch): trajectory ids, turn indices, anchor observations, turn
rewards, scores, old-policy entropy. So each estimator takes two extra keyword arguments,
`non_tensor_batch` and `batch` (verl already passes exactly those two for its own GDPO), and
`compute_arena_advantage(data, name, **hp)` is the trainer-subclass step that calls it with
them. Called the plain verl way (without them), an estimator raises a ValueError naming the
missing fields.

Each estimator: TurnBatch <- (non_tensor_batch, batch); A [N] = ADV[name](batch, **hp);
advantages = returns = A_j * m_jt  [N, T] (arena's `broadcast`). The fields an estimator
requires are the ones its advantage declares with `@reads` (`ADV.reads(name)`), and there is
one estimator per member of `ADV` at registration time, so a new advantage needs no edit here.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos

from arena.po.advantages import ADV, broadcast

from .dataproto import from_dataproto, missing_fields
from .registry import register_once

PREFIX = "arena_"


def estimator_name(advantage: str) -> str:
    """verl's `algorithm.adv_estimator` of arena's advantage member `advantage`."""
    return PREFIX + advantage


def required_fields(name: str) -> tuple[str, ...]:
    """The TurnBatch fields advantage `name` reads (its `@reads` declaration)."""
    return ADV.reads(name)


def _make_estimator(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    def estimator(
        token_level_rewards: torch.Tensor,  # [N, T] (unused: arena reads `score`)
        response_mask: torch.Tensor,  # [N, T]
        config: Any = None,
        index: Any = None,
        non_tensor_batch: Optional[dict] = None,
        batch: Any = None,
        **hp: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if non_tensor_batch is None:
            raise ValueError(
                f"{PREFIX}{name} needs the per-turn fields {list(required_fields(name))} in non_tensor_batch/batch; "
                f"verl's compute_advantage does not pass them: call "
                f"arena.backends.verl.advantages.compute_arena_advantage from the trainer"
            )
        tensors = {k: batch[k] for k in batch.keys()} if batch is not None else {}
        tensors["response_mask"] = response_mask
        data = DataProto.from_dict(tensors=tensors, non_tensors=dict(non_tensor_batch))
        absent = missing_fields(data, required_fields(name))
        if absent:
            raise ValueError(f"{PREFIX}{name}: missing field(s) {absent}; required: {list(required_fields(name))}")
        turns = from_dataproto(data, fill_missing=True)
        adv = ADV[name](turns, **hp)  # [N]
        # A_jt = A_j m_jt
        adv_tok = broadcast(adv, response_mask).to(torch.float32)  # [N, T]
        return adv_tok, adv_tok.clone()

    estimator.__name__ = f"{PREFIX}{name}"
    estimator.__qualname__ = estimator.__name__
    return estimator


ESTIMATORS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {}


def register() -> None:
    """Put one estimator per member of ADV in verl's registry (idempotent; a different function
    under one of our names raises, as verl's `register_adv_est` does). Members added to ADV
    after import are registered by the next call (compute_arena_advantage makes one)."""
    for name in ADV:
        full_name = f"{PREFIX}{name}"
        if full_name not in ESTIMATORS:
            ESTIMATORS[full_name] = _make_estimator(name)
        fn = ESTIMATORS[full_name]
        register_once(core_algos.ADV_ESTIMATOR_REGISTRY, full_name, fn, core_algos.register_adv_est, "advantage estimator")


def compute_arena_advantage(data: DataProto, adv_estimator: str, **hp: Any) -> DataProto:
    """The trainer-subclass step: run a registered arena estimator with the per-turn fields and
    store `advantages` and `returns` [N, T] in data.batch (in place; returns `data`)."""
    register()
    if adv_estimator not in ESTIMATORS:
        raise ValueError(f"unknown arena advantage estimator {adv_estimator!r}; valid: {', '.join(ESTIMATORS)}")
    fn = core_algos.get_adv_estimator_fn(adv_estimator)
    if data.batch is None or "response_mask" not in data.batch.keys():
        raise ValueError(f"{adv_estimator}: missing field(s) ['response_mask'] in data.batch")
    scores = data.batch["token_level_rewards"] if "token_level_rewards" in data.batch.keys() else None
    extra = {k: data.batch[k] for k in data.batch.keys() if k not in ("response_mask",)}
    advantages, returns = fn(
        token_level_rewards=scores if scores is not None else torch.zeros_like(data.batch["response_mask"], dtype=torch.float32),
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch.get("uid"),
        non_tensor_batch=data.non_tensor_batch,
        batch=extra,
        **hp,
    )
    data.batch["advantages"] = advantages  # [N, T]
    data.batch["returns"] = returns  # [N, T]
    return data


register()

__all__ = ["ESTIMATORS", "compute_arena_advantage", "register", "required_fields"]
