"""ArenaAgentLoop through verl's own AgentLoopWorker with a fake LLM server (no Ray, no GPU),
then the trainer subclass's fan-out: one actor row per turn with every §F field; and the
rollout manager wrapper's dynamic filtering with resampling (TurnRolloutManager, fake inner
manager; counts at the end of this file).

The group: one Sokoban corridor "#PXO#" (player, box, target), group_size n = 2, both members
play it (same uid). Scripted responses, in the order the episodes first call the server:
  traj 0: "right"                         push onto the target: -0.1 + 1 + 10 = 10.9, won
  traj 1: "left" (wall: no move, -0.1), "no tags" (format-invalid: no move, -0.1), "right" (10.9)
so N = 1 + 3 = 4 turn rows. Log-probs: call c (0-based, over the whole group) returns
-(c + 1) / 8 on every token (exact in float32)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from arena.agent.prompts import render_prompt
from arena.lm.tokenizer import build_tokenizer
from arena.backends.verl import agent_loop as loop_module
from arena.backends.verl.advantages import compute_arena_advantage
from arena.backends.verl.fan_out import PAD_KEY, actor_rows, fan_out, turns_from_output
from arena.backends.verl.trainer import apply_arena_advantage
from arena.backends.verl.verl_config import AGENT_LOOP_NAME
from arena.envs.sokoban import SokobanEnv
from arena.po.compose import advantage_diagnostics
from arena.po.compose import resolve as resolve_po_of
from arena.po.types import FLAG_FIELDS, ID_FIELDS, REWARD_FIELDS
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.workers.rollout.replica import TokenOutput

CORRIDOR = ["#####", "#PXO#", "#####"]
RIGHT, LEFT = "<think>go</think><action>right</action>", "<think>go</think><action>left</action>"
SCRIPTS = [[RIGHT], [LEFT, "no tags", RIGHT]]
PROMPT_LEN, RESPONSE_LEN = 512, 32


class FakeServer:
    """verl's LLMServerClient.generate interface with canned token ids and log-probs."""

    def __init__(self, tokenizer):
        self.tokenizer, self.sessions, self.calls = tokenizer, {}, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        script = SCRIPTS[self.sessions.setdefault(request_id, len(self.sessions))]
        turn = sum(1 for rid, _ in self.calls if rid == request_id)
        self.calls.append((request_id, list(prompt_ids)))
        ids = self.tokenizer.encode(script[turn], add_special_tokens=False)
        output = TokenOutput(token_ids=ids, log_probs=[-len(self.calls) / 8] * len(ids))
        await asyncio.sleep(0)  # let the other episode run (verl gathers them concurrently)
        return output


@pytest.fixture(scope="module")
def tokenizer():
    env = SokobanEnv.from_layout(CORRIDOR)
    corpus = [render_prompt("sokoban", env.instruction, env.reset(0)[0], [], 0, ["up", "down", "left", "right"]),
              RIGHT, LEFT, "no tags"]
    return build_tokenizer(corpus, vocab_size=300)


def _worker(tokenizer, server) -> AgentLoopWorker:
    """verl's AgentLoopWorker without Ray: only the attributes generate_sequences reads."""
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {
            "prompt_length": PROMPT_LEN, "response_length": RESPONSE_LEN, "temperature": 1.0, "top_p": 1.0,
            "top_k": -1, "calculate_log_probs": True,
            "val_kwargs": {"top_p": 1.0, "top_k": -1, "temperature": 0.0},
            "agent": {"default_agent_loop": AGENT_LOOP_NAME}}},
        "data": {}})
    worker = AgentLoopWorker.__new__(AgentLoopWorker)
    worker.config, worker.rollout_config = config, config.actor_rollout_ref.rollout
    worker.llm_client, worker.tokenizer, worker.processor, worker.hf_model_type = server, tokenizer, None, None
    worker.dataset_cls, worker.tools, worker.mm_processor_kwargs = None, [], {}
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    return worker


@pytest.fixture(scope="module")
def generated(tokenizer):
    """verl's per-prompt output of one group (2 rows) and the fake server's call log."""
    server = FakeServer(tokenizer)
    return _generate_corridor(_worker(tokenizer, server), seed=7, rows=2), server


def _generate_corridor(worker, *, seed: int, rows: int) -> DataProto:
    """worker.generate_sequences on `rows` rows of one group, every env the one-move corridor."""
    gen_batch = DataProto.from_dict(non_tensors={
        "raw_prompt": np.array([[]] * rows, dtype=object), "uid": np.array(["g0"] * rows, dtype=object),
        "index": np.array([seed] * rows), "extra_info": np.array([{"seed": seed}] * rows, dtype=object)})
    mp = pytest.MonkeyPatch()
    mp.setattr(loop_module, "make", lambda name, **kw: SokobanEnv.from_layout(CORRIDOR))
    try:
        return asyncio.run(worker.generate_sequences(gen_batch))
    finally:
        mp.undo()


def _expected():
    # turn rewards from the env (step penalty -0.1, +1 box on target, +10 solved)
    win = -0.1 + 1.0 + 10.0
    e0, e1 = 0.0 + win, 0.0 + -0.1 + -0.1 + win  # episode returns, summed in turn order
    v = [True, True, False, True]  # action_valid per row (row 2: "no tags")
    returns = [e0, e1, e1, e1]
    # score = E - 0.1 * (1 - v)
    score = torch.tensor(returns, dtype=torch.float32) - 0.1 * (1.0 - torch.tensor(v, dtype=torch.float32))
    return dict(group_id=[0, 0, 0, 0], traj_id=[0, 1, 1, 1], turn_idx=[0, 0, 1, 2],
                turn_reward=[win, -0.1, -0.1, win], episode_return=returns, score=score,
                format_valid=v, action_valid=v, won=[True] * 4)


def test_verl_output_is_one_sample_per_prompt_with_the_turn_records(generated):
    out, server = generated
    assert len(out) == 2 and len(server.calls) == 4  # 1 + 3 LLM calls
    episodes = list(out.non_tensor_batch["arena_episode"])
    assert [len(t) for t in out.non_tensor_batch["arena_turns"]] == [1, 3]
    assert [e["won"] for e in episodes] == [True, True] and [e["seed"] for e in episodes] == [7, 7]
    assert list(out.non_tensor_batch["__num_turns__"]) == [2, 6]
    # reward_score = episode return at the last response token; acc = won for validation
    assert out.batch["rm_scores"].sum(-1).tolist() == pytest.approx([10.9, 10.7], abs=1e-6)
    assert list(out.non_tensor_batch["acc"]) == [1.0, 1.0]


def test_fan_out_gives_one_row_per_turn_with_every_field(generated, tokenizer):
    out, server = generated
    turns = turns_from_output(out, group_size=2, pad_id=tokenizer.pad_token_id)
    want = _expected()
    assert len(turns) == 4
    for name in ID_FIELDS + FLAG_FIELDS:
        assert getattr(turns, name).tolist() == want[name], name
    for name in REWARD_FIELDS:
        torch.testing.assert_close(getattr(turns, name), torch.as_tensor(want[name], dtype=torch.float32),
                                   rtol=0, atol=1e-6)
    board = SokobanEnv.from_layout(CORRIDOR).reset(0)[0]
    assert turns.anchor_obs == [board] * 4  # the left / invalid turns do not move the player
    # rows are (traj 0, turn 0), (traj 1, turns 0..2); server calls were t0, t1, t1, t1 in that order
    calls = [server.calls[0], server.calls[1], server.calls[2], server.calls[3]]
    scripts = [RIGHT, LEFT, "no tags", RIGHT]
    logp = [-1 / 8, -2 / 8, -3 / 8, -4 / 8]
    for row, ((_, prompt), text, lp) in enumerate(zip(calls, scripts, logp)):
        ids = tokenizer.encode(text, add_special_tokens=False)
        m = turns.response_mask[row].bool()  # [T]
        assert turns.response_ids[row][m].tolist() == ids and turns.response_text[row] == text
        assert turns.prompt_ids[row][turns.prompt_mask[row].bool()].tolist() == prompt
        assert turns.sampler_logp[row][m].tolist() == [lp] * len(ids)
    # every row's prompt is the rendered board at its turn (turn index in the prompt)
    assert server.calls[1][1] == server.calls[0][1] != server.calls[2][1]


def test_actor_rows_pad_and_advantage(generated, tokenizer):
    out, _ = generated
    data = fan_out(out, group_size=2, pad_id=tokenizer.pad_token_id, row_multiple=3)
    # N = 4 rows padded to 6 = ceil(4 / 3) * 3: rows 4, 5 copy rows 0, 1 with mask 0
    assert len(data) == 6 and data.non_tensor_batch[PAD_KEY].tolist() == [False] * 4 + [True] * 2
    for key in ("group_id", "traj_id", "turn_idx", "turn_reward", "episode_return", "score", "format_valid",
                "action_valid", "won", "anchor_obs", "uid", "__num_turns__", "multi_modal_inputs"):
        assert key in data.non_tensor_batch, key
    for key in ("prompts", "responses", "response_mask", "rollout_log_probs", "input_ids", "attention_mask",
                "position_ids", "rm_scores"):
        assert key in data.batch.keys(), key
    assert data.non_tensor_batch["group_id"].tolist() == [0, 0, 0, 0, 1, 2]
    assert data.non_tensor_batch["traj_id"].tolist() == [0, 1, 1, 1, 2, 3]
    assert data.non_tensor_batch["__num_turns__"].tolist() == [2, 6, 6, 6, 2, 2]
    assert data.batch["response_mask"][4:].sum() == 0 and data.batch["rm_scores"][4:].sum() == 0
    assert torch.equal(data.batch["input_ids"][4], data.batch["input_ids"][0])
    # rm_scores: the row's score on its last response token
    want = _expected()["score"]
    torch.testing.assert_close(data.batch["rm_scores"][:4].sum(-1), want, rtol=0, atol=0)
    # GRPO, pooled turns, no std: A_j = score_j - mean(score over the group's 4 rows); pads 0
    apply_arena_advantage(data, "arena_grpo", norm_std=False)
    adv = data.batch["advantages"]  # [6, T]
    mask = data.batch["response_mask"]  # [6, T]
    per_row = (adv * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # [6]
    torch.testing.assert_close(per_row[:4], want - want.mean(), rtol=0, atol=1e-6)
    assert adv[4:].abs().sum() == 0
    # unpadded: the same advantages
    plain = compute_arena_advantage(actor_rows(turns_from_output(out, group_size=2, pad_id=0)), "arena_grpo",
                                    norm_std=False)
    torch.testing.assert_close(plain.batch["advantages"], adv[:4], rtol=0, atol=0)


def test_fan_out_rejects_rows_not_grouped_by_uid(generated):
    out, _ = generated
    bad = DataProto.from_dict(non_tensors={k: v for k, v in out.non_tensor_batch.items()})
    bad.non_tensor_batch["uid"] = np.array(["g0", "g1"], dtype=object)
    with pytest.raises(ValueError, match="group"):
        turns_from_output(bad, group_size=2, pad_id=0)


# --------------------------------------------------------------------------- TurnRolloutManager
# Dynamic filtering with resampling at the turn level (trainer.TurnRolloutManager), with a fake
# inner manager in place of verl's AgentLoopManager. B = 3 groups of n = 2, step 4, filter_key
# "won", max_gen_batches 3. Fake outcome of trajectory (seed s, member m): won iff s is even and
# m == 0, so an even seed gives a mixed group (kept) and an odd seed a uniform one (dropped);
# member m plays 1 + m turns of 1 + m reply tokens each, so a group has 1 + 2 = 3 turn rows of
# 1, 2, 2 reply tokens. Resampling seeds are
# step_seeds(seed, step, try, B), replaced here by [100 * try + i for i in range(B)].
#   try 0: seeds 10, 11, 12 -> keep 10, 12 (11 uniform); 2 of 3 groups kept
#   try 1: seeds 100, 101, 102 -> keep 100 (needed 1 more; the list is cut there); done
#   tries = 2, kept_group_frac = 3 kept / 6 sampled = 0.5
#   train/success_rate = won over all 12 sampled trajectories = (1 + 0 + 1 + 1 + 0 + 1) / 12 = 1/3
#   turn rows: 3 groups x 3 = 9; group ids renumbered 0, 1, 2 in keep order
#   reply lengths [1, 2, 2] x 3: mean 5/3, population variance ((2/3)^2 + 2 (1/3)^2) / 3 = 2/9,
#   rollout/response_length_std = sqrt(2) / 3
class FakeAgentLoopManager:
    def __init__(self):
        self.calls = []

    def generate_sequences(self, batch: DataProto) -> DataProto:
        nt = batch.non_tensor_batch
        rows = [{key: values[i] for key, values in nt.items()} for i in range(len(batch))]
        self.calls.append(rows)
        turns, episodes = np.empty(len(rows), dtype=object), np.empty(len(rows), dtype=object)
        for r, row in enumerate(rows):
            seed, member = loop_module.episode_seed(row), r % 2
            won = seed % 2 == 0 and member == 0
            turns[r] = [dict(anchor_obs=f"seed {seed}", turn_reward=0.0, format_valid=True, action_valid=True,
                             text="t", prompt_ids=[3, 4], response_ids=[5, 6][:1 + member],
                             logp=[-0.5] * (1 + member))
                        for _ in range(1 + member)]
            episodes[r] = dict(seed=seed, episode_return=10.0 if won else -1.0, won=won, errored=False,
                               penalty_coef=0.1, errors=[])
        return DataProto.from_dict(non_tensors={"uid": nt["uid"], "arena_turns": turns, "arena_episode": episodes},
                                   meta_info={"timing": {}})


def _gen_batch(seeds, *, validate=False):
    uids = np.array([f"g{j}" for j in range(len(seeds)) for _ in range(2)], dtype=object)  # verl's interleave
    extra = np.array([{"seed": s} for s in seeds for _ in range(2)], dtype=object)
    return DataProto.from_dict(non_tensors={"uid": uids, "extra_info": extra},
                               meta_info={"global_steps": 4, "validate": validate})


def test_turn_rollout_manager_drops_uniform_groups_and_resamples_with_new_seeds(monkeypatch):
    from arena.backends.verl import trainer as trainer_module

    seed_calls = []

    def fake_step_seeds(seed, step, try_idx, count):
        seed_calls.append((seed, step, try_idx, count))
        return [100 * try_idx + i for i in range(count)]
    monkeypatch.setattr(trainer_module, "step_seeds", fake_step_seeds)
    inner = FakeAgentLoopManager()
    po = resolve_po_of({"method": "grpo_ds", "hp": {"filter_key": "won", "max_gen_batches": 3, "cold_start_steps": 0}})
    manager = trainer_module.TurnRolloutManager(inner, group_size=2, pad_id=0, po=po, seed=7)
    out = manager.generate_sequences(_gen_batch([10, 11, 12]))
    assert len(inner.calls) == 2 and seed_calls == [(7, 4, 1, 3)]
    assert [loop_module.episode_seed(r) for r in inner.calls[0]] == [10, 10, 11, 11, 12, 12]
    assert [r["arena_seed"] for r in inner.calls[1]] == [100, 100, 101, 101, 102, 102]
    assert [r["uid"] for r in inner.calls[1]] == ["g0", "g0", "g1", "g1", "g2", "g2"]  # the batch's own groups
    assert len(out) == 6  # B * n rows, as verl's fit() unions them; the per-turn rows ride in meta_info
    turns = out.meta_info[trainer_module.TURNS_KEY]
    assert turns.anchor_obs == ["seed 10"] * 3 + ["seed 12"] * 3 + ["seed 100"] * 3
    assert turns.group_id.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert turns.traj_id.tolist() == [0, 1, 1, 2, 3, 3, 4, 5, 5]
    assert turns.won.tolist() == [True, False, False] * 3
    metrics = out.meta_info[trainer_module.METRICS_KEY]
    assert metrics["filter/tries"] == 2.0 and metrics["filter/kept_group_frac"] == 0.5
    assert metrics["rollout/turn_samples"] == 9.0
    assert metrics["train/success_rate"] == 4 / 12
    assert abs(metrics["rollout/response_length_std"] - 2 ** 0.5 / 3) < 1e-6


def test_turn_rollout_manager_passes_validation_through_and_without_filtering_tries_once():
    from arena.backends.verl.trainer import METRICS_KEY, TURNS_KEY, TurnRolloutManager

    inner = FakeAgentLoopManager()
    dynamic = resolve_po_of({"method": "grpo_ds", "hp": {"filter_key": "won", "max_gen_batches": 3,
                                                         "cold_start_steps": 0}})
    manager = TurnRolloutManager(inner, group_size=2, pad_id=0, po=dynamic)
    out = manager.generate_sequences(_gen_batch([11, 13], validate=True))
    assert len(inner.calls) == 1 and TURNS_KEY not in out.meta_info  # validation: per-prompt output as is
    # filtering "none": one try; the uniform groups 11 and 13 are kept (2 groups x 3 rows)
    plain = TurnRolloutManager(FakeAgentLoopManager(), group_size=2, pad_id=0, po=resolve_po_of({"method": "grpo"}))
    out = plain.generate_sequences(_gen_batch([11, 13]))
    assert len(plain.inner.calls) == 1 and len(out.meta_info[TURNS_KEY]) == 6
    metrics = out.meta_info[METRICS_KEY]
    assert (metrics["filter/tries"], metrics["filter/kept_group_frac"]) == (1.0, 1.0)


# --------------------------------------------------------------------------- the trainer subclass
# ArenaRayPPOTrainer's own methods on the group above, without Ray: verl's RayPPOTrainer
# `_balance_batch` and `_update_actor` (which need worker groups) are replaced by recorders, so
# the test sees exactly what the subclass hands on to verl's balancing and to the actor update.
# ppo_mini_batch_size=3 turn-samples, micro-batch 3 rows, one rank: unit 3; the embedded split of
# 4 turns in slices of 3 is rows [0, 3) and [3, 4), padded to 3 + 3 rows (mini_batch_layout), so
# the second mini-batch holds row 3 and 2 pad rows.
def test_trainer_subclass_hands_the_actor_one_row_per_turn(generated, tokenizer, monkeypatch):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils import tensordict_utils as tu

    from arena.backends.verl.mini_batches import MINI_KEY, OneMiniBatchUpdate
    from arena.backends.verl.trainer import METRICS_KEY, TURNS_KEY, ArenaRayPPOTrainer

    balanced = []

    def record_balance(self, part, metrics, **kw):  # verl's balancing, run per mini-batch: reverse the rows
        balanced.append(part.non_tensor_batch[MINI_KEY].tolist())
        part.reorder(torch.arange(len(part) - 1, -1, -1))
        metrics.update({"global_seqlen/max": float(len(part)), "global_seqlen/mean": float(len(part))})

    monkeypatch.setattr(RayPPOTrainer, "_balance_batch", record_balance)
    trainer = ArenaRayPPOTrainer.__new__(ArenaRayPPOTrainer)  # __init__ needs Ray worker groups
    trainer.config = OmegaConf.create({
        "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 1, "ppo_micro_batch_size_per_gpu": 3, "ppo_epochs": 2},
                              "rollout": {"n": 1}},
        "trainer": {"n_gpus_per_node": 1, "nnodes": 1}})
    trainer.num_mini_batches, trainer.mini_batch_turns = 2, 3
    updates = []

    def record_update(self, part):  # what verl's _update_actor would send its workers, and a metrics reply
        td = tu.get_tensordict({"rows": torch.zeros(len(part))}, {})
        self.actor_rollout_wg.update_actor(td)
        updates.append((part, tu.get(td, "mini_batch_size"), tu.get(td, "global_batch_size"), tu.get(td, "epochs")))
        return DataProto.from_single_dict(data={}, meta_info={"metrics": {"actor/pg_loss": [float(len(updates))]}})

    monkeypatch.setattr(RayPPOTrainer, "_update_actor", record_update)
    sent = []
    trainer.actor_rollout_wg = type("WorkerGroup", (), {"update_actor": lambda self, td: sent.append(td)})()
    trainer.arena_advantage, trainer.advantage_hp = "arena_grpo", {"norm_std": False}
    trainer.po = resolve_po_of({"method": "grpo"})
    trainer.run_writer, trainer.global_steps = None, 1

    out, _ = generated
    batch = out.slice(0, len(out))  # the 2 per-prompt rows fit() holds after its union
    batch.meta_info = {TURNS_KEY: turns_from_output(out, group_size=2, pad_id=tokenizer.pad_token_id),
                       METRICS_KEY: {"rollout/turn_samples": 4.0}}
    turns = batch.meta_info[TURNS_KEY]
    metrics = {}
    trainer._balance_batch(batch, metrics)
    # the adv/* diagnostics are the composer's, on the step's turn rows (as the embedded trainer logs them)
    assert {k: v for k, v in metrics.items() if k.startswith("adv/")} == advantage_diagnostics(trainer.po, turns)
    assert len(batch) == 6  # swapped in place: 4 turn rows + 2 pad rows
    assert balanced == [[0, 0, 0], [1, 1, 1]]  # verl balanced each mini-batch alone
    # each mini-batch's rows reversed by the recorder, the mini-batches kept in order
    want = _expected()
    for name in ("group_id", "traj_id", "turn_idx", "won"):
        assert batch.non_tensor_batch[name][:3].tolist() == want[name][:3][::-1], name
        assert batch.non_tensor_batch[name][5] == want[name][3], name
    assert batch.non_tensor_batch[PAD_KEY].tolist() == [False] * 3 + [True, True, False]
    assert batch.non_tensor_batch[MINI_KEY].tolist() == [0, 0, 0, 1, 1, 1]
    assert metrics["rollout/turn_samples"] == 4.0 and metrics["rollout/pad_rows"] == 2.0
    assert metrics["actor/updates_per_step"] == 4.0  # 2 mini-batches x 2 epochs
    assert metrics["global_seqlen/max"] == 3.0 and metrics["global_seqlen/mean"] == 3.0

    reply = trainer._update_actor(batch)
    # one verl update per mini-batch and epoch, epoch-major; the second mini-batch: 3 rows, 1 real
    assert [(len(part), rows, seqs, epochs) for part, rows, seqs, epochs in updates] == [
        (3, 3, 3, 1), (3, 3, 1, 1), (3, 3, 3, 1), (3, 3, 1, 1)]
    assert [part.non_tensor_batch[MINI_KEY].tolist() for part, *_ in updates] == [[0] * 3, [1] * 3] * 2
    assert len(sent) == 4 and trainer.actor_rollout_wg is not None
    assert not isinstance(trainer.actor_rollout_wg, OneMiniBatchUpdate)  # restored after the update
    assert reply.meta_info["metrics"] == {"actor/pg_loss": [1.0, 2.0, 3.0, 4.0]}  # the calls' lists, in order
    # GRPO, no std, over the group's 4 turn rows: A_j = score_j - mean(score); pads 0
    mask = batch.batch["response_mask"]  # [6, T]
    per_row = (batch.batch["advantages"] * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # [6]
    real = [2, 1, 0, 5]  # rows 0..3 of the turn order sit at these positions
    torch.testing.assert_close(per_row[real], want["score"] - want["score"].mean(), rtol=0, atol=1e-6)
    assert batch.batch["advantages"][3:5].abs().sum() == 0


# --------------------------------------------------------------------------- stop rule, real tokenizer
def test_agent_loop_sends_the_stop_and_cuts_an_overshooting_server(tmp_path):
    # A byte-level BPE tokenizer in the HF layout, in which "</action>" is several tokens. The
    # server ignores `stop` and returns RIGHT + " then more": the loop must ask for the stop
    # (sampling_params["stop"]) and cut the ids after the token that completes "</action>" (the
    # space before "then" is a pre-token boundary, so the cut text is exactly RIGHT).
    from tests.verl.real_tokenizer import STOP, build_real_tokenizer

    tok = build_real_tokenizer(tmp_path)
    assert len(tok.encode(STOP, add_special_tokens=False)) > 1
    long_ids = tok.encode(RIGHT + " then more", add_special_tokens=False)
    seen = []

    class OvershootingServer:
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            seen.append(dict(sampling_params))
            return TokenOutput(token_ids=long_ids, log_probs=[-0.5] * len(long_ids))

    out = _generate_corridor(_worker(tok, OvershootingServer()), seed=3, rows=1)
    (turn,) = out.non_tensor_batch["arena_turns"][0]  # "right" solves the corridor in one turn
    n = len(tok.encode(RIGHT, add_special_tokens=False))
    assert turn["response_ids"] == long_ids[:n] and turn["text"] == RIGHT
    assert turn["logp"] == [-0.5] * n and turn["action_valid"]
    assert seen[0]["stop"] == [STOP]
