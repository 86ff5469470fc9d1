"""budget=stress (configs/budget/stress.yaml; docs/testbed.md, "The collapse regime and the Fig. 4
quantities") loads, resolves, keeps the tiny model's band BC (Sokoban's default moved to the wider
one), and plans the clipping sweep."""
import arena.sweeps.cli as sweep_cli
from arena.bc.key import bc_hash
from arena.config.load import load_config

from ..sweeps import fake_train


def test_stress_budget_sets_the_off_policy_pressure():
    cfg = load_config(["budget=stress"])
    assert cfg.budget == "stress"
    # 8 mini-batches x 2 epochs = 16 optimizer steps per rollout step (budget=learn: 2 x 1)
    assert (cfg.steps, cfg.lr, cfg.ppo_num_mini_batches, cfg.ppo_epochs) == (40, 3.0e-4, 8, 2)
    assert (cfg.batch_envs, cfg.group_size, cfg.test_freq, cfg.eval.n) == (8, 8, 5, 256)


def test_stress_keeps_the_tiny_band_bc_and_sokobans_default_shares_learns():
    # The BC key (arena/bc/key.py) covers env, model, bc.*, seed, eval temperature/top_p and device.
    # Stress trains the tiny model (hidden 64) on configs/budget/default.yaml's band [0.30, 0.45];
    # Sokoban's default (configs/env_budget/sokoban_default.yaml) sets budget=learn's model and bc
    # block, so each seed's default BC is learn's checkpoint and stress's is another one.
    for seed in (0, 4):
        stress = load_config(["budget=stress", f"seed={seed}"])
        default = load_config(["budget=default", f"seed={seed}"])
        learn = load_config(["budget=learn", f"seed={seed}"])
        assert list(stress.bc.band) == [0.30, 0.45] and stress.bc.confirm == 2
        assert bc_hash(default) == bc_hash(learn) != bc_hash(stress)
        assert (stress.model.hidden, default.model.hidden, learn.model.hidden) == (None, 96, 96)
    assert bc_hash(load_config(["budget=stress", "seed=0"])) != bc_hash(load_config(["budget=stress", "seed=1"]))


def test_clipping_sweep_at_stress_dry_run(tmp_path):
    lines = []
    args = ["dimension=is_clipping", "budget=stress", "seeds=2", "launcher=debug", "wandb.enabled=false",
            f"results_dir={tmp_path / 'results'}", "--dry-run"]
    assert sweep_cli.sweep_main(args, train_fn=fake_train.train, bc_fn=fake_train.bc, log=lines.append) == 0
    cells = [line.split() for line in lines if line.startswith("  report ")]
    # 6 arms (grpo, gspo, cispo, sapo, cispo_sm, sapo_sm) x 1 env x 2 seeds = 12 cells, 40 steps each
    assert len(cells) == 12 and {c[5] for c in cells} == {"40"}
    assert sorted({c[4] for c in cells}) == ["cispo", "cispo_sm", "grpo", "gspo", "sapo", "sapo_sm"]
    assert not (tmp_path / "results").exists()
