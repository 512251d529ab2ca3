"""The processes that run one submission, sandboxed, and stream what happened to the grader.

Each notebook gets a chain: a process forked from the grader (which has imported torch once), in a new empty
temporary folder that is its working directory, ``HOME`` and ``TMPDIR``, with one thread, a file-size limit and
stdin closed. The chain runs only the reference's cells; each task's answer and check run in a process of their own
forked from it (:func:`_run_chain`), on the reference's earlier pieces, with the task's references disabled for good
before any of the student's code runs, a limit on CPU time and on the clock, and an audit hook
(:func:`sys.addaudithook`) that refuses reading the solutions folder or the other submissions, writing, deleting or
renaming anything outside its folder, starting processes and opening network connections. Where fork is unavailable,
a fresh ``python -m minirl.classroom.sandbox worker`` runs the whole notebook in one process, the student's answers in
order, with a time limit for the whole notebook. The records of progress (each step started and ended, what each
checker recorded, each refused operation) go to a file outside the folder, so a notebook that loops, crashes or
kills its own process still gets a row per task saying what happened, and every other notebook is graded as usual.
Scheduling the children and turning their records into grades: :mod:`minirl.classroom.grader`.

The audit hook is a tripwire against mistakes and casual tampering, not a security boundary: Python code that sets
out to subvert the process it runs in (``ctypes``, walking the garbage collector) can. The boundary is the operating
system's, where it offers one (:func:`isolate`: on Linux, user, mount and network namespaces made by the chain
before any student code runs, and a PID namespace per task), and the grader's: a task's process records what the
answer returns as plain data (``checks.encode``) and the grader judges it in its own process (``grader.judge``), so
nothing a child writes, patches or exits with becomes a verdict.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import tempfile
from pathlib import Path

OUTPUT_LIMIT = 4000         # characters of a cell's output kept for messages
FILE_SIZE_LIMIT = 64 << 20  # bytes: a submission cannot fill the disk
from .layout import WARM  # noqa: E402 - the reference sweeps of the experiment tasks, by notebook


def warm(notebooks: set[str]) -> None:
    """Compute the reference sweeps of the notebooks to grade once, in the grader, before forking: every child
    inherits them (each would otherwise recompute them, about a second of CPU per notebook)."""
    import importlib

    import torch

    from . import agent_checks
    torch.set_num_threads(1)
    for name in sorted(notebooks & set(WARM)):
        key, module, function = WARM[name]
        agent_checks._cached(key, getattr(importlib.import_module(f"{__package__}.{module}"), function))
    if "06_project" in notebooks:  # its dataset, cached on disk here (an isolated child cannot write it), and loaded
        from .. import datasets
        from . import project_checks
        datasets.load_dataset(project_checks.DATASET, progress=False)
        project_checks.project_data()
    if "05_comparison" in notebooks:
        from . import comparison_checks
        comparison_checks._record_runs()
    from . import course
    active = course.current()  # a course folder's own warm-up entries (course.toml: exercises.<name>.warm)
    for name in sorted(notebooks & set(active.exercises) if active else ()):
        modules = {m.__name__.rsplit(".", 1)[1]: m for m in active.modules}
        for key, (module, function) in active.exercises[name].warm.items():
            agent_checks._cached(key, getattr(modules[module], function))


def preload() -> None:
    """Import what every notebook needs once, in the grader, before forking (saves ~3 s per notebook)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401 - what torch's first optimizer imports (about 1 s of CPU in every child)
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401

    from .. import bcq, cql, discrete, iql, nets, plots, stitching, tabular  # noqa: F401
    _checker_modules()
    # every module of minirl (an isolated child cannot read their sources: sandbox.isolate)
    import importlib
    import pkgutil

    import minirl
    for info in pkgutil.walk_packages(minirl.__path__, "minirl."):
        if info.name.rsplit(".", 1)[-1] not in ("__main__", "cli"):
            with contextlib.suppress(Exception):
                importlib.import_module(info.name)


def _checker_modules() -> list:
    """The classroom's checker modules (:data:`minirl.classroom.CHECKER_MODULES`), imported, then those of the course
    folder in ``$MINIRL_COURSE`` if one is set (:mod:`minirl.classroom.course`)."""
    import importlib

    from . import CHECKER_MODULES, course
    active = course.current()
    return [importlib.import_module(f"{__package__}.{m}") for m in CHECKER_MODULES] + (active.modules if active else [])


# ---------------------------------------------------------------------------------------------------------------
# Isolation by the operating system (Linux): namespaces made by the forked child itself
# ---------------------------------------------------------------------------------------------------------------
# The child, still single-threaded after fork, calls unshare(2) for a user, mount and network namespace of its own;
# in it, it mounts empty read-only tmpfs over every hidden folder (the solutions, the class's folder, the repository's
# tests, scripts and git history, the grader's temporary folders), an empty file over every hidden file (the book's
# exercises page, minirl's sources and byte code: everything was imported before the fork), makes every other mount
# read-only except its own folder, and then drops all its capabilities, so it can neither unmount what hides the
# files nor mount anything (a namespace it makes next locks the mounts it inherits). No network device but a down
# loopback. The grader itself is made non-dumpable, so the child (same user, no capability in the grader's namespace)
# cannot ptrace it or read its memory. Where the kernel refuses (no user namespaces), the grader says so.

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
_MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}


def _libc():
    import ctypes
    import ctypes.util
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(libc, source, target, fstype, flags, data=None) -> None:
    enc = lambda x: None if x is None else os.fsencode(x)  # noqa: E731
    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _mount_points() -> list[tuple[str, int]]:
    """``(mount point, its flags)`` of every mount, parents before children (``/proc/self/mountinfo``)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")  # \040 for a space
        flags = 0
        for opt in fields[5].split(","):
            flags |= _MOUNT_FLAGS.get(opt, 0)
        out.append((point, flags))
    return sorted(out, key=lambda p: p[0].count("/") if p[0] != "/" else 0)


def isolation_problem() -> str | None:
    """``None`` if this machine can isolate a child (a user and mount namespace made by an unprivileged process),
    else why not; tried in a throw-away child process."""
    if not sys.platform.startswith("linux"):
        return f"no OS isolation on {sys.platform}: only the audit hook guards the files"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            libc = _libc()
            _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET), "unshare")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return ("no OS isolation: this kernel refuses unprivileged user namespaces (e.g. kernel.unprivileged_userns_clone "
            "= 0, or AppArmor's restrict_unprivileged_userns on Ubuntu 24.04): only the audit hook guards the files")


def isolate(work: str, hidden: list[str], temp_root: str, drop: bool = True) -> None:
    """Enter namespaces where only ``work`` is writable and ``hidden`` (folders or files) and everything under
    ``temp_root`` but ``work`` are not readable; then (``drop``) drop every capability (:func:`drop_capabilities`:
    without, the caller keeps them in its own namespaces, to make PID namespaces, and must drop them before any
    untrusted code runs). Raises ``OSError`` if the kernel refuses."""
    libc = _libc()
    work, temp_root = os.path.realpath(work), os.path.realpath(temp_root)
    uid, gid = os.getuid(), os.getgid()
    PR_SET_DUMPABLE = 4
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the grader is not (make_undumpable); its child must be, to map its ids
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the grader's mounts
    points = _mount_points()
    empty = os.path.join(work, ".minirl-empty")  # an empty file to mount over hidden files (removed below)
    Path(empty).write_bytes(b"")
    for path in sorted(set(hidden)):
        if os.path.isdir(path):
            _mount(libc, "tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=000")
        elif os.path.exists(path):
            _mount(libc, empty, path, None, MS_BIND)
            _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    # the temporary root (other students' folders, the grader's records): an empty tmpfs, with this work folder
    # bound back at its own path
    wfd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    _mount(libc, "tmpfs", temp_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
    os.makedirs(work, exist_ok=True)
    _mount(libc, f"/proc/self/fd/{wfd}", work, None, MS_BIND)
    os.close(wfd)
    os.remove(empty)
    # everything read-only but the work folder (the flags a mount has are kept: a user namespace may not clear them)
    for point, flags in points:
        if point == work or point.startswith(work.rstrip("/") + "/") or not os.path.exists(point):
            continue
        try:
            _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            if point == "/":
                raise
    _mount(libc, None, temp_root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if drop:
        drop_capabilities()


def drop_capabilities() -> None:
    """No capability left: the mounts of :func:`isolate` cannot be undone, no new privilege gained by exec, no
    namespace made. Raises ``OSError`` if the kernel refuses."""
    import ctypes
    libc = _libc()
    PR_SET_NO_NEW_PRIVS = 38
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    _check(libc.capset(ctypes.byref(Header(0x20080522, 0)), data), "capset")


def make_undumpable() -> None:
    """The grader: no process of its user without a capability in its namespace (a child) may ptrace it or read
    its memory."""
    if sys.platform.startswith("linux"):
        PR_SET_DUMPABLE = 4
        _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def hidden_paths(forbidden: list[str]) -> list[str]:
    """What a child must not read: the ``forbidden`` folders (the solutions, the class's folder), the exercises'
    folder (sample submissions, student copies), the repository's tests, scripts, git history and the book's
    exercises page (it holds the solutions), minirl's own sources and byte code (imported before the fork), and the
    whole course folder in ``$MINIRL_COURSE`` if one is set (its reference notebooks and checker modules)."""
    from . import course
    from .release import BOOK_PAGE, EXERCISES, REPO
    package = Path(__file__).resolve().parents[1]
    out = [str(Path(f).resolve()) for f in forbidden] + [str(EXERCISES), str(BOOK_PAGE)]
    active = course.current()
    if active:
        out.append(str(active.folder))
    out += [str(REPO / name) for name in (".git", "tests", "scripts", "benchmarks", "experiments")]
    for f in package.rglob("*"):
        if f.name == "__pycache__" and f.is_dir():
            out.append(str(f))
        elif f.suffix in (".py", ".pyc") and "__pycache__" not in f.parts:
            out.append(str(f))
    return [p for p in out if os.path.exists(p)]


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class _Sandbox:
    """The audit hook of a child: refuses reads of ``forbidden`` folders, writes outside ``work``, processes and
    network connections; each refusal is reported through ``report`` and raised as ``PermissionError``."""

    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    PATH_EVENTS = {"os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.symlink": (1,),
                   "os.link": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
                   "shutil.rmtree": (0,), "os.chdir": ()}
    PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                      "os.forkpty", "os.killpg", "socket.connect", "socket.bind", "pty.spawn")

    def __init__(self, work: str, forbidden: list[str], report):
        self.work = os.path.realpath(work)
        self.forbidden = [os.path.realpath(f) for f in forbidden]
        self.report = report
        self.busy = False

    def _path(self, p) -> str | None:
        if isinstance(p, int) or p is None:
            return None
        try:
            p = os.fsdecode(os.fspath(p))
        except TypeError:
            return None
        return os.path.realpath(p)

    def refuse(self, what: str, detail: str):
        self.report({"type": "violation", "what": what, "detail": detail})
        raise PermissionError(f"minirl grader: {what} is not allowed during grading ({detail})")

    def __call__(self, event: str, args: tuple) -> None:
        if self.busy:
            return
        self.busy = True
        try:
            self._check(event, args)
        finally:
            self.busy = False

    def _check(self, event: str, args: tuple) -> None:
        if event == "open":
            path = self._path(args[0])
            if path is None:
                return
            mode, flags = args[1], args[2] if len(args) > 2 else 0
            writing = (isinstance(mode, str) and any(ch in mode for ch in "wax+")) or bool((flags or 0) & self.WRITE_FLAGS)
            if _under(path, self.forbidden):
                self.refuse("reading the solutions or other submissions", path)
            if writing and not (_under(path, [self.work]) or path == os.devnull):
                self.refuse("writing outside the submission's folder", path)
        elif event in self.PATH_EVENTS:
            for k in self.PATH_EVENTS[event]:
                path = self._path(args[k]) if k < len(args) else None
                if path is not None and not _under(path, [self.work]):
                    self.refuse(f"{event} outside the submission's folder", path)
            if event == "os.chdir":
                path = self._path(args[0])
                if path is not None and _under(path, self.forbidden):
                    self.refuse("entering the solutions or other submissions", path)
        elif event in ("os.listdir", "os.scandir", "glob.glob"):
            path = self._path(args[0]) if args else None
            if path is not None and _under(path, self.forbidden):
                self.refuse("listing the solutions or other submissions", path)
        elif event == "os.kill":
            if args and args[0] not in (os.getpid(), 0):
                self.refuse("signalling another process", f"pid {args[0]}")
        elif event in self.PROCESS_EVENTS:
            self.refuse("starting processes or opening connections", event)


def run_child(steps: list[dict], work: str, result_path: str, forbidden: list[str], time_limit: float,
              hidden: list[str] | None = None, temp_root: str | None = None, ref_fd: int | None = None) -> None:
    """Run ``steps`` in this (child) process; progress goes to ``result_path`` as JSON lines. With ``hidden``, first
    isolate the process (:func:`isolate`: those paths and ``temp_root`` but ``work`` unreadable, only ``work``
    writable); a failure to isolate stops the child. With ``ref_fd`` (the pipe the grader sends the reference's
    answers through), each task runs in a process of its own (:func:`_run_chain`), else the whole notebook in this one.
    Never returns into the caller's code: the caller exits right after."""
    if os.getsid(0) != os.getpid():
        os.setsid()  # its own process group: the grader kills the group at the time limit (spawned: already one)
    import faulthandler
    faulthandler.disable()  # a crash of the submission is reported in its row, not dumped on the grader's terminal
    fd = os.open(result_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def report(record: dict) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())

    stray = os.open(os.path.join(os.path.dirname(result_path), "stray-output.txt"),
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(stray, 1)
    os.dup2(stray, 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    # no file the grader has open (its terminal, its log, another child's records) stays reachable by number
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            if name.isdigit() and int(name) not in (0, 1, 2, fd, ref_fd):
                with contextlib.suppress(OSError):
                    os.close(int(name))
    chain = ref_fd is not None
    try:
        _prepare_child(work, time_limit, hidden, temp_root, chain)
    except BaseException as e:  # the grader's row says why the child could not start (its crash file is hidden)
        report({"type": "crash", "detail": f"{type(e).__name__}: {e}"[:300]})
        raise
    if chain:
        try:
            _run_chain(steps, work, forbidden, time_limit, report, ref_fd, fd)
        except BaseException as e:  # a task's process never runs this: the chain is the reference's cells only
            report({"type": "crash", "detail": f"{type(e).__name__}: {e}"[:300]})
            raise
    else:
        _run_steps(steps, work, forbidden, report)
    report({"type": "done"})


def _prepare_child(work: str, time_limit: float, hidden: list[str] | None, temp_root: str | None,
                   chain: bool) -> None:
    if hidden is not None:
        isolate(work, hidden, temp_root or tempfile.gettempdir(), drop=not chain)
    if chain:
        make_undumpable()  # its tasks' processes (no capability, same user) cannot read its memory
    os.chdir(work)
    os.environ.update({"HOME": work, "TMPDIR": work, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
                       "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    tempfile.tempdir = work
    sys.dont_write_bytecode = True
    if not chain:  # a chain's tasks are each held to time_limit seconds of CPU by the chain (_task_process)
        limit_cpu = int(time_limit) + 30
        resource.setrlimit(resource.RLIMIT_CPU, (limit_cpu, limit_cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    import matplotlib.pyplot  # noqa: F401 - here, so that a failure to import is the crash reported above
    import torch  # noqa: F401
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401


class _Session:
    """The shell the steps run in, with what restores minirl's modules and the checkers between steps."""

    def __init__(self):
        import torch
        from IPython.core.interactiveshell import InteractiveShell
        from traitlets.config import Config

        from .. import bcq, classroom, cql, discrete, iql, nets, plots, stitching, tabular  # notebooks use classroom
        from . import checks

        torch.set_num_threads(1)

        class Shell(InteractiveShell):
            def enable_gui(self, gui=None):  # %matplotlib inline: figures are not shown while grading
                return None

        config = Config()
        config.HistoryManager.enabled = False
        config.InteractiveShell.colors = "NoColor"
        config.InteractiveShell.xmode = "Plain"
        self.shell = Shell(config=config)
        checker_modules = _checker_modules()
        modules = [bcq, cql, classroom, *checker_modules, discrete, iql, nets, plots, stitching, tabular]
        self.snapshot = {m: dict(vars(m)) for m in modules}
        self.checkers = {k: v for m in checker_modules for k, v in vars(m).items()
                         if k.startswith("check_") and callable(v)}
        self.checks = checks
        self.verdicts = checks._VERDICTS
        checks._MODE = "probe"  # the checkers record what the answers return; the grader judges it (grader.judge)
        self.probes = checks._PROBES

    def restore(self) -> None:  # undo any rebinding of minirl's functions by an earlier answer cell
        for m, attrs in self.snapshot.items():
            d = vars(m)
            for k in [k for k in d if k not in attrs]:
                del d[k]
            d.update(attrs)
        self.checks._VERDICTS = self.verdicts
        self.checks._PROBES = self.probes
        self.checks._MODE = "probe"

    def run(self, k: int, step: dict, report) -> None:
        """Run step ``k`` (its source in the shell), reporting its start, what its checker recorded, and its end."""
        import matplotlib.pyplot as plt
        report({"type": "start", "step": k})
        if step["kind"] != "answer":
            self.restore()
        if step["kind"] == "check":
            self.shell.user_ns.update(self.checkers)
        self.checks._FRESH = step.get("fresh")  # the inputs drawn for this task (None: the public ones)
        del self.probes[:]
        error, text = self.execute(step["source"])
        plt.close("all")
        if step["kind"] == "check":
            for p in self.probes:  # plain data (checks.encode): what the answer returned, never a verdict
                report({"type": "probe", "step": k, **p})
        report({"type": "end", "step": k, "error": None if error is None else f"{type(error).__name__}: {error}",
                "output": text[:OUTPUT_LIMIT] + ("\n[... output cut]" if len(text) > OUTPUT_LIMIT else "")})

    def execute(self, source: str):
        """``(the error or None, what the cell printed)``."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                result = self.shell.run_cell(source, store_history=False)
                error = result.error_before_exec or result.error_in_exec
            except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from the student's code
                error = e
        return error, out.getvalue()


def _run_steps(steps: list[dict], work: str, forbidden: list[str], report) -> None:
    """One process for the whole notebook, the student's answers in order (the spawned worker's mode)."""
    session = _Session()
    sys.addaudithook(_Sandbox(work, forbidden, report))
    for k, step in enumerate(steps):
        session.run(k, step, report)


# ---------------------------------------------------------------------------------------------------------------
# One process per task: the chain of the reference's cells, and a task's process forked from it
# ---------------------------------------------------------------------------------------------------------------
# The chain runs only the reference's cells: the given cells, and for each task, once its own process has finished,
# the reference notebook's answer (sent by the grader through ``ref_fd``, a pipe that task processes never hold, so
# no task's solution is in memory before that task is graded). At each answer step it forks the task's process,
# which disables the task's references for good (checks.disable), runs the student's answer for that task alone,
# on the reference's earlier pieces, then its check, and sends its records through a pipe of its own. So a bug costs
# only the task that has it, a loop or a crash only its own task, and no earlier cell can have kept a copy of the
# task's reference. Each task process is process 1 of a PID namespace of its own where the kernel allows it (killing
# it kills whatever it started) and is killed past its CPU-time limit or TASK_WALL_FACTOR times that on the clock.

TASK_WALL_FACTOR = 4       # a task's wall-clock limit, in multiples of its CPU-time limit (a loaded machine)
TASK_RECORDS_LIMIT = 64 << 20  # bytes of records one task process may send
CLONE_NEWPID = 0x20000000


def _read_exact(fd: int, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError("the grader's pipe of reference answers closed early")
        out += chunk
    return bytes(out)


def read_message(fd: int) -> dict:
    """One length-prefixed JSON message (:func:`write_message`)."""
    n = int.from_bytes(_read_exact(fd, 8), "little")
    return json.loads(_read_exact(fd, n))


def write_message(fd: int, message: dict) -> None:
    data = json.dumps(message).encode()
    data = len(data).to_bytes(8, "little") + data
    while data:
        data = data[os.write(fd, data):]


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system, and of its reaped children) of process ``pid``, from ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _task_process(session: _Session, steps: list[dict], first: int, last: int, work: str, forbidden: list[str],
                  task: str, close: list[int], time_limit: float) -> dict:
    """Run one task (steps ``first``..``last``: its answer, then its check) in a process of its own, within its limits;
    return ``{"task", "records", "exit", "timed_out", "cpu", ...}``. A watcher forked from the chain makes the PID
    namespace (a process can make only one for its children), forks the task's process into it and watches it."""
    r, w = os.pipe()
    watcher = os.fork()
    if watcher == 0:
        code = 0
        try:
            os.close(r)
            record = _watch_task(session, steps, first, last, work, forbidden, task, close + [w], time_limit)
            data = json.dumps(record).encode()
            while data:
                data = data[os.write(w, data):]
        except BaseException:  # noqa: BLE001 - the chain reports the task's process as died
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    data = bytearray()
    while chunk := os.read(r, 1 << 20):
        data += chunk
    os.close(r)
    os.waitpid(watcher, 0)
    try:
        record = json.loads(bytes(data))
    except (json.JSONDecodeError, RecursionError):
        record = {"type": "task", "task": task, "records": [], "exit": None, "timed_out": "", "cpu": None}
    record.setdefault("time_limit", time_limit)
    return record


def _watch_task(session: _Session, steps: list[dict], first: int, last: int, work: str, forbidden: list[str],
                task: str, close: list[int], time_limit: float) -> dict:
    import select
    import signal
    import time
    r, w = os.pipe()
    new_pid = False
    with contextlib.suppress(OSError):  # process 1 of a PID namespace of its own: killing it kills what it started
        _check(_libc().unshare(CLONE_NEWPID), "unshare")
        new_pid = True
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            for fd in close:  # the chain's records and the pipe of reference answers: never the task's
                with contextlib.suppress(OSError):
                    os.close(fd)
            _enter_task(session, task)

            def report(record: dict) -> None:
                os.write(w, (json.dumps(record) + "\n").encode())

            sys.addaudithook(_Sandbox(work, forbidden, report))
            for k in range(first, last + 1):
                session.run(k, steps[k], report)
        except BaseException:  # noqa: BLE001 - the task's row says the process died
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    wall = TASK_WALL_FACTOR * time_limit
    start, data, timed_out, eof = time.monotonic(), bytearray(), "", False
    status = usage = None
    while status is None:
        if not eof:
            ready, _, _ = select.select([r], [], [], 0.05)
            if ready:
                chunk = os.read(r, 1 << 20)
                data += chunk
                eof = not chunk
                if len(data) > TASK_RECORDS_LIMIT:
                    timed_out = "records"
        else:
            time.sleep(0.02)
        done, st, usage = os.wait4(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(st)
            break
        if not timed_out and _cpu_seconds(pid) > time_limit:
            timed_out = "cpu"
        elif not timed_out and time.monotonic() - start > wall:
            timed_out = "wall"
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, st, usage = os.wait4(pid, 0)
            status = os.waitstatus_to_exitcode(st)
    cpu = usage.ru_utime + usage.ru_stime
    with contextlib.suppress(OSError):
        while not eof and len(data) <= TASK_RECORDS_LIMIT:  # what it sent before it exited
            ready, _, _ = select.select([r], [], [], 0)
            chunk = os.read(r, 1 << 20) if ready else b""
            data += chunk
            eof = not chunk
    os.close(r)
    records = []
    for line in bytes(data[:TASK_RECORDS_LIMIT]).decode(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError, RecursionError):
            rec = json.loads(line)
            if isinstance(rec, dict):
                records.append(rec)
    return {"type": "task", "task": task, "records": records, "exit": status, "timed_out": timed_out,
            "time_limit": time_limit, "cpu": round(cpu, 3), "pid_namespace": new_pid}


def _enter_task(session: _Session, task: str) -> None:
    """In a task's process, before any of the student's code: its references disabled for good, the reference sweeps
    the grader computed dropped, nobody of its user able to read its memory or descriptors."""
    from . import agent_checks
    drop_capabilities()  # the chain kept its own (to make each task a PID namespace); a task has none
    session.restore()
    checker = session.checkers.get(f"check_{task}")
    references = session.checks.references_of(checker, task) if checker is not None else None
    if references:
        session.checks.disable(references)
    agent_checks._REFERENCE_CACHE.clear()
    PR_SET_DUMPABLE = 4
    _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _run_chain(steps: list[dict], work: str, forbidden: list[str], time_limit: float, report, ref_fd: int,
               result_fd: int) -> None:
    """The reference's cells in order, each task's answer and check in a process of its own (see above)."""
    session = _Session()
    checks_of = {s["task"]: k for k, s in enumerate(steps) if s["kind"] == "check"}
    for k, step in enumerate(steps):
        if step["kind"] == "given":
            session.run(k, step, report)
        elif step["kind"] == "answer":
            task = step["task"]
            report(_task_process(session, steps, k, checks_of[task], work, forbidden, task, [result_fd, ref_fd],
                                 time_limit))
            reference = read_message(ref_fd)
            if reference.get("task") != task:
                raise RuntimeError(f"the grader sent the reference answer of {reference.get('task')!r}, not {task!r}")
            error, _ = session.execute(reference["source"])
            if error is not None:
                raise RuntimeError(f"the reference answer of {task} raised {type(error).__name__}: {error}")


def worker_main(job_path: str) -> int:
    """``python -m minirl.classroom.sandbox worker JOB.json``: the child of the spawn mode."""
    job = json.loads(Path(job_path).read_text())
    preload()
    run_child(job["steps"], job["work"], job["result"], job["forbidden"], job["time_limit"])
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2]))
    print("usage: python -m minirl.classroom.sandbox worker JOB.json  (internal: use python -m minirl.classroom)",
          file=sys.stderr)
    sys.exit(2)
