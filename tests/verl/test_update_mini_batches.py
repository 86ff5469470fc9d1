"""verl's actor update on the embedded backend's mini-batches, pad rows included (mini_batches.py).

1. Pad rows change no loss: a mini-batch of 2 real rows and 1 pad row goes through
   `ArenaRayPPOTrainer._update_actor` -> verl's own `_update_actor` (to_tensordict,
   left_right_2_no_padding, the non-tensor sizes) -> a recording worker group; verl's `ppo_loss`
   (the "arena" PG term, verl's KL and entropy terms) on what the worker group received gives
   the hand-derived loss of each aggregation mode, and the same value and gradient as the 2 real
   rows alone.
2. The whole update: 5 turn rows, k = 2 mini-batches, micro-batch 2 rows: the trainer drives
   verl's real `TrainingWorker.train_mini_batch` and FSDP engine on CPU (one-process gloo group,
   tests/verl/engine_helpers.py), against the embedded `ppo_update` on the same rows, model and
   optimizer settings: the same per-step losses, gradient norms and weights after both steps.
"""
import math
from functools import partial
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.metric import reduce_metrics  # noqa: E402
from verl.workers.config import ActorConfig  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402
from verl.workers.utils.padding import no_padding_2_padding  # noqa: E402

from arena.backends.verl import trainer as trainer_module  # noqa: E402
from arena.backends.verl.fan_out import actor_rows  # noqa: E402
from arena.backends.verl.mini_batches import MiniBatch, mini_batch_layout  # noqa: E402
from arena.backends.verl.policy_loss import ArenaPolicyLossConfig  # noqa: E402
from arena.backends.verl.agg_modes import VERL_AGG_MODE  # noqa: E402
from arena.po.compose import ResolvedPO  # noqa: E402
from arena.po.types import make_batch  # noqa: E402

from .engine_helpers import left_pad, response_log_probs, right_pad  # noqa: E402

KL_COEF, ENTROPY_COEF = 0.1, 0.01


def _turns(prompts, responses, old_logp, *, group_id):
    n = len(prompts)
    prompt_ids, prompt_mask = left_pad(prompts, max(map(len, prompts)))  # [N, P]
    response_ids, response_mask = right_pad(responses, max(map(len, responses)))  # [N, T]
    return make_batch(
        group_id=group_id, traj_id=list(range(n)), turn_idx=[0] * n, turn_reward=[0.0] * n,
        episode_return=[0.0] * n, score=[0.0] * n, format_valid=[True] * n, action_valid=[True] * n,
        won=[False] * n, prompt_ids=prompt_ids, prompt_mask=prompt_mask, response_ids=response_ids,
        response_mask=response_mask, old_logp=old_logp, ref_logp=old_logp - 0.1,
    )


def _trainer(worker_group, *, epochs=1, micro=2):
    """ArenaRayPPOTrainer without __init__ (which needs Ray), with the config keys verl's
    `_update_actor` reads."""
    trainer = trainer_module.ArenaRayPPOTrainer.__new__(trainer_module.ArenaRayPPOTrainer)
    trainer.config = OmegaConf.create({
        "actor_rollout_ref": {
            "actor": {"ppo_mini_batch_size": 1, "ppo_micro_batch_size_per_gpu": micro, "ppo_epochs": epochs,
                      "calculate_entropy": True, "entropy_coeff": ENTROPY_COEF, "data_loader_seed": 42,
                      "shuffle": False},
            "rollout": {"n": 1, "temperature": 1.0, "multi_turn": {"enable": True}}},
        "trainer": {"n_gpus_per_node": 1, "nnodes": 1}})
    trainer.arena_advantage, trainer.advantage_hp = "arena_grpo", {}
    trainer.actor_rollout_wg = worker_group
    return trainer


def _hand_advantages(monkeypatch):
    """Keep the advantages the test wrote (the trainer's estimator step is tested elsewhere)."""
    monkeypatch.setattr(trainer_module, "apply_arena_advantage", lambda data, *args, **kw: data)


def _flat(resp: torch.Tensor, td) -> torch.Tensor:
    """Response values [B, T] -> the engine's no-padding output layout of `td` (the inverse of
    verl's no_padding_2_padding): row j holds P_j + R_j slots, token t at slot P_j - 1 + t."""
    attention = td["attention_mask"]  # [B, P + T] (verl keeps it padded here, as no_padding_2_padding reads it)
    width = td["prompts"].shape[1]
    prompt_lens = attention[:, :width].sum(-1).tolist()  # [B]
    response_lens = attention[:, width:].sum(-1).tolist()  # [B]
    starts = [sum(p + r for p, r in zip(prompt_lens[:j], response_lens[:j])) for j in range(len(prompt_lens))]
    flat = torch.zeros(sum(prompt_lens) + sum(response_lens), dtype=resp.dtype)  # [nnz]
    for j, (start, p, r) in enumerate(zip(starts, prompt_lens, response_lens)):
        flat[start + p - 1: start + p - 1 + r] = resp[j, :r]
    return flat


# Rows: real row 0 (3 tokens, A = +1), real row 1 (1 token, A = -2), a pad row copying row 0
# (mask 0; its advantage set to 7 to show the mask alone keeps it out). On-policy (logp = old),
# so the PPO ratio is 1 and the PG token loss is -A. KL: ref = logp - 0.1 on every token, so
# low_var_kl = e^-0.1 + 0.1 - 1 = c per token. Entropy 0.5 per token. T = 3 (the batch's width).
#   token sums: PG row 0: -3, row 1: +2; KL 3c, c; entropy 1.5, 0.5; N_tok = 4, N_seq = 2 (pad excluded)
#   token_mean:              PG (-3 + 2) / 4 = -1/4,   KL 4c / 4 = c,      H 2 / 4 = 1/2
#   seq_mean_token_sum:      PG (-3 + 2) / 2 = -1/2,   KL 4c / 2 = 2c,     H 2 / 2 = 1
#   seq_mean_token_mean:     PG (-1 + 2) / 2 = 1/2,    KL (c + c) / 2 = c, H (0.5 + 0.5) / 2 = 1/2
#   seq_mean_token_sum_norm: seq_mean_token_sum / T:   PG -1/6, KL 2c/3, H 1/3
# total = PG + 0.1 KL - 0.01 H. With the pad counted (N_seq = 3, verl's padded global_batch_size
# before mini_batches.py) every seq-mean term would be 2/3 of these; token_mean is unchanged.
C = math.exp(-0.1) + 0.1 - 1.0
HAND = {
    "token_mean": (-1 / 4, C, 1 / 2),
    "seq_mean_token_sum": (-1 / 2, 2 * C, 1.0),
    "seq_mean_token_mean": (1 / 2, C, 1 / 2),
    "seq_mean_token_sum_norm": (-1 / 6, 2 * C / 3, 1 / 3),
}


def _loss_of_sent(monkeypatch, agg: str, with_pad: bool, seqs=None):
    """(total, metrics, grad [B, T] of the response log-probs, non-tensor sizes) of verl's
    ppo_loss on the TensorDict the trainer sent for a mini-batch of rows 0-1 (+ the pad)."""
    _hand_advantages(monkeypatch)
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.5], [0.125, 1.0, 1.0]], dtype=torch.float64))  # [2, T]
    turns = _turns([[5, 6], [7]], [[8, 9, 10], [11]], logp.float(), group_id=[0, 0])
    layout = [MiniBatch(0, 2, 3 if with_pad else 2)]
    batch = actor_rows(turns, layout=layout, meta_info={})
    batch.batch["advantages"] = torch.tensor([[1.0] * 3, [-2.0] * 3, [7.0] * 3][: len(batch)])  # [B, T] pad: 7
    sent = []
    trainer = _trainer(SimpleNamespace(update_actor=lambda td: sent.append(td) or tu.get_tensordict(
        {}, {"metrics": {"mfu": [0.0]}})), micro=len(batch))
    trainer._update_actor(batch)
    (td,) = sent
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=float(td["loss_mask"].sum()))  # as the engine counts
    sizes = (tu.get(td, "mini_batch_size"), tu.get(td, "global_batch_size"), tu.get(td, "epochs"))
    if seqs is not None:
        tu.assign_non_tensor(td, global_batch_size=seqs)
    logp_rows = torch.cat([logp, logp[:1]])[: len(batch)].requires_grad_(True)  # [B, T] the pad copies row 0
    actor = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=len(batch),
                        policy_loss=ArenaPolicyLossConfig.of(ResolvedPO(None, None, agg, "ppo", "none", "none", "grpo",
                                                                        "global", {})),
                        loss_agg_mode=VERL_AGG_MODE[agg], use_kl_loss=True, kl_loss_coef=KL_COEF,
                        kl_loss_type="low_var_kl", entropy_coeff=ENTROPY_COEF)
    entropy = torch.full_like(logp_rows, 0.5)  # [B, T]
    td_loss = td.clone()
    td_loss["old_log_probs"] = logp_rows.detach()  # [B, T] on-policy
    td_loss["ref_log_prob"] = logp_rows.detach() - 0.1  # [B, T]
    total, metrics = ppo_loss(actor, {"log_probs": _flat(logp_rows, td), "entropy": _flat(entropy, td)}, td_loss)
    (grad,) = torch.autograd.grad(total, logp_rows)  # [B, T]
    return total, metrics, grad, sizes


@pytest.mark.parametrize("agg", sorted(HAND))
def test_a_pad_row_changes_no_loss_and_no_gradient(agg, monkeypatch):
    total, metrics, grad, sizes = _loss_of_sent(monkeypatch, agg, with_pad=True)
    assert sizes == (3, 2, 1)  # 3 rows in the mini-batch, 2 of them real: the seq-mean denominator
    pg, kl, ent = HAND[agg]
    assert metrics["actor/pg_loss"].aggregate() == pytest.approx(pg, abs=1e-6)
    assert metrics["kl_loss"].aggregate() == pytest.approx(kl, abs=1e-6)
    assert metrics["actor/entropy_loss"].aggregate() == pytest.approx(ent, abs=1e-6)
    assert float(total.detach()) == pytest.approx(pg + KL_COEF * kl - ENTROPY_COEF * ent, abs=1e-6)
    counted = _loss_of_sent(monkeypatch, agg, with_pad=True, seqs=3)[0]  # the pad counted, as verl would
    scale = 1.0 if agg == "token_mean" else 2 / 3  # N_seq 2 -> 3 in every seq-mean term
    assert float(counted.detach()) == pytest.approx(float(total.detach()) * scale, abs=1e-7)
    plain_total, _, plain_grad, plain_sizes = _loss_of_sent(monkeypatch, agg, with_pad=False)
    assert plain_sizes == (2, 2, 1)
    assert float(total.detach()) == pytest.approx(float(plain_total.detach()), abs=1e-7)
    torch.testing.assert_close(grad[:2], plain_grad, rtol=0, atol=1e-7)
    assert grad[2].abs().sum() == 0 and grad[:2].abs().sum() > 0


def test_seqs_count_rows_with_tokens_only():
    from arena.backends.verl.mini_batches import rows_with_tokens

    mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0]])  # [3, T]: rows 0 and 2 have tokens
    assert rows_with_tokens(mask) == 2 and rows_with_tokens(torch.zeros(2, 3)) == 1  # empty: numerator 0


# ----------------------------------------------------------------------------- the whole update
# 5 rows, k = 2: the embedded slices are [0, 2) and [2, 5) (round(2.5) = 2); micro-batch 2 rows
# -> 2 + 4 rows on verl, one pad row after row 4. The second step's seq-mean denominators are 3
# (its real rows), not 4; the old fixed cut would have put rows 0-3 in the first step.
PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12], [5, 13, 14, 15, 16, 17], [18, 19, 20, 21], [22, 23]]
RESPONSES = [[24, 25, 26], [27, 28], [29, 30, 31, 32], [33], [34, 35, 36]]
ADVANTAGES = [1.0, -0.5, 0.5, -1.0, 0.8]


class _EngineActor:
    """The actor worker group on one process: update_actor = verl's TrainingWorker.train_mini_batch
    (what ActorRolloutRefWorker.update_actor calls) on a worker holding the CPU FSDP engine."""

    def __init__(self, engine, engine_config, model_config, actor):
        from verl.utils.profiler import DistProfiler
        from verl.workers.engine_workers import TrainingWorker

        worker = TrainingWorker.__new__(TrainingWorker)  # its __init__ starts a Ray-managed process group
        worker.engine, worker.engine_config, worker.model_config = engine, engine_config, model_config
        worker.loss_fn, worker.device_name = partial(ppo_loss, config=actor), "cpu"
        worker.flops_counter = SimpleNamespace(estimate_flops=lambda *a, **kw: (0.0, 1.0))  # MFU not tested
        worker.profiler = DistProfiler(rank=0, config=None)
        self.worker, self.calls = worker, []

    def update_actor(self, td):
        self.calls.append((tu.get(td, "mini_batch_size"), tu.get(td, "global_batch_size")))
        return self.worker.train_mini_batch(td)


@pytest.mark.parametrize("agg", ["seq_mean_token_sum", "token_mean"])
def test_k2_update_equals_the_embedded_update(agg, tmp_path, monkeypatch):
    from arena.lm.logprobs import token_logprobs_and_entropy
    from arena.lm.model import build_model, load_model, save_checkpoint
    from arena.lm.tokenizer import build_tokenizer
    from arena.backends.embedded.update import ppo_update

    from .engine_helpers import one_process_gloo_group, use_cpu_platform
    from .test_engine_train_batch import KL_COEF as ENGINE_KL_COEF, LR, _engine, _full

    torch.manual_seed(0)
    tok = build_tokenizer(["go north go south take key open door look around the room"] * 4,
                          vocab_size=64, kind="wordlevel")
    model = build_model(64, size="tiny", attn_implementation="eager",
                        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    save_checkpoint(model, tok, tmp_path / "ckpt")
    old_logp = response_log_probs(model, PROMPTS, RESPONSES)  # [N, T] the behaviour policy = the model
    turns = _turns(PROMPTS, RESPONSES, old_logp, group_id=[0, 0, 1, 1, 1])
    layout = mini_batch_layout(len(turns), num_mini_batches=2, mini_batch_turns=None, unit=2)
    assert [tuple(mb) for mb in layout] == [(0, 2, 2), (2, 5, 4)]
    batch = actor_rows(turns, layout=layout, meta_info={"temperature": 1.0})
    mask = batch.batch["response_mask"]  # [6, T], row 5 the pad (mask 0)
    batch.batch["advantages"] = torch.tensor(ADVANTAGES + [0.0])[:, None] * mask  # [6, T]
    _hand_advantages(monkeypatch)

    use_cpu_platform(monkeypatch)
    with one_process_gloo_group(monkeypatch):
        engine, actor = _engine(str(tmp_path / "ckpt"), aggregation=agg, entropy_coeff=ENTROPY_COEF)
        worker_group = _EngineActor(engine, actor.engine, actor.model_config, actor)
        out = _trainer(worker_group)._update_actor(batch)
        verl_params = {n: _full(p) for n, p in engine.module.named_parameters()}
    assert worker_group.calls == [(2, 2), (4, 3)]  # rows, real rows of each step

    ours_model, _ = load_model(str(tmp_path / "ckpt"))
    ours_model = ours_model.float()
    start = {n: p.detach().clone() for n, p in ours_model.named_parameters()}
    optimizer = torch.optim.AdamW(ours_model.parameters(), lr=LR, weight_decay=0.01)  # verl's optim defaults
    po = ResolvedPO(None, None, agg, "ppo", "none", "none", "grpo", "global", {})
    ours = ppo_update(ours_model, optimizer, po, turns, torch.tensor(ADVANTAGES), token_logprobs_and_entropy,
                      num_mini_batches=2, micro_batch_size=2, kl_coef=ENGINE_KL_COEF, entropy_coef=ENTROPY_COEF,
                      grad_clip=1.0)
    theirs = reduce_metrics(dict(out.meta_info["metrics"]))
    assert ours["actor/updates_per_step"] == 2 and len(out.meta_info["metrics"]["actor/pg_loss"]) == 2
    for key in ("actor/pg_loss", "actor/grad_norm"):  # means over the 2 steps
        assert theirs[key] == pytest.approx(ours[key], abs=1e-5, rel=1e-5), key
    # With the padded row count as denominator (verl's own global_batch_size) the seq-mean step 2
    # would be 3/4 of this: measured pg_loss mean -0.9564 against -1.1086 (seq_mean_token_sum).
    gap = max(float((p.detach() - verl_params[n]).abs().max()) for n, p in ours_model.named_parameters())
    moved = max(float((p.detach() - start[n]).abs().max()) for n, p in ours_model.named_parameters())
    # AdamW's first steps move a weight by ~lr * g / |g|, so float32 rounding of a tiny gradient
    # component shows at a fraction of lr: measured gap 1.3e-4 (seq_mean_token_sum) and 2.6e-5
    # (token_mean) for moves of 2.0e-2 = 2 lr; rows put in the wrong step would flip signs (gap ~lr).
    assert moved > LR and gap < 0.05 * LR, (gap, moved)
