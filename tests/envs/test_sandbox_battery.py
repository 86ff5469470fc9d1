"""The attack battery that tests/envs/test_sandbox_modes.py runs in every sandbox mode. No
tests here, and no import beyond the standard library and arena.envs.sandbox: a "trainer"
process started as user nobody with the system python imports this module.

`run_battery` runs each attack through `sandbox.run_code` from the calling (trainer) process
and returns the raw results; `verdicts` turns them plus the host's state into one
"held"/"BROKEN" per attack (docs/sandbox.md, Modes, shows the table).
"""
from __future__ import annotations

import os

UNIX_CONNECT = ("import sys\nfor m in ('socket', '_socket'): sys.modules.pop(m, None)\nimport socket\n"
                "for path in {paths}:\n    try:\n        s = socket.socket(socket.AF_UNIX)\n"
                "        s.connect(path); s.sendall(b'x'); print('connected', repr(path))\n"
                "    except OSError as e:\n        print(repr(path), e)")
# socket(family | 1 << 32, ...) through the raw syscall: the kernel reads the family as a
# 32-bit int, so a filter that compares all 64 bits lets it through (docs/sandbox.md, Layers)
RAW_SOCKET = ("import ctypes, os, sys\nfor m in ('socket', '_socket'): sys.modules.pop(m, None)\nimport socket\n"
              "libc = ctypes.CDLL(None, use_errno=True)\nnr = {{'x86_64': 41, 'aarch64': 198}}[os.uname().machine]\n"
              "def raw(family, kind):\n    fd = libc.syscall(nr, ctypes.c_long(family | 1 << 32), ctypes.c_long(kind), 0)\n"
              "    print('socket', family, fd, os.strerror(ctypes.get_errno()) if fd < 0 else '')\n"
              "    return socket.socket(fileno=fd) if fd >= 0 else None\n")
UNIX_CONNECT_HIGH_BITS = RAW_SOCKET + (
    "for path in {paths}:\n    s = raw(socket.AF_UNIX, socket.SOCK_STREAM)\n    if s:\n        try:\n"
    "            s.connect(path); s.sendall(b'h'); print('connected', repr(path))\n"
    "        except OSError as e:\n            print(repr(path), e)")
ATTACKS = {
    # the trainer's own files: its ~/.netrc (0600), and a 0600 secret and a 0644 file in a dir
    # outside every tmp dir and outside its home
    "read_home_netrc": "print(open({netrc!r}).read())",
    "read_secret_file": "print(open({secret!r}).read())",
    "shell_reads_secret_file": "import os; os.system('cat {secret}')",
    "write_trainer_dir": "open({victim!r} + '/planted', 'w').write('x')",
    "delete_trainer_file": "import os; os.remove({public!r})",
    "read_parent_environ": "import os; print(open(f'/proc/{{os.getppid()}}/environ').read())",
    # the network: a TCP and a UDP service on the loopback, past the plain mode's socket guard
    "tcp_localhost": "import sys\nfor m in ('socket', '_socket'): sys.modules.pop(m, None)\n"
                     "import socket; socket.create_connection(('127.0.0.1', {tcp}), timeout=2).sendall(b'x')",
    "udp_localhost": "import sys\nfor m in ('socket', '_socket'): sys.modules.pop(m, None)\n"
                     "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                     ".sendto(b'x', ('127.0.0.1', {udp}))",
    # host unix sockets: the trainer's under /run (a 0666 one, like root's in /run, and one in
    # its own 0700 dir, like /run/user/<uid> with the D-Bus session bus) and in a temp dir, a
    # 0666 one outside every tmp dir, and an abstract one
    "unix_socket_run": UNIX_CONNECT.format(paths="[{run_public!r}, {run_private!r}, {temp!r}]"),
    "unix_socket_elsewhere": UNIX_CONNECT.format(paths="[{elsewhere!r}, {abstract!r}]"),
    # the same sockets, and the loopback services, with the family's high 32 bits set; a vsock
    # socket (the hypervisor, which no network namespace covers) the same way
    "unix_high_bits_run": UNIX_CONNECT_HIGH_BITS.replace("{paths}", "[{run_public!r}, {run_private!r}, {temp!r}]"),
    "unix_high_bits_elsewhere": UNIX_CONNECT_HIGH_BITS.replace("{paths}", "[{elsewhere!r}, {abstract!r}]"),
    "inet_high_bits": RAW_SOCKET + "s = raw(socket.AF_INET, socket.SOCK_DGRAM)\n"
                      "if s: print('udp', s.sendto(b'h', ('127.0.0.1', {udp})))\n"
                      "s = raw(socket.AF_INET, socket.SOCK_STREAM)\n"
                      "if s: s.settimeout(2); s.connect(('127.0.0.1', {tcp})); s.sendall(b'h'); print('tcp sent')",
    "vsock_high_bits": RAW_SOCKET + "print('vsock made' if raw(40, socket.SOCK_STREAM) else 'vsock refused')",
    # state left for the next call
    "keyring_left": "import ctypes, os\nnr = {{'x86_64': 248, 'aarch64': 217}}[os.uname().machine]\n"
                    "print('add_key', [ctypes.CDLL(None).syscall(nr, b'user', b'arena-{token}', b'x', 1, "
                    "ctypes.c_long(ring)) for ring in (-4, -3)])",  # the user and the session keyring
    "mqueue_left": "import ctypes; print('mq', ctypes.CDLL(None).mq_open(b'/arena-{token}', 0o102, 0o666, None))",
    "sticky_subdir_file_left": "open({sticky!r} + '/arena-left-{token}', 'w').write('x')",
    "sysv_shm_left": "import ctypes; print('shm', ctypes.CDLL(None).shmget({key}, 4096, 0o1000 | 0o666))",
    "tmp_file_left": "open('/tmp/arena-left-{token}', 'w').write('x'); "
                     "open('/dev/shm/arena-left-{token}', 'w').write('x')",
    # the private /tmp of the namespace modes
    "umount_tmp": "import ctypes; print('umount', ctypes.CDLL(None).umount2(b'/tmp', 2)); "
                  "open('/tmp/arena-escaped-{token}', 'w').write('x')",
    # fill the host's disk: 64 MiB into the temp dir, against an 8 MiB cap (CALL_OPTIONS)
    "flood_host_tmp": "import os, time\nfor i in range(64):\n    open(os.environ['TMPDIR'] + f'/f{{i}}', 'wb')"
                      ".write(b'x' * (1 << 20)); time.sleep(0.005)\nprint('wrote all')",
    # the trainer's processes: last, so that where they succeed the rest was measured
    "kill_parent": "import os; os.kill(os.getppid(), 9)",
    "kill_everything": "import os; os.kill(-1, 9)",
}
CALL_OPTIONS = {"flood_host_tmp": {"tmpfs_mb": 8}}
# what the attacks above left, as seen by the next call: shm id, files, keys found
# (keyctl(KEYCTL_SEARCH, ring, "user", name, 0)), message queue (mq_open(name, O_RDONLY))
NEXT_CALL = """
import ctypes, json, os
libc = ctypes.CDLL(None)
nr = {{'x86_64': 250, 'aarch64': 219}}[os.uname().machine]
print(json.dumps({{"shm": libc.shmget({key}, 0, 0),
    "files": [os.path.exists(p) for p in ('/tmp/arena-left-{token}', '/dev/shm/arena-left-{token}',
                                          {sticky!r} + '/arena-left-{token}')],
    "keys": [libc.syscall(nr, 10, ctypes.c_long(ring), b'user', b'arena-{token}', 0) for ring in (-4, -3)],
    "mq": libc.mq_open(b'/arena-{token}', 0)}}))
"""


def run_battery(mode: str, values: dict, disable: tuple = ()) -> None:
    """Print one JSON line per attack (flushed: a killed trainer keeps what it printed), the
    clean call that looks for what they left just before the kills. `disable` names layers
    ("landlock", "seccomp", "readonly") to leave out, to measure what the mode holds without them."""
    import ctypes.util
    import json
    import sys

    from arena.envs import sandbox

    if "landlock" in disable:
        sandbox.landlock_abi = lambda: 0
    if "readonly" in disable:
        sandbox._namespace_options = lambda seccomp=(False,): [(False, s) for s in seccomp]
    if "seccomp" in disable:
        ctypes.util.find_library = lambda name: None

    def emit(name, value):
        print(json.dumps({"name": name, "value": value}), flush=True)

    emit("mode_in_force", sandbox.mode_in_force(mode))
    for name, code in ATTACKS.items():
        if name == "kill_parent":
            emit("next_call", sandbox.run_code(NEXT_CALL.format(**values), mode=mode).__dict__)
        emit(name, sandbox.run_code(code.format(**values), mode=mode, timeout=3.0,
                                    **CALL_OPTIONS.get(name, {})).__dict__)
    sys.stdout.flush()


def read_battery(stdout: str) -> dict:
    """The lines run_battery printed, as {name: value}."""
    import json

    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"name"')]
    return {line["name"]: line["value"] for line in lines}


def verdicts(results: dict, values: dict, host: dict) -> dict[str, str]:
    """'held' or 'BROKEN' per attack, from the sandbox's outputs and the host's state after."""
    import json

    def text(name):
        return results[name]["stdout"] + results[name]["stderr"]

    missing = [name for name in ATTACKS if name not in results] + ["next_call"] * ("next_call" not in results)
    if set(missing) - {"kill_parent", "kill_everything"}:  # a kill attack may end the trainer
        raise AssertionError(f"the trainer died before the battery reached {missing}")
    next_call = json.loads(results["next_call"]["stdout"])

    held = {
        "read_home_netrc": values["token"] not in text("read_home_netrc"),
        "read_secret_file": values["token"] not in text("read_secret_file"),
        "shell_reads_secret_file": values["token"] not in text("shell_reads_secret_file"),
        "write_trainer_dir": "planted" not in host["victim_files"],
        "delete_trainer_file": "public.txt" in host["victim_files"],
        "read_parent_environ": values["secret_env"] not in text("read_parent_environ"),
        "kill_parent": "kill_parent" in results,  # the trainer lived to report it
        "kill_everything": host["trainer_survived"],
        "tcp_localhost": b"x" not in host["tcp_received"],
        "udp_localhost": b"x" not in host["udp_received"],
        "unix_socket_run": not any(b"x" in host["unix_received"][k] for k in ("run_public", "run_private", "temp")),
        "unix_socket_elsewhere": not any(b"x" in host["unix_received"][k] for k in ("elsewhere", "abstract")),
        "unix_high_bits_run": not any(b"h" in host["unix_received"][k] for k in ("run_public", "run_private", "temp")),
        "unix_high_bits_elsewhere": not any(b"h" in host["unix_received"][k] for k in ("elsewhere", "abstract")),
        "inet_high_bits": b"h" not in host["tcp_received"] | host["udp_received"],
        "vsock_high_bits": "vsock made" not in text("vsock_high_bits"),
        "keyring_left": next_call["keys"] == [-1, -1],
        "mqueue_left": next_call["mq"] == -1 and not host["mq_on_host"],
        "sticky_subdir_file_left": not host["sticky_left_on_host"] and not next_call["files"][2],
        "sysv_shm_left": not host["shm_key_on_host"] and next_call["shm"] == -1,
        "tmp_file_left": not host["tmp_left_on_host"] and not any(next_call["files"][:2]),
        "flood_host_tmp": "wrote all" not in text("flood_host_tmp"),
        "umount_tmp": "umount -1" in text("umount_tmp") and not host["escaped_on_host"],
    }
    verdict = {name: "held" if ok else "BROKEN" for name, ok in held.items()}
    if "kill_parent" in missing:  # the trainer died in kill_parent: kill_everything never ran
        verdict["kill_everything"] = "not run"
    return verdict


def host_state(values: dict, tcp_server, udp_server, unix_servers: dict, trainer_survived: bool) -> dict:
    """What the host sees after the battery (servers: listening sockets with a short timeout;
    `unix_servers`: {name: listening unix socket}, where a connection made is already queued).
    Each server's entry is the set of payloads that reached it: b"x" from the plain attacks,
    b"h" from the high-bit ones."""
    import ctypes
    import socket

    def accepted(server) -> set:
        payloads = set()
        while True:
            try:
                connection, _ = server.accept()
            except (socket.timeout, BlockingIOError):
                return payloads
            with connection:
                connection.settimeout(0.1)
                try:
                    payloads.add(connection.recv(16))
                except (socket.timeout, OSError):
                    payloads.add(b"")

    def datagrams(server) -> set:
        payloads = set()
        while True:
            try:
                payloads.add(server.recvfrom(16)[0])
            except (socket.timeout, BlockingIOError):
                return payloads

    with open("/proc/sysvipc/shm") as f:
        keys = {int(line.split()[0]) for line in list(f)[1:]}
    token = values["token"]
    mq = ctypes.CDLL(None).mq_open(f"/arena-{token}".encode(), 0)  # O_RDONLY: does it exist?
    if mq >= 0:
        os.close(mq)
    return {
        "victim_files": sorted(os.listdir(values["victim"])),
        "trainer_survived": trainer_survived,
        "tcp_received": accepted(tcp_server),
        "udp_received": datagrams(udp_server),
        "unix_received": {name: accepted(s) for name, s in unix_servers.items()},
        "shm_key_on_host": values["key"] in keys,
        "tmp_left_on_host": any(os.path.exists(p) for p in (f"/tmp/arena-left-{token}",
                                                            f"/dev/shm/arena-left-{token}")),
        "sticky_left_on_host": os.path.exists(f"{values['sticky']}/arena-left-{token}"),
        "mq_on_host": mq >= 0,
        "escaped_on_host": os.path.exists(f"/tmp/arena-escaped-{token}"),
    }
