"""The child process that runs one submission, sandboxed, and streams what happened to the grader.

Each notebook runs in a child process of its own (forked from the grader, which has imported torch once; a fresh
``python -m minirl.classroom.sandbox worker`` where fork is unavailable), in a new empty temporary folder that is its
working directory, ``HOME`` and ``TMPDIR``, with one thread, a time limit for the whole notebook (the process group is
killed when it is reached), a file-size limit, stdin closed, and an audit hook (:func:`sys.addaudithook`) that refuses
reading the solutions folder or the other submissions, writing, deleting or renaming anything outside its folder,
starting processes and opening network connections. The child streams its progress (each step started and ended,
each checker's verdict, each refused operation) to a file outside its folder, so a notebook that loops, crashes or
kills its own process still gets a row per task saying what happened, and every other notebook is graded as usual.
Scheduling the children and turning their records into grades: :mod:`minirl.classroom.grader`.

The audit hook is a tripwire against mistakes and casual tampering, not a security boundary: Python code that sets
out to subvert the process it runs in (``ctypes``, walking the garbage collector) can. For submissions you do not
trust at all, run the grader inside a container or a virtual machine with no access to the solutions.
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
# the reference sweeps of the experiment tasks, by notebook: (cache key, classroom module, function)
WARM = {"02_bcq": ("threshold", "agent_checks", "threshold_sweep_reference"),
        "03_cql": ("alpha", "agent_checks", "alpha_sweep_reference"),
        "04_iql": ("expectile", "agent_checks", "expectile_sweep_reference"),
        "04b_stitching": ("stitching", "stitching_checks", "stitching_sweep_reference"),
        "05_comparison": ("record-verdicts", "comparison_checks", "record_verdicts_reference")}


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


def preload() -> None:
    """Import what every notebook needs once, in the grader, before forking (saves ~3 s per notebook)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401

    from .. import bcq, cql, iql, nets, plots, stitching, tabular  # noqa: F401
    _checker_modules()


def _checker_modules() -> list:
    """The classroom's checker modules (:data:`minirl.classroom.CHECKER_MODULES`), imported."""
    import importlib

    from . import CHECKER_MODULES
    return [importlib.import_module(f"{__package__}.{m}") for m in CHECKER_MODULES]


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


def run_child(steps: list[dict], work: str, result_path: str, forbidden: list[str], time_limit: float) -> None:
    """Run ``steps`` in this (child) process; progress goes to ``result_path`` as JSON lines. Never returns into the
    caller's code: the caller exits right after."""
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
    os.chdir(work)
    os.environ.update({"HOME": work, "TMPDIR": work, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
                       "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    tempfile.tempdir = work
    sys.dont_write_bytecode = True
    limit_cpu = int(time_limit) + 30
    resource.setrlimit(resource.RLIMIT_CPU, (limit_cpu, limit_cpu))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))

    import matplotlib.pyplot as plt
    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from .. import bcq, classroom, cql, iql, nets, plots, stitching, tabular  # classroom: where notebooks import from
    from . import checks

    torch.set_num_threads(1)

    class Shell(InteractiveShell):
        def enable_gui(self, gui=None):  # %matplotlib inline: figures are not shown while grading
            return None

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "NoColor"
    config.InteractiveShell.xmode = "Plain"
    shell = Shell(config=config)
    checker_modules = _checker_modules()
    modules = [bcq, cql, classroom, *checker_modules, iql, nets, plots, stitching, tabular]
    snapshot = {m: dict(vars(m)) for m in modules}
    checkers = {k: v for m in checker_modules for k, v in vars(m).items() if k.startswith("check_") and callable(v)}
    verdicts = checks._VERDICTS
    checks._MODE = "probe"  # the checkers record what the answers return; the grader judges it (grader.judge)
    probes = checks._PROBES

    def restore() -> None:  # undo any rebinding of minirl's functions by an earlier answer cell
        for m, attrs in snapshot.items():
            d = vars(m)
            for k in [k for k in d if k not in attrs]:
                del d[k]
            d.update(attrs)
        checks._VERDICTS = verdicts
        checks._PROBES = probes
        checks._MODE = "probe"

    sys.addaudithook(_Sandbox(work, forbidden, report))
    for k, step in enumerate(steps):
        report({"type": "start", "step": k})
        if step["kind"] != "answer":
            restore()
        if step["kind"] == "check":
            shell.user_ns.update(checkers)
        del probes[:]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                result = shell.run_cell(step["source"], store_history=False)
                error = result.error_before_exec or result.error_in_exec
            except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from the student's code
                error = e
        plt.close("all")
        text = out.getvalue()
        if step["kind"] == "check":
            for p in probes:  # plain data (checks.encode): what the answer returned, never a verdict
                report({"type": "probe", "step": k, **p})
        report({"type": "end", "step": k, "error": None if error is None else f"{type(error).__name__}: {error}",
                "output": text[:OUTPUT_LIMIT] + ("\n[... output cut]" if len(text) > OUTPUT_LIMIT else "")})
    report({"type": "done"})


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
