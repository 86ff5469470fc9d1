"""Attack list for the code sandbox: each attack is refused or killed within seconds, no
process of the sandbox outlives the call, and a normal call works afterwards.

Modes: "auto" (namespaces when the machine allows them) and "plain" (no namespaces: the
uid drop + rlimits + socket guard fallback) are both attacked where they apply.
"""
from __future__ import annotations

import os
import socket
import tempfile
import threading
import time

import pytest

from arena.envs import sandbox, sandbox_uid_cleanup

MODES = ["auto", "plain"]


def children_of(pid: int) -> list[int]:
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                # /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return out


def assert_contained(result: sandbox.SandboxResult, baseline_children: list[int]) -> None:
    """Nothing of the call survives, and the sandbox still runs normal code."""
    if result.uid is not None:
        assert sandbox_uid_cleanup.processes_of_uid(result.uid) == {}
    assert sorted(children_of(os.getpid())) == sorted(baseline_children)
    after = sandbox.run_code("print(1+1)")
    assert (after.stdout, after.returncode) == ("2\n", 0)


def run_with_deadline(code: str, deadline: float, **kwargs) -> tuple[sandbox.SandboxResult, float]:
    """Run in a thread and fail (instead of hanging the suite) if it exceeds `deadline`."""
    box: dict = {}

    def target():
        start = time.monotonic()
        box["result"] = sandbox.run_code(code, **kwargs)
        box["elapsed"] = time.monotonic() - start

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(deadline)
    assert not thread.is_alive(), f"sandbox call exceeded the {deadline}s hard deadline"
    return box["result"], box["elapsed"]


@pytest.fixture
def victim_dir():
    """A root-owned (the test's own uid) 0755 dir outside the sandbox, holding a public 0644
    file and a secret 0600 file."""
    path = tempfile.mkdtemp(prefix="arena-victim-")
    os.chmod(path, 0o755)
    public, secret = os.path.join(path, "public.txt"), os.path.join(path, "secret.txt")
    with open(public, "w") as f:
        f.write("public")
    with open(secret, "w") as f:
        f.write("TOPSECRET")
    os.chmod(public, 0o644)
    os.chmod(secret, 0o600)
    yield path, public, secret
    for name in os.listdir(path):
        os.remove(os.path.join(path, name))
    os.rmdir(path)


def test_isolation_report():
    info = sandbox.isolation()
    print("sandbox isolation:", info)
    if os.geteuid() == 0:
        assert info["uid"] in ("dedicated", "nobody")
    assert info["network"] in ("netns", "socket_guard")
    assert sandbox.run_code("print(6*7)").stdout == "42\n"


def test_isolation_uses_network_namespace():
    if sandbox.isolation()["network"] != "netns":
        pytest.skip("this machine cannot create a network namespace (unshare --net failed); "
                    "the weaker socket-guard fallback is in use")
    result = sandbox.run_code("import socket; print(socket.if_nameindex())")
    assert result.stdout == "[(1, 'lo')]\n"  # only the (down) loopback exists


@pytest.mark.parametrize("mode", MODES)
def test_files_outside_survive_and_secret_unreadable(mode, victim_dir):
    if os.geteuid() != 0:
        pytest.skip("not root: no uid to drop to, files of the test user are not protected")
    path, public, secret = victim_dir
    baseline = children_of(os.getpid())
    attacks = [
        f"import os; os.remove({public!r})",
        f"import os; os.remove({secret!r})",
        f"import shutil; shutil.rmtree({path!r})",
        f"open({public!r}, 'w').write('owned')",
        f"open({os.path.join(path, 'new.txt')!r}, 'w').write('x')",
        f"print(open({secret!r}).read())",
        f"__import__('os').system('cat {secret}; rm -f {public}; touch {path}/sys.txt')",
        f"import subprocess; print(subprocess.run(['cat', {secret!r}], capture_output=True))",
        f"import subprocess; subprocess.run(['rm', '-rf', {path!r}])",
    ]
    for code in attacks:
        result = sandbox.run_code(code, mode=mode)
        assert "TOPSECRET" not in result.stdout + result.stderr, code
        assert sorted(os.listdir(path)) == ["public.txt", "secret.txt"], code
        with open(public) as f:
            assert f.read() == "public", code
    assert_contained(result, baseline)


@pytest.mark.parametrize("mode", MODES)
def test_shell_runs_as_unprivileged_uid(mode):
    result = sandbox.run_code("import os; os.system('id -u'); print(os.getuid())", mode=mode)
    shell_uid, python_uid = result.stdout.split()  # a shell started by the code runs too
    assert shell_uid == python_uid
    if os.geteuid() == 0:
        assert result.uid not in (None, 0) and python_uid == str(result.uid)


@pytest.mark.parametrize("mode", MODES)
def test_loopback_connect_fails(mode):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))  # only ever loopback
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = (f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=2); "
            "s.sendall(b'hello'); print('connected')")
    try:
        result = sandbox.run_code(code, mode=mode)
        assert "connected" not in result.stdout and result.returncode != 0
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


@pytest.mark.parametrize("mode", MODES)
def test_infinite_loop_killed(mode):
    baseline = children_of(os.getpid())
    result, elapsed = run_with_deadline("while True:\n    pass", 20, timeout=1.0, mode=mode)
    assert result.timed_out and result.killed and elapsed < 3.0
    assert_contained(result, baseline)


@pytest.mark.parametrize("mode", MODES)
def test_huge_allocation_refused(mode):
    baseline = children_of(os.getpid())
    # 4 GiB > the 512 MiB address-space limit: MemoryError, never an OOM of the host
    result, elapsed = run_with_deadline("x = bytearray(4 << 30)\nprint('allocated')", 20, mode=mode)
    assert "allocated" not in result.stdout and "MemoryError" in result.stderr
    assert elapsed < 3.0
    assert_contained(result, baseline)


FORK_BOMB = """
import os, time
while True:
    try:
        if os.fork() == 0:
            os.setsid()  # try to escape the process group
    except OSError:
        time.sleep(0.001)
"""


@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_killed(mode):
    baseline = children_of(os.getpid())
    result, elapsed = run_with_deadline(FORK_BOMB, 30, timeout=1.5, mode=mode)
    assert result.timed_out and elapsed < 6.0
    assert_contained(result, baseline)


@pytest.mark.parametrize("mode", MODES)
def test_output_capped(mode):
    result = sandbox.run_code("print('x' * 10**6)", output_chars=300, mode=mode)
    assert result.stdout == "x" * 300 and result.returncode == 0
    flood, elapsed = run_with_deadline("while True:\n    print('y' * 1000)", 20,
                                       timeout=1.0, output_chars=100, mode=mode)
    assert flood.timed_out and flood.stdout == "y" * 100 and elapsed < 3.0


@pytest.mark.parametrize("mode", MODES)
def test_file_size_limited(mode):
    # 64 MiB > the 16 MiB RLIMIT_FSIZE: the write fails (EFBIG) or SIGXFSZ kills the process
    result = sandbox.run_code("open('big', 'wb').write(b'0' * (64 << 20)); print('written')",
                              mode=mode)
    assert "written" not in result.stdout and result.returncode != 0


def test_work_dir_is_fresh_and_removed():
    first = sandbox.run_code("import os; open('f', 'w').write('1'); print(os.getcwd())")
    second = sandbox.run_code("import os; print(sorted(os.listdir('.')))")
    assert first.returncode == 0 and second.stdout == "[]\n"
    assert not os.path.exists(os.path.join(first.stdout.strip(), "f")) or \
        "mount-proc" in sandbox.isolation()["namespaces"]


def test_unknown_mode_lists_choices():
    with pytest.raises(ValueError, match="auto, namespaces, plain"):
        sandbox.run_code("print(1)", mode="docker")
