"""`arena train backend=verl`: config -> run folder -> private Ray head -> verl's PPO loop.

Same contract as `arena.backends.embedded.run.run_training`: returns 0 when the run finished
(or was already finished: summary.json present), 1 when training failed (traceback in
error.txt), and 2, with what is missing or wrong and without a traceback, when the run cannot
start here (verl, ray or vllm not installed, no GPU, a bad config). config.yaml is written
first; summary.json last and atomically (`VerlRunWriter.finish`), after verl's loop returned.

Ray: with $RAY_ADDRESS set (the multi-node script, templates/ray_on_slurm.sbatch) the run joins
that cluster; otherwise it starts its own head on free ports with its own temp dir
(`ray_head.RayHead`) and stops it afterwards. verl's `run_ppo` then calls `ray.init()`, which
connects to $RAY_ADDRESS, with verl's runtime env plus ours (W&B grouping, run folder).

verl's dataset files (dataset.py): <run>/verl_data/{train,val}.parquet, one row per episode seed,
and agent_loop.yaml (the "arena_agent" settings); the verl config points at them
(`data.train_files`, `data.val_files`, `rollout.agent.agent_loop_config_path`).

The trainer subclass gets the run folder as $ARENA_RUN_DIR (and as the parent of
`trainer.default_local_dir`); `run_folder.arena_trainer_kwargs` builds its run writer and arena
settings from config.yaml there.

Device and rollout engine: `rollout.name` becomes verl's `actor_rollout_ref.rollout.name`;
`device=cpu` adds `cpu_platform.cpu_overrides()` to verl's config; `verl_env` (verl's plugin
env vars: the arena rollout's and the CPU platform's modules) goes into the environment of this
process and of every Ray worker (docs/verl.md, CPU runs). Its fit() appends metrics rows and writes summary.json; if it returned
without one, run_training writes it from metrics.jsonl.
"""
from __future__ import annotations

import atexit
import functools
import gc
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Optional

from arena.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from arena.config import BadConfig, cell_id, check_env_available, to_plain
from arena.envs import make
from arena.envs.sandbox import env_isolation
from arena.runs import RunFolder
from arena.runs.layout import run_dir  # one rule for both backends: `out`, else <results_dir>/runs/<cell_id>
from arena.runs.policy import policy_folder
from arena.runs.provenance import pin_code_state
from arena.runs.run_log import copied_to_run_log
from arena.runs.stability import smoke_note
from arena.runs.wandb_log import wandb_init_kwargs

from .gpu_layout import gpu_overrides, ray_cpus, run_agent_workers
from .launch import (ARENA_ROLLOUT_MODULE, CPU_RUN_WORKERS, describe_missing, gpus_per_node, missing_for_training,
                     node_count, rollout_name, uses_gpu)
from .policy_export import checkpoint_step
from .ray_head import RayHead, ray_temp_dir
from .recipe_lint import lint
from .run_folder import VerlRunWriter

DUMP_TURNS_ENV = "ARENA_VERL_DUMP_TURNS"  # the same name as trainer.DUMP_TURNS_ENV (imports verl)
CPU_RUN_RAY_CPUS = 8  # logical CPUs of a device=cpu run's private Ray head (see run_training)


def runtime_overrides(cfg, run: RunFolder) -> dict:
    """verl keys known only at run time: the run's node and GPU counts, its folder, its W&B
    name, its rollout engine, and the CPU settings when device=cpu (the micro-batch sizes are
    verl_config's: `micro_batch_rows`)."""
    out = {
        "trainer.use_v1": False,  # ArenaRayPPOTrainer extends RayPPOTrainer (verl's v0 loop)
        "trainer.nnodes": node_count(),
        "trainer.n_gpus_per_node": gpus_per_node(),
        "trainer.default_local_dir": str(run.ckpt),
        "trainer.experiment_name": wandb_init_kwargs(cfg, cell_id(cfg), run.path)["name"],
        "actor_rollout_ref.rollout.name": rollout_name(cfg),
    }
    if rollout_name(cfg) == "arena":  # one server per worker: arena's sampler is not tensor-parallel
        out["actor_rollout_ref.rollout.tensor_model_parallel_size"] = 1
    if uses_gpu(cfg):  # TP, agent-loop workers, attention for this GPU count (gpu_layout.py)
        out.update(gpu_overrides(cfg, out["trainer.n_gpus_per_node"], rollout_name(cfg)))
    else:
        # lazy: keeps torch, verl out of this module's import
        from .cpu_platform import cpu_overrides

        out.update(cpu_overrides())
    return out


def run_verl_config(cfg, run: RunFolder):
    """The verl config this run writes to <run>/verl_config.yaml, but for `actor_rollout_ref.model.
    path` when the run trains its BC start first (`initial_model_path`): arena's values, the
    runtime and dataset keys, the run's `verl.*` keys, and the Ray workers' environment. What
    `arena verl-config` and `arena train --dry-run` print. ValueError on a bad config."""
    from omegaconf import open_dict

    # lazy: keeps verl, Ray and torch out of this module's import (dataset and verl_config import verl)
    from .dataset import dataset_overrides
    from .verl_config import build_verl_config

    lint(cfg)
    verl_cfg = build_verl_config(cfg, {**runtime_overrides(cfg, run), **dataset_overrides(run.path)})
    with open_dict(verl_cfg):
        verl_cfg.ray_kwargs.ray_init.runtime_env.env_vars = worker_env(cfg, run)
    return verl_cfg


def worker_env(cfg, run: RunFolder) -> dict[str, str]:
    """Env vars for verl's Ray actors: W&B grouping as arena's own runs (wandb reads WANDB_*;
    verl's Tracking passes only project, name and entity), and the run folder."""
    kw = wandb_init_kwargs(cfg, cell_id(cfg), run.path)
    mode = kw["mode"] if cfg.wandb.enabled and os.environ.get("WANDB_MODE") != "disabled" else "disabled"
    env = {"WANDB_RUN_GROUP": kw["group"], "WANDB_RUN_ID": kw["id"], "WANDB_RESUME": kw["resume"],
           "WANDB_JOB_TYPE": kw["job_type"], "WANDB_TAGS": ",".join(kw["tags"]), "WANDB_DIR": kw["dir"],
           "WANDB_MODE": mode, "ARENA_RUN_DIR": str(run.path)}
    if kw["entity"]:
        env["WANDB_ENTITY"] = str(kw["entity"])
    if os.environ.get(DUMP_TURNS_ENV):  # trainer.DUMP_TURNS_ENV: save each step's turns (tests)
        env[DUMP_TURNS_ENV] = os.environ[DUMP_TURNS_ENV]
    env.update(verl_env(cfg))
    return env


def verl_env(cfg) -> dict[str, str]:
    """verl's plugin env vars for every process of the run: $VERL_USE_EXTERNAL_MODULES names
    the modules `import verl` imports first (arena_rollout registers rollout.name=arena;
    cpu_platform registers the CPU platform), and $VERL_PLATFORM=cpu selects it when device=cpu."""
    env, modules = {}, []
    if not uses_gpu(cfg):
        # lazy: keeps torch, verl out of this module's import
        from .cpu_platform import CPU_ENV

        env.update(CPU_ENV)
        modules.append(CPU_ENV["VERL_USE_EXTERNAL_MODULES"])
    if rollout_name(cfg) == "arena":
        modules.append(ARENA_ROLLOUT_MODULE)
    if modules:
        env["VERL_USE_EXTERNAL_MODULES"] = ",".join(modules)
    return env


class RayCluster:
    """`with RayCluster(run, ...) as cluster: ...; cluster.ready(); run_ppo(...)`: $RAY_ADDRESS when
    set; else a private head for this job, launched on entry and waited for in `ready()` (it boots
    in its own processes while this one imports verl and writes the run's files: docs/verl.md,
    Where a CPU cell's time goes), stopped on exit; its temp dir is removed unless the block
    raised or called `keep_logs()`. The head has `num_gpus` GPUs (default: the GPUs this node
    sees; given: a CPU run's logical "GPU" slots, `RayHead(logical_gpus=True)`) and at least
    `min_cpus` logical CPUs (Ray's CPU count is a scheduling budget, not cores: a CPU run's actors
    need more slots than a laptop has)."""

    def __init__(self, run: RunFolder, log=print, num_gpus: Optional[int] = None, min_cpus: int = 1):
        self.run, self.log, self.num_gpus, self.min_cpus = run, log, num_gpus, min_cpus
        self.head = None
        self.launch_error: Optional[Exception] = None
        self.failed = False

    def __enter__(self) -> "RayCluster":
        if os.environ.get("RAY_ADDRESS"):
            return self

        cpus = max(int(os.environ.get("SLURM_CPUS_PER_TASK") or os.cpu_count() or 1), self.min_cpus)
        gpus = gpus_per_node() if self.num_gpus is None else self.num_gpus
        try:
            self.head = RayHead(ray_temp_dir(self.run.path), num_cpus=cpus, num_gpus=gpus,
                                logical_gpus=self.num_gpus is not None).launch()
        except Exception as exc:  # raised by ready(), where the run records a failure (error.txt)
            self.launch_error = exc
        return self

    def ready(self) -> str:
        """The cluster's address, once its head answers (RuntimeError if it cannot start)."""
        if self.launch_error is not None:
            raise self.launch_error
        if self.head is None:
            return os.environ["RAY_ADDRESS"]
        self.head.wait_ready()
        self.log(f"[train] Ray head {self.head.address}, temp dir {self.head.temp_dir}")
        os.environ["RAY_ADDRESS"] = self.head.address
        return self.head.address

    def keep_logs(self) -> None:
        """The run failed: keep the head's temp dir (its logs) when it stops."""
        self.failed = True

    def __exit__(self, exc_type, *exc) -> None:
        if self.head is None:
            return
        import ray

        os.environ.pop("RAY_ADDRESS", None)
        try:
            ray.shutdown()
        finally:
            self.head.stop()
        if exc_type is not None or self.failed:
            self.log(f"[train] Ray logs kept in {self.head.temp_dir}")
        else:
            shutil.rmtree(self.head.temp_dir, ignore_errors=True)  # a finished run's Ray logs are not kept


def initial_model_path(cfg, log=print) -> Path:
    """The checkpoint RL starts from, as the embedded backend's `load_initial_model`: `model.path`
    (a run folder: its final policy, arena.runs.policy.policy_folder), else (or with
    bc.source=rejection) the cached BC checkpoint, trained here once."""
    if cfg.model.path and cfg.bc.source != "rejection":
        return policy_folder(cfg.model.path)
    # lazy: keeps numpy, tokenizers, torch, transformers out of this module's import
    from arena.bc.train import ensure_bc_checkpoint

    return Path(ensure_bc_checkpoint(cfg, log=log)).resolve()


def tool_sandbox_of(cfg) -> Optional[str]:
    """The tool sandbox mode in force for the run's environment (None: it runs no tool code)."""
    return env_isolation(make(cfg.env.name, **to_plain(cfg.env.kwargs)))


def _cannot_start(run: RunFolder, message: str, log) -> int:
    log(f"[train] {message}")
    if run.path.exists():  # e.g. a sweep cell's folder: record why, as a failed run would
        run.write_error(message + "\n")
    return EXIT_BAD_INPUT


@functools.cache  # once per process
def freeze_heap_at_exit() -> None:
    """At interpreter exit, move every live object out of the garbage collector's reach before
    the interpreter's final collections: those walk every object that torch, verl and
    transformers created (py-spy: `gc_collect_main`; 2-4 s of a CPU cell's wall time on the
    2-core box, 0.5 s frozen: docs/verl.md, Where a CPU cell's time goes). Reference counting
    still frees objects and closes and flushes files; only cyclic garbage is left to the OS."""
    atexit.register(gc.freeze)


def run_training(cfg, log=print) -> int:
    freeze_heap_at_exit()
    run = RunFolder(run_dir(cfg))
    try:
        check_env_available(cfg)  # the backend's own packages and GPU: missing_for_training, below
    except BadConfig as exc:
        return _cannot_start(run, str(exc), log)
    if run.start(log):
        return EXIT_OK
    missing = missing_for_training(cfg)
    if missing:
        return _cannot_start(run, describe_missing(missing, cfg), log)
    if cfg.sort_micro_batches is True:  # a work-saving knob of the embedded trainer: no result depends on it
        log("[train] sort_micro_batches=true is the embedded trainer's; verl's actor forms its own micro-batches "
            "(the same gradient up to float rounding: docs/design.md, Micro-batches by length)")
    # a CPU run's head declares one "GPU" slot per worker (cpu_platform.CPUPlatform.ray_resource_name;
    # cpu_overrides sets trainer.n_gpus_per_node to the same CPU_RUN_WORKERS, or the run's verl.trainer.
    # n_gpus_per_node: cpu_workers, data parallelism over gloo) and enough logical
    # CPUs for verl's actors: each worker bundle asks for 3 (actor, ref and rollout colocated),
    # plus the TaskRunner, the agent-loop worker, the rollout server and verl's request router
    slots = None if uses_gpu(cfg) else cpu_workers(cfg)
    # the head is launched first: it boots while this process imports verl (build_verl_config)
    with RayCluster(run, log=log, num_gpus=slots, min_cpus=run_ray_cpus(cfg)) as cluster:
        return _train(cfg, run, cluster, log)


def run_ray_cpus(cfg) -> int:
    """Logical CPUs of the run's private Ray head at least: CPU_RUN_RAY_CPUS for device=cpu, else
    verl's asks for this node's GPUs (gpu_layout.ray_cpus; a lower budget waits for ever)."""
    if uses_gpu(cfg):
        return ray_cpus(gpus_per_node(), run_agent_workers(cfg))
    return max(CPU_RUN_RAY_CPUS, ray_cpus(cpu_workers(cfg), agent_workers=1))


def cpu_workers(cfg) -> int:
    """verl workers of a device=cpu run: launch.CPU_RUN_WORKERS, or the run's own
    `verl.trainer.n_gpus_per_node` (data parallelism over gloo); one logical "GPU" slot each."""
    from omegaconf import OmegaConf

    return int(OmegaConf.select(cfg, "verl.trainer.n_gpus_per_node", default=None) or CPU_RUN_WORKERS)


def _train(cfg, run: RunFolder, cluster: RayCluster, log) -> int:
    """run_training once the run may start: verl config, config.yaml, dataset, then verl's loop."""
    from omegaconf import OmegaConf, open_dict

    # lazy: keeps numpy, torch, verl out of this module's import
    from .dataset import write_dataset

    try:
        verl_cfg = run_verl_config(cfg, run)
    except ValueError as exc:
        return _cannot_start(run, f"bad verl config: {exc}", log)
    tool_sandbox = tool_sandbox_of(cfg)
    log(f"[train] tool sandbox: {tool_sandbox or 'none (this environment runs no tool code)'}")
    writer = VerlRunWriter(run, total_steps=cfg.steps, theta=cfg.stability.theta, min_points=cfg.stability.min_points,
                           n_eval=cfg.eval.n, cell_id=cell_id(cfg), tool_sandbox=tool_sandbox)
    # config.yaml records the sandbox mode in force, as the embedded run's does (docs/sandbox.md, Modes)
    writer.start(OmegaConf.to_yaml(cfg) + OmegaConf.to_yaml({"tool_sandbox": tool_sandbox}),
                 resume_step=checkpoint_step(run.ckpt))
    try:
        with open_dict(verl_cfg):
            verl_cfg.actor_rollout_ref.model.path = str(initial_model_path(cfg, log))
        (run.path / "verl_config.yaml").write_text(OmegaConf.to_yaml(verl_cfg))
        rows = write_dataset(cfg, run.path)  # the files dataset_overrides points verl at
        log(f"[train] verl dataset: {rows['train']} training episodes, {rows['val']} eval episodes")
        from verl.trainer.main_ppo import run_ppo

        # lazy: keeps ray, verl out of this module's import
        from .task_runner import RemoteArenaTaskRunner

        os.environ.update(verl_env(cfg))  # this process too (verl reads them on import)
        cluster.ready()
        run_ppo(verl_cfg, task_runner_class=RemoteArenaTaskRunner)
        summary = run.summary() or writer.finish()  # the trainer's fit() writes it; else here
    except Exception:
        cluster.keep_logs()
        run.write_error(traceback.format_exc())
        log(f"[train] failed; traceback in {run.error_file}")
        return EXIT_FAILED
    log(f"[train] {summary['status']}: final eval success {summary['final_eval_success']} -> {run.summary_file}"
        f"{smoke_note(cfg.get('budget'), summary['status'])}")
    return EXIT_OK


def main(argv: list[str]) -> int:
    """`python -m arena.backends.verl.main CONFIG.yaml`: the driver of the multi-node script."""
    from omegaconf import OmegaConf

    pin_code_state()  # the code this run starts with (summary.json's record, written at its end)
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print(f"usage: python -m arena.backends.verl.main CONFIG.yaml (a resolved run config); got {argv}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    cfg = OmegaConf.load(argv[0])
    OmegaConf.set_struct(cfg, True)
    folder = run_dir(cfg)
    if not folder.is_dir():  # nothing made it (a bad path?): run_training says so and creates nothing
        return run_training(cfg)
    # a sweep's cell (or the multi-node script's run): what this driver prints lands in the
    # run's run.log too, after the job's own `recording` header (the job does not see it)
    with copied_to_run_log(folder):
        return run_training(cfg)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
