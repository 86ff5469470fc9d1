"""Every preset trains on the multi-turn Sokoban testbed (the embedded-backend task: "all four dimensions and
all 12 presets work here"): two smoke steps each, from one shared BC checkpoint.

Checked per preset: the run finishes, every step row has the actor metrics, the
dimension-specific metrics move where they must (the sequence mask can only reject rows in the
second mini-batch, dynamic filtering reports its kept-group fraction), and the resolved
members recorded in the config are the preset's."""
import pytest
from omegaconf import OmegaConf

from arena.backends.embedded.run import run_training
from arena.runs.layout import run_dir
from arena.config import load_config, resolve_po
from arena.po.filtering import FILTER
from arena.po.methods import METHODS
from arena.runs import RunFolder


@pytest.mark.parametrize("method", list(METHODS))
def test_preset_trains_on_sokoban(method, tmp_path_factory):
    results = tmp_path_factory.getbasetemp() / "presets_results"
    cfg = load_config(["budget=smoke", "steps=2", "test_freq=2", f"po.method={method}", f"results_dir={results}",
                       "wandb.enabled=false", "ppo_num_mini_batches=2"])
    assert run_training(cfg, log=lambda *_: None) == 0
    run = RunFolder(run_dir(cfg))
    assert run.summary()["steps"] == 2
    rows = [r for r in run.read_metrics() if r["step"] > 0]
    po = resolve_po(OmegaConf.load(run.config_file))
    assert (po.clipping, po.advantage, po.filtering) == (METHODS[method].clipping, METHODS[method].advantage, METHODS[method].filtering)
    for r in rows:
        assert r["actor/updates_per_step"] == 2.0
        assert 0.0 <= r["actor/clipfrac_high"] <= 1.0 and r["actor/grad_norm"] >= 0.0
        assert 0.0 < r["filter/kept_group_frac"] <= 1.0
        if METHODS[method].filtering == "none":
            # without filtering: one rollout try, every group kept
            assert r["filter/kept_group_frac"] == 1.0 and r["filter/tries"] == 1.0
        else:  # dynamic: at least one try, at most max_gen_batches (its default) of them
            max_tries = FILTER.with_defaults(po.filtering, po.member_hp("filtering"))["max_gen_batches"]
            assert 1.0 <= r["filter/tries"] <= max_tries
        if METHODS[method].seq_mask == "none":
            assert r["actor/masked_seqs"] == 0.0
