"""After the grader: rosters, gradebook exports (Canvas, Gradescope), manual marks, late work, feedback, LMS intake.

The grader's results are made here with its own dataclass and writers (grader.TaskResult, write_csv, write_json):
never typed by hand, never graded (the grader has its own tests). The formats' columns are asserted as their
documentation states them (see minirl/classroom/gradebook.py's docstring for the pages), written out in the tests,
not read back from the module's constants.
"""
import csv
import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from minirl.classroom import gradebook as gb
from minirl.classroom import grader, release
from minirl.classroom.gradebook_cli import main

SPECS = grader.load_checks()
NB1, NB2 = "01_offline_rl", "02_bcq"          # one without and one with a written answer
WRITTEN2 = "threshold_sweep_answer"           # 02_bcq's written answer: 4 points, Full (4) / Partial (2) / None (0)
# The class in these tests is graded on a fixed set of the notebooks' tasks (their points and kinds read from the
# grader's checks), so the totals below stay written out when a chapter gains a task: the gradebook takes its tasks
# from the results, never from the checks. 01: its four functions (no written answer); 02: its first seven tasks.
TASKS = {NB1: ("policy_transition", "evaluate_policy", "empirical_mdp", "optimism_experiment"),
         NB2: ("soft_clipped_double_q", "critic_target", "vae_loss", "bcq_action_mask", "discrete_bcq_update",
               "threshold_sweep", WRITTEN2)}


def rows_for(student: str, notebook: str, failed=(), status: str | None = None, answer: str = "my answer"):
    """The grader's rows for one student's notebook: every task passed except ``failed``; ``status`` for all (e.g.
    "not submitted")."""
    out = []
    tasks = {t["task"]: t for t in grader.tasks_of(SPECS[notebook])}
    for t in (tasks[name] for name in TASKS[notebook]):
        pts = t["points"]
        if t["kind"] == "written":
            st = status or "manual"
            out.append(grader.TaskResult(student, notebook, t["task"], "written", st, False, message="for the "
                                         "instructor", answer=answer if st == "manual" else "", points=None,
                                         points_possible=pts))
            continue
        st = status or ("failed" if t["task"] in failed else "passed")
        msg = "check FAILED: pi(a|s) = [1, 0] at state 2, expected [0.5, 0.5] got [1, 0]" if st == "failed" else ""
        out.append(grader.TaskResult(student, notebook, t["task"], t["level"], st, st == "passed",
                                     checks_passed=t["n"] if st == "passed" else max(t["n"] - 1, 0),
                                     checks_total=t["n"], message=msg, points=pts if st == "passed" else 0,
                                     points_possible=pts))
    return out


def write_roster(path: Path, rows, header="folder,canvas_name,name,id,sis_user_id,sis_login_id,email,section"):
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


ROSTER = ['ana,alvarezana,"Alvarez, Ana",101,S1,aalvarez,ana@uni.edu,A',
          'ben,bakerben,"Baker, Ben",102,S2,bbaker,ben@uni.edu,A',
          'chloe,chenchloe,"Chen, Chloe",103,S3,cchen,chloe@uni.edu,B']


@pytest.fixture
def roster(tmp_path):
    return gb.load_roster(write_roster(tmp_path / "roster.csv", ROSTER))


def class_results():
    """ana: everything right; ben: 01's policy_transition wrong, 02 not submitted; chloe: both right."""
    return (rows_for("ana", NB1) + rows_for("ana", NB2) + rows_for("ben", NB1, failed={"policy_transition"})
            + rows_for("ben", NB2, status="not submitted") + rows_for("chloe", NB1) + rows_for("chloe", NB2))


# ---------------------------------------------------------------------------------------------------------------
# Roster
# ---------------------------------------------------------------------------------------------------------------

def test_roster_reads_every_column(roster):
    a = roster[0]
    assert (a.key, a.name, a.id, a.sis_user_id, a.sis_login_id, a.email, a.section, a.canvas_name) == \
        ("ana", "Alvarez, Ana", "101", "S1", "aalvarez", "ana@uni.edu", "A", "alvarezana")


@pytest.mark.parametrize("rows, header, message", [
    (ROSTER + ['dan,dd,"D, Dan",101,S4,,dan@uni.edu,A'], None, "row 5: id: duplicate '101' (also in row 2)"),
    (ROSTER + ['ana,zz,"Z, Ana",104,S4,,z@uni.edu,A'], None, "row 5: folder: duplicate 'ana'"),
    (ROSTER + ['dan,dd,"D, Dan",104,S4,,ANA@uni.edu,A'], None, "row 5: email: duplicate"),
    (['ana,"Alvarez, Ana",101,x'], "folder,name,id,student_number", "row 1: unknown column 'student_number'"),
    (['ana,,101'], "folder,name,id", "row 2: name: empty"),
    ([',,"X",1'], "folder,canvas_name,name,id", "row 2: folder: empty, and no canvas_name"),
    (['ana,"A",ana-at-uni'], "folder,name,email", "row 2: email: 'ana-at-uni' is not an email address"),
    (['ana,101'], "folder,id", "no column 'name'"),
])
def test_roster_errors_are_one_line_naming_row_and_field(tmp_path, rows, header, message):
    path = write_roster(tmp_path / "r.csv", rows, header or "folder,canvas_name,name,id,sis_user_id,sis_login_id,"
                        "email,section")
    with pytest.raises(gb.GradebookError) as e:
        gb.load_roster(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_graded_folder_missing_from_roster_is_an_error_and_absent_student_is_reported(roster):
    results = class_results() + rows_for("zoe", NB1) + rows_for("zoe", NB2)
    with pytest.raises(gb.GradebookError, match="graded folder not in the roster: zoe"):
        gb.build(results, roster)
    results = [r for r in class_results() if r.student != "chloe"]
    book = gb.build(results, roster)
    assert [s.key for s in book.students] == ["ana", "ben", "chloe"]  # chloe kept, with 0
    assert book.total("chloe") == 0 and not book.scores["chloe", NB1].submitted
    assert any(w.startswith("chloe (Chen, Chloe): in the roster, no submission") for w in book.warnings)


# ---------------------------------------------------------------------------------------------------------------
# The grader's results, read back from its own writers
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("writer, suffix", [(grader.write_csv, ".csv"), (grader.write_json, ".json")])
def test_results_round_trip_through_the_graders_writers(tmp_path, writer, suffix):
    results = class_results()
    writer(results, tmp_path / f"results{suffix}")
    back = gb.load_results(tmp_path / f"results{suffix}")
    assert [asdict(r) for r in back] == [asdict(r) for r in results]


def test_results_errors(tmp_path):
    results = class_results()
    grader.write_json(results, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    del data[3]["points_possible"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(gb.GradebookError, match=r"bad.json: row 4: no field 'points_possible'"):
        gb.load_results(tmp_path / "bad.json")
    with pytest.raises(gb.GradebookError, match="is also in"):
        gb.load_results([tmp_path / "r.json", tmp_path / "r.json"])
    data = json.loads((tmp_path / "r.json").read_text())
    data[0]["grade"] = "A"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(gb.GradebookError, match=r"bad.json: row 1: unknown field 'grade'"):
        gb.load_results(tmp_path / "bad.json")
    data = json.loads((tmp_path / "r.json").read_text())
    data[0]["points"] = 7
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(gb.GradebookError, match=r"row 1: points: 7 outside 0..points_possible \(2\)"):
        gb.load_results(tmp_path / "bad.json")
    grader.write_csv(results, tmp_path / "r.csv")
    text = (tmp_path / "r.csv").read_text().replace("points_possible", "points_max", 1)
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(gb.GradebookError, match="row 1: unknown column 'points_max'"):
        gb.load_results(tmp_path / "bad.csv")


# ---------------------------------------------------------------------------------------------------------------
# Exports, against the formats' documentation
# ---------------------------------------------------------------------------------------------------------------

def test_canvas_csv_has_the_documented_columns_points_possible_row_and_one_row_per_student(tmp_path, roster):
    book = gb.build(class_results(), roster)
    gb.write_rows(gb.canvas_rows(book), tmp_path / "canvas.csv")
    rows = list(csv.reader(open(tmp_path / "canvas.csv", newline="")))
    # Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then a column per assignment
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", NB1, NB2]
    # the second row, as Canvas's export writes it: "Points Possible", identity cells empty, each assignment's points
    assert rows[1][0].strip() == "Points Possible" and rows[1][1:5] == ["", "", "", ""]
    assert rows[1][5:] == ["8", "20"]  # 01: 4 functions x 2; 02: 4 x 2 + 5 + 3 + 4 written
    assert len(rows) == 2 + 3
    by = {r[0]: r for r in rows[2:]}
    assert by["Alvarez, Ana"][:5] == ["Alvarez, Ana", "101", "S1", "aalvarez", "A"]
    assert by["Alvarez, Ana"][5:] == ["8", "16"]   # 02's written answer not marked: 0 of its 4
    assert by["Baker, Ben"][5:] == ["6", "0"]      # one wrong function; 02 not submitted
    assert not any("total" in c.lower() for c in rows[0])  # Canvas computes its own totals


def test_canvas_columns_come_from_the_settings(tmp_path, roster):
    (tmp_path / "c.toml").write_text('[canvas.columns]\n"02_bcq" = "Exercise 2: BCQ (98765)"\n')
    book = gb.build(class_results(), roster, settings=gb.load_settings(tmp_path / "c.toml"))
    assert gb.canvas_rows(book)[0][5:] == [NB1, "Exercise 2: BCQ (98765)"]


def test_gradescope_csv_has_name_sid_email_and_the_score(roster):
    book = gb.build(class_results(), roster)
    rows = gb.gradescope_rows(book)
    assert rows[0] == ["Name", "SID", "Email", "Total Score"]
    assert rows[1] == ["Alvarez, Ana", "S1", "ana@uni.edu", "24"]
    assert gb.gradescope_rows(book, NB1)[2] == ["Baker, Ben", "S2", "ben@uni.edu", "6"]
    emails = [r[2] for r in rows[1:]]
    assert all(emails) and len(set(emails)) == len(emails)  # Gradescope matches on a unique email


def test_gradescope_needs_every_email(tmp_path):
    roster = gb.load_roster(write_roster(tmp_path / "r.csv", ['ana,"A",', 'ben,"B",b@u.edu', 'chloe,"C",c@u.edu'],
                                         "folder,name,email"))
    book = gb.build(class_results(), roster)
    with pytest.raises(gb.GradebookError, match="ana: email: empty; Gradescope matches students by email"):
        gb.gradescope_rows(book)


def test_totals_per_notebook_and_overall(roster):
    book = gb.build(class_results(), roster)
    assert book.possible_of(NB1) == 8 and book.possible_of(NB2) == 20 and book.possible() == 28
    assert [book.total(k) for k in ("ana", "ben", "chloe")] == [24, 6, 24]
    head, *rows = gb.summary_rows(book)
    assert head[-3:] == ["total", "possible", "percent"] and rows[1][-3:] == ["6", "28", "21.43"]
    assert rows[1][head.index(f"{NB2} auto")] == "not submitted"


# ---------------------------------------------------------------------------------------------------------------
# Rubrics and manual marks
# ---------------------------------------------------------------------------------------------------------------

def test_rubrics_come_from_the_reference_notebooks():
    rubrics = gb.load_rubrics()
    assert rubrics[NB2][WRITTEN2] == {"points": 4, "items": {"Full": 4, "Partial": 2, "None": 0}}
    assert rubrics["06_project"]["penalty_sweep_answer"]["items"] == {"Full": 6, "Partial": 3, "None": 0}
    written = {(n, c["task"]) for n, s in SPECS.items() for c in s["cells"] if c["kind"] == "written"}
    assert written == {(n, t) for n, ts in rubrics.items() for t in ts}  # every written answer has its rubric


def write_marks(path: Path, rows, header="student,task,item,points,comment"):
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("row, message", [
    (f"zoe,{WRITTEN2},Full,4,", "row 2: student: 'zoe' is not a student in the results"),
    (f"ana,{WRITTEN2},Excellent,4,", "row 2: item: 'Excellent' is not an item of threshold_sweep_answer's rubric "
                                      "(expected one of Full (4) / Partial (2) / None (0))"),
    (f"ana,{WRITTEN2},Partial,3,", "row 2: points: 3 is above the maximum of threshold_sweep_answer's item "
                                    "Partial (2)"),
    (f"ana,{WRITTEN2},Full,four,", "row 2: points: 'four' is not a number"),
    (f"ana,{WRITTEN2},Full,-1,", "row 2: points: '-1'; expected a number from 0"),
    ("ana,vae_loss,Full,2,", "row 2: task: 'vae_loss' is not a written answer of 02_bcq"),
])
def test_marks_errors_name_file_row_and_field(tmp_path, row, message):
    path = write_marks(tmp_path / f"{NB2}.csv", [row])
    with pytest.raises(gb.GradebookError) as e:
        gb.load_marks([path], class_results(), gb.load_rubrics())
    assert str(e.value).startswith(str(path)) and message in str(e.value) and "\n" not in str(e.value)


def test_marks_twice_and_unknown_notebook_and_column(tmp_path):
    rub, res = gb.load_rubrics(), class_results()
    p = write_marks(tmp_path / f"{NB2}.csv", [f"ana,{WRITTEN2},Full,4,", f"ana,{WRITTEN2},None,0,"])
    with pytest.raises(gb.GradebookError, match="row 3: student: ana's threshold_sweep_answer is already marked"):
        gb.load_marks([p], res, rub)
    p = write_marks(tmp_path / f"{NB1}.csv", [f"ana,{WRITTEN2},Full,4,"])
    with pytest.raises(gb.GradebookError, match="notebook '01_offline_rl' has no written answers"):
        gb.load_marks([p], res, rub)
    p = write_marks(tmp_path / f"{NB2}.csv", [f"ana,{WRITTEN2},Full,4,x"], "student,task,item,points,grader")
    with pytest.raises(gb.GradebookError, match="row 1: unknown column 'grader'"):
        gb.load_marks([p], res, rub)


def test_marks_merge_into_totals_and_an_item_alone_gives_its_points(tmp_path, roster):
    p = write_marks(tmp_path / f"{NB2}.csv", [f"ana,{WRITTEN2},Partial,1.5,one end only", f"chloe,{WRITTEN2},Full,,"])
    marks = gb.load_marks([p], class_results(), gb.load_rubrics())
    book = gb.build(class_results(), roster, marks)
    assert book.scores["ana", NB2].written == 1.5 and book.total("ana") == 25.5
    assert book.scores["chloe", NB2].written == 4 and book.total("chloe") == 28
    assert gb.canvas_rows(book)[2][6] == "17.5"
    assert not any("ana" in w or "chloe" in w for w in book.warnings)


def test_unmarked_answers_are_warned_or_an_error(roster):
    book = gb.build(class_results(), roster)
    assert f"ana: {NB2} {WRITTEN2}: not marked (counted 0)" in book.warnings
    assert not any(w.startswith("ben:") for w in book.warnings)  # ben did not submit 02: nothing to mark
    with pytest.raises(gb.GradebookError, match=f"ana: {NB2} {WRITTEN2}: not marked"):
        gb.build(class_results(), roster, require_marks=True)


def test_yaml_marks(tmp_path, roster):
    pytest.importorskip("yaml")
    (tmp_path / f"{NB2}.yaml").write_text(f"marks:\n  - {{student: ana, task: {WRITTEN2}, item: Full, points: 4}}\n"
                                          f"  - {{student: chloe, task: {WRITTEN2}, item: Partial, points: 5}}\n")
    with pytest.raises(gb.GradebookError, match=r"02_bcq.yaml: mark 2: points: 5 is above the maximum"):
        gb.load_marks([tmp_path / f"{NB2}.yaml"], class_results(), gb.load_rubrics())


def test_marks_template_blank_then_filled(tmp_path, roster):
    results = class_results()
    paths = gb.write_marks_template(results, gb.load_rubrics(), tmp_path / "marks")
    assert [p.name for p in paths] == [f"{NB2}.csv"]
    rows = list(csv.DictReader(open(paths[0], newline="")))
    assert [(r["student"], r["task"]) for r in rows] == [("ana", WRITTEN2), ("chloe", WRITTEN2)]  # ben: not submitted
    assert rows[0]["items"] == "Full (4) / Partial (2) / None (0)" and rows[0]["answer"] == "my answer"
    assert gb.load_marks(paths, results, gb.load_rubrics()) == []  # blank: nothing marked, no error
    with pytest.raises(gb.GradebookError, match="already exists"):
        gb.write_marks_template(results, gb.load_rubrics(), tmp_path / "marks")


# ---------------------------------------------------------------------------------------------------------------
# Late work
# ---------------------------------------------------------------------------------------------------------------

UTC = dt.timezone.utc
DEADLINE = dt.datetime(2027, 2, 1, 23, 59, tzinfo=UTC)


def test_days_late_grace_and_canvas_marker():
    s = gb.Settings(deadline=DEADLINE, grace_minutes=10, penalty_per_day=0.1, max_days=3)
    at = lambda **kw: gb.Submission(DEADLINE + dt.timedelta(**kw), source="gradescope")  # noqa: E731
    assert gb.days_late(at(minutes=10), DEADLINE, s)[0] == 0
    assert gb.days_late(at(minutes=11), DEADLINE, s)[0] == 1
    assert gb.days_late(at(days=1, minutes=11), DEADLINE, s)[0] == 2
    assert gb.days_late(gb.Submission(late_marker=True), DEADLINE, s) == (1, "Canvas marked the submission LATE")
    assert gb.penalty_of(2, 10, 17, s) == pytest.approx(3.4)
    assert gb.penalty_of(4, 10, 17, s) == 10  # after max_days: nothing left
    assert gb.penalty_of(9, 1, 17, s) == 1    # never below 0


def test_settings_errors(tmp_path):
    for text, message in [("[late]\ndeadline = 2027-02-01T23:59:00\n", "has no time zone"),
                          ("[late]\npenalty = 0.1\n", "[late] penalty: unknown key"),
                          ("[late]\npenalty_per_day = 10\n", "[late] penalty_per_day: 10; expected a number from 0 "
                                                             "to 1"),
                          ("[lateness]\n", "unknown table [lateness]"),
                          ('[late]\ntimestamps = "mtime"\n', "expected \"lms\" or \"files\"")]:
        (tmp_path / "c.toml").write_text(text)
        with pytest.raises(gb.GradebookError) as e:
            gb.load_settings(tmp_path / "c.toml")
        assert message in str(e.value), (text, str(e.value))


def test_late_penalty_in_the_gradebook_and_its_policy(tmp_path, roster):
    (tmp_path / "c.toml").write_text('[late]\ndeadline = 2027-02-01T23:59:00Z\npenalty_per_day = 0.25\n'
                                     '[late.deadlines]\n"02_bcq" = "2027-02-08T23:59:00+00:00"\n')
    settings = gb.load_settings(tmp_path / "c.toml")
    subs = {("ana", NB1): gb.Submission(DEADLINE + dt.timedelta(hours=30), source="gradescope"),   # 2 days late
            ("ana", NB2): gb.Submission(DEADLINE + dt.timedelta(days=3), source="gradescope"),     # on time for 02
            ("chloe", NB1): gb.Submission(late_marker=True, source="canvas")}                       # 1 day
    book = gb.build(class_results(), roster, settings=settings, submissions=subs)
    assert book.scores["ana", NB1].days_late == 2 and book.scores["ana", NB1].total == 4   # 8 - 2 x 0.25 x 8
    assert book.scores["ana", NB2].days_late == 0
    assert book.scores["chloe", NB1].total == 6
    md = gb.summary_markdown(book)
    assert "25% of the notebook's points deducted per day late" in md and "02_bcq 2027-02-08T23:59:00+00:00" in md
    assert "4 (2 d late, -4)" in md


# ---------------------------------------------------------------------------------------------------------------
# Feedback
# ---------------------------------------------------------------------------------------------------------------

def test_feedback_lists_every_task_the_failures_rubric_items_and_mark(tmp_path, roster):
    results = rows_for("ana", NB1, failed={"evaluate_policy"}) + rows_for("ana", NB2, answer="Small is best.\n\nWhy.")
    results += rows_for("ben", NB1) + rows_for("ben", NB2) + rows_for("chloe", NB1) + rows_for("chloe", NB2)
    results[1].details = "check FAILED: V at gamma 0.9\n    expected 1.5 got 1.2"
    p = write_marks(tmp_path / f"{NB2}.csv", [f"ana,{WRITTEN2},Partial,2,explain threshold 1"])
    rub = gb.load_rubrics()
    book = gb.build(results, roster, gb.load_marks([p], results, rub))
    paths = gb.write_feedback(book, tmp_path / "fb", rub)
    assert len(paths) == 6
    one = (tmp_path / "fb" / "ana" / f"{NB1}.md").read_text()
    for t in TASKS[NB1]:
        assert f"| {t} |" in one
    assert "| evaluate_policy | function | failed" in one and "expected [0.5, 0.5] got [1, 0]" in one
    assert "expected 1.5 got 1.2" in one and "**Score: 6 of 8 points** (auto-graded 6 of 8)\n" in one
    two = (tmp_path / "fb" / "ana" / f"{NB2}.md").read_text()
    assert f"### {WRITTEN2} (4 points): Partial, 2 of 4" in two and "Full (4) / Partial (2) / None (0)" in two
    assert "Comment: explain threshold 1" in two and "> Small is best.\n>\n> Why." in two
    assert "extrapolation" not in two  # the rubric's text (the model answer's mechanism) stays the instructor's
    with pytest.raises(gb.GradebookError, match="already exists"):
        gb.write_feedback(book, tmp_path / "fb", rub)


# ---------------------------------------------------------------------------------------------------------------
# Intake
# ---------------------------------------------------------------------------------------------------------------

def student_copy(name: str) -> str:
    return (release.EXERCISES / f"{name}.ipynb").read_text()


def test_canvas_intake_copies_into_the_graders_layout(tmp_path, roster):
    dl = tmp_path / "dl"
    dl.mkdir()
    files = {f"alvarezana_101_5001_{NB1}.ipynb": student_copy(NB1),
             f"alvarezana_LATE_101_5009_{NB2}-1.ipynb": student_copy(NB2),
             f"alvarezana_101_5002_{NB2}.ipynb": student_copy(NB2),      # an earlier upload: superseded
             f"bakerben_102_5003_{NB1}.ipynb": student_copy(NB1)}
    for n, text in files.items():
        (dl / n).write_text(text)
    found = gb.canvas_candidates(dl, roster, SPECS)
    rows = gb.intake(found, tmp_path / "subs")
    assert sorted(p.relative_to(tmp_path / "subs").as_posix() for p in (tmp_path / "subs").rglob("*.ipynb")) == \
        [f"ana/{NB1}.ipynb", f"ana/{NB2}.ipynb", f"ben/{NB1}.ipynb"]
    assert all((dl / n).exists() for n in files)  # copied, never moved
    chosen = {(r["student"], r["notebook"]): r for r in rows if r["chosen"] == "yes"}
    assert chosen["ana", NB2]["late_marker"] == "yes" and chosen["ana", NB2]["source"].endswith("5009_02_bcq-1.ipynb")
    assert any(r["chosen"].startswith("no (superseded") for r in rows)
    subs = gb.load_submissions(tmp_path / "subs", ["ana", "ben"], [NB1, NB2], gb.Settings())
    assert subs["ana", NB2].late_marker and not subs["ana", NB1].late_marker
    with pytest.raises(gb.GradebookError, match="not empty"):
        gb.intake(found, tmp_path / "subs")


def test_canvas_intake_finds_a_renamed_exercise_by_its_metadata(tmp_path, roster):
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl" / "alvarezana_101_5001_my_homework.ipynb").write_text(student_copy(NB1))  # as the grader does
    assert [c.exercise for c in gb.canvas_candidates(tmp_path / "dl", roster, SPECS)] == [NB1]


@pytest.mark.parametrize("name, message", [
    ("alvarezana_04_iql.ipynb", "not a Canvas submission file name"),
    ("04_iql.ipynb", "not a Canvas submission file name"),
    ("alvarezana_101_5001_notes.pdf", "not a Canvas submission file name"),
    ("nobody_999_5001_01_offline_rl.ipynb", "no roster student with Canvas id 999 or canvas_name 'nobody'"),
    ("alvarezana_101_5001_homework.ipynb", "'homework.ipynb' is not one of the exercises"),
])
def test_canvas_intake_errors(tmp_path, roster, name, message):
    dl = tmp_path / "download"
    dl.mkdir()
    (dl / f"bakerben_102_5000_{NB1}.ipynb").write_text(student_copy(NB1))  # a good file beside the bad one
    text = student_copy(NB1) if name.endswith(".ipynb") and "homework" not in name else "%PDF"
    (dl / name).write_text(text if "homework" not in name else '{"cells": [], "metadata": {}}')  # not an exercise
    with pytest.raises(gb.GradebookError) as e:
        gb.canvas_candidates(dl, roster, SPECS)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_gradescope_intake_takes_the_latest_submission(tmp_path, roster):
    pytest.importorskip("yaml")
    ex = tmp_path / "assignment_77_export"
    for sub in ("submission_1", "submission_2", "submission_3"):
        (ex / sub).mkdir(parents=True)
    (ex / "submission_1" / f"{NB1}.ipynb").write_text(student_copy(NB1))
    (ex / "submission_2" / f"{NB1}.ipynb").write_text(student_copy(NB1).replace("minirl", "minirl", 1) + " ")
    (ex / "submission_3" / f"{NB1}.ipynb").write_text(student_copy(NB1))
    (ex / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: Ana Alvarez\n    :sid: S1\n    :email: ana@uni.edu\n"
        "  :created_at: 2027-02-01 20:00:00.000000000 +00:00\n"
        "submission_2:\n  :submitters:\n  - :name: Ana Alvarez\n    :sid: S1\n    :email: ANA@uni.edu\n"
        "  :created_at: 2027-02-02 09:30:00.000000000 +00:00\n"
        "submission_3:\n  :submitters:\n  - :name: Ben Baker\n    :sid: S2\n    :email: other@uni.edu\n"
        "  :created_at: 2027-02-01 10:00:00.000000000 -0800\n")
    rows = gb.intake(gb.gradescope_candidates(ex, roster, SPECS), tmp_path / "subs")
    chosen = {(r["student"], r["notebook"]): r for r in rows if r["chosen"] == "yes"}
    assert chosen["ana", NB1]["source"].endswith(f"submission_2/{NB1}.ipynb")
    assert chosen["ben", NB1]["submitted_at"] == "2027-02-01T10:00:00-08:00"   # matched by SID
    assert (tmp_path / "subs" / "ana" / f"{NB1}.ipynb").read_text().endswith(" ")
    subs = gb.load_submissions(tmp_path / "subs", ["ana", "ben"], [NB1], gb.Settings())
    assert subs["ana", NB1].at == dt.datetime(2027, 2, 2, 9, 30, tzinfo=UTC)


# ---------------------------------------------------------------------------------------------------------------
# End to end, through the command line
# ---------------------------------------------------------------------------------------------------------------

def test_end_to_end_from_canvas_download_to_canvas_and_gradescope_csvs(tmp_path, capsys):
    roster = write_roster(tmp_path / "roster.csv", ROSTER)
    dl = tmp_path / "download"
    dl.mkdir()
    (dl / f"alvarezana_101_5001_{NB1}.ipynb").write_text(student_copy(NB1))
    (dl / f"alvarezana_101_5002_{NB2}.ipynb").write_text(student_copy(NB2))
    (dl / f"bakerben_LATE_102_5003_{NB1}.ipynb").write_text(student_copy(NB1))
    (dl / f"chenchloe_103_5004_{NB1}.ipynb").write_text(student_copy(NB1))
    (dl / f"chenchloe_103_5005_{NB2}.ipynb").write_text(student_copy(NB2))
    subs = tmp_path / "submissions"
    assert main(["intake", "canvas", str(dl), "--roster", str(roster), "--out", str(subs)]) == 0
    # the grader's verdicts on that folder, made with its own dataclass and writer (grading is not tested here)
    graded = sorted(p.name for p in subs.iterdir() if p.is_dir())
    assert graded == ["ana", "ben", "chloe"]
    results = (rows_for("ana", NB1) + rows_for("ana", NB2, failed={"vae_loss"})
               + rows_for("ben", NB1, failed={"empirical_mdp"}) + rows_for("ben", NB2, status="not submitted")
               + rows_for("chloe", NB1) + rows_for("chloe", NB2))
    grader.write_json(results, tmp_path / "results.json")
    marks = tmp_path / "marks"
    assert main(["marks-template", str(tmp_path / "results.json"), "--roster", str(roster), "--out", str(marks)]) == 0
    template = (marks / f"{NB2}.csv").read_text().splitlines()
    filled = [template[0]] + [line.replace(f"{WRITTEN2},,,", f"{WRITTEN2},Full,4,clear" if line.startswith("ana")
                                           else f"{WRITTEN2},Partial,2,one end") for line in template[1:]]
    (marks / f"{NB2}.csv").write_text("\n".join(filled) + "\n")
    (tmp_path / "class.toml").write_text('[late]\ndeadline = 2027-02-01T23:59:00Z\npenalty_per_day = 0.5\n')
    common = ["--roster", str(roster), "--marks", str(marks), "--settings", str(tmp_path / "class.toml"),
              "--submissions", str(subs)]
    out = tmp_path / "out"
    out.mkdir()
    assert main(["gradebook", str(tmp_path / "results.json"), *common, "--out", str(out / "gradebook.csv"),
                 "--markdown", str(out / "gradebook.md"), "--canvas", str(out / "canvas.csv"),
                 "--gradescope", str(out / "gradescope.csv")]) == 0
    canvas = list(csv.reader(open(out / "canvas.csv", newline="")))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", NB1, NB2]
    assert canvas[1][0].strip() == "Points Possible" and canvas[1][5:] == ["8", "20"]
    assert canvas[2:] == [["Alvarez, Ana", "101", "S1", "aalvarez", "A", "8", "18"],   # 16 auto - vae_loss 2 + 4 Full
                          ["Baker, Ben", "102", "S2", "bbaker", "A", "2", "0"],        # 6, LATE: -0.5 x 8
                          ["Chen, Chloe", "103", "S3", "cchen", "B", "8", "18"]]       # 16 + Partial 2
    gs = list(csv.reader(open(out / "gradescope.csv", newline="")))
    assert gs == [["Name", "SID", "Email", "Total Score"], ["Alvarez, Ana", "S1", "ana@uni.edu", "26"],
                  ["Baker, Ben", "S2", "ben@uni.edu", "2"], ["Chen, Chloe", "S3", "chloe@uni.edu", "26"]]
    md = (out / "gradebook.md").read_text()
    assert "late policy: deadline 2027-02-01T23:59:00+00:00" in md and "Canvas marked LATE" in md
    assert main(["feedback", str(tmp_path / "results.json"), *common, "--out", str(tmp_path / "feedback")]) == 0
    ben = (tmp_path / "feedback" / "ben" / f"{NB1}.md").read_text()
    assert "**Score: 2 of 8 points**" in ben and "late deduction -4" in ben
    assert "Canvas marked the submission LATE" in ben
    assert "| empirical_mdp | function | failed" in ben
    assert (tmp_path / "feedback" / "ben" / f"{NB2}.md").read_text().startswith(f"# {NB2}: feedback for Baker, Ben\n\n"
                                                                                 "Not submitted")
    assert "Partial, 2 of 4" in (tmp_path / "feedback" / "chloe" / f"{NB2}.md").read_text()


def test_cli_errors_are_one_line_with_status_2(tmp_path, capsys):
    roster = write_roster(tmp_path / "roster.csv", ROSTER)
    grader.write_json(class_results() + rows_for("zoe", NB1) + rows_for("zoe", NB2), tmp_path / "r.json")
    assert main(["gradebook", str(tmp_path / "r.json"), "--roster", str(roster)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error: graded folder not in the roster: zoe" in err


def test_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "minirl.classroom.gradebook_cli", "--help"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert out.returncode == 0 and "intake" in out.stdout and "marks-template" in out.stdout


def test_yaml_marks_merge(tmp_path, roster):
    pytest.importorskip("yaml")
    (tmp_path / f"{NB2}.yml").write_text(f"notebook: {NB2}\nmarks:\n  - student: chloe\n    task: {WRITTEN2}\n"
                                         "    item: None\n    points: 0\n    comment: no mechanism\n")
    book = gb.build(class_results(), roster, gb.load_marks([tmp_path / f"{NB2}.yml"], class_results(),
                                                           gb.load_rubrics()))
    assert book.scores["chloe", NB2].marks[WRITTEN2].comment == "no mechanism" and book.total("chloe") == 24
    assert f"chloe: {NB2} {WRITTEN2}: not marked (counted 0)" not in book.warnings


def test_the_commands_register_on_another_parser(tmp_path, capsys):
    """What minirl/classroom/cli.py needs to offer them as ``python -m minirl.classroom gradebook ...``."""
    import argparse

    from minirl.classroom import gradebook_cli
    p = argparse.ArgumentParser(prog="python -m minirl.classroom")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("grade")  # the classroom's own commands stay as they are
    gradebook_cli.add_commands(sub)
    roster = write_roster(tmp_path / "roster.csv", ROSTER)
    grader.write_csv(class_results(), tmp_path / "r.csv")
    (tmp_path / "c.toml").write_text('[class]\nname = "RL 2027"\n')
    a = p.parse_args(["gradebook", str(tmp_path / "r.csv"), "--roster", str(roster), "--settings",
                      str(tmp_path / "c.toml")])
    assert gradebook_cli.run(a) == 0
    out = capsys.readouterr().out
    assert "# Gradebook: RL 2027" in out and "| Baker, Ben (ben) | 6 | not submitted | 6 |" in out
    assert f"warning: ana: {NB2} {WRITTEN2}: not marked (counted 0)" in out


def test_a_roster_saved_by_excel_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "r.csv"
    path.write_bytes(("\ufefffolder,name,email\r\nana,\"Alvarez, Ana\",ana@uni.edu\r\n").encode("utf-8"))
    assert [(s.key, s.name, s.email) for s in gb.load_roster(path)] == [("ana", "Alvarez, Ana", "ana@uni.edu")]


def test_the_documented_sequence_parses():
    """Every gradebook_cli command in the module's how-to is one the command line accepts (the how-to cannot drift)."""
    import argparse
    import shlex

    from minirl.classroom import gradebook_cli
    p = argparse.ArgumentParser()
    gradebook_cli.add_commands(p.add_subparsers(dest="command", required=True))
    text = gb.__doc__.replace("\\\n", " ")
    commands = [line.split("gradebook_cli", 1)[1] for line in text.splitlines()
                if line.strip().startswith("python -m minirl.classroom.gradebook_cli")]
    assert [shlex.split(c)[0] for c in commands] == ["intake", "intake", "marks-template", "gradebook", "feedback"]
    for c in commands:
        p.parse_args(shlex.split(c))


def test_a_mark_for_a_notebook_not_submitted_is_an_error(tmp_path, roster):
    p = write_marks(tmp_path / f"{NB2}.csv", [f"ben,{WRITTEN2},Full,4,"])
    marks = gb.load_marks([p], class_results(), gb.load_rubrics())
    with pytest.raises(gb.GradebookError, match=r"02_bcq.csv: row 2: student: ben did not submit 02_bcq, but the "
                                                 "answer is marked"):
        gb.build(class_results(), roster, marks)
