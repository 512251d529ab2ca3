"""Student copies, the checks file, the book's exercises page and a class's release: all generated from the reference.

Solutions live in one place only, the reference notebooks ``notebooks/exercises/solutions/*.ipynb``.
:func:`make_student` (``python -m minirl.classroom make-student``) writes from them the student copies
``notebooks/exercises/*.ipynb`` (answer cells stubbed, written answers replaced by a placeholder, no outputs), the
checks file ``notebooks/exercises/checks.json`` (what the grader runs, with no solution text: :func:`notebook_spec`)
and the book page ``book/exercises.md`` (``--hide-solutions``: without the solutions); ``make-student --check`` fails
if one is stale. :func:`class_release` (``class-release OUT``) writes the student copies and the book without any
solution text.
"""
from __future__ import annotations

import ast
import copy
import json
import re
import subprocess
import tempfile
from pathlib import Path

from . import reading

from .layout import CHAPTERS, EXERCISES, REPO, SOLUTIONS  # noqa: F401 - the book's layout

CHECKS_FILE = EXERCISES / "checks.json"      # what the grader runs (minirl.classroom.grader)
BOOK_PAGE = REPO / "book" / "exercises.md"
COURSE_TABLE = REPO / "book" / "generated" / "course_table.md"  # book/course.md includes it
READING_WPM = reading.WORDS_PER_MINUTE  # for mathematical text, as the book's reading budget counts
MINUTES = {"function": 15, "agent": 45, "experiment": 20, "written": 15}  # a task's writing time: an assumption


# ---------------------------------------------------------------------------------------------------------------
# Student copies, the checks file and the book page: generated from the reference notebooks
# ---------------------------------------------------------------------------------------------------------------

STUB_MESSAGE = "your code here: replace this line"
WRITTEN_PLACEHOLDER = "_Your answer here: two or three sentences that cite the figure. Graded by the instructor._"
LEVEL_TAGS = ("agent", "experiment")  # a solution cell's level; untagged: a function task
STUDENT_RUN = "student-run"  # a code cell the student runs (a long sweep, its figure) and the grader does not
# points of a task by level (book/instructors.md, "Points"); a reference cell's metadata "minirl_points" overrides
POINTS = {"function": 2, "agent": 5, "experiment": 3, "written": 4}


def _positive_int(cell: dict, key: str, where: str, default: int | None = None) -> int | None:
    """The cell's metadata ``key`` (``default`` if absent), which must be a positive integer when set."""
    value = cell.get("metadata", {}).get(key, default)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise ValueError(f"{where} is {value!r}; expected a positive integer")
    return value


def points_of(cell: dict, level: str, name: str) -> int:
    """A task's points: the cell's ``minirl_points`` metadata if it has one (a positive integer), else :data:`POINTS`."""
    return _positive_int(cell, "minirl_points", f"{name}: minirl_points of a {level} cell", POINTS[level])


def stub_source(source: str) -> str:
    """A solution cell's source with every function body replaced by ``raise NotImplementedError``.

    Imports, comments above the functions, signatures and docstrings stay; everything else at the top level of the
    cell (an assignment the student must make, e.g. ``answer = ...``) becomes ``name = None  # your answer``.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    out: list[str] = []
    prev_end = 0
    for node in tree.body:
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        out.extend(lines[prev_end:start])  # comments and blank lines between statements
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            has_doc = (isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                       and isinstance(body[0].value.value, str))
            keep_until = body[0].end_lineno if has_doc else body[0].lineno - 1
            out.extend(lines[start:keep_until])
            indent = " " * body[0].col_offset
            out.append(f'{indent}raise NotImplementedError("{node.name}: {STUB_MESSAGE}")')
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.extend(lines[start:node.end_lineno])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = ", ".join(ast.unparse(t) for t in targets)
            out.append(f"{names} = None  # your answer")
        else:
            raise ValueError(f"a solution cell may hold imports, functions and assignments; line {node.lineno} is a "
                             f"{type(node).__name__}")
        prev_end = node.end_lineno
    return "\n".join(out).rstrip() + "\n"


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _defined_names(source: str) -> list[str]:
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def checker_task(source: str) -> str | None:
    """The task a checker cell checks (``check_expectile_loss(expectile_loss)`` or ``returns =
    check_threshold_sweep(threshold_sweep)`` -> the name after ``check_``), or ``None`` if the cell is not one call
    of a ``check_*`` function (possibly assigned to a name)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1:
        return None
    node = body[0]
    call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id.startswith("check_"):
        return call.func.id[len("check_"):]
    return None


def written_marker(task: str) -> str:
    return f"**Your answer ({task}):**"


def notebook_spec(nb: dict, name: str) -> dict:
    """The checks-file entry of one reference notebook: its cells as given / answer / check / written, the expected
    verdict of every checker read from the reference's stored output. No solution text."""
    cells, pending, last_task = [], None, None
    for k, cell in enumerate(nb["cells"]):
        src, tags = _src(cell), _tags(cell)
        if cell["cell_type"] == "markdown":
            if "written" in tags:
                if last_task is None:
                    raise ValueError(f"{name}: a written-answer cell before any task")
                task = f"{last_task}_answer"
                cells.append({"kind": "written", "task": task, "level": "written", "marker": written_marker(task),
                              "placeholder": WRITTEN_PLACEHOLDER, "points": points_of(cell, "written", name)})
                _check_rubric(nb["cells"][k + 1] if k + 1 < len(nb["cells"]) else None, task, cells[-1]["points"],
                              name)
            continue
        if STUDENT_RUN in tags:  # known to the grader (not counted as ignored), never run by it
            cells.append({"kind": "student-run", "source": src, "minutes": minutes_of(cell, name)})
            continue
        if "solution" in tags:
            level = next((t for t in LEVEL_TAGS if t in tags), "function")
            pending = {"kind": "answer", "names": _defined_names(src), "stub": stub_source(src), "level": level,
                       "points": points_of(cell, level, name), "minutes": minutes_of(cell, name)}
            cells.append(pending)
            continue
        task = checker_task(src)
        if task is None:
            cells.append({"kind": "given", "source": src})
            continue
        if pending is None:
            raise ValueError(f"{name}: the checker of {task} has no solution cell before it")
        if task in pending["names"]:
            pending["names"] = [task] + [n for n in pending["names"] if n != task]
        pending["task"] = task
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
        m = re.search(rf"^{re.escape(task)}: (\d+)/(\d+) checks passed$", text, re.M)
        if not m or m.group(1) != m.group(2):
            raise ValueError(f"{name}: the reference's checker of {task} did not print '{task}: n/n checks passed' "
                             f"(re-execute notebooks/exercises/solutions/{name}.ipynb)")
        cells.append({"kind": "check", "task": task, "level": pending["level"], "source": src,
                      "expected": m.group(0), "n": int(m.group(2)), "points": pending["points"],
                      "minutes": pending["minutes"]})
        last_task, pending = task, None
    title = _src(nb["cells"][0]).splitlines()[0].lstrip("# ").strip()
    spec = {"title": title, "cells": cells}
    limit = nb.get("metadata", {}).get("minirl_time_limit")
    if limit is not None:
        if not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit <= 0:
            raise ValueError(f"{name}: minirl_time_limit is {limit!r}; expected a positive number of seconds")
        spec["time_limit"] = limit
    return spec


def minutes_of(cell: dict, name: str) -> int | None:
    """A cell's ``minirl_minutes`` metadata: a task's estimated writing time (overriding :data:`MINUTES`), or the
    measured minutes of a student-run cell's computation; ``None`` if absent."""
    return _positive_int(cell, "minirl_minutes", f"{name}: minirl_minutes")


def _check_rubric(cell: dict | None, task: str, points: int, name: str) -> None:
    """Every written answer of a reference notebook is followed by its rubric: a Markdown cell tagged ``rubric`` that
    opens with ``**Rubric (<task>, <points> points).**`` and says what earns full, partial and no credit."""
    head = f"**Rubric ({task}, {points} points).**"
    if cell is None or "rubric" not in _tags(cell) or not _src(cell).startswith(head):
        raise ValueError(f"{name}: the written answer {task} needs a rubric after it: a Markdown cell tagged 'rubric' "
                         f"starting {head!r}")
    missing = [w for w in ("Full", "Partial", "None") if f"**{w} (" not in _src(cell)]
    if missing:
        raise ValueError(f"{name}: the rubric of {task} has no '**{missing[0]} (points):**' item")


def student_notebook(nb: dict, name: str | None = None) -> dict:
    """The student copy of a reference notebook (as a JSON dict): ``solution`` cells stubbed, ``written`` answers
    replaced by a placeholder, every output dropped (a student copy shows no verdict before it is run)."""
    nb = copy.deepcopy(nb)
    if name:
        nb.setdefault("metadata", {})["minirl_exercise"] = name
    nb["cells"] = [c for c in nb["cells"] if "rubric" not in _tags(c)]  # for the instructor only
    last_task = None
    for cell in nb["cells"]:
        tags = _tags(cell)
        if cell["cell_type"] == "code":
            last_task = checker_task(_src(cell)) or last_task
            if "solution" in tags:
                cell["source"] = stub_source(_src(cell)).splitlines(keepends=True)
                cell["metadata"]["tags"] = [t for t in tags if t != "solution"] + ["student"]
            cell["outputs"] = []
            cell["execution_count"] = None
            cell["metadata"].pop("execution", None)
        elif "written" in tags:
            cell["source"] = f"{written_marker(f'{last_task}_answer')}\n\n{WRITTEN_PLACEHOLDER}\n".splitlines(
                keepends=True)
    return nb


def _fence(text: str, minimum: int = 3) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(minimum, longest + 1)


def book_page(notebooks: list[Path], hide_solutions: bool = False) -> str:
    """``book/exercises.md``: every task as an ``exercise``; its solution behind a dropdown, or absent with
    ``hide_solutions`` (the build of a class)."""
    intro = ("Generated by `python -m minirl.classroom make-student` from the reference notebooks in "
             "`notebooks/exercises/solutions/`; do not edit by hand. Each task is code to write in the student "
             "notebook `notebooks/exercises/<name>.ipynb`, at one of three levels: a *function* (a loss, a target), an "
             "*agent* (one update of a whole agent, compared with minirl's own on fixed data and seed) and an "
             "*experiment* (a sweep whose numbers are checked, with a figure and a written answer that the instructor "
             "marks). Check a notebook with `python -m minirl.classroom check <name>.ipynb` (the grader's verdict). "
             "How to hand the notebooks out and grade them: {doc}`instructors`.")
    if hide_solutions:
        intro += "\n\nThis build of the book leaves the solutions out (`make-student --hide-solutions`)."
    parts = ["# Exercises\n", intro + "\n"]
    for path in notebooks:
        nb = json.loads(path.read_text())
        cells = nb["cells"]
        title = _src(cells[0]).splitlines()[0].lstrip("# ").strip()
        parts.append(f"## {title}\n\nNotebook: `notebooks/exercises/{path.name}`.\n")
        explanation, last = "", None
        for cell in cells[1:]:
            src = _src(cell)
            tags = _tags(cell)
            if "rubric" in tags:
                if not hide_solutions:  # under the model answer, in its dropdown
                    parts[-1] = parts[-1].removesuffix("````\n") + f"\n{src.strip()}\n````\n"
            elif cell["cell_type"] == "markdown" and "written" not in tags:
                explanation = src
            elif cell["cell_type"] == "markdown":
                label = f"ex-{path.stem.replace('_', '-')}-{last.replace('_', '-')}-answer"
                heading, _, body = explanation.partition("\n")
                parts.append(f"````{{exercise}} {heading.lstrip('# ').strip()}\n:label: {label}\n\n{body.strip()}\n"
                             f"````\n")
                if not hide_solutions:
                    answer = src.split("\n", 1)[1].strip() if "\n" in src else ""
                    parts.append(f"````{{solution}} {label}\n:class: dropdown\n\n{answer}\n````\n")
            elif "solution" in tags:
                func = _defined_names(src)[-1] if _defined_names(src) else f"answer-{len(parts)}"
                last = func
                label = f"ex-{path.stem.replace('_', '-')}-{func.replace('_', '-')}"
                heading, _, body = explanation.partition("\n")
                stub = stub_source(src).rstrip()
                fence = _fence(body + stub + src, 4)
                parts.append(f"{fence}{{exercise}} {heading.lstrip('# ').strip()}\n:label: {label}\n\n{body.strip()}\n"
                             f"\n```python\n{stub}\n```\n{fence}\n")
                if not hide_solutions:
                    parts.append(f"{fence}{{solution}} {label}\n:class: dropdown\n\n```python\n{src.rstrip()}\n```\n"
                                 f"{fence}\n")
    return "\n".join(parts)


def _setup_cell_problem(nb: dict, name: str) -> str | None:
    """Why the reference's setup cell differs from ``scripts/setup_cell.py``'s, or ``None``."""
    script = REPO / "scripts" / "setup_cell.py"
    if not script.exists():
        return None  # an installed copy without the repository's scripts: nothing to compare with
    import importlib.util
    spec = importlib.util.spec_from_file_location("_minirl_setup_cell", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    want = module.cell_source(module.configured_repository())
    found = [c for c in nb["cells"] if module.TAG in _tags(c)]
    if not found:
        return f"{name}: no setup cell (run python scripts/setup_cell.py notebooks/exercises/solutions/*.ipynb)"
    if _src(found[0]) != want:
        return f"{name}: stale setup cell (run python scripts/setup_cell.py notebooks/exercises/solutions/*.ipynb)"
    return None


def course_table(specs: dict[Path, dict], chapters: dict | None = None) -> str:
    """``book/generated/course_table.md`` from the reference notebooks' checks-file entries (:func:`notebook_spec`, by
    notebook path): per exercise, its chapter's reading, its tasks and points, and the time a student is estimated
    to need (a formula, stated under the table; not measured with students). ``chapters``: what each exercise
    follows, as :data:`CHAPTERS` (the default; a course folder's come from its ``course.toml``)."""
    chapters = CHAPTERS if chapters is None else chapters
    rows = ["| week's reading, then exercise | reading (words, est. time) | tasks: function / agent / experiment / "
            "written | points (auto + written) | est. time for the exercise |", "| --- | ---: | ---: | ---: | ---: |"]
    totals = []  # (reading minutes, exercise minutes, auto points, written points) per exercise
    for path, spec in specs.items():
        if path.stem not in chapters:
            raise ValueError(f"{path.stem}: no chapter in release.CHAPTERS (name the prose page and notebooks it "
                             "follows)")
        chapter, notebooks = chapters[path.stem]
        words = (reading.words(reading.page_text(REPO, f"book/{chapter}")) if chapter else 0) + sum(
            reading.words(reading.notebook_markdown(REPO / "notebooks" / f"{n}.ipynb")) for n in notebooks)
        if words:  # to the nearest 500: an edit of a chapter rarely changes the table
            words = max(500, 500 * round(words / 500))
        graded = [c for c in spec["cells"] if c["kind"] in ("check", "written")]
        count = {lv: sum(c["level"] == lv for c in graded) for lv in MINUTES}
        auto = sum(c["points"] for c in graded if c["level"] != "written")
        written = sum(c["points"] for c in graded if c["level"] == "written")
        read = words / READING_WPM
        work = reading.words(reading.notebook_markdown(path)) / READING_WPM + sum(
            c.get("minutes") or MINUTES[c["level"]] for c in graded)
        work += sum(c.get("minutes") or 0 for c in spec["cells"] if c["kind"] == "student-run")
        totals.append((read, work, auto, written))
        pages = ", ".join(([f"`book/{chapter}.md`"] if chapter else []) + [f"`notebooks/{n}.ipynb`" for n in notebooks])
        reading_cell = f"about {words:,} words, {_hours(read)}" if words else "none new"
        rows.append(f"| {pages + ', then ' if pages else ''}`{path.name}` | {reading_cell} | "
                    f"{' / '.join(str(count[lv]) for lv in MINUTES)} | {auto} + {written} | {_hours(work)} |")
    read, work, auto, written = (sum(column) for column in zip(*totals))
    rows.append(f"| **all** | {_hours(read)} | | {auto} + {written} | {_hours(work)} |")
    note = (f"Estimated, not measured with students: reading at {READING_WPM} words per minute (the prose page and its "
            "notebook's Markdown, counted as the book's reading budget counts them, to the nearest 500 words); an "
            "exercise's time is the reading of its task statements at the same rate plus "
            + ", ".join(f"{m} min per {lv} task" for lv, m in MINUTES.items()) +
            " (assumptions; the checks themselves take seconds), or a task's own estimate where its reference sets "
            "one (`minirl_minutes`), plus the measured computer time of the runs a notebook asks the student to start. "
            "Points: "
            + ", ".join(f"{p} per {lv} task" for lv, p in POINTS.items()) + ".")
    return "\n".join(rows) + "\n\n" + note + "\n"


def _hours(minutes: float) -> str:
    minutes = 5 * round(minutes / 5)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def make_student(check: bool = False, hide_solutions: bool = False) -> list[str]:
    """Write (or with ``check``, compare) the student copies, the checks file and the book page; returns the stale
    files. ``hide_solutions`` writes the book page without any solution (a class's build)."""
    solutions = sorted(SOLUTIONS.glob("*.ipynb"))
    if not solutions:
        raise FileNotFoundError(f"no reference notebooks in {SOLUTIONS}")
    references = {p: json.loads(p.read_text()) for p in solutions}
    problems = [m for p, nb in references.items() if (m := _setup_cell_problem(nb, p.name))]
    if problems:
        raise ValueError("; ".join(problems))
    dump = lambda x: json.dumps(x, indent=1, ensure_ascii=False) + "\n"  # noqa: E731
    targets = {EXERCISES / p.name: dump(student_notebook(nb, p.stem)) for p, nb in references.items()}
    specs = {p: notebook_spec(nb, p.stem) for p, nb in references.items()}
    targets[CHECKS_FILE] = dump({"version": 1, "notebooks": {p.stem: spec for p, spec in specs.items()}})
    targets[BOOK_PAGE] = book_page(solutions, hide_solutions)
    targets[COURSE_TABLE] = course_table(specs)
    stale = []
    for path, text in targets.items():
        if not path.exists() or path.read_text() != text:
            stale.append(str(path.relative_to(REPO)))
            if not check:
                path.write_text(text)
    return stale


def make_student_course(course, check: bool = False) -> list[str]:
    """:func:`make_student` for a course folder (:class:`minirl.classroom.course.Course`): from its reference
    notebooks ``DIR/solutions/*.ipynb``, the student copies ``DIR/exercises/<name>.ipynb``, the checks file
    ``DIR/exercises/checks.json`` and ``DIR/exercises/course_table.md``; nothing of the package is written. Returns
    the stale files. Every checker cell must call a ``check_<task>`` of the course's checker modules."""
    from .course import CourseError
    course.check_references()
    references = {course.reference(name): None for name in course.exercises}
    for path in references:
        where = str(path.relative_to(course.folder))
        try:
            references[path] = json.loads(path.read_text(encoding="utf-8"))
            cells = references[path]["cells"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
            raise CourseError(f"{path}: not a notebook ({type(e).__name__}: {e})") from None
        tasks = [t for c in cells if c.get("cell_type") == "code" and (t := checker_task(_src(c)))]
        if not tasks:
            raise CourseError(f"{path}: no task: a task is a code cell tagged 'solution', then a checker cell "
                              "check_<task>(<function>)")
        course.check_tasks({path.stem: tasks}, lambda _, where=where: f"{course.folder / where}")
    specs = {}
    for path, nb in references.items():
        try:
            specs[path] = notebook_spec(nb, path.stem)
        except ValueError as e:
            message = str(e).removeprefix(f"{path.stem}: ")
            raise CourseError(f"{path}: " + message.replace(f"notebooks/exercises/solutions/{path.stem}.ipynb",
                                                            "it")) from None
    dump = lambda x: json.dumps(x, indent=1, ensure_ascii=False) + "\n"  # noqa: E731
    targets = {course.out / p.name: dump(student_notebook(nb, p.stem)) for p, nb in references.items()}
    targets[course.checks_file] = dump({"version": 1, "notebooks": {p.stem: spec for p, spec in specs.items()}})
    targets[course.out / "course_table.md"] = course_table(specs, course.chapters())
    stale = []
    for path, text in targets.items():
        if not path.exists() or path.read_text() != text:
            stale.append(str(path))
            if not check:
                path.parent.mkdir(exist_ok=True)
                path.write_text(text)
    return stale


# ---------------------------------------------------------------------------------------------------------------
# A class's release: the book and the student copies without any solution text
# ---------------------------------------------------------------------------------------------------------------

def strip_solutions(markdown: str) -> str:
    """``markdown`` without its ``{solution}`` directives (fenced with backticks or colons, any length)."""
    out, fence = [], None
    for line in markdown.splitlines(keepends=True):
        if fence is None:
            m = re.match(r"^(`{3,}|:{3,})\{solution\}", line)
            if m:
                fence = m.group(1)
                continue
            out.append(line)
        elif line.strip() == fence:
            fence = None
    return "".join(out)


_GENERIC_ITER = re.compile(r"^for [\w, ()]+ in (?:\w+|(?:enumerate|range|zip|sorted|reversed|len)\([\w, .()]*\)"
                           r"|\w+\.(?:values|items|keys)\(\)):$")


def generic_line(line: str) -> bool:
    """Whether a solution line is generic code that any answer or chapter may hold without giving the task away: a
    loop header over plain names (``for j, seed in enumerate(seeds):``, ``for g in groups.values():``), ``else:`` and
    the like. Such a line is never taken as solution text."""
    line = line.strip()
    return bool(_GENERIC_ITER.match(line)) or line in ("else:", "try:", "finally:", "return None", "pass")


def _reference_notebooks() -> list[Path]:
    """The reference notebooks: the book's, then those of the course folder in ``$MINIRL_COURSE`` if one is set."""
    from .course import current
    active = current()
    return sorted(SOLUTIONS.glob("*.ipynb")) + ([active.reference(n) for n in sorted(active.exercises)] if active else [])


def _solution_cells() -> tuple[list[tuple[str, list[str]]], str]:
    """``(notebook/task, its distinctive lines)`` for every solution, written answer and rubric of the reference
    notebooks (:func:`_reference_notebooks`), and the public text of those notebooks (stubs, given cells, the tasks'
    own words)."""
    cells, public = [], ""
    for p in _reference_notebooks():
        for cell in json.loads(p.read_text())["cells"]:
            src = _src(cell)
            if "solution" in _tags(cell):
                public += stub_source(src) + "\n"
                names = _defined_names(src)
                lines = [ln.strip() for ln in src.splitlines()
                         if len(ln.strip()) > 24 and not ln.strip().startswith("#")]
                cells.append((f"{p.stem}/{names[-1] if names else 'answer'}", lines))
            elif "written" in _tags(cell) or "rubric" in _tags(cell):
                cells.append((f"{p.stem}/written", [ln.strip() for ln in src.splitlines()[1:] if len(ln.strip()) > 24]))
            else:
                public += src + "\n"  # the task's own words (a line quoted there is not a leak)
    return [(name, [ln for ln in lines if ln not in public and not generic_line(ln)]) for name, lines in cells], public


def chapter_sources(root: Path = REPO) -> dict[str, str]:
    """The book's own teaching text that a class's release publishes by design: every chapter notebook's cells and
    every page under ``book/`` with its ``{solution}`` blocks stripped, except the generated exercises page."""
    out = {}
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        out[str(nb.relative_to(root))] = "\n".join(_src(c) for c in json.loads(nb.read_text())["cells"])
    for page in sorted((root / "book").rglob("*.md")):
        if page.name != BOOK_PAGE.name:
            out[str(page.relative_to(root))] = strip_solutions(page.read_text())
    return out


def shared_with_chapters(root: Path = REPO) -> dict[str, list[str]]:
    """Solution lines that a chapter itself shows (``{line: [chapter files]}``): public by design (the chapter teaches
    them), so not counted as a leak of the release; listed so an author sees what an exercise shares with its
    chapter."""
    chapters = chapter_sources(root)
    shared: dict[str, list[str]] = {}
    for _, lines in _solution_cells()[0]:
        for ln in lines:
            where = [f for f, text in chapters.items() if ln in text]
            if where:
                shared[ln] = where
    return shared


def solution_lines(root: Path = REPO) -> list[str]:
    """Distinctive lines of the reference solutions (code lines that are not in the student copies, not generic
    (:func:`generic_line`) and not in the chapters' own text (:func:`shared_with_chapters`)): what a class's release
    must not contain."""
    cells, _ = _solution_cells()
    chapters = "\n".join(chapter_sources(root).values())
    return sorted({ln for _, lines in cells for ln in lines if ln not in chapters})


def whole_solutions_in_chapters(root: Path = REPO, share: float = 0.5) -> list[str]:
    """Chapters that hold most of one task's solution (at least 3 of its distinctive lines and more than ``share`` of
    them): a solution pasted into a chapter, which the per-line check lets through as shared text."""
    cells, _ = _solution_cells()
    out = []
    for chapter, text in chapter_sources(root).items():
        for name, lines in cells:
            if not name.endswith("/written") and len(lines) >= 3:
                inside = sum(ln in text for ln in lines)
                if inside >= 3 and inside > share * len(lines):
                    out.append(f"{chapter} (holds {inside} of the {len(lines)} lines of {name}'s solution)")
    return out


def leaks_in(folder: Path, needles: list[str] | None = None) -> list[str]:
    """The files of ``folder`` (pages, notebooks, sources) that contain a solution line (:func:`solution_lines`)."""
    needles = solution_lines() if needles is None else needles
    folder = Path(folder)
    return sorted(str(f.relative_to(folder)) for f in folder.rglob("*")
                  if f.is_file() and f.suffix in (".html", ".md", ".ipynb", ".json", ".txt", ".js", ".py")
                  and any(n in readable_text(f) for n in needles))


def release_sources(src: Path, toc_files: list[str] | None = None) -> None:
    """Write into ``src`` the sources a class's book is built from: the book's configuration, pages and chapter
    notebooks with every solution removed (the exercises page without its solutions, the chapters' ``{solution}``
    blocks stripped, sphinx-exercise's ``hide_solutions`` on). ``toc_files``: only those pages in the table of
    contents."""
    import shutil
    src = Path(src)
    src.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "book", src / "book")
    (src / "notebooks").mkdir()
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, src / "notebooks" / nb.name)
    for page in (src / "book").rglob("*.md"):
        page.write_text(strip_solutions(page.read_text()))
    solutions = sorted(SOLUTIONS.glob("*.ipynb"))
    (src / "book" / "exercises.md").write_text(book_page(solutions, True))
    specs = {p: notebook_spec(json.loads(p.read_text()), p.stem) for p in solutions}
    (src / COURSE_TABLE.relative_to(REPO)).write_text(course_table(specs))  # from the chapters as they are now
    config = (src / "_config.yml").read_text()
    config = config.replace("  config:\n", "  config:\n    hide_solutions: true  # a class's release\n", 1)
    (src / "_config.yml").write_text(config)
    if toc_files:
        toc = "format: jb-book\nroot: book/intro\nchapters:\n" + "".join(f"  - file: {f}\n" for f in toc_files)
        (src / "_toc.yml").write_text(toc)


def class_release(out: Path, build: bool = True, toc_files: list[str] | None = None) -> list[str]:
    """Write ``out/`` for a class: ``out/notebooks/exercises/`` (the student copies and the checks file) and, with
    ``build``, ``out/book/`` (the book built from a copy of the sources with every solution removed: the exercises
    page from :func:`book_page` with ``hide_solutions``, the chapters' ``{solution}`` blocks stripped, and
    sphinx-exercise's ``hide_solutions`` on). ``toc_files`` builds only those pages (tests). Where ``$MINIRL_COURSE``
    names a course folder, also ``out/course/``: its ``course.toml``, checker modules and ``exercises/`` (student
    copies, checks file, course table), without ``solutions/``. Returns the files of ``out`` that still contain a
    solution line (empty when the release is clean)."""
    import shutil

    from .course import current
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new folder for the class's release")
    stale = [f for f in make_student(check=True) if f != str(COURSE_TABLE.relative_to(REPO))]
    if stale:  # the course table follows the chapters' word counts: the release writes its own (release_sources)
        raise ValueError(f"the student copies are out of date ({', '.join(stale)}): run python -m minirl.classroom "
                         "make-student first")
    active = current()
    stale = make_student_course(active, check=True) if active else []
    if stale:
        raise ValueError(f"the course's student copies are out of date ({', '.join(stale)}): run python -m "
                         f"minirl.classroom make-student --course {active.folder} first")
    nb_out = out / "notebooks" / "exercises"
    nb_out.mkdir(parents=True)
    for p in sorted(SOLUTIONS.glob("*.ipynb")):
        shutil.copy(EXERCISES / p.name, nb_out / p.name)
    shutil.copy(CHECKS_FILE, nb_out / CHECKS_FILE.name)
    if active:
        (out / "course" / "exercises").mkdir(parents=True)
        for f in [active.config, *active.checker_files]:
            shutil.copy(f, out / "course" / f.name)
        for name in sorted(active.exercises):
            shutil.copy(active.out / f"{name}.ipynb", out / "course" / "exercises" / f"{name}.ipynb")
        for name in (active.checks_file.name, "course_table.md"):
            shutil.copy(active.out / name, out / "course" / "exercises" / name)
    if build:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src"
            release_sources(src, toc_files)
            result = subprocess.run(["jupyter-book", "build", "--path-output", str(out / "book"), str(src)],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"jupyter-book build failed:\n{(result.stdout + result.stderr)[-3000:]}")
    return leaks_in(out) + whole_solutions_in_chapters()


def readable_text(path: Path) -> str:
    """A file's text as a reader sees it: for HTML, without tags (syntax highlighting splits code into spans) and with
    entities decoded."""
    import html
    text = Path(path).read_text(errors="replace")
    if Path(path).suffix == ".html":
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return text

