"""A run's config holds no key of the sweep (they are arena.config.verb_args.SweepArgs', not
RunConfig's), and the cell id did not change when they left the run config: they were never
hashed, so existing results keep their ids (docs/design.md, Run folder)."""
import dataclasses

import pytest
import yaml
from omegaconf import OmegaConf

from arena.config import BadConfig, cell_id, load_config
from arena.config.schema import RunConfig
from arena.config.verb_args import SearchArgs, SweepArgs, sweep_only_keys
from arena.runs import RunFolder

# The four keys RunConfig held until they moved to SweepArgs.
FORMER_RUN_KEYS = ("dimension", "seeds", "launcher", "fail_fast")
# Cell ids computed at commit c9236ca, the last commit whose RunConfig still held the four keys:
#   cell_id(load_config(["env=sanity"]))
#   cell_id(load_config(["env=sokoban", "po.method=gspo", "budget=smoke", "seed=1", "name=demo", "arm=gspo"]))
# printed by `python -c "from arena.config import cell_id, load_config; print(cell_id(load_config([...])))"`.
SANITY_ID = "ae2efc1e4bb98970"
GSPO_SMOKE_ID = "d41221c9f91ce57d"


def test_run_config_has_no_key_of_the_sweep_and_the_sweep_has_the_four():
    run = {f.name for f in dataclasses.fields(RunConfig)}
    assert not set(FORMER_RUN_KEYS) & run
    assert set(FORMER_RUN_KEYS) <= {f.name for f in dataclasses.fields(SweepArgs)}
    assert set(FORMER_RUN_KEYS) <= set(sweep_only_keys())
    # env and name are both a run config key and a sweep key: not refused on a one-config command
    assert not {"env", "name"} & set(sweep_only_keys())
    # search's method= is no sweep key: `arena train method=grpo` is a typo of po.method
    assert "method" in {f.name for f in dataclasses.fields(SearchArgs)} and "method" not in sweep_only_keys()
    with pytest.raises(BadConfig, match="did you mean po.method"):
        load_config(["method=grpo"])


def test_cell_ids_are_the_ones_of_the_commit_before_the_move():
    assert cell_id(load_config(["env=sanity"])) == SANITY_ID
    assert cell_id(load_config(["env=sokoban", "po.method=gspo", "budget=smoke", "seed=1", "name=demo",
                                "arm=gspo"])) == GSPO_SMOKE_ID


@pytest.mark.parametrize("arg", ["seeds=[0,5]", "dimension=is_clipping", "fail_fast=true", "launcher=debug"])
def test_load_config_refuses_a_sweep_key_naming_arena_sweep(arg):
    with pytest.raises(BadConfig, match=f"{arg.split('=')[0]}= is an option of `arena sweep`"):
        load_config(["env=sanity", arg])


def test_an_older_config_yaml_with_the_sweep_keys_hashes_to_its_folder_s_id(tmp_path):
    # A config.yaml written while RunConfig held the four keys carries them (this is the text
    # OmegaConf dumped then: the keys at their defaults); a summary without cell_id is owned by
    # the hash of that file (arena.runs.folder.summary_owner), so the id must ignore them.
    cfg = load_config(["env=sanity"])
    old = yaml.safe_load(OmegaConf.to_yaml(cfg))
    old.update(dimension=None, seeds=3, launcher="local", fail_fast=False)
    assert cell_id(OmegaConf.create(old)) == SANITY_ID


def test_config_yaml_is_the_resolved_config_with_its_arm(tmp_path):
    cfg = load_config(["env=sanity", "arm=gspo", "name=demo", "po.method=gspo"])
    text = OmegaConf.to_yaml(cfg)
    run = RunFolder(tmp_path / "cell").create()
    run.write_config(text)
    written = yaml.safe_load(run.config_file.read_text())
    assert written == yaml.safe_load(text) and not set(FORMER_RUN_KEYS) & set(written)
    assert written["arm"] == "gspo" and written["name"] == "demo"  # the arm is still recorded
    # the id read back from config.yaml (as the verl trainer does) is the run's id
    assert cell_id(OmegaConf.create(run.config_file.read_text())) == cell_id(cfg)


def test_the_tool_sandbox_record_in_config_yaml_does_not_change_the_cell_id(tmp_path):
    # Both backends append `tool_sandbox: <mode>` to config.yaml; the verl trainer reads the id
    # back from that file for summary.json. It must be the folder's id, or the sweep would take
    # the run's own summary for another cell's (a copied folder).
    cfg = load_config(["env=sanity"])
    run = RunFolder(tmp_path / "cell").create()
    run.write_config(OmegaConf.to_yaml(cfg) + OmegaConf.to_yaml({"tool_sandbox": None}))
    assert cell_id(OmegaConf.create(run.config_file.read_text())) == cell_id(cfg)
