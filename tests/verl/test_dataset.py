"""verl's dataset files for an arena run (arena/backends/verl/dataset.py), read back by verl itself.

Run config: steps = 3, batch_envs B = 2, eval.n = 4, seed = 1, Sokoban. By hand:
  train rows = steps * B = 6; rows 2(k-1), 2(k-1)+1 play step_seeds(1, k, 0, 2) (k = 1, 2, 3),
               the embedded backend's seeds of step k; every one < EVAL_SEED_OFFSET = 1_000_000
  val rows   = eval.n = 4, seeds 1_000_000 + i for i = 0..3
verl's RLHFDataset (through create_rl_dataset and the generated verl config's `data` section)
loads them with a local tokenizer (no download), verl's sampler and collate_fn batch them B per
step, and each row reaches the agent loop with `agent_name` = "arena_agent" and its seed.
The agent-loop yaml is instantiated the way verl's AgentLoopWorker does (hydra instantiate of
the entry, with the worker's arguments) and one episode is played on a training row."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")

import hydra  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from arena.lm.tokenizer import build_tokenizer  # noqa: E402
from arena.envs.base import step_seeds  # noqa: E402
from arena.backends.verl.agent_loop import ArenaAgentLoop, episode_seed  # noqa: E402
from arena.backends.verl.dataset import dataset_overrides, write_dataset  # noqa: E402
from arena.backends.verl.verl_config import AGENT_LOOP_NAME, build_verl_config  # noqa: E402
from arena.config import load_config  # noqa: E402
from arena.envs import EVAL_SEED_OFFSET  # noqa: E402

STEPS, B, N_EVAL, SEED = 3, 2, 4, 1
UP = "<think>go</think><action>up</action>"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    cfg = load_config(["backend=verl", f"out={run}", f"steps={STEPS}", f"batch_envs={B}", f"eval.n={N_EVAL}",
                       f"seed={SEED}", "model.path=/models/qwen", "model.prompt_template=compact"])
    counts = write_dataset(cfg, run)
    verl_cfg = build_verl_config(cfg, dataset_overrides(run))
    tokenizer = build_tokenizer(["sokoban episode, seed 12", UP], vocab_size=300)
    return cfg, counts, verl_cfg, tokenizer


def _load(verl_cfg, tokenizer, split):
    files = verl_cfg.data.train_files if split == "train" else verl_cfg.data.val_files
    return create_rl_dataset(files, verl_cfg.data, tokenizer, None, is_train=split == "train")


def test_counts_and_disjoint_seeds(written):
    _, counts, verl_cfg, tokenizer = written
    assert counts == {"train": STEPS * B, "val": N_EVAL} == {"train": 6, "val": 4}
    train, val = _load(verl_cfg, tokenizer, "train"), _load(verl_cfg, tokenizer, "val")
    assert isinstance(train, RLHFDataset) and (len(train), len(val)) == (6, 4)
    train_seeds = [train[i]["extra_info"]["seed"] for i in range(len(train))]
    val_seeds = [val[i]["extra_info"]["seed"] for i in range(len(val))]
    assert val_seeds == [1_000_000, 1_000_001, 1_000_002, 1_000_003]
    assert max(train_seeds) < EVAL_SEED_OFFSET and not set(train_seeds) & set(val_seeds)
    assert [val[i]["index"] for i in range(4)] == [0, 1, 2, 3]  # RLHFDataset copies extra_info.index


def test_verls_loader_gives_step_k_the_embedded_seeds_of_step_k(written):
    _, _, verl_cfg, tokenizer = written
    data = verl_cfg.data
    assert (data.shuffle, data.train_batch_size, data.filter_overlong_prompts) == (False, B, False)
    train = _load(verl_cfg, tokenizer, "train")
    # verl's trainer: its sampler, collate_fn, batch size data.train_batch_size, drop_last
    loader = DataLoader(train, batch_size=data.train_batch_size, sampler=create_rl_sampler(data, train),
                        collate_fn=collate_fn, drop_last=True)
    batches = list(loader)
    assert len(batches) == STEPS
    for k, batch_dict in enumerate(batches, start=1):
        batch = DataProto.from_single_dict(batch_dict)  # as RayPPOTrainer.fit
        nt = batch.non_tensor_batch
        rows = [{key: values[i] for key, values in nt.items()} for i in range(len(batch))]
        # what ArenaAgentLoop.run reads: its registry name and the episode seed
        assert [r["agent_name"] for r in rows] == [AGENT_LOOP_NAME] * B
        assert [episode_seed(r) for r in rows] == step_seeds(SEED, k, 0, B)
        assert list(nt["index"]) == [2 * (k - 1), 2 * (k - 1) + 1]
        assert set(nt["data_source"]) == {"sokoban"} and "raw_prompt" in nt


class UpServer:
    """verl's LLMServerClient.generate with one canned answer: "up" every turn."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        self.calls += 1
        ids = self.tokenizer.encode(UP, add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def test_agent_loop_yaml_instantiates_arena_agent_with_the_run_settings(written):
    cfg, _, verl_cfg, tokenizer = written
    entries = OmegaConf.load(verl_cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert [e.name for e in entries] == [AGENT_LOOP_NAME]
    server = UpServer(tokenizer)
    # verl's AgentLoopWorker._run_agent_loop: instantiate(registry[agent_name], worker arguments)
    loop = hydra.utils.instantiate(
        config=entries[0], trainer_config=DictConfigWrap(config=verl_cfg), server_manager=server,
        tokenizer=tokenizer, processor=None, hf_model_type=None, dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(verl_cfg.data), tools=ToolListWrap([]))
    assert isinstance(loop, ArenaAgentLoop)
    assert (loop.env.name, loop.penalty_coef, loop.history_length, loop.template, loop.max_new_tokens) == (
        "sokoban", cfg.env.penalty_coef, cfg.env.history_length, "compact", cfg.env.max_new_tokens)
    kw = cfg.env.kwargs  # dim 7 -> a 7 x 7 room
    assert (loop.env.rows, loop.env.depth, loop.env.max_turns, loop.env.render_wall) == (
        kw.dim, kw.depth, kw.max_turns, kw.render_wall)
    row = _load(verl_cfg, tokenizer, "train")[3]  # step 2's second row
    out = asyncio.run(loop.run({"temperature": 1.0, "logprobs": True}, **row))
    episode = out.extra_fields["arena_episode"]
    assert episode["seed"] == step_seeds(SEED, 2, 0, B)[1]
    # one server call per turn recorded
    assert len(out.extra_fields["arena_turns"]) == server.calls >= 1
    assert np.isclose(out.reward_score, episode["episode_return"])
