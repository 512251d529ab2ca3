"""From the grader's verdicts to a gradebook: rosters, intake from an LMS, manual marks, late work, feedback, exports.

Everything here starts *after* grading: it reads the rows the grader wrote (``python -m minirl.classroom grade DIR
--json results.json`` or ``--csv``: one :class:`~minirl.classroom.grader.TaskResult` per student and task, its columns
:data:`~minirl.classroom.grader.FIELDS`) and never grades anything itself. The one step before grading is the intake:
an LMS's download laid out as the grader's ``DIR/<student>/<exercise>.ipynb``.

How a class goes from the LMS to the gradebook (the documented sequence)
------------------------------------------------------------------------
::

    # 0. a roster (CSV): one row per student, the grader's folder name -> name, ids, email, section
    #    columns (any order; folder or canvas_name, and name, required):
    #    folder,canvas_name,name,id,sis_user_id,sis_login_id,email,section
    # 1. intake: a Canvas bulk download (a flat folder of name_123_456_04_iql.ipynb) or a Gradescope export
    #    (submission_metadata.yml + submission_<n>/ folders), copied (never moved) into DIR/<student>/<exercise>.ipynb;
    #    DIR/intake.csv records where each file came from, its LMS timestamp or LATE marker, and the copies superseded
    python -m minirl.classroom.gradebook_cli intake canvas DOWNLOAD/ --roster roster.csv --out submissions/
    python -m minirl.classroom.gradebook_cli intake gradescope EXPORT/ --roster roster.csv --out submissions/
    # 2. grade (the grader, unchanged): one row per student and task
    python -m minirl.classroom grade submissions/ --json results.json
    # 3. a blank marks file per notebook with written answers: one row per student and written answer, its rubric's
    #    items (from the reference notebooks' rubric cells) and the student's text beside it
    python -m minirl.classroom.gradebook_cli marks-template results.json --roster roster.csv --out marks/
    #    ... fill in marks/<notebook>.csv: item (Full, Partial, None), points (at most the item's), comment
    # 4. the gradebook: totals per notebook and overall, manual marks merged, the late policy of class.toml applied;
    #    Canvas's gradebook CSV and Gradescope's score CSV
    python -m minirl.classroom.gradebook_cli gradebook results.json --roster roster.csv --marks marks/ \\
        --settings class.toml --submissions submissions/ --out gradebook.csv --markdown gradebook.md \\
        --canvas canvas.csv --gradescope gradescope.csv
    # 5. feedback: one Markdown file per student and notebook, to hand back
    python -m minirl.classroom.gradebook_cli feedback results.json --roster roster.csv --marks marks/ \\
        --settings class.toml --submissions submissions/ --out feedback/

The class settings (TOML, every key optional)::

    [class]
    name = "Offline RL, spring 2027"        # the gradebook's title
    [late]
    deadline = 2027-02-01T23:59:00+01:00   # every notebook's deadline (a TOML date-time or an ISO string, with offset)
    grace_minutes = 10                      # submissions this late are on time
    penalty_per_day = 0.1                   # deducted per day late (or part of one), a fraction of the points possible
    max_days = 5                            # later than this: 0 points
    canvas_late_days = 1                    # days late of a file Canvas marked LATE whose time is not known
    timestamps = "lms"                      # "lms": the LMS's times and LATE markers only; "files": also file times
    [late.deadlines]                        # per notebook, overriding deadline
    "06_project" = 2027-03-01T23:59:00+01:00
    [canvas.columns]                        # a notebook's Canvas column, e.g. an existing assignment "Name (id)"
    "04_iql" = "Exercise 4: IQL (98765)"

Bad input is a one-line :class:`GradebookError` naming the file, the row and the field, and what was expected.
Nothing is dropped silently: a graded folder missing from the roster is an error; a roster student with no
submission is in every export with 0 points and is listed in the warnings; an unmarked written answer counts 0 and is
listed in the warnings (``--require-marks`` makes it an error).

The formats, as their documentation states them
-----------------------------------------------
* Canvas, "How do I import grades in the Gradebook?" (community.canvaslms.com/t5/Instructor-Guide/
  How-do-I-import-grades-in-the-Gradebook/ta-p/807) and the gradebook export it starts from: one row per student;
  the columns ``Student`` (the sortable name), ``ID`` (Canvas's user id), ``SIS User ID``, ``SIS Login ID``,
  ``Section``, then one column per assignment (an existing assignment is matched by ``Name (id)``, a new name creates
  an assignment); the second row of Canvas's export, ``Points Possible``, holds each assignment's points. A student is
  identified by one of Student / ID / SIS User ID (Ohio State's Carmen (Canvas) guide, "Import a CSV file to Carmen
  Grades": "Student Name ... OR Student ID OR Student SIS User ID ... SIS Login ID ... Section ... Assignment Name").
  Canvas computes its own totals (its "Current Score" / "Final Score" columns are read-only on import, VCU's
  "Gradebook Action Menu" notes), so the CSV carries no total column of ours, which would become an assignment.
* Gradescope, "Adding Students and Staff" (guides.gradescope.com/hc/en-us/articles/21926598776333): a roster CSV with
  headers, a name (one column, or first and last), a unique email per student (what Gradescope matches on), an SID and
  sections optional; a score upload matches students the same way. So: ``Name, SID, Email`` and the score column
  ``Total Score`` (the name of the column in Gradescope's own grade export), one row per student.
* Gradescope's "Export Submissions": a folder per submission (``submission_<n>/``) and ``submission_metadata.yml``,
  keyed by that folder's name, with ``:submitters:`` (``:name:``, ``:sid:``, ``:email:``) and ``:created_at:``
  (the submission time); Gradescope's autograder documentation ("Submission Metadata",
  gradescope-autograders.readthedocs.io) describes the same fields (users' email and name, ``created_at``).
* Canvas's "Download Submissions": one flat folder, ``<name>_<user id>_<file id>_<file name>``, ``LATE`` after the
  name for a late submission (``<name>_LATE_<user id>_<file id>_<file name>``); a resubmitted file name can carry
  Canvas's ``-1``, ``-2`` suffix before its extension.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .grader import FIELDS, LEVELS, TaskResult, exercise_of, load_checks, read_submission
from .release import CHECKS_FILE, SOLUTIONS


class GradebookError(ValueError):
    """Bad input to the gradebook (a roster, a results file, a marks file, the settings): one line for the user."""


def _number(x: float) -> str:
    """A score as a CSV cell: ``4``, ``3.5``, ``1.67``."""
    x = round(float(x), 2)
    return str(int(x)) if x == int(x) else f"{x:g}"


def _read_csv(path: Path, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> list[tuple[int, dict]]:
    """``[(row number in the file, {column: value})]`` for a CSV whose header holds only ``allowed`` columns and
    every ``required`` one; row 1 is the header."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise GradebookError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise GradebookError(f"{path}: not UTF-8 text (save the CSV as UTF-8)") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise GradebookError(f"{path}: empty file; expected a header row with the columns {', '.join(allowed)}")
    header = [h.strip() for h in header]
    for h in header:
        if h not in allowed:
            raise GradebookError(f"{path}: row 1: unknown column {h!r}; expected columns among {', '.join(allowed)}")
    dup = next((h for h in header if header.count(h) > 1), None)
    if dup:
        raise GradebookError(f"{path}: row 1: column {dup!r} appears twice")
    for r in required:
        if r not in header:
            raise GradebookError(f"{path}: row 1: no column {r!r} (required: {', '.join(required)})")
    rows = []
    for n, values in enumerate(reader, start=2):
        if not any(v.strip() for v in values):
            continue
        if len(values) > len(header):
            raise GradebookError(f"{path}: row {n}: {len(values)} values but the header has {len(header)} columns")
        values = values + [""] * (len(header) - len(values))
        rows.append((n, {h: v.strip() for h, v in zip(header, values)}))
    return rows


# ---------------------------------------------------------------------------------------------------------------
# The roster
# ---------------------------------------------------------------------------------------------------------------

ROSTER_COLUMNS = ("folder", "canvas_name", "name", "id", "sis_user_id", "sis_login_id", "email", "section")


@dataclass
class Student:
    """One row of the roster. ``key`` is the grader's folder name (``DIR/<key>/``): ``folder``, else ``canvas_name``."""
    key: str
    name: str                      # as Canvas shows it in its Student column, e.g. "Alvarez, Ana"
    id: str = ""                   # Canvas's user id (the number in a bulk download's file names)
    sis_user_id: str = ""          # the institution's student id (Gradescope's SID)
    sis_login_id: str = ""
    email: str = ""
    section: str = ""
    canvas_name: str = ""          # the name part of Canvas's file names ("alvarezana")


def load_roster(path: Path) -> list[Student]:
    """The roster CSV, validated: a column not in :data:`ROSTER_COLUMNS`, a row without a name or a folder, a duplicate
    folder, Canvas id, SIS user id, Canvas name or email, an email without ``@``: a one-line error."""
    rows = _read_csv(path, ROSTER_COLUMNS, required=("name",))
    students: list[Student] = []
    seen: dict[tuple[str, str], int] = {}
    for n, row in rows:
        key = row.get("folder") or row.get("canvas_name", "")
        if not key:
            raise GradebookError(f"{path}: row {n}: folder: empty, and no canvas_name either (expected the student's "
                                 "folder name in the graded DIR/<folder>/)")
        if "/" in key or "\\" in key or key.startswith("."):
            raise GradebookError(f"{path}: row {n}: folder: {key!r} is not a folder name (no slashes, no leading dot)")
        if not row.get("name"):
            raise GradebookError(f"{path}: row {n}: name: empty (expected the student's name, e.g. 'Alvarez, Ana')")
        email = row.get("email", "")
        if email and "@" not in email:
            raise GradebookError(f"{path}: row {n}: email: {email!r} is not an email address")
        s = Student(key=key, name=row["name"], id=row.get("id", ""), sis_user_id=row.get("sis_user_id", ""),
                    sis_login_id=row.get("sis_login_id", ""), email=email, section=row.get("section", ""),
                    canvas_name=row.get("canvas_name", ""))
        for column, value in (("folder", s.key), ("id", s.id), ("sis_user_id", s.sis_user_id),
                              ("canvas_name", s.canvas_name), ("email", s.email.lower())):
            if value:
                if (column, value) in seen:
                    raise GradebookError(f"{path}: row {n}: {column}: duplicate {value!r} (also in row "
                                         f"{seen[column, value]})")
                seen[column, value] = n
        students.append(s)
    if not students:
        raise GradebookError(f"{path}: no students (expected one row per student under the header)")
    return students


# ---------------------------------------------------------------------------------------------------------------
# The grader's results
# ---------------------------------------------------------------------------------------------------------------

_KNOWN_FIELDS = ("student", "notebook", "task", "level", "status", "passed", "checks_passed", "checks_total", "message",
                 "answer", "points", "points_possible")  # TaskResult's fields read with their types
OPTIONAL_RESULT_FIELDS = ("details",)  # read if a results file carries them: the checks' full output, for feedback


def _result_of(raw: dict, where: str) -> TaskResult:
    for f in FIELDS:
        if f not in raw:
            raise GradebookError(f"{where}: no field {f!r} (expected the grader's columns: {', '.join(FIELDS)})")
    for f in raw:
        if f not in FIELDS and f not in OPTIONAL_RESULT_FIELDS:
            raise GradebookError(f"{where}: unknown field {f!r} (expected the grader's columns: {', '.join(FIELDS)})")

    def integer(name: str, optional: bool) -> int | None:
        v = raw[name]
        if v in ("", None) and optional:
            return None
        try:
            if isinstance(v, bool) or (isinstance(v, float) and v != int(v)):
                raise ValueError
            return int(v)
        except (TypeError, ValueError):
            raise GradebookError(f"{where}: {name}: {v!r} is not a whole number") from None

    passed = raw["passed"]
    if isinstance(passed, str):
        if passed not in ("True", "False"):
            raise GradebookError(f"{where}: passed: {passed!r}; expected True or False")
        passed = passed == "True"
    if not isinstance(passed, bool):
        raise GradebookError(f"{where}: passed: {passed!r}; expected true or false")
    level = str(raw["level"])
    if level not in LEVELS and level != "-":
        raise GradebookError(f"{where}: level: {level!r}; expected one of {', '.join(LEVELS)} (or - for a notebook "
                             "note)")
    r = TaskResult(student=str(raw["student"]), notebook=str(raw["notebook"]), task=str(raw["task"]), level=level,
                   status=str(raw["status"]), passed=passed, checks_passed=integer("checks_passed", True),
                   checks_total=integer("checks_total", True), message=str(raw["message"] or ""),
                   answer=str(raw["answer"] or ""), points=integer("points", True),
                   points_possible=integer("points_possible", False),
                   **{f: raw[f] for f in FIELDS if f not in _KNOWN_FIELDS})  # a field the grader adds: kept as read
    if not r.student or not r.notebook or not r.task:
        raise GradebookError(f"{where}: student, notebook and task must not be empty")
    if r.points is not None and not 0 <= r.points <= r.points_possible:
        raise GradebookError(f"{where}: points: {r.points} outside 0..points_possible ({r.points_possible})")
    details = raw.get("details")
    # the checks' full output, where a results file carries it (feedback shows it); not a TaskResult field
    r.details = details if isinstance(details, str) else "\n".join(map(str, details)) if details else ""
    return r


def load_results(paths: list[Path] | Path) -> list[TaskResult]:
    """The grader's rows from its CSV (``grade --csv``) or JSON (``grade --json``) files, by suffix, validated against
    :data:`~minirl.classroom.grader.FIELDS`; the same student, notebook and task twice is an error."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    out: list[TaskResult] = []
    seen: dict[tuple[str, str, str], str] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise GradebookError(f"{path}: no such results file (expected the grader's --csv or --json output)")
        if path.suffix.lower() == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise GradebookError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
            if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
                raise GradebookError(f"{path}: expected a JSON list of the grader's rows (grade --json)")
            raws = [(f"{path}: row {i + 1}", d) for i, d in enumerate(data)]
        elif path.suffix.lower() == ".csv":
            raws = [(f"{path}: row {n}", d) for n, d in _read_csv(path, tuple(FIELDS) + OPTIONAL_RESULT_FIELDS,
                                                                   required=tuple(FIELDS))]
        else:
            raise GradebookError(f"{path}: expected the grader's .csv or .json output, got a {path.suffix or 'no'} "
                                 "suffix")
        for where, raw in raws:
            r = _result_of(raw, where)
            k = (r.student, r.notebook, r.task)
            if k in seen and r.task != "(notebook)":
                raise GradebookError(f"{where}: {r.student}'s {r.notebook} task {r.task} is also in {seen[k]}")
            seen[k] = where
            out.append(r)
    if not out:
        raise GradebookError(f"{', '.join(map(str, paths))}: no rows (grade a folder with --csv or --json first)")
    return out


# ---------------------------------------------------------------------------------------------------------------
# Rubrics: the written answers' rubric items, from the reference notebooks
# ---------------------------------------------------------------------------------------------------------------

_RUBRIC_HEAD = re.compile(r"^\*\*Rubric \((\w+), (\d+) points?\)\.\*\*")
_RUBRIC_ITEM = re.compile(r"\*\*(\w[\w -]*?) \((\d+(?:\.\d+)?)\):\*\*")


def load_rubrics(solutions: Path = SOLUTIONS) -> dict[str, dict[str, dict]]:
    """``{notebook: {written task: {"points": n, "items": {"Full": 4, "Partial": 2, "None": 0}}}}`` from the rubric
    cells (tagged ``rubric``, ``**Rubric (<task>, <n> points).**`` then ``**<Item> (<points>):**`` lines) of the
    reference notebooks in ``solutions`` (read only; the instructor's, never in a class's release)."""
    solutions = Path(solutions)
    out: dict[str, dict[str, dict]] = {}
    for path in sorted(solutions.glob("*.ipynb")):
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise GradebookError(f"{path}: not a notebook (invalid JSON)") from None
        for cell in nb.get("cells", []):
            if "rubric" not in (cell.get("metadata") or {}).get("tags", []):
                continue
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            m = _RUBRIC_HEAD.match(src)
            if not m:
                raise GradebookError(f"{path}: a rubric cell does not start '**Rubric (<task>, <points> points).**'")
            items = {name: float(p) for name, p in _RUBRIC_ITEM.findall(src)}
            if not items:
                raise GradebookError(f"{path}: the rubric of {m.group(1)} has no '**<item> (<points>):**' items")
            out.setdefault(path.stem, {})[m.group(1)] = {"points": int(m.group(2)), "items": items}
    return out


def _items_text(rubric: dict) -> str:
    return " / ".join(f"{k} ({_number(v)})" for k, v in rubric["items"].items())


# ---------------------------------------------------------------------------------------------------------------
# Manual marks
# ---------------------------------------------------------------------------------------------------------------

MARK_COLUMNS = ("student", "task", "item", "points", "comment", "items", "answer")  # items, answer: for reading only


@dataclass
class Mark:
    student: str
    notebook: str
    task: str
    item: str
    points: float
    comment: str = ""
    where: str = ""


def _written_tasks(results: list[TaskResult]) -> dict[str, dict[str, int]]:
    """``{notebook: {written task: points possible}}`` in the results."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        if r.level == "written":
            out.setdefault(r.notebook, {})[r.task] = r.points_possible
    return out


def _mark_rows(path: Path) -> list[tuple[str, dict]]:
    if path.suffix.lower() == ".csv":
        return [(f"{path}: row {n}", row) for n, row in _read_csv(path, MARK_COLUMNS, required=("student", "task",
                                                                                                 "item", "points"))]
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise GradebookError(f"{path}: reading YAML marks needs PyYAML (pip install pyyaml), or use a CSV") \
                from None
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise GradebookError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
        marks = data.get("marks") if isinstance(data, dict) else None
        if not isinstance(marks, list) or not all(isinstance(m, dict) for m in marks):
            raise GradebookError(f"{path}: expected 'marks:' and a list of {{student, task, item, points, comment}}")
        extra = set(data) - {"marks", "notebook"}
        if extra:
            raise GradebookError(f"{path}: unknown key {sorted(extra)[0]!r}; expected 'notebook' and 'marks'")
        rows = []
        for i, m in enumerate(marks, start=1):
            for k in m:
                if k not in MARK_COLUMNS:
                    raise GradebookError(f"{path}: mark {i}: unknown field {k!r}; expected {', '.join(MARK_COLUMNS)}")
            rows.append((f"{path}: mark {i}", {k: "" if v is None else str(v).strip() for k, v in m.items()}))
        return rows
    raise GradebookError(f"{path}: a marks file is .csv, .yaml or .yml, got {path.suffix or 'no suffix'}")


def load_marks(paths: list[Path], results: list[TaskResult], rubrics: dict) -> list[Mark]:
    """The marks files (one per notebook, named ``<notebook>.csv`` / ``.yaml``), validated against the results and
    the rubrics: an unknown notebook, student or written task, an item the task's rubric does not have, points that
    are not a number, negative, or above the item's maximum, the same answer marked twice: a one-line error naming
    the file, row and field. A row whose item and points are both empty is an unmarked answer (a template's row)."""
    written = _written_tasks(results)
    students = {r.student for r in results}
    out: list[Mark] = []
    seen: dict[tuple[str, str, str], str] = {}
    for path in map(Path, paths):
        notebook = path.stem
        if notebook not in written:
            raise GradebookError(f"{path}: notebook {notebook!r} has no written answers in the results (expected a "
                                 f"file named after one of: {', '.join(sorted(written)) or 'none'})")
        for where, row in _mark_rows(path):
            student, task, item, points = (row.get(k, "") for k in ("student", "task", "item", "points"))
            if student not in students:
                raise GradebookError(f"{where}: student: {student!r} is not a student in the results")
            if task not in written[notebook]:
                raise GradebookError(f"{where}: task: {task!r} is not a written answer of {notebook} (expected one "
                                     f"of {', '.join(written[notebook])})")
            if not item and not points:
                continue  # not marked yet
            rubric = rubrics.get(notebook, {}).get(task)
            if rubric is None:
                raise GradebookError(f"{where}: task: no rubric for {task} in the reference notebook {notebook}.ipynb "
                                     "(expected a rubric cell; pass --solutions)")
            if rubric["points"] != written[notebook][task]:
                raise GradebookError(f"{where}: task: the rubric of {task} is worth {rubric['points']} points but "
                                     f"the results say {written[notebook][task]} (regrade with a current checks file)")
            if item not in rubric["items"]:
                raise GradebookError(f"{where}: item: {item!r} is not an item of {task}'s rubric (expected one of "
                                     f"{_items_text(rubric)})")
            try:
                value = float(points) if points else rubric["items"][item]
            except ValueError:
                raise GradebookError(f"{where}: points: {points!r} is not a number") from None
            if not math.isfinite(value) or value < 0:
                raise GradebookError(f"{where}: points: {points!r}; expected a number from 0 to the item's "
                                     f"{_number(rubric['items'][item])}")
            if value > rubric["items"][item]:
                raise GradebookError(f"{where}: points: {_number(value)} is above the maximum of {task}'s item "
                                     f"{item} ({_number(rubric['items'][item])})")
            key = (student, notebook, task)
            if key in seen:
                raise GradebookError(f"{where}: student: {student}'s {task} is already marked in {seen[key]}")
            seen[key] = where
            out.append(Mark(student, notebook, task, item, value, row.get("comment", ""), where))
    return out


def marks_paths(folder: Path) -> list[Path]:
    """The marks files of a folder: ``*.csv``, ``*.yaml``, ``*.yml``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GradebookError(f"{folder}: no such folder of marks (expected <notebook>.csv files; write them with "
                             "marks-template)")
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in (".csv", ".yaml", ".yml"))


def write_marks_template(results: list[TaskResult], rubrics: dict, out: Path) -> list[Path]:
    """A blank marks file per notebook with written answers, ``out/<notebook>.csv``: one row per submitted written
    answer (student, task, the rubric's items, the student's text); an existing file is never overwritten."""
    out = Path(out)
    written = _written_tasks(results)
    if not written:
        raise GradebookError("the results hold no written answers: no marks to enter")
    targets = {nb: out / f"{nb}.csv" for nb in written}
    for path in targets.values():
        if path.exists():
            raise GradebookError(f"{path}: already exists (a marks file is never overwritten; move it away first)")
    out.mkdir(parents=True, exist_ok=True)
    for nb, path in targets.items():
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["student", "task", "item", "points", "comment", "items", "answer"])
            for r in results:
                if r.notebook == nb and r.level == "written" and r.status == "manual":
                    rubric = rubrics.get(nb, {}).get(r.task)
                    if rubric is None:
                        raise GradebookError(f"no rubric for {r.task} in the reference notebook {nb}.ipynb (expected a "
                                             "rubric cell; pass --solutions)")
                    w.writerow([r.student, r.task, "", "", "", _items_text(rubric), r.answer])
    return list(targets.values())


# ---------------------------------------------------------------------------------------------------------------
# Class settings and late work
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Settings:
    deadline: dt.datetime | None = None
    deadlines: dict[str, dt.datetime] = field(default_factory=dict)
    grace_minutes: float = 0.0
    penalty_per_day: float = 0.0
    max_days: int | None = None
    canvas_late_days: int = 1
    timestamps: str = "lms"
    canvas_columns: dict[str, str] = field(default_factory=dict)
    name: str = ""                 # [class] name: the gradebook's title

    def deadline_of(self, notebook: str) -> dt.datetime | None:
        return self.deadlines.get(notebook, self.deadline)

    def policy(self) -> str:
        """The late policy in one sentence, for the gradebook."""
        if self.deadline is None and not self.deadlines:
            return "late policy: none (no deadline set)"
        when = [f"deadline {self.deadline.isoformat()}"] if self.deadline else []
        when += [f"{nb} {d.isoformat()}" for nb, d in self.deadlines.items()]
        rule = (f"{_number(self.penalty_per_day * 100)}% of the notebook's points deducted per day late or part of one"
                if self.penalty_per_day else "no deduction")
        if self.max_days is not None:
            rule += f", 0 points after {self.max_days} days"
        return (f"late policy: {'; '.join(when)}; {_number(self.grace_minutes)} minutes' grace; {rule}; a file Canvas "
                f"marked LATE without a known time counts {self.canvas_late_days} day(s) late; times from "
                f"{'the LMS only' if self.timestamps == 'lms' else 'the LMS, else the files'}")


def _datetime(v, where: str) -> dt.datetime:
    if isinstance(v, str):
        try:
            v = dt.datetime.fromisoformat(v)
        except ValueError:
            raise GradebookError(f"{where}: {v!r} is not an ISO date and time (e.g. 2027-02-01T23:59:00+01:00)") \
                from None
    if not isinstance(v, dt.datetime):
        raise GradebookError(f"{where}: {v!r}; expected a date and time with its offset, e.g. "
                             "2027-02-01T23:59:00+01:00")
    if v.tzinfo is None:
        raise GradebookError(f"{where}: {v.isoformat()} has no time zone; add its offset, e.g. +01:00 or Z")
    return v


def load_settings(path: Path | None) -> Settings:
    """The class settings (TOML; see the module's docstring); an unknown key or a bad value: a one-line error."""
    if path is None:
        return Settings()
    import tomllib
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GradebookError(f"{path}: no such settings file") from None
    except tomllib.TOMLDecodeError as e:
        raise GradebookError(f"{path}: not valid TOML ({e})") from None
    s = Settings()
    known = {"late": ("deadline", "deadlines", "grace_minutes", "penalty_per_day", "max_days", "canvas_late_days",
                      "timestamps"), "canvas": ("columns",), "class": ("name",)}
    for table, value in data.items():
        if table not in known or not isinstance(value, dict):
            raise GradebookError(f"{path}: unknown table [{table}]; expected [{'], ['.join(known)}]")
        for key in value:
            if key not in known[table]:
                raise GradebookError(f"{path}: [{table}] {key}: unknown key; expected one of {', '.join(known[table])}")
    late = data.get("late", {})
    if "deadline" in late:
        s.deadline = _datetime(late["deadline"], f"{path}: [late] deadline")
    for nb, d in late.get("deadlines", {}).items():
        s.deadlines[nb] = _datetime(d, f"{path}: [late.deadlines] {nb}")

    def num(key: str, lo: float, hi: float, integer: bool = False):
        v = late[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)) \
                or not lo <= v <= hi:
            raise GradebookError(f"{path}: [late] {key}: {v!r}; expected a{'' if integer else ' number'}"
                                 f"{'n integer' if integer else ''} from {_number(lo)} to {_number(hi)}")
        return v
    if "grace_minutes" in late:
        s.grace_minutes = float(num("grace_minutes", 0, 10_000))
    if "penalty_per_day" in late:
        s.penalty_per_day = float(num("penalty_per_day", 0, 1))
    if "max_days" in late:
        s.max_days = num("max_days", 0, 10_000, integer=True)
    if "canvas_late_days" in late:
        s.canvas_late_days = num("canvas_late_days", 0, 10_000, integer=True)
    if "timestamps" in late:
        if late["timestamps"] not in ("lms", "files"):
            raise GradebookError(f"{path}: [late] timestamps: {late['timestamps']!r}; expected \"lms\" or \"files\"")
        s.timestamps = late["timestamps"]
    name = data.get("class", {}).get("name", "")
    if not isinstance(name, str):
        raise GradebookError(f"{path}: [class] name: expected text, got {name!r}")
    s.name = name.strip()
    for nb, col in data.get("canvas", {}).get("columns", {}).items():
        if not isinstance(col, str) or not col.strip():
            raise GradebookError(f"{path}: [canvas.columns] {nb}: expected the Canvas column's name as text")
        s.canvas_columns[nb] = col.strip()
    return s


@dataclass
class Submission:
    """When a notebook was submitted, as the LMS (or the file) says."""
    at: dt.datetime | None = None
    late_marker: bool = False      # Canvas's LATE in the file name
    source: str = ""               # "canvas", "gradescope", "file time"


def days_late(sub: Submission | None, deadline: dt.datetime | None, s: Settings) -> tuple[int, str]:
    """``(days late, why)``: days or parts of days after the deadline and its grace; a Canvas LATE marker with no
    later time known counts :attr:`Settings.canvas_late_days`."""
    if deadline is None or sub is None:
        return 0, ""
    days = 0
    why = ""
    if sub.at is not None:
        late_by = sub.at - deadline - dt.timedelta(minutes=s.grace_minutes)
        if late_by > dt.timedelta(0):
            days = math.ceil(late_by / dt.timedelta(days=1))
            why = f"submitted {sub.at.isoformat()} ({sub.source}), deadline {deadline.isoformat()}"
    if sub.late_marker and days == 0:
        days = s.canvas_late_days
        why = "Canvas marked the submission LATE" + ("" if sub.at is None else
                                                    f" (its time {sub.at.isoformat()} is within the deadline)")
    return days, why


def penalty_of(days: int, earned: float, possible: int, s: Settings) -> float:
    """Points deducted: ``penalty_per_day`` x the points possible per day late, at most what was earned; everything
    after ``max_days``."""
    if days <= 0:
        return 0.0
    if s.max_days is not None and days > s.max_days:
        return earned
    return min(earned, days * s.penalty_per_day * possible)


INTAKE_FIELDS = ("student", "notebook", "source", "lms", "late_marker", "submitted_at", "chosen")


def load_submissions(folder: Path | None, students: list[str], notebooks: list[str], s: Settings) \
        -> dict[tuple[str, str], Submission]:
    """The submission times of a graded folder: ``folder/intake.csv`` (written by the intake) for the LMS's, else,
    with ``timestamps = "files"``, each ``folder/<student>/<notebook>.ipynb``'s modification time."""
    out: dict[tuple[str, str], Submission] = {}
    if folder is None:
        return out
    folder = Path(folder)
    if not folder.is_dir():
        raise GradebookError(f"{folder}: no such folder of submissions")
    manifest = folder / "intake.csv"
    if manifest.exists():
        for n, row in _read_csv(manifest, INTAKE_FIELDS, required=INTAKE_FIELDS):
            if row["chosen"] != "yes":
                continue
            at = _datetime(row["submitted_at"], f"{manifest}: row {n}: submitted_at") if row["submitted_at"] else None
            out[row["student"], row["notebook"]] = Submission(at, row["late_marker"] == "yes", row["lms"])
    if s.timestamps == "files":
        for student in students:
            for nb in notebooks:
                p = folder / student / f"{nb}.ipynb"
                sub = out.get((student, nb))
                if p.is_file() and (sub is None or sub.at is None):
                    at = dt.datetime.fromtimestamp(p.stat().st_mtime, tz=dt.timezone.utc)
                    out[student, nb] = Submission(at, sub.late_marker if sub else False, "file time")
    return out


# ---------------------------------------------------------------------------------------------------------------
# The gradebook
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class NotebookScore:
    """One student's notebook: auto-graded points, manual marks, late deduction, total."""
    notebook: str
    submitted: bool
    auto: float
    auto_possible: int
    written: float
    written_possible: int
    rows: list[TaskResult]
    marks: dict[str, Mark]
    unmarked: list[str]
    days_late: int = 0
    late_why: str = ""
    penalty: float = 0.0

    @property
    def possible(self) -> int:
        return self.auto_possible + self.written_possible

    @property
    def total(self) -> float:
        return max(0.0, self.auto + self.written - self.penalty)


@dataclass
class Gradebook:
    students: list[Student]
    notebooks: list[str]
    scores: dict[tuple[str, str], NotebookScore]
    settings: Settings
    warnings: list[str]

    def total(self, key: str) -> float:
        return sum(self.scores[key, nb].total for nb in self.notebooks)

    def possible(self) -> int:
        return sum(self.possible_of(nb) for nb in self.notebooks)

    def possible_of(self, notebook: str) -> int:
        return next(self.scores[s.key, notebook].possible for s in self.students)


def _tasks_of_notebooks(results: list[TaskResult]) -> dict[str, list[tuple[str, str, int]]]:
    """``{notebook: [(task, level, points possible)]}``, the same for every student (else the results come from
    different checks files: an error)."""
    out: dict[str, list[tuple[str, str, int]]] = {}
    first: dict[str, str] = {}
    per: dict[tuple[str, str], list[tuple[str, str, int]]] = {}
    for r in results:
        if r.task != "(notebook)":
            per.setdefault((r.student, r.notebook), []).append((r.task, r.level, r.points_possible))
    for (student, nb), tasks in per.items():
        if nb not in out:
            out[nb], first[nb] = tasks, student
        elif tasks != out[nb]:
            raise GradebookError(f"the results list {nb}'s tasks differently for {first[nb]} and {student} (graded "
                                 "against different checks files? regrade them together)")
    return out


def build(results: list[TaskResult], roster: list[Student], marks: list[Mark] = (), settings: Settings | None = None,
          submissions: dict[tuple[str, str], Submission] | None = None, require_marks: bool = False) -> Gradebook:
    """The gradebook of a class: one :class:`NotebookScore` per roster student and graded notebook.

    A graded folder that is not in the roster is an error (its grades could go to nobody); a roster student with no
    rows is in the gradebook with every notebook not submitted, and in ``warnings``; an unmarked written answer counts
    0 and is in ``warnings`` (an error with ``require_marks``)."""
    settings = settings or Settings()
    submissions = submissions or {}
    keys = {s.key for s in roster}
    graded = sorted({r.student for r in results})
    unknown = [g for g in graded if g not in keys]
    if unknown:
        raise GradebookError(f"graded folder{'s' if len(unknown) > 1 else ''} not in the roster: {', '.join(unknown)} "
                             "(add a roster row with folder=<name>, or rename the folder)")
    tasks = _tasks_of_notebooks(results)
    notebooks = sorted(tasks)
    warnings = [f"{s.key} ({s.name}): in the roster, no submission graded: 0 points for every notebook"
                for s in roster if s.key not in set(graded)]
    by: dict[tuple[str, str], list[TaskResult]] = {}
    for r in results:
        by.setdefault((r.student, r.notebook), []).append(r)
    mark_of = {(m.student, m.notebook, m.task): m for m in marks}
    scores: dict[tuple[str, str], NotebookScore] = {}
    for s in roster:
        for nb in notebooks:
            rows = by.get((s.key, nb), [])
            task_rows = [r for r in rows if r.task != "(notebook)"]
            submitted = bool(task_rows) and not all(r.status == "not submitted" for r in task_rows)
            auto = [r for r in task_rows if r.level != "written"]
            written = [r for r in task_rows if r.level == "written"]
            spec = tasks[nb]
            ms = {r.task: mark_of[s.key, nb, r.task] for r in written if (s.key, nb, r.task) in mark_of}
            unmarked = [r.task for r in written if submitted and r.task not in ms]
            for t in unmarked:
                msg = f"{s.key}: {nb} {t}: not marked (counted 0)"
                if require_marks:
                    raise GradebookError(msg.replace(" (counted 0)", "") + " (enter it in the marks file, or drop "
                                         "--require-marks)")
                warnings.append(msg)
            if not submitted and ms:
                raise GradebookError(f"{next(iter(ms.values())).where}: student: {s.key} did not submit {nb}, but "
                                     "the answer is marked")
            score = NotebookScore(
                nb, submitted, auto=float(sum(r.points or 0 for r in auto)),
                auto_possible=sum(p for _, lvl, p in spec if lvl != "written"),
                written=float(sum(m.points for m in ms.values())),
                written_possible=sum(p for _, lvl, p in spec if lvl == "written"), rows=rows, marks=ms,
                unmarked=unmarked)
            if submitted:
                score.days_late, score.late_why = days_late(submissions.get((s.key, nb)), settings.deadline_of(nb),
                                                            settings)
                score.penalty = penalty_of(score.days_late, score.auto + score.written, score.possible, settings)
            scores[s.key, nb] = score
    for r in results:
        if r.task == "(notebook)":
            warnings.append(f"{r.student}: {r.notebook}: {r.message}")
    return Gradebook(list(roster), notebooks, scores, settings, warnings)


# ---------------------------------------------------------------------------------------------------------------
# Exports
# ---------------------------------------------------------------------------------------------------------------

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # Canvas's gradebook export/import
CANVAS_POINTS_POSSIBLE = "    Points Possible"  # the first cell of Canvas's second row, as its export writes it
GRADESCOPE_COLUMNS = ["Name", "SID", "Email", "Total Score"]  # Gradescope matches on Email (unique), SID optional


def canvas_rows(book: Gradebook) -> list[list[str]]:
    """Canvas's gradebook CSV: the identity columns, one column per notebook (its ``[canvas.columns]`` name, else the
    notebook's), the Points Possible row, one row per student with the notebook's total after any late deduction."""
    columns = [book.settings.canvas_columns.get(nb, nb) for nb in book.notebooks]
    rows = [CANVAS_IDENTITY + columns,
            [CANVAS_POINTS_POSSIBLE] + [""] * (len(CANVAS_IDENTITY) - 1) + [str(book.possible_of(nb))
                                                                           for nb in book.notebooks]]
    for s in book.students:
        if not (s.id or s.sis_user_id or s.name):
            raise GradebookError(f"{s.key}: Canvas needs a Student name, an ID or a SIS User ID")
        rows.append([s.name, s.id, s.sis_user_id, s.sis_login_id, s.section]
                    + [_number(book.scores[s.key, nb].total) for nb in book.notebooks])
    return rows


def gradescope_rows(book: Gradebook, notebook: str | None = None) -> list[list[str]]:
    """Gradescope's score CSV for one assignment: ``notebook``'s total, or the overall total when ``None``."""
    if notebook is not None and notebook not in book.notebooks:
        raise GradebookError(f"--gradescope-notebook: {notebook!r} is not a graded notebook (expected one of "
                             f"{', '.join(book.notebooks)})")
    rows = [list(GRADESCOPE_COLUMNS)]
    for s in book.students:
        if not s.email:
            raise GradebookError(f"roster: {s.key}: email: empty; Gradescope matches students by email (add it)")
        score = book.total(s.key) if notebook is None else book.scores[s.key, notebook].total
        rows.append([s.name, s.sis_user_id, s.email, _number(score)])
    return rows


def summary_rows(book: Gradebook) -> list[list[str]]:
    """The class's own gradebook: identity, then per notebook auto, written, days late, deduction and total, then
    the overall total, points possible and percent."""
    head = ["student", "name", "id", "sis_user_id", "email", "section"]
    for nb in book.notebooks:
        head += [f"{nb} auto", f"{nb} written", f"{nb} days late", f"{nb} late deduction", f"{nb} total"]
    head += ["total", "possible", "percent"]
    rows = [head]
    for s in book.students:
        row = [s.key, s.name, s.id, s.sis_user_id, s.email, s.section]
        for nb in book.notebooks:
            c = book.scores[s.key, nb]
            row += ([_number(c.auto), _number(c.written), str(c.days_late), _number(c.penalty), _number(c.total)]
                    if c.submitted else ["not submitted", "", "", "", "0"])
        row += [_number(book.total(s.key)), str(book.possible()),
                _number(100 * book.total(s.key) / book.possible()) if book.possible() else ""]
        rows.append(row)
    return rows


def summary_markdown(book: Gradebook) -> str:
    """The gradebook as Markdown: the late policy, a row per student (notebook totals, overall), the warnings."""
    lines = [f"# Gradebook{': ' + book.settings.name if book.settings.name else ''}", "", book.settings.policy(), "",
             "| student | " + " | ".join(book.notebooks) + " | total |",
             "| --- | " + " | ".join("---:" for _ in book.notebooks) + " | ---: |",
             "| points possible | " + " | ".join(str(book.possible_of(nb)) for nb in book.notebooks)
             + f" | {book.possible()} |"]
    for s in book.students:
        cells = []
        for nb in book.notebooks:
            c = book.scores[s.key, nb]
            cell = _number(c.total) if c.submitted else "not submitted"
            if c.days_late:
                cell += f" ({c.days_late} d late, -{_number(c.penalty)})"
            if c.unmarked:
                cell += " (unmarked)"
            cells.append(cell)
        lines.append(f"| {s.name} ({s.key}) | " + " | ".join(cells) + f" | {_number(book.total(s.key))} |")
    if book.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in book.warnings]
    return "\n".join(lines) + "\n"


def write_rows(rows: list[list[str]], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)


# ---------------------------------------------------------------------------------------------------------------
# Feedback
# ---------------------------------------------------------------------------------------------------------------

def feedback_markdown(book: Gradebook, student: Student, notebook: str, rubrics: dict | None = None) -> str:
    """One student's feedback on one notebook: the score, the late deduction and its reason, every task with its
    result (checks passed of the checks run, the grader's message: the first failed check with its inputs, expected
    and actual values as the checker prints them, and the full output where the results carry it), each written
    answer with its rubric items (names and points only: the rubrics' text stays the instructor's) and its mark."""
    c = book.scores[student.key, notebook]
    rubrics = rubrics or {}
    out = [f"# {notebook}: feedback for {student.name}", ""]
    if not c.submitted:
        out += [f"Not submitted: 0 of {c.possible} points.", ""]
        return "\n".join(out)
    parts = [f"auto-graded {_number(c.auto)} of {c.auto_possible}"]
    parts += [f"written {_number(c.written)} of {c.written_possible}"] if c.written_possible else []
    parts += [f"late deduction -{_number(c.penalty)}"] if c.penalty else []
    out += [f"**Score: {_number(c.total)} of {c.possible} points** ({', '.join(parts)})", ""]
    if c.days_late:
        out += [f"Late: {c.days_late} day(s): {c.late_why}. {book.settings.policy()[0].upper()}"
                f"{book.settings.policy()[1:]}.", ""]
    auto = [r for r in c.rows if r.level not in ("written", "-")]
    if auto:
        out += ["## Auto-graded tasks", "", "| task | level | result | checks passed | points |",
                "| --- | --- | --- | ---: | ---: |"]
        for r in auto:
            checks = f"{r.checks_passed}/{r.checks_total}" if r.checks_total is not None else "-"
            out.append(f"| {r.task} | {r.level} | {r.short} | {checks} | {r.points or 0}/{r.points_possible} |")
        out.append("")
        for r in auto:
            details = getattr(r, "details", "")
            if r.status == "passed" and not r.message and not details:
                continue
            out += [f"### {r.task}: {r.short}", ""]
            if r.message:
                out += [r.message, ""]
            if details:
                out += ["```", details.rstrip(), "```", ""]
    written = [r for r in c.rows if r.level == "written"]
    if written:
        out += ["## Written answers", ""]
        for r in written:
            rubric = rubrics.get(notebook, {}).get(r.task)
            m = c.marks.get(r.task)
            mark = f"{m.item}, {_number(m.points)} of {r.points_possible}" if m else "not marked yet"
            out += [f"### {r.task} ({r.points_possible} points): {mark}", ""]
            if rubric:
                out += [f"Rubric items: {_items_text(rubric)}", ""]
            if m and m.comment:
                out += [f"Comment: {m.comment}", ""]
            out += ["Your answer:", ""] + ([f"> {line}" if line else ">" for line in r.answer.splitlines()]
                                            if r.answer else ["> (no answer)"]) + [""]
    notes = [r.message for r in c.rows if r.level == "-"]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out)


def write_feedback(book: Gradebook, out: Path, rubrics: dict | None = None) -> list[Path]:
    """``out/<student>/<notebook>.md`` for every roster student and graded notebook; an existing file is an error."""
    out = Path(out)
    targets = [(s, nb, out / s.key / f"{nb}.md") for s in book.students for nb in book.notebooks]
    for _, _, path in targets:
        if path.exists():
            raise GradebookError(f"{path}: already exists (feedback is never overwritten; choose a new --out)")
    for s, nb, path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(feedback_markdown(book, s, nb, rubrics), encoding="utf-8")
    return [p for _, _, p in targets]


# ---------------------------------------------------------------------------------------------------------------
# Intake: an LMS's download into the grader's DIR/<student>/<exercise>.ipynb
# ---------------------------------------------------------------------------------------------------------------

CANVAS_NAME = re.compile(r"^(?P<name>[^_]+)_(?:(?P<late>LATE)_)?(?P<uid>\d+)_(?P<fid>\d+)_(?P<file>.+)$")


@dataclass
class Candidate:
    student: str
    exercise: str
    path: Path
    lms: str
    late_marker: bool = False
    at: dt.datetime | None = None
    order: int = 0                  # Canvas's file id: a later upload has a larger one


def _exercise(path: Path, name: str, specs: dict, where: str) -> str:
    """The exercise a file is: its name (a Canvas ``-1`` suffix removed), else its ``minirl_exercise`` metadata."""
    stem = re.sub(r"-\d+$", "", Path(name).stem)
    nb, _ = read_submission(path)
    found = exercise_of(Path(stem + ".ipynb"), nb, specs)
    if found is None:
        raise GradebookError(f"{where}: {name!r} is not one of the exercises "
                             f"({', '.join(n + '.ipynb' for n in specs)})")
    return found


def canvas_candidates(folder: Path, roster: list[Student], specs: dict) -> list[Candidate]:
    """The files of a Canvas bulk download (flat), each matched to a roster student by its Canvas user id, else its
    Canvas name; a file whose name matches no pattern, or no student: a one-line error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GradebookError(f"{folder}: no such folder (expected Canvas's unzipped 'Download Submissions')")
    by_id = {s.id: s for s in roster if s.id}
    by_name = {s.canvas_name.lower(): s for s in roster if s.canvas_name}
    out = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir():
            raise GradebookError(f"{p}: a folder in a Canvas download (expected a flat folder of files)")
        m = CANVAS_NAME.match(p.name)
        if not m or not m.group("file").lower().endswith(".ipynb"):
            raise GradebookError(f"{p.name}: not a Canvas submission file name (expected <name>_<user id>_<file id>_"
                                 "<exercise>.ipynb, or <name>_LATE_<user id>_<file id>_<exercise>.ipynb)")
        s = by_id.get(m.group("uid")) or by_name.get(m.group("name").lower())
        if s is None:
            raise GradebookError(f"{p.name}: no roster student with Canvas id {m.group('uid')} or canvas_name "
                                 f"{m.group('name')!r}")
        out.append(Candidate(s.key, _exercise(p, m.group("file"), specs, p.name), p, "canvas",
                             late_marker=bool(m.group("late")), order=int(m.group("fid"))))
    if not out:
        raise GradebookError(f"{folder}: no files (expected Canvas's name_123_456_04_iql.ipynb files)")
    return out


def _gradescope_time(v, where: str) -> dt.datetime | None:
    if v is None or v == "":
        return None
    if isinstance(v, dt.datetime):
        return v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
    m = re.match(r"^(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(\.\d+)?\s*([+-]\d\d:?\d\d|Z|UTC)?$", str(v).strip())
    if not m:
        raise GradebookError(f"{where}: :created_at: {v!r} is not a date and time")
    zone = m.group(4) or "+00:00"
    zone = "+00:00" if zone in ("Z", "UTC") else zone if ":" in zone else zone[:3] + ":" + zone[3:]
    return dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{(m.group(3) or '')[:7]}{zone}")


def gradescope_candidates(folder: Path, roster: list[Student], specs: dict) -> list[Candidate]:
    """The submissions of a Gradescope export (``submission_metadata.yml`` and a ``submission_<n>/`` folder each),
    matched to roster students by email, else SID (= the roster's sis_user_id); group submissions go to every
    submitter."""
    folder = Path(folder)
    meta_path = folder / "submission_metadata.yml"
    if not meta_path.is_file():
        raise GradebookError(f"{folder}: no submission_metadata.yml (expected Gradescope's unzipped 'Export "
                             "Submissions')")
    try:
        import yaml
    except ImportError:
        raise GradebookError("reading a Gradescope export needs PyYAML (pip install pyyaml)") from None
    try:
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise GradebookError(f"{meta_path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(meta, dict):
        raise GradebookError(f"{meta_path}: expected a mapping of submission folders to their metadata")
    by_email = {s.email.lower(): s for s in roster if s.email}
    by_sid = {s.sis_user_id: s for s in roster if s.sis_user_id}
    out = []
    for sub, info in meta.items():
        where = f"{meta_path}: {sub}"
        d = folder / str(sub)
        if not isinstance(info, dict) or not isinstance(info.get(":submitters"), list):
            raise GradebookError(f"{where}: no :submitters: list")
        if not d.is_dir():
            raise GradebookError(f"{where}: no folder {d.name} beside the metadata")
        at = _gradescope_time(info.get(":created_at"), where)
        files = sorted(p for p in d.rglob("*.ipynb")
                       if not any(part.startswith(".") for part in p.parts[len(d.parts):]))
        if not files:
            raise GradebookError(f"{d}: no .ipynb file in the submission")
        for who in info[":submitters"]:
            who = who if isinstance(who, dict) else {}
            email, sid = str(who.get(":email") or "").lower(), str(who.get(":sid") or "")
            s = by_email.get(email) or by_sid.get(sid)
            if s is None:
                raise GradebookError(f"{where}: submitter {who.get(':name', '?')!r} (email {email or '-'}, SID "
                                     f"{sid or '-'}) is not in the roster")
            for p in files:
                out.append(Candidate(s.key, _exercise(p, p.name, specs, f"{d.name}/{p.name}"), p, "gradescope", at=at))
    return out


def intake(candidates: list[Candidate], out: Path) -> list[dict]:
    """Copy (never move) each student's latest file per exercise to ``out/<student>/<exercise>.ipynb`` (by the LMS's
    time, else Canvas's file id), keeping its file time, and write ``out/intake.csv``: every file, chosen or
    superseded. ``out`` must be new or empty."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise GradebookError(f"{out}: not empty (the intake writes a new folder; choose another --out)")
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for c in candidates:
        groups.setdefault((c.student, c.exercise), []).append(c)
    manifest = []
    out.mkdir(parents=True, exist_ok=True)
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    for (student, exercise), cs in sorted(groups.items()):
        cs.sort(key=lambda c: (c.at or floor, c.order, str(c.path)))
        latest = cs[-1]
        (out / student).mkdir(exist_ok=True)
        shutil.copy2(latest.path, out / student / f"{exercise}.ipynb")
        for c in cs:
            manifest.append({"student": student, "notebook": exercise, "source": str(c.path), "lms": c.lms,
                             "late_marker": "yes" if c.late_marker else "no",
                             "submitted_at": c.at.isoformat() if c.at else "",
                             "chosen": "yes" if c is latest else f"no (superseded by {latest.path.name})"})
    with open(out / "intake.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=INTAKE_FIELDS)
        w.writeheader()
        w.writerows(manifest)
    return manifest


def exercise_specs(checks: Path = CHECKS_FILE) -> dict:
    """The exercises the grader knows (its checks file), for the intake's file names."""
    return load_checks(checks)
