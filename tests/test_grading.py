"""The grader, scenario by scenario: every submission is built here, graded by minirl.classroom.grader, and its grade
asserted.

A class of students, one per scenario, is graded once (module fixture): right answers, wrong answers executed and
saved, the untouched copy executed and saved, outputs cleared, checker cells tampered with, minirl's checkers
monkeypatched, a submission that reads the solutions, one that writes outside its folder, one whose process dies,
a missing task with an extra cell, a syntax error, a file that is not JSON. An infinite loop is graded with a short
time limit next to a good submission. The first test is the bug of issue 15: under the old grader (strict nbval against
the notebook's own outputs) a saved wrong notebook graded 4/4.
"""
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minirl.classroom import grader, release

from test_exercises import WRONG  # one source of plausible wrong answers

NB = "01_offline_rl"  # the quick notebook (tabular), for most scenarios
PROJECT = "06_project"  # the end-to-end assignment: its second task trains the student's update
SIGN_FLIP = next((old, new) for nb, task, old, new in WRONG if task == "cql_update")


def _student_copy(name: str) -> dict:
    return json.loads((release.EXERCISES / f"{name}.ipynb").read_text())


def _task_name(src: str) -> str:
    """The task an answer cell holds: its last function, or (a prediction: assignments only) its first name."""
    defs = re.findall(r"^def (\w+)", src, re.M)
    return defs[-1] if defs else re.findall(r"^(\w+)\s*=", src, re.M)[0]


def _answers(name: str, edits=()) -> dict[str, str]:
    """The reference's answer cells by task name, after the (old, new) edits."""
    out = {}
    for cell in json.loads((release.SOLUTIONS / f"{name}.ipynb").read_text())["cells"]:
        if "solution" in cell["metadata"].get("tags", []):
            src = "".join(cell["source"])
            for old, new in edits:
                src = src.replace(old, new)
            out[_task_name(src)] = src
    return out


def filled(name: str, edits=(), replace: dict | None = None) -> dict:
    """The student copy with each stub replaced by the reference's answer (after ``edits``), or by ``replace[task]``
    (``None``: the answer cell is deleted)."""
    answers = _answers(name, edits) | (replace or {})
    nb = _student_copy(name)
    written = {"".join(c["source"]).splitlines()[0]: c["source"] for c in
               json.loads((release.SOLUTIONS / f"{name}.ipynb").read_text())["cells"]
               if "written" in c["metadata"].get("tags", [])}
    cells = []
    for cell in nb["cells"]:
        first = "".join(cell["source"]).splitlines()[:1]
        if cell["cell_type"] == "markdown" and first and first[0] in written:
            cell["source"] = written[first[0]]
        task = _task_name("".join(cell["source"])) if "student" in cell["metadata"].get("tags", []) else None
        if task in answers:
            if answers[task] is None:
                continue
            cell["source"] = answers[task]
        cells.append(cell)
    nb["cells"] = cells
    return nb


def wrong_edits(name: str) -> list[tuple[str, str]]:
    return [(old, new) for nb, _, old, new in WRONG if nb == name][:2]



def passing_checkers(nb: dict) -> dict:
    """A copy of ``nb`` whose checker cells print the passing line, and whose stored outputs say so."""
    tampered = json.loads(json.dumps(nb))
    for cell in tampered["cells"]:
        task = release.checker_task("".join(cell["source"]))
        if task:  # the checker cell prints the passing line, and the stored output says so
            line = f"{task}: 5/5 checks passed"
            cell["source"] = f"print({line!r})"
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": line + "\n"}]
    return tampered


def write(folder: Path, student: str, name: str, nb) -> Path:
    path = folder / student / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb, indent=1))
    return path


def execute_and_save(path: Path) -> None:
    """What a student's Jupyter does: run every cell (errors included) and save the outputs into the file."""
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    "--allow-errors", str(path)], check=True, capture_output=True)


def rows_of(results, student: str, notebook: str = NB) -> dict[str, grader.TaskResult]:
    return {r.task: r for r in results if r.student == student and r.notebook == notebook}


def statuses(results, student: str, notebook: str = NB) -> dict[str, str]:
    return {task: r.status for task, r in rows_of(results, student, notebook).items()}


def auto_statuses(results, student: str, notebook: str = NB) -> dict[str, str]:
    """:func:`statuses` of the auto-graded tasks (the written answers are ``manual``, for the instructor)."""
    return {task: r.status for task, r in rows_of(results, student, notebook).items() if r.level != "written"}


# --------------------------------------------------------------------------------------------------------------
# The bug of issue 15, first
# --------------------------------------------------------------------------------------------------------------

def test_saved_wrong_submission_is_not_passed(tmp_path):
    """Failed under the old grader (fdb4b34: '| ben | 04_iql.ipynb | 4/4 |'): nbval compared each checker's output
    with the output the student's own run had stored."""
    path = write(tmp_path, "ben", "04_iql", filled("04_iql", [("weight * diff ** 2", "0.5 * diff ** 2")]))
    execute_and_save(path)  # Jupyter autosaves: the stored outputs are the student's own run
    table = grader.grade(tmp_path)
    row = next(line for line in table.splitlines() if line.startswith("| ben | 04_iql"))
    passed, total = (int(x) for x in row.split("|")[3].strip().split("/"))
    assert passed < total, row


# --------------------------------------------------------------------------------------------------------------
# A class with one student per scenario, graded once
# --------------------------------------------------------------------------------------------------------------

OUTSIDE = "escape.txt"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    folder = root / "submissions"
    outside = root / OUTSIDE
    for name in [p.stem for p in sorted(release.SOLUTIONS.glob("*.ipynb"))]:
        write(folder, "ana", name, filled(name))                         # every task right
        if name != NB:
            write(folder, "chloe", name, _student_copy(name))            # untouched, never run
    wrong = filled(NB, wrong_edits(NB))
    execute_and_save(write(folder, "ben", NB, wrong))                    # two wrong answers, run and saved
    execute_and_save(write(folder, "chloe", NB, _student_copy(NB)))      # untouched, run and saved
    ben = json.loads((folder / "ben" / f"{NB}.ipynb").read_text())
    cleared = json.loads(json.dumps(ben))
    for cell in cleared["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    write(folder, "dana", NB, cleared)                                   # the same, outputs cleared
    tampered = passing_checkers(ben)
    write(folder, "eve", NB, tampered)
    patched = _answers(NB, wrong_edits(NB))["policy_transition"] + (
        "\n\nimport minirl.classroom as mex\n"
        "mex.check_policy_transition = lambda fn: print('policy_transition: 5/5 checks passed')\n"
        "check_evaluate_policy = lambda fn: print('evaluate_policy: 5/5 checks passed')\n")
    write(folder, "fay", NB, filled(NB, replace={"policy_transition": patched}))  # monkeypatches the checkers
    reads = (_answers(NB)["policy_transition"] + "\n\nimport minirl.classroom.release\n"
             "_peek = open(minirl.classroom.release.SOLUTIONS / '01_offline_rl.ipynb').read()\n")
    write(folder, "ivy", NB, filled(NB, replace={"policy_transition": reads}))     # reads the solutions
    writes = (f"open({str(outside)!r}, 'w').write('escaped')\n\n" + _answers(NB)["evaluate_policy"])
    inside = "open('notes.txt', 'w').write('scratch work in my own folder')\n\n" + _answers(NB)["empirical_mdp"]
    write(folder, "jon", NB, filled(NB, replace={"evaluate_policy": writes, "empirical_mdp": inside}))
    dies = _answers(NB)["empirical_mdp"].replace('    s, a, s_next = ', '    import os\n    os.abort()\n    s, a, s_next = ')
    write(folder, "kai", NB, filled(NB, replace={"empirical_mdp": dies}))          # the process dies
    missing = filled(NB, replace={"empirical_mdp": None})
    missing["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                             "source": "print('scratch')\n"})
    write(folder, "lea", NB, missing)                                    # a task deleted, an extra cell added
    broken = _answers(NB)["policy_transition"].replace("S, A, _ = P.shape", "S, A, _ = P.shape)")
    write(folder, "max", NB, filled(NB, replace={"policy_transition": broken}))    # a syntax error
    text = json.dumps(filled(NB))
    write(folder, "noa", NB, text[: len(text) // 2])                     # not valid JSON (a truncated upload)
    write(folder, "ben", PROJECT, filled(PROJECT, wrong_edits(PROJECT)))  # a wrong update and a wrong sweep
    write(folder, "oli", PROJECT, filled(PROJECT, [SIGN_FLIP]))           # only the update wrong: it trains badly
    results, _ = grader.grade_folder(folder, parallel=2)
    return {"results": results, "folder": folder, "outside": outside, "root": root}


TASKS = ["policy_transition", "evaluate_policy", "empirical_mdp", "optimism_experiment", "coverage_prediction",
         "coverage_experiment"]


def test_right_answers_pass_every_task_of_every_notebook(graded):
    ana = [r for r in graded["results"] if r.student == "ana"]
    assert {r.notebook for r in ana} == {p.stem for p in release.SOLUTIONS.glob("*.ipynb")}
    auto = [r for r in ana if r.level != "written"]
    assert auto and all(r.status == "passed" and r.checks_passed == r.checks_total for r in auto), \
        [(r.notebook, r.task, r.status, r.message) for r in auto if r.status != "passed"]
    written = [r for r in ana if r.level == "written"]
    n_written = sum(c["kind"] == "written" for spec in grader.load_checks().values() for c in spec["cells"])
    assert len(written) == n_written >= 4 and all(r.status == "manual" and not r.passed for r in written)


def test_saved_wrong_answers_fail(graded):
    ben = rows_of(graded["results"], "ben")
    assert [ben[t].status for t in TASKS] == ["failed", "failed", "passed", "passed", "passed", "passed"]
    assert "check FAILED" in ben["policy_transition"].message and "expected" in ben["policy_transition"].message


def test_the_assignment_s_wrong_answers_fail_and_a_broken_update_trains_below_the_reference(graded):
    ben = rows_of(graded["results"], "ben", PROJECT)
    assert [ben[t].status for t in ("cql_update", "penalty_sweep")] == ["failed", "failed"]
    # only the update wrong: the update fails; the sweep, run on the reference's update in a process of its own,
    # is graded on its own (fair partial credit: the bug is charged once)
    oli = rows_of(graded["results"], "oli", PROJECT)
    assert oli["cql_update"].status == "failed" and oli["cql_update"].points == 0
    assert oli["penalty_sweep"].status == "passed" and oli["penalty_sweep"].points == 6


def test_saved_untouched_copy_is_not_implemented(graded):
    for name in (p.stem for p in release.SOLUTIONS.glob("*.ipynb")):
        rows = rows_of(graded["results"], "chloe", name)
        auto = {t: r for t, r in rows.items() if r.level != "written"}
        assert auto and all(r.status == "not implemented" for r in auto.values()), (name, auto)
        assert all(r.message == "the stub still raises NotImplementedError" for r in auto.values())
        assert all(r.answer == "" for r in rows.values() if r.level == "written")  # the placeholder is no answer


def test_cleared_and_tampered_notebooks_grade_as_the_saved_one(graded):
    ben = statuses(graded["results"], "ben")
    assert statuses(graded["results"], "dana") == ben     # outputs cleared
    assert statuses(graded["results"], "eve") == ben      # checker cells print the passing line, outputs faked


def test_monkeypatched_checkers_are_restored_and_flagged(graded):
    fay = rows_of(graded["results"], "fay")
    assert fay["policy_transition"].status == "failed"
    # the rebound check_evaluate_policy was undone: the real checker ran its 5 checks (on the reference's
    # policy_transition, in the task's own process); a fake one would have printed the passing line and recorded no
    # verdict
    assert fay["evaluate_policy"].status == "passed" and fay["evaluate_policy"].checks_total == 5
    assert fay["empirical_mdp"].status == fay["optimism_experiment"].status == "passed"
    assert "flagged for a look by hand" in fay["policy_transition"].message


def test_reading_the_solutions_is_blocked(graded):
    ivy = rows_of(graded["results"], "ivy")
    assert ivy["policy_transition"].status == "blocked"
    assert "reading the solutions" in ivy["policy_transition"].message
    assert [ivy[t].status for t in TASKS[1:]] == ["passed"] * 5  # the rest is graded


def test_writing_outside_its_folder_is_blocked(graded):
    jon = rows_of(graded["results"], "jon")
    assert jon["evaluate_policy"].status == "blocked"
    assert "writing outside the submission's folder" in jon["evaluate_policy"].message
    assert not graded["outside"].exists()
    assert jon["empirical_mdp"].status == "passed"        # writing inside its own folder is fine
    assert jon["policy_transition"].status == jon["optimism_experiment"].status == "passed"


def test_a_process_that_dies_is_reported_and_the_rest_is_graded(graded):
    """Each task runs in a process of its own (on the reference's earlier pieces): a death costs only its task."""
    kai = rows_of(graded["results"], "kai")
    assert [kai[t].status for t in TASKS] == ["passed", "passed", "process died", "passed", "passed", "passed"]
    # abort(): SIGABRT, or SIGSEGV where the task's process is process 1 of its PID namespace (it ignores the
    # signals it sends itself, so abort() ends in a fault)
    assert "the task's process died (signal SIG" in kai["empirical_mdp"].message


def test_a_missing_task_and_an_extra_cell(graded):
    lea = rows_of(graded["results"], "lea")
    assert [lea[t].status for t in TASKS] == ["passed", "passed", "missing", "passed", "passed", "passed"]
    assert "no code cell defines empirical_mdp" in lea["empirical_mdp"].message
    assert "1 code cell not in the reference was ignored" in lea["policy_transition"].message
    other = rows_of(graded["results"], "lea", "04_iql")  # a notebook the student did not hand in
    assert other and all(r.status == "not submitted" for r in other.values())


def test_a_syntax_error_is_that_task_s_error(graded):
    max_ = rows_of(graded["results"], "max")
    assert max_["policy_transition"].status == "error"
    assert "SyntaxError" in max_["policy_transition"].message
    assert max_["empirical_mdp"].status == max_["optimism_experiment"].status == "passed"


def test_invalid_json_is_that_student_s_row(graded):
    noa = rows_of(graded["results"], "noa")
    assert set(noa) == set(TASKS) | {"coverage_experiment_answer"} and all(r.status == "invalid notebook" for r in noa.values())
    assert "invalid JSON" in noa["policy_transition"].message


def test_outputs_one_row_per_student_and_task(graded, tmp_path):
    results = graded["results"]
    grader.write_csv(results, tmp_path / "grades.csv")
    grader.write_json(results, tmp_path / "grades.json")
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(results) == len(json.loads((tmp_path / "grades.json").read_text()))
    keys = [(r["student"], r["notebook"], r["task"]) for r in rows]
    assert len(set(keys)) == len(keys)
    written = [r for r in rows if r["student"] == "ana" and r["level"] == "written"]
    assert written and all(r["status"] == "manual" and len(r["answer"]) > 100 for r in written)
    table = grader.table(results)
    assert "| ben | 01_offline_rl | 4/6 | 8/12 + 3 written | policy_transition failed" in table
    assert "| noa | 01_offline_rl | 0/6 |" in table and "invalid JSON" in table


def test_self_check_gives_the_grader_s_verdict(graded):
    for student in ("ben", "kai", "ivy"):
        rows, _ = grader.check_notebook(graded["folder"] / student / f"{NB}.ipynb")
        assert {r.task: (r.status, r.checks_passed) for r in rows} == \
            {t: (r.status, r.checks_passed) for t, r in rows_of(graded["results"], student).items()}
    cli = subprocess.run([sys.executable, "-m", "minirl.classroom", "check", str(graded["folder"] / "ben" / f"{NB}.ipynb")],
                         capture_output=True, text=True)
    assert cli.returncode == 1
    assert "FAILED  policy_transition (function): 1/5 checks passed" in cli.stdout and "check FAILED" in cli.stdout
    assert f"{NB}: 4/6 tasks passed" in cli.stdout


def test_an_infinite_loop_costs_its_time_limit_and_the_class_is_graded(tmp_path):
    loop = _answers(NB)["evaluate_policy"].replace("    S, A = R.shape", "    while True:\n        pass")
    write(tmp_path, "gus", NB, filled(NB, replace={"evaluate_policy": loop}))
    write(tmp_path, "hal", NB, filled(NB))
    results, _ = grader.grade_folder(tmp_path, time_limit=10, parallel=2)
    gus, hal = rows_of(results, "gus"), rows_of(results, "hal")
    assert [gus[t].status for t in TASKS] == ["passed", "time limit", "passed", "passed", "passed", "passed"]  # a loop costs its task
    assert "time limit of 10 s of CPU time" in gus["evaluate_policy"].message
    assert all(r.status == "passed" for r in hal.values() if r.level != "written")


def test_the_spawned_worker_grades_like_the_forked_one(tmp_path):
    reads = _answers(NB)["policy_transition"] + "\nopen(" + repr(str(release.SOLUTIONS / f"{NB}.ipynb")) + ").read()\n"
    write(tmp_path, "ivy", NB, filled(NB, replace={"policy_transition": reads}))
    write(tmp_path, "ben", NB, filled(NB, wrong_edits(NB)))
    results, _ = grader.grade_folder(tmp_path, use_fork=False)
    assert auto_statuses(results, "ivy") == dict(zip(TASKS, ["blocked"] + ["passed"] * 5))
    assert auto_statuses(results, "ben") == dict(zip(TASKS, ["failed", "failed"] + ["passed"] * 4))


def test_a_copy_handed_out_before_minirl_classroom_grades_the_same(tmp_path):
    """Copies made before the classroom package import the checkers from minirl.exercises, which is gone: the grader
    runs the reference's cells, not the submission's, so such a copy grades as a new one (no cell reported ignored)."""
    old = json.dumps(filled(NB)).replace("minirl.classroom", "minirl.exercises")
    assert "from minirl.exercises import" in old
    write(tmp_path, "old", NB, old)
    results, _ = grader.grade_folder(tmp_path, parallel=1)
    assert {t: (r.status, r.message) for t, r in rows_of(results, "old").items() if r.level != "written"} == \
        {t: ("passed", "") for t in TASKS}


def test_the_submission_folder_is_read_only_to_the_grader(graded):
    # grading never writes into the submissions (nor leaves the students' scratch files there)
    assert not list(graded["folder"].rglob("notes.txt"))


def test_every_check_is_in_the_row_s_details_for_the_feedback(graded, tmp_path):
    """The row carries every check the grader judged, passed or failed, with what was wrong (issue 71's feedback);
    the JSON results keep it for `feedback`, the CSV's columns stay as they were."""
    ben = rows_of(graded["results"], "ben")["policy_transition"]
    lines = check_lines_of(ben)
    assert len(lines) == ben.checks_total == 5
    assert sum(line.startswith("passed: ") for line in lines) == ben.checks_passed == 1
    assert all("expected" in line for line in lines if line.startswith("FAILED: "))
    ana = rows_of(graded["results"], "ana")["policy_transition"]
    assert len(check_lines_of(ana)) == 5 and all(x.startswith("passed: ") for x in check_lines_of(ana))
    grader.write_json(graded["results"], tmp_path / "r.json")
    grader.write_csv(graded["results"], tmp_path / "r.csv")
    assert any(r["details"] == ben.details for r in json.loads((tmp_path / "r.json").read_text()))
    assert "details" not in (tmp_path / "r.csv").read_text().splitlines()[0].split(",")


def check_lines_of(row) -> list[str]:
    """A row's checks, one per line, without the first lines that say how to rerun them (rerun_line)."""
    return [line for line in row.details.splitlines() if line.startswith(("passed: ", "FAILED: "))]


def test_the_feedback_says_how_to_rerun_a_task_s_checks_on_the_graded_inputs(graded):
    """Graded on inputs drawn per grading run, a student could not see a failing check's inputs: the self-check draws
    the public ones. The details name the draw and the code; run in the student's own process it fails the same checks
    with the same values (and, on the public inputs, with other values)."""
    import contextlib
    import re

    import numpy as np

    from minirl.classroom import checks
    ben = rows_of(graded["results"], "ben")["policy_transition"]
    head = ben.details.splitlines()[:4]
    assert head[0].startswith("inputs: drawn for this grading (draw ") and "checks.grading_inputs(" in head[2]
    draw = int(re.search(r"\(draw (\d+)\)", head[0]).group(1))
    namespace = {"np": np}
    exec(_answers(NB, wrong_edits(NB))["policy_transition"], namespace)
    def local_lines(context):
        checks._VERDICTS.clear()
        with context:
            checks.check_policy_transition(namespace["policy_transition"])
        return grader.check_lines(checks._VERDICTS[-1]["checks"]).splitlines()
    assert local_lines(checks.grading_inputs(draw)) == check_lines_of(ben)
    assert local_lines(contextlib.nullcontext()) != check_lines_of(ben)  # the public inputs are other inputs
    with pytest.raises(ValueError, match="draw must be the whole number"):
        checks.grading_inputs("12")
