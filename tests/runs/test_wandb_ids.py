"""W&B run ids never merge two runs (docs/design.md, W&B): the id is random and kept in the run
folder, so it is unique per folder and a resume keeps it. The configs are built the way the sweep
(arena.sweeps.plan.make_cell) and `arena train` (run_dir) build them."""
import re

from arena.config import cell_id, load_config
from arena.runs.layout import run_dir
from arena.runs.wandb_log import wandb_init_kwargs
from arena.sweeps.plan import make_cell

ARGS = ["env=sanity", "budget=sanity", "po.method=grpo"]
# W&B run ids: letters, digits, '-', '_' (no '/', '\\', '#', '?', '%', ':'), at most 64 characters
WANDB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _sweep_cell(results, name):
    base = load_config(ARGS + [f"results_dir={results}"])
    cell = make_cell(base, arm="grpo", env="sanity", seed=0, role="report", overrides={}, name=name)
    return cell.cfg, cell.cell_id


def _wandb_id(cfg, cell):
    return wandb_init_kwargs(cfg, cell, run_dir(cfg))["id"]


def test_the_same_cell_in_two_sweeps_gets_two_ids(tmp_path):
    a_cfg, a_cell = _sweep_cell(tmp_path, "is_clipping")
    b_cfg, b_cell = _sweep_cell(tmp_path, "all")
    assert a_cell == b_cell  # the same cell: without the sweep in the id, the two would merge
    a, b = _wandb_id(a_cfg, a_cell), _wandb_id(b_cfg, b_cell)
    assert a != b
    assert a.startswith(a_cell + "-") and WANDB_ID.fullmatch(a) and WANDB_ID.fullmatch(b)


def test_arena_train_and_a_sweep_cell_differ(tmp_path):
    sweep_cfg, cell = _sweep_cell(tmp_path, "is_clipping")
    train_cfg = load_config(ARGS + [f"results_dir={tmp_path}"])  # `arena train` of the same config
    named_cfg = load_config(ARGS + [f"results_dir={tmp_path}", "name=is_clipping"])  # ... even with the sweep's name
    assert cell_id(train_cfg) == cell_id(named_cfg) == cell
    assert run_dir(train_cfg) == run_dir(named_cfg) == tmp_path / "runs" / cell
    ids = {_wandb_id(sweep_cfg, cell), _wandb_id(train_cfg, cell)}
    assert len(ids) == 2 and _wandb_id(named_cfg, cell) == _wandb_id(train_cfg, cell)
    # two `arena train` runs of one config in two folders (out=) are two W&B runs too
    other = load_config(ARGS + [f"results_dir={tmp_path}", f"out={tmp_path / 'elsewhere'}"])
    assert _wandb_id(other, cell) not in ids


def test_a_resume_keeps_the_id(tmp_path):
    # a resume is a new process that rebuilds the config from the same command: the id is random
    # (`<cell>-<12 hex>`), made by the first start and kept in the run folder's wandb_id.txt, which
    # the resume reads. Forgetting the in-process state changes nothing: the file is the record.
    first_cfg, cell = _sweep_cell(tmp_path, "is_clipping")
    first = _wandb_id(first_cfg, cell)
    again_cfg, again_cell = _sweep_cell(tmp_path, "is_clipping")
    assert again_cell == cell and _wandb_id(again_cfg, cell) == first
    assert (run_dir(first_cfg) / "wandb_id.txt").read_text().strip() == first
    assert re.fullmatch(re.escape(cell) + "-[0-9a-f]{12}", first)
    train = load_config(ARGS + [f"results_dir={tmp_path}"])
    train_id = _wandb_id(train, cell)
    assert _wandb_id(load_config(ARGS + [f"results_dir={tmp_path}"]), cell) == train_id != first
    assert (tmp_path / "runs" / cell / "wandb_id.txt").read_text().strip() == train_id
