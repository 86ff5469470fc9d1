"""The attack battery that tests/envs/test_sandbox_modes.py runs in every sandbox mode. No
tests here, and no import beyond the standard library and arena.envs.sandbox: a "trainer"
process started as user nobody with the system python imports this module.

`run_battery` runs each attack through `sandbox.run_code` from the calling (trainer) process
and returns the raw results; `verdicts` turns them plus the host's state into one
"held"/"BROKEN" per attack (docs/sandbox.md, Modes, shows the table).
"""
from __future__ import annotations

import os

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
    # state left for the next call
    "sysv_shm_left": "import ctypes; print('shm', ctypes.CDLL(None).shmget({key}, 4096, 0o1000 | 0o666))",
    "tmp_file_left": "open('/tmp/arena-left-{token}', 'w').write('x'); "
                     "open('/dev/shm/arena-left-{token}', 'w').write('x')",
    # the private /tmp of the namespace modes
    "umount_tmp": "import ctypes; print('umount', ctypes.CDLL(None).umount2(b'/tmp', 2)); "
                  "open('/tmp/arena-escaped-{token}', 'w').write('x')",
    # the trainer's processes: last, so that where they succeed the rest was measured
    "kill_parent": "import os; os.kill(os.getppid(), 9)",
    "kill_everything": "import os; os.kill(-1, 9)",
}
NEXT_CALL = "import os, ctypes; print(ctypes.CDLL(None).shmget({key}, 0, 0), " \
            "os.path.exists('/tmp/arena-left-{token}'), os.path.exists('/dev/shm/arena-left-{token}'))"


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
        sandbox._namespace_options = lambda: [(False, False)]
    if "seccomp" in disable:
        ctypes.util.find_library = lambda name: None

    def emit(name, value):
        print(json.dumps({"name": name, "value": value}), flush=True)

    emit("mode_in_force", sandbox.mode_in_force(mode))
    for name, code in ATTACKS.items():
        if name == "kill_parent":
            emit("next_call", sandbox.run_code(NEXT_CALL.format(**values), mode=mode).__dict__)
        emit(name, sandbox.run_code(code.format(**values), mode=mode, timeout=3.0).__dict__)
    sys.stdout.flush()


def read_battery(stdout: str) -> dict:
    """The lines run_battery printed, as {name: value}."""
    import json

    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"name"')]
    return {line["name"]: line["value"] for line in lines}


def verdicts(results: dict, values: dict, host: dict) -> dict[str, str]:
    """'held' or 'BROKEN' per attack, from the sandbox's outputs and the host's state after."""
    def text(name):
        return results[name]["stdout"] + results[name]["stderr"]

    missing = [name for name in ATTACKS if name not in results] + ["next_call"] * ("next_call" not in results)
    if set(missing) - {"kill_parent", "kill_everything"}:  # a kill attack may end the trainer
        raise AssertionError(f"the trainer died before the battery reached {missing}")

    held = {
        "read_home_netrc": values["token"] not in text("read_home_netrc"),
        "read_secret_file": values["token"] not in text("read_secret_file"),
        "shell_reads_secret_file": values["token"] not in text("shell_reads_secret_file"),
        "write_trainer_dir": "planted" not in host["victim_files"],
        "delete_trainer_file": "public.txt" in host["victim_files"],
        "read_parent_environ": values["secret_env"] not in text("read_parent_environ"),
        "kill_parent": "kill_parent" in results,  # the trainer lived to report it
        "kill_everything": host["trainer_survived"],
        "tcp_localhost": not host["tcp_received"],
        "udp_localhost": not host["udp_received"],
        "sysv_shm_left": not host["shm_key_on_host"] and results["next_call"]["stdout"].startswith("-1 "),
        "tmp_file_left": not host["tmp_left_on_host"] and "True" not in results["next_call"]["stdout"],
        "umount_tmp": "umount -1" in text("umount_tmp") and not host["escaped_on_host"],
    }
    verdict = {name: "held" if ok else "BROKEN" for name, ok in held.items()}
    if "kill_parent" in missing:  # the trainer died in kill_parent: kill_everything never ran
        verdict["kill_everything"] = "not run"
    return verdict


def host_state(values: dict, tcp_server, udp_server, trainer_survived: bool) -> dict:
    """What the host sees after the battery (servers: listening sockets with a short timeout)."""
    import socket

    try:
        tcp_server.accept()
        tcp_received = True
    except socket.timeout:
        tcp_received = False
    try:
        udp_server.recvfrom(16)
        udp_received = True
    except socket.timeout:
        udp_received = False
    with open("/proc/sysvipc/shm") as f:
        keys = {int(line.split()[0]) for line in list(f)[1:]}
    token = values["token"]
    return {
        "victim_files": sorted(os.listdir(values["victim"])),
        "trainer_survived": trainer_survived,
        "tcp_received": tcp_received,
        "udp_received": udp_received,
        "shm_key_on_host": values["key"] in keys,
        "tmp_left_on_host": any(os.path.exists(p) for p in (f"/tmp/arena-left-{token}",
                                                            f"/dev/shm/arena-left-{token}")),
        "escaped_on_host": os.path.exists(f"/tmp/arena-escaped-{token}"),
    }
