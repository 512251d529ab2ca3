"""The gradebook's command line: ``python -m minirl.classroom.gradebook_cli intake | marks-template | gradebook |
feedback`` (:mod:`minirl.classroom.gradebook`, whose docstring has the whole sequence from an LMS download to a Canvas
CSV and a Gradescope CSV). Errors are one line on stderr with exit status 2; warnings (a roster student with no
submission, an unmarked written answer) are printed, one per line, and never stop an export.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import gradebook as gb
from .grader import GradingError
from .release import CHECKS_FILE, SOLUTIONS


def add_commands(sub) -> None:
    """The subcommands, on an argparse ``sub`` (``add_subparsers``): also what ``python -m minirl.classroom`` can
    register."""
    i = sub.add_parser("intake", help="an LMS download into DIR/<student>/<exercise>.ipynb (copies, and intake.csv)")
    i.add_argument("lms", choices=("canvas", "gradescope"))
    i.add_argument("download", type=Path, nargs="+", help="Canvas's unzipped download (a flat folder), or one or "
                   "more unzipped Gradescope exports (submission_metadata.yml + submission_<n>/)")
    i.add_argument("--roster", type=Path, required=True)
    i.add_argument("--out", type=Path, required=True, help="a new folder: the grader's DIR")
    i.add_argument("--checks", type=Path, default=CHECKS_FILE, help="the grader's checks file (its exercises)")
    t = sub.add_parser("marks-template", help="a blank marks file per notebook with written answers")
    t.add_argument("results", type=Path, nargs="+", help="the grader's --json or --csv output")
    t.add_argument("--roster", type=Path, help="check the results' students against it")
    t.add_argument("--out", type=Path, required=True, help="a folder: <notebook>.csv files are written there")
    t.add_argument("--solutions", type=Path, default=SOLUTIONS, help="the reference notebooks (their rubrics)")
    for name, help_ in (("gradebook", "totals per notebook and overall; Canvas and Gradescope CSVs"),
                        ("feedback", "a Markdown file per student and notebook")):
        g = sub.add_parser(name, help=help_)
        g.add_argument("results", type=Path, nargs="+", help="the grader's --json or --csv output")
        g.add_argument("--roster", type=Path, required=True)
        g.add_argument("--marks", type=Path, help="a folder of marks files (<notebook>.csv / .yaml)")
        g.add_argument("--settings", type=Path, help="the class settings (TOML): deadlines, the late penalty")
        g.add_argument("--submissions", type=Path, help="the graded folder (its intake.csv: submission times)")
        g.add_argument("--solutions", type=Path, default=SOLUTIONS, help="the reference notebooks (their rubrics)")
        g.add_argument("--require-marks", action="store_true", help="an unmarked written answer is an error")
        if name == "gradebook":
            g.add_argument("--out", type=Path, help="the class's gradebook CSV (every notebook's parts, totals)")
            g.add_argument("--markdown", type=Path, help="the gradebook as Markdown, with the late policy")
            g.add_argument("--canvas", type=Path, help="Canvas's gradebook import CSV")
            g.add_argument("--gradescope", type=Path, help="Gradescope's score CSV (Name, SID, Email, Total Score)")
            g.add_argument("--gradescope-notebook", help="the notebook whose total the Gradescope CSV carries "
                           "(default: the overall total)")
        else:
            g.add_argument("--out", type=Path, required=True, help="a folder: <student>/<notebook>.md")


def _book(a) -> tuple[gb.Gradebook, dict]:
    results = gb.load_results(a.results)
    roster = gb.load_roster(a.roster)
    rubrics = gb.load_rubrics(a.solutions)
    marks = gb.load_marks(gb.marks_paths(a.marks), results, rubrics) if a.marks else []
    settings = gb.load_settings(a.settings)
    subs = gb.load_submissions(a.submissions, [s.key for s in roster], sorted({r.notebook for r in results}),
                               settings)
    return gb.build(results, roster, marks, settings, subs, require_marks=a.require_marks), rubrics


def run(a) -> int:
    if a.command == "intake":
        roster = gb.load_roster(a.roster)
        specs = gb.exercise_specs(a.checks)
        if a.lms == "canvas":
            if len(a.download) != 1:
                raise gb.GradebookError("intake canvas: one download folder (Canvas's download is one flat folder)")
            found = gb.canvas_candidates(a.download[0], roster, specs)
        else:
            found = [c for d in a.download for c in gb.gradescope_candidates(d, roster, specs)]
        rows = gb.intake(found, a.out)
        chosen = [r for r in rows if r["chosen"] == "yes"]
        print(f"{len(chosen)} notebooks of {len({r['student'] for r in chosen})} students copied to {a.out}/<student>/"
              f" ({len(rows) - len(chosen)} older files superseded); where each came from: {a.out / 'intake.csv'}")
        for s in roster:
            if s.key not in {r["student"] for r in chosen}:
                print(f"warning: {s.key} ({s.name}): in the roster, nothing submitted")
        return 0
    if a.command == "marks-template":
        results = gb.load_results(a.results)
        if a.roster:
            gb.build(results, gb.load_roster(a.roster))  # a graded folder missing from the roster: an error
        for p in gb.write_marks_template(results, gb.load_rubrics(a.solutions), a.out):
            print(f"written: {p}")
        return 0
    book, rubrics = _book(a)
    for w in book.warnings:
        print(f"warning: {w}")
    if a.command == "feedback":
        paths = gb.write_feedback(book, a.out, rubrics)
        print(f"{len(paths)} feedback files written to {a.out}/<student>/<notebook>.md")
        return 0
    if not (a.out or a.markdown or a.canvas or a.gradescope):
        print(gb.summary_markdown(book))
    for path, rows in ((a.out, lambda: gb.summary_rows(book)), (a.canvas, lambda: gb.canvas_rows(book)),
                       (a.gradescope, lambda: gb.gradescope_rows(book, a.gradescope_notebook))):
        if path:
            gb.write_rows(rows(), path)
            print(f"written: {path}")
    if a.markdown:
        a.markdown.write_text(gb.summary_markdown(book), encoding="utf-8")
        print(f"written: {a.markdown}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m minirl.classroom.gradebook_cli",
                                description="after grading: LMS intake, manual marks, gradebook exports, feedback")
    sub = p.add_subparsers(dest="command", required=True)
    add_commands(sub)
    a = p.parse_args(argv)
    try:
        return run(a)
    except (gb.GradebookError, GradingError, FileExistsError) as e:
        print(f"{p.prog} {a.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
