"""The embedded RL loop (`arena train`): rollouts -> filtering -> old/ref log-probs ->
advantages -> PPO-style update, with evaluation (docs/design.md §E), the run folder (§F),
checkpoint/resume, the policy as HF model folders (steps/<step>/ at each save, policy/ at the
end: arena/runs/policy.py) and W&B.

Per step t (1..T), asking the composer (arena/po/compose.py) and naming no member:
    seeds    = batch_envs training seeds drawn from rng(seed, t, try)   (deterministic: resumable)
    batch    = collect_step_groups(po, rollout)                         (dynamic: resample tries)
    old, H   = the sampler's logp at temperature 1 (no forward), else     (docs/methods.md §1)
               logp/entropy of the training model, no grad (when the advantage reads H)
    ref      = logp of the frozen initial (BC) model                    (when kl_coef > 0)
    A        = compute_advantages(po, batch)                            [N]
    update   = ppo_update(...)                                          (update.py)
Eval at every step of `eval_steps(T, test_freq)`, step 0 included (the BC policy).
"""
from __future__ import annotations

import copy
import time
from functools import partial

import torch
from omegaconf import DictConfig, OmegaConf

from arena.agent.rollout import rollout
from arena.config import cell_id, resolve_po, to_plain
from arena.envs import make
from arena.envs.base import step_seeds
from arena.envs.sandbox import env_isolation
from arena.po.compose import advantage_diagnostics, collect_step_groups, compute_advantages
from arena.runs import RunFolder, collapse_reason, run_status
from arena.runs.policy import write_policy
from arena.runs.summary import build_summary, paired_gain_se
from arena.runs.stability import eval_steps, smoke_note

from arena.lm.checkpoint import load_state, save_state
from arena.lm.evaluate import evaluate
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.micro_batches import micro_batch_rows, sort_keys, take
from arena.lm.micro_threads import ordered_map, worker_count
from arena.lm.sampler import make_policy

from .update import ppo_update


def old_logp_from_sampler(cfg, po) -> bool:
    """True when old_logp can be the sampler's own log-probs (docs/design.md, "The step's
    log-probs and update"): at temperature 1 the sampler records log_softmax(logits)[token] of
    the weights the update starts from (arena/lm/sampler.py; top-p only decides what is drawn),
    i.e. the old policy's log-probs up to float rounding, so no forward is needed. Not when the
    advantage reads the old policy's entropy (EMPG): that needs the forward anyway."""
    return float(cfg.temperature) == 1.0 and "entropy" not in po.advantage_reads()


# Rows of a sorted micro-batch at most (and at most micro_batch_size): sorted rows cut finer
# are trimmed closer to their own length; under agg_norm=global the grouping changes only the
# work (docs/design.md, Micro-batches by length). Measured one RL step at budget=default,
# log-probs + update against 256-row micro-batches: shop 0.43 vs 0.83, Sokoban 0.62 vs 0.82
# (benchmarks/bench_rl_step.py; household 0.44 at 64, 0.35 at 32 in bench_rl_micro_batches.py).
SORTED_MICRO_ROWS = 64


def micro_batch_size(cfg, sort: bool) -> int:
    """Rows per micro-batch: cfg.micro_batch_size, capped at SORTED_MICRO_ROWS when sorted."""
    return min(cfg.micro_batch_size, SORTED_MICRO_ROWS) if sort else cfg.micro_batch_size


def micro_batches_sorted(cfg, po) -> bool:
    """sort_micro_batches resolved: `auto` is on exactly when po.agg_norm=global (the only
    aggregation under which the sorted micro-batches give the same loss, up to float rounding)."""
    value = cfg.sort_micro_batches
    return po.global_norm if value == "auto" else bool(value)


@torch.no_grad()
def fill_logprobs(model, ref_model, batch, micro_batch_size: int, sort_micro_batches: bool = False, *,
                  old_from_sampler: bool = False, share_prompts: bool = True, trim_last_layer: bool = True,
                  parallel_micro_batches: bool = True) -> None:
    """old_logp and entropy from the training model; ref_logp from the reference (in place).
    Micro-batches as in the update (micro_batches.py): contiguous, or sorted (sort_keys) and
    trimmed, their [n_u, T'] results written back to rows u, columns :T' (the rest is padding: 0).
    With `old_from_sampler` the training model runs no forward: old_logp = sampler_logp * mask
    (old_logp_from_sampler) and entropy is None; only the reference (if any) runs. `share_prompts`:
    each micro-batch's distinct prompts run once (arena/lm/logprobs.py); `trim_last_layer`: the last
    layer only where logits are read (arena/lm/last_positions.py); `parallel_micro_batches`: with several torch threads
    on the CPU, micro-batches on worker threads of one torch thread each (arena/lm/micro_threads.py)."""
    model.eval()
    n, width = batch.response_mask.shape
    lengths = sort_keys(batch.prompt_ids, batch.prompt_mask, batch.response_mask) if sort_micro_batches else None  # [N]
    zeros = batch.response_mask.new_zeros((n, width))  # [N, T]
    old, ent = (None, None) if old_from_sampler else (zeros.clone(), zeros.clone())  # [N, T] x2
    ref = zeros.clone() if ref_model is not None else None  # [N, T]
    rows = list(micro_batch_rows(slice(0, n), micro_batch_size, lengths)) if old is not None or ref is not None else []

    lp = partial(token_logprobs_and_entropy, share_prompts=share_prompts, trim_last_layer=trim_last_layer)

    def forwards(u) -> tuple:
        """(T', old [n_u, T'], entropy [n_u, T'], ref [n_u, T']) of micro-batch u, None where not wanted."""
        m = take(batch, u, trim=sort_micro_batches)
        args = (m.prompt_ids, m.prompt_mask, m.response_ids, m.response_mask)
        old_u, ent_u = lp(model, *args) if old is not None else (None, None)  # [n_u, T'] x2
        ref_u = lp(ref_model, *args)[0] if ref is not None else None  # [n_u, T']
        return m.response_mask.shape[1], old_u, ent_u, ref_u

    workers = worker_count(len(rows), batch.response_mask.device) if parallel_micro_batches else 1
    for u, (t, old_u, ent_u, ref_u) in zip(rows, ordered_map(forwards, rows, workers)):
        if old_u is not None:
            old[u, :t], ent[u, :t] = old_u, ent_u
        if ref_u is not None:
            ref[u, :t] = ref_u
    if old_from_sampler:
        old = batch.sampler_logp.to(batch.response_mask.dtype) * batch.response_mask  # [N, T]
    batch.old_logp, batch.entropy, batch.ref_logp = old, ent, ref  # [N, T] each (entropy None from the sampler)


def _to_device(batch, device: torch.device):
    for name in ("prompt_ids", "prompt_mask", "response_ids", "response_mask", "sampler_logp"):
        setattr(batch, name, getattr(batch, name).to(device))
    batch.response_mask = batch.response_mask.float()
    return batch


def logprobs_and_update(cfg, po, model, ref_model, optimizer, batch) -> tuple[dict, float, float]:
    """The step after the rollout, on `batch` (on the model's device): old/ref log-probs,
    advantages, the update. Returns (actor/* metrics, log-prob seconds, update seconds)."""
    t0 = time.perf_counter()
    sort = micro_batches_sorted(cfg, po)
    micro = micro_batch_size(cfg, sort)
    fill_logprobs(model, ref_model, batch, micro, sort, old_from_sampler=old_logp_from_sampler(cfg, po))
    adv = compute_advantages(po, batch).to(batch.response_mask.device)  # [N]
    t_lp = time.perf_counter()
    metrics = ppo_update(
        model, optimizer, po, batch, adv, partial(token_logprobs_and_entropy, share_prompts=True),
        num_mini_batches=cfg.ppo_num_mini_batches, mini_batch_size=cfg.ppo_mini_batch_size,
        ppo_epochs=cfg.ppo_epochs, micro_batch_size=micro, sort_micro_batches=sort,
        kl_coef=cfg.kl_coef, entropy_coef=cfg.entropy_coef, grad_clip=cfg.grad_clip,
    )
    return metrics, t_lp - t0, time.perf_counter() - t_lp


def rl_step(cfg, po, model, ref_model, optimizer, tokenizer, envs: list, step: int) -> dict:
    """One step (module docstring): rollout tries + filtering, log-probs, advantages, update.
    Returns the step's metrics (train/*, rollout/*, filter/*, actor/*, perf/*)."""
    t0 = time.perf_counter()
    policy = make_policy(model, tokenizer, temperature=cfg.temperature, top_p=cfg.top_p,
                         max_new_tokens=cfg.env.max_new_tokens, seed=cfg.seed * 1_000_003 + step)
    model.eval()
    tries: list[dict] = []

    def one_try(try_idx: int):
        seeds = step_seeds(cfg.seed, step, try_idx, cfg.batch_envs)
        batch, stats = rollout(envs, seeds, cfg.group_size, policy, penalty_coef=cfg.env.penalty_coef,
                               history_length=cfg.env.history_length, pad_id=tokenizer.pad_token_id,
                               template=cfg.model.prompt_template)
        tries.append(stats)
        return batch

    batch, fstats = collect_step_groups(po, one_try, needed_groups=cfg.batch_envs, step=step)
    t_roll = time.perf_counter()
    batch = _to_device(batch, next(model.parameters()).device)
    metrics, t_lp, t_update = logprobs_and_update(cfg, po, model, ref_model, optimizer, batch)
    metrics.update(advantage_diagnostics(po, batch))  # GiGPO's step groups, logged for every method
    metrics.update({
        "train/success_rate": fstats["all_success_rate"],
        "rollout/format_valid_ratio": float(batch.format_valid.float().mean()),
        "rollout/action_valid_ratio": float(batch.action_valid.float().mean()),
        "rollout/response_length": float(batch.response_mask.sum(-1).mean()),
        "rollout/response_length_std": float(batch.response_mask.sum(-1).float().std(correction=0)),
        "rollout/turn_samples": float(len(batch)),
        "filter/kept_group_frac": fstats["kept_group_frac"],
        "filter/tries": float(fstats["tries"]),
        "perf/rollout_seconds": t_roll - t0,
        "perf/env_seconds": sum(s["env_seconds"] for s in tries),
        "perf/logprob_seconds": t_lp,
        "perf/update_seconds": t_update,
    })
    return metrics


def train(cfg: DictConfig, run: RunFolder, model, tokenizer, *, wandb_run=None, log=print) -> dict:
    """Train `model` (already initialised, e.g. from BC) in place and write `run`'s folder.

    Returns the summary dict (also written to summary.json, last)."""
    po = resolve_po(cfg)
    ref_model = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    run.create()
    env_kwargs = to_plain(cfg.env.kwargs)
    envs = [make(cfg.env.name, **env_kwargs) for _ in range(cfg.batch_envs * cfg.group_size)]
    # the tool sandbox mode in force (None: no tool code), recorded with the run (docs/sandbox.md, Modes)
    tool_sandbox = env_isolation(envs[0])
    log(f"[train] tool sandbox: {tool_sandbox or 'none (this environment runs no tool code)'}")
    run.write_config(OmegaConf.to_yaml(cfg) + OmegaConf.to_yaml({"tool_sandbox": tool_sandbox}))
    if wandb_run is not None:
        wandb_run.config.update({"tool_sandbox": tool_sandbox}, allow_val_change=True)
    start_step = load_state(run.ckpt, model, optimizer)
    # metrics.jsonl restarts where the model does: rows up to the checkpoint, none without one
    kept, dropped = run.reset_metrics(start_step)
    if start_step is not None:
        log(f"[train] resumed from step {start_step} ({kept} metric rows kept, {dropped} later ones dropped)")
    elif dropped:
        log(f"[train] no checkpoint: starting from step 0 ({dropped} metric rows of a killed run dropped)")
    first_step = 0 if start_step is None else start_step + 1
    eval_at = set(eval_steps(cfg.steps, cfg.test_freq, final_window=cfg.eval.final_window))
    history = run.read_metrics()
    points = [(r["step"], r["eval/success_rate"]) for r in history if "eval/success_rate" in r]
    t_start = time.time()
    # wall_seconds of a resumed run = the kept rows' step times (the killed process's work that
    # survives) + this process's time; without them the dry-run pace of such cells reads low
    wall_before = sum(float(r.get("perf/step_seconds") or 0.0) for r in history)
    # a resumed run judges the rows it kept too: a collapse before the checkpoint stays a collapse
    collapse = collapse_reason(history, cfg.steps, n_eval=cfg.eval.n, min_format_valid=cfg.stability.min_format_valid)
    status = "collapsed" if collapse else "done"
    stopped = collapse is not None and cfg.stability.stop_on_collapse
    for step in range(first_step, cfg.steps + 1) if not stopped else ():
        row: dict = {"step": step}
        t0 = time.perf_counter()
        if step > 0:
            row.update(rl_step(cfg, po, model, ref_model, optimizer, tokenizer, envs, step))
        if step in eval_at:
            _evaluate_into(row, points, run, model, tokenizer, cfg, step)
        reason = (collapse_reason(history + [row], cfg.steps, n_eval=cfg.eval.n,
                                  min_format_valid=cfg.stability.min_format_valid) if status == "done" else None)
        if reason is not None and cfg.stability.stop_on_collapse and "eval/success_rate" not in row:
            # the run stops here: its final eval is of the policy it stops with (and writes as
            # its policy), not of the last scheduled eval before the collapse (a collapse at step
            # 9 with evals every 10 steps would otherwise end on the step-0 eval, a gain of 0)
            _evaluate_into(row, points, run, model, tokenizer, cfg, step)
        row["perf/step_seconds"] = time.perf_counter() - t0
        run.append_metrics(row)
        history.append(row)
        if wandb_run is not None:
            wandb_run.log(row, step=step)
        log(_progress(step, cfg.steps, row, t_start, steps_done=step - first_step + 1))
        if step > 0 and (step % cfg.save_freq == 0 or step == cfg.steps):
            write_policy(run.step_policy(step), model, tokenizer)  # before state.pt: a resume rewrites it
            save_state(run.ckpt, model, optimizer, step)
        if reason is not None:
            log(f"[train] collapsed: {reason}{smoke_note(cfg.get('budget'))}")
            status, collapse = "collapsed", reason
            if cfg.stability.stop_on_collapse:
                break
    status = run_status(history, collapse, min_format_valid=cfg.stability.min_format_valid)
    write_policy(run.policy, model, tokenizer)  # the final policy (also a run stopped on collapse), before the summary
    return _summary(cfg, run, points, status, wall_before + time.time() - t_start, history, collapse,
                    tool_sandbox)


def _evaluate_into(row: dict, points: list, run: RunFolder, model, tokenizer, cfg, step: int) -> None:
    """The held-out eval of the policy at `step`: into the metrics row, the eval points and
    <run>/eval_wins/."""
    ev = evaluate(model, tokenizer, cfg)
    row["eval/success_rate"] = ev["success_rate"]
    row["eval/format_valid_ratio"] = ev["format_valid_ratio"]
    run.write_eval_wins(step, ev["wins"])
    points.append((step, ev["success_rate"]))


def _progress(step: int, total: int, row: dict, t_start: float, *, steps_done: int) -> str:
    parts = [f"[train] step {step}/{total}"]
    for key, label in (("train/success_rate", "train"), ("eval/success_rate", "eval"),
                       ("actor/grad_norm", "gnorm"), ("rollout/format_valid_ratio", "fmt")):
        if key in row:
            parts.append(f"{label}={row[key]:.3f}")
    if step > 0:  # ETA from this process's own pace (a resumed run skips the finished steps)
        parts.append(f"eta={(time.time() - t_start) / steps_done * (total - step):.0f}s")
    return " ".join(parts)


def _summary(cfg, run: RunFolder, points, status: str, wall: float, history, reason,
             tool_sandbox=None) -> dict:
    # the gain's paired SE (summary.paired_gain_se): the first and the last eval on the same episodes
    first, last = (run.read_eval_wins(points[0][0]), run.read_eval_wins(points[-1][0])) if points else (None, None)
    paired = paired_gain_se(first, last) if first is not None and last is not None else None
    summary = build_summary(
        status=status, cell_id=cell_id(cfg), points=points, history=history, total_steps=cfg.steps,
        theta=cfg.stability.theta, min_points=cfg.stability.min_points, n_eval=cfg.eval.n,
        wall_seconds=wall, collapse_reason=reason, backend="embedded", tool_sandbox=tool_sandbox,
        gain_paired_se=paired,
    )
    run.write_summary(summary)
    return summary
