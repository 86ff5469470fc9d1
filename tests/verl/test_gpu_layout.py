"""A device=cuda run's verl config for 1/2/4/8 GPUs and 1/2 nodes, built by the run's own code
(`main.run_verl_config`, what `_train` writes to verl_config.yaml), never by a copy of its logic;
`arena train --dry-run` and `arena verl-config` print that config; `verl.*` keys reach it and a
misspelt one exits 2 naming the valid keys; the pretrained-model lint; the multi-node script
reached from `arena train launcher=slurm nodes=2`. No GPU is needed: $ARENA_VERL_GPUS_PER_NODE
and $ARENA_VERL_NNODES give the counts, as the multi-node script sets them."""
import contextlib
import io
import json
import shutil
import subprocess

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402

from arena.backends.verl import gpu_layout, main as verl_main  # noqa: E402
from arena.cli import main as cli_main  # noqa: E402
from arena.config import load_config  # noqa: E402
from arena.runs import RunFolder  # noqa: E402

DONE_WHEN = ["train", "backend=verl", "device=cuda", "model=qwen2.5-7b",
             "verl.actor_rollout_ref.rollout.gpu_memory_utilization=0.6", "--dry-run"]


def _counts(monkeypatch, gpus, nodes=1):
    monkeypatch.setenv("ARENA_VERL_GPUS_PER_NODE", str(gpus))
    monkeypatch.setenv("ARENA_VERL_NNODES", str(nodes))


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(argv)
    return rc, out.getvalue(), err.getvalue()


def _run_config(tmp_path, args):
    cfg = load_config([f"out={tmp_path / 'run'}", *args])
    return cfg, verl_main.run_verl_config(cfg, RunFolder(tmp_path / "run"))


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_every_gpu_and_node_count_gets_a_layout_that_divides(tmp_path, monkeypatch, gpus, nodes):
    # model=qwen2.5-7b: vLLM, batch_envs 16 x group_size 8 = 128 episodes a step
    _counts(monkeypatch, gpus, nodes)
    cfg, v = _run_config(tmp_path, ["model=qwen2.5-7b", "model.path=/models/q7"])
    rollout, actor = v.actor_rollout_ref.rollout, v.actor_rollout_ref.actor
    assert (v.trainer.n_gpus_per_node, v.trainer.nnodes) == (gpus, nodes)
    # TP: the largest divisor of the node's GPUs that is <= verl's 2: 1 GPU -> 1, else 2
    assert rollout.tensor_model_parallel_size == (1 if gpus == 1 else 2)
    # agent-loop workers: the largest divisor of 128 that is <= 8 -> 8
    assert rollout.agent.num_workers == 8 and 128 % rollout.agent.num_workers == 0
    # verl splits a mini-batch of ppo_mini_batch_size * n rows over the world: whole rows per rank,
    # whole micro-batches per rank (sokoban's default budget: 16 x 8 / 8 mini-batches = 16 turn
    # samples = 2 prompts x n 8 = 16 rows; the 16 ranks of 8 GPUs x 2 nodes get one each)
    world, rows = gpus * nodes, actor.ppo_mini_batch_size * rollout.n
    assert rows == 16 and rows % world == 0 and (rows // world) % actor.ppo_micro_batch_size_per_gpu == 0
    # Ray: 3 CPUs per GPU bundle + 8 workers + a server per TP group + TaskRunner and router
    assert verl_main.run_ray_cpus(cfg) >= 3 * gpus + 8 + gpus // rollout.tensor_model_parallel_size + 2


@pytest.mark.parametrize("gpus", [1, 2])
def test_the_arena_rollout_keeps_tp_1_and_cpu_runs_are_unchanged(tmp_path, monkeypatch, gpus):
    _counts(monkeypatch, gpus)
    _, v = _run_config(tmp_path, ["backend=verl", "device=cuda", "rollout.name=arena", "budget=smoke"])
    assert v.actor_rollout_ref.rollout.tensor_model_parallel_size == 1 and v.trainer.n_gpus_per_node == gpus
    monkeypatch.delenv("ARENA_VERL_GPUS_PER_NODE")
    _, cpu = _run_config(tmp_path, ["backend=verl", "budget=smoke"])
    assert (cpu.trainer.device, cpu.trainer.n_gpus_per_node, cpu.actor_rollout_ref.rollout.agent.num_workers) == ("cpu", 1, 1)


def test_agent_workers_divide_the_episodes_of_a_step(tmp_path, monkeypatch):
    # 3 groups x 4 = 12 episodes; verl's 8 workers would get 1.5 each (DataProto.chunk asserts);
    # the divisors of 12 that are <= 8: 1, 2, 3, 4, 6 -> 6
    _counts(monkeypatch, 1)
    _, v = _run_config(tmp_path, ["model=qwen2.5-1.5b", "model.path=/models/q15", "batch_envs=3", "group_size=4",
                                  "ppo_num_mini_batches=1"])
    assert v.actor_rollout_ref.rollout.agent.num_workers == 6


def test_attention_is_flash_attn_when_installed_else_sdpa_with_padding_kept(tmp_path, monkeypatch):
    _counts(monkeypatch, 1)
    monkeypatch.setattr(gpu_layout, "has_flash_attn", lambda: False)
    _, v = _run_config(tmp_path, ["model=qwen2.5-1.5b", "model.path=/models/q15"])
    assert v.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert v.actor_rollout_ref.model.use_remove_padding is False
    monkeypatch.setattr(gpu_layout, "has_flash_attn", lambda: True)
    _, v = _run_config(tmp_path, ["model=qwen2.5-1.5b", "model.path=/models/q15"])
    assert "attn_implementation" not in v.actor_rollout_ref.model.override_config  # verl's flash_attention_2
    assert v.actor_rollout_ref.model.use_remove_padding is True


def test_a_mini_batch_smaller_than_the_world_is_refused(tmp_path, monkeypatch):
    # budget=smoke: 2 x 4 / 2 mini-batches = 4 turn samples = 1 prompt x n 4 = 4 rows; 8 GPUs get half a row
    _counts(monkeypatch, 8)
    with pytest.raises(ValueError, match="4 turn-samples .* does not split over 8 GPUs; valid: .* a multiple of 32"):
        _run_config(tmp_path, ["backend=verl", "device=cuda", "budget=smoke"])


@pytest.mark.parametrize("key,value,valid", [
    ("actor_rollout_ref.rollout.tensor_model_parallel_size", 4, "valid: 1, 2"),
    ("actor_rollout_ref.rollout.agent.num_workers", 3, "valid: 1, 2, 4, 8, 16, 32, 64"),
])
def test_a_layout_that_does_not_divide_is_refused(tmp_path, monkeypatch, key, value, valid):
    _counts(monkeypatch, 2)
    with pytest.raises(ValueError, match=valid):
        _run_config(tmp_path, ["model=qwen2.5-7b", "model.path=/models/q7", f"verl.{key}={value}"])


def test_the_done_when_dry_run_prints_the_validated_config_with_the_knob_and_the_recipe(monkeypatch):
    _counts(monkeypatch, 1)
    monkeypatch.delenv("ARENA_VERL_NNODES")
    rc, out, err = _cli(DONE_WHEN)
    assert rc == 0, err
    v = OmegaConf.create(out)  # YAML with verl's key names
    actor, rollout = v.actor_rollout_ref.actor, v.actor_rollout_ref.rollout
    assert rollout.tensor_model_parallel_size == 1 and v.trainer.n_gpus_per_node == 1 and v.trainer.nnodes == 1
    assert rollout.gpu_memory_utilization == 0.6  # the user's knob
    assert rollout.name == "vllm" and v.trainer.device == "cuda"
    # configs/model/qwen2.5-7b.yaml: lr, response length, prompt length, KL, offload, token cap
    assert actor.optim.lr == 1e-6 and rollout.response_length == 512 and v.data.max_prompt_length == 2048
    assert actor.kl_loss_coef == 0.01 and actor.kl_loss_type == "low_var_kl"
    assert actor.fsdp_config.param_offload and actor.fsdp_config.optimizer_offload
    assert v.actor_rollout_ref.ref.fsdp_config.param_offload
    assert actor.use_dynamic_bsz and actor.ppo_max_token_len_per_gpu == 16384
    assert "[validate_config] All configuration checks passed" in err  # verl's own validation ran


def test_a_misspelt_verl_key_exits_2_naming_the_valid_keys_at_its_level(monkeypatch):
    _counts(monkeypatch, 1)
    rc, out, err = _cli([a.replace("utilization", "utilisation") for a in DONE_WHEN])
    assert rc == 2 and out == ""
    assert "unknown verl config key 'actor_rollout_ref.rollout.gpu_memory_utilisation'" in err
    assert "gpu_memory_utilization" in err and "tensor_model_parallel_size" in err


def test_verl_keys_are_refused_on_the_embedded_backend():
    rc, _, err = _cli(["train", "verl.trainer.nnodes=2", "--dry-run"])
    assert rc == 2 and "valid only with backend=verl" in err


def test_verl_config_prints_exactly_what_the_run_writes(tmp_path, monkeypatch):
    # _train up to verl's run_ppo (stubbed to fail), then compare verl_config.yaml with the print
    import verl.trainer.main_ppo

    _counts(monkeypatch, 2)
    model = tmp_path / "model"
    model.mkdir()
    args = ["backend=verl", "device=cuda", "budget=smoke", f"model.path={model}", f"out={tmp_path / 'run'}",
            "verl.actor_rollout_ref.rollout.gpu_memory_utilization=0.55", "wandb.enabled=false"]
    rc, printed, err = _cli(["verl-config", *args])
    assert rc == 0, err
    monkeypatch.setattr(verl.trainer.main_ppo, "run_ppo", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stub")))

    class Cluster:
        def ready(self):
            return "stub"

        def keep_logs(self):
            pass

    cfg = load_config(args)
    assert verl_main._train(cfg, RunFolder(tmp_path / "run"), Cluster(), log=lambda *_: None) == 1
    written = (tmp_path / "run" / "verl_config.yaml").read_text()
    assert written == printed
    assert OmegaConf.create(written).actor_rollout_ref.rollout.gpu_memory_utilization == 0.55


@pytest.mark.parametrize("hidden,pretrained", [(64, False), (256, False), (1536, True)])
def test_the_lint_refuses_a_pretrained_model_with_toy_settings(tmp_path, hidden, pretrained):
    from arena.backends.verl.recipe_lint import is_pretrained, lint

    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": hidden}))
    toy = load_config(["backend=verl", f"model.path={tmp_path}"])  # sokoban: 8 new tokens, lr 1e-4, minimal
    assert is_pretrained(toy) is pretrained
    if pretrained:
        with pytest.raises(ValueError, match=r"env.max_new_tokens=8 \(< 64.*lr=0.0001.*prompt_template=minimal"):
            lint(toy)
    else:
        lint(toy)
    lint(load_config(["model=qwen2.5-1.5b", f"model.path={tmp_path}"]))  # the recipe passes
    hub = load_config(["backend=verl", "model.path=Qwen/Qwen2.5-1.5B-Instruct", "lr=1e-6", "env.max_new_tokens=63",
                       "model.prompt_template=full"])
    with pytest.raises(ValueError, match=r"max_new_tokens=63 \(< 64"):  # a hub id counts as pretrained
        lint(hub)


def test_train_launcher_slurm_nodes_2_renders_a_valid_requeueing_script(monkeypatch):
    monkeypatch.delenv("ARENA_VERL_GPUS_PER_NODE", raising=False)
    rc, out, err = _cli(["train", "model=qwen2.5-1.5b", "model.path=/models/q15", "launcher=slurm", "nodes=2",
                         "--dry-run"])
    assert rc == 0, err
    assert "#SBATCH --nodes=2" in out and "#SBATCH --requeue" in out and "scontrol requeue" in out
    assert "RAY_CPUS=$(( 3 * ${SLURM_GPUS_ON_NODE:-0} + ${SLURM_GPUS_ON_NODE:-0} + 10 ))" in out  # 8 workers + 2
    assert '--num-cpus="$RAY_CPUS"' in out and "SLURM_CPUS_PER_TASK}\" --num" not in out
    bash = shutil.which("bash")
    assert subprocess.run([bash, "-n"], input=out, text=True).returncode == 0
    rc, _, err = _cli(["train", "backend=embedded", "nodes=2", "--dry-run"])
    assert rc == 2 and "valid: backend=verl" in err


def test_gpu_smoke_script_parses_and_stops_before_training_when_a_check_fails(tmp_path):
    # on this GPU-less machine with a python that fails every import: each check prints FAIL, and
    # the script exits 1 before `arena train` (no run folder is made)
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu_smoke.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    env = {"PATH": "/usr/bin:/bin", "PYTHON": "false", "OUT": str(tmp_path / "smoke")}
    done = subprocess.run(["bash", str(script), str(tmp_path / "model")], env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    for name in ("torch", "vllm", "flash-attn", "ray", "verl"):
        assert f"FAIL  {name}" in done.stdout
    assert "a check failed" in done.stdout and not (tmp_path / "smoke" / "run").exists()


def test_a_local_gpu_sweep_job_sees_its_gpus(tmp_path, monkeypatch):
    # submitit's LocalExecutor blanks CUDA_VISIBLE_DEVICES without gpus_per_node; launcher=local_gpu
    # (gpus: all) passes the visible count, one job at a time; the plain local launcher passes none
    from arena.sweeps import launchers

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    executor = launchers.make_executor("local_gpu", tmp_path / "gpu", timeout_min=5)
    assert executor.parameters["gpus_per_node"] == 4 and launchers.job_parallelism("local_gpu") == 1
    assert "gpus_per_node" not in launchers.make_executor("local", tmp_path / "cpu", timeout_min=5).parameters


def test_a_driver_too_old_for_torch_is_named_as_such(monkeypatch):
    # a CUDA 13 torch on a CUDA 12 driver: torch.cuda.is_available() is False and torch.cuda.init()
    # raises torch's own "driver ... too old"; the exit-2 message says so instead of "no GPU"
    import torch

    from arena.backends.verl.launch import missing_for_training

    monkeypatch.delenv("ARENA_VERL_GPUS_PER_NODE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")

    def init():
        raise RuntimeError("The NVIDIA driver on your system is too old (found version 12020). Please update.")

    monkeypatch.setattr(torch.cuda, "init", init)
    gpu = [m for m in missing_for_training(load_config(["backend=verl", "device=cuda"])) if "CUDA GPU" in m]
    assert len(gpu) == 1 and "driver is too old for torch" in gpu[0] and "found version 12020" in gpu[0]
    assert "arena[gpu-cu12]" in gpu[0]


def test_a_sweep_checks_each_cell_s_verl_keys_before_launching(tmp_path):
    rc, out, err = _cli(["sweep", "dimension=is_clipping", "backend=verl", "verl.trainer.nope=1",
                         f"results_dir={tmp_path}", "--dry-run"])
    assert rc == 2 and "unknown verl config key 'trainer.nope'; valid keys under 'trainer': balance_batch" in err
    rc, out, _ = _cli(["sweep", "dimension=is_clipping", "backend=verl", "verl.trainer.balance_batch=false",
                       f"results_dir={tmp_path}", "--dry-run"])
    assert rc == 0 and "nothing written, nothing launched" in out
