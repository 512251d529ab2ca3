"""The exercise grader: every submission is graded against the reference, in its own process and folder.

What is graded, and from where
------------------------------
``python -m minirl.classroom make-student`` writes ``notebooks/exercises/checks.json`` from the reference notebooks
(:mod:`minirl.classroom.release`): for each exercise notebook, its cells in order, each one of

* ``given``: a cell of the reference (setup, imports, data, plots), run as the reference has it;
* ``answer``: where the student writes a task (the reference's ``solution`` cell), with the names it must define;
* ``check``: the reference's checker cell, with the verdict the reference prints (``expectile_loss: 5/5 checks
  passed``): the number of checks a task has comes from the reference, never from the submission;
* ``written``: a written answer (Markdown), collected for the instructor and marked ``manual``.

It holds no solution text (the self-check of a class works without ``solutions/``). A submission is graded by running
that program with the student's answer cells in place of the reference's: for each answer, the last code cell of the
submission that defines the task's name at its top level. Nothing else of the submission is used: not its stored
outputs, not its checker cells, not its other cells (they are counted and reported as ignored). So a notebook is
graded the same whether it was executed, saved, cleared, or had its outputs or checker cells edited.

How a submission runs
---------------------
In a sandboxed child process of its own, with a time limit (:mod:`minirl.classroom.sandbox`); this file schedules the
children, kills those that reach their limit, and turns what each child recorded into one row per task. Answer cells
that touch the grader's own modules are flagged in their row for a look by hand.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import sandbox
from .release import CHECKS_FILE, POINTS, SOLUTIONS, STUDENT_RUN

GRADING_PREFIX = "minirl-grading-"  # a grading run's private temporary folder (run_jobs)
DEFAULT_TIME_LIMIT = 120.0  # seconds per notebook, unless its reference sets minirl_time_limit (checks.json)
SUSPICIOUS = ("minirl.classroom", "minirl.exercises", "minirl.grading", "_VERDICTS", "Checks(", "addaudithook",
              "sys.modules")  # minirl.exercises and minirl.grading: the classroom's modules before minirl.classroom
LEVELS = ("function", "agent", "experiment", "written")
OLD_NAME = "minirl.exercises"  # where copies handed out before minirl.classroom import the checkers from



class GradingError(ValueError):
    """Bad input to the grader (a missing folder, a stale checks file): a one-line message for the user."""


@dataclass
class TaskResult:
    """One row of the grades: a student's task in one notebook."""
    student: str
    notebook: str
    task: str
    level: str                     # function | agent | experiment | written
    status: str                    # passed | failed | not implemented | uses reference | missing | error | time limit
    #                                | process died
    #                                | blocked | manual | not submitted | invalid notebook
    passed: bool
    checks_passed: int | None = None
    checks_total: int | None = None
    message: str = ""
    answer: str = ""               # a written answer's text, for the instructor
    points: int | None = None      # earned: all of points_possible when passed, else 0; None for a written answer
    points_possible: int = 0       # the task's points (release.POINTS by level, or the reference cell's own)
    details: str = ""              # every check the grader judged, passed or failed, one per line (--json, feedback)

    @property
    def short(self) -> str:
        if self.status == "passed":
            return "ok"
        if self.status == "failed":
            return f"failed {self.checks_passed}/{self.checks_total}"
        if self.status == "manual":
            return "manual" + (" (empty)" if not self.answer else "")
        return self.status


# ---------------------------------------------------------------------------------------------------------------
# The checks file
# ---------------------------------------------------------------------------------------------------------------

def load_checks(path: Path = CHECKS_FILE) -> dict:
    """The checks file as a dict ``{notebook stem: {"title": ..., "cells": [...]}}``; a clear error if absent."""
    path = Path(path)
    if not path.exists():
        raise GradingError(f"{path}: no checks file; run `python -m minirl.classroom make-student` to write it")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise GradingError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); regenerate it with make-student")
    if data.get("version") != 1 or not isinstance(data.get("notebooks"), dict):
        raise GradingError(f"{path}: expected {{'version': 1, 'notebooks': {{...}}}}; regenerate it with make-student")
    return data["notebooks"]


def all_checks(checks: Path = CHECKS_FILE) -> dict:
    """What the grader grades: the checks file's notebooks (:func:`load_checks`) and, where ``$MINIRL_COURSE`` names a
    course folder (:mod:`minirl.classroom.course`), that course's own (its ``exercises/checks.json``, written by
    ``make-student --course``). Without a course, exactly :func:`load_checks`."""
    from . import course
    active = course.current()
    if active is None:
        return load_checks(checks)
    specs = load_checks(checks) if Path(checks).exists() else {}  # an installed minirl has no checks file of its own
    if not active.checks_file.exists():
        raise GradingError(f"{active.checks_file}: no checks file; run `python -m minirl.classroom make-student "
                           f"--course {active.folder}` to write it")
    own = load_checks(active.checks_file)
    for name in own:
        if name in specs or name not in active.exercises:
            raise GradingError(f"{active.checks_file}: {name}: not an exercise of {active.config}; run make-student "
                               "--course again")
    for name in active.exercises:
        if name not in own:
            raise GradingError(f"{active.checks_file}: no entry for {name} of {active.config}; run make-student "
                               "--course again")
    active.check_tasks({n: [c["task"] for c in spec["cells"] if c["kind"] == "check"] for n, spec in own.items()},
                       lambda n: f"{active.checks_file}: {n}")
    return specs | own


def tasks_of(spec: dict) -> list[dict]:
    """The graded items of one notebook's spec, in order: the check cells and the written answers."""
    return [c for c in spec["cells"] if c["kind"] in ("check", "written")]


# ---------------------------------------------------------------------------------------------------------------
# Reading a submission and building the program that grades it
# ---------------------------------------------------------------------------------------------------------------

def read_submission(path: Path) -> tuple[dict | None, str]:
    """``(notebook, "")``, or ``(None, reason)`` when the file is not a notebook."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, "not a notebook: the file is not UTF-8 text"
    except OSError as e:
        return None, f"cannot read the file ({e.strerror})"
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"not a notebook: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return None, "not a notebook: the JSON has no list of cells"
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or "cell_type" not in cell:
            return None, f"not a notebook: cell {i} has no cell_type"
        src = cell.get("source", "")
        if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(s, str) for s in src))):
            return None, f"not a notebook: cell {i}'s source is neither text nor a list of lines"
    return nb, ""


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def defines(source: str, name: str) -> bool:
    """Whether ``source`` defines ``name`` at its top level (``def``/``class``/assignment), even with a syntax error
    elsewhere in the cell."""
    n = re.escape(name)
    return re.search(rf"^(?:async\s+def|def|class)\s+{n}\b|^{n}\s*(?::[^=\n]*)?=(?!=)", source, re.M) is not None


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def build_program(spec: dict, nb: dict) -> tuple[list[dict], dict]:
    """The steps that grade ``nb`` (reference cells, with the student's answer cells in place) and what was found:
    ``{"missing": {task: message}, "ignored": n, "written": {task: text}, "flags": {task: message}}``."""
    code = [_source(c) for c in nb["cells"] if c.get("cell_type") == "code"]
    markdown = [_source(c) for c in nb["cells"] if c.get("cell_type") == "markdown"]
    known = {_normalise(c["source"]) for c in spec["cells"] if c["kind"] in ("given", "check", "student-run")}
    known |= {_normalise(c["stub"]) for c in spec["cells"] if c["kind"] == "answer"}
    known |= {k.replace("minirl.classroom", OLD_NAME) for k in known}  # an older copy's cells are the reference's too
    used: set[int] = set()
    steps: list[dict] = []
    found: dict = {"missing": {}, "ignored": 0, "written": {}, "flags": {}}
    for cell in spec["cells"]:
        kind = cell["kind"]
        if kind == "given":
            steps.append({"kind": "given", "source": cell["source"]})
        elif kind == "check":
            steps.append({"kind": "check", "task": cell["task"], "source": cell["source"]})
        elif kind == "answer":
            name = cell["names"][0]
            matches = [i for i, src in enumerate(code) if defines(src, name)]
            if matches:
                used.add(matches[-1])
                source = code[matches[-1]]
                hits = [s for s in SUSPICIOUS if s in source]
                if hits:
                    found["flags"][cell["task"]] = (f"flagged for a look by hand: the answer cell uses {hits[0]!r}, "
                                                    "part of the grader")
            else:
                source = cell["stub"]
                found["missing"][cell["task"]] = (f"missing: no code cell defines {name} (the answer cell of this task "
                                                  "was deleted or renamed)")
            steps.append({"kind": "answer", "task": cell["task"], "source": source})
        elif kind == "written":
            texts = [src for src in markdown if src.strip().splitlines()[:1] == [cell["marker"]]]
            if texts:
                body = texts[-1].strip()[len(cell["marker"]):].strip()
                found["written"][cell["task"]] = "" if body == cell["placeholder"].strip() else body
            else:
                found["written"][cell["task"]] = None
    found["ignored"] = sum(1 for i, src in enumerate(code)
                           if i not in used and src.strip() and _normalise(src) not in known)
    if any(c["kind"] == "student-run" for c in spec["cells"]):
        found["student_run"] = _student_run_outputs(nb)
    return steps, found


def _student_run_outputs(nb: dict) -> dict:
    """What the submission stores of the cells the student runs and the grader does not (tagged ``student-run``):
    how many there are, how many hold an output, and how many figures (PNG images) they hold."""
    cells = [c for c in nb["cells"] if c.get("cell_type") == "code"
             and STUDENT_RUN in (c.get("metadata") or {}).get("tags", [])]
    outputs = [c.get("outputs") or [] for c in cells]
    figures = sum(1 for out in outputs for o in out if isinstance(o, dict) and "image/png" in (o.get("data") or {}))
    return {"cells": len(cells), "with_output": sum(1 for out in outputs if out), "figures": figures}


def _student_run_note(run: dict) -> str:
    if run["figures"]:
        return (f"the sweep it cites: {run['figures']} figure{'s' if run['figures'] > 1 else ''} saved in the submitted "
                "notebook (from cells the grader does not rerun: open the notebook to see them)")
    if run["with_output"]:
        return "the sweep it cites: output but no figure saved in the submitted notebook (open it to see)"
    return "the sweep it cites: no output saved in the cells the student runs (not run, or its output cleared)"



# ---------------------------------------------------------------------------------------------------------------
# The parent: schedule children, enforce time limits, turn their records into grades
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Job:
    student: str
    notebook: str               # the exercise's stem, e.g. "04_iql"
    path: Path | None           # None: not submitted
    spec: dict
    steps: list | None = None
    found: dict | None = None
    invalid: str = ""
    tmp: str = ""
    pid: int = 0
    proc: subprocess.Popen | None = None
    started: float = 0.0
    elapsed: float = 0.0
    timed_out: bool = False
    exit_status: int | None = None
    details: dict | None = None  # step -> the judge's output (the self-check prints the failed checks)
    judged: dict | None = None   # step -> the verdict computed here (judge)
    time_limit: float = DEFAULT_TIME_LIMIT  # seconds: the grader's --time-limit, else the notebook's own
    wall_limit: float = 0.0     # seconds on the clock for the whole child (one process: time_limit; a chain: more)
    writer: int = 0             # the process that sends the chain the reference's answers
    mode: str = "tasks"         # tasks: each on the reference's earlier pieces; own: the notebook as the student runs it
    note: str = ""              # said in the first row (a self-check without the reference notebooks)
    own: Job | None = None      # the run on the student's own pieces, made where a task failed before another one


def time_limit_of(spec: dict, time_limit: float | None) -> float:
    """A notebook's time limit: ``time_limit`` when given (the command line's ``--time-limit``), else the one its
    reference sets (``minirl_time_limit`` in its metadata, kept in the checks file), else
    :data:`DEFAULT_TIME_LIMIT`."""
    if time_limit is not None and not time_limit > 0:
        raise GradingError(f"--time-limit must be a positive number of seconds, got {time_limit:g}")
    return float(time_limit) if time_limit is not None else float(spec.get("time_limit", DEFAULT_TIME_LIMIT))


def _fork_available() -> bool:
    return hasattr(os, "fork") and sys.platform.startswith("linux")


def _start(job: Job, forbidden: list[str], use_fork: bool, hidden: list[str] | None = None,
           root: str | None = None) -> None:
    """Start ``job``'s child in a folder of its own under ``root``, the grading run's private folder: the child's
    namespace hides ``root`` but its own work folder, and nothing else of the temporary folder (a virtual environment
    or the datasets may live there, as in CI)."""
    time_limit = job.time_limit
    job.tmp = tempfile.mkdtemp(prefix="job-", dir=root)
    work = os.path.join(job.tmp, "work")
    os.mkdir(work)
    result = os.path.join(job.tmp, "result.jsonl")
    job.started = time.monotonic()
    n_tasks = sum(1 for s in job.steps if s["kind"] == "answer")
    chain = use_fork and job.mode == "tasks"
    job.wall_limit = time_limit * (sandbox.TASK_WALL_FACTOR * n_tasks + 1) if chain else time_limit
    if use_fork:
        sys.stdout.flush()
        sys.stderr.flush()
        ref_r = ref_w = None
        if chain:
            ref_r, ref_w = os.pipe()
            with contextlib.suppress(OSError, AttributeError):  # room for every answer (F_SETPIPE_SZ: Linux only)
                import fcntl
                fcntl.fcntl(ref_w, fcntl.F_SETPIPE_SZ, 1 << 20)
        pid = os.fork()
        if pid == 0:  # the child: the chain of the reference's cells, each task in a process of its own (or, for
            code = 0  # the run on the student's own pieces, the whole notebook in this one)
            try:
                if chain:
                    os.close(ref_w)
                sandbox.run_child(job.steps, work, result, forbidden, time_limit, hidden, root, ref_r)
            except BaseException:  # noqa: BLE001 - a grader bug: leave a trace, never return into the parent's code
                code = 70
                with contextlib.suppress(Exception):
                    import traceback
                    with open(os.path.join(job.tmp, "crash.txt"), "w") as f:
                        traceback.print_exc(file=f)
            finally:
                os._exit(code)
        job.pid = pid
        if chain:
            os.close(ref_r)
            job.writer = _send_reference_answers(job, ref_w)
    else:
        job_path = os.path.join(job.tmp, "job.json")
        Path(job_path).write_text(json.dumps({"steps": job.steps, "work": work, "result": result,
                                              "forbidden": forbidden, "time_limit": time_limit}))
        with open(os.path.join(job.tmp, "crash.txt"), "w") as err:  # the worker's own errors, if any
            job.proc = subprocess.Popen([sys.executable, "-m", "minirl.classroom.sandbox", "worker", job_path],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                        start_new_session=True, cwd=work)
        job.pid = job.proc.pid


def reference_path(notebook: str) -> Path:
    """Where ``notebook``'s reference notebook is (a course folder's exercise: in the course; else
    ``notebooks/exercises/solutions/``); a class release has none."""
    from . import course
    active = course.current()
    return active.reference(notebook) if active and notebook in active.exercises else SOLUTIONS / f"{notebook}.ipynb"


NO_REFERENCE_NOTE = ("graded as your notebook runs it, each task on your own earlier answers: this copy has no "
                     "reference notebooks, so the grade can differ where an earlier task is wrong")


def reference_answers(spec: dict, notebook: str) -> list[dict]:
    """The reference notebook's answer cells, task by task in the notebook's order: ``[{"task", "source"}]`` (a course
    folder's exercise: from its own reference notebook)."""
    nb = json.loads(reference_path(notebook).read_text())
    steps, found = build_program(spec, nb)
    if found["missing"]:
        raise GradingError(f"the reference notebook {notebook}.ipynb has no answer for {', '.join(found['missing'])}")
    return [{"task": s["task"], "source": s["source"]} for s in steps if s["kind"] == "answer"]


def _send_reference_answers(job: Job, fd: int) -> int:
    """Fork the process that reads the reference notebook and writes its answers into the chain's pipe ``fd``: the
    grader itself never holds a solution, so no child forked from it can find one in its memory."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for message in reference_answers(job.spec, job.notebook):
                sandbox.write_message(fd, message)
        except BaseException:  # noqa: BLE001 - the chain then stops, and its rows say so
            code = 1
        finally:
            os._exit(code)
    os.close(fd)
    return pid


def _reap_writer(job: Job) -> None:
    if job.writer:
        with contextlib.suppress(ProcessLookupError):
            os.kill(job.writer, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(job.writer, 0)
        job.writer = 0


def _poll(job: Job) -> bool:
    """True once the child has exited (its status stored)."""
    if job.proc is not None:
        code = job.proc.poll()
        if code is None:
            return False
        job.exit_status = code
        return True
    pid, status = os.waitpid(job.pid, os.WNOHANG)
    if pid == 0:
        return False
    job.exit_status = os.waitstatus_to_exitcode(status)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(job.pid, signal.SIGKILL)  # whatever the child left running in its process group
    _reap_writer(job)
    return True


def _kill(job: Job) -> None:
    for kill in (lambda: os.killpg(job.pid, signal.SIGKILL), lambda: os.kill(job.pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill()
            return


_ISOLATION: list = []


def isolation() -> str | None:
    """``None`` where each child runs isolated by the operating system (:func:`minirl.classroom.sandbox.isolate`),
    else the sentence that says why not (the grader prints it first). ``MINIRL_GRADER_ISOLATION=off`` turns it off."""
    if not _ISOLATION:
        if os.environ.get("MINIRL_GRADER_ISOLATION", "").lower() in ("off", "0", "no"):
            _ISOLATION.append("no OS isolation: turned off by MINIRL_GRADER_ISOLATION=off; only the audit hook "
                              "guards the files")
        elif not _fork_available():
            _ISOLATION.append("no OS isolation: the grader cannot fork here; only the audit hook guards the files")
        else:
            _ISOLATION.append(sandbox.isolation_problem())
    return _ISOLATION[0]


def isolation_line() -> str:
    """The grader's first line: how the children are isolated."""
    problem = isolation()
    return problem.replace("no OS isolation", "WARNING: no OS isolation", 1) if problem else (
        "isolation: each notebook runs in its own user, mount and network namespaces (solutions, other students' "
        "folders and the grader's files unreadable, nothing writable outside its folder)")


def run_jobs(jobs: list[Job], forbidden: list[str], parallel: int = 2, use_fork: bool | None = None,
             progress=None) -> None:
    """Run every runnable job, ``parallel`` at a time, each within its ``time_limit`` seconds (wall clock)."""
    use_fork = _fork_available() if use_fork is None else use_fork
    from . import course
    active = course.current()
    if active is not None:  # the course folder (its reference notebooks, its checkers) as the solutions folder
        forbidden = [*forbidden, str(active.folder)]
    hidden = None
    root = tempfile.mkdtemp(prefix=GRADING_PREFIX)  # this run's children's folders; removed by the last cleanup
    if use_fork:
        sandbox.preload()
        sandbox.warm({j.notebook for j in jobs if j.steps is not None})
        if isolation() is None:
            others = [str(p) for p in Path(tempfile.gettempdir()).glob(GRADING_PREFIX + "*") if str(p) != root]
            hidden = sandbox.hidden_paths(forbidden) + others  # another grading run's records too
            sandbox.make_undumpable()
    pending = [j for j in jobs if j.steps is not None]
    running: list[Job] = []
    while pending or running:
        while pending and len(running) < max(1, parallel):
            job = pending.pop(0)
            _start(job, forbidden, use_fork, hidden, root)
            running.append(job)
        time.sleep(0.02)
        for job in list(running):
            if _poll(job):
                job.elapsed = time.monotonic() - job.started
                running.remove(job)
                judge(job)  # while the other children run
                if use_fork and job.mode == "tasks" and _needs_own_run(job):
                    job.own = Job(job.student, job.notebook, job.path, job.spec, steps=job.steps, found=job.found,
                                  time_limit=job.time_limit, mode="own")
                    pending.insert(0, job.own)
                if progress and job.mode == "tasks":
                    progress(job)
            elif time.monotonic() - job.started > (job.wall_limit or job.time_limit):
                job.timed_out = True
                _kill(job)
    if not any(j.tmp for j in jobs):
        os.rmdir(root)


def _needs_own_run(job: Job) -> bool:
    """Whether a task that is not passed comes before another task: only then can the student's own earlier pieces
    give a later task another verdict than the reference's pieces did."""
    rows = [r for r in results_of(job) if r.level != "written"]
    return any(not r.passed for r in rows[:-1])


def _own_note(row: TaskResult, own: TaskResult) -> str:
    """The message's note where the run on the student's own earlier answers gave the task another verdict."""
    if (own.status, own.checks_passed) == (row.status, row.checks_passed):
        return ""
    what = own.short if own.status != "passed" else "passed"
    why = f" ({own.message[:160]})" if own.message and own.status != "passed" else ""
    return (f"with your own earlier answers, as your notebook runs it: {what}{why} (graded on the reference's "
            "earlier answers, so a bug costs only the task that has it)")


_STUDENT_TYPES = ("start", "end", "violation", "probe")


def _records(job: Job) -> list[dict]:
    """What the child wrote, line by line: only JSON objects with a known ``type`` (anything else is dropped). A
    chain's record of one task's process (``"type": "task"``) is unpacked: of what that process sent, only its own
    steps' records are kept (a task's process cannot speak for another task), followed by a ``task-stop`` record
    of how it ended."""
    path = Path(job.tmp) / "result.jsonl"
    out: list[dict] = []
    if not path.exists():
        return out
    ranges = _task_ranges(job)
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError, RecursionError):
            r = json.loads(line)
            if not isinstance(r, dict):
                continue
            if r.get("type") == "task" and r.get("task") in ranges and isinstance(r.get("records"), list):
                first, last = ranges[r["task"]]
                for q in r["records"]:
                    if isinstance(q, dict) and q.get("type") in _STUDENT_TYPES and \
                            (q["type"] == "violation" or isinstance(q.get("step"), int) and first <= q["step"] <= last) \
                            and (q["type"] != "probe" or q.get("task") == r["task"] and q["step"] == last):
                        out.append(q)
                out.append({"type": "task-stop", **{k: r.get(k) for k in ("task", "exit", "timed_out", "time_limit",
                                                                              "cpu", "pid_namespace")}})
            elif r.get("type") in ("start", "end", "violation", "probe", "done", "crash") and \
                    (r["type"] in ("violation", "done", "crash") or isinstance(r.get("step"), int)):
                out.append(r)
    return out


def _task_ranges(job: Job) -> dict[str, tuple[int, int]]:
    """task -> (its answer step, its check step)."""
    steps = job.steps or []
    answers = {s["task"]: k for k, s in enumerate(steps) if s["kind"] == "answer"}
    return {s["task"]: (answers[s["task"]], k) for k, s in enumerate(steps) if s["kind"] == "check"
            and s["task"] in answers}


def _task_stop(stop: dict) -> tuple[str, str]:
    """``(status, message)`` of a task whose process ended before its check did."""
    limit = float(stop.get("time_limit") or 0)
    how = stop.get("timed_out")
    if how == "cpu":
        return "time limit", f"the task reached its time limit of {limit:g} s of CPU time"
    if how == "wall":
        return "time limit", (f"the task reached its time limit of {sandbox.TASK_WALL_FACTOR * limit:g} s on the "
                              "clock")
    if how == "records":
        return "error", f"the task's process sent more than {sandbox.TASK_RECORDS_LIMIT >> 20} MB of records"
    code = stop.get("exit")
    return "process died", f"the task's process died ({_signal_name(code if isinstance(code, int) else None)})"


_CHECKERS: dict = {}  # course folder ("" for none) -> task -> its checker


def checker_of(task: str):
    """The checker function of ``task`` (``check_<task>`` in one of the classroom's checker modules, or of the course
    folder's in ``$MINIRL_COURSE``)."""
    from . import course
    active = course.current()
    found = _CHECKERS.setdefault(str(active.folder) if active else "", {})
    if not found:
        for m in sandbox._checker_modules():
            found.update({k[len("check_"):]: v for k, v in vars(m).items() if k.startswith("check_")
                          and callable(v)})
    return found[task]


def _never_called(*args, **kwargs):
    raise RuntimeError("the grader never runs a submission's code in its own process")


def fresh_draw(key: str, student: str, notebook: str, task: str) -> int:
    """The draw behind a task's graded inputs (:func:`minirl.classroom.checks.fresh`): an HMAC of the student, the
    notebook and the task under the instructor's key, so nobody without the key knows the inputs in advance."""
    import hashlib
    import hmac
    digest = hmac.new(key.encode(), f"{student}\0{notebook}\0{task}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:6], "little")


def grading_key(key: str | None = None) -> str:
    """The key of a grading run: ``key``, else ``$MINIRL_GRADER_KEY``, else a random one (fresh inputs every run)."""
    import secrets
    key = key or os.environ.get("MINIRL_GRADER_KEY") or secrets.token_hex(16)
    return key


def judge_task(task: str, results: list, fresh: int | None = None) -> tuple[dict, str]:
    """The verdict on one task, computed here (the grader's process): the task's checker runs in ``judge`` mode,
    each of its checks comparing the value the child recorded (plain data) with the reference computed here.
    Returns ``(verdict, the checker's printed output)``."""
    import io

    from . import checks
    out = io.StringIO()
    previous = checks._MODE, checks._REPLAY, checks._VERDICTS, checks._FRESH
    checks._MODE, checks._REPLAY, checks._VERDICTS, checks._FRESH = "judge", {task: list(results)}, [], fresh
    try:
        with contextlib.redirect_stdout(out):
            try:
                checker_of(task)(_never_called)
            except Exception as e:  # noqa: BLE001 - a checker that cannot judge this record: no credit
                print(f"check FAILED: the grader could not judge this task ({type(e).__name__}: {e})")
        found = [v for v in checks._VERDICTS if v["task"] == task]
    finally:
        checks._MODE, checks._REPLAY, checks._VERDICTS, checks._FRESH = previous
    verdict = found[-1] if found else {"task": task, "passed": 0, "n": 0, "not_implemented": None,
                                       "uses_reference": []}
    return verdict, out.getvalue()


def judge(job: Job) -> None:
    """Judge every check step of a finished child from the data it recorded (``job.judged``: step -> verdict,
    ``job.details``: step -> the judge's output)."""
    job.judged, job.details = {}, {}
    if job.steps is None:
        return
    step_task = {k: s.get("task") for k, s in enumerate(job.steps) if s["kind"] == "check"}
    probes: dict[int, dict] = {}
    for r in _records(job):
        if r["type"] == "probe" and step_task.get(r["step"]) is not None and r.get("task") == step_task[r["step"]]:
            probes[r["step"]] = r
    for step, r in probes.items():
        results = r.get("results") if isinstance(r.get("results"), list) else []
        verdict, output = judge_task(r["task"], results, job.steps[step].get("fresh"))
        used = r.get("uses_reference")
        verdict["uses_reference"] = [str(u)[:200] for u in used][:5] if isinstance(used, list) else []
        job.judged[step], job.details[step] = verdict, output


def check_lines(checks) -> str:
    """Every check the judge ran on a task, one per line: ``passed: <what it checked>`` or ``FAILED: <what it
    checked>: <what was wrong: the values expected and got>``."""
    if not isinstance(checks, list):
        return ""
    lines = []
    for c in checks:
        description, problem = (c + [None, None])[:2] if isinstance(c, list) else (str(c), None)
        lines.append(f"passed: {description}" if problem is None else
                     f"FAILED: {description}: {' '.join(str(problem).split())}")
    return "\n".join(lines)


def rerun_line(step: dict) -> str:
    """The first line of a task's details when it was judged on drawn inputs: the draw, and how to rerun its checks
    on those inputs in the student's own notebook (:class:`minirl.classroom.checks.grading_inputs`)."""
    call = [line for line in step["source"].strip().splitlines() if line.strip()]
    return "\n".join([f"inputs: drawn for this grading (draw {step['fresh']}); to rerun these checks on them, run in "
                      "your notebook:", "    from minirl.classroom import checks",
                      f"    with checks.grading_inputs({step['fresh']}):", *(f"        {line}" for line in call)])


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit status {code}"


def _first_failure(output: str) -> str:
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("check FAILED"):
            return " ".join(s.strip() for s in lines[i:i + 2])[:300]
    return ""


def results_of(job: Job) -> list[TaskResult]:
    """The rows of one job: one per task of its notebook."""
    spec, rows = job.spec, []

    def row(task: dict, status: str, message: str = "", **kw) -> TaskResult:
        possible = task.get("points", POINTS[task["level"]])  # a checks file made before points: the same table
        earned = None if task["level"] == "written" else possible if status == "passed" else 0
        return TaskResult(job.student, job.notebook, task["task"], task["level"], status, status == "passed",
                          message=message, points=earned, points_possible=possible, **kw)

    if job.path is None or job.invalid:
        status = "not submitted" if job.path is None else "invalid notebook"
        message = f"no {job.notebook}.ipynb in the student's folder" if job.path is None else job.invalid
        return [row(t, status, message) for t in tasks_of(spec)]
    records = _records(job)
    started = {r["step"] for r in records if r["type"] == "start"}
    ended = {r["step"]: r for r in records if r["type"] == "end"}
    if job.judged is None:
        judge(job)
    verdicts = job.judged  # computed here from the child's data (judge), never read from the child
    violations: dict[int, list[str]] = {}
    current = -1
    for r in records:
        if r["type"] == "start":
            current = r["step"]
        elif r["type"] == "violation":
            violations.setdefault(current, []).append(f"{r['what']}: {r['detail']}")
    done = any(r["type"] == "done" for r in records)
    task_stops = {r["task"]: r for r in records if r["type"] == "task-stop"}
    last_started = max(started) if started else -1
    crash = Path(job.tmp, "crash.txt")
    if job.timed_out:
        stop = f"the notebook reached its time limit of {job.wall_limit or job.time_limit:g} s"
    elif not done:
        stop = f"the notebook's process died ({_signal_name(job.exit_status)})"
        lines = crash.read_text(errors="replace").strip().splitlines() if crash.exists() else []
        lines += [str(r.get("detail", ""))[:200] for r in records if r["type"] == "crash" and not started]
        if lines:
            stop += ": " + lines[-1][:200]
    else:
        stop = ""
    answer_step = {s["task"]: k for k, s in enumerate(job.steps) if s["kind"] == "answer"}
    check_step = {s["task"]: k for k, s in enumerate(job.steps) if s["kind"] == "check"}
    for task in tasks_of(spec):
        name = task["task"]
        if task["kind"] == "written":
            text = job.found["written"].get(name)
            if text is None:
                rows.append(row(task, "manual", f"no written answer: a Markdown cell starting {task['marker']!r} "
                                "is missing"))
            else:
                message = "for the instructor" if text else "not answered"
                if "student_run" in job.found:
                    message += "; " + _student_run_note(job.found["student_run"])
                rows.append(row(task, "manual", message, answer=text))
            continue
        n_ref = task["n"]
        a, c = answer_step.get(name), check_step[name]
        blocked = violations.get(a, []) + violations.get(c, [])
        if name in job.found["missing"]:
            rows.append(row(task, "missing", job.found["missing"][name], checks_passed=0, checks_total=n_ref))
            continue
        if blocked:
            rows.append(row(task, "blocked", "; ".join(dict.fromkeys(blocked)), checks_passed=0, checks_total=n_ref))
            continue
        if c not in ended and name in task_stops:
            status, message = _task_stop(task_stops[name])
            rows.append(row(task, status, message, checks_passed=0, checks_total=n_ref))
            continue
        if c not in ended:
            if c in started or (a is not None and a == last_started):
                message = f"{stop} while this task ran"
            else:
                message = f"not reached: {stop} in an earlier step" if stop else "not run"
            status = "time limit" if job.timed_out else "process died"
            rows.append(row(task, status, message, checks_passed=0, checks_total=n_ref))
            continue
        v = verdicts.get(c)
        answer_error = ended.get(a, {}).get("error") if a is not None else None
        if v is None:
            err = ended[c].get("error")
            if answer_error:
                message = f"your answer cell raised {answer_error}"
            else:
                message = f"the check could not run: {err}" if err else "the check printed no verdict"
            rows.append(row(task, "error", message[:300], checks_passed=0, checks_total=n_ref))
            continue
        if v.get("not_implemented") is not None:
            stub = "your code here" in v["not_implemented"]
            message = "the stub still raises NotImplementedError" if stub else \
                f"raises NotImplementedError: {v['not_implemented']}"[:300]
            rows.append(row(task, "not implemented", message, checks_passed=0, checks_total=n_ref))
            continue
        if v.get("uses_reference"):
            rows.append(row(task, "uses reference", "uses the reference implementation (" + ", ".join(
                v["uses_reference"]) + "): the answer hands the task to minirl's own code", checks_passed=0,
                checks_total=n_ref))
            continue
        k, n = int(v["passed"]), int(v["n"])
        details = check_lines(v.get("checks"))
        if details and job.steps[c].get("fresh") is not None:
            details = rerun_line(job.steps[c]) + "\n" + details
        if n != n_ref:
            rows.append(row(task, "error", f"the checker ran {n} checks but the reference ran {n_ref}: the checks file "
                            "is out of date (run make-student)", checks_passed=k, checks_total=n))
        elif k == n:
            rows.append(row(task, "passed", checks_passed=k, checks_total=n, details=details))
        else:
            message = _first_failure((job.details or {}).get(c, "")) or f"{n - k} of {n} checks failed"
            if answer_error:
                message = f"your answer cell raised {answer_error}; " + message
            rows.append(row(task, "failed", message, checks_passed=k, checks_total=n, details=details))
    ignored = job.found["ignored"]
    if ignored and rows:
        note = (f"{ignored} code cell{'s' if ignored > 1 else ''} not in the reference {'were' if ignored > 1 else 'was'}"
                " ignored (only the answer cells are graded)")
        rows[0].message = "; ".join(m for m in (rows[0].message, note) if m)
    if job.note and rows:
        rows[0].message = "; ".join(m for m in (rows[0].message, job.note) if m)
    for r in rows:
        if r.task in job.found["flags"]:
            r.message = "; ".join(m for m in (r.message, job.found["flags"][r.task]) if m)
    if job.own is not None and job.own.tmp:
        own = {o.task: o for o in results_of(job.own)}
        for r in rows:
            note = _own_note(r, own[r.task]) if r.task in own and r.level != "written" else ""
            if note:
                r.message = "; ".join(m for m in (r.message, note) if m)
    return rows


def cleanup(job: Job) -> None:
    """Remove ``job``'s folder (and its run on the student's own pieces), and the grading run's folder once empty."""
    if job.own is not None:
        cleanup(job.own)
    if job.tmp:
        import shutil
        shutil.rmtree(job.tmp, ignore_errors=True)
        parent = os.path.dirname(job.tmp)
        if os.path.basename(parent).startswith(GRADING_PREFIX):
            with contextlib.suppress(OSError):
                os.rmdir(parent)


# ---------------------------------------------------------------------------------------------------------------
# Grading a folder, or one notebook
# ---------------------------------------------------------------------------------------------------------------

def exercise_of(path: Path, nb: dict | None, specs: dict) -> str | None:
    """The exercise a submitted file is: its ``minirl_exercise`` metadata (kept by the student copies), else its
    file name."""
    if nb is not None:
        name = nb.get("metadata", {}).get("minirl_exercise") if isinstance(nb.get("metadata"), dict) else None
        if isinstance(name, str) and name in specs:
            return name
    return path.stem if path.stem in specs else None


def prepare(student: str, notebook: str, path: Path | None, spec: dict, time_limit: float | None = None,
            key: str | None = None) -> Job:
    """A job for one notebook; with ``key``, each check step gets the draw of its fresh inputs (:func:`fresh_draw`),
    without, the public inputs of the self-check."""
    job = Job(student, notebook, path, spec, time_limit=time_limit_of(spec, time_limit))
    if not reference_path(notebook).exists():  # a student's copy of a class release: no reference's pieces to use
        job.mode, job.note = "own", NO_REFERENCE_NOTE
    if path is not None:
        nb, problem = read_submission(path)
        if nb is None:
            job.invalid = problem
        else:
            job.steps, job.found = build_program(spec, nb)
            for step in job.steps:
                if step["kind"] == "check" and key is not None:
                    step["fresh"] = fresh_draw(key, student, notebook, step["task"])
    return job


def grade_folder(folder: Path, checks: Path = CHECKS_FILE, time_limit: float | None = None,
                 parallel: int = 2, notebooks: list[str] | None = None, use_fork: bool | None = None,
                 progress=None, key: str | None = None) -> tuple[list[TaskResult], list[Job]]:
    """Grade ``folder/<student>/<exercise>.ipynb``: one :class:`TaskResult` per student and task, each task judged
    on inputs drawn from ``key`` (:func:`grading_key`), the student and the task."""
    key = grading_key(key)
    folder = Path(folder)
    if parallel < 1:
        raise GradingError(f"--parallel must be at least 1 (notebooks graded at once), got {parallel}")
    if not folder.is_dir():
        raise GradingError(f"{folder}: no such folder (expected a folder of submissions: {folder}/<student>/"
                           f"<exercise>.ipynb)")
    specs = all_checks(checks)
    from . import course
    if course.current() is not None:
        course.current().check_references()  # the chain runs each reference answer
    students = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise GradingError(f"no student folders in {folder}: expected {folder}/<student>/<exercise>.ipynb")
    jobs: list[Job] = []
    extra: list[TaskResult] = []
    submitted: dict[tuple[str, str], Path] = {}
    for student in students:
        for path in sorted(student.glob("*.ipynb")):
            nb, _ = read_submission(path)
            name = exercise_of(path, nb, specs)
            if name is None:
                extra.append(TaskResult(student.name, path.stem, "(notebook)", "-", "error", False,
                                        message=f"{path.name} is not one of the exercises "
                                                f"({', '.join(n + '.ipynb' for n in specs)})"))
            elif (student.name, name) in submitted:
                extra.append(TaskResult(student.name, name, "(notebook)", "-", "error", False,
                                        message=f"{path.name} and {submitted[student.name, name].name} are both "
                                                f"{name}: {submitted[student.name, name].name} was graded"))
            else:
                submitted[student.name, name] = path
    wanted = notebooks or sorted({n for _, n in submitted})
    for n in wanted:
        if n not in specs:
            raise GradingError(f"unknown exercise {n!r}: expected one of {', '.join(specs)}")
    for student in students:
        for n in wanted:
            jobs.append(prepare(student.name, n, submitted.get((student.name, n)), specs[n], time_limit, key))
    forbidden = [str(SOLUTIONS), str(folder.resolve())]
    try:
        run_jobs(jobs, forbidden, parallel, use_fork, progress)
        results = [r for job in jobs for r in results_of(job)] + extra
    finally:
        for job in jobs:
            cleanup(job)
    order = {s.name: i for i, s in enumerate(students)}
    results.sort(key=lambda r: (order.get(r.student, 0), r.notebook))
    return results, jobs


def grade(folder: Path, **kwargs) -> str:
    """Grade ``folder/<student>/<exercise>.ipynb`` against the reference (:func:`grade_folder`); returns the Markdown
    table."""
    results, _ = grade_folder(folder, **kwargs)
    return table(results)


def check_notebook(path: Path, checks: Path = CHECKS_FILE, time_limit: float | None = None,
                   exercise: str | None = None, use_fork: bool | None = None) -> tuple[list[TaskResult], Job]:
    """The self-check: grade one notebook exactly as :func:`grade_folder` grades it."""
    path = Path(path)
    if not path.is_file():
        raise GradingError(f"{path}: no such notebook (expected a saved exercise notebook, e.g. 04_iql.ipynb)")
    specs = all_checks(checks)
    nb, _ = read_submission(path)
    name = exercise or exercise_of(path, nb, specs)
    if name not in specs:
        raise GradingError(f"{path.name} is not one of the exercises ({', '.join(n + '.ipynb' for n in specs)}); "
                           "name it with --exercise")
    job = prepare("you", name, path, specs[name], time_limit)
    try:
        run_jobs([job], [str(SOLUTIONS)], 1, use_fork)
        rows = results_of(job)
    finally:
        cleanup(job)
    return rows, job


# ---------------------------------------------------------------------------------------------------------------
# Output: a Markdown table, CSV and JSON (one row per student and task)
# ---------------------------------------------------------------------------------------------------------------

FIELDS = [f for f in TaskResult.__dataclass_fields__ if f != "details"]  # the CSV's columns (--json adds details)


def table(results: list[TaskResult]) -> str:
    """One Markdown row per student and notebook: auto-graded tasks passed, each task's state, notes."""
    lines = ["| student | notebook | passed | points | tasks | notes |", "| --- | --- | ---: | ---: | --- | --- |"]
    groups: dict[tuple[str, str], list[TaskResult]] = {}
    for r in results:
        groups.setdefault((r.student, r.notebook), []).append(r)
    for (student, notebook), rows in groups.items():
        auto = [r for r in rows if r.level != "written" and r.task != "(notebook)"]
        tasks = ", ".join(f"{r.task} {r.short}" for r in rows if r.task != "(notebook)")
        notes = sorted({r.message for r in rows
                        if r.status in ("time limit", "process died", "blocked", "invalid notebook", "not submitted",
                                        "missing", "error", "uses reference")
                        or r.task == "(notebook)" or "flagged" in r.message or "ignored" in r.message})
        passed = f"{sum(r.passed for r in auto)}/{len(auto)}" if auto else "-"
        written = sum(r.points_possible for r in rows if r.level == "written")
        points = (f"{sum(r.points or 0 for r in auto)}/{sum(r.points_possible for r in auto)}" if auto else "-") + (
            f" + {written} written" if written else "")
        cell = "; ".join(n.replace("|", "\\|") for n in notes)
        lines.append(f"| {student} | {notebook} | {passed} | {points} | {tasks or '-'} | {cell} |")
    return "\n".join(lines)


def write_csv(results: list[TaskResult], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in results:
            w.writerow({k: v for k, v in asdict(r).items() if k in FIELDS})


def write_json(results: list[TaskResult], path: Path) -> None:
    Path(path).write_text(json.dumps([asdict(r) for r in results], indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")
