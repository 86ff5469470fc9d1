"""A run's config.yaml carries no sweep-only key (docs/design.md, Run folder), and the cell id
is the same with or without them (they were never hashed: existing results keep their ids)."""
import yaml
from omegaconf import OmegaConf

from arena.config import cell_id, load_config
from arena.config.field_docs import dataclass_docs
from arena.config.schema import RunConfig
from arena.runs import RunFolder
from arena.runs.layout import SWEEP_ONLY_KEYS


def test_sweep_only_keys_are_the_schema_s_sweep_only_keys():
    documented = {d.key for d in dataclass_docs(RunConfig) if d.doc.startswith("sweep only")}
    assert documented == set(SWEEP_ONLY_KEYS)


def test_config_yaml_leaves_out_sweep_only_keys_and_keeps_the_rest(tmp_path):
    cfg = load_config(["env=sanity", "seeds=[0,5]", "dimension=is_clipping", "fail_fast=true",
                       "arm=gspo", "name=demo", "po.method=gspo"])
    cfg.launcher = "debug"  # (launcher= on the command line is Hydra's configs/launcher group)
    text = OmegaConf.to_yaml(cfg)
    full = yaml.safe_load(text)
    assert set(SWEEP_ONLY_KEYS) <= set(full)  # OmegaConf dumps them all
    run = RunFolder(tmp_path / "cell").create()
    run.write_config(text)
    written = yaml.safe_load(run.config_file.read_text())
    assert not set(SWEEP_ONLY_KEYS) & set(written)
    assert written == {k: v for k, v in full.items() if k not in SWEEP_ONLY_KEYS}  # nothing else lost or changed
    assert list(written) == [k for k in full if k not in SWEEP_ONLY_KEYS]  # same key order
    assert written["arm"] == "gspo" and written["name"] == "demo"  # the arm is still recorded
    # the id read back from config.yaml (as the verl trainer does) is the run's id
    assert cell_id(OmegaConf.create(run.config_file.read_text())) == cell_id(cfg)


def test_cell_id_ignores_the_sweep_only_keys():
    base = cell_id(load_config(["env=sanity"]))
    for change in ("seeds=[0,5]", "dimension=is_clipping", "fail_fast=true"):
        assert cell_id(load_config(["env=sanity", change])) == base, change
    cfg = load_config(["env=sanity"])
    cfg.launcher = "slurm"
    assert cell_id(cfg) == base


def test_text_without_sweep_keys_is_written_unchanged(tmp_path):
    run = RunFolder(tmp_path / "cell").create()
    text = "# a comment\nseed: 3\nenv:\n  name: sanity\n"
    run.write_config(text)
    assert run.config_file.read_text() == text


def test_the_tool_sandbox_record_in_config_yaml_does_not_change_the_cell_id(tmp_path):
    # Both backends append `tool_sandbox: <mode>` to config.yaml; the verl trainer reads the id
    # back from that file for summary.json. It must be the folder's id, or the sweep would take
    # the run's own summary for another cell's (a copied folder).
    cfg = load_config(["env=sanity"])
    run = RunFolder(tmp_path / "cell").create()
    run.write_config(OmegaConf.to_yaml(cfg) + OmegaConf.to_yaml({"tool_sandbox": None}))
    assert cell_id(OmegaConf.create(run.config_file.read_text())) == cell_id(cfg)
