"""A private Ray head for one job (single-node path of `arena train backend=verl`).

Every port Ray would otherwise take from a fixed default (the GCS, dashboard, dashboard agent
and client server ports, and the shared worker port range) is either a free port chosen at run
time (bound to port 0 by the OS, all at once so they are distinct) or 0 (Ray picks a random
one). The temp dir is a fresh directory per job. So several jobs on one node never share or
collide with a Ray cluster, and nothing here names a GPU: Ray sees the GPUs of the job's
allocation (CUDA_VISIBLE_DEVICES, set by SLURM) and `num_gpus` is counted at run time.

`ray start --block` runs in its own session; `RayHead.stop` signals only that process group
(its children: GCS, raylet, agents), never `ray stop`, which would stop every Ray on the node.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

# Ray's unix sockets live under <temp_dir>/session_<date>/sockets/; AF_UNIX paths are limited to
# 107 bytes, so the temp dir itself must stay well below that.
MAX_TEMP_DIR_CHARS = 40
HEAD_PORT_NAMES = ("port", "dashboard-port", "dashboard-agent-listen-port", "ray-client-server-port")
# Ray system settings of the head's processes (GCS, raylet): no Serve to drain, so stop at once;
# no speculative worker processes (the raylet otherwise starts idle workers when the first driver
# connects and when tasks queue: in a CPU smoke run 2-3 of them never ran anything, each one more
# process importing Ray on the run's cores; docs/verl.md, Where a CPU cell's time goes)
HEAD_ENV = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0", "RAY_prestart_worker_first_driver": "0",
            "RAY_enable_worker_prestart": "0"}


def free_ports(count: int, host: str = "") -> list[int]:
    """`count` distinct TCP ports that are free now (each bound to port 0, all held until all are chosen)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def ray_temp_dir(run_dir: Optional[Path] = None) -> Path:
    """A fresh, private temp dir for one Ray cluster: under the run folder when that path is short
    enough for Ray's sockets, else under $TMPDIR (SLURM's per-job dir on most clusters) or /tmp."""
    candidates = [Path(run_dir) / "ray"] if run_dir is not None else []
    candidates += [Path(os.environ.get("TMPDIR") or tempfile.gettempdir()), Path("/tmp")]
    for parent in candidates:
        if len(str(parent.resolve())) + len("/arena-ray-XXXXXXXX") > MAX_TEMP_DIR_CHARS:
            continue
        parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="arena-ray-", dir=parent))
    raise RuntimeError(f"no temp dir shorter than {MAX_TEMP_DIR_CHARS} characters among {candidates}")


def visible_gpu_count() -> int:
    """GPUs this process may use (SLURM's allocation via CUDA_VISIBLE_DEVICES), 0 without CUDA."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _die_with_parent() -> None:
    """In the `ray start` child before exec: SIGTERM it when the job process that started it dies
    (Linux PR_SET_PDEATHSIG), so a killed job leaves no Ray head behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def node_ip_address() -> str:
    """This node's IP as Ray sees it (the address drivers and workers connect to)."""
    from ray.util import get_node_ip_address

    return get_node_ip_address()


def head_command(ports: dict[str, int], temp_dir: Path, *, num_cpus: int, num_gpus: int) -> list[str]:
    """`ray start --head --block ...` with every fixed-default port replaced (module docstring)."""
    ray = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray") or "ray"
    return [
        # --no-monitor: no autoscaler monitor process (a fixed single-node cluster has nothing to scale)
        ray, "start", "--head", "--block", "--disable-usage-stats", "--include-dashboard=false", "--no-monitor",
        f"--temp-dir={temp_dir}", f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}",
        *(f"--{name}={ports[name]}" for name in HEAD_PORT_NAMES),
        "--min-worker-port=0", "--max-worker-port=0",  # 0: random worker ports, no shared range
    ]


class RayHead:
    """`with RayHead(temp_dir, num_cpus=.., num_gpus=..) as head: os.environ["RAY_ADDRESS"] = head.address`."""

    def __init__(self, temp_dir: Path, *, num_cpus: int, num_gpus: int, start_timeout_s: float = 120.0,
                 logical_gpus: bool = False):
        """`logical_gpus`: the GPUs are a CPU run's scheduling slots, not devices. Ray refuses
        `--num-gpus=N` above the ids in $CUDA_VISIBLE_DEVICES (`Attempting to start raylet
        with 1 GPU, but CUDA_VISIBLE_DEVICES contains []`: submitit's local executor, i.e. a
        local sweep cell, sets it empty), so the head then starts without that variable."""
        self.logical_gpus = logical_gpus
        self.temp_dir = Path(temp_dir)
        self.ports = dict(zip(HEAD_PORT_NAMES, free_ports(len(HEAD_PORT_NAMES))))
        self.host = node_ip_address()
        self.address = f"{self.host}:{self.ports['port']}"
        self.command = head_command(self.ports, self.temp_dir, num_cpus=num_cpus, num_gpus=num_gpus)
        self.start_timeout_s = start_timeout_s
        self.process: Optional[subprocess.Popen] = None
        self.launched_at: Optional[float] = None
        self.log_file = self.temp_dir / "ray_start.log"

    def start(self) -> "RayHead":
        return self.launch().wait_ready()

    def launch(self) -> "RayHead":
        """Start `ray start` and return at once; `wait_ready` waits for it (the head boots in its
        own processes meanwhile, so the caller can do its own start-up work in parallel)."""
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "w") as log:
            env = {**os.environ, **HEAD_ENV}
            if self.logical_gpus:
                env.pop("CUDA_VISIBLE_DEVICES", None)
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True, preexec_fn=_die_with_parent)
        self.launched_at = time.monotonic()
        return self

    def wait_ready(self) -> "RayHead":
        """Return once the launched head answers; RuntimeError if `ray start` exits, or (after
        stopping it) if `start_timeout_s` passes since `launch`."""
        deadline = self.launched_at + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"`ray start` exited with {self.process.returncode}; log: {self.log_file}\n"
                                   + self.log_file.read_text()[-2000:])
            if self._ready():
                return self
            time.sleep(0.1)  # cheap check (a connect and a log read) on the run's critical path
        self.stop()
        raise RuntimeError(f"Ray head not ready after {self.start_timeout_s:.0f}s; log: {self.log_file}")

    def _ready(self) -> bool:
        """The GCS answers on our port and `ray start` has printed its success line."""
        try:
            with socket.create_connection((self.host, self.ports["port"]), timeout=1):
                pass
        except OSError:
            return False
        return "Ray runtime started" in self.log_file.read_text()

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM `ray start` (its handler stops the GCS, raylet and workers it started), then
        SIGKILL whatever is left in its process group (only processes this head started)."""
        if self.process is None:
            return
        group = os.getpgid(self.process.pid) if self.process.poll() is None else None
        if group is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def __enter__(self) -> "RayHead":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for_port(host: str, port: int, timeout_s: float = 300.0) -> None:
    """Return once `host:port` accepts a TCP connection; RuntimeError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout_s:.0f}s")


def wait_for_nodes(count: int, timeout_s: float = 600.0) -> None:
    """Return once the Ray cluster at $RAY_ADDRESS has `count` live nodes (the driver must not
    size verl's resource pools before every worker node has joined)."""
    import ray

    ray.init(logging_level="WARNING")
    try:
        deadline = time.monotonic() + timeout_s
        while sum(node["Alive"] for node in ray.nodes()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} Ray nodes expected, {sum(n['Alive'] for n in ray.nodes())} alive after {timeout_s:.0f}s")
            time.sleep(2)
    finally:
        ray.shutdown()


def main(argv: list[str]) -> int:
    """`python -m arena.backends.verl.ray_head free-ports N | wait HOST PORT | wait-nodes N`
    (used by templates/ray_on_slurm.sbatch)."""
    commands = ("free-ports", "wait", "wait-nodes")
    if not argv or argv[0] not in commands:
        print(f"usage: ray_head {{{'|'.join(commands)}}} ...; valid commands: {', '.join(commands)}", file=sys.stderr)
        return 2
    if argv[0] == "free-ports":
        print(" ".join(str(port) for port in free_ports(int(argv[1]))))
    elif argv[0] == "wait":
        wait_for_port(argv[1], int(argv[2]))
    else:
        wait_for_nodes(int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
