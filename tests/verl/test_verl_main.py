"""`arena train backend=verl` (arena/backends/verl/main.py): exit 2 naming what is missing on a
machine without vllm or GPU; with those checks passed and verl's `run_ppo` replaced by a fake
(no GPU here), the run folder contract: config.yaml first, the generated verl config with the
run-time values and verl's dataset files, summary.json last; exit 1 with error.txt when training
raises; resume keeps the metrics rows up to verl's checkpoint step and, driven through the trainer
subclass's run-folder hooks in verl's order, writes no step twice."""
import importlib.util
import json
import os

import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")
pytest.importorskip("ray")

from arena.backends.verl import launch, main  # noqa: E402
from arena.backends.verl.run_folder import VerlRunWriter, arena_trainer_kwargs  # noqa: E402
from arena.cli import main as cli_main  # noqa: E402
from arena.config import cell_id, load_config  # noqa: E402
from arena.runs import RunFolder  # noqa: E402
from arena.runs.policy import saved_steps  # noqa: E402
from arena.runs.wandb_log import wandb_run_id  # noqa: E402

NO_VLLM = importlib.util.find_spec("vllm") is None


def _cfg(out, *extra):
    """A GPU run (device=cuda, rollout.name=vllm) unless `extra` says otherwise."""
    return load_config(["backend=verl", f"out={out}", "steps=3", "seed=1", "name=sw", "arm=grpo",
                        "model.path=/models/qwen", "device=cuda", "rollout.name=vllm", *extra])


@pytest.mark.skipif(not NO_VLLM, reason="vllm is installed here")
def test_cli_train_with_vllm_rollout_exits_2_naming_the_arena_rollout_and_creates_nothing(tmp_path, capsys):
    assert cli_main(["train", "backend=verl", "rollout.name=vllm", f"out={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert "backend=verl cannot run here; missing: vllm (verl's vLLM rollout engine, for rollout.name=vllm)" in err
    assert "use rollout.name=arena" in err and "pip install 'arena[gpu-cu13]'" in err and "'arena[gpu-cu12]'" in err
    assert not (tmp_path / "run").exists()


def test_cli_rejects_an_unknown_rollout_name_listing_the_valid_ones(capsys):
    assert cli_main(["train", "backend=verl", "rollout.name=hf"]) == 2
    assert "rollout.name 'hf'; valid: arena, vllm, sglang, trtllm" in capsys.readouterr().err


def test_the_arena_rollout_needs_only_verl_and_ray(monkeypatch):
    # rollout.name=arena (the default) asks for no rollout engine package; vllm does
    found = {"verl", "ray", launch.ARENA_ROLLOUT_MODULE}
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: object() if name in found else None)
    assert launch.missing_packages(load_config(["backend=verl"])) == []
    assert launch.missing_packages(load_config(["backend=verl", "rollout.name=vllm"])) == [
        "vllm (verl's vLLM rollout engine, for rollout.name=vllm)"]
    # a CPU run with a GPU engine: missing a CPU-capable engine, and the message says which
    missing = launch.missing_for_training(load_config(["backend=verl", "device=cpu", "rollout.name=sglang"]))
    assert missing[-1] == "a rollout engine that runs on the CPU (rollout.name=sglang needs a GPU)"
    assert "use rollout.name=arena" in launch.describe_missing(missing)
    assert launch.missing_for_training(load_config(["backend=verl", "device=cpu"])) == []
    # if arena's rollout module cannot be imported, rollout.name=arena says so instead of starting Ray
    monkeypatch.setattr(launch, "ARENA_ROLLOUT_MODULE", "arena.backends.verl.no_such_module")
    missing = launch.missing_for_training(load_config(["backend=verl", "device=cpu"]))
    assert missing == ["arena's rollout for verl (arena.backends.verl.no_such_module is not importable)"]


def test_run_training_without_gpu_exits_2_and_records_why_in_an_existing_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "missing_packages", lambda cfg=None: [])
    monkeypatch.setattr("arena.backends.verl.ray_head.visible_gpu_count", lambda: 0)
    monkeypatch.delenv("ARENA_VERL_GPUS_PER_NODE", raising=False)
    logged = []
    assert main.run_training(_cfg(tmp_path / "new"), log=logged.append) == 2
    assert "missing: a CUDA GPU" in logged[0] and not (tmp_path / "new").exists()
    (tmp_path / "cell").mkdir()  # a sweep cell's folder already exists: the reason goes to error.txt
    assert main.run_training(_cfg(tmp_path / "cell"), log=logged.append) == 2
    assert "missing: a CUDA GPU" in (tmp_path / "cell" / "error.txt").read_text()


@pytest.fixture
def ready(monkeypatch):
    """Packages and GPUs 'present' (2 nodes x 4 GPUs, as the multi-node script says), an existing
    Ray cluster named by RAY_ADDRESS (so no head is started), and a fake run_ppo."""
    monkeypatch.setattr(launch, "missing_packages", lambda cfg=None: [])
    monkeypatch.setenv("ARENA_VERL_GPUS_PER_NODE", "4")
    monkeypatch.setenv("ARENA_VERL_NNODES", "2")
    monkeypatch.setenv("RAY_ADDRESS", "head-node:1")
    calls = []

    def install(fake):
        def run_ppo(config, task_runner_class):
            calls.append((config, task_runner_class))
            fake(config)
        monkeypatch.setattr("verl.trainer.main_ppo.run_ppo", run_ppo)
        return calls
    return install


def _write_steps(run_dir, steps):
    writer = VerlRunWriter(RunFolder(run_dir).create(), total_steps=3, theta=0.0025, min_points=5, n_eval=4)
    for step in steps:
        # a run that had the format (else summary.json's status is no_format, arena/runs/stability.py)
        writer.log({"val-core/sokoban/acc/mean@1": 0.25 * step, "actor/pg_loss": 0.1,
                    "rollout/format_valid_ratio": 0.9}, step)


def test_run_training_writes_config_first_then_summary_last(tmp_path, ready):
    out = tmp_path / "run"
    cfg = _cfg(out)

    def fake(config):
        run_dir = config.ray_kwargs.ray_init.runtime_env.env_vars.ARENA_RUN_DIR
        assert (out / "config.yaml").exists() and not (out / "summary.json").exists()  # config first
        _write_steps(run_dir, [0, 1, 2, 3])
    calls = ready(fake)
    assert main.run_training(cfg, log=lambda *_: None) == 0
    config, runner = calls[0]
    from arena.backends.verl.task_runner import RemoteArenaTaskRunner

    assert runner is RemoteArenaTaskRunner
    t = config.trainer
    assert (t.use_v1, t.nnodes, t.n_gpus_per_node) == (False, 2, 4)
    assert t.default_local_dir == str(out / "ckpt") and t.experiment_name == "grpo-sokoban-s1"
    assert list(t.logger) == ["console", "wandb"] and t.resume_mode == "auto"
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.WANDB_RUN_GROUP == "sw/grpo/sokoban" and env.WANDB_RUN_ID == wandb_run_id(cell_id(cfg), out) == (out / "wandb_id.txt").read_text().strip()
    assert env.WANDB_RESUME == "allow" and env.ARENA_RUN_DIR == str(out)
    assert config.actor_rollout_ref.model.path == "/models/qwen"
    assert config.actor_rollout_ref.rollout.name == "vllm" and config.trainer.device == "cuda"
    assert "VERL_PLATFORM" not in env  # a GPU run keeps verl's own platform detection
    # verl's dataset files exist before run_ppo is called (tests/verl/test_dataset.py reads them)
    data_dir = out / "verl_data"
    assert (config.data.train_files, config.data.val_files) == (str(data_dir / "train.parquet"),
                                                                str(data_dir / "val.parquet"))
    assert config.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(data_dir / "agent_loop.yaml")
    assert (config.data.shuffle, config.data.filter_overlong_prompts) == (False, False)
    assert all((data_dir / name).is_file() for name in ("train.parquet", "val.parquet", "agent_loop.yaml"))
    saved = (out / "config.yaml").read_text()
    assert "backend: verl" in saved and (out / "verl_config.yaml").exists()
    summary = json.loads((out / "summary.json").read_text())
    # eval points (step, success) = (0, 0), (1, .25), (2, .5), (3, .75): the last is the final eval
    assert summary["status"] == "done" and summary["final_eval_success"] == 0.75
    assert summary["backend"] == "verl" and summary["cell_id"] == cell_id(cfg)
    # a finished run is not trained again
    assert main.run_training(cfg, log=lambda *_: None) == 0 and len(calls) == 1


def test_run_training_failure_exits_1_with_traceback_and_no_summary(tmp_path, ready):
    def fake(config):
        raise RuntimeError("vLLM server died")
    ready(fake)
    out = tmp_path / "run"
    assert main.run_training(_cfg(out), log=lambda *_: None) == 1
    assert "RuntimeError: vLLM server died" in (out / "error.txt").read_text()
    assert not (out / "summary.json").exists()


def test_resume_keeps_rows_up_to_verls_checkpoint_step(tmp_path, ready):
    out = tmp_path / "run"
    _write_steps(out, [0, 1, 2, 3])  # an earlier attempt logged 4 steps, then died
    (out / "ckpt").mkdir(parents=True, exist_ok=True)
    (out / "ckpt" / "latest_checkpointed_iteration.txt").write_text("1\n")  # verl saved step 1

    def fake(config):
        rows = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert rows == [0, 1]  # rows after the checkpoint were dropped before verl resumed
        _write_steps(out, [2, 3])
    ready(fake)
    assert main.run_training(_cfg(out), log=lambda *_: None) == 0
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2, 3]


def _fake_verl_fit(monkeypatch, ckpt_dir, val_success, saved_rows=None):
    """verl's RayPPOTrainer methods the run-folder hooks wrap, in ray_trainer.fit's order: a
    `Tracking` logger (imported from verl.utils.tracking when fit starts), load the checkpoint
    (global_steps = its step, 0 without one), validate and log, then steps k+1..total, each:
    rollout metrics, save the checkpoint (save_freq = 1), validation (test_freq = 1), log.
    `saved_rows` records, per checkpoint saved, the steps metrics.jsonl held at that moment."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    def load(self):
        self.global_steps = max(main.checkpoint_step(ckpt_dir), 0)

    def save(self):
        if saved_rows is not None:
            saved_rows.append((self.global_steps, [r["step"] for r in self.run_writer.folder.iter_metrics()]))
        # the actor's HF folder verl writes with hf_model (stand-in files: the export links them;
        # tests/verl/test_policy_export.py runs verl's real manager)
        hf = ckpt_dir / f"global_step_{self.global_steps}" / "actor" / "huggingface"
        hf.mkdir(parents=True, exist_ok=True)
        (hf / "config.json").write_text(json.dumps({"step": self.global_steps}))
        (hf / "pytorch_model.bin").write_text(f"weights of step {self.global_steps}")
        (ckpt_dir / "latest_checkpointed_iteration.txt").write_text(f"{self.global_steps}\n")

    def fit(self):
        from verl.utils.tracking import Tracking

        logger = Tracking(project_name="p", experiment_name="e", default_backend=[])
        self.global_steps = 0
        self._load_checkpoint()
        logger.log(data=self._validate(), step=self.global_steps)
        for step in range(self.global_steps + 1, self.total_training_steps + 1):
            self.global_steps = step
            metrics = {"actor/pg_loss": 0.1}
            self._save_checkpoint()
            metrics.update(self._validate())
            logger.log(data=metrics, step=step)
    monkeypatch.setattr(RayPPOTrainer, "_load_checkpoint", load)
    monkeypatch.setattr(RayPPOTrainer, "_save_checkpoint", save)
    monkeypatch.setattr(RayPPOTrainer, "_validate", lambda self, merged=False: {
        "val-core/sokoban/acc/mean@1": val_success})
    monkeypatch.setattr(RayPPOTrainer, "fit", fit)


@pytest.mark.parametrize("earlier_steps, ckpt_step, want_success", [
    # died after step 3's row, checkpoint at 2: rows 0..2 kept (0, .25, .5); the resume
    # validation at step 2 is not written again; step 3 is the new attempt's (.9)
    ([0, 1, 2, 3], 2, [0.0, 0.25, 0.5, 0.9]),
    # checkpoint 2 without row 2 (an attempt of the code before rows were written ahead of their
    # checkpoint): the resume validation is row 2
    ([0, 1], 2, [0.0, 0.25, 0.9, 0.9]),
    # no checkpoint: a fresh start, every row is the new attempt's
    ([0, 1], None, [0.9, 0.9, 0.9, 0.9]),
])
def test_resume_through_the_trainer_writes_each_step_once(tmp_path, ready, monkeypatch, earlier_steps, ckpt_step,
                                                          want_success):
    from arena.backends.verl.trainer import ArenaRayPPOTrainer

    out = tmp_path / "run"
    _write_steps(out, earlier_steps)  # success 0.25 * step
    if ckpt_step is not None:
        (out / "ckpt").mkdir(exist_ok=True)  # RunFolder.create made it
        (out / "ckpt" / "latest_checkpointed_iteration.txt").write_text(f"{ckpt_step}\n")

    def fake(config):  # verl's TaskRunner: the trainer subclass with arena's kwargs, then fit()
        trainer = ArenaRayPPOTrainer.__new__(ArenaRayPPOTrainer)
        kw = arena_trainer_kwargs(config.ray_kwargs.ray_init.runtime_env.env_vars.ARENA_RUN_DIR)
        trainer.run_writer, trainer.config_yaml = kw["run_writer"], kw["config_yaml"]
        trainer.total_training_steps = 3
        trainer.config = config
        trainer.fit()
    ready(fake)
    saved_rows = []
    _fake_verl_fit(monkeypatch, out / "ckpt", val_success=0.9, saved_rows=saved_rows)
    assert main.run_training(_cfg(out), log=lambda *_: None) == 0
    rows = RunFolder(out).read_metrics()
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert [r["eval/success_rate"] for r in rows] == want_success
    # every checkpoint k was saved after row k was written: checkpoint k never exists without it
    assert saved_rows and all(rows_then[-1] == step for step, rows_then in saved_rows)
    assert json.loads((out / "summary.json").read_text())["final_eval_success"] == 0.9
    # each checkpoint this attempt saved is a step policy; the last one is the final policy
    assert saved_steps(out) == [step for step, _ in saved_rows] == list(range((ckpt_step or 0) + 1, 4))
    assert (out / "policy" / "pytorch_model.bin").read_text() == "weights of step 3"


def test_trainer_kwargs_come_from_the_run_folders_config(tmp_path, ready):
    # the run writer and seed come from config.yaml; the PO does not (the trainer reads it from the
    # verl config's actor.policy_loss section, the loss's own channel)
    from arena.backends.verl.policy_loss import resolved_po
    from arena.config import resolve_po

    out = tmp_path / "run"
    cfg = _cfg(out, "po.method=gigpo_ds", "seed=5")
    seen = {}
    ready(lambda config: seen.update(config=config))  # the verl config verl's TaskRunner gets
    assert main.run_training(cfg, log=lambda *_: None) == 0
    kw = arena_trainer_kwargs(out)
    assert "po" not in kw and kw["seed"] == 5
    assert resolved_po(seen["config"]) == resolve_po(cfg)  # the one channel, as the TaskRunner receives it
    assert kw["config_yaml"] == (out / "config.yaml").read_text()
    assert kw["run_writer"].cell_id == cell_id(cfg) and kw["run_writer"].total_steps == 3


def test_the_trainer_takes_its_members_from_the_resolved_po(monkeypatch):
    # gigpo_ds: the trainer's filtering, filter hp and advantage hp are the composer's answers for
    # the resolved PO; an adv_estimator that is not the PO's advantage is refused
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from arena.backends.verl.policy_loss import ArenaPolicyLossConfig
    from arena.backends.verl.trainer import ArenaRayPPOTrainer
    from arena.po.compose import resolve

    monkeypatch.setattr(RayPPOTrainer, "__init__", lambda self, config: setattr(self, "config", config))
    po = resolve({"method": "gigpo_ds", "hp": {"filter_key": "won", "gamma": 0.9}})

    def verl_config(estimator, run_po=po):  # the PO travels in the loss's section only
        return OmegaConf.create({"algorithm": {"adv_estimator": estimator}, "trainer": {"balance_batch": True},
                                 "actor_rollout_ref": {"actor": {"policy_loss": ArenaPolicyLossConfig.section(run_po)}}})
    trainer = ArenaRayPPOTrainer(config=verl_config("arena_gigpo"), seed=5)
    assert trainer.po == po
    assert (trainer.po.filtering, trainer.arena_advantage, trainer.seed) == ("dynamic", "arena_gigpo", 5)
    assert trainer.po.member_hp("filtering")["filter_key"] == "won"
    assert trainer.advantage_hp == po.member_hp("advantage") and trainer.advantage_hp["gamma"] == 0.9
    with pytest.raises(ValueError, match="not the run's advantage 'gigpo'"):
        ArenaRayPPOTrainer(config=verl_config("arena_grpo"))
    # a verl config whose loss section is verl's own (no resolved PO) is refused, not filled in
    plain = OmegaConf.create({"algorithm": {"adv_estimator": "arena_grpo"}, "trainer": {"balance_batch": True},
                              "actor_rollout_ref": {"actor": {"policy_loss": {
                                  "_target_": "verl.workers.config.PolicyLossConfig", "loss_mode": "vanilla"}}}})
    with pytest.raises(ValueError, match="must be _target_=arena.backends.verl.policy_loss.ArenaPolicyLossConfig"):
        ArenaRayPPOTrainer(config=plain)


def test_cpu_run_gets_the_cpu_platform_and_verl_settings_everywhere(tmp_path, ready, monkeypatch):
    # device=cpu (rollout.name=arena by default): verl's config gets cpu_platform.cpu_overrides(),
    # and this process and every Ray worker get VERL_PLATFORM=cpu plus the module that registers it
    from arena.backends.verl.cpu_platform import CPU_ENV, cpu_overrides

    for key in CPU_ENV:
        monkeypatch.delenv(key, raising=False)  # restored (absent) after the test
    seen = {}
    ready(lambda config: seen.update(config=config, env={k: os.environ.get(k) for k in CPU_ENV}))
    out = tmp_path / "run"
    cfg = load_config(["backend=verl", f"out={out}", "steps=3", "model.path=/models/qwen", "device=cpu"])
    assert main.run_training(cfg, log=lambda *_: None) == 0
    config = seen["config"]
    for key, value in cpu_overrides().items():
        assert OmegaConf.select(config, key) == value, key
    assert config.actor_rollout_ref.rollout.name == "arena" and config.trainer.n_gpus_per_node == 1
    assert config.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
    # both plugin modules are imported by `import verl` in every process; the CPU platform chosen
    want = {"VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda",
            "VERL_USE_EXTERNAL_MODULES": "arena.backends.verl.cpu_platform,arena.backends.verl.arena_rollout"}
    assert dict(config.ray_kwargs.ray_init.runtime_env.env_vars).items() >= want.items()
    assert seen["env"] == want  # the driver process too, before run_ppo imports verl's workers


def test_cpu_platform_is_registered_and_chosen_by_verl_platform(monkeypatch):
    # verl's own lookup: $VERL_PLATFORM=cpu -> PlatformRegistry["cpu"] -> arena's CPUPlatform,
    # whose device is "cpu" and whose collectives use gloo; it is never auto-detected
    from verl.plugin.platform import platform_manager

    from arena.backends.verl.cpu_platform import CPU_ENV, CPUPlatform

    monkeypatch.setenv("VERL_PLATFORM", CPU_ENV["VERL_PLATFORM"])
    name = platform_manager._detect_platform_name()
    platform = platform_manager._create_platform(name)
    assert isinstance(platform, CPUPlatform) and platform.device_name == "cpu"
    assert platform.communication_backend_name() == "gloo" and platform.ray_resource_name() == "GPU"
    assert not platform.is_platform_available(use_smi_check=True)
    assert CPU_ENV["VERL_USE_EXTERNAL_MODULES"] == "arena.backends.verl.cpu_platform"


@pytest.mark.slow
def test_a_fresh_process_with_the_cpu_env_runs_verl_on_the_cpu():
    # ~10 s on the shared 2-core box (importing verl): `import verl` reads CPU_ENV, imports the
    # plugin module and resolves its device to "cpu" with no other help
    import subprocess
    import sys

    from arena.backends.verl.cpu_platform import CPU_ENV

    code = ("import verl; from verl.utils.device import get_device_name, get_nccl_backend; "
            "print(get_device_name(), get_nccl_backend())")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **CPU_ENV, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["cpu", "gloo"]


def test_checkpoint_step_without_a_checkpoint_is_minus_one(tmp_path):
    assert main.checkpoint_step(tmp_path) == -1
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("12")
    assert main.checkpoint_step(tmp_path) == 12


def test_main_module_usage_error_exits_2(capsys):
    assert main.main([]) == 2 and "usage: python -m arena.backends.verl.main" in capsys.readouterr().err


@pytest.mark.slow
def test_single_node_run_starts_its_own_ray_head_and_removes_it(tmp_path, ready, monkeypatch):
    # ~20 s: no RAY_ADDRESS, so run_training starts a private head (free ports, own temp dir);
    # verl's ray.init() inside run_ppo connects to it through RAY_ADDRESS.
    import ray

    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setenv("ARENA_VERL_GPUS_PER_NODE", "1")
    monkeypatch.setenv("ARENA_VERL_NNODES", "1")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    seen = {}

    def fake(config):
        ray.init()
        seen["address"] = os.environ["RAY_ADDRESS"]
        seen["gcs"] = ray.get_runtime_context().gcs_address
        seen["resources"] = ray.cluster_resources()
        seen["temp_dir"] = ray._private.worker.global_worker.node.get_temp_dir_path()
    ready(fake)
    out = tmp_path / "run"
    assert main.run_training(_cfg(out), log=lambda *_: None) == 0
    assert seen["gcs"] == seen["address"] and not seen["address"].endswith(":6379")
    # SLURM gives 1 CPU, but verl's actors ask for 3 (the GPU's bundle) + 8 agent-loop workers +
    # 1 server + 2 (TaskRunner, router) = 14: the head declares 14 logical CPUs (gpu_layout.ray_cpus)
    assert (seen["resources"]["CPU"], seen["resources"]["GPU"]) == (14.0, 1.0)
    assert "arena-ray-" in seen["temp_dir"]
    assert not os.path.exists(seen["temp_dir"])  # removed after the finished run
    assert "RAY_ADDRESS" not in os.environ and not ray.is_initialized()
    assert (out / "summary.json").exists()


def test_a_corrupt_summary_is_set_aside_and_the_run_trains_again(tmp_path, ready):
    # as the embedded entry point: an unreadable summary.json is no proof of a finished run
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text('{"status": "do')  # torn
    calls = ready(lambda config: _write_steps(config.ray_kwargs.ray_init.runtime_env.env_vars.ARENA_RUN_DIR,
                                              [0, 1, 2, 3]))
    assert main.run_training(_cfg(out), log=lambda *_: None) == 0 and len(calls) == 1
    aside = list(out.glob("summary.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == '{"status": "do'
    assert json.loads((out / "summary.json").read_text())["status"] == "done"


def test_the_run_folder_records_the_tool_sandbox_as_the_embedded_run(tmp_path, ready):
    # sokoban runs no tool code: `tool_sandbox: null` in config.yaml and None in summary.json
    out = tmp_path / "run"
    ready(lambda config: _write_steps(config.ray_kwargs.ray_init.runtime_env.env_vars.ARENA_RUN_DIR, [0, 1]))
    assert main.run_training(_cfg(out), log=lambda *_: None) == 0
    assert "tool_sandbox: null" in (out / "config.yaml").read_text()
    assert json.loads((out / "summary.json").read_text())["tool_sandbox"] is None
    kw = arena_trainer_kwargs(out)  # the TaskRunner's writer gets it from config.yaml
    # Sokoban's budget=default: 8 mini-batches a step (configs/env_budget/sokoban_default.yaml)
    assert kw["run_writer"].tool_sandbox is None and (kw["num_mini_batches"], kw["mini_batch_turns"]) == (8, None)
