"""A course folder (issue 71, item 7): an instructor's own exercise, added without editing the package.

A tiny course is written in a temporary folder: ``course.toml``, a checker module with ``check_discounted_return``
and ``check_returns_to_go``, and a reference notebook with those two tasks, tagged as the book's reference notebooks
are and executed as the walkthrough in book/instructors.md says. ``make-student --course`` writes its student copy and
checks file; four students are graded through ``grade --course``: a right answer (full points), a wrong first task
(0 points for it; the second task, graded on the reference's first answer, passes), and two answers that try to read
the course's reference notebook, one with ``open`` (blocked by the audit hook) and one with ctypes' own ``open(2)``
(nothing read, where the kernel offers namespaces). Then the one-line errors of bad course files.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minirl.classroom import cli, course, grader

NAME = "07_returns"

CHECKERS = '''"""The checkers of a tiny course: the discounted return of a list of rewards, and the returns to go."""
import os

import numpy as np

from minirl.classroom.agent_checks import _cached
from minirl.classroom.checks import Checks, Ref, fresh

FIXED = [1.0, -1.0, 2.0, 0.5]
CALLS = []  # the processes that computed reference_table (course.toml's warm entry: the grader, once)


def _discounted(rewards, gamma):
    rewards = np.asarray(rewards, dtype=float)
    return float(np.sum(rewards * gamma ** np.arange(len(rewards))))


def _to_go(rewards, gamma):
    out, g = np.zeros(len(rewards)), 0.0
    for t in reversed(range(len(rewards))):
        g = rewards[t] + gamma * g
        out[t] = g
    return out


def reference_table():
    CALLS.append(os.getpid())
    return _to_go(FIXED, 0.9)


def check_discounted_return(fn):
    """Task: ``discounted_return(rewards, gamma)`` returns sum_t gamma^t r_t."""
    c = Checks("discounted_return", reference=_discounted)
    c.compare("rewards [1, 1, 1], gamma 0.5", lambda: fn([1.0, 1.0, 1.0], 0.5), 1.75)
    c.compare("no rewards", lambda: fn([], 0.9), 0.0)
    rewards = np.random.default_rng(fresh(0)).normal(size=20).tolist()
    c.compare("20 random rewards, gamma 0.9", lambda: fn(rewards, 0.9), Ref(lambda: _discounted(rewards, 0.9)))
    return c.report()


def check_returns_to_go(fn):
    """Task: ``returns_to_go(rewards, gamma)`` returns G_t for every t."""
    c = Checks("returns_to_go", reference=_to_go)
    c.compare("rewards [0, 0, 1], gamma 0.5", lambda: fn([0.0, 0.0, 1.0], 0.5), [0.25, 0.5, 1.0])
    rewards = np.random.default_rng(fresh(1)).normal(size=12).tolist()
    c.compare("12 random rewards, gamma 0.8", lambda: fn(rewards, 0.8), Ref(lambda: _to_go(rewards, 0.8)))
    c.compare("rewards [1, -1, 2, 0.5], gamma 0.9", lambda: fn(FIXED, 0.9),
              Ref(lambda: _cached("returns-table", reference_table)))
    return c.report()
'''

TOML = '''checkers = ["returns_checks.py"]

[exercises.07_returns]
chapter = "offline_rl"
reading = ["01_offline_rl"]
'''
WARM = 'warm = {returns-table = "returns_checks.reference_table"}\n'

DISCOUNTED = '''def discounted_return(rewards, gamma):
    """The discounted sum of the rewards: sum_t gamma^t r_t."""
    total, weight = 0.0, 1.0
    for r in rewards:
        total += weight * r
        weight *= gamma
    return total
'''

TO_GO = '''def returns_to_go(rewards, gamma):
    """G_t = sum_k gamma^k r_(t+k), for every t."""
    return [discounted_return(rewards[t:], gamma) for t in range(len(rewards))]
'''


def _cell(kind: str, source: str, tags=(), outputs=None) -> dict:
    cell = {"cell_type": kind, "id": f"c{abs(hash(source)) % 10**8}", "metadata": {"tags": list(tags)} if tags else {},
            "source": source}
    if kind == "code":
        cell |= {"execution_count": None, "outputs": outputs or []}
    return cell


def _stored(text: str) -> list:
    return [{"output_type": "stream", "name": "stdout", "text": text}]


def reference_notebook(stored: bool = True) -> dict:
    """The reference notebook: two tasks (a ``solution`` cell, then its checker cell), with the checkers' verdicts
    stored (``stored``: written here; the main test executes the notebook instead)."""
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "cells": [
                _cell("markdown", "# Returns\n\nTwo tasks on the discounted return."),
                _cell("code", "import numpy as np\n\nfrom minirl.classroom import check_discounted_return, "
                              "check_returns_to_go"),
                _cell("markdown", "### Task 1: the discounted return\n\n$G = \\sum_t \\gamma^t r_t$."),
                _cell("code", DISCOUNTED, ["solution"]),
                _cell("code", "check_discounted_return(discounted_return)",
                      outputs=_stored("discounted_return: 3/3 checks passed\n") if stored else None),
                _cell("markdown", "### Task 2: the returns to go\n\n$G_t$ for every $t$, with `discounted_return`."),
                _cell("code", TO_GO, ["solution"]),
                _cell("code", "check_returns_to_go(returns_to_go)",
                      outputs=_stored("returns_to_go: 3/3 checks passed\n") if stored else None),
            ]}


def make_course(folder: Path, toml: str = TOML, checkers: str = CHECKERS, stored: bool = True) -> Path:
    (folder / "solutions").mkdir(parents=True)
    (folder / "course.toml").write_text(toml)
    (folder / "returns_checks.py").write_text(checkers)
    (folder / "solutions" / f"{NAME}.ipynb").write_text(json.dumps(reference_notebook(stored), indent=1))
    return folder


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_course_set(monkeypatch):
    """--course sets $MINIRL_COURSE for the command: unset again after each test."""
    monkeypatch.delenv(course.ENV, raising=False)


# --------------------------------------------------------------------------------------------------------------
# The tiny course, from its reference notebook to the grades
# --------------------------------------------------------------------------------------------------------------

def _answer(nb: dict, function: str, source: str) -> dict:
    """The student copy ``nb`` with the answer cell of ``function`` replaced by ``source``."""
    nb = json.loads(json.dumps(nb))
    cells = [c for c in nb["cells"] if "student" in c["metadata"].get("tags", [])
             and f"def {function}(" in "".join(c["source"])]
    assert len(cells) == 1, function
    cells[0]["source"] = source
    return nb


READ_WITH_OPEN = '''SNOOPED = len(open({ref!r}).read())
''' + DISCOUNTED

READ_WITH_CTYPES = '''import ctypes, os


def _c_read(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        return -1
    return libc.read(fd, ctypes.create_string_buffer(1 << 16), 1 << 16)


SNOOPED = _c_read({ref!r})


def discounted_return(rewards, gamma):
    return float(SNOOPED)  # what it read of the reference notebook: its size, or -1 if refused
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    folder = make_course(root / "mycourse", toml=TOML + WARM, stored=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(course.ENV, str(folder))  # as the walkthrough runs the reference notebook
        done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                               "--inplace", str(folder / "solutions" / f"{NAME}.ipynb")], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        mp.delenv(course.ENV)
        assert cli.main(["make-student", "--course", str(folder)]) == 0
        assert cli.main(["make-student", "--course", str(folder), "--check"]) == 0
        student = json.loads((folder / "exercises" / f"{NAME}.ipynb").read_text())
        reference = str(folder / "solutions" / f"{NAME}.ipynb")
        submissions = root / "submissions"
        notebooks = {
            "ana": _answer(_answer(student, "discounted_return", DISCOUNTED), "returns_to_go", TO_GO),
            "ben": _answer(_answer(student, "discounted_return", DISCOUNTED.replace("weight *= gamma", "pass")),
                           "returns_to_go", TO_GO),  # forgot the discount
            "eve": _answer(student, "discounted_return", READ_WITH_OPEN.format(ref=reference)),
            "mallory": _answer(student, "discounted_return", READ_WITH_CTYPES.format(ref=reference)),
        }
        for who, nb in notebooks.items():
            (submissions / who).mkdir(parents=True)
            (submissions / who / f"{NAME}.ipynb").write_text(json.dumps(nb, indent=1))
        out = root / "grades.json"
        code = cli.main(["grade", str(submissions), "--course", str(folder), "--json", str(out), "--parallel", "2"])
        assert code == 0
        rows = {(r["student"], r["task"]): r for r in json.loads(out.read_text())}
        warmed = list(sys.modules["minirl_course.returns_checks"].CALLS)
        check = subprocess.run([sys.executable, "-m", "minirl.classroom", "check", "--course", str(folder),
                                str(submissions / "ana" / f"{NAME}.ipynb")], capture_output=True, text=True)
        yield folder, rows, check, warmed


def test_make_student_writes_the_course_s_student_copy_and_checks_file(graded):
    folder, _, _, _ = graded
    student = (folder / "exercises" / f"{NAME}.ipynb").read_text()
    checks = json.loads((folder / "exercises" / "checks.json").read_text())["notebooks"]
    assert "weight *= gamma" not in student and "discounted_return: your code here" in student
    assert json.loads(student)["metadata"]["minirl_exercise"] == NAME
    assert [c["task"] for c in checks[NAME]["cells"] if c["kind"] == "check"] == ["discounted_return",
                                                                                  "returns_to_go"]
    assert "weight *= gamma" not in json.dumps(checks)
    table = (folder / "exercises" / "course_table.md").read_text()
    assert "`book/offline_rl.md`, `notebooks/01_offline_rl.ipynb`, then `07_returns.ipynb`" in table


def test_the_right_answer_gets_full_points_and_the_wrong_one_none(graded):
    _, rows, _, _ = graded
    for task in ("discounted_return", "returns_to_go"):
        assert rows["ana", task]["status"] == "passed", rows["ana", task]
        assert rows["ana", task]["points"] == rows["ana", task]["points_possible"] == 2
    ben = rows["ben", "discounted_return"]
    assert ben["status"] == "failed" and ben["points"] == 0, ben
    assert rows["ben", "returns_to_go"]["status"] == "passed"  # graded on the reference's discounted_return


def test_the_warm_entry_is_computed_once_by_the_grader(graded):
    """course.toml's warm entry: called once, in the grader's own process, before it forks; the judge of every
    student's returns_to_go then finds it in the cache."""
    _, rows, _, warmed = graded
    assert warmed == [os.getpid()]
    assert rows["ana", "returns_to_go"]["checks_passed"] == 3


def test_the_student_s_process_cannot_read_the_course_s_reference(graded):
    _, rows, _, _ = graded
    eve = rows["eve", "discounted_return"]
    assert eve["status"] == "blocked" and eve["points"] == 0, eve
    assert "solutions" in eve["message"] and NAME in eve["message"], eve
    if grader.isolation() is None:  # the kernel's namespaces: ctypes' own open(2) gets nothing either
        mallory = rows["mallory", "discounted_return"]
        assert mallory["status"] == "failed" and mallory["points"] == 0, mallory
        assert "got -1" in mallory["details"] and mallory["checks_passed"] == 0, mallory["details"]


@pytest.mark.skipif(grader.isolation() is not None, reason=str(grader.isolation()))
def test_without_isolation_the_ctypes_route_reads_it(graded, tmp_path, monkeypatch, capsys):
    """What the namespaces are for, and that the route above aims at the right file: with them off
    (MINIRL_GRADER_ISOLATION=off) the same answer reads the reference notebook past the audit hook."""
    folder, _, _, _ = graded
    monkeypatch.setattr(grader, "_ISOLATION", [])
    monkeypatch.setenv("MINIRL_GRADER_ISOLATION", "off")
    (tmp_path / "mallory").mkdir()
    (tmp_path / "mallory" / f"{NAME}.ipynb").write_text((folder.parent / "submissions" / "mallory" /
                                                          f"{NAME}.ipynb").read_text())
    code, _, err = run_cli(capsys, "grade", tmp_path, "--course", folder, "--json", tmp_path / "grades.json")
    assert code == 0, err
    row = next(r for r in json.loads((tmp_path / "grades.json").read_text()) if r["task"] == "discounted_return")
    size = (folder / "solutions" / f"{NAME}.ipynb").stat().st_size
    assert f"got {min(size, 1 << 16)}," in row["details"], row["details"]


def test_the_spawned_worker_grades_the_course_too(graded, monkeypatch):
    """Where the grader cannot fork, ``python -m minirl.classroom.sandbox worker`` runs each notebook: it finds the
    course through $MINIRL_COURSE, and its audit hook refuses the course's reference notebook."""
    folder, _, _, _ = graded
    monkeypatch.setenv(course.ENV, str(folder))
    results, _ = grader.grade_folder(folder.parent / "submissions", use_fork=False, notebooks=[NAME])
    status = {(r.student, r.task): r.status for r in results}
    assert status["ana", "discounted_return"] == status["ana", "returns_to_go"] == "passed", status
    assert status["ben", "discounted_return"] == "failed" and status["eve", "discounted_return"] == "blocked", status


def test_the_self_check_finds_the_course(graded):
    _, _, check, _ = graded
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok      discounted_return (function): 3/3 checks passed" in check.stdout
    assert f"{NAME}: 2/2 tasks passed" in check.stdout


def test_a_class_release_carries_the_course_without_its_solutions(graded, tmp_path, capsys):
    folder, _, _, _ = graded
    code, out, err = run_cli(capsys, "class-release", tmp_path / "release", "--no-build", "--course", folder)
    assert code == 0, err
    assert "course/ (the course folder without its solutions/)" in out
    files = sorted(str(p.relative_to(tmp_path / "release" / "course")) for p in
                   (tmp_path / "release" / "course").rglob("*") if p.is_file())
    assert files == ["course.toml", f"exercises/{NAME}.ipynb", "exercises/checks.json", "exercises/course_table.md",
                     "returns_checks.py"]
    leaked = tmp_path / "leaky"  # a course whose checker module quotes a solution line
    make_course(leaked, checkers=CHECKERS + "\n# " + TO_GO.splitlines()[2].strip() + "\n")
    (leaked / "solutions" / f"{NAME}.ipynb").write_text((folder / "solutions" / f"{NAME}.ipynb").read_text())
    assert run_cli(capsys, "make-student", "--course", leaked)[0] == 0
    code, out, err = run_cli(capsys, "class-release", tmp_path / "release2", "--no-build", "--course", leaked)
    assert code == 1 and "solution text found in course/returns_checks.py" in err, (out, err)


def test_with_a_course_the_built_in_exercises_stay(graded, monkeypatch):
    folder, _, _, _ = graded
    builtin = grader.load_checks()
    monkeypatch.setenv(course.ENV, str(folder))
    assert set(grader.all_checks()) == set(builtin) | {NAME}
    assert {k: v for k, v in grader.all_checks().items() if k != NAME} == builtin
    monkeypatch.delenv(course.ENV)
    assert grader.all_checks() == builtin
    with pytest.raises(AttributeError):
        from minirl import classroom
        classroom.check_discounted_return  # noqa: B018 - only with the course set


# --------------------------------------------------------------------------------------------------------------
# Bad course files: one line, naming the file and the field
# --------------------------------------------------------------------------------------------------------------

def _remove(path: str):
    return lambda folder: (folder / path).unlink()


def _write(path: str, text: str):
    return lambda folder: (folder / path).write_text(text)


def _no_verdict(folder):
    path = folder / "solutions" / f"{NAME}.ipynb"
    path.write_text(json.dumps(reference_notebook(stored=False)))


BAD = {
    "unknown key": (_write("course.toml", 'colour = "red"\n' + TOML), ["course.toml: unknown key 'colour'"]),
    "unknown exercise key": (_write("course.toml", TOML.replace("chapter =", "chaptr =")),
                             ["course.toml: exercises.07_returns: unknown key 'chaptr'"]),
    "missing notebook": (_remove(f"solutions/{NAME}.ipynb"),
                         ["course.toml: exercises.07_returns: no reference notebook solutions/07_returns.ipynb"]),
    "notebook not listed": (_write("solutions/08_more.ipynb", "{}"),
                            ["course.toml: exercises: solutions/08_more.ipynb has no [exercises.08_more] table"]),
    "missing checker module": (_write("course.toml", TOML.replace("returns_checks.py", "nope.py")),
                               ["course.toml: checkers: no file nope.py"]),
    "checker function missing": (_write("returns_checks.py", CHECKERS.replace("def check_returns_to_go",
                                                                              "def other_returns_to_go")),
                                 [f"solutions/{NAME}.ipynb: task returns_to_go: its checker cell calls "
                                  "check_returns_to_go, which no checker module"]),
    "task collides with a built-in one": (
        _write("returns_checks.py", CHECKERS + "\n\ndef check_expectile_loss(fn):\n    pass\n"),
        ["returns_checks.py: check_expectile_loss: the task expectile_loss is a built-in one"]),
    "exercise collides with a built-in one": (
        _write("course.toml", TOML.replace("07_returns", "01_offline_rl")),
        ["course.toml: exercises.01_offline_rl: a built-in exercise"]),
    "warm function missing": (_write("course.toml", TOML + 'warm = {returns-table = "returns_checks.nope"}\n'),
                              ["course.toml: exercises.07_returns.warm.returns-table: returns_checks.py has no "
                               "function nope"]),
    "chapter not in the book": (_write("course.toml", TOML.replace('"offline_rl"', '"nowhere"')),
                                ["course.toml: exercises.07_returns.chapter: 'nowhere' is not a page of the book"]),
    "reading not in the book": (_write("course.toml", TOML.replace('"01_offline_rl"', '"99_nowhere"')),
                                ["course.toml: exercises.07_returns.reading: '99_nowhere'"]),
    "invalid TOML": (_write("course.toml", "checkers = [\n"), ["course.toml: not valid TOML"]),
    "no course.toml": (_remove("course.toml"), ["course.toml: no such file"]),
    "checker module raises": (_write("returns_checks.py", "1 / 0\n"),
                              ["returns_checks.py: importing it failed (ZeroDivisionError"]),
    "reference not executed": (_no_verdict, [f"solutions/{NAME}.ipynb: the reference's checker of discounted_return "
                                             "did not print"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_course_file_is_one_line_naming_the_file_and_the_field(case, tmp_path, capsys):
    edit, expected = BAD[case]
    folder = make_course(tmp_path / "mycourse")
    edit(folder)
    code, out, err = run_cli(capsys, "make-student", "--course", folder)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, err
    assert str(folder) in err  # the file, by its path


def test_a_good_course_file_makes_the_student_copies(tmp_path, capsys):
    """The baseline of the cases above: the same course, unedited, passes."""
    folder = make_course(tmp_path / "mycourse")
    code, out, err = run_cli(capsys, "make-student", "--course", folder)
    assert code == 0, err
    assert sorted(p.name for p in (folder / "exercises").iterdir()) == [f"{NAME}.ipynb", "checks.json",
                                                                        "course_table.md"]


def test_grading_before_make_student_says_what_to_run(tmp_path, capsys):
    folder = make_course(tmp_path / "mycourse")
    (tmp_path / "submissions" / "ana").mkdir(parents=True)
    code, _, err = run_cli(capsys, "grade", tmp_path / "submissions", "--course", folder)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{folder}/exercises/checks.json: no checks file; run `python -m minirl.classroom make-student --course" in err


def test_the_setting_is_the_environment_variable(tmp_path, capsys, monkeypatch):
    """$MINIRL_COURSE alone (no --course) names the course; a folder that does not exist is an error naming it."""
    folder = make_course(tmp_path / "mycourse")
    monkeypatch.setenv(course.ENV, str(folder))
    code, out, err = run_cli(capsys, "make-student")
    assert code == 0 and (folder / "exercises" / "checks.json").exists(), err
    assert all(str(folder) in line for line in out.splitlines())  # nothing of the book's written
    from minirl.classroom import check_discounted_return
    assert check_discounted_return.__module__ == "minirl_course.returns_checks"
    monkeypatch.setenv(course.ENV, str(tmp_path / "nowhere"))
    code, _, err = run_cli(capsys, "make-student")
    assert code == 2 and f"{course.ENV}={tmp_path / 'nowhere'}: no such folder" in err, err
    assert os.environ[course.ENV] == str(tmp_path / "nowhere")
