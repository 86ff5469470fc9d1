"""Every sandbox mode against the same attack battery (tests/envs/test_sandbox_battery.py),
run from a "trainer" process that holds a secret in its environment: root with `auto`
(namespaces + dedicated uid) and `plain`, and user nobody with `auto` (user namespaces) and
`plain`. Each attack must be held wherever the layers the mode reports are meant to hold it
(`expected_to_hold`); the table printed with `-s` is the one in docs/sandbox.md, Modes.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from arena.envs import sandbox
from tests.envs.sandbox_nobody import nobody_python
from tests.envs.test_sandbox_battery import ATTACKS, host_state, read_battery, verdicts

REPO = Path(__file__).resolve().parents[2]
# (trainer user, requested mode, layers left out to measure the mode without them)
CASES = [("root", "auto", ()), ("root", "plain", ()), ("nobody", "auto", ()), ("nobody", "plain", ()),
         ("root", "auto", ("landlock", "seccomp")), ("root", "plain", ("landlock", "seccomp")),
         ("nobody", "auto", ("landlock",)), ("nobody", "auto", ("landlock", "readonly", "seccomp")),
         ("nobody", "plain", ("landlock", "seccomp"))]
TRAINER = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.envs.test_sandbox_battery import run_battery
run_battery({mode!r}, json.loads({values!r}), {disable!r})
"""


def expected_to_hold(label: str, attack: str) -> bool:
    """Which attacks the layers of mode `label` are meant to stop (docs/sandbox.md, Layers)."""
    ns = label.startswith(("namespaces", "user-namespaces"))  # net, pid, ipc, mount, private /proc
    uid, landlock, seccomp = "+uid" in label, "+landlock" in label, "+seccomp" in label
    read_only = "+readonly" in label  # every mount read-only but the private tmpfs dirs
    abi = sandbox.landlock_abi() if landlock else 0
    rules = {
        "read_home_netrc": uid or landlock or ns,  # ns: an empty tmpfs over $HOME
        "read_secret_file": uid or landlock, "shell_reads_secret_file": uid or landlock,
        "write_trainer_dir": uid or landlock or read_only, "delete_trainer_file": uid or landlock or read_only,
        "read_parent_environ": uid or ns or landlock,  # Landlock: no ptrace out of the domain
        "kill_parent": uid or ns or abi >= 6, "kill_everything": uid or ns or abi >= 6,
        "tcp_localhost": ns or seccomp or abi >= 4, "udp_localhost": ns or seccomp,
        "unix_socket_run": ns or seccomp,  # ns: a private tmpfs over /run and /tmp
        "unix_socket_elsewhere": seccomp,  # a socket at any path: only seccomp's "no AF_UNIX"
        # the family with its high 32 bits set: the same layers (seccomp compares the low 32)
        "unix_high_bits_run": ns or seccomp, "unix_high_bits_elsewhere": seccomp,
        "inet_high_bits": ns or seccomp, "vsock_high_bits": seccomp,  # no namespace covers vsock
        "keyring_left": seccomp or uid,  # uid: its keyrings emptied after the call
        "mqueue_left": ns or seccomp or uid,  # ns: the private IPC namespace holds them; uid: removed after
        "sticky_subdir_file_left": ns or landlock or uid,  # uid: removed after the call
        "sysv_shm_left": ns or seccomp or uid,  # uid: removed after the call
        "tmp_file_left": ns or landlock or uid, "umount_tmp": ns or landlock or uid,
        "flood_host_tmp": True,  # ns: the tmpfs is full; plain: the call is killed at the cap
    }
    return rules[attack]


def trainer_interpreter(user: str) -> tuple[str, str]:
    """(interpreter, repository path) for a trainer run as `user`."""
    if os.geteuid() != 0:
        pytest.skip("the battery runs trainers as root and as nobody: needs root")
    return (sys.executable, str(REPO)) if user == "root" else nobody_python()


def sandbox_host_dirs() -> set[str]:
    """Call dirs of user nobody's sandboxes (never another user's calls running meanwhile)."""
    found = set()
    for entry in os.scandir(tempfile.gettempdir()):
        try:
            if entry.name.startswith("arena-sandbox-") and entry.stat(follow_symlinks=False).st_uid == 65534:
                found.add(entry.path)
        except FileNotFoundError:  # a call that just ended removed it
            continue
    return found


def remove_leftovers(values: dict, host_dirs_before: set[str], interpreter: str, uid: int) -> None:
    """What a broken mode (a layer left out) let the battery leave on the host, and the call
    dirs of a trainer killed before it could remove them."""
    for path in sandbox_host_dirs() - host_dirs_before:
        shutil.rmtree(path, ignore_errors=True)
    token = values["token"]
    for path in (f"/tmp/arena-left-{token}", f"/dev/shm/arena-left-{token}", f"/tmp/arena-escaped-{token}"):
        if os.path.exists(path):
            os.remove(path)
    subprocess.run(["ipcrm", "-M", str(values["key"])], capture_output=True, check=False)
    ctypes.CDLL(None).mq_unlink(f"/arena-{token}".encode())
    for path in (values["sticky"], *(os.path.dirname(values[k]) for k in ("run_public", "run_private", "temp"))):
        shutil.rmtree(path, ignore_errors=True)
    # a key a broken mode let the code add: to this process's session keyring (inherited by
    # the trainer) or to the trainer uid's keyring (unlink what keyctl(KEYCTL_SEARCH) finds)
    find_and_unlink = ("import ctypes, os; nr = {'x86_64': 250, 'aarch64': 219}[os.uname().machine]; "
                       "k = lambda *a: ctypes.CDLL(None).syscall(nr, *a); "
                       f"[k(9, key, ring) for ring in (-3, -4) for key in [k(10, ring, b'user', b'arena-{token}', 0)] if key > 0]")
    subprocess.run([interpreter, "-I", "-S", "-c", find_and_unlink], user=uid, group=uid,
                   extra_groups=[], cwd="/", capture_output=True, check=False)


def unix_servers(values: dict, victim_dir: str, uid: int) -> dict[str, socket.socket]:
    """Listening unix sockets the trainer (`uid`) owns: a 0666 one in a dir under /run (as
    root's are), one in its own 0700 dir under /run (as /run/user/<uid> is), a 0666 one in a
    temp dir, a 0666 one outside every tmp dir, and an abstract one; their paths go into `values`. A 1777 dir
    under /tmp (as /tmp/.X11-unix is) for the sticky-subfolder attack."""
    token = values["token"]
    values["sticky"] = f"/tmp/arena-sticky-{token}"
    os.mkdir(values["sticky"]), os.chmod(values["sticky"], 0o1777)
    public_dir, private_dir = f"/run/arena-battery-{token}", f"/run/arena-battery-{token}-private"
    os.mkdir(public_dir, 0o755), os.mkdir(private_dir, 0o700)
    temp_dir = tempfile.mkdtemp(prefix=f"arena-battery-{token}-")  # in $TMPDIR
    os.chmod(temp_dir, 0o755)
    values.update(run_public=f"{public_dir}/public.sock", run_private=f"{private_dir}/private.sock",
                  temp=f"{temp_dir}/temp.sock", elsewhere=os.path.join(victim_dir, "elsewhere.sock"),
                  abstract=f"\0arena-battery-{token}")
    servers = {}
    for name in ("run_public", "run_private", "temp", "elsewhere", "abstract"):
        server = servers[name] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(values[name]), server.listen(4), server.setblocking(False)
        if name != "abstract":
            os.chmod(values[name], 0o666), os.chown(values[name], uid, uid)
    for path in (public_dir, private_dir):
        os.chown(path, uid, uid)
    return servers


@pytest.fixture
def victim_dir(request):
    """A dir outside every private tmp dir (the test makes the trainer's home and files in it)."""
    parents = [p for p in ("/srv", "/opt", "/var/lib", "/mnt", "/home") if os.access(p, os.W_OK)]
    if not parents:
        pytest.skip("no writable dir outside the private tmp dirs")
    path = tempfile.mkdtemp(prefix="arena-sandbox-victim-", dir=parents[0])
    os.chmod(path, 0o755)  # mkdtemp's 0700 would shield the files from any non-root user
    yield path
    shutil.rmtree(path)


@pytest.mark.parametrize("user,mode,disable", CASES,
                         ids=["-".join([u, m, *(f"no_{d}" for d in off)]) for u, m, off in CASES])
def test_attack_battery(user, mode, disable, victim_dir, capsys):
    interpreter, repo = trainer_interpreter(user)
    uid = 0 if user == "root" else 65534
    token = uuid.uuid4().hex
    home = os.path.join(victim_dir, "home")  # the trainer's $HOME, with a 0600 ~/.netrc
    victim = os.path.join(victim_dir, "files")  # the trainer's files elsewhere (results, say)
    os.mkdir(home, 0o700), os.mkdir(victim, 0o755)
    secret, public = os.path.join(victim, "secret.txt"), os.path.join(victim, "public.txt")
    netrc = os.path.join(home, ".netrc")
    for path, content, perms in ((secret, token, 0o600), (public, "public", 0o644), (netrc, token, 0o600)):
        with open(path, "w") as f:
            f.write(content)
        os.chmod(path, perms)
    for path in (home, victim, secret, public, netrc):
        os.chown(path, uid, uid)
    values = {"secret": secret, "public": public, "victim": victim, "netrc": netrc, "token": token,
              "key": int.from_bytes(os.urandom(3), "little") + 1, "secret_env": "env-" + token}
    tcp, udp = socket.socket(socket.AF_INET, socket.SOCK_STREAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    host_dirs_before, servers = sandbox_host_dirs(), {}
    try:
        servers = unix_servers(values, victim_dir, uid)
        tcp.bind(("127.0.0.1", 0)), tcp.listen(4), udp.bind(("127.0.0.1", 0))
        tcp.settimeout(0.1), udp.settimeout(0.1)
        values.update(tcp=tcp.getsockname()[1], udp=udp.getsockname()[1])
        script = TRAINER.format(repo=repo, mode=mode, values=json.dumps(values), disable=disable)
        proc = subprocess.run([interpreter, "-I", "-S", "-c", script], user=uid, group=uid, extra_groups=[],
                              cwd="/", capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": home,
                                   "WANDB_API_KEY": values["secret_env"]})
        results = read_battery(proc.stdout)
        host = host_state(values, tcp, udp, servers, trainer_survived=proc.returncode == 0)
    finally:
        tcp.close(), udp.close(), [server.close() for server in servers.values()]
        remove_leftovers(values, host_dirs_before, interpreter, uid)
    assert "mode_in_force" in results, f"the trainer failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    label = results["mode_in_force"]
    assert not {"landlock", "seccomp", "readonly"} & set(label.split("+")) & set(disable)
    got = verdicts(results, values, host)
    with capsys.disabled():
        print(f"\n{user}/{mode} -> {label}: " + ", ".join(f"{k}={v}" for k, v in got.items()))
    if label.startswith("plain") and user != "root" and not disable:
        assert all(v == "held" for v in got.values())  # the plain mode a non-root user may allow
    assert set(got) == set(ATTACKS)
    broken = [a for a, v in got.items() if v == "BROKEN" and expected_to_hold(label, a)]
    assert broken == [], f"{label}: {broken}"
