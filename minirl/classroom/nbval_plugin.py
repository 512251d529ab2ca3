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
    if name is None:
        return collected
    from .grader import load_checks
    specs = load_checks()
    if name not in specs:
        return collected  # not one of this book's exercises: nbval as usual
    kept = [c for c in (collected or []) if type(c).__module__ != "nbval.plugin"]
    return kept + [ExerciseNotebook.from_parent(parent, path=file_path, exercise=name, spec=specs[name])]


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
