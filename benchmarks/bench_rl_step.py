"""One RL step of the embedded trainer, split (rollout, env, log-probs, update), against the
reference path (the step before the faster one: benchmarks/reference_rl_step.py, today's code
with the faster step's choices undone) on the SAME rollout batch from the SAME weights and optimizer
state, in one process.

Per env and budget: a tokenizer and model built from expert demos (arena.bc.train.fresh_model)
and trained by a short BC (`--bc-steps`, far shorter than a real BC: the policy only has to
write well-formed replies so that the batch has realistic lengths), ONE rollout batch of the
trainer's size, then `--repeats` interleaved timings of
    reference: fill_logprobs (old + entropy forward, ref forward) + ppo_update, contiguous micro-batches
    new:       the trainer's logprobs_and_update (old_logp from the sampler, sorted micro-batches)
each from a deepcopy of the model and the optimizer. The rollout is timed too, at each thread
count, interleaved: today's sampler (arena.lm.sampler.make_policy) against the reference sampler
(benchmarks/reference_sampler.py, the sampler before the speed work; its TextWorld games restart at
every reset, arena/envs/textworld_reset.py's `full_resets`), which must draw the same batch (same policy seed; prompts and replies compared, log-probs within float rounding). Prints
medians, the ratio new/reference (lower is faster), the same with each path's own rollout added
(the issue's RL step: rollout + log-probs + update), the reference's model FLOPs per second of
each path as a fraction of this run's fp32 matmul peak (bench_train.py's matmul_peak and FLOP
formula; the new path's last layer skips the positions whose logits are not read, so it can
exceed 100%), and the equality check: max |d| of old_logp and ref_logp over masked tokens, max
|d| of the parameters after the update, actor/* side by side.

    python benchmarks/bench_rl_step.py --quick --threads 1 2       # ~2 min
    python benchmarks/bench_rl_step.py --threads 1                 # sokoban/household/shop default + sokoban learn
    python benchmarks/bench_rl_step.py --case household:default --household-pool committed
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import tempfile
import time

import torch

import reference_sampler
from bench_train import matmul_peak, training_flops
from kernel_floor import kernel_seconds
from reference_rl_step import reference_step

from arena.agent.rollout import rollout
from arena.backends.embedded.trainer import _to_device, logprobs_and_update
from arena.bc.train import collect_demos, fresh_model, sft
from arena.config import load_config, resolve_po
from arena.envs import make
from arena.envs.base import step_seeds
from arena.envs.textworld_reset import full_resets
from arena.lm.micro_batches import row_lengths
from arena.lm.sampler import make_policy
from arena.malloc_tuning import tune_malloc

CASES = [("sokoban", "default"), ("household", "default"), ("shop", "default"), ("sokoban", "learn")]


def case_overrides(env: str, budget: str, quick: bool, results_dir: str, household_pool: str | None = None) -> list[str]:
    overrides = [f"env={env}", f"budget={budget}", "seed=0", f"results_dir={results_dir}", "wandb.enabled=false"]
    if env == "household" and household_pool:
        overrides.append(f"env.kwargs.pool={household_pool}")
    return overrides + (["batch_envs=4"] if quick else [])


def build_case(env: str, budget: str, bc_steps: int, quick: bool, results_dir: str, household_pool: str | None = None):
    """(cfg, po, model, batch, rollout seconds, env seconds, tokenizer, envs) for one env x budget."""
    cfg = load_config(case_overrides(env, budget, quick, results_dir, household_pool))
    t0 = time.perf_counter()
    pairs, _ = collect_demos(cfg, 64 if quick else 200)
    model, tok = fresh_model(cfg, pairs)
    print(f"[{env}:{budget}] {len(pairs)} demo turns ({time.perf_counter() - t0:.0f}s); BC {bc_steps} steps", flush=True)
    sft(model, tok, pairs, steps=bc_steps, lr=cfg.bc.lr, batch_size=cfg.bc.batch_size, seed=0, log=lambda *_: None)
    envs = [make(cfg.env.name, **dict(cfg.env.kwargs)) for _ in range(cfg.batch_envs * cfg.group_size)]
    print(f"[{env}:{budget}] rollout of {cfg.batch_envs} x {cfg.group_size} episodes", flush=True)
    batch, t_env, t_roll = rollout_batch(cfg, model, tok, envs, make_policy)
    if spread_scores(batch):
        print(f"[{env}:{budget}] no group's scores differ, so every advantage would be 0 and the update's "
              "gradient rounding noise: trajectory j scores its score + (j mod 3) here, for both paths", flush=True)
    return cfg, resolve_po(cfg), model, _to_device(batch, torch.device("cpu")), t_roll, t_env, tok, envs


def spread_scores(batch) -> bool:
    """Where every group's trajectories score alike (a short BC often wins no episode), set
    score += traj_id mod 3 (in place) and return True. Group-relative advantages are then non-zero,
    so the equality check compares real gradients, not rounding noise that Adam would scale up to
    steps of the learning rate's size. Both paths get the same batch."""
    for group in batch.group_id.unique():
        if batch.score[batch.group_id == group].unique().numel() > 1:
            return False
    batch.score = batch.score + (batch.traj_id % 3).to(batch.score.dtype)  # [N]
    return True


def rollout_batch(cfg, model, tok, envs, policy_maker):
    """(batch, env seconds, seconds) of the benchmark's one rollout: the trainer's first step's
    seeds, the policy drawing from a generator seeded with 1, so every call draws the same batch."""
    policy = policy_maker(model, tok, temperature=cfg.temperature, top_p=cfg.top_p,
                          max_new_tokens=cfg.env.max_new_tokens, seed=1)
    t0 = time.perf_counter()
    batch, stats = rollout(envs, step_seeds(cfg.seed, 1, 0, cfg.batch_envs), cfg.group_size, policy,
                           penalty_coef=cfg.env.penalty_coef, history_length=cfg.env.history_length,
                           pad_id=tok.pad_token_id, template=cfg.model.prompt_template)
    return batch, stats["env_seconds"], time.perf_counter() - t0


def time_rollouts(cfg, model, tok, envs, repeats: int) -> tuple[float, float, str]:
    """(median seconds of today's rollout, of the reference's, how their batches compare), timed
    interleaved at the current thread count (one untimed call of each first)."""
    paths = {"new": make_policy, "reference": reference_sampler.make_policy}
    resets = {"new": contextlib.nullcontext, "reference": full_resets}  # the reference restarts TextWorld games
    batches = {}
    for name, maker in paths.items():
        with resets[name]():
            batches[name] = rollout_batch(cfg, model, tok, envs, maker)[0]
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(repeats):
        for name, maker in paths.items():
            with resets[name]():
                seconds[name].append(rollout_batch(cfg, model, tok, envs, maker)[2])
    new, ref = batches["new"], batches["reference"]
    same_tokens = all(torch.equal(getattr(new, k), getattr(ref, k)) for k in ("prompt_ids", "response_ids", "response_mask"))
    if not same_tokens:
        same = "NOT the same batch"
    else:
        d_logp = max_masked_diff(new.sampler_logp, ref.sampler_logp, new.response_mask.float())
        same = "same prompts and replies, sampler log-probs " + (
            "bit-identical" if d_logp == 0 else f"within float rounding (max |d| = {d_logp:.2e})")
    return statistics.median(seconds["new"]), statistics.median(seconds["reference"]), same


def run_path(path: str, cfg, po, model, batch, cfg_new=None):
    """(model after the update, batch with its log-probs, metrics, log-prob s, update s) on copies."""
    model = copy.deepcopy(model)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    batch = copy.copy(batch)
    if path == "reference":
        metrics, t_lp, t_up = reference_step(cfg, po, model, ref, opt, batch)
    else:
        metrics, t_lp, t_up = logprobs_and_update(cfg_new or cfg, po, model, ref, opt, batch)
    return model, batch, metrics, t_lp, t_up


def max_masked_diff(a, b, mask) -> float:
    if a is None or b is None:
        return float("nan") if (a is None) != (b is None) else 0.0
    return float(((a - b).abs() * mask).max())  # max over masked tokens


def equality(cfg, po, model, batch, cfg_new) -> None:
    m_ref, b_ref, met_ref, _, _ = run_path("reference", cfg, po, model, batch)
    m_new, b_new, met_new, _, _ = run_path("new", cfg, po, model, batch, cfg_new)
    mask = batch.response_mask  # [N, T]
    d_old = max_masked_diff(b_ref.old_logp, b_new.old_logp, mask)
    d_ref = max_masked_diff(b_ref.ref_logp, b_new.ref_logp, mask)
    d_par = max(float((p - q).detach().abs().max()) for p, q in zip(m_ref.parameters(), m_new.parameters()))
    for name, d in (("old_logp", d_old), ("ref_logp", d_ref), ("params after update", d_par)):
        print(f"  {name:20s} " + ("bit-identical" if d == 0 else f"within float rounding (max |d| = {d:.2e})"))
    print(f"  {'metric':28s} {'reference':>14s} {'new':>14s}")
    for k in sorted(met_ref):
        print(f"  {k:28s} {met_ref[k]:14.6g} {met_new.get(k, float('nan')):14.6g}")


def step_flops(model, batch, ppo_epochs: int) -> float:
    """Model FLOPs of the reference's work on real tokens: two no-grad forwards (old, ref) and one
    forward+backward per epoch over the batch, = (1/3 + 1/3 + ppo_epochs) x
    bench_train.training_flops (forward = 1/3 of it). E.g. sokoban default (2 epochs): 8/3."""
    lengths = row_lengths(batch.prompt_mask, batch.response_mask).float()  # [N]
    return (2 / 3 + ppo_epochs) * training_flops(model, tokens=int(lengths.sum()), seq=float(lengths.mean()))


def time_case(cfg, po, model, batch, repeats: int, cfg_new) -> dict[str, list[tuple[float, float]]]:
    times: dict[str, list[tuple[float, float]]] = {"reference": [], "new": []}
    run_path("new", cfg, po, model, batch, cfg_new)  # warm-up
    for _ in range(repeats):
        for path in times:  # interleaved: background load hits both alike
            _, _, _, t_lp, t_up = run_path(path, cfg, po, model, batch, cfg_new)
            times[path].append((t_lp, t_up))
    return times


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sokoban+shop default, 4 groups, 2 repeats, short BC")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bc-steps", type=int, default=150)
    ap.add_argument("--case", nargs="*", help="env:budget pairs, e.g. sokoban:default shop:default")
    ap.add_argument("--new", nargs="*", default=[], help="config overrides of the new path only, e.g. micro_batch_size=64")
    ap.add_argument("--household-pool", default=None, choices=("committed", "large"),
                    help="household's pool (default: the budget's; the large one is generated on first use, ~20 min)")
    args = ap.parse_args(argv)
    print(f"glibc malloc tuned as in every arena process: {'yes' if tune_malloc() else 'no'}")  # arena/malloc_tuning.py
    cases = [tuple(c.split(":")) for c in args.case] if args.case else (CASES[::2] if args.quick else CASES)
    repeats, bc_steps = (2, 60) if args.quick else (args.repeats, args.bc_steps)
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for env, budget in cases:
            torch.set_num_threads(1)
            cfg, po, model, batch, t_roll, t_env, tok, envs = build_case(env, budget, bc_steps, args.quick, tmp,
                                                                         args.household_pool)
            cfg_new = load_config(case_overrides(env, budget, args.quick, tmp, args.household_pool) + args.new)
            n, width = batch.response_mask.shape
            print(f"\n== {env} budget={budget}{' new path: ' + ' '.join(args.new) if args.new else ''}: {n} turn-samples, reply width {width}, prompt width "
                  f"{batch.prompt_ids.shape[1]}; rollout {t_roll:.2f}s (env {t_env:.3f}s) at 1 thread")
            equality(cfg, po, model, batch, cfg_new)
            for threads in args.threads:
                torch.set_num_threads(threads)
                peak = matmul_peak(512 if args.quick else 1024)
                times = time_case(cfg, po, model, batch, repeats, cfg_new)
                roll_new, roll_ref, same_batch = time_rollouts(cfg, model, tok, envs, repeats)
                ref_s = statistics.median(a + b for a, b in times["reference"])
                ref_lp = statistics.median(a for a, _ in times["reference"])
                ref_up = statistics.median(b for _, b in times["reference"])
                new_lp = statistics.median(a for a, _ in times["new"])
                new_up = statistics.median(b for _, b in times["new"])
                new_s = statistics.median(a + b for a, b in times["new"])
                flops = step_flops(model, batch, cfg.ppo_epochs)
                # the new path can take no less than its matmuls and attention (forward and backward)
                floor = kernel_seconds(lambda: run_path("new", cfg, po, model, batch, cfg_new), threads) / ref_s
                ratio = new_s / ref_s
                # the whole step, each path with its own sampler's rollout: (rollout + log-probs + update)
                step_ratio = (roll_new + new_s) / (roll_ref + ref_s)
                ratios[f"{env}:{budget}:{threads}:step"] = step_ratio
                ratios[f"{env}:{budget}:{threads}"] = ratio
                print(f"  threads={threads}: rollout {roll_new:.3f}s, reference sampler's {roll_ref:.3f}s ({same_batch})")
                print(f"  threads={threads}: reference log-probs {ref_lp:.3f}s + update {ref_up:.3f}s = {ref_s:.3f}s; new log-probs {new_lp:.3f}s "
                      f"+ update {new_up:.3f}s = {new_s:.3f}s; ratio new/reference {ratio:.2f} "
                      f"(with each path's rollout: {step_ratio:.2f}); the reference's model FLOPs / seconds / peak: reference "
                      f"{100 * flops / ref_s / peak:.1f}%, new {100 * flops / new_s / peak:.1f}% "
                      f"(peak {peak / 1e9:.1f} GFLOP/s; over 100%: the new path skips part of that work); in its matmul and attention kernels alone the new path "
                      f"would be {floor:.2f} of the reference, the lowest ratio reachable without cutting their work")
    return ratios


if __name__ == "__main__":
    main()
