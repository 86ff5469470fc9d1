"""`arena verl-config`: every preset on Sokoban and the household task gives a verl config that
verl's own loader (Hydra compose of ppo_trainer.yaml) and dataclasses accept."""
import contextlib
import io

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402

from arena.backends.verl.cli import verl_config_main  # noqa: E402
from arena.backends.verl.policy_loss import ArenaPolicyLossConfig  # noqa: E402
from arena.backends.verl.verl_config import build_verl_config, validate  # noqa: E402
from arena.config.load import load_config, resolve_po  # noqa: E402
from arena.backends.verl.agg_modes import VERL_AGG_MODE  # noqa: E402
from arena.po.methods import METHODS  # noqa: E402


def _check_presets(env, methods):
    for method in methods:
        cfg = load_config([f"env={env}", f"po.method={method}", "group_size=4", "batch_envs=8",
                           "ppo_num_mini_batches=2", "micro_batch_size=4", "model.path=/models/qwen3-4b"])
        po = resolve_po(cfg)
        verl_cfg = build_verl_config(cfg)
        objs = validate(verl_cfg)
        actor, rollout, algo = objs["actor"], objs["rollout"], objs["algorithm"]
        loss = actor.policy_loss
        assert isinstance(loss, ArenaPolicyLossConfig) and loss.loss_mode == "arena", method
        # the whole resolved PO reaches verl: every member and every explicit hyperparameter
        assert loss.resolved() == po and loss.po == po.to_dict(), method
        assert actor.loss_agg_mode == VERL_AGG_MODE[po.aggregation]
        assert algo.adv_estimator == f"arena_{po.advantage}"
        # turn-samples per mini-batch = 8*4/2 = 16 -> verl units 16/4 = 4 (verl multiplies by n=4)
        assert actor.ppo_mini_batch_size == 4 and actor.ppo_micro_batch_size_per_gpu == 4
        assert rollout.n == 4 and actor.kl_loss_coef == cfg.kl_coef and actor.use_kl_loss
        t = verl_cfg.trainer
        assert list(t.logger) == ["console", "wandb"] and t.save_freq == cfg.save_freq
        assert t.resume_mode == "auto" and t.experiment_name.endswith(f"/{method}/{env}")
        assert verl_cfg.actor_rollout_ref.model.path == "/models/qwen3-4b"


@pytest.mark.slow
@pytest.mark.parametrize("env", ["sokoban", "household"])
def test_every_preset_validates_through_verl(env):
    _check_presets(env, METHODS)  # 12 presets, ~1 s each (Hydra compose + verl dataclasses)


@pytest.mark.parametrize("env,methods", [("sokoban", ["grpo_st", "sampo"]), ("household", ["cispo_sm", "empg"])])
def test_some_presets_validate_through_verl(env, methods):
    _check_presets(env, methods)  # fast subset: every member kind at least once


def test_env_scoped_gspo_bounds_reach_verl():
    # sokoban's po_defaults.clipping.gspo: eps 3e-3 / 4e-3 (configs/env/sokoban.yaml)
    loss = build_verl_config(load_config(["env=sokoban", "po.method=gspo"])).actor_rollout_ref.actor.policy_loss
    assert (loss.po.hp.eps_low, loss.po.hp.eps_high) == (3.0e-3, 4.0e-3)


def test_the_loss_section_keeps_the_filtering_and_advantage_members():
    # sampo on Sokoban, by hand: methods.py's sampo line is clipping=gspo, filtering=dynamic,
    # advantage=gigpo (aggregation token_mean and no sequence mask by default), hp gamma 0.95,
    # step_w 1.0, mode mean_std_norm, max_gen_batches 2; configs/env/sokoban.yaml adds the gspo
    # bounds 3e-3/4e-3 and filter_key=won, cold_start_steps=0. The section verl's workers
    # instantiate gives all of it back: no filtering="none" or advantage="grpo" made up.
    from verl.utils.config import omega_conf_to_dataclass

    verl_cfg = build_verl_config(load_config(["env=sokoban", "po.method=sampo"]))
    po = omega_conf_to_dataclass(verl_cfg.actor_rollout_ref.actor).policy_loss.resolved()
    assert (po.method, po.group, po.agg_norm) == ("sampo", "combined", "global")
    assert (po.aggregation, po.clipping, po.seq_mask, po.filtering, po.advantage) == (
        "token_mean", "gspo", "none", "dynamic", "gigpo")
    assert po.member_hp("filtering") == {"cold_start_steps": 0, "filter_key": "won", "max_gen_batches": 2}
    assert po.member_hp("advantage") == {"gamma": 0.95, "mode": "mean_std_norm", "step_w": 1.0}
    assert po.member_hp("clipping") == {"eps_high": 4.0e-3, "eps_low": 3.0e-3}
    assert verl_cfg.algorithm.adv_estimator == "arena_gigpo"  # the estimator the trainer checks against po


def test_the_trainer_and_the_loss_use_one_resolved_po_for_every_preset(monkeypatch):
    # One channel (policy_loss.py): for each preset, the trainer (verl's driver) reads the PO from
    # the verl config's actor.policy_loss section, and the loss (verl's workers) gets it from the
    # ActorConfig verl instantiates from that same section. Both must be resolve_po(cfg), equal as
    # objects. RayPPOTrainer.__init__ is replaced (it needs Ray); the loss call is real, with the
    # composer's policy_loss wrapped to record the PO it is handed.
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.config import omega_conf_to_dataclass

    import torch

    from arena.backends.verl import policy_loss as vpl
    from arena.backends.verl.trainer import ArenaRayPPOTrainer

    monkeypatch.setattr(RayPPOTrainer, "__init__", lambda self, config: setattr(self, "config", config))
    loss_pos, real_policy_loss = [], vpl.policy_loss
    monkeypatch.setattr(vpl, "policy_loss", lambda po, *a, **k: (loss_pos.append(po), real_policy_loss(po, *a, **k))[1])
    old = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]])  # [B, T]
    logp, adv = old + 0.01, torch.tensor([[1.0, 1.0], [-1.0, -1.0]])  # [B, T] x2
    mask = torch.ones(2, 2, dtype=torch.bool)  # [B, T]
    assert len(METHODS) == 12
    for method in METHODS:
        cfg = load_config(["env=sokoban", f"po.method={method}"])
        want = resolve_po(cfg)
        verl_cfg = build_verl_config(cfg)
        actor = omega_conf_to_dataclass(verl_cfg.actor_rollout_ref.actor)  # as verl's workers build it
        pg, _ = vpl.arena_policy_loss(old, logp, adv, mask, actor.loss_agg_mode, actor)
        trainer = ArenaRayPPOTrainer(config=verl_cfg)
        assert trainer.po == loss_pos[-1] == want, method
        assert torch.isfinite(pg), method
    assert [po.method for po in loss_pos] == list(METHODS)  # the loss ran once per preset


def _run(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = verl_config_main(args)
    return rc, out.getvalue(), err.getvalue()


def test_cli_prints_yaml():
    rc, out, _ = _run(["env=household", "po.method=sampo", "verl.trainer.n_gpus_per_node=4"])
    assert rc == 0
    printed = OmegaConf.create(out)
    assert printed.algorithm.adv_estimator == "arena_gigpo" and printed.trainer.n_gpus_per_node == 4


@pytest.mark.parametrize("args,listed", [
    (["po.clipping=nope"], "valid: cispo, gspo, ppo, sapo"),
    (["po.method=nope"], "valid: grpo, grpo_st"),
    (["po.agg_norm=per_microbatch"], "valid: global"),
    (["verl.trainer.nope=1"], "valid keys under 'trainer': balance_batch"),
    (["env=nope"], "valid: alfworld, household"),
])
def test_bad_option_lists_valid_names(args, listed):
    rc, out, err = _run(args)
    assert rc == 2 and out == "" and listed in err


def test_cpu_runs_compute_in_float32_as_the_embedded_backend():
    # verl's FSDP engine runs forward/backward in bf16 unless fsdp_config.mixed_precision says
    # otherwise; the key is a field of FSDPEngineConfig that verl's yaml leaves out, so _set
    # accepts it as a dataclass field (and still refuses a name that is not one)
    from verl.utils.config import omega_conf_to_dataclass

    from arena.backends.verl.cpu_platform import FP32_MIXED_PRECISION, cpu_overrides
    from arena.backends.verl.verl_config import build_verl_config

    cfg = load_config(["backend=verl"])
    verl_cfg = build_verl_config(cfg, cpu_overrides())
    actor = omega_conf_to_dataclass(verl_cfg.actor_rollout_ref.actor)
    assert actor.fsdp_config.mixed_precision == FP32_MIXED_PRECISION == {
        "param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    assert verl_cfg.actor_rollout_ref.ref.fsdp_config.mixed_precision == FP32_MIXED_PRECISION
    assert verl_cfg.data.dataloader_num_workers == 0
    with pytest.raises(ValueError, match="unknown verl config key .*fsdp_config.no_such"):
        build_verl_config(cfg, {"actor_rollout_ref.actor.fsdp_config.no_such": 1})


@pytest.mark.parametrize("key,value", [("lr_warmup_steps", 5), ("lr_warmup_steps_ratio", 0.1),
                                       ("lr_scheduler_type", "cosine")])
def test_lr_schedule_other_than_constant_is_refused(key, value):
    # the trainer runs verl's update once per mini-batch, and each run steps verl's LR scheduler
    cfg = load_config(["env=sokoban", "budget=smoke"])
    assert build_verl_config(cfg).actor_rollout_ref.actor.optim.lr_scheduler_type == "constant"
    with pytest.raises(ValueError, match="valid: optim.lr_scheduler_type=constant"):
        build_verl_config(cfg, {f"actor_rollout_ref.actor.optim.{key}": value})
