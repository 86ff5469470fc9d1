"""Rollout loop: rows, ids, rewards, scores, flags, anchors, padding, isolation of env errors."""
import pytest
import torch

from arena.agent.rollout import rollout, select_envs

ADMISSIBLE = ["good", "win", "stay"]


class LineEnv:
    """A fake env on a line. "good": +1 reward, move on; "win": +10, done, won; anything else:
    no-op, 0 reward. The observation names the env slot `uid` so a scripted policy can tell
    the trajectories apart. `fail_reset` / `fail_step_at` make it raise."""

    name = "line"
    instruction = "Reach the goal."

    def __init__(self, uid, max_turns=3, fail_reset=False, fail_step_at=None):
        self.uid, self.max_turns = uid, max_turns
        self.fail_reset, self.fail_step_at = fail_reset, fail_step_at

    def _obs(self):
        return f"env={self.uid} seed={self.seed} pos={self.pos}"

    def reset(self, seed):
        if self.fail_reset:
            raise RuntimeError("reset exploded")
        self.seed, self.pos, self.turn = seed, 0, 0
        return self._obs(), {"won": False, "admissible_actions": list(ADMISSIBLE)}

    def step(self, action):
        if self.turn == self.fail_step_at:
            raise RuntimeError("step exploded")
        self.turn += 1
        reward, won = {"good": (1.0, False), "win": (10.0, True)}.get(action, (0.0, False))
        self.pos += action == "good"
        done = won or self.turn >= self.max_turns
        return self._obs(), reward, done, {"won": won, "admissible_actions": list(ADMISSIBLE)}

    def is_admissible(self, action):
        return action in ADMISSIBLE

    def expert_action(self):
        return "win"


def ok(action):
    return f"<think>t</think><action>{action}</action>"


class ScriptedPolicy:
    """generate(): response = scripts[uid][turn]; prompt ids [uid+1]*(turn+1); response ids
    [10*uid+turn+1]*(turn+1); sampler logp -0.5 per token. Records every prompt."""

    def __init__(self, scripts, as_tensors=False):
        self.scripts, self.as_tensors = scripts, as_tensors
        self.calls, self.seen = 0, {}

    def __call__(self, prompts):
        self.calls += 1
        out = []
        for prompt in prompts:
            uid = int(prompt.split("env=")[-1].split()[0])  # the current observation is last
            turn = len(self.seen.setdefault(uid, []))
            self.seen[uid].append(prompt)
            prompt_ids = [uid + 1] * (turn + 1)
            token_ids = [10 * uid + turn + 1] * (turn + 1)
            logp = [-0.5] * (turn + 1)
            if self.as_tensors:
                prompt_ids, token_ids, logp = torch.tensor(prompt_ids), torch.tensor(token_ids), torch.tensor(logp)
            out.append((self.scripts[uid][turn], prompt_ids, token_ids, logp))
        return out


SCRIPTS = {
    0: [ok("good"), ok("win")],  # seed 7: rewards 1, 10 -> return 11, won
    1: ["I go good", ok("good"), "<action>win</action>"],  # malformed, valid, bad format (win still sent)
    2: [ok("stay")] * 3,  # seed 9: cut at max_turns=3, return 0, lost
    3: [ok("fly"), ok("good"), ok("win")],  # format-valid but inadmissible first turn
}


def test_per_turn_batch_rows_and_values():
    envs = [LineEnv(uid) for uid in range(4)]
    policy = ScriptedPolicy(SCRIPTS)
    batch, stats = rollout(envs, [7, 9], 2, policy, pad_id=-1)
    # slots j = b*n + i: j0,j1 play seed 7 (group 0), j2,j3 seed 9 (group 1); 2+3+3+3 = 11 rows
    assert batch.group_id.tolist() == [0] * 5 + [1] * 6
    assert batch.traj_id.tolist() == [0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert batch.turn_idx.tolist() == [0, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2]
    # j1 turn 0 sends the last 30 chars "I go good" -> no-op; "win" from the bad-format turn wins
    assert batch.turn_reward.tolist() == [1, 10, 0, 1, 10, 0, 0, 0, 0, 1, 10]
    assert batch.episode_return.tolist() == [11, 11, 11, 11, 11, 0, 0, 0, 11, 11, 11]
    assert batch.won.tolist() == [True] * 5 + [False] * 3 + [True] * 3
    assert batch.format_valid.tolist() == [True, True, False, True, False, True, True, True, True, True, True]
    assert batch.action_valid.tolist() == [True, True, False, True, False, True, True, True, False, True, True]
    # score = E - 0.1 * (1 - v): 11 - 0.1 = 10.9 on the invalid turns, -0 elsewhere
    expected_score = torch.tensor([11, 11, 10.9, 11, 10.9, 0, 0, 0, 10.9, 11, 11])
    assert torch.equal(batch.score, batch.episode_return - 0.1 * (~batch.action_valid).float())
    assert torch.allclose(batch.score, expected_score, atol=1e-6, rtol=0)
    assert batch.anchor_obs[:5] == [
        "env=0 seed=7 pos=0", "env=0 seed=7 pos=1",
        "env=1 seed=7 pos=0", "env=1 seed=7 pos=0", "env=1 seed=7 pos=1",
    ]
    assert batch.anchor_obs[5:8] == ["env=2 seed=9 pos=0"] * 3
    assert batch.response_text[2] == "I go good" and batch.response_text[4] == "<action>win</action>"
    # one batched generate call per turn (3 turns)
    assert policy.calls == 3
    # stats: 3 of 4 won; 11/4 turns; 9/11 format-valid; 8/11 action-valid; lengths (k+1) sum 21
    assert stats["success_rate"] == 0.75
    assert stats["mean_turns"] == 11 / 4
    assert stats["format_valid_ratio"] == pytest.approx(9 / 11, abs=1e-7)
    assert stats["action_valid_ratio"] == pytest.approx(8 / 11, abs=1e-7)
    assert stats["response_length"] == pytest.approx(21 / 11, abs=1e-7)
    assert stats["env_errors"] == [] and stats["n_turn_samples"] == 11
    assert stats["generate_seconds"] >= 0 and stats["env_seconds"] > 0


@pytest.mark.parametrize("as_tensors", [False, True])
def test_tensor_padding_and_masks(as_tensors):
    envs = [LineEnv(uid) for uid in range(4)]
    batch, _ = rollout(envs, [7, 9], 2, ScriptedPolicy(SCRIPTS, as_tensors), pad_id=-1)
    # longest prompt/response has turn+1 = 3 tokens -> P = T = 3
    assert batch.prompt_ids.shape == (11, 3) and batch.response_ids.shape == (11, 3)
    assert batch.prompt_ids.dtype == torch.long and batch.response_ids.dtype == torch.long
    # row 0 (uid 0, turn 0): prompt [1] left-padded, response [1] right-padded
    assert batch.prompt_ids[0].tolist() == [-1, -1, 1] and batch.prompt_mask[0].tolist() == [0, 0, 1]
    assert batch.response_ids[0].tolist() == [1, -1, -1] and batch.response_mask[0].tolist() == [1, 0, 0]
    # row 3 (uid 1, turn 1): prompt [2, 2], response [12, 12]
    assert batch.prompt_ids[3].tolist() == [-1, 2, 2] and batch.prompt_mask[3].tolist() == [0, 1, 1]
    assert batch.response_ids[3].tolist() == [12, 12, -1] and batch.response_mask[3].tolist() == [1, 1, 0]
    # row 10 (uid 3, turn 2): full width
    assert batch.response_ids[10].tolist() == [33, 33, 33] and batch.response_mask[10].tolist() == [1, 1, 1]
    assert batch.response_mask.dtype == torch.float32
    # sampler logp -0.5 on real tokens, 0 on padding
    assert torch.equal(batch.sampler_logp, -0.5 * batch.response_mask)


def test_history_advances_in_prompts():
    policy = ScriptedPolicy(SCRIPTS)
    rollout([LineEnv(uid) for uid in range(4)], [7, 9], 2, policy)
    first, second, third = policy.seen[1]
    assert "already taken" not in first and "Actions: good, win, stay" in first
    # turn 1 shows step 1 with the projected (fallback) action and the step count
    assert "Step 1: env=1 seed=7 pos=0\nAction 1: I go good" in second
    assert "You have already taken 1 step(s)." in second
    # turn 2 (history_length 2) shows steps 1 and 2
    assert "Action 1: I go good" in third and "Step 2: env=1 seed=7 pos=0\nAction 2: good" in third
    assert "You have already taken 2 step(s)." in third and third.endswith("</action>")


def test_raising_envs_are_isolated():
    # slot 1 (seed 7) raises at its second step; slot 2 (seed 9) raises in reset
    envs = [LineEnv(0), LineEnv(1, fail_step_at=1), LineEnv(2, fail_reset=True), LineEnv(3)]
    with pytest.warns(RuntimeWarning, match="seed="):
        batch, stats = rollout(envs, [7, 9], 2, ScriptedPolicy(SCRIPTS))
    assert len(stats["env_errors"]) == 2
    assert any("seed=9" in e and "reset" in e and "reset exploded" in e for e in stats["env_errors"])
    assert any("seed=7" in e and "step" in e and "turn=1" in e for e in stats["env_errors"])
    # slot 1 keeps its two generated turns with zero reward; slot 2 has no rows
    assert batch.traj_id.tolist() == [0, 0, 1, 1, 3, 3, 3]
    assert batch.turn_reward.tolist() == [1, 10, 0, 0, 0, 1, 10]
    assert batch.episode_return.tolist() == [11, 11, 0, 0, 11, 11, 11]
    assert batch.won.tolist() == [True, True, False, False, True, True, True]
    # slot 1 turn 0 was malformed (score 0 - 0.1); turn 1 valid (0)
    assert torch.allclose(batch.score[2:4], torch.tensor([-0.1, 0.0]), atol=1e-7, rtol=0)
    assert stats["success_rate"] == 0.5  # slots 0 and 3 of 4
    assert stats["mean_turns"] == 7 / 4


def test_max_turns_cap_and_id_offsets():
    scripts = {uid: [ok("stay")] * 5 for uid in range(2)}
    envs = [LineEnv(uid, max_turns=5) for uid in range(2)]
    batch, stats = rollout(envs, [4], 2, ScriptedPolicy(scripts), max_turns=2, first_group_id=10, first_traj_id=20)
    # the loop's cap (2) beats the env's (5): 2 trajectories x 2 turns
    assert batch.group_id.tolist() == [10, 10, 10, 10]
    assert batch.traj_id.tolist() == [20, 20, 21, 21]
    assert batch.turn_idx.tolist() == [0, 1, 0, 1]
    assert stats["mean_turns"] == 2


def test_factory_and_list_reuse():
    made = []

    def make_env():
        made.append(LineEnv(len(made) % 4))  # uids 0..3 again on every rollout
        return made[-1]

    assert len(select_envs(make_env, 4)) == 4 and len(made) == 4
    envs = [LineEnv(uid) for uid in range(6)]
    assert select_envs(envs, 4) == envs[:4]
    with pytest.raises(ValueError, match="needs 4 environments"):
        select_envs(envs[:3], 4)
    batch, _ = rollout(make_env, [7, 9], 2, ScriptedPolicy(SCRIPTS))
    assert len(made) == 8 and len(batch) == 11


def test_malformed_and_non_string_outputs_do_not_crash():
    scripts = {0: ["", "<think><think>", None], 1: ["\x00推" * 50, "<action>", "</action><action>"]}
    batch, stats = rollout([LineEnv(0), LineEnv(1)], [1], 2, ScriptedPolicy(scripts))
    assert len(batch) == 6 and not batch.format_valid.any()
    # every turn costs the penalty: score = 0 - 0.1
    assert torch.allclose(batch.score, torch.full((6,), -0.1), atol=1e-7, rtol=0)
    assert stats["format_valid_ratio"] == 0.0 and stats["env_errors"] == []


def test_generate_contract_violations_raise():
    with pytest.raises(ValueError, match="2 prompts"):
        rollout([LineEnv(0), LineEnv(1)], [1], 2, lambda prompts: [])
    bad = lambda prompts: [(ok("good"), [1], [1, 2], [0.0]) for _ in prompts]  # noqa: E731
    with pytest.raises(ValueError, match="sampler_logp has 1 entries for 2 tokens"):
        rollout([LineEnv(0)], [1], 1, bad)


def test_missing_sampler_logp_is_zero_and_empty_batch():
    gen = lambda prompts: [(ok("win"), [5], [6, 7], None) for _ in prompts]  # noqa: E731
    batch, _ = rollout([LineEnv(0)], [1], 1, gen)
    assert batch.sampler_logp.tolist() == [[0.0, 0.0]]
    with pytest.warns(RuntimeWarning):
        empty, stats = rollout([LineEnv(0, fail_reset=True)], [1], 1, gen)
    assert len(empty) == 0 and empty.response_ids.shape == (0, 0) and stats["success_rate"] == 0.0


class TaskEnv(LineEnv):
    """The goal is stated only in the reset observation (like household/alfworld)."""

    def reset(self, seed):
        obs, info = super().reset(seed)
        return obs + "\nYour task is to: reach pos 3", info


def test_task_from_first_observation_stays_in_prompt():
    policy = ScriptedPolicy({0: [ok("stay")] * 4})
    rollout([TaskEnv(0, max_turns=4)], [5], 1, policy)
    prompts = policy.seen[0]
    # turns 0-2 still show the reset observation (current or in the 2-pair window): no extra line
    assert all("Task:" not in p and p.count("reach pos 3") == 1 for p in prompts[:3])
    # turn 3 shows steps 2-3 only: the goal comes back as its own line
    assert "Task: reach pos 3" in prompts[3] and "Step 1:" not in prompts[3]


class BadAdmissibleEnv(LineEnv):
    def is_admissible(self, action):
        raise KeyError("no admissible list")


class BadStepResultEnv(LineEnv):
    def step(self, action):
        return "obs", 1.0, False  # 3-tuple instead of 4


def test_is_admissible_errors_and_malformed_step_results_are_isolated():
    envs = [BadAdmissibleEnv(0), BadStepResultEnv(1), LineEnv(2)]
    scripts = {0: [ok("good")], 1: [ok("good")], 2: [ok("win")]}
    with pytest.warns(RuntimeWarning):
        batch, stats = rollout(envs, [1, 2, 3], 1, ScriptedPolicy(scripts))
    # each broken trajectory keeps its one generated turn with zero reward; slot 2 wins
    assert batch.traj_id.tolist() == [0, 1, 2]
    assert batch.turn_reward.tolist() == [0, 0, 10] and batch.won.tolist() == [False, False, True]
    assert "seed=1" in stats["env_errors"][0] and "KeyError" in stats["env_errors"][0]
    assert "seed=2" in stats["env_errors"][1] and "ValueError" in stats["env_errors"][1]
