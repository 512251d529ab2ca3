"""Classroom exercises: the checkers that exercise notebooks call, the student-copy generator and the grader.

A task in an exercise notebook is three cells: an explanation with the equation, a code cell where the student
writes a function (tagged ``solution`` in the reference notebook), and a checker cell::

    from minirl.exercises import check_expectile_loss
    check_expectile_loss(expectile_loss)

A checker compares the student's function with minirl's own implementation on fixed and random inputs (edge cases
included) and prints one fixed line per task, e.g. ``expectile_loss: 5/5 checks passed``.  A failed check prints
the input, the expected and the obtained values first, so that nbval's diff (``pytest --nbval``) shows the student
exactly what is wrong.  A function that still raises ``NotImplementedError`` prints ``not implemented yet``.

Solutions live in one place only, the reference notebooks ``notebooks/exercises/solutions/*.ipynb``.
``python -m minirl.exercises make-student`` writes the student copies ``notebooks/exercises/*.ipynb`` from them (each
``solution`` cell keeps its imports, signatures and docstrings, and every body becomes ``raise NotImplementedError``)
and the book page ``book/exercises.md``; ``make-student --check`` fails if a committed copy is out of date.
``python -m minirl.exercises grade DIR`` runs strict nbval over every submitted notebook in ``DIR/<student>/`` and
prints one row per student and task.
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EXERCISES = REPO / "notebooks" / "exercises"
SOLUTIONS = EXERCISES / "solutions"
BOOK_PAGE = REPO / "book" / "exercises.md"


# ---------------------------------------------------------------------------------------------------------------
# Comparing a student's answer with the reference
# ---------------------------------------------------------------------------------------------------------------

def _as_array(x):
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def _fmt(x) -> str:
    a = np.round(_as_array(x), 6) + 0.0  # + 0.0 turns -0 into 0
    return " ".join(np.array2string(a, precision=6, separator=", ", threshold=12, max_line_width=10_000).split())


def mismatch(got, want, atol: float = 1e-6, rtol: float = 1e-6) -> str | None:
    """``None`` if ``got`` matches ``want`` (same shape, close values), else a readable description."""
    try:
        g = _as_array(got)
    except (TypeError, ValueError) as e:
        return f"got a {type(got).__name__} that is not an array of numbers ({e})"
    w = _as_array(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, expected shape {w.shape}"
    same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
    bad = ~(np.isclose(g, w, atol=atol, rtol=rtol) | same_inf)
    if not bad.any():
        return None
    i = np.unravel_index(int(np.flatnonzero(bad)[0]), g.shape) if g.shape else ()
    where = f" at index {tuple(int(k) for k in i)}" if g.shape else ""
    return (f"{int(bad.sum())} of {bad.size} values differ{where}: got {float(g[i]):.6g}, expected {float(w[i]):.6g}"
            f"\n    got      {_fmt(g)}\n    expected {_fmt(w)}")


class Checks:
    """Run a task's checks, print failures with their inputs, then one summary line ``<task>: k/n checks passed``."""

    def __init__(self, task: str):
        self.task, self.n, self.passed, self.not_implemented = task, 0, 0, None

    def compare(self, description: str, call, want, atol: float = 1e-6, rtol: float = 1e-6) -> None:
        """Call ``call()`` (the student's function on one input) and compare with ``want``."""
        self.n += 1
        if self.not_implemented is not None:
            return
        try:
            got = call()
        except NotImplementedError as e:
            self.not_implemented = str(e) or "NotImplementedError"
            return
        except Exception as e:  # noqa: BLE001 - any error is reported to the student with its input
            print(f"check FAILED: {description}\n    raised {type(e).__name__}: {e}")
            return
        problem = mismatch(got, want, atol, rtol) if not callable(want) else want(got)
        if problem is None:
            self.passed += 1
        else:
            print(f"check FAILED: {description}\n    {problem}")

    def report(self) -> None:
        if self.not_implemented is not None:
            print(f"{self.task}: not implemented yet (NotImplementedError: {self.not_implemented})")
        else:
            print(f"{self.task}: {self.passed}/{self.n} checks passed")


# ---------------------------------------------------------------------------------------------------------------
# Chapter 1: finite MDPs, exact policy evaluation, the empirical MDP
# ---------------------------------------------------------------------------------------------------------------

def _random_policy(S: int, A: int, seed: int) -> np.ndarray:
    w = np.random.default_rng(seed).random((S, A)) + 0.05
    return w / w.sum(axis=1, keepdims=True)


def _two_state_mdp():
    """A hand-checkable MDP: action 0 stays, action 1 switches state; reward 1 for being in state 1."""
    P = np.zeros((2, 2, 2))
    P[0, 0, 0] = P[1, 0, 1] = 1.0
    P[0, 1, 1] = P[1, 1, 0] = 1.0
    R = np.array([[0.0, 0.0], [1.0, 1.0]])
    return P, R


def check_policy_transition(fn) -> None:
    """Task: ``policy_transition(P, pi)`` returns ``P^pi[(s,a),(s',a')] = P(s'|s,a) pi(a'|s')``, shape (SA, SA)."""
    from . import tabular as tab
    c = Checks("policy_transition")
    P, _ = _two_state_mdp()
    always_switch = np.array([[0.0, 1.0], [0.0, 1.0]])
    c.compare("two-state MDP, pi = always switch", lambda: fn(P, always_switch), tab.policy_transition(P, always_switch))
    c.compare("two-state MDP, uniform pi", lambda: fn(P, np.full((2, 2), 0.5)), tab.policy_transition(P, np.full((2, 2), 0.5)))
    one = np.ones((1, 1, 1))
    c.compare("one state, one action", lambda: fn(one, np.ones((1, 1))), np.ones((1, 1)))
    for seed, (S, A) in [(0, (4, 3)), (1, (6, 2))]:
        m = tab.random_mdp(S, A, seed=seed)
        pi = _random_policy(S, A, seed + 100)
        c.compare(f"random MDP S={S} A={A} seed={seed}, random pi", lambda: fn(m.P, pi), tab.policy_transition(m.P, pi))
    return c.report()


def check_evaluate_policy(fn) -> None:
    """Task: ``evaluate_policy(P, R, gamma, pi)`` returns ``Q^pi = (I - gamma P^pi)^-1 R`` as an (S, A) table."""
    from . import tabular as tab
    c = Checks("evaluate_policy")
    P, R = _two_state_mdp()
    stay = np.array([[1.0, 0.0], [1.0, 0.0]])
    # by hand: staying in state 1 earns 1 forever (10 at gamma 0.9); in state 0 nothing; switching from 0 reaches 1
    c.compare("two-state MDP, gamma=0.9, pi = always stay", lambda: fn(P, R, 0.9, stay),
              np.array([[0.0, 9.0], [10.0, 1.0]]))
    c.compare("two-state MDP, gamma=0 (Q = R)", lambda: fn(P, R, 0.0, stay), R)
    for seed, (S, A, gamma) in [(0, (4, 3, 0.9)), (1, (6, 2, 0.5)), (2, (5, 4, 0.99))]:
        m = tab.random_mdp(S, A, gamma=gamma, seed=seed)
        pi = _random_policy(S, A, seed + 100)
        c.compare(f"random MDP S={S} A={A} gamma={gamma} seed={seed}", lambda: fn(m.P, m.R, gamma, pi),
                  tab.evaluate_policy_exact(m, pi), atol=1e-5)
    return c.report()


def check_empirical_mdp(fn) -> None:
    """Task: ``empirical_mdp(s, a, r, s_next, S, A)`` returns ``(T_hat, r_hat, counts)``; unseen pairs loop with r 0."""
    from . import tabular as tab
    c = Checks("empirical_mdp")

    def reference(s, a, r, s_next, S, A):
        data = {"s": np.asarray(s), "a": np.asarray(a), "r": np.asarray(r, dtype=float),
                "s_next": np.asarray(s_next), "done": np.zeros(len(s), dtype=bool)}
        m, counts = tab.empirical_mdp(data, S, A, gamma=0.9)
        return m.P, m.R, counts

    def compare_all(description, args):
        want = reference(*args)
        for k, name in enumerate(("T_hat", "r_hat", "counts")):
            c.compare(f"{description}: {name}", lambda k=k: _pick(fn(*args), k, 3), want[k])

    compare_all("s=[0, 0, 1], a=[1, 1, 0], r=[1, 3, 2], s_next=[1, 0, 1], S=2, A=2 (pair (0,0) and (1,1) unseen)",
                ([0, 0, 1], [1, 1, 0], [1.0, 3.0, 2.0], [1, 0, 1], 2, 2))
    rng = np.random.default_rng(7)
    m = tab.random_mdp(5, 3, seed=3)
    d = tab.sample_dataset(m, _random_policy(5, 3, 4), 200, seed=int(rng.integers(1000)))
    compare_all("200 transitions of a random MDP S=5 A=3 seed=3", (d["s"], d["a"], d["r"], d["s_next"], 5, 3))
    return c.report()


def _pick(result, k: int, n: int):
    if not isinstance(result, (tuple, list)) or len(result) != n:
        raise ValueError(f"expected a tuple of {n} arrays, got {type(result).__name__}"
                         + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""))
    return result[k]


def optimism_experiment(unseen_reward: float = 1.0, n_transitions: int = 300, seed: int = 0) -> dict:
    """The reference answer of chapter 1's experiment: plan in the empirical MDP of a small dataset whose unseen pairs
    pay ``unseen_reward`` forever, then run the greedy policy in the true MDP.  Returns the value the empirical MDP
    promises (``J_hat``), the true return (``J_true``) and the behaviour policy's true return (``J_beta``)."""
    from . import tabular as tab
    mdp = tab.random_mdp(8, 4, gamma=0.9, seed=seed, branching=3)
    pi_beta = np.zeros((8, 4))
    pi_beta[:, 0], pi_beta[:, 1] = 0.7, 0.3  # the behaviour policy never takes actions 2 and 3
    data = tab.sample_dataset(mdp, pi_beta, n_transitions, seed=seed)
    mdp_hat, _ = tab.empirical_mdp(data, 8, 4, gamma=0.9, init=mdp.init, unseen_reward=unseen_reward)
    pi = tab.greedy_policy(tab.value_iteration(mdp_hat))
    return {"J_hat": tab.policy_return(mdp_hat, pi), "J_true": tab.policy_return(mdp, pi),
            "J_beta": tab.policy_return(mdp, pi_beta)}


def check_optimism_experiment(fn) -> None:
    """Task: ``fn()`` returns the pair ``(J_hat, J_true)`` of the optimism experiment (:func:`optimism_experiment`)."""
    want = optimism_experiment()
    c = Checks("optimism_experiment")
    c.compare("J_hat: the return the empirical MDP promises", lambda: _pick(fn(), 0, 2), want["J_hat"], atol=1e-4)
    c.compare("J_true: the greedy policy's return in the true MDP", lambda: _pick(fn(), 1, 2), want["J_true"],
              atol=1e-4)
    return c.report()


# ---------------------------------------------------------------------------------------------------------------
# Student copies: generated from the reference notebooks
# ---------------------------------------------------------------------------------------------------------------

STUB_MESSAGE = "your code here: replace this line"


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


def student_notebook(nb: dict) -> dict:
    """The student copy of a reference notebook (as a JSON dict): ``solution`` cells stubbed, their outputs dropped,
    every other cell (and the checkers' stored outputs, which nbval compares against) kept."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "code" and "solution" in tags:
            cell["source"] = stub_source("".join(cell["source"])).splitlines(keepends=True)
            cell["metadata"]["tags"] = [t for t in tags if t != "solution"] + ["student"]
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def book_page(notebooks: list[Path]) -> str:
    """``book/exercises.md``: every task as an ``exercise`` with its solution behind a dropdown."""
    parts = ["# Exercises\n",
             "Generated by `python -m minirl.exercises make-student` from the reference notebooks in "
             "`notebooks/exercises/solutions/`; do not edit by hand. Each task is a function to write in the "
             "student notebook `notebooks/exercises/<name>.ipynb`; its checker cell prints one line per task. "
             "How to hand the notebooks out and grade them: {doc}`instructors`.\n"]
    for path in notebooks:
        nb = json.loads(path.read_text())
        cells = nb["cells"]
        title = "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").strip()
        parts.append(f"## {title}\n\nNotebook: `notebooks/exercises/{path.name}`.\n")
        explanation = ""
        for cell in cells[1:]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                explanation = src
            elif "solution" in cell.get("metadata", {}).get("tags", []):
                func = next((n.name for n in ast.parse(src).body if isinstance(n, ast.FunctionDef)),
                            f"answer-{len(parts)}")
                label = f"ex-{path.stem.replace('_', '-')}-{func.replace('_', '-')}"
                heading, _, body = explanation.partition("\n")
                parts.append(f"````{{exercise}} {heading.lstrip('# ').strip()}\n:label: {label}\n\n{body.strip()}\n"
                             f"\n```python\n{stub_source(src).rstrip()}\n```\n````\n\n"
                             f"````{{solution}} {label}\n:class: dropdown\n\n```python\n{src.rstrip()}\n```\n````\n")
    return "\n".join(parts)


def make_student(check: bool = False) -> list[str]:
    """Write (or with ``check``, compare) the student copies and the book page; returns the stale files."""
    stale = []
    solutions = sorted(SOLUTIONS.glob("*.ipynb"))
    if not solutions:
        raise FileNotFoundError(f"no reference notebooks in {SOLUTIONS}")
    targets = {EXERCISES / p.name: json.dumps(student_notebook(json.loads(p.read_text())), indent=1,
                                              ensure_ascii=False) + "\n" for p in solutions}
    targets[BOOK_PAGE] = book_page(solutions)
    for path, text in targets.items():
        if not path.exists() or path.read_text() != text:
            stale.append(str(path.relative_to(REPO)))
            if not check:
                path.write_text(text)
    return stale


# ---------------------------------------------------------------------------------------------------------------
# Grading a folder of submissions
# ---------------------------------------------------------------------------------------------------------------

def checker_task(source: str) -> str | None:
    """The task a checker cell checks (``check_expectile_loss(expectile_loss)`` -> ``"expectile_loss"``), or ``None``
    if the cell is not a checker cell (a cell made only of ``check_*(...)`` calls)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    names = [n.value.func.id for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
             and isinstance(n.value.func, ast.Name) and n.value.func.id.startswith("check_")]
    return names[0][len("check_"):] if body and len(names) == len(body) else None


def grade_notebook(path: Path) -> list[dict]:
    """Run strict nbval over one notebook; one row per checker cell: ``task``, ``passed`` and a short ``message``."""
    path = Path(path).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "report.xml"
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        subprocess.run([sys.executable, "-m", "pytest", "--nbval", "-q", "-p", "no:cacheprovider",
                        "--rootdir", str(path.parent), "-c", os.devnull, f"--junitxml={xml}", str(path)],
                       capture_output=True, text=True, env=env, cwd=path.parent)
        if not xml.exists():
            return [{"task": "(notebook)", "passed": False, "message": "pytest did not run"}]
        nb = json.loads(path.read_text())
        code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
        rows = []
        for case in ET.parse(xml).getroot().iter("testcase"):
            # nbval names items "Cell <k>" with k the index among the notebook's code cells
            try:
                k = int(case.get("name", "").split()[-1])
            except ValueError:
                continue
            task = checker_task("".join(code_cells[k]["source"])) if k < len(code_cells) else None
            if task is None:
                continue
            failure = case.find("failure")
            if failure is None:
                failure = case.find("error")
            message = ""
            if failure is not None:
                text = (failure.get("message") or "") + "\n" + (failure.text or "")
                message = "not implemented" if "not implemented yet" in text else "wrong output"
            rows.append({"task": task, "passed": failure is None, "message": message})
        return rows


def grade(folder: Path) -> str:
    """Grade ``folder/<student>/*.ipynb``; returns a markdown table with one row per student and notebook."""
    students = sorted(p for p in Path(folder).iterdir() if p.is_dir())
    if not students:
        raise ValueError(f"no student folders in {folder}: expected {folder}/<student>/<exercise>.ipynb")
    lines = ["| student | notebook | passed | tasks |", "| --- | --- | ---: | --- |"]
    for student in students:
        for nb in sorted(student.glob("*.ipynb")):
            rows = grade_notebook(nb)
            passed = sum(r["passed"] for r in rows)
            detail = ", ".join(f"{r['task']} {'ok' if r['passed'] else r['message']}" for r in rows)
            lines.append(f"| {student.name} | {nb.name} | {passed}/{len(rows)} | {detail} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m minirl.exercises", description="exercise notebooks: student copies "
                                "from the reference notebooks, and grading")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make-student", help="write notebooks/exercises/*.ipynb and book/exercises.md")
    m.add_argument("--check", action="store_true", help="only check they are up to date (exit 1 if not)")
    g = sub.add_parser("grade", help="grade a folder of submissions: DIR/<student>/<exercise>.ipynb")
    g.add_argument("folder", type=Path)
    a = p.parse_args(argv)
    if a.command == "make-student":
        stale = make_student(check=a.check)
        verb = "out of date" if a.check else "written"
        print("\n".join(f"{verb}: {s}" for s in stale) or "all student copies are up to date")
        return 1 if (a.check and stale) else 0
    print(grade(a.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
