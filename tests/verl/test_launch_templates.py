"""Launch code of the verl backend: no GPU id and no port is written into the
templates or the launch code; the free-port / temp-dir helpers give usable, distinct values; the
multi-node sbatch template renders into a valid bash script."""
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from arena.backends.verl import launch, ray_head
from arena.backends.verl.launch import render_sbatch
from arena.backends.verl.ray_head import HEAD_PORT_NAMES, MAX_TEMP_DIR_CHARS, free_ports, head_command, ray_temp_dir

VERL_DIR = Path(launch.__file__).resolve().parent
LAUNCH_FILES = sorted(VERL_DIR.glob("templates/*")) + [
    VERL_DIR / name for name in ("launch.py", "ray_head.py", "main.py", "task_runner.py")]
SETTINGS = {"partition": "gpu", "gpus": 4, "cpus": 16, "mem_gb": 128, "timeout_min": 90, "qos": None, "account": "rl"}

# A hard-coded GPU id or count: CUDA_VISIBLE_DEVICES=0,1 / --num-gpus=8 / num_gpus=1 / cuda:0 / ...
GPU_PATTERNS = [
    r"(CUDA|HIP|ROCR)_VISIBLE_DEVICES\s*=\s*['\"]?\d",
    r"--num-gpus[= ]+['\"]?\d",
    r"\bnum_gpus\s*=\s*\d",
    r"n_gpus_per_node['\"]?\s*[:=]\s*['\"]?\d",
    r"--gpus(-per-node|-per-task)?[= ]+['\"]?\d",
    r"\bcuda:\d",
]
# A hard-coded port: Ray's defaults, any `...port=<non-zero literal>`, or host:<literal port>.
PORT_PATTERNS = [
    r"\b(6379|8265|52365|10001|10002|19999|29500)\b",
    r"port\w*['\"]?\s*[:= ]\s*['\"]?[1-9]\d{1,4}\b",
    r"(localhost|\d+\.\d+\.\d+\.\d+|\$\{?\w+\}?):\d{2,5}\b",
    r"MASTER_PORT\s*=\s*['\"]?\d",
]


def _offending_lines(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if any(re.search(p, line) for p in GPU_PATTERNS + PORT_PATTERNS)]


def test_the_grep_flags_hard_coded_gpu_ids_and_ports_and_passes_run_time_values():
    # The detector itself: each planted line is caught, each run-time form passes.
    bad = ["export CUDA_VISIBLE_DEVICES=0,1", "ray start --head --num-gpus=8", "ray start --port=6379",
           "ray start --dashboard-port 8266", "export RAY_ADDRESS=$head_ip:6380", "ray.init(num_gpus=1)",
           "trainer.n_gpus_per_node=8", "#SBATCH --gpus-per-node=4", "device = 'cuda:0'",
           "address = '127.0.0.1:1234'", "export MASTER_PORT=12345", '{"port": 2222}']
    good = ['--num-gpus="${SLURM_GPUS_ON_NODE}"', '--port="$head_port"', "--min-worker-port=0 --max-worker-port=0",
            "#SBATCH --gpus-per-node={{gpus_per_node}}", "sock.bind((host, 0))", 'export RAY_ADDRESS="$ip:$port"']
    assert _offending_lines("\n".join(bad)) == bad
    assert _offending_lines("\n".join(good)) == []


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_files_hard_code_no_gpu_id_and_no_port(path):
    assert path.exists()
    assert _offending_lines(path.read_text()) == []


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(4)
    assert len(set(ports)) == 4 and all(1024 <= p <= 65535 for p in ports)
    held = []
    try:
        for port in ports:  # each can be bound right away (SO_REUSEADDR off: the port is really free)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", port))
            held.append(sock)
    finally:
        for sock in held:
            sock.close()


@pytest.fixture
def short_dir():
    """/tmp/tXXXXXXXX (14 characters): short enough for Ray's socket paths."""
    path = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_ray_temp_dirs_are_fresh_distinct_and_short(tmp_path, short_dir, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(short_dir))
    long_run = tmp_path / ("x" * 60) / "cell"  # too long for Ray's socket paths: falls back to $TMPDIR
    a, b = ray_temp_dir(long_run), ray_temp_dir(long_run)
    assert a != b and a.parent == b.parent == short_dir and not any(a.iterdir())
    for d in (a, b):
        assert len(str(d)) <= MAX_TEMP_DIR_CHARS
        (d / "probe").write_text("ok")  # usable
    assert not long_run.exists()


def test_ray_temp_dir_skips_a_long_tmpdir_for_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / ("y" * 60)))
    d = ray_temp_dir()
    try:
        assert d.parent == Path("/tmp") and d.is_dir()
    finally:
        shutil.rmtree(d)


def test_ray_temp_dir_goes_under_a_short_run_folder(short_dir):
    d = ray_temp_dir(short_dir)
    assert d.parent == short_dir / "ray" and d.is_dir()


def test_head_command_replaces_every_fixed_default_port(tmp_path):
    ports = dict(zip(HEAD_PORT_NAMES, free_ports(len(HEAD_PORT_NAMES))))
    cmd = head_command(ports, tmp_path, num_cpus=3, num_gpus=2)
    assert cmd[1:4] == ["start", "--head", "--block"]
    for name, port in ports.items():
        assert f"--{name}={port}" in cmd
    for flag in (f"--temp-dir={tmp_path}", "--num-cpus=3", "--num-gpus=2", "--min-worker-port=0",
                 "--max-worker-port=0", "--include-dashboard=false"):
        assert flag in cmd


def test_render_sbatch_fills_every_placeholder_and_is_valid_bash(tmp_path):
    text = render_sbatch(config_path=tmp_path / "config.yaml", nodes=3, settings=SETTINGS, log_dir=tmp_path / "logs",
                         job_name="arena-verl-test", python="/opt/venv/bin/python", pythonpath="/opt/code")
    assert "{{" not in text and "}}" not in text
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    # SETTINGS has no signal_delay_s / max_num_timeout: USR1 120 s before the limit, 3 requeues
    assert sbatch == ["#SBATCH --job-name=arena-verl-test", "#SBATCH --requeue", "#SBATCH --signal=B:USR1@120",
                      "#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gpus-per-node=4", "#SBATCH --cpus-per-task=16", "#SBATCH --mem=128G",
                      "#SBATCH --time=90", f"#SBATCH --output={tmp_path}/logs/%j.out",
                      f"#SBATCH --error={tmp_path}/logs/%j.err", "#SBATCH --partition=gpu", "#SBATCH --account=rl"]
    assert f"CONFIG={tmp_path}/config.yaml" in text and "PYTHON=/opt/venv/bin/python" in text
    assert "arena.backends.verl.main" in text and "ray_head free-ports" in text and "wait-nodes" in text
    assert "SLURM_RESTART_COUNT:-0} < 3" in text and "trap requeue USR1" in text
    # the only GPU number in the script is SLURM's request line; the rest is read from the allocation
    assert _offending_lines(text) == ["#SBATCH --gpus-per-node=4"]
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_render_sbatch_rejects_missing_settings_listing_the_keys(tmp_path):
    with pytest.raises(ValueError, match="miss \\['gpus'\\]; valid keys: gpus, cpus, mem_gb, timeout_min"):
        render_sbatch(config_path=tmp_path / "c.yaml", nodes=2, settings={**SETTINGS, "gpus": 0}, log_dir=tmp_path)
    with pytest.raises(ValueError, match="nodes=0; valid"):
        render_sbatch(config_path=tmp_path / "c.yaml", nodes=0, settings=SETTINGS, log_dir=tmp_path)


def test_write_sbatch_saves_the_run_config_it_points_to(tmp_path):
    from omegaconf import OmegaConf

    from arena.config import load_config

    cfg = load_config(["backend=verl", "seed=3", "steps=7"])
    script = launch.write_sbatch(cfg, tmp_path / "job", nodes=2, settings=SETTINGS)
    saved = OmegaConf.load(tmp_path / "job" / "config.yaml")
    assert saved.seed == 3 and saved.steps == 7 and saved.backend == "verl"
    assert f"CONFIG={tmp_path}/job/config.yaml" in script.read_text()
    assert "#SBATCH --job-name=arena-verl-sokoban-s3" in script.read_text()


def test_ray_head_cli_prints_free_ports_and_lists_commands(capsys):
    assert ray_head.main(["free-ports", "3"]) == 0
    ports = [int(p) for p in capsys.readouterr().out.split()]
    assert len(set(ports)) == 3
    assert ray_head.main(["bogus"]) == 2
    assert "valid commands: free-ports, wait, wait-nodes" in capsys.readouterr().err


@pytest.mark.slow
def test_private_ray_head_starts_on_its_ports_and_stops_all_its_processes(tmp_path):
    # ~15 s: a real `ray start --head --block` (CPU only), one task through it, then stop.
    pytest.importorskip("ray")
    import os

    import ray

    head = ray_head.RayHead(ray_temp_dir(), num_cpus=1, num_gpus=0)
    with head:
        group = os.getpgid(head.process.pid)
        ray.init(address=head.address, logging_level="WARNING")
        try:
            assert ray.cluster_resources()["CPU"] == 1.0
            assert ray.get(ray.remote(lambda: 6 * 7).remote()) == 42
            assert ray.get_runtime_context().gcs_address == head.address
        finally:
            ray.shutdown()
    alive = subprocess.run(["ps", "-o", "stat=", "-g", str(group)], capture_output=True, text=True).stdout.split()
    assert all(state.startswith("Z") for state in alive)  # nothing of this head runs any more
    shutil.rmtree(head.temp_dir)


@pytest.mark.slow
def test_a_killed_job_leaves_no_ray_head_behind(tmp_path):
    # ~12 s: a job process starts a head, then dies without stopping it (os._exit, as on SIGKILL);
    # PR_SET_PDEATHSIG makes `ray start` stop its processes.
    import sys
    import time

    pytest.importorskip("ray")
    job = ("import os, sys\nfrom arena.backends.verl.ray_head import RayHead, ray_temp_dir\n"
           "h = RayHead(ray_temp_dir(), num_cpus=1, num_gpus=0).start()\n"
           "print(os.getpgid(h.process.pid), h.temp_dir, flush=True)\nos._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=180).stdout.split()
    group, temp_dir = int(out[0]), out[1]
    deadline = time.monotonic() + 30
    alive = ["?"]
    while time.monotonic() < deadline and alive:
        stats = subprocess.run(["ps", "-o", "stat=", "-g", str(group)], capture_output=True, text=True).stdout.split()
        alive = [s for s in stats if not s.startswith("Z")]
        time.sleep(0.5)
    shutil.rmtree(temp_dir, ignore_errors=True)
    assert alive == []


def test_a_cpu_runs_head_starts_without_cuda_visible_devices(tmp_path, monkeypatch):
    # submitit's local executor (a local sweep cell) sets CUDA_VISIBLE_DEVICES="" and Ray then
    # refuses --num-gpus=1; a CPU run's "GPU" slots are logical, so its head drops the variable
    seen = {}

    class Started(Exception):
        pass

    def popen(cmd, *, env, **kwargs):
        seen.update(cmd=cmd, env=env)
        raise Started

    heads = {logical: ray_head.RayHead(tmp_path / str(logical), num_cpus=1, num_gpus=1, logical_gpus=logical)
             for logical in (True, False)}  # built first: __init__ asks Ray for the node's address
    monkeypatch.setattr(ray_head.subprocess, "Popen", popen)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    for logical, kept in ((True, False), (False, True)):
        with pytest.raises(Started):
            heads[logical].start()
        assert "--num-gpus=1" in seen["cmd"] and ("CUDA_VISIBLE_DEVICES" in seen["env"]) is kept


def test_the_script_requeues_on_usr1_and_still_exits_with_the_driver_s_status(tmp_path):
    # the script's own requeue function, trap and wait loop, with scontrol recorded and a driver
    # that exits 3 after 1.5 s; USR1 (SLURM's warning before the limit) arrives at 0.5 s
    import signal
    import time

    text = render_sbatch(config_path=tmp_path / "c.yaml", nodes=2, settings=SETTINGS, log_dir=tmp_path)
    trap = text[text.index("requeue() {"):text.index("trap requeue USR1") + len("trap requeue USR1")]
    loop = text[text.index("while :; do"):text.index('exit "$status"') + len('exit "$status"')]
    log = tmp_path / "scontrol.log"
    harness = tmp_path / "harness.sh"
    harness.write_text(f"set -euo pipefail\nSLURM_JOB_ID=42\nscontrol() {{ echo \"scontrol $*\" >> {log}; }}\n"
                       f"{trap}\n(sleep 1.5; exit 3) &\ndriver=$!\n{loop}\n")
    proc = subprocess.Popen(["bash", str(harness)])
    time.sleep(0.5)
    proc.send_signal(signal.SIGUSR1)
    assert proc.wait(timeout=10) == 3  # the driver's status, after it ended (not the trap's 138)
    assert log.read_text() == "scontrol requeue 42\n"
