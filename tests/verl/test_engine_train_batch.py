"""verl's `ppo_loss` with loss_mode "arena" run through verl 0.9.1's FSDP engine
`train_batch` on CPU, in a one-process gloo group, on a tiny local Qwen3 and a hand-made
per-turn batch (TurnBatch -> `to_dataproto` -> `to_tensordict` -> `left_right_2_no_padding`,
as verl's trainer does in `_update_actor`).

What it takes to run the engine on CPU (platform plugin, fsdp2, eager attention, engine built
directly) is written in tests/verl/engine_helpers.py. The direct call of `ppo_loss` on a
hand-built TensorDict is tests/verl/test_ppo_loss.py.
"""
import math
from functools import partial

import pytest
import torch

pytest.importorskip("verl")

from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.metric.utils import AggregationType, Metric  # noqa: E402
from verl.workers.config import FSDPActorConfig, FSDPEngineConfig, FSDPOptimizerConfig, HFModelConfig  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402
from verl.workers.utils.padding import left_right_2_no_padding  # noqa: E402

from arena.lm.model import build_model, save_checkpoint  # noqa: E402
from arena.lm.tokenizer import build_tokenizer  # noqa: E402
from arena.backends.verl.dataproto import to_dataproto  # noqa: E402
from arena.backends.verl.policy_loss import ArenaPolicyLossConfig  # noqa: E402
from arena.backends.verl.agg_modes import VERL_AGG_MODE  # noqa: E402
from arena.po.compose import ResolvedPO  # noqa: E402
from arena.po.types import make_batch  # noqa: E402

from .engine_helpers import (  # noqa: E402
    left_pad, one_process_gloo_group, response_log_probs, right_pad, use_cpu_platform,
)

LR, WEIGHT_DECAY, KL_COEF = 1e-2, 0.01, 0.1
# 4 turn-rows of 2 trajectories (2 turns each), one task group; prompts 5,3,6,4 tokens
PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12], [5, 13, 14, 15, 16, 17], [18, 19, 20, 21]]
RESPONSES = [[22, 23, 24], [25, 26], [27, 28, 29, 30], [31]]  # lengths L = 3, 2, 4, 1
ADVANTAGES = [1.0, -0.5, 0.5, -1.0]  # A_j, broadcast over the row's response tokens


def _per_turn_batch(old_logp: torch.Tensor):
    """The engine's no-padding TensorDict of the 4 rows, with A_j, old and ref log-probs."""
    prompt_ids, prompt_mask = left_pad(PROMPTS, max(map(len, PROMPTS)))  # [N, P]
    response_ids, response_mask = right_pad(RESPONSES, max(map(len, RESPONSES)))  # [N, T]
    turns = make_batch(
        group_id=[0, 0, 0, 0], traj_id=[0, 0, 1, 1], turn_idx=[0, 1, 0, 1],
        turn_reward=[0.0, 1.0, 0.0, 0.0], episode_return=[1.0, 1.0, 0.0, 0.0], score=[1.0, 1.0, 0.0, 0.0],
        format_valid=[True] * 4, action_valid=[True] * 4, won=[True, True, False, False],
        prompt_ids=prompt_ids, prompt_mask=prompt_mask, response_ids=response_ids, response_mask=response_mask,
        old_logp=old_logp, ref_logp=old_logp - 0.1,
    )
    data = to_dataproto(turns, meta_info={"temperature": 1.0})
    data.batch["advantages"] = torch.tensor(ADVANTAGES)[:, None] * response_mask  # [N, T]
    td = left_right_2_no_padding(data.to_tensordict())
    # what the trainer (`_update_actor`) and TrainingWorker.train_batch put in a mini-batch
    tu.assign_non_tensor(
        td, calculate_entropy=False, global_batch_size=4, use_remove_padding=False, use_dynamic_bsz=False,
        micro_batch_size_per_gpu=2, max_token_len_per_gpu=None, use_fused_kernels=False,
    )
    return td


def _engine(ckpt_path: str, *, aggregation: str = "token_mean", entropy_coeff: float = 0.0):
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    model_config = HFModelConfig(path=ckpt_path, use_remove_padding=False, enable_gradient_checkpointing=False,
                                 override_config={"attn_implementation": "eager"})
    fp32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    actor = FSDPActorConfig(
        strategy="fsdp2", rollout_n=1, ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2,
        policy_loss=ArenaPolicyLossConfig.of(
            ResolvedPO(None, None, aggregation, "ppo", "none", "none", "grpo", "global", {})),
        loss_agg_mode=VERL_AGG_MODE[aggregation], use_kl_loss=True, kl_loss_coef=KL_COEF, kl_loss_type="low_var_kl",
        entropy_coeff=entropy_coeff,
        use_torch_compile=False,
        fsdp_config=FSDPEngineConfig(use_torch_compile=False, mixed_precision=fp32),
        optim=FSDPOptimizerConfig(lr=LR, weight_decay=WEIGHT_DECAY, total_training_steps=1),
    )
    actor.model_config = model_config
    # as ActorRolloutRefWorker.init_model fills the engine config from the actor config
    engine_config = actor.engine
    engine_config.use_dynamic_bsz = False
    engine_config.micro_batch_size_per_gpu = 2
    engine_config.infer_micro_batch_size_per_gpu = 2
    engine_config.use_remove_padding = False
    engine = FSDPEngineWithLMHead(model_config=model_config, engine_config=engine_config,
                                  optimizer_config=actor.optim, checkpoint_config=actor.checkpoint)
    engine.initialize()
    return engine, actor


def _full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


def test_ppo_loss_through_fsdp_engine_train_batch(tmp_path, monkeypatch):
    tok = build_tokenizer(["go north go south take key open door look around the room"] * 4,
                          vocab_size=64, kind="wordlevel")  # fewer real words; ids < 64 are valid
    model = build_model(64, size="tiny", attn_implementation="eager",
                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    save_checkpoint(model, tok, tmp_path / "ckpt")
    old_logp = response_log_probs(model, PROMPTS, RESPONSES)  # [N, T] the behaviour policy = the model

    use_cpu_platform(monkeypatch)
    with one_process_gloo_group(monkeypatch):
        engine, actor = _engine(str(tmp_path / "ckpt"))
        before = {n: _full(p) for n, p in engine.module.named_parameters()}
        with engine.train_mode():
            out = engine.train_batch(_per_turn_batch(old_logp), loss_function=partial(ppo_loss, config=actor))
            # the train-mode context zeroes the gradients on exit: read them inside it
            grads = {n: _full(p.grad) for n, p in engine.module.named_parameters() if p.grad is not None}
        after = {n: _full(p) for n, p in engine.module.named_parameters()}
        lr = engine.optimizer.param_groups[0]["lr"]

    # On-policy (old = current log-probs up to float noise, ratio = 1 +- 1e-6), so every
    # PPO-clip token loss is -A_j * r = -A_j, and token_mean over the global 10 tokens gives
    #   pg = -sum_j A_j L_j / sum_j L_j = -(1*3 - 0.5*2 + 0.5*4 - 1*1) / 10 = -3/10.
    # KL (low_var_kl) with ref = old - 0.1: d = ref - logp = -0.1 on every token,
    #   kl = exp(d) - d - 1 = e^-0.1 + 0.1 - 1 = 0.0048374180359595..., token mean the same.
    # total = pg + 0.1 * kl. The engine splits the 4 rows in order into 2 micro-batches of 2,
    # each normalised by the global 10 tokens (not its own 5), so the micro-batch terms are
    #   pg_1 = -(1*3 - 0.5*2) / 10 = -0.2,  pg_2 = -(0.5*4 - 1*1) / 10 = -0.1,
    #   kl_1 = kl_2 = kl * 5/10,
    # and the micro-batch losses sum to the total.
    kl = math.exp(-0.1) + 0.1 - 1.0
    total = sum(out["loss"])
    # 1e-6: the reference log-probs come from single-row forwards, the engine's from a padded
    # micro-batch; they differ by float32 rounding (~1e-7, measured), moving the ratio as much.
    assert len(out["loss"]) == 2 and math.isfinite(total)
    assert total == pytest.approx(-0.3 + KL_COEF * kl, abs=1e-6)

    metrics = out["metrics"]
    # actor/off_policy_kl and actor/clipfrac_pos_adv are arena's own keys: the "arena" loss ran
    expected_keys = ("actor/pg_loss", "kl_loss", "actor/ppo_kl", "actor/off_policy_kl", "actor/clipfrac_pos_adv",
                     "grad_norm")
    for key in expected_keys:
        assert key in metrics, f"{key} missing from {sorted(metrics)}"
    # the loss terms come back as one Metric per key holding the 2 micro-batch values, summed
    for key, values in (("actor/pg_loss", [-0.2, -0.1]), ("kl_loss", [kl / 2, kl / 2])):
        assert isinstance(metrics[key], Metric) and metrics[key].aggregation == AggregationType.SUM
        assert metrics[key].values == pytest.approx(values, abs=1e-6)
        assert metrics[key].aggregate() == pytest.approx(sum(values), abs=1e-6)
    # on-policy: mean(old - logp) ~ 0 (float noise only)
    assert metrics["actor/off_policy_kl"].aggregate() == pytest.approx(0.0, abs=1e-6)
    assert math.isfinite(metrics["grad_norm"]) and metrics["grad_norm"] > 0

    # First AdamW step (m1 = (1-b1) g, v1 = (1-b2) g^2, bias-corrected m^ = g, sqrt(v^) = |g|):
    #   p1 = p0 * (1 - lr * wd) - lr * g / (|g| + eps),  eps = 1e-8,
    # with g the clipped gradient left in .grad. Every parameter changed.
    assert lr == LR and set(grads) == set(before)
    for name, p0 in before.items():
        g = grads[name]
        expected = p0 * (1 - LR * WEIGHT_DECAY) - LR * g / (g.abs() + 1e-8)
        torch.testing.assert_close(after[name], expected, rtol=0, atol=1e-6, msg=name)
        assert not torch.equal(after[name], p0), name
    assert any(g.abs().max() > 0 for g in grads.values())
