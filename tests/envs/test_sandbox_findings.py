"""Attacks that got past the sandbox before (state left between calls through SysV IPC, the
plain mode of a non-root user, the user-namespace mode, the socket guard, lone surrogates),
each followed by the expected outcome. Non-root cases run a small "trainer" process as user
`nobody` (subprocess user=65534) that imports arena.envs.sandbox with the system python; they
skip with a reason where this machine cannot run them.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid

import pytest

from arena.envs import sandbox, sandbox_process, sandbox_uid_cleanup
from arena.envs.tir_math import TirMathEnv
from tests.envs import sandbox_nobody

SECRET = "wandb-secret-" + uuid.uuid4().hex
MODES = ["auto", "plain"]

SHM_CREATE = textwrap.dedent("""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    # shmget(key, size, IPC_CREAT | 0o666)
    shm = libc.shmget({key}, 1 << 20, 0o1000 | 0o666)
    print("created", shm, ctypes.get_errno())
    if shm >= 0:
        address = libc.shmat(shm, None, 0)
        ctypes.memmove(address, b"LEFTOVER", 8)
    big = libc.shmget({key} + 1, 600 << 20, 0o1000 | 0o666)  # 600 MiB > the 512 MiB limit
    print("big", big)
""")
SHM_READ = textwrap.dedent("""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    shm = libc.shmget({key}, 0, 0)
    print("found", shm)
    if shm >= 0:
        print(ctypes.string_at(libc.shmat(shm, None, 0), 8))
""")


def require_layers(mode: str, **needs: tuple) -> None:
    """Skip (with the reason) where the mode in force has none of the layers that hold this
    attack: e.g. plain mode on a kernel without Landlock is documented as open to it."""
    label = sandbox.mode_in_force(mode)
    parts = set(label.split("+")) | ({"ns"} if label.startswith(("namespaces", "user-namespaces")) else set())
    for attack, layers in needs.items():
        if not parts & set(layers):
            pytest.skip(f"{label} has none of {layers}: {attack} is not held in this mode here "
                        "(docs/sandbox.md, What each mode protects)")


def host_shm_keys() -> set[int]:
    with open("/proc/sysvipc/shm") as f:
        return {int(line.split()[0]) for line in list(f)[1:]}


@pytest.mark.parametrize("mode", MODES)
def test_sysv_shared_memory_neither_outlives_the_call_nor_exceeds_the_memory_limit(mode):
    require_layers(mode, sysv_limit=("ns", "seccomp"))
    key = int.from_bytes(os.urandom(3), "little") + 1  # random, so other test runs cannot collide
    first = sandbox.run_code(SHM_CREATE.format(key=key), mode=mode)
    assert first.returncode == 0, first.stderr
    # namespaces: the segment lived in the call's private IPC namespace; 600 MiB > shmmax
    # (set to the 512 MiB memory limit) -> -1. plain: seccomp refuses shmget -> -1 both times
    assert "big -1" in first.stdout
    assert key not in host_shm_keys() and key + 1 not in host_shm_keys()
    if first.uid is not None:
        assert sandbox_uid_cleanup.sysv_ipc_of_uid(first.uid) == {}
    second = sandbox.run_code(SHM_READ.format(key=key), mode=mode)
    assert "found -1" in second.stdout and "LEFTOVER" not in second.stdout


@pytest.mark.parametrize("mode", MODES)
def test_files_in_shared_temp_dirs_neither_outlive_the_call_nor_reach_the_host(mode):
    require_layers(mode, temp_files=("ns", "landlock", "uid"))
    token = uuid.uuid4().hex
    paths = [f"/tmp/arena-leftover-{token}", f"/dev/shm/arena-leftover-{token}",
             f"/var/tmp/arena-leftover-{token}"]
    writes = "\n".join(f"try: open({p!r}, 'w').write('x')\nexcept OSError as e: print(e)" for p in paths)
    first = sandbox.run_code(writes, mode=mode)
    assert first.returncode == 0, first.stderr
    # namespaces: the writes landed in the call's private tmpfs; plain: Landlock refused them
    assert not any(os.path.exists(p) for p in paths)
    second = sandbox.run_code(f"import os; print([os.path.exists(p) for p in {paths!r}])", mode=mode)
    assert second.stdout == "[False, False, False]\n"


def test_ipc_namespace_is_private():
    if "ipc" not in sandbox.isolation()["namespaces"]:
        pytest.skip("no namespaces on this machine: the plain mode refuses SysV IPC via seccomp")
    result = sandbox.run_code("print(open('/proc/sysvipc/shm').read().count('\\n'))")
    assert result.stdout == "1\n"  # the header line only: no object of the host is visible


# ---------------------------------------------------------------- non-root "trainer" processes

def nobody_python() -> str:
    """A system python user nobody can run, importing arena from a path it can read (the
    repository, or a copy of it: tests/envs/sandbox_nobody.py), else skip with the reason."""
    return sandbox_nobody.nobody_python()[0]


def run_as_nobody(interpreter: str, body: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    repo = sandbox_nobody.nobody_python()[1]
    script = f"import sys; sys.path.insert(0, {repo!r})\n" + textwrap.dedent(body)
    return sandbox_nobody.as_nobody(interpreter, script, timeout=timeout,
                                    env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "WANDB_API_KEY": SECRET})


def test_non_root_without_namespaces_auto_refuses_and_names_the_setting():
    # `unshare` made unavailable (as on a cluster without it): auto must not fall back to plain
    out = run_as_nobody(nobody_python(), """
        from arena.envs import sandbox
        sandbox.UNSHARE = None
        try:
            sandbox.run_code("print(1)")
            print("RAN")
        except sandbox.SandboxUnavailable as exc:
            print("REFUSED", exc)
    """)
    assert out.stdout.startswith("REFUSED"), out.stdout + out.stderr
    assert "env.kwargs.sandbox_mode=plain" in out.stdout and "auto, namespaces, plain" in out.stdout


PLAIN_ATTACKS = """
    import json, os
    from arena.envs import sandbox
    sandbox.UNSHARE = None
    attacks = {
        "environ": "import os; print(open(f'/proc/{os.getppid()}/environ').read())",
        "all_environs": "import os\\nfor p in os.listdir('/proc'):\\n try: print(open(f'/proc/{p}/environ').read())\\n except Exception: pass",
        "kill_parent": "import os; os.kill(os.getppid(), 9)",
        "kill_all": "import os; os.kill(-1, 9)",
    }
    results = {name: sandbox.run_code(code, mode="plain").__dict__ for name, code in attacks.items()}
    print(json.dumps({"mode": sandbox.mode_in_force("plain"), "results": results}))
"""


def test_non_root_plain_mode_keeps_the_trainers_secrets_and_processes():
    if sandbox.landlock_abi() < 6:
        pytest.skip(f"Landlock ABI {sandbox.landlock_abi()} < 6 (no signal scoping): as a non-root "
                    "user the plain mode cannot protect the trainer (docs/sandbox.md, Modes)")
    out = run_as_nobody(nobody_python(), PLAIN_ATTACKS)
    # the trainer survived kill(ppid) and kill(-1): it printed its report and exited 0
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["mode"].startswith("plain+landlock")
    for name, result in report["results"].items():
        assert SECRET not in result["stdout"] + result["stderr"], name
    assert "PermissionError" in report["results"]["environ"]["stderr"]
    assert "PermissionError" in report["results"]["kill_parent"]["stderr"]


USERNS_ATTACKS = """
    import json, os
    from arena.envs import sandbox
    home, token = sys.argv[1], sys.argv[2]
    netrc = os.path.join(home, ".netrc")
    with open(os.open(netrc, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("machine api.wandb.ai password " + token)
    attacks = {
        "read_netrc": f"print(open({netrc!r}).read())",
        "shell_netrc": f"import os; os.system('cat {netrc}')",
        "write_home": f"open({home!r} + '/planted', 'w').write('x')",
        "umount_tmp": "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                      "print('umount', libc.umount2(b'/tmp', 2)); "
                      f"open('/tmp/escaped-{token}', 'w').write('x')",
    }
    results = {name: sandbox.run_code(code).__dict__ for name, code in attacks.items()}
    print(json.dumps({"mode": sandbox.mode_in_force(), "results": results}))
"""


@pytest.fixture
def nobody_home():
    """A dir owned by nobody outside every dir the sandbox covers with a private tmpfs."""
    parents = [p for p in ("/srv", "/opt", "/var/lib", "/mnt", "/home") if os.access(p, os.W_OK)]
    if not parents or os.geteuid() != 0:
        pytest.skip("needs root and a writable dir outside the private tmpfs dirs")
    path = tempfile.mkdtemp(prefix="arena-sandbox-home-", dir=parents[0])
    os.chown(path, 65534, 65534)
    yield path
    shutil.rmtree(path)


def test_user_namespace_mode_keeps_the_callers_files_and_private_tmp(nobody_home):
    interpreter = nobody_python()
    token = uuid.uuid4().hex
    probe = run_as_nobody(interpreter, "from arena.envs import sandbox; print(sandbox.mode_in_force())")
    if not probe.stdout.startswith("user-namespaces"):
        pytest.skip(f"user nobody gets no user namespace here: {probe.stdout or probe.stderr[-300:]}")
    out = run_as_nobody(interpreter, USERNS_ATTACKS.replace(
        "home, token = sys.argv[1], sys.argv[2]", f"home, token = {nobody_home!r}, {token!r}"))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    results = report["results"]
    for name, result in results.items():
        assert token not in result["stdout"], name  # the 0600 file's content never came out
    assert results["read_netrc"]["returncode"] != 0
    assert "umount -1" in results["umount_tmp"]["stdout"]
    assert not os.path.exists(f"/tmp/escaped-{token}")  # the write stayed in the private tmpfs
    assert sorted(os.listdir(nobody_home)) == [".netrc"]  # nothing planted


# ---------------------------------------------------------------- network, surrogates, probes

PAST_SOCKET_GUARD = [
    # re-import the socket module the guard set to None
    "import sys\nfor m in ('socket', '_socket'): sys.modules.pop(m, None)\n"
    "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')",
    # a fresh interpreter has no guard
    "import subprocess, sys; subprocess.run([sys.executable, '-c', \"import socket; "
    "socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')\"])",
    # UDP, which Landlock's TCP rules do not cover
    "import sys\nfor m in ('socket', '_socket'): sys.modules.pop(m, None)\n"
    "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp}))",
]


@pytest.mark.parametrize("mode", MODES)
def test_no_way_past_the_network_guard_to_localhost(mode):
    require_layers(mode, tcp=("ns", "landlock", "seccomp"), udp=("ns", "seccomp"))
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        server.bind(("127.0.0.1", 0)), server.listen(4), udp.bind(("127.0.0.1", 0))
        server.settimeout(0.2), udp.settimeout(0.2)
        for attack in PAST_SOCKET_GUARD:
            code = attack.format(port=server.getsockname()[1], udp=udp.getsockname()[1])
            sandbox.run_code(code, mode=mode)
            with pytest.raises(socket.timeout):
                server.accept()
            with pytest.raises(socket.timeout):
                udp.recvfrom(16)
    finally:
        server.close(), udp.close()


def test_lone_surrogates_give_an_error_result_not_an_exception():
    result = sandbox.run_code("print('\ud800')")
    assert result.returncode == 1 and "not valid UTF-8" in result.stderr and not result.killed
    env = TirMathEnv(max_turns=3)
    env.reset(0)
    observation, reward, done, _ = env.step("python: x = '\udcff'")
    assert "Python error" in observation and "not valid UTF-8" in observation
    assert (reward, done) == (0.0, False)


def test_timed_out_probe_never_pins_a_mode(monkeypatch):
    """Every probe of the first (namespace) setup times out: `auto` raises and caches nothing,
    never choosing the next, weaker setup; once probes answer, the namespace setup is chosen."""
    real_execute, real_timeouts = sandbox._execute, sandbox.PROBE_TIMEOUTS
    calls = []

    def slow_namespaces(plan, code, **kwargs):
        calls.append(plan.label)
        if plan.namespace_cmd:
            return sandbox.SandboxResult("", "", -9, True, True)
        return real_execute(plan, code, **kwargs)

    monkeypatch.setattr(sandbox, "_PLANS", {})
    monkeypatch.setattr(sandbox, "PROBE_TIMEOUTS", (0.1, 0.2))
    monkeypatch.setattr(sandbox, "_execute", slow_namespaces)
    if not sandbox.UNSHARE:
        pytest.skip("no unshare here: no namespace setup to time out")
    with pytest.raises(sandbox.SandboxUnavailable, match="timed out 2 times"):
        sandbox.mode_in_force("auto")
    assert len(calls) == 2 and all(label.startswith(("namespaces", "user-namespaces")) for label in calls)
    assert "auto" not in sandbox._PLANS
    # the real probes with the real timeouts: 0.1/0.2 s time out on a loaded machine
    monkeypatch.setattr(sandbox, "_execute", real_execute)
    monkeypatch.setattr(sandbox, "PROBE_TIMEOUTS", real_timeouts)
    assert sandbox.mode_in_force("auto").startswith(("namespaces", "user-namespaces"))


def test_tir_math_refuses_an_unknown_sandbox_mode():
    with pytest.raises(ValueError, match="sandbox_mode 'docker'; valid: auto, namespaces, plain"):
        TirMathEnv(sandbox_mode="docker")


def test_mode_in_force_is_what_an_env_records():
    env = TirMathEnv()
    assert sandbox.env_isolation(env) == sandbox.mode_in_force("auto") == sandbox.isolation()["mode"]
    assert sandbox.env_isolation(object()) is None  # an env that runs no tool code
    with pytest.raises(ValueError, match="auto, namespaces, plain"):
        sandbox.mode_in_force("docker")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# socket(family | 1 << 32, type, 0) through the raw syscall, for each family seccomp refuses in
# the mode; the kernel reads the family as a 32-bit int, so without a masked compare these made
# AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET and AF_VSOCK sockets. Then the x32 ABI's socket number
# (0x40000000 | 41), which libseccomp's x86_64 filter kills (SIGSYS) as a foreign architecture
HIGH_BIT_SOCKETS = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {{'x86_64': 41, 'aarch64': 198}}[os.uname().machine]
    for family, kind in {families}:
        fd = libc.syscall(nr, ctypes.c_long(family | 1 << 32), ctypes.c_long(kind), 0)
        print(family, fd, ctypes.get_errno() if fd < 0 else 0, flush=True)
    if os.uname().machine == 'x86_64':
        print('x32', libc.syscall(0x40000000 | 41, 1, 1, 0), flush=True)
""")


@pytest.mark.parametrize("mode", MODES)
def test_socket_family_with_high_bits_set_is_refused_like_the_family(mode):
    require_layers(mode, high_bit_socket=("seccomp",))
    namespaces = sandbox.mode_in_force(mode).startswith(("namespaces", "user-namespaces"))
    # (family, type): AF_UNIX, AF_VSOCK stream; plain mode also AF_INET/AF_INET6 datagram, AF_NETLINK
    # and AF_PACKET raw (3), which the namespace modes leave to their network namespace
    families = [(1, 1), (40, 1)] + ([] if namespaces else [(2, 2), (10, 2), (16, 3), (17, 3)])
    result = sandbox.run_code(HIGH_BIT_SOCKETS.format(families=families), mode=mode)
    lines = result.stdout.splitlines()
    assert lines[:len(families)] == [f"{family} -1 13" for family, _ in families], result  # EACCES
    # x32: killed by SIGSYS before it prints, or ENOSYS (-1) on a kernel without the x32 ABI
    assert result.returncode == -31 or "x32 -1" in result.stdout, result


def test_every_seccomp_argument_compare_reads_only_what_the_kernel_reads():
    """Each comparison is (arg & mask) == value with a mask no wider than 32 bits: the
    arguments compared (socket's family, socketpair's type) are C ints, so bits 32..63 of the
    register never reach the kernel and must not decide the rule."""
    for plan_kind in ((), ("unshare",)):
        plan = sandbox.Plan(namespace_cmd=plan_kind, interpreter="python3", drop_uid="none",
                            landlock=False, seccomp=True)
        compares = [c for _, comparisons in sandbox_process.seccomp_rules(plan) for c in comparisons]
        assert compares and all(op == sandbox_process.CMP_MASKED_EQ and 0 < mask <= 0xFFFFFFFF
                                and value & ~mask == 0 for _, op, mask, value in compares)


def test_a_clean_up_helper_that_times_out_never_raises_out_of_the_tool_call(monkeypatch, caplog):
    """Every clean-up helper (kill the pool uid's processes, ipcrm, forget keyrings) hangs past
    its timeout: the tool call still returns its observation, and the clean-up is logged."""
    plan = sandbox._plan("plain")
    if plan.drop_uid != "pool":
        pytest.skip(f"{plan.label}: no pool uid, so no clean-up helpers run")
    real_run = subprocess.run

    def hanging(argv, *args, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs.get("timeout", 10))

    monkeypatch.setattr(sandbox_uid_cleanup, "processes_of_uid", lambda uid: {1: 1})  # always "left": the helper runs
    monkeypatch.setattr(sandbox_process.subprocess, "run", hanging)
    env = TirMathEnv(max_turns=3, sandbox_mode="plain")
    env.reset(0)
    observation, reward, done, _ = env.step("python: print(6 * 7)")
    monkeypatch.setattr(sandbox_process.subprocess, "run", real_run)
    assert "42" in observation and (reward, done) == (0.0, False)
    assert "sandbox clean-up helper" in caplog.text and "timed out" in caplog.text
