"""compose.fast_config (Hydra composes once; an arm's value overrides applied to a copy) gives
exactly the config, and so the cell id, of a full Hydra composition with the arm's overrides."""
import pytest
from omegaconf import OmegaConf

from arena.config import BadConfig, cell_id, load_config
from arena.sweeps.compose import arm_config, fast_config
from arena.sweeps.grids import override_strings

COMMON = ["budget=smoke", "wandb.enabled=false"]
# Every kind of key the shipped grids and search table use: the method, a member swap, a
# top-level key, open-dict po.hp keys, the sequence mask, and a string "1e-4" (PyYAML reads
# `lr: 1e-4` as a string; Hydra's parser, used by both paths, reads it as the float 0.0001).
ARMS = [
    {"po.method": "gspo"},
    {"po.method": "sampo", "po.clipping": "ppo"},
    {"po.method": "sampo", "po.filtering": "none"},
    {"po.method": "cispo", "ppo_num_mini_batches": 4},
    {"po.method": "gspo", "po.hp.eps_low": 3.0e-4, "po.hp.eps_high": 4.0e-4},
    {"po.method": "cispo_sm", "po.hp.seq_mask_delta": 0.1},
    {"po.method": "gigpo", "po.hp.step_w": 0.5},
    {"lr": "1e-4"},
]


@pytest.fixture(scope="module")
def base():
    return load_config(["env=sokoban", *COMMON])


@pytest.mark.parametrize("arm", ARMS, ids=[",".join(a) for a in ARMS])
def test_fast_config_equals_hydra(base, arm):
    fast = fast_config(base, arm)
    full = load_config(["env=sokoban", *COMMON, *override_strings(arm)])
    assert fast is not None
    assert OmegaConf.to_container(fast) == OmegaConf.to_container(full)
    assert cell_id(fast) == cell_id(full)
    assert OmegaConf.is_struct(fast) == OmegaConf.is_struct(full)


def test_base_is_not_modified(base):
    before = OmegaConf.to_container(base)
    fast_config(base, {"po.method": "gspo", "po.hp.eps_high": 0.2})
    assert OmegaConf.to_container(base) == before


def test_groups_and_bad_input_go_to_hydra(base):
    assert fast_config(base, {"budget": "smoke"}) is None  # a config group: Hydra composes it
    assert fast_config(base, {"not_a_key": 1}) is None
    assert fast_config(base, {"po.method": "nope"}) is None
    with pytest.raises(BadConfig, match="unknown key 'not_a_key'"):
        arm_config(COMMON, {"not_a_key": 1}, "sokoban", base=base)
    with pytest.raises(BadConfig, match="valid: .*grpo"):
        arm_config(COMMON, {"po.method": "nope"}, "sokoban", base=base)
