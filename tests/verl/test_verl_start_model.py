"""The verl config's starting checkpoint and checkpoint folder before run_training sets them
(arena/backends/verl/verl_config.py start_model_path): real paths of the run, never a folder
nothing writes. Without model.path (or with bc.source=rejection) it is the run's BC checkpoint,
<results_dir>/bc/<bc_hash>/model, the folder ensure_bc_checkpoint returns; verl's checkpoints go
to the run folder's ckpt/ (RunFolder.ckpt, as main.runtime_overrides sets it)."""
import pytest

pytest.importorskip("verl")

from arena.bc.key import bc_hash  # noqa: E402
from arena.backends.verl.verl_config import build_verl_config  # noqa: E402
from arena.config import cell_id, load_config  # noqa: E402
from arena.runs import RunFolder  # noqa: E402
from arena.runs.layout import run_dir  # noqa: E402

ARGS = ["backend=verl", "env=sokoban", "group_size=4", "batch_envs=8", "ppo_num_mini_batches=2", "micro_batch_size=4"]


def test_without_model_path_verl_starts_from_the_runs_bc_checkpoint(tmp_path):
    cfg = load_config([*ARGS, f"results_dir={tmp_path}"])
    verl_cfg = build_verl_config(cfg)
    # by hand: <results_dir>/bc/<bc_hash(cfg)>/model, <results_dir>/runs/<cell_id(cfg)>/ckpt
    assert verl_cfg.actor_rollout_ref.model.path == str(tmp_path / "bc" / bc_hash(cfg) / "model")
    assert verl_cfg.trainer.default_local_dir == str(tmp_path / "runs" / cell_id(cfg) / "ckpt")
    assert verl_cfg.trainer.default_local_dir == str(RunFolder(run_dir(cfg)).ckpt)


def test_model_path_is_kept_and_rejection_bc_starts_from_its_bc_checkpoint(tmp_path):
    given = load_config([*ARGS, f"results_dir={tmp_path}", "model.path=/models/qwen"])
    assert build_verl_config(given).actor_rollout_ref.model.path == "/models/qwen"
    # bc.source=rejection: model.path plays the rejection rollouts; RL starts from the BC checkpoint
    rejection = load_config([*ARGS, f"results_dir={tmp_path}", "model.path=/models/qwen", "bc.source=rejection"])
    assert build_verl_config(rejection).actor_rollout_ref.model.path == str(tmp_path / "bc" / bc_hash(rejection) / "model")
    out = load_config([*ARGS, f"results_dir={tmp_path}", f"out={tmp_path / 'mine'}"])
    assert build_verl_config(out).trainer.default_local_dir == str(tmp_path / "mine" / "ckpt")
