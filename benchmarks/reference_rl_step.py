"""Today's RL step after the rollout, kept verbatim as the reference path of
benchmarks/bench_rl_step.py: `fill_logprobs` (a no-grad forward of the training model for
old_logp and entropy, one of the frozen reference model for ref_logp) and `ppo_update`, as the
embedded trainer ran them before the faster step (docs/design.md, "The step's log-probs and
update"). Do not edit: the benchmark's ratios and equality checks are against this code.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Optional

import torch

from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.micro_batches import micro_batch_rows, row_lengths, take
from arena.po.aggregation import AggNorm
from arena.po.batching import mini_batch_slices
from arena.po.clipping import count_masked, seq_mask
from arena.po.compose import ResolvedPO, compute_advantages, objective
from arena.po.types import TurnBatch

# (model, prompt_ids, prompt_mask, response_ids, response_mask) -> (logp [n,T], entropy [n,T])
LogProbFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]
LOW_RATIO_DELTA = 3e-3  # the authors' scripts' sequence-mask delta: the threshold of `actor/low_ratio_neg_seqs`


def reference_step(cfg, po, model, ref_model, optimizer, batch, sort_micro_batches: bool = False) -> tuple[dict, float, float]:
    """The trainer's call sequence after the rollout: fill_logprobs, advantages, ppo_update.
    Returns (actor/* metrics, log-prob seconds, update seconds), timed as the trainer did."""
    t0 = time.perf_counter()
    fill_logprobs(model, ref_model, batch, cfg.micro_batch_size, sort_micro_batches)
    adv = compute_advantages(po, batch).to(batch.response_mask.device)  # [N]
    t_lp = time.perf_counter()
    metrics = ppo_update(
        model, optimizer, po, batch, adv, token_logprobs_and_entropy,
        num_mini_batches=cfg.ppo_num_mini_batches, mini_batch_size=cfg.ppo_mini_batch_size,
        ppo_epochs=cfg.ppo_epochs, micro_batch_size=cfg.micro_batch_size, sort_micro_batches=sort_micro_batches,
        kl_coef=cfg.kl_coef, entropy_coef=cfg.entropy_coef, grad_clip=cfg.grad_clip,
    )
    return metrics, t_lp - t0, time.perf_counter() - t_lp


@torch.no_grad()
def fill_logprobs(model, ref_model, batch, micro_batch_size: int, sort_micro_batches: bool = False) -> None:
    """old_logp and entropy from the training model; ref_logp from the reference (in place).
    Micro-batches as in the update (micro_batches.py): contiguous, or sorted by length and
    trimmed, their [n_u, T'] results written back to rows u, columns :T' (the rest is padding: 0)."""
    model.eval()
    n, width = batch.response_mask.shape
    lengths = row_lengths(batch.prompt_mask, batch.response_mask) if sort_micro_batches else None  # [N]
    zeros = batch.response_mask.new_zeros((n, width))  # [N, T]
    old, ent = zeros.clone(), zeros.clone()  # [N, T] x2
    ref = zeros.clone() if ref_model is not None else None  # [N, T]
    for u in micro_batch_rows(slice(0, n), micro_batch_size, lengths):
        m = take(batch, u, trim=sort_micro_batches)
        args = (m.prompt_ids, m.prompt_mask, m.response_ids, m.response_mask)
        t = m.response_mask.shape[1]  # T'
        old[u, :t], ent[u, :t] = token_logprobs_and_entropy(model, *args)  # [n_u, T'] x2
        if ref is not None:
            ref[u, :t] = token_logprobs_and_entropy(ref_model, *args)[0]  # [n_u, T']
    batch.old_logp, batch.entropy, batch.ref_logp = old, ent, ref  # [N, T] each


def ppo_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    po: ResolvedPO,
    batch: TurnBatch,
    adv: torch.Tensor,  # [N] one advantage per turn-sample
    logprob_fn: LogProbFn,
    *,
    num_mini_batches: int = 1,
    mini_batch_size: Optional[int] = None,
    ppo_epochs: int = 1,
    micro_batch_size: int = 256,
    sort_micro_batches: bool = False,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    grad_clip: float = 1.0,
) -> dict[str, float]:
    """Run the update in place; return actor/* metrics averaged over optimizer steps."""
    slices = mini_batch_slices(len(batch), num_mini_batches=num_mini_batches, mini_batch_size=mini_batch_size)
    on_policy = len(slices) == 1 and ppo_epochs == 1
    if sort_micro_batches and po.agg_norm != "global":
        raise ValueError(f"sort_micro_batches needs po.agg_norm=global (got {po.agg_norm!r}): "
                         "per-micro-batch denominators depend on which rows share a micro-batch")
    lengths = row_lengths(batch.prompt_mask, batch.response_mask) if sort_micro_batches else None  # [N]
    params = [p for p in model.parameters() if p.requires_grad]
    sums: dict[str, float] = {}
    steps = skipped = 0
    model.train()
    for _ in range(ppo_epochs):
        for mb in slices:
            mask_mb = batch.response_mask[mb]  # [n_b, T]
            # H of seq_mean_token_sum_norm: the batch's padded T, also when a micro-batch is trimmed
            norm = AggNorm.of(mask_mb, horizon=mask_mb.shape[1])
            tokens_mb = float(mask_mb.sum())
            micro = micro_batch_rows(mb, micro_batch_size, lengths)
            optimizer.zero_grad(set_to_none=True)
            mb_metrics: dict[str, float] = {}
            for u in micro:
                m = take(batch, u, trim=sort_micro_batches)  # T' = T unless trimmed
                mask = m.response_mask  # [n_u, T']
                logp, ent = logprob_fn(model, m.prompt_ids, m.prompt_mask, m.response_ids, mask)  # [n_u, T'] x2
                old = logp.detach() if on_policy else m.old_logp  # [n_u, T']
                adv_tok = adv[u].to(logp.dtype).unsqueeze(-1) * mask  # [n_u, T']
                out = objective(
                    po, logp, old, adv_tok, mask,
                    ref_logp=m.ref_logp,
                    entropy=ent, kl_coef=kl_coef, entropy_coef=entropy_coef,
                    norm=norm, micro_batches=len(micro),
                )
                out.total.backward()
                # Fig. 4's low-ratio negative-advantage rows, counted for every method (mask on or
                # off): mean_j(A) < 0 and D_j = mean_j(old - logp) > LOW_RATIO_DELTA (docs/methods.md,
                # sequence mask), i.e. the rows the authors' sequence mask would drop
                low_neg = count_masked(mask, seq_mask(logp.detach(), old, adv_tok, mask, LOW_RATIO_DELTA))  # []
                out.metrics["actor/low_ratio_neg_seqs"] = float(low_neg)
                # token-weighted average of the micro-batch means -> the mini-batch's masked mean
                w = float(mask.sum()) / tokens_mb if tokens_mb > 0 else 0.0
                for k, v in out.metrics.items():
                    if k in ("actor/masked_seqs", "actor/low_ratio_neg_seqs"):  # counts: summed
                        mb_metrics[k] = mb_metrics.get(k, 0.0) + v
                    else:
                        mb_metrics[k] = mb_metrics.get(k, 0.0) + w * v
                scale = 1.0 / len(micro) if po.agg_norm == "per_microbatch" else 1.0
                mb_metrics["actor/pg_loss"] = mb_metrics.get("actor/pg_loss", 0.0) + scale * float(out.pg.detach())
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip))
            if math.isfinite(grad_norm):
                optimizer.step()
            else:
                skipped += 1
            mb_metrics["actor/grad_norm"] = grad_norm
            steps += 1
            for k, v in mb_metrics.items():
                sums[k] = sums.get(k, 0.0) + v
    metrics = {k: v / steps for k, v in sums.items()}
    metrics["actor/updates_per_step"] = float(steps)
    metrics["actor/skipped_updates"] = float(skipped)
    return metrics
