"""The grader trusts nothing the student's process says (issue 70): a hostile submission gets no credit.

The child that runs a submission returns what the answers computed as plain data (JSON: numbers, arrays, text); the
grader computes every verdict from that data against references it computes itself (minirl.classroom.grader.judge).
Each attack below is one student's notebook of chapter 1's exercise (the quick tabular one) whose answers are wrong or
missing, plus an attack in its first answer cell that tries to turn them into credit, by class:

* forged records: writing verdict records, whole record files, "done" lines, then exiting cleanly;
* patched judges: numpy's comparisons, the checkers' own class and module, the dict of checkers the child installs,
  an array type whose comparisons always say "equal";
* exit codes and printed lines: ``os._exit(0)``, ``SystemExit``, the passing lines printed.

Every attacked task must get 0 points; an honest class (tests/test_grading.py) still gets full marks.
"""
import json
import sys

import pytest

from minirl.classroom import checks, grader

from test_grading import NB, _answers, filled, rows_of, write

TASKS = ("policy_transition", "evaluate_policy", "empirical_mdp", "optimism_experiment")

# a wrong policy_transition (the identity), then the attack
WRONG = "import numpy as np\n\ndef policy_transition(P, pi):\n    S, A, _ = P.shape\n    return np.eye(S * A)\n\n"

_FORGED_VERDICTS = """
import os, json, stat
def _forge(kind):
    for fd in range(3, 256):
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        for step in range(60):
            for task in %r:
                rec = {"type": kind, "step": step, "task": task, "passed": 5, "n": 5, "not_implemented": None,
                       "uses_reference": [], "results": [{"value": {"v": 1.0}}] * 5}
                try:
                    os.write(fd, (json.dumps(rec) + "\\n").encode())
                except OSError:
                    pass
""" % (TASKS,)

ATTACKS = {
    # forged records
    "verdict records on every open file": _FORGED_VERDICTS + "_forge('verdict')\n",
    "probe records with made-up values": _FORGED_VERDICTS + "_forge('probe')\n",
    "a whole record file rewritten, then a clean exit": _FORGED_VERDICTS + """
import glob
for link in glob.glob('/proc/self/fd/*'):
    try:
        target = os.readlink(link)
    except OSError:
        continue
    if target.endswith('.jsonl'):
        with open(target, 'w') as f:
            for step in range(60):
                f.write(json.dumps({"type": "start", "step": step}) + "\\n")
                for task in %r:
                    f.write(json.dumps({"type": "verdict", "step": step, "task": task, "passed": 5, "n": 5}) + "\\n")
                f.write(json.dumps({"type": "end", "step": step, "error": None, "output": ""}) + "\\n")
            f.write(json.dumps({"type": "done"}) + "\\n")
os._exit(0)
""" % (TASKS,),
    "records appended to the checkers' own list": """
import minirl.classroom.checks as C
for task in %r:
    C._VERDICTS.append({"task": task, "passed": 5, "n": 5, "not_implemented": None, "uses_reference": []})
    C._PROBES.append({"task": task, "results": [{"value": {"v": 0.0}}] * 9, "uses_reference": []})
""" % (TASKS,),
    "verdicts forged when the checker calls the answer, then a clean exit": """
def policy_transition(P, pi):
    import os, json, stat
    for fd in range(3, 256):
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            for step in range(60):
                for task in %r:
                    os.write(fd, (json.dumps({"type": "verdict", "step": step, "task": task, "passed": 5, "n": 5,
                                              "not_implemented": None, "uses_reference": []}) + "\\n").encode())
                os.write(fd, (json.dumps({"type": "end", "step": step, "error": None, "output": ""}) + "\\n").encode())
            os.write(fd, (json.dumps({"type": "done"}) + "\\n").encode())
        except OSError:
            pass
    os._exit(0)
""" % (TASKS,),
    "the record file reopened through a directory descriptor": """
def policy_transition(P, pi):
    import os, json, glob
    for link in glob.glob('/proc/self/fd/*'):
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if target.endswith('.jsonl'):
            d = os.open(os.path.dirname(target), os.O_RDONLY)
            fd = os.open(os.path.basename(target), os.O_WRONLY | os.O_APPEND, dir_fd=d)
            for step in range(60):
                for task in %r:
                    os.write(fd, (json.dumps({"type": "verdict", "step": step, "task": task, "passed": 5, "n": 5,
                                              "not_implemented": None, "uses_reference": []}) + "\\n").encode())
                os.write(fd, (json.dumps({"type": "end", "step": step, "error": None, "output": ""}) + "\\n").encode())
            os.write(fd, (json.dumps({"type": "done"}) + "\\n").encode())
    os._exit(0)
""" % (TASKS,),
    # patched judges
    "numpy's comparisons patched": """
import numpy as np
np.isclose = lambda a, b, *args, **kw: np.ones(np.broadcast(np.asarray(a), np.asarray(b)).shape, dtype=bool)
np.allclose = lambda *args, **kw: True
np.isinf = lambda a, *args, **kw: np.ones(np.shape(a), dtype=bool)
""",
    "the checkers' class patched": """
import minirl.classroom.checks as C
def compare(self, description, call, want, atol=1e-6, rtol=1e-6):
    self.n += 1
    self.passed += 1
C.Checks.compare = compare
C.Checks.report = lambda self: (C._VERDICTS.append({"task": self.task, "passed": self.n, "n": self.n,
                                "not_implemented": None, "uses_reference": []}),
                                print(f"{self.task}: {self.n}/{self.n} checks passed"))
C.mismatch = lambda *args, **kw: None
C._MODE = "local"
""",
    "the dict of checkers the child installs patched": """
import gc
def _passing(task):
    def check(fn, *args, **kw):
        print(f"{task}: 5/5 checks passed")
    return check
for d in gc.get_objects():
    if isinstance(d, dict) and "check_policy_transition" in d and "check_evaluate_policy" in d:
        for task in %r:
            d["check_" + task] = _passing(task)
""" % (TASKS,),
    "an array whose comparisons always say equal": """
import numpy as np
class _Equal(np.ndarray):
    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        shape = np.broadcast(*[np.asarray(x.view(np.ndarray) if isinstance(x, _Equal) else x) for x in inputs
                               if not isinstance(x, (str, type(None)))]).shape
        return np.ones(shape, dtype=bool) if ufunc.__name__ in ("isclose", "less_equal", "equal", "isinf",
                                                                    "isnan", "logical_or", "logical_and") \\
            else np.zeros(shape)
def policy_transition(P, pi):
    S, A, _ = P.shape
    return np.zeros((S * A, S * A)).view(_Equal)
""",
    # exit codes and printed lines
    "a clean exit in the answer cell": "import os\nprint('policy_transition: 5/5 checks passed')\nos._exit(0)\n",
    "SystemExit(0) after printing every passing line": "".join(
        f"print('{t}: 5/5 checks passed')\n" for t in TASKS) + "raise SystemExit(0)\n",
}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    students = {}
    for k, (name, payload) in enumerate(ATTACKS.items()):
        student = f"s{k:02d}"
        students[name] = student
        # every other answer is the untouched stub: nothing right anywhere in the notebook
        nb = filled(NB, replace={t: None for t in TASKS[1:]} | {"policy_transition": WRONG + payload})
        write(folder, student, NB, nb)
    write(folder, "honest", NB, filled(NB))
    sentinel = tmp_path_factory.mktemp("grader") / "open-while-grading.txt"
    with open(sentinel, "w") as held:  # a file the grader has open: the attacks write to every descriptor they find
        results, _ = grader.grade_folder(folder, parallel=2, time_limit=60)
        held.flush()
    return students, results, sentinel.read_text()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_attack_gets_no_credit(attacked, attack):
    students, results, _ = attacked
    rows = rows_of(results, students[attack])
    assert set(TASKS) <= set(rows)
    earned = {t: (r.status, r.points) for t, r in rows.items() if r.level != "written"}
    assert all(not rows[t].passed and rows[t].points == 0 for t in TASKS), earned


def test_no_file_the_grader_has_open_is_written(attacked):
    assert attacked[2] == ""


def test_the_honest_student_next_to_them_gets_full_marks(attacked):
    _, results, _ = attacked
    rows = rows_of(results, "honest")
    assert all(rows[t].passed and rows[t].points == rows[t].points_possible > 0 for t in TASKS), \
        {t: r.status for t, r in rows.items()}


# ---------------------------------------------------------------------------------------------------------------
# The data format: loading it builds numbers, arrays and text only
# ---------------------------------------------------------------------------------------------------------------

def test_encode_and_decode_round_trip_plain_data_only():
    import numpy as np
    import torch
    for value in (1.5, 3, True, None, "above", np.arange(6.0).reshape(2, 3), torch.ones(2, 2), np.array([True, False]),
                  float("inf")):
        back = checks.decode(json.loads(json.dumps(checks.encode(value))))
        assert back == value if isinstance(value, (str, type(None))) else checks.mismatch(back, value) is None
    assert np.isnan(checks.decode(json.loads(json.dumps(checks.encode(float("nan"))))))
    back = checks.decode(json.loads(json.dumps(checks.encode([np.ones(2), {"a": np.zeros(3)}]))))
    assert checks.mismatch(back[0], np.ones(2)) is None and checks.mismatch(back[1]["a"], np.zeros(3)) is None
    assert isinstance(checks.decode(checks.encode(object())), checks.Unreadable)
    for bad in ({"a": [1, 2], "s": [3], "k": "f"}, {"a": "x", "s": [1], "k": "f"}, {"v": {"x": 1}}, {"z": 1}, [1],
                {"a": [1.0], "s": [1], "k": "O"}):
        with pytest.raises(ValueError):
            checks.decode(bad)


def test_a_judged_task_needs_the_values_not_the_verdict():
    """The judge replays the child's values: the right values pass, a forged 'passed' field or too few values do
    not."""
    checks._MODE = "probe"
    try:
        del checks._PROBES[:]
        from minirl.classroom.checks import check_policy_transition
        check_policy_transition(_solution("policy_transition"))
        right = checks._PROBES[-1]["results"]
    finally:
        checks._MODE = "local"
    verdict, _ = grader.judge_task("policy_transition", right)
    assert verdict["passed"] == verdict["n"] == 5
    verdict, out = grader.judge_task("policy_transition", right[:3])
    assert verdict["passed"] == 3 and verdict["n"] == 5 and "no value came back" in out
    forged = [{"value": {"v": 1.0}, "passed": True}] * 5
    verdict, _ = grader.judge_task("policy_transition", forged)
    assert verdict["passed"] == 0


# ---------------------------------------------------------------------------------------------------------------
# Known answers: constants read off the self-check fail the graded run (fresh inputs per student and task)
# ---------------------------------------------------------------------------------------------------------------

def _solution(task: str):
    """The reference notebook's answer to a task of chapter 1 (the student's code, not minirl's)."""
    import numpy as np

    from minirl import tabular as tab
    scope: dict = {"np": np, "tab": tab}  # what the notebook's setup cell imports
    for source in _answers(NB).values():
        exec(source, scope)  # noqa: S102 - the reference notebook's own answer cells
    return scope[task]


def _public_outputs(task: str, answer) -> list:
    """What ``answer`` returns at each check of ``task`` on the public inputs (as the self-check shows them)."""
    checks._MODE = "probe"
    try:
        del checks._PROBES[:]
        grader.checker_of(task)(answer)
        return [checks.decode(r["value"]).tolist() for r in checks._PROBES[-1]["results"]]
    finally:
        checks._MODE = "local"


def test_constants_read_off_the_self_check_pass_it_and_fail_the_graded_run(tmp_path):
    tables = {task: _public_outputs(task, _solution(task)) for task in ("policy_transition", "evaluate_policy")}
    constants = {task: f"import numpy as np\n_K = {json.dumps(values)}\n\ndef {task}(*args):\n"
                       f"    return np.array(_K.pop(0))\n" for task, values in tables.items()}
    path = write(tmp_path / "class", "kim", NB, filled(NB, replace=constants))
    rows, _ = grader.check_notebook(path)
    public = {r.task: r.status for r in rows}
    assert public["policy_transition"] == public["evaluate_policy"] == "passed", public
    results, _ = grader.grade_folder(tmp_path / "class", parallel=1)
    graded = {t: r.status for t, r in rows_of(results, "kim").items()}
    assert graded["policy_transition"] == graded["evaluate_policy"] == "failed", graded
    assert graded["empirical_mdp"] == "passed"  # the honest answers beside them: any inputs


def _public_constants() -> dict:
    """For each task that had no inputs to draw (two experiments without arguments, the verdicts on the results of
    record, the stitching thresholds on three fixed datasets): an answer returning the values the self-check prints."""
    import numpy as np

    from minirl import stitching as st
    from minirl import tabular as tab
    from minirl.classroom import comparison_checks as cc
    from minirl.classroom import stitching_checks as sc
    j = checks.optimism_experiment()
    taus = [st.closed_forms(st.gridworld(decoy_reward=r, gamma=0.9), a, b, n)["tau_c"] for a, b, n, r in
            sc.STITCH_CASES]
    d, lo, hi, v = (a.tolist() for a in cc.record_verdicts_reference())
    words = [{1.0: "above", -1.0: "below", 0.0: "overlap"}[x] for x in v]
    e = float(tab.expectile(np.array([0.0, 1.0, 5.0]), np.array([0.5, 0.3, 0.2]), 0.9))
    return {
        ("01_offline_rl", "optimism_experiment"): f"def optimism_experiment(*args, **kwargs):\n"
                                                  f"    return {j['J_hat']!r}, {j['J_true']!r}\n",
        ("04_iql", "expectile_experiment"): f"def expectile_experiment(*args, **kwargs):\n    return {e!r}\n",
        ("04b_stitching", "stitching_threshold"): f"_K = {taus!r}\n\ndef stitching_threshold(grid, data):\n"
                                                  f"    return _K.pop(0)\n",
        ("05_comparison", "record_verdicts"): f"def record_verdicts(runs, comparisons):\n"
                                              f"    return {d!r}, {lo!r}, {hi!r}, {words!r}\n",
    }


def test_constants_of_the_tasks_without_arguments_to_draw_pass_the_self_check_and_fail_the_graded_run(tmp_path):
    """The two experiments are called with drawn keyword arguments in the graded run (their defaults in the
    self-check), the verdicts on drawn comparisons of record, the thresholds on drawn datasets."""
    for (notebook, task), answer in _public_constants().items():
        path = write(tmp_path / "class", "lee", notebook, filled(notebook, replace={task: answer}))
        rows, _ = grader.check_notebook(path)
        assert {r.task: r.status for r in rows}[task] == "passed", (notebook, rows)
    results, _ = grader.grade_folder(tmp_path / "class", parallel=1, key="a key of the instructor")
    graded = {task: rows_of(results, "lee", notebook)[task].status for notebook, task in _public_constants()}
    assert set(graded.values()) == {"failed"}, graded  # all four passed it before


def test_the_draw_depends_on_the_key_the_student_and_the_task():
    d = grader.fresh_draw
    assert d("k", "ana", NB, "policy_transition") == d("k", "ana", NB, "policy_transition")
    assert len({d("k", "ana", NB, "policy_transition"), d("k2", "ana", NB, "policy_transition"),
                d("k", "ben", NB, "policy_transition"), d("k", "ana", NB, "evaluate_policy")}) == 4
    assert grader.grading_key("given") == "given" and grader.grading_key() != grader.grading_key()


# ---------------------------------------------------------------------------------------------------------------
# Delegation: the task's reference cannot run while its answer runs, even with the watch switched off
# ---------------------------------------------------------------------------------------------------------------

def _untraced(call):
    """An answer that switches the reference watch off, then delegates."""
    def answer(*args):
        import threading
        sys.settrace(None)
        threading.settrace(None)
        return call(*args)
    return answer


def _delegations():
    from minirl import iql, plots, stitching
    from minirl import tabular as tab
    from minirl.classroom import checks as C
    return {
        "policy_transition": _untraced(lambda P, pi: tab.policy_transition(P, pi)),
        "expectile_loss": _untraced(lambda diff, tau: iql.expectile_loss(diff, tau)),
        "iql_update": _untraced(lambda agent, batch: agent.update(batch)),
        "iqm": _untraced(lambda values: plots.iqm(values)),
        "one_step_policy": _untraced(lambda m, p, s: stitching.one_step_policy(m, p, s)),
        "optimism_experiment": _untraced(lambda: (lambda r: (r["J_hat"], r["J_true"]))(C.optimism_experiment())),
    }


@pytest.mark.parametrize("task", list(_delegations()))
def test_the_reference_cannot_run_even_with_the_watch_off(task, capsys):
    del checks._VERDICTS[:]
    grader.checker_of(task)(_delegations()[task])
    verdict = checks._VERDICTS[-1]
    out = capsys.readouterr().out
    assert verdict["uses_reference"] and verdict["passed"] < verdict["n"], out
    assert "is not available while this task is graded" in out


@pytest.mark.parametrize("task", ["policy_transition", "iql_update"])
def test_without_the_stub_the_untraced_delegation_would_pass(task, capsys, monkeypatch):
    """What the stub is for: with only the watch, switching it off hands the task to the reference."""
    monkeypatch.setattr(checks.Unavailable, "__enter__", lambda self: self)
    del checks._VERDICTS[:]
    grader.checker_of(task)(_delegations()[task])
    verdict = checks._VERDICTS[-1]
    assert verdict["passed"] == verdict["n"] > 0, capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------
# One process per task: the reference is disabled before any of the student's code runs, for good
# ---------------------------------------------------------------------------------------------------------------
# Each answer saves the reference's code (or finds it) at the top of its cell, before the check, then switches the
# watch off and runs that code as a new function. With one process for the notebook and the stub swapped in only
# while the answer was called, the first of these delegated and passed (the gap stop 68 left).
_UNTRACE = "import sys, threading, types\n"
SAVED_CODE = {
    "the code object kept at the top of the cell": _UNTRACE + """
import minirl.tabular as _tab
_saved = _tab.evaluate_policy_exact.__code__
def evaluate_policy(P, R, gamma, pi):
    sys.settrace(None); threading.settrace(None)
    m = _tab.FiniteMDP(P=P, R=R, gamma=gamma) if hasattr(_tab, "FiniteMDP") else types.SimpleNamespace(P=P, R=R, gamma=gamma)
    return types.FunctionType(_saved, vars(_tab))(m, pi)
""",
    "a code object found by walking the garbage collector": _UNTRACE + """
import gc
import minirl.tabular as _tab
_found = [o for o in gc.get_objects() if isinstance(o, types.FunctionType) and o.__name__ == "evaluate_policy_exact"]
_codes = [f.__code__ for f in _found] + [o for o in gc.get_objects() if isinstance(o, types.CodeType)
                                         and o.co_name == "evaluate_policy_exact"]
def evaluate_policy(P, R, gamma, pi):
    sys.settrace(None); threading.settrace(None)
    m = types.SimpleNamespace(P=P, R=R, gamma=gamma, S=P.shape[0], A=P.shape[1])
    for code in _codes:
        try:
            return types.FunctionType(code, vars(_tab))(m, pi)
        except Exception:
            pass
    raise RuntimeError("no working copy")
""",
    "the module re-made from its source": _UNTRACE + """
import importlib
import minirl.tabular as _tab
try:
    _fresh = importlib.reload(_tab)
except Exception:
    _fresh = _tab
def evaluate_policy(P, R, gamma, pi):
    sys.settrace(None); threading.settrace(None)
    return _fresh.evaluate_policy_exact(types.SimpleNamespace(P=P, R=R, gamma=gamma, S=P.shape[0], A=P.shape[1]), pi)
""",
}


@pytest.fixture(scope="module")
def delegated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    students = {}
    for k, (name, answer) in enumerate(SAVED_CODE.items()):
        students[name] = f"d{k:02d}"
        write(folder, students[name], NB, filled(NB, replace={"evaluate_policy": answer}))
    results, _ = grader.grade_folder(folder, parallel=2, time_limit=60)
    return students, results


@pytest.mark.parametrize("attack", list(SAVED_CODE))
def test_a_reference_kept_or_found_before_the_check_cannot_run(delegated, attack):
    students, results = delegated
    row = rows_of(results, students[attack])["evaluate_policy"]
    assert not row.passed and row.points == 0, (row.status, row.message)


def test_one_bug_costs_only_its_own_task(tmp_path):
    """A wrong policy_transition used by the student's own evaluate_policy: the later task is graded on the
    reference's policy_transition, so the bug costs policy_transition alone (issue 71: fair partial credit)."""
    answers = _answers(NB)
    assert "policy_transition(" in answers["evaluate_policy"]  # the later task does build on the earlier one
    write(tmp_path, "una", NB, filled(NB, replace={"policy_transition": WRONG}))
    results, _ = grader.grade_folder(tmp_path, parallel=1, time_limit=60)
    una = rows_of(results, "una")
    assert [una[t].status for t in TASKS] == ["failed", "passed", "passed", "passed"], \
        {t: (r.status, r.message) for t, r in una.items()}
    # the report shows both where they differ: the notebook as the student runs it fails evaluate_policy too
    assert "with your own earlier answers, as your notebook runs it: failed" in una["evaluate_policy"].message
    assert "with your own earlier answers" not in una["empirical_mdp"].message  # no difference, no note


STRAGGLER = """
import ctypes, os, time
_libc = ctypes.CDLL(None)
if _libc.fork() == 0:  # a process of its own, past the audit hook, left running when the task ends
    time.sleep(3)
    with open(os.path.join(os.getcwd(), "straggler.txt"), "w") as f:
        f.write("still here")
    os._exit(0)
"""
WAITS = """
import os, time
time.sleep(5)
_own = evaluate_policy
def evaluate_policy(*args):
    if os.path.exists("straggler.txt"):
        raise RuntimeError("a process an earlier task started is still running: " + open("straggler.txt").read())
    return _own(*args)
"""


def test_what_a_task_starts_ends_with_it(tmp_path):
    """A process the first task starts (by ctypes' fork, past the audit hook) would outlive it and could meddle with
    the tasks after it; as process 1 of its PID namespace, the task's process takes it along when it ends."""
    if grader.isolation() is not None:
        pytest.skip(f"no PID namespaces without user namespaces: {grader.isolation()}")
    answers = _answers(NB)
    write(tmp_path, "vic", NB, filled(NB, replace={"policy_transition": answers["policy_transition"] + STRAGGLER,
                                                    "evaluate_policy": answers["evaluate_policy"] + WAITS}))
    results, _ = grader.grade_folder(tmp_path, parallel=1, time_limit=60)
    vic = rows_of(results, "vic")
    assert vic["policy_transition"].status == "passed"
    assert vic["evaluate_policy"].status == "passed", vic["evaluate_policy"].message


def test_a_self_check_without_the_reference_notebooks_grades_every_task(tmp_path, monkeypatch):
    """A student's copy of a class release has checks.json but no solutions: the self-check died after the first task
    (each task's process waited for the reference's earlier answers, which it could not read: 'process died'). It now
    runs the notebook as the student does, and says so; with the solutions there, nothing changes."""
    path = write(tmp_path, "you", NB, filled(NB))
    monkeypatch.setattr(grader, "SOLUTIONS", tmp_path / "no-solutions")
    rows, _ = grader.check_notebook(path, time_limit=60)
    assert [r.status for r in rows if r.level != "written"] == ["passed"] * 6, [(r.task, r.status, r.message)
                                                                                for r in rows]
    assert grader.NO_REFERENCE_NOTE in rows[0].message
