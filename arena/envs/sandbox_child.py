"""The first code of a sandboxed call: runs in the fresh `python -I -S` interpreter (as root
when arena runs as root, as the caller mapped to root under user namespaces), sets up the
isolation, drops privileges, then runs the tool code. Standard library only (the interpreter
has no site-packages). The parent passes this file's source with `-c`, never imports it.

Order: read the code; cap SysV IPC in the private IPC namespace; under namespaces, every
mount read-only, then the private tmpfs dirs (/run, /tmp, ...) and an empty one over the
caller's home and runtime dir (unless the interpreter lives there); a session keyring of its
own; make the work dir; rlimits; drop to the sandbox uid; PR_SET_NO_NEW_PRIVS; under user
namespaces, a nested user namespace; Landlock (filesystem, TCP, signals, abstract unix
sockets); seccomp (no unix sockets, no keyring; plain mode also no inet sockets, SysV IPC or
message queues); clear the environment; run the code. A layer the parent asked for
that cannot be applied ends the call with exit status 121 before any tool code runs.
docs/sandbox.md, "Layers", describes what each layer stops.
"""
import ctypes
import json
import os
import resource
import struct
import sys

SETUP_FAILED = 121  # exit status: a requested layer could not be applied (no tool code ran)

# Landlock syscall numbers (the same on every architecture) and flags (linux/landlock.h)
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION, RULE_PATH_BENEATH = 1, 1
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ABI1 = (1 << 13) - 1  # execute .. make_sym: the 13 rights of ABI 1
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2  # ABI 6
READ_ONLY_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")

# seccomp (libseccomp): SCMP_ACT_ALLOW, SCMP_ACT_ERRNO(EACCES)
ACT_ALLOW, ACT_EACCES = 0x7FFF0000, 0x00050000 | 13


def fail(message):
    sys.stderr.write("sandbox setup: " + message + "\n")
    sys.stderr.flush()
    os._exit(SETUP_FAILED)


def landlock_abi(libc):
    abi = libc.syscall(SYS_CREATE_RULESET, None, 0, CREATE_RULESET_VERSION)
    return max(abi, 0)


def landlock(libc, read_dirs, write_dirs, proc_readable):
    """Restrict this process and its children: read (and execute) only `read_dirs`, write
    only `write_dirs`; no TCP bind/connect (ABI >= 4); no signal to, and no abstract unix
    socket of, any process outside the sandbox (ABI >= 6). Ptrace of (and so /proc/PID/environ
    of) processes outside the sandbox is refused by every ABI. Returns the ABI used."""
    abi = landlock_abi(libc)
    if abi < 1:
        fail("Landlock is not available")
    fs = FS_ABI1 | (FS_REFER if abi >= 2 else 0) | (FS_TRUNCATE if abi >= 3 else 0) \
        | (FS_IOCTL_DEV if abi >= 5 else 0)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0
    # struct landlock_ruleset_attr {u64 handled_access_fs, handled_access_net, scoped}: the
    # kernel accepts the prefix its ABI knows
    attr = struct.pack("=QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = libc.syscall(SYS_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        fail("landlock_create_ruleset failed, errno %d" % ctypes.get_errno())
    file_rights = FS_READ_FILE | FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    reads = [(p, FS_EXECUTE | FS_READ_FILE | FS_READ_DIR) for p in read_dirs]
    if proc_readable:  # a private /proc of the sandbox's own pid namespace
        reads.append(("/proc", FS_READ_FILE | FS_READ_DIR))
    rules = reads + [(p, fs) for p in write_dirs] + [(d, file_rights) for d in DEVICES]
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # absent on this machine: nothing to allow
        if not os.path.isdir(path):
            rights &= file_rights | FS_EXECUTE
        # struct landlock_path_beneath_attr {u64 allowed_access; s32 parent_fd} (packed)
        rule = struct.pack("=Qi", rights, fd)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, rule, 0) != 0:
            fail("landlock_add_rule %s failed, errno %d" % (path, ctypes.get_errno()))
        os.close(fd)
    if libc.syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
        fail("landlock_restrict_self failed, errno %d" % ctypes.get_errno())
    os.close(ruleset)
    return abi


class ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def seccomp(rules):
    """Each rule [syscall name, [[arg index, libseccomp comparison, a, b], ...]] makes that
    call fail with EACCES when every comparison holds (the parent builds the list: no unix
    or vsock sockets, no datagram socketpair, no kernel keyring, no io_uring; plain mode also
    no inet/packet sockets, SysV IPC or POSIX message queues); everything else is allowed."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        fail("libseccomp.so.2 not found")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(ACT_ALLOW)
    for name, comparisons in rules:
        cmps = [ArgCmp(*c) for c in comparisons]
        number = lib.seccomp_syscall_resolve_name(name.encode())
        array = (ArgCmp * max(len(cmps), 1))(*cmps)
        if number < 0 or lib.seccomp_rule_add_array(ctx, ACT_EACCES, number, len(cmps), array) != 0:
            fail("seccomp rule for " + name)
    if lib.seccomp_load(ctypes.c_void_p(ctx)) != 0:
        fail("seccomp_load failed")


def own_session_keyring(libc, keyctl):
    """A fresh, empty session keyring for this call (keyctl(KEYCTL_JOIN_SESSION_KEYRING,
    NULL); `keyctl`: the syscall's number here) in place of the trainer's, which the code
    would otherwise possess. Where the kernel or a container refuses keyctl, the tool code
    cannot use it either."""
    if keyctl is not None:
        libc.syscall(keyctl, 1, None)


def read_only_mounts(libc):
    """Every mount of this (private) mount namespace read-only and nosuid: one
    mount_setattr(AT_FDCWD, "/", AT_RECURSIVE, {attr_set: RDONLY|NOSUID}). The private tmpfs
    dirs are mounted afterwards, writable; device nodes (/dev/null) stay writable."""
    # struct mount_attr {u64 attr_set, attr_clr, propagation, userns_fd}
    attr = struct.pack("=QQQQ", 1 | 2, 0, 0, 0)
    if libc.syscall(442, -100, b"/", 0x8000, attr, len(attr)) != 0:
        fail("mount_setattr(/, read-only) failed, errno %d" % ctypes.get_errno())


def write_sysctl(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def main(cfg):
    with open(cfg["code_path"], encoding="utf-8") as f:
        code = f.read()
    libc = ctypes.CDLL(None, use_errno=True)
    if cfg["ipc_namespace"]:
        # the private IPC namespace starts with no objects and dies with the call; cap its
        # SysV shared memory at the memory limit: shmall in pages, shmmax in bytes
        memory = cfg["rlimits"]["RLIMIT_AS"][0]
        write_sysctl("/proc/sys/kernel/shmall", memory // os.sysconf("SC_PAGE_SIZE"))
        write_sysctl("/proc/sys/kernel/shmmax", memory)
    if cfg["read_only_root"]:
        read_only_mounts(libc)
    for target in cfg["tmpfs"] + cfg["hidden_dirs"]:  # MS_NOSUID | MS_NODEV
        if os.path.isdir(target) and libc.mount(b"tmpfs", target.encode(), b"tmpfs", 2 | 4,
                                                cfg["tmpfs_options"].encode()) != 0:
            fail("cannot mount tmpfs on %s, errno %d" % (target, ctypes.get_errno()))
    for hidden in cfg["hidden_dirs"]:  # an empty, read-only dir in place of the caller's home
        if os.path.isdir(hidden) and libc.mount(None, hidden.encode(), None, 32 | 1 | 2 | 4, None) != 0:
            fail("cannot make %s read-only, errno %d" % (hidden, ctypes.get_errno()))  # REMOUNT|RDONLY
    own_session_keyring(libc, cfg["keyctl_syscall"])
    work, uid = cfg["work_dir"], cfg["uid"]
    os.makedirs(work, exist_ok=True)
    if uid is not None:
        os.chown(work, uid, uid)
    os.chmod(work, 0o700)
    os.chdir(work)
    for name, limits in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), tuple(limits))
    if uid is not None:  # groups first: after setuid the process may not change them
        os.setgroups([]), os.setgid(uid), os.setuid(uid)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: no setuid gains; Landlock needs it
        fail("PR_SET_NO_NEW_PRIVS failed")
    if cfg["nest_user_namespace"] and libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        # the mount namespace stays owned by the outer user namespace: the code is no longer
        # root over it and cannot unmount the private /tmp (Landlock forbids that too)
        fail("cannot enter a nested user namespace, errno %d" % ctypes.get_errno())
    if cfg["landlock"]:
        prefixes = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
        landlock(libc, [*READ_ONLY_DIRS, *sorted(prefixes)], [work, *cfg["tmpfs"]],
                 proc_readable=cfg["private_proc"])
    if cfg["seccomp"]:
        seccomp(cfg["seccomp"])
    os.environ.clear()
    os.environ.update(HOME=work, TMPDIR=work, PATH="/usr/bin:/bin", LANG="C.UTF-8")
    sys.argv = ["main.py"]
    if cfg["socket_guard"]:
        for mod in ("socket", "_socket", "ssl", "_ssl"):
            sys.modules[mod] = None
    run_tool_code(code)


def run_tool_code(code):
    import linecache
    linecache.cache["<tool>"] = (len(code), None, code.splitlines(True), "<tool>")
    try:
        exec(compile(code, "<tool>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 (the tool's error is its result)
        import traceback
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        raise SystemExit(1)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
