"""verl's dataset files for an arena run: one parquet row per episode, and the agent-loop config.

verl's trainer draws its prompts from `data.train_files` / `data.val_files` (read by
`verl.utils.dataset.rl_dataset.RLHFDataset`) and instantiates the agent loop named in each row's
`agent_name` column from `actor_rollout_ref.rollout.agent.agent_loop_config_path`. Our agent
loop renders its own prompts from the environment (arena.agent.prompts), so a row only names
the episode:

    data_source  env name (verl's validation groups metrics by it: val-core/<env>/acc/mean@1)
    agent_name   "arena_agent"
    prompt       [{"role": "user", "content": "<env> episode, seed <s>"}]  (verl's prompt_key;
                 never sent to the model; data.filter_overlong_prompts is off)
    extra_info   {"index": i, "seed": s, "split": "train" | "val"}; RLHFDataset copies
                 extra_info.index to the row's `index` and ArenaAgentLoop reads extra_info.seed

Seeds, the same as the embedded backend's:
    train row (k - 1) * B + j  (k = 1..steps, j = 0..B-1) plays step_seeds(seed, k, 0, B)[j]
    val row i                  (i = 0..eval.n - 1)        plays eval_seed(i) = EVAL_SEED_OFFSET + i
with B = batch_envs. verl's dataloader takes data.train_batch_size = B rows per step in file
order (data.shuffle = false, drop_last), so verl's step k plays exactly the embedded step's
seeds; resampling tries (trainer.TurnRolloutManager) use step_seeds(seed, k, try, B) as well.
Training seeds are < EVAL_SEED_OFFSET <= every eval seed, so the two sets are disjoint.

The agent-loop yaml is verl's format (a list of entries: name, _target_, constructor keywords):
env_name, env_kwargs, penalty_coef, history_length, template, max_turns, max_new_tokens.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from arena.config import to_plain
from arena.envs.base import step_seeds
from arena.envs.base import eval_seed
from arena.io.atomic import atomic_write_text

from .verl_config import AGENT_LOOP_NAME

DATA_DIR = "verl_data"
TRAIN_FILE, VAL_FILE, AGENT_LOOP_FILE = "train.parquet", "val.parquet", "agent_loop.yaml"
AGENT_LOOP_TARGET = "arena.backends.verl.agent_loop.ArenaAgentLoop"


def train_seeds(*, seed: int, steps: int, batch_envs: int) -> list[int]:
    """steps * batch_envs seeds; step k (1-based) owns rows (k-1)*B .. k*B-1 (module docstring)."""
    return [s for step in range(1, steps + 1) for s in step_seeds(seed, step, 0, batch_envs)]


def eval_seeds(n: int) -> list[int]:
    return [eval_seed(i) for i in range(n)]


def episode_rows(env_name: str, seeds: list[int], *, split: str) -> list[dict[str, Any]]:
    """One verl dataset row per seed (module docstring), index = row position."""
    return [{"data_source": env_name, "agent_name": AGENT_LOOP_NAME,
             "prompt": [{"role": "user", "content": f"{env_name} episode, seed {s}"}],
             "extra_info": {"index": i, "seed": int(s), "split": split}}
            for i, s in enumerate(seeds)]


def agent_loop_entry(cfg) -> dict[str, Any]:
    """verl's agent-loop config entry for "arena_agent": ArenaAgentLoop's keyword arguments."""
    return {"name": AGENT_LOOP_NAME, "_target_": AGENT_LOOP_TARGET, "env_name": str(cfg.env.name),
            "env_kwargs": to_plain(cfg.env.kwargs) or {}, "penalty_coef": float(cfg.env.penalty_coef),
            "history_length": int(cfg.env.history_length), "template": str(cfg.model.prompt_template),
            "max_turns": None, "max_new_tokens": int(cfg.env.max_new_tokens)}  # max_turns None: env.max_turns


def data_paths(run_path) -> dict[str, Path]:
    folder = Path(run_path) / DATA_DIR
    return {"train": folder / TRAIN_FILE, "val": folder / VAL_FILE, "agent_loop": folder / AGENT_LOOP_FILE}


def dataset_overrides(run_path) -> dict[str, Any]:
    """The verl keys that point verl at this run's files (pure: nothing is written)."""
    paths = data_paths(run_path)
    return {"data.train_files": str(paths["train"]), "data.val_files": str(paths["val"]),
            "data.shuffle": False, "data.filter_overlong_prompts": False,
            "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(paths["agent_loop"])}


def _write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = path.with_suffix(".tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)


def write_dataset(cfg, run_path) -> dict[str, int]:
    """Write train.parquet, val.parquet and agent_loop.yaml under <run>/verl_data/ (rewritten
    on resume: they are a pure function of the config). Returns the row counts."""
    from omegaconf import OmegaConf

    paths = data_paths(run_path)
    paths["train"].parent.mkdir(parents=True, exist_ok=True)
    train = train_seeds(seed=int(cfg.seed), steps=int(cfg.steps), batch_envs=int(cfg.batch_envs))
    val = eval_seeds(int(cfg.eval.n))
    _write_parquet(episode_rows(str(cfg.env.name), train, split="train"), paths["train"])
    _write_parquet(episode_rows(str(cfg.env.name), val, split="val"), paths["val"])
    atomic_write_text(paths["agent_loop"], OmegaConf.to_yaml(OmegaConf.create([agent_loop_entry(cfg)])))
    return {"train": len(train), "val": len(val)}
