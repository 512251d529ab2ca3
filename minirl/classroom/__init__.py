"""The classroom: exercise notebooks, their checkers, the student copies, a class's release and the grader.

A task in an exercise notebook is an answer cell where the student writes code, then a checker cell, e.g.
``check_expectile_loss(expectile_loss)``, which compares the code with minirl's own and prints one line per task.
Tasks come at three levels: a *function* (a loss, a target), an *agent* (one update of a whole agent) and an
*experiment* (a sweep whose numbers are checked, with a figure and a written answer for the instructor).

The files, in the order they depend on each other (each imports only those above it):

``layout.py``        where the book's exercises live: the repository, the reference notebooks, the chapters, the sweeps
``exports.py``       the names the notebooks import from the package, by checker module (``CHECKER_MODULES``)
``checks.py``        how a check compares (:class:`~minirl.classroom.checks.Checks`), the function tasks' checkers
``agent_checks.py``  the agent and experiment tasks: small fixed problems, seeded agents, reference sweeps
``stitching_checks.py`` the stitching chapter's tasks (one-step, BCQL's values, IQL's expectile on the gridworld)
``debug_checks.py``   the "find the bug" tasks: IQL's losses (chapter 4) and CQL's critic loss (chapter 3), fixed
``comparison_checks.py`` the comparison chapter's tasks (bootstrap intervals, the IQM, verdicts on the results)
``predict_checks.py`` the predict-then-run tasks of chapters 1 and 2 (a prediction, an experiment, a written answer)
``project_checks.py`` the end-to-end assignment (continuous CQL's update, trained on pendulum-expert, and a sweep)
``release.py``       from the reference notebooks (``notebooks/exercises/solutions/``): the student copies, the checks
                     file the grader runs, the book's exercises page, a class's release without solutions
``sandbox.py``       the child process that runs one submission (audit hook, limits; ``python -m
                     minirl.classroom.sandbox worker`` where fork is unavailable)
``grader.py``        grading a folder or one notebook against the reference: one row per student and task
``course.py``        a course folder outside the package (``$MINIRL_COURSE`` or ``--course DIR``): an instructor's own
                     reference notebooks and checker modules, graded as the built-in exercises are
``cli.py``           ``python -m minirl.classroom make-student | check | grade | class-release``
``nbval_plugin.py``  ``pytest --nbval SUBMISSION.ipynb``: a pytest plugin (minirl's ``pytest11`` entry point) that
                     grades a book exercise notebook with the grader, one test per task

Notebooks import the checkers and the exercise problems from here: ``from minirl.classroom import
check_expectile_loss``; where ``$MINIRL_COURSE`` names a course folder, its checkers too.
"""
# What the exercise notebooks import (``from minirl.classroom import check_expectile_loss``), loaded on first use
# (PEP 562): ``import minirl.classroom.nbval_plugin``, which pytest imports at startup through minirl's ``pytest11``
# entry point, must not import torch.
from .exports import _EXPORTS, _WHERE, CHECKER_MODULES  # noqa: E402,F401 - the table of what is exported


def __getattr__(name):
    if name not in _WHERE and name.startswith("check_"):  # a checker of the course folder in $MINIRL_COURSE
        from .course import current
        active = current()
        checker = active.checkers().get(name) if active is not None else None
        if checker is not None:
            return checker  # not kept here: another course may be set later in this process
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
