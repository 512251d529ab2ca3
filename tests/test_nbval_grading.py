"""``pytest --nbval SUBMISSION.ipynb`` grades a book exercise notebook against the reference (issue 46).

minirl's pytest plugin (minirl/classroom/nbval_plugin.py, the ``pytest11`` entry point) replaces nbval's collector for
a notebook whose metadata names one of the exercises: one test per task, graded by the grader. Each check here runs
``pytest --nbval`` in a subprocess, in a fresh temporary folder with no conftest or ini file, as an instructor would.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minirl.classroom import grader, release

from test_grading import (NB, _answers, _student_copy, execute_and_save, filled, passing_checkers,
                          wrong_edits, write)

SAMPLES = release.EXERCISES / "sample_submissions"


def nbval(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "--nbval", "-p", "no:cacheprovider", "-rA", *args],
                          cwd=folder, capture_output=True, text=True, env=env, timeout=900)


def outcomes(stdout: str) -> dict[tuple[str, str], bool]:
    """``{(notebook path, task): passed}`` from pytest's ``-rA`` summary."""
    return {(m.group(2), m.group(3)): m.group(1) == "PASSED"
            for m in re.finditer(r"^(PASSED|FAILED) (\S+\.ipynb)::(\w+)", stdout, re.M)}


def test_the_plugin_does_not_import_torch_at_startup():
    code = "import sys, minirl.classroom.nbval_plugin; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("case", ["wrong", "correct", "untouched"])
def test_saved_submission_under_plain_nbval(tmp_path, case):
    """Executed and saved as Jupyter saves it, then ``pytest --nbval`` in its own folder: a saved wrong answer and the
    untouched copy fail, the right answers pass (under plain nbval all three passed: the stored outputs are the
    student's own run)."""
    nb = {"wrong": filled(NB, wrong_edits(NB)), "correct": filled(NB), "untouched": _student_copy(NB)}[case]
    path = tmp_path / f"{NB}.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    execute_and_save(path)
    result = nbval(tmp_path, path.name)
    summary = result.stdout.strip().splitlines()[-1]
    if case == "correct":
        assert result.returncode == 0 and "6 passed" in summary and "failed" not in summary, result.stdout[-3000:]
    else:
        assert result.returncode == 1 and "failed" in summary, result.stdout[-3000:]
        assert "expected (reference): " in result.stdout


def test_nbval_and_the_grader_agree_task_by_task(tmp_path):
    """Every sample submission and the hostile cases the grader handles: the same verdict, task by task."""
    folder = tmp_path / "class"
    for student in ("ana", "ben", "chloe"):
        for p in sorted((SAMPLES / student).glob("*.ipynb")):
            write(folder, student, p.stem, p.read_text())
    wrong = filled(NB, wrong_edits(NB))
    cleared = json.loads(json.dumps(wrong))
    tampered = passing_checkers(wrong)
    write(folder, "eve", NB, tampered)
    write(folder, "dana", NB, cleared)
    patched = _answers(NB, wrong_edits(NB))["policy_transition"] + (
        "\n\nimport minirl.classroom as mex\n"
        "mex.check_policy_transition = lambda fn: print('policy_transition: 5/5 checks passed')\n"
        "check_evaluate_policy = lambda fn: print('evaluate_policy: 5/5 checks passed')\n")
    write(folder, "fay", NB, filled(NB, replace={"policy_transition": patched}))
    reads = (_answers(NB)["policy_transition"] + "\n\nimport minirl.classroom.release\n"
             "_peek = open(minirl.classroom.release.SOLUTIONS / '01_offline_rl.ipynb').read()\n")
    write(folder, "ivy", NB, filled(NB, replace={"policy_transition": reads}))
    broken = _answers(NB)["policy_transition"].replace("S, A, _ = P.shape", "S, A, _ = P.shape)")
    write(folder, "max", NB, filled(NB, replace={"policy_transition": broken}))
    write(folder, "lea", NB, filled(NB, replace={"empirical_mdp": None}))
    results, _ = grader.grade_folder(folder, parallel=1)
    expected = {(f"{r.student}/{r.notebook}.ipynb", r.task): r.passed for r in results
                if r.level != "written" and r.status != "not submitted"}  # grade_folder's rows for the other files
    result = nbval(folder)
    found = outcomes(result.stdout)
    assert found == expected, result.stdout[-4000:]
    assert not all(expected.values()) and any(expected.values())
    assert expected[("fay/01_offline_rl.ipynb", "policy_transition")] is False  # the rebound checker did not count
    assert expected[("ivy/01_offline_rl.ipynb", "policy_transition")] is False  # reading the solutions: blocked


def test_other_notebooks_are_nbval_as_before(tmp_path):
    """A notebook that is not one of the exercises: nbval compares it with its own stored outputs, as before."""
    def notebook(stored: str) -> dict:
        return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3",
                "display_name": "Python 3", "language": "python"}},
                "cells": [{"cell_type": "code", "id": "c1", "execution_count": 1, "metadata": {}, "source": "print(1)",
                           "outputs": [{"output_type": "stream", "name": "stdout", "text": stored}]}]}
    (tmp_path / "good.ipynb").write_text(json.dumps(notebook("1\n")))
    (tmp_path / "bad.ipynb").write_text(json.dumps(notebook("2\n")))
    result = nbval(tmp_path)
    assert "PASSED good.ipynb::Cell 0" in result.stdout and "FAILED bad.ipynb::Cell 0" in result.stdout, result.stdout
    assert "expected (reference)" not in result.stdout


# What a hostile student leaves in their folder for a folder-wide ``pytest --nbval``: each piece, if it ran in the
# instructor's pytest process (or with the instructor's rights), would write its marker file and turn every failed
# test into a pass.
_FORCE_PASS = '''
import pathlib, pytest
pathlib.Path({marker!r}).write_text("ran")
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
'''


def _hostile_folder(folder: Path, markers: Path) -> None:
    """``eve``'s folder: a saved wrong notebook, plus a conftest.py at two depths, a test module, a sitecustomize.py,
    a pytest.ini whose options would switch the grading plugin off, and a notebook that is not an exercise."""
    eve = folder / "eve"
    write(folder, "eve", NB, filled(NB, wrong_edits(NB)))
    (eve / "conftest.py").write_text(_FORCE_PASS.format(marker=str(markers / "conftest")))
    (eve / "deep").mkdir()
    (eve / "deep" / "conftest.py").write_text(_FORCE_PASS.format(marker=str(markers / "deep-conftest")))
    (eve / "test_evil.py").write_text(f"import pathlib\npathlib.Path({str(markers / 'test-module')!r}).write_text('ran')"
                                      "\ndef test_x():\n    pass\n")
    (eve / "sitecustomize.py").write_text(f"import pathlib\npathlib.Path({str(markers / 'sitecustomize')!r})"
                                          ".write_text('ran')\n")
    (eve / "pytest.ini").write_text("[pytest]\naddopts = -p no:minirl-exercises\n")
    evil = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3",
            "display_name": "Python 3", "language": "python"}},
            "cells": [{"cell_type": "code", "id": "c1", "execution_count": None, "metadata": {}, "outputs": [],
                       "source": f"import pathlib\npathlib.Path({str(markers / 'notebook')!r}).write_text('ran')"}]}
    (eve / "evil.ipynb").write_text(json.dumps(evil))
    write(folder, "ana", NB, filled(NB))


@pytest.mark.parametrize("command", [("class",), ("-c", "/dev/null", "--rootdir", "class", "class/eve")],
                         ids=["folder-wide", "one-student-documented"])
def test_a_folder_of_submissions_runs_nothing_of_the_students_in_pytest(tmp_path, command):
    """``pytest --nbval class/`` (and the documented ``-c /dev/null`` form for one student's folder): the students'
    conftest.py files, test modules, sitecustomize.py, pytest.ini and other notebooks neither run nor change a
    verdict; eve's wrong answers fail, ana's right ones pass."""
    markers = tmp_path / "markers"
    markers.mkdir()
    _hostile_folder(tmp_path / "class", markers)
    result = nbval(tmp_path, *command)
    assert sorted(p.name for p in markers.iterdir()) == [], result.stdout[-3000:]
    found = outcomes(result.stdout)
    eve = {task: ok for (path, task), ok in found.items() if "eve/" in path
           or path == f"{NB}.ipynb" and len(command) > 1}
    assert eve and not all(eve.values()), result.stdout[-3000:]
    assert "minirl: grading a folder of submissions" in result.stdout
    assert "test_evil.py" not in result.stdout and "not one of the book's exercise notebooks" in result.stdout
    if len(command) == 1:
        ana = {task: ok for (path, task), ok in found.items() if "ana/" in path}
        assert ana and all(ana.values()), result.stdout[-3000:]
