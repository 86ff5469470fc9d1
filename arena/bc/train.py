"""Behaviour cloning (`arena bc`, docs/design.md §D): SFT on expert demonstrations, loss on the
response tokens only, checkpoint at `<results_dir>/bc/<hash>/model` (atomic, keyed by every
input it depends on: key.py), with a report `bc.json` (format-valid rate and success on
evaluation seeds, the validation curve when `bc.band` stops it).

    L_SFT = - sum_{j,t} m_{j,t} log pi(y_{j,t} | x_j, y_{j,<t}) / sum_{j,t} m_{j,t}
"""
from __future__ import annotations

import fcntl
import json
import os
import random
import time
from pathlib import Path
from typing import Callable

import torch
from torch.nn.utils.rnn import pad_sequence
from transformers.trainer_pt_utils import LengthGroupedSampler

from arena.agent.prompts import render_prompt, task_from_obs
from arena.agent.rollout import rollout
from arena.config import to_plain, trains_bc
from arena.config.schema import CHOICES
from arena.envs import make
from arena.io.atomic import atomic_write_json, digest_problem, folder_digest, fsync_tree
from arena.runs.layout import BC_MODEL_DIR, BC_REPORT_FILE, Results

from arena.lm.evaluate import evaluate
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.micro_batches import trim_padding
from arena.lm.model import build_model, load_model, save_checkpoint
from arena.lm.sampler import make_policy
from arena.lm.tokenizer import build_tokenizer

from .key import bc_hash, bc_key
from .stop import BandStop

THINK = "plan"  # the short think text of every demonstration


def expert_response(action: str) -> str:
    return f"<think>{THINK}</think><action>{action}</action>"


def bc_dir(cfg) -> Path:
    """<results_dir>/bc/<bc_hash>: this config's BC checkpoint folder (arena.runs.layout.Results.bc)."""
    return Results.of(cfg).bc(bc_hash(cfg))


def collect_demos(cfg, n_episodes: int, *, seed_offset: int = 0) -> tuple[list[tuple[str, str]], float]:
    """(prompt, response) pairs from the expert on training seeds; only won episodes are kept
    (the paper keeps high-scoring trajectories). Returns (pairs, expert success rate)."""
    env = make(cfg.env.name, **to_plain(cfg.env.kwargs))
    pairs, wins = [], 0
    for i in range(n_episodes):
        seed = seed_offset + i
        obs, info = env.reset(seed)
        episode, history = [], []
        task = str(info.get("task") or task_from_obs(obs))  # as the rollout loop does
        for turn in range(env.max_turns):
            action = env.expert_action()
            if action is None:
                break
            prompt = render_prompt(env.name, env.instruction, obs, history, turn, info.get("admissible_actions"),
                                   task=task, history_length=cfg.env.history_length, template=cfg.model.prompt_template)
            episode.append((prompt, expert_response(action)))
            history.append((obs, action))
            obs, _, done, info = env.step(action)
            if done:
                break
        if info.get("won"):
            wins += 1
            pairs.extend(episode)
    return pairs, wins / max(1, n_episodes)


def collect_rollout_demos(cfg, model, tokenizer, n_episodes: int, *, chunk: int = 64) -> tuple[list[tuple[str, str]], float]:
    """Rejection sampling: roll the model out at T=1 on training seeds 0..n-1 and keep the
    (prompt, response) turns of the won episodes. Returns (pairs, the model's success rate)."""
    policy = make_policy(model, tokenizer, temperature=1.0, max_new_tokens=cfg.env.max_new_tokens, seed=cfg.seed)
    envs = [make(cfg.env.name, **to_plain(cfg.env.kwargs)) for _ in range(min(chunk, n_episodes))]
    pairs, wins = [], 0
    for start in range(0, n_episodes, chunk):
        seeds = list(range(start, min(start + chunk, n_episodes)))
        batch, stats = rollout(envs, seeds, 1, policy, penalty_coef=cfg.env.penalty_coef,
                               history_length=cfg.env.history_length, pad_id=tokenizer.pad_token_id,
                               template=cfg.model.prompt_template)
        wins += round(stats["success_rate"] * len(seeds))
        for row in batch.won.nonzero(as_tuple=True)[0].tolist():
            prompt_ids = batch.prompt_ids[row][batch.prompt_mask[row].bool()].tolist()
            # the prompt as the policy saw it, its chat template included (lm.tokenizer.encode_prompts):
            # _encode's raw encoding gives these ids back
            pairs.append((tokenizer.decode(prompt_ids), batch.response_text[row]))
    return pairs, wins / max(1, n_episodes)


def _encode(tokenizer, pairs: list[tuple[str, str]]):
    prompts = [torch.tensor(tokenizer.encode(p, add_special_tokens=False)) for p, _ in pairs]
    responses = [torch.tensor(tokenizer.encode(r, add_special_tokens=False)) for _, r in pairs]
    pad = tokenizer.pad_token_id
    prompt_ids = pad_sequence(prompts, batch_first=True, padding_value=pad, padding_side="left")  # [N, P]
    prompt_mask = pad_sequence([torch.ones_like(p) for p in prompts], batch_first=True, padding_side="left")  # [N, P]
    response_ids = pad_sequence(responses, batch_first=True, padding_value=pad)  # [N, T]
    response_mask = pad_sequence([torch.ones_like(r) for r in responses], batch_first=True).float()  # [N, T]
    return prompt_ids, prompt_mask, response_ids, response_mask


def sft_loss(model, prompt_ids, prompt_mask, response_ids, response_mask) -> torch.Tensor:
    """L_SFT (module docstring): the mean NLL of the response tokens; prompt tokens are context only."""
    logp, _ = token_logprobs_and_entropy(model, prompt_ids, prompt_mask, response_ids, response_mask)  # [b, T]
    return -(logp * response_mask).sum() / response_mask.sum()  # scalar


def length_grouped_batches(lengths: list[int], batch_size: int, generator: torch.Generator) -> list[list[int]]:
    """One epoch of length-grouped mini-batches (bc.group_by_length): transformers'
    LengthGroupedSampler permutes every row at random, sorts each mega-batch (up to 50 mini-batches)
    by length, longest first, and puts the longest row first; its order cut into runs of
    batch_size is the epoch's mini-batches (the last may be shorter), each about one length."""
    order = list(LengthGroupedSampler(batch_size, lengths=lengths, generator=generator))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def sft(model, tokenizer, pairs, *, steps: int, lr: float, batch_size: int, seed: int, log: Callable = print,
        stop: Callable[[int], bool] | None = None, pad_per_batch: bool = False, group_by_length: bool = False) -> list[float]:
    """Minimise L_SFT with AdamW on random mini-batches of (prompt, response) pairs, for `steps`
    steps or until `stop(step)` (called after each step) says so. Every mini-batch is padded to
    the demo set's longest prompt and reply, or to its own with `pad_per_batch` (bc.pad_per_batch).
    With `group_by_length` the mini-batches are length_grouped_batches epochs, taken in order, each
    padded to its own longest demo."""
    device = next(model.parameters()).device
    p_ids, p_mask, r_ids, r_mask = (t.to(device) for t in _encode(tokenizer, pairs))
    lengths = (p_mask.sum(dim=1) + r_mask.sum(dim=1)).tolist() if group_by_length else None  # N ints
    grouped: list[list[int]] = []
    generator = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    rng = random.Random(seed)
    losses = []
    model.train()
    for step in range(1, steps + 1):
        if lengths is None:
            rows = torch.tensor(rng.sample(range(len(pairs)), min(batch_size, len(pairs))), device=device)
        else:
            grouped = grouped or length_grouped_batches(lengths, batch_size, generator)
            rows = torch.tensor(grouped.pop(0), device=device)
        batch = (p_ids[rows], p_mask[rows], r_ids[rows], r_mask[rows])  # [b, P], [b, P], [b, T], [b, T]
        trim = pad_per_batch or lengths is not None
        loss = sft_loss(model, *(trim_padding(*batch) if trim else batch))  # scalar
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % max(1, steps // 10) == 0 or step == steps:
            log(f"[bc] step {step}/{steps} loss={loss.item():.4f}")
        if stop is not None and stop(step):
            break
    model.eval()
    return losses


def cache_problem(out: Path) -> str | None:
    """None when `<out>/bc.json` parses, names the key `out` is named by (`bc_hash`: a folder
    swapped or copied from another BC config, e.g. another seed's, is not this one's), and
    `<out>/model` is the checkpoint it describes (`model_files`: every model file's size and
    sha256), else why not. A bc.json without those records (an older arena's) is no proof."""
    report_file = out / BC_REPORT_FILE
    try:
        report = json.loads(report_file.read_text())
    except FileNotFoundError:
        return f"no {BC_REPORT_FILE}"
    except (OSError, ValueError) as exc:
        return f"{report_file} is not valid JSON ({exc})"
    if not isinstance(report, dict):
        return f"{report_file} is not a JSON object"
    if not isinstance(report.get("model_files"), dict):
        return f"{report_file} records no file digests (an older format): nothing proves the model is intact"
    if report.get("bc_hash") != out.name:
        return (f"{report_file} is the record of BC key {report.get('bc_hash')}, not of {out.name} "
                "(a folder swapped or copied from another BC config?)")
    return digest_problem(out / BC_MODEL_DIR, report["model_files"])


def ensure_bc_checkpoint(cfg, log: Callable = print) -> Path:
    """The BC model for this config, trained once and cached (a file lock serialises trainers).
    A cache that fails `cache_problem` (a truncated or corrupted model, an unreadable bc.json)
    is never loaded: its bc.json is set aside as bc.json.corrupt-<time> and BC runs again.
    Write order: the model folder (atomic rename), its files and folders fsynced, then bc.json
    (atomic, fsynced) last: a bc.json on disk means the model it describes is on disk too."""
    results, key = Results.of(cfg), bc_hash(cfg)
    out, model_dir, report_file = results.bc(key), results.bc_model(key), results.bc_report(key)
    if cache_problem(out) is None:
        return model_dir
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(results.bc_lock(key), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        problem = cache_problem(out)
        if problem is None:
            return model_dir
        if report_file.exists():
            aside = report_file.with_name(f"{report_file.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
            os.replace(report_file, aside)
            log(f"[bc] cached checkpoint {out} is not usable ({problem}); set {aside.name} aside, training again")
        report = train_bc(cfg, model_dir, log=log)
        fsync_tree(model_dir)
        report["model_files"] = folder_digest(model_dir)
        report["bc_hash"], report["bc_key"] = out.name, bc_key(cfg)  # checked against the folder's name
        atomic_write_json(report_file, report)
    return model_dir


def fresh_model(cfg, pairs: list[tuple[str, str]]):
    """(model, tokenizer) that expert BC starts from: a tokenizer built from the demos and a
    model of `cfg.model`'s shape, freshly initialised from model.init_seed, on cfg.device."""
    tokenizer = build_tokenizer([p + r for p, r in pairs], vocab_size=cfg.model.vocab_size, kind=cfg.model.tokenizer)
    m = cfg.model
    model = build_model(len(tokenizer), size=m.size, hidden=m.hidden, layers=m.layers, heads=m.heads, kv_heads=m.kv_heads,
                        intermediate=m.intermediate, max_positions=m.max_positions, seed=m.init_seed,
                        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id).to(cfg.device)
    return model, tokenizer


def train_bc(cfg, model_dir: Path, log: Callable = print) -> dict:
    """SFT on expert demos (a fresh model and tokenizer), or on the won rollouts of the model
    at `model.path` (bc.source=rejection)."""
    t0 = time.time()
    if cfg.bc.source not in CHOICES["bc.source"]:
        raise ValueError(f"unknown bc.source {cfg.bc.source!r}; valid: {', '.join(CHOICES['bc.source'])}")
    if cfg.bc.source == "rejection":
        if not cfg.model.path:
            raise ValueError("bc.source=rejection filters the rollouts of an existing model: set model.path")
        model, tokenizer = load_model(cfg.model.path, device=cfg.device)
        pairs, expert_success = collect_rollout_demos(cfg, model, tokenizer, cfg.bc.demos)
    else:
        pairs, expert_success = collect_demos(cfg, cfg.bc.demos)
    if not pairs:
        raise RuntimeError(f"no won episode out of {cfg.bc.demos} ({cfg.bc.source}): no demonstrations")
    log(f"[bc] {len(pairs)} turn demos from {cfg.bc.demos} {cfg.bc.source} episodes (success {expert_success:.3f})")
    if cfg.bc.source == "expert":
        model, tokenizer = fresh_model(cfg, pairs)
    band = BandStop.from_config(cfg, model, tokenizer, log=log)
    losses = sft(model, tokenizer, pairs, steps=cfg.bc.steps, lr=cfg.bc.lr, batch_size=cfg.bc.batch_size,
                 seed=cfg.seed, log=log, stop=band, pad_per_batch=cfg.bc.pad_per_batch,
                 group_by_length=cfg.bc.group_by_length) if cfg.bc.steps > 0 else []
    ev = evaluate(model, tokenizer, cfg, n=cfg.bc.eval_n)
    save_checkpoint(model, tokenizer, model_dir)
    # demo_episodes: the episodes played (bc.demos); demo_episodes_won: the kept ones (all turns of a
    # won episode are kept); demo_turns: the (prompt, response) pairs SFT trains on.
    won_episodes = round(expert_success * cfg.bc.demos)
    report = {"demo_turns": len(pairs), "demo_episodes": int(cfg.bc.demos), "demo_episodes_won": won_episodes,
              "expert_success": expert_success, "final_loss": losses[-1] if losses else None,
              "steps": len(losses), "eval_success": ev["success_rate"], "eval_format_valid": ev["format_valid_ratio"],
              "eval_n": ev["n"], **(band.report() if band is not None else {}), "seconds": time.time() - t0}
    log(f"[bc] eval success={ev['success_rate']:.3f} format_valid={ev['format_valid_ratio']:.3f} on {ev['n']} held-out seeds")
    return report


def load_initial_model(cfg, log: Callable = print):
    """(model, tokenizer) that RL starts from: `model.path` as given, unless bc.source=rejection
    first fine-tunes it on its own won rollouts; without model.path, the cached expert-BC model."""
    if not trains_bc(cfg):
        return load_model(cfg.model.path, device=cfg.device)
    path = ensure_bc_checkpoint(cfg, log=log)
    return load_model(path, device=cfg.device)
