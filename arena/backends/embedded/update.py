"""One RL policy update on a per-turn batch: mini-batches x epochs, micro-batches with exact
gradient accumulation (docs/methods.md §5.0, §6; docs/design.md §A).

For each epoch e and each mini-batch b (sequential split, no shuffle, like the authors):
    norm = counts of b's response mask (tokens, sequences), taken before the sequence mask
    for each micro-batch u of b:
        L_u = objective(po, logp_u, old_u, A_u, mask_u; ref, entropy, norm, micro_batches=|b|/|u|)
        L_u.backward()            # sum_u L_u = L_b exactly under agg_norm=global
    g = clip_grad_norm_(params, grad_clip)   (pre-clip norm is logged)
    optimizer.step() unless g is non-finite (the step is skipped, like the authors)
On-policy shortcut (docs/methods.md §5.0): with one mini-batch and one epoch, old := stopgrad(logp),
so the ratio is exactly 1.
With `sort_micro_batches` the micro-batches of b are its rows sorted by length, each padded to its
own longest row (micro_batches.py); under agg_norm=global sum_u L_u is the same L_b.
Worker threads (arena/lm/micro_threads.py): with T > 1 torch threads on the CPU, up to T micro-batches run
at once, each on a thread of its own with one torch thread, and return their gradients
(autograd.grad); they are added to p.grad in micro-batch order, as backward() would, so with one
torch thread per worker (T <= micro-batches) the mini-batch's gradient is the one a one-thread
process computes, bit for bit (tests/embedded/test_update_threads.py).
Metrics: each merges over b's micro-batches by the kind arena/metric_keys.py declares for it
(MICRO_BATCH_KINDS): a mean or share over tokens is pooled (sum_u v_u n_u / sum_u n_u, n_u its
tokens in u), so it is b's own value under any split; a count is summed; the step's value is the
mean over its optimizer steps.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, Iterable, NamedTuple, Optional

import torch

from arena.lm.micro_batches import micro_batch_rows, sort_keys, take
from arena.lm.micro_threads import ordered_map, worker_count
from arena.metric_keys import COUNT, MICRO_BATCH_KINDS
from arena.po.aggregation import AggNorm
from arena.po.batching import mini_batch_slices
from arena.po.clipping import count_masked, seq_mask
from arena.po.compose import ResolvedPO, objective
from arena.po.types import TurnBatch


# (model, prompt_ids, prompt_mask, response_ids, response_mask) -> (logp [n,T], entropy [n,T])
LogProbFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]
LOW_RATIO_DELTA = 3e-3  # the authors' scripts' sequence-mask delta: the threshold of `actor/low_ratio_neg_seqs`


class MicroResult(NamedTuple):
    """One micro-batch's pass: its metrics, the tokens each mean is over, its PG term, and its
    gradients (one per parameter, None where it has none) when it ran on a worker thread."""
    metrics: dict[str, float]
    tokens: dict[str, float]
    pg: float
    grads: Optional[tuple]


def accumulate_grads(params: list, grads: tuple) -> None:
    """p.grad += g for each parameter, as backward() accumulates: the first gradient is stored, each
    later one added in place, so micro-batches summed in their order give backward()'s numbers."""
    for p, g in zip(params, grads):
        if g is None:
            continue
        if p.grad is None:
            p.grad = g.contiguous()  # backward() keeps a gradient in its parameter's (dense) layout too
        else:
            p.grad.add_(g)


def micro_pass(
    u: torch.Tensor,  # [n_u] row indices of one micro-batch
    *,
    model: torch.nn.Module,
    po: ResolvedPO,
    batch: TurnBatch,
    adv: torch.Tensor,  # [N]
    logprob_fn: LogProbFn,
    params: list,
    norm: AggNorm,
    micro_batches: int,
    on_policy: bool,
    trim: bool,
    on_worker: bool,
    kl_coef: float,
    entropy_coef: float,
) -> MicroResult:
    """One micro-batch's loss and gradient: backward() into p.grad, or (`on_worker`) its gradients
    returned for the caller to add in micro-batch order; its metrics and their tokens."""
    m = take(batch, u, trim=trim)  # T' = T unless trimmed
    mask = m.response_mask  # [n_u, T']
    logp, ent = logprob_fn(model, m.prompt_ids, m.prompt_mask, m.response_ids, mask)  # [n_u, T'] x2
    old = logp.detach() if on_policy else m.old_logp  # [n_u, T']
    adv_tok = adv[u].to(logp.dtype).unsqueeze(-1) * mask  # [n_u, T']
    out = objective(po, logp, old, adv_tok, mask, ref_logp=m.ref_logp, entropy=ent, kl_coef=kl_coef,
                    entropy_coef=entropy_coef, norm=norm, micro_batches=micro_batches)
    grads = None
    if on_worker:  # summed by the caller in micro-batch order (merge_micro_batches)
        grads = torch.autograd.grad(out.total, params, allow_unused=True)
    else:
        out.total.backward()
    # Fig. 4's low-ratio negative-advantage rows, counted for every method (mask on or
    # off): mean_j(A) < 0 and D_j = mean_j(old - logp) > LOW_RATIO_DELTA (docs/methods.md,
    # sequence mask), i.e. the rows the authors' sequence mask would drop
    low_neg = count_masked(mask, seq_mask(logp.detach(), old, adv_tok, mask, LOW_RATIO_DELTA))  # []
    metrics = dict(out.metrics, **{"actor/low_ratio_neg_seqs": float(low_neg)})
    # n_u: the tokens a mean or share is over (out.tokens; the valid tokens where not given)
    valid = float(mask.sum())
    tokens = {k: out.tokens.get(k, valid) for k in metrics}
    return MicroResult(metrics, tokens, float(out.pg.detach()), grads)


def merge_micro_batches(results: Iterable[MicroResult], params: list, pg_scale: float) -> dict[str, float]:
    """A mini-batch's metrics from its micro-batches, taken in micro-batch order, each one's
    gradients (where a worker thread returned them) added to p.grad as it comes. Each metric
    merges by the kind arena/metric_keys.py declares for it (MICRO_BATCH_KINDS): a mean or share
    v_u over n_u tokens pools to the mini-batch's own value sum_u v_u n_u / sum_u n_u, whichever
    rows share a micro-batch (e.g. clipfrac_neg_adv over the mini-batch's A < 0 tokens); a count
    is summed. actor/pg_loss is the PG term as it enters the mini-batch loss: sum_u s * pg_u, s
    the objective's micro-batch scale (po.micro_batch_scale, compose.py)."""
    merged: dict[str, float] = {}  # counts (summed) and pg_loss
    pooled: dict[str, list[float]] = {}  # means and shares: [sum_u v_u n_u, sum_u n_u]
    for res in results:
        if res.grads is not None:
            accumulate_grads(params, res.grads)
        for k, v in res.metrics.items():
            if MICRO_BATCH_KINDS[k] == COUNT:
                merged[k] = merged.get(k, 0.0) + v
            else:
                acc = pooled.setdefault(k, [0.0, 0.0])
                acc[0], acc[1] = acc[0] + v * res.tokens[k], acc[1] + res.tokens[k]
        merged["actor/pg_loss"] = merged.get("actor/pg_loss", 0.0) + pg_scale * res.pg
    for k, (weighted, n) in pooled.items():
        merged[k] = weighted / n if n > 0 else 0.0
    return merged


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
    parallel_micro_batches: bool = True,
) -> dict[str, float]:
    """Run the update in place; return actor/* metrics averaged over optimizer steps.
    `parallel_micro_batches`: with several torch threads on the CPU, a mini-batch's micro-batches
    run on worker threads of one torch thread each (arena/lm/micro_threads.py; module docstring)."""
    slices = mini_batch_slices(len(batch), num_mini_batches=num_mini_batches, mini_batch_size=mini_batch_size)
    if sort_micro_batches and not po.global_norm:
        raise ValueError(f"sort_micro_batches needs po.agg_norm=global (got {po.agg_norm!r}): "
                         "per-micro-batch denominators depend on which rows share a micro-batch")
    lengths = sort_keys(batch.prompt_ids, batch.prompt_mask, batch.response_mask) if sort_micro_batches else None  # [N]
    params = [p for p in model.parameters() if p.requires_grad]
    fixed = dict(model=model, po=po, batch=batch, adv=adv, logprob_fn=logprob_fn, params=params,
                 on_policy=len(slices) == 1 and ppo_epochs == 1, trim=sort_micro_batches, kl_coef=kl_coef,
                 entropy_coef=entropy_coef)
    sums: dict[str, float] = {}
    steps = skipped = 0
    model.train()
    for _ in range(ppo_epochs):
        for mb in slices:
            mask_mb = batch.response_mask[mb]  # [n_b, T]
            micro = micro_batch_rows(mb, micro_batch_size, lengths)
            workers = worker_count(len(micro), mask_mb.device) if parallel_micro_batches else 1
            # H of seq_mean_token_sum_norm: the batch's padded T, also when a micro-batch is trimmed
            one = partial(micro_pass, **fixed, norm=AggNorm.of(mask_mb, horizon=mask_mb.shape[1]),
                          micro_batches=len(micro), on_worker=workers > 1)
            optimizer.zero_grad(set_to_none=True)
            mb_metrics = merge_micro_batches(ordered_map(one, micro, workers), params, po.micro_batch_scale(len(micro)))
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
