"""The RL step after the rollout as the embedded trainer ran it before the faster step: the
reference path of benchmarks/bench_rl_step.py (docs/design.md, "The step's log-probs and
update"). It is today's code with the faster step's choices undone, so it shares every
other line with the trainer and cannot drift from it:
- old_logp and entropy from a no-grad forward of the training model (today: the sampler's
  log-probs at temperature 1: `fill_logprobs(..., old_from_sampler=True)`);
- micro-batches of `micro_batch_size` rows (today: at most SORTED_MICRO_ROWS when sorted);
- sorted micro-batches only when asked (today: `sort_micro_batches=auto`, on under agg_norm=global);
- every row's prompt in its own forward (today: each micro-batch's distinct prompts once,
  `share_prompts=True`, arena/lm/logprobs.py);
- HF's "sdpa" attention, which copies each key/value head per query head under a mask (today:
  "sdpa_gqa", arena/lm/attention.py); the models passed in are switched to it;
- the last decoder layer at every position (today: its query, attention and MLP only at the
  positions whose logits are read, `trim_last_layer=True`, arena/lm/last_positions.py);
- torch's linear layers, MKL's sgemm on the CPU (today: oneDNN's, arena/lm/linear_kernel.py); the
  models passed in are switched to them;
- micro-batches one after another, every op on all of torch's threads (today: with several threads,
  micro-batches on worker threads of one torch thread each, arena/lm/micro_threads.py).
The update itself (`ppo_update`) was not part of that work and is today's, but for its worker threads.
"""
from __future__ import annotations

import time
from functools import partial

from arena.backends.embedded.trainer import fill_logprobs
from arena.backends.embedded.update import ppo_update
from arena.lm.linear_kernel import set_linear_kernel
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.po.compose import compute_advantages


def reference_step(cfg, po, model, ref_model, optimizer, batch, sort_micro_batches: bool = False) -> tuple[dict, float, float]:
    """The trainer's call sequence after the rollout, before the faster step: fill_logprobs with
    a forward for old_logp, advantages, ppo_update. Returns (actor/* metrics, log-prob seconds,
    update seconds), timed as the trainer did."""
    for m in (model, ref_model):
        if m is not None:
            m.set_attn_implementation("sdpa")
            set_linear_kernel(m, "torch")
    t0 = time.perf_counter()
    fill_logprobs(model, ref_model, batch, cfg.micro_batch_size, sort_micro_batches, old_from_sampler=False,
                  share_prompts=False, trim_last_layer=False,
                  parallel_micro_batches=False)
    adv = compute_advantages(po, batch).to(batch.response_mask.device)  # [N]
    t_lp = time.perf_counter()
    metrics = ppo_update(
        model, optimizer, po, batch, adv, partial(token_logprobs_and_entropy, trim_last_layer=False),
        num_mini_batches=cfg.ppo_num_mini_batches, mini_batch_size=cfg.ppo_mini_batch_size,
        ppo_epochs=cfg.ppo_epochs, micro_batch_size=cfg.micro_batch_size, sort_micro_batches=sort_micro_batches,
        kl_coef=cfg.kl_coef, entropy_coef=cfg.entropy_coef, grad_clip=cfg.grad_clip, parallel_micro_batches=False,
    )
    return metrics, t_lp - t0, time.perf_counter() - t_lp
