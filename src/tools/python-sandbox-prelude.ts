/**
 * The Python prelude the code tool runs before the model's code, in the child process. Under bwrap (the default) the
 * OS sandbox does the containing; the prelude then only drops root to an unprivileged uid and sets the rlimits
 * (RLIMIT_NPROC included). Without bwrap (`sandbox: none`) it is all there is: It narrows what the code
 * can do, best effort (see docs/security.md): this is not a security boundary against hostile code running as root.
 *   1. network: a new, empty network namespace (unshare), else a patched socket module;
 *   2. limits: address space, CPU seconds, file size, open files, no core dumps (resource.setrlimit);
 *   3. processes: fork/exec/spawn entry points raise PermissionError unless allowed (and RLIMIT_NPROC=0 when not root);
 *   4. it asks the kernel to kill it when agentrl dies (PR_SET_PDEATHSIG);
 *   5. it records what it enforced in status.json, then runs the code as __main__, hiding its own frame from tracebacks.
 */
export const PYTHON_PRELUDE = String.raw`
import json, os, sys
_cfg = json.loads(sys.argv[1])
_code_path = sys.argv[2]
_status = {"network": "allowed", "limits": [], "processes": "allowed"}

_bwrap = _cfg.get("sandbox") == "bwrap"

def _fail(message):
    sys.stderr.write("sandbox: " + message + "\n")
    os._exit(126)

# Under bwrap as root: become an unprivileged user before anything else (this also clears every capability).
if _bwrap and _cfg.get("drop_to_uid") is not None:
    try:
        os.setgroups([])
        os.setresgid(_cfg["drop_to_gid"], _cfg["drop_to_gid"], _cfg["drop_to_gid"])
        os.setresuid(_cfg["drop_to_uid"], _cfg["drop_to_uid"], _cfg["drop_to_uid"])
    except OSError as exc:
        _fail("cannot drop to uid %s: %s" % (_cfg["drop_to_uid"], exc))
    with open("/proc/self/status") as _f:
        _caps = [l.split()[1] for l in _f if l.startswith("CapEff:")]
    if os.getuid() == 0 or _caps != ["0000000000000000"]:
        _fail("still privileged after dropping to uid %s" % _cfg["drop_to_uid"])

# Die with agentrl: the child runs in its own process group, so a killed agentrl would otherwise leave it behind.
# (Under bwrap, --die-with-parent does this for the whole PID namespace.)
if not _bwrap:
  try:
    import ctypes, signal
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
  except Exception:
    pass
  if os.getppid() != _cfg["parent_pid"]:
    os._exit(137)  # agentrl died before the death signal was armed

def _unshare_net():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
    if libc.unshare(CLONE_NEWNET) == 0:
        return True
    return libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0

if _bwrap:
    _status["network"] = "allowed" if _cfg["allow_network"] else "namespace"
elif not _cfg["allow_network"]:
    _ok = False
    try:
        _ok = _unshare_net()
    except Exception:
        _ok = False
    if _ok:
        _status["network"] = "namespace"
    else:
        import socket
        def _no_network(*a, **k):
            raise PermissionError("network access is disabled in this sandbox")
        socket.socket.connect = _no_network
        socket.socket.connect_ex = _no_network
        socket.socket.bind = _no_network
        socket.socket.sendto = _no_network
        socket.create_connection = _no_network
        socket.getaddrinfo = _no_network
        _status["network"] = "socket-patch"

import resource
def _limit(name, value):
    try:
        resource.setrlimit(getattr(resource, name), (value, value))
        _status["limits"].append(name)
    except (ValueError, OSError, AttributeError):
        pass

_limit("RLIMIT_AS", _cfg["memory_bytes"])
_limit("RLIMIT_CPU", _cfg["cpu_seconds"])
_limit("RLIMIT_FSIZE", _cfg["file_size_bytes"])
_limit("RLIMIT_NOFILE", 256)
_limit("RLIMIT_CORE", 0)

if _bwrap:
    _limit("RLIMIT_NPROC", _cfg["max_processes"])

if not _cfg["allow_subprocess"]:
    if os.getuid() != 0 and not _bwrap:
        _limit("RLIMIT_NPROC", 0)
    def _no_processes(*a, **k):
        raise PermissionError("creating processes is disabled in this sandbox")
    for _name in ("fork", "forkpty", "system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve",
                  "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle"):
        if hasattr(os, _name):
            setattr(os, _name, _no_processes)
    try:
        import _posixsubprocess
        _posixsubprocess.fork_exec = _no_processes
    except ImportError:
        pass
    _status["processes"] = "blocked"

with open("status.json", "w") as _f:
    json.dump(_status, _f)
    _f.flush()

with open(_code_path, encoding="utf-8") as _f:
    _source = _f.read()
del _cfg, _status, _f
sys.argv = ["<code>"]

def _run():
    import traceback
    _globals = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(_source, "<code>", "exec"), _globals)
    except SystemExit:
        raise
    except BaseException as exc:
        sys.stdout.flush()
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        traceback.print_exception(type(exc), exc, tb)
        sys.exit(1)

_run()
`;
