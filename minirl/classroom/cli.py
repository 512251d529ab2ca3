"""The command line of the classroom: ``python -m minirl.classroom make-student | check | grade | class-release``,
and after the grades ``intake | marks-template | gradebook | feedback`` (:mod:`minirl.classroom.gradebook_cli`).

``make-student`` and ``class-release``: :mod:`minirl.classroom.release`; ``check`` (a student's self-check of one saved
notebook) and ``grade`` (a folder of submissions): :mod:`minirl.classroom.grader`, both against the reference, never
against what a notebook stores. Errors are one line on stderr with exit status 2.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import course, gradebook_cli, grader, release


def _print_check(rows, job) -> bool:
    """The self-check's report: one line per task, then the failed checks of each failed task."""
    check_step = {s["task"]: k for k, s in enumerate(job.steps or []) if s["kind"] == "check"}
    auto = [r for r in rows if r.level != "written"]
    for r in rows:
        if r.status == "passed":
            print(f"ok      {r.task} ({r.level}): {r.checks_passed}/{r.checks_total} checks passed")
        elif r.status == "manual":
            print(f"manual  {r.task} (written): {'answered, for the instructor' if r.answer else r.message}")
        elif r.status == "failed":
            print(f"FAILED  {r.task} ({r.level}): {r.checks_passed}/{r.checks_total} checks passed")
            output = (job.details or {}).get(check_step.get(r.task), "")
            failures = [ln for ln in output.splitlines() if ln.strip() and not ln.startswith(f"{r.task}: ")][:8]
            print("\n".join("        " + ln for ln in failures) or f"        {r.message}")
        else:
            print(f"FAILED  {r.task} ({r.level}): {r.status}" + (f": {r.message}" if r.message else ""))
    passed = sum(r.passed for r in auto)
    print(f"{job.notebook}: {passed}/{len(auto)} tasks passed"
          + (f", {len(rows) - len(auto)} written answer(s) for the instructor" if len(rows) > len(auto) else "")
          + " (graded against the reference, as the instructor's grader does)")
    return passed == len(auto)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m minirl.classroom", description="exercise notebooks: student copies "
                                "from the reference notebooks, the self-check, grading, a class's release")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make-student", help="write notebooks/exercises/*.ipynb, checks.json and book/exercises.md")
    m.add_argument("--check", action="store_true", help="only check they are up to date (exit 1 if not)")
    m.add_argument("--hide-solutions", action="store_true", help="book/exercises.md without the solutions")
    c = sub.add_parser("check", help="self-check one saved notebook: the grader's verdict for each task")
    c.add_argument("notebook", type=Path)
    c.add_argument("--exercise", help="which exercise it is (default: from the notebook, else its file name)")
    c.add_argument("--time-limit", type=float, default=None,
                   help=f"seconds (default: the notebook's own limit if its reference sets one, else "
                        f"{grader.DEFAULT_TIME_LIMIT:g})")
    g = sub.add_parser("grade", help="grade a folder of submissions: DIR/<student>/<exercise>.ipynb")
    g.add_argument("folder", type=Path)
    g.add_argument("--csv", type=Path, help="write one row per student and task to this CSV file")
    g.add_argument("--json", type=Path, help="write one row per student and task to this JSON file")
    g.add_argument("--time-limit", type=float, default=None,
                   help=f"seconds per notebook (default: each notebook's own limit if its reference sets one, else "
                        f"{grader.DEFAULT_TIME_LIMIT:g})")
    g.add_argument("--parallel", type=int, default=min(4, os.cpu_count() or 1),
                   help="notebooks graded at once (default %(default)s)")
    g.add_argument("--notebooks", help="comma-separated exercises to grade (default: every one submitted)")
    g.add_argument("--key", type=Path, help="a file holding the instructor's key: the graded inputs are drawn from it, "
                   "the student and the task (default: $MINIRL_GRADER_KEY, else new inputs every run)")
    r = sub.add_parser("class-release", help="the book and the student copies without any solution text")
    r.add_argument("out", type=Path, help="a new folder")
    r.add_argument("--no-build", action="store_true", help="only the student copies, not the book")
    for command in (m, c, g, r):
        command.add_argument("--course", type=Path, default=None,
                             help=f"a course folder of your own exercises (course.toml; default: ${course.ENV})")
    gradebook_cli.add_commands(sub)  # intake, marks-template, gradebook, feedback: after the grades
    a = p.parse_args(argv)
    prog = f"python -m minirl.classroom {a.command}"
    try:
        if getattr(a, "course", None) is not None:
            course.use(a.course)  # sets $MINIRL_COURSE for this command and the processes it starts
        if a.command in ("intake", "marks-template", "gradebook", "feedback"):
            return gradebook_cli.run(a)
        if a.command == "make-student" and course.current() is not None:  # the course's files, not the book's
            if a.hide_solutions:
                raise ValueError("--hide-solutions writes the book's exercises page; a course folder has none")
            stale = release.make_student_course(course.current(), check=a.check)
            verb = "out of date" if a.check else "written"
            print("\n".join(f"{verb}: {s}" for s in stale) or "all student copies of the course are up to date")
            return 1 if (a.check and stale) else 0
        if a.command == "make-student":
            stale = release.make_student(check=a.check, hide_solutions=a.hide_solutions)
            verb = "out of date" if a.check else "written"
            print("\n".join(f"{verb}: {s}" for s in stale) or "all student copies are up to date")
            return 1 if (a.check and stale) else 0
        if a.command == "check":
            rows, job = grader.check_notebook(a.notebook, time_limit=a.time_limit, exercise=a.exercise)
            print(grader.isolation_line())  # the report's first line: how the notebook was isolated
            _print_check(rows, job)
            return 0 if all(r.passed for r in rows if r.level != "written") else 1
        if a.command == "grade":
            notebooks = [n.strip().removesuffix(".ipynb") for n in a.notebooks.split(",")] if a.notebooks else None
            key = a.key.read_text().strip() if a.key else None
            if a.key and not key:
                raise grader.GradingError(f"--key {a.key}: the file is empty; expected the instructor's key (any text)")
            results, _ = grader.grade_folder(a.folder, time_limit=a.time_limit, parallel=a.parallel,
                                              notebooks=notebooks, key=key)
            print(grader.isolation_line())  # the report's first line: how the notebooks were isolated
            print(grader.table(results))
            if a.csv:
                grader.write_csv(results, a.csv)
            if a.json:
                grader.write_json(results, a.json)
            return 0
        leaks = release.class_release(a.out, build=not a.no_build)
        if leaks:
            print(f"{prog}: error: solution text found in {', '.join(leaks)}", file=sys.stderr)
            return 1
        print(f"class release written to {a.out}: notebooks/exercises/ (student copies, checks.json)"
              + ("" if a.no_build else ", book/_build/html/ (the book without solutions)")
              + (", course/ (the course folder without its solutions/)" if course.current() else ""))
        for line, where in release.shared_with_chapters().items():  # public by design: the chapter teaches it
            print(f"note: a solution line is also in {', '.join(where)} (the chapter's own code): {line}")
        return 0
    except (grader.GradingError, ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2

