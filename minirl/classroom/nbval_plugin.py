"""``pytest --nbval SUBMISSION.ipynb`` grades a book's exercise notebook against the reference, as the grader does.

minirl registers this module as a pytest plugin (the ``pytest11`` entry point ``minirl-exercises`` in
pyproject.toml), so it is active wherever minirl is installed, in any folder, with no conftest of the instructor's.

Why it is needed: nbval compares each cell's new output with the output stored *in the notebook it runs*. A
student's saved notebook stores the student's own run, so under plain nbval it passes whatever it contains (issue 46:
a saved wrong ``04_iql.ipynb`` gave "16 passed").

What it does: when nbval (``--nbval`` or ``--nbval-lax``) collects a notebook whose metadata names one of the book's
exercises (``"minirl_exercise": "04_iql"``, written into every student copy by ``make-student``), nbval's collector
for that file is replaced by :class:`ExerciseNotebook`. It grades the notebook once with the grader
(:func:`minirl.classroom.grader.check_notebook`: the reference program of ``checks.json`` with the student's answer
cells in place, run in the grader's sandbox) and yields one test per task. A task passes when its checker prints the
reference's verdict (``expectile_loss: 5/5 checks passed``); the failure report shows that expected line, the
grader's verdict and the checks that failed. Nothing else of the submission counts (stored outputs, checker cells,
other cells), so a saved wrong answer fails, a cleared or tampered one fails the same way, a correct one passes
whatever it stored. Written answers are reported as skipped ("for the instructor").

Why delegate rather than let nbval's kernel run a substituted notebook (nbval 0.11's hooks): nbval has no hook
between reading a notebook and comparing its cells; its only extension point is ``pytest_collect_file``, which
returns nbval's ``IPyNbFile`` for every ``.ipynb``. A subclass could swap ``self.nb`` for the reference program with
the verdict lines as stored outputs, but the checker cells print more than their verdict line (so they would need
rewriting), and the program would then run in a plain Jupyter kernel: none of the grader's protections (checkers
rebound by an answer cell restored before each check, reading the solutions or writing outside the folder refused, a
time limit for the whole notebook, verdicts recorded by the checkers rather than parsed from printed text). A
notebook that rebinds ``check_evaluate_policy`` would pass under nbval and fail under the grader. Delegating keeps
one program and one sandbox, so ``pytest --nbval`` and ``python -m minirl.classroom grade`` cannot disagree.

Every other notebook is untouched: nbval collects and runs it exactly as before. Without ``--nbval``/``--nbval-lax``
(or without nbval installed) this plugin does nothing. This module imports only the standard library and pytest at
startup; the grader (and torch) are imported when an exercise notebook is collected.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest


def _nbval_active(config) -> bool:
    opt = config.option
    return bool(getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False))


# ---------------------------------------------------------------------------------------------------------------
# A folder of submissions: nothing a student put in it runs in this (the instructor's) pytest process
# ---------------------------------------------------------------------------------------------------------------
# ``pytest --nbval submissions/`` would import every conftest.py below it (a hook that marks every test passed), every
# test_*.py, and run every other notebook in a Jupyter kernel with the instructor's rights. When the folders pytest is
# given hold a book exercise notebook, this plugin turns conftest loading off (``--noconftest``), ignores every file
# that is not a notebook, and skips the notebooks that are not exercises. A student's pytest.ini (or tox.ini,
# setup.cfg, pyproject.toml) is read by pytest before any plugin when it lies in the folder given or above it, and it
# can switch this plugin off (``-p no:minirl-exercises``): the documented command passes ``-c`` a settings file of
# the instructor's (book/instructors.md): ``pytest --nbval -c /dev/null --rootdir submissions submissions/``.
# sitecustomize.py and usercustomize.py are imported only at an interpreter's start and from sys.path, which a
# submission folder is not on (run the command from outside it); the graded children are forked from this process.

_GUARD = pytest.StashKey[list]()  # the folders under which the guard holds (empty or absent: not a class's folder)


def _is_exercise_notebook(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return '"minirl_exercise"' in f.read()
    except OSError:
        return False


def submission_roots(paths: list[Path], ignored: list[Path]) -> list[Path]:
    """Those of ``paths`` (folders or files pytest was given) whose tree holds a book exercise notebook, outside the
    ``ignored`` paths (``--ignore``)."""
    import os
    ignored = [p.resolve() for p in ignored]
    out = []
    for root in paths:
        root = root.resolve()
        if root.is_file():
            if root.suffix == ".ipynb" and _is_exercise_notebook(root):
                out.append(root.parent)
            continue
        found = False
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if (here / d).resolve() not in ignored and d != ".ipynb_checkpoints"]
            if any(f.endswith(".ipynb") and _is_exercise_notebook(here / f) for f in filenames):
                found = True
                break
        if found:
            out.append(root)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    ns = early_config.known_args_namespace
    if not (getattr(ns, "nbval", False) or getattr(ns, "nbval_lax", False)):
        return
    base = early_config.invocation_params.dir
    given = [a.split("::")[0] for a in (ns.file_or_dir or []) if not str(a).startswith("-")]
    if not given:
        given = [str(early_config.rootpath / t) for t in (early_config.getini("testpaths") or [])] or [str(base)]
    paths = [Path(g) if Path(g).is_absolute() else base / g for g in given]
    ignored = [Path(i) if Path(i).is_absolute() else base / i for i in (getattr(ns, "ignore", None) or [])]
    roots = submission_roots([p for p in paths if p.exists()], ignored)
    early_config.stash[_GUARD] = roots
    if roots:
        ns.noconftest = True  # read by pytest's own loading of the initial conftests, which runs after this hook


def _guarded(config, path: Path) -> bool:
    roots = config.stash.get(_GUARD, [])
    if not roots:
        return False
    path = Path(path).resolve()
    return any(path == r or r in path.parents for r in roots)


def pytest_report_header(config):
    roots = config.stash.get(_GUARD, [])
    if roots:
        return [f"minirl: grading a folder of submissions ({', '.join(map(str, roots))}): no conftest.py is loaded, "
                "no Python file is collected, notebooks that are not exercises are not run"]
    return None


def pytest_ignore_collect(collection_path, config):
    if collection_path.is_file() and collection_path.suffix != ".ipynb" and _guarded(config, collection_path):
        return True  # a student's test_*.py or doctest module would be imported into this process
    return None


def exercise_name(path: Path) -> str | None:
    """The exercise a notebook file says it is (its ``minirl_exercise`` metadata), or ``None``."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    name = meta.get("minirl_exercise") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    collected = yield
    if file_path.suffix != ".ipynb" or not _nbval_active(parent.config):
        return collected
    name = exercise_name(file_path)
    guarded = _guarded(parent.config, file_path)
    kept = [c for c in (collected or []) if type(c).__module__ != "nbval.plugin"]
    if name is None:
        # not an exercise: nbval as usual, except in a class's folder, where it would run with the instructor's rights
        return kept + [NotRun.from_parent(parent, path=file_path)] if guarded else collected
    from .grader import load_checks
    specs = load_checks()
    if name not in specs:
        return kept + [NotRun.from_parent(parent, path=file_path)] if guarded else collected
    return kept + [ExerciseNotebook.from_parent(parent, path=file_path, exercise=name, spec=specs[name])]


class NotRun(pytest.File):
    """A notebook in a folder of submissions that is not one of the book's exercises: reported, never run."""

    def collect(self):
        yield NotRunItem.from_parent(self, name="not an exercise")


class NotRunItem(pytest.Item):
    def runtest(self):
        pytest.skip("not one of the book's exercise notebooks: not run while grading a folder of submissions")

    def reportinfo(self):
        return self.path, None, f"{self.path.name}: not an exercise"


class ExerciseNotebook(pytest.File):
    """A book's exercise notebook under ``pytest --nbval``: one test per task, graded once against the reference."""

    def __init__(self, *args, exercise: str, spec: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.exercise = exercise
        self.spec = spec
        self._graded = None

    def collect(self):
        for cell in self.spec["cells"]:
            if cell["kind"] in ("check", "written"):
                yield ExerciseTask.from_parent(self, name=cell["task"], cell=cell)

    def graded(self):
        """``({task: TaskResult}, {task: the checker's output})``, from one run of the grader."""
        if self._graded is None:
            from . import grader
            rows, job = grader.check_notebook(Path(self.path), exercise=self.exercise)
            outputs = {}
            for k, step in enumerate(job.steps or []):
                if step["kind"] == "check":
                    outputs[step["task"]] = (job.details or {}).get(k, "")
            self._graded = ({r.task: r for r in rows}, outputs)
        return self._graded


class TaskFailed(Exception):
    pass


class ExerciseTask(pytest.Item):
    def __init__(self, *args, cell: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.cell = cell

    def runtest(self):
        if self.cell["kind"] == "written":
            rows, _ = self.parent.graded()
            row = rows.get(self.name)
            pytest.skip(f"written answer, for the instructor: {row.message if row else 'not found'}")
        rows, outputs = self.parent.graded()
        row = rows[self.name]
        if not row.passed:
            raise TaskFailed(row, outputs.get(self.name, ""))

    def repr_failure(self, excinfo):
        if not isinstance(excinfo.value, TaskFailed):
            return super().repr_failure(excinfo)
        row, output = excinfo.value.args
        got = (f"{row.task}: {row.checks_passed}/{row.checks_total} checks passed" if row.status == "failed"
               else row.status)
        lines = [f"{self.parent.exercise}: task {row.task} ({row.level}) does not give the reference's verdict",
                 f"  expected (reference): {self.cell['expected']}",
                 f"  got:                  {got}"]
        failures = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith(f"{row.task}: ")][:8]
        if row.message and not (row.status == "failed" and failures):
            lines.append(f"  {row.message}")
        lines += ["  " + ln for ln in failures]
        lines.append("  (graded against the reference program of checks.json, as python -m minirl.classroom grade "
                     "does; the notebook's stored outputs are not used)")
        return "\n".join(lines)

    def reportinfo(self):
        return self.path, None, f"{self.parent.exercise}::{self.name}"
